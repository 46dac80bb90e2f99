//! Layers that run on the ALU (max pooling with the GEMM core's help): residual add, max
//! pooling, global average pooling.
//!
//! Their int8 operands are read with ACC8 loads (sign-extended into ACC lanes) straight from
//! the packed activation layout (BLOCK_OUT lanes per element), and their results are stored
//! as int8 like a convolution's. Tiles are groups of channel planes (or row bands of one
//! plane) of one sample block, double-buffered over the two halves of ACC so that the STORE
//! of one tile overlaps the next. Max pooling, on configs whose INP rows hold activations as
//! they are (`BLOCK_IN == BLOCK_OUT`), loads its windows into INP with the load module
//! instead and has the GEMM core copy them into ACC ([`Ctx::copy_rows`]) while the ALU
//! pools the tile before: an ACC8 load would wait for the whole core to be idle.
//!
//! - **QAdd**: `a * mul_a` (MUL imm), `b * mul_b`, `a += b` (ADD tensor), then the requant
//!   epilogue.
//! - **QMaxPool**: LOAD pads are zeros while the reference's padding cells never win, so after
//!   the load every padding cell gets `ADD -128` (it is exactly 0, so it becomes -128, the
//!   smallest int8, which can only win where the reference also yields -128). The window
//!   maximum is separable: a horizontal pass (`MAX` over the KW taps, in place into each
//!   window's first column when `KW <= 2 * stride`, else into a row buffer started by a reset
//!   and an `ADD` copy of the first tap) and a vertical pass (`MAX` over the KH taps into the
//!   output rows, started the same way).
//! - **QGlobalAvgPool**: reset one row per plane, `ADD` every pixel into it (one micro-op in a
//!   loop whose destination step is 0: micro-ops run sequentially, so this is an exact sum),
//!   then the requant epilogue. A plane larger than half of ACC is loaded and summed in bands
//!   of rows into the same row.

use isa::builder::{Buf, Operand};
use isa::{AluOp, MemType};

use super::emit::{coalesce, Ctx, Dim, Dma, Pipeline};
use super::epilogue::{mul_by, EpSrc, Epilogue};
use super::layout::ActLayout;
use super::tiling::{splits, valid_span, MAX_DMA, MAX_ITER, MAX_PAD};
use super::BackendError;
use crate::qlayer::{QAdd, QGlobalAvgPool, QMaxPool};

/// A tile of `kp` consecutive channel planes of sample block `nb`, pixels `p0 .. p0 + len` of
/// each plane (or output rows, for pooling).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PlaneTile {
    pub nb: usize,
    pub cb0: usize,
    pub kp: usize,
    pub p0: usize,
    pub len: usize,
}

pub(super) fn plane_tiles(
    nb: usize,
    cb: usize,
    kp: usize,
    total: usize,
    len: usize,
) -> Vec<PlaneTile> {
    let mut v = Vec::new();
    for n in 0..nb {
        for (cb0, k) in splits(cb, kp) {
            for (p0, l) in splits(total, len) {
                v.push(PlaneTile {
                    nb: n,
                    cb0,
                    kp: k,
                    p0,
                    len: l,
                });
            }
        }
    }
    v
}

/// `rows x cols` input cells from row `r`, column `c` of a plane (negative: in the top or
/// left padding).
#[derive(Debug, Clone, Copy)]
pub(super) struct Window {
    pub r: isize,
    pub rows: usize,
    pub c: isize,
    pub cols: usize,
}

/// A half-open range (`start .. end`) of a window's rows or columns.
pub(super) type Span = (usize, usize);

