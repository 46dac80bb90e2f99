//! Verilator integration: compile a [`Design`] into a shared library on demand, load it, and
//! drive it from Rust through a safe [`Model`] API; plus the `-Wall` lint gate and the
//! generated C++ shim and Rust port table.
//!
//! [`Model::build`] prints the design (plus a thin wrapper, see [`sim_verilog`]), generates
//! a C++ shim ([`shim_cpp`]: `extern "C"` functions to create and free a model, get a
//! pointer to each port's storage, set/get a port as little-endian 32-bit words, eval,
//! clock ticks, optional VCD tracing), runs `verilator --cc -O3 --x-assign fast
//! --x-initial fast --noassert`, compiles the generated C++ with `g++ -O2 -fPIC` in
//! parallel (at most one compiler per CPU in the process), links `lib.so` and loads it with
//! `libloading`. Port reads and writes go straight to the model's memory, not through a
//! call.
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

/// Version of the C ABI between the shim and this module.
const ABI_VERSION: u32 = 2;

/// How to install the tools, quoted in errors.
const INSTALL_HINT: &str = "install it with `apt-get install verilator g++` (Debian/Ubuntu)";

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

// ----- tools -----------------------------------------------------------------------------

#[derive(Clone, Debug)]
struct Tools {
    verilator_version: String,
    verilator_root: PathBuf,
    cxx: String,
    cxx_version: String,
}

fn run_capture(cmd: &mut Command, tool: &str) -> Result<std::process::Output, BuildError> {
    cmd.output().map_err(|e| BuildError::ToolMissing {
        tool: tool.to_string(),
        detail: e.to_string(),
        hint: INSTALL_HINT,
    })
}

fn tools() -> Result<Tools, BuildError> {
    static TOOLS: Mutex<Option<Tools>> = Mutex::new(None);
    let mut cached = TOOLS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(t) = &*cached {
        return Ok(t.clone());
    }
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "g++".to_string());
    let t = detect("verilator", &cxx)?;
    *cached = Some(t.clone());
    Ok(t)
}

/// Finds the tools, given the names of the Verilator and C++ compiler executables.
fn detect(verilator: &str, cxx: &str) -> Result<Tools, BuildError> {
    let out = run_capture(Command::new(verilator).arg("--version"), verilator)?;
    if !out.status.success() {
        return Err(BuildError::ToolMissing {
            tool: "verilator".into(),
            detail: format!("`verilator --version` exited with {}", out.status),
            hint: INSTALL_HINT,
        });
    }
    let verilator_version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let out = run_capture(
        Command::new(verilator).args(["--getenv", "VERILATOR_ROOT"]),
        verilator,
    )?;
    let verilator_root = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !verilator_root
        .join("include")
        .join("verilated.cpp")
        .exists()
    {
        return Err(BuildError::ToolMissing {
            tool: "verilator".into(),
            detail: format!(
                "its runtime sources are not in `{}/include`",
                verilator_root.display()
            ),
            hint: INSTALL_HINT,
        });
    }
    let out = run_capture(Command::new(cxx).arg("--version"), cxx)?;
    if !out.status.success() {
        return Err(BuildError::ToolMissing {
            tool: cxx.to_string(),
            detail: format!("`--version` exited with {}", out.status),
            hint: INSTALL_HINT,
        });
    }
    let cxx_version = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    Ok(Tools {
        verilator_version,
        verilator_root,
        cxx: cxx.to_string(),
        cxx_version,
    })
}

/// The Verilator version string (`Verilator 5.006 ...`), checking that it can be run.
pub fn verilator_version() -> Result<String, BuildError> {
    Ok(tools()?.verilator_version)
}

// ----- hashing, locks, processes -----------------------------------------------------------

/// 128-bit FNV-1a over length-prefixed parts, as 32 hex digits. Not cryptographic; it
/// only names cache entries.
fn cache_key(parts: &[&[u8]]) -> String {
    let mut a: u64 = 0xcbf2_9ce4_8422_2325;
    let mut b: u64 = 0x6c62_272e_07bb_0142;
    let mut feed = |bytes: &[u8]| {
        for &x in bytes {
            a = (a ^ x as u64).wrapping_mul(0x0000_0100_0000_01b3);
            b = (b ^ x as u64)
                .wrapping_mul(0x0000_0100_0000_01b3)
                .rotate_left(5);
        }
    };
    for p in parts {
        feed(&(p.len() as u64).to_le_bytes());
        feed(p);
    }
    format!("{a:016x}{b:016x}")
}

/// An exclusive advisory lock on a file, released when dropped (or when the process dies).
struct FileLock(#[allow(dead_code)] File);

impl FileLock {
    fn acquire(path: &Path) -> Result<FileLock, BuildError> {
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .map_err(io_err("creating lock file", path))?;
        loop {
            // SAFETY: flock on a file descriptor we own; no memory is shared.
            let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
            if r == 0 {
                return Ok(FileLock(f));
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(io_err("locking", path)(e));
            }
        }
    }
}

/// Limits concurrent compiler processes in this process to the number of CPUs.
struct JobSlots {
    free: Mutex<usize>,
    cv: Condvar,
}

fn job_slots() -> &'static JobSlots {
    static SLOTS: OnceLock<JobSlots> = OnceLock::new();
    SLOTS.get_or_init(|| JobSlots {
        free: Mutex::new(
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
        ),
        cv: Condvar::new(),
    })
}

struct Slot;
impl Slot {
    fn take() -> Slot {
        let s = job_slots();
        let mut free = s.free.lock().unwrap_or_else(|e| e.into_inner());
        while *free == 0 {
            free = s.cv.wait(free).unwrap_or_else(|e| e.into_inner());
        }
        *free -= 1;
        Slot
    }
}
impl Drop for Slot {
    fn drop(&mut self) {
        let s = job_slots();
        *s.free.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        s.cv.notify_one();
    }
}

fn command_line(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().to_string();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    let start = all.len().saturating_sub(lines);
    let mut s = String::new();
    if start > 0 {
        let _ = writeln!(s, "[... {start} earlier lines]");
    }
    s.push_str(&all[start..].join("\n"));
    s
}

