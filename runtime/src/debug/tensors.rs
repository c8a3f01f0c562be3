//! What the tensor callbacks share: the fetched values seen as named host tensors, their compact
//! text form, the names a callback is given, and when a callback fetches.

use std::borrow::Cow;
use std::fmt;

use crate::callback::{Counters, PeriodSetting};
use crate::error::{Error, Result};
use crate::fetch::{Fetch, FetchKind, Fetched};

/// One fetched tensor on the host: its name, its values (row-major, flattened) and its shape.
///
/// Its `Display` is compact and numpy-like: a tensor of one element prints as the bare number
/// (`0.25`), others as nested brackets with the values right-aligned (`[[1 2.5]\n [3 4]]`); a
/// tensor of more than 1000 values shows the first and last 3 of each axis around `...`, as
/// numpy does. Numbers use Rust's shortest round-trip form, in exponent form below 1e-4 or from
/// 1e16 (`1e-8`), and `nan`, `inf`, `-inf`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HostTensor<'a> {
    /// The step output's name.
    pub name: &'a str,
    /// The values, flattened row-major.
    pub values: &'a [f32],
    /// The shape.
    pub shape: &'a [usize],
}

impl HostTensor<'_> {
    /// The value of a tensor of one element.
    pub fn scalar(&self) -> Option<f32> {
        match self.values {
            [value] => Some(*value),
            _ => None,
        }
    }
}

impl fmt::Display for HostTensor<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_tensor(self.values, self.shape))
    }
}

/// The values a tensor callback asked for at one step, in the order of its names.
#[derive(Debug, Clone, Copy)]
pub struct TensorValues<'a> {
    fetches: &'a [Fetch],
    values: Fetched<'a>,
}

impl<'a> TensorValues<'a> {
    /// A view of `values` for the callback that declared `fetches`; an error names the first
    /// value that was not fetched.
    pub(crate) fn new(fetches: &'a [Fetch], values: &Fetched<'a>) -> Result<Self> {
        for fetch in fetches {
            values.host(&fetch.name)?;
        }
        Ok(TensorValues { fetches, values: *values })
    }

    /// The number of tensors.
    pub fn len(&self) -> usize {
        self.fetches.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.fetches.is_empty()
    }

    /// The tensor at `index`, in the order the names were given.
    ///
    /// # Panics
    /// If `index` is not below [`len`](Self::len).
    pub fn get(&self, index: usize) -> HostTensor<'a> {
        let name: &'a str = &self.fetches[index].name;
        let (values, shape) = self.values.host(name).expect("checked when the view was made");
        HostTensor { name, values, shape }
    }

    /// The tensor named `name`, if it is one of the callback's.
    pub fn by_name(&self, name: &str) -> Option<HostTensor<'a>> {
        let index = self.fetches.iter().position(|f| f.name == name)?;
        Some(self.get(index))
    }

    /// Every tensor, in the order the names were given.
    pub fn iter(&self) -> impl Iterator<Item = HostTensor<'a>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
}

/// Host fetches of `names`, in order.
pub(crate) fn host_fetches<N: Into<Cow<'static, str>>>(names: impl IntoIterator<Item = N>) -> Vec<Fetch> {
    names.into_iter().map(|name| Fetch { name: name.into(), kind: FetchKind::Host }).collect()
}

/// An error if `fetches` is empty, or holds an empty or a repeated name.
pub(crate) fn check_names(owner: &str, fetches: &[Fetch]) -> Result<()> {
    if fetches.is_empty() {
        return Err(Error::invalid(format!("`{owner}` was given no tensor name")));
    }
    for (i, fetch) in fetches.iter().enumerate() {
        if fetch.name.is_empty() {
            return Err(Error::invalid(format!("`{owner}` was given an empty tensor name")));
        }
        if fetches[..i].iter().any(|f| f.name == fetch.name) {
            return Err(Error::invalid(format!(
                "`{owner}` was given the tensor name `{}` twice",
                fetch.name
            )));
        }
    }
    Ok(())
}

