//! The execution core in Verilator against a reference written from `isa::spec`: random
//! GEMM/ALU programs (every ALU op, immediate and tensor operands, resets, empty loops,
//! micro-op sequences that hit the same rows back to back), exact ACC and OUT contents,
//! event counts, faults, and the issue rate checked cycle by cycle.
//!
//! Each config's model is built once per test binary (the default config takes a minute or
//! two the first time; later runs load it from the cache).

#[path = "exec_common.rs"]
mod common;

use common::*;
use isa::{AluInsn, AluOp, DepFlags, GemmInsn, Insn, MemType, Uop, UopLoop};
use vta_hw::exec::exec_timing;

/// Every test here needs Verilator: fail with the install hint rather than pass vacuously.
fn verilator_available() -> bool {
    if let Err(e) = hdl::verilator::verilator_version() {
        panic!("{e}: install Verilator with `apt-get install verilator g++` (./test.sh does)");
    }
    true
}

/// Loads fresh random contents into the core and the reference.
fn setup(core: &mut Core, r: &mut Reference, rng: &mut Rng, n_uops: usize) {
    randomize(r, rng, n_uops);
    core.set_operands(r);
    core.write_uops(0, &r.uop[..n_uops]);
    core.write_acc(0, &r.acc);
    // LOAD ACC writes the OUT mirror too (spec 9).
    let rows = r.acc.len();
    for (row, got) in core.read_out(rows).iter().enumerate() {
        assert_eq!(
            *got,
            r.out_row(row),
            "{}: OUT row {row} after LOAD ACC",
            core.name
        );
    }
}

fn random_programs(name: &str, rounds: usize, insns: usize, seed: u64) {
    if !verilator_available() {
        return;
    }
    let mut core = Core::new(name);
    let mut r = Reference::new(&core.cfg);
    let mut rng = Rng::new(seed);
    let n_uops = (core.cfg.depth(MemType::Uop) as usize - 1).min(48);
    let mut uops_run = 0;
    for round in 0..rounds {
        setup(&mut core, &mut r, &mut rng, n_uops);
        let prog: Vec<Insn> = (0..insns)
            .map(|_| random_insn(&r, &mut rng, n_uops))
            .collect();
        // Mostly back to back; sometimes the shell is slow.
        let gaps: Vec<u64> = prog
            .iter()
            .map(|_| if rng.chance(15) { rng.below(14) } else { 0 })
            .collect();
        let log = core.run(&prog, &gaps).to_vec();
        for i in &prog {
            r.exec(i);
        }
        uops_run += prog.iter().map(uop_count).sum::<u64>();
        check_timing(&core.cfg, &log, &r.uop);
        assert_eq!(core.faults, 0, "{name}: unexpected fault");
        assert_eq!(
            core.events, r.counts,
            "{name}: event counts (round {round})"
        );
        check_all_acc(&mut core, &mut r, &format!("round {round}"));
    }
    eprintln!(
        "[{name}] {rounds} rounds, {} instructions, {uops_run} micro-ops, {} cycles",
        rounds * insns,
        core.cycle
    );
}

fn gemm(lp: UopLoop, wgt_factor_out: u16, wgt_factor_in: u16) -> Insn {
    Insn::Gemm(GemmInsn {
        deps: DepFlags::NONE,
        lp,
        wgt_factor_out,
        wgt_factor_in,
    })
}

fn alu(lp: UopLoop, op: AluOp, use_imm: bool, imm: i16) -> Insn {
    Insn::Alu(AluInsn {
        deps: DepFlags::NONE,
        lp,
        op,
        use_imm,
        imm,
    })
}

fn lp(bgn: u16, end: u16, iter_out: u16, iter_in: u16) -> UopLoop {
    UopLoop {
        reset_reg: false,
        uop_bgn: bgn,
        uop_end: end,
        iter_out,
        iter_in,
        ..UopLoop::default()
    }
}

