//! The runtime: compiled models, running them on a [`Device`], checking them against the
//! integer reference, and the compiled-model file (`vta compile` writes it, `vta run` reads
//! it).
//!
//! # A compiled model
//!
//! [`Model::compile`] takes an ONNX model (its bytes), calibration inputs for a float model,
//! an accelerator config and the front-end options, and produces:
//!
//! - the [`Plan`] of the front end (`graph::load_and_plan`'s pipeline: import, passes,
//!   quantization, lowering) and its op-support table;
//! - for every accelerator step of the plan, one accelerator program of its own
//!   ([`backend::LayerProgram`], compiled by the back end's `compile_conv`/`compile_dense`/...),
//!   or, when the back end refuses the layer (a tile that cannot fit the scratchpads, ...), the
//!   reason, and the step runs on the CPU with the layer's exact reference semantics (the
//!   support table is updated to say so);
//! - the CPU steps (quantization of float inputs, fallback ops, dequantization of outputs),
//!   which run with the integer reference executor's exact semantics
//!   ([`reference::eval_step`]).
//!
//! One program per layer is a deliberate choice: each layer's counters (GEMM and ALU
//! micro-ops, DRAM traffic, cycles on backends that count them) come straight from its own run,
//! which gives the per-layer breakdown of `vta run`, and the host sees every intermediate
//! tensor, which is what `vta run --check` compares. The price is a pack/unpack of each
//! activation on the host between layers (`backend::NetBuilder` could chain consecutive layers
//! into one program; not done yet).
//!
//! [`Model::run`] takes the model's own input tensors (float32 for a float-interface model)
//! and returns its own outputs, every intermediate value, and a [`LayerRun`] per step: where it
//! ran, host wall time (packing included), and for accelerator steps the device's
//! [`RunReport`]. [`Model::check`] runs the integer reference executor on the same inputs and
//! returns the first mismatching step and element ([`reference::first_mismatch`]), or the
//! number of layers and elements found bit-exact.
//!
//! # The compiled-model file (format version 1)
//!
//! A compiled model is written as one little-endian binary file (by convention `.vtab`, like
//! program containers; the magic tells them apart). A `str` is a `u32` byte length and that
//! many bytes of UTF-8; a `bytes` is a `u64` length and that many bytes.
//!
//! | size | field |
//! |---|---|
//! | 8 | magic `VTAMODEL` |
//! | 4 | `u32` format version, `1` |
//! | str | config string ([`HwConfig::config_string`]) |
//! | 8 | `u64` ISA hash ([`HwConfig::isa_hash`]) |
//! | str | config JSON ([`HwConfig::to_json`]) |
//! | str | source: the model file name given to `vta compile` (for messages) |
//! | 1 | `u8` requantization fidelity: 0 within one LSB (default), 1 bit-exact (`--bit-exact`) |
//! | 1 | `u8` offload: 1 (0 = every node on the CPU) |
//! | bytes | the original ONNX model, unchanged |
//! | 1 | `u8` calibration present (float models) |
//! | | if present: `u32` sample count, `u32` tensor count `T`, then `T` times: `str` graph tensor name, `u32` bits of the f32 `max|x|` over the calibration set |
//! | 4 | `u32` plan step count |
//! | 4 | `u32` accelerator step count `A`, then `A` entries: |
//! | 4 | · `u32` plan step index |
//! | str | · step name |
//! | str | · layer kind (`QConv2d`, ...) |
//! | 8 | · `u64` layer fingerprint (FNV-1a of the layer's parameters and input shapes) |
//! | 1 | · `u8` placement: 0 = refused by the back end (runs on the CPU), 1 = program |
//! | str | · if 0: the back end's reason |
//! | | · if 1: `u32` input count, inputs; `u32` output count, outputs (each `str` segment name, 4 `u64` NCHW dimensions, `u32` BATCH, `u32` block: the packed layout); `u32` layer-info count, infos (each `str` name, `u8` kind, `u8` tiling present, if present `u32` tn, th, tw, tco, tci, `u8` loop order, `u8` column skip; `u64` tiles, instructions, kernels); `bytes` the program as an `isa::container` (`VTAPROG`) |
//! | 8 | `u64` FNV-1a checksum of every byte before it |
//!
//! What is stored and what is rebuilt: the accelerator programs are stored and used as they
//! are. The plan is rebuilt at load time from the stored ONNX bytes, options and calibration
//! statistics (import, passes and lowering are deterministic, and the statistics replace the
//! calibration inputs, so `vta run` needs no calibration data); the CPU steps come from that
//! rebuilt plan. Loading then checks that the rebuilt plan has the same number of steps and,
//! at every stored index, an accelerator step of the same name, kind and fingerprint: a
//! program is never run for a layer it was not compiled from (a toolkit whose front end
//! changed in between refuses the file and asks for a recompile).
//!
//! A reader checks, in order: the magic, the version (newer versions are refused before
//! anything else is read), the checksum, the structure (every length inside the file), the
//! config (valid, hash matching the stored one, and, with [`Model::from_bytes_for`], the
//! selected device's ISA), every program container (`isa::container::read_for`), and the
//! rebuilt plan. Every failure is an error naming what is wrong; no input makes it panic.