/// Loads `win` of the channel blocks of `tile` from `input` (layout `il`) into `mem` (ACC8,
/// or INP for a copy into ACC by the GEMM core, [`Ctx::copy_rows`]), block `k` at
/// `sram + k * plane`, the cells outside the plane as zeros. Returns the window's rows and
/// columns inside the plane (`r0 .. r1`, `q0 .. q1`; empty when it misses the plane).
#[allow(clippy::too_many_arguments)]
pub(super) fn load_window(
    ctx: &mut Ctx,
    mem: MemType,
    input: Buf,
    il: &ActLayout,
    tile: &PlaneTile,
    win: Window,
    sram: usize,
    plane: usize,
) -> Result<(Span, Span), BackendError> {
    let [_, _, h, w] = il.shape;
    let (r0, r1) = valid_span(win.r, win.rows, 1, h);
    let (q0, q1) = valid_span(win.c, win.cols, 1, w);
    let empty = r1 <= r0 || q1 <= q0;
    for k in 0..tile.kp {
        let sram = sram + k * plane;
        ctx.load(if empty {
            Dma {
                mem,
                sram,
                buf: input,
                elem: 0,
                y: 0,
                x: win.cols,
                stride: 0,
                pad: [win.rows, 0, 0, 0],
            }
        } else {
            Dma {
                mem,
                sram,
                buf: input,
                elem: il.elem_index(
                    tile.nb,
                    tile.cb0 + k,
                    (win.r + r0 as isize) as usize,
                    (win.c + q0 as isize) as usize,
                ),
                y: r1 - r0,
                x: q1 - q0,
                stride: w,
                pad: [r0, win.rows - r1, q0, win.cols - q1],
            }
        })?;
    }
    Ok(((r0, r1), (q0, q1)))
}

/// Loads the constant rows of channel blocks `cb0 .. cb0 + kp` at `tab`.
pub(super) fn load_tables(
    ctx: &mut Ctx,
    ep: &Epilogue,
    consts: Option<Buf>,
    tab: usize,
    cb0: usize,
    kp: usize,
    cb: usize,
) -> Result<(), BackendError> {
    let Some(consts) = consts else { return Ok(()) };
    let (t, s) = (ep.tables.len(), ep.splats.len());
    if t > 0 {
        ctx.load(Dma {
            mem: MemType::Acc,
            sram: tab,
            buf: consts,
            elem: cb0,
            y: t,
            x: kp,
            stride: cb,
            pad: [0; 4],
        })?;
    }
    if s > 0 {
        ctx.load(Dma::row(MemType::Acc, tab + t * kp, consts, t * cb, s))?;
    }
    Ok(())
}

/// Runs `ep` over `kp` planes of `len` rows at `dst` (planes `pitch` rows apart).
pub(super) fn epilogue(
    ctx: &mut Ctx,
    ep: &Epilogue,
    dst: usize,
    pitch: usize,
    kp: usize,
    len: usize,
    tab: usize,
) -> Result<(), BackendError> {
    let nt = ep.tables.len();
    for o in &ep.ops {
        let (operand, src, ch) = match o.src {
            EpSrc::Imm(v) => (Operand::Imm(v), 0, 0),
            EpSrc::Table(k) => (Operand::Tensor, tab + k * kp, 1),
            EpSrc::Splat(s) => (Operand::Tensor, tab + nt * kp + s, 0),
            EpSrc::Shortcut => {
                return Err(BackendError::Internal(
                    "a residual epilogue outside a convolution".into(),
                ))
            }
        };
        ctx.alu(
            o.op,
            operand,
            dst,
            src,
            &[Dim::new(kp, pitch, ch, 0), Dim::new(len, 1, 0, 0)],
        )?;
    }
    Ok(())
}

/// The multiplication `x * m` on ACC rows, exactly (MUL imm, or a shift without ALU MUL).
pub(super) fn scale(
    ctx: &mut Ctx,
    layer: &str,
    m: i16,
    dst: usize,
    dims: &[Dim],
) -> Result<(), BackendError> {
    if m == 1 {
        return Ok(());
    }
    match mul_by(&ctx.cfg, m) {
        Some((op, v)) => ctx.alu(op, Operand::Imm(v), dst, 0, dims),
        None => Err(BackendError::Unsupported {
            layer: layer.into(),
            config: ctx.cfg.config_string(),
            reason: format!("the operand multiplier {m} needs ALU MUL, which this config lacks"),
        }),
    }
}

pub(super) fn no_fit(ctx: &Ctx, layer: &str, need: usize) -> BackendError {
    BackendError::Unsupported {
        layer: layer.into(),
        config: ctx.cfg.config_string(),
        reason: format!(
            "one tile needs {need} ACC rows but half of ACC holds {}",
            ctx.budget.acc_half
        ),
    }
}

/// Checks ahead of emission that the multipliers can be applied (no instruction emitted).
pub fn check_add(ctx: &Ctx, layer: &QAdd) -> Result<(), BackendError> {
    for m in [layer.mul_a, layer.mul_b] {
        if m != 1 && mul_by(&ctx.cfg, m).is_none() {
            return Err(BackendError::Unsupported {
                layer: layer.name.clone(),
                config: ctx.cfg.config_string(),
                reason: format!(
                    "the operand multiplier {m} needs ALU MUL, which this config lacks"
                ),
            });
        }
    }
    Ok(())
}

