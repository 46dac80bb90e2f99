//! Convolution geometry, tilings and the analytic cost model that chooses between them.
//!
//! # Tiles
//!
//! An output tile is `tn` sample blocks (only for "pixel" convolutions, below) x `tco`
//! output-channel blocks x `th` output rows x `tw` output columns. Its accumulators live in
//! one half of ACC (tiles alternate halves, so the epilogue and STORE of one tile overlap the
//! GEMMs of the next). Its reduction runs over *chunks* of `tci` input-channel blocks; each
//! chunk's input tile (with its halo: `(th-1)*sh + KH` rows by `(tw-1)*sw + KW` columns per
//! channel block) and weight tiles are loaded into one half of INP and WGT (chunks alternate
//! halves, so the loads of chunk `i+1` overlap the GEMMs of chunk `i`: VTA's two virtual
//! threads). A load is skipped when its half still holds the same data from two chunks
//! before; this is what makes weights (or inputs) stay resident when a tile needs a single
//! chunk and consecutive tiles share them.
//!
//! Tiles are visited in one of two [`LoopOrder`]s: output-channel tiles outermost (weights
//! stay resident across the spatial tiles of one channel tile) or spatial tiles outermost
//! (inputs stay resident across channel tiles).
//!
//! A *resident* tiling ([`Tiling::resident`]) gives up the halves when the layer's input
//! chunks and weight chunks all fit the whole of INP and WGT: each gets a place of its own
//! and is loaded once, and since nothing is overwritten the loads run ahead of the GEMMs
//! without waiting for them. Output-channel tiles go outermost, so the first tiles need the
//! first channel tile's weights only, and later channel tiles find every input in place
//! (ResNet-18's layer3 downsample: 35.8 k -> 33.3 k cycles on the RTL).
//!
//! A resident tiling may be *tapered* ([`Tiling::taper`], [`co_splits`]): its channel tiles
//! start at `tco` blocks and halve down to an eighth of that. Where the first channel tile
//! needs the whole input and the layer's loads take about as long as its GEMMs (ResNet-18's
//! layer4 downsample), a small first tile leaves the core waiting for the input; a large
//! one keeps it busy meanwhile, and the small last ones leave a short epilogue and store at
//! the end (30.2 k instead of 31.6 k cycles on the RTL). Each tile's GEMMs cover the
//! epilogue and store of the tile before; where they do not, the model counts the wait.
//!
//! *Pixel* convolutions (`H = W = 1`, 1x1 kernel, no padding: dense layers and 1x1 convs
//! after global pooling) tile over sample blocks instead of pixels, so a dense layer is a GEMM
//! over the batch whose weights are fetched once per batch tile, not per sample.
//!
//! # Cost model
//!
//! [`estimate`] predicts, for one tiling, the DRAM bytes of every load and store (exact for
//! `groups == 1`: the reuse rule above is evaluated analytically from the loop order, and the
//! zero padding the LOAD pads produce is not counted, as in the simulator's counters), the
//! instructions of each module, the DMA rows (bursts), and the micro-ops. From these it
//! models time on a decoupled access-execute machine with one shared AXI port:
//!
//! ```text
//! T_mem     = (bytes + 16 * instructions) / (AXI_DATA_WIDTH / 8) + 8 * dma_rows
//!             (3 for the one-element rows of skipped columns)
//! G, E     = gemm_uops + GEMM resets, epilogue_issue_cycles + ALU resets (the two pipelines)
//! T_compute = max(G, E) + min(G, E) / tiles + 12 * tiles
//!             (tapered: min(G, E) * last tile's share, and the waits for a half)
//!           + (ACC and UOP bytes) / (AXI_DATA_WIDTH / 8) + 4 * compute_instructions
//! fill      = time to load the first tile's chunks, less its GEMMs but the last chunk's
//!             (at least the first chunk's load), + time to store the last tile
//! cycles    = max(T_mem, T_compute) + fill
//! score     = cycles + 0.5 * T_mem
//! ```
//!
//! A tile's accumulator reset is on the GEMM pipeline for the first tile, and for every tile
//! when the chunks are too short to hide it on the ALU pipeline ([`early_reset`]).
//! The epilogue's micro-ops count at the execution core's issue rates (one cycle per row
//! and instruction: with the rows in the inner loop every epilogue instruction streams, see
//! [`super::roofline::streamed_uops`]). The core's ALU pipeline runs a tile's epilogue while
//! its GEMM pipeline computes the next tile (in the other ACC half), so a tile costs the
//! longer of the two; the shorter one shows once, at the end, and each tile's epilogue
//! first waits for its GEMMs to drain (about 12 cycles). The compute
//! module performs the ACC (constant rows) and UOP loads itself, so their bus time is compute
//! time. `fill` is what double buffering cannot hide (so enormous tiles lose), and the `T_mem`
//! term makes traffic count even when a layer is compute-bound (DRAM energy, and bandwidth
//! left to other bus masters), so that among tilings of equal speed the one moving the
//! fewest bytes wins.
//! [`choose`] enumerates every feasible tiling whose tile sizes are balanced splits of their
//! dimension (`ceil(X / k)` for `k = 1..X`), in both loop orders (and, for strided 1x1
//! kernels, with and without column subsampling), and returns the one with the lowest score.
//! A tiling is feasible when the input tile fits half of INP, the weights of one chunk half
//! of WGT, the accumulators plus the tile's constant rows half of ACC, and every loop extent
//! and DMA field fits its instruction field.

use isa::{HwConfig, MemType};

use super::epilogue::Epilogue;
use super::layout::WeightLayout;
use super::BackendError;
use crate::qlayer::QConv2d;

/// Largest GEMM/ALU loop extent (`iter_out`/`iter_in`).
pub const MAX_ITER: usize = isa::layout::MAX_ITER as usize;
/// Largest LOAD/STORE size or stride (`y_size`, `x_size`, `x_stride`).
pub const MAX_DMA: usize = isa::layout::MAX_DMA_SIZE as usize;
/// Largest LOAD pad (`y_pad_0` ... `x_pad_1`).
pub const MAX_PAD: usize = isa::layout::MAX_PAD as usize;

