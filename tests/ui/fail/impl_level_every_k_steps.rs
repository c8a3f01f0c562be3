use burn_stoker::prelude::*;

#[derive(Default)]
struct Report {
    steps: u64,
}

#[callback(every_k_steps = 10)]
impl Report {
    #[on(trigger_step)]
    fn count(&mut self) {
        self.steps += 1;
    }
}

fn main() {}
