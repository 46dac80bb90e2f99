//! Element-wise layers on the ALU: [`QAffine`], [`QBinary`], [`QLeakyRelu`] and nearest
//! [`QUpsample`] (see [`crate::qlayer`] for their semantics).
//!
//! Like the residual add ([`super::eltwise`]), operands are read with ACC8 loads from the
//! packed layout (BLOCK_OUT lanes), and tiles are groups of channel planes (or row bands of one
//! plane) double-buffered over the two halves of ACC; results are stored as int8.
//!
//! - **QAffine**: `x * w` (MUL imm, or MUL tensor with a per-channel row; without ALU MUL
//!   a power of two as SHR), then the requant epilogue with the bias.
//! - **QBinary**: `ADD imm -zp` on each operand, then `MUL`/scaled `ADD` tensor, then the
//!   epilogue. A `[N, C, 1, 1]` second operand takes one ACC row per plane and is read with a
//!   source step of 0 across the plane (the squeeze-and-excite broadcast).
//! - **QLeakyRelu**: the input and a copy of it (reset, `ADD` tensor) are scaled by the
//!   positive and the negative multiplier; `MAX` (or `MIN`, when the negative slope is the
//!   larger) of the two picks `x * p` for `x >= 0` and `x * n` below, exactly the reference's
//!   choice since the products have the sign of `x`.
//! - **QUpsample**: each input row is copied `fx` times along the row by `ADD` into reset rows
//!   (nothing to do when `fx = 1`), and every widened row is stored `fy` times, to the output
//!   rows it stands for.

use isa::builder::{Buf, Operand};
use isa::{AluOp, MemType};

use super::eltwise::{epilogue, load_tables, no_fit, plane_tiles, scale};
use super::emit::{coalesce, Ctx, Dim, Dma, Pipeline};
use super::epilogue::{self, shift_for, Epilogue};
use super::layout::ActLayout;
use super::net::{LayerKind, NetBuilder, Tensor};
use super::tiling::{MAX_DMA, MAX_ITER};
use super::BackendError;
use crate::qlayer::{BinaryOp, QAffine, QBinary, QLeakyRelu, QUpsample};

/// An operand of a point-wise tile: a whole tensor, or `[N, C, 1, 1]` broadcast over planes.
#[derive(Clone, Copy)]
struct Operand8 {
    buf: Buf,
    broadcast: bool,
}

/// Where a tile's operands sit in ACC and how to walk them.
struct TileRows {
    /// First row of each operand.
    at: Vec<usize>,
    /// Planes of the tile and rows per plane.
    kp: usize,
    len: usize,
    /// First constant row.
    tab: usize,
}

impl TileRows {
    /// Dimensions over the tile's elements, reading operand `src` (its broadcast respected).
    fn dims(&self, src_broadcast: bool) -> [Dim; 2] {
        if src_broadcast {
            [
                Dim::new(self.kp, self.len, 1, 0),
                Dim::new(self.len, 1, 0, 0),
            ]
        } else {
            [
                Dim::new(self.kp, self.len, self.len, 0),
                Dim::new(self.len, 1, 1, 0),
            ]
        }
    }

    /// Dimensions reading per-channel constant table `k` (one row per plane).
    fn table_dims(&self) -> [Dim; 2] {
        self.dims(true)
    }

    fn table(&self, k: usize) -> usize {
        self.tab + k * self.kp
    }
}

fn unsupported(ctx: &Ctx, layer: &str, reason: String) -> BackendError {
    BackendError::Unsupported {
        layer: layer.into(),
        config: ctx.cfg.config_string(),
        reason,
    }
}

/// Whether `v * m` can be applied to ACC rows on this config.
fn can_scale(ctx: &Ctx, m: i16) -> bool {
    m == 1 || ctx.cfg.alu_mul || shift_for(m).is_some()
}

/// Multiplies the tile's first operand by per-channel constants from table `k`: MUL tensor,
/// or SHR tensor by the shifts of powers of two without ALU MUL.
fn scale_by_table(
    ctx: &mut Ctx,
    op: AluOp,
    dst: usize,
    rows: &TileRows,
    k: usize,
) -> Result<(), BackendError> {
    ctx.alu(op, Operand::Tensor, dst, rows.table(k), &rows.table_dims())
}

