//! `Identity`, and `Dropout` in inference mode (also an identity). Removed by the graph
//! passes.

use super::{arg, in_fact, op_boilerplate, Op, ParseCtx};
use crate::graph::{Fact, Tensor, TensorInfo};

#[derive(Debug, Clone, PartialEq)]
pub struct Identity;

impl Identity {
    pub fn parse(ctx: &ParseCtx) -> Result<Identity, String> {
        if ctx.node.op_type == "Dropout" {
            if ctx.node.output.iter().skip(1).any(|o| !o.is_empty()) {
                return Err("Dropout's mask output is not supported".into());
            }
            if ctx.node.input.get(2).is_some_and(|t| !t.is_empty()) {
                return Err(
                    "Dropout's training_mode input is not supported (inference only)".into(),
                );
            }
        }
        Ok(Identity)
    }
}

impl Op for Identity {
    fn op_type(&self) -> &'static str {
        "Identity"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        Ok(vec![in_fact(inputs, 0, "input")?.clone()])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        Ok(vec![arg(inputs, 0, "input")?.clone()])
    }

    op_boilerplate!();
}