fn run(mut cmd: Command, stage: &str, tool: &str) -> Result<String, BuildError> {
    let line = command_line(&cmd);
    let out = run_capture(&mut cmd, tool)?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() {
        return Err(BuildError::ToolFailed {
            stage: stage.to_string(),
            command: line,
            status: out.status.to_string(),
            output: tail(&text, 60),
        });
    }
    Ok(text)
}

fn unique_suffix() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    static COUNTER: Mutex<u64> = Mutex::new(0);
    let mut c = COUNTER.lock().unwrap_or_else(|e| e.into_inner());
    *c += 1;
    format!("{}-{nanos}-{}", std::process::id(), *c)
}

// ----- generated sources -----------------------------------------------------------------

/// Storage of a port in the Verilated C++ class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Storage {
    U8,
    U16,
    U32,
    U64,
    /// `VlWide<N>`: N little-endian 32-bit words.
    Wide(usize),
}

fn storage(width: u32) -> Storage {
    match width {
        0..=8 => Storage::U8,
        9..=16 => Storage::U16,
        17..=32 => Storage::U32,
        33..=64 => Storage::U64,
        w => Storage::Wide(w.div_ceil(32) as usize),
    }
}

/// The C++ shim for the design's top module: the C ABI that [`Model`] loads. Port indices
/// are positions in `design.top().ports()`. It drives the wrapper of [`sim_verilog`], whose
/// ports are the top's ports prefixed with `io_`.
pub fn shim_cpp(design: &Design) -> String {
    let top = design.top();
    let ports = top.ports();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// Generated by the `hdl` crate: C ABI for the Verilated model of `{}`.",
        top.name()
    );
    s.push_str(
        r#"#include "verilated.h"
#include "Vtop.h"
#if VM_TRACE
#include "verilated_vcd_c.h"
#endif
#include <cstdint>

#define HDL_API extern "C" __attribute__((visibility("default")))

namespace {
struct HdlModel {
    VerilatedContext ctx;
    Vtop* top = nullptr;
#if VM_TRACE
    VerilatedVcdC* vcd = nullptr;
#endif
    uint64_t time = 0;
    uint64_t half_period_ps = 5;
};
inline HdlModel* M(void* p) { return static_cast<HdlModel*>(p); }
inline void dump(HdlModel* m) {
#if VM_TRACE
    if (m->vcd) m->vcd->dump(m->time);
#endif
    m->time += m->half_period_ps;
    m->ctx.time(m->time);
}
}  // namespace

"#,
    );
    let _ = writeln!(
        s,
        "HDL_API uint32_t hdl_abi_version() {{ return {ABI_VERSION}; }}"
    );
    let _ = writeln!(
        s,
        "HDL_API uint32_t hdl_port_count() {{ return {}; }}",
        ports.len()
    );
    s.push_str(
        r#"HDL_API void* hdl_new() {
    HdlModel* m = new HdlModel;
#if VM_TRACE
    m->ctx.traceEverOn(true);
#endif
    m->top = new Vtop(&m->ctx, "top");
    return m;
}
HDL_API void hdl_trace_close(void* p) {
#if VM_TRACE
    HdlModel* m = M(p);
    if (m->vcd) { m->vcd->close(); delete m->vcd; m->vcd = nullptr; }
#else
    (void)p;
#endif
}
HDL_API int hdl_trace_open(void* p, const char* path, uint64_t half_period_ps) {
#if VM_TRACE
    HdlModel* m = M(p);
    hdl_trace_close(p);
    m->half_period_ps = half_period_ps ? half_period_ps : 1;
    m->vcd = new VerilatedVcdC;
    m->top->trace(m->vcd, 99);
    m->vcd->open(path);
    return m->vcd->isOpen() ? 1 : 0;
#else
    (void)p; (void)path; (void)half_period_ps;
    return 0;
#endif
}
HDL_API void hdl_free(void* p) {
    HdlModel* m = M(p);
    hdl_trace_close(p);
    m->top->final();
    delete m->top;
    delete m;
}
HDL_API void hdl_eval(void* p) { M(p)->top->eval(); }
"#,
    );
    // tick
    let clock = ports.iter().find(|p| p.role == PortRole::Clock);
    s.push_str("HDL_API void hdl_tick(void* p, uint64_t n) {\n    HdlModel* m = M(p);\n");
    match clock {
        Some(c) => {
            let _ = writeln!(
                s,
                "    for (uint64_t i = 0; i < n; i++) {{\n        m->top->io_{0} = 0; m->top->eval(); dump(m);\n        m->top->io_{0} = 1; m->top->eval(); dump(m);\n    }}",
                c.name
            );
        }
        None => s.push_str("    (void)n;\n    m->top->eval(); dump(m);\n"),
    }
    s.push_str("}\n");
    // port pointers
    s.push_str("HDL_API void* hdl_port_ptr(void* p, uint32_t port) {\n    Vtop* t = M(p)->top;\n    switch (port) {\n");
    for (i, p) in ports.iter().enumerate() {
        match storage(p.width) {
            Storage::Wide(_) => {
                let _ = writeln!(s, "    case {i}: return t->io_{}.data();", p.name);
            }
            _ => {
                let _ = writeln!(s, "    case {i}: return &t->io_{};", p.name);
            }
        }
    }
    s.push_str("    default: return nullptr;\n    }\n}\n");
    // set/get by words
    s.push_str("HDL_API void hdl_set(void* p, uint32_t port, const uint32_t* w) {\n    Vtop* t = M(p)->top;\n    switch (port) {\n");
    for (i, p) in ports.iter().enumerate() {
        if p.dir != Dir::Input {
            continue;
        }
        let n = format!("io_{}", p.name);
        let body = match storage(p.width) {
            Storage::U8 => format!("t->{n} = (CData)w[0];"),
            Storage::U16 => format!("t->{n} = (SData)w[0];"),
            Storage::U32 => format!("t->{n} = (IData)w[0];"),
            Storage::U64 => format!("t->{n} = ((QData)w[1] << 32) | (QData)w[0];"),
            Storage::Wide(k) => format!("for (int i = 0; i < {k}; i++) t->{n}[i] = w[i];"),
        };
        let _ = writeln!(s, "    case {i}: {body} break;");
    }
    s.push_str("    default: break;\n    }\n}\n");
    s.push_str("HDL_API void hdl_get(void* p, uint32_t port, uint32_t* w) {\n    Vtop* t = M(p)->top;\n    switch (port) {\n");
    for (i, p) in ports.iter().enumerate() {
        let n = format!("io_{}", p.name);
        let body = match storage(p.width) {
            Storage::U8 | Storage::U16 | Storage::U32 => format!("w[0] = t->{n};"),
            Storage::U64 => format!("w[0] = (uint32_t)t->{n}; w[1] = (uint32_t)(t->{n} >> 32);"),
            Storage::Wide(k) => format!("for (int i = 0; i < {k}; i++) w[i] = t->{n}[i];"),
        };
        let _ = writeln!(s, "    case {i}: {body} break;");
    }
    s.push_str("    default: break;\n    }\n}\n");
    s
}

