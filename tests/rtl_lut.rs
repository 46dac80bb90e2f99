//! Randomized differential testing of the activation table (`ALU_LUT`, `isa::spec` 8.3): random
//! programs that write the table (a whole table from ACC8-loaded rows, single entries from
//! immediates, entries from random rows and lanes), look values up (tensor operands in place
//! and across rows, immediates, inputs inside and far beyond the int8 range), and mix in the
//! other ALU operations and resets so that every forwarding path into and out of the table is
//! taken (a LUT right after the ALU op that wrote its operand row, a LUT right after the LUTW
//! that wrote its entry, back to back within one instruction). Each program runs on the
//! functional simulator (race detector on) and on the RTL; the stored bytes must agree byte
//! for byte and the counters exactly.
//!
//! `VTA_LUT_PROGRAMS=N` scales the number of programs per config; `VTA_LUT_SEED=S` changes
//! the seeds.

#[path = "support/rtl.rs"]
mod rtl_support;

use drivers::{run_program, ProgramRun, RunTimeout};
use isa::builder::{Operand, ProgramBuilder, UopLoops};
use isa::rng::Rng;
use isa::{AluOp, DType, HwConfig, MemType, Module, Program, Uop};
use vta_sim::FsimDevice;

/// ACC rows the programs compute on (from 0); the table's source rows follow them.
const ROWS: u32 = 12;
/// ACC rows stored at the end: every row a LUTW's dst (a table entry, below 256) names, so
/// that a LUTW writing ACC by mistake shows.
const STORED: u32 = 256;

/// Random micro-ops and loops whose `dst` stays below `dst_n` and `src` below `src_n`.
fn kernel(r: &mut Rng, dst_n: u32, src_n: u32) -> (Vec<Uop>, UopLoops) {
    let len = r.range(1, 3);
    let iter_out = r.range(1, 3) as u16;
    let iter_in = r.range(1, 4) as u16;
    let factors = |r: &mut Rng, n: u32| -> (u16, u16) {
        let fo = r.range(0, 3) as u16;
        let fi = r.range(0, 2) as u16;
        if (iter_out as u32 - 1) * fo as u32 + (iter_in as u32 - 1) * fi as u32 >= n {
            (0, 0)
        } else {
            (fo, fi)
        }
    };
    let (fd, fs) = (factors(r, dst_n), factors(r, src_n));
    let reach =
        |(o, i): (u16, u16)| (iter_out as u32 - 1) * o as u32 + (iter_in as u32 - 1) * i as u32;
    let uops = (0..len)
        .map(|_| Uop {
            dst_idx: r.range(0, dst_n - 1 - reach(fd)),
            src_idx: if r.chance(30) {
                // Often in place.
                u32::MAX
            } else {
                r.range(0, src_n - 1 - reach(fs))
            },
            wgt_idx: 0,
        })
        .map(|mut u| {
            if u.src_idx == u32::MAX {
                u.src_idx = u.dst_idx.min(src_n - 1 - reach(fs));
            }
            u
        })
        .collect();
    (
        uops,
        UopLoops {
            iter_out,
            iter_in,
            dst: fd,
            src: fs,
            wgt: (0, 0),
        },
    )
}

/// Loads a random 256-entry table into ACC rows from `ROWS` with LOAD ACC8 and writes it
/// with LUTW (the recipe of spec 8.3, sometimes split over two instructions).
fn write_table(r: &mut Rng, b: &mut ProgramBuilder, cfg: &HwConfig, n: usize) {
    let lanes = cfg.batch() * cfg.block_out();
    let rows = 256u32.div_ceil(lanes);
    let bytes = r.bytes(256);
    let padded = {
        let mut v = bytes.clone();
        v.resize((rows * lanes) as usize, 0);
        v
    };
    let t = b.input(&format!("table{n}"), DType::I8, vec![padded.len()], padded);
    b.load_2d(MemType::Acc8, ROWS, t, 0, 1, rows as u16, rows as u16);
    let per_row = lanes.min(256) as u16;
    let lutw = |b: &mut ProgramBuilder, first_row: u32, count: u32| {
        let k = b.kernel(&[Uop {
            dst_idx: first_row * lanes,
            src_idx: ROWS + first_row,
            wgt_idx: 0,
        }]);
        let loops = UopLoops {
            iter_out: count as u16,
            iter_in: per_row,
            dst: (if count > 1 { lanes as u16 } else { 0 }, 1),
            src: (1, 0),
            wgt: (0, 0),
        };
        b.alu(k, loops, AluOp::LutWrite, Operand::Tensor);
    };
    if rows > 1 && r.chance(40) {
        let split = r.range(1, rows - 1);
        lutw(b, 0, split);
        lutw(b, split, rows - split);
    } else {
        lutw(b, 0, rows);
    }
}