/// Scratchpad capacities (in elements) and element sizes of a config.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    pub inp_half: usize,
    pub wgt_half: usize,
    pub acc_half: usize,
    pub uop_depth: usize,
    pub inp_eb: usize,
    pub wgt_eb: usize,
    pub acc_eb: usize,
    pub out_eb: usize,
    pub bus_bytes: f64,
    /// ALU instructions of an accumulator reset on the ALU pipeline
    /// ([`super::epilogue::zeroing`]).
    pub zero_ops: usize,
}

impl Budget {
    pub fn new(cfg: &HwConfig) -> Self {
        let d = |m| cfg.depth(m) as usize;
        let e = |m| cfg.elem_bytes(m) as usize;
        Budget {
            inp_half: d(MemType::Inp) / 2,
            wgt_half: d(MemType::Wgt) / 2,
            acc_half: d(MemType::Acc) / 2,
            uop_depth: d(MemType::Uop),
            inp_eb: e(MemType::Inp),
            wgt_eb: e(MemType::Wgt),
            acc_eb: e(MemType::Acc),
            out_eb: e(MemType::Out),
            bus_bytes: f64::from(cfg.axi_data_width) / 8.0,
            zero_ops: super::epilogue::zeroing(cfg).len(),
        }
    }

    /// GEMM cycles that pass, after a tile's last GEMM, until its ACC half is free again: its
    /// epilogue (`ep_cycles` per row) and the store of its `rows` rows (one OUT element per
    /// cycle at least, or the bus beats it takes), with some slack for their latencies.
    pub fn drain_cycles(&self, ep_cycles: usize, rows: usize) -> u64 {
        let store = (self.out_eb as f64 / self.bus_bytes).ceil().max(1.0) as u64;
        rows as u64 * (ep_cycles as u64 + store) + DRAIN_SLACK
    }

    /// Micro-ops per GEMM instruction, so that both halves' kernels and the epilogue's stay
    /// resident in the micro-op buffer together.
    pub fn kernel_limit(&self) -> usize {
        (self.uop_depth / 4).max(1)
    }
}

/// Cycles [`Budget::drain_cycles`] adds for the latencies of an epilogue and a store.
const DRAIN_SLACK: u64 = 64;

/// Where a tile's accumulator reset runs ahead of the tile, on the ALU pipeline: after
/// chunk `j` of the tile before it (whose chunks have the GEMM micro-ops `chunk_uops`), the
/// first chunk by whose end `wait` cycles of GEMMs have passed (the time its ACC half takes
/// to drain, [`Budget::drain_cycles`]) and whose later chunks, at least one, take `reset`
/// cycles or more (so that the reset, beside them, delays nothing). `None`: the tile resets
/// its accumulators itself, on the GEMM pipeline.
pub fn early_reset(chunk_uops: &[u64], wait: u64, reset: u64) -> Option<usize> {
    let total: u64 = chunk_uops.iter().sum();
    let mut before = 0;
    for (j, &u) in chunk_uops
        .iter()
        .enumerate()
        .take(chunk_uops.len().saturating_sub(1))
    {
        before += u;
        if before >= wait {
            return (total - before >= reset).then_some(j);
        }
    }
    None
}

/// The chunk after which, in the tile before, the accumulators of the second tile (`[0]`)
/// and of each later tile (`[1]`) are reset on the ALU pipeline ([`early_reset`], as if
/// every tile were full: `acc_tile` rows and `cpt` chunks of `chunk_uops` GEMM micro-ops).
/// The second tile's half has nothing to drain. The cost model passes the chunks'
/// micro-ops of an ungrouped convolution, the emission those it counts in the first chunk:
/// they agree but for grouped convolutions (whose output blocks read fewer input blocks).
pub fn early_resets(
    b: &Budget,
    ep_cycles: usize,
    acc_tile: usize,
    chunk_uops: u64,
    cpt: usize,
) -> [Option<usize>; 2] {
    let chunks = vec![chunk_uops; cpt];
    let reset = (acc_tile * b.zero_ops) as u64;
    [0, b.drain_cycles(ep_cycles, acc_tile)].map(|wait| early_reset(&chunks, wait, reset))
}

/// Per tile of a tapered tiling ([`Tiling::taper`]), the chunk of the tile before after which
/// its accumulators are reset on the ALU pipeline ([`early_reset`] with each tile's own
/// size: the tile two before drains its rows, the tile before gives its chunks' GEMMs, of
/// `tci` input-channel blocks each over `union` blocks and `khw` kernel taps).
pub fn tapered_early_resets(
    b: &Budget,
    ep_cycles: usize,
    tiles: &[Tile],
    union: usize,
    tci: usize,
    khw: usize,
) -> Vec<Option<usize>> {
    (0..tiles.len())
        .map(|i| {
            let before = &tiles[i.checked_sub(1)?];
            let chunks: Vec<u64> = splits(union, tci)
                .map(|(_, len)| (before.rows() * len * khw) as u64)
                .collect();
            let wait = match i.checked_sub(2) {
                Some(k) => b.drain_cycles(ep_cycles, tiles[k].rows()),
                None => 0,
            };
            early_reset(&chunks, wait, (tiles[i].rows() * b.zero_ops) as u64)
        })
        .collect()
}

/// The output-channel tiles of `cob` blocks under `t`, as (first block, blocks): `tco`
/// blocks each (the last one the rest), or tapered ([`Tiling::taper`]): `tco` blocks, then
/// each tile half the one before (rounded up), down to an eighth of `tco` (rounded up).
pub fn co_splits(cob: usize, t: &Tiling) -> Vec<(usize, usize)> {
    if !t.taper {
        return splits(cob, t.tco).collect();
    }
    let floor = t.tco.div_ceil(8);
    let (mut out, mut at, mut size) = (Vec::new(), 0, t.tco);
    while at < cob {
        let len = size.min(cob - at);
        out.push((at, len));
        at += len;
        size = size.div_ceil(2).max(floor);
    }
    out
}

