//! The convolution as a matrix product: the input unrolled into columns (im2col), one column
//! per output pixel, in panels small enough to stay in cache, multiplied by the weights
//! (packed [`ROWS`] output channels at a time) in register tiles of [`ROWS`] channels by
//! [`COLS`] pixels.
//!
//! Every output is summed in exactly the order of the direct convolution (the bias, then the
//! products in input channel, kernel row, kernel column order, one at a time): the tiles
//! vectorize across pixels, never along a sum. Float results are therefore the same bit for
//! bit as the direct loop's, on every CPU (no fused multiply-adds, no reassociation), and the
//! calibration scales taken from them do not change. On x86-64 CPUs with AVX2 the tile loop
//! is compiled for 256-bit vectors too, and chosen at run time.

use super::{Geometry, Num};

/// Output channels of a register tile.
const ROWS: usize = 4;
/// Output pixels of a register tile (two 256-bit vectors of f32 or i32 per channel).
const COLS: usize = 16;
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
    conv_image_with(tile_kernel(), s, geo, x, w, bias, pad_value, out);
}

/// A register tile's loop: adds `panel`'s products with `wrows` to `acc`.
type TileFn<T> = unsafe fn(wrows: &[T], panel: &[T], acc: &mut [[T; COLS]; ROWS]);

/// The tile loop for this CPU: compiled for AVX2 where the CPU has it, else for the
/// target's baseline.
fn tile_kernel<T: Num>() -> TileFn<T> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        return tile_avx2::<T>;
    }
    tile_any::<T>
}

/// [`conv_image`] with the tile loop given.
#[allow(clippy::too_many_arguments)]
fn conv_image_with<T: Num>(
    kernel: TileFn<T>,
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
    if pixels == 0 {
        return;
    }
    // Panel width: whole tiles, at least one, at most all pixels.
    let panel = (PANEL_ELEMS / k.max(1)).max(COLS) / COLS * COLS;
    let panel = panel.min(pixels.next_multiple_of(COLS));
    let mut col = vec![T::default(); k * panel];
    let mut at = vec![(0isize, 0isize); panel];
    let blocks = og.div_ceil(ROWS);
    let wpack = pack_weights(w, s.groups, og, k);
    for g in 0..s.groups {
        let xg = &x[g * s.cg * s.h * s.w..][..s.cg * s.h * s.w];
        for p0 in (0..pixels).step_by(panel) {
            let np = panel.min(pixels - p0);
            let tiles = np.div_ceil(COLS);
            pack_columns(
                s,
                geo,
                xg,
                pad_value,
                p0,
                np,
                &mut at,
                &mut col[..tiles * k * COLS],
            );
            for b in 0..blocks {
                let oc = g * og + b * ROWS;
                let rows = ROWS.min((g + 1) * og - oc);
                let wrows = &wpack[(g * blocks + b) * ROWS * k..][..ROWS * k];
                for t in 0..tiles {
                    let mut acc = [[T::default(); COLS]; ROWS];
                    if let Some(bias) = bias {
                        for (r, a) in acc.iter_mut().enumerate().take(rows) {
                            *a = [bias[oc + r]; COLS];
                        }
                    }
                    // SAFETY: `tile_kernel` chose a loop this CPU can run.
                    unsafe { kernel(wrows, &col[t * k * COLS..][..k * COLS], &mut acc) };
                    let cols = COLS.min(np - t * COLS);
                    for (r, a) in acc.iter().enumerate().take(rows) {
                        out[(oc + r) * pixels + p0 + t * COLS..][..cols]
                            .copy_from_slice(&a[..cols]);
                    }
                }
            }
        }
    }
}

/// The weights [O, k] of each group's `og` channels as blocks of [`ROWS`] channels, each
/// `[kk][r]` (zero rows pad a group's last block), so that a tile reads one contiguous group
/// of weights per reduction index.
fn pack_weights<T: Num>(w: &[T], groups: usize, og: usize, k: usize) -> Vec<T> {
    let blocks = og.div_ceil(ROWS);
    let mut p = vec![T::default(); groups * blocks * ROWS * k];
    for (gb, block) in p.chunks_exact_mut(ROWS * k).enumerate() {
        let (g, b) = (gb / blocks, gb % blocks);
        for r in 0..ROWS.min(og - b * ROWS) {
            let row = &w[(g * og + b * ROWS + r) * k..][..k];
            for (kk, &v) in row.iter().enumerate() {
                block[kk * ROWS + r] = v;
            }
        }
    }
    p
}

