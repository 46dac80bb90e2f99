//! `Binary` from the attributes of an ONNX node; the op itself (facts, semantics) is
//! `vta_runtime::ops::binary`.

pub use vta_runtime::ops::binary::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for Binary {
    fn parse(ctx: &ParseCtx) -> Result<Binary, String> {
        ctx.refuse("broadcast", "legacy broadcasting before opset 7")?;
        let op = ctx.node.op_type.as_str();
        let operands = ctx.node.input.len();
        // `crate::onnx::forms` made every other count two; none is left.
        if matches!(op, "Max" | "Min") && operands != 2 {
            return Err(format!(
                "{op} with {operands} inputs and {} outputs is not valid ONNX (one or more \
                 inputs, one output)",
                ctx.node.output.len()
            ));
        }
        let kind = match op {
            "Add" => BinKind::Add,
            "Sub" => BinKind::Sub,
            "Mul" => BinKind::Mul,
            "Pow" => BinKind::Pow,
            "Max" => BinKind::Max,
            "Min" => BinKind::Min,
            "Mod" if ctx.int("fmod", 0)? != 0 => BinKind::Fmod,
            "Mod" => BinKind::Mod,
            _ => BinKind::Div,
        };
        Ok(Binary::new(kind))
    }
}
