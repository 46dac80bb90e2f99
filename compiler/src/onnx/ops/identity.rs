//! `Identity` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::identity`.

pub use vta_runtime::ops::identity::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for Identity {
    fn parse(ctx: &ParseCtx) -> Result<Identity, String> {
        if ctx.node.op_type == "Dropout" {
            if ctx.node.output.iter().skip(1).any(|o| !o.is_empty()) {
                return Err(
                    "Dropout's mask output is not supported (the compiler compiles \
                            inference, where Dropout is the identity): export the model in eval \
                            mode, which drops the mask"
                        .into(),
                );
            }
            if ctx.node.input.get(2).is_some_and(|t| !t.is_empty()) {
                return Err(
                    "Dropout's training_mode input is not supported (the compiler \
                            compiles inference): export the model in eval mode"
                        .into(),
                );
            }
        }
        Ok(Identity)
    }
}
