//! The frameworks' own names for what the core names otherwise, one module per framework, each
//! item documented with its origin.
//!
//! The core speaks one vocabulary: one list of events, one [`Direction`](crate::state::Direction),
//! one way of counting steps and epochs. A name a framework uses for an item the core has under
//! another name is a rustdoc alias on that item (search the docs for `neon_epoch`,
//! `ReduceLROnPlateau`, `after_loss`, `ModelCheckpoint`), and each `coming-from-*` page of the
//! guide maps the framework's names onto stoker's. What only a port of a framework's program
//! needs, a behaviour no core item has, lives here, under the framework's name.

pub mod neon;
