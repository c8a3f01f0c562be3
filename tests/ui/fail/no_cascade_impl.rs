use burn_stoker::prelude::*;

fn assert_set<M, K, C: Callbacks<M, K>>(_: &C) {}

#[derive(Default)]
struct Counter(u64);

#[callback]
impl Counter {
    #[on(trigger_step, every_k_steps = 0)]
    fn count(&mut self) {
        self.0 += 1;
    }
}

fn main() {
    let mut counter = Counter::default();
    counter.count();
    assert_set::<(), _, _>(&counter);
}
