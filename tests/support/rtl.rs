//! RTL-backend helpers shared by the tests: the model cache, devices and a small program.

#![allow(dead_code)]

use std::path::PathBuf;

use isa::builder::{Operand, ProgramBuilder, UopLoops};
use isa::{AluOp, DType, DepFlags, HwConfig, MemInsn, MemType, Module, Program, Uop};
use vta_sim::rtl::RtlDevice;
use vta_sim::rtl::{MemTiming, RtlOptions};

/// The Verilator model cache of the tests: `$VTA_HDL_CACHE`, else the one vta-hw's tests use
/// (so each model is built once per target directory).
pub fn model_cache() -> PathBuf {
    std::env::var_os("VTA_HDL_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("vta-hw-models"))
}

/// An RTL device for `cfg` with the given memory timing and options.
pub fn device_with(cfg: &HwConfig, timing: MemTiming, vcd: bool) -> RtlDevice {
    let opts = RtlOptions {
        cache_dir: Some(model_cache()),
        timing,
        mem_size: 64 << 20,
        vcd,
        ..RtlOptions::default()
    };
    let name = cfg.config_string();
    RtlDevice::with_options(cfg, &opts, &mut |s| eprintln!("[rtl model {name}] {s}"))
        .unwrap_or_else(|e| panic!("{cfg}: no RTL model: {e}"))
}

/// An RTL device for `cfg` with the default memory timing.
pub fn device(cfg: &HwConfig) -> RtlDevice {
    device_with(cfg, MemTiming::default(), false)
}

/// `n` bytes of a pattern seeded by `seed` that repeats only every 64 KiB.
pub fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(37).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

/// LOAD ACC (`rows` rows of patterned int32), the ALU immediate ops `ops` over them in
/// turn, STORE (int8).
pub fn acc_alu_store(cfg: &HwConfig, rows: u16, ops: &[(AluOp, i16)]) -> Program {
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
    for &(op, imm) in ops {
        b.alu(k, UopLoops::inner(rows, 1, 1), op, Operand::Imm(imm));
    }
    b.dep_push(Module::Compute, Module::Store);
    b.dep_pop(Module::Compute, Module::Store);
    b.store_2d(0, y, 0, 1, rows, rows);
    b.finish().unwrap()
}

/// A LOAD of one ACC row from DRAM address 0 (outside a SoC's device memory).
pub fn load_acc_row_at_0() -> MemInsn {
    MemInsn {
        deps: DepFlags::default(),
        memory_type: MemType::Acc,
        sram_base: 0,
        dram_base: 0,
        y_size: 1,
        x_size: 1,
        x_stride: 1,
        y_pad_0: 0,
        y_pad_1: 0,
        x_pad_0: 0,
        x_pad_1: 0,
    }
}
