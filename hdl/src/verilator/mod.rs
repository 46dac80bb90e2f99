//! Verilator integration: compile a [`Design`] into a shared library on demand, load it, and
//! drive it from Rust through a safe [`Model`] API; plus the `-Wall` lint gate and the
//! generated C++ shim and Rust port table.
//!
//! [`Model::build`] prints the design (plus a thin wrapper, see [`sim_verilog`]), generates
//! a C++ shim ([`shim_cpp`]: `extern "C"` functions to create and free a model, get a
//! pointer to each port's storage, set/get a port as little-endian 32-bit words, eval,
//! clock ticks, optional VCD tracing), runs `verilator --cc -O3 --x-assign fast
//! --x-initial fast --noassert --output-split-cfuncs 5000`, compiles the generated C++
//! (after a prelude with a faster sign extension, [`sim_prelude`]) with `-O3 -fwrapv -fPIC`
//! in parallel (at most one compiler per CPU in the process; `clang++` where installed, else
//! `g++`, or `$CXX`: see [`preferred_cxx`]), links `lib.so` and loads it with `libloading`.
//! Port reads and writes go straight to the model's memory, not through a call.
//!
//! Everything is cached in a directory the caller chooses (see [`default_cache_dir`]):
//! * the Verilator runtime (`verilated.cpp`, `verilated_threads.cpp`, and the VCD writer
//!   when tracing), compiled once per cache directory, Verilator version and compiler;
//! * each model, under a hash of the Verilog, the shim, the flags and the tool versions:
//!   building an unchanged design again only loads the library.
//!
//! Builds from several threads or processes sharing a cache directory are safe: each step
//! holds a file lock and results are moved into place atomically.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CString};
use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::ir::{Dir, PortInfo, PortRole};
use crate::verilog::Design;

mod build;
mod model;
mod shim;
mod tools;
use build::{build_library, cxx_flags};
use shim::{storage, Storage};
use tools::{cache_key, run, tools, unique_suffix, FileLock, Slot, Tools};

pub use build::{sim_prelude, sim_verilog, verilator_args};
pub use model::{Model, PortId, StaticShim};
pub use shim::{rust_port_table, shim_cpp};
pub use tools::{lint, preferred_cxx, verilator_version};

/// Version of the C ABI between the shim and this module.
const ABI_VERSION: u32 = 2;

/// How to install the tools, quoted in errors.
const INSTALL_HINT: &str =
    "install it with `apt-get install verilator clang` (Debian/Ubuntu; g++ works too)";

/// Failure to build or load a model, or to lint a design.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// `verilator` or the C++ compiler could not be run.
    #[error("`{tool}` is needed to simulate hardware but could not be run ({detail}); {hint}")]
    ToolMissing {
        /// The program that could not be run.
        tool: String,
        /// Why.
        detail: String,
        /// How to install it.
        hint: &'static str,
    },
    /// A tool ran and failed.
    #[error("{stage} failed: `{command}` exited with {status}\n{output}")]
    ToolFailed {
        /// What was being done.
        stage: String,
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// The end of its output.
        output: String,
    },
    /// A file or directory in the cache could not be read or written.
    #[error("{what} `{}`: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The compiled library could not be loaded.
    #[error("loading the compiled model `{}`: {source}", path.display())]
    Load {
        /// The library.
        path: PathBuf,
        /// The loader's error.
        source: libloading::Error,
    },
    /// The library loaded but does not match this crate.
    #[error("the compiled model `{}` is not usable: {reason}", path.display())]
    BadLibrary {
        /// The library.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

fn io_err<'p>(what: &'static str, path: &'p Path) -> impl FnOnce(io::Error) -> BuildError + 'p {
    move |source| BuildError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Options of [`Model::build_with`].
#[derive(Clone, Debug, Default)]
pub struct BuildOptions {
    /// Compile VCD tracing in (`--trace`): [`Model::trace_open`] then works. Slower to build
    /// and to run.
    pub trace: bool,
    /// Parallel compiler jobs (default: the number of CPUs).
    pub jobs: Option<usize>,
}

/// The cache directory to use when the caller has no better idea: `$VTA_HDL_CACHE`, else
/// `$XDG_CACHE_HOME/vta-hdl`, else `$HOME/.cache/vta-hdl`, else a directory under the system
/// temporary directory.
pub fn default_cache_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("VTA_HDL_CACHE") {
        return PathBuf::from(p);
    }
    if let Some(p) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(p).join("vta-hdl");
    }
    if let Some(p) = std::env::var_os("HOME") {
        return PathBuf::from(p).join(".cache").join("vta-hdl");
    }
    std::env::temp_dir().join("vta-hdl")
}
