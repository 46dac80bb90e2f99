//! `Add`, `Sub`, `Mul`, `Div`, `Max`, `Min`, `Mod` with numpy broadcasting, in f32 or wrapping
//! int8/uint8/int32/int64 (integer `Div` truncates toward zero), and `Pow` of a float or
//! integer base by a float or integer exponent. `Add` can carry a fused activation (a residual
//! add followed by `Relu`).

use ndarray::{ArrayD, IxDyn, Zip};

use super::kernels::broadcast_shapes;
use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Activation, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinKind {
    Add,
    Sub,
    Mul,
    Div,
    /// The only kind whose operands may differ in type (ONNX's `Pow(T, T1)`): the result has
    /// the base's type.
    Pow,
    /// ONNX's variadic `Max` and `Min` with two inputs (a lower or upper bound; with a
    /// constant bound they become a `Clip`).
    Max,
    Min,
    /// `Mod` with `fmod = 0`: integers only, the remainder takes the divisor's sign (Python's
    /// `%`, shape arithmetic of exported models).
    Mod,
    /// `Mod` with `fmod = 1`: the remainder takes the dividend's sign (C's `fmod`).
    Fmod,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Binary {
    pub kind: BinKind,
    pub activation: Option<Activation>,
}

impl Binary {
    pub fn new(kind: BinKind) -> Binary {
        Binary {
            kind,
            activation: None,
        }
    }
}

/// `Pow` of an int32 or int64 base: numpy's power (exact in f64 below 2^53), truncated to the
/// base's type.
fn int_pow(a: &Tensor, b: &Tensor) -> Result<Tensor, String> {
    let wide = |t: &Tensor| -> Result<ArrayD<f64>, String> {
        Ok(match t {
            Tensor::F32(v) => v.mapv(f64::from),
            t => ArrayD::from_shape_vec(
                IxDyn(t.shape()),
                t.to_i64_vec().into_iter().map(|v| v as f64).collect(),
            )
            .map_err(|e| e.to_string())?,
        })
    };
    let y = zip(&wide(a)?, &wide(b)?, |x, e| Ok(x.powf(e) as i64))?;
    Ok(Tensor::I64(y).cast(a.dtype()))
}

fn zip<T: Copy, U: Clone>(
    a: &ArrayD<T>,
    b: &ArrayD<T>,
    f: impl Fn(T, T) -> Result<U, String>,
) -> Result<ArrayD<U>, String> {
    let shape = broadcast_shapes(a.shape(), b.shape())?;
    let av = a.broadcast(IxDyn(&shape)).ok_or("broadcast")?;
    let bv = b.broadcast(IxDyn(&shape)).ok_or("broadcast")?;
    let mut err = None;
    let out = Zip::from(&av).and(&bv).map_collect(|&x, &y| match f(x, y) {
        Ok(v) => Some(v),
        Err(e) => {
            err = Some(e);
            None
        }
    });
    if let Some(e) = err {
        return Err(e);
    }
    Ok(out.mapv(|v| v.expect("no error")))
}

impl Op for Binary {
    fn op_type(&self) -> &'static str {
        match self.kind {
            BinKind::Add => "Add",
            BinKind::Sub => "Sub",
            BinKind::Mul => "Mul",
            BinKind::Div => "Div",
            BinKind::Pow => "Pow",
            BinKind::Max => "Max",
            BinKind::Min => "Min",
            BinKind::Mod | BinKind::Fmod => "Mod",
        }
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let a = in_fact(inputs, 0, "A")?;
        let b = in_fact(inputs, 1, "B")?;
        if self.kind == BinKind::Pow {
            let wide = |t: DType| matches!(t, DType::F32 | DType::I32 | DType::I64);
            if !(wide(a.dtype) && wide(b.dtype)) {
                return Err(format!(
                    "Pow is supported on float, int32 and int64 operands, got {} and {}",
                    a.dtype, b.dtype
                ));
            }
        } else if a.dtype != b.dtype {
            return Err(format!("operand types differ: {} and {}", a.dtype, b.dtype));
        }
        if self.activation.is_some() && a.dtype != DType::F32 {
            return Err("a fused activation needs float operands".into());
        }
        Ok(vec![Fact::new(
            a.dtype,
            broadcast_shapes(&a.shape, &b.shape)?,
        )])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let a = arg(inputs, 0, "A")?;
        let b = arg(inputs, 1, "B")?;
        let k = self.kind;
        if k == BinKind::Pow && a.dtype() != DType::F32 {
            return Ok(vec![int_pow(a, b)?]);
        }
        if k == BinKind::Pow && b.dtype() != DType::F32 {
            return self.eval(&[Some(a), Some(&b.cast(DType::F32))]);
        }
        let out = match (a, b) {
            (Tensor::F32(a), Tensor::F32(b)) => {
                let act = self.activation;
                Tensor::F32(zip(a, b, |x, y| {
                    let v = match k {
                        BinKind::Add => x + y,
                        BinKind::Sub => x - y,
                        BinKind::Mul => x * y,
                        BinKind::Div => x / y,
                        BinKind::Pow => x.powf(y),
                        BinKind::Max => x.max(y),
                        BinKind::Min => x.min(y),
                        BinKind::Fmod => x % y,
                        // numpy's `mod`, by which ONNX's tests define fmod = 0 on floats.
                        BinKind::Mod => {
                            let r = x % y;
                            if r != 0.0 && (r < 0.0) != (y < 0.0) {
                                r + y
                            } else {
                                r
                            }
                        }
                    };
                    Ok(act.map_or(v, |a| a.apply(v)))
                })?)
            }
            (Tensor::I32(a), Tensor::I32(b)) if k != BinKind::Pow => {
                Tensor::I32(zip(a, b, |x, y| match k {
                    BinKind::Add => Ok(x.wrapping_add(y)),
                    BinKind::Sub => Ok(x.wrapping_sub(y)),
                    BinKind::Mul => Ok(x.wrapping_mul(y)),
                    BinKind::Max => Ok(x.max(y)),
                    BinKind::Min => Ok(x.min(y)),
                    BinKind::Mod | BinKind::Fmod => {
                        let r = x
                            .checked_rem(y)
                            .ok_or_else(|| "integer Mod by zero".to_string())?;
                        let adjust = k == BinKind::Mod && r != 0 && (r < 0) != (y < 0);
                        Ok(if adjust { r + y } else { r })
                    }
                    _ => x
                        .checked_div(y)
                        .ok_or_else(|| "integer division by zero".to_string()),
                })?)
            }
            (Tensor::I64(a), Tensor::I64(b)) if k != BinKind::Pow => {
                Tensor::I64(zip(a, b, |x, y| match k {
                    BinKind::Add => Ok(x.wrapping_add(y)),
                    BinKind::Sub => Ok(x.wrapping_sub(y)),
                    BinKind::Mul => Ok(x.wrapping_mul(y)),
                    BinKind::Max => Ok(x.max(y)),
                    BinKind::Min => Ok(x.min(y)),
                    BinKind::Mod | BinKind::Fmod => {
                        let r = x
                            .checked_rem(y)
                            .ok_or_else(|| "integer Mod by zero".to_string())?;
                        let adjust = k == BinKind::Mod && r != 0 && (r < 0) != (y < 0);
                        Ok(if adjust { r + y } else { r })
                    }
                    _ => x
                        .checked_div(y)
                        .ok_or_else(|| "integer division by zero".to_string()),
                })?)
            }
            (a, b) if k != BinKind::Pow && a.dtype() == b.dtype() => {
                // int8 and uint8: exactly in i64, then wrapped to the operands' type as numpy
                // wraps (a remainder, minimum or maximum fits it as it is).
                let ints = |t: &Tensor| {
                    ArrayD::from_shape_vec(IxDyn(t.shape()), t.to_i64_vec()).expect("same shape")
                };
                let r = self.eval(&[Some(&Tensor::I64(ints(a))), Some(&Tensor::I64(ints(b)))])?;
                r[0].cast(a.dtype())
            }
            (a, b) => {
                return Err(format!(
                    "{} of {} and {} is not supported",
                    self.op_type(),
                    a.dtype(),
                    b.dtype()
                ))
            }
        };
        Ok(vec![out])
    }

    fn summary(&self) -> String {
        self.activation
            .map(|a| format!("+ clamp[{}, {}]", a.min, a.max))
            .unwrap_or_default()
    }

    op_boilerplate!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: Tensor) -> Vec<Tensor> {
        vec![v]
    }

    #[test]
    fn int8_arithmetic_wraps_as_numpy_does() {
        let a = Tensor::I8(ArrayD::from_shape_vec(IxDyn(&[2]), vec![100, -128]).unwrap());
        let b = Tensor::I8(ArrayD::from_shape_vec(IxDyn(&[2]), vec![100, -1]).unwrap());
        let add = Binary::new(BinKind::Add)
            .eval(&[Some(&a), Some(&b)])
            .unwrap();
        let want = Tensor::I8(ArrayD::from_shape_vec(IxDyn(&[2]), vec![-56, 127]).unwrap());
        assert_eq!(add, t(want));
        let div = Binary::new(BinKind::Div)
            .eval(&[Some(&a), Some(&b)])
            .unwrap();
        let want = Tensor::I8(ArrayD::from_shape_vec(IxDyn(&[2]), vec![1, -128]).unwrap());
        assert_eq!(div, t(want));
    }

    #[test]
    fn pow_takes_the_base_type_with_an_exponent_of_another() {
        let pow = Binary::new(BinKind::Pow);
        let x = Tensor::I32(ArrayD::from_shape_vec(IxDyn(&[3]), vec![1, 2, 3]).unwrap());
        let e = Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[3]), vec![4.0, 5.0, 0.5]).unwrap());
        let want = Tensor::I32(ArrayD::from_shape_vec(IxDyn(&[3]), vec![1, 32, 1]).unwrap());
        assert_eq!(pow.eval(&[Some(&x), Some(&e)]).unwrap(), t(want));
        let xf = x.cast(DType::F32);
        let ei = Tensor::I64(ArrayD::from_shape_vec(IxDyn(&[3]), vec![4, 5, 6]).unwrap());
        let want =
            Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[3]), vec![1.0, 32.0, 729.0]).unwrap());
        assert_eq!(pow.eval(&[Some(&xf), Some(&ei)]).unwrap(), t(want));
    }
}
