//! VTA's `alu_test`: every ALU op x immediate/tensor operand x with/without micro-op loop
//! compression, with VTA's operand ranges and token choreography (LOAD ACC -> ALU -> STORE per
//! batch row group, FINISH waiting for the last store). And the same for the activation table
//! of configs with `ALU_LUT` (`isa::spec` 8.3): a table loaded with LOAD ACC8 and written by
//! LUTW, then LUT over inputs inside and beyond the int8 range.

use crate::common::{configs, output, pack, run, unpack, Rng, RngMatrix};
use isa::builder::ProgramBuilder;
use isa::{AluInsn, AluOp, DType, DepFlags, HwConfig, Insn, MemInsn, MemType, Uop, UopLoop};
use ndarray::Array2;

pub fn deps(pop_prev: bool, pop_next: bool, push_prev: bool, push_next: bool) -> DepFlags {
    DepFlags {
        pop_prev,
        pop_next,
        push_prev,
        push_next,
    }
}

/// A LOAD (or STORE when `memory_type` is OUT) of `y` rows of `x` elements.
#[allow(clippy::too_many_arguments)]
pub fn mem(
    memory_type: MemType,
    sram: u32,
    dram: u32,
    y: u16,
    x: u16,
    stride: u16,
    d: DepFlags,
) -> Insn {
    let m = MemInsn::transfer(memory_type, sram as u16, dram, y, x, stride).with_deps(d);
    if memory_type == MemType::Out {
        Insn::Store(m)
    } else {
        Insn::Load(m)
    }
}

/// The reference for one lane, as VTA's test computes it (SHR: negative = left shift).
fn reference(op: AluOp, a: i32, b: i32) -> i32 {
    match op {
        AluOp::Min => a.min(b),
        AluOp::Max => a.max(b),
        AluOp::Add => a.wrapping_add(b),
        AluOp::Shr if b >= 0 => a >> b,
        AluOp::Shr => a.wrapping_shl((-b) as u32),
        AluOp::Mul => a.wrapping_mul(b),
        AluOp::Lut | AluOp::LutWrite => unreachable!("lut_test checks the table operations"),
    }
}

/// VTA's operand ranges (inputs, immediates) per op; MUL is ours.
fn ranges(op: AluOp) -> ((i64, i64), (i64, i64)) {
    match op {
        AluOp::Min | AluOp::Max => ((-64, 63), (-16384, 16383)),
        AluOp::Add => ((-32, 31), (-16384, 16383)),
        AluOp::Shr => ((-8, 7), (-8, 7)),
        AluOp::Mul => ((-128, 127), (-128, 127)),
        AluOp::Lut | AluOp::LutWrite => unreachable!("lut_test checks the table operations"),
    }
}

