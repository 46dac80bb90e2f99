//! `Clip`: bounds from attributes (opset < 11, float) or inputs (opset >= 11, of the input's
//! type). Integer tensors (int8, uint8, int32: Brevitas's QCDQ `QuantizeLinear -> Clip ->
//! DequantizeLinear` narrows an int8 tensor this way) are clamped exactly in integers.

use super::TensorInfo;
use super::{arg, in_const, in_fact, op_boilerplate, Activation, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Clip {
    /// Bounds from attributes (opset < 11); `None` when they come from inputs 1 and 2.
    pub attr_bounds: Option<Activation>,
}

impl Clip {
    /// The clamp, given the (constant) bound inputs.
    pub fn bounds(&self, min: Option<&Tensor>, max: Option<&Tensor>) -> Result<Activation, String> {
        if let Some(a) = self.attr_bounds {
            return Ok(a);
        }
        Ok(Activation {
            min: min
                .map(|t| t.scalar_f32())
                .transpose()?
                .unwrap_or(f32::NEG_INFINITY),
            max: max
                .map(|t| t.scalar_f32())
                .transpose()?
                .unwrap_or(f32::INFINITY),
        })
    }

    /// The clamp when the bounds are constants known at load time.
    pub fn static_bounds(&self, inputs: &[Option<&TensorInfo>]) -> Option<Activation> {
        let present = |i: usize| inputs.get(i).copied().flatten().is_some();
        if (present(1) && in_const(inputs, 1).is_none())
            || (present(2) && in_const(inputs, 2).is_none())
        {
            return None;
        }
        self.bounds(in_const(inputs, 1), in_const(inputs, 2)).ok()
    }
}

impl Op for Clip {
    fn op_type(&self) -> &'static str {
        "Clip"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "X")?;
        match x.dtype {
            DType::F32 => {}
            DType::I8 | DType::U8 | DType::I32 if self.attr_bounds.is_none() => {
                for (k, what) in [(1, "min"), (2, "max")] {
                    if let Some(b) = inputs.get(k).copied().flatten() {
                        if b.fact.dtype != x.dtype {
                            return Err(format!(
                                "Clip's {what} is {} but its input is {}",
                                b.fact.dtype, x.dtype
                            ));
                        }
                    }
                }
            }
            other => {
                return Err(format!(
                    "Clip is supported on float, int8, uint8 and int32 tensors (integer ones \
                     from opset 12), got {other}"
                ))
            }
        }
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "X")?;
        let (min, max) = (
            inputs.get(1).copied().flatten(),
            inputs.get(2).copied().flatten(),
        );
        if x.dtype() != DType::F32 {
            // Integers are clamped in integers: an f32 bound could not hold every int32.
            let bound = |b: Option<&Tensor>, default: i64| -> Result<i64, String> {
                b.map_or(Ok(default), |t| {
                    t.to_i64_vec()
                        .first()
                        .copied()
                        .ok_or_else(|| "Clip bound has no value".to_string())
                })
            };
            let (lo, hi) = (bound(min, i64::MIN)?, bound(max, i64::MAX)?);
            let y = x
                .to_i32_array()?
                .mapv(|v| i64::from(v).max(lo).min(hi) as i32);
            return Ok(vec![Tensor::I32(y).cast(x.dtype())]);
        }
        let b = self.bounds(min, max)?;
        Ok(vec![Tensor::F32(x.as_f32()?.mapv(|v| b.apply(v)))])
    }

    op_boilerplate!();
}
