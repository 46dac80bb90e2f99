//! CPU profiles: each CPU step's time of a compiled model, measured where the model will run
//! (`vta-board profile` on the board's own cores, or `vta bench schedule --write-cpu-profile`
//! on a host), kept as a small JSON file that the device-time simulation reads
//! (`vta bench schedule --time device --cpu-profile FILE`).
//!
//! ```text
//! {"format": "vta-cpu-profile", "version": 1, "model": "m.vtab", "measured_on": "...",
//!  "steps": [{"step": 3, "op": "MaxPool", "name": "pool1", "us": 41.5}, ...]}
//! ```
//! `step` indexes the model's plan; `name` (optional when read) guards against a profile of
//! another model.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::{ExecError, Executor};
use crate::graph::{TaskGraph, TaskKind};
use crate::model::Model;
use crate::tensor::Tensor;

/// The profile's `format` field.
pub const FORMAT: &str = "vta-cpu-profile";

/// Runs `inputs` through `ex` (a serial executor recording its timeline) `runs` times; per
/// task of its graph, the fastest run in seconds. Every run's outputs must equal `want`.
pub fn measure(
    ex: &Executor,
    inputs: &[Tensor],
    want: &[Tensor],
    runs: usize,
) -> Result<Vec<f64>, ExecError> {
    let mut best = vec![f64::INFINITY; ex.graph().len()];
    for run in 0..runs.max(1) {
        let done = ex.run(inputs)?;
        if done.outputs != want {
            return Err(ExecError::Input(format!(
                "profiling run {}: the outputs differ from the serial run's",
                run + 1
            )));
        }
        for e in ex.take_timeline().events {
            best[e.task] = best[e.task].min(e.end - e.start);
        }
    }
    Ok(best)
}

/// The profile document of `secs` (per task of `graph`; CPU tasks only are written).
pub fn to_json(
    model: &Model,
    graph: &TaskGraph,
    secs: &[f64],
    model_file: &str,
    measured_on: &str,
) -> Value {
    let steps: Vec<Value> = graph
        .tasks
        .iter()
        .zip(secs)
        .filter_map(|(t, s)| match t.kind {
            TaskKind::Cpu(k) => Some(json!({
                "step": k,
                "op": model.plan.steps[k].kind_name(),
                "name": model.plan.steps[k].name,
                "us": s * 1e6,
            })),
            TaskKind::Launch(_) => None,
        })
        .collect();
    json!({
        "format": FORMAT,
        "version": 1,
        "model": model_file,
        "measured_on": measured_on,
        "steps": steps,
    })
}

/// Per task of `graph`, its time in seconds from the profile `text` (`None` for launches);
/// `file` names the profile in messages.
pub fn read(
    text: &str,
    file: &str,
    model: &Model,
    graph: &TaskGraph,
) -> Result<Vec<Option<f64>>, String> {
    let bad = |what: String| {
        format!(
            "{file}: {what}; a CPU profile is {{\"format\": \"{FORMAT}\", \"steps\": \
             [{{\"step\": N, \"us\": T}}, ...]}} (write one with `vta-board profile` on the \
             target, or `vta bench schedule --write-cpu-profile` on this host)"
        )
    };
    let v: Value = serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
    if v["format"] != FORMAT {
        return Err(bad(format!("\"format\" is not \"{FORMAT}\"")));
    }
    let steps = v["steps"]
        .as_array()
        .ok_or_else(|| bad("no \"steps\" list".into()))?;
    let mut us = HashMap::new();
    for (i, s) in steps.iter().enumerate() {
        let (Some(k), Some(t)) = (s["step"].as_u64(), s["us"].as_f64()) else {
            return Err(bad(format!(
                "entry {i} lacks a \"step\" number or a \"us\" time"
            )));
        };
        if !(t.is_finite() && t >= 0.0) {
            return Err(bad(format!("step {k}: {t} us is not a time")));
        }
        let step = usize::try_from(k)
            .ok()
            .and_then(|k| model.plan.steps.get(k))
            .ok_or_else(|| {
                bad(format!(
                    "step {k} does not exist (the model has {} steps): written for another model?",
                    model.plan.steps.len()
                ))
            })?;
        if let Some(name) = s["name"].as_str() {
            if name != step.name {
                return Err(bad(format!(
                    "step {k} is '{name}' there but '{}' in {}: written for another model?",
                    step.name, model.source
                )));
            }
        }
        us.insert(k as usize, t);
    }
    graph
        .tasks
        .iter()
        .map(|t| match t.kind {
            TaskKind::Launch(_) => Ok(None),
            TaskKind::Cpu(k) => us.get(&k).map(|t| Some(t * 1e-6)).ok_or_else(|| {
                bad(format!(
                    "no time for CPU step {k} ({} {}): written for another model?",
                    model.plan.steps[k].kind_name(),
                    model.plan.steps[k].name
                ))
            }),
        })
        .collect()
}
