//! Benchmark of the cycle-accurate simulator: simulated cycles per second of host time (one
//! core), and the GEMM core's utilization (GEMM micro-ops per cycle) on VTA's blocked GEMM
//! (`blocked_gemm_test`, [`super::gemm::blocked_gemm`]) with one and two virtual threads,
//! against the memory roofline. Used by `vta bench rtl` and `cargo bench -p vta-sim --bench
//! rtl`.

use std::fmt;
use std::time::Duration;

use isa::HwConfig;

use crate::rtl::multicore::MultiCoreSim;
use crate::rtl::{MemTiming, ModelOrigin, RtlError, RtlOptions, RtlSim, RunLimits};
use crate::Counters;

use super::gemm::{blocked_gemm, GemmOperands};
use super::thread_cpu_time;

/// What to run.
#[derive(Clone, Debug)]
pub struct RtlBench {
    /// The memory model's timing.
    pub timing: MemTiming,
    /// Model cache (`None`: hdl's default).
    pub cache_dir: Option<std::path::PathBuf>,
    /// Blocked GEMM size: `batch x channels` inputs, `channels x channels` weights, blocks
    /// of `block` (VTA's test: 256, 256, 4 x BLOCK_OUT).
    pub batch: u32,
    pub channels: u32,
    pub block: u32,
}

impl RtlBench {
    /// VTA's sizes for `cfg`: batch and channels 256, blocks of `4 * BLOCK_OUT` (64 on the
    /// default config), enlarged to a multiple of the tile.
    pub fn for_config(cfg: &HwConfig) -> RtlBench {
        let tile = cfg.batch().max(cfg.block_in()).max(cfg.block_out());
        let block = (4 * cfg.block_out()).next_multiple_of(tile);
        RtlBench {
            timing: MemTiming::default(),
            cache_dir: None,
            batch: 256u32.next_multiple_of(block),
            channels: 256u32.next_multiple_of(2 * block),
            block,
        }
    }
}

/// One blocked-GEMM run.
#[derive(Clone, Debug)]
pub struct GemmRun {
    /// Virtual threads.
    pub threads: u32,
    /// Cycles from start to DONE.
    pub cycles: u64,
    /// Cycles simulated for the run (with the host's register accesses).
    pub host_cycles: u64,
    pub counters: Counters,
    /// Instructions of the program.
    pub insns: u32,
    /// Host CPU time of the run (the simulating thread's).
    pub cpu: Duration,
    /// Cycles the memory needs at least for the program's traffic (loads, stores and the
    /// instruction stream at the memory's bandwidth): the roofline's memory bound.
    pub memory_bound: u64,
}

impl GemmRun {
    /// GEMM micro-ops per cycle.
    pub fn utilization(&self) -> f64 {
        self.counters.gemm_uops as f64 / self.cycles.max(1) as f64
    }
    /// The best utilization the memory allows: GEMM micro-ops over the larger of the
    /// compute bound (one micro-op per cycle) and the memory bound.
    pub fn roofline(&self) -> f64 {
        let c = self.counters.gemm_uops;
        c as f64 / c.max(self.memory_bound).max(1) as f64
    }
    /// Simulated cycles per second of host CPU time.
    pub fn cycles_per_second(&self) -> f64 {
        self.host_cycles as f64 / self.cpu.as_secs_f64().max(1e-9)
    }
}

/// The figures of [`rtl`].
#[derive(Clone, Debug)]
pub struct RtlFigures {
    pub config: String,
    pub origin: ModelOrigin,
    pub bench: RtlBench,
    pub bus_bytes: u32,
    pub runs: Vec<GemmRun>,
}

impl RtlFigures {
    /// Simulated cycles per second over all runs.
    pub fn cycles_per_second(&self) -> f64 {
        let c: u64 = self.runs.iter().map(|r| r.host_cycles).sum();
        let t: f64 = self.runs.iter().map(|r| r.cpu.as_secs_f64()).sum();
        c as f64 / t.max(1e-9)
    }
}

/// Cycles the memory needs for the traffic of a run: bytes over bytes per cycle.
pub fn memory_cycles(c: &Counters, insns: u32, bus_bytes: u32, timing: &MemTiming) -> u64 {
    let bytes = c.inp_load_bytes
        + c.wgt_load_bytes
        + c.acc_load_bytes
        + c.uop_load_bytes
        + c.out_store_bytes
        + (isa::INSN_BYTES * insns as usize) as u64;
    bytes.div_ceil(bus_bytes as u64) * timing.beat_interval as u64
}

