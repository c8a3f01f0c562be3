//! The HDF5 file itself, in neon's layout: what `Callbacks.on_train_begin` and each of neon's
//! callbacks create (`neon/callbacks/callbacks.py`), with the same names, shapes and types.

use std::path::{Path, PathBuf};

use hdf5::types::VarLenUnicode;
use hdf5::{Dataset, Extent, File, Group, H5Type, Location};

use super::hist::{BINS, OFFSET};
use crate::error::{Error, Result};

/// What the file holds beside the per-minibatch cost, decided at setup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Layout {
    /// `config.attrs['total_epochs']`: the run's epochs.
    pub(super) total_epochs: u64,
    /// `config.attrs['total_minibatches']`: steps per epoch times epochs (`None` beyond `u64`).
    pub(super) total_minibatches: Option<u64>,
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
    fn evaluations(&self) -> Option<u64> {
        self.total_epochs.checked_div(self.eval_freq)
    }

    /// The `(total_epochs, total_minibatches)` attributes, as [`planned`] writes them.
    fn sizes(&self) -> (i64, i64) {
        (planned(Some(self.total_epochs)).0, planned(self.total_minibatches).0)
    }
}

/// A planned length as neon's int64 attribute, and the first length of a dataset of it: `-1` and
/// 0 when it is unknown or beyond int64 (`max_epoch(u64::MAX)`), the dataset then growing as it
/// is written.
fn planned(n: Option<u64>) -> (i64, usize) {
    n.and_then(|n| Some((i64::try_from(n).ok()?, usize::try_from(n).ok()?))).unwrap_or((-1, 0))
}

/// The values of a one-dimensional dataset in one chunk (4 KiB of float32), and the columns of a
/// histogram dataset in one (64 x 64 int32, 16 KiB): space is taken a chunk at a time, as the
/// values are written.
const CHUNK: usize = 1024;
const HIST_CHUNK: usize = 64;

