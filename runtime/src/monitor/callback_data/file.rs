//! The HDF5 file itself, in neon's layout: what `Callbacks.on_train_begin` and each of neon's
//! callbacks create (`neon/callbacks/callbacks.py`), with the same names, shapes and types.

use std::path::{Path, PathBuf};

use hdf5::types::VarLenUnicode;
use hdf5::{Dataset, File, Group, H5Type, Location};

use super::hist::{BINS, OFFSET};
use crate::error::{Error, Result};

/// What the file holds beside the per-minibatch cost, decided at setup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Layout {
    /// `config.attrs['total_epochs']`: the run's epochs.
    pub(super) total_epochs: u64,
    /// `config.attrs['total_minibatches']`: steps per epoch times epochs.
    pub(super) total_minibatches: u64,
    /// `LossCallback`'s and `MetricCallback`'s `epoch_freq`.
    pub(super) eval_freq: u64,
    /// Whether `cost/loss` and `time/loss` exist (a `LossCallback`).
    pub(super) loss: bool,
    /// The datasets under `metrics/` (a `MetricCallback`'s metric names).
    pub(super) metrics: Vec<String>,
    /// `HistCallback`'s group: whether a column per minibatch (else per epoch), and the
    /// datasets under `hist/`.
    pub(super) hist: Option<(bool, Vec<String>)>,
}

impl Layout {
    /// `epochs // epoch_freq`: the length of the per-evaluation datasets.
    pub(super) fn evaluations(&self) -> usize {
        (self.total_epochs / self.eval_freq) as usize
    }
}

/// The open file and the datasets a run writes.
#[derive(Debug)]
pub(super) struct H5File {
    file: File,
    path: PathBuf,
    cost_train: Dataset,
    markers: Dataset,
    loss: Option<(Dataset, Dataset)>,
    metrics: Vec<Dataset>,
    hist: Vec<Dataset>,
    start_time: Dataset,
    end_time: Dataset,
}

