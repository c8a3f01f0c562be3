//! Keras's `ReduceLROnPlateau`.

use std::borrow::Cow;

use serde_json::Value as Json;

use super::{LEARNING_RATE, Target, Warnings};
use crate::callback::{Callback, Context};
use crate::error::{Error, Result, must_be};
use crate::state::{Better, Direction, json_f64, parse_f64};

/// Reduces the learning rate when a statistic has stopped improving (Keras's
/// `ReduceLROnPlateau`, with its defaults: `factor` 0.1, `patience` 10, mode auto, `min_delta`
/// 1e-4, `cooldown` 0, `min_lr` 0, quiet).
///
/// After every epoch (in `trigger`, so [`PeriodicTrigger`](crate::trigger::PeriodicTrigger) can change
/// that) it reads the latest value of the statistic from the monitors and applies Keras's rule:
///
/// - during a cooldown, the cooldown counter goes down by one and `wait` is reset to 0;
/// - a value better than `best` by more than `min_delta` (`value < best - min_delta` in min mode,
///   `value > best + min_delta` in max mode) becomes `best` and resets `wait`;
/// - otherwise, outside a cooldown, `wait` grows by one; when it reaches `patience` and the
///   learning rate is above `min_lr`, the rate becomes `max(rate * factor, min_lr)`, `wait`
///   returns to 0 and a cooldown of `cooldown` epochs begins.
///
/// A NaN value never improves `best`. `best`, `wait` and the cooldown counter start afresh at
/// setup and are saved in checkpoints, so a resumed run reduces the rate exactly when the
/// uninterrupted run would.
///
/// Where Keras reads the epoch's logs, this reads the monitors: the statistic must be put before
/// this callback runs in the same event (order it after the callback that puts it), and when no
/// value was put since the last time (validation every other epoch), the epoch is skipped, as
/// Keras skips an epoch whose logs lack the statistic, with a warning (once). Keras compares the
/// rate with `min_lr` in `float32` because its rate is a `float32` variable; the trainer's rate is
/// an `f64`, compared as such. A `factor` of 1 or more is an error at setup, as in Keras.
///
/// ```
/// # use burn_stoker::prelude::*;
/// # use burn_stoker::param::ReduceLrOnPlateau;
/// # use burn::module::Module;
/// # use burn::nn::{Linear, LinearConfig};
/// # use burn::optim::SgdConfig;
/// # use burn::tensor::Tensor;
/// # use std::sync::{Arc, Mutex};
/// # let device = burn_stoker::device::cpu();
/// # let model: Linear = LinearConfig::new(2, 1).init(&device);
/// # let batches = vec![(Tensor::<2>::ones([4, 2], &device), Tensor::<2>::zeros([4, 1], &device))];
/// // Keras: ReduceLROnPlateau(monitor='val_loss', factor=0.5, patience=2)
/// let plateau = ReduceLrOnPlateau::new("val_loss").factor(0.5).patience(2);
/// # #[callback(on = trigger_epoch)]
/// # fn validate(ctx: &mut Context<'_, impl Module>) {
/// #     let losses = [1.0, 0.9, 0.9, 0.95, 0.9, 0.8];
/// #     let loss = losses[ctx.epoch_num() as usize - 1];
/// #     ctx.monitors().put_scalar("val_loss", loss);
/// # }
/// let used = Arc::new(Mutex::new(Vec::new()));
/// let seen = used.clone();
/// Trainer::new(model, SgdConfig::new().init(), batches)
///     .learning_rate(0.1)
///     .max_epoch(6)
///     .log_dir(std::env::temp_dir().join(format!("stoker-doc-plateau-{}", std::process::id())))
///     .default_callbacks(DefaultCallbacks::none())
///     // `Validate` puts val_loss 1.0, 0.9, 0.9, 0.95, 0.9, 0.8 after epochs 1 to 6.
///     .callbacks((Validate, plateau))
///     .train(move |model: &Linear, (x, y): (Tensor<2>, Tensor<2>), step: &mut Step<'_>| {
///         seen.lock().unwrap().push(step.hyper("learning_rate").unwrap());
///         (model.forward(x) - y).powi_scalar(2).mean()
///     })?;
/// // No improvement after epochs 3 and 4: halved from epoch 5.
/// assert_eq!(*used.lock().unwrap(), [0.1, 0.1, 0.1, 0.1, 0.05, 0.05]);
/// # Ok::<(), burn_stoker::Error>(())
/// ```
#[doc(alias = "ReduceLROnPlateau")]
#[derive(Debug, Clone)]
pub struct ReduceLrOnPlateau {
    target: Target,
    monitor: Cow<'static, str>,
    factor: f64,
    patience: u64,
    mode: Direction,
    /// Which way the statistic improves, resolved from `mode` at setup.
    better: Better,
    min_delta: f64,
    cooldown: u64,
    min_lr: f64,
    verbose: bool,
    // Keras's counters.
    wait: u64,
    cooldown_counter: u64,
    best: f64,
    /// The global step of the last value used.
    last_seen: Option<u64>,
    warnings: Warnings,
}
crate::kind::kind!(ReduceLrOnPlateau => "ReduceLROnPlateau");

