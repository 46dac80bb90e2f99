//! Lowering of convolutions (and dense layers, as pixel convolutions) for a chosen tiling.
//!
//! Per output tile (see [`super::tiling`]): load the tile's constant rows into its ACC half
//! (when that half does not hold them already), reset the accumulators, run one GEMM
//! instruction per reduction chunk, apply the epilogue, store. The reset of a tile after the
//! first runs early when it can ([`super::tiling::early_resets`]): on the ALU pipeline
//! ([`super::epilogue::zeroing`]), between two chunks of the tile before, once the GEMMs of
//! that tile have given the reset tile's half (the store of the tile two before it) time to
//! drain, so that it costs the GEMM pipeline nothing. With a residual add fused into
//! the epilogue ([`super::epilogue::with_residual`]), the tile loads the shortcut's rows
//! (LOAD ACC8) beside its accumulators between its GEMMs and its epilogue. Per chunk: one INP
//! load per input-channel block (a 2D strided DMA whose pads are the convolution's zero
//! padding), the weight tiles of every output-channel block of the tile, and a GEMM whose
//! micro-ops enumerate (output-channel block, input-channel block, ky, kx) while its two
//! hardware loops run over output rows and columns (or whichever two dimensions are largest).
//! A resident tiling puts each chunk's input and weights in a place of their own instead of
//! a half (`Places`, each as large as its chunk: a tapered tiling's channel tiles shrink),
//! loads each once, and lets the loads run ahead.
//!
//! Accumulator layout in an ACC half: row `ob_t * (th*tw) + y * tw_act + x` for output pixel
//! `(y, x)` of channel block `ob_t` (pixel convolutions: `n_t * tco_act + ob_t`), followed by
//! the shortcut's rows in the same layout (a fused residual add) or the rows of the output's
//! digit planes past the first (outputs wider than the lanes, each plane the value shifted
//! right by the digits below it, stored after the first: `ActLayout`'s digit planes), then the
//! constant rows (per-channel tables, then splat rows): the whole layer's (`cob` rows per
//! table) when they fit, else the tile's (`tco_act` rows per table).

use isa::builder::{Buf, Operand};
use isa::{AluOp, MemType, Uop};

use super::emit::{coalesce, AluStep, Ctx, Dim, Dma, Pipeline};
use super::epilogue::{zeroing, EpDst, EpSrc, Epilogue};
use super::layout::ActLayout;
use super::tiling::{
    early_resets, output_tiles, splits, tapered_early_resets, valid_span, whole_tables, ConvGeom,
    Tile, Tiling,
};
use super::BackendError;

/// DRAM segments a convolution reads and writes.
#[derive(Debug, Clone, Copy)]
pub struct ConvBufs {
    pub input: Buf,
    pub output: Buf,
    pub weights: Buf,
    pub consts: Buf,
    /// The shortcut of a fused residual add ([`super::epilogue::with_residual`]).
    pub shortcut: Option<Buf>,
}

/// What a loaded half holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Inp {
        nb0: usize,
        oh0: usize,
        ow0: usize,
        th: usize,
        tw: usize,
        tn: usize,
        c0: usize,
        c1: usize,
    },
    Wgt {
        ob0: usize,
        tco: usize,
        c0: usize,
        c1: usize,
        /// The weight digit of a bit-sliced layer (0 otherwise).
        digit: usize,
    },
    Tab {
        ob0: usize,
        tco: usize,
    },
}

/// Where a resident tiling ([`super::tiling::Tiling::resident`]) keeps its chunks in one
/// scratchpad: each distinct chunk the next rows, as many as it needs, loaded the first time
/// it is used.
struct Places {
    keys: Vec<(Key, usize)>,
    next: usize,
    depth: usize,
}

impl Places {
    fn new(depth: usize) -> Self {
        Places {
            keys: Vec::new(),
            next: 0,
            depth,
        }
    }

