//! Running a compiled model on a pool of devices and CPU workers (`vta run --schedule`,
//! `vta bench schedule`): the options, the `--devices` list, the run and its report
//! (throughput, latency, per-worker utilization, overlap, queue wait, the timeline).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use drivers::Device;
use serde_json::json;
use vta_runtime::exec::{DeviceSpec, ExecOptions, Executor, Policy, Timeline, WorkerStats};
use vta_runtime::model::Model;
use vta_runtime::Tensor;

use vta_sim::rtl::multicore::MultiCoreDevice;

use super::sim::{Backend, RtlArgs};

/// The pool options of `vta run` and `vta bench schedule`.
#[derive(Args, Clone, Debug, Default)]
pub struct PoolArgs {
    /// Run on a pool of devices and CPU workers with this scheduling policy: serial (one
    /// task at a time, as without --schedule), pipeline (requests overlap, each device and
    /// CPU worker a stage), by-op (static earliest-finish-time list scheduling of every launch
    /// and CPU step), by-path (the same with each fork-to-join branch as one unit), dynamic
    /// (the by-op rule at run time from the live queues), auto (measures them all on the
    /// first sample and keeps the fastest; serial unless another is faster)
    #[arg(long, value_name = "POLICY")]
    pub schedule: Option<Policy>,
    /// The pool's accelerators, comma-separated backends (each as --backend), e.g.
    /// fsim,fsim or rtl,fsim or remote://a:9091,remote://b:9091; rtl-cores:N is N devices:
    /// the cores of one RTL simulation of an N-core design sharing one memory through an AXI
    /// interconnect [default: --backend once]
    #[arg(long, value_name = "LIST")]
    pub devices: Option<String>,
    /// CPU worker threads of the pool [default: 2]
    #[arg(long, value_name = "N")]
    pub cpu_threads: Option<usize>,
    /// Samples in flight at once in the pool [default: 1]
    #[arg(long, value_name = "N")]
    pub in_flight: Option<usize>,
    /// Write the pool's timeline as Chrome-trace JSON (open in ui.perfetto.dev): one track
    /// per device and CPU worker, one per queue
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
}

impl PoolArgs {
    /// Whether any pool option was given (the run then goes through the pool).
    pub fn given(&self) -> bool {
        self.schedule.is_some()
            || self.devices.is_some()
            || self.cpu_threads.is_some()
            || self.in_flight.is_some()
            || self.trace.is_some()
    }
}

/// The accepted forms, for errors.
const DEVICES_FORMS: &str = "a comma-separated list of backends, each fsim, rtl, \
    remote://HOST[:PORT], serial://PORT[?baud=N] or soc-sim, or rtl-cores:N for the N cores \
    of one multi-core RTL simulation (e.g. fsim,fsim or rtl,fsim or rtl-cores:2)";

/// One device of a `--devices` list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoolDevice {
    /// A backend, opened on its worker's thread.
    Backend(Backend),
    /// Core `core` of the `cores`-core RTL simulation that item `item` of the list
    /// (`rtl-cores:N`) asks for; the cores of one item share it.
    RtlCore { item: usize, cores: u32, core: u32 },
}

impl PoolDevice {
    /// Whether it runs on the cycle-accurate simulator (the RTL options apply to it).
    pub fn is_rtl(&self) -> bool {
        matches!(
            self,
            PoolDevice::Backend(Backend::Rtl) | PoolDevice::RtlCore { .. }
        )
    }
}

/// Parses a `--devices` list.
pub fn parse_devices(spec: &str) -> Result<Vec<PoolDevice>, String> {
    if spec.trim().is_empty() {
        return Err(format!("--devices is empty: expected {DEVICES_FORMS}"));
    }
    let mut devices = vec![];
    for (i, item) in spec.split(',').enumerate() {
        let item = item.trim();
        let bad = |e: &str| {
            format!(
                "--devices '{spec}': device {} '{item}': {e}; --devices takes {DEVICES_FORMS}",
                i + 1
            )
        };
        if item.is_empty() {
            return Err(format!(
                "--devices '{spec}': device {} is empty; expected {DEVICES_FORMS}",
                i + 1
            ));
        }
        if let Some(n) = item.strip_prefix("rtl-cores:") {
            let max = vta_hw::multicore::MAX_CORES;
            let cores = n
                .parse::<u32>()
                .ok()
                .filter(|c| (2..=max).contains(c))
                .ok_or_else(|| bad(&format!("the core count must be 2 to {max}")))?;
            devices.extend((0..cores).map(|core| PoolDevice::RtlCore {
                item: i,
                cores,
                core,
            }));
        } else {
            devices.push(PoolDevice::Backend(
                item.parse::<Backend>().map_err(|e| bad(&e))?,
            ));
        }
    }
    Ok(devices)
}

/// The cores of one `rtl-cores:N` item, opened by the first of its workers to start.
type CoreGroup = Arc<Mutex<Option<Vec<Option<MultiCoreDevice>>>>>;

