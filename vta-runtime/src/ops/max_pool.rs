//! `MaxPool` (2-D) on float, int8 or uint8 tensors (quantized graphs pool integers directly:
//! max commutes with an increasing affine dequantization). Padding never wins.

use ndarray::{ArrayD, IxDyn};

use super::kernels::{dims4, Window};
use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct MaxPool {
    pub window: Window,
}

fn pool<T: Copy + PartialOrd>(x: &ArrayD<T>, w: &Window, lowest: T) -> Result<ArrayD<T>, String> {
    let (n, c, h, wd) = dims4(x.shape(), "input")?;
    let g = w.resolve((h, wd), (1, 1))?;
    let (oh, ow) = g.out;
    let mut out = ArrayD::from_elem(IxDyn(&[n, c, oh, ow]), lowest);
    for b in 0..n {
        for ch in 0..c {
            for y in 0..oh {
                for xo in 0..ow {
                    let mut m: Option<T> = None;
                    for ky in 0..g.kernel.0 {
                        let iy = (y * g.stride.0 + ky * g.dilation.0) as isize - g.pad[0] as isize;
                        for kx in 0..g.kernel.1 {
                            let ix =
                                (xo * g.stride.1 + kx * g.dilation.1) as isize - g.pad[1] as isize;
                            if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < wd {
                                let v = x[[b, ch, iy as usize, ix as usize]];
                                if m.is_none_or(|m| v > m) {
                                    m = Some(v);
                                }
                            }
                        }
                    }
                    out[[b, ch, y, xo]] = m.unwrap_or(lowest);
                }
            }
        }
    }
    Ok(out)
}

impl Op for MaxPool {
    fn op_type(&self) -> &'static str {
        "MaxPool"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "X")?;
        if !matches!(x.dtype, DType::F32 | DType::I8 | DType::U8) {
            return Err(format!(
                "MaxPool is supported on float, int8 and uint8, got {}",
                x.dtype
            ));
        }
        let (n, c, h, w) = dims4(&x.shape, "input X")?;
        let g = self.window.resolve((h, w), (1, 1))?;
        Ok(vec![Fact::new(x.dtype, [n, c, g.out.0, g.out.1])])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        Ok(vec![match arg(inputs, 0, "X")? {
            Tensor::F32(x) => Tensor::F32(pool(x, &self.window, f32::NEG_INFINITY)?),
            Tensor::I8(x) => Tensor::I8(pool(x, &self.window, i8::MIN)?),
            Tensor::U8(x) => Tensor::U8(pool(x, &self.window, u8::MIN)?),
            t => return Err(format!("MaxPool on {} is not supported", t.dtype())),
        }])
    }

    fn summary(&self) -> String {
        format!(
            "kernel {:?} {}",
            self.window.kernel.unwrap_or((1, 1)),
            self.window.summary()
        )
    }

    op_boilerplate!();
}
