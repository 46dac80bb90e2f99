//! The RTL backend (`vta_sim::rtl::RtlDevice` over `vta_sim::rtl`): hangs are diagnosed, not
//! hung on; bounds in cycles; reports with the hardware's counters; instruction traces; VCD
//! windows; the statically linked default model; and a regression test for a hardware bug
//! the differential tests found.

#[path = "support/rtl.rs"]
mod rtl_support;

use rtl_support::bytes;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use drivers::{run_program, Device, RunTimeout};
use isa::builder::{Operand, ProgramBuilder, UopLoops};
use isa::{AluOp, DType, DepFlags, HwConfig, Insn, MemInsn, MemType, Module, Program, Uop};
use vta_sim::rtl::{ModelOrigin, TraceTrack};
use vta_sim::FsimDevice;

fn deps(pop_prev: bool, pop_next: bool, push_prev: bool, push_next: bool) -> DepFlags {
    DepFlags {
        pop_prev,
        pop_next,
        push_prev,
        push_next,
    }
}

/// LOAD ACC, a long ALU loop, STORE: the ALU's last write lands long after its hand-over.
fn acc_alu_store(cfg: &HwConfig, rows: u16, sync_push: bool) -> Program {
    let lanes = (cfg.batch() * cfg.block_out()) as usize;
    let mut b = ProgramBuilder::new(cfg);
    let a = b.input(
        "a",
        DType::I32,
        vec![rows as usize, lanes],
        bytes(rows as usize * lanes * 4, 3),
    );
    let y = b.output("y", DType::I8, vec![rows as usize, lanes]);
    b.load_2d(MemType::Acc, 0, a, 0, 1, rows, rows);
    let k = b.kernel(&[Uop::default()]);
    for _ in 0..4 {
        b.alu(k, UopLoops::inner(rows, 1, 1), AluOp::Add, Operand::Imm(3));
    }
    if sync_push {
        // The push rides on a sync of its own, not on the ALU.
        b.emit(Insn::Load(
            MemInsn::sync(MemType::Uop).with_deps(deps(false, false, false, true)),
        ));
    } else {
        b.dep_push(Module::Compute, Module::Store);
    }
    b.dep_pop(Module::Compute, Module::Store);
    b.store_2d(0, y, 0, 1, rows, rows);
    b.finish().unwrap()
}

/// Found by the differential tests: a sync instruction that pushes `g2s` right after an ALU
/// must not let STORE read the OUT buffer before the ALU is done (the token means "done",
/// spec 5.3).
#[test]
fn a_token_pushed_by_a_sync_covers_the_gemm_alu_before_it() {
    let cfg = HwConfig::preset("small").unwrap();
    let mut rtl = rtl_support::device(&cfg);
    for sync_push in [false, true] {
        let p = acc_alu_store(&cfg, 64, sync_push);
        let want = run_program(&mut FsimDevice::new(&cfg), &p, &[], RunTimeout::default()).unwrap();
        let got = run_program(&mut rtl, &p, &[], RunTimeout::default()).unwrap();
        assert_eq!(want.outputs, got.outputs, "sync_push={sync_push}");
    }
}

/// The report: the spec's counters equal fsim's, `cycles` and the hardware's busy and stall
/// counters are there and consistent.
#[test]
fn reports_carry_cycles_and_the_hardware_counters() {
    let cfg = HwConfig::default();
    let p = acc_alu_store(&cfg, 32, false);
    let mut rtl = rtl_support::device(&cfg);
    let want = run_program(&mut FsimDevice::new(&cfg), &p, &[], RunTimeout::default()).unwrap();
    let got = run_program(&mut rtl, &p, &[], RunTimeout::default()).unwrap();
    assert_eq!(want.outputs, got.outputs);
    assert_eq!(want.report.counters, got.report.counters);
    let r = &got.report;
    assert_eq!(r.backend, "rtl");
    let cycles = r.get("cycles").unwrap();
    assert!(cycles > 4 * 32, "{r}");
    for m in ["load", "compute", "store"] {
        let (busy, stall) = (
            r.get(&format!("{m}_busy")).unwrap(),
            r.get(&format!("{m}_stall")).unwrap(),
        );
        assert!(stall <= busy && busy <= cycles, "{m}: {r}");
    }
    assert!(
        r.get("compute_busy").unwrap() > 0 && r.get("dma_busy").unwrap() > 0,
        "{r}"
    );
    // The store waits for compute most of the run.
    assert!(r.get("store_stall").unwrap() > 4 * 32 / 2, "{r}");
    assert!(r.get("axi_read_beats").unwrap() > 0 && r.get("axi_write_beats").unwrap() > 0);
    let last = rtl.last_run().unwrap();
    assert_eq!(last.cycles, cycles);
    assert!(last.host_cycles >= cycles);
}

