//! `vta sim`: run a program on a backend, save its outputs as `.npy`, print the counters.

use std::fmt::{self, Write as _};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use drivers::remote::{RemoteDevice, RemoteOptions};
use drivers::{run_program, Device, RunTimeout};
use isa::asm::{parse_program, AsmContext};
use isa::{container, npy, DType, HwConfig, Program};
use vta_sim::rtl::multicore::{self, MultiCoreDevice};
use vta_sim::rtl::RtlDevice;
use vta_sim::rtl::{MemFaults, MemTiming, RtlOptions, RunLimits};
use vta_sim::FsimDevice;

/// Where a program or model runs (`--backend`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    /// The functional simulator: bit-exact and token-checked, no timing
    Fsim,
    /// The cycle-accurate simulator: the accelerator's RTL (`vta hw verilog`) in Verilator
    /// with a DRAM model; cycle counts and the hardware's counters
    Rtl,
    /// The device a `vta serve` serves at `HOST:PORT`
    Remote(String),
    /// The SoC of an FPGA board without a CPU, through its UART bridge on a serial port
    Serial { port: String, baud: u32 },
    /// The same SoC simulated in Verilator, reached through its UART pins by the same driver
    SocSim,
}

/// Help of every `--backend` option.
pub const BACKEND_HELP: &str = "Backend to run on: fsim (the functional simulator: bit-exact \
    and token-checked, no timing), rtl (the cycle-accurate simulator: the accelerator's RTL in \
    Verilator with a DRAM model; cycle counts and the hardware's counters), \
    remote://HOST[:PORT] (the device `vta serve` serves there, port 9091 by default; the token \
    comes from VTA_REMOTE_TOKEN), serial://PORT[?baud=N] (the SoC of an FPGA board without a \
    CPU, `vta hw verilog --soc`, through its UART bridge, e.g. serial:///dev/ttyUSB0; 115200 \
    baud by default) or soc-sim (that SoC simulated in Verilator, reached through its UART pins \
    by the same driver)";

impl std::str::FromStr for Backend {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fsim" => return Ok(Backend::Fsim),
            "rtl" => return Ok(Backend::Rtl),
            "soc-sim" => return Ok(Backend::SocSim),
            _ => {}
        }
        if let Some(rest) = s.strip_prefix("serial://") {
            let (port, baud) = super::soc::parse_serial(s, rest)?;
            return Ok(Backend::Serial { port, baud });
        }
        let Some(addr) = s.strip_prefix("remote://") else {
            return Err(format!(
                "unknown backend '{s}': expected fsim, rtl, remote://HOST[:PORT], \
                 serial://PORT[?baud=N] or soc-sim"
            ));
        };
        let addr = addr.trim_end_matches('/');
        // A port is what follows the last colon, unless that colon is inside [IPv6].
        let (host, port) = match addr.rsplit_once(':') {
            Some((h, p)) if !p.ends_with(']') => (h, Some(p)),
            _ => (addr, None),
        };
        if host.is_empty() {
            return Err(format!("{s}: no host; expected remote://HOST[:PORT]"));
        }
        let port = match port {
            Some(p) => p
                .parse::<u16>()
                .map_err(|_| format!("{s}: port '{p}' is not a number from 0 to 65535"))?,
            None => drivers::remote::DEFAULT_PORT,
        };
        Ok(Backend::Remote(format!("{host}:{port}")))
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Backend::Fsim => f.write_str("fsim"),
            Backend::Rtl => f.write_str("rtl"),
            Backend::Remote(addr) => write!(f, "remote://{addr}"),
            Backend::Serial { port, baud } => write!(f, "serial://{port}?baud={baud}"),
            Backend::SocSim => f.write_str("soc-sim"),
        }
    }
}

