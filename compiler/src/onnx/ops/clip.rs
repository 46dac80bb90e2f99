//! `Clip` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::clip`.

pub use vta_runtime::ops::clip::*;

use super::{Activation, FromOnnx, ParseCtx};

impl FromOnnx for Clip {
    fn parse(ctx: &ParseCtx) -> Result<Clip, String> {
        Ok(Clip {
            attr_bounds: if ctx.opset < 11 {
                Some(Activation {
                    min: ctx.float("min", f32::NEG_INFINITY)?,
                    max: ctx.float("max", f32::INFINITY)?,
                })
            } else {
                None
            },
        })
    }
}
