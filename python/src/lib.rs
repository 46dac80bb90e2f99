//! `vta._native`: the extension module of the `vta` Python package.
//!
//! It wraps the library crates the `vta` CLI is built from (the same calls, the same error
//! messages): configs ([`isa::HwConfig`]), compiling ONNX models ([`compiler::compile`]),
//! running compiled models ([`vta_runtime`], on the devices `vta run --backend` opens),
//! design-space exploration ([`dse`]) and hardware generation ([`vta_hw`]). The pure-Python
//! package `vta` (python/vta) re-exports these with docstrings, stubs and small conveniences.
//!
//! Long calls release the GIL. Runs check for Ctrl-C (`PyErr_CheckSignals`) after every step
//! and stop there; compiles, sweeps and syntheses run on a worker thread that the calling
//! thread polls, so Ctrl-C returns at once (the worker finishes in the background, its result
//! dropped).

use std::path::PathBuf;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use compiler::compile::{BackendOptions, Compiled, LayerReport};
use compiler::frontend::{FrontendError, FrontendOptions, RequantFidelity, WeightClip};
use isa::HwConfig;
use numpy::{IntoPyArray, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use vta::cmd::run::{device, run_document, run_samples_until, Backend, RtlArgs, Samples};
use vta_runtime::budget::DEFAULT_MEMORY_BUDGET;
use vta_runtime::io as runtime_io;
use vta_runtime::model::Model;
use vta_runtime::tensor::Tensor;

create_exception!(
    _native,
    VtaError,
    PyException,
    "Base class of every error the toolkit raises; the message is the CLI's."
);
create_exception!(
    _native,
    ConfigError,
    VtaError,
    "An accelerator config was refused: an unknown preset or file, invalid JSON, or a field \
     out of range (the message names the field)."
);
create_exception!(
    _native,
    ModelFileError,
    VtaError,
    "A model file could not be read: not a file, not an ONNX model, or not a compiled model \
     (or one for another config)."
);
create_exception!(
    _native,
    CompileError,
    VtaError,
    "A model could not be compiled (unsupported operators, bad calibration data, ...)."
);
create_exception!(
    _native,
    RunError,
    VtaError,
    "A compiled model could not be run, or its run failed on the device."
);
create_exception!(
    _native,
    InputError,
    RunError,
    "The inputs given to `CompiledModel.run` do not fit the model: unknown or missing input \
     names, or a wrong element type or shape."
);
create_exception!(
    _native,
    BackendError,
    RunError,
    "The backend could not be opened: an unknown backend string, an RTL model that could not \
     be built, a remote device that could not be reached."
);
create_exception!(
    _native,
    CheckError,
    RunError,
    "`check=True` found a layer whose output differs from the integer reference."
);
create_exception!(
    _native,
    HardwareError,
    VtaError,
    "Generating, synthesizing or building the accelerator's hardware failed."
);
create_exception!(
    _native,
    DseError,
    VtaError,
    "A design-space exploration could not be run."
);

/// The message of an error and its causes, as the CLI prints it after `error: `.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = String::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cur {
        let s = c.to_string();
        if !msg.contains(&s) {
            if !msg.is_empty() {
                msg.push_str(": ");
            }
            msg.push_str(&s);
        }
        cur = c.source();
    }
    msg
}

fn config_err(e: isa::config::ConfigError) -> PyErr {
    ConfigError::new_err(chain(&e))
}

/// A compile error: an undecodable model is a [`ModelFileError`], the rest [`CompileError`].
fn compile_err(e: compiler::compile::Error) -> PyErr {
    match &e {
        compiler::compile::Error::Frontend(FrontendError::Onnx(_)) => {
            ModelFileError::new_err(chain(&e))
        }
        _ => CompileError::new_err(chain(&e)),
    }
}

// ---------------------------------------------------------------------------------------
// Worker threads: long calls release the GIL and stay interruptible.

