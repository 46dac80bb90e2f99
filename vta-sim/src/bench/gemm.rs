//! VTA's `blocked_gemm_test` as a program: `out = low 8 bits of (bias + x . w^T)` for a
//! `batch x channels` input and `channels x channels` weights, in blocks of `blk` with one
//! or two virtual threads, instruction for instruction with VTA's token choreography. The
//! same builder as the conformance suite's (`tests/conformance/gemm.rs`), with the operand
//! bytes given (the suite derives them from matrices and checks the result).

use isa::builder::{Buf, BuildError, ProgramBuilder};
use isa::{DType, DepFlags, GemmInsn, HwConfig, Insn, MemInsn, MemType, Program, Uop, UopLoop};

fn deps(pop_prev: bool, pop_next: bool, push_prev: bool, push_next: bool) -> DepFlags {
    DepFlags {
        pop_prev,
        pop_next,
        push_prev,
        push_next,
    }
}

/// A LOAD (or STORE for OUT) of `y` rows of `x` elements.
fn mem(
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

/// VTA's `getGEMMUops`, one copy per virtual thread.
pub fn gemm_uops(
    batch: u32,
    in_feat: u32,
    out_feat: u32,
    compress: bool,
    threads: u32,
) -> Vec<Uop> {
    let mut uops = Vec::new();
    for t in 0..threads {
        let (src_off, wgt_off) = (t * batch * in_feat, t * out_feat * in_feat);
        if compress {
            for i in 0..batch {
                uops.push(Uop {
                    dst_idx: i * out_feat,
                    src_idx: src_off + i * in_feat,
                    wgt_idx: wgt_off,
                });
            }
        } else {
            for i in 0..batch {
                for j in 0..in_feat {
                    for k in 0..out_feat {
                        uops.push(Uop {
                            dst_idx: i * out_feat + k,
                            src_idx: src_off + i * in_feat + j,
                            wgt_idx: wgt_off + k * in_feat + j,
                        });
                    }
                }
            }
        }
    }
    uops
}

/// VTA's `getGEMMInsn`.
pub fn gemm_insn(
    uop_offset: u32,
    batch: u32,
    in_feat: u32,
    out_feat: u32,
    compress: bool,
    d: DepFlags,
) -> Insn {
    let lp = if compress {
        UopLoop {
            reset_reg: false,
            uop_bgn: uop_offset as u16,
            uop_end: (uop_offset + batch) as u16,
            iter_out: in_feat as u16,
            iter_in: out_feat as u16,
            dst_factor_out: 0,
            dst_factor_in: 1,
            src_factor_out: 1,
            src_factor_in: 0,
        }
    } else {
        UopLoop {
            reset_reg: false,
            uop_bgn: uop_offset as u16,
            uop_end: (uop_offset + batch * in_feat * out_feat) as u16,
            iter_out: 1,
            iter_in: 1,
            ..Default::default()
        }
    };
    let (wo, wi) = if compress {
        (1, in_feat as u16)
    } else {
        (0, 0)
    };
    Insn::Gemm(GemmInsn {
        deps: d,
        lp,
        wgt_factor_out: wo,
        wgt_factor_in: wi,
    })
}

/// The operands of [`blocked_gemm`], as packed DRAM bytes: `x` (INP elements), `w` (WGT),
/// `bias` (ACC).
pub struct GemmOperands {
    pub x: Vec<u8>,
    pub w: Vec<u8>,
    pub bias: Vec<u8>,
}

impl GemmOperands {
    /// Deterministic pseudo-random operands of the right sizes.
    pub fn random(cfg: &HwConfig, batch: u32, channels: u32, seed: u64) -> GemmOperands {
        let n = |rows: u32, cols: u32, bytes: usize| (rows * cols) as usize * bytes;
        GemmOperands {
            x: super::noise(n(batch, channels, 1), seed),
            w: super::noise(n(channels, channels, 1), seed + 1),
            bias: super::noise(n(batch, channels, cfg.acc_width() as usize / 8), seed + 2),
        }
    }
}

/// VTA's `blocked_gemm_test(batch, channels, block, uop_compression, virtual_threads)`:
/// segments `x`, `w`, `bias` (inputs, from `ops`) and `out` (output).
#[allow(clippy::too_many_arguments)]
pub fn blocked_gemm(
    cfg: &HwConfig,
    batch: u32,
    channels: u32,
    blk: u32,
    compress: bool,
    vt: u32,
    ops: GemmOperands,
) -> Result<Program, BuildError> {
    let (bb, bi, bo) = (cfg.batch(), cfg.block_in(), cfg.block_out());
    if !(blk.is_multiple_of(bi)
        && blk.is_multiple_of(bo)
        && blk.is_multiple_of(bb)
        && channels.is_multiple_of(blk * vt)
        && batch.is_multiple_of(blk))
    {
        return Err(BuildError::Program(format!(
            "blocked GEMM: the block ({blk}) must be a multiple of the GEMM tile \
             ({bb}x{bi}x{bo}) and divide the batch ({batch}); the channels ({channels}) must \
             be a multiple of {vt} block(s)"
        )));
    }
    let (in_feat, out_feat) = (channels, channels);
    let mut b = ProgramBuilder::new(cfg);
    let seg =
        |b: &mut ProgramBuilder, name: &str, dt: DType, shape: Vec<usize>, data: Vec<u8>| -> Buf {
            b.input(name, dt, shape, data)
        };
    let x = seg(
        &mut b,
        "x",
        DType::I8,
        vec![batch as usize, in_feat as usize],
        ops.x,
    );
    let w = seg(
        &mut b,
        "w",
        DType::I8,
        vec![out_feat as usize, in_feat as usize],
        ops.w,
    );
    let bias_dt = if cfg.acc_width() == 32 {
        DType::I32
    } else {
        DType::I16
    };
    let bias = seg(
        &mut b,
        "bias",
        bias_dt,
        vec![batch as usize, out_feat as usize],
        ops.bias,
    );
    let out = b.output("out", DType::I8, vec![batch as usize, out_feat as usize]);
    let uops = gemm_uops(blk / bb, blk / bi, blk / bo, compress, vt);
    let uop_size = uops.len() as u32;
    let codec = isa::Codec::new(cfg);
    let kernel_bytes = uops
        .iter()
        .flat_map(|u| codec.encode_uop(u).expect("micro-op fields fit"))
        .collect();
    let kern = b.input("kernel", DType::Uop, vec![uops.len()], kernel_bytes);
    b.emit(mem(
        MemType::Uop,
        0,
        b.addr(MemType::Uop, kern, 0),
        1,
        uop_size as u16,
        uop_size as u16,
        deps(false, false, false, false),
    ));
    for i in (0..batch).step_by(blk as usize) {
        for j in (0..out_feat).step_by(blk as usize) {
            let acc_elem = (i / bb * out_feat + j) / bo;
            b.emit(mem(
                MemType::Acc,
                0,
                b.addr(MemType::Acc, bias, acc_elem),
                (blk / bb) as u16,
                (blk / bo) as u16,
                (out_feat / bo) as u16,
                deps(false, i > 0 || j > 0, vt == 1, false),
            ));
            for k in (0..in_feat).step_by((blk * vt) as usize) {
                for l in (0..blk * vt).step_by(blk as usize) {
                    let pop = if vt == 1 {
                        true
                    } else {
                        (i > 0 || j > 0 || k > 0 || l > 0) && (k + l != blk * vt - blk)
                    };
                    let push_prev = if vt == 1 {
                        k + l != in_feat - blk
                    } else {
                        (k + l != in_feat - vt * blk)
                            && (k + l != in_feat - blk || j != out_feat - blk || i != batch - blk)
                    };
                    let push_next = k + l == in_feat - blk;
                    let wgt_elem = (j / bo * in_feat + k + l) / bi;
                    b.emit(mem(
                        MemType::Wgt,
                        l / bi * blk / bo,
                        b.addr(MemType::Wgt, w, wgt_elem),
                        (blk / bo) as u16,
                        (blk / bi) as u16,
                        (in_feat / bi) as u16,
                        deps(false, pop, false, false),
                    ));
                    let inp_elem = (i / bb * in_feat + k + l) / bi;
                    b.emit(mem(
                        MemType::Inp,
                        l / bi * blk / bb,
                        b.addr(MemType::Inp, x, inp_elem),
                        (blk / bb) as u16,
                        (blk / bi) as u16,
                        (in_feat / bi) as u16,
                        deps(false, false, false, true),
                    ));
                    b.emit(gemm_insn(
                        l / blk * uop_size / vt,
                        blk / bb,
                        blk / bi,
                        blk / bo,
                        compress,
                        deps(true, false, push_prev, push_next),
                    ));
                }
            }
            b.emit(mem(
                MemType::Out,
                0,
                b.addr(MemType::Out, out, acc_elem),
                (blk / bb) as u16,
                (blk / bo) as u16,
                (out_feat / bo) as u16,
                deps(true, false, true, false),
            ));
        }
    }
    b.emit(Insn::Finish(deps(false, true, false, false)));
    b.into_program()
}
