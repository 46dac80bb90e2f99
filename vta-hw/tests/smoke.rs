//! Functional smoke tests of the whole `vta_top` in Verilator: programs built with
//! `isa::builder::ProgramBuilder` run on the RTL (a Rust AXI4 memory model and the host's
//! register sequence: `vta_sim::rtl::RtlDevice`) and on the functional simulator through the same
//! device HAL; the output bytes must be identical.

mod common;

use common::rtl_device;
use drivers::{run_program, ProgramRun, RunTimeout};
use isa::builder::ProgramBuilder;
use isa::builder::{Operand, UopLoops};
use isa::rng::Rng;
use isa::{AluOp, DType, HwConfig, MemType, Module, Program, Uop};
use vta_sim::rtl::{MemTiming, RtlDevice};
use vta_sim::FsimDevice;

/// Deterministic bytes.
fn bytes(n: usize, seed: u64) -> Vec<u8> {
    Rng::new(seed).bytes(n)
}

/// Runs `p` on both backends and compares every output byte.
fn compare(dev: &mut RtlDevice, p: &Program, what: &str) -> ProgramRun {
    let mut fsim = FsimDevice::new(&p.config);
    let want = run_program(&mut fsim, p, &[], RunTimeout::default())
        .unwrap_or_else(|e| panic!("{what}: fsim: {e}"));
    let got = run_program(dev, p, &[], RunTimeout::default())
        .unwrap_or_else(|e| panic!("{what}: rtl: {e}"));
    assert!(
        want.outputs.iter().any(|(_, b)| b.iter().any(|&x| x != 0)),
        "{what}: the reference output is all zeros; the test would prove little"
    );
    for ((name, w), (_, g)) in want.outputs.iter().zip(&got.outputs) {
        if w != g {
            let first = w.iter().zip(g).position(|(a, b)| a != b).unwrap();
            panic!(
                "{what}: output '{name}' differs from byte {first} on ({} bytes)\nfsim {:?}\nrtl  {:?}",
                w.len(),
                &w[first..(first + 32).min(w.len())],
                &g[first..(first + 32).min(g.len())]
            );
        }
    }
    for c in ["gemm_uops", "alu_uops", "reset_uops"] {
        let (w, g) = (want.report.get(c).unwrap(), got.report.get(c).unwrap());
        assert_eq!(w, g, "{what}: counter {c}");
    }
    // The performance counters are consistent with the program.
    let r = dev.last_run().unwrap();
    let reg = |n: &str| r.register(n).unwrap();
    assert_eq!(reg("INSNS") as usize, p.insns.len(), "{what}: INSNS");
    for m in ["LOAD", "COMPUTE", "STORE"] {
        let (busy, stall) = (reg(&format!("{m}_BUSY")), reg(&format!("{m}_STALL")));
        assert!(
            stall <= busy && busy <= reg("CYCLES"),
            "{what}: {m} busy {busy} stall {stall}"
        );
    }
    assert!(
        reg("COMPUTE_BUSY") > 0 && reg("DMA_BUSY") > 0,
        "{what}: {r:?}"
    );
    eprintln!("{what}: {}", got.report);
    got
}

/// LOAD ACC with padding and a stride, then STORE of the (padded) rows with another stride:
/// OUT mirrors the low bits of ACC (spec section 9).
fn acc_roundtrip(cfg: &HwConfig, rows: u16, cols: u16, pad: [u8; 4], seed: u64) -> Program {
    let lanes = (cfg.batch() * cfg.block_out()) as usize;
    let stride = cols + 3;
    let mut b = ProgramBuilder::new(cfg);
    let n = rows as usize * stride as usize;
    let acc = b.input(
        "acc",
        DType::I32,
        vec![n, lanes],
        bytes(n * lanes * 4, seed),
    );
    let (h, w) = (
        rows + (pad[0] + pad[1]) as u16,
        cols + (pad[2] + pad[3]) as u16,
    );
    let out_rows = h as usize * (w as usize + 1);
    let out = b.output("out", DType::I8, vec![out_rows, lanes]);
    b.load_padded(MemType::Acc, 1, acc, 1, rows, cols, stride, pad);
    b.dep_push(Module::Compute, Module::Store);
    b.dep_pop(Module::Compute, Module::Store);
    b.store_2d(1, out, 1, h, w, w + 1);
    b.finish().unwrap()
}

