//! `vta bench`: throughput figures of the simulators, of calibration and of whole `vta run`
//! processes (benchmarks, never timed tests), and the quantizer's accuracy per precision.

mod devtime;
mod precision;
mod resnet;
mod serve;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub enum BenchCmd {
    /// Functional simulator: simulated GEMM MACs per second and ALU micro-ops per second
    Fsim(FsimArgs),
    /// Cycle-accurate RTL simulator: simulated cycles per second and the GEMM core's
    /// utilization on VTA's blocked GEMM with one and two virtual threads, or on ResNet-18
    /// (--network resnet18)
    Rtl(RtlBenchArgs),
    /// Calibration: CPU time per sample of ResNet-18's float network (`vta compile
    /// --calibrate` runs it once per sample)
    Calibration(CalibrationArgs),
    /// Whole `vta run` processes (start, model load, inference, exit) of a compiled model;
    /// without one, of ResNet-18 compiled now into a temporary directory
    Run(RunBenchArgs),
    /// Accuracy per precision: the digits CNN quantized to each config's widths (e.g.
    /// i8w4, i4w4) with each weight clipping and rounding, run on its test digits, checked
    /// bit-exactly
    Precision(precision::PrecisionArgs),
    /// The remote runner under load: many clients at once against a `vta serve` of fsim on
    /// loopback, every run checked byte for byte against a local one; throughput, run time,
    /// the wait for a session, peak memory
    Serve(serve::ServeBenchArgs),
    /// Scheduling policies of the pool executor on a compiled model: throughput, latency and
    /// per-worker utilization of each policy (or --schedule's) over --requests samples, with
    /// the outputs checked bit-identical to the serial run's; with --time device, simulated
    /// in device time (launch cycles at the config's clock, CPU steps from a profile)
    Schedule(ScheduleBenchArgs),
}

