//! The integer reference executor: runs a [`Plan`] on the CPU exactly, accelerator steps
//! through [`crate::qlayer`]'s `reference` functions and CPU steps through [`crate::ops`]'
//! ONNX semantics, and keeps every intermediate tensor (for `vta run --check`, which compares
//! an accelerator run with it value by value and reports the first mismatching step and
//! element).

use std::collections::HashMap;

use ndarray::{Array2, ArrayD, Ix2, Ix4, IxDyn};

use crate::ops::quantize_linear::quantize_value;
use crate::plan::{Layer, Plan, Step, StepKind, ValueId};
use crate::tensor::Tensor;

/// A step that failed to execute.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("step {step} ({name}): {message}")]
pub struct ExecError {
    pub step: usize,
    pub name: String,
    pub message: String,
}

/// Every value of a plan run, by [`ValueId`] (constants included).
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    pub values: Vec<Option<Tensor>>,
}

impl Trace {
    /// The value of `v`, if computed.
    pub fn get(&self, v: ValueId) -> Option<&Tensor> {
        self.values.get(v).and_then(|t| t.as_ref())
    }

    /// The plan's outputs.
    pub fn outputs(&self, plan: &Plan) -> Vec<Tensor> {
        plan.outputs
            .iter()
            .map(|&o| self.values[o].clone().expect("outputs are computed"))
            .collect()
    }
}

fn i8_input<'a>(t: &'a Tensor, what: &str) -> Result<&'a ArrayD<i8>, String> {
    match t {
        Tensor::I8(a) => Ok(a),
        other => Err(format!("{what} should be int8, got {}", other.dtype())),
    }
}

fn four(a: &ArrayD<i8>) -> Result<ndarray::ArrayView4<'_, i8>, String> {
    a.view()
        .into_dimensionality::<Ix4>()
        .map_err(|_| format!("input should be 4-D, got {:?}", a.shape()))
}

/// Executes one accelerator layer exactly (`qlayer`'s reference semantics).
pub fn eval_layer(layer: &Layer, inputs: &[&Tensor]) -> Result<Tensor, String> {
    let x = i8_input(inputs.first().ok_or("missing input")?, "input")?;
    Ok(Tensor::I8(match layer {
        Layer::Conv2d(l) => {
            let v = four(x)?;
            if v.shape() != l.input_shape {
                return Err(format!(
                    "input shape {:?}, layer expects {:?}",
                    v.shape(),
                    l.input_shape
                ));
            }
            l.reference(v).into_dyn()
        }
        Layer::Dense(l) => {
            let v: Array2<i8> = x
                .view()
                .into_dimensionality::<Ix2>()
                .map_err(|_| format!("input should be 2-D, got {:?}", x.shape()))?
                .to_owned();
            if v.ncols() != l.weight.ncols() {
                return Err(format!(
                    "input has {} features, layer expects {}",
                    v.ncols(),
                    l.weight.ncols()
                ));
            }
            l.reference(&v).into_dyn()
        }
        Layer::Add(l) => {
            let y = i8_input(inputs.get(1).ok_or("missing second input")?, "second input")?;
            if x.shape() != y.shape() {
                return Err(format!(
                    "operand shapes {:?} and {:?} differ",
                    x.shape(),
                    y.shape()
                ));
            }
            let mut s4 = x.shape().to_vec();
            if s4.len() > 4 || s4.len() < 2 {
                return Err(format!("operands of rank {}", s4.len()));
            }
            s4.resize(4, 1);
            let a = x
                .view()
                .into_shape_with_order(IxDyn(&s4))
                .map_err(|e| e.to_string())?
                .into_dimensionality::<Ix4>()
                .expect("4-D");
            let b = y
                .view()
                .into_shape_with_order(IxDyn(&s4))
                .map_err(|e| e.to_string())?
                .into_dimensionality::<Ix4>()
                .expect("4-D");
            l.reference(a, b)
                .into_dyn()
                .into_shape_with_order(IxDyn(x.shape()))
                .map_err(|e| e.to_string())?
        }
        Layer::MaxPool(l) => l.reference(four(x)?).into_dyn(),
        Layer::GlobalAvgPool(l) => l.reference(four(x)?).into_dyn(),
        Layer::Table(l) => l.reference(x.view()),
        Layer::Affine(l) => l.reference(x.view()),
        Layer::Binary(l) => {
            let y = i8_input(inputs.get(1).ok_or("missing second input")?, "second input")?;
            l.reference(x.view(), y.view())?
        }
        Layer::LeakyRelu(l) => l.reference(x.view()),
        Layer::Upsample(l) => l.reference(four(x)?).into_dyn(),
        Layer::Concat(l) => {
            let xs = inputs
                .iter()
                .map(|t| i8_input(t, "input").map(|a| a.view()))
                .collect::<Result<Vec<_>, _>>()?;
            l.reference(&xs)?
        }
        Layer::Slice(l) => l.reference(x.view()),
    }))
}

