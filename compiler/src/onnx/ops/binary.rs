//! `Binary` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::binary`.

pub use vta_runtime::ops::binary::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for Binary {
    fn parse(ctx: &ParseCtx) -> Result<Binary, String> {
        ctx.refuse("broadcast", "legacy broadcasting before opset 7")?;
        let kind = match ctx.node.op_type.as_str() {
            "Add" => BinKind::Add,
            "Sub" => BinKind::Sub,
            "Mul" => BinKind::Mul,
            "Pow" => BinKind::Pow,
            _ => BinKind::Div,
        };
        Ok(Binary::new(kind))
    }
}
