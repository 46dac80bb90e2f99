//! The functional-simulator device: [`Fsim`] over a simulated physical memory, behind the
//! device HAL ([`drivers::Device`]).

use std::time::Instant;

use drivers::{Allocator, Buffer, Device, DeviceError, RunReport, RunTimeout, PAGE_SIZE};
use isa::HwConfig;

use crate::{Dram, Fsim, FsimError, Limits, Memory};

/// A [`Device`] backed by the functional simulator. Memory starts at a non-zero physical
/// address so that address-0 bugs fault instead of silently working.
pub struct FsimDevice {
    sim: Fsim,
    dram: Dram,
    alloc: Allocator,
}

impl FsimDevice {
    /// Default physical base of the simulated memory.
    pub const DEFAULT_BASE: u64 = 0x1000_0000;
    /// Default size of the simulated memory (256 MiB, zero pages are not touched until used).
    pub const DEFAULT_SIZE: u64 = 256 << 20;

    /// A device for `cfg` with [`Self::DEFAULT_SIZE`] bytes at [`Self::DEFAULT_BASE`].
    pub fn new(cfg: &HwConfig) -> Self {
        Self::with_memory(cfg, Self::DEFAULT_BASE, Self::DEFAULT_SIZE)
    }

    /// A device for `cfg` with `size` bytes of memory at physical address `base` (both
    /// multiples of [`PAGE_SIZE`]).
    pub fn with_memory(cfg: &HwConfig, base: u64, size: u64) -> Self {
        FsimDevice {
            sim: Fsim::new(cfg),
            dram: Dram::new(base, size as usize),
            alloc: Allocator::new(base, size, PAGE_SIZE),
        }
    }

    /// A device for `cfg` whose runs check for races ([`crate::races`]): a pair of
    /// conflicting accesses the dependency tokens do not order fails the run.
    pub fn checking_races(cfg: &HwConfig) -> Self {
        let mut d = Self::new(cfg);
        d.sim.set_race_check(true);
        d
    }

    /// The simulator, to inspect scratchpads after a run.
    pub fn sim(&self) -> &Fsim {
        &self.sim
    }

    /// The simulated physical memory.
    pub fn dram(&self) -> &Dram {
        &self.dram
    }

    /// The allocator, to inspect free space.
    pub fn allocator(&self) -> &Allocator {
        &self.alloc
    }
}

impl Device for FsimDevice {
    fn name(&self) -> &str {
        "fsim"
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
        self.dram
            .write(addr, data)
            .expect("allocations lie inside the memory");
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
        self.dram
            .read(addr, out)
            .expect("allocations lie inside the memory");
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
        let limits = Limits {
            max_steps: timeout.work.unwrap_or(Limits::DEFAULT_MAX_STEPS),
            max_time: timeout.wall,
        };
        let t = Instant::now();
        let result = self.sim.run(&mut self.dram, insn_addr, insn_count, &limits);
        let wall_time = t.elapsed();
        match result {
            Ok(c) => Ok(RunReport {
                backend: self.name().into(),
                counters: c.iter().map(|(n, v)| (n.to_string(), v)).collect(),
                extras: Vec::new(),
                wall_time,
            }),
            Err(e @ (FsimError::StepLimit { .. } | FsimError::Timeout { .. })) => {
                Err(DeviceError::Timeout {
                    backend: self.name().into(),
                    detail: e.to_string(),
                })
            }
            Err(e) => Err(DeviceError::Run {
                backend: self.name().into(),
                source: Box::new(e),
            }),
        }
    }
}
