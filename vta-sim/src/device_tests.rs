//! Tests of the fsim backend and of `run_program` on small hand-built programs.

use isa::{
    Codec, DType, DepFlags, GemmInsn, HwConfig, Insn, MemInsn, MemType, Program, Role, Uop, UopLoop,
};

use drivers::{run_program, Device, DeviceError, RunTimeout};

use crate::FsimDevice;

fn cfg() -> HwConfig {
    HwConfig::preset("small").unwrap() // 1x4x4, int8
}

fn flags(s: &str) -> DepFlags {
    DepFlags {
        pop_prev: s.contains("pop_prev"),
        pop_next: s.contains("pop_next"),
        push_prev: s.contains("push_prev"),
        push_next: s.contains("push_next"),
    }
}

fn mem(m: MemType, dram_base: u64, deps: &str) -> MemInsn {
    MemInsn::transfer(m, 0, dram_base as u32, 1, 1, 1).with_deps(flags(deps))
}

fn gemm(reset: bool, deps: &str) -> Insn {
    Insn::Gemm(GemmInsn {
        deps: flags(deps),
        lp: UopLoop {
            reset_reg: reset,
            uop_bgn: 0,
            uop_end: 1,
            iter_out: 1,
            iter_in: 1,
            ..UopLoop::default()
        },
        wgt_factor_out: 0,
        wgt_factor_in: 0,
    })
}

/// `y = W x` for one 4-vector: input x, weights W (initial data), output y.
fn matvec(w: &[i8; 16]) -> Program {
    let c = cfg();
    let mut p = Program {
        config: c.clone(),
        insns: Vec::new(),
        segments: Vec::new(),
    };
    let uop = Codec::new(&c).encode_uop(&Uop::default()).unwrap().to_vec();
    let input = Role {
        input: true,
        output: false,
    };
    let output = Role {
        input: false,
        output: true,
    };
    let uops = p.push_segment("uops", DType::Uop, vec![1], Role::default(), Some(uop));
    let x = p.push_segment("x", DType::I8, vec![1, 4], input, None);
    let wb: Vec<u8> = w.iter().map(|&v| v as u8).collect();
    let wo = p.push_segment("w", DType::I8, vec![4, 4], Role::default(), Some(wb));
    let y = p.push_segment("y", DType::I8, vec![1, 4], output, None);
    let e = |m: MemType, off: u64| off / u64::from(c.elem_bytes(m));
    p.insns = vec![
        Insn::Load(mem(MemType::Inp, e(MemType::Inp, x), "")),
        Insn::Load(mem(MemType::Wgt, e(MemType::Wgt, wo), "push_next")),
        Insn::Load(mem(MemType::Uop, e(MemType::Uop, uops), "")),
        gemm(true, "pop_prev"),
        gemm(false, "push_next"),
        Insn::Store(mem(MemType::Out, e(MemType::Out, y), "pop_prev push_prev")),
        Insn::Finish(flags("pop_next")),
    ];
    p
}

const W: [i8; 16] = [1, 0, 0, 0, 0, 2, 0, 0, 1, 1, 1, 1, -1, 100, 0, 0];

#[test]
fn run_program_computes_and_frees_everything() {
    let p = matvec(&W);
    let mut dev = FsimDevice::new(&cfg());
    let x = vec![3u8, 5, 7, 0xff]; // 3, 5, 7, -1
    let run = run_program(
        &mut dev,
        &p,
        &[("x".into(), x.clone())],
        RunTimeout::default(),
    )
    .unwrap();
    assert_eq!(run.outputs.len(), 1);
    // 3; 10; 3+5+7-1 = 14; -3 + 500 = 497 -> low 8 bits 0xf1.
    assert_eq!(run.output("y").unwrap(), &[3, 10, 14, 0xf1]);
    assert_eq!(run.report.backend, "fsim");
    assert_eq!(run.report.get("gemm_uops"), Some(1));
    assert_eq!(run.report.get("macs"), Some(16));
    assert_eq!(run.report.get("out_store_bytes"), Some(4));
    assert_eq!(dev.allocator().live(), 0, "both buffers freed");
    assert!(run.report.to_string().starts_with("fsim run in"));
    // Without the input, x is zeros (not the previous run's data).
    let run = run_program(&mut dev, &p, &[], RunTimeout::default()).unwrap();
    assert_eq!(run.output("y").unwrap(), &[0; 4]);
}

