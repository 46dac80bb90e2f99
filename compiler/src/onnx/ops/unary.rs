//! Single-input element-wise functions (`Sigmoid`, `HardSigmoid`, `HardSwish`, `Tanh`,
//! `LeakyRelu`, `Erf`, `Exp`, `Gelu`, `Softplus`, `Mish`, `Sqrt`) from the attributes of an ONNX node;
//! the op itself is `vta_runtime::ops::unary`.

pub use vta_runtime::ops::unary::*;

use super::{FromOnnx, ParseCtx};

impl FromOnnx for Unary {
    fn parse(ctx: &ParseCtx) -> Result<Unary, String> {
        let kind = match ctx.node.op_type.as_str() {
            "Sigmoid" => UnaryKind::Sigmoid,
            "HardSigmoid" => UnaryKind::HardSigmoid {
                alpha: ctx.float("alpha", 0.2)?,
                beta: ctx.float("beta", 0.5)?,
            },
            "HardSwish" => UnaryKind::HardSwish,
            "Tanh" => UnaryKind::Tanh,
            "LeakyRelu" => UnaryKind::LeakyRelu {
                alpha: ctx.float("alpha", 0.01)?,
            },
            "Erf" => UnaryKind::Erf,
            "Exp" => UnaryKind::Exp,
            "Gelu" => match ctx.string("approximate")?.as_deref() {
                None | Some("none") => UnaryKind::Gelu { tanh: false },
                Some("tanh") => UnaryKind::Gelu { tanh: true },
                Some(other) => return Err(format!("unknown Gelu approximation '{other}'")),
            },
            "Softplus" => UnaryKind::Softplus,
            "Mish" => UnaryKind::Mish,
            "Sqrt" => UnaryKind::Sqrt,
            "Floor" => UnaryKind::Floor,
            "Ceil" => UnaryKind::Ceil,
            "Round" => UnaryKind::Round,
            other => return Err(format!("{other} is not an element-wise function")),
        };
        Ok(Unary::new(kind))
    }
}