/// Bytes of `n` elements of type `m`.
fn elems(cfg: &HwConfig, m: MemType, n: usize, seed: u64) -> Vec<u8> {
    bytes(n * cfg.elem_bytes(m) as usize, seed)
}

/// A dense layer on the GEMM core with an ALU epilogue, as in examples/dense_relu.vasm but
/// sized by the config: `rows` INP rows of `k` blocks (with `pad` zero rows/columns around
/// them in the scratchpad), `n` output blocks, bias from LOAD ACC, GEMM over every
/// (row, output block) with a `k`-micro-op kernel, a reset GEMM on a scratch row, then
/// SHR / MAX / MIN with immediates, a tensor ADD and MUL, and STORE.
fn dense(cfg: &HwConfig, rows: u16, k: u16, n: u16, pad: [u8; 4], seed: u64) -> Program {
    let mut b = ProgramBuilder::new(cfg);
    let x = b.input(
        "x",
        DType::I8,
        vec![elems(cfg, MemType::Inp, (rows * k) as usize, 0).len()],
        elems(cfg, MemType::Inp, (rows * k) as usize, seed),
    );
    let w = b.input(
        "w",
        DType::I8,
        vec![elems(cfg, MemType::Wgt, (n * k) as usize, 0).len()],
        elems(cfg, MemType::Wgt, (n * k) as usize, seed + 1),
    );
    let acc_bytes = elems(cfg, MemType::Acc, (rows * n) as usize, seed + 2);
    let bias = b.input("bias", DType::I8, vec![acc_bytes.len()], acc_bytes);
    let out_len = (rows * n) as usize * cfg.elem_bytes(MemType::Out) as usize;
    let y = b.output("y", DType::I8, vec![out_len]);

    // INP rows land padded: (pad_top + rows + pad_bottom) x (pad_left + k + pad_right).
    let wpad = k + (pad[2] + pad[3]) as u16;
    b.load_padded(MemType::Inp, 0, x, 0, rows, k, k, pad);
    b.load_2d(MemType::Wgt, 0, w, 0, n, k, k);
    b.dep_push(Module::Load, Module::Compute);
    b.dep_pop(Module::Load, Module::Compute);
    b.load_2d(MemType::Acc, 0, bias, 0, rows, n, n);
    // Kernel: acc[dst] += inp[src + kk] . wgt[kk] over the k blocks of a row, skipping the
    // INP padding (top rows and left columns).
    let first = pad[0] as u32 * wpad as u32 + pad[2] as u32;
    let kern: Vec<Uop> = (0..k as u32)
        .map(|kk| Uop {
            dst_idx: 0,
            src_idx: first + kk,
            wgt_idx: kk,
        })
        .collect();
    let gemm = b.kernel(&kern);
    let loops = UopLoops {
        iter_out: rows,
        iter_in: n,
        dst: (n, 1),
        src: (wpad, 0),
        wgt: (0, k),
    };
    b.gemm(gemm, loops, false);
    // A reset GEMM on the row after the results.
    let reset = b.kernel(&[Uop {
        dst_idx: (rows * n) as u32,
        src_idx: 0,
        wgt_idx: 0,
    }]);
    b.gemm(reset, UopLoops::once(), true);
    let all = rows * n;
    let row = b.kernel(&[Uop {
        dst_idx: 0,
        src_idx: 0,
        wgt_idx: 0,
    }]);
    b.alu(row, UopLoops::inner(all, 1, 1), AluOp::Shr, Operand::Imm(3));
    // Tensor ops: acc[i] = acc[i] + acc[i + 1] (the last row adds the zeroed row), then
    // acc[i] = acc[i] * acc[i] where the config has MUL.
    let pair = b.kernel(&[Uop {
        dst_idx: 0,
        src_idx: 1,
        wgt_idx: 0,
    }]);
    b.alu(
        pair,
        UopLoops::inner(all, 1, 1),
        AluOp::Add,
        Operand::Tensor,
    );
    if cfg.alu_mul {
        b.alu(row, UopLoops::inner(all, 1, 1), AluOp::Mul, Operand::Tensor);
        b.alu(row, UopLoops::inner(all, 1, 1), AluOp::Shr, Operand::Imm(5));
    }
    b.alu(
        row,
        UopLoops::inner(all, 1, 1),
        AluOp::Max,
        Operand::Imm(-20),
    );
    b.alu(
        row,
        UopLoops::inner(all, 1, 1),
        AluOp::Min,
        Operand::Imm(100),
    );
    b.dep_push(Module::Compute, Module::Store);
    b.dep_pop(Module::Compute, Module::Store);
    b.store_2d(0, y, 0, rows, n, n);
    b.finish().unwrap()
}

