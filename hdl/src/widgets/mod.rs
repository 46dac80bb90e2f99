//! Reusable hardware blocks, each a function that builds a [`Module`](crate::Module) from
//! run-time parameters: FIFOs, a round-robin arbiter, an AXI4-Lite register file, an
//! AXI4 burst master and an 8N1 UART receiver and transmitter.
//!
//! Parameters are validated up front; an invalid one (a depth that is not a power of two,
//! a bus width AXI does not allow, ...) panics with a message naming it, since the caller
//! derives them from an already validated configuration. Module names encode the
//! parameters (`sync_fifo_w32_d16`), and identical instances share one printed definition.
//!
//! Every module here uses the implicit clock `clk` and synchronous active-high reset `rst`;
//! handshakes are valid/ready: a transfer happens in a cycle where both are high, valid
//! never waits for ready, and once valid is high the payload holds until the transfer.
//!
//! Beside the AXI4 master, [`axi4_memory`] is its simulation counterpart (Unix): an AXI4
//! slave memory model that serves a Verilated design's master port.

mod arbiter;
mod axi4;
#[cfg(unix)]
pub mod axi4_memory;
mod axi_lite;
mod fifo;
mod uart;

pub use arbiter::rr_arbiter;
pub use axi4::{axi4_master, axi_burst_splitter, AxiMasterConfig};
pub use axi_lite::{axi_lite_regfile, RegKind, RegSpec};
pub use fifo::{small_fifo, sync_fifo};
pub use uart::{uart_rx, uart_tx, MAX_UART_DIVISOR, MIN_UART_DIVISOR};

/// Panics unless `v` is a power of two (the message names `what`).
#[track_caller]
pub(crate) fn require_pow2(what: &str, v: u32) {
    if !v.is_power_of_two() {
        panic!("{what} must be a power of two, got {v}");
    }
}
