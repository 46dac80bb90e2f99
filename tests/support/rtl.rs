//! RTL-backend helpers shared by the tests: the model cache and devices.

#![allow(dead_code)]

use std::path::PathBuf;

use isa::HwConfig;
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