#[derive(Args)]
pub struct ScheduleBenchArgs {
    /// Compiled model to run (`vta compile`, with --split-branches for branch parallelism)
    #[arg(value_name = "MODEL.vtab")]
    model: PathBuf,
    /// The model's input, as for `vta run` (repeat for each input); with --time device,
    /// needed only to measure the CPU steps' times (without --cpu-profile) and to check each
    /// policy's outputs
    #[arg(long = "input", short = 'i', value_name = "X.npy")]
    inputs: Vec<String>,
    #[command(flatten)]
    pool: super::pool::PoolArgs,
    /// host: run each policy on the pool and time it on this machine's clock; device: simulate
    /// each policy in device time (launches at the config's clock, CPU steps from a profile),
    /// deterministic and independent of this host's cores, at 1, 2, 4 and 8 in flight;
    /// per-worker utilization, --trace and auto's choice are then at --in-flight [default: 8]
    #[arg(long, value_name = "WHAT", default_value = "host", value_parser = ["host", "device"])]
    time: String,
    /// --time device: where each launch's cycles come from
    #[arg(long, value_enum, value_name = "FROM", default_value = "model")]
    launch_cycles: devtime::LaunchCycles,
    /// --time device: each CPU step's time from this JSON file ({"format":
    /// "vta-cpu-profile", "steps": [{"step": N, "us": T}, ...]}, as --write-cpu-profile
    /// writes) [default: measured on this host, the fastest of 3 serial runs of --input]
    #[arg(long, value_name = "FILE")]
    cpu_profile: Option<PathBuf>,
    /// --time device: multiply every CPU step's time by F (e.g. 3 for a board's CPU three
    /// times slower than this host's)
    #[arg(long, value_name = "F", default_value_t = 1.0)]
    cpu_scale: f64,
    /// --time device: write the CPU steps' times measured on this host to FILE (a CPU
    /// profile for --cpu-profile)
    #[arg(long, value_name = "FILE", conflicts_with = "cpu_profile")]
    write_cpu_profile: Option<PathBuf>,
    /// --time device: the host's time to start a launch and collect it, added to each
    /// launch, in microseconds
    #[arg(long, value_name = "US", default_value_t = 0.0)]
    launch_overhead_us: f64,
    /// Backend of the pool's devices without --devices
    #[arg(long, default_value = "fsim", value_name = "BACKEND", help = super::sim::BACKEND_HELP)]
    backend: super::sim::Backend,
    #[command(flatten)]
    rtl: super::sim::RtlArgs,
    /// Requests per policy (the input, repeated) [default: 8; 64 simulated with --time
    /// device]
    #[arg(long, value_name = "N")]
    requests: Option<usize>,
    /// Print the figures as JSON
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct CalibrationArgs {
    /// Input height and width of ResNet-18
    #[arg(long, value_name = "N", default_value_t = 224)]
    size: usize,
    /// Samples to calibrate on, one at a time (pseudo-random inputs)
    #[arg(long, value_name = "N", default_value_t = 3)]
    samples: u32,
    /// Print the figures as JSON
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct RunBenchArgs {
    /// Compiled model to run [default: ResNet-18 (`vta zoo resnet18`) compiled for --config,
    /// calibrated on its sample input, which is then the input]
    #[arg(value_name = "MODEL.vtab", requires = "inputs")]
    model: Option<PathBuf>,
    /// The model's input, as for `vta run` (repeat for each input)
    #[arg(long = "input", short = 'i', value_name = "X.npy", requires = "model")]
    inputs: Vec<String>,
    /// Config of the ResNet-18 compiled when no model is given
    #[arg(long, value_name = "FILE|PRESET", conflicts_with = "model")]
    config: Option<String>,
    /// Input height and width of the ResNet-18 compiled when no model is given
    #[arg(
        long,
        value_name = "N",
        default_value_t = 224,
        conflicts_with = "model"
    )]
    size: usize,
    /// Processes to run, one after another
    #[arg(long, value_name = "N", default_value_t = 5)]
    repeat: u32,
    /// Print the figures as JSON
    #[arg(long)]
    json: bool,
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
    /// Run this network instead of the blocked GEMM (compiled for --config, one inference)
    #[arg(long, value_name = "NAME", value_parser = ["resnet18"], conflicts_with_all = ["batch", "channels", "block"])]
    network: Option<String>,
    /// --network: input height and width
    #[arg(long, value_name = "N", default_value_t = 224, requires = "network")]
    size: usize,
    /// --network on a config with narrower weights: keep the first and last layers' weights
    /// at 8 bits (they then run bit-sliced, one GEMM pass per weight digit) or quantize every
    /// layer to the config's widths (`false`)
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set, requires = "network")]
    keep_ends_8bit: bool,
    /// Simulate the design with N cores on one memory (2 to 8): the blocked GEMM on one core
    /// alone, then on every core at once, and the throughput of all over one
    #[arg(long, value_name = "N", conflicts_with = "network")]
    cores: Option<u32>,
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
        BenchCmd::Precision(a) => precision::run(a),
        BenchCmd::Serve(a) => serve::run(a),
        BenchCmd::Schedule(a) => schedule(a),
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
            if a.network.is_some() {
                let mut dev = a.rtl.device(&cfg, false)?;
                let f = resnet::rtl_network(&cfg, a.size, a.keep_ends_8bit, &mut dev)?;
                if a.json {
                    return Ok(super::json::text(&serde_json::json!({
                        "bench": "rtl",
                        "network": "resnet18",
                        "size": f.size,
                        "config": f.config,
                        "accelerator_steps": f.accel_steps,
                        "cpu_steps": f.cpu_steps,
                        "cycles": f.cycles,
                        "host_cycles": f.host_cycles,
                        "cpu_seconds": f.cpu,
                        "wall_seconds": f.wall,
                        "cycles_per_second": f.cycles_per_second(),
                    })));
                }
                return Ok(format!("{f}\n"));
            }
            let mut b = vta_sim::bench::rtl::RtlBench::for_config(&cfg);
            b.timing = a.rtl.timing(&cfg)?;
            b.batch = a.batch.unwrap_or(b.batch);
            b.channels = a.channels.unwrap_or(b.channels);
            b.block = a.block.unwrap_or(b.block);
            if let Some(cores) = a.cores {
                let f = super::sim::open_cores_with_progress(&cfg, cores, |progress| {
                    vta_sim::bench::rtl::rtl_cores(&cfg, &b, cores, progress)
                })?;
                if a.json {
                    return Ok(super::json::text(&serde_json::json!({
                        "bench": "rtl",
                        "config": f.config,
                        "cores": f.cores,
                        "gemm_uops_per_core": f.gemm_uops,
                        "alone_cycles": f.alone,
                        "together_cycles": f.together,
                        "makespan_cycles": f.makespan,
                        "speedup": f.speedup(),
                    })));
                }
                return Ok(format!("{f}\n"));
            }
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
        BenchCmd::Calibration(a) => {
            let f = resnet::calibration(a.size, a.samples)?;
            if a.json {
                let (min, median) = f.cpu();
                return Ok(super::json::text(&serde_json::json!({
                    "bench": "calibration",
                    "network": "resnet18",
                    "size": f.size,
                    "samples": f.samples.iter().map(|(cpu, wall)| serde_json::json!({
                        "cpu_seconds": cpu,
                        "wall_seconds": wall,
                    })).collect::<Vec<_>>(),
                    "cpu_seconds_fastest": min,
                    "cpu_seconds_median": median,
                })));
            }
            Ok(format!("{f}\n"))
        }
        BenchCmd::Run(a) => {
            let scratch;
            let (model, inputs) = match a.model {
                Some(m) => (m, a.inputs),
                None => {
                    let cfg = super::load_config(a.config.as_deref())?;
                    scratch = resnet::ScratchDir::new("run")?;
                    let (m, x) = resnet::write_resnet(scratch.path(), &cfg, a.size)?;
                    (m, vec![x.display().to_string()])
                }
            };
            let f = resnet::run_process(&model, &inputs, a.repeat)?;
            if a.json {
                return Ok(super::json::text(&serde_json::json!({
                    "bench": "run",
                    "command": f.args,
                    "runs": f.runs.iter().map(|(wall, cpu)| serde_json::json!({
                        "wall_seconds": wall,
                        "cpu_seconds": cpu,
                    })).collect::<Vec<_>>(),
                })));
            }
            Ok(format!("{f}\n"))
        }
    }
}