/// Which tiles are outermost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LoopOrder {
    /// Output-channel tiles outermost: a channel tile's weights stay resident across its
    /// spatial tiles.
    CoOuter,
    /// Spatial (and sample) tiles outermost: an input tile stays resident across the
    /// output-channel tiles.
    SpatialOuter,
}

/// One tiling of a convolution (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tiling {
    /// Sample blocks per tile (pixel convolutions; 1 otherwise).
    pub tn: usize,
    /// Output rows per tile.
    pub th: usize,
    /// Output columns per tile.
    pub tw: usize,
    /// Output-channel blocks per tile.
    pub tco: usize,
    /// Input-channel blocks per chunk.
    pub tci: usize,
    pub order: LoopOrder,
    /// Strided 1x1 kernels: load only the used input columns (one DMA row per element)
    /// instead of whole row segments.
    pub col_skip: bool,
    /// Output-channel tiles outermost, and every chunk's input tile and weight tiles in a
    /// place of their own in the whole of INP and WGT (when the layer's fit), so that each
    /// is loaded once: the spatial tiles' inputs stay for the later channel tiles, and the
    /// first channel tile starts on its own weights, a fraction of the layer's.
    pub resident: bool,
    /// With `resident`: output-channel tiles of decreasing size ([`co_splits`]). The first,
    /// large one keeps the GEMMs busy while the input arrives (its chunks' weights are most
    /// of what each chunk loads), the small last ones leave a short epilogue and store at
    /// the end; each tile's GEMMs cover the epilogue and store of the tile before.
    pub taper: bool,
}

/// What the cost model predicts for one tiling.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CostEstimate {
    pub inp_bytes: u64,
    pub wgt_bytes: u64,
    pub acc_bytes: u64,
    pub uop_bytes: u64,
    pub out_bytes: u64,
    pub load_insns: u64,
    pub compute_insns: u64,
    pub store_insns: u64,
    pub dma_rows: u64,
    pub gemm_uops: u64,
    /// Accumulator resets on the GEMM pipeline (the rest are ALU micro-ops).
    pub reset_uops: u64,
    pub alu_uops: u64,
    pub tiles: u64,
    pub chunks: u64,
    pub t_mem: f64,
    pub t_compute: f64,
    pub cycles: f64,
    pub score: f64,
}

impl CostEstimate {
    /// Bytes read from DRAM by every LOAD.
    pub fn load_bytes(&self) -> u64 {
        self.inp_bytes + self.wgt_bytes + self.acc_bytes + self.uop_bytes
    }
    pub fn insns(&self) -> u64 {
        self.load_insns + self.compute_insns + self.store_insns
    }
}

/// The shape of a convolution, checked, in blocks.
#[derive(Debug, Clone, PartialEq)]
pub struct ConvGeom {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub o: usize,
    pub kh: usize,
    pub kw: usize,
    pub sh: usize,
    pub sw: usize,
    /// [top, left, bottom, right].
    pub pad: [usize; 4],
    pub oh: usize,
    pub ow: usize,
    pub groups: usize,
    /// Sample blocks.
    pub nb: usize,
    /// Input-channel blocks.
    pub cib: usize,
    /// Output-channel blocks.
    pub cob: usize,
    /// `H = W = 1`, 1x1 kernel, no padding: tiles run over sample blocks.
    pub pixel: bool,
    /// `KH = 1` and a vertical stride: the input tile keeps only the rows used.
    pub row_skip: bool,
    pub wl: WeightLayout,
    /// Per-channel table rows per output-channel block, and splat rows, of the epilogue.
    pub tables: usize,
    pub splats: usize,
    /// ALU instructions of the epilogue.
    pub ep_ops: usize,
    /// Cycles the epilogue's micro-ops take to issue per accumulator row
    /// ([`Epilogue::issue_cycles`]).
    pub ep_cycles: usize,
    /// A residual add is fused into the epilogue ([`super::epilogue::with_residual`]): each
    /// tile loads the shortcut beside its accumulators.
    pub residual: bool,
    /// GEMM passes over the weights: 1, or the digits of weights wider than the lanes
    /// ([`super::slice`]). Every tile runs its chunks once per pass.
    pub passes: usize,
    /// Digit planes of the output ([`super::out_digits`]): 1, or for outputs wider than the
    /// lanes one per digit, each computed beside the accumulators (the value shifted right
    /// by the digits below it) and stored, in `out_planes` times the tile's ACC rows.
    pub out_planes: usize,
}

fn invalid(layer: &str, reason: String) -> BackendError {
    BackendError::InvalidLayer {
        layer: layer.into(),
        reason,
    }
}

