use burn_stoker::prelude::*;

#[derive(Default)]
struct Report {
    steps: u64,
}

#[callback]
impl Report {
    #[on(every_k_steps = 2, trigger)]
    fn count(&mut self) {
        self.steps += 1;
    }
}

fn main() {}