/// A random value, mostly near the int8 range, sometimes anywhere in 32 bits.
fn value(r: &mut Rng) -> i32 {
    match r.range(0, 9) {
        0 => r.next_u64() as i32,
        1 => r.range(-40000, 40000),
        _ => r.range(-200, 200),
    }
}

fn program(cfg: &HwConfig, seed: u64) -> Program {
    let mut r = Rng::new(seed);
    let mut b = ProgramBuilder::new(cfg);
    let lanes = (cfg.batch() * cfg.block_out()) as usize;
    // Every stored row is written by this program: the RTL device keeps ACC across runs.
    let rows = STORED as usize;
    let a: Vec<u8> = (0..rows * lanes)
        .flat_map(|_| value(&mut r).to_le_bytes())
        .collect();
    let a = b.input("a", DType::I32, vec![rows, lanes], a);
    b.load_2d(MemType::Acc, 0, a, 0, 1, STORED as u16, STORED as u16);
    let y = b.output("y", DType::I8, vec![STORED as usize, lanes]);
    let mut tables = 0;
    let mut resets = vec![];
    write_table(&mut r, &mut b, cfg, tables);
    let mut ops = vec![AluOp::Min, AluOp::Max, AluOp::Add, AluOp::Shr];
    if cfg.alu_mul {
        ops.push(AluOp::Mul);
    }
    for _ in 0..r.range(4, 12) {
        match r.range(0, 9) {
            // LUT, the most frequent.
            0..=3 => {
                let (uops, loops) = kernel(&mut r, ROWS, ROWS);
                let k = b.kernel(&uops);
                let operand = if r.chance(80) {
                    Operand::Tensor
                } else {
                    Operand::Imm(r.range(-300, 300) as i16)
                };
                b.alu(k, loops, AluOp::Lut, operand);
            }
            // LUTW of single entries: from immediates or from random rows and lanes.
            4 | 5 => {
                let (mut uops, loops) = kernel(&mut r, 256, ROWS);
                let reach = (loops.iter_out as u32 - 1) * loops.dst.0 as u32
                    + (loops.iter_in as u32 - 1) * loops.dst.1 as u32;
                for u in &mut uops {
                    // Entries anywhere in the table, lanes of any row.
                    u.dst_idx = r.range(0, 255 - reach);
                }
                let k = b.kernel(&uops);
                let operand = if r.chance(50) {
                    Operand::Tensor
                } else {
                    Operand::Imm(value(&mut r) as i16)
                };
                b.alu(k, loops, AluOp::LutWrite, operand);
            }
            // A whole new table.
            6 => {
                tables += 1;
                write_table(&mut r, &mut b, cfg, tables);
            }
            // Another ALU op, or a table op with reset_reg (a plain reset of ACC rows).
            _ => {
                let (uops, loops) = kernel(&mut r, ROWS, ROWS);
                let k = b.kernel(&uops);
                if r.chance(15) {
                    let op = AluOp::TABLE[r.range(0, 1) as usize];
                    b.alu(k, loops, op, Operand::Tensor);
                    // The builder has no reset flag for ALU: set it once the program is built.
                    resets.push(b.insns().len() - 1);
                } else {
                    let op = ops[r.range(0, ops.len() as u32 - 1) as usize];
                    let operand = if r.chance(50) {
                        Operand::Tensor
                    } else {
                        Operand::Imm(match op {
                            AluOp::Shr => r.range(-6, 6) as i16,
                            AluOp::Mul => r.range(-5, 5) as i16,
                            _ => r.range(-300, 300) as i16,
                        })
                    };
                    b.alu(k, loops, op, operand);
                }
            }
        }
    }
    b.dep_push(Module::Compute, Module::Store);
    b.dep_pop(Module::Compute, Module::Store);
    b.store_2d(0, y, 0, 1, STORED as u16, STORED as u16);
    let mut p = b.finish().unwrap();
    for k in resets {
        match &mut p.insns[k] {
            isa::Insn::Alu(a) => a.lp.reset_reg = true,
            other => panic!("instruction {k} is {other:?}, not the table op"),
        }
    }
    p
}

fn run(dev: &mut dyn drivers::Device, p: &Program) -> Result<ProgramRun, String> {
    run_program(dev, p, &[], RunTimeout::default()).map_err(|e| e.to_string())
}

