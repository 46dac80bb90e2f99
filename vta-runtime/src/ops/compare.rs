//! Comparisons with numpy broadcasting (`Equal`, `Less`, `Greater`, `LessOrEqual`,
//! `GreaterOrEqual`) and `Cast` to bool (`x != 0`). The IR has no bool type: ONNX bool tensors
//! are held as uint8 0/1 (what `Where` and `Cast` read back), which is bool's own encoding.
//! Integers compare exactly (as i64), floats as f32.

use ndarray::{ArrayD, IxDyn, Zip};

use super::kernels::broadcast_shapes;
use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareKind {
    Equal,
    Less,
    Greater,
    LessOrEqual,
    GreaterOrEqual,
    /// `Cast(to = BOOL)`: one input, `x != 0`.
    NonZero,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Compare {
    pub kind: CompareKind,
}

impl CompareKind {
    fn holds<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            CompareKind::Equal => a == b,
            CompareKind::Less => a < b,
            CompareKind::Greater => a > b,
            CompareKind::LessOrEqual => a <= b,
            CompareKind::GreaterOrEqual => a >= b,
            CompareKind::NonZero => a != b,
        }
    }
}

fn cmp<T: Copy + PartialOrd>(
    a: &ArrayD<T>,
    b: &ArrayD<T>,
    k: CompareKind,
) -> Result<ArrayD<u8>, String> {
    let s = broadcast_shapes(a.shape(), b.shape())?;
    let av = a.broadcast(IxDyn(&s)).ok_or("broadcast")?;
    let bv = b.broadcast(IxDyn(&s)).ok_or("broadcast")?;
    Ok(Zip::from(&av)
        .and(&bv)
        .map_collect(|&x, &y| u8::from(k.holds(x, y))))
}

/// The tensor as exact i64 values, for integer comparisons.
fn ints(t: &Tensor) -> ArrayD<i64> {
    ArrayD::from_shape_vec(IxDyn(t.shape()), t.to_i64_vec()).expect("same shape")
}

impl Op for Compare {
    fn op_type(&self) -> &'static str {
        match self.kind {
            CompareKind::Equal => "Equal",
            CompareKind::Less => "Less",
            CompareKind::Greater => "Greater",
            CompareKind::LessOrEqual => "LessOrEqual",
            CompareKind::GreaterOrEqual => "GreaterOrEqual",
            CompareKind::NonZero => "Cast",
        }
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let a = in_fact(inputs, 0, "A")?;
        if self.kind == CompareKind::NonZero {
            return Ok(vec![Fact::new(DType::U8, a.shape.clone())]);
        }
        let b = in_fact(inputs, 1, "B")?;
        if a.dtype != b.dtype {
            return Err(format!("operand types differ: {} and {}", a.dtype, b.dtype));
        }
        Ok(vec![Fact::new(
            DType::U8,
            broadcast_shapes(&a.shape, &b.shape)?,
        )])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let a = arg(inputs, 0, "A")?;
        let out = if self.kind == CompareKind::NonZero {
            match a {
                Tensor::F32(x) => x.mapv(|v| u8::from(v != 0.0)),
                t => ints(t).mapv(|v| u8::from(v != 0)),
            }
        } else {
            match (a, arg(inputs, 1, "B")?) {
                (Tensor::F32(x), Tensor::F32(y)) => cmp(x, y, self.kind)?,
                (x, y) if x.dtype() == y.dtype() => cmp(&ints(x), &ints(y), self.kind)?,
                (x, y) => {
                    return Err(format!(
                        "operand types differ: {} and {}",
                        x.dtype(),
                        y.dtype()
                    ))
                }
            }
        };
        Ok(vec![Tensor::U8(out)])
    }

    op_boilerplate!();
}