/// Executes one step given the values computed so far.
pub fn eval_step(step: &Step, values: &[Option<Tensor>]) -> Result<Vec<Tensor>, String> {
    eval_step_with(step, &|v| values.get(v).and_then(|t| t.as_ref()))
}

/// [`eval_step`] reading each value through `value` (`None`: not computed), for executors
/// that do not hold every value in one slice (the pool executor, [`crate::exec`]).
pub fn eval_step_with<'a>(
    step: &Step,
    value: &dyn Fn(ValueId) -> Option<&'a Tensor>,
) -> Result<Vec<Tensor>, String> {
    let get = |v: ValueId| value(v).ok_or_else(|| format!("value %{v} is not computed"));
    match &step.kind {
        StepKind::Quantize { q, lo, hi } => {
            let x = get(step.inputs[0])?.as_f32()?;
            let (lo, hi) = (i32::from(*lo), i32::from(*hi));
            Ok(vec![Tensor::I8(x.mapv(|v| {
                quantize_value(v, q.scale, q.zero_point, lo, hi) as i8
            }))])
        }
        StepKind::Dequantize(q) => {
            let x = i8_input(get(step.inputs[0])?, "input")?;
            Ok(vec![Tensor::F32(
                x.mapv(|v| (i32::from(v) - q.zero_point) as f32 * q.scale),
            )])
        }
        StepKind::Accel(layer) => {
            let ins = step
                .inputs
                .iter()
                .map(|&v| get(v))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(vec![eval_layer(layer, &ins)?])
        }
        StepKind::Cpu(c) => {
            let args = c
                .args
                .iter()
                .map(|a| a.map(get).transpose())
                .collect::<Result<Vec<_>, _>>()?;
            c.op.op().eval(&args)
        }
    }
}

/// Runs a plan on the CPU exactly; `inputs` in the order of [`Plan::inputs`], with their
/// ONNX types (float32 for float models).
pub fn run_plan(plan: &Plan, inputs: &[Tensor]) -> Result<Trace, ExecError> {
    run_plan_observed(plan, inputs, &mut |_| {})
}

/// [`run_plan`], telling `step_done` the index of every step it finishes (for progress).
pub fn run_plan_observed(
    plan: &Plan,
    inputs: &[Tensor],
    step_done: &mut dyn FnMut(usize),
) -> Result<Trace, ExecError> {
    run_plan_inner(plan, inputs, &HashMap::new(), step_done)
}

/// [`run_plan`], with the value of each plan value in `replacements` put in place of the
/// one its step computed, before any later step reads it: every step then works on the
/// given inputs, so a departure found in its output is its own, not carried over from an
/// earlier step (how `vta run --replace-values` compares a model with another runtime
/// layer by layer). The trace keeps the values the steps computed. A replacement must
/// have the value's type and shape.
pub fn run_plan_replacing(
    plan: &Plan,
    inputs: &[Tensor],
    replacements: &HashMap<ValueId, Tensor>,
) -> Result<Trace, ExecError> {
    run_plan_inner(plan, inputs, replacements, &mut |_| {})
}