    /// The first row of `key`'s place (of `size` rows), and whether it must be loaded there.
    fn place(&mut self, key: Key, size: usize) -> Result<(usize, bool), BackendError> {
        if let Some(&(_, at)) = self.keys.iter().find(|(k, _)| *k == key) {
            return Ok((at, false));
        }
        let at = self.next;
        if at + size > self.depth {
            return Err(BackendError::Internal(format!(
                "a resident tiling needs more than the {} rows of its scratchpad",
                self.depth
            )));
        }
        self.keys.push((key, at));
        self.next = at + size;
        Ok((at, true))
    }
}

fn chunks(g: &ConvGeom, t: &Tiling, tile: &Tile) -> Vec<(usize, usize)> {
    let (lo, hi) = g.union(tile.ob0, tile.tco);
    splits(hi - lo, t.tci)
        .map(|(s, l)| (lo + s, lo + s + l))
        .collect()
}

/// Emits convolution `g` with tiling `t` and epilogue `ep`, its micro-op kernels loaded
/// up front ([`Ctx::preload_for`]).
pub fn emit(
    ctx: &mut Ctx,
    g: &ConvGeom,
    t: &Tiling,
    ep: &Epilogue,
    bufs: &ConvBufs,
) -> Result<(), BackendError> {
    ctx.preload_for(|c| emit_tiles(c, g, t, ep, bufs))?;
    emit_tiles(ctx, g, t, ep, bufs)
}

