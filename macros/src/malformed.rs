//! The macros never panic, whatever they are given (filled in by the malformed-input test).
