//! `Split` along one axis, any element type: the part lengths from the `split` attribute
//! (opset < 13) or input (opset >= 13), or equal parts (the last one shorter when the axis
//! does not divide, opset 18 `num_outputs`).

use ndarray::{Axis, Slice};

use super::TensorInfo;
use super::{arg, axis, in_const, in_fact, op_boilerplate, Op};
use crate::tensor::{map_same, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Split {
    pub axis: i64,
    /// Part lengths from the attribute (opset < 13); `None`: from input 1, or equal parts.
    pub attr_split: Option<Vec<i64>>,
    /// Number of parts (the node's outputs).
    pub outputs: usize,
}

impl Split {
    /// The part lengths of an axis of `len`, given the `split` input (if any).
    pub fn parts(&self, len: usize, split: Option<&Tensor>) -> Result<Vec<usize>, String> {
        let given = self
            .attr_split
            .clone()
            .or_else(|| split.map(|t| t.to_i64_vec()));
        match given {
            Some(v) => {
                if v.len() != self.outputs {
                    return Err(format!(
                        "split {v:?} has {} parts for {} outputs",
                        v.len(),
                        self.outputs
                    ));
                }
                if v.iter().any(|&p| p < 0) || v.iter().sum::<i64>() != len as i64 {
                    return Err(format!(
                        "split {v:?} does not add up to the axis length {len}"
                    ));
                }
                Ok(v.into_iter().map(|p| p as usize).collect())
            }
            None => {
                if self.outputs == 0 {
                    return Err("Split has no outputs".into());
                }
                let part = len.div_ceil(self.outputs);
                let mut v = Vec::with_capacity(self.outputs);
                let mut left = len;
                for _ in 0..self.outputs {
                    let p = part.min(left);
                    v.push(p);
                    left -= p;
                }
                if v.contains(&0) {
                    return Err(format!(
                        "an axis of {len} cannot be split into {} non-empty parts",
                        self.outputs
                    ));
                }
                Ok(v)
            }
        }
    }
}

impl Op for Split {
    fn op_type(&self) -> &'static str {
        "Split"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "input")?;
        let a = axis(self.axis, x.rank())?;
        if inputs.get(1).copied().flatten().is_some() && in_const(inputs, 1).is_none() {
            return Err("split is computed at run time; the importer needs it constant".into());
        }
        let parts = self.parts(x.shape[a], in_const(inputs, 1))?;
        Ok(parts
            .into_iter()
            .map(|p| {
                let mut s = x.shape.clone();
                s[a] = p;
                Fact::new(x.dtype, s)
            })
            .collect())
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "input")?;
        let a = axis(self.axis, x.shape().len())?;
        let parts = self.parts(x.shape()[a], inputs.get(1).copied().flatten())?;
        let mut at = 0;
        Ok(parts
            .into_iter()
            .map(|p| {
                let s = Slice::from(at..at + p);
                at += p;
                map_same!(x, v => v.slice_axis(Axis(a), s).to_owned())
            })
            .collect())
    }

    fn summary(&self) -> String {
        format!("axis {}", self.axis)
    }

    op_boilerplate!();
}
