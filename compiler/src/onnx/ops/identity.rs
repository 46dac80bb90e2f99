//! `Identity` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::identity`.

pub use vta_runtime::ops::identity::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for Identity {
    fn parse(ctx: &ParseCtx) -> Result<Identity, String> {
        // In inference `crate::onnx::forms` moved the mask output to nodes of its own.
        if ctx.node.op_type == "Dropout" && ctx.node.input.get(2).is_some_and(|t| !t.is_empty()) {
            return Err(
                "Dropout's training_mode input is not supported (the compiler compiles \
                        inference): export the model in eval mode"
                    .into(),
            );
        }
        Ok(Identity)
    }
}
