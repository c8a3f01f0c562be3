use burn_stoker::prelude::*;

#[callback(on = trigger)]
fn unit() {}

#[callback(on = trigger)]
fn explicit_unit() -> () {}

#[callback(on = trigger)]
fn may_fail<M>(ctx: &mut Context<'_, M>) -> burn_stoker::Result<()> {
    if ctx.epoch_num() > 1000 {
        return Err(burn_stoker::Error::msg("too long"));
    }
    Ok(())
}

#[callback(on = trigger_step)]
fn stop_after_ten<M>(ctx: &mut Context<'_, M>) -> Flow {
    if ctx.global_step() > 10 { Flow::Stop("enough".into()) } else { Flow::Continue }
}

#[callback(on = after_step)]
#[fetch("loss")]
fn result_flow(loss: f32) -> burn_stoker::Result<Flow> {
    if loss.is_nan() {
        return Err(burn_stoker::Error::msg("NaN loss"));
    }
    Ok(if loss < 0.01 { Flow::SkipEpoch } else { Flow::Continue })
}

#[callback(on = trigger)]
fn full_paths() -> ::burn_stoker::Result<::burn_stoker::callback::Flow> {
    Ok(::burn_stoker::callback::Flow::Continue)
}

fn assert_set<M, K, C: Callbacks<M, K>>(_: &C) {}

pub fn main() {
    assert_set::<(), _, _>(&(Unit, ExplicitUnit, MayFail, StopAfterTen, ResultFlow, FullPaths));
}
