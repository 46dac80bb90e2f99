//! `Identity`, and `Dropout` in inference mode (also an identity). Removed by the graph
//! passes.

use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Identity;

impl Op for Identity {
    fn op_type(&self) -> &'static str {
        "Identity"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        Ok(vec![in_fact(inputs, 0, "input")?.clone()])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        Ok(vec![arg(inputs, 0, "input")?.clone()])
    }

    op_boilerplate!();
}
