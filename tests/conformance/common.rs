//! Shared pieces of the conformance suite: configs under test, a deterministic RNG, packing
//! of matrices into VTA's blocked DRAM layouts, and running a program on every backend.
//!
//! [`run`] runs each program on the functional simulator (whose outputs the tests compare
//! with their references, with its race detector on), on the cycle-accurate RTL simulator
//! (the accelerator's Verilog in Verilator), on Linux on an emulated board through the
//! remote runner (the board device behind `vta-board serve`, reached as
//! `--backend remote://` reaches it), and on the simulated SoC through its UART (the serial
//! driver, as `--backend soc-sim`; the `default` config's programs of at most 64 KiB, see
//! [`SOC_MAX_DRAM`]), and requires them to agree byte for byte on every output and on every
//! counter. `VTA_CONFORMANCE_BACKENDS` (default `fsim,rtl,board,soc`) selects the backends
//! besides fsim; `VTA_CONFORMANCE_SOC_MEMORY=sdram` gives the SoC the ULX3S's SDRAM (a
//! LiteDRAM controller and a chip model) instead of block RAM.

use std::path::PathBuf;

use drivers::{run_program, RunTimeout};
use isa::{HwConfig, MemType, Program};
use ndarray::Array2;
use vta_sim::rtl::RtlDevice;
use vta_sim::rtl::RtlOptions;
use vta_sim::FsimDevice;

/// VTA's default config, a batched one, and one with BATCH > 1 and BLOCK_IN != BLOCK_OUT.
pub const CONFIGS: [&str; 3] = ["default", "batched", "rect"];

pub fn configs() -> impl Iterator<Item = HwConfig> {
    CONFIGS.iter().map(|n| HwConfig::preset(n).unwrap())
}

pub use isa::rng::Rng;

/// Random matrices for the conformance programs.
pub trait RngMatrix {
    /// A `rows x cols` matrix of values uniform in `lo..=hi`.
    fn matrix<T: TryFrom<i64>>(&mut self, rows: usize, cols: usize, lo: i64, hi: i64) -> Array2<T>
    where
        T::Error: std::fmt::Debug;
}

impl RngMatrix for Rng {
    fn matrix<T: TryFrom<i64>>(&mut self, rows: usize, cols: usize, lo: i64, hi: i64) -> Array2<T>
    where
        T::Error: std::fmt::Debug,
    {
        Array2::from_shape_simple_fn((rows, cols), || T::try_from(self.range(lo, hi)).unwrap())
    }
}

/// Little-endian bytes of integer lanes.
pub trait Lane: Copy {
    fn put(self, out: &mut Vec<u8>);
    fn get(bytes: &[u8]) -> Self;
    const SIZE: usize;
}

impl Lane for i8 {
    fn put(self, out: &mut Vec<u8>) {
        out.push(self as u8)
    }
    fn get(b: &[u8]) -> Self {
        b[0] as i8
    }
    const SIZE: usize = 1;
}

impl Lane for i32 {
    fn put(self, out: &mut Vec<u8>) {
        out.extend(self.to_le_bytes())
    }
    fn get(b: &[u8]) -> Self {
        i32::from_le_bytes(b[..4].try_into().unwrap())
    }
    const SIZE: usize = 4;
}

/// Packs `m` (rows x cols) into DRAM elements of `rb` x `cb` lanes, elements in row-major
/// order of blocks and lanes row-major inside an element: VTA's `packBuffer` layout (INP:
/// rb = BATCH, cb = BLOCK_IN; WGT: BLOCK_OUT, BLOCK_IN; ACC/OUT: BATCH, BLOCK_OUT).
pub fn pack<T: Lane>(m: &Array2<T>, rb: usize, cb: usize) -> Vec<u8> {
    let (rows, cols) = m.dim();
    assert!(
        rows % rb == 0 && cols % cb == 0,
        "{rows}x{cols} is not a multiple of {rb}x{cb}"
    );
    let mut out = Vec::with_capacity(rows * cols * T::SIZE);
    for bi in 0..rows / rb {
        for bj in 0..cols / cb {
            for r in 0..rb {
                for c in 0..cb {
                    m[[bi * rb + r, bj * cb + c]].put(&mut out);
                }
            }
        }
    }
    out
}

