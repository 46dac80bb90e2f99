//! `Transpose` with a permutation (default: reversed axes), any type.

use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::map_same;
use crate::tensor::{Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Transpose {
    pub perm: Option<Vec<usize>>,
}

impl Transpose {
    fn perm_for(&self, rank: usize) -> Result<Vec<usize>, String> {
        let p = self
            .perm
            .clone()
            .unwrap_or_else(|| (0..rank).rev().collect());
        let mut q = p.clone();
        q.sort_unstable();
        if q != (0..rank).collect::<Vec<_>>() {
            return Err(format!("perm {p:?} is not a permutation of rank {rank}"));
        }
        Ok(p)
    }
}

impl Op for Transpose {
    fn op_type(&self) -> &'static str {
        "Transpose"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "data")?;
        let p = self.perm_for(x.rank())?;
        Ok(vec![Fact::new(
            x.dtype,
            p.iter().map(|&i| x.shape[i]).collect::<Vec<_>>(),
        )])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "data")?;
        let p = self.perm_for(x.shape().len())?;
        Ok(vec![
            map_same!(x, a => a.view().permuted_axes(p.clone()).as_standard_layout().into_owned()),
        ])
    }

    op_boilerplate!();
}