/// A device spec that opens `device` on the worker thread (`groups`: the multi-core
/// simulations by list item).
fn spec(
    device: &PoolDevice,
    cfg: &isa::HwConfig,
    rtl: &RtlArgs,
    groups: &mut HashMap<usize, CoreGroup>,
) -> DeviceSpec {
    let (cfg, rtl) = (cfg.clone(), rtl.clone());
    match device {
        PoolDevice::Backend(b) => {
            let b = b.clone();
            let name = match &b {
                Backend::Fsim => "fsim".to_string(),
                Backend::Rtl => "rtl".to_string(),
                Backend::Remote(a) => format!("remote://{a}"),
                Backend::Serial { port, .. } => format!("serial://{port}"),
                Backend::SocSim => "soc-sim".to_string(),
            };
            DeviceSpec::new(name, move || {
                super::run::device(&b, &cfg, &rtl, false).map_err(|e| format!("{e:#}"))
            })
        }
        &PoolDevice::RtlCore { item, cores, core } => {
            let group = groups.entry(item).or_default().clone();
            DeviceSpec::new(format!("rtl-cores:{cores}#{core}"), move || {
                let mut g = group
                    .lock()
                    .map_err(|_| "another core's worker failed while opening".to_string())?;
                if g.is_none() {
                    let devs = rtl.cores(&cfg, cores).map_err(|e| format!("{e:#}"))?;
                    *g = Some(devs.into_iter().map(Some).collect());
                }
                let dev = g.as_mut().and_then(|d| d[core as usize].take());
                dev.map(|d| Box::new(d) as Box<dyn Device>)
                    .ok_or_else(|| format!("core {core} of rtl-cores:{cores} was opened twice"))
            })
        }
    }
}

