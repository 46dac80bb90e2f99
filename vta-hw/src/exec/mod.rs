//! The execution core: GEMM and tensor-ALU micro-op loops of [`isa::spec`] section 8, with the
//! micro-op, accumulator and output scratchpads they own.
//!
//! [`exec_core`] builds module `vta_exec`: two pipelines, `vta_exec_gemm` (GEMM, with the
//! dot-product array `vta_exec_dot_*`) and `vta_exec_alu` (ALU, with the lanes
//! `vta_exec_lane_*`), that run at once over an accumulator in two banks, with the issue
//! rules that keep every program's results those of one instruction after another
//! ([`issue`]: routing, the ALU queue, footprints and the bank stall). The compute module's
//! shell feeds it GEMM/ALU instructions and performs LOAD UOP / LOAD ACC through its write
//! ports; everything else (fetch, DMA, queues, tokens) lives outside.
//!
//! # Ports
//!
//! Widths come from the config; `A_x` is `max(1, cfg.log_depth(x))`. Clock `clk` and
//! synchronous active-high reset `rst` follow the `hdl` crate's convention.
//!
//! | port | dir | width | meaning |
//! |---|---|---|---|
//! | `insn_valid`, `insn_ready`, `insn` | in, out, in | 1, 1, 128 | a GEMM or ALU instruction, accepted when valid && ready |
//! | `done_gemm`, `done_alu` | out | 1 each | one-cycle pulse per accepted GEMM (ALU) instruction, in order among GEMMs (ALUs), once all its ACC/OUT writes are committed |
//! | `uop_wr_en`, `uop_wr_addr`, `uop_wr_data` | in | 1, A_uop, 32 | LOAD UOP write port |
//! | `inp_rd_en`, `inp_rd_addr`, `inp_rd_data` | out, out, in | 1, A_inp, elem_bits(INP) | INP read port; data is expected the cycle after `en` (and held until the next `en`) |
//! | `wgt_rd_en`, `wgt_rd_addr`, `wgt_rd_data` | out, out, in | 1, A_wgt, elem_bits(WGT) | WGT read port, likewise |
//! | `acc_wr_en`, `acc_wr_addr`, `acc_wr_data` | in | 1, A_acc, elem_bits(ACC) | LOAD ACC/ACC8 write port (also writes the OUT mirror) |
//! | `out_rd_en`, `out_rd_addr`, `out_rd_data` | in, in, out | 1, A_acc, elem_bits(OUT) | OUT read port for STORE (registered read) |
//! | `ev_gemm_uop`, `ev_alu_uop`, `ev_reset_uop` | out | 1, 1, 2 | micro-ops of that kind reaching their write stage this cycle (resets: 0..2, one per pipeline) |
//! | `busy` | out | 1 | an instruction is being issued or is in flight (high up to and including its `done` cycle) |
//! | `fault` | out | 1 | a pulse when a micro-op has an index past its buffer (spec 8: an error); that micro-op writes nothing |
//!
//! The shell must not use `uop_wr_*` / `acc_wr_*` while `busy` is high.
//!
//! # Pipelines
//!
//! Each pipeline issues at most one micro-op per cycle, and every micro-op takes the same
//! fixed path, stage by stage (stage `k` = `k` cycles after issue; the GEMM pipeline has the
//! dot-product array, the ALU pipeline the tensor operand, MUL and the activation table).
//! Nothing stalls but a GEMM micro-op in stage 2 whose `dst` bank an earlier ALU instruction
//! still holds ([`issue`]): it stays there, stages 0 and 1 wait behind it, and a bubble
//! goes on.
//!
//! | stage | work |
//! |---|---|
//! | 0 | loop generator (`o`, `i`, `u` of spec 8) issues the micro-op: UOP read |
//! | 1 | `dst`, `src`, `wgt` = micro-op fields + loop offsets, computed exactly; range checks |
//! | 2 | INP and WGT reads issued; `fault` pulse |
//! | 3 | INP/WGT data arrive; operand registers |
//! | 4 | multipliers (DSP `M` register) |
//! | 5 | post-adder (DSP `P` register) |
//! | 6 .. W-1 | adder trees, two levels per stage ([`ExecTiming::tree_stages`] stages) |
//! | W-3 | tensor ALU: ACC read of `src` |
//! | W-2 | ACC read of `dst`; tensor ALU: `src`'s row, forwarded, into register `src_row` |
//! | W-1 | `dst`'s row, forwarded, into register `x_row`; ALU operand register `y_row` (immediate or `src`'s row, forwarded) |
//! | W | forwarding from the previous slot, accumulate / ALU op / reset; result register |
//! | W+1 | ACC and OUT write, event pulses |
//! | W+2 | `done` pulse (for the instruction's last micro-op) |
//!
//! The activation table (configs with `ALU_LUT`, [`isa::spec`] 8.3) works in stage W-1, on
//! the operand row about to enter the ALU operand register: a LUTW writes its entry (the
//! low byte of operand lane `dst mod LANES`) and a LUT reads, per lane, the entry of the
//! operand saturated to int8; the entry arrives in stage W, where the lane sign-extends it.
//! A LUTW micro-op has no ACC write (`we` stays low) and checks its `dst` against the 256
//! entries instead of ACC. LUT and LUTW take no extra cycle: they issue at the rates of the
//! other ALU operations (one per cycle with an immediate, every other cycle with a tensor
//! operand), and since both act in stage W-1 a LUT sees every earlier LUTW.
//!
//! ALU MUL (configs with `ALU_MUL`) takes [`ExecTiming::mul_extra`] = 2 more cycles: stage W
//! registers its operands, W+1 its three partial products (DSP48E1 with input and product
//! registers), W+2 adds them into the result register; ACC write in W+3, `done` in W+4.
//!
//! Sequential semantics (spec 8) with no stall: results enter the result register in order,
//! and a micro-op whose `dst` (or tensor `src`) row is still being written by an earlier
//! micro-op takes that value from the result registers `res1`, `res2` (or, for `src` in
//! stage W-1, a MUL product about to enter `res1`) instead of the ACC read data. A row read
//! in cycle `c` misses the results entering `res1` at the ends of cycles `c-1`, `c` and
//! `c+1`: the first two are forwarded (from `res2`, `res1`) into the register that takes the
//! read data, the third one cycle later from `res1` (for `dst` in stage W, for `src` in
//! stage W-1). The `mul_extra` issue slots behind a MUL micro-op stay empty (but for a
//! streamed MUL behind it, which needs none of its rows), so its product is in the result
//! register before the next micro-op needs it and never meets another micro-op's result
//! there.
//!
//! Rates: GEMM and ALU with an immediate operand issue one micro-op per cycle, whatever their
//! indices. A tensor ALU micro-op needs two ACC reads and ACC has a single read port (one
//! block-RAM copy, see below), so tensor ALU micro-ops issue every other cycle (the issue slot
//! in front of each one stays empty). MUL micro-ops, immediate or tensor, issue every
//! `1 + mul_extra` cycles. Two loop shapes stream, decided from the instruction and, for a
//! tensor MUL, one registered comparison (still no stall: a micro-op that does not stream
//! keeps its kind's gap): inside one pass of the inner loop of a one-micro-op kernel
//! (`uop_end = uop_bgn + 1`), every micro-op but the pass's first issues right after the
//! previous one
//!
//! - when the inner loop keeps a tensor operand (`src_factor_in = 0`; not MUL, LUT or LUTW):
//!   the row was read for the pass's first micro-op, so the others read none and take the
//!   previous micro-op's operand row (from its stage W into `y_row`), or its result when it
//!   wrote that row (`y_in_prev`, forwarded in stage W like `dst_in_prev`). An epilogue's
//!   per-channel table row or splat row over a tile's rows is this shape;
//! - for MUL whose inner loop moves `dst` (`dst_factor_in != 0`): those micro-ops write
//!   different rows, so none needs another's product, and the multiplier pipeline takes one
//!   per cycle; their results still enter `res1` in order. With an immediate, from the
//!   pass's second micro-op; with a tensor operand the loop keeps, from its third, each
//!   unless the micro-op before it wrote the operand's row (`prev_wrote_operand`: the
//!   pass's rows rise by `dst_factor_in`, so `pass_row` follows them with one adder and is
//!   compared with the operand index at each issue); the streamed ones reuse the operand
//!   row like the case above, the one after such a write waits for its product and reads
//!   the row again. An epilogue's per-channel multiplier table is this shape.
//!
//! [`streamed_uops`] counts the micro-ops that stream.
//!
//! In each pipeline, instructions follow each other without a gap: the next one is accepted
//! in the cycle the current one issues its last micro-op. An ALU instruction reaches its
//! pipeline two cycles after `vta_exec` takes it (footprint, queue), and is taken only once
//! every GEMM before it is done. A lone instruction of `N >= 1` micro-ops accepted at cycle
//! `t` pulses `done` at `t + N + done_latency` (GEMM), `t + 2 + N + done_latency` (immediate
//! ALU), `t + 2 + 2N - 1 + done_latency` (tensor ALU) or
//! `t + 2 + 1 + (N - 1)(1 + mul_extra) + mul_done_latency` (ALU MUL), less one cycle
//! (`mul_extra` cycles) per streamed micro-op; one of zero micro-ops at
//! `t + 1 + done_latency` (plus 2 for ALU).
//!
//! # Resources
//!
//! UOP is one memory with 1 write and 3 read ports (the two pipelines and the footprint
//! stage: synthesis makes three copies); ACC and OUT are two memories each (`acc_mem0`,
//! `acc_mem1`, `out_mem0`, `out_mem1`: the banks), each with 1 write and 1 read port, so
//! each maps to one set of block RAMs in simple dual-port mode. With
//! `ALU_LUT`, the activation table is one 256 x 8 memory per lane (`lut_mem*`, 1 write port
//! shared by all, 1 read port each), so that every lane looks up in the same cycle.
//!
//! GEMM multipliers ([`Packing`]): the `BLOCK_OUT` products of one input lane `a` with the
//! weights `w_0, w_1, ...` of consecutive output channels share that input, so `n` of them
//! are computed by one signed 25 x 18 multiplier (DSP48E1) as
//!
//! `P = a * sum_j w_j * 2^(j*S) + B * sum_j 2^(j*S)`
//!
//! with `a` on the 18-bit port, the packed weights on the 25-bit port, and the constant in
//! the post-adder. `S` is the fewest bits that hold every value of an `INP_WIDTH` x
//! `WGT_WIDTH` signed product once the bias `B` (minus its smallest value) is added, so
//! `P = sum_j (a*w_j + B) * 2^(j*S)` with every `a*w_j + B` in `[0, 2^S)`: these are `P`'s
//! base-`2^S` digits, no field carries into the next, and field `j`, `P[(j+1)S-1 : jS]`, is
//! exactly `a*w_j + B`. The bias is not subtracted per product: each adder tree already adds
//! one constant (its offset-binary correction), which takes the `BLOCK_IN` biases out too,
//! so there is no correction logic. `n` is the most fields whose packed operand, at its
//! extreme values (all weights at their minimum or maximum, carries included), still fits
//! the 25-bit port:
//!
//! | INP x WGT | product range | `S` | `B` | `n` | packed operand |
//! |---|---|---|---|---|---|
//! | 8 x 8 | [-16256, 16384] | 15 | 16256 | 2 | 24 bits |
//! | 8 x 4 | [-1016, 1024] | 11 | 1016 | 2 | 16 bits |
//! | 4 x 8 | [-1016, 1024] | 11 | 1016 | 2 | 20 bits |
//! | 4 x 4 | [-56, 64] | 7 | 56 | 3 | 19 bits |
//! | 4 x 2 | [-14, 16] | 5 | 14 | 5 | 23 bits |
//! | 2 x 2 | [-2, 4] | 3 | 2 | 8 | 24 bits |
//!
//! (a fourth 4 x 4 field would need 26 bits: `-8 * (1 + 2^7 + 2^14 + 2^21) < -2^24`). The
//! packed operand is `(upper << S) + w_0`, an addition the DSP48E1's pre-adder performs
//! (yosys 0.23 maps it there, and the constant into the post-adder, in every packed
//! multiplier of the 1x4x4 int8 and 1x16x16 4 x 4 arrays), and `upper`, the fields of
//! `w_1, ...`,
//! is built without adders: field `j` is `w_j` minus the sign bit of field `j-1` (the
//! borrow a negative lower field takes from it), a `WGT_WIDTH + 1` bit decrement per field
//! from the third on. Channels are grouped `n` at a time; a last group of fewer
//! channels packs fewer fields, and a last single channel is a plain product.
//!
//! Packing is used only where it saves logic: an 8-bit product would take a DSP48E1 of its
//! own (yosys maps products of 9 bits and more to DSPs), and 4 x 4 products in LUTs are
//! the array's largest cost: the 1x16x16 4 x 4 array (`vta_exec_dot_*` alone, yosys 0.23
//! `synth_xilinx`) takes 9,748 LUTs and 6,020 flip-flops with yosys's LUT multipliers, and
//! 3,771 LUTs, 2,180 flip-flops and 80 DSP48E1 packed. A product with a 2-bit operand is
//! LUT logic by construction, one subtraction of two selected partial products
//! (`a*w = w[0]*a - 2*w[1]*a`), never a multiplier, so that yosys cannot spend a DSP48E1 on
//! it (it would on an 8 x 2 product, 10 bits); packing it would spend DSPs on what takes a
//! handful of LUTs.
//!
//! The default config, synthesized alone with yosys 0.23 `synth_xilinx -family xc7 -flatten`
//! when it was one pipeline: 176 DSP48E1 (128 for the 256 GEMM products, 3 per lane for ALU
//! MUL), about 17.2k LUTs, 6.8k flip-flops (the MUL operand and product registers are inside
//! the DSP48E1), and 8 RAMB36E1 + 72 RAMB18E1 (44 BRAM36: UOP 8, ACC 28.5, OUT 7.5).
//! Streaming (above) costs about 240 LUTs and 115 flip-flops. The two pipelines add, to the
//! whole default design (`vta hw report`), about 6.2k LUTs (1.7k of them the footprint's
//! loop spans, built from adders), 3.2k flip-flops and one BRAM36.
//!
//! Timing: no path runs from the ACC read data through a multiplier, and none from it into
//! the lanes: both rows are read a stage before they are needed and forwarded into
//! registers (block RAM output -> 3:1 mux -> flip-flop), at the cost of those registers
//! (`x_row`, `src_row`: two ACC rows of flip-flops) and no cycle. Stage W's longest paths
//! start at flip-flops: 2:1 forwarding mux -> the 32-bit compare of MIN/MAX or the SHR
//! barrel shifter -> operation mux -> result register. (Before, the ACC read data entered
//! stage W directly, and the ECP5 critical path ran from the block RAM's output through the
//! forwarding mux and the compare.) ALU MUL's 32 x 32 multiply is split into three 16 x 16
//! products, each one DSP48E1 between registers (see the README's expected critical paths
//! for the measured logic depths).

