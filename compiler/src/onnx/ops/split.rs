//! `Split` from the attributes of an ONNX node; the op itself is `vta_runtime::ops::split`.

pub use vta_runtime::ops::split::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for Split {
    fn parse(ctx: &ParseCtx) -> Result<Split, String> {
        let outputs = ctx.node.output.len();
        if let Some(n) = ctx.opt_int("num_outputs")? {
            if n as usize != outputs {
                return Err(format!(
                    "num_outputs {n} but the node has {outputs} outputs"
                ));
            }
        }
        Ok(Split {
            axis: ctx.int("axis", 0)?,
            attr_split: if ctx.opset < 13 {
                ctx.ints("split")?
            } else {
                None
            },
            outputs,
        })
    }
}