/// Back-to-back micro-ops on the same rows, within and across instructions: every result
/// must be as if executed one at a time, and nothing may stall.
fn hazards(name: &str) {
    if !verilator_available() {
        return;
    }
    let mut core = Core::new(name);
    let mut r = Reference::new(&core.cfg);
    let mut rng = Rng::new(7);
    setup(&mut core, &mut r, &mut rng, 0);
    let ops: Vec<AluOp> = if core.cfg.alu_mul {
        AluOp::ALL.to_vec()
    } else {
        AluOp::ALL[..4].to_vec()
    };
    // uop 0: row 3 <- inp 1 x wgt 2; uop 1: row 3 again; uop 2: row 4 from row 3;
    // uop 3: row 3 from row 4; uop 4: row 3 from row 3.
    let uops = [
        Uop {
            dst_idx: 3,
            src_idx: 1,
            wgt_idx: 2,
        },
        Uop {
            dst_idx: 3,
            src_idx: 0,
            wgt_idx: 1,
        },
        Uop {
            dst_idx: 4,
            src_idx: 3,
            wgt_idx: 0,
        },
        Uop {
            dst_idx: 3,
            src_idx: 4,
            wgt_idx: 0,
        },
        Uop {
            dst_idx: 3,
            src_idx: 3,
            wgt_idx: 0,
        },
        Uop {
            dst_idx: 4,
            src_idx: 1,
            wgt_idx: 2,
        },
        Uop {
            dst_idx: 5,
            src_idx: 0,
            wgt_idx: 0,
        },
    ];
    core.write_uops(0, &uops);
    r.uop[..uops.len()].copy_from_slice(&uops);
    let mut prog = vec![
        // 15 accumulations into row 3 in a row, then more from another uop.
        gemm(lp(0, 1, 3, 5), 0, 1),
        gemm(lp(0, 2, 2, 2), 1, 0),
        // ALU reading what the GEMM just wrote, back to back.
        alu(lp(2, 4, 1, 3), AluOp::Add, false, 0),
        alu(lp(4, 5, 2, 2), AluOp::Add, false, 0),
        gemm(lp(0, 1, 1, 1), 0, 0),
        alu(lp(2, 3, 1, 1), AluOp::Max, false, 0),
        alu(lp(3, 4, 1, 1), AluOp::Min, false, 0),
    ];
    for &op in &ops {
        let imm = if op == AluOp::Shr { -3 } else { 5 };
        prog.push(alu(lp(0, 2, 2, 3), op, true, imm));
        prog.push(alu(lp(2, 5, 1, 2), op, false, 0));
        prog.push(gemm(lp(1, 2, 1, 2), 0, 0));
    }
    let mut reset = lp(0, 1, 1, 1);
    reset.reset_reg = true;
    prog.push(gemm(reset, 0, 0));
    prog.push(alu(lp(3, 5, 1, 1), AluOp::Add, false, 0));
    prog.push(alu(reset, AluOp::Add, false, 0));
    prog.push(gemm(lp(0, 2, 1, 1), 0, 0));
    // A tensor operand written 2 and 3 issue slots earlier (the result registers of stages
    // W+2 and W+3).
    prog.extend([
        gemm(lp(5, 6, 1, 1), 0, 0),
        alu(lp(3, 4, 1, 1), AluOp::Add, false, 0),
        gemm(lp(5, 6, 1, 1), 0, 0),
        alu(lp(6, 7, 1, 1), AluOp::Add, true, 9),
        alu(lp(3, 4, 1, 1), AluOp::Add, false, 0),
    ]);
    let log = core.run(&prog, &[]).to_vec();
    for i in &prog {
        r.exec(i);
    }
    check_timing(&core.cfg, &log, &r.uop);
    assert_eq!(core.events, r.counts);
    check_all_acc(&mut core, &mut r, "hazards");
}

