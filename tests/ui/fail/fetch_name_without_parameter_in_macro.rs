use burn_stoker::prelude::*;

// A mistake inside a `macro_rules!` is reported where the macro is used, on the tokens passed in.
macro_rules! watch {
    ($name:ident, $($value:literal),*) => {
        #[callback(on = after_step)]
        #[fetch($($value),*)]
        fn $name(cost: f32) {
            let _ = cost;
        }
    };
}

watch!(watch_cost, "cost", "accuracy");

fn main() {}
