//! `TopK` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::top_k`.

pub use vta_runtime::ops::top_k::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for TopK {
    fn parse(ctx: &ParseCtx) -> Result<TopK, String> {
        Ok(TopK {
            axis: ctx.int("axis", -1)?,
            largest: ctx.int("largest", 1)? != 0,
            // `k` is an attribute before opset 10, input 1 from then on.
            attr_k: if ctx.opset < 10 {
                match ctx.int("k", -1)? {
                    -1 => return Err("TopK before opset 10 needs its attribute `k`".into()),
                    k => Some(k),
                }
            } else {
                None
            },
        })
    }
}
