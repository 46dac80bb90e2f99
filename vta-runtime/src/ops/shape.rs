//! `Shape`: the input's (static) shape as int64, optionally sliced (`start`/`end`, opset 15).
//! Folded to a constant at load time since shapes are static.

use ndarray::{ArrayD, IxDyn};

use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Shape {
    pub start: i64,
    pub end: Option<i64>,
}

impl Shape {
    fn slice(&self, s: &[usize]) -> Vec<i64> {
        let r = s.len() as i64;
        let clamp = |v: i64| if v < 0 { (v + r).clamp(0, r) } else { v.clamp(0, r) } as usize;
        let (a, b) = (clamp(self.start), clamp(self.end.unwrap_or(r)));
        s[a..b.max(a)].iter().map(|&d| d as i64).collect()
    }
}

impl Op for Shape {
    fn op_type(&self) -> &'static str {
        "Shape"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "data")?;
        Ok(vec![Fact::new(DType::I64, [self.slice(&x.shape).len()])])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let v = self.slice(arg(inputs, 0, "data")?.shape());
        Ok(vec![Tensor::I64(
            ArrayD::from_shape_vec(IxDyn(&[v.len()]), v).expect("1-D"),
        )])
    }

    fn fold_from_facts(&self, inputs: &[Option<&TensorInfo>]) -> Option<Vec<Tensor>> {
        let x = in_fact(inputs, 0, "data").ok()?;
        let v = self.slice(&x.shape);
        Some(vec![Tensor::I64(
            ArrayD::from_shape_vec(IxDyn(&[v.len()]), v).ok()?,
        )])
    }

    op_boilerplate!();
}