impl ConvGeom {
    /// Checks `layer` and derives its geometry for `cfg`.
    pub fn new(cfg: &HwConfig, layer: &QConv2d, ep: &Epilogue) -> Result<Self, BackendError> {
        let name = layer.name.as_str();
        let [n, c, h, w] = layer.input_shape;
        let &[o, cg, kh, kw] = layer.weight.shape() else {
            return Err(invalid(name, "weight is not 4-D".into()));
        };
        let g = layer.groups;
        if n == 0 || c == 0 || h == 0 || w == 0 || o == 0 || kh == 0 || kw == 0 {
            return Err(invalid(
                name,
                format!(
                    "empty tensor: input {:?}, weight {:?}",
                    layer.input_shape,
                    layer.weight.shape()
                ),
            ));
        }
        if g == 0 || c % g != 0 || o % g != 0 || cg * g != c {
            return Err(invalid(
                name,
                format!("{c} input channels, {o} output channels and weight {:?} do not match {g} groups", layer.weight.shape()),
            ));
        }
        if layer.bias.len() != o {
            return Err(invalid(
                name,
                format!("{} biases for {o} output channels", layer.bias.len()),
            ));
        }
        let (sh, sw) = layer.stride;
        if sh == 0 || sw == 0 {
            return Err(invalid(name, "zero stride".into()));
        }
        let pad = layer.pad;
        if h + pad[0] + pad[2] < kh || w + pad[1] + pad[3] < kw {
            return Err(invalid(
                name,
                "the kernel is larger than the padded input".into(),
            ));
        }
        let unsupported = |reason: String| BackendError::Unsupported {
            layer: name.into(),
            config: cfg.config_string(),
            reason,
        };
        if pad[1] > MAX_PAD || pad[3] > MAX_PAD {
            return Err(unsupported(format!(
                "horizontal padding {}/{} exceeds the LOAD x-pad field (at most {MAX_PAD})",
                pad[1], pad[3]
            )));
        }
        let [_, _, oh, ow] = layer.output_shape();
        let (bb, bi, bo) = (
            cfg.batch() as usize,
            cfg.block_in() as usize,
            cfg.block_out() as usize,
        );
        let (nb, cib, cob) = (n.div_ceil(bb), c.div_ceil(bi), o.div_ceil(bo));
        let pixel = h == 1 && w == 1 && kh == 1 && kw == 1 && pad == [0; 4];
        let row_skip = kh == 1 && sh > 1;
        let wl = WeightLayout::new(cfg, o, c, g, kh, kw);
        // DMA strides must fit their 16-bit fields.
        let stride_need = [
            (w * if row_skip { sh } else { 1 }, "input row stride"),
            (cib, "input channel-block stride"),
            (ow, "output row stride"),
            (cob, "output channel-block stride"),
        ];
        for (v, what) in stride_need {
            if v > MAX_DMA {
                return Err(unsupported(format!(
                    "{what} {v} exceeds the 16-bit DMA stride field"
                )));
            }
        }
        Ok(ConvGeom {
            n,
            c,
            h,
            w,
            o,
            kh,
            kw,
            sh,
            sw,
            pad,
            oh,
            ow,
            groups: g,
            nb,
            cib,
            cob,
            pixel,
            row_skip,
            wl,
            tables: ep.tables.len(),
            splats: ep.splats.len(),
            ep_ops: ep.ops.len(),
            ep_cycles: ep.issue_cycles(),
            residual: ep.has_shortcut(),
            passes: super::slice::passes(cfg.wgt_width(), layer.weight.iter()),
            out_planes: super::out_digits(cfg, layer.requant.lo.into(), layer.requant.hi.into()),
        })
    }

    /// ACC rows a tile of `acc_tile` accumulator rows needs before its constants (with a
    /// fused residual add, the shortcut's as many more; with output digit planes, one set
    /// per plane).
    pub fn acc_rows(&self, acc_tile: usize) -> usize {
        acc_tile * (self.out_planes + usize::from(self.residual))
    }

    /// Input rows a tile of `th` output rows reads (SRAM rows of its input tile).
    pub fn in_rows(&self, th: usize) -> usize {
        if self.row_skip {
            th
        } else {
            (th - 1) * self.sh + self.kh
        }
    }

    /// Input columns a tile of `tw` output columns reads.
    pub fn in_cols(&self, tw: usize, col_skip: bool) -> usize {
        if col_skip {
            tw
        } else {
            (tw - 1) * self.sw + self.kw
        }
    }

    /// (first input row, SRAM rows, input-row step) of the tile starting at output row `oh0`.
    pub fn row_span(&self, oh0: usize, th: usize) -> (isize, usize, usize) {
        let start = (oh0 * self.sh) as isize - self.pad[0] as isize;
        let step = if self.row_skip { self.sh } else { 1 };
        (start, self.in_rows(th), step)
    }

    /// (first input column, SRAM columns, input-column step) of the tile at output column `ow0`.
    pub fn col_span(&self, ow0: usize, tw: usize, col_skip: bool) -> (isize, usize, usize) {
        let start = (ow0 * self.sw) as isize - self.pad[1] as isize;
        let step = if col_skip { self.sw } else { 1 };
        (start, self.in_cols(tw, col_skip), step)
    }

    /// Input-channel blocks `[lo, hi)` read by output-channel blocks `ob0 .. ob0 + tco`.
    pub fn union(&self, ob0: usize, tco: usize) -> (usize, usize) {
        let r = &self.wl.cb_range[ob0..ob0 + tco];
        (
            r.iter().map(|x| x.0).min().unwrap_or(0),
            r.iter().map(|x| x.1).max().unwrap_or(0),
        )
    }

    /// Weight tiles of output-channel block `ob` that fall in input-channel blocks `[c0, c1)`.
    pub fn wgt_tiles(&self, ob: usize, c0: usize, c1: usize) -> usize {
        let (lo, hi) = self.wl.cb_range[ob];
        hi.min(c1).saturating_sub(lo.max(c0)) * self.kh * self.kw
    }

    /// GEMM micro-ops of the whole layer, every pass (every tiling runs exactly these).
    pub fn gemm_uops(&self) -> u64 {
        let per_pixel: usize = (0..self.cob)
            .map(|ob| self.wgt_tiles(ob, 0, self.cib))
            .sum();
        (self.nb * self.oh * self.ow * per_pixel * self.passes) as u64
    }
}

/// Indices `r in 0..count` with `0 <= start + r*step < limit`, as a range.
pub fn valid_span(start: isize, count: usize, step: usize, limit: usize) -> (usize, usize) {
    let step = step as isize;
    let r0 = if start >= 0 {
        0
    } else {
        ((-start) + step - 1) / step
    } as usize;
    let r1 = if start >= limit as isize {
        0
    } else {
        (((limit as isize - start) + step - 1) / step) as usize
    };
    let r1 = r1.min(count);
    (r0.min(r1), r1)
}

/// `(start, len)` of the tiles of size `t` over `0..total`.
pub fn splits(total: usize, t: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..total)
        .step_by(t.max(1))
        .map(move |s| (s, t.min(total - s)))
}

