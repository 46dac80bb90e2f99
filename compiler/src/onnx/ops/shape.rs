//! `Shape` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::shape`.

pub use vta_runtime::ops::shape::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for Shape {
    fn parse(ctx: &ParseCtx) -> Result<Shape, String> {
        Ok(Shape {
            start: ctx.int("start", 0)?,
            end: ctx.opt_int("end")?,
        })
    }
}
