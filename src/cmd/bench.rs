//! `vta bench`: throughput figures of the simulators (benchmarks, never timed tests).

use anyhow::Result;
use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub enum BenchCmd {
    /// Functional simulator: simulated GEMM MACs per second and ALU micro-ops per second
    Fsim(FsimArgs),
    /// Cycle-accurate RTL simulator: simulated cycles per second and the GEMM core's
    /// utilization on VTA's blocked GEMM with one and two virtual threads
    Rtl(RtlBenchArgs),
}

#[derive(Args)]
pub struct RtlBenchArgs {
    /// Config (JSON file or preset) to measure
    #[arg(long, value_name = "FILE|PRESET")]
    config: Option<String>,
    #[command(flatten)]
    rtl: super::sim::RtlArgs,
    /// Blocked GEMM: rows of the input (a multiple of the block) [default: 256]
    #[arg(long, value_name = "N")]
    batch: Option<u32>,
    /// Blocked GEMM: input and output channels (a multiple of twice the block) [default: 256]
    #[arg(long, value_name = "N")]
    channels: Option<u32>,
    /// Blocked GEMM: block size (a multiple of the GEMM tile) [default: 4 x BLOCK_OUT]
    #[arg(long, value_name = "N")]
    block: Option<u32>,
    /// Print the figures as JSON
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct FsimArgs {
    /// Config (JSON file or preset) to measure
    #[arg(long, value_name = "FILE|PRESET")]
    config: Option<String>,
    /// GEMM instructions to run, each over a full micro-op buffer
    #[arg(long, default_value_t = vta_sim::bench::BenchSize::default().gemm_insns)]
    gemm_insns: u32,
    /// ALU instructions to run, each over a full micro-op buffer
    #[arg(long, default_value_t = vta_sim::bench::BenchSize::default().alu_insns)]
    alu_insns: u32,
    /// Runs of each program; the fastest (in CPU time of the simulating thread) counts
    #[arg(long, value_name = "N", default_value_t = vta_sim::bench::BenchSize::default().repeats)]
    repeat: u32,
    /// Print the figures as JSON
    #[arg(long)]
    json: bool,
}

pub fn run(c: BenchCmd) -> Result<String> {
    match c {
        BenchCmd::Fsim(a) => {
            let cfg = super::load_config(a.config.as_deref())?;
            let size = vta_sim::bench::BenchSize {
                gemm_insns: a.gemm_insns,
                alu_insns: a.alu_insns,
                repeats: a.repeat,
            };
            let f = vta_sim::bench::fsim(&cfg, size)?;
            if a.json {
                return Ok(super::json::text(&serde_json::json!({
                    "bench": "fsim",
                    "config": f.config,
                    "gemm_kernel": f.gemm_kernel,
                    "repeats": f.repeats,
                    "gemm": {
                        "seconds": f.gemm.seconds,
                        "wall_seconds": f.gemm.wall_seconds,
                        "counters": super::json::counters(f.gemm.counters.iter()),
                        "gmacs_per_second": f.gmacs_per_second(),
                        "uops_per_second": f.gemm_uops_per_second(),
                    },
                    "alu": {
                        "seconds": f.alu.seconds,
                        "wall_seconds": f.alu.wall_seconds,
                        "counters": super::json::counters(f.alu.counters.iter()),
                        "uops_per_second": f.alu_uops_per_second(),
                        "lanes_per_second": f.alu_lanes_per_second(),
                    },
                })));
            }
            Ok(format!("{f}\n"))
        }
        BenchCmd::Rtl(a) => {
            if a.rtl.hang_cycles.is_some() {
                anyhow::bail!("--hang-cycles does not apply to `vta bench rtl` (its runs are bounded by the benchmark's size)");
            }
            if a.rtl.mem_stall_percent.is_some() {
                anyhow::bail!("--mem-stall-percent does not apply to `vta bench rtl` (it measures the memory timing it is given, without injected faults)");
            }
            let cfg = super::load_config(a.config.as_deref())?;
            let mut b = vta_sim::bench::rtl::RtlBench::for_config(&cfg);
            b.timing = a.rtl.timing(&cfg)?;
            b.batch = a.batch.unwrap_or(b.batch);
            b.channels = a.channels.unwrap_or(b.channels);
            b.block = a.block.unwrap_or(b.block);
            let start = std::time::Instant::now();
            let mut building = false;
            let figures = vta_sim::bench::rtl::rtl(&cfg, &b, &mut |stage| {
                if stage.starts_with("verilating") {
                    building = true;
                    eprintln!(
                        "rtl: building the Verilator model of {} (first use)",
                        cfg.config_string()
                    );
                }
                if building {
                    eprintln!("rtl:   {stage} (+{:.1} s)", start.elapsed().as_secs_f64());
                }
            })?;
            if a.json {
                let runs: Vec<_> = figures
                    .runs
                    .iter()
                    .map(|r| {
                        serde_json::json!({
                            "virtual_threads": r.threads,
                            "cycles": r.cycles,
                            "host_cycles": r.host_cycles,
                            "instructions": r.insns,
                            "cpu_seconds": r.cpu.as_secs_f64(),
                            "memory_bound_cycles": r.memory_bound,
                            "gemm_utilization": r.utilization(),
                            "counters": super::json::counters(r.counters.iter()),
                        })
                    })
                    .collect();
                return Ok(super::json::text(&serde_json::json!({
                    "bench": "rtl",
                    "config": figures.config,
                    "bus_bytes": figures.bus_bytes,
                    "cycles_per_second": figures.cycles_per_second(),
                    "runs": runs,
                })));
            }
            Ok(format!("{figures}\n"))
        }
    }
}
