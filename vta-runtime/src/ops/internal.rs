//! Ops the lowering inserts into plans (not ONNX operators): exact conversions between the
//! uint8 representation of ONNX tensors and the accelerator's int8 representation, and
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