/// Balanced tile sizes of a dimension: `ceil(x / k)` for `k = 1..=x`.
pub fn candidates(x: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (1..=x).map(|k| x.div_ceil(k)).collect();
    v.dedup();
    v
}

/// How many times a chunk is loaded, when its key repeats every `period` positions of a
/// sequence of `reps` repetitions and loads are skipped when the same key sat `d` positions
/// back (`d == 0`: never skipped).
fn loads(reps: usize, period_ok: bool, d: usize) -> usize {
    if d > 0 && period_ok {
        reps.min(d)
    } else {
        reps
    }
}

/// Whether a convolution loads its whole constant table (tables for all `cob` channel blocks,
/// then the splat rows) once into each ACC half, rather than each tile's blocks' rows when the
/// half holds another tile's: when the whole table fits beside a tile's `acc_tile`
/// accumulator rows and that takes fewer loads than the `per_tile_loads` of the other way (each
/// one waits on the compute module for the DMA, often behind a weight burst).
pub fn whole_tables(
    b: &Budget,
    g: &ConvGeom,
    acc_tile: usize,
    tiles: usize,
    per_tile_loads: usize,
) -> bool {
    g.tables + g.splats > 0
        && g.acc_rows(acc_tile) + g.tables * g.cob + g.splats <= b.acc_half
        && tiles.min(2) < per_tile_loads
}

/// Cycles the load engine spends on a one-element DMA row beside its bytes (the input
/// columns a strided 1x1 convolution skips): 2.8 to 3.3 on the RTL for the shape of
/// ResNet-18's layer3 downsample (its busy cycles less the bytes' bus cycles, per row),
/// against about 8 for a row of a longer transfer.
const ELEMENT_ROW_CYCLES: f64 = 3.0;

