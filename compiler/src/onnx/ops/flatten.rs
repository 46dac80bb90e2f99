//! `Flatten` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::flatten`.

pub use vta_runtime::ops::flatten::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for Flatten {
    fn parse(ctx: &ParseCtx) -> Result<Flatten, String> {
        Ok(Flatten {
            axis: ctx.int("axis", 1)?,
        })
    }
}
