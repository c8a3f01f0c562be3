use burn_stoker::prelude::*;

#[callback(on = trigger)]
#[order(value = 1.5)]
fn not_an_integer<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[callback(on = trigger)]
#[order(-9, value = 3)]
fn twice<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[callback(on = trigger)]
#[order(4294967296)]
fn too_large<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[callback(on = trigger)]
#[order(value = "first")]
fn a_string<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[callback(on = trigger)]
#[order(valeu = 3)]
fn misspelt<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
