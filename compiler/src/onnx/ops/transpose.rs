//! `Transpose` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::transpose`.

pub use vta_runtime::ops::transpose::*;

use super::{to_usizes, FromOnnx, ParseCtx};

impl FromOnnx for Transpose {
    fn parse(ctx: &ParseCtx) -> Result<Transpose, String> {
        Ok(Transpose {
            perm: ctx
                .ints("perm")?
                .map(|p| to_usizes(&p, "perm"))
                .transpose()?,
        })
    }
}