/// Mark the descriptors this process holds on `path` close-on-exec: libhdf5 opens its files
/// without `O_CLOEXEC`, so a program started meanwhile (a `SendStat` command, a
/// `StartProcOrThread` process) would keep the file open, with HDF5's lock on it, for its whole
/// life. Linux (`/proc/self/fd`); elsewhere nothing is done.
fn close_on_exec(path: &Path) {
    #[cfg(target_os = "linux")]
    {
        let Ok(target) = path.canonicalize() else { return };
        let Ok(fds) = std::fs::read_dir("/proc/self/fd") else { return };
        for entry in fds.flatten() {
            let points_there = std::fs::read_link(entry.path()).is_ok_and(|link| link == target);
            if let (true, Ok(fd)) = (points_there, entry.file_name().to_string_lossy().parse::<i32>()) {
                // SAFETY: fcntl on a descriptor this process holds, changing only its flags.
                unsafe {
                    let flags = libc::fcntl(fd, libc::F_GETFD);
                    if flags >= 0 {
                        libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC);
                    }
                }
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = path;
}

/// An HDF5 error as the crate's error, naming the file.
pub(super) fn h5_error(path: &Path, what: &str, error: hdf5::Error) -> Error {
    Error::msg(format!("CallbackDataWriter: cannot {what} {}: {error}", path.display()))
}

/// A one-dimensional dataset of `T` and `len` values, its space allocated at once (so that the
/// file's structure is complete, and on disk, from the first flush on) and filled with zeros.
fn dataset<T: H5Type>(group: &Group, name: &str, len: usize) -> hdf5::Result<Dataset> {
    group
        .new_dataset::<T>()
        .shape(len)
        .alloc_time(Some(hdf5::plist::dataset_create::AllocTime::Early))
        .create(name)
}

/// Set the scalar attribute `name` of `location`, creating it when missing.
fn set_attr<T: H5Type>(location: &Location, name: &str, value: &T) -> hdf5::Result<()> {
    match location.attr(name) {
        Ok(attr) => attr.write_scalar(value),
        Err(_) => location.new_attr::<T>().create(name)?.write_scalar(value),
    }
}

/// Set the string attribute `name` (a variable-length UTF-8 string, as h5py stores a `str`).
fn set_str_attr(location: &Location, name: &str, value: &str) -> hdf5::Result<()> {
    let value: VarLenUnicode = value.parse().map_err(|e| hdf5::Error::from(format!("{e}")))?;
    set_attr(location, name, &value)
}

/// The attributes of a dataset indexed by evaluation (`LossCallback`'s `cost/loss`, every
/// `MetricCallback` dataset).
fn evaluation_attrs(dataset: &Dataset, eval_freq: u64) -> hdf5::Result<()> {
    set_str_attr(dataset, "time_markers", "epoch_freq")?;
    set_attr(dataset, "epoch_freq", &(eval_freq as i64))
}

impl H5File {
    /// Open the file at `path`: a new one (replacing one that is there), or, `resumed`, the one
    /// an earlier run wrote if there is one. Returns it and whether it is new.
    pub(super) fn open(path: &Path, resumed: bool) -> Result<(File, bool)> {
        let opened = if resumed && path.exists() {
            (File::open_rw(path).map_err(|e| h5_error(path, "open", e))?, false)
        } else {
            (File::create(path).map_err(|e| h5_error(path, "create", e))?, true)
        };
        close_on_exec(path);
        Ok(opened)
    }

    /// Lay `layout` out in a new file (every group, dataset and attribute), or check that the
    /// file an earlier run wrote has it; then flush.
    pub(super) fn start(file: File, path: &Path, layout: &Layout, new: bool) -> Result<H5File> {
        if new {
            Self::make(&file, layout).map_err(|e| h5_error(path, "write the layout of", e))?;
        } else {
            Self::check(&file, path, layout)?;
        }
        let file = Self::open_datasets(file, path, layout)?;
        file.flush()?;
        Ok(file)
    }

    fn make(file: &File, layout: &Layout) -> hdf5::Result<()> {
        let config = file.create_group("config")?;
        set_attr(&config, "total_minibatches", &(layout.total_minibatches as i64))?;
        set_attr(&config, "total_epochs", &(layout.total_epochs as i64))?;
        let markers = file.create_group("time_markers")?;
        // h5py's default type, which neon's `create_dataset("minibatch", (epochs,))` gets.
        dataset::<f32>(&markers, "minibatch", layout.total_epochs as usize)?;
        let cost = file.create_group("cost")?;
        let train = dataset::<f32>(&cost, "train", layout.total_minibatches as usize)?;
        set_str_attr(&train, "time_markers", "minibatch")?;
        let time = file.create_group("time")?;
        if layout.loss {
            let loss = dataset::<f32>(&cost, "loss", layout.evaluations())?;
            evaluation_attrs(&loss, layout.eval_freq)?;
            dataset::<f32>(&time, "loss", layout.evaluations())?;
        }
        if !layout.metrics.is_empty() {
            let metrics = file.create_group("metrics")?;
            for name in &layout.metrics {
                let metric = dataset::<f32>(&metrics, name, layout.evaluations())?;
                evaluation_attrs(&metric, layout.eval_freq)?;
            }
        }
        let timing = time.create_group("train")?;
        dataset::<f64>(&timing, "start_time", 1)?;
        dataset::<f64>(&timing, "end_time", 1)?;
        if let Some((per_minibatch, names)) = &layout.hist {
            Self::make_hist(file, layout, *per_minibatch, names)?;
        }
        Ok(())
    }

    /// `HistCallback.on_train_begin`'s group and its attributes, and a `(64, time_steps)` int32
    /// dataset per parameter (neon's `require_dataset(name, shape=(64, points), dtype=int32)`).
    fn make_hist(file: &File, layout: &Layout, per_minibatch: bool, names: &[String]) -> hdf5::Result<()> {
        let hist = file.create_group("hist")?;
        let steps = if per_minibatch { layout.total_minibatches } else { layout.total_epochs };
        set_attr(&hist, "bins", &(BINS as i64))?;
        set_attr(&hist, "offset", &i64::from(OFFSET))?;
        set_str_attr(&hist, "time_markers", if per_minibatch { "minibatch" } else { "epoch" })?;
        set_attr(&hist, "time_steps", &(steps as i64))?;
        for name in names {
            hist.new_dataset::<i32>()
                .shape((BINS, steps as usize))
                .alloc_time(Some(hdf5::plist::dataset_create::AllocTime::Early))
                .create(name.as_str())?;
        }
        Ok(())
    }

    /// The file an earlier run wrote must be of this run's size.
    fn check(file: &File, path: &Path, layout: &Layout) -> Result<()> {
        let read =
            |name: &str| -> Option<i64> { file.group("config").ok()?.attr(name).ok()?.read_scalar().ok() };
        let found = (read("total_epochs"), read("total_minibatches"));
        let wanted = (Some(layout.total_epochs as i64), Some(layout.total_minibatches as i64));
        if found != wanted {
            let number = |n: Option<i64>| n.map_or("no number of".to_string(), |n| n.to_string());
            return Err(Error::msg(format!(
                "CallbackDataWriter: {} holds a run of {} epochs and {} minibatches, this run has {} and {}: \
                 name another file, or remove this one to start it anew",
                path.display(),
                number(found.0),
                number(found.1),
                layout.total_epochs,
                layout.total_minibatches
            )));
        }
        Ok(())
    }

    fn open_datasets(file: File, path: &Path, layout: &Layout) -> Result<H5File> {
        let get = |name: &str| {
            file.dataset(name).map_err(|e| {
                Error::msg(format!(
                    "CallbackDataWriter: {} has no dataset `{name}` ({e}): it was written with other settings",
                    path.display()
                ))
            })
        };
        let loss = if layout.loss { Some((get("cost/loss")?, get("time/loss")?)) } else { None };
        let metrics = layout.metrics.iter().map(|m| get(&format!("metrics/{m}"))).collect::<Result<_>>()?;
        let hist_names = layout.hist.iter().flat_map(|(_, names)| names);
        let hist = hist_names.map(|name| get(&format!("hist/{name}"))).collect::<Result<_>>()?;
        Ok(H5File {
            cost_train: get("cost/train")?,
            markers: get("time_markers/minibatch")?,
            loss,
            metrics,
            hist,
            start_time: get("time/train/start_time")?,
            end_time: get("time/train/end_time")?,
            path: path.to_path_buf(),
            file,
        })
    }

    fn error<'a>(&'a self, what: &'a str) -> impl Fn(hdf5::Error) -> Error + 'a {
        move |e| h5_error(&self.path, what, e)
    }

    /// Write `costs` into `cost/train` from index `start` on.
    pub(super) fn write_costs(&self, start: usize, costs: &[f32]) -> Result<()> {
        self.cost_train
            .write_slice(costs, start..start + costs.len())
            .map_err(self.error("write cost/train in"))
    }

    /// The end of epoch `epoch` (0-based) after `minibatches` minibatches in all: neon's
    /// `time_markers`.
    pub(super) fn end_epoch(&self, epoch: usize, minibatches: u64) -> Result<()> {
        let marks = || -> hdf5::Result<()> {
            self.markers.write_slice(&[minibatches as f32], epoch..epoch + 1)?;
            let group = self.file.group("time_markers")?;
            set_attr(&group, "epochs_complete", &(epoch as i64 + 1))?;
            set_attr(&group, "minibatches_complete", &(minibatches as i64))
        };
        marks().map_err(self.error("write time_markers in"))
    }

    /// The evaluation number `index`: the loss (with the time the pass took) and the metrics
    /// that were put, `None` where one was not.
    pub(super) fn write_evaluation(
        &self,
        index: usize,
        loss: Option<(f32, f32)>,
        metrics: &[Option<f32>],
    ) -> Result<()> {
        let one = |dataset: &Dataset, value: f32| dataset.write_slice(&[value], index..index + 1);
        if let (Some((cost, time)), Some((cost_set, time_set))) = (loss, &self.loss) {
            one(cost_set, cost)
                .and_then(|()| one(time_set, time))
                .map_err(self.error("write cost/loss in"))?;
        }
        for (value, dataset) in metrics.iter().zip(&self.metrics) {
            if let Some(value) = value {
                one(dataset, *value).map_err(self.error("write metrics in"))?;
            }
        }
        Ok(())
    }

    /// Column `column` of each `hist/` dataset: the histograms in the datasets' order.
    pub(super) fn write_hist(&self, column: usize, histograms: &[[i32; BINS]]) -> Result<()> {
        for (dataset, counts) in self.hist.iter().zip(histograms) {
            dataset.write_slice(&counts[..], (.., column)).map_err(self.error("write hist in"))?;
        }
        Ok(())
    }

    /// `time/train/start_time` (seconds since the Unix epoch, `RunTimerCallback`'s
    /// `time.time()`).
    pub(super) fn start_time(&self, seconds: f64) -> Result<()> {
        self.start_time
            .write_raw(&[seconds])
            .and_then(|()| set_str_attr(&self.start_time, "units", "seconds"))
            .map_err(self.error("write time/train in"))
    }

    /// `time/train/end_time`.
    pub(super) fn end_time(&self, seconds: f64) -> Result<()> {
        self.end_time
            .write_raw(&[seconds])
            .and_then(|()| set_str_attr(&self.end_time, "units", "seconds"))
            .map_err(self.error("write time/train in"))
    }

    /// Hand what HDF5 holds in memory to the operating system (`H5Fflush`).
    pub(super) fn flush(&self) -> Result<()> {
        self.file.flush().map_err(self.error("flush"))
    }
}
