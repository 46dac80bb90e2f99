//! One lane of the compute stage: GEMM accumulate, the ALU operations of spec 8.2, and reset.
//!
//! Combinational. Ports: `x` (the lane's old ACC value), `y` (the ALU operand: immediate or
//! `ACC[src]`), `d` (the GEMM dot product, sign-extended), `gemm`, `clear` (`reset_reg`),
//! `op` (`alu_opcode`); output `r`, the lane's new value.

use hdl::{Module, ModuleBuilder};
use isa::AluOp;

use super::ExecParams;

pub(super) fn lane_module(p: &ExecParams) -> Module {
    let aw = p.acc_width;
    let log_aw = aw.trailing_zeros();
    let name = format!("vta_exec_lane_a{aw}{}", if p.alu_mul { "_mul" } else { "" });
    let m = ModuleBuilder::new(&name);
    let x = m.input("x", aw);
    let y = m.input("y", aw);
    let d = m.input("d", aw);
    let gemm = m.input("gemm", 1);
    let clear = m.input("clear", 1);
    let op = m.input("op", 3);

    // GEMM accumulate and ALU ADD share one adder (both wrap).
    let sum = m.named("sum", x + m.mux(gemm, d, y));
    let (xs, ys) = (x.as_signed(), y.as_signed());
    let lt = m.named("lt", xs.lt(ys));
    let min = m.mux(lt, x, y);
    let max = m.mux(lt, y, x);
    // SHR: s = low (LOG_ACC_WIDTH + 1) bits of y, signed; s >= 0 shifts right (arithmetic),
    // s < 0 shifts left by -s (1 ..= ACC_WIDTH; a shift by ACC_WIDTH gives 0).
    let s = y.slice(log_aw, 0);
    let right = xs.shr_by(s.slice(log_aw - 1, 0)).as_unsigned();
    let left = x.shl_by(-s);
    let shr = m.named("shr", m.mux(s.msb(), left, right));
    let mut arms = vec![
        (AluOp::Min as u64, min),
        (AluOp::Max as u64, max),
        (AluOp::Add as u64, sum),
        (AluOp::Shr as u64, shr),
    ];
    if p.alu_mul {
        // The low ACC_WIDTH bits of the product are the same signed or unsigned.
        let mul = m.named("mul", (x * y).trunc(aw));
        arms.push((AluOp::Mul as u64, mul));
    }
    let alu = m.case(op, &arms, sum);
    let r = m.mux(gemm, sum, alu);
    m.output_from("r", m.mux(clear, m.zero(aw), r));
    m.finish().expect("the ALU lane is well formed")
}
