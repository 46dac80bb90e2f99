//! The Verilated `vta_top` as a `drivers::Device`, so `drivers::run_program` runs the same
//! program on it and on the functional simulator.

use std::path::PathBuf;
use std::time::Instant;

use drivers::{
    check_range, Allocator, Buffer, Device, DeviceError, RunReport, RunTimeout, PAGE_SIZE,
};
use isa::HwConfig;
use vta_hw::sim::{Accelerator, AxiMemory, MemTiming, SimError};

/// Physical base of the simulated DRAM (not 0, so address bugs show).
pub const BASE: u64 = 0x1000_0000;
/// Its size.
pub const SIZE: u64 = 16 << 20;
/// Default cycle bound of a run.
pub const MAX_CYCLES: u64 = 2_000_000;

/// The Verilator model cache shared by the tests.
pub fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("vta-hw-models")
}

/// `vta_top` in Verilator behind the device HAL.
pub struct RtlDevice {
    pub acc: Accelerator,
    alloc: Allocator,
    /// Every run's result.
    pub runs: Vec<vta_hw::sim::RunResult>,
}

impl RtlDevice {
    /// Generates `vta_top` for `cfg` with the tests' execution core and builds its model.
    pub fn new(cfg: &HwConfig, timing: MemTiming) -> RtlDevice {
        let g = vta_hw::generate_with(cfg, &super::exec_core(cfg)).unwrap();
        let t = Instant::now();
        let name = cfg.config_string();
        let mem = AxiMemory::new(BASE, SIZE as usize, cfg.axi_data_width, timing);
        let mut acc = Accelerator::build(&g, &cache_dir(), mem, &mut |s| {
            eprintln!("[{name}] {s} (+{:.1}s)", t.elapsed().as_secs_f64())
        })
        .unwrap_or_else(|e| panic!("building the model for {name}: {e}"));
        acc.check_identity(cfg).unwrap();
        RtlDevice {
            acc,
            alloc: Allocator::new(BASE, SIZE, PAGE_SIZE),
            runs: vec![],
        }
    }
}

fn run_err(e: SimError) -> DeviceError {
    match e {
        SimError::Timeout { .. } => DeviceError::Timeout {
            backend: "rtl".into(),
            detail: e.to_string(),
        },
        e => DeviceError::Run {
            backend: "rtl".into(),
            source: Box::new(e),
        },
    }
}

impl Device for RtlDevice {
    fn name(&self) -> &str {
        "rtl"
    }
    fn config(&self) -> &HwConfig {
        self.acc.config()
    }
    fn alloc(&mut self, size: u64, align: u64) -> Result<Buffer, DeviceError> {
        self.alloc.alloc(size, align)
    }
    fn free(&mut self, buf: Buffer) -> Result<(), DeviceError> {
        self.alloc.free(&buf)
    }
    fn copy_to_device(
        &mut self,
        buf: &Buffer,
        offset: u64,
        data: &[u8],
    ) -> Result<(), DeviceError> {
        self.alloc.check(buf)?;
        check_range("copy to device", buf, offset, data.len() as u64)?;
        self.acc.memory_mut().write(buf.phys_addr + offset, data);
        Ok(())
    }
    fn copy_from_device(
        &mut self,
        buf: &Buffer,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), DeviceError> {
        self.alloc.check(buf)?;
        check_range("copy from device", buf, offset, out.len() as u64)?;
        self.acc.memory().read(buf.phys_addr + offset, out);
        Ok(())
    }
    fn flush(&mut self, buf: &Buffer, offset: u64, size: u64) -> Result<(), DeviceError> {
        check_range("flush", buf, offset, size)
    }
    fn invalidate(&mut self, buf: &Buffer, offset: u64, size: u64) -> Result<(), DeviceError> {
        check_range("invalidate", buf, offset, size)
    }
    fn run(
        &mut self,
        insn_addr: u64,
        insn_count: u32,
        timeout: RunTimeout,
    ) -> Result<RunReport, DeviceError> {
        let t = Instant::now();
        let r = self
            .acc
            .run(
                insn_addr as u32,
                insn_count,
                timeout.work.unwrap_or(MAX_CYCLES),
            )
            .map_err(run_err)?;
        let get = |n: &str| r.get(n).unwrap_or(0) as u64;
        let report = RunReport {
            backend: "rtl".into(),
            counters: vec![
                ("gemm_uops".into(), get("GEMM_UOPS")),
                ("reset_uops".into(), get("RESET_UOPS")),
                ("alu_uops".into(), get("ALU_UOPS")),
            ],
            extras: r
                .registers
                .iter()
                .filter(|(n, _)| !n.starts_with("ISA_") && *n != "VERSION")
                .map(|(n, v)| (n.to_lowercase(), *v as u64))
                .chain([("host_cycles".to_string(), r.cycles)])
                .collect(),
            wall_time: t.elapsed(),
        };
        self.runs.push(r);
        Ok(report)
    }
}
