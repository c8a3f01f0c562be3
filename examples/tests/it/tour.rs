//! The README's DSL tour, compiled and run on the digits: what the README shows works.

use burn::module::Module;
use burn_stoker::prelude::*;
use stoker_examples::{DigitBatch, Mlp, digit_outputs, load_digits, loader};
use stoker_tests::scratch_dir;

#[callback(on = trigger, every_k_epochs = 2)]
fn dump_weights(ctx: &mut Context<'_, Mlp>) -> burn_stoker::Result<()> {
    ctx.model()
        .clone()
        .save_file(ctx.log_dir().join(format!("weights-{}.bpk", ctx.epoch_num())))
        .map_err(burn_stoker::Error::other)
}

#[callback(on = after_step, every_k_steps = 100)]
#[fetch("cost", "accuracy")]
fn watch(cost: f32, accuracy: f32, ctx: &mut Context<'_, impl Module>) -> Flow {
    assert!((0.0..=1.0).contains(&accuracy));
    if cost.is_finite() {
        Flow::Continue
    } else {
        Flow::Stop(format!("cost {cost} at step {}", ctx.global_step()))
    }
}

#[derive(Default, serde::Serialize, serde::Deserialize)]
struct BestCost {
    best: Option<f32>,
}

#[callback(state)]
#[order(after = InferenceRunner)]
impl BestCost {
    #[on(after_step)]
    #[fetch("cost")]
    fn track(&mut self, cost: f32) {
        self.best = Some(self.best.map_or(cost, |b| b.min(cost)));
    }

    #[on(trigger)]
    fn report(&mut self, ctx: &mut Context<'_, impl Module>) {
        if let Some(best) = self.best {
            ctx.monitors().put_scalar("best_cost", best as f64);
        }
    }
}

#[derive(Callbacks)]
struct Extras {
    best: BestCost,
    #[every_k_epochs(5)]
    dump: DumpWeights,
    watch: Watch,
}

#[test]
fn the_readme_tour_trains() {
    let dir = scratch_dir("tour");
    let device = burn_stoker::device::cpu();
    let split = load_digits(7, 0.2);
    let train = loader(split.train, 64, Some(7), &device);
    let valid = loader(split.valid, 256, None, &device);
    let extras = Extras { best: BestCost::default(), dump: DumpWeights, watch: Watch };
    let report = Trainer::new(Mlp::new(64, &device), burn::optim::AdamConfig::new().init(), train)
        .max_epoch(10)
        .log_dir(&dir)
        .learning_rate(3e-3)
        .default_callbacks(DefaultCallbacks { printer: None, ..DefaultCallbacks::default() })
        .callbacks((
            InferenceRunner::new(valid, |model: &Mlp, batch: DigitBatch, out: &mut Outputs| {
                digit_outputs(model, batch, out);
            })
            .with(ClassificationError::new("wrong", "validation_error")),
            extras,
        ))
        .train(|model: &Mlp, batch: DigitBatch, step: &mut Step<'_>| {
            digit_outputs(model, batch, step.outputs())
        })
        .expect("training succeeds");
    assert_eq!(report.counters.epoch_num(), 10);
    // DumpWeights triggers every 2 epochs, gated to every 5th epoch by the field: epoch 10 only
    // (PeriodicCallback also delivers the last epoch).
    let dumps: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("weights-"))
        .collect();
    assert_eq!(dumps, vec!["weights-10.bpk"]);
    let stats: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("stats.json")).unwrap()).unwrap();
    let best: Vec<f64> = stats.iter().map(|e| e["best_cost"].as_f64().unwrap()).collect();
    assert_eq!(best.len(), 10);
    assert!(best.windows(2).all(|w| w[1] <= w[0]), "the best cost never rises: {best:?}");
}
