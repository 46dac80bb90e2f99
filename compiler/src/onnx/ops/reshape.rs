//! `Reshape` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::reshape`.

pub use vta_runtime::ops::reshape::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for Reshape {
    fn parse(ctx: &ParseCtx) -> Result<Reshape, String> {
        if ctx.opset < 5 {
            return Err("Reshape before opset 5 (shape attribute) is not supported".into());
        }
        Ok(Reshape {
            allowzero: ctx.int("allowzero", 0)? != 0,
        })
    }
}