fn alu_test(cfg: &HwConfig, op: AluOp, use_imm: bool, batch: usize, vector: usize, compress: bool) {
    let (bb, bo) = (cfg.batch() as usize, cfg.block_out() as usize);
    let tx = vector / bo;
    let sets = if use_imm { 1 } else { 2 };
    let mut rng =
        Rng::new(0xDEADB ^ (op as u64) << 8 ^ u64::from(use_imm) << 4 ^ u64::from(compress));
    let ((lo, hi), (ilo, ihi)) = ranges(op);
    let imms: Vec<i16> = (0..batch / bb)
        .map(|_| rng.range(ilo, ihi) as i16)
        .collect();
    let inputs: Array2<i32> = rng.matrix(batch, vector * sets, lo, hi);

    let mut b = ProgramBuilder::new(cfg);
    let inp = b.input(
        "inputs",
        DType::I32,
        vec![batch, vector * sets],
        pack(&inputs, bb, bo),
    );
    let out = b.output("out", DType::I8, vec![batch, vector]);
    let uops: Vec<Uop> = if compress {
        vec![Uop {
            dst_idx: 0,
            src_idx: tx as u32,
            wgt_idx: 0,
        }]
    } else {
        (0..tx as u32)
            .map(|i| Uop {
                dst_idx: i,
                src_idx: tx as u32 + i,
                wgt_idx: 0,
            })
            .collect()
    };
    let kern = b.input("kernel", DType::Uop, vec![uops.len()], {
        let codec = isa::Codec::new(cfg);
        uops.iter()
            .flat_map(|u| codec.encode_uop(u).unwrap())
            .collect()
    });
    let n_uops = uops.len() as u16;
    b.emit(mem(
        MemType::Uop,
        0,
        b.addr(MemType::Uop, kern, 0),
        1,
        n_uops,
        n_uops,
        deps(false, false, false, false),
    ));
    for g in 0..batch / bb {
        let acc_at = b.addr(MemType::Acc, inp, (g * tx * sets) as u32);
        let n = (tx * sets) as u16;
        b.emit(mem(
            MemType::Acc,
            0,
            acc_at,
            1,
            n,
            n,
            deps(false, g > 0, false, false),
        ));
        let lp = if compress {
            UopLoop {
                uop_bgn: 0,
                uop_end: 1,
                iter_out: 1,
                iter_in: tx as u16,
                dst_factor_in: 1,
                src_factor_in: 1,
                ..Default::default()
            }
        } else {
            UopLoop {
                uop_bgn: 0,
                uop_end: tx as u16,
                iter_out: 1,
                iter_in: 1,
                ..Default::default()
            }
        };
        b.emit(Insn::Alu(AluInsn {
            deps: deps(false, false, false, true),
            lp,
            op,
            use_imm,
            imm: imms[g],
        }));
        let out_at = b.addr(MemType::Out, out, (g * tx) as u32);
        b.emit(mem(
            MemType::Out,
            0,
            out_at,
            1,
            tx as u16,
            tx as u16,
            deps(true, false, true, false),
        ));
    }
    b.emit(Insn::Finish(deps(false, true, false, false)));
    let program = b.into_program().unwrap();

    let outs = run(&program).unwrap_or_else(|e| panic!("{cfg} {op:?} imm={use_imm}: {e}"));
    let got: Array2<i8> = unpack(output(&outs, "out"), batch, vector, bb, bo);
    let want = Array2::from_shape_fn((batch, vector), |(i, j)| {
        let operand = if use_imm {
            i32::from(imms[i / bb])
        } else {
            inputs[[i, j + vector]]
        };
        reference(op, inputs[[i, j]], operand) as i8
    });
    assert_eq!(
        got, want,
        "{cfg}: ALU {op:?} use_imm={use_imm} compressed={compress}"
    );
}

#[test]
fn every_alu_op_with_immediate_and_tensor_operands_with_and_without_compression() {
    for cfg in configs() {
        for op in AluOp::ALL {
            for use_imm in [true, false] {
                for compress in [true, false] {
                    alu_test(&cfg, op, use_imm, 16, 128, compress);
                }
            }
        }
    }
}

/// The configs with the activation table under test: VTA's default tile (16 lanes per ACC
/// row) and the batched one (32 lanes, so a table row holds 32 entries).
fn lut_configs() -> impl Iterator<Item = HwConfig> {
    ["lut", "batched"].into_iter().map(|n| HwConfig {
        alu_lut: true,
        ..HwConfig::preset(n).unwrap()
    })
}

/// A LOAD ACC8 of the 256-byte table at `table` into ACC rows from `base`, then one LUTW
/// writing all 256 entries from them (the recipe of spec 8.3) with micro-op `uop`.
fn write_table(b: &mut ProgramBuilder, cfg: &HwConfig, table: isa::builder::Buf, base: u32) {
    let lanes = (cfg.batch() * cfg.block_out()) as u16;
    let rows = 256u16.div_ceil(lanes);
    let at = b.addr(MemType::Acc8, table, 0);
    b.emit(mem(
        MemType::Acc8,
        base,
        at,
        1,
        rows,
        rows,
        deps(false, false, false, false),
    ));
    let kern = b.kernel(&[Uop {
        dst_idx: 0,
        src_idx: base,
        wgt_idx: 0,
    }]);
    let loops = isa::builder::UopLoops {
        iter_out: rows,
        iter_in: lanes.min(256),
        dst: (if rows > 1 { lanes } else { 0 }, 1),
        src: (1, 0),
        wgt: (0, 0),
    };
    b.alu(kern, loops, AluOp::LutWrite, isa::builder::Operand::Tensor);
}

