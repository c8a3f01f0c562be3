use burn::module::Module;
use burn_stoker::prelude::*;

#[derive(Default, serde::Serialize, serde::Deserialize)]
struct BestCost {
    best: Option<f32>,
    triggers: u64,
}

#[callback(state)]
#[order(after = ModelSaver, before = [ProgressBar, InferenceRunner])]
impl BestCost {
    #[on(after_step, every_k_steps = 10)]
    #[fetch("cost")]
    fn track(&mut self, cost: f32) {
        if self.best.is_none_or(|best| cost < best) {
            self.best = Some(cost);
        }
    }

    #[on(trigger, every_k_epochs = 2, before_train = true)]
    fn report(&mut self, ctx: &mut Context<'_, impl Module>) -> burn_stoker::Result<()> {
        self.triggers += 1;
        if let Some(best) = self.best {
            ctx.monitors().put_scalar("best_cost", f64::from(best));
        }
        Ok(())
    }

    #[on(trigger_step)]
    fn stop(&self, ctx: &mut Context<'_, impl Module>) -> Flow {
        if ctx.global_step() > 1_000_000 { Flow::Stop("enough".into()) } else { Flow::Continue }
    }

    /// A plain method stays a plain method.
    fn best(&self) -> Option<f32> {
        self.best
    }
}

/// A stateless impl form, named and not chief-only.
#[derive(Default)]
struct Everywhere;

#[callback(name = "EverywhereCallback", chief_only = false)]
impl Everywhere {
    #[on(setup)]
    fn setup<M>(&mut self, ctx: &mut Context<'_, M>) {
        let _ = ctx.log_dir();
    }

    #[on(after_train)]
    fn done(&mut self) {}
}

/// A generic struct.
struct Tagged<T> {
    tag: T,
}

#[callback]
#[order(after = BestCost)]
impl<T: std::fmt::Display> Tagged<T> {
    #[on(trigger)]
    fn report<M>(&mut self, ctx: &mut Context<'_, M>) {
        ctx.monitors().put_text("tag", &self.tag.to_string());
    }
}

/// An impl whose hook names a concrete model.
struct LinearOnly;

#[callback]
impl LinearOnly {
    #[on(trigger, enable_if = warm)]
    fn report(&mut self, ctx: &mut Context<'_, burn::nn::Linear>) {
        let _ = &ctx.model().weight;
    }
}

fn warm(counters: &Counters) -> bool {
    counters.epoch_num() > 1
}

fn assert_set<M, K, C: Callbacks<M, K>>(_: &C) {}

pub fn main() {
    let best = BestCost::default();
    let _ = best.best();
    assert_set::<burn::nn::Linear, _, _>(&(best, Everywhere, Tagged { tag: "x" }, LinearOnly));
    assert_set::<(), _, _>(&Tagged { tag: 3 });
}
