//! `Tile`: the input repeated `repeats[i]` times along each axis `i` (numpy's `tile`);
//! `repeats` must be a constant, since it sets the output shape.

use ndarray::{ArrayD, IxDyn};

use super::TensorInfo;
use super::{arg, in_const, in_fact, op_boilerplate, to_usizes, Op};
use crate::tensor::{map_same, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Tile;

fn out_shape(x: &[usize], repeats: &Tensor) -> Result<Vec<usize>, String> {
    let r = to_usizes(&repeats.to_i64_vec(), "Tile repeats")?;
    if repeats.shape().len() != 1 || r.len() != x.len() {
        return Err(format!(
            "repeats must be 1-D with one value per input axis ({}), got shape {:?}",
            x.len(),
            repeats.shape()
        ));
    }
    x.iter()
        .zip(&r)
        .map(|(&d, &k)| {
            d.checked_mul(k)
                .ok_or_else(|| format!("Tile of {x:?} by {r:?} overflows"))
        })
        .collect()
}

fn tile<T: Clone>(a: &ArrayD<T>, s: &[usize]) -> ArrayD<T> {
    let src = a.shape().to_vec();
    let mut ix = vec![0; s.len()];
    ArrayD::from_shape_fn(IxDyn(s), |o| {
        for (k, i) in ix.iter_mut().enumerate() {
            *i = o[k] % src[k];
        }
        a[IxDyn(&ix)].clone()
    })
}

impl Op for Tile {
    fn op_type(&self) -> &'static str {
        "Tile"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "input")?;
        in_fact(inputs, 1, "repeats")?;
        let r = in_const(inputs, 1).ok_or(
            "Tile's repeats must be a constant: they set the output shape, which must be static \
             (computed from static shapes alone they fold; here they depend on run-time values)",
        )?;
        Ok(vec![Fact::new(x.dtype, out_shape(&x.shape, r)?)])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "input")?;
        let s = out_shape(x.shape(), arg(inputs, 1, "repeats")?)?;
        Ok(vec![map_same!(x, a => tile(a, &s))])
    }

    op_boilerplate!();
}
