//! Depthwise convolutions (`groups == C == O`, one input channel per output channel) on the
//! ALU, at their real multiply count.
//!
//! # Why not the GEMM core
//!
//! A GEMM micro-op multiplies one input vector (`BLOCK_IN` lanes) by a whole
//! `BLOCK_OUT x BLOCK_IN` weight tile, so every output lane sums over the *same* input lanes.
//! A depthwise output channel reads only its own input channel: with channels in the lanes the
//! weight tile is diagonal and `BLOCK_IN - 1` of every `BLOCK_IN` products multiply a zero
//! (the block-diagonal lowering of [`super::conv`] does `BLOCK_IN` times the real MACs: 16x
//! on the default config). Putting pixels in the lanes instead (a Toeplitz weight tile)
//! still needs at least `ceil((4 + KH - 1) * (4 + KW - 1) / 16)` input vectors per 4x4 output
//! patch (about 5x the real MACs for 3x3), and a pixels-in-lanes activation layout nothing
//! else produces. The ALU works lane by lane, channels in lanes, so it multiplies exactly the
//! real products.
//!
//! # The lowering
//!
//! Tiles are `kp` channel planes (BLOCK_OUT channels each) x `th` whole output rows of one
//! sample block, double-buffered over the two halves of ACC like the pooling layers of
//! [`super::eltwise`]; where one whole output row does not fit (planes hundreds of pixels
//! wide, as in a detector's first layers), one row is cut into bands of `tw` columns. Per
//! tile:
//!
//! 1. LOAD ACC8 the input band (`(th-1)*SH + KH` rows of `(tw-1)*SW + KW` columns, the
//!    convolution's zero padding as LOAD pads) of each plane, and, when the half does not hold
//!    them already, the tile's constant rows: the epilogue's tables and one weight row per
//!    kernel tap (`KH*KW` rows per channel block: lane `n` holds the tap's weight of channel
//!    `n`).
//! 2. Per tap `(ky, kx)`: copy the tap's input window into a product buffer (reset, `ADD`
//!    tensor with the input band's strides), `MUL` tensor it by the tap's weight row (a source
//!    step of 0 over the pixels), `ADD` it into the accumulators. The first tap multiplies in
//!    the accumulators directly.
//! 3. The requantization epilogue ([`super::epilogue`], bias included), then STORE.
//!
//! Wrapping int32 arithmetic is associative, so the sum in tap order equals the reference's
//! bit for bit.
//!
//! # Cost, and the choice
//!
//! Device MACs (ALU MUL lanes) equal the real MACs (up to channel padding to BLOCK_OUT),
//! against `BLOCK_IN` times as many for the diagonal GEMM. Issue time per output row and tap
//! is 1 (reset) + 2 (`ADD` tensor) + 1 (`MUL` by the tap's weight row, which the execution
//! core streams: [`super::roofline::streamed_uops`]) + 2 (`ADD` tensor) = 6 cycles on today's
//! execution core ([`super::roofline::IssueRates::RTL`]; 8 before it streamed) against 1
//! GEMM micro-op, so a depthwise layer takes more cycles than with the diagonal GEMM.
//! Measured (`compiler/tests/e2e_mobilenet_v2.rs`, `backend_depthwise.rs`; default config):
//!
//! | | ALU (default) | diagonal GEMM |
//! |---|---|---|
//! | MobileNetV2 at 64x64: device MACs / real MACs | 1.049 | 2.035 |
//! | its compute bound / memory bound (cycles, from the instruction streams) | 1 107 446 / 651 518 | 526 361 / 745 721 |
//! | its cycles on the RTL simulator | 1 577 599 (1 901 507 before streaming) | 1 052 544 (1 188 855) |
//! | one depthwise layer (32 ch, 6x6, 3x3 stride 2) on the RTL simulator | 2 566 cycles (2 862) | 1 421 cycles (1 465) |
//!
//! The ALU lowering is the default because it is what the network asks for: the device does
//! the network's real multiplies and no more (the goal of device MACs at most 1.3x the real
//! ones on MobileNet-style networks), while the diagonal GEMM multiplies `BLOCK_IN - 1` zeros
//! (15 by default) for every useful product. It costs latency: 1.5x the cycles of a whole
//! MobileNetV2 on today's core, whose tensor ALU micro-ops with changing operand rows issue
//! every other cycle (a second ACC read port, [`super::roofline::IssueRates::TENSOR_ALU_1`],
//! would take 2 of the 6 cycles per tap off). Where latency matters more than MAC efficiency, [`NetBuilder::set_depthwise_alu`]
//! (`vta compile --depthwise-on-gemm`) takes the diagonal GEMM. Configs without `ALU_MUL`
//! always use the GEMM, and so do depthwise convolutions with a channel multiplier (two or
//! more output channels per input channel: output lane `n` would need input lane `n / m`).
//!
//! [`NetBuilder::set_depthwise_alu`]: super::NetBuilder::set_depthwise_alu

