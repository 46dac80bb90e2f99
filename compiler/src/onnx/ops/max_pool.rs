//! `MaxPool` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::max_pool`.

pub use vta_runtime::ops::max_pool::*;

use super::kernels::{Window, WindowFromOnnx};
use super::{FromOnnx, ParseCtx};

impl FromOnnx for MaxPool {
    fn parse(ctx: &ParseCtx) -> Result<MaxPool, String> {
        if ctx.node.output.iter().skip(1).any(|o| !o.is_empty()) {
            return Err(
                "MaxPool's Indices output is not supported (the compiler computes the \
                        pooled values alone): export the pool without indices \
                        (return_indices=False)"
                    .into(),
            );
        }
        Ok(MaxPool {
            window: Window::parse(ctx, true)?,
        })
    }
}
