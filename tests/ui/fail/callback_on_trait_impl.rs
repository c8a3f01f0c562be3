use burn_stoker::prelude::*;

#[derive(Default)]
struct Report;

#[callback]
impl Clone for Report {
    fn clone(&self) -> Self {
        Report
    }
}

fn main() {}