/// A micro-op writing ACC row `dst`: `src` is the tensor operand's row (or the INP row of a
/// GEMM), `wgt` the GEMM's WGT tile.
fn uop(dst: u32, src: u32, wgt: u32) -> Uop {
    Uop {
        dst_idx: dst,
        src_idx: src,
        wgt_idx: wgt,
    }
}

/// Where a directed case's consumer reads the row its producer wrote.
#[derive(Clone, Copy, Debug)]
enum Consumer {
    /// An immediate ALU micro-op on the row (its dst).
    ImmDst,
    /// A tensor ALU micro-op on the row, its src another row.
    TensorDst,
    /// A tensor ALU micro-op reading the row as src, writing another.
    TensorSrc,
    /// A tensor ALU micro-op with the row as dst and src.
    TensorBoth,
    /// A GEMM accumulating into the row.
    GemmDst,
}

/// Back-to-back dependent ALU micro-ops, for every operation (MIN, MAX, ADD, SHR, and MUL
/// and LUT where the config has them), with immediate and tensor operands. Each case is a
/// producer (the operation with an immediate or a tensor operand, an ADD, or a GEMM) writing
/// a fresh row, 0 to 4 filler micro-ops on other rows, then a consumer reading that row as
/// its dst, its src or both, each micro-op an instruction of its own: every forwarding path
/// (the result entering the result register, in it, one stage on, and the block RAM after
/// the write) is taken for dst and for src, behind a one-cycle or a MUL producer. Then
/// chains inside one instruction (each micro-op reading the previous one's row). Each
/// case writes rows no other case touches, so a wrong value stays visible in the final ACC;
/// issue timing is checked too (no stall, unchanged rates).
fn dependent_alu(name: &str) {
    if !verilator_available() {
        return;
    }
    let mut core = Core::new(name);
    let mut r = Reference::new(&core.cfg);
    let mut rng = Rng::new(19);
    let cfg = core.cfg.clone();
    let mut ops = AluOp::ALL[..4].to_vec();
    if cfg.alu_mul {
        ops.push(AluOp::Mul);
    }
    if cfg.alu_lut {
        ops.push(AluOp::Lut);
    }
    let single = |u: usize| lp(u as u16, u as u16 + 1, 1, 1);
    // Rows 0..8 are read only: 4 and 5 are tensor operands, 7 the fillers' row; fresh rows
    // start at 8.
    let (operand, other, filler) = (4, 5, 7);
    for &op in &ops {
        let imm = match op {
            AluOp::Shr => 3,
            AluOp::Mul => -3,
            AluOp::Lut => -50,
            _ => 5,
        };
        for what in ["imm", "tensor", "add", "gemm"] {
            let producer = |u: usize| match what {
                "imm" => alu(single(u), op, true, imm),
                "tensor" => alu(single(u), op, false, 0),
                "add" => alu(single(u), AluOp::Add, true, 11),
                _ => gemm(single(u), 0, 0),
            };
            setup(&mut core, &mut r, &mut rng, 0);
            let mut uops = vec![uop(filler, filler, 1)];
            let mut prog = vec![];
            if cfg.alu_lut {
                // The whole table from the random rows 0..16: entry 16*o + i is lane
                // (entry mod LANES) of row o.
                uops.push(uop(0, 0, 0));
                let mut l = lp(1, 2, 16, 16);
                (l.dst_factor_out, l.dst_factor_in, l.src_factor_out) = (16, 1, 1);
                prog.push(alu(l, AluOp::LutWrite, false, 0));
            }
            let mut next_row = 8;
            let mut fresh = || {
                next_row += 1;
                next_row - 1
            };
            let fillers = [alu(single(0), AluOp::Add, true, -2), gemm(single(0), 0, 1)];
            for d in 0..5 {
                for consumer in [
                    Consumer::ImmDst,
                    Consumer::TensorDst,
                    Consumer::TensorSrc,
                    Consumer::TensorBoth,
                    Consumer::GemmDst,
                ] {
                    let row = fresh();
                    let (c_uop, c_insn): (Uop, fn(usize, AluOp, i16) -> Insn) = match consumer {
                        Consumer::ImmDst => (uop(row, operand, 0), |u, op, imm| {
                            alu(lp(u as u16, u as u16 + 1, 1, 1), op, true, imm)
                        }),
                        Consumer::TensorDst => (uop(row, other, 0), |u, op, _| {
                            alu(lp(u as u16, u as u16 + 1, 1, 1), op, false, 0)
                        }),
                        Consumer::TensorSrc => (uop(fresh(), row, 0), |u, op, _| {
                            alu(lp(u as u16, u as u16 + 1, 1, 1), op, false, 0)
                        }),
                        Consumer::TensorBoth => (uop(row, row, 0), |u, op, _| {
                            alu(lp(u as u16, u as u16 + 1, 1, 1), op, false, 0)
                        }),
                        Consumer::GemmDst => (uop(row, operand, 2), |u, _, _| {
                            gemm(lp(u as u16, u as u16 + 1, 1, 1), 0, 0)
                        }),
                    };
                    uops.push(uop(row, operand, 2));
                    prog.push(producer(uops.len() - 1));
                    prog.extend((0..d).map(|k| fillers[k % 2]));
                    uops.push(c_uop);
                    prog.push(c_insn(uops.len() - 1, op, imm));
                }
            }
            // Chains in one instruction: six micro-ops on one row with an immediate and with
            // the row as its own tensor operand, and two rows each reading the other.
            let (a, b, c) = (fresh(), fresh(), fresh());
            uops.push(uop(a, operand, 0));
            prog.push(alu(
                lp(uops.len() as u16 - 1, uops.len() as u16, 2, 3),
                op,
                true,
                imm,
            ));
            uops.push(uop(b, b, 0));
            prog.push(alu(
                lp(uops.len() as u16 - 1, uops.len() as u16, 3, 2),
                op,
                false,
                0,
            ));
            uops.extend([uop(b, c, 0), uop(c, b, 0)]);
            prog.push(alu(
                lp(uops.len() as u16 - 2, uops.len() as u16, 3, 1),
                op,
                false,
                0,
            ));
            // Passes that issue back to back: a tensor operand kept by the inner loop while
            // dst sweeps over its row, written by the pass's second or third micro-op (later
            // micro-ops read the updated row), then, after a producer of that row, the same
            // again; an immediate whose inner loop moves dst (for MUL: one per cycle), its
            // passes overlapping the previous pass's rows.
            let base = fresh();
            for _ in 0..5 {
                fresh();
            }
            let mut sweep = lp(uops.len() as u16, uops.len() as u16 + 1, 2, 6);
            sweep.dst_factor_in = 1;
            for written_by in [1, 2] {
                (sweep.uop_bgn, sweep.uop_end) = (uops.len() as u16, uops.len() as u16 + 1);
                uops.push(uop(base, base + written_by, 0));
                prog.push(alu(sweep, op, false, 0));
            }
            uops.push(uop(base + 3, operand, 2));
            prog.push(producer(uops.len() - 1));
            let mut again = sweep;
            (again.uop_bgn, again.uop_end) = (uops.len() as u16, uops.len() as u16 + 1);
            uops.push(uop(base, base + 3, 0));
            prog.push(alu(again, op, false, 0));
            let mut moving = sweep;
            (moving.uop_bgn, moving.uop_end) = (uops.len() as u16, uops.len() as u16 + 1);
            (moving.iter_in, moving.dst_factor_out) = (4, 2);
            uops.push(uop(base, operand, 0));
            prog.push(alu(moving, op, true, imm));
            // The same passes with a kept tensor operand outside their rows (for MUL: one per
            // cycle from each pass's third micro-op): a read-only row below them, and a row
            // above them that a producer has just written.
            let above = fresh();
            for src in [operand, above] {
                if src == above {
                    uops.push(uop(above, operand, 2));
                    prog.push(producer(uops.len() - 1));
                }
                let mut outside = moving;
                (outside.uop_bgn, outside.uop_end) = (uops.len() as u16, uops.len() as u16 + 1);
                uops.push(uop(base, src, 0));
                prog.push(alu(outside, op, false, 0));
            }
            if op == AluOp::Lut {
                // A LUT right after (and 1, 2 micro-ops after) the LUTW that wrote its entry
                // (entries below 64, which a micro-op's dst field holds on every config).
                for d in 0..3 {
                    let y = 40 + 7 * d as i16;
                    uops.push(uop(u32::from(y as u8), operand, 0));
                    prog.push(alu(
                        single(uops.len() - 1),
                        AluOp::LutWrite,
                        true,
                        40 + d as i16,
                    ));
                    prog.extend((0..d).map(|k| fillers[k % 2]));
                    uops.push(uop(fresh(), operand, 0));
                    prog.push(alu(single(uops.len() - 1), AluOp::Lut, true, y));
                }
            }
            assert!(
                next_row <= cfg.depth(MemType::Acc)
                    && uops.len() < cfg.depth(MemType::Uop) as usize,
                "{name}: the cases need {next_row} ACC rows and {} micro-ops",
                uops.len()
            );
            core.write_uops(0, &uops);
            r.uop[..uops.len()].copy_from_slice(&uops);
            let log = core.run(&prog, &[]).to_vec();
            for i in &prog {
                r.exec(i);
            }
            check_timing(&cfg, &log, &r.uop);
            assert_eq!(core.faults, 0, "{name}: unexpected fault");
            assert_eq!(core.events, r.counts, "{name}: {op:?} after {what}");
            check_all_acc(&mut core, &mut r, &format!("{op:?} after {what}"));
        }
    }
}

