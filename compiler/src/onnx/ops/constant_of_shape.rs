//! `ConstantOfShape` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::constant_of_shape`.

pub use vta_runtime::ops::constant_of_shape::*;

use ndarray::{ArrayD, IxDyn};

use super::{FromOnnx, ParseCtx};
use crate::graph::Tensor;

impl FromOnnx for ConstantOfShape {
    fn parse(ctx: &ParseCtx) -> Result<ConstantOfShape, String> {
        let value = match ctx.tensor("value")? {
            None => Tensor::F32(ArrayD::zeros(IxDyn(&[]))),
            Some(t) if t.len() == 1 => t,
            Some(t) => {
                return Err(format!(
                    "attribute 'value' must have one element, got shape {:?}",
                    t.shape()
                ))
            }
        };
        Ok(ConstantOfShape { value })
    }
}
