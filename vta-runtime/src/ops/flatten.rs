//! `Flatten`: [d0, ..., dn] to [d0 * ... * d(axis-1), d(axis) * ... * dn], any type.

use super::TensorInfo;
use super::{arg, axis, in_fact, op_boilerplate, Op};
use crate::tensor::{Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Flatten {
    pub axis: i64,
}

impl Flatten {
    pub fn out_shape(&self, s: &[usize]) -> Result<Vec<usize>, String> {
        let a = if self.axis == s.len() as i64 {
            s.len()
        } else {
            axis(self.axis, s.len())?
        };
        Ok(vec![s[..a].iter().product(), s[a..].iter().product()])
    }
}

impl Op for Flatten {
    fn op_type(&self) -> &'static str {
        "Flatten"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "input")?;
        Ok(vec![Fact::new(x.dtype, self.out_shape(&x.shape)?)])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "input")?;
        Ok(vec![x.reshape(&self.out_shape(x.shape())?)?])
    }

    op_boilerplate!();
}
