//! The ResNet-18 benchmarks of `vta bench`: calibration time per sample (the float network
//! on the CPU), whole `vta run` processes of a compiled model, and the cycle-accurate
//! simulator's speed on the network. The network is `vta zoo resnet18`'s (untrained weights
//! from seed 0) unless a model is given; CPU times are the measuring thread's (or the child
//! process's), which other jobs on the machine disturb far less than wall time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use compiler::compile::Compiled;
use compiler::frontend::{import_graph, FrontendOptions};
use compiler::graph::Tensor;
use compiler::zoo::{self, ResNetOptions};
use isa::{npy, HwConfig};
use vta_runtime::resident::LoadOptions;
use vta_sim::bench::thread_cpu_time;

/// ResNet-18 at `size`x`size` as ONNX bytes.
fn resnet(size: usize) -> Result<Vec<u8>> {
    zoo::resnet18_bytes(&ResNetOptions {
        size,
        ..Default::default()
    })
    .map_err(|e| anyhow::anyhow!("cannot build ResNet-18 at {size}x{size}: {e}"))
}

/// Seconds of a duration, for figures.
fn s(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// The smallest and the median of some times.
fn min_median(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2])
}

/// Calibration of ResNet-18: CPU and wall time of each sample.
pub struct CalibrationFigures {
    pub size: usize,
    /// (CPU, wall) seconds per sample, in order.
    pub samples: Vec<(f64, f64)>,
}

impl CalibrationFigures {
    /// Fastest and median CPU seconds per sample.
    pub fn cpu(&self) -> (f64, f64) {
        min_median(self.samples.iter().map(|s| s.0).collect())
    }
}

impl std::fmt::Display for CalibrationFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "calibration of ResNet-18 {0}x{0} (the float network on one core; CPU time of the calibrating thread)",
            self.size
        )?;
        for (k, (cpu, wall)) in self.samples.iter().enumerate() {
            writeln!(f, "  sample {}: {cpu:.3} s CPU ({wall:.3} s wall)", k + 1)?;
        }
        let (min, median) = self.cpu();
        write!(
            f,
            "per sample: {min:.3} s CPU fastest, {median:.3} s median"
        )
    }
}

/// Imports ResNet-18 and runs calibration on `samples` pseudo-random inputs one at a time.
pub fn calibration(size: usize, samples: u32) -> Result<CalibrationFigures> {
    if samples == 0 {
        bail!("--samples 0: calibrate at least one sample");
    }
    let onnx = resnet(size)?;
    let g = import_graph(
        &onnx,
        "resnet18.onnx",
        FrontendOptions::default().memory_budget,
    )?;
    let mut figures = CalibrationFigures {
        size,
        samples: vec![],
    };
    for k in 0..samples {
        let x = zoo::sample_input(&[1, 3, size, size], u64::from(k));
        eprintln!("bench: calibrating on sample {}/{samples}", k + 1);
        let (wall, cpu) = (Instant::now(), thread_cpu_time());
        compiler::quant::calibrate::calibrate(&g, &[x])
            .map_err(|e| anyhow::anyhow!("calibration failed: {e}"))?;
        figures
            .samples
            .push((s(thread_cpu_time().saturating_sub(cpu)), s(wall.elapsed())));
    }
    Ok(figures)
}

/// Whole `vta run` processes: wall and CPU (user + system) time of each.
pub struct ProcessFigures {
    /// The command line timed (after the program name).
    pub args: Vec<String>,
    /// (wall, CPU) seconds per run, in order.
    pub runs: Vec<(f64, f64)>,
}

impl std::fmt::Display for ProcessFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "whole process: vta {}", self.args.join(" "))?;
        for (k, (wall, cpu)) in self.runs.iter().enumerate() {
            writeln!(
                f,
                "  run {}: {wall:.3} s wall, {cpu:.3} s CPU (user + system)",
                k + 1
            )?;
        }
        let (wmin, wmed) = min_median(self.runs.iter().map(|r| r.0).collect());
        let (cmin, cmed) = min_median(self.runs.iter().map(|r| r.1).collect());
        write!(
            f,
            "wall: {wmin:.3} s fastest, {wmed:.3} s median; CPU: {cmin:.3} s fastest, {cmed:.3} s median"
        )
    }
}

