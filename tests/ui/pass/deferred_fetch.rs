use burn::module::Module;
use burn_stoker::prelude::*;

// Deferred fetches: a function, an impl's hook with a period, mixed with a synchronous hook.
#[callback(on = after_step, every_k_steps = 10)]
#[fetch("cost", "accuracy", deferred)]
fn watch(cost: f32, accuracy: f64, ctx: &mut Context<'_, impl Module>) {
    let _ = (cost, accuracy, ctx.global_step());
}

#[derive(Default)]
struct Both {
    deferred: Vec<f32>,
    now: Vec<f32>,
}

#[callback]
impl Both {
    #[on(after_step, every_k_steps = 2)]
    #[fetch("cost", deferred)]
    fn later(&mut self, cost: f32) {
        self.deferred.push(cost);
    }

    #[on(after_step)]
    #[fetch("cost")]
    fn now(&mut self, cost: f32) {
        self.now.push(cost);
    }
}

fn assert_set<M, K, C: Callbacks<M, K>>(_: &C) {}

pub fn main() {
    assert_set::<burn::nn::Linear, _, _>(&(Watch, Both::default()));
    let both = Both::default();
    assert_eq!(Callback::<()>::fetches(&both), &[Fetch::deferred("cost"), Fetch::host("cost")]);
    assert_eq!(
        Callback::<burn::nn::Linear>::fetches(&Watch),
        &[Fetch::deferred("cost"), Fetch::deferred("accuracy")]
    );
}
