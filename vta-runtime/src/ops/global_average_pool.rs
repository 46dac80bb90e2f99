//! `GlobalAveragePool` (float): the mean of each [H, W] plane, output [N, C, 1, 1].

use ndarray::{ArrayD, Axis, IxDyn};

use super::kernels::dims4;
use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct GlobalAveragePool;

impl Op for GlobalAveragePool {
    fn op_type(&self) -> &'static str {
        "GlobalAveragePool"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "X")?;
        if x.dtype != DType::F32 {
            return Err(format!(
                "GlobalAveragePool is supported in float only, got {}",
                x.dtype
            ));
        }
        let (n, c, _, _) = dims4(&x.shape, "input X")?;
        Ok(vec![Fact::new(DType::F32, [n, c, 1, 1])])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "X")?.as_f32()?;
        let (n, c, h, w) = dims4(x.shape(), "input")?;
        let mut out = ArrayD::zeros(IxDyn(&[n, c, 1, 1]));
        for b in 0..n {
            for ch in 0..c {
                let plane = x.index_axis(Axis(0), b);
                let plane = plane.index_axis(Axis(0), ch);
                let s: f32 = plane.iter().sum();
                out[[b, ch, 0, 0]] = s / (h * w) as f32;
            }
        }
        Ok(vec![Tensor::F32(out)])
    }

    op_boilerplate!();
}
