//! `DequantizeLinear` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::dequantize_linear`.

pub use vta_runtime::ops::dequantize_linear::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for DequantizeLinear {
    fn parse(ctx: &ParseCtx) -> Result<DequantizeLinear, String> {
        if ctx.int("block_size", 0)? != 0 {
            return Err("blocked quantization (block_size) is not supported".into());
        }
        Ok(DequantizeLinear {
            axis: ctx.int("axis", 1)?,
        })
    }
}