/// Connects to the `vta serve` at `addr` for programs built for `cfg` (the token from
/// `VTA_REMOTE_TOKEN`); says where on stderr.
pub fn connect_remote(addr: &str, cfg: &HwConfig) -> Result<RemoteDevice> {
    let opts = RemoteOptions {
        expect: Some(cfg.clone()),
        ..RemoteOptions::from_env()
    };
    let dev = RemoteDevice::connect(addr, opts)?;
    let info = dev.info();
    eprintln!(
        "remote: {} of {} at {addr} ({}, bitstream {})",
        info.device, info.server_id, info.config_string, info.bitstream
    );
    Ok(dev)
}

/// Options of the RTL backend, shared by `vta sim`, `vta run` and `vta demo`.
#[derive(Args, Clone, Debug)]
pub struct RtlArgs {
    /// RTL: memory latency in cycles, from a burst's address to its first data beat (and
    /// from a write's last beat to its response) [default: 20 for reads, 10 for writes]
    #[arg(long, value_name = "N")]
    pub mem_latency: Option<u32>,
    /// RTL: memory bandwidth in bytes per cycle; must divide the AXI bus width (8 bytes on
    /// a 64-bit bus) [default: the bus width]
    #[arg(long, value_name = "N")]
    pub mem_bytes_per_cycle: Option<u32>,
    /// RTL: cycles without progress (no instruction taken or completed, no micro-op, no
    /// memory beat) after which a run stops as hung, with the state of every module
    /// [default: 100000]
    #[arg(long, value_name = "N")]
    pub hang_cycles: Option<u64>,
    /// RTL, fault injection: the memory holds back each AXI channel at random in N percent
    /// of cycles (ready low, a due response delayed; 0..=99). Results must not change; the
    /// cycles go up
    #[arg(long, value_name = "N")]
    pub mem_stall_percent: Option<u8>,
    /// RTL: seed of the --mem-stall-percent pattern [default: 1]
    #[arg(long, value_name = "S", requires = "mem_stall_percent")]
    pub mem_stall_seed: Option<u64>,
}