/// Runs `work` on a worker thread with the GIL released, polling for Ctrl-C every 50 ms
/// (`PyErr_CheckSignals`); on a signal the Python exception (KeyboardInterrupt) is raised at
/// once, and the worker finishes in the background, its result dropped (compiles, sweeps
/// and yosys runs have no way to stop midway).
fn interruptible<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("vta-worker".into())
        .spawn(move || {
            let _ = tx.send(work());
        })
        .map_err(|e| VtaError::new_err(format!("cannot start a worker thread: {e}")))?;
    let mut rx = rx;
    loop {
        let (got, back) = py.detach(move || {
            let got = rx.recv_timeout(Duration::from_millis(50));
            (got, rx)
        });
        rx = back;
        match got {
            Ok(v) => return Ok(v),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(VtaError::new_err("the worker thread panicked"))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                py.check_signals()?;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Config

/// The fields of a config, in the order of `HwConfig`, with their JSON keys.
const FIELDS: [(&str, &str); 19] = [
    ("target", "TARGET"),
    ("hw_ver", "HW_VER"),
    ("log_inp_width", "LOG_INP_WIDTH"),
    ("log_wgt_width", "LOG_WGT_WIDTH"),
    ("log_acc_width", "LOG_ACC_WIDTH"),
    ("log_batch", "LOG_BATCH"),
    ("log_block", "LOG_BLOCK"),
    ("log_block_in", "LOG_BLOCK_IN"),
    ("log_block_out", "LOG_BLOCK_OUT"),
    ("log_uop_buff_size", "LOG_UOP_BUFF_SIZE"),
    ("log_inp_buff_size", "LOG_INP_BUFF_SIZE"),
    ("log_wgt_buff_size", "LOG_WGT_BUFF_SIZE"),
    ("log_acc_buff_size", "LOG_ACC_BUFF_SIZE"),
    ("axi_data_width", "AXI_DATA_WIDTH"),
    ("cmd_queue_depth", "CMD_QUEUE_DEPTH"),
    ("token_queue_depth", "TOKEN_QUEUE_DEPTH"),
    ("clock_mhz", "CLOCK_MHZ"),
    ("alu_mul", "ALU_MUL"),
    ("alu_lut", "ALU_LUT"),
];

/// An accelerator configuration (immutable): VTA's `vta_config.json` plus extensions.
///
/// `Config()` is the `default` preset; `Config("small")` a preset, `Config("my.json")` a
/// config file; keyword arguments override fields, e.g. `Config("default", log_batch=1)`.
/// Every field is a property (`cfg.log_block_in`); `replace(**fields)` gives a modified copy.
/// Invalid values raise `ConfigError` naming the field and its allowed range.
#[pyclass(frozen, module = "vta", name = "Config")]
#[derive(Clone)]
struct PyConfig {
    /// The config as native JSON (what `to_json` returns): its identity.
    json: String,
    /// Where the config came from: a preset's name, a file, or overrides of one.
    #[pyo3(get)]
    origin: String,
}

impl PyConfig {
    fn from_cfg(cfg: &HwConfig, origin: String) -> PyConfig {
        PyConfig {
            json: cfg.to_json(),
            origin,
        }
    }

    fn cfg(&self) -> HwConfig {
        HwConfig::from_json_str(&self.json, &self.origin).expect("a Config holds a valid config")
    }

    /// `self` with `fields` (Python keyword arguments) applied, validated.
    fn with_fields(cfg: &HwConfig, fields: &Bound<'_, PyDict>, origin: &str) -> PyResult<PyConfig> {
        let mut doc: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&cfg.to_json()).expect("a config is JSON");
        let mut applied = Vec::new();
        for (k, v) in fields.iter() {
            let name: String = k.extract()?;
            let Some(&(_, key)) = FIELDS.iter().find(|f| f.0 == name) else {
                let known: Vec<&str> = FIELDS.iter().map(|f| f.0).collect();
                return Err(ConfigError::new_err(format!(
                    "unknown config field '{name}'; the fields are {}",
                    known.join(", ")
                )));
            };
            let value: serde_json::Value = match key {
                "TARGET" | "HW_VER" => match v.extract::<String>() {
                    Ok(s) => s.into(),
                    Err(_) => {
                        return Err(ConfigError::new_err(format!(
                            "config field {name} ({key}) must be a string, got {}",
                            v.repr()?
                        )))
                    }
                },
                "ALU_MUL" | "ALU_LUT" => match v.extract::<bool>() {
                    Ok(b) => b.into(),
                    Err(_) => {
                        return Err(ConfigError::new_err(format!(
                            "config field {name} ({key}) must be True or False, got {}",
                            v.repr()?
                        )))
                    }
                },
                _ => {
                    if v.is_instance_of::<pyo3::types::PyBool>() {
                        return Err(ConfigError::new_err(format!(
                            "config field {name} ({key}) must be a non-negative integer, got {}",
                            v.repr()?
                        )));
                    }
                    match v.extract::<u32>() {
                        Ok(n) => n.into(),
                        Err(_) => {
                            return Err(ConfigError::new_err(format!(
                            "config field {name} ({key}) must be a non-negative integer, got {}",
                            v.repr()?
                        )))
                        }
                    }
                }
            };
            match key {
                "LOG_BLOCK" => {
                    doc.remove("LOG_BLOCK_IN");
                    doc.remove("LOG_BLOCK_OUT");
                }
                "LOG_BLOCK_IN" | "LOG_BLOCK_OUT" => {
                    if let Some(b) = doc.remove("LOG_BLOCK") {
                        doc.insert("LOG_BLOCK_IN".into(), b.clone());
                        doc.insert("LOG_BLOCK_OUT".into(), b);
                    }
                }
                _ => {}
            }
            doc.insert(key.into(), value);
            applied.push(format!("{name}={}", v.repr()?));
        }
        // A rectangular block whose halves became equal is written back as LOG_BLOCK.
        if let (Some(i), Some(o)) = (doc.get("LOG_BLOCK_IN"), doc.get("LOG_BLOCK_OUT")) {
            if i == o {
                let b = i.clone();
                doc.remove("LOG_BLOCK_IN");
                doc.remove("LOG_BLOCK_OUT");
                doc.insert("LOG_BLOCK".into(), b);
            }
        }
        let origin = if applied.is_empty() {
            origin.to_string()
        } else {
            format!("{origin} with {}", applied.join(", "))
        };
        let text = serde_json::Value::Object(doc).to_string();
        let cfg = HwConfig::from_json_str(&text, &origin).map_err(config_err)?;
        Ok(PyConfig::from_cfg(&cfg, origin))
    }
}

/// A config from a spec: a `Config`, a preset name, a file path or `None` (the default).
fn config_arg(spec: Option<&Bound<'_, PyAny>>) -> PyResult<Option<HwConfig>> {
    let Some(spec) = spec else { return Ok(None) };
    if spec.is_none() {
        return Ok(None);
    }
    if let Ok(c) = spec.cast::<PyConfig>() {
        return Ok(Some(c.get().cfg()));
    }
    let path: PathBuf = spec.extract().map_err(|_| {
        ConfigError::new_err(format!(
            "config must be a vta.Config, a preset name or a config file path, got {}",
            spec.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    })?;
    Ok(Some(
        HwConfig::load(&path.to_string_lossy()).map_err(config_err)?,
    ))
}

#[pymethods]
impl PyConfig {
    /// Config(spec="default", **fields): a preset name or a config file, with fields overridden.
    #[new]
    #[pyo3(signature = (spec = None, **fields))]
    fn new(spec: Option<&Bound<'_, PyAny>>, fields: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let (cfg, origin) = match spec {
            None => (HwConfig::default(), "preset 'default'".to_string()),
            Some(s) => {
                let cfg = config_arg(Some(s))?.unwrap_or_default();
                let origin = match s.cast::<PyConfig>() {
                    Ok(c) => c.get().origin.clone(),
                    Err(_) => {
                        let p: PathBuf = s.extract()?;
                        if p.exists() {
                            p.display().to_string()
                        } else {
                            format!("preset '{}'", p.display())
                        }
                    }
                };
                (cfg, origin)
            }
        };
        match fields {
            Some(f) if !f.is_empty() => PyConfig::with_fields(&cfg, f, &origin),
            _ => Ok(PyConfig::from_cfg(&cfg, origin)),
        }
    }

    /// A built-in preset by name (see `Config.presets()`).
    #[staticmethod]
    fn preset(name: &str) -> PyResult<Self> {
        let cfg = HwConfig::preset(name).map_err(config_err)?;
        Ok(PyConfig::from_cfg(&cfg, format!("preset '{name}'")))
    }

    /// A config file (VTA's `vta_config.json` format, or what `to_json()` writes).
    #[staticmethod]
    fn from_file(path: PathBuf) -> PyResult<Self> {
        let spec = path.display().to_string();
        let text = std::fs::read_to_string(&path).map_err(|source| {
            config_err(isa::config::ConfigError::Io {
                path: spec.clone(),
                source,
            })
        })?;
        let cfg = HwConfig::from_json_str(&text, &spec).map_err(config_err)?;
        Ok(PyConfig::from_cfg(&cfg, spec))
    }

    /// A config from JSON text (the format of config files).
    #[staticmethod]
    #[pyo3(signature = (text, origin = "JSON text"))]
    fn from_json(text: &str, origin: &str) -> PyResult<Self> {
        let cfg = HwConfig::from_json_str(text, origin).map_err(config_err)?;
        Ok(PyConfig::from_cfg(&cfg, origin.to_string()))
    }

    /// The built-in presets: name -> one-line description.
    #[staticmethod]
    fn presets(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
        let d = PyDict::new(py);
        for (name, desc, _) in isa::PRESETS {
            d.set_item(name, desc)?;
        }
        Ok(d)
    }

    /// A copy with some fields changed, e.g. `cfg.replace(log_block=5, axi_data_width=128)`.
    #[pyo3(signature = (**fields))]
    fn replace(&self, fields: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        match fields {
            Some(f) if !f.is_empty() => PyConfig::with_fields(&self.cfg(), f, &self.origin),
            _ => Ok(self.clone()),
        }
    }

    /// The config as a native JSON config file (`vta config show --native`).
    fn to_json(&self) -> String {
        self.json.clone()
    }

    /// The config and every parameter derived from it (`vta config show --json`).
    fn parameters(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let obj: serde_json::Map<String, serde_json::Value> = self
            .cfg()
            .parameters()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        json_to_py(py, &serde_json::Value::Object(obj))
    }

    /// The config's short name, e.g. `1x16x16_i8w8a32_15_15_18_17`.
    #[getter]
    fn config_string(&self) -> String {
        self.cfg().config_string()
    }

    /// The hash of the ISA-visible fields (compiled models record it).
    #[getter]
    fn isa_hash(&self) -> u64 {
        self.cfg().isa_hash()
    }

    /// `TARGET`: the board or `sim`.
    #[getter]
    fn target(&self) -> String {
        self.cfg().target
    }
    /// `HW_VER`.
    #[getter]
    fn hw_ver(&self) -> String {
        self.cfg().hw_ver
    }
    /// `LOG_INP_WIDTH`: log2 of the input element bits.
    #[getter]
    fn log_inp_width(&self) -> u32 {
        self.cfg().log_inp_width
    }
    /// `LOG_WGT_WIDTH`: log2 of the weight element bits.
    #[getter]
    fn log_wgt_width(&self) -> u32 {
        self.cfg().log_wgt_width
    }
    /// `LOG_ACC_WIDTH`: log2 of the accumulator element bits.
    #[getter]
    fn log_acc_width(&self) -> u32 {
        self.cfg().log_acc_width
    }
    /// `LOG_BATCH`: log2 of the GEMM core's batch.
    #[getter]
    fn log_batch(&self) -> u32 {
        self.cfg().log_batch
    }
    /// `LOG_BLOCK_IN`: log2 of the GEMM core's input block.
    #[getter]
    fn log_block_in(&self) -> u32 {
        self.cfg().log_block_in
    }
    /// `LOG_BLOCK_OUT`: log2 of the GEMM core's output block.
    #[getter]
    fn log_block_out(&self) -> u32 {
        self.cfg().log_block_out
    }
    /// `LOG_BLOCK` of a square block (`None` when BLOCK_IN != BLOCK_OUT).
    #[getter]
    fn log_block(&self) -> Option<u32> {
        let c = self.cfg();
        (c.log_block_in == c.log_block_out).then_some(c.log_block_in)
    }
    /// `LOG_UOP_BUFF_SIZE`: log2 of the micro-op buffer's bytes.
    #[getter]
    fn log_uop_buff_size(&self) -> u32 {
        self.cfg().log_uop_buff_size
    }
    /// `LOG_INP_BUFF_SIZE`: log2 of the input buffer's bytes.
    #[getter]
    fn log_inp_buff_size(&self) -> u32 {
        self.cfg().log_inp_buff_size
    }
    /// `LOG_WGT_BUFF_SIZE`: log2 of the weight buffer's bytes.
    #[getter]
    fn log_wgt_buff_size(&self) -> u32 {
        self.cfg().log_wgt_buff_size
    }
    /// `LOG_ACC_BUFF_SIZE`: log2 of the accumulator buffer's bytes.
    #[getter]
    fn log_acc_buff_size(&self) -> u32 {
        self.cfg().log_acc_buff_size
    }
    /// `AXI_DATA_WIDTH`: bits of the AXI master data bus.
    #[getter]
    fn axi_data_width(&self) -> u32 {
        self.cfg().axi_data_width
    }
    /// `CMD_QUEUE_DEPTH`: entries of each command queue.
    #[getter]
    fn cmd_queue_depth(&self) -> u32 {
        self.cfg().cmd_queue_depth
    }
    /// `TOKEN_QUEUE_DEPTH`: capacity of each dependency-token queue.
    #[getter]
    fn token_queue_depth(&self) -> u32 {
        self.cfg().token_queue_depth
    }
    /// `CLOCK_MHZ`: the target clock.
    #[getter]
    fn clock_mhz(&self) -> u32 {
        self.cfg().clock_mhz
    }
    /// `ALU_MUL`: the ALU implements MUL.
    #[getter]
    fn alu_mul(&self) -> bool {
        self.cfg().alu_mul
    }
    /// `ALU_LUT`: the ALU has the int8 activation table.
    #[getter]
    fn alu_lut(&self) -> bool {
        self.cfg().alu_lut
    }

    fn __repr__(&self) -> String {
        format!(
            "vta.Config('{}' from {})",
            self.cfg().config_string(),
            self.origin
        )
    }

    fn __str__(&self) -> String {
        self.cfg().config_string()
    }

    /// Configs are equal when every field is (wherever they came from).
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<PyConfig>()
            .is_ok_and(|o| o.get().json == self.json)
    }

    fn __hash__(&self) -> u64 {
        isa::container::fnv1a(self.json.as_bytes())
    }
}

// ---------------------------------------------------------------------------------------
// JSON <-> Python

/// A JSON value as Python objects (dict, list, str, int, float, bool, None).
fn json_to_py(py: Python<'_>, v: &serde_json::Value) -> PyResult<Py<PyAny>> {
    use serde_json::Value as V;
    Ok(match v {
        V::Null => py.None(),
        V::Bool(b) => b.into_pyobject(py)?.to_owned().into_any().unbind(),
        V::Number(n) => {
            if let Some(i) = n.as_i64() {
                i.into_pyobject(py)?.into_any().unbind()
            } else if let Some(u) = n.as_u64() {
                u.into_pyobject(py)?.into_any().unbind()
            } else {
                n.as_f64()
                    .unwrap_or(f64::NAN)
                    .into_pyobject(py)?
                    .into_any()
                    .unbind()
            }
        }
        V::String(s) => s.into_pyobject(py)?.into_any().unbind(),
        V::Array(a) => {
            let l = PyList::empty(py);
            for x in a {
                l.append(json_to_py(py, x)?)?;
            }
            l.into_any().unbind()
        }
        V::Object(o) => {
            let d = PyDict::new(py);
            for (k, x) in o {
                d.set_item(k, json_to_py(py, x)?)?;
            }
            d.into_any().unbind()
        }
    })
}

// ---------------------------------------------------------------------------------------
// Tensors

/// A numpy array as a model tensor (float32, int8, uint8, int32 or int64); `what` names it
/// in errors.
fn tensor_from_py(a: &Bound<'_, PyAny>, what: &str, want: &str) -> PyResult<Tensor> {
    macro_rules! try_dtype {
        ($t:ty, $v:ident) => {
            if let Ok(arr) = a.cast::<PyArrayDyn<$t>>() {
                return Ok(Tensor::$v(arr.readonly().as_array().to_owned()));
            }
        };
    }
    try_dtype!(f32, F32);
    try_dtype!(i8, I8);
    try_dtype!(u8, U8);
    try_dtype!(i32, I32);
    try_dtype!(i64, I64);
    match a.cast::<PyUntypedArray>() {
        Ok(u) => Err(InputError::new_err(format!(
            "{what} must be {want}, got a {} array of shape {:?}: model tensors are float32, \
             int8, uint8, int32 or int64 (convert it, e.g. x.astype(np.float32))",
            u.dtype().str()?,
            u.shape()
        ))),
        Err(_) => Err(InputError::new_err(format!(
            "{what} must be a numpy array ({want}), got {}",
            a.get_type().name()?
        ))),
    }
}

fn tensor_to_py(py: Python<'_>, t: Tensor) -> Py<PyAny> {
    match t {
        Tensor::F32(a) => a.into_pyarray(py).into_any().unbind(),
        Tensor::I8(a) => a.into_pyarray(py).into_any().unbind(),
        Tensor::U8(a) => a.into_pyarray(py).into_any().unbind(),
        Tensor::I32(a) => a.into_pyarray(py).into_any().unbind(),
        Tensor::I64(a) => a.into_pyarray(py).into_any().unbind(),
    }
}

// ---------------------------------------------------------------------------------------
// Compiling

/// What `compile` returns beyond the model: the compile report.
struct CompileInfo {
    report: serde_json::Value,
    compile_report: String,
    layer_report: String,
    layers: serde_json::Value,
}

/// The accelerator layers of a compile report as JSON rows.
fn layers_json(c: &Compiled) -> serde_json::Value {
    c.steps
        .iter()
        .map(|s| {
            let (launch, refused) = match &s.report {
                LayerReport::Compiled(l, _) => (Some(*l), None),
                LayerReport::Refused(r) => (None, Some(r.clone())),
            };
            let (tiles, insns) = match &s.report {
                LayerReport::Compiled(_, info) => (Some(info.tiles), Some(info.insns)),
                LayerReport::Refused(_) => (None, None),
            };
            serde_json::json!({
                "step": s.step,
                "name": s.name,
                "kind": s.kind,
                "launch": launch,
                "tiles": tiles,
                "insns": insns,
                "refused": refused,
            })
        })
        .collect()
}

/// compile(onnx, source, config=None, calibration=[], bit_exact=False, launch_per_layer=False,
/// depthwise_on_gemm=False, input_shapes={}, memory_budget=None, split_branches=False,
/// weight_clip="auto") -> CompiledModel
///
/// Compiles ONNX bytes (`source` names the model in messages) for a config. The `vta`
/// package's `vta.compile` takes paths and `onnx.ModelProto`s too.
#[pyfunction]
#[pyo3(signature = (onnx, source, config = None, calibration = Vec::new(), bit_exact = false,
    launch_per_layer = false, depthwise_on_gemm = false, input_shapes = None, memory_budget = None,
    split_branches = false, weight_clip = "auto"))]
