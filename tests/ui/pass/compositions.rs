use burn::module::Module;
use burn_stoker::prelude::*;

#[callback(on = trigger, every_k_epochs = 2)]
fn dump_weights(ctx: &mut Context<'_, impl Module>) -> burn_stoker::Result<()> {
    let _ = ctx.epoch_num();
    Ok(())
}

#[callback(on = after_step)]
#[fetch("cost")]
fn watch(cost: f32) {
    let _ = cost;
}

#[callback(on = trigger)]
fn tagged<T: Default>() {
    let _ = T::default();
}

fn warm(counters: &Counters) -> bool {
    counters.global_step() > 10
}

#[derive(Callbacks)]
struct Inner {
    saver: ModelSaver,
    #[every_k_steps(10)]
    #[enable_if(warm)]
    watch: Watch,
}

#[derive(Callbacks)]
struct Training<T: Default, E> {
    inner: Inner,
    #[order(after = ModelSaver, before = [Watch, Tagged])]
    #[every_k_epochs(2)]
    dump: DumpWeights,
    #[chief_only(false)]
    tagged: Tagged<T>,
    #[chief_only]
    extra: E,
    optional: Option<ProgressBar>,
    many: Vec<Watch2>,
    tuple: (Inner2, ()),
}

#[callback(on = trigger_step, name = "Watch2")]
fn watch_again() {}

#[derive(Callbacks)]
struct Inner2 {}

#[derive(Callbacks)]
struct Tuple(Watch, DumpWeights);

#[derive(Callbacks)]
struct Unit;

#[derive(Callbacks)]
struct Where<C>
where
    C: Clone,
{
    member: C,
}

fn assert_set<M, K, C: Callbacks<M, K>>(_: &C) {}

pub fn main() {
    let training = Training {
        inner: Inner { saver: ModelSaver::new(3), watch: Watch },
        dump: DumpWeights,
        tagged: Tagged::<String>::default(),
        extra: (Watch2, Tuple(Watch, DumpWeights)),
        optional: None,
        many: vec![Watch2, Watch2],
        tuple: (Inner2 {}, ()),
    };
    assert_set::<burn::nn::Linear, _, _>(&training);
    assert_set::<burn::nn::Linear, _, _>(&(training, Unit, Where { member: Watch }));
    assert_set::<burn::nn::Linear, _, _>(&(Tuple(Watch, DumpWeights), (Watch, (Watch2,)), vec![Watch]));
    assert_set::<(), _, _>(&((Watch, (Watch2,)), vec![Watch], Some(Unit)));
}