/// The inverse of [`pack`].
pub fn unpack<T: Lane + Default>(
    bytes: &[u8],
    rows: usize,
    cols: usize,
    rb: usize,
    cb: usize,
) -> Array2<T> {
    let mut m = Array2::from_elem((rows, cols), T::default());
    let mut i = 0;
    for bi in 0..rows / rb {
        for bj in 0..cols / cb {
            for r in 0..rb {
                for c in 0..cb {
                    m[[bi * rb + r, bj * cb + c]] = T::get(&bytes[i..]);
                    i += T::SIZE;
                }
            }
        }
    }
    m
}

/// Lanes per element of a memory type as (rows, cols) for [`pack`].
pub fn block(cfg: &HwConfig, m: MemType) -> (usize, usize) {
    let (b, i, o) = (
        cfg.batch() as usize,
        cfg.block_in() as usize,
        cfg.block_out() as usize,
    );
    match m {
        MemType::Inp => (b, i),
        MemType::Wgt => (o, i),
        MemType::Acc | MemType::Out | MemType::Acc8 => (b, o),
        MemType::Uop => (1, 1),
    }
}

/// Runs `p` with its own initial data on the functional simulator and returns its outputs;
/// when it succeeds, also runs it on the RTL simulator and panics unless every output byte
/// and every counter is the same.
pub fn run(p: &Program) -> Result<Vec<(String, Vec<u8>)>, String> {
    let mut dev = FsimDevice::checking_races(&p.config);
    let want = run_program(&mut dev, p, &[], RunTimeout::default()).map_err(|e| e.to_string())?;
    if rtl_enabled() {
        let mut rtl = rtl_device(&p.config);
        let got = run_program(&mut rtl, p, &[], RunTimeout::default())
            .unwrap_or_else(|e| panic!("{}: the RTL run failed: {e}", p.config));
        compare_runs(&p.config, &want, &got);
    }
    #[cfg(target_os = "linux")]
    if backend_enabled("board") {
        let mut board = served_board(&p.config);
        let got = run_program(&mut board, p, &[], RunTimeout::default())
            .unwrap_or_else(|e| panic!("{}: the run on the served board failed: {e}", p.config));
        assert_eq!(
            want.outputs, got.outputs,
            "{}: fsim and the served board differ",
            p.config
        );
        assert_eq!(
            want.report.counters, got.report.counters,
            "{}: counters differ between fsim and the served board",
            p.config
        );
    }
    if backend_enabled("soc") && soc_runs(p) {
        let mut soc = soc_device(&p.config);
        let got = run_program(&mut soc, p, &[], RunTimeout::default())
            .unwrap_or_else(|e| panic!("{}: the run on the simulated SoC failed: {e}", p.config));
        compare_runs(&p.config, &want, &got);
        if let Some((code, what)) = soc.stream().sdram_fault() {
            panic!("{}: the SDRAM model saw fault {code}: {what}", p.config);
        }
    }
    Ok(want.outputs)
}

/// Programs of more DRAM than this skip the simulated SoC: every byte crosses its UART at 40
/// clock cycles, so the 256x256 GEMMs (450 KB, 22 M cycles each) would cost minutes.
pub const SOC_MAX_DRAM: u64 = 64 << 10;

/// Whether [`run`] also runs `p` on the simulated SoC: programs of the `default` config
/// (one SoC model for the suite) of at most [`SOC_MAX_DRAM`] bytes of DRAM.
fn soc_runs(p: &Program) -> bool {
    p.config == HwConfig::default() && p.dram_size() <= SOC_MAX_DRAM
}

/// A fresh simulated SoC for `cfg`, reached through its UART by the serial driver (its model
/// built or loaded once per test binary); with `VTA_CONFORMANCE_SOC_MEMORY=sdram`, the SoC
/// with the ULX3S's SDRAM behind LiteDRAM as its device memory.
pub fn soc_device(cfg: &HwConfig) -> drivers::serial::SerialDevice<vta_sim::soc::SimLine> {
    let opts = if std::env::var("VTA_CONFORMANCE_SOC_MEMORY").is_ok_and(|m| m == "sdram") {
        crate::sdram_support::sdram_options(cfg, model_cache())
    } else {
        vta_sim::soc::SimOptions {
            cache_dir: Some(model_cache()),
            ..Default::default()
        }
    };
    let name = cfg.config_string();
    vta_sim::soc::device(cfg, &opts, &mut |s| eprintln!("[soc model {name}] {s}"))
        .unwrap_or_else(|e| panic!("{cfg}: no simulated SoC: {e}"))
}

