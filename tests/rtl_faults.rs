//! Fault injection on the RTL backend (the AXI memory model's faults, set with
//! `RtlSim::set_faults`): random stalls on every channel change cycles, never results; an
//! error response (SLVERR, DECERR) fails the run naming the burst, its address and the
//! response; a memory that stops answering is caught by the hang bound or the run's
//! deadline in cycles or host time. After every fault the same device runs the next program
//! bit-exactly. (A token deadlock is `rtl_backend`'s `a_deadlock_is_diagnosed_not_hung_on`.)

#[path = "support/rtl.rs"]
mod rtl_support;

use rtl_support::acc_alu_store;
use std::time::{Duration, Instant};

use drivers::{run_program, DeviceError, ProgramRun, RunTimeout};
use isa::{AluOp, HwConfig, Program};
use vta_sim::bench::gemm::{blocked_gemm, GemmOperands};
use vta_sim::rtl::{BurstMatch, ErrorResp, ErrorRule, MemFaults, RtlDevice};
use vta_sim::FsimDevice;

/// A few programs of the default config: blocked GEMMs (with and without virtual threads
/// and micro-op compression) and an ALU pass.
fn programs(cfg: &HwConfig) -> Vec<Program> {
    let gemm = |batch, channels, compress, vt, seed| {
        let ops = GemmOperands::random(cfg, batch, channels, seed);
        blocked_gemm(cfg, batch, channels, 16, compress, vt, ops).unwrap()
    };
    vec![
        gemm(16, 64, true, 2, 11),
        gemm(32, 32, false, 1, 12),
        acc_alu_store(cfg, 48, &[(AluOp::Add, 5); 3]),
    ]
}

fn fsim(cfg: &HwConfig, p: &Program) -> ProgramRun {
    run_program(&mut FsimDevice::new(cfg), p, &[], RunTimeout::default()).unwrap()
}

/// A deadline every faulty run here must end well within.
fn deadline() -> RunTimeout {
    RunTimeout {
        wall: Some(Duration::from_secs(60)),
        work: Some(2_000_000),
    }
}

/// The same device, its faults cleared, runs `p` as fsim does.
fn next_run_is_exact(rtl: &mut RtlDevice, cfg: &HwConfig, p: &Program) {
    rtl.sim_mut().set_faults(MemFaults::none());
    let got = run_program(rtl, p, &[], RunTimeout::default())
        .unwrap_or_else(|e| panic!("the run after the fault failed: {e}"));
    assert_eq!(got.outputs, fsim(cfg, p).outputs, "the run after the fault");
}

#[test]
fn random_stalls_change_cycles_not_results() {
    let cfg = HwConfig::default();
    let mut rtl = rtl_support::device(&cfg);
    for (i, p) in programs(&cfg).iter().enumerate() {
        let want = fsim(&cfg, p);
        rtl.sim_mut().set_faults(MemFaults::none());
        let base = run_program(&mut rtl, p, &[], RunTimeout::default()).unwrap();
        assert_eq!(base.outputs, want.outputs, "program {i} without stalls");
        let base_cycles = base.report.get("cycles").unwrap();
        for (percent, seed) in [(20, 1), (50, 2), (80, 3)] {
            rtl.sim_mut()
                .set_faults(MemFaults::stalls(percent, seed + i as u64));
            let got = run_program(&mut rtl, p, &[], deadline())
                .unwrap_or_else(|e| panic!("program {i}, {percent}% stalls, seed {seed}: {e}"));
            let what = format!("program {i}, {percent}% stalls, seed {seed}");
            assert_eq!(got.outputs, want.outputs, "{what}");
            assert_eq!(got.report.counters, want.report.counters, "{what}");
            let cycles = got.report.get("cycles").unwrap();
            assert!(
                cycles > base_cycles,
                "{what}: {cycles} cycles, {base_cycles} without stalls"
            );
        }
    }
    // The same seed gives the same run, cycle for cycle.
    let p = &programs(&cfg)[0];
    let cycles = |rtl: &mut RtlDevice| {
        rtl.sim_mut().set_faults(MemFaults::stalls(40, 9));
        let r = run_program(rtl, p, &[], deadline()).unwrap();
        r.report.get("cycles").unwrap()
    };
    assert_eq!(cycles(&mut rtl), cycles(&mut rtl));
}

/// Runs `p` with `rule` and returns the error's text (the run must fail by itself, before
/// its deadline).
fn run_with_error(rtl: &mut RtlDevice, p: &Program, rule: ErrorRule) -> String {
    rtl.sim_mut().set_faults(MemFaults {
        errors: vec![rule],
        ..MemFaults::none()
    });
    let e = run_program(rtl, p, &[], deadline()).unwrap_err();
    assert!(matches!(e, DeviceError::Run { .. }), "not a timeout: {e}");
    e.to_string()
}

