//! `Softmax` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::softmax`.

pub use vta_runtime::ops::softmax::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for Softmax {
    fn parse(ctx: &ParseCtx) -> Result<Softmax, String> {
        let legacy = ctx.opset < 13;
        Ok(Softmax {
            axis: ctx.int("axis", if legacy { 1 } else { -1 })?,
            legacy,
        })
    }
}
