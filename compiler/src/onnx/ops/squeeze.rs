//! `Squeeze` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::squeeze`.

pub use vta_runtime::ops::squeeze::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for Squeeze {
    fn parse(ctx: &ParseCtx) -> Result<Squeeze, String> {
        Ok(Squeeze {
            unsqueeze: ctx.node.op_type == "Unsqueeze",
            attr_axes: if ctx.opset < 13 {
                ctx.ints("axes")?
            } else {
                None
            },
        })
    }
}
