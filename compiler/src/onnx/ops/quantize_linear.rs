//! `QuantizeLinear` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::quantize_linear`.

pub use vta_runtime::ops::quantize_linear::*;

use super::{FromOnnx, ParseCtx};
use crate::graph::DType;
use crate::onnx::OnnxDType;

impl FromOnnx for QuantizeLinear {
    fn parse(ctx: &ParseCtx) -> Result<QuantizeLinear, String> {
        super::dequantize_linear::refuse_blocked(ctx)?;
        // (opset 23: the division's precision; float32 is what the op computes)
        match ctx.int("precision", 0)? {
            0 | 1 => {}
            p => {
                return Err(format!(
                    "precision {} is not supported (the division x / y_scale is computed in \
                     float32): export without the precision attribute",
                    crate::onnx::proto::data_type::name(p as i32)
                ))
            }
        }
        let default_dtype = match ctx.int("output_dtype", 0)? {
            0 => DType::U8,
            code => DType::from_onnx(code as i32)
                .map_err(|t| format!("output_dtype {t} is not supported"))?,
        };
        Ok(QuantizeLinear {
            axis: ctx.int("axis", 1)?,
            default_dtype,
            // int4/int2 outputs are rewritten by `crate::onnx::lowbit` before parsing, and a
            // following integer Clip is fused in by the graph's simplification.
            range: None,
        })
    }
}