/// Compute waits for a token load never sends: the run stops after the hang bound with the
/// state of every module and queue, in well under a second.
#[test]
fn a_deadlock_is_diagnosed_not_hung_on() {
    let cfg = HwConfig::default();
    let mut b = ProgramBuilder::new(&cfg);
    let x = b.input("x", DType::I8, vec![16], bytes(16, 1));
    let y = b.output("y", DType::I8, vec![16]);
    b.load_2d(MemType::Inp, 0, x, 0, 1, 1, 1);
    // Compute pops l2g, which nobody pushes.
    b.emit(Insn::Load(
        MemInsn::sync(MemType::Uop).with_deps(deps(true, false, false, true)),
    ));
    b.emit(Insn::Store(
        MemInsn::transfer(MemType::Out, 0, b.addr(MemType::Out, y, 0), 1, 1, 1)
            .with_deps(deps(true, false, true, false)),
    ));
    b.emit(Insn::Finish(deps(false, true, false, false)));
    let p = b.into_program().unwrap();
    let mut rtl = rtl_support::device(&cfg);
    rtl.limits.hang_cycles = 5000;
    let t = Instant::now();
    let e = run_program(&mut rtl, &p, &[], RunTimeout::default())
        .unwrap_err()
        .to_string();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(e.contains("the run hung: no progress"), "{e}");
    assert!(
        e.contains("compute")
            && e.contains("instruction 1 (load  uop")
            && e.contains("waits to pop l2g"),
        "names compute's blocked instruction and queue: {e}"
    );
    assert!(e.contains("store") && e.contains("waits to pop g2s"), "{e}");
    assert!(
        e.contains("load") && e.contains("all 1 of its instructions done"),
        "{e}"
    );
    assert!(e.contains("tokens") && e.contains("l2g 0"), "{e}");
    assert!(
        e.contains("CYCLES="),
        "the registers, read as a driver would: {e}"
    );
    // The device recovers: the next run works.
    let ok = acc_alu_store(&cfg, 4, false);
    let got = run_program(&mut rtl, &ok, &[], RunTimeout::default()).unwrap();
    let want = run_program(&mut FsimDevice::new(&cfg), &ok, &[], RunTimeout::default()).unwrap();
    assert_eq!(want.outputs, got.outputs);
}