impl ReduceLrOnPlateau {
    /// Watch the statistic `monitor` (Keras's default is `val_loss`; here, name the scalar some
    /// callback puts, such as an [`InferenceRunner`](crate::inference::InferenceRunner)'s).
    pub fn new(monitor: impl Into<Cow<'static, str>>) -> Self {
        ReduceLrOnPlateau {
            target: Target::new::<Self>(Cow::Borrowed(LEARNING_RATE)).quiet(),
            monitor: monitor.into(),
            factor: 0.1,
            patience: 10,
            mode: Direction::Auto,
            better: Better::Lower,
            min_delta: 1e-4,
            cooldown: 0,
            min_lr: 0.0,
            verbose: false,
            wait: 0,
            cooldown_counter: 0,
            best: f64::INFINITY,
            last_seen: None,
            warnings: Warnings::default(),
        }
    }
    /// The factor the rate is multiplied by: `new_lr = lr * factor` (default 0.1; must be below 1).
    pub fn factor(mut self, factor: f64) -> Self {
        self.factor = factor;
        self
    }
    /// Epochs without improvement after which the rate is reduced (default 10).
    pub fn patience(mut self, epochs: u64) -> Self {
        self.patience = epochs;
        self
    }
    /// Whether the statistic should decrease or increase (default [`Direction::Auto`], which reads the statistic's name as
    /// [`Direction::resolve`] says and fails at setup when it cannot tell).
    pub fn mode(mut self, mode: Direction) -> Self {
        self.mode = mode;
        self
    }
    /// How much better a value must be to count as an improvement (default 1e-4; its absolute
    /// value is used, as in Keras).
    pub fn min_delta(mut self, delta: f64) -> Self {
        self.min_delta = delta.abs();
        self
    }
    /// Epochs to wait after a reduction before counting epochs without improvement again
    /// (default 0).
    pub fn cooldown(mut self, epochs: u64) -> Self {
        self.cooldown = epochs;
        self
    }
    /// The lowest rate (default 0).
    pub fn min_lr(mut self, min_lr: f64) -> Self {
        self.min_lr = min_lr;
        self
    }
    /// Say so at every reduction (Keras's `verbose=1`; default quiet), in Keras's words:
    /// `Epoch 5: ReduceLROnPlateau reducing learning rate to 0.05.` (the 1-based epoch, the new
    /// value as Python writes a float; another hyper-parameter than the learning rate is named by
    /// its name). A `log` record at `Info`, a line on stderr without a logger (see
    /// [`logging`](crate::logging)), where Keras prints it on stdout after a line break. The value
    /// is the `f64` rate's; Keras's rate is a `float32` variable read back as a double, so the
    /// same reduction of 0.1 by 0.1 reads `0.010000000149011612` there and `0.010000000000000002`
    /// here.
    pub fn verbose(mut self, enable: bool) -> Self {
        self.verbose = enable;
        self
    }
    /// Reduce another hyper-parameter than the learning rate.
    pub fn param(mut self, param: impl Into<Cow<'static, str>>) -> Self {
        self.target = Target::new::<Self>(param.into()).quiet();
        self
    }

    fn maximizes(&self) -> bool {
        self.better == Better::Higher
    }

    fn improves(&self, value: f64) -> bool {
        if self.maximizes() { value > self.best + self.min_delta } else { value < self.best - self.min_delta }
    }
}

