//! `ConvTranspose` (2-D, float): every input cell scatters its products with the kernel into
//! the output, `y[n, g*og + o, iy*s + ky*d - pad_top, ix*s + kx*d - pad_left] +=
//! x[n, g*cg + c, iy, ix] * w[g*cg + c, o, ky, kx]`, plus the bias; with groups, dilation,
//! `output_padding`, `output_shape` and `auto_pad`; carries the activation (`Relu`/`Clip`) the
//! graph passes fuse into it.

use ndarray::{ArrayD, IxDyn};

use super::kernels::dims4;
use super::TensorInfo;
use super::{arg, in_fact, op_boilerplate, Activation, Op};
use crate::tensor::{DType, Fact, Tensor};

/// `auto_pad` of a transposed convolution.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoPad {
    NotSet,
    Valid,
    SameUpper,
    SameLower,
}

#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq)]
pub struct ConvTranspose {
    /// (height, width); `None`: from the weight.
    pub kernel: Option<(usize, usize)>,
    pub stride: (usize, usize),
    pub dilation: (usize, usize),
    pub group: usize,
    /// Explicit `pads` [top, left, bottom, right] (with `auto_pad` NOTSET and no
    /// `output_shape`).
    pub pads: [usize; 4],
    pub auto_pad: AutoPad,
    pub output_padding: (usize, usize),
    /// Output (height, width) given by the model: the padding follows from it.
    pub output_shape: Option<(usize, usize)>,
    /// A clamp fused after the transposed convolution (from a following Relu or Clip node).
    pub activation: Option<Activation>,
}

/// A transposed convolution resolved against an input size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransposeGeometry {
    pub kernel: (usize, usize),
    pub stride: (usize, usize),
    pub dilation: (usize, usize),
    /// Cropped from the full output: [top, left, bottom, right].
    pub pad: [usize; 4],
    pub output_padding: (usize, usize),
    pub out: (usize, usize),
}

impl ConvTranspose {
    /// Padding and output size for an input of `hw` and a weight kernel of `kernel`.
    pub fn resolve(
        &self,
        hw: (usize, usize),
        kernel: (usize, usize),
    ) -> Result<TransposeGeometry, String> {
        let k = self.kernel.unwrap_or(kernel);
        if k != kernel {
            return Err(format!(
                "kernel_shape {k:?} differs from the weight's {kernel:?}"
            ));
        }
        let (s, d, op) = (self.stride, self.dilation, self.output_padding);
        if s.0 == 0 || s.1 == 0 || d.0 == 0 || d.1 == 0 || k.0 == 0 || k.1 == 0 {
            return Err(format!(
                "strides {s:?}, dilations {d:?} and kernel {k:?} must be positive"
            ));
        }
        if op.0 >= s.0.max(d.0) || op.1 >= s.1.max(d.1) {
            return Err(format!(
                "output_padding {op:?} must be smaller than the stride or the dilation"
            ));
        }
        // The full (uncropped) output length of one axis.
        let full = |i: usize, s: usize, k: usize, d: usize, op: usize| -> Result<usize, String> {
            (i - 1)
                .checked_mul(s)
                .and_then(|v| v.checked_add((k - 1).checked_mul(d)?))
                .and_then(|v| v.checked_add(1 + op))
                .ok_or_else(|| "the output size overflows".to_string())
        };
        let fh = full(hw.0, s.0, k.0, d.0, op.0)?;
        let fw = full(hw.1, s.1, k.1, d.1, op.1)?;
        let split = |total: usize| -> (usize, usize) {
            if self.auto_pad == AutoPad::SameUpper {
                (total / 2, total - total / 2)
            } else {
                (total - total / 2, total / 2)
            }
        };
        let from_out = |full: usize, out: usize, what: &str| -> Result<(usize, usize), String> {
            full.checked_sub(out).map(split).ok_or_else(|| {
                format!("{what} of {out} exceeds the transposed convolution's full size {full}")
            })
        };
        // ONNX splits `full - output_shape` with floor division, so an output_shape one cell
        // beyond the full size is a pad of -1 at the end alone (not with SAME_UPPER): one more
        // cell that only the bias reaches, which is what output_padding gives.
        let from_shape = |full: usize, out: usize, what: &str| {
            if out == full + 1 && self.auto_pad != AutoPad::SameUpper {
                Ok((0, 0, 1))
            } else {
                from_out(full, out, what)
                    .map(|(a, b)| (a, b, 0))
                    .map_err(|e| {
                        format!(
                            "{e} (ONNX's pads would be negative at the start); give pads and \
                             output_padding instead of output_shape"
                        )
                    })
            }
        };
        let (mut op, mut fh, mut fw) = (op, fh, fw);
        let pad = match (self.output_shape, self.auto_pad) {
            (Some((oh, ow)), _) => {
                let (t, b, eh) = from_shape(fh, oh, "output height")?;
                let (l, r, ew) = from_shape(fw, ow, "output width")?;
                (op, fh, fw) = ((op.0 + eh, op.1 + ew), fh + eh, fw + ew);
                [t, l, b, r]
            }
            (None, AutoPad::SameUpper | AutoPad::SameLower) => {
                let (t, b) = from_out(fh, hw.0 * s.0, "output height")?;
                let (l, r) = from_out(fw, hw.1 * s.1, "output width")?;
                [t, l, b, r]
            }
            (None, AutoPad::Valid) => [0; 4],
            (None, AutoPad::NotSet) => self.pads,
        };
        let oh = fh.checked_sub(pad[0] + pad[2]).filter(|&v| v > 0);
        let ow = fw.checked_sub(pad[1] + pad[3]).filter(|&v| v > 0);
        let (Some(oh), Some(ow)) = (oh, ow) else {
            return Err(format!(
                "pads {pad:?} leave no output of the {fh}x{fw} transposed convolution"
            ));
        };
        Ok(TransposeGeometry {
            kernel: k,
            stride: s,
            dilation: d,
            pad,
            output_padding: op,
            out: (oh, ow),
        })
    }

