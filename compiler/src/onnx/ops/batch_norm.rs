//! `BatchNorm` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::batch_norm`.

pub use vta_runtime::ops::batch_norm::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for BatchNorm {
    fn parse(ctx: &ParseCtx) -> Result<BatchNorm, String> {
        if ctx.int("spatial", 1)? == 0 {
            return Err("spatial = 0 (per-element statistics) is not supported".into());
        }
        if ctx.int("training_mode", 0)? != 0 {
            return Err(
                "training_mode = 1 is not supported (the compiler compiles inference, \
                        with the running statistics): export the model in eval mode"
                    .into(),
            );
        }
        if ctx.node.output.iter().skip(1).any(|o| !o.is_empty()) {
            return Err("the running-statistics outputs (training) are not supported".into());
        }
        Ok(BatchNorm {
            epsilon: ctx.float("epsilon", 1e-5)?,
        })
    }
}
