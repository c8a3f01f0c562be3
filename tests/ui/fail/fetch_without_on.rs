use burn_stoker::prelude::*;

#[derive(Default)]
struct Report {
    steps: u64,
}

#[callback]
impl Report {
    #[on(trigger_step)]
    fn count(&mut self) {
        self.steps += 1;
    }

    #[fetch("cost")]
    fn cost(&mut self, cost: f32) {
        let _ = cost;
    }
}

fn main() {}
