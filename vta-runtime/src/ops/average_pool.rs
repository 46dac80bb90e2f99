//! `AveragePool` (2-D, float), with `count_include_pad`.

use ndarray::{ArrayD, IxDyn};

use super::kernels::{dims4, Window};
use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Op};
use crate::tensor::{DType, Fact, Tensor};

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct AveragePool {
    pub window: Window,
    pub count_include_pad: bool,
}

impl AveragePool {
    /// Whether the pool averages each whole input plane into one value (= GlobalAveragePool).
    pub fn is_global(&self, h: usize, w: usize) -> bool {
        self.window
            .resolve((h, w), (1, 1))
            .is_ok_and(|g| g.kernel == (h, w) && g.pad == [0; 4] && g.out == (1, 1))
    }
}

impl Op for AveragePool {
    fn op_type(&self) -> &'static str {
        "AveragePool"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "X")?;
        if x.dtype != DType::F32 {
            return Err(format!(
                "AveragePool is supported in float only, got {}",
                x.dtype
            ));
        }
        let (n, c, h, w) = dims4(&x.shape, "input X")?;
        let g = self.window.resolve((h, w), (1, 1))?;
        Ok(vec![Fact::new(DType::F32, [n, c, g.out.0, g.out.1])])
    }

    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String> {
        let x = arg(inputs, 0, "X")?.as_f32()?;
        let (n, c, h, wd) = dims4(x.shape(), "input")?;
        let g = self.window.resolve((h, wd), (1, 1))?;
        let (oh, ow) = g.out;
        let mut out = ArrayD::zeros(IxDyn(&[n, c, oh, ow]));
        for b in 0..n {
            for ch in 0..c {
                for y in 0..oh {
                    for xo in 0..ow {
                        let (mut s, mut cnt, mut cnt_pad) = (0.0f32, 0usize, 0usize);
                        for ky in 0..g.kernel.0 {
                            let iy =
                                (y * g.stride.0 + ky * g.dilation.0) as isize - g.pad[0] as isize;
                            for kx in 0..g.kernel.1 {
                                let ix = (xo * g.stride.1 + kx * g.dilation.1) as isize
                                    - g.pad[1] as isize;
                                // Cells in the explicit padding count with count_include_pad;
                                // cells beyond it (ceil_mode overhang) never do.
                                if iy < (h + g.pad[2]) as isize && ix < (wd + g.pad[3]) as isize {
                                    cnt_pad += 1;
                                }
                                if iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < wd {
                                    s += x[[b, ch, iy as usize, ix as usize]];
                                    cnt += 1;
                                }
                            }
                        }
                        let d = if self.count_include_pad { cnt_pad } else { cnt };
                        out[[b, ch, y, xo]] = if d == 0 { 0.0 } else { s / d as f32 };
                    }
                }
            }
        }
        Ok(vec![Tensor::F32(out)])
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
