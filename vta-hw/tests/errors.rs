//! Erroneous programs on the Verilated `vta_top`: what the host sees (spec section 12 leaves
//! the hardware's behaviour open; ours reports through CONTROL and the memory model).

mod common;

use common::rtl_device;
use drivers::{run_program, DeviceError, RunTimeout};
use isa::builder::{ProgramBuilder, UopLoops};
use isa::{DType, DepFlags, HwConfig, Insn, MemInsn, MemType, Module, Uop};
use vta_sim::rtl::{MemTiming, RtlDevice};

fn small() -> (HwConfig, RtlDevice) {
    let cfg = HwConfig::preset("small").unwrap();
    let dev = rtl_device(&cfg, MemTiming::default());
    (cfg, dev)
}

/// A store of one ACC row after `gemm` micro-op loops.
fn program(cfg: &HwConfig, uop: Uop, loops: UopLoops) -> isa::Program {
    let mut b = ProgramBuilder::new(cfg);
    let y = b.output("y", DType::I8, vec![cfg.elem_bytes(MemType::Out) as usize]);
    let k = b.kernel(&[uop]);
    b.gemm(k, loops, true);
    b.dep_push(Module::Compute, Module::Store);
    b.dep_pop(Module::Compute, Module::Store);
    b.store_2d(0, y, 0, 1, 1, 1);
    b.finish().unwrap()
}

#[test]
fn a_micro_op_past_its_buffer_sets_the_error_bit_until_the_next_start() {
    let (cfg, mut dev) = small();
    let depth = cfg.depth(MemType::Acc);
    let bad = program(
        &cfg,
        Uop {
            dst_idx: depth - 1,
            src_idx: 0,
            wgt_idx: 0,
        },
        UopLoops::inner(2, 1, 0),
    );
    match run_program(&mut dev, &bad, &[], RunTimeout::default()) {
        Err(DeviceError::Run { source, .. }) => {
            let msg = source.to_string();
            assert!(msg.contains("reported an error"), "{msg}");
        }
        other => panic!("expected an error, got {other:?}"),
    }
    let good = program(&cfg, Uop::default(), UopLoops::once());
    run_program(&mut dev, &good, &[], RunTimeout::default()).unwrap();
}

#[test]
fn a_deadlock_times_out_with_the_counters() {
    let (cfg, mut dev) = small();
    let mut b = ProgramBuilder::new(&cfg);
    // Compute waits for a token from load that never comes.
    let pop = DepFlags {
        pop_prev: true,
        ..DepFlags::NONE
    };
    b.emit(Insn::Finish(pop));
    let p = b.into_program().unwrap();
    match run_program(&mut dev, &p, &[], RunTimeout::work(5_000)) {
        Err(DeviceError::Timeout { detail, .. }) => {
            assert!(
                detail.contains("5000 cycles") && detail.contains("COMPUTE_STALL="),
                "{detail}"
            );
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
}

#[test]
fn a_load_outside_memory_is_reported_by_the_memory_model() {
    let (cfg, mut dev) = small();
    let mut b = ProgramBuilder::new(&cfg);
    let elem = cfg.elem_bytes(MemType::Inp) as u64;
    // Past the end of the 16 MiB model (after relocation by the region's base).
    let far = ((common::SIZE + 4096) / elem) as u32;
    b.emit(Insn::Load(MemInsn::transfer(MemType::Inp, 0, far, 1, 4, 4)));
    b.dep_push(Module::Load, Module::Compute);
    b.dep_pop(Module::Load, Module::Compute);
    let p = b.finish().unwrap();
    match run_program(&mut dev, &p, &[], RunTimeout::default()) {
        Err(DeviceError::Run { source, .. }) => {
            let msg = source.to_string();
            assert!(msg.contains("outside the memory"), "{msg}");
        }
        other => panic!("expected a protocol error, got {other:?}"),
    }
}