/// QAdd over `shape` (`a`, `b` and `out` in the BLOCK_OUT layout).
#[allow(clippy::too_many_arguments)]
pub fn emit_add(
    ctx: &mut Ctx,
    layer: &QAdd,
    ep: &Epilogue,
    shape: [usize; 4],
    a: Buf,
    bb: Buf,
    out: Buf,
    consts: Option<Buf>,
) -> Result<usize, BackendError> {
    check_add(ctx, layer)?;
    let l = ActLayout::out(&ctx.cfg, shape);
    let (nb, cb, hw) = (l.n_blocks(), l.c_blocks(), l.plane());
    let half = ctx.budget.acc_half;
    let rows = |kp: usize| ep.table_rows(kp);
    // Whole planes when they fit, else bands of one plane.
    let (kp, len) = if hw <= MAX_ITER && 2 * hw + rows(1) <= half {
        let mut kp = cb;
        while kp > 1 && 2 * kp * hw + rows(kp) > half {
            kp -= 1;
        }
        (cb.div_ceil(cb.div_ceil(kp)), hw)
    } else {
        let len = ((half.saturating_sub(rows(1))) / 2).min(MAX_ITER).min(hw);
        if len == 0 {
            return Err(no_fit(ctx, &layer.name, 2 + rows(1)));
        }
        (1, hw.div_ceil(hw.div_ceil(len)))
    };
    let cap = kp * len;
    let tiles = plane_tiles(nb, cb, kp, hw, len);
    let mut pipe: Pipeline<(usize, usize)> = Pipeline::new(tiles.len(), 0);
    for t in &tiles {
        let ab = pipe.acc_half() * half;
        let (ra, rb, tab) = (ab, ab + cap, ab + 2 * cap);
        if pipe.begin_tile(ctx, (t.cb0, t.kp)) {
            load_tables(ctx, ep, consts, tab, t.cb0, t.kp, cb)?;
        }
        for (buf, at) in [(a, ra), (bb, rb)] {
            let loads = (0..t.kp)
                .map(|k| {
                    Dma::row(
                        MemType::Acc8,
                        at + k * t.len,
                        buf,
                        l.elem_index(t.nb, t.cb0 + k, 0, 0) + t.p0,
                        t.len,
                    )
                })
                .collect();
            for d in coalesce(loads) {
                ctx.load(d)?;
            }
        }
        let dims = [Dim::new(t.kp, t.len, t.len, 0), Dim::new(t.len, 1, 1, 0)];
        scale(ctx, &layer.name, layer.mul_a, ra, &dims)?;
        scale(ctx, &layer.name, layer.mul_b, rb, &dims)?;
        ctx.alu(AluOp::Add, Operand::Tensor, ra, rb, &dims)?;
        epilogue(ctx, ep, ra, t.len, t.kp, t.len, tab)?;
        pipe.results_ready(ctx);
        let stores = (0..t.kp)
            .map(|k| {
                Dma::row(
                    MemType::Out,
                    ra + k * t.len,
                    out,
                    l.elem_index(t.nb, t.cb0 + k, 0, 0) + t.p0,
                    t.len,
                )
            })
            .collect();
        for d in coalesce(stores) {
            ctx.store(d)?;
        }
        pipe.end_tile(ctx);
    }
    pipe.finish()?;
    Ok(tiles.len())
}