impl<M> Callback<M> for ReduceLrOnPlateau {
    fn name(&self) -> Cow<'static, str> {
        crate::kind::detailed::<Self>(&self.monitor)
    }
    fn save_state(&self) -> Result<Option<Json>> {
        Ok(Some(serde_json::json!({
            "wait": self.wait,
            "cooldown_counter": self.cooldown_counter,
            "best": json_f64(self.best),
            "last_seen": self.last_seen,
        })))
    }
    fn load_state(&mut self, state: Json) -> Result<()> {
        let bad = |what: &str| {
            Error::bad_state(format!(
                "the saved state of ReduceLROnPlateau({}) is malformed: {what}",
                self.monitor
            ))
        };
        let wait = state.get("wait").and_then(Json::as_u64).ok_or_else(|| bad("wait"))?;
        let cooldown_counter =
            state.get("cooldown_counter").and_then(Json::as_u64).ok_or_else(|| bad("cooldown_counter"))?;
        let best = state.get("best").and_then(parse_f64).ok_or_else(|| bad("best"))?;
        let last_seen = match state.get("last_seen") {
            None | Some(Json::Null) => None,
            Some(v) => Some(v.as_u64().ok_or_else(|| bad("last_seen"))?),
        };
        (self.wait, self.cooldown_counter, self.best, self.last_seen) =
            (wait, cooldown_counter, best, last_seen);
        Ok(())
    }
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let name = Callback::<M>::name(self);
        // Refuses NaN too.
        if self.factor.is_nan() || self.factor >= 1.0 {
            let rule = "below 1.0 (new_lr = lr * factor)";
            return Err(Error::hyper_param(must_be(name, "the factor", rule, self.factor)));
        }
        if self.min_delta.is_nan() || self.min_lr.is_nan() {
            return Err(Error::hyper_param(format!("{name}: min_delta and min_lr must be numbers")));
        }
        self.better = self.mode.better(&self.monitor, &name)?;
        // Keras's `_reset` at the beginning of training; a resumed run loads its state after this.
        self.best = if self.maximizes() { f64::NEG_INFINITY } else { f64::INFINITY };
        self.wait = 0;
        self.cooldown_counter = 0;
        self.last_seen = None;
        ctx.monitors().declare_better(&self.monitor, self.better);
        self.target.check(ctx)
    }
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let Some(&(step, current)) = ctx.monitors_ref().history(&self.monitor).last() else {
            let available: Vec<String> =
                ctx.monitors_ref().scalar_names().map(|n| format!("`{n}`")).collect();
            self.warnings.once(format!(
                "ReduceLROnPlateau({}): reducing the learning rate is conditioned on `{}`, which has not been put; available: {}",
                self.monitor,
                self.monitor,
                available.join(", ")
            ));
            return Ok(());
        };
        if self.last_seen == Some(step) {
            self.warnings.once(format!(
                "ReduceLROnPlateau({}): no new value of `{}` since the last time; this time is skipped",
                self.monitor, self.monitor
            ));
            return Ok(());
        }
        self.last_seen = Some(step);
        let in_cooldown = |s: &Self| s.cooldown_counter > 0;
        if in_cooldown(self) {
            self.cooldown_counter -= 1;
            self.wait = 0;
        }
        if self.improves(current) {
            self.best = current;
            self.wait = 0;
        } else if !in_cooldown(self) {
            self.wait += 1;
            if self.wait >= self.patience {
                let old = self.target.current(ctx)?;
                if old > self.min_lr {
                    let new = (old * self.factor).max(self.min_lr);
                    self.target.set(ctx, new)?;
                    if self.verbose {
                        let what = match &*self.target.param {
                            LEARNING_RATE => "learning rate",
                            other => other,
                        };
                        crate::logging::info!(
                            "Epoch {}: ReduceLROnPlateau reducing {what} to {}.",
                            ctx.epoch_num(),
                            python_float(new)
                        );
                    }
                    self.cooldown_counter = self.cooldown;
                    self.wait = 0;
                }
            }
        }
        Ok(())
    }
}

/// `value` as Python's `str(float)` writes it, as Keras's message has it: the shortest digits
/// that read back to it, in positional notation for exponents from -4 to 15 (with `.0` when
/// whole: `0.1`, `1.0`), else in scientific notation with a signed exponent of two digits or more
/// (`1e-05`, `1.5e+16`).
fn python_float(value: f64) -> String {
    if !value.is_finite() {
        return if value.is_nan() {
            "nan".into()
        } else if value > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    let scientific = format!("{value:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if (-4..16).contains(&exponent) {
        let positional = format!("{value}");
        if positional.contains('.') { positional } else { format!("{positional}.0") }
    } else {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::{ReduceLrOnPlateau, python_float};

    /// Keras's `MonitorCallback` keeps `abs(min_delta)`: a negative delta is the same threshold.
    #[test]
    fn a_negative_min_delta_counts_as_its_absolute_value() {
        for delta in [0.25, -0.25] {
            let mut plateau = ReduceLrOnPlateau::new("val_loss").min_delta(delta);
            plateau.best = 1.0;
            assert!(!plateau.improves(0.8), "{delta}: 0.8 is not 0.25 below 1.0");
            assert!(plateau.improves(0.7), "{delta}: 0.7 is");
        }
    }

    /// What Python's `str()` gives for each, checked by hand against CPython.
    #[test]
    fn floats_are_written_as_python_writes_them() {
        let cases = [
            (0.01, "0.01"),
            (0.1 * 0.1, "0.010000000000000002"),
            (1.0, "1.0"),
            (1e-4, "0.0001"),
            (1e-5, "1e-05"),
            (2.5e-7, "2.5e-07"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.5e300, "1.5e+300"),
            (0.0, "0.0"),
            (-0.5, "-0.5"),
        ];
        for (value, python) in cases {
            assert_eq!(python_float(value), python, "{value:e}");
        }
    }
}