impl RtlArgs {
    /// The RTL options given, by flag, for refusing them on another backend.
    fn given(&self) -> Vec<&'static str> {
        [
            ("--mem-latency", self.mem_latency.is_some()),
            ("--mem-bytes-per-cycle", self.mem_bytes_per_cycle.is_some()),
            ("--hang-cycles", self.hang_cycles.is_some()),
            ("--mem-stall-percent", self.mem_stall_percent.is_some()),
        ]
        .into_iter()
        .filter(|o| o.1)
        .map(|o| o.0)
        .collect()
    }

    /// Fails when RTL-only options (these, and `extra`: the caller's own, flagged when given)
    /// are given for a backend that would ignore them.
    pub fn refuse_unless_rtl(
        &self,
        backend: &Backend,
        extra: &[(&'static str, bool)],
    ) -> Result<()> {
        let mut given = self.given();
        given.extend(extra.iter().filter(|o| o.1).map(|o| o.0));
        match given.first() {
            Some(opt) if *backend != Backend::Rtl => bail!(
                "{opt} is an option of the cycle-accurate simulator, which this run does not use: \
                 add --backend rtl, or drop {opt}"
            ),
            _ => Ok(()),
        }
    }

    /// The memory timing these options describe for `cfg`'s bus.
    pub fn timing(&self, cfg: &HwConfig) -> Result<MemTiming> {
        let mut t = MemTiming::default();
        if let Some(n) = self.mem_latency {
            if n == 0 {
                bail!("--mem-latency must be at least 1 cycle");
            }
            let hang = self.hang_cycles.unwrap_or(RunLimits::DEFAULT_HANG_CYCLES);
            if u64::from(n) >= hang {
                bail!(
                    "--mem-latency {n}: the run would stop as hung at its first memory access, \
                     since the hang detector stops a run after {hang} cycles without progress \
                     (--hang-cycles); use a latency below {hang}, or raise --hang-cycles above it"
                );
            }
            t.read_latency = n;
            t.write_latency = n;
        }
        if let Some(b) = self.mem_bytes_per_cycle {
            let bus = cfg.axi_data_width / 8;
            if b == 0 || b > bus || !bus.is_multiple_of(b) {
                let ok: Vec<String> = (0..=bus.trailing_zeros())
                    .map(|i| (1u32 << i).to_string())
                    .collect();
                bail!(
                    "--mem-bytes-per-cycle {b}: must divide the {bus}-byte AXI bus of {} (one of {})",
                    cfg.config_string(),
                    ok.join(", ")
                );
            }
            t.beat_interval = bus / b;
        }
        Ok(t)
    }

    /// The faults these options inject.
    pub fn faults(&self) -> Result<MemFaults> {
        match self.mem_stall_percent {
            None => Ok(MemFaults::none()),
            Some(p) if p >= 100 => bail!(
                "--mem-stall-percent {p}: must be below 100 (at 100 the memory never answers)"
            ),
            Some(p) => Ok(MemFaults::stalls(p, self.mem_stall_seed.unwrap_or(1))),
        }
    }

    /// The simulator options these flags give for `cfg` (`vcd`: a model built for tracing).
    pub fn options(&self, cfg: &HwConfig, vcd: bool) -> Result<RtlOptions> {
        Ok(RtlOptions {
            timing: self.timing(cfg)?,
            faults: self.faults()?,
            vcd,
            ..RtlOptions::default()
        })
    }

    /// The hang bound these flags give.
    pub fn hang_cycles(&self) -> u64 {
        self.hang_cycles.unwrap_or(RunLimits::DEFAULT_HANG_CYCLES)
    }

    /// An RTL device for `cfg`: the model compiled into vta (the default config), loaded
    /// from the cache, or built now (progress on stderr). `vcd`: a model built for tracing.
    pub fn device(&self, cfg: &HwConfig, vcd: bool) -> Result<RtlDevice> {
        let mut dev = rtl_device(cfg, &self.options(cfg, vcd)?)?;
        dev.limits.hang_cycles = self.hang_cycles();
        Ok(dev)
    }

    /// The `cores` cores of one multi-core RTL simulation of `cfg` (`--devices
    /// rtl-cores:N`), the model built on first use with progress on stderr.
    pub fn cores(&self, cfg: &HwConfig, cores: u32) -> Result<Vec<MultiCoreDevice>> {
        let opts = self.options(cfg, false)?;
        let mut devs = open_cores_with_progress(cfg, cores, |progress| {
            multicore::open_cores(cfg, cores, &opts, progress)
        })?;
        for d in &mut devs {
            d.limits.hang_cycles = self.hang_cycles();
        }
        Ok(devs)
    }
}

/// Runs `open`, which builds or loads the model of `cores` cores of `cfg` (into the default
/// model cache), reporting a build's stages on stderr.
pub fn open_cores_with_progress<T, E: std::error::Error + Send + Sync + 'static>(
    cfg: &HwConfig,
    cores: u32,
    open: impl FnOnce(&mut dyn FnMut(&str)) -> Result<T, E>,
) -> Result<T> {
    let what = format!("{cores} cores of {}", cfg.config_string());
    with_build_progress(&what, &RtlOptions::default(), open)
        .with_context(|| format!("cannot simulate {what} on the RTL backend"))
}

/// Runs `open` with a progress callback that reports a model build's stages on stderr (a
/// cached or linked model says nothing).
fn with_build_progress<T>(
    what: &str,
    opts: &RtlOptions,
    open: impl FnOnce(&mut dyn FnMut(&str)) -> T,
) -> T {
    let cache = opts.cache_dir();
    let start = std::time::Instant::now();
    let mut building = false;
    let out = open(&mut |stage| {
        if stage.starts_with("verilating") {
            building = true;
            eprintln!(
                "rtl: building the Verilator model of {what}{} (first use; cached in {})",
                if opts.vcd { " with VCD tracing" } else { "" },
                cache.display()
            );
        }
        if building {
            eprintln!("rtl:   {stage} (+{:.1} s)", start.elapsed().as_secs_f64());
        }
    });
    if building {
        eprintln!("rtl: model ready in {:.1} s", start.elapsed().as_secs_f64());
    }
    out
}

