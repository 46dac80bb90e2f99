//! `vta._native`: the extension module of the `vta` Python package.
//!
//! It wraps the library crates the `vta` CLI is built from (the same calls, the same error
//! messages): configs ([`isa::HwConfig`]), loading and running compiled models
//! ([`vta_runtime`], on the devices `vta run --backend` opens, and on a Zynq board's
//! accelerator: [`board`]) and, in the workstation build (cargo feature `full`, the
//! default), compiling ONNX models, design-space exploration and hardware generation
//! ([`full`]). The board build (`--no-default-features`, cross-built for armv7 and aarch64 by
//! scripts/cross-wheel.sh) has the rest; its Python functions that need `full` raise
//! `VtaError` saying so. The pure-Python package `vta` (python/vta) re-exports these with
//! docstrings, stubs and small conveniences.
//!
//! Long calls release the GIL. Runs check for Ctrl-C (`PyErr_CheckSignals`) after every step
//! and stop there; compiles, sweeps and syntheses run on a worker thread that the calling
//! thread polls, so Ctrl-C returns at once (the worker finishes in the background, its result
//! dropped).

mod board;
#[cfg(feature = "full")]
mod full;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use drivers::Device;
use isa::HwConfig;
use numpy::{IntoPyArray, PyArrayDyn, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
#[cfg(feature = "full")]
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use vta_runtime::budget::DEFAULT_MEMORY_BUDGET;
use vta_runtime::io as runtime_io;
use vta_runtime::model::Model;
use vta_runtime::samples::{run_document, Samples, SamplesError};
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
// The board build loads compiled models and never compiles one, so it never makes this.
#[cfg_attr(not(feature = "full"), allow(dead_code))]
struct CompileInfo {
    report: serde_json::Value,
    compile_report: String,
    layer_report: String,
    layers: serde_json::Value,
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
// Devices and runs

/// The RTL simulator's options of a run (`vta run --mem-latency ...`).
struct RtlOptions {
    mem_latency: Option<u32>,
    mem_bytes_per_cycle: Option<u32>,
    hang_cycles: Option<u64>,
}

impl RtlOptions {
    /// The first option given, by its Python name.
    fn first_given(&self) -> Option<&'static str> {
        [
            ("mem_latency", self.mem_latency.is_some()),
            ("mem_bytes_per_cycle", self.mem_bytes_per_cycle.is_some()),
            ("hang_cycles", self.hang_cycles.is_some()),
        ]
        .into_iter()
        .find(|o| o.1)
        .map(|o| o.0)
    }
}

/// Opens a run's device (for the model's config; `check` makes the functional simulator check
/// token races). Built before the GIL is released, so that bad options fail first.
pub(crate) type Opener = Box<dyn FnOnce(&HwConfig, bool) -> PyResult<Box<dyn Device>> + Send>;

/// The device `backend` names: "board" (with `board`'s options, else `vta-board`'s
/// defaults) in every build, the rest as `vta run --backend` (full build) or "fsim" (board
/// build).
fn open_device(
    backend: &str,
    rtl: RtlOptions,
    board: Option<&board::PyBoardOptions>,
) -> PyResult<Opener> {
    if backend == "board" {
        if let Some(opt) = rtl.first_given() {
            return Err(BackendError::new_err(format!(
                "{opt} is an option of the cycle-accurate simulator (backend=\"rtl\"), not of \
                 the board: drop {opt}"
            )));
        }
        return board.cloned().unwrap_or_default().opener();
    }
    if board.is_some() {
        return Err(BackendError::new_err(format!(
            "board= gives the options of backend=\"board\", but this run is on '{backend}': \
             give backend=\"board\", or drop board="
        )));
    }
    other_device(backend, rtl)
}

/// A simulator or remote device, as `vta run --backend` opens it.
#[cfg(feature = "full")]
fn other_device(backend: &str, rtl: RtlOptions) -> PyResult<Opener> {
    use vta::cmd::run::{device, Backend, RtlArgs};
    let backend: Backend = backend.parse().map_err(|e: String| {
        BackendError::new_err(format!(
            "{e}; or board (the accelerator of the Zynq board this runs on)"
        ))
    })?;
    let rtl = RtlArgs {
        mem_latency: rtl.mem_latency,
        mem_bytes_per_cycle: rtl.mem_bytes_per_cycle,
        hang_cycles: rtl.hang_cycles,
        mem_stall_percent: None,
        mem_stall_seed: None,
    };
    rtl.refuse_unless_rtl(&backend, &[])
        .map_err(|e| BackendError::new_err(vta::message(&e)))?;
    Ok(Box::new(move |cfg, check| {
        device(&backend, cfg, &rtl, check).map_err(|e| BackendError::new_err(vta::message(&e)))
    }))
}

/// The functional simulator, the board build's one device besides the board.
#[cfg(not(feature = "full"))]
fn other_device(backend: &str, rtl: RtlOptions) -> PyResult<Opener> {
    use vta_sim::FsimDevice;
    if backend != "fsim" {
        return Err(BackendError::new_err(format!(
            "backend '{backend}' is not in the board build of the package, which runs on \
             \"board\" and \"fsim\": the RTL simulator, remote and serial devices are in the \
             full wheel (pip install vta on a workstation)"
        )));
    }
    if let Some(opt) = rtl.first_given() {
        return Err(BackendError::new_err(format!(
            "{opt} is an option of the cycle-accurate simulator, which is not in the board \
             build of the package: drop {opt}"
        )));
    }
    Ok(Box::new(|cfg, check| {
        Ok(if check {
            Box::new(FsimDevice::checking_races(cfg))
        } else {
            Box::new(FsimDevice::new(cfg))
        })
    }))
}

/// The error of a failed run: a layer differing from the integer reference is a
/// [`CheckError`], the rest [`RunError`].
fn run_error(e: &SamplesError, msg: String) -> PyErr {
    match e {
        SamplesError::CheckFailed { .. } => CheckError::new_err(msg),
        _ => RunError::new_err(msg),
    }
}

/// Runs the samples with the runtime's loop; the full build shows `vta run`'s progress bar
/// on a terminal (the board build has no CLI).
fn run_samples(
    model: &Model,
    dev: &mut dyn Device,
    runs: &[Vec<Tensor>],
    check: bool,
    file: &str,
    keep_going: &mut dyn FnMut() -> bool,
) -> PyResult<Samples> {
    #[cfg(feature = "full")]
    let name = dev.name().to_string();
    #[cfg(feature = "full")]
    let mut observer =
        vta::cmd::run::ProgressObserver::new(model, &name, runs.len(), check, keep_going);
    #[cfg(not(feature = "full"))]
    let mut observer = {
        struct Stop<'a>(&'a mut dyn FnMut() -> bool);
        impl vta_runtime::samples::SampleObserver for Stop<'_> {
            fn message(&mut self, _: &str) {}
            fn step(&mut self) -> bool {
                (self.0)()
            }
        }
        Stop(keep_going)
    };
    vta_runtime::samples::run_samples(model, dev, runs, check, file, &mut observer)
        .map_err(|e| run_error(&e, chain(&e)))
}