/// A bound in cycles ends a long run with a timeout that says where every module was.
#[test]
fn a_cycle_bound_times_out() {
    let cfg = HwConfig::default();
    let p = acc_alu_store(&cfg, 256, false);
    let mut rtl = rtl_support::device(&cfg);
    let e = run_program(&mut rtl, &p, &[], RunTimeout::work(300)).unwrap_err();
    assert!(matches!(e, drivers::DeviceError::Timeout { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("within 300 cycles") && msg.contains("compute"),
        "{msg}"
    );
}

/// The trace has one track per module; every instruction appears once on its module's
/// track, named by opcode and index; waits on tokens are slices of their own.
#[test]
fn the_trace_shows_every_instruction_and_token_wait() {
    let cfg = HwConfig::preset("small").unwrap();
    let ops = vta_sim::bench::gemm::GemmOperands::random(&cfg, 32, 32, 1);
    let p = vta_sim::bench::gemm::blocked_gemm(&cfg, 32, 32, 16, true, 2, ops).unwrap();
    let mut rtl = rtl_support::device(&cfg);
    rtl.sim_mut().start_trace();
    let run = run_program(&mut rtl, &p, &[], RunTimeout::default()).unwrap();
    let trace = rtl.sim_mut().take_trace().unwrap();
    let json: serde_json::Value = serde_json::from_str(&trace.to_json()).unwrap();
    let events = json["traceEvents"].as_array().unwrap();
    let names: HashMap<u64, String> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            (
                e["tid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for t in ["load", "compute", "store", "DMA read", "DMA write"] {
        assert!(names.values().any(|n| n == t), "track {t}: {names:?}");
    }
    let slices: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    for s in &slices {
        assert!(s["dur"].as_f64().unwrap() >= 0.0 && s["ts"].as_f64().is_some());
    }
    // Every instruction exactly once on its module's track.
    let track = |m: Module| match m {
        Module::Load => "load",
        Module::Compute => "compute",
        Module::Store => "store",
    };
    for (i, insn) in p.insns.iter().enumerate() {
        let on: Vec<&&serde_json::Value> = slices
            .iter()
            .filter(|s| s["cat"] == "insn" && s["args"]["insn"].as_u64() == Some(i as u64))
            .filter(|s| names[&s["tid"].as_u64().unwrap()] == track(insn.module()))
            .collect();
        assert_eq!(on.len(), 1, "instruction {i}");
        let name = on[0]["name"].as_str().unwrap();
        assert!(name.ends_with(&format!(" #{i}")), "{name}");
        let op = format!("{:?}", insn.opcode()).to_uppercase();
        assert!(name.starts_with(&op), "{name} for {op}");
    }
    // GEMMs in the execution core; waits on tokens (store waits for compute).
    let core = trace.track(TraceTrack::Core);
    let gemms = p
        .insns
        .iter()
        .filter(|i| matches!(i, Insn::Gemm(_)))
        .count();
    assert_eq!(core.len(), gemms);
    let waits = trace.track(TraceTrack::Store);
    assert!(
        waits
            .iter()
            .any(|e| e.cat == "token" && e.name == "wait g2s"),
        "{waits:?}"
    );
    // Slices of a module's instructions never overlap.
    for t in [
        TraceTrack::Load,
        TraceTrack::Compute,
        TraceTrack::Store,
        TraceTrack::Core,
    ] {
        let v: Vec<_> = trace
            .track(t)
            .into_iter()
            .filter(|e| e.cat == "insn")
            .collect();
        for w in v.windows(2) {
            assert!(
                w[0].end <= w[1].start,
                "{t:?}: {:?} overlaps {:?}",
                w[0],
                w[1]
            );
        }
    }
    // The DMA slices are the bursts the memory served, first beat to last.
    for (t, counter) in [
        (TraceTrack::DmaRead, "axi_read_beats"),
        (TraceTrack::DmaWrite, "axi_write_beats"),
    ] {
        let slices = trace.track(t);
        let beats: u64 = slices
            .iter()
            .map(|e| {
                let b = e
                    .args
                    .iter()
                    .find(|a| a.0 == "beats")
                    .unwrap()
                    .1
                    .as_u64()
                    .unwrap();
                assert!(e.end - e.start >= b, "{e:?}");
                b
            })
            .sum();
        assert_eq!(beats, run.report.get(counter).unwrap(), "{t:?}");
    }
}

/// A waveform over a window of the run: a model built with tracing (on first use), the VCD
/// written for those cycles only.
#[test]
fn a_vcd_window() {
    let cfg = HwConfig::preset("small").unwrap();
    let p = acc_alu_store(&cfg, 16, false);
    let mut rtl = rtl_support::device_with(&cfg, Default::default(), true);
    let path = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("rtl-window.vcd");
    let _ = std::fs::remove_file(&path);
    rtl.sim_mut().set_vcd(&path, Some((20, 70))).unwrap();
    run_program(&mut rtl, &p, &[], RunTimeout::default()).unwrap();
    let vcd = std::fs::read_to_string(&path).unwrap();
    assert!(
        vcd.contains("$enddefinitions") && vcd.contains("dbg_state"),
        "a VCD of vta_top"
    );
    let stamps = vcd.lines().filter(|l| l.starts_with('#')).count();
    // Two time stamps per cycle, 50 cycles.
    assert!((95..=105).contains(&stamps), "{stamps} time stamps");
    // An untraced model refuses a waveform.
    let mut plain = rtl_support::device(&cfg);
    let e = plain
        .sim_mut()
        .set_vcd(&path, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("without tracing"), "{e}");
}

/// With Verilator at build time, the default config's model is compiled into the program
/// and used without any build or cache.
#[test]
fn the_default_model_is_linked_in() {
    // ./test.sh installs Verilator before building, so the build script must have linked it.
    assert!(
        vta_sim::rtl::model::linked_default(),
        "the default model was not linked in: was Verilator missing when vta-sim was built? \
         (install it with `apt-get install verilator g++`, or run ./test.sh)"
    );
    let rtl = rtl_support::device(&HwConfig::default());
    assert_eq!(rtl.sim().origin(), &ModelOrigin::Linked);
    // Another config with the default ISA (a wider bus) is a different design.
    let wide = rtl_support::device(&HwConfig::preset("wide-bus").unwrap());
    assert_ne!(wide.sim().origin(), &ModelOrigin::Linked);
    assert_eq!(rtl.name(), "rtl");
}
