//! Functional simulator of a VTA-class accelerator: bit-exact results, dependency tokens
//! checked (deadlocks diagnosed), and fast enough to run real networks.
//!
//! The semantics it implements are specified in [`isa::spec`]. Entry point: [`FuncSim::run`]
//! over any [`Memory`] (a [`Dram`] for tests and the driver).

pub mod bench;
mod counters;
mod error;
mod kernels;
mod mem;
mod pack;
mod sim;

pub use counters::Counters;
pub use error::{describe, Blocked, Deadlock, Fault, Limits, Queue, SimError};
pub use mem::{Access, Dram, MemFault, Memory};
pub use sim::FuncSim;

#[cfg(test)]
mod tests;
