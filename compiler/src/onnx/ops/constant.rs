//! `Constant` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::constant`.

pub use vta_runtime::ops::constant::*;

use ndarray::{ArrayD, IxDyn};

use super::{FromOnnx, ParseCtx};
use crate::graph::Tensor;

impl FromOnnx for Constant {
    fn parse(ctx: &ParseCtx) -> Result<Constant, String> {
        let value = if let Some(t) = ctx.tensor("value")? {
            t
        } else if let Some(f) = ctx.opt_float("value_float")? {
            Tensor::F32(ArrayD::from_elem(IxDyn(&[]), f))
        } else if let Some(v) = ctx.floats("value_floats")? {
            Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[v.len()]), v).expect("1-D"))
        } else if let Some(i) = ctx.opt_int("value_int")? {
            Tensor::I64(ArrayD::from_elem(IxDyn(&[]), i))
        } else if let Some(v) = ctx.ints("value_ints")? {
            Tensor::I64(ArrayD::from_shape_vec(IxDyn(&[v.len()]), v).expect("1-D"))
        } else {
            return Err(
                "Constant has no supported value attribute (value, value_float(s), value_int(s))"
                    .into(),
            );
        };
        Ok(Constant { value })
    }
}
