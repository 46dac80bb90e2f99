//! `Where(condition, X, Y)`: `X` where the condition is true, `Y` elsewhere, with numpy
//! broadcasting of all three. The condition is bool, held as uint8 (any non-zero is true; see
//! [`super::compare`]).

use ndarray::{ArrayD, IxDyn, Zip};

use super::kernels::broadcast_shapes;
use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Where;

fn select<T: Clone>(
    c: &ArrayD<u8>,
    x: &ArrayD<T>,
    y: &ArrayD<T>,
    s: &[usize],
) -> Result<ArrayD<T>, String> {
    let bc = |shape: &[usize]| format!("cannot broadcast {shape:?} to {s:?}");
    let cv = c.broadcast(IxDyn(s)).ok_or_else(|| bc(c.shape()))?;
    let xv = x.broadcast(IxDyn(s)).ok_or_else(|| bc(x.shape()))?;
    let yv = y.broadcast(IxDyn(s)).ok_or_else(|| bc(y.shape()))?;
    Ok(Zip::from(&cv)
        .and(&xv)
        .and(&yv)
        .map_collect(|&c, x, y| if c != 0 { x.clone() } else { y.clone() }))
}

impl Op for Where {
    fn op_type(&self) -> &'static str {
        "Where"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let c = in_fact(inputs, 0, "condition")?;
        let x = in_fact(inputs, 1, "X")?;
        let y = in_fact(inputs, 2, "Y")?;
        if c.dtype != DType::U8 {
            return Err(format!("the condition must be bool, got {}", c.dtype));
        }
        if x.dtype != y.dtype {
            return Err(format!("X and Y types differ: {} and {}", x.dtype, y.dtype));
        }
        let s = broadcast_shapes(&broadcast_shapes(&c.shape, &x.shape)?, &y.shape)?;
        Ok(vec![Fact::new(x.dtype, s)])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let Tensor::U8(c) = arg(inputs, 0, "condition")? else {
            return Err("the condition must be bool".into());
        };
        let (x, y) = (arg(inputs, 1, "X")?, arg(inputs, 2, "Y")?);
        let s = broadcast_shapes(&broadcast_shapes(c.shape(), x.shape())?, y.shape())?;
        Ok(vec![match (x, y) {
            (Tensor::F32(a), Tensor::F32(b)) => Tensor::F32(select(c, a, b, &s)?),
            (Tensor::I8(a), Tensor::I8(b)) => Tensor::I8(select(c, a, b, &s)?),
            (Tensor::U8(a), Tensor::U8(b)) => Tensor::U8(select(c, a, b, &s)?),
            (Tensor::I32(a), Tensor::I32(b)) => Tensor::I32(select(c, a, b, &s)?),
            (Tensor::I64(a), Tensor::I64(b)) => Tensor::I64(select(c, a, b, &s)?),
            (a, b) => {
                return Err(format!(
                    "X and Y types differ: {} and {}",
                    a.dtype(),
                    b.dtype()
                ))
            }
        }])
    }

    op_boilerplate!();
}
