//! `Concat` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::concat`.

pub use vta_runtime::ops::concat::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for Concat {
    fn parse(ctx: &ParseCtx) -> Result<Concat, String> {
        Ok(Concat {
            axis: ctx.opt_int("axis")?.ok_or("attribute 'axis' is required")?,
        })
    }
}