fn const_name(port: &str) -> String {
    port.to_ascii_uppercase()
}

/// Rust source with one constant per port of the design's top module, for a `build.rs`
/// that wants compile-time port indices: `pub const DIN: (usize, u32) = (2, 32);` is
/// (index for [`PortId`], width). The indices match [`shim_cpp`] and [`Model::port`].
pub fn rust_port_table(design: &Design) -> String {
    let top = design.top();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// Generated by the `hdl` crate: ports of module `{}` as (index, width).",
        top.name()
    );
    for (i, p) in top.ports().iter().enumerate() {
        let role = match p.role {
            PortRole::Data => "",
            PortRole::Clock => ", clock",
            PortRole::Reset { active_low: false } => ", reset",
            PortRole::Reset { active_low: true } => ", active-low reset",
        };
        let _ = writeln!(
            s,
            "/// `{}`: {}, {} bit{}, {}{role}.",
            p.name,
            p.dir.as_str(),
            p.width,
            if p.width == 1 { "" } else { "s" },
            if p.signed { "signed" } else { "unsigned" }
        );
        let _ = writeln!(
            s,
            "pub const {}: (usize, u32) = ({i}, {});",
            const_name(&p.name),
            p.width
        );
    }
    let _ = writeln!(s, "/// Number of ports.");
    let _ = writeln!(s, "pub const PORT_COUNT: usize = {};", top.ports().len());
    s
}

// ----- building ----------------------------------------------------------------------------

const SIM_HEADER: &str = "Verilog for simulation with Verilator";

/// Generated C++ per translation unit (bytes) above which a model is split into several.
const UNIT_BYTES: u64 = 256 * 1024;

/// The Verilog that is verilated: the design plus a wrapper module (returned name) around
/// its top whose ports are the top's ports prefixed with `io_`. Verilator makes top-level
/// ports members of its generated C++ class, so a port called `eval`, `name`, `trace`,
/// `rootp`, ... would collide with the class's own members; the prefix avoids that for any
/// Verilator version. The wrapper costs nothing: Verilator inlines it.
pub fn sim_verilog(design: &Design) -> (String, String) {
    let defs = design.definitions();
    let mut wrapper = "hdl_sim_top".to_string();
    while defs.iter().any(|d| d.name == wrapper) {
        wrapper.push_str("_w");
    }
    let top = design.top();
    let mut v = design.verilog(SIM_HEADER);
    let _ = writeln!(
        v,
        "\n`default_nettype none\n\n// Simulation wrapper: `{}` with ports prefixed `io_`.",
        top.name()
    );
    let _ = writeln!(v, "module {wrapper} (");
    let ports = top.ports();
    for (k, p) in ports.iter().enumerate() {
        let range = if p.width == 1 {
            String::new()
        } else {
            format!("[{}:0] ", p.width - 1)
        };
        let comma = if k + 1 < ports.len() { "," } else { "" };
        let _ = writeln!(v, "  {} wire {range}io_{}{comma}", p.dir.as_str(), p.name);
    }
    let _ = writeln!(v, ");\n  {} dut (", top.name());
    for (k, p) in ports.iter().enumerate() {
        let comma = if k + 1 < ports.len() { "," } else { "" };
        let _ = writeln!(v, "    .{0}(io_{0}){comma}", p.name);
    }
    let _ = writeln!(v, "  );\nendmodule\n\n`default_nettype wire");
    (v, wrapper)
}

