//! `Gather` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::gather`.

pub use vta_runtime::ops::gather::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for Gather {
    fn parse(ctx: &ParseCtx) -> Result<Gather, String> {
        Ok(Gather {
            axis: ctx.int("axis", 0)?,
        })
    }
}
