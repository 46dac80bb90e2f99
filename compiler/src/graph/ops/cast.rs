//! `Cast` between the IR's types (ONNX semantics: float to integer truncates toward zero).

use super::{arg, in_fact, op_boilerplate, Op, ParseCtx};
use crate::graph::{DType, Fact, Tensor, TensorInfo};

#[derive(Debug, Clone, PartialEq)]
pub struct Cast {
    pub to: DType,
}

impl Cast {
    pub fn parse(ctx: &ParseCtx) -> Result<Cast, String> {
        let to = ctx.opt_int("to")?.ok_or("attribute 'to' is required")?;
        Ok(Cast {
            to: DType::from_onnx(to as i32).map_err(|t| format!("Cast to {t} is not supported"))?,
        })
    }
}

impl Op for Cast {
    fn op_type(&self) -> &'static str {
        "Cast"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "input")?;
        Ok(vec![Fact::new(self.to, x.shape.clone())])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        Ok(vec![arg(inputs, 0, "input")?.cast(self.to)])
    }

    fn summary(&self) -> String {
        format!("to {}", self.to)
    }

    op_boilerplate!();
}