fn emit_tiles(
    ctx: &mut Ctx,
    g: &ConvGeom,
    t: &Tiling,
    ep: &Epilogue,
    bufs: &ConvBufs,
) -> Result<(), BackendError> {
    let b = ctx.budget;
    let inl = ActLayout::inp(&ctx.cfg, [g.n, g.c, g.h, g.w]);
    let mut outl = ActLayout::out(&ctx.cfg, [g.n, g.o, g.oh, g.ow]);
    if g.out_planes > 1 {
        outl = outl.in_digits();
    }
    let tiles = output_tiles(g, t);
    // A bit-sliced layer ([`super::slice`]) runs a tile's chunks once per weight digit.
    let total_chunks = g.passes
        * tiles
            .iter()
            .map(|tile| chunks(g, t, tile).len())
            .sum::<usize>();
    let mut pipe = Pipeline::new(tiles.len(), total_chunks);
    if t.resident {
        pipe = pipe.own_places();
    }
    // Fixed pitches: a tile's channel blocks in ACC, a chunk's channel blocks in INP.
    let acc_ob = t.th * t.tw;
    let acc_cap = if g.pixel {
        t.tn * t.tco
    } else {
        t.tco * acc_ob
    };
    let inp_pitch = g.in_rows(t.th) * g.in_cols(t.tw, t.col_skip);
    let (n_tab, n_splat) = (ep.tables.len(), ep.splats.len());
    // Each ACC half holds the constant rows of its tile's channel blocks (loaded when the tile
    // two before had others), or of the whole layer (`tiling::whole_tables`).
    let per_tile_loads = (0..tiles.len())
        .filter(|&i| i < 2 || (tiles[i].ob0, tiles[i].tco) != (tiles[i - 2].ob0, tiles[i - 2].tco))
        .count();
    let whole_tables = whole_tables(&b, g, acc_cap, tiles.len(), per_tile_loads);
    let early = early_chunks(ctx, g, t, ep, &tiles, bufs.weights);
    // A resident tiling's chunks have places of their own in the whole of INP and WGT.
    let mut places = t
        .resident
        .then(|| (Places::new(2 * b.inp_half), Places::new(2 * b.wgt_half)));
    let inp_place = t.tci.min(g.cib) * if g.pixel { t.tn } else { inp_pitch };
    // The constant rows a tile needs: the whole layer's, or its channel blocks'.
    let tab_key = |tile: &Tile| {
        if whole_tables {
            (0, g.cob)
        } else {
            (tile.ob0, tile.tco)
        }
    };
    for (i, tile) in tiles.iter().enumerate() {
        let ab = pipe.acc_half() * b.acc_half;
        // The shortcut's rows (a fused residual add), then the constant rows.
        let sc = ab + acc_cap;
        let tab = ab + g.acc_rows(acc_cap);
        let (tab_ob0, tab_blocks) = tab_key(tile);
        // Constant rows, then the reset. When the second tile needs the same ones, they go
        // into both halves at the start, while the core waits for the first chunk anyway:
        // loaded at the second tile, they would wait for the first one's GEMMs to drain.
        let key = Key::Tab {
            ob0: tab_ob0,
            tco: tab_blocks,
        };
        if pipe.begin_tile(ctx, key) {
            let both = i == 0
                && tiles
                    .get(1)
                    .is_some_and(|next| tab_key(next) == tab_key(tile));
            for at in [tab, tab + b.acc_half]
                .into_iter()
                .take(1 + usize::from(both))
            {
                if n_tab > 0 {
                    ctx.load(Dma {
                        mem: MemType::Acc,
                        sram: at,
                        buf: bufs.consts,
                        elem: tab_ob0,
                        y: n_tab,
                        x: tab_blocks,
                        stride: g.cob,
                        pad: [0; 4],
                    })?;
                }
                if n_splat > 0 {
                    ctx.load(Dma::row(
                        MemType::Acc,
                        at + n_tab * tab_blocks,
                        bufs.consts,
                        n_tab * g.cob,
                        n_splat,
                    ))?;
                }
            }
            if both {
                pipe.next_half_holds(key);
            }
        }
        let rows = region(g, t, tile);
        if early[i].is_none() {
            let reset_dims: Vec<Dim> = rows.iter().map(|r| r.0).collect();
            ctx.reset(ab, &reset_dims)?;
        }
        let tile_chunks = chunks(g, t, tile);
        // Pass by pass, top digit first, the accumulators shifted left by a digit between
        // passes (Horner): `sum_j 2^(b*j) * (x . w_j)` (see [`super::slice`]).
        let passes = (0..g.passes).rev().flat_map(|digit| {
            tile_chunks
                .iter()
                .enumerate()
                .map(move |(k, &c)| (digit, k == 0, c))
        });
        for (j, (digit, first_of_pass, (c0, c1))) in passes.enumerate() {
            if first_of_pass && digit + 1 < g.passes {
                let dims: Vec<Dim> = rows.iter().map(|r| r.0).collect();
                ctx.alu_group(&[AluStep {
                    op: AluOp::Shr,
                    operand: Operand::Imm(-(g.wl.bits as i16)),
                    dst: ab,
                    src: 0,
                    dims,
                }])?;
            }
            let inp_key = Key::Inp {
                nb0: tile.nb0,
                oh0: tile.oh0,
                ow0: tile.ow0,
                th: tile.th,
                tw: tile.tw,
                tn: tile.tn,
                c0,
                c1,
            };
            let wgt_key = Key::Wgt {
                ob0: tile.ob0,
                tco: tile.tco,
                c0,
                c1,
                digit,
            };
            let (need_inp, need_wgt) = pipe.begin_chunk_loads(ctx, inp_key, wgt_key);
            let (ib, wb, need_inp, need_wgt) = match places.as_mut() {
                Some((inp, wgt)) => {
                    let (ib, need_inp) = inp.place(inp_key, inp_place)?;
                    let (wb, need_wgt) = wgt.place(wgt_key, tile.tco * (c1 - c0) * g.kh * g.kw)?;
                    (ib, wb, need_inp, need_wgt)
                }
                None => (
                    pipe.chunk_half() * b.inp_half,
                    pipe.chunk_half() * b.wgt_half,
                    need_inp,
                    need_wgt,
                ),
            };
            // Input tile: geometry of its SRAM image.
            let (rs, rows, rstep) = g.row_span(tile.oh0, tile.th);
            let (cs, cols, cstep) = g.col_span(tile.ow0, tile.tw, t.col_skip);
            if need_inp {
                if g.pixel {
                    ctx.load(Dma {
                        mem: MemType::Inp,
                        sram: ib,
                        buf: bufs.input,
                        elem: tile.nb0 * g.cib + c0,
                        y: tile.tn,
                        x: c1 - c0,
                        stride: g.cib,
                        pad: [0; 4],
                    })?;
                } else {
                    let (r0, r1) = valid_span(rs, rows, rstep, g.h);
                    let (q0, q1) = valid_span(cs, cols, cstep, g.w);
                    let row_at = |r: usize| (rs + (r * rstep) as isize) as usize;
                    let col_at = |q: usize| (cs + (q * cstep) as isize) as usize;
                    for cb in c0..c1 {
                        let sram = ib + (cb - c0) * inp_pitch;
                        if r1 <= r0 || q1 <= q0 {
                            ctx.load(Dma {
                                mem: MemType::Inp,
                                sram,
                                buf: bufs.input,
                                elem: 0,
                                y: 0,
                                x: cols,
                                stride: 0,
                                pad: [rows, 0, 0, 0],
                            })?;
                        } else if !t.col_skip {
                            ctx.load(Dma {
                                mem: MemType::Inp,
                                sram,
                                buf: bufs.input,
                                elem: inl.elem_index(tile.nb0, cb, row_at(r0), col_at(q0)),
                                y: r1 - r0,
                                x: q1 - q0,
                                stride: g.w * rstep,
                                pad: [r0, rows - r1, q0, cols - q1],
                            })?;
                        } else {
                            // One DMA per input row, one DMA row per used column.
                            for r in 0..rows {
                                let d = if (r0..r1).contains(&r) {
                                    Dma {
                                        mem: MemType::Inp,
                                        sram: sram + r * cols,
                                        buf: bufs.input,
                                        elem: inl.elem_index(tile.nb0, cb, row_at(r), col_at(q0)),
                                        y: q1 - q0,
                                        x: 1,
                                        stride: cstep,
                                        pad: [q0, cols - q1, 0, 0],
                                    }
                                } else {
                                    Dma {
                                        mem: MemType::Inp,
                                        sram: sram + r * cols,
                                        buf: bufs.input,
                                        elem: 0,
                                        y: 0,
                                        x: cols,
                                        stride: 0,
                                        pad: [1, 0, 0, 0],
                                    }
                                };
                                ctx.load(d)?;
                            }
                        }
                    }
                }
            }
            let (wloads, base, dims) =
                chunk_gemm(g, t, tile, (c0, c1), (ib, wb, ab), (bufs.weights, digit));
            if need_wgt {
                for d in coalesce(wloads) {
                    ctx.load(d)?;
                }
            }
            pipe.end_chunk_loads(ctx);
            ctx.gemm(&base, &dims, false)?;
            pipe.end_chunk(ctx);
            if early.get(i + 1) == Some(&Some(j)) {
                // The next tile's reset, beside this tile's next chunks.
                pipe.claim_next_half(ctx);
                let next = &tiles[i + 1];
                let dims: Vec<Dim> = region(g, t, next).iter().map(|r| r.0).collect();
                let steps: Vec<AluStep> = zeroing(&ctx.cfg)
                    .iter()
                    .map(|&(op, v)| AluStep {
                        op,
                        operand: Operand::Imm(v),
                        dst: pipe.next_acc_half() * b.acc_half,
                        src: 0,
                        dims: dims.clone(),
                    })
                    .collect();
                ctx.alu_group(&steps)?;
            }
        }
        // A fused residual add's shortcut, sign-extended beside the accumulators. Here, after
        // the GEMMs, the LOAD (which waits for an idle core) only waits for them: the
        // previous tile's epilogue ran beside them.
        if g.residual {
            let short = bufs.shortcut.ok_or_else(|| {
                BackendError::Internal("a residual epilogue without a shortcut".into())
            })?;
            for d in coalesce(tile_rows(
                g,
                &outl,
                tile,
                acc_ob,
                (MemType::Acc8, sc, short),
                0,
            )) {
                ctx.load(d)?;
            }
        }
        // Epilogue, with the rows in the inner loop (channel blocks outer): the core then
        // reads a table row once per pass and streams the rest (`roofline::streamed_uops`).
        let mut ep_region = rows;
        if g.pixel {
            ep_region.reverse();
        }
        let steps: Vec<AluStep> = ep
            .ops
            .iter()
            .map(|o| {
                let (operand, src) = match o.src {
                    EpSrc::Imm(v) => (Operand::Imm(v), 0),
                    EpSrc::Table(k) => (Operand::Tensor, tab + k * tab_blocks + tile.ob0 - tab_ob0),
                    EpSrc::Splat(s) => (Operand::Tensor, tab + n_tab * tab_blocks + s),
                    EpSrc::Shortcut => (Operand::Tensor, sc),
                };
                let dims = ep_region
                    .iter()
                    .map(|&(d, ch)| {
                        let src_step = match o.src {
                            EpSrc::Table(_) => usize::from(ch),
                            EpSrc::Shortcut => d.dst,
                            EpSrc::Imm(_) | EpSrc::Splat(_) => 0,
                        };
                        Dim::new(d.ext, d.dst, src_step, 0)
                    })
                    .collect();
                AluStep {
                    op: o.op,
                    operand,
                    dst: match o.dst {
                        EpDst::Acc => ab,
                        EpDst::Shortcut => sc,
                    },
                    src,
                    dims,
                }
            })
            .collect();
        // The tile's new micro-ops (its table rows' when the whole layer's tables are loaded)
        // in one LOAD UOP.
        ctx.alu_group(&steps)?;
        // Outputs wider than the lanes: digit plane `k` is the value shifted right by `k`
        // digits, in its own rows (zeroed, the value added, shifted), whose low bits the
        // STORE keeps (`ActLayout`'s digit planes).
        let plane_rows = |k: usize| ab + k * acc_cap;
        let region_dims: Vec<Dim> = rows.iter().map(|r| r.0).collect();
        for k in 1..g.out_planes {
            let mut steps: Vec<AluStep> = zeroing(&ctx.cfg)
                .iter()
                .map(|&(op, v)| AluStep {
                    op,
                    operand: Operand::Imm(v),
                    dst: plane_rows(k),
                    src: 0,
                    dims: region_dims.clone(),
                })
                .collect();
            steps.push(AluStep {
                op: AluOp::Add,
                operand: Operand::Tensor,
                dst: plane_rows(k),
                src: ab,
                dims: region_dims
                    .iter()
                    .map(|d| Dim::new(d.ext, d.dst, d.dst, 0))
                    .collect(),
            });
            steps.push(AluStep {
                op: AluOp::Shr,
                operand: Operand::Imm((k * outl.bits) as i16),
                dst: plane_rows(k),
                src: 0,
                dims: region_dims.clone(),
            });
            ctx.alu_group(&steps)?;
        }
        pipe.results_ready(ctx);
        for k in 0..g.out_planes {
            let stores = tile_rows(
                g,
                &outl,
                tile,
                acc_ob,
                (MemType::Out, plane_rows(k), bufs.output),
                k * g.cob,
            );
            for d in coalesce(stores) {
                ctx.store(d)?;
            }
        }
        pipe.end_tile(ctx);
    }
    pipe.finish()
}

