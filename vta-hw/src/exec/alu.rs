//! One lane of the ALU pipeline's compute stage: the ALU operations of spec 8.2, and reset.
//!
//! Ports: `x` (the lane's old ACC value), `y` (the ALU operand: immediate or `ACC[src]`),
//! `clear` (`reset_reg`), `op` (`alu_opcode`), and with `ALU_LUT` `t` (the lane's activation-table entry, read by the
//! core one stage earlier); output `r`, the lane's new value for every operation but MUL,
//! combinational. LUT's result is `t` sign-extended; LUTW writes no ACC row, so its `r` is
//! never used.
//!
//! With ALU MUL, the product takes [`MUL_EXTRA_STAGES`] more cycles so that no path runs from
//! the ACC read through a multiplier: `mul_load` (stage W: the micro-op is a MUL) registers
//! `x` and `y`; `mul_step` (stage W+1) registers three half-width partial products, one
//! DSP48E1 each with its input and product registers; output `p` (stage W+2) is the low
//! ACC_WIDTH bits of `x * y`, combinational from those registers (two short adders).

use hdl::{Module, ModuleBuilder, Sig};
use isa::AluOp;

use super::ExecParams;

/// Cycles a MUL result comes after the other operations' results.
pub(super) const MUL_EXTRA_STAGES: u32 = 2;

pub(super) fn lane_module(p: &ExecParams) -> Module {
    let aw = p.acc_width;
    let log_aw = aw.trailing_zeros();
    let name = format!(
        "vta_exec_lane_a{aw}{}{}",
        if p.alu_mul { "_mul" } else { "" },
        if p.alu_lut { "_lut" } else { "" }
    );
    let m = ModuleBuilder::new(&name);
    let x = m.input("x", aw);
    let y = m.input("y", aw);
    let clear = m.input("clear", 1);
    let op = m.input("op", 3);

    // The result is one chain of 2:1 selections, each operation's logic inside its own arm
    // and read once: a simulator then computes only the selected arm (Verilator turns the
    // chain into nested C++ conditionals), and synthesis sees the same function.
    let (xs, ys) = (x.as_signed(), y.as_signed());
    let is = |o: AluOp| op.eq(o as u64);
    // ADD and the operations without an arm of their own (MUL, whose result is `p`) share
    // one adder (it wraps).
    const _: () = assert!(AluOp::Min as u64 == 0 && AluOp::Max as u64 == 1);
    let min_max = op.slice(2, 1).eq(0u64);
    let mut own_arm = min_max | is(AluOp::Shr);
    if p.alu_lut {
        own_arm = own_arm | is(AluOp::Lut);
    }
    let sum = x + y;
    // MIN and MAX share one compare: the result is x when `x < y` differs from "MAX"
    // (op bit 0, within this arm).
    let pick_x = xs.lt(ys) ^ op.bit(0);
    let min_or_max = m.mux(pick_x, x, y);
    // SHR: s = low (LOG_ACC_WIDTH + 1) bits of y, signed; s >= 0 shifts right (arithmetic),
    // s < 0 shifts left by -s (1 ..= ACC_WIDTH; a shift by ACC_WIDTH gives 0).
    let s = y.slice(log_aw, 0);
    let right = xs.shr_by(s.slice(log_aw - 1, 0)).as_unsigned();
    let left = x.shl_by(-s);
    let shr = m.mux(s.msb(), left, right);
    let other = if p.alu_lut {
        let t = m.input("t", 8);
        m.mux(is(AluOp::Shr), shr, t.as_signed().sext(aw).as_unsigned())
    } else {
        shr
    };
    let alu = m.mux(min_max, min_or_max, other);
    let r = m.mux(!own_arm, sum, alu);
    m.output_from("r", m.mux(clear, m.zero(aw), r));
    if p.alu_mul {
        let load = m.input("mul_load", 1);
        let step = m.input("mul_step", 1);
        m.output_from("p", mul_pipeline(&m, x, y, load, step));
    }
    m.finish().expect("the ALU lane is well formed")
}

/// The low `x.width()` bits of `x * y` (the same signed or unsigned), two register stages
/// after `x`, `y`: with halves `x = xh*2^h + xl`, `y = yh*2^h + yl`, it is
/// `xl*yl + ((xh*yl + xl*yh) mod 2^(aw-h)) * 2^h`, three multipliers of at most
/// `(aw/2) x (aw/2)` bits (16 x 16 for ACC_WIDTH 32: one DSP48E1 each, no cascade).
fn mul_pipeline<'a>(
    m: &'a ModuleBuilder,
    x: Sig<'a>,
    y: Sig<'a>,
    load: Sig<'a>,
    step: Sig<'a>,
) -> Sig<'a> {
    let aw = x.width();
    let h = aw / 2;
    let mx = pipe_reg(m, "mul_x", x, load);
    let my = pipe_reg(m, "mul_y", y, load);
    let (xl, xh) = (mx.slice(h - 1, 0), mx.slice(aw - 1, h));
    let (yl, yh) = (my.slice(h - 1, 0), my.slice(aw - 1, h));
    let low = pipe_reg(m, "mul_ll", xl * yl, step);
    let hl = pipe_reg(m, "mul_hl", (xh * yl).trunc(aw - h), step);
    let lh = pipe_reg(m, "mul_lh", (xl * yh).trunc(aw - h), step);
    let high = low.slice(aw - 1, h) + hl + lh;
    m.cat(&[high, low.slice(h - 1, 0)])
}

/// A register without reset loading `value` when `en`.
fn pipe_reg<'a>(m: &'a ModuleBuilder, name: &str, value: Sig<'a>, en: Sig<'a>) -> Sig<'a> {
    let r = m.reg_noreset(name, value.width());
    m.next_when(r, en, value);
    r
}
