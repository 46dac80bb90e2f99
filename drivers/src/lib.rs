//! The device HAL: one [`Device`] trait every backend implements (the functional simulator's
//! `vta_sim::FsimDevice`; the cycle-accurate Verilator RTL simulator's `vta_sim::rtl::RtlDevice`;
//! any of them on another machine through [`remote::RemoteDevice`]; a Zynq board's
//! [`board::BoardDevice`] on Linux; the SoC of an FPGA board without a CPU through its UART
//! bridge, [`serial::SerialDevice`], over a serial port or the simulated SoC's line),
//! mirroring VTA's `driver.h`: allocate physically contiguous buffers, copy to and from them,
//! keep caches coherent, and run an instruction stream from a physical address until FINISH
//! or a timeout.
//!
//! [`run_program`] runs an [`isa::Program`] on any device: it places the program's DRAM
//! region, fills the inputs, relocates and writes the instructions, runs, and reads back the
//! outputs.
//!
//! This crate is what a board binary links: it depends on `isa` (and `libc` on Linux) alone,
//! so nothing of the simulators, the HDL or a C++ toolchain is in its tree (a test in `tests/`
//! checks that). The accelerator's register map ([`regs`]) and the spec's counters
//! ([`Counters`]) live here for the same reason.

mod alloc;
#[cfg(target_os = "linux")]
pub mod board;
mod completion;
mod counters;
mod program;
pub mod regs;
pub mod remote;
pub mod serial;

use std::fmt;
use std::time::Duration;

pub use alloc::Allocator;
pub use counters::Counters;
pub use program::{run_program, ProgramRun, DEVICE_MEMORY, DEVICE_TO_HOST, HOST_TO_DEVICE};

/// Page size: every allocation is aligned to it and rounded up to it (VTA's 4 KiB pages).
pub const PAGE_SIZE: u64 = 4096;

/// A physically contiguous device buffer. `size` is what was asked for; the allocation may
/// be larger (whole pages). Addresses are physical: what LOAD/STORE `dram_base` fields and
/// `Device::run` take (times the element size).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Buffer {
    pub phys_addr: u64,
    pub size: u64,
    /// Unique per device for its lifetime; identifies the allocation in errors.
    pub id: u64,
}

impl Buffer {
    /// One past the last byte of the buffer.
    pub fn end(&self) -> u64 {
        self.phys_addr + self.size
    }
}

/// Bounds on one [`Device::run`]. The default lets the backend choose.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunTimeout {
    /// Wall-clock limit, on every backend.
    pub wall: Option<Duration>,
    /// Limit in the backend's own unit of work: simulator steps (instructions + micro-ops)
    /// for fsim, clock cycles for RTL simulation, completion polls on a board (VTA's
    /// `wait_cycles`). `None` = the backend's default.
    pub work: Option<u64>,
}

impl RunTimeout {
    /// A wall-clock limit only.
    pub fn wall(limit: Duration) -> Self {
        RunTimeout {
            wall: Some(limit),
            work: None,
        }
    }

    /// A work limit only.
    pub fn work(limit: u64) -> Self {
        RunTimeout {
            wall: None,
            work: Some(limit),
        }
    }
}

/// What a completed run reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReport {
    /// [`Device::name`] of the backend that ran.
    pub backend: String,
    /// The spec's counters (`isa::spec`, "Counters"), by name, in a fixed order.
    pub counters: Vec<(String, u64)>,
    /// Backend-specific figures (an RTL backend's `cycles`, ...) and, from [`run_program`],
    /// the bytes copied between host and device ([`HOST_TO_DEVICE`], [`DEVICE_TO_HOST`]) and the
    /// device memory the run held ([`DEVICE_MEMORY`]).
    pub extras: Vec<(String, u64)>,
    /// Host time the run took.
    pub wall_time: Duration,
}

impl RunReport {
    /// A counter or extra by name.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.counters
            .iter()
            .chain(&self.extras)
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
    }
}

impl fmt::Display for RunReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} run in {:.3} ms",
            self.backend,
            self.wall_time.as_secs_f64() * 1e3
        )?;
        for (name, v) in self.counters.iter().chain(&self.extras) {
            write!(f, "\n  {name:<16} {v}")?;
        }
        Ok(())
    }
}