#[test]
fn an_error_response_names_the_burst_and_the_next_run_works() {
    let cfg = HwConfig::default();
    let mut rtl = rtl_support::device(&cfg);
    let ps = programs(&cfg);
    let p = &ps[0];

    // The second read burst of the run.
    let e = run_with_error(
        &mut rtl,
        p,
        ErrorRule {
            reads: true,
            writes: false,
            at: BurstMatch::Nth(2),
            resp: ErrorResp::SlvErr,
        },
    );
    assert!(
        e.contains("the memory answered 1 burst(s) with an error response: read burst 2 at 0x1")
            && e.contains("answered SLVERR at cycle"),
        "{e}"
    );
    // The hardware's side: it flags the error and runs on.
    assert!(
        e.contains("The accelerator flagged it (CONTROL = 0x6, error bit set)")
            && e.contains("does not stop on an error response")
            && e.contains("the data of a failed read was used as if valid")
            && !e.contains("failed write"),
        "{e}"
    );
    next_run_is_exact(&mut rtl, &cfg, p);

    // Every write burst into the first 64 KiB of the memory (the program's data).
    let base = rtl.sim().memory().base();
    let e = run_with_error(
        &mut rtl,
        p,
        ErrorRule {
            reads: false,
            writes: true,
            at: BurstMatch::Range {
                start: base,
                end: base + 0x1_0000,
            },
            resp: ErrorResp::DecErr,
        },
    );
    assert!(
        e.contains("write burst 1 at 0x1000") && e.contains("answered DECERR"),
        "{e}"
    );
    assert!(
        e.contains("CONTROL = 0x6, error bit set")
            && e.contains("a failed write (whose data the memory did not store) counted as done"),
        "{e}"
    );
    next_run_is_exact(&mut rtl, &cfg, &ps[2]);

    // Errors on a range nothing touches: no effect.
    rtl.sim_mut().set_faults(MemFaults {
        errors: vec![ErrorRule {
            reads: true,
            writes: true,
            at: BurstMatch::Range {
                start: base + (60 << 20),
                end: base + (61 << 20),
            },
            resp: ErrorResp::SlvErr,
        }],
        ..MemFaults::none()
    });
    let got = run_program(&mut rtl, p, &[], deadline()).unwrap();
    assert_eq!(got.outputs, fsim(&cfg, p).outputs);
}

#[test]
fn a_memory_that_stops_answering_ends_within_the_deadline() {
    let cfg = HwConfig::default();
    let mut rtl = rtl_support::device(&cfg);
    let ps = programs(&cfg);
    let hang = MemFaults {
        hang_after_bursts: Some(3),
        ..MemFaults::none()
    };

    // The hang bound.
    rtl.limits.hang_cycles = 5000;
    rtl.sim_mut().set_faults(hang.clone());
    let e = run_program(&mut rtl, &ps[0], &[], deadline())
        .unwrap_err()
        .to_string();
    assert!(e.contains("the run hung: no progress"), "{e}");
    assert!(
        e.contains("injected faults: a hang: the memory stopped answering at cycle")
            && e.contains("after accepting 3 burst(s)"),
        "{e}"
    );
    assert!(e.contains("burst(s) outstanding"), "{e}");
    next_run_is_exact(&mut rtl, &cfg, &ps[0]);

    // No hang bound: the deadline in cycles.
    rtl.limits.hang_cycles = u64::MAX;
    rtl.sim_mut().set_faults(hang.clone());
    let e = run_program(&mut rtl, &ps[1], &[], RunTimeout::work(30_000)).unwrap_err();
    assert!(matches!(e, DeviceError::Timeout { .. }), "{e}");
    let e = e.to_string();
    assert!(
        e.contains("within 30000 cycles") && e.contains("the memory stopped answering"),
        "{e}"
    );
    next_run_is_exact(&mut rtl, &cfg, &ps[1]);

    // Neither: the deadline in host time (the run is stopped, not waited for).
    rtl.sim_mut().set_faults(hang);
    let t = Instant::now();
    let e = run_program(
        &mut rtl,
        &ps[2],
        &[],
        RunTimeout::wall(Duration::from_millis(300)),
    )
    .unwrap_err();
    let took = t.elapsed();
    assert!(matches!(e, DeviceError::Timeout { .. }), "{e}");
    assert!(e.to_string().contains("within 0.300 s of host time"), "{e}");
    assert!(took < Duration::from_secs(30), "{took:?}");
    next_run_is_exact(&mut rtl, &cfg, &ps[2]);
}
