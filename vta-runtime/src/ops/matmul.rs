//! `MatMul`: numpy matrix product in f32 (batch dimensions broadcast).

use super::kernels::{matmul, matmul_shape};
use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct MatMul;

impl Op for MatMul {
    fn op_type(&self) -> &'static str {
        "MatMul"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let a = in_fact(inputs, 0, "A")?;
        let b = in_fact(inputs, 1, "B")?;
        if a.dtype != DType::F32 || b.dtype != DType::F32 {
            return Err(
                "MatMul is supported in float only (use MatMulInteger/QLinearMatMul)".into(),
            );
        }
        Ok(vec![Fact::new(
            DType::F32,
            matmul_shape(&a.shape, &b.shape)?,
        )])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let a = arg(inputs, 0, "A")?.as_f32()?;
        let b = arg(inputs, 1, "B")?.as_f32()?;
        Ok(vec![Tensor::F32(matmul(&a.view(), &b.view())?)])
    }

    op_boilerplate!();
}