use isa::builder::{Buf, Operand};
use isa::{AluOp, MemType};

use super::eltwise::{epilogue, load_tables, load_window, plane_tiles, PlaneTile, Window};
use super::emit::{coalesce, Ctx, Dim, Dma, Pipeline};
use super::epilogue::Epilogue;
use super::layout::ActLayout;
use super::tiling::{splits, ConvGeom, MAX_ITER};
use super::BackendError;
use crate::qlayer::QConv2d;

/// Whether `layer` is a depthwise convolution this lowering takes on `cfg`: one input and one
/// output channel per group (and more than one group), on a config with ALU MUL.
pub fn applies(cfg: &isa::HwConfig, layer: &QConv2d) -> bool {
    let c = layer.input_shape[1];
    let o = layer.weight.shape().first().copied().unwrap_or(0);
    // The ALU reads the input through 8-bit ACC loads.
    cfg.alu_mul && cfg.inp_width() == 8 && layer.groups > 1 && layer.groups == c && o == c
}

/// The tiling of a depthwise convolution: `kp` channel planes x `th` output rows x `tw`
/// output columns (`tw < OW` only with `th = 1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DwTiling {
    pub kp: usize,
    pub th: usize,
    pub tw: usize,
    /// ACC rows of one plane's input band, products and accumulators.
    pub in_pitch: usize,
    pub out_pitch: usize,
}

fn in_rows(g: &ConvGeom, th: usize) -> usize {
    (th - 1) * g.sh + g.kh
}

fn in_cols(g: &ConvGeom, tw: usize) -> usize {
    (tw - 1) * g.sw + g.kw
}

/// The tiling that fits half of ACC with the most output rows (then the most planes); when
/// one whole output row does not fit, one row in the widest column bands that do.
/// `Unsupported` when not even one output pixel of one plane fits.
pub fn plan(ctx: &Ctx, layer: &str, g: &ConvGeom, ep: &Epilogue) -> Result<DwTiling, BackendError> {
    let half = ctx.budget.acc_half;
    let tabs = ep.tables.len();
    let per_plane = |th: usize, tw: usize| in_rows(g, th) * in_cols(g, tw) + 2 * th * tw + tabs;
    let fits =
        |th: usize, tw: usize| per_plane(th, tw) + ep.splats.len() <= half && th * tw <= MAX_ITER;
    let tiling = |kp: usize, th: usize, tw: usize| DwTiling {
        kp,
        th,
        tw,
        in_pitch: in_rows(g, th) * in_cols(g, tw),
        out_pitch: th * tw,
    };
    if let Some(th) = (1..=g.oh).rev().find(|&th| fits(th, g.ow)) {
        let th = g.oh.div_ceil(g.oh.div_ceil(th));
        let kp = if th == g.oh {
            ((half - ep.splats.len()) / per_plane(th, g.ow)).clamp(1, g.cob)
        } else {
            1
        };
        return Ok(tiling(g.cob.div_ceil(g.cob.div_ceil(kp)), th, g.ow));
    }
    let Some(tw) = (1..g.ow).rev().find(|&tw| fits(1, tw)) else {
        return Err(BackendError::Unsupported {
            layer: layer.into(),
            config: ctx.cfg.config_string(),
            reason: format!(
                "one output pixel of one channel block needs {} ACC rows but half of ACC holds {half}",
                per_plane(1, 1) + ep.splats.len()
            ),
        });
    };
    Ok(tiling(1, 1, g.ow.div_ceil(g.ow.div_ceil(tw))))
}

/// The epilogue with the weights appended as per-channel tables (tap `ky*KW + kx` is table
/// `ep.tables.len() + ky*KW + kx`), so that one constant segment holds both.
pub fn with_weight_tables(layer: &QConv2d, ep: &Epilogue) -> Epilogue {
    let mut all = ep.clone();
    let (o, _, kh, kw) = layer.weight.dim();
    for ky in 0..kh {
        for kx in 0..kw {
            all.tables.push(
                (0..o)
                    .map(|c| i32::from(layer.weight[[c, 0, ky, kx]]))
                    .collect(),
            );
        }
    }
    all
}