/// Indices past their buffer pulse `fault` once per micro-op; only used indices count.
fn faults(name: &str) {
    if !verilator_available() {
        return;
    }
    let mut core = Core::new(name);
    let mut r = Reference::new(&core.cfg);
    let mut rng = Rng::new(3);
    setup(&mut core, &mut r, &mut rng, 0);
    let c = core.cfg.clone();
    let (da, di, dw) = (
        c.depth(MemType::Acc),
        c.depth(MemType::Inp),
        c.depth(MemType::Wgt),
    );
    let max_src = (1u32 << c.uop_src_bits()) - 1;
    let uops = [
        Uop {
            dst_idx: da - 1,
            src_idx: 0,
            wgt_idx: 0,
        },
        Uop {
            dst_idx: 0,
            src_idx: di - 1,
            wgt_idx: dw - 1,
        },
        Uop {
            dst_idx: 0,
            src_idx: da - 1,
            wgt_idx: 0,
        },
        Uop {
            dst_idx: 0,
            src_idx: max_src,
            wgt_idx: 0,
        },
    ];
    core.write_uops(0, &uops);
    r.uop[..uops.len()].copy_from_slice(&uops);
    let with = |mut l: UopLoop, f: &dyn Fn(&mut UopLoop)| {
        f(&mut l);
        l
    };
    let cases = vec![
        // dst past ACC on the 2nd and 3rd inner iterations.
        gemm(with(lp(0, 1, 1, 3), &|l| l.dst_factor_in = 1), 0, 0),
        // src past INP, wgt past WGT (outer iterations).
        gemm(with(lp(1, 2, 3, 1), &|l| l.src_factor_out = 1), 0, 0),
        gemm(lp(1, 2, 2, 2), 1, 0),
        // A reset uses dst only.
        gemm(with(lp(1, 2, 2, 2), &|l| l.reset_reg = true), 1, 1),
        // ALU: src past ACC counts for tensor operands only.
        alu(
            with(lp(2, 3, 2, 1), &|l| l.src_factor_out = 1),
            AluOp::Add,
            false,
            0,
        ),
        alu(
            with(lp(2, 3, 2, 1), &|l| l.src_factor_out = 1),
            AluOp::Add,
            true,
            1,
        ),
        alu(lp(3, 4, 1, 1), AluOp::Max, false, 0),
        alu(lp(3, 4, 1, 1), AluOp::Max, true, 0),
        // Offsets far past the depth (exact arithmetic, no wrap back into range).
        alu(
            with(lp(0, 1, 3, 3), &|l| {
                l.dst_factor_out = (da - 1) as u16;
                l.dst_factor_in = (da - 1) as u16;
            }),
            AluOp::Min,
            true,
            0,
        ),
    ];
    let mut expected_total = 0;
    for insn in &cases {
        let expected = r.faults(insn);
        let before = core.faults;
        core.run(&[*insn], &[0]);
        assert_eq!(
            core.faults - before,
            expected,
            "{name}: fault pulses of {insn:?}"
        );
        expected_total += expected;
    }
    assert!(
        expected_total >= 10,
        "the cases exercise faults ({expected_total})"
    );
    assert_eq!(core.log.len(), cases.len(), "every instruction completes");
}

