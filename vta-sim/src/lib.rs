//! Simulators of a VTA-class accelerator.
//!
//! * The **functional simulator**: bit-exact results, dependency tokens checked (deadlocks
//!   diagnosed), and fast enough to run real networks. The semantics it implements are
//!   specified in [`isa::spec`]. Entry point: [`Fsim::run`] over any [`Memory`] (a
//!   [`Dram`] for tests and the driver).
//! * The **cycle-accurate simulator** ([`rtl`], with the default feature `rtl`): the
//!   accelerator's RTL in Verilator with a Rust AXI memory model and the board driver's
//!   register sequence; cycle counts, the hardware's counters, instruction traces, waveforms
//!   and hang diagnoses.
//! * The **SoC simulator** ([`soc`], with `rtl`): the whole SoC of an FPGA board without a
//!   CPU (accelerator, device memory, UART bridge) in Verilator, reached through its UART
//!   pins by the same serial driver a board is reached with.
//! * The **differential campaign** ([`diff`], with `rtl`): random programs on presets and
//!   random configs, run on both simulators and compared, mismatches bisected and kept as
//!   reproducer files (`vta check diff`).
//!
//! Each comes as a device of the device HAL as well: [`FsimDevice`] and `rtl::RtlDevice`
//! implement [`drivers::Device`].

pub mod bench;
mod device;
#[cfg(test)]
mod device_tests;
#[cfg(all(unix, feature = "rtl"))]
pub mod diff;
mod error;
mod fsim;
mod kernels;
mod mem;
pub mod races;
#[cfg(all(unix, feature = "rtl"))]
pub mod rtl;
#[cfg(all(unix, feature = "rtl"))]
pub mod sdram_model;
#[cfg(all(unix, feature = "rtl"))]
pub mod soc;

pub use device::FsimDevice;
// The spec's counters are shared by every backend, so they live in the device HAL.
pub use drivers::Counters;
pub use error::{describe, Blocked, Deadlock, Fault, FsimError, Limits, Queue};
pub use fsim::Fsim;
pub use mem::{Access, Dram, MemFault, Memory};

#[cfg(test)]
mod tests;