/// An RTL device for `cfg` with `opts`: the model compiled into vta (the default config),
/// loaded from the cache, or built now, with the build's stages on stderr.
pub fn rtl_device(cfg: &HwConfig, opts: &RtlOptions) -> Result<RtlDevice> {
    let name = cfg.config_string();
    with_build_progress(&name, opts, |progress| {
        RtlDevice::with_options(cfg, opts, progress)
    })
    .with_context(|| format!("cannot simulate {name} on the RTL backend"))
}

#[derive(Args)]
pub struct SimArgs {
    /// Program: a .vtab container (from `vta asm`) or assembly source
    program: PathBuf,
    #[arg(long, default_value = "fsim", value_name = "BACKEND", help = BACKEND_HELP)]
    backend: Backend,
    /// Run on this config (JSON file or preset) instead of the program's own; the ISA must match
    #[arg(long, value_name = "FILE|PRESET")]
    config: Option<String>,
    /// Replace an input buffer's contents: NAME=FILE.npy (dtype and shape must match)
    #[arg(long = "input", short = 'i', value_name = "NAME=FILE")]
    inputs: Vec<String>,
    /// Write every output buffer to DIR/NAME.npy
    #[arg(short, long, value_name = "DIR", visible_alias = "out")]
    output: Option<PathBuf>,
    /// fsim (local or served): stop a run after this many simulator steps (instructions +
    /// micro-ops) [default: 268435456 = 2^28, about 10 s]
    #[arg(long, value_name = "N")]
    max_steps: Option<u64>,
    /// fsim: fail the run if two modules access the same scratchpad row or DRAM bytes (one
    /// of them writing) in an order no dependency token enforces
    #[arg(long)]
    check_races: bool,
    /// RTL: stop a run after this many clock cycles [default: 268435456 = 2^28, a few
    /// minutes]
    #[arg(long, value_name = "N")]
    max_cycles: Option<u64>,
    #[command(flatten)]
    rtl: RtlArgs,
    /// RTL: write a VCD waveform of the run (the model is built with tracing on first use)
    #[arg(long, value_name = "FILE")]
    vcd: Option<PathBuf>,
    /// RTL: limit the waveform to cycles START..END of the run (from its first register write)
    #[arg(long, value_name = "START:END", requires = "vcd")]
    vcd_window: Option<String>,
    /// RTL: write an instruction trace (Chrome/Perfetto JSON: one track per module, each
    /// instruction and each wait on a token a slice; open it in ui.perfetto.dev)
    #[arg(long, value_name = "FILE.json")]
    trace: Option<PathBuf>,
}

/// `START:END` of `--vcd-window`.
fn parse_window(s: &str) -> Result<(u64, u64)> {
    let parse = |v: &str| {
        v.trim()
            .parse::<u64>()
            .map_err(|_| anyhow!("--vcd-window {s}: expected START:END in cycles, e.g. 1000:2000"))
    };
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| anyhow!("--vcd-window {s}: expected START:END in cycles, e.g. 1000:2000"))?;
    let (a, b) = (parse(a)?, parse(b)?);
    if b <= a {
        bail!("--vcd-window {s}: END must be after START");
    }
    Ok((a, b))
}

/// Loads a container or assembles source text, per the file's first bytes.
fn load_program(path: &Path, config: Option<isa::HwConfig>) -> Result<Program> {
    let bytes = super::read_input(path)?;
    if container::is_container(&bytes) {
        let p = match &config {
            Some(cfg) => container::read_for(&bytes, cfg),
            None => container::read(&bytes),
        };
        return p.with_context(|| format!("{}: cannot load the program", path.display()));
    }
    let hint = container::other_file_hint(&bytes);
    if !hint.is_empty() {
        bail!("{}: not a program{hint}", path.display());
    }
    let src = String::from_utf8(bytes).map_err(|_| {
        anyhow!(
            "{}: neither a .vtab container nor assembly text",
            path.display()
        )
    })?;
    let base_dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let ctx = AsmContext {
        file_name: path.display().to_string(),
        base_dir,
        config,
    };
    Ok(parse_program(&src, &ctx)?)
}