/// Unrolls pixels `p0..p0 + np` into `col` as tiles of [`COLS`] pixels: tile t holds, for
/// each reduction index (input channel, kernel row, kernel column), its [`COLS`] pixels'
/// inputs next to each other. Cells outside the input, and the pixels past `np` in the last
/// tile, read `pad_value`. `at` is scratch for each pixel's window origin (row, column).
#[allow(clippy::too_many_arguments)]
fn pack_columns<T: Num>(
    s: &ConvShape,
    geo: &Geometry,
    x: &[T],
    pad_value: T,
    p0: usize,
    np: usize,
    at: &mut [(isize, isize)],
    col: &mut [T],
) {
    let (kh, kw) = geo.kernel;
    let k = s.cg * kh * kw;
    if k == 0 {
        return;
    }
    let ow = geo.out.1;
    let (h, wd) = (s.h as isize, s.w as isize);
    for (q, a) in at.iter_mut().enumerate() {
        let (y, xo) = ((p0 + q) / ow, (p0 + q) % ow);
        *a = if q < np {
            (
                (y * geo.stride.0) as isize - geo.pad[0] as isize,
                (xo * geo.stride.1) as isize - geo.pad[1] as isize,
            )
        } else {
            // Past the last pixel: a window far outside the input, all padding.
            (isize::MIN / 2, 0)
        };
    }
    for (t, tile) in col.chunks_exact_mut(k * COLS).enumerate() {
        let first = t * COLS;
        let mut kk = 0;
        for ic in 0..s.cg {
            let plane = &x[ic * s.h * s.w..][..s.h * s.w];
            for ky in 0..kh {
                let dy = (ky * geo.dilation.0) as isize;
                for kx in 0..kw {
                    let dx = (kx * geo.dilation.1) as isize;
                    let lanes = &mut tile[kk * COLS..][..COLS];
                    for (lane, &(y0, x0)) in lanes.iter_mut().zip(&at[first..first + COLS]) {
                        let (iy, ix) = (y0 + dy, x0 + dx);
                        *lane = if (0..h).contains(&iy) && (0..wd).contains(&ix) {
                            plane[(iy * wd + ix) as usize]
                        } else {
                            pad_value
                        };
                    }
                    kk += 1;
                }
            }
        }
    }
}

/// Adds to each of `acc`'s [`ROWS`] x [`COLS`] sums (a channel's, a pixel's) the products of
/// reduction index 0, 1, ..., k - 1 in turn: `panel` holds [`COLS`] inputs per index, `wrows`
/// [`ROWS`] weights per index. The tile loop is its own function, compiled once per target,
/// so that it vectorizes across the tile's sums.
#[inline(always)]
fn tile_body<T: Num>(wrows: &[T], panel: &[T], acc: &mut [[T; COLS]; ROWS]) {
    for (c, wv) in panel.chunks_exact(COLS).zip(wrows.chunks_exact(ROWS)) {
        let c: &[T; COLS] = c.try_into().expect("COLS lanes");
        let wv: &[T; ROWS] = wv.try_into().expect("ROWS lanes");
        for (a, &wr) in acc.iter_mut().zip(wv) {
            for (aj, &cj) in a.iter_mut().zip(c) {
                *aj = T::mul_add(*aj, cj, wr);
            }
        }
    }
}

/// [`tile_body`] for the target's baseline.
///
/// # Safety
/// None beyond a [`TileFn`]'s (it is `unsafe` to share the type of [`tile_avx2`]).
#[inline(never)]
unsafe fn tile_any<T: Num>(wrows: &[T], panel: &[T], acc: &mut [[T; COLS]; ROWS]) {
    tile_body(wrows, panel, acc);
}

/// [`tile_body`] compiled for AVX2: the same operations in the same order on 256-bit
/// vectors (no FMA is enabled, and Rust never contracts a multiply and an add).
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline(never)]
unsafe fn tile_avx2<T: Num>(wrows: &[T], panel: &[T], acc: &mut [[T; COLS]; ROWS]) {
    tile_body(wrows, panel, acc);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::kernels::{PadSpec, Window};

    /// The run-time-chosen tile loop (AVX2 where the CPU has it) equals the baseline one bit
    /// for bit (the direct loop is the reference of both: `kernels::tests`).
    #[test]
    fn dispatched_build_equals_the_portable_one() {
        let mut rng = isa::rng::Rng::new(9);
        let (c, h, w, o) = (5, 11, 13, 7);
        let win = Window {
            kernel: Some((3, 3)),
            stride: (2, 1),
            dilation: (1, 2),
            pad: PadSpec::Explicit([1, 2, 1, 0]),
            ceil_mode: false,
        };
        let geo = win.resolve((h, w), (3, 3)).unwrap();
        let mut f = |n: usize| -> Vec<f32> {
            (0..n)
                .map(|_| rng.range(-1_000_000i64, 1_000_000) as f32 * 1.37e-5)
                .collect()
        };
        let (x, wt, b) = (f(c * h * w), f(o * c * 9), f(o));
        let s = ConvShape {
            h,
            w,
            o,
            cg: c,
            groups: 1,
        };
        let n = o * geo.out.0 * geo.out.1;
        let (mut got, mut want) = (vec![0f32; n], vec![0f32; n]);
        conv_image(&s, &geo, &x, &wt, Some(&b), 0.0, &mut got);
        conv_image_with(tile_any, &s, &geo, &x, &wt, Some(&b), 0.0, &mut want);
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want));
    }
}
