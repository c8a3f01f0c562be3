//! The ranks of a threads world take turns at burn's process-wide state.
//!
//! burn's random generators are one per process (per backend, not per device or thread), and so
//! is its autodiff graph's bookkeeping. Ranks that run on threads of one process would draw from
//! one generator in the order their threads reach it, and their forward and backward passes
//! would meet in that bookkeeping: a model with dropout ended with other weights from run to run
//! even with every draw seeded per rank and step. So in a seeded threads world, each rank holds
//! the turn whenever it is not waiting for the others: it takes it when it starts training,
//! lets it go for the length of each exchange (where it waits for the other ranks), and takes it
//! back after. The ranks' work alternates; what each computes, and what the exchanges carry,
//! no longer depends on how their threads are scheduled.

use std::cell::RefCell;
use std::marker::PhantomData;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The one turn of this process.
static TURN: Mutex<()> = Mutex::new(());

thread_local! {
    /// The turn, while this thread holds it.
    static HELD: RefCell<Option<MutexGuard<'static, ()>>> = const { RefCell::new(None) };
}

/// This thread's rank holds the turn, except inside an exchange ([`away`]), until this is
/// dropped (on the same thread).
pub(crate) struct Turns {
    /// A guard of a thread-local: it stays on its thread.
    _thread: PhantomData<*const ()>,
}

/// Take the turn for this thread's rank, waiting for the rank that holds it to reach an
/// exchange.
pub(crate) fn take() -> Turns {
    let turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    HELD.with(|held| *held.borrow_mut() = Some(turn));
    Turns { _thread: PhantomData }
}

impl Drop for Turns {
    fn drop(&mut self) {
        let turn = HELD.with(|held| held.borrow_mut().take());
        drop(turn);
    }
}

/// While this thread waits for the other ranks: the turn let go, if this thread held it, and
/// taken back when this is dropped.
pub(crate) struct Away {
    held: bool,
    _thread: PhantomData<*const ()>,
}

/// Let the turn go for the length of an exchange (see [`Away`]).
pub(crate) fn away() -> Away {
    let turn = HELD.with(|held| held.borrow_mut().take());
    Away { held: turn.is_some(), _thread: PhantomData }
}

impl Drop for Away {
    fn drop(&mut self) {
        if self.held {
            let turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
            HELD.with(|held| *held.borrow_mut() = Some(turn));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_away_lets_another_take_the_turn_and_takes_it_back() {
        let turns = take();
        let other = std::thread::spawn(|| {
            let _turns = take();
            HELD.with(|held| held.borrow().is_some())
        });
        {
            let _away = away();
            assert!(other.join().unwrap(), "the other thread took the turn while this one was away");
        }
        assert!(HELD.with(|held| held.borrow().is_some()), "the turn is back");
        assert!(TURN.try_lock().is_err(), "and held");
        drop(turns);
        assert!(TURN.try_lock().is_ok(), "dropped, it is free");
    }
}
