//! A compiled model as the runtime holds it: the plan (every step and value, constants
//! included), the accelerator config, and for every accelerator step its device program (or the
//! back end's reason for running it on the CPU). [`Model::run`] runs it on any device of the
//! HAL, accelerator steps as their programs and the others on the CPU with the integer
//! reference's exact semantics; [`Model::check`] compares a run with the integer reference
//! step by step. The file format is in [`crate::file`].

use std::fmt::{self, Write as _};
use std::time::{Duration, Instant};

use drivers::{Device, RunReport, RunTimeout};
use isa::HwConfig;
use ndarray::{Array4, IxDyn};

use crate::file::FileError;
use crate::plan::{Plan, ValueId};
use crate::program::DeviceProgram;
use crate::reference::{self, Mismatch};
use crate::tensor::{Fact, Tensor};

/// Why loading or running a model failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{file}: {source}")]
    File { file: String, source: FileError },
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
    /// Its own device program.
    Program(Box<DeviceProgram>),
    /// The back end refused the layer (the reason); it runs on the CPU, exactly.
    Refused(String),
}

/// One accelerator step of the plan and its program.
#[derive(Debug, Clone)]
pub struct AccelStep {
    /// Index in [`Plan::steps`].
    pub step: usize,
    pub placement: Placement,
}

impl AccelStep {
    pub fn program(&self) -> Option<&DeviceProgram> {
        match &self.placement {
            Placement::Program(p) => Some(p),
            Placement::Refused(_) => None,
        }
    }
}

/// A compiled model (see the module documentation).
#[derive(Debug, Clone)]
pub struct Model {
    pub config: HwConfig,
    /// The model file it was compiled from, for messages.
    pub source: String,
    pub plan: Plan,
    /// One per accelerator step of the plan, in step order.
    pub accel: Vec<AccelStep>,
}

impl Model {
    /// Reads a compiled-model file; `file` names it in errors. The model runs on its own
    /// config.
    pub fn from_bytes(bytes: &[u8], file: &str) -> Result<Model, Error> {
        crate::file::read(bytes, None).map_err(|source| Error::File {
            file: file.to_string(),
            source,
        })
    }

    /// Reads a compiled-model file that must have been compiled for `cfg`'s ISA (configs that
    /// differ only in bus width, queue depths or clock run the same programs).
    pub fn from_bytes_for(bytes: &[u8], file: &str, cfg: &HwConfig) -> Result<Model, Error> {
        crate::file::read(bytes, Some(cfg)).map_err(|source| Error::File {
            file: file.to_string(),
            source,
        })
    }

    /// The compiled-model file (see [`crate::file`]).
    pub fn to_bytes(&self) -> Result<Vec<u8>, FileError> {
        crate::file::write(self)
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
        self.run_observed(dev, inputs, &mut |_| {})
    }

    /// [`Model::run`], telling `step_done` the index of every step it finishes (for progress:
    /// a step on the RTL simulator can take seconds).
    pub fn run_observed(
        &self,
        dev: &mut dyn Device,
        inputs: &[Tensor],
        step_done: &mut dyn FnMut(usize),
    ) -> Result<RunResult, Error> {
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
            step_done(k);
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
        self.check_observed(inputs, run, &mut |_| {})
    }

    /// [`Model::check`], telling `step_done` the index of every reference step it finishes.
    pub fn check_observed(
        &self,
        inputs: &[Tensor],
        run: &RunResult,
        step_done: &mut dyn FnMut(usize),
    ) -> Result<Check, Error> {
        self.check_inputs(inputs)?;
        let trace = reference::run_plan_observed(&self.plan, inputs, step_done).map_err(|e| {
            Error::Exec {
                step: e.step,
                name: e.name,
                message: format!("integer reference: {}", e.message),
            }
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
}

/// Runs one accelerator step's program on the values computed so far.
fn run_program_step(
    dev: &mut dyn Device,
    lp: &DeviceProgram,
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
        let s = plan.values[v].fact.nchw()?;
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

    /// Device launches (one per accelerator step that ran a program), summed over samples.
    pub fn launches(&self) -> usize {
        self.layers
            .iter()
            .filter(|l| l.report.is_some())
            .map(|l| l.samples)
            .sum()
    }

    /// Bytes copied from host to device memory, summed over steps and samples.
    pub fn host_to_device_bytes(&self) -> u64 {
        self.layers
            .iter()
            .filter_map(|l| l.get(drivers::HOST_TO_DEVICE))
            .sum()
    }

    /// Bytes copied from device to host memory, summed over steps and samples.
    pub fn device_to_host_bytes(&self) -> u64 {
        self.layers
            .iter()
            .filter_map(|l| l.get(drivers::DEVICE_TO_HOST))
            .sum()
    }

    /// The most device memory one launch held (programs run one at a time, each in its own
    /// region, freed after it).
    pub fn peak_device_bytes(&self) -> u64 {
        self.layers
            .iter()
            // Summed over the samples of a step, like every figure: per run.
            .filter_map(|l| Some(l.get(drivers::DEVICE_MEMORY)? / l.samples.max(1) as u64))
            .max()
            .unwrap_or(0)
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
        let per_run = |v: u64| v as f64 / self.samples.max(1) as f64 / 1024.0;
        let _ = writeln!(
            s,
            "host-device traffic per inference: {} device launches, {:.1} KiB host -> device \
             (every program's segments, weights and zeroed buffers included, and its \
             instructions), {:.1} KiB device -> host; peak device memory {:.1} KiB",
            self.launches() / self.samples.max(1),
            per_run(self.host_to_device_bytes()),
            per_run(self.device_to_host_bytes()),
            self.peak_device_bytes() as f64 / 1024.0,
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