/// Reads `NAME=FILE.npy` and checks it against the program's input segment.
fn load_input(p: &Program, spec: &str) -> Result<(String, Vec<u8>)> {
    let (name, file) = spec
        .split_once('=')
        .ok_or_else(|| anyhow!("--input {spec}: expected NAME=FILE.npy"))?;
    let seg = p.segment(name).ok_or_else(|| {
        let names: Vec<&str> = p
            .segments
            .iter()
            .filter(|s| s.role.input)
            .map(|s| s.name.as_str())
            .collect();
        anyhow!(
            "--input {name}: the program has no buffer '{name}' (inputs: {})",
            names.join(", ")
        )
    })?;
    if !seg.role.input {
        bail!("--input {name}: buffer '{name}' is not declared as an input");
    }
    let arr = npy::read_file(Path::new(file))?;
    if arr.elem.to_dtype() != Some(seg.dtype) || arr.shape != seg.shape {
        bail!(
            "--input {name}: {file} holds {} {:?}, but buffer '{name}' is {} {:?}",
            arr.elem.descr(),
            arr.shape,
            seg.dtype.name(),
            seg.shape
        );
    }
    Ok((name.to_string(), arr.data))
}

/// Up to 16 values of an output, for a quick look without `-o`.
fn preview(dtype: DType, data: &[u8]) -> String {
    let n = data.len() / dtype.size();
    let shown: Vec<String> = (0..n.min(16))
        .map(|i| {
            let b = &data[i * dtype.size()..(i + 1) * dtype.size()];
            match dtype {
                DType::I8 => (b[0] as i8).to_string(),
                DType::U8 => b[0].to_string(),
                DType::I16 => i16::from_le_bytes([b[0], b[1]]).to_string(),
                DType::I32 => i32::from_le_bytes(b.try_into().expect("4 bytes")).to_string(),
                DType::U32 | DType::Uop => {
                    u32::from_le_bytes(b.try_into().expect("4 bytes")).to_string()
                }
            }
        })
        .collect();
    format!(
        "[{}{}]",
        shown.join(", "),
        if n > 16 { ", ..." } else { "" }
    )
}