/// Validates a max pool over an `[n, c, h, w]` input.
pub fn check_max_pool(ctx: &Ctx, layer: &QMaxPool, shape: [usize; 4]) -> Result<(), BackendError> {
    let cfg_name = ctx.cfg.config_string();
    let [_, _, h, w] = shape;
    let (kh, kw) = layer.kernel;
    let (sh, sw) = layer.stride;
    let p = layer.pad;
    if kh == 0
        || kw == 0
        || sh == 0
        || sw == 0
        || h + p[0] + p[2] < kh
        || w + p[1] + p[3] < kw
        || shape.contains(&0)
    {
        return Err(BackendError::InvalidLayer {
            layer: layer.name.clone(),
            reason: format!(
                "kernel {:?}, stride {:?}, pad {:?} do not fit input {shape:?}",
                layer.kernel, layer.stride, layer.pad
            ),
        });
    }
    if p[1] > MAX_PAD || p[3] > MAX_PAD {
        return Err(BackendError::Unsupported {
            layer: layer.name.clone(),
            config: cfg_name,
            reason: format!(
                "horizontal padding {}/{} exceeds the LOAD x-pad field (at most {MAX_PAD})",
                p[1], p[3]
            ),
        });
    }
    // One output pixel of one plane: its input window, the window rows' maxima, the pixel
    // (rows too wide for half of ACC are cut into bands of columns).
    let need = kh * kw + kh + 1;
    if need > ctx.budget.acc_half {
        return Err(no_fit(ctx, &layer.name, need));
    }
    Ok(())
}

