//! `Gather` along one axis with integer indices (negative indices count from the end).

use ndarray::{ArrayD, Axis, IxDyn};

use super::TensorInfo;
use super::{arg, axis, in_const, in_fact, op_boilerplate, Op};
use crate::tensor::map_same;
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Gather {
    pub axis: i64,
}

fn gather<T: Clone>(x: &ArrayD<T>, a: usize, idx: &[usize], ishape: &[usize]) -> ArrayD<T> {
    let parts: Vec<_> = idx.iter().map(|&i| x.index_axis(Axis(a), i)).collect();
    let mut shape: Vec<usize> = x.shape()[..a].to_vec();
    shape.extend_from_slice(ishape);
    shape.extend_from_slice(&x.shape()[a + 1..]);
    // Element order: outer dims, then indices, then inner dims.
    let outer: usize = x.shape()[..a].iter().product();
    let inner: usize = x.shape()[a + 1..].iter().product();
    let mut v = Vec::with_capacity(outer * idx.len() * inner);
    for o in 0..outer {
        for p in &parts {
            let flat: Vec<T> = p.iter().cloned().collect();
            v.extend_from_slice(&flat[o * inner..(o + 1) * inner]);
        }
    }
    ArrayD::from_shape_vec(IxDyn(&shape), v).expect("sized")
}

impl Op for Gather {
    fn op_type(&self) -> &'static str {
        "Gather"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "data")?;
        let i = in_fact(inputs, 1, "indices")?;
        if !matches!(i.dtype, DType::I32 | DType::I64) {
            return Err(format!("indices must be int32 or int64, got {}", i.dtype));
        }
        if in_const(inputs, 1).is_none() {
            return Err("Gather indices must be constants".into());
        }
        let a = axis(self.axis, x.rank())?;
        let mut shape = x.shape[..a].to_vec();
        shape.extend_from_slice(&i.shape);
        shape.extend_from_slice(&x.shape[a + 1..]);
        Ok(vec![Fact::new(x.dtype, shape)])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "data")?;
        let it = arg(inputs, 1, "indices")?;
        let a = axis(self.axis, x.shape().len())?;
        let n = x.shape()[a] as i64;
        let idx = it
            .to_i64_vec()
            .into_iter()
            .map(|i| {
                let j = if i < 0 { i + n } else { i };
                if (0..n).contains(&j) {
                    Ok(j as usize)
                } else {
                    Err(format!("index {i} out of range for axis of size {n}"))
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        let ishape = it.shape().to_vec();
        Ok(vec![map_same!(x, t => gather(t, a, &idx, &ishape))])
    }

    op_boilerplate!();
}
