//! `Slice` from the attributes of an ONNX node; the op itself is `vta_runtime::ops::slice`.

pub use vta_runtime::ops::slice::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for Slice {
    fn parse(ctx: &ParseCtx) -> Result<Slice, String> {
        if ctx.opset >= 10 {
            return Ok(Slice { attrs: None });
        }
        Ok(Slice {
            attrs: Some(SliceAttrs {
                starts: ctx
                    .ints("starts")?
                    .ok_or("attribute 'starts' is required")?,
                ends: ctx.ints("ends")?.ok_or("attribute 'ends' is required")?,
                axes: ctx.ints("axes")?,
            }),
        })
    }
}
