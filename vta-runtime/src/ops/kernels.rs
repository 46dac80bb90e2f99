//! Shared pieces of the op implementations: 2-D window geometry (padding, `auto_pad`,
//! `ceil_mode`), a convolution (a matrix product over unrolled inputs, [`conv_gemm`]) and a
//! batched matrix product generic over f32 and wrapping i32, and numpy-style broadcasting.

use ndarray::{ArrayD, ArrayViewD, IxDyn};

mod conv_gemm;

/// Arithmetic of the generic kernels: f32, or i32 with wrap-around (ONNX leaves int32
/// overflow undefined; wrapping is what the accelerator does).
pub trait Num: Copy + Default + PartialEq + std::fmt::Debug + 'static {
    fn mul_add(acc: Self, a: Self, b: Self) -> Self;
}

impl Num for f32 {
    #[inline(always)]
    fn mul_add(acc: f32, a: f32, b: f32) -> f32 {
        acc + a * b
    }
}

impl Num for i32 {
    #[inline(always)]
    fn mul_add(acc: i32, a: i32, b: i32) -> i32 {
        acc.wrapping_add(a.wrapping_mul(b))
    }
}

/// How the padding of a 2-D window op is given.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub enum PadSpec {
    /// `pads` = [top, left, bottom, right].
    Explicit([usize; 4]),
    Valid,
    SameUpper,
    SameLower,
}

/// Window attributes shared by Conv, ConvInteger, QLinearConv, MaxPool and AveragePool.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// (height, width); `None` when taken from the weight shape (Conv without kernel_shape).
    pub kernel: Option<(usize, usize)>,
    pub stride: (usize, usize),
    pub dilation: (usize, usize),
    pub pad: PadSpec,
    pub ceil_mode: bool,
}

/// A window resolved against an input size.
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub kernel: (usize, usize),
    pub stride: (usize, usize),
    pub dilation: (usize, usize),
    /// [top, left, bottom, right].
    pub pad: [usize; 4],
    pub out: (usize, usize),
}

impl Window {
    /// Resolves padding and output size for an input of `hw`, with the kernel given when the
    /// window has none.
    pub fn resolve(&self, hw: (usize, usize), kernel: (usize, usize)) -> Result<Geometry, String> {
        let kernel = self.kernel.unwrap_or(kernel);
        if kernel.0 == 0 || kernel.1 == 0 {
            return Err(format!("empty kernel {kernel:?}"));
        }
        // A window read from a compiled model was never checked by the ONNX parser.
        if self.stride.0 == 0 || self.stride.1 == 0 {
            return Err(format!(
                "stride {:?}: strides must be at least 1",
                self.stride
            ));
        }
        if self.dilation.0 == 0 || self.dilation.1 == 0 {
            return Err(format!(
                "dilation {:?}: dilations must be at least 1",
                self.dilation
            ));
        }
        let ext = |k: usize, d: usize| {
            (k - 1)
                .checked_mul(d)
                .and_then(|x| x.checked_add(1))
                .ok_or_else(|| format!("kernel {k} with dilation {d} is too large"))
        };
        let (eh, ew) = (
            ext(kernel.0, self.dilation.0)?,
            ext(kernel.1, self.dilation.1)?,
        );
        let same = |i: usize, s: usize, e: usize| -> usize {
            let o = i.div_ceil(s);
            ((o.max(1) - 1) * s).saturating_add(e).saturating_sub(i)
        };
        let pad = match self.pad {
            PadSpec::Explicit(p) => p,
            PadSpec::Valid => [0; 4],
            PadSpec::SameUpper | PadSpec::SameLower => {
                let th = same(hw.0, self.stride.0, eh);
                let tw = same(hw.1, self.stride.1, ew);
                if self.pad == PadSpec::SameUpper {
                    [th / 2, tw / 2, th - th / 2, tw - tw / 2]
                } else {
                    [th - th / 2, tw - tw / 2, th / 2, tw / 2]
                }
            }
        };
        let out = |i: usize, p0: usize, p1: usize, e: usize, s: usize| -> Result<usize, String> {
            let span = i
                .checked_add(p0)
                .and_then(|x| x.checked_add(p1))
                .ok_or_else(|| format!("padding {p0}+{p1} of input size {i} is too large"))?;
            if span < e {
                return Err(format!(
                    "window of extent {e} does not fit input size {i} with padding {p0}+{p1}"
                ));
            }
            let mut o = if self.ceil_mode {
                (span - e).div_ceil(s) + 1
            } else {
                (span - e) / s + 1
            };
            // A window may not start in the end padding (ceil_mode rule of ONNX/PyTorch).
            if self.ceil_mode && (o - 1) * s >= i + p0 {
                o -= 1;
            }
            Ok(o)
        };
        let oh = out(hw.0, pad[0], pad[2], eh, self.stride.0)?;
        let ow = out(hw.1, pad[1], pad[3], ew, self.stride.1)?;
        Ok(Geometry {
            kernel,
            stride: self.stride,
            dilation: self.dilation,
            pad,
            out: (oh, ow),
        })
    }

