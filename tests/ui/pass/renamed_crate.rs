// The runtime under another name, as `[dependencies] renamed = { package = "burn-stoker" }` gives
// it: `crate = "..."` tells the generated code where to find it.
extern crate burn_stoker as renamed;

use renamed::prelude::*;

#[callback(on = trigger, crate = "renamed")]
fn report<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[callback(on = after_step, every_k_steps = 2, crate = "::renamed")]
#[fetch("cost")]
#[order(after = Report)]
fn watch(cost: f32) {
    let _ = cost;
}

#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Count(u64);

#[callback(state, crate = "renamed")]
#[order(before = Report)]
impl Count {
    #[on(trigger_step)]
    fn count(&mut self) {
        self.0 += 1;
    }
}

#[derive(Callbacks)]
#[callbacks(crate = "renamed")]
struct Training {
    report: Report,
    #[every_k_epochs(2)]
    #[order(after = Report)]
    watch: Watch,
    count: Count,
}

fn assert_set<M, K, C: renamed::callback::Callbacks<M, K>>(_: &C) {}

pub fn main() {
    assert_set::<(), _, _>(&Training { report: Report, watch: Watch, count: Count::default() });
    let order = renamed::callback::Callback::<()>::order(&Watch);
    assert_eq!(order, Order::none().after("Report"));
}
