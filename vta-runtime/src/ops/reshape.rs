//! `Reshape` with a constant target shape (`0` copies a dimension unless `allowzero`, `-1`
//! is inferred), any type.

use super::TensorInfo;
use super::{arg, in_const, in_fact, op_boilerplate, Op};
use crate::tensor::{Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Reshape {
    pub allowzero: bool,
}

impl Reshape {
    /// The output shape for input shape `s` and the requested `target`.
    pub fn out_shape(&self, s: &[usize], target: &[i64]) -> Result<Vec<usize>, String> {
        let n: usize = s.iter().product();
        let mut out = Vec::with_capacity(target.len());
        let mut infer = None;
        for (i, &t) in target.iter().enumerate() {
            match t {
                -1 if infer.is_none() => {
                    infer = Some(i);
                    out.push(1);
                }
                0 if !self.allowzero => {
                    out.push(*s.get(i).ok_or_else(|| {
                        format!("shape {target:?}: no input dimension {i} to copy")
                    })?)
                }
                t if t >= 0 => out.push(t as usize),
                _ => return Err(format!("invalid target shape {target:?}")),
            }
        }
        let known: usize = out
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| format!("target shape {target:?} is too large"))?;
        if let Some(i) = infer {
            if known == 0 || !n.is_multiple_of(known) {
                return Err(format!("cannot reshape {s:?} to {target:?}"));
            }
            out[i] = n / known;
        } else if known != n {
            return Err(format!("cannot reshape {s:?} ({n} elements) to {target:?}"));
        }
        Ok(out)
    }
}

impl Op for Reshape {
    fn op_type(&self) -> &'static str {
        "Reshape"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "data")?;
        let t = in_const(inputs, 1).ok_or("the target shape must be a constant (static shapes)")?;
        Ok(vec![Fact::new(
            x.dtype,
            self.out_shape(&x.shape, &t.to_i64_vec())?,
        )])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "data")?;
        let t = arg(inputs, 1, "shape")?.to_i64_vec();
        Ok(vec![x.reshape(&self.out_shape(x.shape(), &t)?)?])
    }

    op_boilerplate!();
}
