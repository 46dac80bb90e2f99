//! `PRelu` (float): `x` where `x >= 0`, `slope * x` elsewhere, the slope broadcast to `x`
//! (unidirectionally: a per-channel slope is `[C, 1, 1]`).

use ndarray::{IxDyn, Zip};

use super::kernels::broadcast_shapes;
use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct PRelu;

impl Op for PRelu {
    fn op_type(&self) -> &'static str {
        "PRelu"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "X")?;
        let s = in_fact(inputs, 1, "slope")?;
        if x.dtype != DType::F32 || s.dtype != DType::F32 {
            return Err(format!(
                "PRelu is supported on float tensors, got {} and {}",
                x.dtype, s.dtype
            ));
        }
        if broadcast_shapes(&x.shape, &s.shape)? != x.shape {
            return Err(format!(
                "slope {:?} does not broadcast to the input {:?}",
                s.shape, x.shape
            ));
        }
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "X")?.as_f32()?;
        let s = arg(inputs, 1, "slope")?.as_f32()?;
        let sb = s.broadcast(IxDyn(x.shape())).ok_or_else(|| {
            format!(
                "slope {:?} does not broadcast to {:?}",
                s.shape(),
                x.shape()
            )
        })?;
        let y = Zip::from(x)
            .and(&sb)
            .map_collect(|&v, &a| if v >= 0.0 { v } else { a * v });
        Ok(vec![Tensor::F32(y)])
    }

    op_boilerplate!();
}