#[allow(clippy::too_many_arguments)]
fn compile(
    py: Python<'_>,
    onnx: Vec<u8>,
    source: String,
    config: Option<&Bound<'_, PyAny>>,
    calibration: Vec<Bound<'_, PyAny>>,
    bit_exact: bool,
    launch_per_layer: bool,
    depthwise_on_gemm: bool,
    input_shapes: Option<Vec<(String, Vec<usize>)>>,
    memory_budget: Option<u64>,
    split_branches: bool,
    weight_clip: &str,
) -> PyResult<PyCompiledModel> {
    let weight_clip = match weight_clip {
        "auto" => WeightClip::Auto,
        "max" => WeightClip::Max,
        "min-error" | "min_error" => WeightClip::MinError,
        other => {
            return Err(PyValueError::new_err(format!(
                "weight_clip must be \"auto\", \"max\" or \"min-error\", got {other:?}"
            )))
        }
    };
    let cfg = config_arg(config)?.unwrap_or_default();
    let mut calib = Vec::new();
    for (i, c) in calibration.iter().enumerate() {
        let arr = c.cast::<PyArrayDyn<f32>>().map_err(|_| {
            CompileError::new_err(format!(
                "calibration[{i}] must be a float32 numpy array (samples of the model's input)"
            ))
        })?;
        calib.push(arr.readonly().as_array().to_owned());
    }
    let opts = FrontendOptions {
        fidelity: if bit_exact {
            RequantFidelity::BitExact
        } else {
            RequantFidelity::WithinOneLsb
        },
        memory_budget: memory_budget.unwrap_or(DEFAULT_MEMORY_BUDGET),
        input_shapes: input_shapes.unwrap_or_default(),
        weight_clip,
        ..Default::default()
    };
    let backend = BackendOptions {
        launch_per_layer,
        depthwise_on_gemm,
        split_branches,
    };
    let compiled = interruptible(py, move || {
        Compiled::compile_observed(onnx, &source, &calib, &cfg, &opts, &backend, &mut |_| {})
    })?
    .map_err(compile_err)?;
    let info = CompileInfo {
        report: compiled.report_json(),
        compile_report: compiled.compile_report(),
        layer_report: compiled.layer_report(),
        layers: layers_json(&compiled),
    };
    Ok(PyCompiledModel {
        model: Arc::new(compiled.model),
        info: Some(Arc::new(info)),
        file: None,
    })
}