/// What a pool run gave.
pub struct PoolRun {
    /// Per sample, the model's outputs.
    pub outputs: Vec<Vec<Tensor>>,
    pub text: String,
    pub json: serde_json::Value,
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

/// The figures of a timeline, as text and JSON.
pub fn describe(
    tl: &Timeline,
    wall: Duration,
    latencies: &mut [Duration],
    samples: usize,
) -> (String, serde_json::Value) {
    let s = tl.stats();
    latencies.sort();
    let (p50, p99) = (percentile(latencies, 0.5), percentile(latencies, 0.99));
    let thr = samples as f64 / wall.as_secs_f64().max(1e-9);
    let mut text = String::new();
    let _ = writeln!(
        text,
        "  {samples} sample(s) in {:.1} ms: {thr:.2} samples/s; latency p50 {:.2} ms, p99 {:.2} ms",
        wall.as_secs_f64() * 1e3,
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
    let _ = writeln!(
        text,
        "  {:10} {:>6} {:>10} {:>6} {:>12}",
        "worker", "tasks", "busy ms", "util", "queue ms"
    );
    for w in &s.workers {
        let _ = writeln!(
            text,
            "  {:10} {:>6} {:>10.2} {:>5.0}% {:>12.2}",
            w.name,
            w.tasks,
            w.busy * 1e3,
            w.utilization * 100.0,
            w.queue_wait * 1e3
        );
    }
    let _ = writeln!(
        text,
        "  overlap (two or more workers busy) {:.2} ms of {:.2} ms; busiest worker's work {:.2} ms (the lower bound on these workers)",
        s.overlap * 1e3,
        s.span * 1e3,
        s.lower_bound * 1e3
    );
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let json = json!({
        "samples": samples,
        "wall_ms": ms(wall),
        "throughput_per_s": thr,
        "latency_p50_ms": ms(p50),
        "latency_p99_ms": ms(p99),
        "span_ms": s.span * 1e3,
        "overlap_ms": s.overlap * 1e3,
        "lower_bound_ms": s.lower_bound * 1e3,
        "workers": s.workers.iter().map(worker_json).collect::<Vec<_>>(),
    });
    (text, json)
}

/// One worker's figures in `--json` (live runs and device-time simulations alike).
pub fn worker_json(w: &WorkerStats) -> serde_json::Value {
    json!({
        "name": w.name,
        "tasks": w.tasks,
        "busy_ms": w.busy * 1e3,
        "utilization": w.utilization,
        "queue_wait_ms": w.queue_wait * 1e3,
    })
}

/// Starts a pool for `model` from the options (`backend` when no --devices).
pub fn executor(
    model: &Arc<Model>,
    a: &PoolArgs,
    backend: &Backend,
    rtl: &RtlArgs,
    policy: Policy,
) -> Result<Executor> {
    let devices = match &a.devices {
        Some(s) => parse_devices(s).map_err(|e| anyhow!(e))?,
        None => vec![PoolDevice::Backend(backend.clone())],
    };
    let cfg = &model.config;
    let opts = ExecOptions {
        policy,
        cpu_threads: a.cpu_threads.unwrap_or(2),
        in_flight: a.in_flight.unwrap_or(1),
        trace: true,
    };
    let mut groups = HashMap::new();
    let specs = devices
        .iter()
        .map(|d| spec(d, cfg, rtl, &mut groups))
        .collect();
    Ok(Executor::new(model.clone(), specs, opts)?)
}

/// Runs every sample of `runs` on the pool; with `auto`, measures the policies on the first
/// sample first.
pub fn run_pool(
    model: &Model,
    runs: &[Vec<Tensor>],
    a: &PoolArgs,
    backend: &Backend,
    rtl: &RtlArgs,
    file: &str,
) -> Result<PoolRun> {
    let model = Arc::new(model.clone());
    let policy = a.schedule.unwrap_or(Policy::Serial);
    let ex = executor(&model, a, backend, rtl, policy)
        .with_context(|| format!("{file}: cannot start the pool"))?;
    let mut text = String::new();
    let mut auto_json = serde_json::Value::Null;
    if policy == Policy::Auto {
        let first = runs.first().ok_or_else(|| anyhow!("no input samples"))?;
        let times = ex
            .choose(first, runs.len().clamp(2, 4))
            .with_context(|| format!("{file}: measuring the policies failed"))?;
        let chosen = ex.schedule().policy;
        let _ = writeln!(
            text,
            "auto: measured {}; chose {chosen}",
            times
                .iter()
                .map(|(p, d)| format!("{p} {:.1} ms", d.as_secs_f64() * 1e3))
                .collect::<Vec<_>>()
                .join(", ")
        );
        auto_json = json!({
            "chosen": chosen.name(),
            "measured_ms": times.iter().map(|(p, d)| json!({"policy": p.name(), "ms": d.as_secs_f64() * 1e3})).collect::<Vec<_>>(),
        });
        ex.take_timeline();
    }
    let t = Instant::now();
    let done = ex
        .run_many(runs)
        .with_context(|| format!("{file}: run failed"))?;
    let wall = t.elapsed();
    let tl = ex.take_timeline();
    if let Some(path) = &a.trace {
        std::fs::write(path, tl.chrome_json())
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let schedule = ex.schedule();
    let summary = ex.graph().summary();
    let _ = writeln!(
        text,
        "pool: {} with schedule {}, {} in flight; {summary}",
        ex.workers().join(", "),
        schedule.policy,
        a.in_flight.unwrap_or(1)
    );
    let mut lat: Vec<Duration> = done.iter().map(|d| d.latency).collect();
    let (t2, mut j) = describe(&tl, wall, &mut lat, runs.len());
    text.push_str(&t2);
    if let Some(p) = &a.trace {
        let _ = writeln!(text, "  timeline -> {}", p.display());
    }
    j["policy"] = json!(schedule.policy.name());
    j["requested_policy"] = json!(policy.name());
    j["devices"] = json!(ex.workers());
    j["auto"] = auto_json;
    j["task_graph"] = json!({
        "tasks": summary.tasks,
        "critical_path": summary.critical_path,
        "width": summary.width,
        "branches": summary.branches,
    });
    Ok(PoolRun {
        outputs: done.into_iter().map(|d| d.outputs).collect(),
        text,
        json: j,
    })
}

/// The serial run's outputs on a fresh functional simulator, for `--check` on a pool.
pub fn serial_outputs(model: &Model, runs: &[Vec<Tensor>]) -> Result<Vec<Vec<Tensor>>> {
    let mut dev: Box<dyn Device> = Box::new(vta_sim::FsimDevice::new(&model.config));
    let mut r = model.load(dev.as_mut(), Default::default())?;
    runs.iter()
        .map(|x| Ok(r.run(x)?.outputs))
        .collect::<Result<_>>()
}

/// Fails unless the pool's outputs equal the serial run's, naming the first sample that
/// differs.
pub fn check_against_serial(
    model: &Model,
    runs: &[Vec<Tensor>],
    got: &[Vec<Tensor>],
) -> Result<()> {
    let want = serial_outputs(model, runs)?;
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        if w != g {
            bail!("--check failed: sample {i}'s outputs differ from the serial run's");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_lists_parse_and_bad_ones_say_what_is_accepted() {
        let b = PoolDevice::Backend;
        assert_eq!(
            parse_devices("fsim,fsim").unwrap(),
            vec![b(Backend::Fsim), b(Backend::Fsim)]
        );
        assert_eq!(
            parse_devices("rtl, fsim").unwrap(),
            vec![b(Backend::Rtl), b(Backend::Fsim)]
        );
        let core = |item, core| PoolDevice::RtlCore {
            item,
            cores: 2,
            core,
        };
        assert_eq!(
            parse_devices("fsim,rtl-cores:2").unwrap(),
            vec![b(Backend::Fsim), core(1, 0), core(1, 1)]
        );
        for bad in ["rtl-cores:1", "rtl-cores:9", "rtl-cores:two"] {
            let e = parse_devices(bad).unwrap_err();
            assert!(e.contains("the core count must be 2 to 8"), "{e}");
        }
        let e = parse_devices("fsim,,fsim").unwrap_err();
        assert!(
            e.contains("device 2 is empty") && e.contains("e.g. fsim,fsim"),
            "{e}"
        );
        let e = parse_devices("fsim,gpu").unwrap_err();
        assert!(
            e.contains("device 2 'gpu'") && e.contains("unknown backend"),
            "{e}"
        );
        let e = parse_devices("").unwrap_err();
        assert!(e.contains("comma-separated list of backends"), "{e}");
    }
}