/// CPU time (user + system) of the waited-for children so far.
#[cfg(unix)]
fn children_cpu() -> Duration {
    // SAFETY: a plain libc call writing the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) } != 0 {
        return Duration::ZERO;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

#[cfg(not(unix))]
fn children_cpu() -> Duration {
    Duration::ZERO
}

/// Runs `vta run MODEL -i INPUT...` (this program) `repeat` times, its output discarded.
pub fn run_process(model: &Path, inputs: &[String], repeat: u32) -> Result<ProcessFigures> {
    if repeat == 0 {
        bail!("--repeat 0: run at least once");
    }
    let exe = std::env::current_exe().context("cannot find this program to run it")?;
    let mut args = vec!["run".to_string(), model.display().to_string()];
    for i in inputs {
        args.extend(["--input".to_string(), i.clone()]);
    }
    let mut figures = ProcessFigures {
        args: args.clone(),
        runs: vec![],
    };
    for _ in 0..repeat {
        let (wall, cpu) = (Instant::now(), children_cpu());
        let out = Command::new(&exe)
            .args(&args)
            .output()
            .with_context(|| format!("cannot run {}", exe.display()))?;
        let wall = wall.elapsed();
        if !out.status.success() {
            bail!(
                "`vta {}` failed ({}):\n{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        figures
            .runs
            .push((s(wall), s(children_cpu().saturating_sub(cpu))));
    }
    Ok(figures)
}

/// A directory under the system's temporary directory, removed when dropped.
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    pub fn new(what: &str) -> Result<ScratchDir> {
        let p = std::env::temp_dir().join(format!("vta-bench-{what}-{}", std::process::id()));
        std::fs::create_dir_all(&p).with_context(|| format!("cannot create {}", p.display()))?;
        Ok(ScratchDir(p))
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes ResNet-18 compiled for `cfg` (calibrated on its sample input) and that sample
/// into `dir`, as `vta zoo resnet18 --sample` and `vta compile --calibrate` would; returns
/// (model, input) paths.
pub fn write_resnet(dir: &Path, cfg: &HwConfig, size: usize) -> Result<(PathBuf, PathBuf)> {
    eprintln!(
        "bench: compiling ResNet-18 {size}x{size} for {}",
        cfg.config_string()
    );
    let x = zoo::sample_input(&[1, 3, size, size], 0);
    let m = Compiled::compile(
        resnet(size)?,
        "resnet18.onnx",
        std::slice::from_ref(&x),
        cfg,
        &FrontendOptions::default(),
    )?;
    let (model, input) = (dir.join("resnet18.vtab"), dir.join("x.npy"));
    std::fs::write(&model, m.to_bytes()?)
        .with_context(|| format!("cannot write {}", model.display()))?;
    let (elem, shape, data) = vta_runtime::io::tensor_to_npy(&Tensor::F32(x));
    npy::write_file(&input, elem, &shape, &data)
        .with_context(|| format!("cannot write {}", input.display()))?;
    Ok((model, input))
}

/// ResNet-18 on the cycle-accurate simulator.
pub struct RtlNetworkFigures {
    pub size: usize,
    pub config: String,
    /// Plan steps on the accelerator and on the CPU.
    pub accel_steps: usize,
    pub cpu_steps: usize,
    /// Accelerator cycles of the launches (start to DONE).
    pub cycles: u64,
    /// Cycles simulated for the run (with the host's register accesses).
    pub host_cycles: u64,
    /// CPU time of the simulating thread for the run.
    pub cpu: f64,
    pub wall: f64,
}

impl RtlNetworkFigures {
    /// Simulated cycles per second of CPU time.
    pub fn cycles_per_second(&self) -> f64 {
        self.host_cycles as f64 / self.cpu.max(1e-9)
    }
}

impl std::fmt::Display for RtlNetworkFigures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "ResNet-18 {0}x{0} on the RTL simulator (Verilator), config {1} (one core)",
            self.size, self.config
        )?;
        writeln!(
            f,
            "  {} accelerator cycles ({} steps on the accelerator, {} on the CPU); {} cycles \
             simulated in {:.3} s CPU ({:.3} s wall)",
            self.cycles, self.accel_steps, self.cpu_steps, self.host_cycles, self.cpu, self.wall
        )?;
        write!(
            f,
            "simulation speed: {:.2} M cycles/s (simulated cycles per second of the simulating thread's CPU time)",
            self.cycles_per_second() / 1e6
        )
    }
}

/// Compiles ResNet-18 for `cfg` (the first and last layers at 8-bit weights when
/// `keep_ends_8bit`), loads it onto `dev` and runs one inference, timed.
pub fn rtl_network(
    cfg: &HwConfig,
    size: usize,
    keep_ends_8bit: bool,
    dev: &mut vta_sim::rtl::RtlDevice,
) -> Result<RtlNetworkFigures> {
    eprintln!(
        "bench: compiling ResNet-18 {size}x{size} for {}",
        cfg.config_string()
    );
    let x = zoo::sample_input(&[1, 3, size, size], 0);
    let m = Compiled::compile(
        resnet(size)?,
        "resnet18.onnx",
        std::slice::from_ref(&x),
        cfg,
        &FrontendOptions {
            keep_ends_8bit,
            ..FrontendOptions::default()
        },
    )?;
    let (accel, cpu_steps) = m.model.counts();
    let mut resident = m.load(dev, LoadOptions::default())?;
    eprintln!("bench: running it on the RTL simulator");
    let (wall, cpu) = (Instant::now(), thread_cpu_time());
    let r = resident.run(&[Tensor::F32(x)])?;
    let (cpu, wall) = (s(thread_cpu_time().saturating_sub(cpu)), s(wall.elapsed()));
    let sum = |name: &str| r.launches.iter().filter_map(|l| l.get(name)).sum::<u64>();
    Ok(RtlNetworkFigures {
        size,
        config: cfg.config_string(),
        accel_steps: accel,
        cpu_steps,
        cycles: sum("cycles"),
        host_cycles: sum("host_cycles"),
        cpu,
        wall,
    })
}
