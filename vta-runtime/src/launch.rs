//! Launches: one device program running a run of consecutive accelerator steps of the plan as
//! one instruction stream, with every plan value it touches bound to a tensor segment. The
//! bindings are what lets the runtime keep activations in device memory between launches
//! ([`crate::resident`]) and read back only what the host needs.

use serde::{Deserialize, Serialize};

use crate::plan::{Plan, ValueId};
use crate::program::{DeviceProgram, TensorSegment};

/// One launch (see the module documentation).
#[derive(Debug, Clone)]
pub struct Launch {
    /// The plan steps it runs, in order: consecutive accelerator steps.
    pub steps: Vec<usize>,
    pub program: DeviceProgram,
    /// The plan value of each of [`DeviceProgram::inputs`]: computed before the launch.
    pub inputs: Vec<ValueId>,
    /// The plan value of each of [`DeviceProgram::outputs`]: produced by the launch and used
    /// after it (by a CPU step, a later launch, or as a model output).
    pub outputs: Vec<ValueId>,
    /// Values produced and consumed inside the launch: their segments, which the host reads
    /// only when it keeps every intermediate tensor (`vta run --check`).
    pub internal: Vec<Binding>,
}

/// A plan value and the segment holding it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub value: ValueId,
    pub tensor: TensorSegment,
}

impl Launch {
    /// Every value the launch touches with its segment: inputs, outputs, then internal ones.
    pub fn bindings(&self) -> impl Iterator<Item = (ValueId, &TensorSegment)> {
        let p = &self.program;
        self.inputs
            .iter()
            .copied()
            .zip(&p.inputs)
            .chain(self.outputs.iter().copied().zip(&p.outputs))
            .chain(self.internal.iter().map(|b| (b.value, &b.tensor)))
    }

    /// Checks the launch against the plan: consecutive accelerator steps; every input computed
    /// before the first step and read by one of them; every output and internal value produced
    /// by one of them, with the logical shape the plan gives it; segments that exist with the
    /// sizes their layouts need.
    pub fn check(&self, plan: &Plan) -> Result<(), String> {
        let (Some(&first), Some(&last)) = (self.steps.first(), self.steps.last()) else {
            return Err("a launch without steps".into());
        };
        if self.steps.iter().zip(first..).any(|(&s, k)| s != k) || last >= plan.steps.len() {
            return Err(format!(
                "steps {:?} are not consecutive steps of the plan",
                self.steps
            ));
        }
        if let Some(&k) = self.steps.iter().find(|&&k| !plan.steps[k].is_accel()) {
            return Err(format!("step {k} is not an accelerator step"));
        }
        if self.inputs.len() != self.program.inputs.len()
            || self.outputs.len() != self.program.outputs.len()
        {
            return Err(format!(
                "{} input and {} output values for a program of {} inputs and {} outputs",
                self.inputs.len(),
                self.outputs.len(),
                self.program.inputs.len(),
                self.program.outputs.len()
            ));
        }
        self.program.check_segments()?;
        for b in &self.internal {
            self.program
                .check_tensor("internal tensor", &b.tensor, true)?;
        }
        let producer = |v: ValueId| {
            plan.steps
                .iter()
                .position(|s| s.outputs.contains(&v))
                .filter(|k| self.steps.contains(k))
        };
        let reads = |v: ValueId| {
            self.steps
                .iter()
                .any(|&k| plan.steps[k].inputs.contains(&v))
        };
        let mut seen = std::collections::HashSet::new();
        for (v, seg) in self.bindings() {
            let value = plan
                .values
                .get(v)
                .ok_or_else(|| format!("value %{v} is not in the plan"))?;
            if !seen.insert(v) {
                return Err(format!("value %{v} is bound twice"));
            }
            let shape = value.fact.nchw()?;
            if seg.layout.shape != shape {
                return Err(format!(
                    "segment '{}' holds {:?}, the plan's value %{v} is {shape:?}",
                    seg.name, seg.layout.shape
                ));
            }
        }
        for &v in &self.inputs {
            if producer(v).is_some() || !reads(v) {
                return Err(format!(
                    "input %{v} must be computed before the launch and read by it"
                ));
            }
        }
        for v in self
            .outputs
            .iter()
            .chain(self.internal.iter().map(|b| &b.value))
        {
            if producer(*v).is_none() {
                return Err(format!("value %{v} is not produced by the launch's steps"));
            }
        }
        Ok(())
    }
}