mod alu;
mod dot;
pub mod issue;
mod top;

pub use issue::ALU_QUEUE;

use hdl::{Design, Module};
use isa::{HwConfig, MemType};

/// The multiplier-input width of the DSP48E1 25x18 multiplier's wide port (the xc7 parts
/// the resource report synthesizes for): the packed weights go here.
const DSP_WIDE: u32 = 25;
/// Its narrow port: the input lane goes here.
const DSP_NARROW: u32 = 18;
/// Bits of its output `P`: every field must lie in them.
const DSP_OUT: u32 = 48;

/// How the GEMM array packs the products of one input lane with several weights into one
/// multiplier (see "GEMM multipliers" in the module docs): `fields` products spaced
/// `spacing` bits apart, each carrying `bias`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packing {
    /// Products per multiplier, `n`.
    pub fields: u32,
    /// Field spacing `S` in bits.
    pub spacing: u32,
    /// The bias `B` added to every product, which makes every field non-negative.
    pub bias: i64,
}

impl Packing {
    /// The smallest and largest products of a signed `iw`-bit and a signed `ww`-bit value.
    pub fn product_range(iw: u32, ww: u32) -> (i64, i64) {
        let ends = |w: u32| [-(1i64 << (w - 1)), (1i64 << (w - 1)) - 1];
        let products: Vec<i64> = ends(iw)
            .iter()
            .flat_map(|&a| ends(ww).map(|w| a * w))
            .collect();
        (
            *products.iter().min().expect("four products"),
            *products.iter().max().expect("four products"),
        )
    }

