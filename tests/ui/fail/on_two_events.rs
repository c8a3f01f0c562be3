use burn_stoker::prelude::*;

#[derive(Default)]
struct Report {
    steps: u64,
}

#[callback]
impl Report {
    #[on(trigger_step, trigger_epoch)]
    fn count(&mut self) {
        self.steps += 1;
    }
}

fn main() {}
