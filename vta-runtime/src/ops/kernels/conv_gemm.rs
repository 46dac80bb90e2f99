//! The convolution as a matrix product: the input unrolled into columns (im2col), one column
//! per output pixel, in panels small enough to stay in cache, multiplied by the weight rows
//! in register tiles of [`ROWS`] output channels by [`COLS`] pixels.
//!
//! Every output is summed in exactly the order of the direct convolution (the bias, then the
//! products in input channel, kernel row, kernel column order, one at a time): the tiles
//! vectorize across pixels and channels, never along a sum. Float results are therefore the
//! same bit for bit as the direct loop's, on every CPU (no fused multiply-adds, no
//! reassociation), and the calibration scales taken from them do not change.

use super::{Geometry, Num};

/// Output channels of a register tile.
const ROWS: usize = 4;
/// Output pixels of a register tile (one 256-bit or two 128-bit vectors of f32).
const COLS: usize = 8;
/// Target size of a column panel in elements (the panel is re-read by every tile row).
const PANEL_ELEMS: usize = 32 * 1024;

/// The shapes of one convolution.
pub(super) struct ConvShape {
    /// Input height and width.
    pub h: usize,
    pub w: usize,
    /// Output channels, input channels per group, groups.
    pub o: usize,
    pub cg: usize,
    pub groups: usize,
}

/// `out` [O, OH*OW] of one image `x` [C, H, W] with weights `w` [O, CG*KH*KW]; `out` is
/// overwritten.
pub(super) fn conv_image<T: Num>(
    s: &ConvShape,
    geo: &Geometry,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    pad_value: T,
    out: &mut [T],
) {
    let (kh, kw) = geo.kernel;
    let k = s.cg * kh * kw;
    let pixels = geo.out.0 * geo.out.1;
    let og = s.o / s.groups;
    // Panel width: whole tiles, at least one, at most all pixels.
    let panel = (PANEL_ELEMS / k.max(1)).max(COLS) / COLS * COLS;
    let panel = panel.min(pixels.next_multiple_of(COLS));
    let mut col = vec![T::default(); k * panel];
    for g in 0..s.groups {
        let xg = &x[g * s.cg * s.h * s.w..][..s.cg * s.h * s.w];
        for p0 in (0..pixels).step_by(panel) {
            let np = panel.min(pixels - p0);
            let tiles = np.div_ceil(COLS);
            pack_columns(s, geo, xg, pad_value, p0, np, &mut col[..tiles * k * COLS]);
            let mut oc = g * og;
            while oc < (g + 1) * og {
                let rows = ROWS.min((g + 1) * og - oc);
                for t in 0..tiles {
                    let panel_tile = &col[t * k * COLS..][..k * COLS];
                    let cols = COLS.min(np - t * COLS);
                    let at = p0 + t * COLS;
                    if rows == ROWS {
                        tile::<T, ROWS>(w, bias, k, oc, panel_tile, out, pixels, at, cols);
                    } else {
                        for r in 0..rows {
                            tile::<T, 1>(w, bias, k, oc + r, panel_tile, out, pixels, at, cols);
                        }
                    }
                }
                oc += rows;
            }
        }
    }
}

/// Unrolls pixels `p0..p0 + np` into `col` as tiles of [`COLS`] pixels: tile t holds, for
/// each reduction index (input channel, kernel row, kernel column), its [`COLS`] pixels'
/// inputs next to each other. Cells outside the input, and the pixels past `np` in the last
/// tile, read `pad_value`.
fn pack_columns<T: Num>(
    s: &ConvShape,
    geo: &Geometry,
    x: &[T],
    pad_value: T,
    p0: usize,
    np: usize,
    col: &mut [T],
) {
    let (kh, kw) = geo.kernel;
    let k = s.cg * kh * kw;
    let ow = geo.out.1;
    if k == 0 {
        return;
    }
    for (t, tile) in col.chunks_exact_mut(k * COLS).enumerate() {
        for j in 0..COLS {
            let q = t * COLS + j;
            if q >= np {
                for kk in 0..k {
                    tile[kk * COLS + j] = pad_value;
                }
                continue;
            }
            let (y, xo) = ((p0 + q) / ow, (p0 + q) % ow);
            let mut kk = 0;
            for ic in 0..s.cg {
                let plane = &x[ic * s.h * s.w..][..s.h * s.w];
                for ky in 0..kh {
                    let iy = (y * geo.stride.0 + ky * geo.dilation.0).wrapping_sub(geo.pad[0]);
                    for kx in 0..kw {
                        let ix = (xo * geo.stride.1 + kx * geo.dilation.1).wrapping_sub(geo.pad[1]);
                        // Coordinates above the pad wrap to huge values: outside too.
                        tile[kk * COLS + j] = if iy < s.h && ix < s.w {
                            plane[iy * s.w + ix]
                        } else {
                            pad_value
                        };
                        kk += 1;
                    }
                }
            }
        }
    }
}

/// Output channels `oc..oc + R`, pixels `at..at + cols` (`cols <= COLS`): each starts at its
/// bias and adds the products of reduction index 0, 1, ..., k - 1 in turn.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn tile<T: Num, const R: usize>(
    w: &[T],
    bias: Option<&[T]>,
    k: usize,
    oc: usize,
    panel_tile: &[T],
    out: &mut [T],
    pixels: usize,
    at: usize,
    cols: usize,
) {
    let rows: [&[T]; R] = std::array::from_fn(|r| &w[(oc + r) * k..][..k]);
    let mut acc = [[T::default(); COLS]; R];
    for (r, a) in acc.iter_mut().enumerate() {
        *a = [bias.map_or(T::default(), |b| b[oc + r]); COLS];
    }
    for (kk, c) in panel_tile.chunks_exact(COLS).enumerate() {
        let c: &[T; COLS] = c.try_into().expect("COLS lanes");
        for r in 0..R {
            let wv = rows[r][kk];
            for j in 0..COLS {
                acc[r][j] = T::mul_add(acc[r][j], c[j], wv);
            }
        }
    }
    for (r, a) in acc.iter().enumerate() {
        out[(oc + r) * pixels + at..][..cols].copy_from_slice(&a[..cols]);
    }
}
