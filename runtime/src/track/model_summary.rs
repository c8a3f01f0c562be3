//! The model summary at the start of training: every parameter tensor by its path in the module
//! tree, each top-level module's total, the model's total, in parameters and bytes.

use std::fmt;

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{Bool, DType, Int, Shape, Tensor};

use crate::callback::{Callback, Context};
use crate::error::Error;
use crate::error::Result;
use crate::state::write_atomic;

/// One parameter tensor of a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamTensor {
    /// Its path in the module tree, the field names joined with `.` (`fc1.weight`; a `Vec` of
    /// modules contributes its index: `layers.0.weight`).
    pub path: String,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its element type: the tensor's own, or for a parameter not initialized yet, the default
    /// type of its device (what it will be created with).
    pub dtype: DType,
    /// Its number of elements.
    pub params: usize,
    /// Its size in bytes: `params` times the element type's size. A quantized tensor counts its
    /// quantized values (sub-byte values rounded up to whole bytes), not its scales.
    pub bytes: usize,
}

/// The parameters of one top-level module of a model (a field of the model's struct).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleParams {
    /// The field's name (`fc1`), the first part of the paths of its tensors.
    pub name: String,
    /// Its number of parameters.
    pub params: usize,
    /// Its size in bytes.
    pub bytes: usize,
}

/// A model's parameters: every tensor by its path in the module tree, its shape, element type,
/// number of elements and bytes ([`ModelParams::of`]). Its `Display` is the table
/// [`ModelSummary`] prints and writes, one line per tensor, a total line after each top-level
/// module with more than one tensor (or a nested path), and the model's total:
///
/// ```text
/// model summary: Net
///   parameter    shape   dtype  params  bytes
///   fc1.weight   [2, 4]  f32         8     32
///   fc1.bias     [4]     f32         4     16
///   fc1                             12     48
///   scale        [5]     f64         5     40
///   total                           17     88 (88 B)
/// ```
///
/// The parameters counted are those burn's `Module::visit` reaches: float tensors (what burn's
/// `num_params` counts, running statistics such as batch norm's included), and int and bool
/// parameters if the model has any. Reading them reads nothing from the device and initializes
/// no lazy parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelParams {
    /// The model's type name, without its module path.
    pub model: String,
    /// Every parameter tensor, in the order the module visits them.
    pub tensors: Vec<ParamTensor>,
}

impl ModelParams {
    /// The parameters of `model`.
    pub fn of<M: Module>(model: &M) -> ModelParams {
        let mut visitor = Collect { path: Vec::new(), tensors: Vec::new() };
        model.visit(&mut visitor);
        ModelParams { model: short_name(std::any::type_name::<M>()), tensors: visitor.tensors }
    }

    /// The number of parameters in all.
    pub fn total_params(&self) -> usize {
        self.tensors.iter().map(|t| t.params).sum()
    }

    /// The size of every parameter in bytes.
    pub fn total_bytes(&self) -> usize {
        self.tensors.iter().map(|t| t.bytes).sum()
    }

    /// Each top-level module (the first part of the tensors' paths), with its totals, in order.
    pub fn modules(&self) -> Vec<ModuleParams> {
        let mut modules: Vec<ModuleParams> = Vec::new();
        for tensor in &self.tensors {
            let name = top_level(&tensor.path);
            match modules.iter_mut().find(|m| m.name == name) {
                Some(module) => {
                    module.params += tensor.params;
                    module.bytes += tensor.bytes;
                }
                None => modules.push(ModuleParams {
                    name: name.to_string(),
                    params: tensor.params,
                    bytes: tensor.bytes,
                }),
            }
        }
        modules
    }
}

/// The first part of `path` (all of it when it has one part).
fn top_level(path: &str) -> &str {
    path.split('.').next().unwrap_or(path)
}

/// `std::any::type_name` without module paths: `my_crate::model::Net<T>` -> `Net<T>`.
fn short_name(name: &str) -> String {
    let mut out = String::new();
    let mut word = String::new();
    for c in name.chars() {
        if c.is_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
        } else {
            out.push_str(word.rsplit("::").next().unwrap_or(&word));
            word.clear();
            out.push(c);
        }
    }
    out.push_str(word.rsplit("::").next().unwrap_or(&word));
    out
}