/// load(data, name, config=None, memory_budget=None) -> CompiledModel
///
/// Reads a compiled model (the bytes of a `.vtab` file; `name` names it in messages), to
/// run on `config` (whose ISA must match) or its own config.
#[pyfunction]
#[pyo3(signature = (data, name, config = None, memory_budget = None))]
fn load(
    data: &[u8],
    name: String,
    config: Option<&Bound<'_, PyAny>>,
    memory_budget: Option<u64>,
) -> PyResult<PyCompiledModel> {
    let select = config_arg(config)?;
    let model = Model::read(
        data,
        &name,
        select.as_ref(),
        memory_budget.unwrap_or(DEFAULT_MEMORY_BUDGET),
    )
    .map_err(|e| ModelFileError::new_err(chain(&e)))?;
    Ok(PyCompiledModel {
        model: Arc::new(model),
        info: None,
        file: Some(name),
    })
}

// ---------------------------------------------------------------------------------------
// Compiled models and runs

/// A compiled model: the plan and the accelerator programs for one config, and (when it came
/// from `vta.compile`) the compile report. Run it with `run`, save it with `save`.
#[pyclass(frozen, module = "vta", name = "CompiledModel")]
struct PyCompiledModel {
    model: Arc<Model>,
    info: Option<Arc<CompileInfo>>,
    /// The file it was loaded from.
    file: Option<String>,
}

impl PyCompiledModel {
    fn input_names(&self) -> Vec<String> {
        let p = &self.model.plan;
        p.inputs.iter().map(|&v| p.values[v].name.clone()).collect()
    }

    /// The inputs given (a dict by name, a list/tuple by position, or one array) as tensors
    /// in the model's input order.
    fn read_inputs(&self, inputs: &Bound<'_, PyAny>) -> PyResult<Vec<Tensor>> {
        let m = &self.model;
        let names = self.input_names();
        let facts: Vec<String> = m
            .plan
            .inputs
            .iter()
            .map(|&v| m.plan.values[v].fact.to_string())
            .collect();
        let mut slots: Vec<Option<Tensor>> = vec![None; names.len()];
        if let Ok(d) = inputs.cast::<PyDict>() {
            for (k, v) in d.iter() {
                let name: String = k.extract().map_err(|_| {
                    InputError::new_err(format!(
                        "input names must be strings, got {}",
                        k.repr().map(|r| r.to_string()).unwrap_or_default()
                    ))
                })?;
                let Some(i) = names.iter().position(|n| *n == name) else {
                    return Err(InputError::new_err(format!(
                        "the model has no input named '{name}'; its inputs are {}",
                        m.input_list()
                    )));
                };
                slots[i] = Some(tensor_from_py(&v, &format!("input '{name}'"), &facts[i])?);
            }
        } else if inputs.is_instance_of::<PyList>() || inputs.is_instance_of::<PyTuple>() {
            let items: Vec<Bound<'_, PyAny>> = inputs.extract()?;
            if items.len() > names.len() {
                return Err(InputError::new_err(format!(
                    "{} inputs given, but the model has {} input(s) ({})",
                    items.len(),
                    names.len(),
                    m.input_list()
                )));
            }
            for (i, v) in items.iter().enumerate() {
                slots[i] = Some(tensor_from_py(
                    v,
                    &format!("input '{}'", names[i]),
                    &facts[i],
                )?);
            }
        } else {
            if names.len() != 1 {
                return Err(InputError::new_err(format!(
                    "the model has {} inputs ({}): give a dict by name or a list",
                    names.len(),
                    m.input_list()
                )));
            }
            slots[0] = Some(tensor_from_py(
                inputs,
                &format!("input '{}'", names[0]),
                &facts[0],
            )?);
        }
        let missing: Vec<String> = slots
            .iter()
            .zip(names.iter().zip(&facts))
            .filter(|(s, _)| s.is_none())
            .map(|(_, (n, f))| format!("'{n}' {f}"))
            .collect();
        if !missing.is_empty() {
            return Err(InputError::new_err(format!(
                "missing input(s): {}",
                missing.join(", ")
            )));
        }
        Ok(slots.into_iter().map(|s| s.expect("checked")).collect())
    }

