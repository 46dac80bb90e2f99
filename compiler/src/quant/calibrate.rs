//! Calibration: runs the float graph on sample inputs and records each float tensor's
//! largest magnitude, from which post-training quantization takes per-tensor symmetric scales
//! (and keeps the samples, for rounding weights with error feedback).

use std::sync::{Arc, OnceLock};

use ndarray::{ArrayD, Axis, IxDyn};

use crate::graph::{DType, Fact, Graph, Tensor, TensorId};

/// Per-tensor statistics over the calibration set.
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// `max |x|` of every float tensor, by [`TensorId`] (0 for tensors never computed).
    pub max_abs: Vec<f32>,
    /// Number of samples (model-batch-sized inputs) run.
    pub samples: usize,
    /// The samples themselves, for rounding weights with error feedback over the layers'
    /// inputs ([`super::gptq`]) and for activation ranges by minimum error
    /// ([`super::act_clip`]), which need the float activations, not just their ranges.
    pub inputs: Vec<ArrayD<f32>>,
    /// What those compute from the samples, once for every config the stats are lowered
    /// for (a design sweep lowers one import many times).
    pub feedback: Derived<super::gptq::Feedbacks>,
    pub activations: Derived<Vec<Vec<f32>>>,
}

/// A value computed from the calibration samples on first use and shared by every copy of
/// the [`Stats`] (a cache: stats compare equal whatever it holds).
pub struct Derived<T>(Arc<OnceLock<Result<T, String>>>);

impl<T> Derived<T> {
    /// The value, computed by `compute` on first use (a failure is kept and returned again).
    pub fn get_or_compute(
        &self,
        compute: impl FnOnce() -> Result<T, String>,
    ) -> Result<&T, String> {
        self.0.get_or_init(compute).as_ref().map_err(Clone::clone)
    }
}

impl<T> Default for Derived<T> {
    fn default() -> Self {
        Derived(Arc::default())
    }
}

impl<T> Clone for Derived<T> {
    fn clone(&self) -> Self {
        Derived(self.0.clone())
    }
}

impl<T> PartialEq for Derived<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<T> std::fmt::Debug for Derived<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = if self.0.get().is_some() {
            "computed"
        } else {
            "not computed"
        };
        write!(f, "Derived({state})")
    }
}

impl Stats {
    /// The symmetric scale of a tensor quantized to `[-qmax, qmax]`: `max|x| / qmax` (127 for
    /// int8, 7 for int4; a tiny positive scale for a tensor that was always zero).
    pub fn scale(&self, t: TensorId, qmax: i32) -> f32 {
        let m = self.max_abs.get(t).copied().unwrap_or(0.0);
        let qmax = qmax as f32;
        if m > 0.0 && m.is_finite() {
            m / qmax
        } else {
            1.0 / qmax
        }
    }
}

/// Splits calibration arrays into inputs of the model's input shape: an array shaped like the
/// input is one sample; one with a leading axis that is a multiple of the model's batch is
/// several; one shaped like the input without its batch axis (batch 1) is one sample.
pub fn split_samples(fact: &Fact, arrays: &[ArrayD<f32>]) -> Result<Vec<ArrayD<f32>>, String> {
    let want = &fact.shape;
    let mut out = Vec::new();
    for (i, a) in arrays.iter().enumerate() {
        let s = a.shape();
        if s == want.as_slice() {
            out.push(a.clone());
        } else if !want.is_empty()
            && s.len() == want.len()
            && s[1..] == want[1..]
            && s[0] % want[0] == 0
        {
            for k in 0..s[0] / want[0] {
                let part = a.slice_axis(
                    Axis(0),
                    ndarray::Slice::from(k * want[0]..(k + 1) * want[0]),
                );
                out.push(part.to_owned());
            }
        } else if !want.is_empty() && want[0] == 1 && s == &want[1..] {
            out.push(
                a.clone()
                    .into_shape_with_order(IxDyn(want))
                    .map_err(|e| e.to_string())?,
            );
        } else {
            return Err(format!(
                "sample {i} has shape {s:?}, the model input is {want:?}"
            ));
        }
    }
    Ok(out)
}

/// Runs the graph on every sample and records magnitudes.
pub fn calibrate(g: &Graph, arrays: &[ArrayD<f32>]) -> Result<Stats, String> {
    let float_inputs: Vec<TensorId> = g
        .inputs
        .iter()
        .copied()
        .filter(|&t| g.fact(t).dtype == DType::F32)
        .collect();
    if g.inputs.len() != 1 || float_inputs.len() != 1 {
        return Err(format!(
            "post-training quantization supports models with one float input; this one has {} inputs",
            g.inputs.len()
        ));
    }
    let samples = split_samples(g.fact(g.inputs[0]), arrays)?;
    let mut max_abs = vec![0f32; g.tensors.len()];
    for (i, x) in samples.iter().enumerate() {
        let vals = g
            .run(&[Tensor::F32(x.clone())])
            .map_err(|e| format!("running sample {i}: {e}"))?;
        for (t, v) in vals.iter().enumerate() {
            if let Some(Tensor::F32(a)) = v {
                let m = a.iter().fold(0f32, |m, v| m.max(v.abs()));
                if m.is_finite() {
                    max_abs[t] = max_abs[t].max(m);
                }
            }
        }
    }
    Ok(Stats {
        max_abs,
        samples: samples.len(),
        inputs: samples,
        feedback: Derived::default(),
        activations: Derived::default(),
    })
}