fn differential(cfg: &HwConfig, programs: u64) {
    let scale: u64 = std::env::var("VTA_LUT_PROGRAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let base: u64 = std::env::var("VTA_LUT_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut rtl = rtl_support::device(cfg);
    let start = std::time::Instant::now();
    let (mut cycles, mut lut_uops) = (0u64, 0u64);
    for s in 0..programs * scale {
        let seed = (base * 1_000_003 + s + 1) ^ cfg.isa_hash();
        let p = program(cfg, seed);
        let want = run(&mut FsimDevice::checking_races(cfg), &p)
            .unwrap_or_else(|e| panic!("{cfg} program {seed}: fsim refused it: {e}"));
        let got = run(&mut rtl, &p)
            .unwrap_or_else(|e| panic!("{cfg} program {seed}: the RTL run failed: {e}"));
        if want.outputs != got.outputs {
            let (w, g) = (&want.outputs[0].1, &got.outputs[0].1);
            let i = w.iter().zip(g).position(|(a, b)| a != b).unwrap_or(0);
            panic!(
                "{cfg} program {seed}: output byte {i} (ACC row {}, lane {}) is {} on fsim, \
                 {} on rtl\nprogram:\n{}",
                i / (w.len() / STORED as usize),
                i % (w.len() / STORED as usize),
                w[i] as i8,
                g[i] as i8,
                isa::asm::print_program(&p)
            );
        }
        assert_eq!(
            want.report.counters, got.report.counters,
            "{cfg} program {seed}: counters differ"
        );
        cycles += got.report.get("cycles").unwrap_or(0);
        lut_uops += want.report.get("alu_uops").unwrap_or(0);
    }
    eprintln!(
        "{cfg}: {} random table programs ({lut_uops} ALU micro-ops, {cycles} cycles) identical \
         on fsim and rtl ({:.1} s)",
        programs * scale,
        start.elapsed().as_secs_f64()
    );
}

#[test]
fn random_table_programs_small() {
    let cfg = HwConfig {
        alu_lut: true,
        ..HwConfig::preset("small").unwrap()
    };
    differential(&cfg, 1000);
}

#[test]
fn random_table_programs_default_tile() {
    differential(&HwConfig::preset("lut").unwrap(), 300);
}

/// The generator itself: every program writes the whole table before its first lookup, and
/// they differ from seed to seed.
#[test]
fn programs_write_the_table_before_reading_it() {
    let cfg = HwConfig::preset("lut").unwrap();
    let a = program(&cfg, 1);
    let b = program(&cfg, 2);
    assert_ne!(a.insns, b.insns);
    for p in [a, b] {
        let first_lut = p
            .insns
            .iter()
            .position(|i| matches!(i, isa::Insn::Alu(x) if x.op == AluOp::Lut && !x.lp.reset_reg));
        let first_lutw = p
            .insns
            .iter()
            .position(|i| matches!(i, isa::Insn::Alu(x) if x.op == AluOp::LutWrite));
        assert!(first_lutw < first_lut || first_lut.is_none());
    }
}

/// `examples/sigmoid_lut.vasm`, the README's example: the same bytes on fsim and RTL, and
/// those of `round(127 * sigmoid(saturate(x) / 16))`.
#[test]
fn the_sigmoid_example_runs_on_fsim_and_rtl() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/sigmoid_lut.vasm");
    let src = std::fs::read_to_string(&path).unwrap();
    let ctx = isa::asm::AsmContext {
        file_name: path.display().to_string(),
        base_dir: path.parent().unwrap().to_path_buf(),
        config: None,
    };
    let p = isa::asm::parse_program(&src, &ctx).unwrap();
    assert!(p.config.alu_lut);
    let want = run(&mut FsimDevice::checking_races(&p.config), &p).unwrap();
    let got = run(&mut rtl_support::device(&p.config), &p).unwrap();
    assert_eq!(want.outputs, got.outputs);
    let x = [
        -200, -128, -100, -64, -32, -16, -8, -1, 0, 1, 8, 16, 32, 64, 127, 300,
    ];
    let sigmoid = |v: i32| {
        let s = f64::from(v.clamp(-128, 127)) / 16.0;
        (127.0 / (1.0 + (-s).exp())).round() as i8 as u8
    };
    let y: Vec<u8> = x.iter().map(|&v| sigmoid(v)).collect();
    assert_eq!(want.outputs[0], ("y".to_string(), y));
}