/// Predicts the cost of `t` for `g`, or `None` when it does not fit the config.
pub fn estimate(b: &Budget, g: &ConvGeom, t: &Tiling) -> Option<CostEstimate> {
    let khw = g.kh * g.kw;
    let (th, tw, tco, tn) = (t.th, t.tw, t.tco, t.tn);
    if t.col_skip && !(g.kw == 1 && g.sw > 1) {
        return None;
    }
    if g.pixel && (th != 1 || tw != 1) || !g.pixel && tn != 1 {
        return None;
    }
    // Per output-channel tile: the union of input-channel blocks, chunks, weight tiles.
    let co_tiles = co_splits(g.cob, t);
    if t.taper && !(t.resident && co_tiles != splits(g.cob, tco).collect::<Vec<_>>()) {
        return None; // tapered only when resident, and when that changes the tiles
    }
    // A tapered tiling's tiles differ in size: the model follows them one by one.
    let tapered = t.taper.then(|| output_tiles(g, t));
    let mut max_u = 0;
    let mut max_w = 0;
    let mut chunk_counts = Vec::with_capacity(co_tiles.len());
    let mut union_sum = 0;
    let mut uniform_u = true;
    let first_u = g.union(0, co_tiles[0].1);
    for &(ob0, len) in &co_tiles {
        let (lo, hi) = g.union(ob0, len);
        uniform_u &= (lo, hi) == first_u;
        max_u = max_u.max(hi - lo);
        union_sum += hi - lo;
        chunk_counts.push((hi - lo).div_ceil(t.tci));
        if g.groups == 1 {
            max_w = max_w.max(len * t.tci.min(g.cib) * khw);
        } else {
            for (c0, cl) in splits(hi - lo, t.tci) {
                let wt: usize = (ob0..ob0 + len)
                    .map(|ob| g.wgt_tiles(ob, lo + c0, lo + c0 + cl))
                    .sum();
                max_w = max_w.max(wt);
            }
        }
    }
    if t.tci > max_u && t.tci != 1 {
        return None; // equivalent to a smaller tci
    }
    // A bit-sliced layer ([`super::slice`]) runs each tile's chunks once per pass, each
    // pass's weights in the halves (a resident tiling would need places for every pass).
    let passes = g.passes;
    if passes > 1 && t.resident {
        return None;
    }
    let tci = t.tci.min(max_u);
    let cpt = chunk_counts[0];
    let uniform_c = chunk_counts.iter().all(|&c| c == cpt);
    // Capacities.
    let pitch = if g.pixel {
        tn
    } else {
        g.in_rows(th) * g.in_cols(tw, t.col_skip)
    };
    let acc_tile = if g.pixel { tn * tco } else { tco * th * tw };
    let tab_rows = g.tables * tco + g.splats;
    // Tile counts.
    let h_tiles: Vec<(usize, usize)> = splits(g.oh, th).collect();
    let w_tiles: Vec<(usize, usize)> = splits(g.ow, tw).collect();
    let n_tiles = if g.pixel { g.nb.div_ceil(tn) } else { g.nb };
    let s_tiles = n_tiles * h_tiles.len() * w_tiles.len();
    let k_tiles = co_tiles.len();
    let tiles = s_tiles * k_tiles;
    let chunk_sum: usize = chunk_counts.iter().sum();
    // A resident tiling's places: one per input chunk (the channel tiles share one input
    // union) and one per weight chunk (its channel tile's weights for the chunk), in the
    // whole buffers.
    let (inp_places, wgt_places) = (s_tiles * cpt, chunk_sum);
    let (inp_room, wgt_room, halves) = if t.resident {
        if !(uniform_u && uniform_c && g.groups == 1 && t.order == LoopOrder::CoOuter) {
            return None;
        }
        let weights: usize = co_tiles.iter().map(|&(_, len)| len * max_u * khw).sum();
        (inp_places * tci * pitch, weights, 2)
    } else {
        (tci * pitch, max_w, 1)
    };
    if inp_room > halves * b.inp_half
        || wgt_room > halves * b.wgt_half
        || g.acc_rows(acc_tile) + tab_rows > b.acc_half
        || th * tw > MAX_ITER
        || tco > MAX_ITER
        || tn > MAX_ITER
        || tci > MAX_DMA
    {
        return None;
    }
    // Valid input rows/columns summed over the spatial tiles.
    let (mut sum_vr, mut sum_in_rows) = (0usize, 0usize);
    for &(oh0, len) in &h_tiles {
        let (s, cnt, st) = g.row_span(oh0, len);
        let (r0, r1) = valid_span(s, cnt, st, g.h);
        sum_vr += r1 - r0;
        sum_in_rows += cnt;
    }
    let mut sum_vc = 0usize;
    for &(ow0, len) in &w_tiles {
        let (s, cnt, st) = g.col_span(ow0, len, t.col_skip);
        let (c0, c1) = valid_span(s, cnt, st, g.w);
        sum_vc += c1 - c0;
    }
    // Reuse distance: one chunk per tile reuses the tile two back, two chunks the tile one
    // back (chunks alternate halves); more chunks never reuse. (A pass is a chunk.)
    let d = match (uniform_c, cpt * passes) {
        (true, 1) => 2,
        (true, 2) => 1,
        _ => 0,
    };
    // f_inp: loads of each (spatial tile, chunk); f_wgt: loads of each (channel tile, chunk).
    let (f_inp, f_wgt, f_tab) = match t.order {
        LoopOrder::CoOuter => (
            if uniform_u {
                loads(k_tiles, d % s_tiles.max(1) == 0, d / s_tiles.max(1))
            } else {
                k_tiles
            },
            loads(s_tiles, true, d),
            loads(s_tiles, true, 2),
        ),
        LoopOrder::SpatialOuter => (
            if uniform_u {
                loads(k_tiles, true, d)
            } else {
                k_tiles
            },
            loads(s_tiles, d % k_tiles == 0, d / k_tiles),
            loads(s_tiles, 2 % k_tiles == 0, 2 / k_tiles),
        ),
    };
    let (f_inp, f_wgt) = if t.resident { (1, 1) } else { (f_inp, f_wgt) };
    // The passes of a tile read the same input chunks: with one or two chunks they stay in
    // their halves (approximately: one chunk takes a second half at the second pass); with
    // more, every pass loads them again.
    let inp_passes = if cpt <= 2 { 1 } else { passes };
    // With a non-uniform union, every channel tile reads its own input blocks.
    let inp_blocks_per_pass = inp_passes * if uniform_u { max_u * f_inp } else { union_sum };
    let (inp_elems, inp_insns, inp_rows) = if g.pixel {
        let e = g.nb * inp_blocks_per_pass;
        let loads_n = n_tiles
            * inp_passes
            * if uniform_u {
                cpt * f_inp
            } else {
                chunk_counts.iter().sum()
            };
        (e, loads_n, g.nb * loads_n / n_tiles.max(1))
    } else {
        let per_block = g.nb * sum_vr * sum_vc;
        let e = per_block * inp_blocks_per_pass;
        let blocks_loaded = g.nb * h_tiles.len() * w_tiles.len() * inp_blocks_per_pass;
        if t.col_skip {
            let insns = g.nb * w_tiles.len() * sum_in_rows * inp_blocks_per_pass;
            (e, insns, e)
        } else {
            (
                e,
                blocks_loaded,
                g.nb * sum_vr * w_tiles.len() * inp_blocks_per_pass,
            )
        }
    };
    let total_w_tiles: usize = (0..g.cob).map(|ob| g.wgt_tiles(ob, 0, g.cib)).sum();
    let wgt_elems = total_w_tiles * passes * f_wgt;
    let wgt_loads = chunk_sum * passes * f_wgt;
    let regular = g.groups == 1;
    let wgt_insns = wgt_loads * if regular { 1 } else { tco };
    // A chunk's weights: one DMA row per output-channel block of its tile (one in all when
    // a tile has a single chunk).
    let wgt_rows = if cpt == 1 && regular {
        wgt_loads
    } else if t.taper {
        co_tiles.iter().map(|&(_, len)| len * cpt).sum::<usize>() * passes * f_wgt
    } else {
        wgt_loads * tco
    };
    // Tables, outputs.
    let (tab_loads, tab_bytes) = if whole_tables(b, g, acc_tile, tiles, k_tiles * f_tab) {
        let loads = tiles.min(2);
        (loads, (g.tables * g.cob + g.splats) * loads * b.acc_eb)
    } else {
        let loads = k_tiles * f_tab;
        (
            loads,
            (g.tables * g.cob * f_tab + g.splats * loads) * b.acc_eb,
        )
    };
    let tab_insns = tab_loads * (usize::from(g.tables > 0) + usize::from(g.splats > 0));
    let out_rows_total = g.nb * g.cob * g.oh * g.ow; // output elements
                                                     // A full tile stores all its channel blocks in one 2D transfer when each block's rows
                                                     // are one DRAM row (full-width tiles, or one-row tiles); otherwise one per block.
    let full_h = h_tiles.iter().filter(|h| h.1 == th).count();
    let full_w = w_tiles.iter().filter(|w| w.1 == tw).count();
    let store_insns = if g.pixel {
        tiles
    } else if tw == g.ow {
        g.nb * (full_h * k_tiles + (h_tiles.len() - full_h) * g.cob)
    } else if th == 1 {
        g.nb * h_tiles.len() * (full_w * k_tiles + (w_tiles.len() - full_w) * g.cob)
    } else {
        g.nb * h_tiles.len() * w_tiles.len() * g.cob
    };
    let store_rows = if g.pixel {
        g.nb * k_tiles
    } else if tw == g.ow {
        g.nb * h_tiles.len() * g.cob
    } else {
        g.nb * g.cob * g.oh * w_tiles.len()
    };
    // Micro-ops and the GEMM kernel.
    let gemm_uops = g.gemm_uops();
    // Accumulator resets: on the ALU pipeline for the tiles `early_resets` says, else on
    // the GEMM pipeline.
    let chunk = (acc_tile * tci * khw) as u64;
    let (early_tiles, alu_resets) = if let Some(all) = &tapered {
        let early = tapered_early_resets(b, g.ep_cycles, all, max_u, tci, khw);
        let resets = all.iter().zip(&early).filter(|(_, e)| e.is_some());
        (resets.clone().count(), resets.map(|(t, _)| t.rows()).sum())
    } else {
        let [second, later] = early_resets(b, g.ep_cycles, acc_tile, chunk, cpt * passes);
        let early_tiles = usize::from(tiles > 1 && second.is_some())
            + usize::from(later.is_some()) * tiles.saturating_sub(2);
        let alu_resets = match early_tiles {
            0 => 0,
            1 => output_tiles(g, t).get(1).map_or(0, Tile::rows),
            // All but the first, a full tile.
            _ => out_rows_total - acc_tile,
        };
        (early_tiles, alu_resets)
    };
    let reset_uops = (out_rows_total - alu_resets) as u64;
    // (A bit-sliced layer's accumulators are shifted between its passes.)
    let shifts = passes - 1;
    // (Each output digit plane past the first: zeroed, the value added, shifted: the ADD's
    // tensor operand takes a second cycle.)
    let planes = g.out_planes - 1;
    let plane_ops = planes * (b.zero_ops + 2);
    let alu_uops =
        (out_rows_total * (g.ep_ops + shifts + plane_ops) + alu_resets * b.zero_ops) as u64;
    let pairs = if regular { tci * khw } else { tci.min(2) * khw };
    let mut dims = if g.pixel {
        vec![tn, tco]
    } else {
        vec![tco, th, tw]
    };
    dims.sort_unstable();
    let rest: usize = dims[..dims.len() - 2].iter().product();
    let kernel = (rest * pairs).min(b.kernel_limit());
    // Kernels differ per edge-tile shape and per (ACC half, INP/WGT half) pair.
    let variants = 1
        + usize::from(h_tiles.len() * th != g.oh)
        + usize::from(w_tiles.len() * tw != g.ow)
        + usize::from(k_tiles * tco != g.cob);
    // A resident tiling's kernels differ per (ACC half, input place, weight place).
    let kernels = if t.resident {
        (2 * inp_places * wgt_places).min(chunk_sum * s_tiles)
    } else if uniform_c && cpt == 1 {
        2
    } else {
        4
    };
    let uop_bytes = if t.taper {
        // A kernel per chunk; a tile's kernel runs over its own channel blocks.
        let per_tile: usize = co_tiles
            .iter()
            .map(|&(_, len)| {
                let mut d = [len, th, tw];
                d.sort_unstable();
                cpt * (d[0] * pairs).min(b.kernel_limit())
            })
            .sum();
        let spatial_variants =
            1 + usize::from(h_tiles.len() * th != g.oh) + usize::from(w_tiles.len() * tw != g.ow);
        (s_tiles * per_tile * spatial_variants * isa::UOP_BYTES) as u64
    } else {
        (kernels * kernel * variants * isa::UOP_BYTES) as u64
    };
    let gemm_insns = tiles
        * passes
        * if uniform_c {
            cpt
        } else {
            chunk_sum / k_tiles.max(1) + 1
        };
    let load_insns = (inp_insns + wgt_insns) as u64;
    // A fused residual add's shortcut: loaded (ACC8) as the outputs are stored.
    let res = usize::from(g.residual);
    let short_bytes = res * out_rows_total * b.out_eb;
    let reset_insns = tiles - early_tiles + early_tiles * b.zero_ops;
    let compute_insns = (gemm_insns
        + tiles * (g.ep_ops + shifts + plane_ops)
        + reset_insns
        + tab_insns
        + 2 * variants
        + res * store_insns) as u64;
    // Every output digit plane is stored like the outputs.
    let (store_insns, store_rows) = (store_insns * g.out_planes, store_rows * g.out_planes);
    let store_insns = store_insns as u64;
    let mut e = CostEstimate {
        inp_bytes: (inp_elems * b.inp_eb) as u64,
        wgt_bytes: (wgt_elems * b.wgt_eb) as u64,
        acc_bytes: (tab_bytes + short_bytes) as u64,
        uop_bytes,
        out_bytes: (out_rows_total * g.out_planes * b.out_eb) as u64,
        load_insns,
        compute_insns,
        store_insns,
        dma_rows: (inp_rows + wgt_rows + (1 + res) * store_rows + tab_insns) as u64,
        gemm_uops,
        reset_uops,
        alu_uops,
        tiles: tiles as u64,
        chunks: (chunk_sum * s_tiles * passes) as u64,
        ..Default::default()
    };
    let bytes = e.load_bytes() + e.out_bytes;
    // A DMA row costs about 8 cycles beside its beats; the one-element rows of skipped
    // columns, back to back in one transfer, fewer.
    let element_rows = if t.col_skip && !g.pixel { inp_rows } else { 0 };
    e.t_mem = (bytes + isa::INSN_BYTES as u64 * e.insns()) as f64 / b.bus_bytes
        + 8.0 * (e.dma_rows as usize - element_rows) as f64
        + ELEMENT_ROW_CYCLES * element_rows as f64;
    let alu_cycles = (out_rows_total * (g.ep_cycles + shifts + plane_ops + planes)
        + alu_resets * b.zero_ops) as f64;
    let gemm_cycles = (gemm_uops + reset_uops) as f64;
    // The last tile's rows (its epilogue and store are not hidden), and for tapered tiles
    // the GEMM pipeline's waits for a half whose epilogue and store take longer than the
    // GEMMs of the tile between.
    let (last_rows, tail_share, taper_waits) = if let Some(all) = &tapered {
        // Tile i + 2 waits for tile i's half while tile i + 1's GEMMs do not cover its drain.
        let waits: u64 = all
            .windows(2)
            .map(|w| {
                let gemms = (w[1].rows() * max_u * khw) as u64;
                b.drain_cycles(g.ep_cycles, w[0].rows())
                    .saturating_sub(gemms)
            })
            .sum();
        let last = all.last().map_or(acc_tile, Tile::rows);
        (last, last as f64 / out_rows_total as f64, waits as f64)
    } else {
        (acc_tile, 1.0 / tiles as f64, 0.0)
    };
    e.t_compute = gemm_cycles.max(alu_cycles)
        + gemm_cycles.min(alu_cycles) * tail_share
        + taper_waits
        + 12.0 * tiles as f64
        + ((tab_bytes + short_bytes) as u64 + uop_bytes) as f64 / b.bus_bytes
        + 4.0 * compute_insns as f64;
    // The first tile's GEMMs wait for its chunks' loads where these are the slower.
    // (With skipped columns, its input is one-element rows, which the load engine takes
    // longer to fetch than their bytes.)
    let first_chunk = (tci * pitch * b.inp_eb + max_w * b.wgt_eb) as f64 / b.bus_bytes
        + if element_rows > 0 {
            ELEMENT_ROW_CYCLES * (tci * pitch) as f64
        } else {
            0.0
        };
    let first_tile =
        first_chunk + (cpt * passes - 1) as f64 * (first_chunk - chunk as f64).max(0.0);
    let last_store = (last_rows * g.out_planes * b.out_eb) as f64 / b.bus_bytes;
    e.cycles = e.t_mem.max(e.t_compute) + first_tile + last_store;
    e.score = e.cycles + 0.5 * e.t_mem;
    Some(e)
}

