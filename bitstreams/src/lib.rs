//! Bitstreams for FPGA boards: Vivado projects for Zynq boards, generated without Vivado and
//! checked without it, and real bitstreams for ECP5 and Gowin boards from the open tools
//! ([`openflow`]).
//!
//! | module | owns |
//! |---|---|
//! | [`board`] | the board table (`boards/*.json`, or a user's file) |
//! | [`cores`] | several accelerators: each core's PS slave port and control window |
//! | [`fit`] | the fit pre-check of a resource estimate against a board's part |
//! | [`shell`] | the Verilog-2001 top `vta_shell` with Vivado's interface attributes |
//! | [`tcl`] | `build.tcl` (block design, synthesis, implementation, checks) and the clock XDC |
//! | [`project`] | writing a project directory and its README |
//! | [`hwh`] | reading a Vivado `.hwh` hand-off file (base address and clock of a cell) |
//! | [`openflow`] | ECP5 and Gowin boards: yosys, nextpnr and the packers to a bitstream |
//!
//! The Vivado stub that runs every board's `build.tcl` under `tclsh` is
//! `tests/vivado_stub.tcl`.

pub mod board;
pub mod cores;
pub mod fit;
pub mod hwh;
pub mod openflow;
pub mod project;
pub mod shell;
pub mod tcl;

pub use board::{load_any, AnyBoard, Board, BoardError, PsKind};

/// The toolkit's cache of slow results (synthesis estimates, open-flow runs and tools, design
/// sweeps): `$VTA_CACHE_DIR`, else `$XDG_CACHE_HOME/vta`, else `~/.cache/vta`; `None`
/// without any of them.
pub fn cache_dir() -> Option<std::path::PathBuf> {
    let env = |k| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
    };
    env("VTA_CACHE_DIR")
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("vta")))
        .or_else(|| env("HOME").map(|d| d.join(".cache/vta")))
}