/// `alu_test` for LUT: a random table, inputs in [-300, 300] (so that some saturate), the
/// LUT in place (tensor operand `src == dst`) or from an immediate per batch row group.
fn lut_test(cfg: &HwConfig, use_imm: bool, batch: usize, vector: usize, compress: bool) {
    let (bb, bo) = (cfg.batch() as usize, cfg.block_out() as usize);
    let tx = vector / bo;
    let mut rng = Rng::new(0x1u64 << 40 ^ u64::from(use_imm) << 4 ^ u64::from(compress));
    let table: Vec<i8> = (0..256).map(|_| rng.range(-128, 127) as i8).collect();
    let imms: Vec<i16> = (0..batch / bb)
        .map(|_| rng.range(-300, 300) as i16)
        .collect();
    let inputs: Array2<i32> = rng.matrix(batch, vector, -300, 300);

    let mut b = ProgramBuilder::new(cfg);
    let inp = b.input(
        "inputs",
        DType::I32,
        vec![batch, vector],
        pack(&inputs, bb, bo),
    );
    let tab = b.input(
        "table",
        DType::I8,
        vec![256],
        table.iter().map(|&v| v as u8).collect(),
    );
    let out = b.output("out", DType::I8, vec![batch, vector]);
    // The table rows go after the inputs' rows.
    write_table(&mut b, cfg, tab, tx as u32);
    let uops: Vec<Uop> = if compress {
        vec![Uop::default()]
    } else {
        (0..tx as u32)
            .map(|i| Uop {
                dst_idx: i,
                src_idx: i,
                wgt_idx: 0,
            })
            .collect()
    };
    let kern = b.input("kernel", DType::Uop, vec![uops.len()], {
        let codec = isa::Codec::new(cfg);
        uops.iter()
            .flat_map(|u| codec.encode_uop(u).unwrap())
            .collect()
    });
    // The LUTW's kernel sits at micro-op 0: this kernel goes after it.
    let at = 1u32;
    let n_uops = uops.len() as u16;
    b.emit(mem(
        MemType::Uop,
        at,
        b.addr(MemType::Uop, kern, 0),
        1,
        n_uops,
        n_uops,
        deps(false, false, false, false),
    ));
    for g in 0..batch / bb {
        let acc_at = b.addr(MemType::Acc, inp, (g * tx) as u32);
        b.emit(mem(
            MemType::Acc,
            0,
            acc_at,
            1,
            tx as u16,
            tx as u16,
            deps(false, g > 0, false, false),
        ));
        let lp = UopLoop {
            uop_bgn: at as u16,
            uop_end: at as u16 + if compress { 1 } else { n_uops },
            iter_out: 1,
            iter_in: if compress { tx as u16 } else { 1 },
            dst_factor_in: u16::from(compress),
            src_factor_in: u16::from(compress),
            ..Default::default()
        };
        b.emit(Insn::Alu(AluInsn {
            deps: deps(false, false, false, true),
            lp,
            op: AluOp::Lut,
            use_imm,
            imm: imms[g],
        }));
        let out_at = b.addr(MemType::Out, out, (g * tx) as u32);
        b.emit(mem(
            MemType::Out,
            0,
            out_at,
            1,
            tx as u16,
            tx as u16,
            deps(true, false, true, false),
        ));
    }
    b.emit(Insn::Finish(deps(false, true, false, false)));
    let program = b.into_program().unwrap();

    let outs = run(&program).unwrap_or_else(|e| panic!("{cfg} LUT imm={use_imm}: {e}"));
    let got: Array2<i8> = unpack(output(&outs, "out"), batch, vector, bb, bo);
    let entry = |v: i32| table[usize::from(v.clamp(-128, 127) as i8 as u8)];
    let want = Array2::from_shape_fn((batch, vector), |(i, j)| {
        entry(if use_imm {
            i32::from(imms[i / bb])
        } else {
            inputs[[i, j]]
        })
    });
    assert_eq!(
        got, want,
        "{cfg}: ALU LUT use_imm={use_imm} compressed={compress}"
    );
}

#[test]
fn lut_with_immediate_and_tensor_operands_with_and_without_compression() {
    for cfg in lut_configs() {
        for use_imm in [true, false] {
            for compress in [true, false] {
                lut_test(&cfg, use_imm, 16, 128, compress);
            }
        }
    }
}
