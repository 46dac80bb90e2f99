//! `vta bench serve`: the remote runner under load. A `vta serve` of the functional simulator
//! on loopback, in this process, and many clients at once, each connecting (waiting in the
//! server's queue when every session is taken), loading one of two compiled models of the
//! digits CNN (fused launches, one launch per layer) and running test digits on it; every
//! output is compared byte for byte with a local run of the same model and sample.

use std::fmt::Write as _;
use std::net::TcpListener;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use compiler::compile::{BackendOptions, Compiled};
use compiler::frontend::{npy_to_f32, FrontendOptions};
use compiler::zoo::digits;
use drivers::remote::{serve, RemoteDevice, RemoteOptions, ServeOptions};
use isa::{npy, HwConfig};
use vta_runtime::io as runtime;
use vta_runtime::model::Model;
use vta_runtime::resident::{LoadOptions, Resident};
use vta_runtime::tensor::Tensor;
use vta_sim::FsimDevice;

use super::super::progress::Progress;

#[derive(Args)]
pub struct ServeBenchArgs {
    /// Clients connecting at once
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=1024))]
    clients: u32,
    /// Runs per client (each one test digit)
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100000))]
    runs: u32,
    /// The server's --max-clients: sessions at once, the others wait in its queue
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    max_clients: u32,
    /// Print the figures as JSON
    #[arg(long)]
    json: bool,
}

/// What one client saw.
#[derive(Default)]
struct ClientStats {
    /// From the first connection attempt to the server's welcome (the queue's wait).
    connect: Duration,
    /// Each run's time, from the inputs sent to the outputs read.
    runs: Vec<Duration>,
    mismatches: usize,
    errors: Vec<String>,
}

/// `p` (0..=1) of sorted `v`, in milliseconds.
fn quantile_ms(v: &[Duration], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let i = ((v.len() - 1) as f64 * p).round() as usize;
    v[i].as_secs_f64() * 1e3
}

/// The process's peak resident memory in MiB (Linux; `None` elsewhere).
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Byte-for-byte equality (a float NaN equals the same NaN).
fn identical(a: &[Tensor], b: &[Tensor]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (Tensor::F32(x), Tensor::F32(y)) => {
                x.shape() == y.shape() && x.iter().zip(y).all(|(p, q)| p.to_bits() == q.to_bits())
            }
            _ => x == y,
        })
}

/// The digits CNN for the default config: fused launches, and one launch per layer.
fn models(cfg: &HwConfig) -> Result<Vec<Model>> {
    let calib = npy::decode(digits::CALIBRATION_NPY).map_err(|e| anyhow!("calibration: {e}"))?;
    let calib = npy_to_f32(&calib).map_err(|e| anyhow!(e))?;
    [false, true]
        .into_iter()
        .map(|per_layer| {
            let backend = BackendOptions {
                launch_per_layer: per_layer,
                ..BackendOptions::default()
            };
            let c = Compiled::compile_observed(
                digits::ONNX.to_vec(),
                super::super::demo::SOURCE,
                std::slice::from_ref(&calib),
                cfg,
                &FrontendOptions::default(),
                &backend,
                &mut |_| {},
            )?;
            Ok(c.model)
        })
        .collect()
}

/// What every client shares.
struct Bench<'a> {
    addr: &'a str,
    cfg: &'a HwConfig,
    samples: &'a [Vec<Tensor>],
    runs: usize,
    progress: &'a Progress,
}

/// One client: `model`'s runs on samples from `first` on, checked against `want`.
fn client(b: &Bench, model: &Model, want: &[Vec<Tensor>], first: usize) -> ClientStats {
    let Bench {
        addr,
        cfg,
        samples,
        runs,
        progress,
    } = *b;
    let mut st = ClientStats::default();
    let t = Instant::now();
    let opts = RemoteOptions {
        expect: Some(cfg.clone()),
        busy_timeout: Duration::from_secs(600),
        ..RemoteOptions::default()
    };
    let mut dev = match RemoteDevice::connect(addr, opts) {
        Ok(d) => d,
        Err(e) => {
            st.errors.push(e.to_string());
            return st;
        }
    };
    st.connect = t.elapsed();
    let mut resident = match Resident::load(model, &mut dev, LoadOptions::default()) {
        Ok(r) => r,
        Err(e) => {
            st.errors.push(e.to_string());
            return st;
        }
    };
    for k in 0..runs {
        let s = (first + k) % samples.len();
        let t = Instant::now();
        match resident.run(&samples[s]) {
            Ok(r) => {
                st.runs.push(t.elapsed());
                if !identical(&r.outputs, &want[s]) {
                    st.mismatches += 1;
                }
            }
            Err(e) => st.errors.push(e.to_string()),
        }
        progress.inc();
    }
    st
}