/// Every way a device operation can fail.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error(
        "out of device memory: {requested} bytes aligned to {align} requested, {free} bytes \
         free, largest free range {largest} bytes"
    )]
    OutOfMemory {
        requested: u64,
        align: u64,
        free: u64,
        largest: u64,
    },
    #[error("alignment {align} is not a power of two")]
    BadAlign { align: u64 },
    #[error(
        "buffer {id} at {phys_addr:#x} is not a live allocation of this device (freed twice, \
         or from another device)"
    )]
    UnknownBuffer { id: u64, phys_addr: u64 },
    #[error("{what} of {len} bytes at offset {offset} is outside buffer {id} ({size} bytes)")]
    OutOfBounds {
        what: &'static str,
        id: u64,
        offset: u64,
        len: u64,
        size: u64,
    },
    #[error(
        "program built for config {program} cannot run on device config {device}; rebuild it \
         for the device's config"
    )]
    ConfigMismatch { program: String, device: String },
    #[error("invalid program: {0}")]
    Program(String),
    #[error("unknown input '{name}': the program's inputs are {}", list(inputs))]
    UnknownInput { name: String, inputs: Vec<String> },
    #[error("input '{name}' is given twice")]
    DuplicateInput { name: String },
    #[error("input '{name}' has {got} bytes; expected {expected} bytes ({shape})")]
    InputSize {
        name: String,
        expected: u64,
        got: u64,
        shape: String,
    },
    /// The backend cannot be set up (e.g. its simulation model cannot be built).
    #[error("{source}")]
    Unavailable {
        backend: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("{backend}: run timed out: {detail}")]
    Timeout { backend: String, detail: String },
    #[error("{backend}: run failed: {source}")]
    Run {
        backend: String,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A remote device could not be reached, refused the session, or broke the protocol.
    #[error("remote device {addr}: {detail}")]
    Remote { addr: String, detail: String },
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// One accelerator instance and its physical memory (VTA's `driver.h`).
///
/// Buffers are physically contiguous, page-aligned (at least [`PAGE_SIZE`]) and, on targets
/// with 32-bit physical addresses such as Zynq-7000, below 4 GiB.
pub trait Device {
    /// The backend, e.g. `fsim`.
    fn name(&self) -> &str;
    /// The accelerator config the device implements.
    fn config(&self) -> &isa::HwConfig;
    /// Allocates `size` bytes aligned to `align` (a power of two; the page at least).
    fn alloc(&mut self, size: u64, align: u64) -> Result<Buffer, DeviceError>;
    /// Frees a buffer from [`Device::alloc`].
    fn free(&mut self, buf: Buffer) -> Result<(), DeviceError>;
    /// Copies host bytes into the buffer at byte `offset`.
    fn copy_to_device(&mut self, buf: &Buffer, offset: u64, data: &[u8])
        -> Result<(), DeviceError>;
    /// Copies bytes at byte `offset` of the buffer to the host.
    fn copy_from_device(
        &mut self,
        buf: &Buffer,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), DeviceError>;
    /// Makes host writes to `[offset, offset + size)` visible to the device (cache clean);
    /// a no-op on coherent or simulated memory.
    fn flush(&mut self, buf: &Buffer, offset: u64, size: u64) -> Result<(), DeviceError>;
    /// Makes device writes to `[offset, offset + size)` visible to the host (cache
    /// invalidate); a no-op on coherent or simulated memory.
    fn invalidate(&mut self, buf: &Buffer, offset: u64, size: u64) -> Result<(), DeviceError>;
    /// Runs `insn_count` instructions at physical byte address `insn_addr` until FINISH.
    fn run(
        &mut self,
        insn_addr: u64,
        insn_count: u32,
        timeout: RunTimeout,
    ) -> Result<RunReport, DeviceError>;
}

/// Checks that `[offset, offset + len)` lies inside `buf`.
pub fn check_range(
    what: &'static str,
    buf: &Buffer,
    offset: u64,
    len: u64,
) -> Result<(), DeviceError> {
    match offset.checked_add(len) {
        Some(end) if end <= buf.size => Ok(()),
        _ => Err(DeviceError::OutOfBounds {
            what,
            id: buf.id,
            offset,
            len,
            size: buf.size,
        }),
    }
}