pub fn run(a: SimArgs) -> Result<String> {
    let config = a
        .config
        .as_deref()
        .map(|s| super::load_config(Some(s)))
        .transpose()?;
    let program = load_program(&a.program, config.clone())?;
    let inputs = a
        .inputs
        .iter()
        .map(|s| load_input(&program, s))
        .collect::<Result<Vec<_>>>()?;
    let cfg = config.unwrap_or_else(|| program.config.clone());
    a.rtl.refuse_unless_rtl(
        &a.backend,
        &[
            ("--max-cycles", a.max_cycles.is_some()),
            ("--vcd", a.vcd.is_some()),
            ("--trace", a.trace.is_some()),
        ],
    )?;
    if a.check_races && a.backend != Backend::Fsim {
        bail!("--check-races is a check of the functional simulator: use it with --backend fsim");
    }
    if a.backend == Backend::Rtl && a.max_steps.is_some() {
        bail!("--max-steps counts functional-simulator steps; the RTL backend's bound is --max-cycles");
    }
    if matches!(a.backend, Backend::Serial { .. } | Backend::SocSim) && a.max_steps.is_some() {
        bail!(
            "--max-steps counts functional-simulator steps; a run on {} is bounded by the \
             wall clock (a minute on a board, ten in simulation)",
            a.backend
        );
    }
    let window = a.vcd_window.as_deref().map(parse_window).transpose()?;
    let mut rtl: Option<RtlDevice> = None;
    let mut fsim: Option<FsimDevice> = None;
    let mut remote: Option<RemoteDevice> = None;
    let mut serial: Option<Box<dyn Device>> = None;
    let dev: &mut dyn Device = match &a.backend {
        Backend::Fsim if a.check_races => fsim.insert(FsimDevice::checking_races(&cfg)),
        Backend::Fsim => fsim.insert(FsimDevice::new(&cfg)),
        Backend::Remote(addr) => {
            let d = remote.insert(connect_remote(addr, &cfg)?);
            if a.max_steps.is_some() && d.info().device != "fsim" {
                bail!(
                    "--max-steps counts functional-simulator steps, but {} serves the {} backend",
                    a.backend,
                    d.info().device
                );
            }
            d
        }
        Backend::Serial { port, baud } => serial
            .insert(super::soc::open_serial(port, *baud, &cfg)?)
            .as_mut(),
        Backend::SocSim => serial
            .insert(Box::new(super::soc::open_sim(&cfg)?))
            .as_mut(),
        Backend::Rtl => {
            let d = rtl.insert(a.rtl.device(&cfg, a.vcd.is_some())?);
            if let Some(path) = &a.vcd {
                d.sim_mut().set_vcd(path, window)?;
            }
            if a.trace.is_some() {
                d.sim_mut().start_trace();
            }
            d
        }
    };
    let timeout = RunTimeout {
        wall: None,
        work: a.max_steps.or(a.max_cycles),
    };
    let result = run_program(dev, &program, &inputs, timeout);
    // The trace is written also when the run failed (it shows where it stopped).
    let mut trace_note = None;
    if let (Some(path), Some(d)) = (&a.trace, rtl.as_mut()) {
        if let Some(t) = d.sim_mut().take_trace() {
            std::fs::write(path, t.to_json())
                .with_context(|| format!("cannot write {}", path.display()))?;
            trace_note = Some(format!(
                "trace: {} slices -> {} (open it in ui.perfetto.dev)",
                t.events.len(),
                path.display()
            ));
        }
    }
    let run = result.with_context(|| {
        format!(
            "{}: run failed on {}{}",
            a.program.display(),
            a.backend,
            trace_note
                .as_ref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        )
    })?;

    let mut text = String::new();
    writeln!(
        text,
        "{}: {} instructions on {} ({}), {:.3} s",
        a.program.display(),
        program.insns.len(),
        run.report.backend,
        cfg.config_string(),
        run.report.wall_time.as_secs_f64()
    )?;
    for (name, data) in &run.outputs {
        let seg = program.segment(name).expect("outputs are segments");
        match &a.output {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
                let path = dir.join(format!("{name}.npy"));
                npy::write_file(&path, npy::elem_of(seg.dtype), &seg.shape, data)?;
                writeln!(
                    text,
                    "output {name} {} {:?} -> {}",
                    seg.dtype.name(),
                    seg.shape,
                    path.display()
                )?;
            }
            None => writeln!(
                text,
                "output {name} {} {:?} = {}",
                seg.dtype.name(),
                seg.shape,
                preview(seg.dtype, data)
            )?,
        }
    }
    writeln!(text, "counters:")?;
    let width = run
        .report
        .counters
        .iter()
        .map(|c| c.0.len())
        .max()
        .unwrap_or(0);
    for (name, v) in &run.report.counters {
        writeln!(text, "  {name:<width$}  {v}")?;
    }
    if serial.is_some() {
        text.push_str(&super::soc::summary(&cfg, &run.report));
    }
    if let Some(d) = &rtl {
        text.push_str(&rtl_summary(&cfg, d, &run.report)?);
        if let Some(path) = &a.vcd {
            writeln!(
                text,
                "vcd: {}{}",
                path.display(),
                window
                    .map(|(s, e)| format!(" (cycles {s}..{e} of the run)"))
                    .unwrap_or_default()
            )?;
        }
        if let Some(n) = trace_note {
            writeln!(text, "{n}")?;
        }
    }
    Ok(text)
}

