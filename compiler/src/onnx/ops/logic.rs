//! `Not`, `And`, `Or`, `Xor` (no attributes: the kind is the op type); the op itself is
//! `vta_runtime::ops::logic`.

pub use vta_runtime::ops::logic::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for Logic {
    fn parse(ctx: &ParseCtx) -> Result<Logic, String> {
        let kind = match ctx.node.op_type.as_str() {
            "Not" => LogicKind::Not,
            "And" => LogicKind::And,
            "Or" => LogicKind::Or,
            "Xor" => LogicKind::Xor,
            other => return Err(format!("{other} is not a logical operator")),
        };
        Ok(Logic { kind })
    }
}
