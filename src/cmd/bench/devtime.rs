//! `vta bench schedule --time device`: the policies compared in device time, by the
//! discrete-event simulator of `vta_runtime::exec::sim`, from each launch's cycles (the
//! analytic cycle model, or the RTL simulator) at the config's clock and each CPU step's
//! time from a CPU profile (a file, or measured here once), so the figures do not depend on
//! how many cores this host has or what else runs on it. The profile's file format is
//! `vta_runtime::exec::profile`'s.

use std::fmt::Write as _;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use serde_json::json;
use vta_runtime::exec::{self, profile, sim, Policy, Pool};
use vta_runtime::graph::{TaskGraph, TaskKind};
use vta_runtime::model::Model;
use vta_runtime::Tensor;

use super::ScheduleBenchArgs;

/// Numbers in flight the throughput is simulated at.
const IN_FLIGHT: [usize; 4] = [1, 2, 4, 8];
/// Serial runs the host profile takes the fastest of, per CPU step.
const PROFILE_RUNS: usize = 3;

/// Where launch cycles come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LaunchCycles {
    /// The analytic cycle model of `vta dse` (milliseconds to compute)
    Model,
    /// The accelerator's Verilog in Verilator (exact; builds the config's model on first use)
    Rtl,
}

impl LaunchCycles {
    fn name(self) -> &'static str {
        match self {
            LaunchCycles::Model => "cycle-model",
            LaunchCycles::Rtl => "RTL",
        }
    }
}

/// Runs the model serially on the pool's first device and one CPU worker, [`PROFILE_RUNS`]
/// times: per task the fastest run (seconds); also checks the outputs against the serial
/// run's.
fn measure_host(
    model: &Arc<Model>,
    a: &ScheduleBenchArgs,
    inputs: &[Tensor],
    want: &[Tensor],
) -> Result<Vec<f64>> {
    let ex = crate::cmd::pool::executor(model, &a.pool, &a.backend, &a.rtl, Policy::Serial)?;
    Ok(profile::measure(&ex, inputs, want, PROFILE_RUNS)?)
}

/// Runs one request under every policy on the real pool and checks its outputs against
/// the serial run's: the schedules the simulation replays give the right answer.
fn check_policies(
    model: &Arc<Model>,
    a: &ScheduleBenchArgs,
    inputs: &[Tensor],
    want: &[Tensor],
) -> Result<()> {
    let ex = crate::cmd::pool::executor(model, &a.pool, &a.backend, &a.rtl, Policy::Serial)?;
    for p in Policy::ALL.into_iter().filter(|&p| p != Policy::Auto) {
        ex.set_policy(p)?;
        if ex.run(inputs)?.outputs != want {
            bail!("{p}: the outputs differ from the serial run's");
        }
    }
    Ok(())
}

/// Per launch, seconds at the config's clock.
fn launch_seconds(model: &Model, a: &ScheduleBenchArgs) -> Result<Vec<f64>> {
    let mem = a.rtl.timing(&model.config)?;
    let cycles = match a.launch_cycles {
        LaunchCycles::Model => dse::measure::modelled(model, &mem)?,
        LaunchCycles::Rtl => {
            dse::measure::simulated(model, &mem, &mut |stage| eprintln!("rtl: {stage}"))?
        }
    };
    let hz = f64::from(model.config.clock_mhz) * 1e6;
    if hz <= 0.0 {
        bail!(
            "the config's CLOCK_MHZ is 0: device time needs a clock (set CLOCK_MHZ in the config)"
        );
    }
    Ok(cycles.iter().map(|&c| c as f64 / hz).collect())
}

