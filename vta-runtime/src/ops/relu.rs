//! `Relu` (float). The graph passes fuse it into the producing Conv/Gemm/Add.

use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Activation, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Relu;

impl Op for Relu {
    fn op_type(&self) -> &'static str {
        "Relu"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "X")?;
        if x.dtype != DType::F32 {
            return Err(format!("Relu is supported in float only, got {}", x.dtype));
        }
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "X")?.as_f32()?;
        Ok(vec![Tensor::F32(x.mapv(|v| Activation::RELU.apply(v)))])
    }

    op_boilerplate!();
}
