//! `Constant`: a tensor from the `value` (or `value_float(s)`/`value_int(s)`) attribute.
//! Always folded at load time.

use super::TensorInfo;
use super::{op_boilerplate, Op};
use crate::tensor::{Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Constant {
    pub value: Tensor,
}

impl Op for Constant {
    fn op_type(&self) -> &'static str {
        "Constant"
    }

    fn infer(&self, _inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        Ok(vec![self.value.fact()])
    }

    fn eval(&self, _inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        Ok(vec![self.value.clone()])
    }

    op_boilerplate!();
}