#[test]
fn run_program_names_bad_inputs() {
    let p = matvec(&W);
    let mut dev = FsimDevice::new(&cfg());
    let e = run_program(
        &mut dev,
        &p,
        &[("z".into(), vec![0; 4])],
        RunTimeout::default(),
    )
    .unwrap_err()
    .to_string();
    assert_eq!(e, "unknown input 'z': the program's inputs are x");
    let e = run_program(
        &mut dev,
        &p,
        &[("w".into(), vec![0; 16])],
        RunTimeout::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("unknown input 'w'"),
        "not an input segment: {e}"
    );
    let e = run_program(
        &mut dev,
        &p,
        &[("x".into(), vec![0; 5])],
        RunTimeout::default(),
    )
    .unwrap_err()
    .to_string();
    assert_eq!(e, "input 'x' has 5 bytes; expected 4 bytes (i8 x [1, 4])");
    let twice = [("x".into(), vec![0; 4]), ("x".into(), vec![0; 4])];
    let e = run_program(&mut dev, &p, &twice, RunTimeout::default()).unwrap_err();
    assert!(matches!(e, DeviceError::DuplicateInput { .. }), "{e}");
    assert_eq!(dev.allocator().live(), 0);
}

#[test]
fn run_program_checks_the_config() {
    let p = matvec(&W);
    let mut dev = FsimDevice::new(&HwConfig::default());
    let e = run_program(&mut dev, &p, &[], RunTimeout::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "program built for config 1x4_i8w8a32_12_11_12_13 cannot run on device \
                       config 1x16_i8w8a32_15_15_18_17"
        ),
        "{e}"
    );
}

#[test]
fn run_failures_are_reported_and_buffers_freed() {
    let mut p = matvec(&W);
    // Drop the STORE: FINISH then waits forever for the store's token.
    p.insns.remove(5);
    let mut dev = FsimDevice::new(&cfg());
    let e = run_program(&mut dev, &p, &[], RunTimeout::default()).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, DeviceError::Run { .. }), "{msg}");
    assert!(msg.starts_with("fsim: run failed: deadlock:"), "{msg}");
    assert!(
        msg.contains("compute: waits before instruction 5 (FINISH) to pop s2g"),
        "{msg}"
    );
    assert_eq!(dev.allocator().live(), 0);
    // A work limit below the program's 7 instructions + 2 micro-ops is a timeout.
    let p = matvec(&W);
    let e = run_program(&mut dev, &p, &[], RunTimeout::work(5)).unwrap_err();
    assert!(matches!(e, DeviceError::Timeout { .. }), "{e}");
    assert!(e.to_string().contains("step limit of 5"), "{e}");
    run_program(&mut dev, &p, &[], RunTimeout::work(9)).unwrap();
}

#[test]
fn device_copies_are_bounds_checked() {
    let mut dev = FsimDevice::with_memory(&cfg(), 0x2000_0000, 1 << 20);
    let b = dev.alloc(100, 64).unwrap();
    assert_eq!(b.phys_addr, 0x2000_0000);
    assert_eq!(b.end(), 0x2000_0064);
    dev.copy_to_device(&b, 96, &[1, 2, 3, 4]).unwrap();
    let mut out = [0u8; 2];
    dev.copy_from_device(&b, 97, &mut out).unwrap();
    assert_eq!(out, [2, 3]);
    assert_eq!(dev.dram().slice(0x2000_0060, 4).unwrap(), &[1, 2, 3, 4]);
    let e = dev.copy_to_device(&b, 98, &[0; 3]).unwrap_err().to_string();
    assert_eq!(
        e,
        "copy to device of 3 bytes at offset 98 is outside buffer 1 (100 bytes)"
    );
    assert!(dev.flush(&b, 0, 101).is_err());
    dev.invalidate(&b, 0, 100).unwrap();
    let again = b.clone();
    dev.free(b).unwrap();
    let e = dev.copy_from_device(&again, 0, &mut out).unwrap_err();
    assert!(matches!(e, DeviceError::UnknownBuffer { id: 1, .. }), "{e}");
    assert!(dev.free(again).is_err());
}

#[test]
fn device_runs_a_raw_stream() {
    // FINISH alone: the smallest valid run.
    let c = cfg();
    let mut dev = FsimDevice::new(&c);
    let b = dev.alloc(16, 16).unwrap();
    let s = Codec::new(&c)
        .encode_stream(&[Insn::Finish(DepFlags::NONE)])
        .unwrap();
    dev.copy_to_device(&b, 0, &s).unwrap();
    let r = dev.run(b.phys_addr, 1, RunTimeout::default()).unwrap();
    assert_eq!(r.get("compute_insns"), Some(1));
    // Address 0 is outside the simulated memory.
    let e = dev
        .run(0, 1, RunTimeout::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot fetch 1 instructions at 0x0"), "{e}");
}