/// The RTL run's cycle count, the hardware's per-module busy and stall counters, and the
/// GEMM core's utilization.
fn rtl_summary(cfg: &HwConfig, d: &RtlDevice, r: &drivers::RunReport) -> Result<String> {
    let mut text = String::new();
    let get = |n: &str| r.get(n).unwrap_or(0);
    let cycles = get("cycles");
    let t = d.sim().memory().timing();
    let bus = cfg.axi_data_width / 8;
    let stalls = match d.sim().memory().faults().stalls {
        Some(s) => format!(", {}% random stalls (seed {})", s.ar, s.seed),
        None => String::new(),
    };
    writeln!(
        text,
        "cycles: {cycles} ({:.3} us at {} MHz); memory: {}-cycle read latency, {:.0} bytes/cycle{stalls}",
        cycles as f64 / cfg.clock_mhz as f64,
        cfg.clock_mhz,
        t.read_latency,
        bus as f64 / t.beat_interval as f64
    )?;
    let pct = |v: u64| 100.0 * v as f64 / cycles.max(1) as f64;
    writeln!(text, "hardware counters (cycles):")?;
    writeln!(text, "  module     busy   stall  busy%  stall%")?;
    for m in ["load", "compute", "store"] {
        let (b, s) = (get(&format!("{m}_busy")), get(&format!("{m}_stall")));
        writeln!(
            text,
            "  {m:<8} {b:>6}  {s:>6}  {:5.1}  {:6.1}",
            pct(b),
            pct(s)
        )?;
    }
    let dma = get("dma_busy");
    writeln!(
        text,
        "  dma      {dma:>6}       -  {:5.1}       -",
        pct(dma)
    )?;
    writeln!(
        text,
        "GEMM core utilization: {} GEMM micro-ops in {cycles} cycles ({:.1}%); AXI beats: {} read, {} written",
        get("gemm_uops"),
        pct(get("gemm_uops")),
        get("axi_read_beats"),
        get("axi_write_beats")
    )?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::Backend;

    #[test]
    fn backends_parse_and_print_back() {
        let remote = |a: &str| Backend::Remote(a.into());
        let serial = |port: &str, baud| Backend::Serial {
            port: port.into(),
            baud,
        };
        for (text, want, shown) in [
            ("fsim", Backend::Fsim, "fsim"),
            ("rtl", Backend::Rtl, "rtl"),
            (
                "remote://board",
                remote("board:9091"),
                "remote://board:9091",
            ),
            (
                "remote://10.0.0.2:7000/",
                remote("10.0.0.2:7000"),
                "remote://10.0.0.2:7000",
            ),
            (
                "remote://[::1]",
                remote("[::1]:9091"),
                "remote://[::1]:9091",
            ),
            ("remote://[::1]:5", remote("[::1]:5"), "remote://[::1]:5"),
            ("soc-sim", Backend::SocSim, "soc-sim"),
            (
                "serial:///dev/ttyUSB1",
                serial("/dev/ttyUSB1", 115_200),
                "serial:///dev/ttyUSB1?baud=115200",
            ),
            (
                "serial:///dev/ttyACM0?baud=3000000",
                serial("/dev/ttyACM0", 3_000_000),
                "serial:///dev/ttyACM0?baud=3000000",
            ),
        ] {
            let got: Backend = text.parse().unwrap();
            assert_eq!(got, want, "{text}");
            assert_eq!(got.to_string(), shown);
        }
        for (text, says) in [
            ("remote://", "no host"),
            ("remote://:80", "no host"),
            ("remote://h:x", "port 'x'"),
            (
                "gpu",
                "expected fsim, rtl, remote://HOST[:PORT], serial://PORT[?baud=N] or soc-sim",
            ),
            ("serial://", "no port"),
            ("serial:///dev/ttyUSB0?speed=9", "unknown option 'speed=9'"),
            (
                "serial:///dev/ttyUSB0?baud=fast",
                "baud 'fast' is not a positive number",
            ),
        ] {
            let e = text.parse::<Backend>().unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
