//! `Constant`: a tensor from the `value` (or `value_float(s)`/`value_int(s)`) attribute.
//! Always folded at load time.

use ndarray::{ArrayD, IxDyn};

use super::{op_boilerplate, Op, ParseCtx};
use crate::graph::{Fact, Tensor, TensorInfo};

#[derive(Debug, Clone, PartialEq)]
pub struct Constant {
    pub value: Tensor,
}

impl Constant {
    pub fn parse(ctx: &ParseCtx) -> Result<Constant, String> {
        let value = if let Some(t) = ctx.tensor("value")? {
            t
        } else if let Some(f) = ctx.opt_float("value_float")? {
            Tensor::F32(ArrayD::from_elem(IxDyn(&[]), f))
        } else if let Some(v) = ctx.floats("value_floats")? {
            Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[v.len()]), v).expect("1-D"))
        } else if let Some(i) = ctx.opt_int("value_int")? {
            Tensor::I64(ArrayD::from_elem(IxDyn(&[]), i))
        } else if let Some(v) = ctx.ints("value_ints")? {
            Tensor::I64(ArrayD::from_shape_vec(IxDyn(&[v.len()]), v).expect("1-D"))
        } else {
            return Err(
                "Constant has no supported value attribute (value, value_float(s), value_int(s))"
                    .into(),
            );
        };
        Ok(Constant { value })
    }
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