/// One output tile (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tile {
    pub nb0: usize,
    pub tn: usize,
    pub oh0: usize,
    pub th: usize,
    pub ow0: usize,
    pub tw: usize,
    pub ob0: usize,
    pub tco: usize,
}

impl Tile {
    /// Its accumulator rows.
    pub fn rows(&self) -> usize {
        self.tn * self.tco * self.th * self.tw
    }
}

/// The output tiles of `g` under `t`, in the order they are computed.
pub fn output_tiles(g: &ConvGeom, t: &Tiling) -> Vec<Tile> {
    let mut spatial = Vec::new();
    let n_tiles: Vec<(usize, usize)> = if g.pixel {
        splits(g.nb, t.tn).collect()
    } else {
        (0..g.nb).map(|n| (n, 1)).collect()
    };
    for &(nb0, tn) in &n_tiles {
        for (oh0, th) in splits(g.oh, t.th) {
            for (ow0, tw) in splits(g.ow, t.tw) {
                spatial.push((nb0, tn, oh0, th, ow0, tw));
            }
        }
    }
    let co = co_splits(g.cob, t);
    let mut out = Vec::with_capacity(spatial.len() * co.len());
    let mk = |s: (usize, usize, usize, usize, usize, usize), c: (usize, usize)| Tile {
        nb0: s.0,
        tn: s.1,
        oh0: s.2,
        th: s.3,
        ow0: s.4,
        tw: s.5,
        ob0: c.0,
        tco: c.1,
    };
    match t.order {
        LoopOrder::CoOuter => {
            for &c in &co {
                for &s in &spatial {
                    out.push(mk(s, c));
                }
            }
        }
        LoopOrder::SpatialOuter => {
            for &s in &spatial {
                for &c in &co {
                    out.push(mk(s, c));
                }
            }
        }
    }
    out
}

