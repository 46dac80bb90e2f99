//! `Size`: the number of elements of the input, as an int64 scalar. Shapes are static, so it
//! is folded to a constant at load time (exported shape subgraphs use it for `x.numel()`).

use ndarray::{arr0, ArrayD};

use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Size;

fn scalar(n: usize) -> Tensor {
    let a: ArrayD<i64> = arr0(n as i64).into_dyn();
    Tensor::I64(a)
}

impl Op for Size {
    fn op_type(&self) -> &'static str {
        "Size"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        in_fact(inputs, 0, "data")?;
        Ok(vec![Fact::new(DType::I64, [])])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        Ok(vec![scalar(arg(inputs, 0, "data")?.len())])
    }

    fn fold_from_facts(&self, inputs: &[Option<&TensorInfo>]) -> Option<Vec<Tensor>> {
        Some(vec![scalar(in_fact(inputs, 0, "data").ok()?.len())])
    }

    op_boilerplate!();
}
