//! `Squeeze` and `Unsqueeze` with axes from the attribute (opset < 13) or a constant input.

use super::TensorInfo;
use super::{arg, axis, in_const, in_fact, op_boilerplate, Op};
use crate::tensor::{Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Squeeze {
    pub unsqueeze: bool,
    /// Axes from the attribute (opset < 13); `None` when given as input 1.
    pub attr_axes: Option<Vec<i64>>,
}

impl Squeeze {
    fn out_shape(&self, s: &[usize], axes: Option<Vec<i64>>) -> Result<Vec<usize>, String> {
        if self.unsqueeze {
            let axes = axes.ok_or("Unsqueeze needs axes")?;
            let r = s.len() + axes.len();
            let mut ax: Vec<usize> = axes.iter().map(|&a| axis(a, r)).collect::<Result<_, _>>()?;
            ax.sort_unstable();
            let mut out = Vec::with_capacity(r);
            let mut it = s.iter();
            for i in 0..r {
                if ax.binary_search(&i).is_ok() {
                    out.push(1);
                } else {
                    out.push(*it.next().ok_or("bad Unsqueeze axes")?);
                }
            }
            Ok(out)
        } else {
            let ax: Vec<usize> = match axes {
                Some(a) => a
                    .iter()
                    .map(|&a| axis(a, s.len()))
                    .collect::<Result<_, _>>()?,
                None => (0..s.len()).filter(|&i| s[i] == 1).collect(),
            };
            if ax.iter().any(|&a| s[a] != 1) {
                return Err(format!("cannot squeeze axes {ax:?} of shape {s:?}"));
            }
            Ok(s.iter()
                .enumerate()
                .filter(|(i, _)| !ax.contains(i))
                .map(|(_, &d)| d)
                .collect())
        }
    }

    fn axes_from(&self, t: Option<&Tensor>) -> Option<Vec<i64>> {
        self.attr_axes.clone().or_else(|| t.map(|t| t.to_i64_vec()))
    }
}

impl Op for Squeeze {
    fn op_type(&self) -> &'static str {
        if self.unsqueeze {
            "Unsqueeze"
        } else {
            "Squeeze"
        }
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "data")?;
        if self.attr_axes.is_none()
            && inputs.get(1).copied().flatten().is_some()
            && in_const(inputs, 1).is_none()
        {
            return Err("axes must be a constant".into());
        }
        Ok(vec![Fact::new(
            x.dtype,
            self.out_shape(&x.shape, self.axes_from(in_const(inputs, 1)))?,
        )])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "data")?;
        let s = self.out_shape(x.shape(), self.axes_from(inputs.get(1).copied().flatten()))?;
        Ok(vec![x.reshape(&s)?])
    }

    op_boilerplate!();
}
