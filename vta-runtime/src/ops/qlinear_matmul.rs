//! `QLinearMatMul`: `y = saturate(round_half_even((a - a_zp)(b - b_zp) * M) + y_zp)` with
//! `M = a_scale * b_scale / y_scale` in f32 (`b_scale`/`b_zp` per tensor or per column).

use ndarray::ArrayD;

use super::kernels::{matmul, matmul_shape};
use super::matmul_integer::{center_cols, center_rows};
use super::qlinear_conv::{per_channel_f32, requantize_onnx};
use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct QLinearMatMul;

impl Op for QLinearMatMul {
    fn op_type(&self) -> &'static str {
        "QLinearMatMul"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let a = in_fact(inputs, 0, "a")?;
        let b = in_fact(inputs, 3, "b")?;
        let yz = in_fact(inputs, 7, "y_zero_point")?;
        for (f, what) in [(a, "a"), (b, "b"), (yz, "y_zero_point")] {
            if !matches!(f.dtype, DType::I8 | DType::U8) {
                return Err(format!("{what} must be int8 or uint8, got {}", f.dtype));
            }
        }
        Ok(vec![Fact::new(yz.dtype, matmul_shape(&a.shape, &b.shape)?)])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let a_t = arg(inputs, 0, "a")?;
        let a = center_rows(a_t, Some(arg(inputs, 2, "a_zero_point")?))?;
        let b_t = arg(inputs, 3, "b")?;
        let b = center_cols(b_t, Some(arg(inputs, 5, "b_zero_point")?))?;
        let n = *b_t.shape().last().unwrap_or(&1);
        let as_ = arg(inputs, 1, "a_scale")?.scalar_f32()?;
        let bs = per_channel_f32(arg(inputs, 4, "b_scale")?, n, "b_scale")?;
        let ys = arg(inputs, 6, "y_scale")?.scalar_f32()?;
        let yzt = arg(inputs, 7, "y_zero_point")?;
        let yz = yzt.to_i64_vec()[0] as i32;
        let acc = matmul(&a.view(), &b.view())?;
        let m: Vec<f32> = bs.iter().map(|&s| as_ * s / ys).collect();
        let nd = acc.ndim();
        let dt = yzt.dtype();
        let mut y = ArrayD::<i32>::zeros(acc.raw_dim());
        for (idx, &v) in acc.indexed_iter() {
            let col = if b_t.shape().len() > 1 {
                idx[nd - 1]
            } else {
                0
            };
            y[&idx] = requantize_onnx(v, m[col], yz, dt);
        }
        Ok(vec![match dt {
            DType::I8 => Tensor::I8(y.mapv(|v| v as i8)),
            _ => Tensor::U8(y.mapv(|v| v as u8)),
        }])
    }

    op_boilerplate!();
}
