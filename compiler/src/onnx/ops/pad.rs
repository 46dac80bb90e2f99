//! `Pad` from the attributes of an ONNX node; the op itself is `vta_runtime::ops::pad`.

pub use vta_runtime::ops::pad::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for Pad {
    fn parse(ctx: &ParseCtx) -> Result<Pad, String> {
        let mode = match ctx.string("mode")?.as_deref().unwrap_or("constant") {
            "constant" => PadMode::Constant,
            "reflect" => PadMode::Reflect,
            "edge" => PadMode::Edge,
            "wrap" => PadMode::Wrap,
            other => return Err(format!("unknown mode '{other}'")),
        };
        let attrs = if ctx.opset < 11 {
            Some((
                ctx.ints("pads")?.ok_or("attribute 'pads' is required")?,
                ctx.float("value", 0.0)?,
            ))
        } else {
            None
        };
        Ok(Pad { mode, attrs })
    }
}
