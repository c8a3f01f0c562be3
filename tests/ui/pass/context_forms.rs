use burn::module::Module;
use burn::nn::Linear;
use burn_stoker::prelude::*;

// The model as a generic parameter.
#[callback(on = trigger)]
fn generic<M: Module>(ctx: &mut Context<'_, M>) {
    let _ = ctx.model().num_params();
}

// With a where clause.
#[callback(on = trigger)]
fn generic_where<M>(ctx: &mut Context<'_, M>)
where
    M: Module,
{
    let _ = ctx.model().num_params();
}

// `impl Module`.
#[callback(on = trigger)]
fn any_module(ctx: &mut Context<'_, impl Module>) {
    let _ = ctx.model().num_params();
}

// A concrete model.
#[callback(on = trigger)]
fn concrete(ctx: &mut Context<'_, Linear>) {
    let _ = &ctx.model().weight;
}

// A path to the context type, and an unnamed parameter.
#[callback(on = trigger)]
fn by_path<M>(_: &mut burn_stoker::callback::Context<'_, M>) {}

// No context at all.
#[callback(on = trigger)]
fn no_context() {}

// An extra generic parameter that is not the model: the struct carries it.
#[callback(on = trigger)]
fn with_extra<M, T: Default + std::fmt::Debug>(ctx: &mut Context<'_, M>) {
    let _ = (ctx, T::default());
}

// An extra parameter next to `impl Module`.
#[callback(on = trigger)]
fn with_extra_and_impl<T: Default>(ctx: &mut Context<'_, impl Module>) {
    let _ = (ctx.model().num_params(), T::default());
}

// A lifetime parameter.
#[callback(on = trigger)]
fn with_lifetime<'a, M>(ctx: &'a mut Context<'_, M>) {
    let _: &'a mut Context<'_, M> = ctx;
}

// A public callback, a private function.
#[callback(on = trigger)]
pub fn public<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn assert_set<M, K, C: Callbacks<M, K>>(_: &C) {}

pub fn main() {
    assert_set::<Linear, _, _>(&(Generic, GenericWhere, AnyModule, Concrete, ByPath, NoContext, Public));
    assert_set::<Linear, _, _>(&WithExtra::<String>::default());
    assert_set::<Linear, _, _>(&(WithExtraAndImpl::<u32>::default(), WithLifetime));
    let _copy: WithExtra<u8> = WithExtra::default().clone();
}