fn cxx_flags(t: &Tools, trace: bool) -> Vec<String> {
    let inc = t.verilator_root.join("include");
    let tr = if trace { "1" } else { "0" };
    let mut f: Vec<String> = [
        "-std=gnu++17",
        "-O2",
        "-fPIC",
        "-fvisibility=hidden",
        "-faligned-new",
        "-Wno-bool-operation",
        "-Wno-sign-compare",
        "-Wno-uninitialized",
        "-Wno-unused-but-set-variable",
        "-Wno-unused-parameter",
        "-Wno-unused-variable",
        "-Wno-shadow",
        "-DVM_COVERAGE=0",
        "-DVM_SC=0",
        "-DVM_TRACE_FST=0",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    f.push(format!("-DVM_TRACE={tr}"));
    f.push(format!("-DVM_TRACE_VCD={tr}"));
    f.push(format!("-I{}", inc.display()));
    f.push(format!("-I{}", inc.join("vltstd").display()));
    f
}

/// The Verilator command-line options [`Model::build_with`] verilates with (before `-Mdir`
/// and the source file), for the wrapper module `top` of [`sim_verilog`]. A build script that
/// compiles a model ahead of time (see [`Model::from_static`]) uses the same options.
pub fn verilator_args(top: &str, trace: bool) -> Vec<String> {
    let mut a: Vec<String> = [
        "--cc",
        "-O3",
        "--x-assign",
        "fast",
        "--x-initial",
        "fast",
        "--noassert",
        "--no-timing",
        // Waveform time stamps are picoseconds (the shim steps half clock periods).
        "--timescale-override",
        "1ps/1ps",
        "-Wno-fatal",
        "-Wno-lint",
        "-Wno-style",
        "--prefix",
        "Vtop",
        "--top-module",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.push(top.to_string());
    if trace {
        a.push("--trace".into());
    }
    a
}

struct CompileJob {
    src: PathBuf,
    obj: PathBuf,
    include: Option<PathBuf>,
    flags: Vec<String>,
}

fn compile_all(t: &Tools, jobs: Vec<CompileJob>, limit: usize) -> Result<(), BuildError> {
    let queue = Mutex::new(jobs.into_iter().collect::<Vec<_>>());
    let first_error: Mutex<Option<BuildError>> = Mutex::new(None);
    let workers = limit.max(1);
    std::thread::scope(|sc| {
        for _ in 0..workers {
            sc.spawn(|| loop {
                if first_error.lock().unwrap().is_some() {
                    return;
                }
                let Some(job) = queue.lock().unwrap().pop() else {
                    return;
                };
                let _slot = Slot::take();
                let mut cmd = Command::new(&t.cxx);
                cmd.args(&job.flags);
                if let Some(inc) = &job.include {
                    cmd.arg(format!("-I{}", inc.display()));
                }
                cmd.arg("-c").arg(&job.src).arg("-o").arg(&job.obj);
                if let Err(e) = run(cmd, "compiling the simulation model", &t.cxx) {
                    let mut fe = first_error.lock().unwrap();
                    if fe.is_none() {
                        *fe = Some(e);
                    }
                    return;
                }
            });
        }
    });
    match first_error.into_inner().unwrap() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Splits files into at most `n` groups of similar total size (largest first).
fn balance(mut files: Vec<(PathBuf, u64)>, n: usize) -> Vec<Vec<PathBuf>> {
    files.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let n = n.max(1).min(files.len().max(1));
    let mut groups: Vec<(u64, Vec<PathBuf>)> = vec![(0, vec![]); n];
    for (f, size) in files {
        let g = groups
            .iter_mut()
            .min_by_key(|g| g.0)
            .expect("at least one group");
        g.0 += size.max(1);
        g.1.push(f);
    }
    groups
        .into_iter()
        .map(|g| g.1)
        .filter(|g| !g.is_empty())
        .collect()
}

/// Port handle of a [`Model`]: the port's index in the top module's port list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PortId(pub usize);

type FnNew = unsafe extern "C" fn() -> *mut c_void;
type FnFree = unsafe extern "C" fn(*mut c_void);
type FnEval = unsafe extern "C" fn(*mut c_void);
type FnTick = unsafe extern "C" fn(*mut c_void, u64);
type FnPortPtr = unsafe extern "C" fn(*mut c_void, u32) -> *mut c_void;
type FnTraceOpen = unsafe extern "C" fn(*mut c_void, *const c_char, u64) -> c_int;
type FnTraceClose = unsafe extern "C" fn(*mut c_void);

#[derive(Clone, Copy)]
struct Fns {
    new: FnNew,
    free: FnFree,
    eval: FnEval,
    tick: FnTick,
    port_ptr: FnPortPtr,
    trace_open: FnTraceOpen,
    trace_close: FnTraceClose,
}

/// The C functions of a shim ([`shim_cpp`]) linked into the program, for a model compiled
/// ahead of time (typically by a build script, with its symbols renamed so that several
/// models can be linked) rather than loaded from the cache: see [`Model::from_static`].
#[derive(Clone, Copy, Debug)]
pub struct StaticShim {
    /// `hdl_abi_version`.
    pub abi_version: unsafe extern "C" fn() -> u32,
    /// `hdl_port_count`.
    pub port_count: unsafe extern "C" fn() -> u32,
    /// `hdl_new`.
    pub new: unsafe extern "C" fn() -> *mut c_void,
    /// `hdl_free`.
    pub free: unsafe extern "C" fn(*mut c_void),
    /// `hdl_eval`.
    pub eval: unsafe extern "C" fn(*mut c_void),
    /// `hdl_tick`.
    pub tick: unsafe extern "C" fn(*mut c_void, u64),
    /// `hdl_port_ptr`.
    pub port_ptr: unsafe extern "C" fn(*mut c_void, u32) -> *mut c_void,
    /// `hdl_trace_open`.
    pub trace_open: unsafe extern "C" fn(*mut c_void, *const c_char, u64) -> c_int,
    /// `hdl_trace_close`.
    pub trace_close: unsafe extern "C" fn(*mut c_void),
}

/// A compiled, loaded library; shared by all instances made from it.
struct Library {
    /// The loaded shared library; `None` for a model linked into the program
    /// ([`Model::from_static`]).
    _lib: Option<libloading::Library>,
    fns: Fns,
    path: PathBuf,
    ports: Vec<PortInfo>,
    by_name: HashMap<String, usize>,
    clock: Option<usize>,
    reset: Option<(usize, bool)>,
    traced: bool,
}

/// A running Verilator simulation of a design's top module.
///
/// Drive inputs with [`set`](Model::set) / [`set_wide`](Model::set_wide), propagate
/// combinational logic with [`eval`](Model::eval), read outputs with [`get`](Model::get) /
/// [`get_wide`](Model::get_wide), and advance the clock with [`tick`](Model::tick). A
/// typical cycle: set inputs, `eval()`, read outputs (including ready signals that depend on
/// the inputs just set), decide, `tick()`.
///
/// Misuse (an unknown port name, setting an output, a value wider than the port) panics
/// with a message naming the port: it is a bug in the test bench.
pub struct Model {
    lib: Arc<Library>,
    handle: *mut c_void,
    ptrs: Vec<*mut u8>,
    cycles: u64,
}

// SAFETY: a Verilated model has no thread affinity; `Model` owns its instance exclusively
// and all access goes through `&mut self` (or `&self` reads of port storage), so moving it
// to another thread is sound. It is not `Sync`.
unsafe impl Send for Model {}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("library", &self.lib.path)
            .field("cycles", &self.cycles)
            .finish()
    }
}

impl Model {
    /// Builds (or finds in `cache_dir`) the simulation library of `design`'s top module and
    /// creates one instance of it. `progress` receives each stage: `generating`,
    /// `verilating`, `compiling (N files)`, `linking`, `loading`, or `cached`.
    pub fn build(
        design: &Design,
        cache_dir: &Path,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Model, BuildError> {
        Model::build_with(design, cache_dir, &BuildOptions::default(), progress)
    }

    /// [`build`](Model::build) with options (tracing, parallel jobs).
    pub fn build_with(
        design: &Design,
        cache_dir: &Path,
        opts: &BuildOptions,
        progress: &mut dyn FnMut(&str),
    ) -> Result<Model, BuildError> {
        progress("generating");
        let (verilog, wrapper) = sim_verilog(design);
        let shim = shim_cpp(design);
        let t = tools()?;
        let flags = cxx_flags(&t, opts.trace);
        // The runtime does not depend on VM_TRACE (it only sets a legacy macro), so traced
        // and untraced models share one compiled runtime.
        let rt_flags = cxx_flags(&t, false);
        let vargs = verilator_args(&wrapper, opts.trace);
        let jobs = opts.jobs.unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2)
        });
        fs::create_dir_all(cache_dir).map_err(io_err("creating cache directory", cache_dir))?;

        let runtime_key = cache_key(&[
            t.verilator_version.as_bytes(),
            t.verilator_root.to_string_lossy().as_bytes(),
            t.cxx.as_bytes(),
            t.cxx_version.as_bytes(),
            rt_flags.join(" ").as_bytes(),
        ]);
        let model_key = cache_key(&[
            runtime_key.as_bytes(),
            flags.join(" ").as_bytes(),
            vargs.join(" ").as_bytes(),
            verilog.as_bytes(),
            shim.as_bytes(),
            &ABI_VERSION.to_le_bytes(),
        ]);
        let model_dir = cache_dir.join(format!("model-{}", &model_key[..24]));
        let lib_path = model_dir.join("lib.so");
        if lib_path.exists() {
            progress("cached");
        } else {
            let _lock =
                FileLock::acquire(&cache_dir.join(format!("model-{}.lock", &model_key[..24])))?;
            if lib_path.exists() {
                progress("cached");
            } else {
                build_library(
                    &t,
                    cache_dir,
                    &runtime_key,
                    &model_dir,
                    &verilog,
                    &shim,
                    &flags,
                    &rt_flags,
                    &vargs,
                    opts.trace,
                    jobs,
                    progress,
                )?;
            }
        }
        progress("loading");
        let lib = load(&lib_path, design, opts.trace)?;
        Ok(Model::instantiate(Arc::new(lib)))
    }

    fn instantiate(lib: Arc<Library>) -> Model {
        // SAFETY: `new` is the shim's constructor; it returns an owned, valid model.
        let handle = unsafe { (lib.fns.new)() };
        assert!(
            !handle.is_null(),
            "the simulation model could not be created"
        );
        let ptrs = (0..lib.ports.len())
            .map(|i| {
                // SAFETY: the handle is valid and `i` is a port index of this library.
                let p = unsafe { (lib.fns.port_ptr)(handle, i as u32) } as *mut u8;
                assert!(!p.is_null(), "no storage for port {i}");
                p
            })
            .collect();
        Model {
            lib,
            handle,
            ptrs,
            cycles: 0,
        }
    }

    /// An instance of a model linked into the program instead of built and loaded from a
    /// cache: `shim` holds the functions of [`shim_cpp`]`(design)`, compiled together with
    /// the C++ that Verilator generated from [`sim_verilog`]`(design)` (with
    /// [`verilator_args`]); `traced` says whether that was done with `--trace` and
    /// `VM_TRACE=1`; `name` stands for the library path in messages. The ABI version and the
    /// port count are checked, as for a loaded library.
    ///
    /// # Safety
    ///
    /// The functions must come from exactly that compilation of exactly this design (the
    /// port table is taken from `design`, and port storage is accessed through it).
    pub unsafe fn from_static(
        design: &Design,
        shim: StaticShim,
        traced: bool,
        name: &str,
    ) -> Result<Model, BuildError> {
        let path = PathBuf::from(name);
        // SAFETY: plain functions without arguments (the caller vouches for them).
        let (abi, count) = unsafe { ((shim.abi_version)(), (shim.port_count)()) };
        let ports = design.top().ports().to_vec();
        if abi != ABI_VERSION || count as usize != ports.len() {
            return Err(BuildError::BadLibrary {
                path,
                reason: format!(
                    "ABI {abi} with {count} ports, expected ABI {ABI_VERSION} with {} ports",
                    ports.len()
                ),
            });
        }
        let fns = Fns {
            new: shim.new,
            free: shim.free,
            eval: shim.eval,
            tick: shim.tick,
            port_ptr: shim.port_ptr,
            trace_open: shim.trace_open,
            trace_close: shim.trace_close,
        };
        Ok(Model::instantiate(Arc::new(library(
            None, fns, path, ports, traced,
        ))))
    }

    /// Another, independent instance of the same compiled design (in its initial state).
    pub fn new_instance(&self) -> Model {
        Model::instantiate(self.lib.clone())
    }

    /// The path of the loaded library (inside the cache directory).
    pub fn library_path(&self) -> &Path {
        &self.lib.path
    }

    /// The top module's ports; a port's position is its [`PortId`].
    pub fn ports(&self) -> &[PortInfo] {
        &self.lib.ports
    }

    /// The port called `name`; panics with the list of ports if there is none.
    #[track_caller]
    pub fn port(&self, name: &str) -> PortId {
        match self.try_port(name) {
            Some(p) => p,
            None => {
                let names: Vec<&str> = self.lib.ports.iter().map(|p| p.name.as_str()).collect();
                panic!(
                    "the simulated module has no port `{name}`; its ports: {}",
                    names.join(", ")
                )
            }
        }
    }

    /// The port called `name`, if any.
    pub fn try_port(&self, name: &str) -> Option<PortId> {
        self.lib.by_name.get(name).map(|&i| PortId(i))
    }

    /// Information about a port.
    #[track_caller]
    #[inline]
    pub fn info(&self, port: PortId) -> &PortInfo {
        match self.lib.ports.get(port.0) {
            Some(p) => p,
            None => panic!(
                "port index {} is out of range: the module has {} ports",
                port.0,
                self.lib.ports.len()
            ),
        }
    }

    #[track_caller]
    #[inline]
    fn writable(&self, port: PortId) -> &PortInfo {
        let p = self.info(port);
        if p.dir != Dir::Input {
            panic!("cannot set `{}`: it is an output", p.name);
        }
        p
    }

    /// Sets input `port` (at most 64 bits wide) to `value`; panics if `value` does not fit.
    /// Takes effect in the next [`eval`](Model::eval) or [`tick`](Model::tick).
    #[track_caller]
    #[inline]
    pub fn set(&mut self, port: PortId, value: u64) {
        let p = self.writable(port);
        if p.width > 64 {
            panic!("`{}` is {} bits wide: use set_wide", p.name, p.width);
        }
        if p.width < 64 && value >> p.width != 0 {
            panic!(
                "value {value:#x} does not fit in `{}` ({} bits)",
                p.name, p.width
            );
        }
        let ptr = self.ptrs[port.0];
        // SAFETY: `ptr` points to the port's storage inside the live model, whose C++ type
        // is given by `storage(width)`; the model is not running concurrently (&mut self).
        unsafe {
            match storage(p.width) {
                Storage::U8 => *ptr = value as u8,
                Storage::U16 => *(ptr as *mut u16) = value as u16,
                Storage::U32 => *(ptr as *mut u32) = value as u32,
                Storage::U64 => *(ptr as *mut u64) = value,
                Storage::Wide(_) => unreachable!(),
            }
        }
    }

    /// Sets a signed input from an `i64` (two's complement, must fit the port's range).
    #[track_caller]
    pub fn set_signed(&mut self, port: PortId, value: i64) {
        let w = self.info(port).width;
        if w < 64 {
            let (min, max) = (-(1i64 << (w - 1)), (1i64 << (w - 1)) - 1);
            if value < min || value > max {
                panic!(
                    "value {value} does not fit in `{}` ({w}-bit signed)",
                    self.info(port).name
                );
            }
            self.set(port, (value as u64) & ((1u64 << w) - 1));
        } else {
            self.set(port, value as u64);
        }
    }

    /// Sets input `port` of any width from little-endian 32-bit words. Missing high words
    /// are zero; bits above the port's width must be zero.
    #[track_caller]
    pub fn set_wide(&mut self, port: PortId, words: &[u32]) {
        let p = self.writable(port);
        let width = p.width;
        let n = width.div_ceil(32) as usize;
        if words.len() > n {
            panic!(
                "{} words given for `{}`, which is {} bits ({n} words)",
                words.len(),
                p.name,
                p.width
            );
        }
        // Missing high words are zero (no allocation: this runs every simulated cycle).
        let word = |i: usize| words.get(i).copied().unwrap_or(0);
        let rem = width % 32;
        if rem != 0 && word(n - 1) >> rem != 0 {
            panic!("value does not fit in `{}` ({} bits)", p.name, p.width);
        }
        match storage(width) {
            Storage::Wide(k) => {
                let ptr = self.ptrs[port.0] as *mut u32;
                for i in 0..k {
                    // SAFETY: a VlWide<k> port is k contiguous 32-bit words.
                    unsafe { *ptr.add(i) = word(i) };
                }
            }
            _ => {
                let v = word(0) as u64 | (word(1) as u64) << 32;
                self.set(port, v);
            }
        }
    }

    /// The value of `port` (at most 64 bits wide) after the last `eval`/`tick`.
    #[track_caller]
    #[inline]
    pub fn get(&self, port: PortId) -> u64 {
        let p = self.info(port);
        let ptr = self.ptrs[port.0];
        // SAFETY: as in `set`; reading the port's storage.
        unsafe {
            match storage(p.width) {
                Storage::U8 => *ptr as u64,
                Storage::U16 => *(ptr as *const u16) as u64,
                Storage::U32 => *(ptr as *const u32) as u64,
                Storage::U64 => *(ptr as *const u64),
                Storage::Wide(_) => panic!("`{}` is {} bits wide: use get_wide", p.name, p.width),
            }
        }
    }

    /// A 1-bit port as a bool.
    #[track_caller]
    #[inline]
    pub fn get_bool(&self, port: PortId) -> bool {
        self.get(port) != 0
    }

    /// The value of a port (at most 64 bits) sign-extended from its width.
    #[track_caller]
    pub fn get_signed(&self, port: PortId) -> i64 {
        let w = self.info(port).width;
        let v = self.get(port);
        if w >= 64 {
            v as i64
        } else {
            ((v << (64 - w)) as i64) >> (64 - w)
        }
    }

    /// The value of `port` of any width as little-endian 32-bit words.
    #[track_caller]
    pub fn get_wide(&self, port: PortId) -> Vec<u32> {
        let n = self.info(port).width.div_ceil(32) as usize;
        let mut out = vec![0; n];
        self.get_wide_into(port, &mut out);
        out
    }

    /// Like [`get_wide`](Model::get_wide), into a caller buffer of exactly the port's word
    /// count.
    #[track_caller]
    pub fn get_wide_into(&self, port: PortId, out: &mut [u32]) {
        let p = self.info(port);
        let n = p.width.div_ceil(32) as usize;
        if out.len() != n {
            panic!("`{}` is {} words; got a buffer of {}", p.name, n, out.len());
        }
        match storage(p.width) {
            Storage::Wide(_) => {
                let ptr = self.ptrs[port.0] as *const u32;
                for (i, o) in out.iter_mut().enumerate() {
                    // SAFETY: a VlWide<n> port is n contiguous 32-bit words.
                    *o = unsafe { *ptr.add(i) };
                }
            }
            _ => {
                let v = self.get(port);
                out[0] = v as u32;
                if n > 1 {
                    out[1] = (v >> 32) as u32;
                }
            }
        }
    }

    /// Propagates combinational logic after inputs changed.
    #[inline]
    pub fn eval(&mut self) {
        // SAFETY: valid handle, exclusive access.
        unsafe { (self.lib.fns.eval)(self.handle) }
    }

    /// One clock cycle: clock low, eval, clock high, eval (registers update on the rising
    /// edge). Panics if the module has no clock.
    #[track_caller]
    #[inline]
    pub fn tick(&mut self) {
        self.ticks(1)
    }

    /// `n` clock cycles with the inputs unchanged.
    #[track_caller]
    #[inline]
    pub fn ticks(&mut self, n: u64) {
        if self.lib.clock.is_none() {
            panic!("the simulated module has no clock (it has no registers or memories)");
        }
        // SAFETY: valid handle, exclusive access.
        unsafe { (self.lib.fns.tick)(self.handle, n) }
        self.cycles += n;
    }

    /// Clock cycles simulated so far.
    pub fn cycles(&self) -> u64 {
        self.cycles
    }

    /// Holds the reset active for `cycles` clock cycles, then releases it and evaluates.
    /// Does nothing if the module has no reset (it is then only ticked).
    pub fn reset(&mut self, cycles: u64) {
        match self.lib.reset {
            Some((i, active_low)) => {
                self.set(PortId(i), if active_low { 0 } else { 1 });
                self.ticks(cycles);
                self.set(PortId(i), if active_low { 1 } else { 0 });
                self.eval();
            }
            None => {
                if self.lib.clock.is_some() {
                    self.ticks(cycles);
                }
            }
        }
    }

    /// Starts writing a VCD waveform to `path` (every half clock cycle), in picoseconds at a
    /// clock of `clock_mhz`, so that waveform viewers show real time. Needs a model built
    /// with [`BuildOptions::trace`].
    pub fn trace_open(&mut self, path: &Path, clock_mhz: f64) -> Result<(), BuildError> {
        if !self.lib.traced {
            return Err(BuildError::BadLibrary {
                path: self.lib.path.clone(),
                reason: "it was built without tracing (set BuildOptions::trace)".into(),
            });
        }
        let c = CString::new(path.to_string_lossy().as_bytes()).map_err(|_| BuildError::Io {
            what: "opening trace file",
            path: path.to_path_buf(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "path contains NUL"),
        })?;
        let half_period_ps = (0.5e6 / clock_mhz).round().max(1.0) as u64;
        // SAFETY: valid handle; `c` outlives the call.
        let ok = unsafe { (self.lib.fns.trace_open)(self.handle, c.as_ptr(), half_period_ps) };
        if ok == 0 {
            return Err(BuildError::Io {
                what: "opening trace file",
                path: path.to_path_buf(),
                source: io::Error::other("the VCD writer could not open it"),
            });
        }
        Ok(())
    }

    /// Flushes and closes the waveform, if one is open.
    pub fn trace_close(&mut self) {
        // SAFETY: valid handle.
        unsafe { (self.lib.fns.trace_close)(self.handle) }
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: the handle came from `new` of this library and is freed once.
        unsafe { (self.lib.fns.free)(self.handle) }
    }
}