/// What every tensor callback holds: the names it fetches (as host values) and when, at every
/// `k`-th global step or at the last step of every `k`-th epoch
/// ([`Period::step_or_epoch_end`]).
#[derive(Debug, Clone)]
pub(crate) struct TensorFetches {
    owner: &'static str,
    fetches: Vec<Fetch>,
    period: PeriodSetting,
}

impl TensorFetches {
    /// The outputs `names` of callback `owner`, at every step.
    pub(crate) fn every_step<N: Into<Cow<'static, str>>>(
        owner: &'static str,
        names: impl IntoIterator<Item = N>,
    ) -> Self {
        TensorFetches { owner, fetches: host_fetches(names), period: PeriodSetting::new().every_k_steps(1) }
    }

    /// At every `k`-th global step instead.
    pub(crate) fn every_k_steps(mut self, k: u64) -> Self {
        self.period = PeriodSetting::new().every_k_steps(k);
        self
    }

    /// At the last step of every `k`-th epoch instead.
    pub(crate) fn every_k_epochs(mut self, k: u64) -> Self {
        self.period = PeriodSetting::new().every_k_epochs(k);
        self
    }

    /// The declared fetches.
    pub(crate) fn fetches(&self) -> &[Fetch] {
        &self.fetches
    }

    /// The first name.
    pub(crate) fn first_name(&self) -> &str {
        &self.fetches[0].name
    }

    /// Whether the step about to run is due (asked before it, from `wants_fetch`).
    #[inline]
    pub(crate) fn wants(&self, counters: &Counters) -> bool {
        self.period.period().step_or_epoch_end(counters.next_step(), counters.local_step() + 1, counters)
    }

    /// At setup: an error for no name, an empty or a repeated one, or a period of 0.
    pub(crate) fn check(&self) -> Result<()> {
        check_names(self.owner, &self.fetches)?;
        self.period.check(self.owner).map(|_| ())
    }

    /// The values of the step that just ran, if it was due (asked from `after_step`).
    #[inline]
    pub(crate) fn due_values<'a>(
        &'a self,
        counters: &Counters,
        values: &Fetched<'a>,
    ) -> Result<Option<TensorValues<'a>>> {
        let period = self.period.period();
        if !period.step_or_epoch_end(counters.global_step(), counters.local_step(), counters) {
            return Ok(None);
        }
        TensorValues::new(&self.fetches, values).map(Some)
    }
}

/// The `every_k_steps` / `every_k_epochs` builders of a tensor callback whose
/// [`TensorFetches`] is the field `tensors`; `$verb` starts their docs ("Dump", "Run").
macro_rules! tensor_period_builders {
    ($verb:literal) => {
        #[doc = concat!($verb, " at every `k`-th global step instead (at least 1; 0 is an error at setup).")]
        pub fn every_k_steps(mut self, k: u64) -> Self {
            self.tensors = self.tensors.every_k_steps(k);
            self
        }
        #[doc = concat!($verb, " at the last step of every `k`-th epoch instead.")]
        pub fn every_k_epochs(mut self, k: u64) -> Self {
            self.tensors = self.tensors.every_k_epochs(k);
            self
        }
    };
}
pub(crate) use tensor_period_builders;

/// Tensors of more values than this are summarized, as numpy does.
const SUMMARY_THRESHOLD: usize = 1000;
/// The values shown at each end of a summarized axis.
const EDGE_ITEMS: usize = 3;

/// One number, compactly.
pub(crate) fn format_number(value: f32) -> String {
    if value.is_nan() {
        "nan".into()
    } else if value.is_infinite() {
        if value > 0.0 { "inf".into() } else { "-inf".into() }
    } else if value == 0.0 || (1e-4..1e16).contains(&value.abs()) {
        format!("{value}")
    } else {
        format!("{value:e}")
    }
}

