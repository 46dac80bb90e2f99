//! Folding a convolution's window into the input-channel axis, for convolutions over few
//! input channels (ResNet's first layer: an RGB image, 3 of 16 lanes used, so 81% of its
//! multiplies would be by padding lanes).
//!
//! A convolution reading a tensor the host uploads may take it in a folded layout
//! ([`WindowFold`], `vta_runtime::layout`): every INP element then holds a window of the input
//! (all its channels, ordered `(ky, kx, c)`), packed by the host, and the layer becomes an
//! equivalent convolution over the folded tensor with a smaller kernel:
//!
//! - [`Fold::Columns`]: each element holds a row of `KW` taps, windows `SW` columns apart, so
//!   the layer is a `KH x 1` convolution with stride `(SH, 1)` over
//!   `[N, KW * C, H, OW]` (same bytes as the plain layout when `KW * C <= BLOCK_IN`);
//! - [`Fold::Window`]: each element holds the whole `KH x KW` window (im2col), so the layer is
//!   a `1 x 1` convolution over `[N, KH * KW * C, OH, OW]`.
//!
//! GEMM micro-ops per output pixel and channel block: `KH * KW * ceil(C / BLOCK_IN)` plain,
//! `KH * ceil(KW * C / BLOCK_IN)` with columns folded, `ceil(KH * KW * C / BLOCK_IN)` with the
//! window folded (7x7 over 3 channels: 49, 14, 10). The equivalence is exact (the same
//! products summed in another order, in wrapping int32 arithmetic), so the layer stays
//! bit-exact with its reference; the back end picks the variant its cost model predicts
//! fastest.

use ndarray::Array4;
use vta_runtime::layout::WindowFold;

use crate::qlayer::QConv2d;

/// How much of the window is folded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fold {
    /// One row of the window per element.
    Columns,
    /// The whole window per element.
    Window,
}

impl Fold {
    pub const ALL: [Fold; 2] = [Fold::Columns, Fold::Window];
}

/// GEMM micro-ops per output pixel and output-channel block of `layer` with fold `f`
/// (`None`: unfolded), for input blocks of `block_in` channels.
pub fn taps(layer: &QConv2d, f: Option<Fold>, block_in: usize) -> usize {
    let &[_, c, kh, kw] = layer.weight.shape() else {
        return 0;
    };
    match f {
        None => kh * kw * c.div_ceil(block_in),
        Some(Fold::Columns) => kh * (kw * c).div_ceil(block_in),
        Some(Fold::Window) => (kh * kw * c).div_ceil(block_in),
    }
}

/// The folded layout of `layer`'s input and the equivalent convolution over it, or `None`
/// when fold `f` does not apply (grouped convolutions; a kernel without the columns or
/// window to fold).
pub fn fold(layer: &QConv2d, f: Fold) -> Option<(WindowFold, QConv2d)> {
    let [n, c, h, _] = layer.input_shape;
    let &[o, cg, kh, kw] = layer.weight.shape() else {
        return None;
    };
    if layer.groups != 1 || cg != c {
        return None;
    }
    let [_, _, oh, ow] = layer.output_shape();
    let (sh, sw) = layer.stride;
    let [pt, pl, pb, _] = layer.pad;
    let w = &layer.weight;
    let (window, input_shape, weight, stride, pad) = match f {
        Fold::Columns if kw > 1 => (
            WindowFold {
                kh: 1,
                kw,
                sh: 1,
                sw,
                pad_top: 0,
                pad_left: pl,
                rows: h,
                cols: ow,
            },
            [n, kw * c, h, ow],
            // virtual channel kx * C + ci
            Array4::from_shape_fn((o, kw * c, kh, 1), |(oc, v, ky, _)| {
                w[[oc, v % c, ky, v / c]]
            }),
            (sh, 1),
            [pt, 0, pb, 0],
        ),
        Fold::Window if kh * kw > 1 => (
            WindowFold {
                kh,
                kw,
                sh,
                sw,
                pad_top: pt,
                pad_left: pl,
                rows: oh,
                cols: ow,
            },
            [n, kh * kw * c, oh, ow],
            // virtual channel (ky * KW + kx) * C + ci
            Array4::from_shape_fn((o, kh * kw * c, 1, 1), |(oc, v, _, _)| {
                w[[oc, v % c, v / c / kw, v / c % kw]]
            }),
            (1, 1),
            [0; 4],
        ),
        _ => return None,
    };
    let folded = QConv2d {
        name: layer.name.clone(),
        input_shape,
        weight,
        bias: layer.bias.clone(),
        stride,
        pad,
        groups: 1,
        requant: layer.requant.clone(),
    };
    Some((window, folded))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qlayer::Requant;
    use isa::rng::Rng;
    use vta_runtime::layout::ActLayout;

    fn conv(c: usize, k: usize, stride: usize, pad: [usize; 4]) -> QConv2d {
        let mut rng = Rng::new(7);
        QConv2d {
            name: "c".into(),
            input_shape: [2, c, 11, 10],
            weight: Array4::from_shape_simple_fn((5, c, k, k), || rng.range(i8::MIN, i8::MAX)),
            bias: vec![3, -7, 0, 100, -1000],
            stride: (stride, stride),
            pad,
            groups: 1,
            requant: Requant {
                pre_shift: 2,
                acc_clamp: None,
                mul: vec![3],
                shift: 6,
                zero_point: 1,
                lo: -100,
                hi: 120,
            },
        }
    }

    /// The folded convolution over the host-packed folded tensor computes the layer.
    #[test]
    fn folded_convolutions_equal_the_layer() {
        let mut rng = Rng::new(3);
        for (c, k, s, pad) in [
            (3, 7, 2, [3, 3, 3, 3]),
            (3, 3, 1, [1, 1, 1, 1]),
            (2, 5, 3, [0, 2, 4, 1]),
        ] {
            let l = conv(c, k, s, pad);
            let x = Array4::from_shape_simple_fn((2, c, 11, 10), || rng.range(i8::MIN, i8::MAX));
            let want = l.reference(x.view());
            for f in Fold::ALL {
                let (window, folded) = fold(&l, f).expect("applies");
                let layout = ActLayout::new(l.input_shape, 1, 16).folded(window);
                assert_eq!(layout.packed_shape(), folded.input_shape);
                // the folded tensor as the plain layout of the folded shape
                let bytes = layout.pack(x.view()).unwrap();
                let plain = ActLayout::new(folded.input_shape, 1, 16);
                let xf = plain.unpack(&bytes);
                assert_eq!(folded.reference(xf.view()), want, "{f:?} {c} {k} {s}");
                assert_eq!(taps(&l, Some(f), 16), taps(&folded, None, 16));
            }
        }
    }

    #[test]
    fn grouped_and_pointwise_convolutions_do_not_fold() {
        let mut l = conv(4, 3, 1, [1; 4]);
        l.groups = 2;
        l.weight = Array4::zeros((4, 2, 3, 3));
        l.bias = vec![0; 4];
        assert!(fold(&l, Fold::Window).is_none());
        let l = conv(3, 1, 1, [0; 4]);
        assert!(Fold::ALL.iter().all(|&f| fold(&l, f).is_none()));
        assert_eq!(taps(&conv(3, 7, 2, [3; 4]), None, 16), 49);
        assert_eq!(taps(&conv(3, 7, 2, [3; 4]), Some(Fold::Columns), 16), 14);
        assert_eq!(taps(&conv(3, 7, 2, [3; 4]), Some(Fold::Window), 16), 10);
    }
}