    /// The densest exact packing of `iw`-bit inputs and `ww`-bit weights into the DSP48E1
    /// multiplier (`fields` is 1 when not even two products fit, or when the input does not
    /// fit the narrow port), whether or not it pays (that is [`ExecParams::new`]'s choice).
    pub fn for_widths(iw: u32, ww: u32) -> Packing {
        let (lo, hi) = Self::product_range(iw, ww);
        // The fewest bits holding hi - lo + 1 values.
        let spacing = 64 - ((hi - lo) as u64).leading_zeros();
        let mut p = Packing {
            fields: 1,
            spacing,
            bias: -lo,
        };
        if iw > DSP_NARROW {
            return p;
        }
        while {
            let next = Packing {
                fields: p.fields + 1,
                ..p
            };
            next.operand_width(ww) <= DSP_WIDE && next.fields * spacing <= DSP_OUT
        } {
            p.fields += 1;
        }
        p
    }

    /// Bits of the packed weight operand: the fewest that hold, signed, every
    /// `sum_j w_j * 2^(j*S)` for `fields` weights of `ww` bits (the extremes are all weights
    /// at their minimum, or all at their maximum).
    pub fn operand_width(&self, ww: u32) -> u32 {
        let scale: i128 = (0..self.fields).map(|j| 1i128 << (j * self.spacing)).sum();
        let min = -(1i128 << (ww - 1)) * scale;
        let max = ((1i128 << (ww - 1)) - 1) * scale;
        (1..=127)
            .find(|&b| min >= -(1i128 << (b - 1)) && max < (1i128 << (b - 1)))
            .expect("fits 127 bits")
    }

