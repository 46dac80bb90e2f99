//! VTA's `gemm_test` and `blocked_gemm_test` (batch 256, channels 256, block 64, one and two
//! virtual threads, with and without micro-op compression), instruction for instruction with
//! VTA's token choreography. Output = low 8 bits of bias + X.W^T.

use crate::alu::{deps, mem};
use crate::common::{block, configs, output, pack, run, unpack, Rng, RngMatrix};
use isa::builder::{Buf, ProgramBuilder};
use isa::{DType, HwConfig, Insn, MemType, Program, Uop};
use ndarray::Array2;
use vta_sim::bench::gemm::{blocked_gemm, gemm_insn, gemm_uops, GemmOperands};

struct Operands {
    x: Array2<i8>,
    w: Array2<i8>,
    bias: Array2<i32>,
}

impl Operands {
    fn random(batch: usize, in_feat: usize, out_feat: usize, seed: u64) -> Self {
        let mut rng = Rng::new(seed);
        Operands {
            x: rng.matrix(batch, in_feat, -128, 127),
            w: rng.matrix(out_feat, in_feat, -128, 127),
            bias: rng.matrix(batch, out_feat, -128, 127),
        }
    }
    /// low 8 bits of bias + X.W^T, with int32 wrap-around.
    fn reference(&self) -> Array2<i8> {
        let x = self.x.mapv(i32::from);
        let w = self.w.mapv(i32::from);
        let acc = &self.bias + &x.dot(&w.t());
        acc.mapv(|v| v as i8)
    }
    /// Segments x, w, bias (inputs) and out (output), packed in VTA's blocked layouts.
    fn segments(&self, b: &mut ProgramBuilder) -> [Buf; 4] {
        let cfg = b.config().clone();
        let (xr, xc) = block(&cfg, MemType::Inp);
        let (wr, wc) = block(&cfg, MemType::Wgt);
        let (ar, ac) = block(&cfg, MemType::Acc);
        let (batch, in_feat) = self.x.dim();
        let out_feat = self.w.dim().0;
        [
            b.input("x", DType::I8, vec![batch, in_feat], pack(&self.x, xr, xc)),
            b.input(
                "w",
                DType::I8,
                vec![out_feat, in_feat],
                pack(&self.w, wr, wc),
            ),
            b.input(
                "bias",
                DType::I32,
                vec![batch, out_feat],
                pack(&self.bias, ar, ac),
            ),
            b.output("out", DType::I8, vec![batch, out_feat]),
        ]
    }
    fn check(&self, cfg: &HwConfig, p: &Program, what: &str) {
        let outs = run(p).unwrap_or_else(|e| panic!("{cfg} {what}: {e}"));
        let (r, c) = block(cfg, MemType::Out);
        let got: Array2<i8> = unpack(output(&outs, "out"), self.x.dim().0, self.w.dim().0, r, c);
        assert_eq!(got, self.reference(), "{cfg}: {what}");
    }
}

fn uop_segment(b: &mut ProgramBuilder, uops: &[Uop]) -> Buf {
    let codec = isa::Codec::new(b.config());
    let bytes = uops
        .iter()
        .flat_map(|u| codec.encode_uop(u).unwrap())
        .collect();
    b.input("kernel", DType::Uop, vec![uops.len()], bytes)
}

/// VTA's `gemm_test(batch, in_channels, out_channels, uop_compression)`.
fn gemm_test(cfg: &HwConfig, batch: u32, in_ch: u32, out_ch: u32, compress: bool) {
    let (bb, bi, bo) = (cfg.batch(), cfg.block_in(), cfg.block_out());
    let ops = Operands::random(batch as usize, in_ch as usize, out_ch as usize, 42);
    let mut b = ProgramBuilder::new(cfg);
    let [x, w, bias, out] = ops.segments(&mut b);
    let uops = gemm_uops(batch / bb, in_ch / bi, out_ch / bo, compress, 1);
    let kern = uop_segment(&mut b, &uops);
    let n = uops.len() as u16;
    let (inp_n, wgt_n, acc_n) = (
        (batch / bb * in_ch / bi) as u16,
        (out_ch / bo * in_ch / bi) as u16,
        (batch / bb * out_ch / bo) as u16,
    );
    b.emit(mem(
        MemType::Uop,
        0,
        b.addr(MemType::Uop, kern, 0),
        1,
        n,
        n,
        deps(false, false, false, false),
    ));
    b.emit(mem(
        MemType::Acc,
        0,
        b.addr(MemType::Acc, bias, 0),
        1,
        acc_n,
        acc_n,
        deps(false, false, true, false),
    ));
    b.emit(mem(
        MemType::Wgt,
        0,
        b.addr(MemType::Wgt, w, 0),
        1,
        wgt_n,
        wgt_n,
        deps(false, true, false, false),
    ));
    b.emit(mem(
        MemType::Inp,
        0,
        b.addr(MemType::Inp, x, 0),
        1,
        inp_n,
        inp_n,
        deps(false, false, false, true),
    ));
    b.emit(gemm_insn(
        0,
        batch / bb,
        in_ch / bi,
        out_ch / bo,
        compress,
        deps(true, false, false, true),
    ));
    b.emit(mem(
        MemType::Out,
        0,
        b.addr(MemType::Out, out, 0),
        1,
        acc_n,
        acc_n,
        deps(true, false, true, false),
    ));
    b.emit(Insn::Finish(deps(false, true, false, false)));
    ops.check(
        cfg,
        &b.into_program().unwrap(),
        &format!("gemm_test compressed={compress}"),
    );
}

#[test]
fn plain_gemm_with_and_without_compression() {
    for cfg in configs() {
        for compress in [true, false] {
            gemm_test(
                &cfg,
                4 * cfg.batch(),
                4 * cfg.block_out(),
                4 * cfg.block_in(),
                compress,
            );
        }
    }
}

/// VTA's `blocked_gemm_test(batch, channels, block, uop_compression, virtual_threads)`, built by
/// `vta_sim::bench::gemm::blocked_gemm` (shared with the benchmarks) on operands packed here,
/// with the reference computed here.
pub fn blocked_gemm_program(
    cfg: &HwConfig,
    batch: u32,
    channels: u32,
    blk: u32,
    compress: bool,
    vt: u32,
    seed: u64,
) -> (Program, Array2<i8>) {
    let ops = Operands::random(batch as usize, channels as usize, channels as usize, seed);
    let pack_as = |m: MemType| block(cfg, m);
    let (xr, xc) = pack_as(MemType::Inp);
    let (wr, wc) = pack_as(MemType::Wgt);
    let (ar, ac) = pack_as(MemType::Acc);
    let packed = GemmOperands {
        x: pack(&ops.x, xr, xc),
        w: pack(&ops.w, wr, wc),
        bias: pack(&ops.bias, ar, ac),
    };
    let p = blocked_gemm(cfg, batch, channels, blk, compress, vt, packed).unwrap();
    (p, ops.reference())
}

#[test]
fn blocked_gemm_256_with_one_and_two_virtual_threads() {
    for cfg in configs() {
        for vt in [1, 2] {
            for compress in [true, false] {
                let (p, want) = blocked_gemm_program(&cfg, 256, 256, 64, compress, vt, 7);
                let outs = run(&p).unwrap_or_else(|e| panic!("{cfg} vt={vt}: {e}"));
                let (r, c) = block(&cfg, MemType::Out);
                let got: Array2<i8> = unpack(output(&outs, "out"), 256, 256, r, c);
                assert_eq!(
                    got, want,
                    "{cfg}: blocked GEMM vt={vt} compressed={compress}"
                );
            }
        }
    }
}