impl fmt::Display for RtlFigures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.bench;
        let t = &b.timing;
        writeln!(
            f,
            "RTL simulation (Verilator), config {} (one core); model {}",
            self.config, self.origin
        )?;
        writeln!(
            f,
            "memory: {}-cycle read latency, {}-cycle write latency, {:.1} bytes/cycle ({}-byte bus, a beat every {} cycle{})",
            t.read_latency,
            t.write_latency,
            self.bus_bytes as f64 / t.beat_interval as f64,
            self.bus_bytes,
            t.beat_interval,
            if t.beat_interval == 1 { "" } else { "s" }
        )?;
        writeln!(
            f,
            "blocked GEMM {}x{}x{} in blocks of {} (VTA's blocked_gemm_test):",
            b.batch, b.channels, b.channels, b.block
        )?;
        for r in &self.runs {
            writeln!(
                f,
                "  {} virtual thread{}: {:>8} cycles, {:>7} GEMM micro-ops: GEMM-core utilization {:5.1}% (roofline {:5.1}%); {:.2} M cycles/s ({} cycles in {:.3} s)",
                r.threads,
                if r.threads == 1 { " " } else { "s" },
                r.cycles,
                r.counters.gemm_uops,
                100.0 * r.utilization(),
                100.0 * r.roofline(),
                r.cycles_per_second() / 1e6,
                r.host_cycles,
                r.cpu.as_secs_f64()
            )?;
        }
        write!(
            f,
            "simulation speed: {:.2} M cycles/s (simulated cycles per second of the simulating thread's CPU time)",
            self.cycles_per_second() / 1e6
        )
    }
}

/// Checks the blocked GEMM's sizes against `cfg`'s tile.
fn check_sizes(cfg: &HwConfig, b: &RtlBench) -> Result<(), RtlError> {
    let tile = cfg.batch().max(cfg.block_in()).max(cfg.block_out());
    if b.block == 0
        || !b.block.is_multiple_of(tile)
        || !b.batch.is_multiple_of(b.block)
        || !b.channels.is_multiple_of(2 * b.block)
    {
        return Err(RtlError::Program(format!(
            "blocked GEMM: the block ({}) must be a multiple of the GEMM tile ({tile}) and \
             divide the batch ({}), and the channels ({}) must be a multiple of twice the \
             block (one block per virtual thread)",
            b.block, b.batch, b.channels
        )));
    }
    Ok(())
}

/// The blocked GEMM with two virtual threads on operands drawn from `seed`.
fn gemm_program(cfg: &HwConfig, b: &RtlBench, seed: u64) -> Result<isa::Program, RtlError> {
    let ops = GemmOperands::random(cfg, b.batch, b.channels, seed);
    blocked_gemm(cfg, b.batch, b.channels, b.block, true, 2, ops)
        .map_err(|e| RtlError::Program(e.to_string()))
}

/// The figures of [`rtl_cores`]: the blocked GEMM (two virtual threads) on one core of
/// the multi-core design alone, then on every core at once.
#[derive(Clone, Debug)]
pub struct CoresFigures {
    pub config: String,
    pub origin: ModelOrigin,
    pub cores: usize,
    pub bench: RtlBench,
    pub bus_bytes: u32,
    /// GEMM micro-ops of one core's program.
    pub gemm_uops: u64,
    /// Core 0's cycles when it runs alone.
    pub alone: u64,
    /// Each core's cycles when they all run at once.
    pub together: Vec<u64>,
    /// Cycles from the first start to the last DONE when they all run at once.
    pub makespan: u64,
}

impl CoresFigures {
    /// GEMM micro-ops per cycle of all cores at once over one core alone.
    pub fn speedup(&self) -> f64 {
        (self.cores as f64 * self.alone as f64) / self.makespan.max(1) as f64
    }
}

impl fmt::Display for CoresFigures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (b, t) = (&self.bench, &self.bench.timing);
        writeln!(
            f,
            "RTL simulation (Verilator), {} cores of {} on one memory through the AXI \
             interconnect; model {}",
            self.cores, self.config, self.origin
        )?;
        writeln!(
            f,
            "memory: {}-cycle read latency, {}-cycle write latency, {:.1} bytes/cycle",
            t.read_latency,
            t.write_latency,
            self.bus_bytes as f64 / t.beat_interval as f64
        )?;
        writeln!(
            f,
            "blocked GEMM {}x{}x{} in blocks of {}, 2 virtual threads, {} GEMM micro-ops per core:",
            b.batch, b.channels, b.channels, b.block, self.gemm_uops
        )?;
        writeln!(
            f,
            "  one core alone:  {:>8} cycles, {:.3} GEMM micro-ops/cycle",
            self.alone,
            self.gemm_uops as f64 / self.alone.max(1) as f64
        )?;
        for (k, c) in self.together.iter().enumerate() {
            writeln!(f, "  core {k} with the others: {c:>8} cycles")?;
        }
        write!(
            f,
            "  all {} cores at once: {} cycles, {:.3} GEMM micro-ops/cycle in all: {:.2}x one core",
            self.cores,
            self.makespan,
            (self.cores as u64 * self.gemm_uops) as f64 / self.makespan.max(1) as f64,
            self.speedup()
        )
    }
}