    /// The packed operand of `weights` (at most `fields` of them), computed as the RTL
    /// computes it: `(digits(w_1, w_2, ...) << S) + w_0`, the addition in the DSP48E1's
    /// pre-adder. Its value is `sum_j w_j * 2^(j*S)`.
    pub fn operand(&self, weights: &[i64]) -> i64 {
        (self.digits(&weights[1..]) << self.spacing) + weights[0]
    }

    /// `sum_j w_j * 2^(j*S)` built as the RTL builds it without adders: field `j` is `w_j`
    /// minus the sign of field `j-1` (the borrow a negative lower field takes), each lower
    /// field `S` bits, the top one sign-extended.
    pub fn digits(&self, weights: &[i64]) -> i64 {
        let s = self.spacing;
        let mut borrow = 0;
        let mut packed = 0i64;
        for (j, &w) in weights.iter().enumerate() {
            let t = w - borrow; // WGT_WIDTH + 1 bits, signed
            let j = j as u32;
            packed |= if j + 1 == weights.len() as u32 {
                t << (j * s)
            } else {
                (t & ((1 << s) - 1)) << (j * s)
            };
            borrow = i64::from(t < 0);
        }
        packed
    }

    /// The constant of the post-adder for `fields` products: `B * sum_j 2^(j*S)`.
    pub fn constant(&self, fields: u32) -> i64 {
        (0..fields).map(|j| self.bias << (j * self.spacing)).sum()
    }

