use burn_stoker::prelude::*;

#[callback(on = trigger)]
fn first<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

// `#[order]` written above `#[callback]` is moved under it.
#[order(after = First)]
#[callback(on = trigger)]
fn second<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

// So is `#[fetch]`.
#[fetch("cost")]
#[callback(on = after_step)]
fn fetch_above(cost: f32) {
    let _ = cost;
}

#[callback(on = trigger)]
#[order(after = [First, Second], before = burn_stoker::saver::ModelSaver)]
fn third<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[callback(on = trigger)]
#[order(before = InferenceRunner,)]
fn trailing_comma<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

mod nested {
    use burn_stoker::prelude::*;

    #[callback(on = trigger)]
    #[order(after = super::First)]
    pub fn inner<M>(ctx: &mut Context<'_, M>) {
        let _ = ctx;
    }
}

#[derive(Default)]
struct Counter(u64);

#[order(before = First)]
#[callback]
impl Counter {
    #[on(trigger_step)]
    fn count(&mut self) {
        self.0 += 1;
    }
}

// Through the `burn_stoker::` paths.
#[burn_stoker::callback(on = trigger)]
#[burn_stoker::order(after = First)]
fn qualified<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

// fastai's numeric order: bare, by key, beside constraints.
#[callback(on = trigger)]
#[order(-9)]
fn minus_nine<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[callback(on = trigger)]
#[order(value = 5)]
fn five<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

#[callback(on = trigger)]
#[order(after = First, value = -1, before = Five)]
fn mixed<M>(ctx: &mut Context<'_, M>) {
    let _ = ctx;
}

fn assert_set<M, K, C: Callbacks<M, K>>(_: &C) {}

pub fn main() {
    let set = (First, Second, FetchAbove, Third, TrailingComma, nested::Inner, Counter::default(), Qualified);
    assert_set::<(), _, _>(&set);
    assert_set::<(), _, _>(&(MinusNine, Five, Mixed));
    let order = Callback::<()>::order(&Third);
    assert_eq!(order, Order::none().after("First").after("Second").before("ModelSaver"));
    assert_eq!(Callback::<()>::order(&MinusNine), Order::none().value(-9));
    assert_eq!(Callback::<()>::order(&Five), Order::none().value(5));
    assert_eq!(Callback::<()>::order(&Mixed), Order::none().after("First").before("Five").value(-1));
}