/// Runs the blocked GEMM on core 0 of a `cores`-core simulation of `cfg` alone, then on
/// every core at once (each on its own operands in its own region of the memory).
pub fn rtl_cores(
    cfg: &HwConfig,
    bench: &RtlBench,
    cores: u32,
    progress: &mut dyn FnMut(&str),
) -> Result<CoresFigures, RtlError> {
    check_sizes(cfg, bench)?;
    let opts = RtlOptions {
        cache_dir: bench.cache_dir.clone(),
        timing: bench.timing,
        ..RtlOptions::default()
    };
    let mut sim = MultiCoreSim::new(cfg, cores, &opts, progress)?;
    let region = opts.mem_size / u64::from(cores);
    let mut jobs = vec![];
    for k in 0..u64::from(cores) {
        let p = gemm_program(cfg, bench, 7 + k)?;
        jobs.push(sim.load_program(&p, opts.mem_base + k * region)?);
    }
    let limits = RunLimits::default();
    let alone = sim.run_together(&jobs[..1], &limits)?.remove(0)?;
    let t0 = sim.cycles();
    let together = sim
        .run_together(&jobs, &limits)?
        .into_iter()
        .map(|r| r.map(|r| r.cycles))
        .collect::<Result<Vec<u64>, RtlError>>()?;
    Ok(CoresFigures {
        config: cfg.config_string(),
        origin: sim.origin().clone(),
        cores: cores as usize,
        bench: bench.clone(),
        bus_bytes: cfg.axi_data_width / 8,
        gemm_uops: alone.counters.gemm_uops,
        alone: alone.cycles,
        together,
        makespan: sim.cycles() - t0,
    })
}

/// Runs the blocked GEMM with one and two virtual threads on a fresh simulator of `cfg`.
pub fn rtl(
    cfg: &HwConfig,
    bench: &RtlBench,
    progress: &mut dyn FnMut(&str),
) -> Result<RtlFigures, RtlError> {
    check_sizes(cfg, bench)?;
    let opts = RtlOptions {
        cache_dir: bench.cache_dir.clone(),
        timing: bench.timing,
        ..RtlOptions::default()
    };
    let mut sim = RtlSim::new(cfg, &opts, progress)?;
    let mut runs = vec![];
    for threads in [1, 2] {
        let ops = GemmOperands::random(cfg, bench.batch, bench.channels, 7);
        let p = blocked_gemm(
            cfg,
            bench.batch,
            bench.channels,
            bench.block,
            true,
            threads,
            ops,
        )
        .map_err(|e| RtlError::Program(e.to_string()))?;
        let (addr, n) = sim.load_program(&p)?;
        let t = thread_cpu_time();
        let r = sim.run(addr, n, &RunLimits::default())?;
        let cpu = thread_cpu_time().saturating_sub(t);
        runs.push(GemmRun {
            threads,
            cycles: r.cycles,
            host_cycles: r.host_cycles,
            memory_bound: memory_cycles(&r.counters, n, cfg.axi_data_width / 8, &bench.timing),
            counters: r.counters,
            insns: n,
            cpu,
        });
    }
    Ok(RtlFigures {
        config: cfg.config_string(),
        origin: sim.origin().clone(),
        bench: bench.clone(),
        bus_bytes: cfg.axi_data_width / 8,
        runs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two cores of the small config on one memory: each core's run is no faster with the
    /// other busy, both together finish sooner than one after the other, and the memory's
    /// bandwidth bounds them: the pair never does more than twice one core's work per cycle.
    #[test]
    fn two_cores_share_the_memory_and_beat_one_after_the_other() {
        let cfg = HwConfig::preset("small").unwrap();
        let bench = RtlBench {
            batch: 32,
            channels: 32,
            block: 16,
            ..RtlBench::for_config(&cfg)
        };
        let f = rtl_cores(&cfg, &bench, 2, &mut |_| {}).unwrap();
        assert_eq!(f.together.len(), 2);
        assert!(f.together.iter().all(|&c| c >= f.alone), "{f}");
        assert!(f.makespan < 2 * f.alone, "{f}");
        assert!(f.speedup() > 1.0 && f.speedup() <= 2.0, "{f}");
        let text = f.to_string();
        assert!(text.contains("all 2 cores at once"), "{text}");
    }
}
