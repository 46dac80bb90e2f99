//! `Cast` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::cast`.

pub use vta_runtime::ops::cast::*;

use super::{FromOnnx, ParseCtx};
use crate::graph::DType;
use crate::onnx::OnnxDType;

impl FromOnnx for Cast {
    fn parse(ctx: &ParseCtx) -> Result<Cast, String> {
        let to = ctx.opt_int("to")?.ok_or("attribute 'to' is required")?;
        Ok(Cast {
            to: DType::from_onnx(to as i32).map_err(|t| format!("Cast to {t} is not supported"))?,
        })
    }
}
