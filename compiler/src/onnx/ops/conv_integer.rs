//! `ConvInteger` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::conv_integer`.

pub use vta_runtime::ops::conv_integer::*;

use super::kernels::{Window, WindowFromOnnx};
use super::{FromOnnx, ParseCtx};

impl FromOnnx for ConvInteger {
    fn parse(ctx: &ParseCtx) -> Result<ConvInteger, String> {
        let group = ctx.int("group", 1)?;
        if group < 1 {
            return Err(format!("group must be positive, got {group}"));
        }
        Ok(ConvInteger {
            window: Window::parse(ctx, false)?,
            group: group as usize,
        })
    }
}