/// The element type's name as burn writes it in Rust (`f32`, `bf16`, `i64`, `bool`).
fn dtype_name(dtype: DType) -> String {
    match dtype {
        DType::F64 => "f64".into(),
        DType::F32 => "f32".into(),
        DType::Flex32 => "flex32".into(),
        DType::F16 => "f16".into(),
        DType::BF16 => "bf16".into(),
        DType::I64 => "i64".into(),
        DType::I32 => "i32".into(),
        DType::I16 => "i16".into(),
        DType::I8 => "i8".into(),
        DType::U64 => "u64".into(),
        DType::U32 => "u32".into(),
        DType::U16 => "u16".into(),
        DType::U8 => "u8".into(),
        DType::Bool(_) => "bool".into(),
        DType::QFloat(scheme) => format!("q{}", scheme.size_bits_value()),
    }
}

/// The bytes `elements` values of `dtype` take.
fn bytes_of(dtype: DType, elements: usize) -> usize {
    match dtype {
        DType::QFloat(scheme) => (elements * scheme.size_bits_value()).div_ceil(8),
        _ => elements * dtype.size(),
    }
}

/// `bytes` as a person reads it: `108 B`, `1.5 KiB`, `3.20 MiB`, `1.07 GiB`.
fn human_bytes(bytes: usize) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    let decimals = if value < 10.0 {
        2
    } else if value < 100.0 {
        1
    } else {
        0
    };
    format!("{value:.decimals$} {}", UNITS[unit])
}

/// Walks the module tree, keeping the path of field names.
struct Collect {
    path: Vec<String>,
    tensors: Vec<ParamTensor>,
}

impl Collect {
    fn push(&mut self, shape: Shape, dtype: DType) {
        let params = shape.num_elements();
        self.tensors.push(ParamTensor {
            path: self.path.join("."),
            shape: shape.to_vec(),
            dtype,
            params,
            bytes: bytes_of(dtype, params),
        });
    }
}

impl ModuleVisitor for Collect {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }
    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        // `val()` would initialize a lazy parameter (drawing from the generator out of turn).
        let dtype = if param.is_initialized() {
            param.val().dtype()
        } else {
            param.lazy_device().settings().float_dtype.into()
        };
        self.push(param.lazy_shape(), dtype);
    }
    fn visit_int<const D: usize>(&mut self, param: &Param<Tensor<D, Int>>) {
        let dtype = if param.is_initialized() {
            param.val().dtype()
        } else {
            param.lazy_device().settings().int_dtype.into()
        };
        self.push(param.lazy_shape(), dtype);
    }
    fn visit_bool<const D: usize>(&mut self, param: &Param<Tensor<D, Bool>>) {
        let dtype = if param.is_initialized() {
            param.val().dtype()
        } else {
            param.lazy_device().settings().bool_dtype.into()
        };
        self.push(param.lazy_shape(), dtype);
    }
}