    fn check(&self, x: &Fact, w: &Fact) -> Result<(TransposeGeometry, usize), String> {
        let (_, c, h, wd) = dims4(&x.shape, "input X")?;
        let (ci, og, kh, kw) = dims4(&w.shape, "weight W")?;
        if ci != c || self.group == 0 || c % self.group != 0 {
            return Err(format!(
                "input channels {c}, weight {:?} and group {} do not agree (the weight is \
                 [C_in, C_out / group, kH, kW])",
                w.shape, self.group
            ));
        }
        Ok((self.resolve((h, wd), (kh, kw))?, og * self.group))
    }
}

impl Op for ConvTranspose {
    fn op_type(&self) -> &'static str {
        "ConvTranspose"
    }

    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String> {
        let x = in_fact(inputs, 0, "X")?;
        let w = in_fact(inputs, 1, "W")?;
        if x.dtype != DType::F32 || w.dtype != DType::F32 {
            return Err(format!(
                "ConvTranspose computes in float; got {} input and {} weight",
                x.dtype, w.dtype
            ));
        }
        let (geo, o) = self.check(x, w)?;
        if let Some(b) = inputs.get(2).copied().flatten() {
            if b.fact.shape != [o] {
                return Err(format!("bias shape {:?} should be [{o}]", b.fact.shape));
            }
        }
        Ok(vec![Fact::new(
            DType::F32,
            [x.shape[0], o, geo.out.0, geo.out.1],
        )])
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
        let (geo, o) = self.check(
            &Fact::new(DType::F32, x.shape()),
            &Fact::new(DType::F32, w.shape()),
        )?;
        let (n, c, h, wd) = dims4(x.shape(), "input")?;
        let (_, og, kh, kw) = dims4(w.shape(), "weight")?;
        let cg = c / self.group;
        let (oh, ow) = geo.out;
        let x = x.as_standard_layout();
        let w = w.as_standard_layout();
        let xs = x.as_slice().expect("standard layout");
        let ws = w.as_slice().expect("standard layout");
        let mut y = vec![0f32; n * o * oh * ow];
        if let Some(b) = b {
            for (k, v) in y.iter_mut().enumerate() {
                *v = b[[(k / (oh * ow)) % o]];
            }
        }
        for bi in 0..n {
            for ic in 0..c {
                let g = ic / cg;
                for iy in 0..h {
                    for ix in 0..wd {
                        let xv = xs[((bi * c + ic) * h + iy) * wd + ix];
                        for ol in 0..og {
                            let oc = g * og + ol;
                            for ky in 0..kh {
                                let Some(oy) = (iy * geo.stride.0 + ky * geo.dilation.0)
                                    .checked_sub(geo.pad[0])
                                    .filter(|&v| v < oh)
                                else {
                                    continue;
                                };
                                for kx in 0..kw {
                                    let Some(ox) = (ix * geo.stride.1 + kx * geo.dilation.1)
                                        .checked_sub(geo.pad[1])
                                        .filter(|&v| v < ow)
                                    else {
                                        continue;
                                    };
                                    let wv = ws[((ic * og + ol) * kh + ky) * kw + kx];
                                    y[((bi * o + oc) * oh + oy) * ow + ox] += xv * wv;
                                }
                            }
                        }
                    }
                }
            }
        }
        if let Some(a) = self.activation {
            y.iter_mut().for_each(|v| *v = a.apply(*v));
        }
        Ok(vec![Tensor::F32(
            ArrayD::from_shape_vec(IxDyn(&[n, o, oh, ow]), y).expect("sized"),
        )])
    }

    fn summary(&self) -> String {
        let mut s = format!("stride {:?}", self.stride);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn op(output_shape: (usize, usize), auto_pad: AutoPad) -> ConvTranspose {
        ConvTranspose {
            kernel: None,
            stride: (3, 2),
            dilation: (1, 1),
            group: 1,
            pads: [0; 4],
            auto_pad,
            output_padding: (0, 0),
            output_shape: Some(output_shape),
            activation: None,
        }
    }

    #[test]
    fn an_output_shape_one_beyond_the_full_size_pads_the_end() {
        // ONNX's convtranspose_output_shape: 3x3 input, 3x3 kernel, strides 3 and 2: the full
        // output is 9x7, and [10, 8] is one more cell at the end of each axis.
        let g = op((10, 8), AutoPad::NotSet)
            .resolve((3, 3), (3, 3))
            .unwrap();
        assert_eq!((g.out, g.pad, g.output_padding), ((10, 8), [0; 4], (1, 1)));
        let e = op((10, 8), AutoPad::SameUpper).resolve((3, 3), (3, 3));
        assert!(e.unwrap_err().contains("negative at the start"));
        assert!(op((11, 7), AutoPad::NotSet)
            .resolve((3, 3), (3, 3))
            .is_err());
    }
}
