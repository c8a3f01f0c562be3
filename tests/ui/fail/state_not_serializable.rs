use burn_stoker::prelude::*;

#[derive(Default)]
struct Report {
    steps: u64,
}

#[callback(state)]
impl Report {
    #[on(trigger_step)]
    fn count(&mut self) {
        self.steps += 1;
    }
}

fn main() {}
