//! `BatchNormalization` (inference form) in f32. The graph passes fold it into the
//! preceding Conv; standalone it runs on the CPU.

use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct BatchNorm {
    pub epsilon: f32,
}

impl BatchNorm {
    /// Per-channel (multiplier, offset) with `y = x * m + o`, computed as ONNX defines it:
    /// `m = scale / sqrt(var + eps)`, `o = bias - mean * m`.
    pub fn affine(
        &self,
        scale: &[f32],
        bias: &[f32],
        mean: &[f32],
        var: &[f32],
    ) -> (Vec<f32>, Vec<f32>) {
        let m: Vec<f32> = scale
            .iter()
            .zip(var)
            .map(|(&s, &v)| s / (v + self.epsilon).sqrt())
            .collect();
        let o = bias
            .iter()
            .zip(mean)
            .zip(&m)
            .map(|((&b, &mu), &m)| b - mu * m)
            .collect();
        (m, o)
    }
}

impl Op for BatchNorm {
    fn op_type(&self) -> &'static str {
        "BatchNormalization"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "X")?;
        if x.dtype != DType::F32 || x.rank() < 2 {
            return Err(format!(
                "BatchNormalization needs a float input of rank >= 2, got {x}"
            ));
        }
        for (i, what) in [(1, "scale"), (2, "B"), (3, "mean"), (4, "var")] {
            let f = in_fact(inputs, i, what)?;
            if f.shape != [x.shape[1]] {
                return Err(format!(
                    "{what} has shape {:?}, expected [{}]",
                    f.shape, x.shape[1]
                ));
            }
        }
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "X")?.as_f32()?;
        let v = |i, w| -> Result<Vec<f32>, String> {
            Ok(arg(inputs, i, w)?.as_f32()?.iter().cloned().collect())
        };
        let (scale, bias, mean, var) = (v(1, "scale")?, v(2, "B")?, v(3, "mean")?, v(4, "var")?);
        let mut y = x.clone();
        for (idx, val) in y.indexed_iter_mut() {
            let c = idx[1];
            *val = (*val - mean[c]) / (var[c] + self.epsilon).sqrt() * scale[c] + bias[c];
        }
        Ok(vec![Tensor::F32(y)])
    }

    fn summary(&self) -> String {
        format!("epsilon {}", self.epsilon)
    }

    op_boilerplate!();
}
