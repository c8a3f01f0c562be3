use burn_stoker::prelude::*;

#[derive(Default)]
struct Report {
    steps: u64,
}

#[callback]
impl Report {
    #[on(trigger)]
    fn report<M>(ctx: &mut Context<'_, M>) {
        let _ = ctx;
    }
}

fn main() {}