mod bundle;
mod io;

use std::fmt::{self, Write as _};
use std::time::{Duration, Instant};

use drivers::{Device, RunReport, RunTimeout};
use isa::HwConfig;
use ndarray::{Array4, IxDyn};

use crate::backend::{self, BackendError, LayerProgram};
use crate::graph::plan::{StepKind, ValueId};
use crate::graph::{
    import, passes, Fact, FrontendError, FrontendOptions, Graph, Layer, Plan, Support,
    SupportTable, Tensor,
};
use crate::quant::{self, Stats};
use crate::reference::{self, Mismatch};

pub use bundle::{BundleError, FORMAT_VERSION, MAGIC};
pub use io::{concat_samples, split_samples, tensor_from_npy, tensor_to_npy};

/// Why compiling, loading or running a model failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Frontend(#[from] FrontendError),
    #[error("step {step} ({name}): the back end failed: {source}")]
    Backend {
        step: usize,
        name: String,
        source: BackendError,
    },
    #[error("{file}: {source}")]
    Bundle { file: String, source: BundleError },
    #[error("{0}")]
    Input(String),
    #[error(
        "the model was compiled for config {model} but the device is {device}; recompile it \
         with `vta compile --config` for the device's config"
    )]
    DeviceConfig { model: String, device: String },
    #[error("step {step} ({name}): {message}")]
    Exec {
        step: usize,
        name: String,
        message: String,
    },
}

impl From<BundleError> for Error {
    fn from(source: BundleError) -> Error {
        Error::Bundle {
            file: String::new(),
            source,
        }
    }
}

/// Where a step runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Accelerator,
    Cpu,
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Place::Accelerator => "accel",
            Place::Cpu => "cpu",
        })
    }
}

/// How one accelerator step of the plan is executed.
#[derive(Debug, Clone)]
pub enum Placement {
    /// Its own accelerator program.
    Program(Box<LayerProgram>),
    /// The back end refused the layer (the reason); it runs on the CPU, exactly.
    Refused(String),
}

/// One accelerator step of the plan and its program.
#[derive(Debug, Clone)]
pub struct AccelStep {
    /// Index in [`Plan::steps`].
    pub step: usize,
    pub name: String,
    /// `QConv2d`, `QDense`, ...
    pub kind: String,
    /// FNV-1a of the layer's parameters and input shapes (see the module documentation).
    pub fingerprint: u64,
    pub placement: Placement,
    /// Back-end compile time (zero for a loaded model).
    pub compile_time: Duration,
}

impl AccelStep {
    pub fn program(&self) -> Option<&LayerProgram> {
        match &self.placement {
            Placement::Program(p) => Some(p),
            Placement::Refused(_) => None,
        }
    }
}

/// Calibration results kept with a compiled float model: per graph tensor (in the graph's
/// tensor order), its name and largest magnitude over the calibration set.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    pub samples: usize,
    pub ranges: Vec<(String, f32)>,
}

impl Calibration {
    fn of(g: &Graph, stats: &Stats) -> Calibration {
        Calibration {
            samples: stats.samples,
            ranges: g
                .tensors
                .iter()
                .zip(&stats.max_abs)
                .map(|(t, &m)| (t.name.clone(), m))
                .collect(),
        }
    }

    /// The statistics for `g`, which must have exactly these tensors.
    fn stats_for(&self, g: &Graph) -> Result<Stats, String> {
        if self.ranges.len() != g.tensors.len() {
            return Err(format!(
                "the stored calibration covers {} tensors but the rebuilt graph has {}",
                self.ranges.len(),
                g.tensors.len()
            ));
        }
        if let Some((i, (name, _))) = self
            .ranges
            .iter()
            .enumerate()
            .find(|(i, (n, _))| *n != g.tensors[*i].name)
        {
            return Err(format!(
                "stored calibration tensor {i} is '{name}' but the rebuilt graph's is '{}'",
                g.tensors[i].name
            ));
        }
        Ok(Stats {
            max_abs: self.ranges.iter().map(|r| r.1).collect(),
            samples: self.samples,
        })
    }
}

/// How long compiling took, by phase.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CompileTimes {
    /// ONNX decoding, import and graph passes.
    pub import: Duration,
    /// Running the float model on the calibration inputs.
    pub calibration: Duration,
    /// Quantization and lowering to the plan.
    pub lowering: Duration,
    /// The back end: every accelerator program.
    pub backend: Duration,
}

impl CompileTimes {
    /// The compile time without calibration (which runs the float network on the CPU).
    pub fn compile(&self) -> Duration {
        self.import + self.lowering + self.backend
    }
}

/// A compiled model: the plan, its accelerator programs and everything needed to rebuild it.
#[derive(Debug, Clone)]
pub struct Model {
    pub config: HwConfig,
    /// The model file name, for messages.
    pub source: String,
    /// The original ONNX bytes.
    pub onnx: Vec<u8>,
    pub options: FrontendOptions,
    /// For float models: the calibrated ranges.
    pub calibration: Option<Calibration>,
    pub plan: Plan,
    /// The op-support table (accelerator steps the back end refused are marked CPU).
    pub support: SupportTable,
    /// One per accelerator step of the plan, in step order.
    pub accel: Vec<AccelStep>,
    pub times: CompileTimes,
}

