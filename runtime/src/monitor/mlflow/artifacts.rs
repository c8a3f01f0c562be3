//! The best checkpoint as an MLflow artifact: the copies `MinSaver` / `MaxSaver` keep in
//! `<log dir>/checkpoints/`, uploaded through the tracking server's artifact proxy
//! (`PUT /api/2.0/mlflow-artifacts/artifacts/<path>`) when they changed, on the sink's thread.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use super::http::Client;

/// Which best checkpoints [`MlflowLogger`](super::MlflowLogger) uploads to the MLflow run's
/// artifacts, set with [`checkpoint_artifacts`](super::MlflowLogger::checkpoint_artifacts).
///
/// The checkpoints are the complete copies [`MinSaver`](crate::saver::MinSaver) and
/// [`MaxSaver`](crate::saver::MaxSaver) keep in `<log dir>/checkpoints/<copy name>/`; each
/// goes to the artifact folder `checkpoints/<copy name>/` of the run, replacing the one there.
#[cfg_attr(docsrs, doc(cfg(feature = "mlflow")))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[doc(alias = "log_model")]
pub enum CheckpointArtifacts {
    /// None (the default, as Lightning's `MLFlowLogger(log_model=False)`): a checkpoint can
    /// weigh gigabytes, and its upload is the user's decision.
    #[default]
    Off,
    /// The best copies as they are when training ends (Lightning's `log_model=True`).
    AtEnd,
    /// Each time a best copy changed, at the end of the epoch after the one that wrote it, and
    /// when training ends (Lightning's `log_model="all"`): the run holds the best model so far
    /// while it trains.
    EachBest,
}

/// What the sink uploaded and where the copies are.
#[derive(Debug)]
pub(super) struct Uploads {
    pub(super) policy: CheckpointArtifacts,
    /// `<log dir>/checkpoints`, known at setup.
    pub(super) dir: Option<PathBuf>,
    /// Each copy's `manifest.json` as uploaded: a copy whose manifest differs changed.
    uploaded: HashMap<String, Vec<u8>>,
    /// Where the run's artifacts go (`.../artifacts/<experiment>/<run>/artifacts`), asked once.
    base: Option<String>,
    /// The first upload that failed, returned when training ends (an upload that fails does not
    /// stop the metrics).
    pub(super) failed: Option<io::Error>,
}

/// A copy opened whole: its `manifest.json`'s bytes, and each file's name and handle.
type OpenedCopy = (Vec<u8>, Vec<(String, File)>);

/// The suffixes of the folders a checkpoint write leaves aside for a moment (never a copy).
const ASIDE: [&str; 4] = [".tmp", ".old", ".deleting", ".abandoned"];

impl Uploads {
    pub(super) fn new(policy: CheckpointArtifacts) -> Uploads {
        Uploads { policy, dir: None, uploaded: HashMap::new(), base: None, failed: None }
    }

    /// Upload every copy that changed since the last upload; with `at_end`, warn when there is
    /// none at all. A failure is kept for the end and warned about once.
    pub(super) fn upload_changed(&mut self, client: &mut Client, run_id: &str, at_end: bool) {
        let Some(dir) = self.dir.clone() else { return };
        match self.try_upload(client, run_id, &dir) {
            Ok(0) if at_end && self.uploaded.is_empty() => crate::logging::warn!(
                "MLflow: checkpoint_artifacts is on, but {} holds no best checkpoint copy: add a MinSaver or \
                 MaxSaver to the callbacks",
                dir.display()
            ),
            Ok(_) => {}
            Err(error) => {
                if self.failed.is_none() {
                    crate::logging::error!(
                        "MLflow: the best checkpoint's upload failed: {error}; the metrics go on"
                    );
                    self.failed = Some(error);
                }
            }
        }
    }

    /// The uploads of [`upload_changed`](Self::upload_changed): how many copies were sent.
    fn try_upload(&mut self, client: &mut Client, run_id: &str, dir: &Path) -> io::Result<usize> {
        let mut sent = 0;
        for name in copy_names(dir)? {
            let Some((manifest, files)) = open_copy(&dir.join(&name))? else { continue };
            if self.uploaded.get(&name) == Some(&manifest) {
                continue;
            }
            let base = self.base(client, run_id)?;
            for (file_name, file) in &files {
                let url = format!("{base}/checkpoints/{}/{}", encode(&name), encode(file_name));
                client.put_file(&url, file)?;
            }
            self.uploaded.insert(name, manifest);
            sent += 1;
        }
        Ok(sent)
    }