/// QMaxPool over `shape` (input and output in the BLOCK_OUT layout); `identity` is the
/// identity weight tile when the config has one ([`super::layout::identity_tile`]).
pub fn emit_max_pool(
    ctx: &mut Ctx,
    layer: &QMaxPool,
    shape: [usize; 4],
    input: Buf,
    out: Buf,
    identity: Option<Buf>,
) -> Result<usize, BackendError> {
    check_max_pool(ctx, layer, shape)?;
    let [n, c, h, w] = shape;
    let (kh, kw) = layer.kernel;
    let (sh, sw) = layer.stride;
    let p = layer.pad;
    let (oh, ow) = layer.output_hw(h, w);
    let il = ActLayout::out(&ctx.cfg, shape);
    let ol = ActLayout::out(&ctx.cfg, [n, c, oh, ow]);
    let (nb, cb) = (il.n_blocks(), il.c_blocks());
    let half = ctx.budget.acc_half;
    let in_cols = |tw: usize| (tw - 1) * sw + kw;
    let in_rows = |th: usize| (th - 1) * sh + kh;
    // The horizontal pass runs in place (each window's maximum into its first column) when
    // at most one tap column is another window's first column (`kw <= 2 * sw`): that tap's
    // pass goes first, and inside it each window reads the next ones' first columns before
    // their micro-ops overwrite them. Otherwise it writes a row buffer.
    let in_place = kw <= 2 * sw;
    let tmp_rows = |th: usize, tw: usize| if in_place { 0 } else { in_rows(th) * tw };
    let per_plane = |th: usize, tw: usize| in_rows(th) * in_cols(tw) + tmp_rows(th, tw) + th * tw;
    // The most output rows one plane's tile can hold, then as many planes as fit; when not
    // even one whole row fits, one row in the widest bands of columns that do.
    let (kp, th, tw) = match (1..=oh).rev().find(|&th| per_plane(th, ow) <= half) {
        Some(th) => {
            let th = oh.div_ceil(oh.div_ceil(th));
            let kp = if th == oh {
                (half / per_plane(th, ow)).clamp(1, cb)
            } else {
                1
            };
            (cb.div_ceil(cb.div_ceil(kp)), th, ow)
        }
        None => {
            let tw = (1..ow)
                .rev()
                .find(|&tw| per_plane(1, tw) <= half)
                .ok_or_else(|| no_fit(ctx, &layer.name, per_plane(1, 1)))?;
            (1, 1, ow.div_ceil(ow.div_ceil(tw)))
        }
    };
    let (ip, tp, op) = (in_rows(th) * in_cols(tw), tmp_rows(th, tw), th * tw);
    // Each plane tile in column bands (one band of the whole width when rows fit).
    let tiles: Vec<(PlaneTile, (usize, usize))> = plane_tiles(nb, cb, kp, oh, th)
        .into_iter()
        .flat_map(|tile| splits(ow, tw).map(move |band| (tile, band)))
        .collect();
    // The window goes through INP and the GEMM core when it fits (each tile a chunk of the
    // load module's double buffer): then the load module fetches it and the GEMM core copies
    // it while the ALU pools the tile before, where an ACC8 load would wait for an idle core.
    let via_inp = identity.filter(|_| kp * ip <= ctx.budget.inp_half);
    let chunks = if via_inp.is_some() { tiles.len() } else { 0 };
    let mut pipe: Pipeline<usize> = Pipeline::new(tiles.len(), chunks);
    for (k, (t, (c0, bw))) in tiles.iter().enumerate() {
        let (ow, in_cols) = (*bw, in_cols(*bw));
        let ab = pipe.acc_half() * half;
        let (i0, t0, o0) = (ab, ab + kp * ip, ab + kp * (ip + tp));
        pipe.begin_tile(ctx, 0);
        let rows = in_rows(t.len);
        let win = Window {
            r: (t.p0 * sh) as isize - p[0] as isize,
            rows,
            c: (c0 * sw) as isize - p[1] as isize,
            cols: in_cols,
        };
        let reset = |ctx: &mut Ctx, at: usize, pitch: usize, len: usize| {
            ctx.reset(at, &[Dim::new(t.kp, pitch, 0, 0), Dim::new(len, 1, 0, 0)])
        };
        let ((r0, r1), (q0, q1)) = match via_inp {
            Some(identity) => {
                let b = ctx.budget;
                let (ib, wb) = (
                    pipe.chunk_half() * b.inp_half,
                    pipe.chunk_half() * b.wgt_half,
                );
                let (_, need_wgt) = pipe.begin_chunk_loads(ctx, k, 0);
                let spans = load_window(ctx, MemType::Inp, input, &il, t, win, ib, ip)?;
                if need_wgt {
                    ctx.load(Dma::row(MemType::Wgt, wb, identity, 0, 1))?;
                }
                pipe.end_chunk_loads(ctx);
                reset(ctx, i0, ip, rows * in_cols)?;
                let cells = [Dim::new(t.kp, ip, ip, 0), Dim::new(rows * in_cols, 1, 1, 0)];
                ctx.copy_rows(i0, ib, wb, &cells)?;
                pipe.end_chunk(ctx);
                spans
            }
            None => load_window(ctx, MemType::Acc8, input, &il, t, win, i0, ip)?,
        };
        // The rows the passes below start from are zeroed now, while the GEMM core still
        // works on this tile, rather than between two ALU passes (each waits for the other).
        if !in_place {
            reset(ctx, t0, tp, rows * ow)?;
        }
        reset(ctx, o0, op, t.len * ow)?;
        let empty = r1 <= r0 || q1 <= q0;
        // Padding cells (exactly 0 after the load) become -128.
        let planes = Dim::new(t.kp, ip, 0, 0);
        let fix = Operand::Imm(-128);
        if empty {
            ctx.alu(
                AluOp::Add,
                fix,
                i0,
                0,
                &[planes, Dim::new(rows * in_cols, 1, 0, 0)],
            )?;
        } else {
            if r0 > 0 {
                ctx.alu(
                    AluOp::Add,
                    fix,
                    i0,
                    0,
                    &[planes, Dim::new(r0 * in_cols, 1, 0, 0)],
                )?;
            }
            if r1 < rows {
                ctx.alu(
                    AluOp::Add,
                    fix,
                    i0 + r1 * in_cols,
                    0,
                    &[planes, Dim::new((rows - r1) * in_cols, 1, 0, 0)],
                )?;
            }
            let band = Dim::new(r1 - r0, in_cols, 0, 0);
            if q0 > 0 {
                ctx.alu(
                    AluOp::Add,
                    fix,
                    i0 + r0 * in_cols,
                    0,
                    &[planes, band, Dim::new(q0, 1, 0, 0)],
                )?;
            }
            if q1 < in_cols {
                ctx.alu(
                    AluOp::Add,
                    fix,
                    i0 + r0 * in_cols + q1,
                    0,
                    &[planes, band, Dim::new(in_cols - q1, 1, 0, 0)],
                )?;
            }
        }
        // Horizontal pass: h[r][x] = max over kx of in[r][x*sw + kx], with `h` the row
        // buffer or (in place) `in[r][x*sw]`.
        let (h0, h_plane, h_row, h_col) = if in_place {
            (i0, ip, in_cols, sw)
        } else {
            (t0, tp, ow, 1)
        };
        let hdims = [
            Dim::new(t.kp, h_plane, ip, 0),
            Dim::new(rows, h_row, in_cols, 0),
            Dim::new(ow, h_col, sw, 0),
        ];
        let mut taps: Vec<usize> = (1..kw).collect();
        if in_place {
            taps.sort_by_key(|&kx| kx % sw != 0);
        } else {
            ctx.alu(AluOp::Add, Operand::Tensor, t0, i0, &hdims)?;
        }
        for kx in taps {
            ctx.alu(AluOp::Max, Operand::Tensor, h0, i0 + kx, &hdims)?;
        }
        // Vertical pass: out[y][x] = max over ky of h[y*sh + ky][x].
        let vdims = [
            Dim::new(t.kp, op, h_plane, 0),
            Dim::new(t.len, ow, sh * h_row, 0),
            Dim::new(ow, 1, h_col, 0),
        ];
        ctx.alu(AluOp::Add, Operand::Tensor, o0, h0, &vdims)?;
        for ky in 1..kh {
            ctx.alu(AluOp::Max, Operand::Tensor, o0, h0 + ky * h_row, &vdims)?;
        }
        pipe.results_ready(ctx);
        let stores = (0..t.kp)
            .map(|k| {
                // Whole rows, or one band of one row: contiguous either way.
                Dma::row(
                    MemType::Out,
                    o0 + k * op,
                    out,
                    ol.elem_index(t.nb, t.cb0 + k, t.p0, *c0),
                    t.len * ow,
                )
            })
            .collect();
        for d in coalesce(stores) {
            ctx.store(d)?;
        }
        pipe.end_tile(ctx);
    }
    pipe.finish()?;
    Ok(tiles.len())
}

