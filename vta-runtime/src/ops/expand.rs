//! `Expand`: broadcasts the input to a shape given by a constant int64 input (numpy's
//! bidirectional broadcasting: the output shape is the broadcast of both). The shape must be a
//! constant; exported graphs compute it in a shape subgraph that folds once shapes are fixed.

use ndarray::{ArrayD, IxDyn};

use super::kernels::broadcast_shapes;
use super::TensorInfo;
use super::{arg, in_const, in_fact, op_boilerplate, to_usizes, Op};
use crate::tensor::{map_same, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Expand;

fn out_shape(x: &[usize], shape: &Tensor) -> Result<Vec<usize>, String> {
    if shape.shape().len() != 1 {
        return Err(format!(
            "the shape input must be 1-D, got shape {:?}",
            shape.shape()
        ));
    }
    broadcast_shapes(x, &to_usizes(&shape.to_i64_vec(), "Expand dimensions")?)
}

fn expand<T: Clone>(a: &ArrayD<T>, s: &[usize]) -> Result<ArrayD<T>, String> {
    a.broadcast(IxDyn(s))
        .map(|v| v.to_owned())
        .ok_or_else(|| format!("cannot expand shape {:?} to {s:?}", a.shape()))
}

impl Op for Expand {
    fn op_type(&self) -> &'static str {
        "Expand"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "input")?;
        in_fact(inputs, 1, "shape")?;
        let s = in_const(inputs, 1).ok_or(
            "Expand's shape must be a constant: it sets the output shape, which must be static \
             (computed from static shapes alone it folds; here it depends on run-time values)",
        )?;
        Ok(vec![Fact::new(x.dtype, out_shape(&x.shape, s)?)])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "input")?;
        let s = out_shape(x.shape(), arg(inputs, 1, "shape")?)?;
        Ok(vec![map_same!(x, a => expand(a, &s)?)])
    }

    op_boilerplate!();
}