    /// The URL the run's artifacts are put under, from its `artifact_uri` (`runs/get`).
    fn base(&mut self, client: &mut Client, run_id: &str) -> io::Result<String> {
        if let Some(base) = &self.base {
            return Ok(base.clone());
        }
        let run = client.get(&format!("runs/get?run_id={}", encode(run_id)))?;
        let uri = run["run"]["info"]["artifact_uri"].as_str().unwrap_or_default();
        let base = artifact_base(&client.tracking_uri, uri).ok_or_else(|| {
            io::Error::other(format!(
                "the run's artifact store is `{uri}`, which only MLflow's Python client writes (directly): start \
                 the server serving artifacts (`mlflow server` does by default, with `--artifacts-destination` \
                 where they go; not with `--no-serve-artifacts` nor a `--default-artifact-root` other than \
                 `mlflow-artifacts:/`), or leave checkpoint_artifacts off"
            ))
        })?;
        self.base = Some(base.clone());
        Ok(base)
    }
}

/// The URL under which the artifacts of a run whose `artifact_uri` is `uri` are put, as MLflow's
/// client resolves it: `mlflow-artifacts:/<path>` through the tracking server's proxy
/// (`mlflow-artifacts://host:port/<path>` through that host, with the tracking URI's scheme),
/// `http(s)://...` as it is; `None` for a store only the Python client writes (`s3://`, a path...).
pub(super) fn artifact_base(tracking_uri: &str, uri: &str) -> Option<String> {
    const PROXY: &str = "/api/2.0/mlflow-artifacts/artifacts";
    let uri = uri.trim_end_matches('/');
    if uri.starts_with("http://") || uri.starts_with("https://") {
        return Some(uri.to_string());
    }
    let rest = uri.strip_prefix("mlflow-artifacts:")?;
    let (server, path) = match rest.strip_prefix("//") {
        Some(authority_and_path) => {
            let (authority, path) = authority_and_path.split_once('/').unwrap_or((authority_and_path, ""));
            let scheme = tracking_uri.split_once("://").map_or("http", |(scheme, _)| scheme);
            (format!("{scheme}://{authority}"), path)
        }
        None => (tracking_uri.trim_end_matches('/').to_string(), rest.trim_start_matches('/')),
    };
    Some(format!("{server}{PROXY}/{path}"))
}

/// The names of the best checkpoint copies in `dir`: its folders that are neither a checkpoint
/// (`step-N`) nor a folder set aside, sorted.
fn copy_names(dir: &Path) -> io::Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io::Error::new(e.kind(), format!("listing {}: {e}", dir.display()))),
    };
    let mut names = Vec::new();
    for entry in entries.flatten() {
        let Ok(name) = entry.file_name().into_string() else { continue };
        let aside =
            name.starts_with('.') || name.starts_with("step-") || ASIDE.iter().any(|s| name.ends_with(s));
        if !aside && entry.file_type().is_ok_and(|t| t.is_dir()) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// The copy `dir` opened whole: its `manifest.json` and every file, each opened while the
/// manifest read before and after stayed the same (a copy the trainer replaces meanwhile is
/// opened again; an open file stays readable once replaced). `None` when it has no manifest.
fn open_copy(dir: &Path) -> io::Result<Option<OpenedCopy>> {
    let manifest_path = dir.join("manifest.json");
    let named = |e: io::Error, path: &Path| io::Error::new(e.kind(), format!("{}: {e}", path.display()));
    for _ in 0..20 {
        let before = match std::fs::read(&manifest_path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound && !dir.exists() => return Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::thread::sleep(std::time::Duration::from_millis(50));
                continue;
            }
            Err(e) => return Err(named(e, &manifest_path)),
        };
        let Ok(opened) = open_files(dir) else {
            std::thread::sleep(std::time::Duration::from_millis(50));
            continue;
        };
        if std::fs::read(&manifest_path).is_ok_and(|after| after == before) {
            return Ok(Some((before, opened)));
        }
    }
    Err(io::Error::other(format!(
        "{}: the copy kept changing while it was opened for the upload",
        dir.display()
    )))
}

/// Every regular file of `dir`, opened, sorted by name (`manifest.json` among them).
fn open_files(dir: &Path) -> io::Result<Vec<(String, File)>> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_file()
            && let Ok(name) = entry.file_name().into_string()
        {
            files.push((name, File::open(entry.path())?));
        }
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(files)
}

/// `segment` percent-encoded for a URL's path (every byte but RFC 3986's unreserved ones).
pub(super) fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}
