//! Throughput benchmark of the functional simulator: a GEMM-heavy and an ALU-heavy program
//! built for any config, run and timed. Used by `cargo bench -p vta-sim` and meant for a
//! `vta bench fsim` command, which can print [`FsimFigures`] the same way.
//!
//! [`rtl`] measures the cycle-accurate simulator (`vta bench rtl`, `cargo bench -p vta-sim
//! --bench rtl`) on VTA's blocked GEMM ([`gemm`]).

pub mod gemm;
#[cfg(all(unix, feature = "rtl"))]
pub mod rtl;

use std::fmt;
use std::time::{Duration, Instant};

use isa::{
    AluInsn, AluOp, Codec, DepFlags, GemmInsn, HwConfig, Insn, MemInsn, MemType, Uop, UopLoop,
};

use crate::{Counters, Dram, Fsim, FsimError, Limits};

/// CPU time used by the calling thread so far (`CLOCK_THREAD_CPUTIME_ID`): a measure of
/// simulation speed that other processes on the machine disturb far less than wall time.
#[cfg(unix)]
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a plain libc call writing the struct we pass.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Wall time since an arbitrary start where no per-thread CPU clock is known.
#[cfg(not(unix))]
pub fn thread_cpu_time() -> Duration {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed()
}

/// Physical address where the benchmark programs' memory starts.
pub const BENCH_BASE: u64 = 0x1000_0000;

/// A program placed in its own memory, ready for [`Fsim::run`].
#[derive(Debug, Clone)]
pub struct BenchProgram {
    pub name: &'static str,
    pub dram: Dram,
    pub insn_addr: u64,
    pub insn_count: u32,
}

/// How much work each benchmark program does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BenchSize {
    /// GEMM instructions, each over the whole micro-op kernel (8192 micro-ops by default).
    pub gemm_insns: u32,
    /// ALU instructions, each over the whole micro-op kernel.
    pub alu_insns: u32,
    /// Runs of each program; the fastest counts (the others absorb disturbances).
    pub repeats: u32,
}

impl Default for BenchSize {
    fn default() -> Self {
        BenchSize {
            gemm_insns: 1024,
            alu_insns: 2048,
            repeats: 3,
        }
    }
}

/// Deterministic pseudo-random bytes (`isa::rng`).
pub fn noise(len: usize, seed: u64) -> Vec<u8> {
    isa::rng::Rng::new(seed).bytes(len)
}

/// A LOAD/STORE moving `n` consecutive elements as rows of at most 4096.
fn dma(memory_type: MemType, sram_base: u16, dram_base: u64, n: u32, deps: DepFlags) -> MemInsn {
    let x = n.min(4096);
    let (y, x) = ((n / x) as u16, x as u16);
    MemInsn::transfer(memory_type, sram_base, dram_base as u32, y, x, x).with_deps(deps)
}

fn deps(pop_prev: bool, pop_next: bool, push_prev: bool, push_next: bool) -> DepFlags {
    DepFlags {
        pop_prev,
        pop_next,
        push_prev,
        push_next,
    }
}

/// Lays out segments one after another from [`BENCH_BASE`], each aligned to 4 KiB.
struct Layout {
    cfg: HwConfig,
    parts: Vec<(u64, Vec<u8>)>,
    next: u64,
}

impl Layout {
    fn new(cfg: &HwConfig) -> Self {
        Layout {
            cfg: cfg.clone(),
            parts: Vec::new(),
            next: BENCH_BASE,
        }
    }
    /// Places `bytes` and returns the element address of its start for memory type `m`.
    fn place(&mut self, m: MemType, bytes: Vec<u8>) -> u64 {
        let addr = self.next;
        self.next = (addr + bytes.len() as u64).next_multiple_of(4096);
        self.parts.push((addr, bytes));
        addr / u64::from(self.cfg.elem_bytes(m))
    }
    fn reserve(&mut self, m: MemType, len: u64) -> u64 {
        self.place(m, vec![0; len as usize])
    }
    fn finish(mut self, name: &'static str, insns: &[Insn]) -> BenchProgram {
        let stream = Codec::new(&self.cfg)
            .encode_stream(insns)
            .expect("benchmark instructions encode");
        let insn_addr = self.next;
        self.next += stream.len() as u64;
        self.parts.push((insn_addr, stream));
        let mut dram = Dram::new(BENCH_BASE, (self.next - BENCH_BASE) as usize);
        for (addr, bytes) in &self.parts {
            let at = (addr - BENCH_BASE) as usize;
            dram.bytes_mut()[at..at + bytes.len()].copy_from_slice(bytes);
        }
        BenchProgram {
            name,
            dram,
            insn_addr,
            insn_count: insns.len() as u32,
        }
    }
}

