//! `DequantizeLinear` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::dequantize_linear`.

pub use vta_runtime::ops::dequantize_linear::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for DequantizeLinear {
    fn parse(ctx: &ParseCtx) -> Result<DequantizeLinear, String> {
        refuse_blocked(ctx)?;
        Ok(DequantizeLinear {
            axis: ctx.int("axis", 1)?,
        })
    }
}

/// Refuses blocked quantization (opset 21 `block_size`), with the reason: a block's scale
/// varies along the reduction axis of the weights it quantizes (onnxruntime blocks along the
/// input channels), while the accelerator's requantization has one multiplier per output
/// channel, so every block would need its own accumulation and a rescaled sum of the partial
/// results, which integer arithmetic does not reproduce exactly.
pub(crate) fn refuse_blocked(ctx: &ParseCtx) -> Result<(), String> {
    match ctx.int("block_size", 0)? {
        0 => Ok(()),
        b => Err(format!(
            "blocked quantization (block_size {b}) is not supported: each block of {b} values \
             along the reduction axis has its own scale, and the accelerator requantizes with \
             one multiplier per output channel, so the blocks' partial sums could not be \
             combined exactly in integers; quantize the weights per channel (onnxruntime: \
             quantize_static with per_channel=True and without the BlockSize extra option)"
        )),
    }
}
