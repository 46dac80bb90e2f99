//! `Cast` between the IR's types (ONNX semantics: float to integer truncates toward zero).

use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Cast {
    pub to: DType,
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
