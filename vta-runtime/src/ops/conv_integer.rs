//! `ConvInteger`: `y = conv(x - x_zp, w - w_zp)` in int32 (padding reads `x_zp`, so padded
//! cells contribute nothing), `w_zp` per tensor or per output channel.

use super::conv::conv_fact;
use super::kernels::{conv2d, dims4, Window};
use super::qlinear_conv::{centered, centered_per_channel, per_channel_i32};
use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct ConvInteger {
    pub window: Window,
    pub group: usize,
}

impl Op for ConvInteger {
    fn op_type(&self) -> &'static str {
        "ConvInteger"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "x")?;
        let w = in_fact(inputs, 1, "w")?;
        for (f, what) in [(x, "x"), (w, "w")] {
            if !matches!(f.dtype, DType::I8 | DType::U8) {
                return Err(format!("{what} must be int8 or uint8, got {}", f.dtype));
            }
        }
        Ok(vec![conv_fact(&self.window, self.group, x, w, DType::I32)?])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "x")?;
        let w = arg(inputs, 1, "w")?;
        let (o, _, kh, kw) = dims4(w.shape(), "w")?;
        let xz = inputs
            .get(2)
            .copied()
            .flatten()
            .map_or(0, |z| z.to_i64_vec()[0] as i32);
        let wz = per_channel_i32(inputs.get(3).copied().flatten(), o, "w_zero_point")?;
        let xc = centered(x, xz)?;
        let wc = centered_per_channel(w, &wz)?;
        let (_, _, h, wd) = dims4(x.shape(), "x")?;
        let geo = self.window.resolve((h, wd), (kh, kw))?;
        Ok(vec![Tensor::I32(conv2d(
            &xc.view(),
            &wc.view(),
            None,
            &geo,
            self.group,
            0,
        )?)])
    }

    fn summary(&self) -> String {
        self.window.summary()
    }

    op_boilerplate!();
}