/// LOAD ACC8 (signed bytes widened into ACC lanes), then ALU ops whose results expose the
/// high bits (SHR by 4 of a negative value keeps its sign bits), and STORE.
fn acc8_sign(cfg: &HwConfig, rows: u16, seed: u64) -> Program {
    let mut b = ProgramBuilder::new(cfg);
    let n = rows as usize * cfg.elem_bytes(MemType::Acc8) as usize;
    let v = b.input("v", DType::I8, vec![n], bytes(n, seed));
    let y = b.output(
        "y",
        DType::I8,
        vec![rows as usize * cfg.elem_bytes(MemType::Out) as usize],
    );
    b.load_2d(MemType::Acc8, 0, v, 0, 1, rows, rows);
    let row = b.kernel(&[Uop {
        dst_idx: 0,
        src_idx: 0,
        wgt_idx: 0,
    }]);
    b.alu(
        row,
        UopLoops::inner(rows, 1, 1),
        AluOp::Shr,
        Operand::Imm(4),
    );
    b.dep_push(Module::Compute, Module::Store);
    b.dep_pop(Module::Compute, Module::Store);
    b.store_2d(0, y, 0, 1, rows, rows);
    b.finish().unwrap()
}

/// Every ALU op, with an immediate and with a tensor operand, on rows from LOAD ACC.
fn alu_ops(cfg: &HwConfig, rows: u16, seed: u64) -> Program {
    let mut b = ProgramBuilder::new(cfg);
    let a = b.input(
        "a",
        DType::I8,
        vec![elems(cfg, MemType::Acc, 2 * rows as usize, 0).len()],
        elems(cfg, MemType::Acc, 2 * rows as usize, seed),
    );
    let ops: Vec<AluOp> = AluOp::ALL
        .into_iter()
        .filter(|&o| o != AluOp::Mul || cfg.alu_mul)
        .collect();
    let per = rows as usize * cfg.elem_bytes(MemType::Out) as usize;
    let y = b.output("y", DType::I8, vec![2 * ops.len() * per]);
    let kern = b.kernel(&[Uop {
        dst_idx: 0,
        src_idx: rows as u32,
        wgt_idx: 0,
    }]);
    let mut slot = 0u32;
    for &op in &ops {
        for tensor in [false, true] {
            b.load_2d(MemType::Acc, 0, a, 0, 1, 2 * rows, 2 * rows);
            let imm = match op {
                AluOp::Shr => -3,
                AluOp::Mul => 77,
                _ => 1234,
            };
            let operand = if tensor {
                Operand::Tensor
            } else {
                Operand::Imm(imm)
            };
            b.alu(kern, UopLoops::inner(rows, 1, 1), op, operand);
            b.dep_push(Module::Compute, Module::Store);
            b.dep_pop(Module::Compute, Module::Store);
            b.store_2d(0, y, slot * rows as u32, 1, rows, rows);
            b.dep_push(Module::Store, Module::Compute);
            b.dep_pop(Module::Store, Module::Compute);
            slot += 1;
        }
    }
    b.finish().unwrap()
}

