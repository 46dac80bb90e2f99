//! Compiling a model: ONNX bytes (and calibration inputs for a float model) to a
//! [`vta_runtime::Model`] — the front end's plan (import, passes, quantization, lowering) and
//! the back end's launches, each running consecutive accelerator steps as one device program
//! ([`crate::launches`]), with the back end's reason for every layer it refused (which then runs
//! on the CPU with the layer's exact semantics) — plus what only `vta compile` reports: the
//! op-support table, the tiling chosen for every layer and the compile times.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use isa::HwConfig;
use vta_runtime::model::Model;

use crate::backend::{self, BackendError, LayerInfo};
use crate::frontend::{import_graph_shaped, FrontendError, FrontendOptions};
use crate::graph::plan::{StepKind, ValueId};
use crate::graph::{Layer, Support, SupportTable};
use crate::{launches, quant};

/// How the back end groups accelerator steps into launches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackendOptions {
    /// Every accelerator step a launch of its own (per-layer device counters in `vta run`, at
    /// the cost of copying every activation through the host), instead of one launch per run
    /// of consecutive accelerator steps.
    pub launch_per_layer: bool,
    /// Depthwise convolutions on the GEMM core with diagonal weight tiles (fewer cycles,
    /// BLOCK_IN times the real MACs) instead of the ALU (the real MACs); see
    /// [`backend::depthwise`].
    pub depthwise_on_gemm: bool,
    /// End a launch where the next accelerator step does not read the step before it, at
    /// a fork (before the first of two readers of a tensor that do not depend on each other)
    /// and before a join of such branches, so that independent branches (inception branches,
    /// a fire module's expands, detection heads) are separate launches that the pool
    /// executor can run at the same time (`vta run --schedule`), at the cost of copying
    /// their outputs through the host.
    pub split_branches: bool,
}

/// Why compiling a model failed.
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
    #[error("step {step} ({name}): {message}")]
    Plan {
        step: usize,
        name: String,
        message: String,
    },
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

/// How the back end compiled one accelerator step.
#[derive(Debug, Clone)]
pub enum LayerReport {
    /// Its layer as compiled, in launch `.0`.
    Compiled(usize, Box<LayerInfo>),
    /// The back end's reason for refusing it.
    Refused(String),
}

/// The compile report of one accelerator step.
#[derive(Debug, Clone)]
pub struct StepReport {
    /// Index in the plan's steps.
    pub step: usize,
    pub name: String,
    /// `QConv2d`, `QDense`, ...
    pub kind: String,
    pub report: LayerReport,
}

/// A model imported and, when it is a float model, calibrated: the config-independent first
/// half of compiling ([`Compiled::compile_imported`] does the rest for a config).
#[derive(Debug, Clone)]
pub struct Imported {
    pub graph: crate::graph::Graph,
    /// The calibration ranges of a float model (`None` for a quantized one).
    pub stats: Option<quant::calibrate::Stats>,
    /// The model's name, for messages.
    pub source: String,
    /// Import and calibration times (the other phases zero).
    pub times: CompileTimes,
}

