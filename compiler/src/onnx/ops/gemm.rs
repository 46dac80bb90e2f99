//! `Gemm` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::gemm`.

pub use vta_runtime::ops::gemm::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for Gemm {
    fn parse(ctx: &ParseCtx) -> Result<Gemm, String> {
        ctx.refuse("broadcast", "Gemm before opset 7")?;
        Ok(Gemm {
            alpha: ctx.float("alpha", 1.0)?,
            beta: ctx.float("beta", 1.0)?,
            trans_a: ctx.int("transA", 0)? != 0,
            trans_b: ctx.int("transB", 0)? != 0,
            activation: None,
        })
    }
}
