//! `Conv` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::conv`.

pub use vta_runtime::ops::conv::*;

use super::kernels::{Window, WindowFromOnnx};
use super::{FromOnnx, ParseCtx};

impl FromOnnx for Conv {
    fn parse(ctx: &ParseCtx) -> Result<Conv, String> {
        let group = ctx.int("group", 1)?;
        if group < 1 {
            return Err(format!("group must be positive, got {group}"));
        }
        Ok(Conv {
            window: Window::parse(ctx, false)?,
            group: group as usize,
            activation: None,
        })
    }
}