fn run_plan_inner(
    plan: &Plan,
    inputs: &[Tensor],
    replacements: &HashMap<ValueId, Tensor>,
    step_done: &mut dyn FnMut(usize),
) -> Result<Trace, ExecError> {
    let fail = |step: usize, name: &str, message: String| ExecError {
        step,
        name: name.to_string(),
        message,
    };
    if inputs.len() != plan.inputs.len() {
        return Err(fail(
            0,
            "inputs",
            format!(
                "the plan has {} inputs, {} given",
                plan.inputs.len(),
                inputs.len()
            ),
        ));
    }
    let mut values: Vec<Option<Tensor>> = plan
        .values
        .iter()
        .map(|v| v.constant.as_deref().cloned())
        .collect();
    for (&v, t) in plan.inputs.iter().zip(inputs) {
        if t.fact() != plan.values[v].fact {
            return Err(fail(
                0,
                "inputs",
                format!(
                    "input '{}' should be {}, got {}",
                    plan.values[v].name,
                    plan.values[v].fact,
                    t.fact()
                ),
            ));
        }
        values[v] = Some(t.clone());
    }
    let mut computed = Vec::new();
    for (k, step) in plan.steps.iter().enumerate() {
        let outs = eval_step(step, &values).map_err(|m| fail(k, &step.name, m))?;
        if outs.len() < step.outputs.len() {
            return Err(fail(k, &step.name, "too few outputs".into()));
        }
        for (&o, t) in step.outputs.iter().zip(outs) {
            if t.fact() != plan.values[o].fact {
                return Err(fail(
                    k,
                    &step.name,
                    format!(
                        "produced {}, the plan expects {}",
                        t.fact(),
                        plan.values[o].fact
                    ),
                ));
            }
            values[o] = Some(match replacements.get(&o) {
                Some(r) if r.fact() != t.fact() => {
                    return Err(fail(
                        k,
                        &step.name,
                        format!(
                            "the replacement of '{}' is {}, the plan's value is {}",
                            plan.values[o].name,
                            r.fact(),
                            t.fact()
                        ),
                    ))
                }
                Some(r) => {
                    computed.push((o, t));
                    r.clone()
                }
                None => t,
            });
        }
        step_done(k);
    }
    // The trace keeps what each step computed, not what later steps were given.
    for (o, t) in computed {
        values[o] = Some(t);
    }
    Ok(Trace { values })
}

/// The first difference between two runs of a plan (steps in order, elements in row-major
/// order).
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    pub step: usize,
    pub step_name: String,
    pub value: ValueId,
    /// Row-major flat index and multi-index of the first differing element.
    pub flat_index: usize,
    pub index: Vec<usize>,
    pub expected: f64,
    pub got: f64,
}

/// Compares `got` (e.g. values read back from an accelerator run; `None` = not available)
/// with the reference trace, step by step, and returns the first mismatch.
pub fn first_mismatch(plan: &Plan, reference: &Trace, got: &[Option<Tensor>]) -> Option<Mismatch> {
    for (k, step) in plan.steps.iter().enumerate() {
        for &o in &step.outputs {
            let (Some(want), Some(Some(have))) = (reference.get(o), got.get(o)) else {
                continue;
            };
            let (w, h) = (want.to_f64_vec(), have.to_f64_vec());
            let differs = want.shape() != have.shape() || want.dtype() != have.dtype();
            let first = if differs {
                Some(0)
            } else {
                w.iter()
                    .zip(&h)
                    .position(|(a, b)| a != b && !(a.is_nan() && b.is_nan()))
            };
            if let Some(i) = first {
                let shape = want.shape();
                let mut idx = vec![0; shape.len()];
                let mut r = i;
                for d in (0..shape.len()).rev() {
                    idx[d] = r % shape[d].max(1);
                    r /= shape[d].max(1);
                }
                return Some(Mismatch {
                    step: k,
                    step_name: step.name.clone(),
                    value: o,
                    flat_index: i,
                    index: idx,
                    expected: w.get(i).copied().unwrap_or(f64::NAN),
                    got: h.get(i).copied().unwrap_or(f64::NAN),
                });
            }
        }
    }
    None
}
