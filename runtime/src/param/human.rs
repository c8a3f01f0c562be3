//! tensorpack's `HumanHyperParamSetter`.

use std::borrow::Cow;
use std::io::Write;
use std::path::PathBuf;

use super::Target;
use crate::callback::{Callback, Context};
use crate::error::Result;
use crate::state::{open_own, read_own_text_bounded, write_atomic};

/// Sets a hyper-parameter to the value a person writes in a file during training (tensorpack's
/// `HumanHyperParamSetter`): tune the learning rate without stopping the run.
///
/// The file (`hyper.txt` in the log directory by default; [`file_name`](Self::file_name) takes a
/// path relative to the log directory, or an absolute one) holds `name:value` lines, such as
/// `learning_rate:1e-4`. At setup, a missing file is created with the parameter's current value,
/// and a file without a line for the parameter gets one appended, so there is always a line to
/// edit — several setters share one file. At the beginning of training and at every trigger
/// (after every epoch by default; wrap it in [`PeriodicTrigger`](crate::trigger::PeriodicTrigger) to read
/// every `k` steps), the file is read and the parameter's line sets it.
///
/// Only a regular file of this process's user, under one name, of at most
/// [`MAX_FILE_BYTES`](Self::MAX_FILE_BYTES) (1 MiB) is read: a symbolic link (even to a regular
/// file: the warnings about its lines would show another file's contents), a hard link, another
/// user's file, a FIFO, a device, a directory or a larger file is a warning and the value stays,
/// so that nothing put in the file's place can block training, exhaust its memory or show what
/// another file holds. The file is opened without blocking (a FIFO without a writer does not hold
/// the open) and checked once open, so a file swapped between the check and the read is caught.
///
/// The file never stops training: a missing or unreadable file, a line that is not `name:value`,
/// a value for this parameter that is not a finite number, or no line for it, is a warning on
/// stderr (once for each distinct problem, again if it comes back after being fixed) and the
/// value stays. Blank lines and lines starting with `#` are ignored; spaces around the name and
/// the value are allowed; when the parameter has several lines, the last decides.
///
/// A value is set when the person writes it: when the parameter's value in the file differs from
/// the one this setter last read or wrote there. A file that exists before training with a
/// value is applied at the beginning. So it composes with a schedule, as in tensorpack's ResNet
/// example: [`ScheduledHyperParamSetter`](crate::param::ScheduledHyperParamSetter) changes the learning
/// rate at its epochs, and an edit of the file overrides it from the next reading on, until the
/// schedule's next point. (tensorpack creates no file, and once a person creates it, its value
/// replaces the schedule's at every reading.) The last value read is saved in checkpoints, so a
/// resumed run does not apply an old edit again, and applies one made while it was stopped.
///
/// ```
/// # use burn_stoker::prelude::*;
/// # use burn_stoker::param::HumanHyperParamSetter;
/// # use burn::module::Module;
/// # use burn::nn::{Linear, LinearConfig};
/// # use burn::optim::SgdConfig;
/// # use burn::tensor::Tensor;
/// # use std::sync::{Arc, Mutex};
/// # let device = burn_stoker::device::cpu();
/// # let model: Linear = LinearConfig::new(2, 1).init(&device);
/// # let batches = vec![(Tensor::<2>::ones([4, 2], &device), Tensor::<2>::zeros([4, 1], &device))];
/// let log_dir = std::env::temp_dir().join(format!("stoker-doc-human-{}", std::process::id()));
/// # let _ = std::fs::remove_dir_all(&log_dir);
/// // A person edits train_log/.../hyper.txt; here, a callback plays the person after epoch 2.
/// #[callback(on = trigger_epoch)]
/// fn person(ctx: &mut Context<'_, impl Module>) -> burn_stoker::Result<()> {
///     if ctx.epoch_num() == 2 {
///         let path = ctx.log_dir().join("hyper.txt");
///         std::fs::write(&path, "learning_rate: 0.01\n").map_err(|e| burn_stoker::Error::io(path, e))?;
///     }
///     Ok(())
/// }
/// let used = Arc::new(Mutex::new(Vec::new()));
/// let seen = used.clone();
/// Trainer::new(model, SgdConfig::new().init(), batches)
///     .learning_rate(0.1)
///     .max_epoch(4)
///     .log_dir(&log_dir)
///     .default_callbacks(DefaultCallbacks::none())
///     .callbacks((Person, HumanHyperParamSetter::new("learning_rate")))
///     .train(move |model: &Linear, (x, y): (Tensor<2>, Tensor<2>), step: &mut Step<'_>| {
///         seen.lock().unwrap().push(step.hyper("learning_rate").unwrap());
///         (model.forward(x) - y).powi_scalar(2).mean()
///     })?;
/// assert_eq!(*used.lock().unwrap(), [0.1, 0.1, 0.01, 0.01]);
/// # Ok::<(), burn_stoker::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct HumanHyperParamSetter {
    target: Target,
    file_name: PathBuf,
    /// The file, resolved against the log directory at setup.
    path: PathBuf,
    /// The problems found at the last reading (each warned about when it appeared).
    problems: Vec<String>,
    /// The parameter's value in the file when this setter last read or wrote it.
    seen: Option<f64>,
}
crate::kind::kind!(HumanHyperParamSetter);

/// What one reading of the file found.
struct Reading {
    /// The value of the parameter's last line, when it is a finite number.
    value: Option<f64>,
    problems: Vec<String>,
}