fn load(path: &Path, design: &Design, traced: bool) -> Result<Library, BuildError> {
    // SAFETY: loading a library we generated and compiled; its initializers are Verilator's
    // and the shim's, which have no side effects beyond static setup.
    let lib = unsafe { libloading::Library::new(path) }.map_err(|source| BuildError::Load {
        path: path.to_path_buf(),
        source,
    })?;
    macro_rules! sym {
        ($name:literal, $ty:ty) => {{
            // SAFETY: the shim defines this symbol with exactly this signature.
            let s: libloading::Symbol<$ty> =
                unsafe { lib.get($name) }.map_err(|source| BuildError::Load {
                    path: path.to_path_buf(),
                    source,
                })?;
            *s
        }};
    }
    let abi: unsafe extern "C" fn() -> u32 =
        sym!(b"hdl_abi_version\0", unsafe extern "C" fn() -> u32);
    let count: unsafe extern "C" fn() -> u32 =
        sym!(b"hdl_port_count\0", unsafe extern "C" fn() -> u32);
    // SAFETY: plain functions without arguments.
    let (abi, count) = unsafe { (abi(), count()) };
    let ports = design.top().ports().to_vec();
    if abi != ABI_VERSION || count as usize != ports.len() {
        return Err(BuildError::BadLibrary {
            path: path.to_path_buf(),
            reason: format!(
                "ABI {abi} with {count} ports, expected ABI {ABI_VERSION} with {} ports",
                ports.len()
            ),
        });
    }
    let fns = Fns {
        new: sym!(b"hdl_new\0", FnNew),
        free: sym!(b"hdl_free\0", FnFree),
        eval: sym!(b"hdl_eval\0", FnEval),
        tick: sym!(b"hdl_tick\0", FnTick),
        port_ptr: sym!(b"hdl_port_ptr\0", FnPortPtr),
        trace_open: sym!(b"hdl_trace_open\0", FnTraceOpen),
        trace_close: sym!(b"hdl_trace_close\0", FnTraceClose),
    };
    Ok(library(Some(lib), fns, path.to_path_buf(), ports, traced))
}