/// ALU MUL lane operations of the layer: its device MACs.
pub fn device_macs(cfg: &isa::HwConfig, g: &ConvGeom) -> u64 {
    let lanes = (cfg.batch() * cfg.block_out()) as u64;
    (g.nb * g.cob * g.oh * g.ow * g.kh * g.kw) as u64 * lanes
}

/// Emits depthwise convolution `g` (input and output in the BLOCK_OUT layout) with tiling
/// `t`; `ep` is [`with_weight_tables`]'s epilogue and `consts` its constant segment. Returns
/// the number of tiles.
pub fn emit(
    ctx: &mut Ctx,
    g: &ConvGeom,
    t: &DwTiling,
    ep: &Epilogue,
    input: Buf,
    out: Buf,
    consts: Buf,
) -> Result<usize, BackendError> {
    let il = ActLayout::out(&ctx.cfg, [g.n, g.c, g.h, g.w]);
    let ol = ActLayout::out(&ctx.cfg, [g.n, g.o, g.oh, g.ow]);
    let half = ctx.budget.acc_half;
    let (ip, op, kp) = (t.in_pitch, t.out_pitch, t.kp);
    let khw = g.kh * g.kw;
    let w_table0 = ep.tables.len() - khw;
    // Each plane tile in column bands (one band of the whole width when rows fit).
    let tiles: Vec<(PlaneTile, (usize, usize))> = plane_tiles(g.nb, g.cob, kp, g.oh, t.th)
        .into_iter()
        .flat_map(|tile| splits(g.ow, t.tw).map(move |band| (tile, band)))
        .collect();
    let mut pipe: Pipeline<(usize, usize)> = Pipeline::new(tiles.len(), 0);
    for (tile, (q0, tw)) in &tiles {
        let (tile, q0, tw) = (tile, *q0, *tw);
        let cols = in_cols(g, tw);
        let ab = pipe.acc_half() * half;
        let (i0, acc, prod) = (ab, ab + kp * ip, ab + kp * (ip + op));
        // Constant rows: table `k` of plane `j` at `tab + k * tile.kp + j`.
        let tab = ab + kp * (ip + 2 * op);
        if pipe.begin_tile(ctx, (tile.cb0, tile.kp)) {
            load_tables(ctx, ep, Some(consts), tab, tile.cb0, tile.kp, g.cob)?;
        }
        // The input band of every plane, zero padded.
        let win = Window {
            r: (tile.p0 * g.sh) as isize - g.pad[0] as isize,
            rows: in_rows(g, tile.len),
            c: (q0 * g.sw) as isize - g.pad[1] as isize,
            cols,
        };
        load_window(ctx, MemType::Acc8, input, &il, tile, win, i0, ip)?;
        let pixels = tile.len * tw;
        // Over the tile's outputs, reading the input band at a tap's offset.
        let window = [
            Dim::new(tile.kp, op, ip, 0),
            Dim::new(tile.len, tw, g.sh * cols, 0),
            Dim::new(tw, 1, g.sw, 0),
        ];
        // Over the tile's outputs, reading one row per plane (a weight table).
        let per_plane = [Dim::new(tile.kp, op, 1, 0), Dim::new(pixels, 1, 0, 0)];
        let reset = |ctx: &mut Ctx, at: usize| {
            ctx.reset(
                at,
                &[Dim::new(tile.kp, op, 0, 0), Dim::new(pixels, 1, 0, 0)],
            )
        };
        for ky in 0..g.kh {
            for kx in 0..g.kw {
                let tap = ky * g.kw + kx;
                let dst = if tap == 0 { acc } else { prod };
                reset(ctx, dst)?;
                ctx.alu(
                    AluOp::Add,
                    Operand::Tensor,
                    dst,
                    i0 + ky * cols + kx,
                    &window,
                )?;
                let w = tab + (w_table0 + tap) * tile.kp;
                ctx.alu(AluOp::Mul, Operand::Tensor, dst, w, &per_plane)?;
                if tap > 0 {
                    ctx.alu(
                        AluOp::Add,
                        Operand::Tensor,
                        acc,
                        prod,
                        &[Dim::new(tile.kp, op, op, 0), Dim::new(pixels, 1, 1, 0)],
                    )?;
                }
            }
        }
        epilogue(ctx, ep, acc, op, tile.kp, pixels, tab)?;
        pipe.results_ready(ctx);
        // Whole rows, or one band of one row: contiguous either way.
        let stores = (0..tile.kp)
            .map(|k| {
                let at = ol.elem_index(tile.nb, tile.cb0 + k, tile.p0, q0);
                Dma::row(MemType::Out, acc + k * op, out, at, pixels)
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