/// The micro-op kernel: `min(8192, UOP depth)` micro-ops spread over the buffers; every
/// `src_idx` is valid for both INP (GEMM) and ACC (ALU).
fn kernel(cfg: &HwConfig) -> Vec<u8> {
    let codec = Codec::new(cfg);
    let n = cfg.depth(MemType::Uop).min(8192);
    let acc = cfg.depth(MemType::Acc);
    let src = cfg.depth(MemType::Inp).min(acc);
    let wgt = cfg.depth(MemType::Wgt);
    (0..n)
        .flat_map(|u| {
            let uop = Uop {
                dst_idx: u % acc,
                src_idx: (u * 7 + 3) % src,
                wgt_idx: (u * 13 + 1) % wgt,
            };
            codec.encode_uop(&uop).expect("indices are in range")
        })
        .collect()
}

fn full_loop(cfg: &HwConfig, reset_reg: bool) -> UopLoop {
    UopLoop {
        reset_reg,
        uop_bgn: 0,
        uop_end: cfg.depth(MemType::Uop).min(8192) as u16,
        iter_out: 1,
        iter_in: 1,
        ..UopLoop::default()
    }
}

fn bytes_of(cfg: &HwConfig, m: MemType) -> u64 {
    u64::from(cfg.depth(m)) * u64::from(cfg.elem_bytes(m))
}

/// Loads random INP and WGT buffers and a micro-op kernel, then runs `gemm_insns` GEMMs
/// over the whole kernel and stores every ACC row.
pub fn gemm_program(cfg: &HwConfig, gemm_insns: u32) -> BenchProgram {
    let mut l = Layout::new(cfg);
    let uops = kernel(cfg);
    let n_uops = (uops.len() / isa::UOP_BYTES) as u32;
    let uop_at = l.place(MemType::Uop, uops);
    let inp_at = l.place(MemType::Inp, noise(bytes_of(cfg, MemType::Inp) as usize, 1));
    let wgt_at = l.place(MemType::Wgt, noise(bytes_of(cfg, MemType::Wgt) as usize, 2));
    let out_at = l.reserve(MemType::Out, bytes_of(cfg, MemType::Out));
    let none = DepFlags::NONE;
    let mut insns = vec![
        Insn::Load(dma(MemType::Inp, 0, inp_at, cfg.depth(MemType::Inp), none)),
        Insn::Load(dma(
            MemType::Wgt,
            0,
            wgt_at,
            cfg.depth(MemType::Wgt),
            deps(false, false, false, true),
        )),
        Insn::Load(dma(MemType::Uop, 0, uop_at, n_uops, none)),
        Insn::Gemm(GemmInsn {
            deps: deps(true, false, false, false),
            lp: full_loop(cfg, true),
            ..GemmInsn::default()
        }),
    ];
    for k in 0..gemm_insns {
        insns.push(Insn::Gemm(GemmInsn {
            deps: deps(false, false, false, k + 1 == gemm_insns),
            lp: full_loop(cfg, false),
            ..GemmInsn::default()
        }));
    }
    if gemm_insns == 0 {
        *insns.last_mut().expect("non-empty").deps_mut() = deps(true, false, false, true);
    }
    insns.push(Insn::Store(dma(
        MemType::Out,
        0,
        out_at,
        cfg.depth(MemType::Out),
        deps(true, false, true, false),
    )));
    insns.push(Insn::Finish(deps(false, true, false, false)));
    l.finish("gemm", &insns)
}

/// Loads a micro-op kernel and random ACC rows, then runs `alu_insns` ALU instructions
/// (cycling through add, shr, max, min and, with ALU_MUL, mul; tensor and immediate
/// operands) over the whole kernel and stores every row.
pub fn alu_program(cfg: &HwConfig, alu_insns: u32) -> BenchProgram {
    let mut l = Layout::new(cfg);
    let uops = kernel(cfg);
    let n_uops = (uops.len() / isa::UOP_BYTES) as u32;
    let uop_at = l.place(MemType::Uop, uops);
    let acc_at = l.place(MemType::Acc, noise(bytes_of(cfg, MemType::Acc) as usize, 3));
    let out_at = l.reserve(MemType::Out, bytes_of(cfg, MemType::Out));
    let none = DepFlags::NONE;
    let mut insns = vec![
        Insn::Load(dma(MemType::Uop, 0, uop_at, n_uops, none)),
        Insn::Load(dma(MemType::Acc, 0, acc_at, cfg.depth(MemType::Acc), none)),
    ];
    let mut ops = vec![
        (AluOp::Add, false, 0),
        (AluOp::Shr, true, 3),
        (AluOp::Max, true, -1000),
        (AluOp::Min, true, 1000),
        (AluOp::Shr, true, -2),
        (AluOp::Max, false, 0),
    ];
    if cfg.alu_mul {
        ops.push((AluOp::Mul, true, 3));
    }
    for k in 0..alu_insns {
        let (op, use_imm, imm) = ops[k as usize % ops.len()];
        insns.push(Insn::Alu(AluInsn {
            deps: deps(false, false, false, k + 1 == alu_insns),
            lp: full_loop(cfg, false),
            op,
            use_imm,
            imm,
        }));
    }
    if alu_insns == 0 {
        *insns.last_mut().expect("non-empty").deps_mut() = deps(false, false, false, true);
    }
    insns.push(Insn::Store(dma(
        MemType::Out,
        0,
        out_at,
        cfg.depth(MemType::Out),
        deps(true, false, true, false),
    )));
    insns.push(Insn::Finish(deps(false, true, false, false)));
    l.finish("alu", &insns)
}