/// The compact, numpy-like text of a tensor (see [`HostTensor`]).
pub(crate) fn format_tensor(values: &[f32], shape: &[usize]) -> String {
    if values.len() == 1 {
        return format_number(values[0]);
    }
    if shape.is_empty() || values.len() != shape.iter().product::<usize>() {
        // Not a tensor of that shape: show the flat values.
        return format_tensor(values, &[values.len()]);
    }
    let summarize = values.len() > SUMMARY_THRESHOLD;
    let shown = |n: usize| -> Vec<Option<usize>> {
        if summarize && n > 2 * EDGE_ITEMS {
            (0..EDGE_ITEMS).map(Some).chain([None]).chain((n - EDGE_ITEMS..n).map(Some)).collect()
        } else {
            (0..n).map(Some).collect()
        }
    };
    // The width of the widest number shown, to align them.
    let mut width = 0;
    visit(values, shape, &shown, &mut |v| width = width.max(format_number(v).len()));
    let mut out = String::new();
    write_axis(&mut out, values, shape, 0, width, &shown);
    out
}

fn visit(
    values: &[f32],
    shape: &[usize],
    shown: &dyn Fn(usize) -> Vec<Option<usize>>,
    f: &mut dyn FnMut(f32),
) {
    let Some((&n, inner)) = shape.split_first() else {
        f(values[0]);
        return;
    };
    let stride: usize = inner.iter().product();
    for i in shown(n).into_iter().flatten() {
        visit(&values[i * stride..(i + 1) * stride], inner, shown, f);
    }
}

fn write_axis(
    out: &mut String,
    values: &[f32],
    shape: &[usize],
    depth: usize,
    width: usize,
    shown: &dyn Fn(usize) -> Vec<Option<usize>>,
) {
    let (&n, inner) = shape.split_first().expect("an axis");
    let stride: usize = inner.iter().product();
    out.push('[');
    // numpy's separators: a space within the last axis; between sub-arrays, one newline per
    // axis left below, then an indent to the column after the opening brackets.
    let separator = if inner.is_empty() {
        " ".to_string()
    } else {
        format!("{}{}", "\n".repeat(inner.len()), " ".repeat(depth + 1))
    };
    for (position, index) in shown(n).into_iter().enumerate() {
        if position > 0 {
            out.push_str(&separator);
        }
        match index {
            None => out.push_str("..."),
            Some(i) if inner.is_empty() => {
                out.push_str(&format!("{:>width$}", format_number(values[i])));
            }
            Some(i) => write_axis(out, &values[i * stride..(i + 1) * stride], inner, depth + 1, width, shown),
        }
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_compact() {
        assert_eq!(format_number(0.25), "0.25");
        assert_eq!(format_number(1.0), "1");
        assert_eq!(format_number(-3.5), "-3.5");
        assert_eq!(format_number(0.0), "0");
        assert_eq!(format_number(1e-8), "1e-8");
        assert_eq!(format_number(2.5e20), "2.5e20");
        assert_eq!(format_number(f32::NAN), "nan");
        assert_eq!(format_number(f32::NEG_INFINITY), "-inf");
    }

    #[test]
    fn tensors_print_like_numpy() {
        assert_eq!(format_tensor(&[0.5], &[1]), "0.5");
        // Right-aligned to the widest number shown (3 characters), one space apart.
        assert_eq!(format_tensor(&[1.0, 2.5, -3.0], &[3]), "[  1 2.5  -3]");
        assert_eq!(format_tensor(&[1.0, 2.0, 3.0, 4.0], &[2, 2]), "[[1 2]\n [3 4]]");
        let cube: Vec<f32> = (0..8).map(|v| v as f32).collect();
        assert_eq!(format_tensor(&cube, &[2, 2, 2]), "[[[0 1]\n  [2 3]]\n\n [[4 5]\n  [6 7]]]");
    }

    #[test]
    fn large_tensors_are_summarized() {
        let values: Vec<f32> = (0..2000).map(|v| v as f32).collect();
        assert_eq!(format_tensor(&values, &[2000]), "[   0    1    2 ... 1997 1998 1999]");
        let text = format_tensor(&values, &[1000, 2]);
        assert_eq!(
            text,
            "[[   0    1]\n [   2    3]\n [   4    5]\n ...\n [1994 1995]\n [1996 1997]\n [1998 1999]]"
        );
    }
}
