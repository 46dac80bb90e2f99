//! `DynamicQuantizeLinear`: quantizes a float tensor to uint8 with a scale and zero point
//! computed from the tensor itself, per inference (what onnxruntime's `quantize_dynamic`
//! puts before every ConvInteger/MatMulInteger). The three outputs are `y`, `y_scale` (f32
//! scalar) and `y_zero_point` (uint8 scalar).
//!
//! The range always includes 0: `scale = (max(0, max x) - min(0, min x)) / 255`,
//! `zp = saturate(round_half_even(-min / scale))` and
//! `y = saturate(round_half_even(x / scale) + zp)`, all in f32 as onnxruntime computes them.
//! An all-zero input has no range; ONNX leaves that case open, onnxruntime takes scale 1
//! while onnx's Python reference takes 1/255. Both give `y = 0` and `zp = 0`, so every
//! integer result downstream is the same; this op follows onnxruntime (whose models these
//! are).

use ndarray::ArrayD;

use super::kernels::round_half_even;
use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct DynamicQuantizeLinear;

/// The scale and zero point of `x`'s range (extended to include 0), as onnxruntime's
/// `GetQuantizationParameter` computes them.
pub fn dynamic_qparams(x: impl IntoIterator<Item = f32>) -> (f32, u8) {
    let (lo, hi) = x
        .into_iter()
        .fold((0f32, 0f32), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let scale = if hi == lo { 1.0 } else { (hi - lo) / 255.0 };
    let zp = round_half_even((0.0 - lo / scale).clamp(0.0, 255.0));
    (scale, zp as u8)
}

impl Op for DynamicQuantizeLinear {
    fn op_type(&self) -> &'static str {
        "DynamicQuantizeLinear"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "x")?;
        if x.dtype != DType::F32 {
            return Err(format!("x must be float, got {}", x.dtype));
        }
        Ok(vec![
            Fact::new(DType::U8, x.shape.clone()),
            Fact::new(DType::F32, Vec::new()),
            Fact::new(DType::U8, Vec::new()),
        ])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "x")?.as_f32()?;
        let (scale, zp) = dynamic_qparams(x.iter().copied());
        let y = x.mapv(|v| (round_half_even(v / scale) + f32::from(zp)).clamp(0.0, 255.0) as u8);
        Ok(vec![
            Tensor::U8(y),
            Tensor::F32(ArrayD::from_elem(Vec::new(), scale)),
            Tensor::U8(ArrayD::from_elem(Vec::new(), zp)),
        ])
    }

    op_boilerplate!();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(v: &[f32]) -> (Vec<u8>, f32, u8) {
        let x = Tensor::F32(ArrayD::from_shape_vec(vec![v.len()], v.to_vec()).unwrap());
        let r = DynamicQuantizeLinear.eval(&[Some(&x)]).unwrap();
        let Tensor::U8(y) = &r[0] else { panic!() };
        let Tensor::U8(z) = &r[2] else { panic!() };
        (
            y.iter().copied().collect(),
            r[1].scalar_f32().unwrap(),
            z[[]],
        )
    }

    /// The values onnxruntime 1.32 gives for the same inputs.
    #[test]
    fn matches_onnxruntime() {
        assert_eq!(run(&[0.0; 4]), (vec![0; 4], 1.0, 0));
        assert_eq!(
            run(&[1.0, 2.0, 3.0, 4.0]),
            (vec![64, 127, 191, 255], 4.0 / 255.0, 0)
        );
        assert_eq!(
            run(&[-1.0, -2.0, -3.0, -4.0]),
            (vec![191, 128, 64, 0], 4.0 / 255.0, 255)
        );
        let (y, s, z) = run(&[-0.5, 0.3, 2.5, -7.1]);
        assert_eq!((y, z), (vec![176, 197, 255, 0], 189));
        assert_eq!(s, 9.6 / 255.0);
    }
}