impl Imported {
    /// Decodes and imports `onnx` (`source` names it in errors) and calibrates a float model
    /// on `calibration` (see [`Compiled::compile`]); `stage` hears `importing` and
    /// `calibrating ...`.
    pub fn new(
        onnx: &[u8],
        source: &str,
        calibration: &[ndarray::ArrayD<f32>],
        opts: &FrontendOptions,
        stage: &mut dyn FnMut(&str),
    ) -> Result<Imported, Error> {
        let mut times = CompileTimes::default();
        let t = Instant::now();
        stage("importing");
        let graph = import_graph_shaped(onnx, source, opts.memory_budget, &opts.input_shapes)?;
        times.import = t.elapsed();

        let t = Instant::now();
        let stats = if !quant::is_quantized(&graph) && opts.offload {
            if calibration.is_empty() {
                return Err(FrontendError::Calibration {
                    file: source.to_string(),
                    message: "the model is a float model: post-training quantization needs \
                              calibration inputs (one or more .npy samples of the model's input)"
                        .into(),
                }
                .into());
            }
            stage("calibrating (running the float model on the calibration inputs)");
            Some(
                quant::calibrate::calibrate(&graph, calibration).map_err(|message| {
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
        Ok(Imported {
            graph,
            stats,
            source: source.to_string(),
            times,
        })
    }
}

/// A compiled model ([`Compiled::model`], what the file holds and `vta run` runs) and the
/// compile report. Dereferences to the model.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub model: Model,
    /// The op-support table (accelerator steps the back end refused are marked CPU).
    pub support: SupportTable,
    /// One per accelerator step of the plan, in step order.
    pub steps: Vec<StepReport>,
    /// Calibration samples of a float model.
    pub calibration_samples: Option<usize>,
    pub times: CompileTimes,
}

impl StepReport {
    /// Whether the back end refused the layer (it runs on the CPU).
    pub fn is_refused(&self) -> bool {
        matches!(self.report, LayerReport::Refused(_))
    }
}

impl std::ops::Deref for Compiled {
    type Target = Model;
    fn deref(&self) -> &Model {
        &self.model
    }
}

impl Compiled {
    /// Compiles an ONNX model (`onnx`: the file's bytes; `source`: its name, for messages)
    /// for `cfg`. A float model is quantized with `calibration` (arrays of the model input's
    /// shape, or with a leading axis that is a multiple of its batch; see
    /// `frontend::load_and_plan`). Fails with the support table when nodes cannot be compiled.
    pub fn compile(
        onnx: Vec<u8>,
        source: &str,
        calibration: &[ndarray::ArrayD<f32>],
        cfg: &HwConfig,
        opts: &FrontendOptions,
    ) -> Result<Compiled, Error> {
        let backend = BackendOptions::default();
        Self::compile_observed(onnx, source, calibration, cfg, opts, &backend, &mut |_| {})
    }

    /// [`Compiled::compile`] with back-end options, telling `stage` what it is doing
    /// (`importing`, `calibrating on N samples`, `lowering`, `back end: step K/N NAME`), for
    /// progress displays.
    pub fn compile_observed(
        onnx: Vec<u8>,
        source: &str,
        calibration: &[ndarray::ArrayD<f32>],
        cfg: &HwConfig,
        opts: &FrontendOptions,
        backend: &BackendOptions,
        stage: &mut dyn FnMut(&str),
    ) -> Result<Compiled, Error> {
        let imported = Imported::new(&onnx, source, calibration, opts, stage)?;
        Self::compile_imported(&imported, cfg, opts, backend, stage)
    }

    /// Compiles an imported (and calibrated) model for `cfg`: what [`Compiled::compile_observed`]
    /// does after [`Imported::new`], so that one import serves many configs (design-space
    /// exploration compiles the same network for every config of a sweep).
    pub fn compile_imported(
        imported: &Imported,
        cfg: &HwConfig,
        opts: &FrontendOptions,
        backend: &BackendOptions,
        stage: &mut dyn FnMut(&str),
    ) -> Result<Compiled, Error> {
        let (g, stats, source) = (&imported.graph, imported.stats.as_ref(), &imported.source);
        let mut times = imported.times;
        let t = Instant::now();
        stage("quantizing and lowering");
        let (plan, support) = quant::plan_graph_with_stats(g, stats, cfg, opts)?;
        times.lowering = t.elapsed();

        let t = Instant::now();
        let grouped = launches::group(
            &plan,
            cfg,
            backend.launch_per_layer,
            backend.depthwise_on_gemm,
            backend.split_branches,
            &mut |k| {
                stage(&format!(
                    "back end: step {k}/{} {}",
                    plan.steps.len(),
                    plan.steps[k].name
                ))
            },
        )
        .map_err(|(step, source)| Error::Backend {
            step,
            name: plan
                .steps
                .get(step)
                .map_or_else(String::new, |s| s.name.clone()),
            source,
        })?;
        let launch_of: Vec<Option<usize>> = {
            let mut of = vec![None; plan.steps.len()];
            for a in &grouped.accel {
                of[a.step] = a.launch();
            }
            of
        };
        let reports = grouped
            .layers
            .into_iter()
            .map(|(k, r)| {
                let st = &plan.steps[k];
                let kind = match &st.kind {
                    StepKind::Accel(layer) => layer.kind().to_string(),
                    _ => st.kind_name(),
                };
                StepReport {
                    step: k,
                    name: st.name.clone(),
                    kind,
                    report: match r {
                        Ok(info) => LayerReport::Compiled(
                            launch_of[k].expect("a compiled step is in a launch"),
                            Box::new(info),
                        ),
                        Err(reason) => LayerReport::Refused(reason),
                    },
                }
            })
            .collect();
        times.backend = t.elapsed();

        let mut c = Compiled {
            model: Model {
                config: cfg.clone(),
                source: source.clone(),
                plan,
                accel: grouped.accel,
                launches: grouped.launches,
            },
            support,
            steps: reports,
            calibration_samples: stats.map(|s| s.samples),
            times,
        };
        c.mark_refused();
        Ok(c)
    }

    /// Marks accelerator steps the back end refused as CPU steps in the support table.
    fn mark_refused(&mut self) {
        for a in &self.steps {
            let LayerReport::Refused(reason) = &a.report else {
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
        let _ = writeln!(
            s,
            "{}",
            vta_runtime::graph::TaskGraph::of_model(&self.model).summary()
        );
        s
    }

    /// The lanes a GEMM layer's values need: `w4 x i4 -> o4` for weights, inputs and outputs
    /// that fit 4-bit lanes (from the weights, the input's range and the output clamp);
    /// `-` for other layers.
    fn widths(&self, step: usize) -> String {
        let bits = |lo: i32, hi: i32| {
            [2u32, 4, 8]
                .into_iter()
                .find(|&b| {
                    let (min, max) = backend::lane_range(b);
                    lo >= min && hi <= max
                })
                .unwrap_or(8)
        };
        let st = &self.plan.steps[step];
        let span = |lo: i32, hi: i32, &w: &i8| (lo.min(i32::from(w)), hi.max(i32::from(w)));
        let ((wlo, whi), requant) = match &st.kind {
            StepKind::Accel(Layer::Conv2d(l)) => (
                l.weight.iter().fold((0, 0), |(a, b), w| span(a, b, w)),
                &l.requant,
            ),
            StepKind::Accel(Layer::Dense(l)) => (
                l.weight.iter().fold((0, 0), |(a, b), w| span(a, b, w)),
                &l.requant,
            ),
            _ => return "-".into(),
        };
        let input = st
            .inputs
            .iter()
            .find(|&&v| self.plan.values[v].constant.is_none())
            .and_then(|&v| self.plan.values[v].range)
            .unwrap_or((i8::MIN, i8::MAX));
        format!(
            "w{} x i{} -> o{}",
            bits(wlo, whi),
            bits(input.0.into(), input.1.into()),
            bits(requant.lo.into(), requant.hi.into())
        )
    }

    /// The accelerator layers: shapes, lane widths, tiling, program size.
    pub fn layer_report(&self) -> String {
        let mut s = String::new();
        if self.steps.is_empty() {
            let _ = writeln!(s, "accelerator layers: none");
            return s;
        }
        let _ = writeln!(s, "accelerator layers (launch: the device program running it; tiling: output-channel blocks tco x input-channel blocks tci x rows th x columns tw x sample blocks tn, loop order; 'resident': every input and weight chunk loaded once, into a place of its own; 'tapered': output-channel tiles of tco blocks, then each half the one before; 'folded': the kernel's columns or whole window folded into the input channels, which the host packs; 'bit-sliced': weights wider than the core's lanes, run as one GEMM pass per weight digit, combined with shifts in the accumulators; 'outputs as planes': outputs wider than the lanes, stored as digit planes the host combines):");
        let rows: Vec<Vec<String>> = self
            .steps
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
                let (launch, tiling, tiles, insns) = match &a.report {
                    LayerReport::Compiled(launch, info) => {
                        let t = match &info.tiling {
                            Some(t) => format!(
                                "{}x{}x{}x{}x{} {}{}{}{}{}",
                                t.tco,
                                t.tci,
                                t.th,
                                t.tw,
                                t.tn,
                                match t.order {
                                    backend::LoopOrder::CoOuter => "co-outer",
                                    backend::LoopOrder::SpatialOuter => "spatial-outer",
                                },
                                match (t.resident, t.taper) {
                                    (true, true) => ", resident, tapered",
                                    (true, false) => ", resident",
                                    _ => "",
                                },
                                match info.fold {
                                    None => "",
                                    Some(backend::Fold::Columns) => ", columns folded",
                                    Some(backend::Fold::Window) => ", window folded",
                                },
                                match info.passes {
                                    1 => String::new(),
                                    p => format!(
                                        ", bit-sliced: {p} passes of {}-bit weight digits",
                                        self.config.wgt_width()
                                    ),
                                },
                                match info.out_planes {
                                    1 => String::new(),
                                    p => format!(
                                        ", outputs as {p} planes of {}-bit digits",
                                        self.config.inp_width()
                                    ),
                                }
                            ),
                            None => match (&info.fused_into, info.movement) {
                                (Some(conv), _) => format!("(ALU) in {conv}'s epilogue"),
                                (None, Some(m)) => m.to_string(),
                                (None, None) => "(ALU)".to_string(),
                            },
                        };
                        (
                            format!("L{launch}"),
                            t,
                            info.tiles.to_string(),
                            info.insns.to_string(),
                        )
                    }
                    LayerReport::Refused(r) => {
                        ("-".into(), format!("CPU: {r}"), "-".into(), "-".into())
                    }
                };
                vec![
                    a.step.to_string(),
                    a.name.clone(),
                    a.kind.clone(),
                    io,
                    self.widths(a.step),
                    launch,
                    tiling,
                    tiles,
                    insns,
                ]
            })
            .collect();
        let head = [
            "step", "layer", "kind", "shape", "widths", "launch", "tiling", "tiles", "insns",
        ];
        let right = [true, false, false, false, false, false, false, true, true];
        s.push_str(&vta_runtime::report::columns(&head, &rows, &right));
        let (real, device) = self.macs();
        if real > 0 {
            let _ = writeln!(
                s,
                "MACs of the convolution and dense layers on the accelerator: {real} real, {device} \
                 on the device (GEMM micro-ops x BATCH x BLOCK_IN x BLOCK_OUT, plus the ALU \
                 multiplies of depthwise convolutions): device MACs / real MACs = {:.3}",
                device as f64 / real as f64
            );
        }
        s
    }

    /// The compile report as JSON: the model's name, config, step counts, the accelerator
    /// layers (widths, launch or CPU reason, GEMM passes, output digit planes), launches, the
    /// op-support table,
    /// MACs, calibration samples and compile times (milliseconds), as
    /// `vta compile --json` prints it (which adds the output file, its size and the total
    /// time) and the Python package returns it.
    pub fn report_json(&self) -> serde_json::Value {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let (accel, cpu) = self.counts();
        let support: Vec<_> = self
            .support
            .entries
            .iter()
            .map(|e| {
                serde_json::json!({
                    "node": e.node,
                    "op": e.op_type,
                    "status": e.support.status(),
                    "details": e.support.details(),
                })
            })
            .collect();
        let tm = &self.times;
        let (real_macs, device_macs) = self.macs();
        let task_graph = {
            let g = vta_runtime::graph::TaskGraph::of_model(&self.model);
            let s = g.summary();
            serde_json::json!({
                "tasks": s.tasks,
                "launches": s.launches,
                "cpu_tasks": s.cpu,
                "edges": s.edges,
                "critical_path": s.critical_path,
                "width": s.width,
                "overlappable": s.overlappable,
                "forks": g.branches().iter().map(|f| serde_json::json!({
                    "fork": f.fork,
                    "branches": f.branches,
                    "join": f.join,
                })).collect::<Vec<_>>(),
            })
        };
        // The accelerator steps as the layer table gives them: lane widths, launch (or the
        // back end's reason for the CPU) and, for GEMM layers, the passes over their weights.
        let layers: Vec<_> = self
            .steps
            .iter()
            .map(|a| {
                let (launch, passes, cpu) = match &a.report {
                    LayerReport::Compiled(launch, info) => (
                        Some(*launch),
                        info.tiling.is_some().then_some(info.passes),
                        None,
                    ),
                    LayerReport::Refused(r) => (None, None, Some(r.clone())),
                };
                let planes = match &a.report {
                    LayerReport::Compiled(_, info) if info.tiling.is_some() => {
                        Some(info.out_planes)
                    }
                    _ => None,
                };
                serde_json::json!({
                    "step": a.step,
                    "layer": a.name,
                    "kind": a.kind,
                    "widths": self.widths(a.step),
                    "launch": launch,
                    "passes": passes,
                    "output_planes": planes,
                    "cpu_reason": cpu,
                })
            })
            .collect();
        serde_json::json!({
            "model": self.source,
            "config": self.config.config_string(),
            "steps": self.plan.steps.len(),
            "accel_steps": accel,
            "cpu_steps": cpu,
            "layers": layers,
            "launches": self.launches.iter().map(|l| serde_json::json!({
                "steps": l.steps,
                "instructions": l.program.program.insns.len(),
            })).collect::<Vec<_>>(),
            "task_graph": task_graph,
            "support": support,
            "real_macs": real_macs,
            "device_macs": device_macs,
            "calibration_samples": self.calibration_samples,
            "times_ms": {
                "import": ms(tm.import),
                "calibration": ms(tm.calibration),
                "lowering": ms(tm.lowering),
                "backend": ms(tm.backend),
                "compile": ms(tm.compile()),
            },
        })
    }

    /// The multiply-accumulates of the convolution and dense layers the accelerator runs:
    /// (the layers' own, what the device performs for them).
    pub fn macs(&self) -> (u64, u64) {
        let (mut real, mut device) = (0, 0);
        for a in &self.steps {
            let LayerReport::Compiled(_, info) = &a.report else {
                continue;
            };
            let st = &self.plan.steps[a.step];
            let layer_macs = match &st.kind {
                StepKind::Accel(backend_layer) => match backend_layer {
                    vta_runtime::plan::Layer::Conv2d(l) => {
                        let [n, o, oh, ow] = l.output_shape();
                        let per_output: usize = l.weight.shape()[1..].iter().product();
                        (n * o * oh * ow * per_output) as u64
                    }
                    vta_runtime::plan::Layer::Dense(l) => {
                        let n = st
                            .inputs
                            .first()
                            .and_then(|&v| self.plan.values[v].fact.shape.first().copied())
                            .unwrap_or(1);
                        (n * l.weight.len()) as u64
                    }
                    _ => 0,
                },
                _ => 0,
            };
            if layer_macs > 0 {
                real += layer_macs;
                device += info.device_macs;
            }
        }
        (real, device)
    }
}
