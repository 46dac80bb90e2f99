//! `ConstantOfShape`: a tensor of the shape given by a constant int64 input, every element
//! `value` (a one-element tensor, float 0 by default). The shape must be a constant (in exported
//! graphs it comes from a folded shape subgraph); the importer charges the output to the memory
//! budget before it is filled, so a huge shape is refused, not allocated.

use ndarray::{ArrayD, IxDyn};

use super::TensorInfo;
use super::{arg, in_const, in_fact, op_boilerplate, to_usizes, Op};
use crate::tensor::{map_same, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct ConstantOfShape {
    /// The fill value, one element.
    pub value: Tensor,
}

fn dims(shape: &Tensor) -> Result<Vec<usize>, String> {
    if shape.shape().len() != 1 {
        return Err(format!(
            "the shape input must be 1-D, got shape {:?}",
            shape.shape()
        ));
    }
    to_usizes(&shape.to_i64_vec(), "ConstantOfShape dimensions")
}

impl Op for ConstantOfShape {
    fn op_type(&self) -> &'static str {
        "ConstantOfShape"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        in_fact(inputs, 0, "input")?;
        let s = in_const(inputs, 0).ok_or(
            "ConstantOfShape's shape must be a constant: it sets the output shape, which must be \
             static (computed from static shapes alone it folds; here it depends on run-time \
             values)",
        )?;
        Ok(vec![Fact::new(self.value.dtype(), dims(s)?)])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let d = dims(arg(inputs, 0, "input")?)?;
        Ok(vec![map_same!(&self.value, a => {
            let v = a.iter().next().cloned().ok_or("ConstantOfShape value is empty")?;
            ArrayD::from_elem(IxDyn(&d), v)
        })])
    }

    fn summary(&self) -> String {
        format!("{} {:?}", self.value.dtype(), self.value.to_f64_vec())
    }

    op_boilerplate!();
}
