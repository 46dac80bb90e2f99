//! `Slice`, any element type: `starts`, `ends`, `axes` from attributes (opset < 10) or
//! constant inputs with `steps` (opset >= 10), clamped as ONNX specifies; negative steps walk
//! backwards.

use ndarray::{Axis, Slice as NdSlice};

use super::TensorInfo;
use super::{arg, axis, in_fact, op_boilerplate, Op};
use crate::tensor::{map_same, Fact, Tensor};

/// `starts`, `ends` and (optional) `axes` given as attributes (opset < 10).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct SliceAttrs {
    pub starts: Vec<i64>,
    pub ends: Vec<i64>,
    pub axes: Option<Vec<i64>>,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Slice {
    /// From attributes (opset < 10); `None`: inputs 1 to 4.
    pub attrs: Option<SliceAttrs>,
}

/// One axis of a slice: first index, step and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AxisSlice {
    pub axis: usize,
    pub start: usize,
    pub step: isize,
    pub len: usize,
}

impl Slice {
    /// The slice of every sliced axis of `shape`, from the (constant) starts, ends, axes and
    /// steps.
    pub fn axes(
        &self,
        shape: &[usize],
        args: [Option<&Tensor>; 4],
    ) -> Result<Vec<AxisSlice>, String> {
        let (starts, ends, axes, steps) = match &self.attrs {
            Some(a) => (a.starts.clone(), a.ends.clone(), a.axes.clone(), None),
            None => {
                let v = |i: usize, what: &str| {
                    args[i]
                        .map(|t| t.to_i64_vec())
                        .ok_or_else(|| format!("missing {what}"))
                };
                (
                    v(0, "starts")?,
                    v(1, "ends")?,
                    args[2].map(|t| t.to_i64_vec()),
                    args[3].map(|t| t.to_i64_vec()),
                )
            }
        };
        let n = starts.len();
        let axes = axes.unwrap_or_else(|| (0..n as i64).collect());
        let steps = steps.unwrap_or_else(|| vec![1; n]);
        if ends.len() != n || axes.len() != n || steps.len() != n {
            return Err(format!(
                "starts, ends, axes and steps have {n}, {}, {} and {} values",
                ends.len(),
                axes.len(),
                steps.len()
            ));
        }
        let mut out = Vec::with_capacity(n);
        for k in 0..n {
            let a = axis(axes[k], shape.len())?;
            if out.iter().any(|s: &AxisSlice| s.axis == a) {
                return Err(format!("axis {a} is sliced twice"));
            }
            let dim = shape[a] as i64;
            let step = steps[k];
            if step == 0 {
                return Err("a slice step of 0".into());
            }
            let norm = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
            let (start, end) = if step > 0 {
                (norm(starts[k]).clamp(0, dim), norm(ends[k]).clamp(0, dim))
            } else {
                (
                    norm(starts[k]).clamp(0, dim - 1),
                    norm(ends[k]).clamp(-1, dim - 1),
                )
            };
            let len = if step > 0 {
                (end - start).max(0).div_euclid(step) + i64::from((end - start).max(0) % step != 0)
            } else {
                (start - end).max(0).div_euclid(-step)
                    + i64::from((start - end).max(0) % -step != 0)
            };
            out.push(AxisSlice {
                axis: a,
                start: start.max(0) as usize,
                step: step.clamp(isize::MIN as i64, isize::MAX as i64) as isize,
                len: len as usize,
            });
        }
        Ok(out)
    }
}

fn const_args<'a>(inputs: &[Option<&'a TensorInfo>]) -> Result<[Option<&'a Tensor>; 4], String> {
    let mut out = [None; 4];
    for (k, o) in out.iter_mut().enumerate() {
        if let Some(t) = inputs.get(k + 1).copied().flatten() {
            *o = Some(t.value.as_deref().ok_or_else(|| {
                format!(
                    "Slice input '{}' is computed at run time; the importer needs it constant",
                    t.name
                )
            })?);
        }
    }
    Ok(out)
}

fn tensor_args<'a>(inputs: &[Option<&'a Tensor>]) -> [Option<&'a Tensor>; 4] {
    let at = |i: usize| inputs.get(i).copied().flatten();
    [at(1), at(2), at(3), at(4)]
}

impl Op for Slice {
    fn op_type(&self) -> &'static str {
        "Slice"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "data")?;
        let mut shape = x.shape.clone();
        for s in self.axes(&x.shape, const_args(inputs)?)? {
            shape[s.axis] = s.len;
        }
        Ok(vec![Fact::new(x.dtype, shape)])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "data")?;
        let slices = self.axes(x.shape(), tensor_args(inputs))?;
        Ok(vec![map_same!(x, v => {
            let mut view = v.view();
            for s in &slices {
                let sl = if s.len == 0 {
                    NdSlice::from(0..0)
                } else if s.step > 0 {
                    NdSlice::new(s.start as isize, Some((s.start + (s.len - 1) * s.step as usize + 1) as isize), s.step)
                } else {
                    let last = s.start as isize + (s.len as isize - 1) * s.step;
                    NdSlice::new(last, Some(s.start as isize + 1), s.step)
                };
                view.slice_axis_inplace(Axis(s.axis), sl);
            }
            view.to_owned()
        })])
    }

    op_boilerplate!();
}