    /// Product `j` of the multiplier output `p`: its field, minus the bias.
    pub fn field(&self, p: i64, j: u32) -> i64 {
        ((p >> (j * self.spacing)) & ((1 << self.spacing) - 1)) - self.bias
    }
}

/// Sizes of the execution core derived from a config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecParams {
    /// `BATCH`, `BLOCK_IN`, `BLOCK_OUT`.
    pub batch: u32,
    pub block_in: u32,
    pub block_out: u32,
    /// Lane widths of INP, WGT, ACC and OUT.
    pub inp_width: u32,
    pub wgt_width: u32,
    pub acc_width: u32,
    pub out_width: u32,
    /// Address widths (`max(1, log_depth)`) of UOP, INP, WGT and ACC/OUT.
    pub a_uop: u32,
    pub a_inp: u32,
    pub a_wgt: u32,
    pub a_acc: u32,
    /// Buffer depths in elements (an index `>=` its depth is a fault).
    pub depth_uop: u32,
    pub depth_inp: u32,
    pub depth_wgt: u32,
    pub depth_acc: u32,
    /// Width of a micro-op's `src_idx` field (the wider of the INP and ACC indices).
    pub src_bits: u32,
    pub alu_mul: bool,
    /// The activation table and the LUT/LUTW operations (`ALU_LUT`).
    pub alu_lut: bool,
    /// How GEMM products share multipliers (see the module docs): `packing.fields`
    /// products per multiplier, 1 when each product is computed on its own.
    pub packing: Packing,
    /// GEMM products have a 2-bit operand and are built from partial products in LUTs.
    pub lut_products: bool,
    /// Levels of each adder tree: `log2(BLOCK_IN)`.
    pub tree_levels: u32,
    /// Bits of each dot product leaving the trees (exact, or wrapped to ACC_WIDTH).
    pub dot_width: u32,
}