    #[allow(clippy::too_many_arguments)]
    fn run_impl(
        &self,
        py: Python<'_>,
        inputs: &Bound<'_, PyAny>,
        backend: &str,
        check: bool,
        mem_latency: Option<u32>,
        mem_bytes_per_cycle: Option<u32>,
        hang_cycles: Option<u64>,
    ) -> PyResult<(Vec<Py<PyAny>>, Py<PyAny>)> {
        let model = &*self.model;
        let file = self.file.clone().unwrap_or_else(|| model.source.clone());
        let backend: Backend = backend.parse().map_err(BackendError::new_err)?;
        let rtl = RtlArgs {
            mem_latency,
            mem_bytes_per_cycle,
            hang_cycles,
            mem_stall_percent: None,
            mem_stall_seed: None,
        };
        rtl.refuse_unless_rtl(&backend, &[])
            .map_err(|e| BackendError::new_err(vta::message(&e)))?;
        let tensors = self.read_inputs(inputs)?;
        let runs = model
            .split_samples(tensors)
            .map_err(|e| InputError::new_err(e))?;
        let n_runs = runs.len();
        // The device is opened and the model run on this thread with the GIL released; after
        // every step the GIL is taken back for a moment to look for Ctrl-C.
        let interrupt: Mutex<Option<PyErr>> = Mutex::new(None);
        let result = py.detach(|| -> Result<Samples, PyErr> {
            let mut dev = device(&backend, &model.config, &rtl, check)
                .map_err(|e| BackendError::new_err(vta::message(&e)))?;
            run_samples_until(model, dev.as_mut(), &runs, check, &file, &mut || {
                Python::attach(|py| match py.check_signals() {
                    Ok(()) => true,
                    Err(e) => {
                        *interrupt.lock().expect("lock") = Some(e);
                        false
                    }
                })
            })
            .map_err(|e| {
                let msg = vta::message(&e);
                if msg.contains("--check failed") {
                    CheckError::new_err(msg)
                } else {
                    RunError::new_err(msg)
                }
            })
        });
        if let Some(e) = interrupt.lock().expect("lock").take() {
            return Err(e);
        }
        let Samples {
            outputs,
            total,
            checked,
        } = result?;
        let mut outs = Vec::new();
        let mut json_outputs = Vec::new();
        for (k, &v) in model.plan.outputs.iter().enumerate() {
            let t = if n_runs == 1 {
                outputs[k][0].clone()
            } else {
                runtime_io::concat_samples(&outputs[k])
                    .map_err(|e| RunError::new_err(format!("output {k}: {e}")))?
            };
            json_outputs.push(serde_json::json!({
                "name": model.plan.values[v].name,
                "type": t.fact().to_string(),
            }));
            outs.push(tensor_to_py(py, t));
        }
        let mut doc = run_document(&file, model, json_outputs, &total, checked);
        doc["table"] = serde_json::Value::String(total.table());
        Ok((outs, json_to_py(py, &doc)?))
    }
}