/// Per tile, the chunk of the tile before after which its accumulator reset runs, on the
/// ALU pipeline ([`early_resets`], from the first tile, which is full; a tile before with
/// fewer chunks leaves it to the tile); `None` for a tile that resets them itself on the
/// GEMM pipeline (the first tile always does).
fn early_chunks(
    ctx: &Ctx,
    g: &ConvGeom,
    t: &Tiling,
    ep: &Epilogue,
    tiles: &[Tile],
    weights: Buf,
) -> Vec<Option<usize>> {
    let Some(first) = tiles.first() else {
        return Vec::new();
    };
    if t.taper {
        // Tapered tiles are ungrouped: every channel tile reads the same input blocks.
        let (lo, hi) = g.union(first.ob0, first.tco);
        return tapered_early_resets(
            &ctx.budget,
            ep.issue_cycles(),
            tiles,
            hi - lo,
            t.tci,
            g.kh * g.kw,
        );
    }
    let chunk_list = chunks(g, t, first);
    let (_, base, dims) = chunk_gemm(g, t, first, chunk_list[0], (0, 0, 0), (weights, 0));
    let chunk_uops = base.len() * dims.iter().map(|d| d.ext).product::<usize>();
    let [second, later] = early_resets(
        &ctx.budget,
        ep.issue_cycles(),
        first.rows(),
        chunk_uops as u64,
        chunk_list.len() * g.passes,
    );
    (0..tiles.len())
        .map(|i| {
            let before = &tiles[i.checked_sub(1)?];
            let j = if i == 1 { second } else { later }?;
            (j + 1 < chunks(g, t, before).len() * g.passes).then_some(j)
        })
        .collect()
}

