use burn_stoker::prelude::*;

#[derive(Default)]
struct Report {
    steps: u64,
}

#[callback]
impl Report {
    #[on(trigger)]
    fn report(self) {
        let _ = self.steps;
    }
}

fn main() {}
