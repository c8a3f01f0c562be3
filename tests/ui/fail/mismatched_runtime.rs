// The macros of one version with a runtime of another: `old` stands for a burn-stoker whose
// hidden module serves other macros (it has everything this expansion uses but the version's
// marker). The error names the marker: which crates, which version.
mod old {
    pub mod __private {
        pub use burn_stoker::__private::{
            Callback, CallbackKind, CallbackReturn, Context, Cow, Ok, Result,
        };
    }
}

#[burn_stoker::callback(on = trigger, crate = "old")]
fn report<M>(ctx: &mut old::__private::Context<'_, M>) {
    let _ = ctx;
}

fn main() {}