#[pymethods]
impl PyCompiledModel {
    /// run(inputs, backend="fsim", check=False, mem_latency=None, mem_bytes_per_cycle=None,
    /// hang_cycles=None) -> list[numpy.ndarray]
    ///
    /// Runs the model like onnxruntime's `InferenceSession.run`: `inputs` is a dict of numpy
    /// arrays by input name, a list in the model's input order, or one array for a
    /// one-input model; several samples may be stacked along the first axis. Returns the
    /// outputs, in the model's output order. `backend`: "fsim", "rtl", "remote://HOST:PORT",
    /// "serial://PORT" or "soc-sim" (as `vta run --backend`). `check=True` compares every
    /// layer with the integer reference (raising CheckError at the first mismatch). The RTL
    /// options are `vta run`'s. Releases the GIL; Ctrl-C stops the run after its current step.
    #[pyo3(signature = (inputs, backend = "fsim", check = false, mem_latency = None,
        mem_bytes_per_cycle = None, hang_cycles = None))]
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        py: Python<'_>,
        inputs: &Bound<'_, PyAny>,
        backend: &str,
        check: bool,
        mem_latency: Option<u32>,
        mem_bytes_per_cycle: Option<u32>,
        hang_cycles: Option<u64>,
    ) -> PyResult<Vec<Py<PyAny>>> {
        let (outs, _) = self.run_impl(
            py,
            inputs,
            backend,
            check,
            mem_latency,
            mem_bytes_per_cycle,
            hang_cycles,
        )?;
        Ok(outs)
    }

    /// run_with_report(inputs, backend="fsim", check=False, ...) -> (list[numpy.ndarray], dict)
    ///
    /// `run`, also returning the report: the document `vta run --json` prints (model, config,
    /// step counts, outputs, and under "run" the per-step host times, the per-launch device
    /// times, cycles and counters, and the host-device bytes), plus "table": the per-layer
    /// table `vta run` prints.
    #[pyo3(signature = (inputs, backend = "fsim", check = false, mem_latency = None,
        mem_bytes_per_cycle = None, hang_cycles = None))]
    #[allow(clippy::too_many_arguments)]
    fn run_with_report(
        &self,
        py: Python<'_>,
        inputs: &Bound<'_, PyAny>,
        backend: &str,
        check: bool,
        mem_latency: Option<u32>,
        mem_bytes_per_cycle: Option<u32>,
        hang_cycles: Option<u64>,
    ) -> PyResult<(Vec<Py<PyAny>>, Py<PyAny>)> {
        self.run_impl(
            py,
            inputs,
            backend,
            check,
            mem_latency,
            mem_bytes_per_cycle,
            hang_cycles,
        )
    }

    /// run_pool(inputs, schedule="auto", devices="fsim,fsim", cpu_threads=2, in_flight=1,
    /// trace=None, check=False) -> (list[numpy.ndarray], dict)
    ///
    /// Runs the samples on a pool of accelerators and CPU worker threads with a scheduling
    /// policy (`vta run --schedule`): `devices` is a comma-separated list of backends, one
    /// worker each. Returns the outputs (bit-identical to `run`'s under every policy) and the
    /// pool's report: throughput, latency, per-worker utilization, overlap, the lower bound.
    /// `trace` writes the timeline as Chrome-trace JSON; `check` compares the outputs with a
    /// serial run's.
    #[pyo3(signature = (inputs, schedule = "auto", devices = "fsim,fsim", cpu_threads = 2,
        in_flight = 1, trace = None, check = false))]
    #[allow(clippy::too_many_arguments)]
    fn run_pool(
        &self,
        py: Python<'_>,
        inputs: &Bound<'_, PyAny>,
        schedule: &str,
        devices: &str,
        cpu_threads: usize,
        in_flight: usize,
        trace: Option<PathBuf>,
        check: bool,
    ) -> PyResult<(Vec<Py<PyAny>>, Py<PyAny>)> {
        use vta::cmd::pool::{check_against_serial, run_pool, PoolArgs};
        let policy = schedule
            .parse()
            .map_err(|e: String| PyValueError::new_err(e))?;
        if cpu_threads == 0 || in_flight == 0 {
            return Err(PyValueError::new_err(
                "cpu_threads and in_flight must be at least 1",
            ));
        }
        let model = &*self.model;
        let file = self.file.clone().unwrap_or_else(|| model.source.clone());
        let tensors = self.read_inputs(inputs)?;
        let runs = model
            .split_samples(tensors)
            .map_err(|e| InputError::new_err(e))?;
        let args = PoolArgs {
            schedule: Some(policy),
            devices: Some(devices.to_string()),
            cpu_threads: Some(cpu_threads),
            in_flight: Some(in_flight),
            trace,
        };
        let owned = Arc::clone(&self.model);
        // Devices other than the RTL simulator ignore these; RTL devices get its defaults.
        let rtl = RtlArgs {
            mem_latency: None,
            mem_bytes_per_cycle: None,
            hang_cycles: None,
            mem_stall_percent: None,
            mem_stall_seed: None,
        };
        let pool = interruptible(py, move || -> Result<_, PyErr> {
            let model = &*owned;
            let run = run_pool(model, &runs, &args, &Backend::Fsim, &rtl, &file).map_err(|e| {
                let msg = vta::message(&e);
                if msg.contains("cannot start the pool") {
                    BackendError::new_err(msg)
                } else {
                    RunError::new_err(msg)
                }
            })?;
            if check {
                check_against_serial(model, &runs, &run.outputs)
                    .map_err(|e| CheckError::new_err(vta::message(&e)))?;
            }
            Ok(run)
        })??;
        let mut outs = Vec::new();
        for k in 0..model.plan.outputs.len() {
            let per_sample: Vec<Tensor> = pool.outputs.iter().map(|o| o[k].clone()).collect();
            let t = if per_sample.len() == 1 {
                per_sample.into_iter().next().expect("one sample")
            } else {
                runtime_io::concat_samples(&per_sample)
                    .map_err(|e| RunError::new_err(format!("output {k}: {e}")))?
            };
            outs.push(tensor_to_py(py, t));
        }
        let mut doc = pool.json;
        doc["table"] = serde_json::Value::String(pool.text);
        doc["checked"] = serde_json::Value::Bool(check);
        Ok((outs, json_to_py(py, &doc)?))
    }

    /// The compiled-model file's bytes (what `save` writes and `vta run` reads).
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let b = self.model.to_bytes().map_err(|e| {
            ModelFileError::new_err(format!("cannot write the compiled model: {}", chain(&e)))
        })?;
        Ok(PyBytes::new(py, &b))
    }

    /// Writes the compiled model to a `.vtab` file (what `vta run` and `vta.load` read).
    fn save(&self, path: PathBuf) -> PyResult<()> {
        let b = self.model.to_bytes().map_err(|e| {
            ModelFileError::new_err(format!("cannot write the compiled model: {}", chain(&e)))
        })?;
        std::fs::write(&path, b)
            .map_err(|e| ModelFileError::new_err(format!("cannot write {}: {e}", path.display())))
    }

    /// The inputs: a list of {"name", "shape", "dtype"} dicts, in order.
    #[getter]
    fn inputs(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let p = &self.model.plan;
        tensor_infos(py, p.inputs.iter().map(|&v| &p.values[v]))
    }

    /// The outputs: a list of {"name", "shape", "dtype"} dicts, in order.
    #[getter]
    fn outputs(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let p = &self.model.plan;
        tensor_infos(py, p.outputs.iter().map(|&v| &p.values[v]))
    }

    /// The config the model was compiled for (or selected at load).
    #[getter]
    fn config(&self) -> PyConfig {
        PyConfig::from_cfg(&self.model.config, "the compiled model".into())
    }

    /// The model's name (the ONNX file or what `compile` was given).
    #[getter]
    fn source(&self) -> String {
        self.model.source.clone()
    }

    /// Steps of the plan: (total, on the accelerator, on the CPU).
    #[getter]
    fn steps(&self) -> (usize, usize, usize) {
        let (a, c) = self.model.counts();
        (self.model.plan.steps.len(), a, c)
    }

    /// The op-support table: one {"node", "op", "status", "details"} dict per ONNX node
    /// (`None` for a model read from a file, which does not keep it).
    #[getter]
    fn support(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match &self.info {
            Some(i) => json_to_py(py, &i.report["support"]),
            None => Ok(py.None()),
        }
    }

    /// The compile report as `vta compile --json` prints it (without the output file), or
    /// `None` for a model read from a file.
    #[getter]
    fn report(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match &self.info {
            Some(i) => json_to_py(py, &i.report),
            None => Ok(py.None()),
        }
    }

    /// The accelerator layers as dicts (step, name, kind, launch, tiles, insns, refused), or
    /// `None` for a model read from a file.
    #[getter]
    fn layers(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        match &self.info {
            Some(i) => json_to_py(py, &i.layers),
            None => Ok(py.None()),
        }
    }

    /// The text report `vta compile` prints: the op-support table, the layers' tiling and
    /// the plan's step counts (`None` for a model read from a file).
    #[getter]
    fn compile_report(&self) -> Option<String> {
        self.info.as_ref().map(|i| i.compile_report.clone())
    }

    /// The accelerator layers' table (shapes, launch, tiling, tiles, instructions) as text
    /// (`None` for a model read from a file).
    #[getter]
    fn layer_report(&self) -> Option<String> {
        self.info.as_ref().map(|i| i.layer_report.clone())
    }

    fn __repr__(&self) -> String {
        let (a, c) = self.model.counts();
        format!(
            "vta.CompiledModel('{}' for {}, {} steps: {a} on the accelerator, {c} on the CPU)",
            self.model.source,
            self.model.config.config_string(),
            self.model.plan.steps.len()
        )
    }
}

fn tensor_infos<'a>(
    py: Python<'_>,
    values: impl Iterator<Item = &'a vta_runtime::plan::PlanValue>,
) -> PyResult<Py<PyAny>> {
    let l = PyList::empty(py);
    for v in values {
        let d = PyDict::new(py);
        d.set_item("name", &v.name)?;
        d.set_item("shape", PyTuple::new(py, &v.fact.shape)?)?;
        d.set_item(
            "dtype",
            match v.fact.dtype {
                vta_runtime::tensor::DType::F32 => "float32",
                other => other.name(),
            },
        )?;
        l.append(d)?;
    }
    Ok(l.into_any().unbind())
}

// ---------------------------------------------------------------------------------------
// Hardware

/// hw_verilog(config=None) -> dict: the accelerator's Verilog (`verilog`, top `vta_top`), its
/// control register map (`regs_json`) and port manifest (`ports_json`), with `config_string`,
/// `isa_hash` and `rtl_hash` (`vta hw verilog` writes the three files).
#[pyfunction]
#[pyo3(signature = (config = None))]
fn hw_verilog(py: Python<'_>, config: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
    let cfg = config_arg(config)?.unwrap_or_default();
    let g = py
        .detach(|| vta_hw::generate(&cfg))
        .map_err(|e| HardwareError::new_err(chain(&e)))?;
    let d = PyDict::new(py);
    d.set_item("config_string", g.config.config_string())?;
    d.set_item("isa_hash", format!("{:016x}", g.config.isa_hash()))?;
    d.set_item("rtl_hash", vta_hw::report::rtl_hash(&g.verilog))?;
    d.set_item("verilog", &g.verilog)?;
    d.set_item("regs_json", &g.regs_json)?;
    d.set_item("ports_json", &g.ports_json)?;
    d.set_item("modules", g.design.definitions().len())?;
    Ok(d.into_any().unbind())
}