fn smoke(preset: &str) {
    let cfg = HwConfig::preset(preset).unwrap();
    let mut dev = rtl_device(&cfg, MemTiming::default());
    compare(
        &mut dev,
        &acc_roundtrip(&cfg, 3, 5, [0, 0, 0, 0], 1),
        "acc plain",
    );
    compare(
        &mut dev,
        &acc_roundtrip(&cfg, 2, 3, [1, 2, 3, 1], 2),
        "acc padded",
    );
    compare(&mut dev, &dense(&cfg, 4, 1, 1, [0; 4], 3), "dense 4x1x1");
    compare(
        &mut dev,
        &dense(&cfg, 3, 2, 3, [1, 1, 2, 1], 4),
        "dense 3x2x3 padded",
    );
    compare(&mut dev, &acc8_sign(&cfg, 5, 5), "acc8");
    compare(&mut dev, &alu_ops(&cfg, 3, 6), "alu ops");
}

#[test]
fn smoke_small() {
    smoke("small");
}

#[test]
fn smoke_default() {
    smoke("default");
}

#[test]
fn small_acc_load_store() {
    let cfg = HwConfig::preset("small").unwrap();
    let mut dev = rtl_device(&cfg, MemTiming::default());
    compare(
        &mut dev,
        &acc_roundtrip(&cfg, 3, 5, [0, 0, 0, 0], 1),
        "plain",
    );
    compare(
        &mut dev,
        &acc_roundtrip(&cfg, 2, 3, [1, 2, 3, 1], 2),
        "padded",
    );
}

/// One big LOAD (or STORE) alone: the cycles it takes against the bus beats it moves.
fn dma_efficiency(dev: &mut RtlDevice, cfg: &HwConfig, mt: MemType, n: u16) -> f64 {
    let mut b = ProgramBuilder::new(cfg);
    let eb = cfg.elem_bytes(mt) as usize;
    let beats = (n as usize * eb).div_ceil(cfg.axi_data_width as usize / 8) as f64;
    if mt == MemType::Out {
        let y = b.output("y", DType::I8, vec![n as usize * eb]);
        b.store_2d(0, y, 0, 1, n, n);
    } else {
        let x = b.input(
            "x",
            DType::I8,
            vec![n as usize * eb],
            bytes(n as usize * eb, 9),
        );
        b.load_2d(mt, 0, x, 0, 1, n, n);
    }
    let p = b.finish().unwrap();
    // The same program with no data moved: the fixed cost of a run.
    let mut b0 = ProgramBuilder::new(cfg);
    b0.emit(isa::Insn::Load(isa::MemInsn::sync(MemType::Inp)));
    let p0 = b0.finish().unwrap();
    let cycles = |dev: &mut RtlDevice, p: &Program| {
        run_program(dev, p, &[], RunTimeout::default()).unwrap();
        dev.last_run().unwrap().register("CYCLES").unwrap() as f64
    };
    let (c, c0) = (cycles(dev, &p), cycles(dev, &p0));
    let eff = beats / (c - c0);
    eprintln!(
        "{} {} x{n}: {beats} beats in {} cycles (+{c0} fixed): {:.0}% of the bus",
        cfg.config_string(),
        mt.name(),
        c - c0,
        eff * 100.0
    );
    eff
}

/// Long transfers use the bus at close to one beat per cycle (memory latency 20 cycles,
/// full bandwidth): WGT tiles and ACC rows wider than the bus, INP rows and OUT rows
/// narrower or equal, micro-ops narrower.
#[test]
fn dma_throughput() {
    for preset in ["default", "small"] {
        let cfg = HwConfig::preset(preset).unwrap();
        let mut dev = rtl_device(&cfg, MemTiming::default());
        let wgt_tiles = if preset == "small" { 256 } else { 64 };
        for (mt, n) in [
            (MemType::Wgt, wgt_tiles),
            (MemType::Inp, 512),
            (MemType::Acc, 256),
            (MemType::Uop, 1024),
            (MemType::Out, 512),
        ] {
            let eff = dma_efficiency(&mut dev, &cfg, mt, n);
            // Narrow elements move one element per cycle (the scratchpad's write port).
            let k = (cfg.axi_data_width / cfg.elem_bits(mt)).max(1) as f64;
            assert!(
                eff * k > 0.85,
                "{preset}: {} at {:.0}% of the bus",
                mt.name(),
                eff * 100.0
            );
        }
    }
}
