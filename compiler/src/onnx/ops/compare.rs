//! `Equal`, `Less`, `Greater`, `LessOrEqual`, `GreaterOrEqual` (no attributes: the kind is the
//! op type); the op itself is `vta_runtime::ops::compare`.

pub use vta_runtime::ops::compare::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for Compare {
    fn parse(ctx: &ParseCtx) -> Result<Compare, String> {
        let kind = match ctx.node.op_type.as_str() {
            "Equal" => CompareKind::Equal,
            "Less" => CompareKind::Less,
            "Greater" => CompareKind::Greater,
            "LessOrEqual" => CompareKind::LessOrEqual,
            "GreaterOrEqual" => CompareKind::GreaterOrEqual,
            other => return Err(format!("{other} is not a comparison")),
        };
        Ok(Compare { kind })
    }
}
