//! `Clip` (float): bounds from attributes (opset < 11) or constant inputs (opset >= 11).

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
        if x.dtype != DType::F32 {
            return Err(format!("Clip is supported in float only, got {}", x.dtype));
        }
        Ok(vec![x.clone()])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "X")?.as_f32()?;
        let b = self.bounds(
            inputs.get(1).copied().flatten(),
            inputs.get(2).copied().flatten(),
        )?;
        Ok(vec![Tensor::F32(x.mapv(|v| b.apply(v)))])
    }

    op_boilerplate!();
}
