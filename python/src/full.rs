//! What only the workstation build of the package has (cargo feature `full`): compiling ONNX
//! models ([`compiler`]), hardware generation and synthesis ([`vta_hw`]), the `vta` command
//! line, the embedded digits CNN and design-space exploration ([`dse`]). The board build
//! (scripts/cross-wheel.sh) leaves this module out; there the Python functions that call into
//! it raise `VtaError` through [`crate::require_full_build`].

use std::path::PathBuf;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use compiler::compile::{BackendOptions, Compiled, LayerReport};
use compiler::frontend::{
    ActivationClip, FrontendError, FrontendOptions, RequantFidelity, WeightClip, WeightRounding,
};
use numpy::{PyArrayDyn, PyArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use vta_runtime::budget::DEFAULT_MEMORY_BUDGET;
use vta_runtime::io as runtime_io;

use crate::{
    chain, config_arg, json_to_py, tensor_to_py, CompileError, CompileInfo, DseError,
    HardwareError, ModelFileError, PyCompiledModel, VtaError,
};

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
pub(crate) fn interruptible<T, F>(py: Python<'_>, work: F) -> PyResult<T>
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

/// `value` of the string option `param` as one of `options` (`_` may stand for `-`), or a
/// ValueError listing them.
fn choice<T: Copy>(param: &str, value: &str, options: &[(&str, T)]) -> PyResult<T> {
    let wanted = value.replace('_', "-");
    options
        .iter()
        .find(|(name, _)| *name == wanted)
        .map(|o| o.1)
        .ok_or_else(|| {
            let names: Vec<String> = options.iter().map(|(n, _)| format!("{n:?}")).collect();
            PyValueError::new_err(format!(
                "{param} must be {}, got {value:?}",
                names.join(", ")
            ))
        })
}

/// compile(onnx, source, config=None, calibration=[], bit_exact=False, launch_per_layer=False,
/// depthwise_on_gemm=False, input_shapes={}, memory_budget=None, split_branches=False,
/// weight_clip="auto", weight_rounding="auto", keep_ends_8bit=True, activation_clip="auto")
/// -> CompiledModel
///
/// Compiles ONNX bytes (`source` names the model in messages) for a config. The `vta`
/// package's `vta.compile` takes paths and `onnx.ModelProto`s too.
#[pyfunction]
#[pyo3(signature = (onnx, source, config = None, calibration = Vec::new(), bit_exact = false,
    launch_per_layer = false, depthwise_on_gemm = false, input_shapes = None, memory_budget = None,
    split_branches = false, weight_clip = "auto", weight_rounding = "auto", keep_ends_8bit = true,
    activation_clip = "auto"))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn compile(
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
    weight_rounding: &str,
    keep_ends_8bit: bool,
    activation_clip: &str,
) -> PyResult<PyCompiledModel> {
    use {ActivationClip as A, WeightClip as C, WeightRounding as W};
    let weight_clip = choice(
        "weight_clip",
        weight_clip,
        &[
            ("auto", C::Auto),
            ("max", C::Max),
            ("min-error", C::MinError),
        ],
    )?;
    let weight_rounding = choice(
        "weight_rounding",
        weight_rounding,
        &[
            ("auto", W::Auto),
            ("nearest", W::Nearest),
            ("error-feedback", W::ErrorFeedback),
        ],
    )?;
    let activation_clip = choice(
        "activation_clip",
        activation_clip,
        &[
            ("auto", A::Auto),
            ("max", A::Max),
            ("min-error", A::MinError),
        ],
    )?;
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
        weight_rounding,
        keep_ends_8bit,
        activation_clip,
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

// ---------------------------------------------------------------------------------------
// Hardware

/// hw_verilog(config=None) -> dict: the accelerator's Verilog (`verilog`, top `vta_top`), its
/// control register map (`regs_json`) and port manifest (`ports_json`), with `config_string`,
/// `isa_hash` and `rtl_hash` (`vta hw verilog` writes the three files).
#[pyfunction]
#[pyo3(signature = (config = None))]
pub(crate) fn hw_verilog(py: Python<'_>, config: Option<&Bound<'_, PyAny>>) -> PyResult<Py<PyAny>> {
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
pub(crate) fn hw_report(
    py: Python<'_>,
    config: Option<&Bound<'_, PyAny>>,
    part: &str,
) -> PyResult<Py<PyAny>> {
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
pub(crate) fn cli_main(py: Python<'_>, argv: Vec<String>) -> i32 {
    i32::from(py.detach(|| vta::cli(argv)))
}

/// run_command(argv) -> str: runs one `vta` command (argv[0] is the program name) and returns
/// the text it prints; its error (or a usage error) raises `error` (default VtaError) with the
/// CLI's message. Releases the GIL; Ctrl-C returns at once (the command finishes in the
/// background).
#[pyfunction]
#[pyo3(signature = (argv, error = None))]
pub(crate) fn run_command(
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
pub(crate) fn digits(py: Python<'_>) -> PyResult<Py<PyAny>> {
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
pub(crate) fn dse_sweep(
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
            dse::report::write_files(&x, &dir).map_err(|e| chain(&e))?;
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