impl ExecParams {
    /// The parameters of `cfg`.
    pub fn new(cfg: &HwConfig) -> ExecParams {
        let aw = |m: MemType| cfg.log_depth(m).max(1);
        let (iw, ww) = (cfg.inp_width(), cfg.wgt_width());
        let s = iw + ww;
        let lut_products = iw.min(ww) <= 2;
        let mut packing = Packing::for_widths(iw, ww);
        // Pack only products wider than 2 bits (see the module docs), and never more than
        // the channels there are.
        packing.fields = if lut_products {
            1
        } else {
            packing.fields.min(cfg.block_out())
        };
        let tree_levels = cfg.log_block_in;
        ExecParams {
            batch: cfg.batch(),
            block_in: cfg.block_in(),
            block_out: cfg.block_out(),
            inp_width: iw,
            wgt_width: ww,
            acc_width: cfg.acc_width(),
            out_width: cfg.out_width(),
            a_uop: aw(MemType::Uop),
            a_inp: aw(MemType::Inp),
            a_wgt: aw(MemType::Wgt),
            a_acc: aw(MemType::Acc),
            depth_uop: cfg.depth(MemType::Uop),
            depth_inp: cfg.depth(MemType::Inp),
            depth_wgt: cfg.depth(MemType::Wgt),
            depth_acc: cfg.depth(MemType::Acc),
            src_bits: cfg.uop_src_bits().max(1),
            alu_mul: cfg.alu_mul,
            alu_lut: cfg.alu_lut,
            packing,
            lut_products,
            tree_levels,
            dot_width: (s + tree_levels).min(cfg.acc_width()),
        }
    }

    /// Lanes of an ACC/OUT row: `BATCH * BLOCK_OUT`.
    pub fn lanes(&self) -> u32 {
        self.batch * self.block_out
    }

