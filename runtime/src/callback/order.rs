//! Where a callback runs among the others: [`Order`] and its topological sort.

use std::borrow::Cow;

use crate::error::{Error, Result};

/// Where one callback runs among the others, within every event: the names of callbacks it
/// must run after and before, and fastai's numeric `order` (lower runs first, default 0).
///
/// The constraints come first; among the callbacks they leave free to go next, the lowest
/// [`value`](Self::value) goes first, then the earliest registered. A value never overrides a
/// constraint: a callback at -9 ordered after one at 0 still runs after it.
///
/// ```
/// use burn_stoker::callback::Order;
///
/// // fastai's TerminateOnNaNCallback: `order = -9`, before the callbacks at the default 0.
/// let order = Order::none().value(-9);
/// assert_eq!(order.value, -9);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Order {
    /// Run after these.
    pub after: Vec<Cow<'static, str>>,
    /// Run before these.
    pub before: Vec<Cow<'static, str>>,
    /// fastai's `order`: among the callbacks the constraints leave free, lower runs first.
    /// Default 0.
    pub value: i32,
}

impl Order {
    /// No constraint.
    pub fn none() -> Self {
        Self::default()
    }
    /// Run after the callback named `name`.
    pub fn after(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.after.push(name.into());
        self
    }
    /// Run before the callback named `name`.
    pub fn before(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.before.push(name.into());
        self
    }
    /// Set the numeric order (fastai's `order`): lower runs first among the callbacks the
    /// constraints leave free.
    pub fn value(mut self, value: i32) -> Self {
        self.value = value;
        self
    }
    /// Both sets of constraints; the numeric order is `other`'s when it is not 0, else this one's.
    pub fn merge(mut self, other: Order) -> Self {
        self.after.extend(other.after);
        self.before.extend(other.before);
        if other.value != 0 {
            self.value = other.value;
        }
        self
    }
}

/// The short name of a type: its path and generic arguments removed (`PeriodicTrigger`).
pub fn short_type_name<T: ?Sized>() -> &'static str {
    let full = std::any::type_name::<T>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
}

/// Resolve the order of a set's callbacks: `after` / `before` constraints sorted topologically,
/// ties broken by the numeric order ([`Order::value`], lower first), then kept in registration
/// order. A constraint on `Name` designates the callback named `Name`
/// and every callback named `Name(...)`. A cycle is an error naming every callback in it; a constraint
/// naming a callback that is not registered is an error.
#[doc(hidden)]
pub fn resolve_order(names: &[Cow<'static, str>], orders: &[Order]) -> Result<Vec<usize>> {
    let n = names.len();
    let find = |target: &str, who: usize, key: &str| -> Result<Vec<usize>> {
        // `Name` also designates every `Name(detail)`: the instances of one type, told apart by
        // what they act on (`ScheduledHyperParamSetter(learning_rate)`).
        let designates = |name: &str| {
            name == target || name.strip_prefix(target).is_some_and(|rest| rest.starts_with('('))
        };
        let found: Vec<usize> = (0..n).filter(|&j| designates(&names[j])).collect();
        if found.is_empty() {
            let known: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            return Err(Error::order(format!(
                "callback `{}` is ordered {key} `{target}`, but no callback named `{target}` is registered; registered: {}",
                names[who],
                known.join(", ")
            )));
        }
        if found.contains(&who) {
            return Err(Error::order(format!("callback `{}` is ordered {key} itself", names[who])));
        }
        Ok(found)
    };
    // edges[a] contains b: a runs before b.
    let mut edges = vec![Vec::new(); n];
    let mut indegree = vec![0usize; n];
    for (i, order) in orders.iter().enumerate() {
        for target in &order.after {
            for j in find(target, i, "after")? {
                edges[j].push(i);
                indegree[i] += 1;
            }
        }
        for target in &order.before {
            for j in find(target, i, "before")? {
                edges[i].push(j);
                indegree[j] += 1;
            }
        }
    }
    let mut done = vec![false; n];
    let mut result = Vec::with_capacity(n);
    while result.len() < n {
        // The ready callback of lowest numeric order, the first registered among equals: ties
        // stay stable.
        let Some(next) =
            (0..n).filter(|&i| !done[i] && indegree[i] == 0).min_by_key(|&i| (orders[i].value, i))
        else {
            let cycle = find_cycle(&edges, &done);
            let names: Vec<String> = cycle.iter().map(|&i| format!("`{}`", names[i])).collect();
            return Err(Error::order(format!(
                "the callbacks' order constraints form a cycle: {} -> {}",
                names.join(" -> "),
                names[0]
            )));
        };
        done[next] = true;
        result.push(next);
        for &j in &edges[next] {
            indegree[j] -= 1;
        }
    }
    Ok(result)
}

/// One cycle among the callbacks not yet placed (every one of them has a predecessor left).
fn find_cycle(edges: &[Vec<usize>], done: &[bool]) -> Vec<usize> {
    let n = edges.len();
    // Walk backwards along predecessors until a callback repeats.
    let mut preds = vec![Vec::new(); n];
    for (a, targets) in edges.iter().enumerate() {
        for &b in targets {
            if !done[a] && !done[b] {
                preds[b].push(a);
            }
        }
    }
    let start = (0..n).find(|&i| !done[i]).expect("a callback is left");
    let mut path = vec![start];
    let mut seen = vec![usize::MAX; n];
    seen[start] = 0;
    let mut current = start;
    loop {
        let prev = preds[current][0];
        if seen[prev] != usize::MAX {
            let mut cycle: Vec<usize> = path[seen[prev]..].to_vec();
            cycle.reverse();
            // Start with the earliest registered, so that the message does not depend on the walk.
            let first = cycle.iter().enumerate().min_by_key(|&(_, &i)| i).map_or(0, |(k, _)| k);
            cycle.rotate_left(first);
            return cycle;
        }
        seen[prev] = path.len();
        path.push(prev);
        current = prev;
    }
}