impl HumanHyperParamSetter {
    /// The largest file read, in bytes (1 MiB): a larger one is a warning and the value stays.
    pub const MAX_FILE_BYTES: u64 = 1 << 20;

    /// Set `param` (`"learning_rate"` or a registered name) from `hyper.txt` in the log directory.
    pub fn new(param: impl Into<Cow<'static, str>>) -> Self {
        HumanHyperParamSetter {
            target: Target::new::<Self>(param.into()),
            file_name: PathBuf::from("hyper.txt"),
            path: PathBuf::new(),
            problems: Vec::new(),
            seen: None,
        }
    }
    /// The file, relative to the log directory (or absolute); default `hyper.txt`.
    pub fn file_name(mut self, file_name: impl Into<PathBuf>) -> Self {
        self.file_name = file_name.into();
        self
    }

    /// Whether `text` has a line for the parameter, well-formed or not.
    fn has_line(&self, text: &str) -> bool {
        text.lines().filter_map(|l| l.split_once(':')).any(|(k, _)| k.trim() == self.target.param)
    }

    fn parse(&self, text: &str) -> Reading {
        let param = &*self.target.param;
        let mut problems = Vec::new();
        let mut last: Option<std::result::Result<f64, String>> = None;
        // A malformed line that starts with the name is already a warning about this parameter.
        let mut mentioned = false;
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((key, value)) = line.split_once(':') else {
                mentioned |= line.starts_with(param);
                problems.push(format!("{}: the line `{line}` is not `name:value`", self.path.display()));
                continue;
            };
            if key.trim() != param {
                continue;
            }
            let value = value.trim();
            last = Some(match value.parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(v),
                Ok(_) => Err(format!(
                    "{}: `{param}:{value}` is not a finite number; `{param}` stays as it is",
                    self.path.display()
                )),
                Err(_) => Err(format!(
                    "{}: cannot read `{value}` as a number for `{param}`; `{param}` stays as it is",
                    self.path.display()
                )),
            });
        }
        let value = match last {
            Some(Ok(v)) => Some(v),
            Some(Err(problem)) => {
                problems.push(problem);
                None
            }
            None if mentioned => None,
            None => {
                problems.push(format!(
                    "{} has no `{param}:value` line; `{param}` stays as it is",
                    self.path.display()
                ));
                None
            }
        };
        Reading { value, problems }
    }

    /// Read the file and set the parameter from it; problems become warnings.
    fn read_and_set<M>(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let reading = match read_own_text_bounded(&self.path, Self::MAX_FILE_BYTES) {
            Ok(text) => self.parse(&text),
            Err(e) => Reading {
                value: None,
                problems: vec![format!(
                    "cannot read {}: {e}; `{}` stays as it is",
                    self.path.display(),
                    self.target.param
                )],
            },
        };
        for problem in &reading.problems {
            if !self.problems.contains(problem) {
                crate::logging::warn!("{}: {problem}", self.target.name());
            }
        }
        self.problems = reading.problems;
        match reading.value {
            Some(value) if Some(value) != self.seen => {
                self.seen = Some(value);
                if Some(value) != self.target.current(ctx).ok() {
                    self.target.set(ctx, value)?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Create the file, or add the parameter's line to it, with the current value (then seen).
    fn ensure_line(&mut self, value: f64) -> std::io::Result<()> {
        let line = format!("{}:{value:?}\n", self.target.param);
        match read_own_text_bounded(&self.path, Self::MAX_FILE_BYTES) {
            Ok(text) if self.has_line(&text) => Ok(()),
            Ok(text) => {
                // Never through a symlink planted there, never into another user's file.
                let mut file = open_own(std::fs::OpenOptions::new().append(true), &self.path)?;
                let separator = if text.is_empty() || text.ends_with('\n') { "" } else { "\n" };
                file.write_all(format!("{separator}{line}").as_bytes())?;
                self.seen = Some(value);
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(dir) = self.path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                // Written whole then renamed, so a reader never sees half a file; the temporary
                // has a name of its own, created new (nothing there is followed).
                write_atomic(&self.path, line.as_bytes())?;
                self.seen = Some(value);
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

impl<M> Callback<M> for HumanHyperParamSetter {
    fn name(&self) -> Cow<'static, str> {
        self.target.name()
    }
    fn save_state(&self) -> Result<Option<serde_json::Value>> {
        Ok(Some(serde_json::json!({ "seen": self.seen })))
    }
    fn load_state(&mut self, state: serde_json::Value) -> Result<()> {
        self.seen = match state.get("seen") {
            None | Some(serde_json::Value::Null) => None,
            Some(value) => Some(value.as_f64().ok_or_else(|| {
                crate::error::Error::bad_state(format!(
                    "{}: the saved value {value} is not a number",
                    self.target.name()
                ))
            })?),
        };
        Ok(())
    }
    fn setup(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.target.check(ctx)?;
        self.path = ctx.log_dir().join(&self.file_name);
        self.problems.clear();
        let value = self.target.current(ctx)?;
        match self.ensure_line(value) {
            Ok(()) => crate::logging::info!(
                "{}: edit {} to set `{}` during training",
                self.target.name(),
                self.path.display(),
                self.target.param
            ),
            Err(e) => crate::logging::warn!(
                "{}: cannot write the line `{}:{value:?}` to {}: {e}",
                self.target.name(),
                self.target.param,
                self.path.display()
            ),
        }
        Ok(())
    }
    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.read_and_set(ctx)
    }
    fn trigger(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        self.read_and_set(ctx)
    }
}