/// `tile`'s accumulator rows as two dimensions, flagged when they step over channel blocks
/// (for the epilogue's per-channel tables), for the reset and the epilogue.
fn region(g: &ConvGeom, t: &Tiling, tile: &Tile) -> [(Dim, bool); 2] {
    if g.pixel {
        [
            (Dim::new(tile.tn, tile.tco, 0, 0), false),
            (Dim::new(tile.tco, 1, 0, 0), true),
        ]
    } else {
        [
            (Dim::new(tile.tco, t.th * t.tw, 0, 0), true),
            (Dim::new(tile.th * tile.tw, 1, 0, 0), false),
        ]
    }
}

/// The weight loads and the GEMM (its micro-ops and loops) of chunk `c0 .. c1` of `tile`:
/// input at INP row `ib`, weights at WGT row `wb` (digit `digit` of `weights`, see
/// [`super::slice::pack`]), accumulators at ACC row `ab`.
fn chunk_gemm(
    g: &ConvGeom,
    t: &Tiling,
    tile: &Tile,
    (c0, c1): (usize, usize),
    (ib, wb, ab): (usize, usize, usize),
    (weights, digit): (Buf, usize),
) -> (Vec<Dma>, Vec<Uop>, Vec<Dim>) {
    let khw = g.kh * g.kw;
    let acc_ob = t.th * t.tw;
    let inp_pitch = g.in_rows(t.th) * g.in_cols(t.tw, t.col_skip);
    let (_, cols, _) = g.col_span(tile.ow0, tile.tw, t.col_skip);
    // Weights, and the (src, wgt) micro-op offsets of each output-channel block.
    let mut wloads = Vec::new();
    let mut pairs: Vec<Vec<(usize, usize)>> = Vec::with_capacity(tile.tco);
    let mut woff = 0;
    for ob_t in 0..tile.tco {
        let ob = tile.ob0 + ob_t;
        let (lo, hi) = g.wl.cb_range[ob];
        let (a, z) = (lo.max(c0), hi.min(c1));
        let mut p = Vec::new();
        if z > a {
            let len = (z - a) * khw;
            wloads.push(Dma::row(
                MemType::Wgt,
                wb + woff,
                weights,
                digit * g.wl.tiles + g.wl.ob_offset[ob] + (a - lo) * khw,
                len,
            ));
            for cb in a..z {
                for ky in 0..g.kh {
                    for kx in 0..g.kw {
                        let src = if g.pixel {
                            cb - c0
                        } else {
                            (cb - c0) * inp_pitch + ky * cols + kx
                        };
                        p.push((ib + src, wb + woff + ((cb - a) * g.kh + ky) * g.kw + kx));
                    }
                }
            }
            woff += len;
        }
        pairs.push(p);
    }
    // Is output-channel block a regular (affine) dimension?
    let step = |k: usize| -> Option<(isize, isize)> {
        let (a, z) = (pairs[0].first()?, pairs[k].first()?);
        Some(((z.0 as isize - a.0 as isize), (z.1 as isize - a.1 as isize)))
    };
    let regular = tile.tco == 1
        || step(1).is_some_and(|(ds, dw)| {
            ds >= 0
                && dw >= 0
                && (1..tile.tco).all(|k| {
                    pairs[k].len() == pairs[0].len()
                        && pairs[k].iter().zip(&pairs[0]).all(|(p, q)| {
                            p.0 as isize - q.0 as isize == k as isize * ds
                                && p.1 as isize - q.1 as isize == k as isize * dw
                        })
                })
        });
    let mk = |dst: usize, (s, w): (usize, usize)| Uop {
        dst_idx: dst as u32,
        src_idx: s as u32,
        wgt_idx: w as u32,
    };
    let (base, ob_dim) = if regular {
        let (ds, dw) = if tile.tco > 1 {
            step(1)
                .map(|(a, b)| (a as usize, b as usize))
                .unwrap_or((0, 0))
        } else {
            (0, 0)
        };
        let base: Vec<Uop> = pairs[0].iter().map(|&p| mk(ab, p)).collect();
        (base, (tile.tco, ds, dw))
    } else {
        let ob_stride = if g.pixel { 1 } else { acc_ob };
        let base: Vec<Uop> = (0..tile.tco)
            .flat_map(|k| pairs[k].iter().map(move |&p| (k, p)))
            .map(|(k, p)| mk(ab + k * ob_stride, p))
            .collect();
        (base, (1, 0, 0))
    };
    let dims: Vec<Dim> = if g.pixel {
        vec![
            Dim::new(tile.tn, tile.tco, c1 - c0, 0),
            Dim::new(ob_dim.0, 1, ob_dim.1, ob_dim.2),
        ]
    } else {
        let row_src = if g.row_skip { 1 } else { g.sh } * cols;
        let col_src = if t.col_skip { 1 } else { g.sw };
        vec![
            Dim::new(ob_dim.0, acc_ob, ob_dim.1, ob_dim.2),
            Dim::new(tile.th, tile.tw, row_src, 0),
            Dim::new(tile.tw, 1, col_src, 0),
        ]
    };
    (wloads, base, dims)
}

