//! What `compare` relies on to compare loops fairly: every case starts from the same model.

use burn::tensor::{Distribution, Tensor};
use stoker_bench::{Classifier, ConvNet, batches, fresh};
use stoker_examples::Mlp;

/// The logits of a fresh model on the first training batch.
fn fresh_logits<M: Classifier>(device: &burn::tensor::Device) -> Vec<f32> {
    let images = batches(device)[0].images.clone();
    fresh::<M>(device).logits(images).into_data().try_to_vec::<f32>().expect("f32 logits")
}

#[test]
fn fresh_models_are_the_same_model() {
    let device = stoker::device::cpu();
    let mlp = fresh_logits::<Mlp>(&device);
    assert_eq!(mlp.len(), 64 * 10);
    // Drawing other random numbers in between does not change the next fresh model.
    let _ = Tensor::<1>::random([1000], Distribution::Default, &device).into_data();
    assert_eq!(mlp, fresh_logits::<Mlp>(&device), "two fresh MLPs differ");
    let conv = fresh_logits::<ConvNet>(&device);
    assert_eq!(conv, fresh_logits::<ConvNet>(&device), "two fresh ConvNets differ");
    // Not a constant: the models differ from a model initialized without the seed.
    device.seed(stoker_bench::SEED + 1);
    let other: Vec<f32> = Mlp::init(&device)
        .logits(batches(&device)[0].images.clone())
        .into_data()
        .try_to_vec::<f32>()
        .unwrap();
    assert_ne!(mlp, other, "another seed gives another model");
}