fn library(
    lib: Option<libloading::Library>,
    fns: Fns,
    path: PathBuf,
    ports: Vec<PortInfo>,
    traced: bool,
) -> Library {
    let by_name = ports
        .iter()
        .enumerate()
        .map(|(i, p)| (p.name.clone(), i))
        .collect();
    let clock = ports.iter().position(|p| p.role == PortRole::Clock);
    let reset = ports.iter().enumerate().find_map(|(i, p)| match p.role {
        PortRole::Reset { active_low } => Some((i, active_low)),
        _ => None,
    });
    Library {
        _lib: lib,
        fns,
        path,
        ports,
        by_name,
        clock,
        reset,
        traced,
    }
}

#[allow(clippy::too_many_arguments)]
fn build_library(
    t: &Tools,
    cache_dir: &Path,
    runtime_key: &str,
    model_dir: &Path,
    verilog: &str,
    shim: &str,
    flags: &[String],
    rt_flags: &[String],
    vargs: &[String],
    trace: bool,
    jobs: usize,
    progress: &mut dyn FnMut(&str),
) -> Result<(), BuildError> {
    let tmp = cache_dir.join(format!(
        "{}.tmp-{}",
        model_dir.file_name().unwrap().to_string_lossy(),
        unique_suffix()
    ));
    fs::create_dir_all(&tmp).map_err(io_err("creating build directory", &tmp))?;
    let result = (|| {
        let v_path = tmp.join("top.v");
        fs::write(&v_path, verilog).map_err(io_err("writing", &v_path))?;
        let shim_path = tmp.join("shim.cpp");
        fs::write(&shim_path, shim).map_err(io_err("writing", &shim_path))?;

        progress("verilating");
        let obj = tmp.join("obj");
        let mut cmd = Command::new("verilator");
        cmd.args(vargs).arg("-Mdir").arg(&obj).arg(&v_path);
        run(cmd, "verilating the design", "verilator")?;

        // Group Verilator's sources (and the shim) into one translation unit per job.
        let mut files = vec![];
        for e in fs::read_dir(&obj).map_err(io_err("reading", &obj))? {
            let p = e.map_err(io_err("reading", &obj))?.path();
            if p.extension().is_some_and(|x| x == "cpp") {
                let size = fs::metadata(&p).map(|m| m.len()).unwrap_or(1);
                files.push((p, size));
            }
        }
        files.push((shim_path.clone(), 1));
        // Each translation unit re-parses Verilator's headers (about a second), so small
        // models compile as one unit; larger ones are split to use every job.
        let total: u64 = files.iter().map(|f| f.1).sum();
        let units = (total.div_ceil(UNIT_BYTES) as usize).clamp(1, jobs.max(1));
        let groups = balance(files, units);
        let mut compile = vec![];
        let mut objects = vec![];
        for (k, g) in groups.iter().enumerate() {
            let unit = tmp.join(format!("unit{k}.cpp"));
            let mut text = String::from("#define VL_INCLUDE_OPT include\n");
            for f in g {
                let _ = writeln!(text, "#include \"{}\"", f.display());
            }
            fs::write(&unit, text).map_err(io_err("writing", &unit))?;
            let o = tmp.join(format!("unit{k}.o"));
            objects.push(o.clone());
            compile.push(CompileJob {
                src: unit,
                obj: o,
                include: Some(obj.clone()),
                flags: flags.to_vec(),
            });
        }

        // The Verilator runtime, compiled once per cache directory.
        let rt_dir = cache_dir.join(format!("runtime-{}", &runtime_key[..24]));
        let mut rt_sources = vec!["verilated.cpp", "verilated_threads.cpp"];
        if trace {
            rt_sources.push("verilated_vcd_c.cpp");
        }
        let rt_objects: Vec<PathBuf> = rt_sources
            .iter()
            .map(|s| rt_dir.join(s.replace(".cpp", ".o")))
            .collect();
        let missing: Vec<usize> = (0..rt_sources.len())
            .filter(|&i| !rt_objects[i].exists())
            .collect();
        let _rt_lock = if missing.is_empty() {
            None
        } else {
            fs::create_dir_all(&rt_dir).map_err(io_err("creating", &rt_dir))?;
            Some(FileLock::acquire(
                &cache_dir.join(format!("runtime-{}.lock", &runtime_key[..24])),
            )?)
        };
        let mut rt_tmp = vec![];
        for i in 0..rt_sources.len() {
            if rt_objects[i].exists() {
                continue;
            }
            let o = rt_dir.join(format!("{}.tmp-{}", rt_sources[i], unique_suffix()));
            compile.push(CompileJob {
                src: t.verilator_root.join("include").join(rt_sources[i]),
                obj: o.clone(),
                include: None,
                flags: rt_flags.to_vec(),
            });
            rt_tmp.push((o, rt_objects[i].clone()));
        }
        // Jobs are taken from the end: the runtime sources, the slowest, go first.
        progress(&format!(
            "compiling ({} file{})",
            compile.len(),
            if compile.len() == 1 { "" } else { "s" }
        ));
        compile_all(t, compile, jobs)?;
        for (from, to) in rt_tmp {
            fs::rename(&from, &to).map_err(io_err("moving into place", &to))?;
        }
        drop(_rt_lock);

        progress("linking");
        let lib_tmp = tmp.join("lib.so");
        let mut cmd = Command::new(&t.cxx);
        cmd.args(["-shared", "-fPIC", "-o"])
            .arg(&lib_tmp)
            .args(&objects)
            .args(&rt_objects)
            .args(["-pthread", "-latomic"]);
        run(cmd, "linking the simulation model", &t.cxx)?;
        let _ = fs::remove_dir_all(&obj);
        for o in &objects {
            let _ = fs::remove_file(o);
        }
        // Move the finished directory into place (replacing any leftovers).
        if model_dir.exists() {
            fs::remove_dir_all(model_dir).map_err(io_err("removing stale", model_dir))?;
        }
        fs::rename(&tmp, model_dir).map_err(io_err("moving into place", model_dir))?;
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_dir_all(&tmp);
    }
    result
}

/// Runs `verilator --lint-only -Wall` on the design (written to `work_dir/<top>.v`).
/// Succeeds only if Verilator prints no warning at all; otherwise the error holds its
/// output.
pub fn lint(design: &Design, work_dir: &Path) -> Result<(), BuildError> {
    tools()?;
    fs::create_dir_all(work_dir).map_err(io_err("creating", work_dir))?;
    let top = design.top().name();
    let path = work_dir.join(format!("{top}.v"));
    fs::write(&path, design.verilog("lint")).map_err(io_err("writing", &path))?;
    let mut cmd = Command::new("verilator");
    cmd.args(["--lint-only", "-Wall", "--top-module", top])
        .arg(&path);
    let line = command_line(&cmd);
    let out = run_capture(&mut cmd, "verilator")?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() || text.contains("%Warning") || text.contains("%Error") {
        return Err(BuildError::ToolFailed {
            stage: "lint (verilator -Wall)".into(),
            command: line,
            status: out.status.to_string(),
            output: tail(&text, 80),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tools_say_how_to_install_them() {
        let e = detect("verilator-that-does-not-exist", "g++").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("`verilator-that-does-not-exist` is needed"),
            "{msg}"
        );
        assert!(msg.contains("apt-get install verilator g++"), "{msg}");
        if Command::new("verilator").arg("--version").output().is_ok() {
            let e = detect("verilator", "g++-that-does-not-exist").unwrap_err();
            assert!(
                e.to_string().contains("apt-get install verilator g++"),
                "{e}"
            );
        }
    }

    #[test]
    fn keys_differ() {
        assert_ne!(cache_key(&[b"a", b"bc"]), cache_key(&[b"ab", b"c"]));
        assert_eq!(cache_key(&[b"x"]).len(), 32);
    }

    #[test]
    fn balancing() {
        let g = balance(
            vec![
                ("a".into(), 10),
                ("b".into(), 9),
                ("c".into(), 2),
                ("d".into(), 1),
            ],
            2,
        );
        assert_eq!(g.len(), 2);
        assert_eq!(g[0], vec![PathBuf::from("a"), PathBuf::from("d")]);
        assert_eq!(g[1], vec![PathBuf::from("b"), PathBuf::from("c")]);
    }
}
