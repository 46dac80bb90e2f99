//! `ReduceMean` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::reduce_mean`.

pub use vta_runtime::ops::reduce_mean::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for ReduceMean {
    fn parse(ctx: &ParseCtx) -> Result<ReduceMean, String> {
        Ok(ReduceMean {
            attr_axes: if ctx.opset < 18 {
                ctx.ints("axes")?
            } else {
                None
            },
            keepdims: ctx.int("keepdims", 1)? != 0,
            noop_with_empty_axes: ctx.int("noop_with_empty_axes", 0)? != 0,
        })
    }
}
