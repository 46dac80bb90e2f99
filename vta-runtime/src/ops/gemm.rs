//! `Gemm`: `Y = alpha * A' B' + beta * C` in f32 (A' = A or A^T, B' = B or B^T), with a fused
//! activation.

use ndarray::{Array2, ArrayD, Ix2};

use super::kernels::broadcast_shapes;
use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Activation, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Gemm {
    pub alpha: f32,
    pub beta: f32,
    pub trans_a: bool,
    pub trans_b: bool,
    pub activation: Option<Activation>,
}

impl Gemm {
    fn dims(&self, a: &[usize], b: &[usize]) -> Result<(usize, usize, usize), String> {
        if a.len() != 2 || b.len() != 2 {
            return Err(format!("Gemm operands must be 2-D, got {a:?} and {b:?}"));
        }
        let (m, k) = if self.trans_a {
            (a[1], a[0])
        } else {
            (a[0], a[1])
        };
        let (k2, n) = if self.trans_b {
            (b[1], b[0])
        } else {
            (b[0], b[1])
        };
        if k != k2 {
            return Err(format!("Gemm inner dimensions differ: {a:?} x {b:?}"));
        }
        Ok((m, k, n))
    }
}

impl Op for Gemm {
    fn op_type(&self) -> &'static str {
        "Gemm"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let a = in_fact(inputs, 0, "A")?;
        let b = in_fact(inputs, 1, "B")?;
        if a.dtype != DType::F32 || b.dtype != DType::F32 {
            return Err("Gemm is supported in float only".into());
        }
        let (m, _, n) = self.dims(&a.shape, &b.shape)?;
        if let Some(c) = inputs.get(2).copied().flatten() {
            let s = broadcast_shapes(&[m, n], &c.fact.shape)?;
            if s != [m, n] {
                return Err(format!(
                    "C of shape {:?} does not broadcast to [{m}, {n}]",
                    c.fact.shape
                ));
            }
        }
        Ok(vec![Fact::new(DType::F32, [m, n])])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let a = arg(inputs, 0, "A")?.as_f32()?;
        let b = arg(inputs, 1, "B")?.as_f32()?;
        self.dims(a.shape(), b.shape())?;
        let a = a
            .view()
            .into_dimensionality::<Ix2>()
            .map_err(|e| e.to_string())?;
        let b = b
            .view()
            .into_dimensionality::<Ix2>()
            .map_err(|e| e.to_string())?;
        let a = if self.trans_a { a.t() } else { a };
        let b = if self.trans_b { b.t() } else { b };
        let (m, k) = a.dim();
        let n = b.dim().1;
        let mut y = Array2::<f32>::zeros((m, n));
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0f32;
                for q in 0..k {
                    s += a[[i, q]] * b[[q, j]];
                }
                y[[i, j]] = self.alpha * s;
            }
        }
        if let Some(c) = inputs.get(2).copied().flatten() {
            let c = c.as_f32()?;
            let cb = c.broadcast((m, n)).ok_or("C does not broadcast")?;
            y.zip_mut_with(&cb, |v, &c| *v += self.beta * c);
        }
        if let Some(act) = self.activation {
            y.mapv_inplace(|v| act.apply(v));
        }
        Ok(vec![Tensor::F32(ArrayD::from(y.into_dyn()))])
    }

    fn summary(&self) -> String {
        let mut s = format!(
            "transA {} transB {}",
            self.trans_a as u8, self.trans_b as u8
        );
        if self.alpha != 1.0 || self.beta != 1.0 {
            s += &format!(" alpha {} beta {}", self.alpha, self.beta);
        }
        if let Some(a) = self.activation {
            s += &format!(" + clamp[{}, {}]", a.min, a.max);
        }
        s
    }

    op_boilerplate!();
}