/// QGlobalAvgPool over `shape` (input `[n, c, h, w]`, output `[n, c, 1, 1]`, BLOCK_OUT layout).
pub fn emit_global_avg_pool(
    ctx: &mut Ctx,
    layer: &QGlobalAvgPool,
    ep: &Epilogue,
    shape: [usize; 4],
    input: Buf,
    out: Buf,
    consts: Option<Buf>,
) -> Result<usize, BackendError> {
    let [n, c, _, _] = shape;
    let il = ActLayout::out(&ctx.cfg, shape);
    let ol = ActLayout::out(&ctx.cfg, [n, c, 1, 1]);
    let (nb, cb, hw) = (il.n_blocks(), il.c_blocks(), il.plane());
    let half = ctx.budget.acc_half;
    let need = |kp: usize, len: usize| kp * (len + 1) + ep.table_rows(kp);
    // Whole planes when one fits, else one plane summed in bands of rows.
    let (kp, len) = if need(1, hw) <= half && hw <= MAX_DMA {
        let mut kp = cb;
        while kp > 1 && need(kp, hw) > half {
            kp -= 1;
        }
        (cb.div_ceil(cb.div_ceil(kp)), hw)
    } else {
        let len = half
            .saturating_sub(1 + ep.table_rows(1))
            .min(MAX_DMA)
            .min(hw);
        if len == 0 {
            return Err(no_fit(ctx, &layer.name, need(1, 1)));
        }
        (1, len)
    };
    let tiles = plane_tiles(nb, cb, kp, 1, 1);
    let mut pipe: Pipeline<(usize, usize)> = Pipeline::new(tiles.len(), 0);
    for t in &tiles {
        let ab = pipe.acc_half() * half;
        let (i0, s0, tab) = (ab, ab + kp * len, ab + kp * (len + 1));
        if pipe.begin_tile(ctx, (t.cb0, t.kp)) {
            load_tables(ctx, ep, consts, tab, t.cb0, t.kp, cb)?;
        }
        ctx.reset(s0, &[Dim::new(t.kp, 1, 0, 0)])?;
        for (p0, l) in splits(hw, len) {
            let loads = (0..t.kp)
                .map(|k| {
                    Dma::row(
                        MemType::Acc8,
                        i0 + k * len,
                        input,
                        il.elem_index(t.nb, t.cb0 + k, 0, 0) + p0,
                        l,
                    )
                })
                .collect();
            for d in coalesce(loads) {
                ctx.load(d)?;
            }
            ctx.alu(
                AluOp::Add,
                Operand::Tensor,
                s0,
                i0,
                &[Dim::new(t.kp, 1, len, 0), Dim::new(l, 0, 1, 0)],
            )?;
        }
        epilogue(ctx, ep, s0, 1, t.kp, 1, tab)?;
        pipe.results_ready(ctx);
        ctx.store(Dma::row(
            MemType::Out,
            s0,
            out,
            ol.elem_index(t.nb, t.cb0, 0, 0),
            t.kp,
        ))?;
        pipe.end_tile(ctx);
    }
    pipe.finish()?;
    Ok(tiles.len())
}
