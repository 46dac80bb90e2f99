//! The cycle-accurate device: [`RtlSim`] (the accelerator's RTL in Verilator,
//! a Rust AXI4 memory model, the board driver's register sequence) behind the device HAL.
//!
//! A run's [`RunReport`] has the spec's counters (those of the instruction stream, checked
//! against the hardware's micro-op and instruction counters) and, in `extras`, `cycles` and
//! the hardware's per-module busy and stall counters (see `RtlRun::extras`).
//! [`RunTimeout::work`] bounds cycles; a run that stops making progress for
//! [`RtlDevice::limits`]`.hang_cycles` cycles fails with the state of the modules and token
//! queues. The memory can inject faults ([`super::RtlOptions::faults`], or
//! `sim_mut().set_faults` between runs): a run that meets them fails with what happened, and
//! the next run starts from a reset.

use std::time::Instant;

use drivers::{Allocator, Buffer, Device, DeviceError, RunReport, RunTimeout, PAGE_SIZE};
use isa::HwConfig;

use super::{RtlError, RtlOptions, RtlRun, RtlSim, RunLimits};

/// A [`Device`] backed by the cycle-accurate simulator.
pub struct RtlDevice {
    sim: RtlSim,
    alloc: Allocator,
    /// Limits of every run; [`RunTimeout`] overrides the cycle and wall-clock bounds.
    pub limits: RunLimits,
    last: Option<RtlRun>,
}

impl RtlDevice {
    /// A device for `cfg` with the default options (memory at 0x1000_0000, 256 MiB, the
    /// default memory timing): builds or loads the model silently.
    pub fn new(cfg: &HwConfig) -> Result<RtlDevice, DeviceError> {
        RtlDevice::with_options(cfg, &RtlOptions::default(), &mut |_| {})
    }

    /// A device with options; `progress` hears the model's build stages.
    pub fn with_options(
        cfg: &HwConfig,
        opts: &RtlOptions,
        progress: &mut dyn FnMut(&str),
    ) -> Result<RtlDevice, DeviceError> {
        assert!(
            opts.mem_base.is_multiple_of(PAGE_SIZE) && opts.mem_size.is_multiple_of(PAGE_SIZE),
            "memory must be whole pages"
        );
        let sim = RtlSim::new(cfg, opts, progress).map_err(|e| DeviceError::Unavailable {
            backend: "rtl".into(),
            source: Box::new(e),
        })?;
        Ok(RtlDevice {
            alloc: Allocator::new(opts.mem_base, opts.mem_size, PAGE_SIZE),
            sim,
            limits: RunLimits::default(),
            last: None,
        })
    }

    /// The simulator (traces, waveforms, memory timing, the model's origin).
    pub fn sim(&self) -> &RtlSim {
        &self.sim
    }

    /// The simulator, to start a trace or set a waveform window.
    pub fn sim_mut(&mut self) -> &mut RtlSim {
        &mut self.sim
    }

    /// The last successful run's full report (registers, memory traffic).
    pub fn last_run(&self) -> Option<&RtlRun> {
        self.last.as_ref()
    }

    /// The allocator, to inspect free space.
    pub fn allocator(&self) -> &Allocator {
        &self.alloc
    }
}

/// A failed run of `backend` as the device HAL's error (a bound reached is a timeout).
pub(super) fn run_error(backend: &str, e: RtlError) -> DeviceError {
    match e {
        RtlError::Timeout { .. } => DeviceError::Timeout {
            backend: backend.into(),
            detail: e.to_string(),
        },
        e => DeviceError::Run {
            backend: backend.into(),
            source: Box::new(e),
        },
    }
}

/// A completed run of `backend` as the device HAL's report.
pub(super) fn run_report(backend: &str, run: &RtlRun, started: Instant) -> RunReport {
    RunReport {
        backend: backend.into(),
        counters: run
            .counters
            .iter()
            .map(|(n, v)| (n.to_string(), v))
            .collect(),
        extras: run.extras(),
        wall_time: started.elapsed(),
    }
}

impl Device for RtlDevice {
    fn name(&self) -> &str {
        "rtl"
    }

    fn config(&self) -> &HwConfig {
        self.sim.config()
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
        let addr = self
            .alloc
            .access("copy to device", buf, offset, data.len() as u64)?;
        self.sim.memory_mut().write(addr, data);
        Ok(())
    }

    fn copy_from_device(
        &mut self,
        buf: &Buffer,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), DeviceError> {
        let addr = self
            .alloc
            .access("copy from device", buf, offset, out.len() as u64)?;
        self.sim.memory().read(addr, out);
        Ok(())
    }

    fn flush(&mut self, buf: &Buffer, offset: u64, size: u64) -> Result<(), DeviceError> {
        self.alloc.access("flush", buf, offset, size).map(|_| ())
    }

    fn invalidate(&mut self, buf: &Buffer, offset: u64, size: u64) -> Result<(), DeviceError> {
        self.alloc
            .access("invalidate", buf, offset, size)
            .map(|_| ())
    }

    fn run(
        &mut self,
        insn_addr: u64,
        insn_count: u32,
        timeout: RunTimeout,
    ) -> Result<RunReport, DeviceError> {
        let limits = RunLimits {
            max_cycles: timeout.work.or(self.limits.max_cycles),
            wall: timeout.wall.or(self.limits.wall),
            hang_cycles: self.limits.hang_cycles,
        };
        let t = Instant::now();
        let r = self
            .sim
            .run(insn_addr, insn_count, &limits)
            .map_err(|e| run_error("rtl", e))?;
        let report = run_report(self.name(), &r, t);
        self.last = Some(r);
        Ok(report)
    }
}
