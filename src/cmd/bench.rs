//! `vta bench`: throughput figures of the simulators (benchmarks, never timed tests).

use anyhow::Result;
use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub enum BenchCmd {
    /// Functional simulator: simulated GEMM MACs per second and ALU micro-ops per second
    Fsim(FsimArgs),
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
}

pub fn run(c: BenchCmd) -> Result<String> {
    match c {
        BenchCmd::Fsim(a) => {
            let cfg = super::load_config(a.config.as_deref())?;
            let size = vta_sim::bench::BenchSize {
                gemm_insns: a.gemm_insns,
                alu_insns: a.alu_insns,
            };
            Ok(format!("{}\n", vta_sim::bench::fsim(&cfg, size)?))
        }
    }
}
