//! `MaxPool` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::max_pool`.

pub use vta_runtime::ops::max_pool::*;

use super::kernels::{Window, WindowFromOnnx};
use super::{FromOnnx, ParseCtx};

impl FromOnnx for MaxPool {
    fn parse(ctx: &ParseCtx) -> Result<MaxPool, String> {
        let indices = match ctx.int("storage_order", 0)? {
            _ if ctx.node.output.get(1).is_none_or(|o| o.is_empty()) => None,
            0 => Some(StorageOrder::RowMajor),
            1 => Some(StorageOrder::ColumnMajor),
            other => return Err(format!("storage_order must be 0 or 1, got {other}")),
        };
        Ok(MaxPool {
            window: Window::parse(ctx, true)?,
            indices,
        })
    }
}