/// Imports and simplifies an ONNX model from bytes.
fn import_graph(onnx: &[u8], source: &str) -> Result<Graph, FrontendError> {
    let model = crate::onnx::decode_model(onnx, source)?;
    let mut g = import::import(&model, source)?;
    passes::simplify(&mut g);
    Ok(g)
}

/// A plan value as the NCHW shape accelerator programs use (rank 2 to 4, missing trailing
/// dimensions 1).
fn nchw_shape(fact: &Fact) -> Result<[usize; 4], String> {
    let s = &fact.shape;
    if !(2..=4).contains(&s.len()) {
        return Err(format!("a rank-{} tensor {fact}", s.len()));
    }
    let mut v = [1; 4];
    v[..s.len()].copy_from_slice(s);
    Ok(v)
}

/// FNV-1a over a stream of fields.
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn bytes(&mut self, b: &[u8]) {
        for &x in b {
            self.0 = (self.0 ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.bytes(s.as_bytes());
    }
    fn i8s<'a>(&mut self, v: impl Iterator<Item = &'a i8>) {
        for &x in v {
            self.0 = (self.0 ^ u64::from(x as u8)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    fn requant(&mut self, r: &crate::qlayer::Requant) {
        self.u64(u64::from(r.pre_shift));
        self.u64(r.mul.len() as u64);
        for &m in &r.mul {
            self.bytes(&m.to_le_bytes());
        }
        self.bytes(&[r.shift, r.zero_point as u8, r.lo as u8, r.hi as u8]);
    }
}

/// The fingerprint of an accelerator step: its layer (kind, name, every parameter) and the
/// NCHW shapes of its inputs.
pub fn fingerprint(layer: &Layer, input_shapes: &[[usize; 4]]) -> u64 {
    let mut h = Fnv::new();
    h.str(layer.kind());
    h.str(layer.name());
    for s in input_shapes {
        s.iter().for_each(|&d| h.u64(d as u64));
    }
    match layer {
        Layer::Conv2d(c) => {
            c.weight.shape().iter().for_each(|&d| h.u64(d as u64));
            h.i8s(c.weight.iter());
            c.bias.iter().for_each(|&b| h.bytes(&b.to_le_bytes()));
            h.u64(c.stride.0 as u64);
            h.u64(c.stride.1 as u64);
            c.pad.iter().for_each(|&p| h.u64(p as u64));
            h.u64(c.groups as u64);
            h.requant(&c.requant);
        }
        Layer::Dense(d) => {
            d.weight.shape().iter().for_each(|&x| h.u64(x as u64));
            h.i8s(d.weight.iter());
            d.bias.iter().for_each(|&b| h.bytes(&b.to_le_bytes()));
            h.requant(&d.requant);
        }
        Layer::Add(a) => {
            h.bytes(&a.mul_a.to_le_bytes());
            h.bytes(&a.mul_b.to_le_bytes());
            h.requant(&a.requant);
        }
        Layer::MaxPool(p) => {
            for v in [p.kernel.0, p.kernel.1, p.stride.0, p.stride.1] {
                h.u64(v as u64);
            }
            p.pad.iter().for_each(|&x| h.u64(x as u64));
        }
        Layer::GlobalAvgPool(p) => h.requant(&p.requant),
    }
    h.0
}

/// The NCHW input shapes of an accelerator step.
fn step_input_shapes(plan: &Plan, step: usize) -> Result<Vec<[usize; 4]>, String> {
    plan.steps[step]
        .inputs
        .iter()
        .map(|&v| nchw_shape(&plan.values[v].fact))
        .collect()
}

/// Compiles one layer into a program of its own.
fn compile_layer(
    cfg: &HwConfig,
    layer: &Layer,
    shapes: &[[usize; 4]],
) -> Result<LayerProgram, BackendError> {
    match layer {
        Layer::Conv2d(l) => backend::compile_conv(cfg, l),
        Layer::Dense(l) => backend::compile_dense(cfg, l, shapes[0][0]),
        Layer::Add(l) => backend::compile_add(cfg, l, shapes[0]),
        Layer::MaxPool(l) => backend::compile_max_pool(cfg, l, shapes[0]),
        Layer::GlobalAvgPool(l) => backend::compile_global_avg_pool(cfg, l, shapes[0]),
    }
}

impl Model {
    /// Compiles an ONNX model (`onnx`: the file's bytes; `source`: its name, for messages)
    /// for `cfg`. A float model is quantized with `calibration` (arrays of the model input's
    /// shape, or with a leading axis that is a multiple of its batch; see
    /// `graph::load_and_plan`). Fails with the support table when nodes cannot be compiled.
    pub fn compile(
        onnx: Vec<u8>,
        source: &str,
        calibration: &[ndarray::ArrayD<f32>],
        cfg: &HwConfig,
        opts: &FrontendOptions,
    ) -> Result<Model, Error> {
        let mut times = CompileTimes::default();
        let t = Instant::now();
        let g = import_graph(&onnx, source)?;
        times.import = t.elapsed();

        let t = Instant::now();
        let stats = if !quant::is_quantized(&g) && opts.offload {
            if calibration.is_empty() {
                return Err(FrontendError::Calibration {
                    file: source.to_string(),
                    message: "the model is a float model: post-training quantization needs \
                              calibration inputs (one or more .npy samples of the model's input)"
                        .into(),
                }
                .into());
            }
            Some(
                quant::calibrate::calibrate(&g, calibration).map_err(|message| {
                    FrontendError::Calibration {
                        file: source.to_string(),
                        message,
                    }
                })?,
            )
        } else {
            None
        };
        times.calibration = t.elapsed();

        let t = Instant::now();
        let (plan, support) = quant::plan_graph_with_stats(&g, stats.as_ref(), cfg, opts)?;
        times.lowering = t.elapsed();

        let t = Instant::now();
        let mut accel = Vec::new();
        for (k, step) in plan.steps.iter().enumerate() {
            let StepKind::Accel(layer) = &step.kind else {
                continue;
            };
            let t1 = Instant::now();
            let shapes = step_input_shapes(&plan, k).map_err(|message| Error::Exec {
                step: k,
                name: step.name.clone(),
                message,
            })?;
            let placement = match compile_layer(cfg, layer, &shapes) {
                Ok(p) => Placement::Program(Box::new(p)),
                Err(
                    e @ (BackendError::Unsupported { .. }
                    | BackendError::UnsupportedConfig { .. }
                    | BackendError::Layout { .. }),
                ) => Placement::Refused(e.to_string()),
                Err(source) => {
                    return Err(Error::Backend {
                        step: k,
                        name: step.name.clone(),
                        source,
                    })
                }
            };
            accel.push(AccelStep {
                step: k,
                name: step.name.clone(),
                kind: layer.kind().to_string(),
                fingerprint: fingerprint(layer, &shapes),
                placement,
                compile_time: t1.elapsed(),
            });
        }
        times.backend = t.elapsed();

        let mut m = Model {
            config: cfg.clone(),
            source: source.to_string(),
            onnx,
            options: opts.clone(),
            calibration: stats.as_ref().map(|s| Calibration::of(&g, s)),
            plan,
            support,
            accel,
            times,
        };
        m.mark_refused();
        Ok(m)
    }

    /// Marks accelerator steps the back end refused as CPU steps in the support table.
    fn mark_refused(&mut self) {
        for a in &self.accel {
            let Placement::Refused(reason) = &a.placement else {
                continue;
            };
            for e in &mut self.support.entries {
                if let Support::Accel { layer, step, .. } = &e.support {
                    if *step == a.step {
                        e.support = Support::Cpu {
                            step: a.step,
                            reason: format!("{layer} refused by the back end: {reason}"),
                        };
                    }
                }
            }
        }
    }

    /// Rebuilds the plan of a stored model (see the module documentation) and attaches the
    /// stored programs after checking that they belong to it.
    #[allow(clippy::too_many_arguments)]
    fn rebuild(
        config: HwConfig,
        source: String,
        onnx: Vec<u8>,
        options: FrontendOptions,
        calibration: Option<Calibration>,
        step_count: usize,
        accel: Vec<AccelStep>,
    ) -> Result<Model, Error> {
        let mismatch = |m: String| -> Error { BundleError::Rebuild(m).into() };
        let t = Instant::now();
        let g = import_graph(&onnx, &source)?;
        let import_time = t.elapsed();
        let t = Instant::now();
        let stats = calibration
            .as_ref()
            .map(|c| c.stats_for(&g))
            .transpose()
            .map_err(mismatch)?;
        let (plan, support) = quant::plan_graph_with_stats(&g, stats.as_ref(), &config, &options)?;
        if plan.steps.len() != step_count {
            return Err(mismatch(format!(
                "the rebuilt plan has {} steps, the file {step_count}",
                plan.steps.len()
            )));
        }
        let accel_steps: Vec<usize> = (0..plan.steps.len())
            .filter(|&k| plan.steps[k].is_accel())
            .collect();
        let stored: Vec<usize> = accel.iter().map(|a| a.step).collect();
        if accel_steps != stored {
            return Err(mismatch(format!(
                "the rebuilt plan has accelerator steps {accel_steps:?}, the file has programs for {stored:?}"
            )));
        }
        for a in &accel {
            let step = &plan.steps[a.step];
            let StepKind::Accel(layer) = &step.kind else {
                unreachable!("checked above")
            };
            let shapes = step_input_shapes(&plan, a.step).map_err(mismatch)?;
            if step.name != a.name
                || layer.kind() != a.kind
                || fingerprint(layer, &shapes) != a.fingerprint
            {
                return Err(mismatch(format!(
                    "step {} is {} '{}' in the rebuilt plan, but the stored program was compiled \
                     from {} '{}' with other parameters",
                    a.step,
                    layer.kind(),
                    step.name,
                    a.kind,
                    a.name
                )));
            }
        }
        let mut m = Model {
            config,
            source,
            onnx,
            options,
            calibration,
            plan,
            support,
            accel,
            times: CompileTimes {
                import: import_time,
                lowering: t.elapsed(),
                ..Default::default()
            },
        };
        m.mark_refused();
        Ok(m)
    }

    /// The compiled-model file (see the module documentation).
    pub fn to_bytes(&self) -> Result<Vec<u8>, BundleError> {
        bundle::write(self)
    }

    /// Reads a compiled-model file; `file` names it in errors. The model runs on its own
    /// config.
    pub fn from_bytes(bytes: &[u8], file: &str) -> Result<Model, Error> {
        bundle::read(bytes, file, None)
    }

    /// Reads a compiled-model file that must have been compiled for `cfg`'s ISA (configs that
    /// differ only in bus width, queue depths or clock run the same programs).
    pub fn from_bytes_for(bytes: &[u8], file: &str, cfg: &HwConfig) -> Result<Model, Error> {
        bundle::read(bytes, file, Some(cfg))
    }

    /// Number of accelerator steps with a program, and of steps on the CPU.
    pub fn counts(&self) -> (usize, usize) {
        let a = self.accel.iter().filter(|a| a.program().is_some()).count();
        (a, self.plan.steps.len() - a)
    }

    fn accel_of(&self, step: usize) -> Option<&AccelStep> {
        self.accel
            .binary_search_by_key(&step, |a| a.step)
            .ok()
            .map(|i| &self.accel[i])
    }

    /// Checks that `inputs` are the model's inputs (count, element type, shape).
    pub fn check_inputs(&self, inputs: &[Tensor]) -> Result<(), Error> {
        if inputs.len() != self.plan.inputs.len() {
            return Err(Error::Input(format!(
                "the model has {} input(s) ({}), {} given",
                self.plan.inputs.len(),
                self.input_list(),
                inputs.len()
            )));
        }
        for (&v, t) in self.plan.inputs.iter().zip(inputs) {
            let want = &self.plan.values[v];
            if t.fact() != want.fact {
                return Err(Error::Input(format!(
                    "input '{}' must be {}, got {}",
                    want.name,
                    want.fact,
                    t.fact()
                )));
            }
        }
        Ok(())
    }

    /// `name dtype[shape]` of every input.
    pub fn input_list(&self) -> String {
        self.plan
            .inputs
            .iter()
            .map(|&v| {
                format!(
                    "'{}' {}",
                    self.plan.values[v].name, self.plan.values[v].fact
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Runs the model on `dev` (which must implement the model's config): accelerator steps as
    /// their programs, the others on the CPU. `inputs` in the order of the model's inputs,
    /// with their ONNX types and shapes.
    pub fn run(&self, dev: &mut dyn Device, inputs: &[Tensor]) -> Result<RunResult, Error> {
        if dev.config().isa_hash() != self.config.isa_hash() {
            return Err(Error::DeviceConfig {
                model: self.config.config_string(),
                device: dev.config().config_string(),
            });
        }
        self.check_inputs(inputs)?;
        let t_all = Instant::now();
        let plan = &self.plan;
        let mut values: Vec<Option<Tensor>> = plan
            .values
            .iter()
            .map(|v| v.constant.as_deref().cloned())
            .collect();
        for (&v, t) in plan.inputs.iter().zip(inputs) {
            values[v] = Some(t.clone());
        }
        let mut layers = Vec::with_capacity(plan.steps.len());
        for (k, step) in plan.steps.iter().enumerate() {
            let fail = |message: String| Error::Exec {
                step: k,
                name: step.name.clone(),
                message,
            };
            let t = Instant::now();
            let accel = self.accel_of(k);
            let (outs, report, note) = match accel.map(|a| &a.placement) {
                Some(Placement::Program(lp)) => {
                    let (y, report) = run_program_step(dev, lp, plan, k, &values).map_err(fail)?;
                    (vec![y], Some(report), None)
                }
                refused => (
                    reference::eval_step(step, &values).map_err(fail)?,
                    None,
                    match refused {
                        Some(Placement::Refused(r)) => Some(r.clone()),
                        _ => None,
                    },
                ),
            };
            let wall = t.elapsed();
            if outs.len() < step.outputs.len() {
                return Err(fail("too few outputs".into()));
            }
            for (&o, y) in step.outputs.iter().zip(outs) {
                if y.fact() != plan.values[o].fact {
                    return Err(fail(format!(
                        "produced {}, the plan expects {}",
                        y.fact(),
                        plan.values[o].fact
                    )));
                }
                values[o] = Some(y);
            }
            layers.push(LayerRun {
                step: k,
                name: step.name.clone(),
                kind: step.kind_name(),
                place: if report.is_some() {
                    Place::Accelerator
                } else {
                    Place::Cpu
                },
                note,
                wall,
                report,
                samples: 1,
            });
        }
        let outputs = plan
            .outputs
            .iter()
            .map(|&o| values[o].clone().expect("every step ran"))
            .collect();
        Ok(RunResult {
            outputs,
            values,
            layers,
            wall: t_all.elapsed(),
            backend: dev.name().to_string(),
            samples: 1,
        })
    }

    /// Runs the integer reference executor on `inputs` and compares every step's output of
    /// `run` (a run of this model on the same inputs) with it, in step order.
    pub fn check(&self, inputs: &[Tensor], run: &RunResult) -> Result<Check, Error> {
        self.check_inputs(inputs)?;
        let trace = reference::run_plan(&self.plan, inputs).map_err(|e| Error::Exec {
            step: e.step,
            name: e.name,
            message: format!("integer reference: {}", e.message),
        })?;
        if let Some(m) = reference::first_mismatch(&self.plan, &trace, &run.values) {
            return Ok(Check::Mismatch(Box::new(MismatchReport {
                place: run.layers.get(m.step).map_or(Place::Cpu, |l| l.place),
                kind: self.plan.steps[m.step].kind_name(),
                fact: self.plan.values[m.value].fact.clone(),
                mismatch: m,
            })));
        }
        let mut layers = 0;
        let mut accel = 0;
        let mut elements = 0;
        for (k, step) in self.plan.steps.iter().enumerate() {
            let compared: Vec<ValueId> = step
                .outputs
                .iter()
                .copied()
                .filter(|&o| {
                    trace.get(o).is_some() && run.values.get(o).is_some_and(|v| v.is_some())
                })
                .collect();
            if compared.is_empty() {
                continue;
            }
            layers += 1;
            if run
                .layers
                .get(k)
                .is_some_and(|l| l.place == Place::Accelerator)
            {
                accel += 1;
            }
            elements += compared
                .iter()
                .map(|&o| self.plan.values[o].fact.len())
                .sum::<usize>();
        }
        Ok(Check::BitExact {
            layers,
            accel_layers: accel,
            elements,
        })
    }

    /// The compile report: the op-support table, the tiling chosen for every accelerator
    /// layer, and the compile times.
    pub fn compile_report(&self) -> String {
        let mut s = String::new();
        let counts: Vec<String> = self
            .support
            .counts()
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        let _ = writeln!(
            s,
            "op support ({} ONNX nodes: {}):",
            self.support.entries.len(),
            counts.join(", ")
        );
        for line in self.support.to_string().lines() {
            let _ = writeln!(s, "  {line}");
        }
        let _ = writeln!(s);
        let _ = write!(s, "{}", self.layer_report());
        let (a, c) = self.counts();
        let _ = writeln!(
            s,
            "plan: {} steps, {a} on the accelerator, {c} on the CPU",
            self.plan.steps.len()
        );
        s
    }

    /// The accelerator layers: shapes, tiling, program size.
    pub fn layer_report(&self) -> String {
        let mut s = String::new();
        if self.accel.is_empty() {
            let _ = writeln!(s, "accelerator layers: none");
            return s;
        }
        let _ = writeln!(s, "accelerator layers (tiling: output-channel blocks tco x input-channel blocks tci x rows th x columns tw x sample blocks tn, loop order):");
        let rows: Vec<[String; 7]> = self
            .accel
            .iter()
            .map(|a| {
                let st = &self.plan.steps[a.step];
                let shape = |v: &ValueId| format!("{:?}", self.plan.values[*v].fact.shape);
                let io = format!(
                    "{} -> {}",
                    st.inputs
                        .iter()
                        .filter(|&&v| self.plan.values[v].constant.is_none())
                        .map(shape)
                        .collect::<Vec<_>>()
                        .join(" + "),
                    st.outputs.iter().map(shape).collect::<Vec<_>>().join(", ")
                );
                let (tiling, tiles, insns) = match &a.placement {
                    Placement::Program(lp) => {
                        let info = &lp.layers[0];
                        let t = match &info.tiling {
                            Some(t) => format!(
                                "{}x{}x{}x{}x{} {}",
                                t.tco,
                                t.tci,
                                t.th,
                                t.tw,
                                t.tn,
                                match t.order {
                                    backend::LoopOrder::CoOuter => "co-outer",
                                    backend::LoopOrder::SpatialOuter => "spatial-outer",
                                }
                            ),
                            None => "(ALU)".to_string(),
                        };
                        (
                            t,
                            info.tiles.to_string(),
                            lp.program.insns.len().to_string(),
                        )
                    }
                    Placement::Refused(r) => (format!("CPU: {r}"), "-".into(), "-".into()),
                };
                [
                    a.step.to_string(),
                    a.name.clone(),
                    a.kind.clone(),
                    io,
                    tiling,
                    tiles,
                    insns,
                ]
            })
            .collect();
        let head = ["step", "layer", "kind", "shape", "tiling", "tiles", "insns"];
        let w: Vec<usize> = (0..7)
            .map(|i| {
                rows.iter()
                    .map(|r| r[i].len())
                    .max()
                    .unwrap_or(0)
                    .max(head[i].len())
            })
            .collect();
        let line = |r: [&str; 7]| {
            format!(
                "  {:>w0$}  {:w1$}  {:w2$}  {:w3$}  {:w4$}  {:>w5$}  {:>w6$}",
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                r[6],
                w0 = w[0],
                w1 = w[1],
                w2 = w[2],
                w3 = w[3],
                w4 = w[4],
                w5 = w[5],
                w6 = w[6]
            )
            .trim_end()
            .to_string()
        };
        let _ = writeln!(s, "{}", line(head));
        for r in &rows {
            let _ = writeln!(
                s,
                "{}",
                line([&r[0], &r[1], &r[2], &r[3], &r[4], &r[5], &r[6]].map(|x| x.as_str()))
            );
        }
        s
    }
}

/// Runs one accelerator step's program on the values computed so far.
fn run_program_step(
    dev: &mut dyn Device,
    lp: &LayerProgram,
    plan: &Plan,
    k: usize,
    values: &[Option<Tensor>],
) -> Result<(Tensor, RunReport), String> {
    let step = &plan.steps[k];
    let mut ins: Vec<Array4<i8>> = Vec::with_capacity(step.inputs.len());
    for &v in &step.inputs {
        let Some(Tensor::I8(a)) = values[v].as_ref() else {
            return Err(format!(
                "input %{v} is not a computed int8 tensor ({})",
                plan.values[v].fact
            ));
        };
        let s = nchw_shape(&plan.values[v].fact)?;
        let a4 = a
            .view()
            .into_shape_with_order(s)
            .map_err(|e| e.to_string())?
            .to_owned();
        ins.push(a4);
    }
    let views: Vec<_> = ins.iter().map(|a| a.view()).collect();
    let (mut outs, report) = lp
        .run_all(dev, &views, RunTimeout::default())
        .map_err(|e| e.to_string())?;
    let y = outs.swap_remove(0);
    let o = step.outputs[0];
    let shape = plan.values[o].fact.shape.clone();
    let y = y
        .into_dyn()
        .into_shape_with_order(IxDyn(&shape))
        .map_err(|e| format!("output shape: {e}"))?;
    Ok((Tensor::I8(y), report))
}

/// One step of a run.
#[derive(Debug, Clone)]
pub struct LayerRun {
    pub step: usize,
    pub name: String,
    /// [`crate::graph::Step::kind_name`].
    pub kind: String,
    pub place: Place,
    /// Why an accelerator layer ran on the CPU (the back end refused it).
    pub note: Option<String>,
    /// Host time of the step (for accelerator steps: packing, the device run, unpacking).
    pub wall: Duration,
    /// The device's report (accelerator steps).
    pub report: Option<RunReport>,
    /// Runs summed into this entry.
    pub samples: usize,
}

impl LayerRun {
    /// A device counter or extra (accelerator steps).
    pub fn get(&self, name: &str) -> Option<u64> {
        self.report.as_ref().and_then(|r| r.get(name))
    }

    /// Bytes the device moved between DRAM and its scratchpads (all loads and stores).
    pub fn dram_bytes(&self) -> Option<u64> {
        let r = self.report.as_ref()?;
        Some(
            [
                "inp_load_bytes",
                "wgt_load_bytes",
                "acc_load_bytes",
                "uop_load_bytes",
                "out_store_bytes",
            ]
            .iter()
            .filter_map(|n| r.get(n))
            .sum(),
        )
    }

    /// Adds another run of the same step (counters and times summed).
    fn accumulate(&mut self, other: &LayerRun) {
        self.wall += other.wall;
        self.samples += other.samples;
        if let (Some(a), Some(b)) = (&mut self.report, &other.report) {
            a.wall_time += b.wall_time;
            for (n, v) in a.counters.iter_mut().chain(a.extras.iter_mut()) {
                *v += b.get(n).unwrap_or(0);
            }
        }
    }
}

/// The result of [`Model::run`].
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The model's outputs, in ONNX order, with their ONNX types.
    pub outputs: Vec<Tensor>,
    /// Every plan value computed, by [`ValueId`] (for [`Model::check`]).
    pub values: Vec<Option<Tensor>>,
    /// One per plan step, in order.
    pub layers: Vec<LayerRun>,
    pub wall: Duration,
    /// The device's name.
    pub backend: String,
    /// Runs summed into this result ([`RunResult::accumulate`]).
    pub samples: usize,
}

impl RunResult {
    /// Adds the per-layer figures of another run of the same model (outputs and values keep
    /// this run's).
    pub fn accumulate(&mut self, other: &RunResult) {
        self.wall += other.wall;
        self.samples += other.samples;
        for (a, b) in self.layers.iter_mut().zip(&other.layers) {
            a.accumulate(b);
        }
    }

    /// The per-layer table and totals.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let has_cycles = self.layers.iter().any(|l| l.get("cycles").is_some());
        let head = [
            "step",
            "name",
            "kind",
            "where",
            "time ms",
            "GEMM uops",
            "ALU uops",
            "DRAM KiB",
            "cycles",
        ];
        let ncol = if has_cycles { 9 } else { 8 };
        let opt = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
        let kib = |v: Option<u64>| {
            v.map_or_else(|| "-".to_string(), |v| format!("{:.1}", v as f64 / 1024.0))
        };
        let rows: Vec<Vec<String>> = self
            .layers
            .iter()
            .map(|l| {
                vec![
                    l.step.to_string(),
                    l.name.clone(),
                    l.kind.clone(),
                    if l.note.is_some() {
                        "cpu*".to_string()
                    } else {
                        l.place.to_string()
                    },
                    format!("{:.3}", l.wall.as_secs_f64() * 1e3),
                    opt(l.get("gemm_uops")),
                    opt(l.get("alu_uops")),
                    kib(l.dram_bytes()),
                    opt(l.get("cycles")),
                ]
            })
            .collect();
        let w: Vec<usize> = (0..ncol)
            .map(|i| {
                rows.iter()
                    .map(|r| r[i].len())
                    .max()
                    .unwrap_or(0)
                    .max(head[i].len())
            })
            .collect();
        let right = [true, false, false, false, true, true, true, true, true];
        let fmt_row = |r: &[&str]| {
            let mut line = String::from(" ");
            for i in 0..ncol {
                if right[i] {
                    let _ = write!(line, " {:>w$}", r[i], w = w[i]);
                } else {
                    let _ = write!(line, " {:w$}", r[i], w = w[i]);
                }
            }
            line.trim_end().to_string()
        };
        let _ = writeln!(s, "{}", fmt_row(&head));
        for r in &rows {
            let refs: Vec<&str> = r.iter().map(|x| x.as_str()).collect();
            let _ = writeln!(s, "{}", fmt_row(&refs));
        }
        let sum = |p: Place| -> (usize, Duration) {
            self.layers
                .iter()
                .filter(|l| l.place == p)
                .fold((0, Duration::ZERO), |(n, d), l| (n + 1, d + l.wall))
        };
        let (na, ta) = sum(Place::Accelerator);
        let (nc, tc) = sum(Place::Cpu);
        let total = |name: &str| -> u64 { self.layers.iter().filter_map(|l| l.get(name)).sum() };
        let dev_time: Duration = self
            .layers
            .iter()
            .filter_map(|l| l.report.as_ref().map(|r| r.wall_time))
            .sum();
        let dram: u64 = self.layers.iter().filter_map(|l| l.dram_bytes()).sum();
        let per = if self.samples > 1 {
            format!(" ({} runs summed)", self.samples)
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "total{per}: {:.3} ms; {na} steps on the accelerator ({}) {:.3} ms, of which the device run {:.3} ms; {nc} on the CPU {:.3} ms",
            self.wall.as_secs_f64() * 1e3,
            self.backend,
            ta.as_secs_f64() * 1e3,
            dev_time.as_secs_f64() * 1e3,
            tc.as_secs_f64() * 1e3,
        );
        let _ = writeln!(
            s,
            "device counters: {} GEMM uops ({} MACs), {} ALU uops, {:.1} KiB DRAM traffic (loads + stores), {} instructions{}",
            total("gemm_uops"),
            total("macs"),
            total("alu_uops"),
            dram as f64 / 1024.0,
            total("load_insns") + total("compute_insns") + total("store_insns"),
            if has_cycles {
                format!(", {} cycles", total("cycles"))
            } else {
                format!("; no cycle counts ({} is not cycle-accurate)", self.backend)
            }
        );
        if self.layers.iter().any(|l| l.note.is_some()) {
            let _ = writeln!(s, "cpu*: an accelerator layer the back end refused (see `vta compile`), run on the CPU exactly");
        }
        s
    }
}

/// The outcome of [`Model::check`].
#[derive(Debug, Clone, PartialEq)]
pub enum Check {
    /// Every step's output equals the reference's.
    BitExact {
        /// Steps compared.
        layers: usize,
        /// Of which ran on the accelerator.
        accel_layers: usize,
        /// Elements compared.
        elements: usize,
    },
    Mismatch(Box<MismatchReport>),
}

/// The first mismatch, with context.
#[derive(Debug, Clone, PartialEq)]
pub struct MismatchReport {
    pub mismatch: Mismatch,
    pub place: Place,
    pub kind: String,
    pub fact: Fact,
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Check::BitExact {
                layers,
                accel_layers,
                elements,
            } => write!(
                f,
                "bit-exact: {layers} layers ({accel_layers} on the accelerator), {elements} elements"
            ),
            Check::Mismatch(r) => {
                let m = &r.mismatch;
                write!(
                    f,
                    "MISMATCH at step {} '{}' ({}, {}): output %{} {} element {:?} (flat {}): expected {}, got {}",
                    m.step,
                    m.step_name,
                    r.kind,
                    match r.place {
                        Place::Accelerator => "accelerator",
                        Place::Cpu => "cpu",
                    },
                    m.value,
                    r.fact,
                    m.index,
                    m.flat_index,
                    m.expected,
                    m.got
                )
            }
        }
    }
}

impl Check {
    pub fn is_exact(&self) -> bool {
        matches!(self, Check::BitExact { .. })
    }
}