/// `vta bench schedule`: each policy on the same pool and requests.
fn schedule(a: ScheduleBenchArgs) -> Result<String> {
    use std::fmt::Write as _;
    use std::sync::Arc;
    use std::time::Instant;
    use vta_runtime::exec::Policy;

    let file = a.model.display().to_string();
    let bytes = super::read_input(&a.model)?;
    let model = Arc::new(vta_runtime::Model::from_bytes(&bytes, &file)?);
    let device = a.time == "device";
    if !device {
        let only_device = [
            ("--cpu-profile", a.cpu_profile.is_some()),
            ("--write-cpu-profile", a.write_cpu_profile.is_some()),
            ("--cpu-scale", a.cpu_scale != 1.0),
            ("--launch-overhead-us", a.launch_overhead_us != 0.0),
            (
                "--launch-cycles",
                a.launch_cycles != devtime::LaunchCycles::Model,
            ),
        ];
        if let Some((flag, _)) = only_device.iter().find(|(_, given)| *given) {
            anyhow::bail!("{flag} applies to device time: add --time device");
        }
        if a.inputs.is_empty() {
            anyhow::bail!("`vta bench schedule` runs the model: give its input with --input X.npy (or simulate with --time device --cpu-profile FILE)");
        }
    }
    if device && a.inputs.is_empty() {
        return devtime::run(&a, model, None, &file);
    }
    let stacked = super::run::read_inputs(&model, &a.inputs)?;
    // Stacked samples: the first one.
    let inputs = model
        .split_samples(stacked)
        .map_err(|e| anyhow::anyhow!("{file}: {e}"))?
        .into_iter()
        .next()
        .ok_or_else(|| anyhow::anyhow!("{file}: no input sample"))?;
    if device {
        return devtime::run(&a, model, Some(inputs), &file);
    }
    let requests = a.requests.unwrap_or(8);
    if requests == 0 {
        anyhow::bail!("--requests must be at least 1");
    }
    let runs = vec![inputs.clone(); requests];
    let want = super::pool::serial_outputs(&model, &runs[..1])?.remove(0);
    let policies: Vec<Policy> = match a.pool.schedule {
        Some(p) => vec![p],
        None => Policy::ALL.to_vec(),
    };
    let mut text = String::new();
    let mut rows = Vec::new();
    let mut serial_thr: Option<f64> = None;
    for p in policies {
        // A serial warm-up run measures every task for the cost model, then the policy.
        let ex = super::pool::executor(&model, &a.pool, &a.backend, &a.rtl, Policy::Serial)?;
        ex.run(&inputs)?;
        if p == Policy::Auto {
            ex.choose(&inputs, requests.clamp(2, 4))?;
        } else {
            ex.set_policy(p)?;
        }
        ex.take_timeline();
        let t = Instant::now();
        let done = ex.run_many(&runs)?;
        let wall = t.elapsed();
        let exact = done.iter().all(|d| d.outputs == want);
        let tl = ex.take_timeline();
        if let Some(path) = &a.pool.trace {
            std::fs::write(path, tl.chrome_json())
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        }
        let mut lat: Vec<_> = done.iter().map(|d| d.latency).collect();
        let (t2, mut j) = super::pool::describe(&tl, wall, &mut lat, runs.len());
        let thr = j["throughput_per_s"].as_f64().unwrap_or(0.0);
        let base = *serial_thr.get_or_insert(thr);
        let chosen = ex.schedule().policy;
        writeln!(
            text,
            "{p}{}: {:.2}x serial{}",
            if p == Policy::Auto {
                format!(" (chose {chosen})")
            } else {
                String::new()
            },
            thr / base,
            if exact {
                "; outputs bit-identical to serial"
            } else {
                "; OUTPUTS DIFFER FROM SERIAL"
            }
        )?;
        text.push_str(&t2);
        j["policy"] = serde_json::json!(p.name());
        j["chosen"] = serde_json::json!(chosen.name());
        j["vs_serial"] = serde_json::json!(thr / base);
        j["bit_identical"] = serde_json::json!(exact);
        rows.push(j);
        if !exact {
            anyhow::bail!("{file}: {p}: the outputs differ from the serial run's\n{text}");
        }
    }
    let head = format!(
        "{file}: {} requests per policy, devices {}, {} CPU thread(s), {} in flight\n",
        requests,
        a.pool.devices.as_deref().unwrap_or("(--backend)"),
        a.pool.cpu_threads.unwrap_or(2),
        a.pool.in_flight.unwrap_or(1)
    );
    if a.json {
        return Ok(super::json::text(&serde_json::json!({
            "bench": "schedule",
            "model": file,
            "requests": requests,
            "policies": rows,
        })));
    }
    Ok(head + &text)
}
