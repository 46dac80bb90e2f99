//! A compiled model as the runtime holds it: the plan (every step and value, constants
//! included), the accelerator config, its launches (device programs, each running a run of
//! consecutive accelerator steps) and for every accelerator step its launch or the back end's
//! reason for running it on the CPU. [`Model::load`] puts it on any device of the HAL
//! ([`crate::resident`]), which runs accelerator steps as their launches and the others on the
//! CPU with the integer reference's exact semantics; [`Model::check`] compares a run with the
//! integer reference step by step. The file format is in [`crate::file`].

use std::fmt;

use drivers::Device;
use isa::HwConfig;

use crate::budget::DEFAULT_MEMORY_BUDGET;
use crate::file::FileError;
use crate::launch::Launch;
use crate::plan::{Plan, ValueId};
use crate::reference::{self, Mismatch};
use crate::report::RunResult;
use crate::resident::{LoadOptions, Resident};
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
    #[error("cannot load the model onto the device: {0}")]
    Load(String),
    #[error("step {step} ({name}): {message}")]
    Exec {
        step: usize,
        name: String,
        message: String,
    },
    #[error("interrupted after step {step} ({name}) of {steps}")]
    Interrupted {
        step: usize,
        name: String,
        steps: usize,
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// As part of launch `.0` of [`Model::launches`].
    Launch(usize),
    /// The back end refused the layer (the reason); it runs on the CPU, exactly.
    Refused(String),
}

/// One accelerator step of the plan and how it runs.
#[derive(Debug, Clone)]
pub struct AccelStep {
    /// Index in [`Plan::steps`].
    pub step: usize,
    pub placement: Placement,
}

impl AccelStep {
    /// The launch that runs the step, unless the back end refused it.
    pub fn launch(&self) -> Option<usize> {
        match self.placement {
            Placement::Launch(l) => Some(l),
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
    /// The device programs, each running consecutive accelerator steps, in step order.
    pub launches: Vec<Launch>,
}

impl Model {
    /// The model's inputs given stacked (several samples along the first axis, or one) as
    /// one list of inputs per sample ([`crate::io::split_samples`] with the model's input
    /// names and types).
    pub fn split_samples(&self, stacked: Vec<Tensor>) -> Result<Vec<Vec<Tensor>>, String> {
        let (names, facts): (Vec<String>, Vec<Fact>) = self
            .plan
            .inputs
            .iter()
            .map(|&v| {
                (
                    self.plan.values[v].name.clone(),
                    self.plan.values[v].fact.clone(),
                )
            })
            .unzip();
        crate::io::split_samples(stacked, &names, &facts)
    }

    /// Reads a compiled-model file; `file` names it in errors. The model runs on its own
    /// config, within the default memory budget.
    pub fn from_bytes(bytes: &[u8], file: &str) -> Result<Model, Error> {
        Self::read(bytes, file, None, DEFAULT_MEMORY_BUDGET)
    }

    /// Reads a compiled-model file that must have been compiled for `cfg`'s ISA (configs that
    /// differ only in bus width, queue depths or clock run the same programs).
    pub fn from_bytes_for(bytes: &[u8], file: &str, cfg: &HwConfig) -> Result<Model, Error> {
        Self::read(bytes, file, Some(cfg), DEFAULT_MEMORY_BUDGET)
    }

    /// Reads a compiled-model file to run on `select` (else on its own config), refusing
    /// tensors beyond `budget` bytes in all (see [`crate::budget`]).
    pub fn read(
        bytes: &[u8],
        file: &str,
        select: Option<&HwConfig>,
        budget: u64,
    ) -> Result<Model, Error> {
        crate::file::read(bytes, select, budget).map_err(|source| Error::File {
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
        let a = self.accel.iter().filter(|a| a.launch().is_some()).count();
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

    /// Loads the model onto `dev` (which must implement the model's config): weights and
    /// programs once, activations by liveness (see [`crate::resident`]).
    pub fn load<'a>(
        &'a self,
        dev: &'a mut dyn Device,
        opts: LoadOptions,
    ) -> Result<Resident<'a>, Error> {
        Resident::load(self, dev, opts)
    }

    /// Loads the model onto `dev` and runs one inference: accelerator steps as their launches,
    /// the others on the CPU. `inputs` in the order of the model's inputs, with their ONNX
    /// types and shapes. Every step's output is kept (for [`Model::check`]).
    pub fn run(&self, dev: &mut dyn Device, inputs: &[Tensor]) -> Result<RunResult, Error> {
        let keep = LoadOptions {
            keep_intermediates: true,
        };
        self.load(dev, keep)?.run(inputs)
    }

    /// The back end's reason for running accelerator step `step` on the CPU, if it refused it.
    pub fn refusal(&self, step: usize) -> Option<&str> {
        match &self.accel_of(step)?.placement {
            Placement::Refused(r) => Some(r),
            Placement::Launch(_) => None,
        }
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