/// The DMAs between `tile`'s accumulator rows (from `sram`, channel blocks `acc_ob` rows
/// apart) and its part of `buf`, a tensor of the output's shape and layout `outl`, from
/// packed channel block `plane_ob` on (a digit plane's first): its STOREs, or the LOAD ACC8s
/// of a shortcut.
fn tile_rows(
    g: &ConvGeom,
    outl: &ActLayout,
    tile: &Tile,
    acc_ob: usize,
    (mem, sram, buf): (MemType, usize, Buf),
    plane_ob: usize,
) -> Vec<Dma> {
    if g.pixel {
        let cb = outl.c_blocks();
        return vec![Dma {
            mem,
            sram,
            buf,
            elem: tile.nb0 * cb + plane_ob + tile.ob0,
            y: tile.tn,
            x: tile.tco,
            stride: cb,
            pad: [0; 4],
        }];
    }
    (0..tile.tco)
        .map(|ob_t| {
            let elem = outl.elem_index(tile.nb0, plane_ob + tile.ob0 + ob_t, tile.oh0, tile.ow0);
            let sram = sram + ob_t * acc_ob;
            if tile.tw == g.ow {
                Dma::row(mem, sram, buf, elem, tile.th * tile.tw)
            } else {
                Dma {
                    mem,
                    sram,
                    buf,
                    elem,
                    y: tile.th,
                    x: tile.tw,
                    stride: g.ow,
                    pad: [0; 4],
                }
            }
        })
        .collect()
}