/// One timed run.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    pub counters: Counters,
    /// CPU time of the simulating thread ([`thread_cpu_time`]).
    pub seconds: f64,
    /// Wall time of the run.
    pub wall_seconds: f64,
}

impl Measured {
    fn per_second(&self, n: u64) -> f64 {
        n as f64 / self.seconds.max(1e-9)
    }
}

/// Runs `p` on a fresh simulator `repeats` times (at least once) and keeps the fastest run.
pub fn measure(cfg: &HwConfig, p: &BenchProgram, repeats: u32) -> Result<Measured, FsimError> {
    let mut best: Option<Measured> = None;
    for _ in 0..repeats.max(1) {
        let mut sim = Fsim::new(cfg);
        let mut dram = p.dram.clone();
        let (wall, cpu) = (Instant::now(), thread_cpu_time());
        let counters = sim.run(&mut dram, p.insn_addr, p.insn_count, &Limits::unlimited())?;
        let m = Measured {
            counters,
            seconds: thread_cpu_time().saturating_sub(cpu).as_secs_f64(),
            wall_seconds: wall.elapsed().as_secs_f64(),
        };
        if best.is_none_or(|b| m.seconds < b.seconds) {
            best = Some(m);
        }
    }
    Ok(best.expect("at least one run"))
}

/// The simulator's throughput on one config.
#[derive(Debug, Clone)]
pub struct FsimFigures {
    /// The config string.
    pub config: String,
    /// ALU lanes per micro-op (`BATCH * BLOCK_OUT`).
    pub lanes_per_uop: u64,
    /// The GEMM loop the simulator runs on this CPU (`avx2` or `portable`).
    pub gemm_kernel: &'static str,
    /// Runs of each program (the fastest counts).
    pub repeats: u32,
    pub gemm: Measured,
    pub alu: Measured,
}

impl FsimFigures {
    pub fn gmacs_per_second(&self) -> f64 {
        self.gemm.per_second(self.gemm.counters.macs) / 1e9
    }
    pub fn gemm_uops_per_second(&self) -> f64 {
        self.gemm.per_second(self.gemm.counters.gemm_uops)
    }
    pub fn alu_uops_per_second(&self) -> f64 {
        self.alu.per_second(self.alu.counters.alu_uops)
    }
    pub fn alu_lanes_per_second(&self) -> f64 {
        self.alu_uops_per_second() * self.lanes_per_uop as f64
    }
}

impl fmt::Display for FsimFigures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "fsim throughput, config {} (one core; CPU time of the simulating thread, fastest of {} run{})",
            self.config,
            self.repeats,
            if self.repeats == 1 { "" } else { "s" }
        )?;
        writeln!(
            f,
            "  gemm: {} MACs in {:.3} s = {:.2} GMAC/s ({:.1} M micro-ops/s, {} kernel)",
            self.gemm.counters.macs,
            self.gemm.seconds,
            self.gmacs_per_second(),
            self.gemm_uops_per_second() / 1e6,
            self.gemm_kernel
        )?;
        write!(
            f,
            "  alu:  {} micro-ops in {:.3} s = {:.1} M micro-ops/s, {:.2} G lanes/s",
            self.alu.counters.alu_uops,
            self.alu.seconds,
            self.alu_uops_per_second() / 1e6,
            self.alu_lanes_per_second() / 1e9
        )
    }
}

/// Builds both programs for `cfg`, runs each `size.repeats` times (after a small warm-up)
/// and keeps the fastest run of each.
pub fn fsim(cfg: &HwConfig, size: BenchSize) -> Result<FsimFigures, FsimError> {
    measure(cfg, &gemm_program(cfg, 4), 1)?;
    let gemm = measure(cfg, &gemm_program(cfg, size.gemm_insns), size.repeats)?;
    let alu = measure(cfg, &alu_program(cfg, size.alu_insns), size.repeats)?;
    Ok(FsimFigures {
        config: cfg.config_string(),
        lanes_per_uop: u64::from(cfg.batch() * cfg.block_out()),
        gemm_kernel: Fsim::new(cfg).gemm_kernel(),
        repeats: size.repeats.max(1),
        gemm,
        alu,
    })
}