/// An index as a dataset's, or an error naming what it indexes.
pub(super) fn index(i: u64, what: &str) -> Result<usize> {
    usize::try_from(i)
        .map_err(|_| Error::msg(format!("CallbackDataWriter: {what} {i} is beyond this machine's indices")))
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

/// An HDF5 error as the crate's error, naming the file.
pub(super) fn h5_error(path: &Path, what: &str, error: hdf5::Error) -> Error {
    Error::context(format!("CallbackDataWriter: cannot {what} {}", path.display()), error)
}

/// A one-dimensional dataset of `T` and `len` values (zeros until written), chunked and growable
/// (no maximum): its space is taken as it is written, and a write past its end extends it.
fn dataset<T: H5Type>(group: &Group, name: &str, len: usize) -> hdf5::Result<Dataset> {
    group.new_dataset::<T>().chunk(CHUNK).shape([Extent::resizable(len)]).create(name)
}

/// A dataset of one value, its space allocated at once.
fn single<T: H5Type>(group: &Group, name: &str) -> hdf5::Result<Dataset> {
    group
        .new_dataset::<T>()
        .shape(1)
        .alloc_time(Some(hdf5::plist::dataset_create::AllocTime::Early))
        .create(name)
}

/// Extend `dataset` along its axis `axis` to at least `len` (a dataset of an unknown plan grows
/// as it is written).
fn grow(dataset: &Dataset, axis: usize, len: usize) -> hdf5::Result<()> {
    let mut shape = dataset.shape();
    if shape.get(axis).is_some_and(|&n| n < len) {
        shape[axis] = len;
        dataset.resize(shape)?;
    }
    Ok(())
}

/// Write `values` into the one-dimensional `dataset` from `start` on, extending it if needed.
fn write_from<T: H5Type>(dataset: &Dataset, start: usize, values: &[T]) -> hdf5::Result<()> {
    let end = start.checked_add(values.len()).ok_or_else(|| hdf5::Error::from("an index beyond usize"))?;
    grow(dataset, 0, end)?;
    dataset.write_slice(values, start..end)
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
        let (epochs, minibatches) = layout.sizes();
        set_attr(&config, "total_minibatches", &minibatches)?;
        set_attr(&config, "total_epochs", &epochs)?;
        let markers = file.create_group("time_markers")?;
        // h5py's default type, which neon's `create_dataset("minibatch", (epochs,))` gets.
        dataset::<f32>(&markers, "minibatch", planned(Some(layout.total_epochs)).1)?;
        let cost = file.create_group("cost")?;
        let train = dataset::<f32>(&cost, "train", planned(layout.total_minibatches).1)?;
        set_str_attr(&train, "time_markers", "minibatch")?;
        let time = file.create_group("time")?;
        let evaluations = planned(layout.evaluations()).1;
        if layout.loss {
            let loss = dataset::<f32>(&cost, "loss", evaluations)?;
            evaluation_attrs(&loss, layout.eval_freq)?;
            dataset::<f32>(&time, "loss", evaluations)?;
        }
        if !layout.metrics.is_empty() {
            let metrics = file.create_group("metrics")?;
            for name in &layout.metrics {
                let metric = dataset::<f32>(&metrics, name, evaluations)?;
                evaluation_attrs(&metric, layout.eval_freq)?;
            }
        }
        let timing = time.create_group("train")?;
        single::<f64>(&timing, "start_time")?;
        single::<f64>(&timing, "end_time")?;
        if let Some((per_minibatch, names)) = &layout.hist {
            Self::make_hist(file, layout, *per_minibatch, names)?;
        }
        Ok(())
    }

    /// `HistCallback.on_train_begin`'s group and its attributes, and a `(64, time_steps)` int32
    /// dataset per parameter (neon's `require_dataset(name, shape=(64, points), dtype=int32)`),
    /// chunked and growable along its columns.
    fn make_hist(file: &File, layout: &Layout, per_minibatch: bool, names: &[String]) -> hdf5::Result<()> {
        let hist = file.create_group("hist")?;
        let steps = planned(if per_minibatch { layout.total_minibatches } else { Some(layout.total_epochs) });
        set_attr(&hist, "bins", &(BINS as i64))?;
        set_attr(&hist, "offset", &i64::from(OFFSET))?;
        set_str_attr(&hist, "time_markers", if per_minibatch { "minibatch" } else { "epoch" })?;
        set_attr(&hist, "time_steps", &steps.0)?;
        for name in names {
            hist.new_dataset::<i32>()
                .chunk((BINS, HIST_CHUNK))
                .shape([Extent::fixed(BINS), Extent::resizable(steps.1)])
                .create(name.as_str())?;
        }
        Ok(())
    }

    /// The file an earlier run wrote must be of this run's size.
    fn check(file: &File, path: &Path, layout: &Layout) -> Result<()> {
        let read =
            |name: &str| -> Option<i64> { file.group("config").ok()?.attr(name).ok()?.read_scalar().ok() };
        let found = (read("total_epochs"), read("total_minibatches"));
        let (epochs, minibatches) = layout.sizes();
        let wanted = (Some(epochs), Some(minibatches));
        if found != wanted {
            let number = |n: Option<i64>| n.map_or("no number of".to_string(), |n| n.to_string());
            return Err(Error::invalid(format!(
                "CallbackDataWriter: {} holds a run of {} epochs and {} minibatches, this run has {} and {}: \
                 name another file, or remove this one to start it anew",
                path.display(),
                number(found.0),
                number(found.1),
                epochs,
                minibatches
            )));
        }
        Ok(())
    }

    fn open_datasets(file: File, path: &Path, layout: &Layout) -> Result<H5File> {
        let get = |name: &str| {
            file.dataset(name).map_err(|e| {
                Error::invalid(format!(
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
        write_from(&self.cost_train, start, costs).map_err(self.error("write cost/train in"))
    }

    /// The end of epoch `epoch` (0-based) after `minibatches` minibatches in all: neon's
    /// `time_markers`.
    pub(super) fn end_epoch(&self, epoch: usize, minibatches: u64) -> Result<()> {
        let marks = || -> hdf5::Result<()> {
            write_from(&self.markers, epoch, &[minibatches as f32])?;
            let group = self.file.group("time_markers")?;
            let complete = i64::try_from(epoch).map_or(i64::MAX, |e| e.saturating_add(1));
            set_attr(&group, "epochs_complete", &complete)?;
            set_attr(&group, "minibatches_complete", &i64::try_from(minibatches).unwrap_or(i64::MAX))
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
        let one = |dataset: &Dataset, value: f32| write_from(dataset, index, &[value]);
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
            grow(dataset, 1, column.saturating_add(1))
                .and_then(|()| dataset.write_slice(&counts[..], (.., column)))
                .map_err(self.error("write hist in"))?;
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