/// Accept-to-done latency of lone instructions, and streams of back-to-back instructions.
fn rates(name: &str) {
    if !verilator_available() {
        return;
    }
    let mut core = Core::new(name);
    let mut r = Reference::new(&core.cfg);
    let mut rng = Rng::new(11);
    setup(&mut core, &mut r, &mut rng, 0);
    let t = exec_timing(&core.cfg);
    let lat = u64::from(t.done_latency);
    let uops = [
        Uop {
            dst_idx: 1,
            src_idx: 0,
            wgt_idx: 0,
        },
        Uop {
            dst_idx: 1,
            src_idx: 1,
            wgt_idx: 1,
        },
    ];
    core.write_uops(0, &uops);
    r.uop[..uops.len()].copy_from_slice(&uops);
    let n = 2 * 4 * 6; // same dst on every micro-op: a hazard each cycle
    let mut lone = vec![
        (gemm(lp(0, 2, 4, 6), 0, 0), n + lat),
        (alu(lp(0, 2, 4, 6), AluOp::Add, true, 1), n + lat),
        (alu(lp(0, 2, 4, 6), AluOp::Add, false, 0), 2 * n - 1 + lat),
        (gemm(lp(1, 1, 4, 6), 0, 0), 1 + lat),
        (alu(lp(0, 2, 0, 6), AluOp::Add, false, 0), 1 + lat),
    ];
    // A one-micro-op kernel whose inner loop keeps src: the tensor operand is read once per
    // pass, so only each pass's first micro-op waits a cycle.
    let kept = lp(1, 2, 4, 6);
    lone.push((alu(kept, AluOp::Add, false, 0), 24 + 3 + lat));
    let mut moving = lp(0, 1, 4, 6);
    moving.dst_factor_in = 1;
    if core.cfg.alu_mul {
        // One MUL micro-op every 1 + mul_extra cycles, immediate or tensor; an empty MUL
        // instruction has no multiplier latency; with an immediate and an inner loop that
        // moves dst, one per cycle within each pass.
        let e = u64::from(t.mul_extra);
        let mul_lat = u64::from(t.mul_done_latency);
        let mul_span = 1 + (n - 1) * (1 + e) + mul_lat;
        lone.extend([
            (alu(lp(0, 2, 4, 6), AluOp::Mul, true, 3), mul_span),
            (alu(lp(0, 2, 4, 6), AluOp::Mul, false, 0), mul_span),
            (alu(lp(0, 2, 0, 6), AluOp::Mul, true, 3), 1 + lat),
            (alu(moving, AluOp::Mul, true, 3), 24 + 3 * e + mul_lat),
            (alu(kept, AluOp::Mul, false, 0), 1 + 23 * (1 + e) + mul_lat),
            // Kept row 0 below the pass's rows 1..7: one per cycle from each pass's third.
            (
                alu(moving, AluOp::Mul, false, 0),
                1 + 4 * (1 + e + 4) + 3 * (1 + e) + mul_lat,
            ),
        ]);
    }
    for (insn, cycles) in lone {
        let e = core.run(&[insn], &[3])[0].clone();
        // An ALU instruction reaches its pipeline two cycles after the core takes it (its
        // footprint, then the queue).
        let path = if matches!(insn, Insn::Alu(_)) { 2 } else { 0 };
        assert_eq!(
            e.done.unwrap() - e.accepted,
            cycles + path,
            "{name}: lone {insn:?}"
        );
    }
    // Streams of one-micro-op GEMMs, and of immediate ALUs: one per cycle, no gap.
    for (kind, path) in [("GEMM", 0), ("ALU", 2)] {
        let stream: Vec<Insn> = (0..40)
            .map(|k| {
                let l = lp(k % 2, k % 2 + 1, 1, 1);
                if kind == "ALU" {
                    alu(l, AluOp::Shr, true, 1)
                } else {
                    gemm(l, 0, 0)
                }
            })
            .collect();
        let log = core.run(&stream, &[]).to_vec();
        assert_eq!(
            log.last().unwrap().done.unwrap() - log[0].accepted,
            40 + lat + path,
            "{name}: stream of 40 single-micro-op {kind} instructions"
        );
        check_timing(&core.cfg, &log, &r.uop);
    }
    // Both mixed: each ALU waits for the GEMMs before it, GEMMs wait for an ALU's bank.
    let stream: Vec<Insn> = (0..40)
        .map(|k| {
            if k % 3 == 2 {
                alu(lp(k % 2, k % 2 + 1, 1, 1), AluOp::Shr, true, 1)
            } else {
                gemm(lp(k % 2, k % 2 + 1, 1, 1), 0, 0)
            }
        })
        .collect();
    let log = core.run(&stream, &[]).to_vec();
    check_timing(&core.cfg, &log, &r.uop);
    // Long ALU instructions back to back fill the queue: each further one is taken once it
    // has room again.
    let queue = vta_hw::exec::ALU_QUEUE as usize;
    let stream: Vec<Insn> = (0..2 * queue)
        .map(|_| alu(lp(0, 2, 4, 6), AluOp::Add, true, 1))
        .collect();
    let log = core.run(&stream, &[]).to_vec();
    assert!(
        log.last().unwrap().accepted > log[0].done.unwrap(),
        "{name}: the queue holds at most {queue} instructions"
    );
    check_timing(&core.cfg, &log, &r.uop);
}