pub fn run(a: ServeBenchArgs) -> Result<String> {
    let cfg = HwConfig::default();
    let models = {
        let _p = Progress::spinner("compiling the digits CNN twice");
        models(&cfg)?
    };
    let test = npy::decode(digits::TEST_NPY).map_err(|e| anyhow!("test digits: {e}"))?;
    let input = runtime::tensor_from_npy(&test).map_err(|e| anyhow!("test digits: {e}"))?;
    let samples = models[0]
        .split_samples(vec![input])
        .map_err(|e| anyhow!("test digits: {e}"))?;
    // The local runs every remote one must equal.
    let mut local = FsimDevice::new(&cfg);
    let mut want = Vec::new();
    for m in &models {
        let mut r = Resident::load(m, &mut local, LoadOptions::default())?;
        let outs = samples
            .iter()
            .map(|s| Ok(r.run(s)?.outputs))
            .collect::<Result<Vec<_>>>()?;
        want.push(outs);
    }

    let listener = TcpListener::bind("127.0.0.1:0").context("binding a loopback port")?;
    let addr = listener.local_addr()?.to_string();
    let (clients, runs) = (a.clients as usize, a.runs as usize);
    let opts = ServeOptions {
        max_clients: a.max_clients as usize,
        max_waiting: clients,
        queue_timeout: Duration::from_secs(3600),
        ..ServeOptions::default()
    };
    // The server runs until the process ends, as `vta serve` does.
    let server_cfg = cfg.clone();
    thread::Builder::new()
        .name("vta-bench-serve".into())
        .spawn(move || {
            let mut dev = FsimDevice::new(&server_cfg);
            let _ = serve(listener, &mut dev, opts);
        })?;

    let progress = Progress::bar("runs", (clients * runs) as u64);
    let bench = Bench {
        addr: &addr,
        cfg: &cfg,
        samples: &samples,
        runs,
        progress: &progress,
    };
    let t = Instant::now();
    let stats: Vec<ClientStats> = thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                let (bench, model, want) = (&bench, &models[c % 2], &want[c % 2]);
                // Clients start at different digits, so the server sees mixed inputs.
                s.spawn(move || client(bench, model, want, c * 7))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| ClientStats {
                    errors: vec!["a client thread panicked".into()],
                    ..ClientStats::default()
                })
            })
            .collect()
    });
    let wall = t.elapsed();
    drop(progress);

    let mut latencies: Vec<Duration> = stats.iter().flat_map(|s| s.runs.clone()).collect();
    latencies.sort();
    let mut waits: Vec<Duration> = stats.iter().map(|s| s.connect).collect();
    waits.sort();
    let ok = latencies.len();
    let mismatches: usize = stats.iter().map(|s| s.mismatches).sum();
    let errors: Vec<&String> = stats.iter().flat_map(|s| &s.errors).collect();
    let peak = peak_rss_mib();
    if a.json {
        let doc = serde_json::json!({
            "clients": clients,
            "runs_per_client": runs,
            "max_clients": a.max_clients,
            "runs_ok": ok,
            "mismatches": mismatches,
            "errors": errors.len(),
            "first_error": errors.first(),
            "wall_s": wall.as_secs_f64(),
            "runs_per_s": ok as f64 / wall.as_secs_f64(),
            "run_ms": {"p50": quantile_ms(&latencies, 0.5), "p99": quantile_ms(&latencies, 0.99)},
            "queue_wait_ms": {
                "p50": quantile_ms(&waits, 0.5),
                "p99": quantile_ms(&waits, 0.99),
                "max": quantile_ms(&waits, 1.0),
            },
            "peak_rss_mib": peak,
        });
        return Ok(serde_json::to_string_pretty(&doc)? + "\n");
    }
    let mut out = String::new();
    writeln!(
        out,
        "vta serve (fsim, {}) on loopback, --max-clients {}: {clients} clients x {runs} runs of \
         the digits CNN (two compiled forms), one test digit per run",
        cfg.config_string(),
        a.max_clients
    )?;
    writeln!(
        out,
        "runs: {ok} of {} done in {:.2} s ({:.0} runs/s); byte-identical to a local run: {} \
         of {ok}",
        clients * runs,
        wall.as_secs_f64(),
        ok as f64 / wall.as_secs_f64(),
        ok - mismatches
    )?;
    writeln!(
        out,
        "run time ms: p50 {:.3}, p99 {:.3}; wait for a session (connect to welcome) ms: p50 \
         {:.1}, p99 {:.1}, max {:.1}",
        quantile_ms(&latencies, 0.5),
        quantile_ms(&latencies, 0.99),
        quantile_ms(&waits, 0.5),
        quantile_ms(&waits, 0.99),
        quantile_ms(&waits, 1.0)
    )?;
    if let Some(p) = peak {
        writeln!(
            out,
            "peak resident memory of this process (server and clients): {p:.1} MiB"
        )?;
    }
    if mismatches > 0 || !errors.is_empty() {
        bail!(
            "{out}{mismatches} runs differed from the local run and {} failed; the first \
             failure: {}",
            errors.len(),
            errors.first().map_or("none", |e| e.as_str())
        );
    }
    Ok(out)
}
