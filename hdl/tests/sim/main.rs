//! Simulation tests: every widget built through `hdl::verilator::Model` and checked against a
//! Rust model with randomized stimulus. All tests share one cache directory, so Verilator's
//! runtime is compiled once per target directory.
//!
//! These tests need `verilator` and `g++` (`apt-get install verilator g++`); without them they
//! fail with a message saying so.

mod util;

mod arbiter;
mod axi4;
mod axi_lite;
mod basics;
mod fifo;
mod fuzz;
mod uart;
