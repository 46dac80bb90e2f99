//! Randomized programs on the Verilated `vta_top` against the functional simulator: several
//! load -> compute -> store blocks per program with random shapes, strides, paddings and
//! DRAM alignments (elements at any position within a bus beat), random GEMM/ALU micro-op
//! loops, dependency tokens between the blocks (so load runs ahead of compute and compute
//! ahead of store), and a random memory latency and bandwidth per program.

mod common;

use common::rtl_device;
use drivers::{run_program, RunTimeout};
use isa::builder::{Operand, ProgramBuilder, UopLoops};
use isa::rng::Rng;
use isa::{AluOp, DType, HwConfig, MemType, Module, Program, Uop};
use vta_sim::rtl::MemTiming;
use vta_sim::FsimDevice;

/// A random 2D LOAD footprint: (rows, cols, stride, pads); returns SRAM elements written.
fn shape(r: &mut Rng, max_rows: u32, max_cols: u32, pads: bool) -> (u16, u16, u16, [u8; 4]) {
    let y = r.range(1, max_rows) as u16;
    let x = r.range(1, max_cols) as u16;
    let stride = x + r.range(0, 3) as u16;
    let pad = if pads && r.chance(50) {
        [0, 0, 0, 0].map(|_: u8| r.range(0, 2) as u8)
    } else {
        [0; 4]
    };
    (y, x, stride, pad)
}

fn footprint(y: u16, x: u16, pad: [u8; 4]) -> u32 {
    (y as u32 + pad[0] as u32 + pad[1] as u32) * (x as u32 + pad[2] as u32 + pad[3] as u32)
}

/// Random micro-op loops over a kernel of `len` micro-ops whose indices stay below the
/// given bounds: returns (kernel, loops).
fn kernel(r: &mut Rng, len: u32, dst_n: u32, src_n: u32, wgt_n: u32) -> (Vec<Uop>, UopLoops) {
    let iter_out = r.range(1, 2) as u16;
    let iter_in = r.range(1, 3) as u16;
    let f = |r: &mut Rng, n: u32| -> (u16, u16) {
        // Factors small enough that one index can stay in range.
        let span = n.saturating_sub(1);
        let fo = r.range(0, (span / 2).min(2)) as u16;
        let fi = r.range(0, (span / 3).min(2)) as u16;
        (fo, fi)
    };
    let (d, s, w) = (f(r, dst_n), f(r, src_n), f(r, wgt_n));
    let reach =
        |(o, i): (u16, u16)| (iter_out as u32 - 1) * o as u32 + (iter_in as u32 - 1) * i as u32;
    let base = |r: &mut Rng, n: u32, reach: u32| r.range(0, n.saturating_sub(reach + 1));
    let uops = (0..len)
        .map(|_| Uop {
            dst_idx: base(r, dst_n, reach(d)),
            src_idx: base(r, src_n, reach(s)),
            wgt_idx: base(r, wgt_n, reach(w)),
        })
        .collect();
    (
        uops,
        UopLoops {
            iter_out,
            iter_in,
            dst: d,
            src: s,
            wgt: w,
        },
    )
}

/// A random program of `blocks` load -> compute -> store blocks.
fn program(cfg: &HwConfig, seed: u64, blocks: usize) -> Program {
    let mut r = Rng::new(seed);
    let mut b = ProgramBuilder::new(cfg);
    let eb = |m: MemType| cfg.elem_bytes(m) as usize;
    // Source segments, large enough for any block's rows at any offset.
    let (inp_n, wgt_n, acc_n, out_n) = (64usize, 32usize, 64usize, 512usize);
    let x = b.input(
        "x",
        DType::I8,
        vec![inp_n * eb(MemType::Inp)],
        r.bytes(inp_n * eb(MemType::Inp)),
    );
    let w = b.input(
        "w",
        DType::I8,
        vec![wgt_n * eb(MemType::Wgt)],
        r.bytes(wgt_n * eb(MemType::Wgt)),
    );
    let a = b.input(
        "a",
        DType::I8,
        vec![acc_n * eb(MemType::Acc)],
        r.bytes(acc_n * eb(MemType::Acc)),
    );
    let y = b.output("y", DType::I8, vec![out_n * eb(MemType::Out)]);
    let mut out_at = 0u32;
    for blk in 0..blocks {
        // ---- load ----
        if blk > 0 {
            b.dep_pop(Module::Compute, Module::Load);
        }
        let (iy, ix, is, ip) = shape(&mut r, 3, 4, true);
        let i_off = r.range(0, (inp_n as u32) - (iy as u32 - 1) * is as u32 - ix as u32);
        b.load_padded(MemType::Inp, 0, x, i_off, iy, ix, is, ip);
        let inp_fp = footprint(iy, ix, ip);
        let wpads = r.chance(30);
        let (wy, wx, ws, wp) = shape(&mut r, 2, 3, wpads);
        let w_off = r.range(0, (wgt_n as u32) - (wy as u32 - 1) * ws as u32 - wx as u32);
        b.load_padded(MemType::Wgt, 0, w, w_off, wy, wx, ws, wp);
        let wgt_fp = footprint(wy, wx, wp);
        b.dep_push(Module::Load, Module::Compute);

        // ---- compute ----
        b.dep_pop(Module::Load, Module::Compute);
        if blk > 0 {
            b.dep_pop(Module::Store, Module::Compute);
        }
        let (ay, ax, ast, ap) = shape(&mut r, 3, 4, true);
        let acc8 = r.chance(30);
        let mt = if acc8 { MemType::Acc8 } else { MemType::Acc };
        // ACC8 elements are smaller: the same element offsets stay inside `a`.
        let a_off = r.range(0, (acc_n as u32) - (ay as u32 - 1) * ast as u32 - ax as u32);
        b.load_padded(mt, 0, a, a_off, ay, ax, ast, ap);
        let acc_fp = footprint(ay, ax, ap);
        let len = r.range(1, 3);
        let (k, l) = kernel(&mut r, len, acc_fp, inp_fp, wgt_fp);
        let kern = b.kernel(&k);
        b.gemm(kern, l, r.chance(15));
        for _ in 0..r.range(0, 3) {
            let ops: Vec<AluOp> = AluOp::ALL
                .into_iter()
                .filter(|&o| o != AluOp::Mul || cfg.alu_mul)
                .collect();
            let op = ops[r.range(0, ops.len() as u32 - 1) as usize];
            let len = r.range(1, 2);
            let (k, mut l) = kernel(&mut r, len, acc_fp, acc_fp, 1);
            l.wgt = (0, 0);
            let kern = b.kernel(
                &k.iter()
                    .map(|u| Uop { wgt_idx: 0, ..*u })
                    .collect::<Vec<_>>(),
            );
            let operand = if r.chance(50) {
                let imm = match op {
                    AluOp::Shr => r.range(0, 40) as i16 - 20,
                    AluOp::Mul => r.range(0, 200) as i16 - 100,
                    _ => r.range(0, 4000) as i16 - 2000,
                };
                Operand::Imm(imm)
            } else {
                Operand::Tensor
            };
            b.alu(kern, l, op, operand);
        }
        let more = blk + 1 < blocks;
        if more {
            b.dep_push(Module::Compute, Module::Load);
        }
        b.dep_push(Module::Compute, Module::Store);

        // ---- store ----
        b.dep_pop(Module::Compute, Module::Store);
        let sy = r.range(1, acc_fp.min(2)) as u16;
        let sx = r.range(1, (acc_fp / sy as u32).clamp(1, 4)) as u16;
        let sstride = sx + r.range(0, 2) as u16;
        let s_base = r.range(0, acc_fp - sy as u32 * sx as u32);
        out_at += r.range(0, 3);
        b.store_2d(s_base, y, out_at, sy, sx, sstride);
        out_at += (sy as u32 - 1) * sstride as u32 + sx as u32;
        assert!(out_at as usize <= out_n);
        if more {
            b.dep_push(Module::Store, Module::Compute);
        }
    }
    b.finish().unwrap()
}