/// hw_report(config=None, part="xc7z020") -> dict: synthesizes the accelerator with yosys
/// (minutes on large configs) and returns `vta hw report --json`'s document.
#[pyfunction]
#[pyo3(signature = (config = None, part = "xc7z020"))]
fn hw_report(py: Python<'_>, config: Option<&Bound<'_, PyAny>>, part: &str) -> PyResult<Py<PyAny>> {
    let cfg = config_arg(config)?.unwrap_or_default();
    let part = vta_hw::report::part(part).ok_or_else(|| {
        let known: Vec<&str> = vta_hw::report::PARTS.iter().map(|p| p.name).collect();
        HardwareError::new_err(format!(
            "unknown part '{part}'; known parts: {}",
            known.join(", ")
        ))
    })?;
    let doc = interruptible(py, move || -> Result<serde_json::Value, String> {
        let version = vta_hw::report::yosys_version().map_err(|e| chain(&e))?;
        let g = vta_hw::generate(&cfg).map_err(|e| chain(&e))?;
        let u =
            vta_hw::report::synthesize_in_temp_dir(&g.verilog, "vta_top", part.family, &mut |_| {})
                .map_err(|e| chain(&e))?;
        if u.cells.is_empty() {
            return Err("yosys reported no cells for vta_top".into());
        }
        let meta = vta_hw::report::estimate_meta(&g, part.name, part.family, &version);
        Ok(u.to_json(meta))
    })?
    .map_err(HardwareError::new_err)?;
    json_to_py(py, &doc)
}

// ---------------------------------------------------------------------------------------
// The CLI

/// cli_main(argv) -> int: runs the `vta` command line (argv[0] is the program name) in this
/// process and returns its exit status; what the `vta` console script calls.
#[pyfunction]
fn cli_main(py: Python<'_>, argv: Vec<String>) -> i32 {
    i32::from(py.detach(|| vta::cli(argv)))
}

/// run_command(argv) -> str: runs one `vta` command (argv[0] is the program name) and returns
/// the text it prints; its error (or a usage error) raises `error` (default VtaError) with the
/// CLI's message. Releases the GIL; Ctrl-C returns at once (the command finishes in the
/// background).
#[pyfunction]
#[pyo3(signature = (argv, error = None))]
fn run_command(
    py: Python<'_>,
    argv: Vec<String>,
    error: Option<Bound<'_, pyo3::types::PyType>>,
) -> PyResult<String> {
    let r = interruptible(py, move || {
        vta::run_command(argv).map_err(|e| vta::message(&e))
    })?;
    r.map_err(|msg| match &error {
        Some(t) => PyErr::from_type(t.clone(), msg),
        None => VtaError::new_err(msg),
    })
}

// ---------------------------------------------------------------------------------------
// The embedded digits CNN

/// digits() -> dict: the trained digits CNN `vta demo` runs (compiler::zoo::digits): `onnx`
/// (the float model's bytes, input "image" float32[1,1,8,8], output 10 scores),
/// `calibration` (float32[32,1,8,8]), `test` (float32[100,1,8,8]), `labels` (int64[100]) and
/// `fp32_outputs` (the float model's scores on the test digits, float32[100,10]).
#[pyfunction]
fn digits(py: Python<'_>) -> PyResult<Py<PyAny>> {
    use compiler::zoo::digits as z;
    let d = PyDict::new(py);
    d.set_item("onnx", PyBytes::new(py, z::ONNX))?;
    for (key, bytes) in [
        ("calibration", z::CALIBRATION_NPY),
        ("test", z::TEST_NPY),
        ("labels", z::TEST_LABELS_NPY),
        ("fp32_outputs", z::FP32_OUTPUT_NPY),
    ] {
        let a = isa::npy::decode(bytes)
            .map_err(|e| VtaError::new_err(format!("embedded {key}: {e}")))?;
        let t = runtime_io::tensor_from_npy(&a)
            .map_err(|e| VtaError::new_err(format!("embedded {key}: {e}")))?;
        d.set_item(key, tensor_to_py(py, t))?;
    }
    Ok(d.into_any().unbind())
}

// ---------------------------------------------------------------------------------------
// Design-space exploration

struct Quiet;
impl dse::explore::Observer for Quiet {
    fn planned(&self, _: &str, _: usize, _: usize) {}
    fn stage(&self, _: &str, _: &str) {}
    fn done(&self, _: &str, _: bool) {}
}

/// dse_sweep(network="digits", axes={}, base=None, part=None, board=None, cycles="model",
/// validate=0, jobs=None, cache_dir=None, fresh=False, calibration=[], size=224,
/// output_dir=None, dry_run=False, accuracy=False, eval=None, labels=None, shard=None,
/// merge=None) -> dict
///
/// Sweeps configs for a network (`vta dse`): returns `vta dse --json`'s document (with
/// `points`, one dict per config); with `output_dir`, also writes results.csv, results.json
/// and pareto.svg there. `shard="I/N"` evaluates only that shard's configs into the cache
/// (`vta dse --shard`, no files written); `merge=N` measures nothing and takes every result
/// from the cache (`vta dse --merge`), failing with the configs not there and their shards. `axes` maps axis names (batch, block, block_in, block_out,
/// log_uop_buff, log_inp_buff, log_wgt_buff, log_acc_buff, inp_depth, wgt_depth, acc_depth,
/// bus, clock) to lists of values or `vta dse`'s value strings ("8..32").
#[pyfunction]
#[pyo3(signature = (network = "digits", axes = None, base = None, part = None, board = None,
    cycles = "model", validate = 0, jobs = None, cache_dir = None, fresh = false,
    calibration = Vec::new(), size = 224, output_dir = None, dry_run = false, accuracy = false,
    eval = None, labels = None, shard = None, merge = None))]