macro_rules! config_tests {
    ($module:ident, $name:literal, $rounds:expr, $insns:expr) => {
        mod $module {
            #[test]
            fn random_programs() {
                super::random_programs($name, $rounds, $insns, 0x5eed ^ $rounds as u64);
            }
            #[test]
            fn hazards() {
                super::hazards($name);
            }
            #[test]
            fn dependent_alu() {
                super::dependent_alu($name);
            }
            #[test]
            fn faults() {
                super::faults($name);
            }
            #[test]
            fn rates() {
                super::rates($name);
            }
        }
    };
}

config_tests!(small, "small", 16, 200);
config_tests!(default, "default", 6, 160);
config_tests!(i4w4a16, "i4w4a16", 8, 200);
config_tests!(i4w4bo8, "i4w4bo8", 8, 200);
config_tests!(i4w2a16, "i4w2a16", 8, 200);
config_tests!(i2w2a16, "i2w2a16", 8, 200);
config_tests!(i8w2a32, "i8w2a32", 6, 160);
config_tests!(i8w4nomul, "i8w4nomul", 6, 160);
config_tests!(i16w16a16, "i16w16a16", 8, 200);
config_tests!(i4w8bi1, "i4w8bi1", 6, 160);
config_tests!(a16lut, "a16lut", 8, 200);

#[test]
fn depth1_random_programs() {
    // ACC and WGT of one element: every dst and wgt index is 0.
    random_programs("depth1", 3, 80, 0xd1);
}
