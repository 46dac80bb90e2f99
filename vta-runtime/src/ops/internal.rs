//! Ops the lowering inserts into plans (not ONNX operators): exact conversions between the
//! uint8 representation of ONNX tensors and the accelerator's int8 representation.

use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

/// `int8 = uint8 - 128` (exact: the accelerator's representation of a uint8 tensor whose
/// zero point is moved down by 128).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct U8ToI8;

/// `uint8 = int8 + 128`, the inverse of [`U8ToI8`].
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct I8ToU8;

impl Op for U8ToI8 {
    fn op_type(&self) -> &'static str {
        "U8ToI8"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        Ok(vec![Fact::new(
            DType::I8,
            in_fact(inputs, 0, "x")?.shape.clone(),
        )])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        match arg(inputs, 0, "x")? {
            Tensor::U8(a) => Ok(vec![Tensor::I8(a.mapv(|v| (i16::from(v) - 128) as i8))]),
            t => Err(format!("U8ToI8 expects uint8, got {}", t.dtype())),
        }
    }

    op_boilerplate!();
}

impl Op for I8ToU8 {
    fn op_type(&self) -> &'static str {
        "I8ToU8"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        Ok(vec![Fact::new(
            DType::U8,
            in_fact(inputs, 0, "x")?.shape.clone(),
        )])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        match arg(inputs, 0, "x")? {
            Tensor::I8(a) => Ok(vec![Tensor::U8(a.mapv(|v| (i16::from(v) + 128) as u8))]),
            t => Err(format!("I8ToU8 expects int8, got {}", t.dtype())),
        }
    }

    op_boilerplate!();
}
