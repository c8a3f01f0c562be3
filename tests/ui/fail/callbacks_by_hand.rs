// `Callbacks` is sealed: a set of callbacks is a callback, a tuple, a `Vec`, an `Option` or a
// `#[derive(Callbacks)]` struct, never written by hand.
use burn_stoker::callback::{CallbackInfo, Callbacks, Context, Counters, Event, StateOp};

struct Mine;

impl<M> Callbacks<M, ()> for Mine {
    fn len(&self) -> usize {
        0
    }
    fn info(&self, _index: usize) -> CallbackInfo<'_> {
        unreachable!()
    }
    fn wants_fetch(&self, _index: usize, _counters: &Counters) -> bool {
        false
    }
    fn dispatch(&mut self, _index: usize, _event: Event<'_>, _ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
        Ok(())
    }
    fn state(&mut self, _index: usize, _op: StateOp) -> burn_stoker::Result<Option<serde_json::Value>> {
        Ok(None)
    }
}

fn main() {}