    /// The pipeline's stage numbers.
    pub fn timing(&self) -> ExecTiming {
        let tree_stages = self.tree_levels.div_ceil(2);
        let w = 6 + tree_stages;
        let mul_extra = if self.alu_mul {
            alu::MUL_EXTRA_STAGES
        } else {
            0
        };
        ExecTiming {
            tree_stages,
            compute_stage: w,
            write_stage: w + 1,
            done_latency: w + 2,
            mul_extra,
            mul_done_latency: w + 2 + mul_extra,
        }
    }
}

/// Stage numbers of the pipeline, counted in cycles from the micro-op's issue (stage 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExecTiming {
    /// Register stages of the adder trees.
    pub tree_stages: u32,
    /// Stage W: forwarding and the accumulate / ALU operation.
    pub compute_stage: u32,
    /// Stage W+1: the ACC/OUT write.
    pub write_stage: u32,
    /// Cycles from the issue of an instruction's last micro-op to its `done` pulse.
    pub done_latency: u32,
    /// Extra cycles of an ALU MUL micro-op (0 without ALU MUL): its product is ready in
    /// stage W + `mul_extra` and written one stage later; the `mul_extra` issue slots
    /// behind it stay empty.
    pub mul_extra: u32,
    /// [`ExecTiming::done_latency`] of an ALU MUL instruction with at least one micro-op.
    pub mul_done_latency: u32,
}

/// Timing of the core built for `cfg`.
pub fn exec_timing(cfg: &HwConfig) -> ExecTiming {
    ExecParams::new(cfg).timing()
}

/// Micro-ops of `a` that the core built for `cfg` issues right after the previous one (see
/// the rates in the module docs): in each pass of the inner loop of a one-micro-op kernel,
/// all but the first when the loop keeps a tensor operand (not MUL, LUT or LUTW), all but
/// the first for MUL with an immediate and all but the first two for MUL with a kept tensor
/// operand when the loop moves `dst`. In the last case the micro-op right after one that
/// wrote the operand row does not stream, which the instruction alone does not tell: none
/// is assumed to (compiled programs keep their constant rows apart from the rows they
/// compute), so this is an upper bound.
pub fn streamed_uops(cfg: &HwConfig, a: &isa::AluInsn) -> u64 {
    let lp = &a.lp;
    if lp.reset_reg || lp.uop_end != lp.uop_bgn + 1 {
        return 0;
    }
    let waits = if a.op == isa::AluOp::Mul && cfg.alu_mul {
        match (lp.dst_factor_in != 0, a.use_imm, lp.src_factor_in == 0) {
            (false, _, _) => return 0,
            (true, true, _) => 1,
            (true, false, true) => 2,
            (true, false, false) => return 0,
        }
    } else {
        let table = cfg.alu_lut && matches!(a.op, isa::AluOp::Lut | isa::AluOp::LutWrite);
        if a.use_imm || table || lp.src_factor_in != 0 {
            return 0;
        }
        1
    };
    u64::from(lp.iter_out) * u64::from(lp.iter_in.saturating_sub(waits))
}

/// Banks of an ACC (and OUT) of `depth_acc` rows: two, split by the row's top address bit,
/// when it has at least 4 rows; else one.
pub fn acc_banks(depth_acc: u32) -> u32 {
    if depth_acc >= 4 {
        2
    } else {
        1
    }
}

/// Builds the execution core `vta_exec` for `cfg` (see the module docs for its ports).
pub fn exec_core(cfg: &HwConfig) -> Module {
    issue::build(cfg, &ExecParams::new(cfg))
}

