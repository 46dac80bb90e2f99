//! `MatMulInteger`: `Y = (A - a_zp) (B - b_zp)` in int32; `a_zp` per tensor or per row of
//! A, `b_zp` per tensor or per column of B.

use ndarray::ArrayD;

use super::kernels::{matmul, matmul_shape};
use super::qlinear_conv::per_channel_i32;
use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct MatMulInteger;

/// `a - zp` where `zp` has one value or one per row (second-to-last axis).
pub fn center_rows(a: &Tensor, zp: Option<&Tensor>) -> Result<ArrayD<i32>, String> {
    let mut x = a.to_i32_array()?;
    let nd = x.ndim();
    let rows = if nd >= 2 { x.shape()[nd - 2] } else { 1 };
    let z = per_channel_i32(zp, rows, "a_zero_point")?;
    for (idx, v) in x.indexed_iter_mut() {
        let r = if nd >= 2 { idx[nd - 2] } else { 0 };
        *v -= z[r];
    }
    Ok(x)
}

/// `b - zp` where `zp` has one value or one per column (last axis).
pub fn center_cols(b: &Tensor, zp: Option<&Tensor>) -> Result<ArrayD<i32>, String> {
    let mut x = b.to_i32_array()?;
    let nd = x.ndim();
    let cols = x.shape()[nd - 1];
    let z = per_channel_i32(zp, cols, "b_zero_point")?;
    for (idx, v) in x.indexed_iter_mut() {
        *v -= z[idx[nd - 1]];
    }
    Ok(x)
}

impl Op for MatMulInteger {
    fn op_type(&self) -> &'static str {
        "MatMulInteger"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let a = in_fact(inputs, 0, "A")?;
        let b = in_fact(inputs, 1, "B")?;
        for (f, what) in [(a, "A"), (b, "B")] {
            if !matches!(f.dtype, DType::I8 | DType::U8) {
                return Err(format!("{what} must be int8 or uint8, got {}", f.dtype));
            }
        }
        Ok(vec![Fact::new(
            DType::I32,
            matmul_shape(&a.shape, &b.shape)?,
        )])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let a = center_rows(arg(inputs, 0, "A")?, inputs.get(2).copied().flatten())?;
        let b = center_cols(arg(inputs, 1, "B")?, inputs.get(3).copied().flatten())?;
        Ok(vec![Tensor::I32(matmul(&a.view(), &b.view())?)])
    }

    op_boilerplate!();
}
