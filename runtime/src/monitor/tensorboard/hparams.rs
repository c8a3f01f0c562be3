//! TensorBoard's HParams plugin data (the *HParams* tab), encoded by hand as the rest of the
//! event file: `tensorboard.hparams.HParamsPluginData` (version 0) in a `Summary.Value`'s
//! `metadata.plugin_data` (plugin `"hparams"`), with the empty `DT_FLOAT` tensor TensorBoard's
//! own `hparams` summaries carry (`tensorboard/plugins/hparams/metadata.py`, `summary_v2.py`).

use std::collections::BTreeSet;

use super::proto::Proto;

/// The tag of the experiment summary: every hyper-parameter's name and type, every metric's tag.
pub(super) const EXPERIMENT_TAG: &str = "_hparams_/experiment";
/// The tag of a session's start: its hyper-parameters' values.
pub(super) const SESSION_START_INFO_TAG: &str = "_hparams_/session_start_info";
/// The tag of a session's end: how it ended.
pub(super) const SESSION_END_INFO_TAG: &str = "_hparams_/session_end_info";

/// A hyper-parameter's value as TensorBoard's *HParams* tab shows it (a
/// `google.protobuf.Value`): a number, a text or a flag.
///
/// ```
/// use burn_stoker::monitor::HParamValue;
///
/// assert_eq!(HParamValue::from(0.5), HParamValue::Number(0.5));
/// assert_eq!(HParamValue::from(32u32), HParamValue::Number(32.0));
/// assert_eq!(HParamValue::from("adam"), HParamValue::Text("adam".into()));
/// assert_eq!(HParamValue::from(true), HParamValue::Bool(true));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum HParamValue {
    /// A number (the tab's `DATA_TYPE_FLOAT64`).
    Number(f64),
    /// A text (`DATA_TYPE_STRING`).
    Text(String),
    /// A flag (`DATA_TYPE_BOOL`).
    Bool(bool),
}

impl From<f64> for HParamValue {
    fn from(value: f64) -> Self {
        HParamValue::Number(value)
    }
}
impl From<f32> for HParamValue {
    fn from(value: f32) -> Self {
        HParamValue::Number(f64::from(value))
    }
}
impl From<u32> for HParamValue {
    fn from(value: u32) -> Self {
        HParamValue::Number(f64::from(value))
    }
}
impl From<i32> for HParamValue {
    fn from(value: i32) -> Self {
        HParamValue::Number(f64::from(value))
    }
}
impl From<usize> for HParamValue {
    fn from(value: usize) -> Self {
        HParamValue::Number(value as f64)
    }
}
impl From<bool> for HParamValue {
    fn from(value: bool) -> Self {
        HParamValue::Bool(value)
    }
}
impl From<&str> for HParamValue {
    fn from(value: &str) -> Self {
        HParamValue::Text(value.to_owned())
    }
}
impl From<String> for HParamValue {
    fn from(value: String) -> Self {
        HParamValue::Text(value)
    }
}

/// How an HParams session ended (`tensorboard.hparams.Status`), the *HParams* tab's `Status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionStatus {
    /// Not known (`STATUS_UNKNOWN`).
    Unknown = 0,
    /// Training finished, or a callback stopped it (`STATUS_SUCCESS`).
    Success = 1,
    /// An error, or a loss or weights no longer finite, ended it (`STATUS_FAILURE`).
    Failure = 2,
    /// Still going (`STATUS_RUNNING`).
    Running = 3,
}

/// `google.protobuf.Value`: `number_value` (2), `string_value` (3), `bool_value` (4).
fn value_proto(value: &HParamValue) -> Proto {
    let mut proto = Proto::default();
    match value {
        HParamValue::Number(v) => proto.double(2, *v),
        HParamValue::Text(v) => proto.bytes(3, v.as_bytes()),
        HParamValue::Bool(v) => proto.varint(4, u64::from(*v)),
    }
    proto
}

/// `HParamsPluginData` with its oneof `data` set to field `field`; `version` is 0, proto3's
/// default, so it is not written (as TensorBoard's own writer leaves it out).
fn plugin_data(field: u32, data: &Proto) -> Proto {
    let mut proto = Proto::default();
    proto.message(field, data);
    proto
}

/// `SessionStartInfo` (`session_start_info`, 3): the `hparams` map (1) and `start_time_secs` (5).
pub(super) fn session_start(hparams: &[(String, HParamValue)], start_time: f64) -> Proto {
    let mut info = Proto::default();
    for (name, value) in hparams {
        let mut entry = Proto::default();
        entry.bytes(1, name.as_bytes());
        entry.message(2, &value_proto(value));
        info.message(1, &entry);
    }
    info.double(5, start_time);
    plugin_data(3, &info)
}

/// `SessionEndInfo` (`session_end_info`, 4): `status` (1) and `end_time_secs` (2).
pub(super) fn session_end(status: SessionStatus, end_time: f64) -> Proto {
    let mut info = Proto::default();
    info.varint(1, status as u64);
    info.double(2, end_time);
    plugin_data(4, &info)
}

/// `Experiment` (`experiment`, 2): `time_created_secs` (3), an `HParamInfo` (4: `name` 1, `type`
/// 4) per hyper-parameter and a `MetricInfo` (5: `name` 1, a `MetricName` with the tag, 2, in
/// the session's own run, group "") per scalar tag.
pub(super) fn experiment(hparams: &[(String, HParamValue)], metrics: &BTreeSet<String>, time: f64) -> Proto {
    let mut experiment = Proto::default();
    experiment.double(3, time);
    for (name, value) in hparams {
        let mut info = Proto::default();
        info.bytes(1, name.as_bytes());
        let data_type = match value {
            HParamValue::Text(_) => 1,
            HParamValue::Bool(_) => 2,
            HParamValue::Number(_) => 3,
        };
        info.varint(4, data_type);
        experiment.message(4, &info);
    }
    for tag in metrics {
        let mut name = Proto::default();
        name.bytes(2, tag.as_bytes());
        let mut info = Proto::default();
        info.message(1, &name);
        experiment.message(5, &info);
    }
    plugin_data(2, &experiment)
}

/// The `Summary.Value` of one piece of plugin data: its tag (1), the empty `DT_FLOAT` tensor of
/// shape `[0]` (8) and `metadata.plugin_data` (9, then 1) naming the plugin (1) with the content (2).
pub(super) fn summary_value(tag: &str, data: &Proto) -> Proto {
    let mut plugin = Proto::default();
    plugin.bytes(1, b"hparams");
    plugin.message(2, data);
    let mut metadata = Proto::default();
    metadata.message(1, &plugin);
    let mut shape = Proto::default();
    shape.message(2, &Proto::default());
    let mut tensor = Proto::default();
    tensor.varint(1, 1);
    tensor.message(2, &shape);
    let mut value = Proto::default();
    value.bytes(1, tag.as_bytes());
    value.message(8, &tensor);
    value.message(9, &metadata);
    value
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes of TensorBoard's `metadata.NULL_TENSOR` (`SerializeToString()`).
    #[test]
    fn the_empty_tensor_is_tensorboards() {
        let value = summary_value("t", &Proto::default());
        let tensor = [0x08, 0x01, 0x12, 0x02, 0x12, 0x00];
        assert!(value.0.windows(8).any(|w| w[..2] == [0x42, 6] && w[2..] == tensor), "{:?}", value.0);
    }
}