    pub fn summary(&self) -> String {
        let mut s = format!("stride {:?}", self.stride);
        if self.dilation != (1, 1) {
            s += &format!(" dilation {:?}", self.dilation);
        }
        match self.pad {
            PadSpec::Explicit(p) if p != [0; 4] => s += &format!(" pads {p:?}"),
            PadSpec::Explicit(_) => {}
            ref p => s += &format!(" {p:?}"),
        }
        s
    }
}

/// 2-D convolution: `x` [N, C, H, W], `w` [O, C/groups, KH, KW], optional bias [O], cells
/// outside the input read as `pad_value`. Computed as a matrix product over unrolled input
/// columns ([`conv_gemm`]), each output summed in the order of the direct loop (bias, then
/// input channel, kernel row, kernel column), so float results do not depend on the CPU.
pub fn conv2d<T: Num>(
    x: &ArrayViewD<T>,
    w: &ArrayViewD<T>,
    bias: Option<&[T]>,
    geo: &Geometry,
    groups: usize,
    pad_value: T,
) -> Result<ArrayD<T>, String> {
    let (n, c, h, wd) = dims4(x.shape(), "input")?;
    let (o, cg, kh, kw) = dims4(w.shape(), "weight")?;
    if groups == 0 || c != cg * groups || o % groups != 0 {
        return Err(format!(
            "input channels {c}, weight {:?} and group {groups} do not agree",
            w.shape()
        ));
    }
    if (kh, kw) != geo.kernel {
        return Err(format!(
            "weight kernel {kh}x{kw} differs from kernel_shape {:?}",
            geo.kernel
        ));
    }
    let (oh, ow) = geo.out;
    let x = x.as_standard_layout();
    let w = w.as_standard_layout();
    let xs = x.as_slice().expect("standard layout");
    let ws = w.as_slice().expect("standard layout");
    let mut out = vec![T::default(); n * o * oh * ow];
    let shape = conv_gemm::ConvShape {
        h,
        w: wd,
        o,
        cg,
        groups,
    };
    let (image, plane) = (c * h * wd, o * oh * ow);
    for b in 0..n {
        let ob = &mut out[b * plane..][..plane];
        conv_gemm::conv_image(
            &shape,
            geo,
            &xs[b * image..][..image],
            ws,
            bias,
            pad_value,
            ob,
        );
    }
    Ok(ArrayD::from_shape_vec(IxDyn(&[n, o, oh, ow]), out).expect("sized"))
}

/// The four dimensions of a 4-D shape.
pub fn dims4(s: &[usize], what: &str) -> Result<(usize, usize, usize, usize), String> {
    match s {
        [a, b, c, d] => Ok((*a, *b, *c, *d)),
        _ => Err(format!("{what} must be 4-D (NCHW), got shape {s:?}")),
    }
}

/// Output shape of numpy-style (multidirectional) broadcasting.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    let r = a.len().max(b.len());
    let mut out = vec![0; r];
    for i in 0..r {
        let da = if i + a.len() >= r {
            a[i + a.len() - r]
        } else {
            1
        };
        let db = if i + b.len() >= r {
            b[i + b.len() - r]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(format!("shapes {a:?} and {b:?} do not broadcast"));
        };
    }
    Ok(out)
}

