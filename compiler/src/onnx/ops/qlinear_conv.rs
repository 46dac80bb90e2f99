//! `QLinearConv` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::qlinear_conv`.

pub use vta_runtime::ops::qlinear_conv::*;

use super::kernels::{Window, WindowFromOnnx};
use super::{FromOnnx, ParseCtx};

impl FromOnnx for QLinearConv {
    fn parse(ctx: &ParseCtx) -> Result<QLinearConv, String> {
        let group = ctx.int("group", 1)?;
        if group < 1 {
            return Err(format!("group must be positive, got {group}"));
        }
        Ok(QLinearConv {
            window: Window::parse(ctx, false)?,
            group: group as usize,
        })
    }
}
