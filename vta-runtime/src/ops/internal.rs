//! Ops the lowering inserts into plans (not ONNX operators): exact conversions between the
//! uint8 representation of ONNX tensors and the accelerator's int8 representation, the value
//! of a narrow quantized tensor held centred in the lanes ([`I8Offset`]), and
//! [`InsertZeros`], the input of a transposed convolution rewritten as a convolution.

use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

/// `int8 = uint8 - 128` (exact: the accelerator's representation of a uint8 tensor whose
/// zero point is moved down by 128).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct U8ToI8;

/// `uint8 = int8 + 128`, the inverse of [`U8ToI8`].
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct I8ToU8;

impl Op for U8ToI8 {
    fn op_type(&self) -> &'static str {
        "U8ToI8"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        Ok(vec![Fact::new(
            DType::I8,
            in_fact(inputs, 0, "x")?.shape.clone(),
        )])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        match arg(inputs, 0, "x")? {
            Tensor::U8(a) => Ok(vec![Tensor::I8(a.mapv(|v| (i16::from(v) - 128) as i8))]),
            t => Err(format!("U8ToI8 expects uint8, got {}", t.dtype())),
        }
    }

    op_boilerplate!();
}

impl Op for I8ToU8 {
    fn op_type(&self) -> &'static str {
        "I8ToU8"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        Ok(vec![Fact::new(
            DType::U8,
            in_fact(inputs, 0, "x")?.shape.clone(),
        )])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        match arg(inputs, 0, "x")? {
            Tensor::I8(a) => Ok(vec![Tensor::U8(a.mapv(|v| (i16::from(v) + 128) as u8))]),
            t => Err(format!("I8ToU8 expects int8, got {}", t.dtype())),
        }
    }

    op_boilerplate!();
}

/// `y = int8 + offset` as `to` (int8 or uint8): the ONNX value of a quantized tensor whose
/// narrow range (uint4 `[0, 15]`, a QONNX unsigned 4-bit activation) the accelerator holds
/// centred in its signed lanes (`[-8, 7]`, offset 8). A result outside `to` is an error,
/// never a wrap: the lowering only offsets values whose range it knows.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct I8Offset {
    pub offset: i32,
    pub to: DType,
}

impl Op for I8Offset {
    fn op_type(&self) -> &'static str {
        "I8Offset"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        if !matches!(self.to, DType::I8 | DType::U8) {
            return Err(format!("I8Offset to {} (int8 or uint8 only)", self.to));
        }
        Ok(vec![Fact::new(
            self.to,
            in_fact(inputs, 0, "x")?.shape.clone(),
        )])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let Tensor::I8(a) = arg(inputs, 0, "x")? else {
            return Err("I8Offset expects int8".into());
        };
        let (lo, hi) = if self.to == DType::U8 {
            (0, 255)
        } else {
            (-128, 127)
        };
        let y = a.mapv(|v| i32::from(v) + self.offset);
        if let Some(v) = y.iter().find(|v| !(lo..=hi).contains(*v)) {
            return Err(format!(
                "I8Offset: {v} is outside {} (the value was not in its quantization's range)",
                self.to
            ));
        }
        Ok(vec![Tensor::I32(y).cast(self.to)])
    }

    op_boilerplate!();
}

/// The input of a transposed convolution rewritten as a convolution: `stride - 1` cells of
/// `fill` between neighbouring input cells (both spatial axes of an int8 NCHW tensor) and
/// `pad` [top, left, bottom, right] cells of `fill` around them. `fill` is the int8 zero point
/// of the input, so the inserted cells stand for exact zeros.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct InsertZeros {
    pub stride: (usize, usize),
    pub pad: [usize; 4],
    pub fill: i8,
}

impl InsertZeros {
    /// Output (height, width) for an input of `(h, w)`.
    pub fn out_hw(&self, h: usize, w: usize) -> (usize, usize) {
        (
            (h - 1) * self.stride.0 + 1 + self.pad[0] + self.pad[2],
            (w - 1) * self.stride.1 + 1 + self.pad[1] + self.pad[3],
        )
    }
}

impl Op for InsertZeros {
    fn op_type(&self) -> &'static str {
        "InsertZeros"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "x")?;
        let [n, c, h, w] = x.shape[..] else {
            return Err(format!("InsertZeros needs an NCHW tensor, got {x}"));
        };
        if x.dtype != DType::I8 || h == 0 || w == 0 || self.stride.0 == 0 || self.stride.1 == 0 {
            return Err(format!("InsertZeros of {x} with stride {:?}", self.stride));
        }
        let (oh, ow) = self.out_hw(h, w);
        Ok(vec![Fact::new(DType::I8, [n, c, oh, ow])])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let Tensor::I8(x) = arg(inputs, 0, "x")? else {
            return Err("InsertZeros expects int8".into());
        };
        let [n, c, h, w] = x.shape()[..] else {
            return Err(format!(
                "InsertZeros needs an NCHW tensor, got {:?}",
                x.shape()
            ));
        };
        let (oh, ow) = self.out_hw(h, w);
        let mut y = ndarray::ArrayD::from_elem(ndarray::IxDyn(&[n, c, oh, ow]), self.fill);
        for ((b, ch, iy, ix), &v) in x
            .view()
            .into_dimensionality::<ndarray::Ix4>()
            .map_err(|e| e.to_string())?
            .indexed_iter()
        {
            y[[
                b,
                ch,
                self.pad[0] + iy * self.stride.0,
                self.pad[1] + ix * self.stride.1,
            ]] = v;
        }
        Ok(vec![Tensor::I8(y)])
    }

    op_boilerplate!();
}