/// `vta bench schedule --time device`.
pub fn run(
    a: &ScheduleBenchArgs,
    model: Arc<Model>,
    inputs: Option<Vec<Tensor>>,
    file: &str,
) -> Result<String> {
    if !(a.cpu_scale.is_finite() && a.cpu_scale > 0.0) {
        bail!("--cpu-scale must be a number above 0 (e.g. 3 for a CPU three times slower than this host's)");
    }
    if !(a.launch_overhead_us.is_finite() && a.launch_overhead_us >= 0.0) {
        bail!("--launch-overhead-us must be a number of microseconds >= 0");
    }
    let requests = a.requests.unwrap_or(64);
    if requests == 0 {
        bail!("--requests must be at least 1");
    }
    let graph = TaskGraph::of_model(&model);
    let devices = match &a.pool.devices {
        Some(s) => crate::cmd::pool::parse_devices(s)
            .map_err(|e| anyhow!(e))?
            .len(),
        None => 1,
    };
    let cpus = a.pool.cpu_threads.unwrap_or(2);
    let at = a.pool.in_flight.unwrap_or(8);
    if at == 0 {
        bail!("--in-flight must be at least 1");
    }
    let want = match &inputs {
        Some(x) => {
            Some(crate::cmd::pool::serial_outputs(&model, std::slice::from_ref(x))?.remove(0))
        }
        None => None,
    };
    let launch = launch_seconds(&model, a)?;
    let (cpu, cpu_source): (Vec<Option<f64>>, String) = match &a.cpu_profile {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read the CPU profile {}", p.display()))?;
            (
                profile::read(&text, &p.display().to_string(), &model, &graph)
                    .map_err(|e| anyhow!(e))?,
                format!("profile {}", p.display()),
            )
        }
        None => {
            let (Some(x), Some(w)) = (&inputs, &want) else {
                bail!("--time device needs each CPU step's time: give --cpu-profile FILE, or --input X.npy to measure them on this host");
            };
            let secs = measure_host(&model, a, x, w)?;
            if let Some(out) = &a.write_cpu_profile {
                let doc = profile::to_json(
                    &model,
                    &graph,
                    &secs,
                    file,
                    &format!(
                        "this host (vta bench schedule --write-cpu-profile), the fastest of \
                         {PROFILE_RUNS} serial runs per step"
                    ),
                );
                std::fs::write(out, crate::cmd::json::text(&doc))
                    .with_context(|| format!("cannot write {}", out.display()))?;
            }
            let cpu = graph
                .tasks
                .iter()
                .zip(&secs)
                .map(|(t, s)| (!t.is_launch()).then_some(*s))
                .collect();
            (
                cpu,
                format!("this host's, fastest of {PROFILE_RUNS} serial runs"),
            )
        }
    };
    let overhead = a.launch_overhead_us * 1e-6;
    let cost: Vec<f64> = graph
        .tasks
        .iter()
        .zip(&cpu)
        .map(|(t, c)| match (t.kind, c) {
            (TaskKind::Launch(l), _) => launch[l] + overhead,
            (TaskKind::Cpu(_), Some(s)) => s * a.cpu_scale,
            (TaskKind::Cpu(_), None) => 0.0,
        })
        .collect();
    let checked = match (&inputs, &want) {
        (Some(x), Some(w)) => {
            check_policies(&model, a, x, w)?;
            true
        }
        _ => false,
    };
    let names: Vec<String> = (0..graph.len())
        .map(|i| exec::task_name(&model, &graph, i))
        .collect();
    let mut workers: Vec<String> = (0..devices).map(|i| format!("dev{i}")).collect();
    workers.extend((0..cpus).map(|i| format!("cpu{i}")));
    let setup = sim::SimSetup {
        graph: &graph,
        cost: &cost,
        names: &names,
        pool: Pool { devices, cpus },
        workers: &workers,
    };
    let policies: Vec<Policy> = match a.pool.schedule {
        Some(Policy::Serial) | None => Policy::ALL.to_vec(),
        Some(p) => vec![Policy::Serial, p],
    };
    let c = sim::compare(&setup, &policies, &IN_FLIGHT, at, requests)?;
    if let Some(path) = &a.pool.trace {
        let named: Vec<(String, &exec::Timeline)> = c
            .policies
            .iter()
            .map(|p| {
                (
                    format!("{} (device time, {at} in flight)", label(p)),
                    &p.timeline,
                )
            })
            .collect();
        let refs: Vec<(&str, &exec::Timeline)> =
            named.iter().map(|(n, t)| (n.as_str(), *t)).collect();
        std::fs::write(path, exec::chrome_json_of(&refs))
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let launch_ms: f64 = graph
        .tasks
        .iter()
        .zip(&cost)
        .filter(|(t, _)| t.is_launch())
        .map(|(_, c)| c * 1e3)
        .sum();
    let cpu_ms: f64 = graph
        .tasks
        .iter()
        .zip(&cost)
        .filter(|(t, _)| !t.is_launch())
        .map(|(_, c)| c * 1e3)
        .sum();
    let serial_thr = 1.0 / c.serial.max(1e-12);
    if a.json {
        let rows: Vec<serde_json::Value> = c
            .policies
            .iter()
            .map(|p| {
                json!({
                    "policy": p.policy.name(),
                    "chosen": p.chosen.name(),
                    "latency_p50_ms": p.latency_p50 * 1e3,
                    "latency_p99_ms": p.latency_p99 * 1e3,
                    "throughput_per_s": p.throughput.iter().map(|(k, t)| json!({"in_flight": k, "per_s": t})).collect::<Vec<_>>(),
                    "vs_serial": p.best_throughput() / serial_thr,
                    "slower_than_serial": p.best_throughput() < serial_thr * (1.0 - 1e-9),
                    "busiest_worker_ms": p.busiest * 1e3,
                    "workers": p.workers.iter().map(crate::cmd::pool::worker_json).collect::<Vec<_>>(),
                })
            })
            .collect();
        return Ok(crate::cmd::json::text(&json!({
            "bench": "schedule",
            "time": "device",
            "model": file,
            "devices": devices,
            "cpu_threads": cpus,
            "clock_mhz": model.config.clock_mhz,
            "launch_cycles": a.launch_cycles.name(),
            "cpu_times": cpu_source,
            "cpu_scale": a.cpu_scale,
            "launch_overhead_us": a.launch_overhead_us,
            "requests": requests,
            "in_flight_for_workers": at,
            "launch_ms_per_request": launch_ms,
            "cpu_ms_per_request": cpu_ms,
            "serial_ms": c.serial * 1e3,
            "lower_bound_ms": c.bound * 1e3,
            "outputs_checked": checked,
            "policies": rows,
        })));
    }
    let mut t = String::new();
    writeln!(
        t,
        "{file}: device time on {devices} accelerator(s) + {cpus} CPU worker(s); launches: {} cycles at {} MHz{}, {launch_ms:.3} ms per request; CPU steps: {cpu_source}{}, {cpu_ms:.3} ms per request",
        a.launch_cycles.name(),
        model.config.clock_mhz,
        if overhead > 0.0 { format!(" + {} us each", a.launch_overhead_us) } else { String::new() },
        if a.cpu_scale != 1.0 { format!(" x {}", a.cpu_scale) } else { String::new() },
    )?;
    writeln!(t, "{}", graph.summary())?;
    if checked {
        writeln!(t, "outputs: one request under every policy on the real pool, bit-identical to the serial run's")?;
    } else {
        writeln!(t, "outputs: not checked (no --input)")?;
    }
    writeln!(
        t,
        "{requests} simulated requests per run; utilization at {at} in flight\n{:22} {:>9} {:>9} {}  {:>9} {:>14} utilization",
        "policy",
        "p50 ms",
        "p99 ms",
        IN_FLIGHT.map(|k| format!("{:>9}", format!("@{k} /s"))).join(" "),
        "vs serial",
        "busiest ms/req",
    )?;
    for p in &c.policies {
        writeln!(
            t,
            "{:22} {:>9.3} {:>9.3} {}  {:>8.2}x {:>14.3} {}",
            label(p),
            p.latency_p50 * 1e3,
            p.latency_p99 * 1e3,
            p.throughput
                .iter()
                .map(|(_, v)| format!("{v:>9.1}"))
                .collect::<Vec<_>>()
                .join(" "),
            p.best_throughput() / serial_thr,
            p.busiest * 1e3,
            p.workers
                .iter()
                .map(|w| format!("{} {:.0}%", w.name, w.utilization * 100.0))
                .collect::<Vec<_>>()
                .join(", "),
        )?;
    }
    writeln!(
        t,
        "lower bound: {:.3} ms per request ({:.1}/s): the launches' work over {devices} accelerator(s) or the CPU steps' over {cpus} worker(s), whichever is more",
        c.bound * 1e3,
        1.0 / c.bound.max(1e-12)
    )?;
    for p in &c.policies {
        let r = p.best_throughput() / serial_thr;
        if r < 1.0 - 1e-9 {
            writeln!(
                t,
                "note: {} is slower than serial on this network ({r:.2}x at best)",
                label(p)
            )?;
        }
    }
    if let Some(path) = &a.pool.trace {
        writeln!(
            t,
            "timeline (one process per policy, {at} in flight) -> {}",
            path.display()
        )?;
    }
    Ok(t)
}

fn label(p: &sim::PolicyFigures) -> String {
    if p.policy == Policy::Auto {
        format!("auto (chose {})", p.chosen)
    } else {
        p.policy.name().to_string()
    }
}
