//! The compiler's cost figures against the execution core they describe: the compiler does
//! not depend on `vta-hw`, so `compiler::backend::roofline` keeps its own copies of the
//! core's issue rates and of the micro-ops it streams, and this checks that they agree.

use compiler::backend::roofline::{self, IssueRates};
use isa::rng::Rng;
use isa::{AluInsn, AluOp, HwConfig, UopLoop};
use vta_hw::exec::{exec_timing, streamed_uops};

/// Every preset (the `lut` one has the activation table), and the default config without
/// ALU MUL.
fn configs() -> Vec<HwConfig> {
    let mut v: Vec<HwConfig> = isa::config::PRESETS
        .iter()
        .map(|p| HwConfig::preset(p.0).unwrap())
        .collect();
    let mut no_mul = HwConfig::default();
    no_mul.alu_mul = false;
    v.push(no_mul);
    v
}

/// An ALU instruction whose fields hit the streaming shapes often: one-micro-op kernels,
/// zero and non-zero factors, every operation, immediate or tensor, with and without reset.
fn random_alu(rng: &mut Rng) -> AluInsn {
    let small = |rng: &mut Rng| rng.range(0u16, 3);
    let bgn = rng.range(0u16, 4);
    let lp = UopLoop {
        reset_reg: rng.below(8) == 0,
        uop_bgn: bgn,
        uop_end: bgn + rng.range(0u16, 2),
        iter_out: rng.range(0u16, 4),
        iter_in: rng.range(0u16, 5),
        dst_factor_out: small(rng),
        dst_factor_in: small(rng),
        src_factor_out: small(rng),
        src_factor_in: small(rng),
    };
    AluInsn {
        deps: Default::default(),
        lp,
        op: AluOp::EVERY[rng.below(AluOp::EVERY.len() as u64) as usize],
        use_imm: rng.below(2) == 0,
        imm: 1,
    }
}

#[test]
fn the_compilers_streamed_micro_ops_are_the_execution_cores() {
    let mut rng = Rng::new(13);
    for cfg in configs() {
        for _ in 0..4000 {
            let a = random_alu(&mut rng);
            assert_eq!(
                roofline::streamed_uops(&cfg, &a),
                streamed_uops(&cfg, &a),
                "{} {a:?}",
                cfg.config_string()
            );
        }
    }
}

#[test]
fn the_compilers_issue_rates_are_the_execution_cores() {
    for cfg in configs().into_iter().filter(|c| c.alu_mul) {
        let t = exec_timing(&cfg);
        assert_eq!(
            IssueRates::RTL.alu_mul,
            1 + u64::from(t.mul_extra),
            "{}",
            cfg.config_string()
        );
    }
}
