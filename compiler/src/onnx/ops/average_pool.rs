//! `AveragePool` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::average_pool`.

pub use vta_runtime::ops::average_pool::*;

use super::kernels::{Window, WindowFromOnnx};
use super::{FromOnnx, ParseCtx};

impl FromOnnx for AveragePool {
    fn parse(ctx: &ParseCtx) -> Result<AveragePool, String> {
        Ok(AveragePool {
            window: Window::parse(ctx, true)?,
            count_include_pad: ctx.int("count_include_pad", 0)? != 0,
        })
    }
}