/// Every tiling the search considers for `g`.
pub fn search_space(g: &ConvGeom) -> Vec<Tiling> {
    let max_u = (0..g.cob)
        .map(|ob| g.wl.cb_range[ob].1 - g.wl.cb_range[ob].0)
        .max()
        .unwrap_or(1);
    let (ths, tws, tns) = if g.pixel {
        (vec![1], vec![1], candidates(g.nb))
    } else {
        (candidates(g.oh), candidates(g.ow), vec![1])
    };
    // A tile of several output blocks reads the union of their input blocks.
    let tcis = candidates(g.cib.max(max_u));
    let skips: &[bool] = if g.kw == 1 && g.sw > 1 {
        &[false, true]
    } else {
        &[false]
    };
    let mut out = Vec::new();
    for &tco in &candidates(g.cob) {
        for &tci in &tcis {
            for &th in &ths {
                for &tw in &tws {
                    for &tn in &tns {
                        for &col_skip in skips {
                            for (order, resident, taper) in [
                                (LoopOrder::CoOuter, false, false),
                                (LoopOrder::SpatialOuter, false, false),
                                (LoopOrder::CoOuter, true, false),
                                (LoopOrder::CoOuter, true, true),
                            ] {
                                out.push(Tiling {
                                    tn,
                                    th,
                                    tw,
                                    tco,
                                    tci,
                                    order,
                                    col_skip,
                                    resident,
                                    taper,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// The feasible tiling with the lowest score (ties: fewer instructions, then the first).
pub fn choose(
    cfg: &HwConfig,
    layer: &str,
    g: &ConvGeom,
) -> Result<(Tiling, CostEstimate), BackendError> {
    let b = Budget::new(cfg);
    let mut best: Option<(Tiling, CostEstimate)> = None;
    for t in search_space(g) {
        if let Some(e) = estimate(&b, g, &t) {
            let better = match &best {
                None => true,
                Some((_, be)) => {
                    e.score < be.score || (e.score == be.score && e.insns() < be.insns())
                }
            };
            if better {
                best = Some((t, e));
            }
        }
    }
    best.ok_or_else(|| BackendError::Unsupported {
        layer: layer.into(),
        config: cfg.config_string(),
        reason: format!(
            "no tiling fits the scratchpads: one output pixel of one channel block needs {} \
             INP elements (half of INP holds {}), {} weight tiles (half of WGT holds {}) and \
             {} ACC rows (half of ACC holds {})",
            g.kh * g.kw,
            b.inp_half,
            g.kh * g.kw,
            b.wgt_half,
            1 + g.tables + g.splats,
            b.acc_half
        ),
    })
}
