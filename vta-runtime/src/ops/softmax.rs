//! `Softmax` (float, CPU): along one axis (opset >= 13), or over the trailing dimensions
//! flattened from `axis` on (opset < 13).

use ndarray::{ArrayD, IxDyn};

use super::TensorInfo;
use super::{arg, axis, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Softmax {
    pub axis: i64,
    /// Opset < 13 semantics: coerce to 2-D at `axis`.
    pub legacy: bool,
}

impl Op for Softmax {
    fn op_type(&self) -> &'static str {
        "Softmax"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "input")?;
        if x.dtype != DType::F32 {
            return Err(format!("Softmax needs a float input, got {}", x.dtype));
        }
        axis(self.axis, x.rank())?;
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "input")?.as_f32()?;
        let s = x.shape().to_vec();
        let a = axis(self.axis, s.len())?;
        // Rows of `inner` elements (legacy) or strided slices along `a`.
        let (outer, len, inner) = if self.legacy {
            (
                s[..a].iter().product::<usize>(),
                s[a..].iter().product::<usize>(),
                1,
            )
        } else {
            (
                s[..a].iter().product::<usize>(),
                s[a],
                s[a + 1..].iter().product::<usize>(),
            )
        };
        let xs = x.as_standard_layout();
        let v = xs.as_slice().expect("standard");
        let mut out = vec![0f32; v.len()];
        for o in 0..outer {
            for i in 0..inner {
                let at = |k: usize| (o * len + k) * inner + i;
                let m = (0..len).map(|k| v[at(k)]).fold(f32::NEG_INFINITY, f32::max);
                let mut sum = 0.0f32;
                for k in 0..len {
                    let e = (v[at(k)] - m).exp();
                    out[at(k)] = e;
                    sum += e;
                }
                for k in 0..len {
                    out[at(k)] /= sum;
                }
            }
        }
        Ok(vec![Tensor::F32(
            ArrayD::from_shape_vec(IxDyn(&s), out).map_err(|e| e.to_string())?,
        )])
    }

    op_boilerplate!();
}
