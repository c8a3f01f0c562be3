use burn_stoker::prelude::*;

macro_rules! counter {
    ($name:ident, $event:ident, $k:literal) => {
        #[callback(on = $event, every_k_steps = $k)]
        fn $name<M>(ctx: &mut Context<'_, M>) {
            let _ = ctx.global_step();
        }
    };
}

counter!(every_ten, trigger_step, 10);
counter!(every_twenty, after_step, 20);

macro_rules! fetching {
    ($name:ident, $value:literal, $ty:ty) => {
        #[callback(on = after_step)]
        #[fetch($value)]
        fn $name(value: $ty) {
            let _ = value;
        }
    };
}

fetching!(watch_cost, "cost", f32);
fetching!(watch_logits, "logits", Vec<f32>);

fn assert_set<M, K, C: Callbacks<M, K>>(_: &C) {}

pub fn main() {
    assert_set::<(), _, _>(&(EveryTen, EveryTwenty, WatchCost, WatchLogits));
}
