use burn_stoker::prelude::*;

#[derive(Default)]
struct Report {
    steps: u64,
}

#[callback]
impl Report {
    #[on(trigger)]
    #[fetch("cost")]
    fn cost(&mut self, cost: f32) {
        let _ = cost;
    }
}

fn main() {}