/// Whether [`run`] also runs on the RTL simulator.
pub fn rtl_enabled() -> bool {
    backend_enabled("rtl")
}

fn backend_enabled(name: &str) -> bool {
    std::env::var("VTA_CONFORMANCE_BACKENDS").map_or(true, |v| v.contains(name))
}

/// A client of an emulated board implementing `cfg` served on loopback (one server per
/// config per test binary, started on first use, as `vta-board serve` serves a board).
#[cfg(target_os = "linux")]
fn served_board(cfg: &HwConfig) -> drivers::remote::RemoteDevice {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static SERVERS: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    let addr = {
        let mut servers = SERVERS.get_or_init(Default::default).lock().unwrap();
        servers
            .entry(cfg.config_string())
            .or_insert_with(|| {
                let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                let addr = listener.local_addr().unwrap().to_string();
                let cfg = cfg.clone();
                std::thread::spawn(move || {
                    let emu = crate::board_emu::EmulatedBoard::new(&cfg, cfg.isa_hash(), 64 << 20);
                    let mut dev = drivers::board::BoardDevice::open(&cfg, &emu.options()).unwrap();
                    let opts = drivers::remote::ServeOptions::default();
                    drivers::remote::serve(listener, &mut dev, opts).unwrap();
                });
                addr
            })
            .clone()
    };
    let opts = drivers::remote::RemoteOptions {
        expect: Some(cfg.clone()),
        ..Default::default()
    };
    drivers::remote::RemoteDevice::connect(&addr, opts)
        .unwrap_or_else(|e| panic!("{cfg}: the served board: {e}"))
}

/// The Verilator model cache of the tests: `$VTA_HDL_CACHE`, else the one vta-hw's tests use
/// (so a model is built once per target directory).
pub fn model_cache() -> PathBuf {
    std::env::var_os("VTA_HDL_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("vta-hw-models"))
}

/// A fresh RTL device for `cfg` (each model is built or loaded once per test binary).
pub fn rtl_device(cfg: &HwConfig) -> RtlDevice {
    let opts = RtlOptions {
        cache_dir: Some(model_cache()),
        mem_size: 64 << 20,
        ..RtlOptions::default()
    };
    let name = cfg.config_string();
    RtlDevice::with_options(cfg, &opts, &mut |s| eprintln!("[rtl model {name}] {s}"))
        .unwrap_or_else(|e| panic!("{cfg}: no RTL model: {e}"))
}

/// Panics unless the two runs' outputs and counters are identical, naming the first
/// differing output byte; the second run must report its cycles.
pub fn compare_runs(cfg: &HwConfig, fsim: &drivers::ProgramRun, rtl: &drivers::ProgramRun) {
    let other = &rtl.report.backend;
    assert_eq!(fsim.outputs.len(), rtl.outputs.len());
    for ((name, w), (_, g)) in fsim.outputs.iter().zip(&rtl.outputs) {
        if let Some(i) = w.iter().zip(g).position(|(a, b)| a != b) {
            panic!(
                "{cfg}: output '{name}' differs between fsim and {other} from byte {i} of {}:\n  fsim {:?}\n  {other} {:?}",
                w.len(),
                &w[i..w.len().min(i + 16)],
                &g[i..g.len().min(i + 16)]
            );
        }
    }
    assert_eq!(
        fsim.report.counters, rtl.report.counters,
        "{cfg}: counters differ between fsim and {other}"
    );
    assert!(
        rtl.report.get("cycles").is_some_and(|c| c > 0),
        "{cfg}: the {other} run reports no cycles"
    );
}

/// The bytes of output `name`.
pub fn output<'a>(outs: &'a [(String, Vec<u8>)], name: &str) -> &'a [u8] {
    &outs.iter().find(|o| o.0 == name).expect("output exists").1
}