/// The error a function of the workstation build raises in the board build.
#[cfg_attr(feature = "full", allow(dead_code))]
fn not_in_board_build(what: &str) -> PyErr {
    VtaError::new_err(format!(
        "{what} is not in the board build of the package (the wheel for armv7 and aarch64 \
         boards, which loads and runs compiled models): compile, explore and generate hardware \
         on a workstation with the full wheel, copy the .vtab here, and run it with \
         backend=\"board\""
    ))
}

/// require_full_build(what): raises VtaError naming `what` in the board build of the package
/// (see `BUILD`); does nothing in the full build. The Python functions that need the
/// compiler, the hardware generator, design-space exploration or the CLI call it first.
#[pyfunction]
fn require_full_build(what: &str) -> PyResult<()> {
    if cfg!(feature = "full") {
        Ok(())
    } else {
        Err(not_in_board_build(what))
    }
}

// ---------------------------------------------------------------------------------------
// Compiled models and runs

/// A compiled model: the plan and the accelerator programs for one config, and (when it came
/// from `vta.compile`) the compile report. Run it with `run`, save it with `save`.
#[pyclass(frozen, module = "vta", name = "CompiledModel")]
struct PyCompiledModel {
    pub(crate) model: Arc<Model>,
    pub(crate) info: Option<Arc<CompileInfo>>,
    /// The file it was loaded from.
    pub(crate) file: Option<String>,
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
        rtl: RtlOptions,
        board: Option<&board::PyBoardOptions>,
    ) -> PyResult<(Vec<Py<PyAny>>, Py<PyAny>)> {
        let model = &*self.model;
        let file = self.file.clone().unwrap_or_else(|| model.source.clone());
        let opener = open_device(backend, rtl, board)?;
        let tensors = self.read_inputs(inputs)?;
        let runs = model.split_samples(tensors).map_err(InputError::new_err)?;
        let n_runs = runs.len();
        // The device is opened and the model run on this thread with the GIL released; after
        // every step the GIL is taken back for a moment to look for Ctrl-C.
        let interrupt: Mutex<Option<PyErr>> = Mutex::new(None);
        let result = py.detach(|| -> Result<Samples, PyErr> {
            let mut dev = opener(&model.config, check)?;
            let mut keep_going = || {
                // Once interrupted, every later step stops too (the reference check of a
                // sample runs to its end, asking no question).
                if interrupt.lock().expect("lock").is_some() {
                    return false;
                }
                Python::attach(|py| match py.check_signals() {
                    Ok(()) => true,
                    Err(e) => {
                        *interrupt.lock().expect("lock") = Some(e);
                        false
                    }
                })
            };
            run_samples(model, dev.as_mut(), &runs, check, &file, &mut keep_going)
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
    /// hang_cycles=None, board=None) -> list[numpy.ndarray]
    ///
    /// Runs the model like onnxruntime's `InferenceSession.run`: `inputs` is a dict of numpy
    /// arrays by input name, a list in the model's input order, or one array for a
    /// one-input model; several samples may be stacked along the first axis. Returns the
    /// outputs, in the model's output order. `backend`: "fsim", "rtl", "remote://HOST:PORT",
    /// "serial://PORT" or "soc-sim" (as `vta run --backend`), or "board": the accelerator of
    /// the Zynq board this runs on, opened as `board` (a `BoardOptions`) says, by default as
    /// `vta-board` opens it. `check=True` compares every layer with the integer reference
    /// (raising CheckError at the first mismatch). The RTL options are `vta run`'s. Releases
    /// the GIL; Ctrl-C stops the run after its current step.
    #[pyo3(signature = (inputs, backend = "fsim", check = false, mem_latency = None,
        mem_bytes_per_cycle = None, hang_cycles = None, board = None))]
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
        board: Option<PyRef<'_, board::PyBoardOptions>>,
    ) -> PyResult<Vec<Py<PyAny>>> {
        let rtl = RtlOptions {
            mem_latency,
            mem_bytes_per_cycle,
            hang_cycles,
        };
        let (outs, _) = self.run_impl(py, inputs, backend, check, rtl, board.as_deref())?;
        Ok(outs)
    }

    /// run_with_report(inputs, backend="fsim", check=False, ..., board=None)
    /// -> (list[numpy.ndarray], dict)
    ///
    /// `run`, also returning the report: the document `vta run --json` prints (model, config,
    /// step counts, outputs, and under "run" the per-step host times, the per-launch device
    /// times, cycles and counters, and the host-device bytes), plus "table": the per-layer
    /// table `vta run` prints.
    #[pyo3(signature = (inputs, backend = "fsim", check = false, mem_latency = None,
        mem_bytes_per_cycle = None, hang_cycles = None, board = None))]
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
        board: Option<PyRef<'_, board::PyBoardOptions>>,
    ) -> PyResult<(Vec<Py<PyAny>>, Py<PyAny>)> {
        let rtl = RtlOptions {
            mem_latency,
            mem_bytes_per_cycle,
            hang_cycles,
        };
        self.run_impl(py, inputs, backend, check, rtl, board.as_deref())
    }

    #[cfg(feature = "full")]
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
        use full::interruptible;
        use vta::cmd::pool::{check_against_serial, run_pool, PoolArgs};
        use vta::cmd::run::{Backend, RtlArgs};
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
        let runs = model.split_samples(tensors).map_err(InputError::new_err)?;
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

    /// run_pool(...): in the board build, raises VtaError (the pool executor's device list
    /// is the workstation's; on a board, `run` the samples on backend="board").
    #[cfg(not(feature = "full"))]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn run_pool(
        &self,
        _args: &Bound<'_, PyTuple>,
        _kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<(Vec<Py<PyAny>>, Py<PyAny>)> {
        Err(not_in_board_build("CompiledModel.run_pool"))
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
    m.add_class::<board::PyBoardOptions>()?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(require_full_build, m)?)?;
    // "full" (the workstation wheel) or "board" (the wheel for boards: load and run only).
    m.add(
        "BUILD",
        if cfg!(feature = "full") {
            "full"
        } else {
            "board"
        },
    )?;
    #[cfg(feature = "full")]
    {
        m.add_function(wrap_pyfunction!(full::compile, m)?)?;
        m.add_function(wrap_pyfunction!(full::hw_verilog, m)?)?;
        m.add_function(wrap_pyfunction!(full::hw_report, m)?)?;
        m.add_function(wrap_pyfunction!(full::cli_main, m)?)?;
        m.add_function(wrap_pyfunction!(full::run_command, m)?)?;
        m.add_function(wrap_pyfunction!(full::dse_sweep, m)?)?;
        m.add_function(wrap_pyfunction!(full::digits, m)?)?;
    }
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