impl fmt::Display for ModelParams {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shape = |t: &ParamTensor| {
            let dims: Vec<String> = t.shape.iter().map(ToString::to_string).collect();
            format!("[{}]", dims.join(", "))
        };
        let modules = self.modules();
        // A module's total line, when it says more than its one tensor's line.
        let totals: Vec<bool> = modules
            .iter()
            .map(|m| {
                self.tensors.iter().filter(|t| top_level(&t.path) == m.name).count() > 1
                    || self.tensors.iter().any(|t| top_level(&t.path) == m.name && t.path != m.name)
            })
            .collect();
        let (total_params, total_bytes) = (self.total_params(), self.total_bytes());
        let path_width =
            self.tensors.iter().map(|t| t.path.len()).chain(["parameter".len(), "total".len()]).max();
        let path_width = path_width.unwrap_or(0);
        let shape_width =
            self.tensors.iter().map(|t| shape(t).len()).chain(["shape".len()]).max().unwrap_or(0);
        let dtype_width =
            self.tensors.iter().map(|t| dtype_name(t.dtype).len()).chain(["dtype".len()]).max().unwrap_or(0);
        let params_width = total_params.to_string().len().max("params".len());
        let bytes_width = total_bytes.to_string().len().max("bytes".len());
        writeln!(f, "model summary: {}", self.model)?;
        // One line of the table; `note` follows the bytes column.
        let mut row = |path: &str,
                       shape: &str,
                       dtype: &str,
                       params: &dyn fmt::Display,
                       bytes: &dyn fmt::Display,
                       note: &str| {
            writeln!(
                f,
                "  {path:<path_width$}  {shape:<shape_width$}  {dtype:<dtype_width$}  {params:>params_width$}  {bytes:>bytes_width$}{note}"
            )
        };
        row("parameter", "shape", "dtype", &"params", &"bytes", "")?;
        for (module, total) in modules.iter().zip(&totals) {
            for tensor in self.tensors.iter().filter(|t| top_level(&t.path) == module.name) {
                row(
                    &tensor.path,
                    &shape(tensor),
                    &dtype_name(tensor.dtype),
                    &tensor.params,
                    &tensor.bytes,
                    "",
                )?;
            }
            if *total {
                row(&module.name, "", "", &module.params, &module.bytes, "")?;
            }
        }
        row("total", "", "", &total_params, &total_bytes, &format!(" ({})", human_bytes(total_bytes)))
    }
}

/// Prints the model's parameters at the start of training ([`ModelParams`]: each tensor by its
/// path in the module tree, each top-level module's total, the model's total, in parameters and
/// in bytes of each tensor's own element type) on stdout, writes the same table to
/// `model_summary.txt` in the log directory ([`ModelSummary::FILE`]), and puts it as the text
/// `model_summary` for TensorBoard (its text tab). Keras's `model.summary()`, Lightning's
/// `ModelSummary` callback.
///
/// It runs once, at `before_train` (a resumed run writes it again), on the chief only; it
/// declares no fetch and takes no other event, so it costs nothing per step. Reading the
/// parameters' shapes and types reads nothing from the device. One of the
/// [`DefaultCallbacks`](crate::trainer::DefaultCallbacks) (`model_summary`; `None` turns it off).
///
/// ```
/// use burn_stoker::track::ModelSummary;
///
/// // Write model_summary.txt, print nothing.
/// let summary = ModelSummary::new().print(false);
/// # let _ = summary;
/// ```
#[derive(Debug, Clone)]
pub struct ModelSummary {
    print: bool,
    params: Option<ModelParams>,
}
crate::kind::kind!(ModelSummary);

impl Default for ModelSummary {
    fn default() -> Self {
        ModelSummary::new()
    }
}

impl ModelSummary {
    /// The file written in the log directory.
    pub const FILE: &'static str = "model_summary.txt";
    /// The name of the text put for TensorBoard.
    pub const TEXT: &'static str = "model_summary";

    /// Print on stdout and write the file.
    pub fn new() -> Self {
        ModelSummary { print: true, params: None }
    }

    /// Whether to print the table on stdout (on by default); the file is written either way.
    pub fn print(mut self, enable: bool) -> Self {
        self.print = enable;
        self
    }

    /// The table of the model seen at the last `before_train` (lend the callback as `&mut` to
    /// read it after training).
    pub fn params(&self) -> Option<&ModelParams> {
        self.params.as_ref()
    }
}

impl<M: Module> Callback<M> for ModelSummary {
    fn takes_after_batch(&self) -> bool {
        false
    }
    fn before_train(&mut self, ctx: &mut Context<'_, M>) -> Result<()> {
        let params = ModelParams::of(ctx.model());
        let text = params.to_string();
        if self.print {
            print!("{text}");
        }
        let path = ctx.log_dir().join(ModelSummary::FILE);
        write_atomic(&path, text.as_bytes()).map_err(|e| Error::io(&path, e))?;
        // Four spaces: TensorBoard's text tab reads Markdown, where they keep the columns.
        let markdown: String = text.lines().map(|line| format!("    {line}\n")).collect();
        ctx.monitors().put_text(ModelSummary::TEXT, &markdown);
        self.params = Some(params);
        Ok(())
    }
}