fn timing(r: &mut Rng) -> MemTiming {
    MemTiming {
        read_latency: r.range(1, 40),
        write_latency: r.range(1, 20),
        beat_interval: r.range(1, 3),
        max_outstanding: r.range(1, 8) as usize,
    }
}

fn stress(preset: &str, programs: u64) {
    stress_config(preset, HwConfig::preset(preset).unwrap(), programs);
}

fn stress_config(preset: &str, cfg: HwConfig, programs: u64) {
    let mut dev = rtl_device(&cfg, MemTiming::default());
    let mut r = Rng::new(0x5eed ^ cfg.isa_hash());
    let mut zero_outputs = 0;
    for seed in 0..programs {
        let p = program(&cfg, seed + 1, 1 + (seed as usize % 4));
        let t = timing(&mut r);
        dev.sim_mut().set_timing(t);
        let want = run_program(&mut FsimDevice::new(&cfg), &p, &[], RunTimeout::default())
            .unwrap_or_else(|e| panic!("{preset} program {seed}: fsim: {e}"));
        let got = run_program(&mut dev, &p, &[], RunTimeout::default())
            .unwrap_or_else(|e| panic!("{preset} program {seed} ({t:?}): rtl: {e}"));
        assert_eq!(
            want.outputs, got.outputs,
            "{preset} program {seed} ({t:?}): outputs differ"
        );
        if want.outputs[0].1.iter().all(|&v| v == 0) {
            zero_outputs += 1;
        }
        eprintln!(
            "{preset} program {seed}: {} insns, {} cycles, {} gemm / {} alu uops, {t:?}",
            p.insns.len(),
            got.report.get("cycles").unwrap(),
            got.report.get("gemm_uops").unwrap(),
            got.report.get("alu_uops").unwrap()
        );
        for c in ["gemm_uops", "alu_uops", "reset_uops"] {
            assert_eq!(
                want.report.get(c),
                got.report.get(c),
                "{preset} program {seed}: counter {c}"
            );
        }
    }
    // A program may legitimately store zeros (a reset GEMM, a MIN with a small immediate),
    // but most must not, or the comparison proves little. About 7% do (measured over 200
    // seeds per config), so a suite needs 20 or so programs for this bound to be robust.
    assert!(
        zero_outputs * 4 < programs,
        "{zero_outputs} of {programs} outputs are all zero"
    );
}

#[test]
fn stress_small() {
    stress("small", 40);
}

#[test]
fn stress_wide_bus() {
    stress("wide-bus", 25);
}

#[test]
fn stress_batched() {
    stress("batched", 20);
}

#[test]
fn stress_rect() {
    stress("rect", 20);
}

/// The default GEMM shape on a 512-bit bus: four INP rows or sixteen micro-ops per beat.
#[test]
fn stress_bus512() {
    let cfg = HwConfig {
        axi_data_width: 512,
        ..HwConfig::default()
    };
    cfg.validate().unwrap();
    stress_config("default-512", cfg, 20);
}

#[test]
fn stress_tiny() {
    stress_config("tiny", common::custom(common::TINY), 20);
}

#[test]
fn stress_int4() {
    stress_config("int4", common::custom(common::INT4), 20);
}