#[allow(clippy::too_many_arguments)]
fn dse_sweep(
    py: Python<'_>,
    network: &str,
    axes: Option<&Bound<'_, PyDict>>,
    base: Option<&Bound<'_, PyAny>>,
    part: Option<String>,
    board: Option<String>,
    cycles: &str,
    validate: usize,
    jobs: Option<usize>,
    cache_dir: Option<PathBuf>,
    fresh: bool,
    calibration: Vec<PathBuf>,
    size: usize,
    output_dir: Option<PathBuf>,
    dry_run: bool,
    accuracy: bool,
    eval: Option<PathBuf>,
    labels: Option<PathBuf>,
    shard: Option<String>,
    merge: Option<usize>,
) -> PyResult<Py<PyAny>> {
    use dse::sweep::{self, Axes, Param, Shard};
    let derr = |e: &dyn std::error::Error| DseError::new_err(e.to_string());
    let spec = match network {
        "digits" => dse::network::NetworkSpec::Digits,
        "resnet18" => dse::network::NetworkSpec::Resnet18 { size },
        path => dse::network::NetworkSpec::File {
            path: PathBuf::from(path),
            calibration,
        },
    };
    let target = match (&board, &part) {
        (Some(_), Some(_)) => {
            return Err(DseError::new_err("give a part or a board, not both"));
        }
        (Some(b), None) => dse::resources::Target::board(b).map_err(|e| derr(&e))?,
        (None, p) => {
            dse::resources::Target::part(p.as_deref().unwrap_or("xc7z020")).map_err(|e| derr(&e))?
        }
    };
    let mut ax = Axes::default();
    if let Some(axes) = axes {
        for (k, v) in axes.iter() {
            let key: String = k.extract()?;
            let param = Param::from_key(&key).ok_or_else(|| {
                DseError::new_err(format!(
                    "unknown sweep axis '{key}'; axes are batch, block, block_in, block_out, \
                     log_uop_buff, log_inp_buff, log_wgt_buff, log_acc_buff, inp_depth, \
                     wgt_depth, acc_depth, inp_width, wgt_width, acc_width, bus, clock"
                ))
            })?;
            let values: Vec<u32> = if let Ok(text) = v.extract::<String>() {
                sweep::parse_values(param, &text)
                    .map_err(|e| DseError::new_err(format!("axis {key}: {e}")))?
            } else if let Ok(n) = v.extract::<u32>() {
                vec![n]
            } else {
                v.extract().map_err(|_| {
                    DseError::new_err(format!(
                        "axis {key}: give a list of non-negative integers or a string such as \"8..32\""
                    ))
                })?
            };
            ax.set(param, values)
                .map_err(|e| DseError::new_err(format!("axis {key}: {e}")))?;
        }
    }
    if ax.is_empty() {
        ax = Axes::default_sweep();
    }
    let base = config_arg(base)?.unwrap_or_default();
    let full = sweep::expand(&base, &ax);
    let shard = match (shard, merge, &output_dir) {
        (Some(_), Some(_), _) => {
            return Err(DseError::new_err("give shard or merge, not both"));
        }
        (Some(_), None, Some(_)) => {
            return Err(DseError::new_err(
                "a shard writes no results (they go to the cache): drop output_dir, and give \
                 it to the merge (merge=N) once every shard has run",
            ));
        }
        (Some(text), None, None) => {
            Some(Shard::parse(&text).map_err(|e| DseError::new_err(format!("shard: {e}")))?)
        }
        (None, Some(0), _) => return Err(DseError::new_err("merge must be at least 1")),
        _ => None,
    };
    let plan = match shard {
        Some(s) => full.shard(s),
        None => full.clone(),
    };
    if dry_run {
        let doc = serde_json::json!({
            "combinations": plan.combinations,
            "configs": plan.configs.iter().map(|c| serde_json::json!({
                "config_string": c.config_string(),
                "config": serde_json::from_str::<serde_json::Value>(&c.to_json()).expect("a config is JSON"),
            })).collect::<Vec<_>>(),
            "skipped": sweep::skip_summary(&plan.skipped).into_iter()
                .map(|(n, r)| serde_json::json!({"count": n, "reason": r})).collect::<Vec<_>>(),
        });
        return json_to_py(py, &doc);
    }
    let cycle_source = match cycles {
        "model" => dse::measure::CycleSource::Model,
        "rtl" => dse::measure::CycleSource::Rtl,
        other => {
            return Err(DseError::new_err(format!(
                "cycles='{other}': expected 'model' or 'rtl'"
            )))
        }
    };
    let cache = match cache_dir.or_else(dse::cache::Cache::default_root) {
        Some(d) => dse::cache::Cache::new(d),
        None => {
            return Err(DseError::new_err(
                "no cache directory: give cache_dir (or set VTA_CACHE_DIR or HOME)",
            ))
        }
    };
    let jobs = jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if jobs == 0 {
        return Err(DseError::new_err("jobs must be at least 1"));
    }
    let eval = match (eval, labels, &spec) {
        (Some(x), Some(y), _) => {
            Some(dse::accuracy::EvalSet::from_files(&x, &y).map_err(|e| derr(&e))?)
        }
        (Some(_), None, _) | (None, Some(_), _) => {
            return Err(DseError::new_err("give eval and labels together"))
        }
        (None, None, dse::network::NetworkSpec::Digits) if accuracy => {
            Some(dse::accuracy::EvalSet::digits().map_err(|e| derr(&e))?)
        }
        (None, None, _) if accuracy => {
            return Err(DseError::new_err(format!(
                "accuracy=True needs labelled samples for {}: give eval= and labels= (.npy \
                 files); only the digits network has its own",
                spec.name()
            )))
        }
        _ => None,
    };
    let opts = dse::explore::Options {
        cycles: cycle_source,
        validate,
        jobs,
        fresh,
        eval,
        cache_only: merge.is_some(),
    };
    let doc = interruptible(py, move || -> Result<serde_json::Value, String> {
        let network = dse::network::Network::load(&spec).map_err(|e| chain(&e))?;
        let estimator = target.estimator();
        let x = dse::explore::explore(
            &plan,
            &network,
            &target,
            estimator.as_ref(),
            &cache,
            &opts,
            &Quiet,
        )
        .map_err(|e| chain(&e))?;
        if let Some(dir) = output_dir {
            std::fs::create_dir_all(&dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            let doc = dse::report::json(&x);
            let write = |name: &str, text: String| {
                let p = dir.join(name);
                std::fs::write(&p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))
            };
            write("results.csv", dse::report::csv(&x))?;
            write("results.json", format!("{doc:#}\n"))?;
            dse::plot::write(&x, &dir.join("pareto.svg")).map_err(|e| chain(&e))?;
        }
        if let Some(count) = merge {
            let missing: Vec<String> = x
                .not_cached(&full, count)
                .into_iter()
                .map(|(config, s)| format!("  {} (shard {s})", config.config_string()))
                .collect();
            if !missing.is_empty() {
                return Err(format!(
                    "the merge is incomplete: results of {} config(s) are not in the cache:\n{}\n\
                     rerun each shard named (sweep(..., shard=\"I/N\") with the same arguments), \
                     then merge again",
                    missing.len(),
                    missing.join("\n")
                ));
            }
        }
        let mut doc = dse::report::json(&x);
        doc["summary"] = dse::report::summary(&x).into();
        Ok(doc)
    })?
    .map_err(DseError::new_err)?;
    json_to_py(py, &doc)
}

// ---------------------------------------------------------------------------------------

/// The native half of the `vta` package (import `vta`, not this).
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("VtaError", py.get_type::<VtaError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("ModelFileError", py.get_type::<ModelFileError>())?;
    m.add("CompileError", py.get_type::<CompileError>())?;
    m.add("RunError", py.get_type::<RunError>())?;
    m.add("InputError", py.get_type::<InputError>())?;
    m.add("BackendError", py.get_type::<BackendError>())?;
    m.add("CheckError", py.get_type::<CheckError>())?;
    m.add("HardwareError", py.get_type::<HardwareError>())?;
    m.add("DseError", py.get_type::<DseError>())?;
    m.add_class::<PyConfig>()?;
    m.add_class::<PyCompiledModel>()?;
    m.add_function(wrap_pyfunction!(compile, m)?)?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(hw_verilog, m)?)?;
    m.add_function(wrap_pyfunction!(hw_report, m)?)?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add_function(wrap_pyfunction!(run_command, m)?)?;
    m.add_function(wrap_pyfunction!(dse_sweep, m)?)?;
    m.add_function(wrap_pyfunction!(digits, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
