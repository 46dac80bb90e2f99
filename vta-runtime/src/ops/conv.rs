//! `Conv`: 2-D convolution in f32, with groups (depthwise included) and dilation; carries the
//! activation (`Relu`/`Clip`) fused into it by the graph passes.

use super::kernels::{conv2d, dims4, Window};
use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Activation, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct Conv {
    pub window: Window,
    pub group: usize,
    /// A clamp fused after the convolution (from a following Relu or Clip node).
    pub activation: Option<Activation>,
}

/// Output fact of a 2-D convolution-like op (Conv, ConvInteger, QLinearConv).
pub fn conv_fact(
    window: &Window,
    group: usize,
    x: &Fact,
    w: &Fact,
    dtype: DType,
) -> Result<Fact, String> {
    let (n, c, h, wd) = dims4(&x.shape, "input X")?;
    let (o, cg, kh, kw) = dims4(&w.shape, "weight W")?;
    if c != cg * group || o % group != 0 {
        return Err(format!(
            "input channels {c}, weight shape {:?} and group {group} do not agree",
            w.shape
        ));
    }
    let geo = window.resolve((h, wd), (kh, kw))?;
    if geo.kernel != (kh, kw) {
        return Err(format!(
            "kernel_shape {:?} differs from the weight's {kh}x{kw}",
            geo.kernel
        ));
    }
    Ok(Fact::new(dtype, [n, o, geo.out.0, geo.out.1]))
}

impl Op for Conv {
    fn op_type(&self) -> &'static str {
        "Conv"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "X")?;
        let w = in_fact(inputs, 1, "W")?;
        if x.dtype != DType::F32 || w.dtype != DType::F32 {
            return Err(format!(
                "Conv computes in float; got {} input and {} weight",
                x.dtype, w.dtype
            ));
        }
        let y = conv_fact(&self.window, self.group, x, w, DType::F32)?;
        if let Some(b) = inputs.get(2).copied().flatten() {
            if b.fact.shape != [y.shape[1]] {
                return Err(format!(
                    "bias shape {:?} should be [{}]",
                    b.fact.shape, y.shape[1]
                ));
            }
        }
        Ok(vec![y])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "X")?.as_f32()?;
        let w = arg(inputs, 1, "W")?.as_f32()?;
        let b = inputs
            .get(2)
            .copied()
            .flatten()
            .map(|b| b.as_f32())
            .transpose()?;
        let bias: Option<Vec<f32>> = b.map(|b| b.iter().cloned().collect());
        let (_, _, h, wd) = dims4(x.shape(), "input")?;
        let (_, _, kh, kw) = dims4(w.shape(), "weight")?;
        let geo = self.window.resolve((h, wd), (kh, kw))?;
        let mut y = conv2d(&x.view(), &w.view(), bias.as_deref(), &geo, self.group, 0.0)?;
        if let Some(a) = self.activation {
            y.mapv_inplace(|v| a.apply(v));
        }
        Ok(vec![Tensor::F32(y)])
    }

    fn summary(&self) -> String {
        let mut s = self.window.summary();
        if self.group != 1 {
            s += &format!(" group {}", self.group);
        }
        if let Some(a) = self.activation {
            s += &format!(" + clamp[{}, {}]", a.min, a.max);
        }
        s
    }

    op_boilerplate!();
}