/// A per-channel multiplier vector as an epilogue table: the values for MUL, or the shifts for
/// SHR without ALU MUL (`None` when a multiplier is neither 1 nor a power of two there).
fn mul_table(ctx: &Ctx, m: &[i16]) -> Option<(AluOp, Vec<i32>)> {
    if ctx.cfg.alu_mul {
        Some((AluOp::Mul, m.iter().map(|&v| i32::from(v)).collect()))
    } else {
        m.iter()
            .map(|&v| shift_for(v).map(i32::from))
            .collect::<Option<Vec<_>>>()
            .map(|s| (AluOp::Shr, s))
    }
}

/// The generic point-wise layer: loads the operands of every tile, runs `body` on them, then
/// `ep` on the first operand's rows, and stores them.
#[allow(clippy::too_many_arguments)]
fn emit_tiles(
    ctx: &mut Ctx,
    layer: &str,
    shape: [usize; 4],
    ops: &[Operand8],
    extra_rows: usize,
    ep: &Epilogue,
    consts: Option<Buf>,
    out: Buf,
    body: &mut dyn FnMut(&mut Ctx, &TileRows) -> Result<(), BackendError>,
) -> Result<usize, BackendError> {
    let l = ActLayout::out(&ctx.cfg, shape);
    let (nb, cb, hw) = (l.n_blocks(), l.c_blocks(), l.plane());
    let half = ctx.budget.acc_half;
    let full = ops.iter().filter(|o| !o.broadcast).count() + extra_rows;
    let bcast = ops.len() + extra_rows - full;
    let need = |kp: usize, len: usize| kp * (full * len + bcast) + ep.table_rows(kp);
    // Whole planes when they fit, else bands of one plane.
    let (kp, len) = if hw <= MAX_ITER && need(1, hw) <= half {
        let mut kp = cb;
        while kp > 1 && need(kp, hw) > half {
            kp -= 1;
        }
        (cb.div_ceil(cb.div_ceil(kp)), hw)
    } else {
        let mut len = hw.min(MAX_ITER);
        while len > 0 && need(1, len) > half {
            len -= 1;
        }
        if len == 0 {
            return Err(no_fit(ctx, layer, need(1, 1)));
        }
        (1, hw.div_ceil(hw.div_ceil(len)))
    };
    let tiles = plane_tiles(nb, cb, kp, hw, len);
    let mut pipe: Pipeline<(usize, usize)> = Pipeline::new(tiles.len(), 0);
    for t in &tiles {
        let base = pipe.acc_half() * half;
        let mut at = Vec::new();
        let mut row = base;
        for o in ops {
            at.push(row);
            row += if o.broadcast { kp } else { kp * len };
        }
        for _ in 0..extra_rows {
            at.push(row);
            row += kp * len;
        }
        let rows = TileRows {
            at,
            kp: t.kp,
            len: t.len,
            tab: row,
        };
        if pipe.begin_tile(ctx, (t.cb0, t.kp)) {
            load_tables(ctx, ep, consts, rows.tab, t.cb0, t.kp, cb)?;
        }
        for (o, &dst) in ops.iter().zip(&rows.at) {
            let loads = (0..t.kp)
                .map(|k| {
                    if o.broadcast {
                        let bl = ActLayout::out(&ctx.cfg, [shape[0], shape[1], 1, 1]);
                        Dma::row(
                            MemType::Acc8,
                            dst + k,
                            o.buf,
                            bl.elem_index(t.nb, t.cb0 + k, 0, 0),
                            1,
                        )
                    } else {
                        Dma::row(
                            MemType::Acc8,
                            dst + k * t.len,
                            o.buf,
                            l.elem_index(t.nb, t.cb0 + k, 0, 0) + t.p0,
                            t.len,
                        )
                    }
                })
                .collect();
            for d in coalesce(loads) {
                ctx.load(d)?;
            }
        }
        body(ctx, &rows)?;
        let ra = rows.at[0];
        epilogue(ctx, ep, ra, t.len, t.kp, t.len, rows.tab)?;
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

/// Subtracts a zero point from the tile's operand at `dst` (nothing when it is 0).
fn sub_zp(ctx: &mut Ctx, zp: i8, dst: usize, dims: &[Dim]) -> Result<(), BackendError> {
    if zp == 0 {
        return Ok(());
    }
    ctx.alu(AluOp::Add, Operand::Imm(-i16::from(zp)), dst, 0, dims)
}

/// Per-channel values of a vector holding one value for all channels or one per channel.
fn per_channel<T: Copy>(v: &[T], c: usize) -> Vec<T> {
    if v.len() == 1 {
        vec![v[0]; c]
    } else {
        v.to_vec()
    }
}

impl NetBuilder {
    /// Adds a per-channel affine layer reading `x`.
    pub fn affine(&mut self, layer: &QAffine, x: Tensor) -> Result<Tensor, BackendError> {
        let cfg = self.ctx.cfg.clone();
        super::check_acc8_reads(&cfg, &layer.name)?;
        let shape = self.shape(x);
        layer
            .check(shape[1])
            .map_err(|reason| BackendError::InvalidLayer {
                layer: layer.name.clone(),
                reason,
            })?;
        let bias = per_channel(&layer.bias, shape[1]);
        let mut ep = epilogue::plan(&cfg, &layer.name, &layer.requant, Some(&bias), shape[1])?;
        let uniform = layer.weight.iter().all(|&w| w == layer.weight[0]);
        let weight_table = if uniform {
            if !can_scale(&self.ctx, layer.weight[0]) {
                return Err(unsupported(
                    &self.ctx,
                    &layer.name,
                    format!(
                        "the multiplier {} needs ALU MUL, which this config lacks",
                        layer.weight[0]
                    ),
                ));
            }
            None
        } else {
            let (op, t) =
                mul_table(&self.ctx, &per_channel(&layer.weight, shape[1])).ok_or_else(|| {
                    unsupported(
                        &self.ctx,
                        &layer.name,
                        "per-channel multipliers need ALU MUL, which this config lacks".into(),
                    )
                })?;
            ep.tables.push(t);
            Some((op, ep.tables.len() - 1))
        };
        let bo = cfg.block_out() as usize;
        let input = self.bind(x, bo, &layer.name)?;
        let consts = self.consts(&layer.name, &ep, shape[1].div_ceil(bo));
        let (y, out) = self.produce(&format!("{}.out", layer.name), shape);
        let k0 = self.begin();
        let ops = [Operand8 {
            buf: input,
            broadcast: false,
        }];
        let w0 = layer.weight[0];
        let name = layer.name.clone();
        let tiles = emit_tiles(
            &mut self.ctx,
            &layer.name,
            shape,
            &ops,
            0,
            &ep,
            consts,
            out,
            &mut |ctx, rows| match weight_table {
                None => scale(ctx, &name, w0, rows.at[0], &rows.dims(false)),
                Some((op, k)) => scale_by_table(ctx, op, rows.at[0], rows, k),
            },
        )?;
        self.end(self.eltwise_info(&layer.name, LayerKind::Affine, tiles), k0);
        Ok(y)
    }

    /// Adds an element-wise Add or Mul of `a` and `b` (`b` of `a`'s shape or `[N, C, 1, 1]`).
    pub fn binary(
        &mut self,
        layer: &QBinary,
        a: Tensor,
        b: Tensor,
    ) -> Result<Tensor, BackendError> {
        let cfg = self.ctx.cfg.clone();
        super::check_acc8_reads(&cfg, &layer.name)?;
        let (sa, sb) = (self.shape(a), self.shape(b));
        let broadcast = sa != sb;
        if broadcast && (sb[..2] != sa[..2] || sb[2..] != [1, 1]) {
            return Err(BackendError::InvalidLayer {
                layer: layer.name.clone(),
                reason: format!("operands {sa:?} and {sb:?} do not fit"),
            });
        }
        match layer.op {
            BinaryOp::Mul if !cfg.alu_mul => {
                return Err(unsupported(
                    &self.ctx,
                    &layer.name,
                    "the product of two tensors needs ALU MUL, which this config lacks".into(),
                ))
            }
            BinaryOp::Add => {
                for m in [layer.mul_a, layer.mul_b] {
                    if !can_scale(&self.ctx, m) {
                        return Err(unsupported(
                            &self.ctx,
                            &layer.name,
                            format!(
                                "the operand multiplier {m} needs ALU MUL, which this config lacks"
                            ),
                        ));
                    }
                }
            }
            BinaryOp::Mul => {}
        }
        let ep = epilogue::plan(&cfg, &layer.name, &layer.requant, None, sa[1])?;
        let bo = cfg.block_out() as usize;
        let ba = self.bind(a, bo, &layer.name)?;
        let bb = self.bind(b, bo, &layer.name)?;
        let consts = self.consts(&layer.name, &ep, sa[1].div_ceil(bo));
        let (y, out) = self.produce(&format!("{}.out", layer.name), sa);
        let k0 = self.begin();
        let ops = [
            Operand8 {
                buf: ba,
                broadcast: false,
            },
            Operand8 { buf: bb, broadcast },
        ];
        let l = layer.clone();
        let tiles = emit_tiles(
            &mut self.ctx,
            &layer.name,
            sa,
            &ops,
            0,
            &ep,
            consts,
            out,
            &mut |ctx, rows| {
                let (ra, rb) = (rows.at[0], rows.at[1]);
                let da = rows.dims(false);
                let db = if broadcast {
                    [Dim::new(rows.kp, 1, 1, 0)].to_vec()
                } else {
                    da.to_vec()
                };
                sub_zp(ctx, l.zp_a, ra, &da)?;
                sub_zp(ctx, l.zp_b, rb, &db)?;
                let src = rows.dims(broadcast);
                match l.op {
                    BinaryOp::Mul => ctx.alu(AluOp::Mul, Operand::Tensor, ra, rb, &src),
                    BinaryOp::Add => {
                        scale(ctx, &l.name, l.mul_a, ra, &da)?;
                        scale(ctx, &l.name, l.mul_b, rb, &db)?;
                        ctx.alu(AluOp::Add, Operand::Tensor, ra, rb, &src)
                    }
                }
            },
        )?;
        self.end(self.eltwise_info(&layer.name, LayerKind::Binary, tiles), k0);
        Ok(y)
    }

    /// Adds a LeakyRelu / PRelu reading `x`.
    pub fn leaky_relu(&mut self, layer: &QLeakyRelu, x: Tensor) -> Result<Tensor, BackendError> {
        let cfg = self.ctx.cfg.clone();
        super::check_acc8_reads(&cfg, &layer.name)?;
        let shape = self.shape(x);
        let c = shape[1];
        if layer.mul_neg.len() != 1 && layer.mul_neg.len() != c {
            return Err(BackendError::InvalidLayer {
                layer: layer.name.clone(),
                reason: format!("{} slopes for {c} channels", layer.mul_neg.len()),
            });
        }
        let p = layer.mul_pos;
        let larger_pos = layer.mul_neg.iter().all(|&n| p >= n);
        let larger_neg = layer.mul_neg.iter().all(|&n| p <= n);
        if !larger_pos && !larger_neg {
            return Err(unsupported(
                &self.ctx,
                &layer.name,
                "slopes on both sides of 1 in one layer (no single MAX or MIN picks the branch)"
                    .into(),
            ));
        }
        let pick = if larger_pos { AluOp::Max } else { AluOp::Min };
        let mut ep = epilogue::plan(&cfg, &layer.name, &layer.requant, None, c)?;
        if !can_scale(&self.ctx, p) {
            return Err(unsupported(
                &self.ctx,
                &layer.name,
                format!("the multiplier {p} needs ALU MUL, which this config lacks"),
            ));
        }
        let uniform = layer.mul_neg.iter().all(|&n| n == layer.mul_neg[0]);
        let neg_table = if uniform {
            if !can_scale(&self.ctx, layer.mul_neg[0]) {
                return Err(unsupported(
                    &self.ctx,
                    &layer.name,
                    format!(
                        "the slope multiplier {} needs ALU MUL, which this config lacks",
                        layer.mul_neg[0]
                    ),
                ));
            }
            None
        } else {
            let (op, t) = mul_table(&self.ctx, &layer.mul_neg).ok_or_else(|| {
                unsupported(
                    &self.ctx,
                    &layer.name,
                    "per-channel slopes need ALU MUL, which this config lacks".into(),
                )
            })?;
            ep.tables.push(t);
            Some((op, ep.tables.len() - 1))
        };
        let bo = cfg.block_out() as usize;
        let input = self.bind(x, bo, &layer.name)?;
        let consts = self.consts(&layer.name, &ep, c.div_ceil(bo));
        let (y, out) = self.produce(&format!("{}.out", layer.name), shape);
        let k0 = self.begin();
        let ops = [Operand8 {
            buf: input,
            broadcast: false,
        }];
        let l = layer.clone();
        let tiles = emit_tiles(
            &mut self.ctx,
            &layer.name,
            shape,
            &ops,
            1,
            &ep,
            consts,
            out,
            &mut |ctx, rows| {
                let (ra, rb) = (rows.at[0], rows.at[1]);
                let d = rows.dims(false);
                sub_zp(ctx, l.zp, ra, &d)?;
                ctx.reset(
                    rb,
                    &[
                        Dim::new(rows.kp, rows.len, 0, 0),
                        Dim::new(rows.len, 1, 0, 0),
                    ],
                )?;
                ctx.alu(AluOp::Add, Operand::Tensor, rb, ra, &d)?;
                scale(ctx, &l.name, l.mul_pos, ra, &d)?;
                match neg_table {
                    None => scale(ctx, &l.name, l.mul_neg[0], rb, &d)?,
                    Some((op, k)) => scale_by_table(ctx, op, rb, rows, k)?,
                }
                ctx.alu(pick, Operand::Tensor, ra, rb, &d)
            },
        )?;
        self.end(
            self.eltwise_info(&layer.name, LayerKind::LeakyRelu, tiles),
            k0,
        );
        Ok(y)
    }

    /// Adds a nearest upsampling by integer factors reading `x`.
    pub fn upsample(&mut self, layer: &QUpsample, x: Tensor) -> Result<Tensor, BackendError> {
        let cfg = self.ctx.cfg.clone();
        super::check_acc8_reads(&cfg, &layer.name)?;
        let shape = self.shape(x);
        let [_, _, h, w] = shape;
        let (fy, fx) = layer.factor;
        if fy == 0 || fx == 0 {
            return Err(BackendError::InvalidLayer {
                layer: layer.name.clone(),
                reason: format!("factors {:?}", layer.factor),
            });
        }
        let oshape = layer.output_shape(shape);
        let ow = w * fx;
        let bo = cfg.block_out() as usize;
        let input = self.bind(x, bo, &layer.name)?;
        let (y, out) = self.produce(&format!("{}.out", layer.name), oshape);
        let il = ActLayout::out(&cfg, shape);
        let ol = ActLayout::out(&cfg, oshape);
        let (nb, cb) = (il.n_blocks(), il.c_blocks());
        let half = self.ctx.budget.acc_half;
        // Per input row: the row and (when fx > 1) its widened copy.
        let per_row = w + if fx > 1 { ow } else { 0 };
        if per_row > half || fy * ow > MAX_DMA {
            return Err(no_fit(&self.ctx, &layer.name, per_row));
        }
        // Whole planes when they fit, else bands of rows of one plane.
        let (kp, th) = if h * per_row <= half {
            let kp = (half / (h * per_row)).clamp(1, cb);
            (cb.div_ceil(cb.div_ceil(kp)), h)
        } else {
            let th = (half / per_row).min(h);
            (1, h.div_ceil(h.div_ceil(th)))
        };
        let k0 = self.begin();
        let ctx = &mut self.ctx;
        let tiles = plane_tiles(nb, cb, kp, h, th);
        let mut pipe: Pipeline<()> = Pipeline::new(tiles.len(), 0);
        for t in &tiles {
            let base = pipe.acc_half() * half;
            let (i0, w0) = (base, base + kp * th * w);
            pipe.begin_tile(ctx, ());
            let loads = (0..t.kp)
                .map(|k| {
                    Dma::row(
                        MemType::Acc8,
                        i0 + k * th * w,
                        input,
                        il.elem_index(t.nb, t.cb0 + k, t.p0, 0),
                        t.len * w,
                    )
                })
                .collect();
            for d in coalesce(loads) {
                ctx.load(d)?;
            }
            let src = if fx > 1 {
                ctx.reset(
                    w0,
                    &[Dim::new(t.kp, th * ow, 0, 0), Dim::new(t.len * ow, 1, 0, 0)],
                )?;
                ctx.alu(
                    AluOp::Add,
                    Operand::Tensor,
                    w0,
                    i0,
                    &[
                        Dim::new(t.kp, th * ow, th * w, 0),
                        Dim::new(t.len * w, fx, 1, 0),
                        Dim::new(fx, 1, 0, 0),
                    ],
                )?;
                w0
            } else {
                i0
            };
            pipe.results_ready(ctx);
            for k in 0..t.kp {
                for j in 0..fy {
                    ctx.store(Dma {
                        mem: MemType::Out,
                        sram: src + k * th * ow,
                        buf: out,
                        elem: ol.elem_index(t.nb, t.cb0 + k, t.p0 * fy + j, 0),
                        y: t.len,
                        x: ow,
                        stride: fy * ow,
                        pad: [0; 4],
                    })?;
                }
            }
            pipe.end_tile(ctx);
        }
        pipe.finish()?;
        self.end(
            self.eltwise_info(&layer.name, LayerKind::Upsample, tiles.len()),
            k0,
        );
        Ok(y)
    }
}
