//! What `compare` relies on to compare loops fairly: every case starts from the same model.

use burn::tensor::{Distribution, Tensor};
use stoker_bench::{Classifier, ConvNet, batches, fresh};
use stoker_examples::Mlp;

/// The device's random generator is global: tests that seed it and draw from it take turns.
static GENERATOR: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// This test's turn with the generator.
fn turn() -> std::sync::MutexGuard<'static, ()> {
    GENERATOR.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// [`fresh`], not interleaved with another test's draws.
fn fresh_alone<M: Classifier>(device: &burn::tensor::Device) -> M {
    let _turn = turn();
    fresh::<M>(device)
}

/// The logits of a fresh model on the first training batch.
fn fresh_logits<M: Classifier>(device: &burn::tensor::Device) -> Vec<f32> {
    let images = batches(device)[0].images.clone();
    fresh_alone::<M>(device).logits(images).into_data().try_to_vec::<f32>().expect("f32 logits")
}

#[test]
fn fresh_models_are_the_same_model() {
    let device = burn_stoker::device::cpu();
    let mlp = fresh_logits::<Mlp>(&device);
    assert_eq!(mlp.len(), 64 * 10);
    // Drawing other random numbers in between does not change the next fresh model.
    {
        let _turn = turn();
        let _ = Tensor::<1>::random([1000], Distribution::Default, &device).into_data();
    }
    assert_eq!(mlp, fresh_logits::<Mlp>(&device), "two fresh MLPs differ");
    let conv = fresh_logits::<ConvNet>(&device);
    assert_eq!(conv, fresh_logits::<ConvNet>(&device), "two fresh ConvNets differ");
    // Not a constant: another seed gives another model.
    let other: Vec<f32> = {
        let _turn = turn();
        device.seed(stoker_bench::SEED + 1);
        // The parameters are drawn at the first forward pass: within this turn.
        Mlp::init(&device).logits(batches(&device)[0].images.clone()).into_data().try_to_vec::<f32>().unwrap()
    };
    assert_ne!(mlp, other, "another seed gives another model");
}

/// Steps of the arithmetic comparison.
const STEPS: u64 = 60;

/// The hand loop's model after `STEPS` steps.
fn hand_trained(data: &[stoker_examples::DigitBatch], device: &burn::tensor::Device) -> Mlp {
    let mut model = fresh_alone::<Mlp>(device);
    let mut optimizer = burn::optim::AdamConfig::new().init();
    let mut outputs = burn_stoker::fetch::Outputs::new();
    for i in 0..STEPS {
        model = stoker_bench::hand_step(
            model,
            &mut optimizer,
            data[i as usize % data.len()].clone(),
            &mut outputs,
        );
    }
    model
}

#[test]
fn the_trainer_does_the_hand_loops_arithmetic() {
    use burn_stoker::prelude::*;
    let device = burn_stoker::device::cpu();
    let data = batches(&device);
    let dir = std::env::temp_dir().join(format!("stoker-setup-{}", std::process::id()));
    let report =
        Trainer::new(fresh_alone::<Mlp>(&device), burn::optim::AdamConfig::new().init(), data.clone())
            .max_epoch(1)
            .steps_per_epoch(STEPS)
            .log_dir(&dir)
            .handle_signals(false)
            .callbacks(stoker_bench::generated::Users20::default())
            .train(|model: &Mlp, batch, s: &mut Step<'_>| stoker_bench::step(model, batch, s.outputs()))
            .expect("training succeeds");
    let _ = std::fs::remove_dir_all(&dir);
    let by_hand = parameter_bits(&hand_trained(&data, &device));
    let trained = parameter_bits(&report.model);
    let names: Vec<&str> = by_hand.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["hidden.weight", "hidden.bias", "output.weight", "output.bias"]);
    assert_ne!(by_hand, parameter_bits(&fresh_alone::<Mlp>(&device)), "the model trained");
    // Same batches, same order, same learning rate, same optimizer: the same weights, every
    // parameter bit for bit (signed zeros and NaN payloads included), so that the benchmark's
    // cases do the same arithmetic (subnormals included).
    assert_eq!(by_hand.len(), trained.len());
    for (hand, stoker) in by_hand.iter().zip(&trained) {
        assert_eq!(hand.name, stoker.name);
        assert_eq!(hand.shape, stoker.shape, "`{}`", hand.name);
        let differ = hand.bits.iter().zip(&stoker.bits).filter(|(a, b)| a != b).count();
        assert_eq!(
            differ,
            0,
            "stoker's trainer and the hand loop trained different weights: {differ} of the {} values of `{}` differ",
            hand.bits.len(),
            hand.name
        );
    }
}

/// One float parameter of a model: its path, its shape and the bits of its values.
#[derive(Debug, PartialEq)]
struct ParameterBits {
    name: String,
    shape: Vec<usize>,
    bits: Vec<u32>,
}

/// Every float parameter of `model`, in visiting order.
fn parameter_bits<M: burn::module::Module>(model: &M) -> Vec<ParameterBits> {
    /// The parameters so far, and the path of the module being visited.
    struct Collect(Vec<ParameterBits>, Vec<String>);
    impl burn::module::ModuleVisitor for Collect {
        fn enter_module(&mut self, name: &str, _container_type: &str) {
            self.1.push(name.to_string());
        }
        fn exit_module(&mut self, _name: &str, _container_type: &str) {
            self.1.pop();
        }
        fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<D>>) {
            let data = param.val().into_data();
            self.0.push(ParameterBits {
                name: self.1.join("."),
                shape: data.shape().to_vec(),
                bits: data.iter::<f32>().map(f32::to_bits).collect(),
            });
        }
    }
    let mut collect = Collect(Vec::new(), Vec::new());
    model.visit(&mut collect);
    collect.0
}
