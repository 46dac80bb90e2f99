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