/// Output shape of numpy `matmul` of `a` and `b`.
pub fn matmul_shape(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    if a.is_empty() || b.is_empty() {
        return Err("MatMul operands must have rank >= 1".into());
    }
    let a2: Vec<usize> = if a.len() == 1 {
        vec![1, a[0]]
    } else {
        a.to_vec()
    };
    let b2: Vec<usize> = if b.len() == 1 {
        vec![b[0], 1]
    } else {
        b.to_vec()
    };
    let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
    let (k2, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
    if k != k2 {
        return Err(format!("MatMul inner dimensions differ: {a:?} x {b:?}"));
    }
    let mut out = broadcast_shapes(&a2[..a2.len() - 2], &b2[..b2.len() - 2])?;
    if a.len() > 1 {
        out.push(m);
    }
    if b.len() > 1 {
        out.push(n);
    }
    Ok(out)
}

/// numpy `matmul` (batch dimensions broadcast) over f32 or wrapping i32.
pub fn matmul<T: Num>(a: &ArrayViewD<T>, b: &ArrayViewD<T>) -> Result<ArrayD<T>, String> {
    let out_shape = matmul_shape(a.shape(), b.shape())?;
    let a2 = if a.ndim() == 1 {
        a.view()
            .into_shape_with_order(IxDyn(&[1, a.len()]))
            .map_err(|e| e.to_string())?
    } else {
        a.view()
    };
    let b2 = if b.ndim() == 1 {
        b.view()
            .into_shape_with_order(IxDyn(&[b.len(), 1]))
            .map_err(|e| e.to_string())?
    } else {
        b.view()
    };
    let (m, k) = (a2.shape()[a2.ndim() - 2], a2.shape()[a2.ndim() - 1]);
    let n = b2.shape()[b2.ndim() - 1];
    let batch = broadcast_shapes(&a2.shape()[..a2.ndim() - 2], &b2.shape()[..b2.ndim() - 2])?;
    let mut sa = batch.clone();
    sa.extend([m, k]);
    let mut sb = batch.clone();
    sb.extend([k, n]);
    let ab = a2
        .broadcast(IxDyn(&sa))
        .ok_or("MatMul: cannot broadcast a")?;
    let bb = b2
        .broadcast(IxDyn(&sb))
        .ok_or("MatMul: cannot broadcast b")?;
    let ab = ab.as_standard_layout();
    let bb = bb.as_standard_layout();
    let av = ab.as_slice().expect("standard");
    let bv = bb.as_slice().expect("standard");
    let nb: usize = batch.iter().product();
    let mut out = vec![T::default(); nb * m * n];
    for p in 0..nb {
        for i in 0..m {
            for j in 0..n {
                let mut acc = T::default();
                for q in 0..k {
                    acc = T::mul_add(acc, av[(p * m + i) * k + q], bv[(p * k + q) * n + j]);
                }
                out[(p * m + i) * n + j] = acc;
            }
        }
    }
    ArrayD::from_shape_vec(IxDyn(&out_shape), out).map_err(|e| e.to_string())
}

/// Round half to even (numpy `rint`, C `nearbyint` in the default rounding mode).
pub fn round_half_even(v: f32) -> f32 {
    v.round_ties_even()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_with_zero_strides_or_dilations_or_overflowing_sizes_are_errors() {
        // Found by fuzzing the compiled-model loader: a stride of 0 divided by zero.
        let w = |stride, dilation, pad| Window {
            kernel: Some((3, 3)),
            stride,
            dilation,
            pad,
            ceil_mode: true,
        };
        let e = w((0, 1), (1, 1), PadSpec::Valid).resolve((8, 8), (3, 3));
        assert_eq!(e.unwrap_err(), "stride (0, 1): strides must be at least 1");
        let e = w((1, 1), (1, 0), PadSpec::SameUpper).resolve((8, 8), (3, 3));
        assert_eq!(
            e.unwrap_err(),
            "dilation (1, 0): dilations must be at least 1"
        );
        let e = w((1, 1), (usize::MAX, 1), PadSpec::Valid).resolve((8, 8), (3, 3));
        assert!(e.unwrap_err().contains("too large"));
        let huge = PadSpec::Explicit([usize::MAX, 0, 1, 0]);
        let e = w((1, 1), (1, 1), huge).resolve((8, 8), (3, 3));
        assert!(e.unwrap_err().contains("too large"));
        assert!(w((2, 2), (1, 1), PadSpec::SameLower)
            .resolve((8, 8), (3, 3))
            .is_ok());
    }

    /// The direct convolution loop `conv2d` replaced, as the reference it must equal bit for
    /// bit (same products, summed in the same order).
    fn conv2d_direct<T: Num>(
        x: &[T],
        xshape: [usize; 4],
        w: &[T],
        wshape: [usize; 4],
        bias: Option<&[T]>,
        geo: &Geometry,
        groups: usize,
        pad_value: T,
    ) -> Vec<T> {
        let [n, c, h, wd] = xshape;
        let [o, cg, kh, kw] = wshape;
        let (oh, ow) = geo.out;
        let og = o / groups;
        let mut out = vec![T::default(); n * o * oh * ow];
        for b in 0..n {
            for oc in 0..o {
                let g = oc / og;
                for y in 0..oh {
                    for xo in 0..ow {
                        let mut acc = bias.map_or(T::default(), |bv| bv[oc]);
                        for ic in 0..cg {
                            for ky in 0..kh {
                                let iy = (y * geo.stride.0 + ky * geo.dilation.0) as isize
                                    - geo.pad[0] as isize;
                                for kx in 0..kw {
                                    let ix = (xo * geo.stride.1 + kx * geo.dilation.1) as isize
                                        - geo.pad[1] as isize;
                                    let inside =
                                        iy >= 0 && ix >= 0 && iy < h as isize && ix < wd as isize;
                                    let xv = if inside {
                                        let xc = g * cg + ic;
                                        x[((b * c + xc) * h + iy as usize) * wd + ix as usize]
                                    } else {
                                        pad_value
                                    };
                                    acc = T::mul_add(
                                        acc,
                                        xv,
                                        w[((oc * cg + ic) * kh + ky) * kw + kx],
                                    );
                                }
                            }
                        }
                        out[((b * o + oc) * oh + y) * ow + xo] = acc;
                    }
                }
            }
        }
        out
    }

    /// `conv2d` equals the direct loop bit for bit in f32 (and in wrapping i32) over batches,
    /// groups, kernels, strides, dilations, paddings and channel counts that leave partial
    /// register tiles.
    #[test]
    fn conv2d_equals_the_direct_loop_bit_for_bit() {
        let mut rng = isa::rng::Rng::new(4);
        for case in 0..150 {
            let groups = [1, 1, 2, 3][rng.below(4) as usize];
            // The first cases reduce over enough products that the pixels take several
            // column panels.
            let cg = if case < 6 {
                40
            } else {
                1 + rng.below(5) as usize
            };
            let og = 1 + rng.below(7) as usize;
            let (n, c, o) = (1 + rng.below(2) as usize, cg * groups, og * groups);
            let (h, wd) = (1 + rng.below(12) as usize, 1 + rng.below(12) as usize);
            let (kh, kw) = (1 + rng.below(4) as usize, 1 + rng.below(4) as usize);
            let pads = std::array::from_fn(|_| rng.below(3) as usize);
            let win = Window {
                kernel: Some((kh, kw)),
                stride: (1 + rng.below(3) as usize, 1 + rng.below(2) as usize),
                dilation: (1 + rng.below(2) as usize, 1 + rng.below(2) as usize),
                pad: PadSpec::Explicit(pads),
                ceil_mode: false,
            };
            let Ok(geo) = win.resolve((h, wd), (kh, kw)) else {
                continue;
            };
            let mut f = |len: usize| -> Vec<f32> {
                (0..len)
                    .map(|_| (rng.range(-1_000_000i64, 1_000_000) as f32) * 1.37e-5)
                    .collect()
            };
            let (x, w, b) = (f(n * c * h * wd), f(o * cg * kh * kw), f(o));
            let bias = (case % 2 == 0).then_some(b.as_slice());
            let pad = if case % 3 == 0 { 0.25 } else { 0.0 };
            let xa = ArrayD::from_shape_vec(IxDyn(&[n, c, h, wd]), x.clone()).unwrap();
            let wa = ArrayD::from_shape_vec(IxDyn(&[o, cg, kh, kw]), w.clone()).unwrap();
            let got = conv2d(&xa.view(), &wa.view(), bias, &geo, groups, pad).unwrap();
            let want = conv2d_direct(
                &x,
                [n, c, h, wd],
                &w,
                [o, cg, kh, kw],
                bias,
                &geo,
                groups,
                pad,
            );
            let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(got.as_slice().unwrap()),
                bits(&want),
                "case {case}: {n}x{c}x{h}x{wd} * {o}x{cg}x{kh}x{kw}, groups {groups}, {geo:?}"
            );
            let xi: Vec<i32> = x.iter().map(|v| (v * 1e5) as i32).collect();
            let wi: Vec<i32> = w.iter().map(|v| (v * 1e5) as i32).collect();
            let xa = ArrayD::from_shape_vec(IxDyn(&[n, c, h, wd]), xi.clone()).unwrap();
            let wa = ArrayD::from_shape_vec(IxDyn(&[o, cg, kh, kw]), wi.clone()).unwrap();
            let got = conv2d(&xa.view(), &wa.view(), None, &geo, groups, 3).unwrap();
            let want = conv2d_direct(
                &xi,
                [n, c, h, wd],
                &wi,
                [o, cg, kh, kw],
                None,
                &geo,
                groups,
                3,
            );
            assert_eq!(
                got.as_slice().unwrap(),
                want.as_slice(),
                "case {case} (i32)"
            );
        }
    }

    #[test]
    fn rounding_is_half_to_even() {
        assert_eq!(round_half_even(0.5), 0.0);
        assert_eq!(round_half_even(1.5), 2.0);
        assert_eq!(round_half_even(2.5), 2.0);
        assert_eq!(round_half_even(-0.5), -0.0);
        assert_eq!(round_half_even(-1.5), -2.0);
        assert_eq!(round_half_even(1.4), 1.0);
        assert_eq!(round_half_even(-2.6), -3.0);
    }

    #[test]
    fn broadcasting() {
        assert_eq!(
            broadcast_shapes(&[1, 3, 4, 4], &[3, 1, 1]).unwrap(),
            vec![1, 3, 4, 4]
        );
        assert!(broadcast_shapes(&[2, 3], &[4]).is_err());
        assert_eq!(matmul_shape(&[2, 5, 3], &[3, 4]).unwrap(), vec![2, 5, 4]);
        assert_eq!(matmul_shape(&[3], &[3, 4]).unwrap(), vec![4]);
    }
}