/// [`exec_core`] as a stand-alone design (for linting, synthesis and simulation).
pub fn exec_design(cfg: &HwConfig) -> Design {
    Design::new(exec_core(cfg))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table of the module docs.
    #[test]
    fn packings_of_the_module_docs() {
        // (INP, WGT) -> (S, B, n, packed operand bits)
        let table = [
            ((8, 8), (15, 16256, 2, 24)),
            ((8, 4), (11, 1016, 2, 16)),
            ((4, 8), (11, 1016, 2, 20)),
            ((4, 4), (7, 56, 3, 19)),
            ((4, 2), (5, 14, 5, 23)),
            ((2, 2), (3, 2, 8, 24)),
        ];
        for ((iw, ww), (s, b, n, bits)) in table {
            let p = Packing::for_widths(iw, ww);
            assert_eq!(
                (p.spacing, p.bias, p.fields, p.operand_width(ww)),
                (s, b, n, bits),
                "{iw} x {ww}"
            );
        }
        assert_eq!(Packing::product_range(4, 4), (-56, 64));
        // 16-bit inputs still fit the narrow port; 16 x 16 products do not pack.
        assert_eq!(Packing::for_widths(16, 4).fields, 2);
        assert_eq!(Packing::for_widths(16, 16).fields, 1);
    }

    /// Exhaustively, at every width pair and every group size up to `n`: the packed operand
    /// is the sum it stands for and fits the wide port (one more field would not), `P` is
    /// non-negative and within its fields, and every field minus the bias is its product.
    #[test]
    fn packing_is_exact_for_every_operand_value() {
        for iw in [2, 4, 8, 16] {
            for ww in [2, 4, 8, 16] {
                let p = Packing::for_widths(iw, ww);
                let (lo, hi) = Packing::product_range(iw, ww);
                assert!(hi - lo < 1 << p.spacing, "{iw} x {ww}: S too small");
                assert!(
                    hi - lo >= 1 << (p.spacing - 1),
                    "{iw} x {ww}: S not minimal"
                );
                assert!(p.operand_width(ww) <= DSP_WIDE, "{iw} x {ww}");
                let more = Packing {
                    fields: p.fields + 1,
                    ..p
                };
                assert!(
                    more.operand_width(ww) > DSP_WIDE || iw > DSP_NARROW,
                    "{iw} x {ww}: {} fields would fit",
                    more.fields
                );
                let values = |w: u32| -(1i64 << (w - 1))..(1i64 << (w - 1));
                for g in 2..=p.fields {
                    let pk = Packing { fields: g, ..p };
                    let width = pk.operand_width(ww);
                    let c = p.constant(g);
                    let mut ws = vec![-(1i64 << (ww - 1)); g as usize];
                    loop {
                        let op = pk.operand(&ws);
                        let sum: i64 = ws
                            .iter()
                            .enumerate()
                            .map(|(j, w)| w << (j as u32 * p.spacing))
                            .sum();
                        assert_eq!(op, sum, "{iw} x {ww}: operand of {ws:?}");
                        assert_eq!(pk.digits(&ws), sum, "{iw} x {ww}: digits of {ws:?}");
                        assert!(op >= -(1 << (width - 1)) && op < 1 << (width - 1));
                        for a in values(iw) {
                            let prod = a * op + c;
                            assert!(
                                prod >= 0 && prod < 1 << (g * p.spacing),
                                "{iw} x {ww}: P of {a} x {ws:?}"
                            );
                            for (j, w) in ws.iter().enumerate() {
                                assert_eq!(p.field(prod, j as u32), a * w, "{iw} x {ww}");
                            }
                        }
                        // The next weight tuple, odometer order.
                        let Some(j) = ws.iter().position(|&w| w < (1 << (ww - 1)) - 1) else {
                            break;
                        };
                        ws[j] += 1;
                        for w in &mut ws[..j] {
                            *w = -(1 << (ww - 1));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_configs_pack_what_pays() {
        let params = |iw: u32, ww: u32| {
            let cfg = HwConfig::load(&format!("i{iw}w{ww}a32")).expect("a width variant");
            let p = ExecParams::new(&cfg);
            (p.packing.fields, p.lut_products)
        };
        assert_eq!(params(8, 8), (2, false));
        assert_eq!(params(8, 4), (2, false));
        assert_eq!(params(4, 4), (3, false));
        // A 2-bit operand: LUT products, never packed.
        assert_eq!(params(4, 2), (1, true));
        assert_eq!(params(2, 2), (1, true));
        assert_eq!(params(8, 2), (1, true));
        assert_eq!(params(16, 16), (1, false));
    }
}
