use isa::{DepFlags, GemmInsn, Insn, MemInsn, MemType, UopLoop};

use super::*;

fn gemm(n: u16, deps: DepFlags) -> Insn {
    Insn::Gemm(GemmInsn {
        deps,
        lp: UopLoop {
            reset_reg: false,
            uop_bgn: 0,
            uop_end: 1,
            iter_out: 1,
            iter_in: n,
            dst_factor_out: 0,
            dst_factor_in: 0,
            src_factor_out: 0,
            src_factor_in: 0,
        },
        wgt_factor_out: 0,
        wgt_factor_in: 0,
    })
}

fn load(m: MemType, x: u16, y: u16, deps: DepFlags) -> Insn {
    Insn::Load(MemInsn {
        deps,
        memory_type: m,
        sram_base: 0,
        dram_base: 0,
        y_size: y,
        x_size: x,
        x_stride: x,
        y_pad_0: 0,
        y_pad_1: 0,
        x_pad_0: 0,
        x_pad_1: 0,
    })
}

const PUSH_NEXT: DepFlags = DepFlags {
    push_next: true,
    ..DepFlags::NONE
};
const POP_PREV: DepFlags = DepFlags {
    pop_prev: true,
    ..DepFlags::NONE
};

fn time(cfg: &HwConfig, insns: &[Insn]) -> u64 {
    cycles(cfg, insns, &MemTiming::default(), &CALIBRATION).unwrap()
}

#[test]
fn gemm_micro_ops_issue_one_per_cycle() {
    let cfg = HwConfig::default();
    let finish = Insn::Finish(DepFlags::NONE);
    let short = time(&cfg, &[gemm(100, DepFlags::NONE), finish]);
    let long = time(&cfg, &[gemm(1100, DepFlags::NONE), finish]);
    assert_eq!(long - short, 1000);
    // Back-to-back instructions do not add a pipeline drain each.
    let two = time(
        &cfg,
        &[gemm(550, DepFlags::NONE), gemm(550, DepFlags::NONE), finish],
    );
    assert!(two.abs_diff(long) <= 2, "{two} vs {long}");
}

#[test]
fn a_gemm_waiting_for_a_load_runs_after_it_and_one_that_does_not_overlaps_it() {
    let cfg = HwConfig::default();
    // FINISH retires once the compute module is done: the load's token makes it wait for
    // the load.
    let finish = Insn::Finish(POP_PREV);
    let wgt = load(MemType::Wgt, 64, 1, PUSH_NEXT);
    // 64 WGT tiles of 256 bytes on a 64-bit bus: 2048 beats.
    let alone = time(&cfg, &[wgt, finish]);
    assert!((2048..2200).contains(&alone), "{alone}");
    // A GEMM that pops the load's token runs after it (and FINISH waits for the core)...
    let dependent = time(
        &cfg,
        &[wgt, gemm(1000, POP_PREV), Insn::Finish(DepFlags::NONE)],
    );
    assert!(dependent >= alone + 1000, "{dependent} vs {alone}");
    // ... one that does not runs beside it.
    let overlapped = time(&cfg, &[wgt, gemm(1000, DepFlags::NONE), finish]);
    assert!(overlapped < alone + 100, "{overlapped} vs {alone}");
}

#[test]
fn a_wider_bus_loads_faster() {
    let narrow = HwConfig::default();
    let wide = HwConfig::preset("wide-bus").unwrap();
    let prog = [load(MemType::Wgt, 64, 4, PUSH_NEXT), Insn::Finish(POP_PREV)];
    let (n, w) = (time(&narrow, &prog), time(&wide, &prog));
    assert!(w * 3 < n, "256-bit {w} vs 64-bit {n}");
}

#[test]
fn a_pop_nobody_pushes_is_a_deadlock_naming_the_queue() {
    let cfg = HwConfig::default();
    let e = cycles(
        &cfg,
        &[gemm(4, POP_PREV), Insn::Finish(DepFlags::NONE)],
        &MemTiming::default(),
        &CALIBRATION,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("compute waits at instruction 0 for a l2g token"),
        "{e}"
    );
    let e = cycles(
        &cfg,
        &[gemm(4, DepFlags::NONE)],
        &MemTiming::default(),
        &CALIBRATION,
    )
    .unwrap_err();
    assert_eq!(e, TimingError::NoFinish);
}

/// A program that loads two micro-ops (`dst` 0 in ACC's first bank, `dst` 1536 in its
/// second), runs an ALU instruction over rows 0..500 with the first, then a GEMM of 100
/// micro-ops with micro-op `gemm_uop`.
fn bank_program(cfg: &HwConfig, gemm_uop: u16) -> Program {
    let codec = isa::Codec::new(cfg);
    let mut p = Program {
        config: cfg.clone(),
        insns: vec![],
        segments: vec![],
    };
    let mut bytes = vec![];
    for dst in [0, 1536] {
        let u = Uop {
            dst_idx: dst,
            src_idx: 0,
            wgt_idx: 0,
        };
        bytes.extend(codec.encode_uop(&u).unwrap());
    }
    let offset = p.push_segment(
        "uops",
        isa::DType::Uop,
        vec![2],
        isa::program::Role::NONE,
        Some(bytes),
    );
    let mut uop_load = load(MemType::Uop, 2, 1, DepFlags::NONE);
    if let Insn::Load(m) = &mut uop_load {
        m.dram_base = (offset / isa::UOP_BYTES as u64) as u32;
    }
    let lp = |bgn: u16, n: u16, dfi: u16| UopLoop {
        reset_reg: false,
        uop_bgn: bgn,
        uop_end: bgn + 1,
        iter_out: 1,
        iter_in: n,
        dst_factor_out: 0,
        dst_factor_in: dfi,
        src_factor_out: 0,
        src_factor_in: 0,
    };
    let alu = Insn::Alu(isa::AluInsn {
        deps: DepFlags::NONE,
        lp: lp(0, 500, 1),
        op: AluOp::Add,
        use_imm: true,
        imm: 1,
    });
    let gemm = Insn::Gemm(GemmInsn {
        deps: DepFlags::NONE,
        lp: lp(gemm_uop, 100, 0),
        wgt_factor_out: 0,
        wgt_factor_in: 0,
    });
    p.insns = vec![uop_load, alu, gemm, Insn::Finish(DepFlags::NONE)];
    p
}

#[test]
fn a_gemm_waits_only_for_an_alu_instruction_holding_its_bank() {
    let cfg = HwConfig::default();
    let time = |p: &Program| program_cycles(p, &MemTiming::default(), &CALIBRATION).unwrap();
    let (other, same) = (bank_program(&cfg, 1), bank_program(&cfg, 0));
    // In the other bank the GEMM runs beside the ALU's 500 micro-ops; in the same bank it
    // starts when they are done.
    let (t_other, t_same) = (time(&other), time(&same));
    assert!(
        t_same >= t_other + 90,
        "same bank {t_same}, other bank {t_other}"
    );
    // Without the micro-ops the model cannot tell, and lets the GEMM run beside it.
    assert_eq!(
        cycles(&cfg, &same.insns, &MemTiming::default(), &CALIBRATION).unwrap(),
        t_other
    );
}
