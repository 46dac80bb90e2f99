//! Helpers shared by the integration tests: the RTL device, work directories, and custom
//! configs.

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Instant;

use isa::HwConfig;
use vta_sim::rtl::{MemTiming, RtlDevice, RtlOptions};

/// A scratch directory for `what` under Cargo's target tmpdir.
pub fn work_dir(what: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("vta-hw")
        .join(what);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The Verilator model cache shared by the tests.
pub fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("vta-hw-models")
}

/// Size of the DRAM of [`rtl_device`] (16 MiB at `RtlOptions`' default base).
pub const SIZE: u64 = 16 << 20;
/// The cycle bound of every run on [`rtl_device`].
pub const MAX_CYCLES: u64 = 2_000_000;

/// `vta_top` for `cfg` in Verilator behind the device HAL (the RTL backend of `vta-sim`),
/// its model built into the tests' cache, its DRAM [`SIZE`] bytes with `timing`.
pub fn rtl_device(cfg: &HwConfig, timing: MemTiming) -> RtlDevice {
    let t = Instant::now();
    let name = cfg.config_string();
    let opts = RtlOptions {
        cache_dir: Some(cache_dir()),
        timing,
        mem_size: SIZE,
        ..RtlOptions::default()
    };
    let mut dev = RtlDevice::with_options(cfg, &opts, &mut |s| {
        eprintln!("[{name}] {s} (+{:.1}s)", t.elapsed().as_secs_f64())
    })
    .unwrap_or_else(|e| panic!("building the model for {name}: {e}"));
    dev.limits.max_cycles = Some(MAX_CYCLES);
    dev
}

/// A config by preset name.
pub fn preset(name: &str) -> HwConfig {
    HwConfig::preset(name).unwrap()
}

/// Custom configs at the edges: one-lane elements (8-bit INP/WGT/OUT rows, eight per beat of
/// a 64-bit bus) and a narrow int4/int16 config without ALU MUL on a 128-bit bus.
pub fn custom(json: &str) -> HwConfig {
    HwConfig::from_json_str(json, "test config").unwrap()
}

pub const TINY: &str = r#"{"TARGET":"sim","LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,
    "LOG_BATCH":0,"LOG_BLOCK":0,"LOG_UOP_BUFF_SIZE":10,"LOG_INP_BUFF_SIZE":8,
    "LOG_WGT_BUFF_SIZE":8,"LOG_ACC_BUFF_SIZE":10,"CMD_QUEUE_DEPTH":4,"TOKEN_QUEUE_DEPTH":2}"#;
pub const INT4: &str = r#"{"TARGET":"sim","LOG_INP_WIDTH":2,"LOG_WGT_WIDTH":2,"LOG_ACC_WIDTH":4,
    "LOG_BATCH":1,"LOG_BLOCK_IN":3,"LOG_BLOCK_OUT":2,"LOG_UOP_BUFF_SIZE":11,"LOG_INP_BUFF_SIZE":10,
    "LOG_WGT_BUFF_SIZE":11,"LOG_ACC_BUFF_SIZE":11,"AXI_DATA_WIDTH":128,"ALU_MUL":false,
    "CMD_QUEUE_DEPTH":100}"#;
