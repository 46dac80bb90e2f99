//! `vta-board`: the one file copied to a Zynq board. It loads a bitstream through the kernel's
//! FPGA manager, runs compiled models (`vta compile` output) on the accelerator through the
//! board device (`drivers::board::BoardDevice`), times their CPU steps on the board's cores
//! (a CPU profile for `vta bench schedule --time device`), and serves that device to workstations
//! (`vta run --backend remote://BOARD:PORT`, the remote runner of `drivers::remote`). It links the runtime and the device HAL
//! only, so it cross-builds for armv7 and aarch64 without the simulators, the HDL or a C++
//! toolchain (`scripts/cross-build.sh`).

use std::net::{TcpListener, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use drivers::board::{bitstream, clock, BoardDevice, BoardOptions, BoardPaths, RegisterWindow};
use drivers::remote::{serve, ServeOptions, TOKEN_ENV};
use isa::npy;
use vta_runtime::exec::{profile, DeviceSpec, ExecOptions, Executor};
use vta_runtime::io::{concat_samples, tensor_from_npy, tensor_to_npy};
use vta_runtime::resident::LoadOptions;

#[derive(Parser)]
#[command(
    name = "vta-board",
    version,
    about = "Run compiled models on a Zynq board's VTA accelerator"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Load a .bit file into the fabric (FPGA manager) and set the fabric clock.
    Load {
        /// The .bit file `vta hw bitstream` built.
        bitstream: PathBuf,
        /// The processing system: ps7 (Zynq-7000: PYNQ-Z1/Z2) or ps8 (ZU+: Ultra96, ZCU104,
        /// KV260).
        #[arg(long, value_enum)]
        ps: Ps,
        /// FCLK0 in MHz (default: the accelerator's clock in the --hwh file).
        #[arg(long)]
        clock_mhz: Option<u32>,
        #[command(flatten)]
        board: BoardArgs,
    },
    /// Run a compiled model: inputs from .npy files, outputs to .npy files.
    Run {
        #[command(flatten)]
        model: ModelArgs,
        /// One .npy per model output, in order.
        #[arg(long = "output", short, required = true)]
        outputs: Vec<PathBuf>,
        #[command(flatten)]
        board: BoardArgs,
    },
    /// Time each CPU step of a compiled model on this board's cores, its launches on the
    /// accelerator: a CPU profile for `vta bench schedule --time device --cpu-profile FILE`,
    /// which then predicts every scheduling policy on this board without it (of a batch of
    /// inputs, the first inference is timed).
    Profile {
        #[command(flatten)]
        model: ModelArgs,
        /// Where to write the profile (JSON).
        #[arg(long, short, value_name = "FILE.json")]
        output: PathBuf,
        /// Serial runs per step; its fastest is kept.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        #[command(flatten)]
        board: BoardArgs,
    },
    /// Serve the accelerator to workstations: `vta run|sim|demo --backend
    /// remote://BOARD:PORT` (the token from --token or VTA_REMOTE_TOKEN on both sides).
    Serve {
        /// Address to listen on (port 0 picks a free one; the bound address is printed on
        /// stderr). An address other hosts can reach needs a token.
        #[arg(long, default_value = "127.0.0.1:9091")]
        listen: String,
        /// The accelerator config the loaded bitstream implements: a preset name or a JSON
        /// file (its ISA hash is checked against the bitstream's).
        #[arg(long, default_value = "default")]
        config: String,
        /// Shared secret every client must present [default: $VTA_REMOTE_TOKEN, else none,
        /// which only a loopback address allows].
        #[arg(long)]
        token: Option<String>,
        /// MiB of uploaded data kept, so a model's weights are sent once.
        #[arg(long, default_value_t = 64)]
        cache_mib: u64,
        /// Wall-clock bound of a launch whose client gives none, in seconds.
        #[arg(long, default_value_t = 10.0)]
        timeout: f64,
        #[command(flatten)]
        board: BoardArgs,
    },
}

/// A compiled model, its inputs and how it runs: what `run` and `profile` take.
#[derive(Args)]
struct ModelArgs {
    /// The compiled model (`vta compile -o MODEL.vtab`).
    model: PathBuf,
    /// One .npy per model input, in order; a first axis k times the model's runs k
    /// inferences.
    #[arg(long = "input", short, required = true)]
    inputs: Vec<PathBuf>,
    /// Wall-clock bound of each accelerator launch, in seconds.
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
    /// Most memory all of the model's tensors together may take (e.g. 256MiB, or bytes);
    /// a model beyond it is refused, naming the tensor, before anything is allocated
    /// [default: 4GiB]
    #[arg(long, value_name = "SIZE", value_parser = vta_runtime::budget::parse_size)]
    memory_budget: Option<u64>,
}

#[derive(Clone, Copy, ValueEnum)]
enum Ps {
    Ps7,
    Ps8,
}

/// Where the board's files are.
#[derive(Args)]
struct BoardArgs {
    /// Prefix of /dev, /sys and /lib/firmware (a chroot, or an emulated board in tests).
    #[arg(long, default_value = "/")]
    root: PathBuf,
    /// The accelerator's registers through /dev/uioN (a generic-uio device tree node).
    #[arg(long, default_value_t = 0, conflicts_with_all = ["base", "hwh"])]
    uio: u32,
    /// The accelerator's registers through /dev/mem at this base address (hex; the
    /// s_axi_control BASEVALUE of the .hwh), instead of UIO.
    #[arg(long, value_parser = parse_hex, conflicts_with = "hwh")]
    base: Option<u64>,
    /// Vivado's .hwh next to the .bit: the registers through /dev/mem at the accelerator's
    /// base address in it (and, for `load`, its clock).
    #[arg(long)]
    hwh: Option<PathBuf>,
    /// The accelerator's cell in the block design (`vta hw bitstream` names core k vta_k).
    #[arg(long, default_value = "vta_0", conflicts_with = "core")]
    instance: String,
    /// Which accelerator core of the --hwh file to open, counting from 0, for a bitstream of
    /// several (`vta hw bitstream --cores N`): core K is cell vta_K at its own register window
    #[arg(long, value_name = "K", requires = "hwh")]
    core: Option<usize>,
    /// The u-dma-buf buffer (`insmod u-dma-buf.ko udmabuf0=SIZE`).
    #[arg(long, default_value = "udmabuf0")]
    udmabuf: String,
}

fn parse_hex(s: &str) -> Result<u64, String> {
    let h = s.trim_start_matches("0x").trim_start_matches("0X");
    u64::from_str_radix(h, 16).map_err(|_| format!("'{s}' is not a hex address"))
}

impl BoardArgs {
    /// The parsed --hwh file, if given.
    fn hwh(&self) -> Result<Option<bitstreams::hwh::Hwh>> {
        let Some(path) = &self.hwh else {
            return Ok(None);
        };
        Ok(Some(bitstreams::hwh::read_file(path)?))
    }

    /// The accelerator's cell and register base in `h`: core --core, else cell --instance.
    fn cell(&self, h: &bitstreams::hwh::Hwh) -> Result<(String, u64)> {
        let file = self.hwh.as_ref().expect("parsed").display();
        if let Some(k) = self.core {
            let c = h.core(k).map_err(|e| anyhow!("{file}: --core {k}: {e}"))?;
            return Ok((c.instance, c.base));
        }
        let (base, _) = h.registers(&self.instance).ok_or_else(|| {
            anyhow!(
                "{file}: no register window of cell '{}' (see --instance, or --core for a \
                 bitstream of several cores)",
                self.instance
            )
        })?;
        Ok((self.instance.clone(), base))
    }

    fn options(&self, wall: Duration) -> Result<BoardOptions> {
        let base = match self.hwh()? {
            Some(h) => Some(self.cell(&h)?.1),
            None => self.base,
        };
        Ok(BoardOptions {
            paths: BoardPaths::at(&self.root),
            registers: match base {
                Some(b) => RegisterWindow::DevMem(b),
                None => RegisterWindow::Uio(self.uio),
            },
            udmabuf: self.udmabuf.clone(),
            default_wall: wall,
            ..BoardOptions::default()
        })
    }
}

fn main() {
    if let Err(e) = run(Cli::parse()) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.cmd {
        Cmd::Load {
            bitstream: file,
            ps,
            clock_mhz,
            board,
        } => {
            let opts = board.options(Duration::from_secs(10))?;
            let clock_mhz = match (clock_mhz, board.hwh()?) {
                (Some(mhz), _) => mhz,
                (None, Some(h)) => {
                    let (cell, _) = board.cell(&h)?;
                    let hz = h
                        .clock_hz(&cell)
                        .ok_or_else(|| anyhow!("the .hwh has no clock for cell '{cell}'"))?;
                    (hz / 1_000_000) as u32
                }
                (None, None) => bail!("give --clock-mhz, or --hwh to take the clock from"),
            };
            let bit =
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let (h, fw) = bitstream::load(&opts.paths, &bit, &file.display().to_string(), "vta")?;
            eprintln!(
                "loaded {} ({}, part {}, {} {}) via {}",
                file.display(),
                h.design,
                h.part,
                h.date,
                h.time,
                fw.display()
            );
            let ps = match ps {
                Ps::Ps7 => clock::Ps::Ps7,
                Ps::Ps8 => clock::Ps::Ps8,
            };
            let mhz = clock::set_fclk0(&opts.paths, ps, clock_mhz)?;
            eprintln!("FCLK0 at {mhz:.3} MHz");
            Ok(())
        }
        Cmd::Run {
            model,
            outputs,
            board,
        } => run_model(&model, &outputs, &board),
        Cmd::Profile {
            model,
            output,
            runs,
            board,
        } => profile_model(&model, &output, runs, &board),
        Cmd::Serve {
            listen,
            config,
            token,
            cache_mib,
            timeout,
            board,
        } => serve_board(&listen, &config, token, cache_mib, timeout, &board),
    }
}

fn serve_board(
    listen: &str,
    config: &str,
    token: Option<String>,
    cache_mib: u64,
    timeout: f64,
    board: &BoardArgs,
) -> Result<()> {
    if !(timeout > 0.0 && timeout.is_finite()) {
        bail!("--timeout {timeout}: give a positive number of seconds");
    }
    let cfg = isa::HwConfig::load(config).map_err(|e| anyhow!("--config {config}: {e}"))?;
    let token = token.unwrap_or_else(|| std::env::var(TOKEN_ENV).unwrap_or_default());
    let addrs: Vec<_> = listen
        .to_socket_addrs()
        .with_context(|| format!("--listen {listen}: expected HOST:PORT"))?
        .collect();
    if token.is_empty() {
        if let Some(open) = addrs.iter().find(|a| !a.ip().is_loopback()) {
            bail!(
                "--listen {listen}: {open} is reachable from other hosts, so clients must \
                 present a token: give --token or set {TOKEN_ENV}"
            );
        }
    }
    let opts = board.options(Duration::from_secs_f64(timeout))?;
    let mut dev = BoardDevice::open(&cfg, &opts)?;
    let listener = TcpListener::bind(addrs.as_slice())
        .with_context(|| format!("cannot listen on {listen}"))?;
    let bound = listener.local_addr()?;
    eprintln!(
        "vta-board serve: listening on {bound} (board, {}, {})",
        cfg.config_string(),
        if token.is_empty() {
            "no token"
        } else {
            "token required"
        }
    );
    let serve_opts = ServeOptions {
        token,
        server_id: "vta-board".into(),
        bitstream: format!("isa:{:016x}", cfg.isa_hash()),
        cache_bytes: cache_mib
            .checked_mul(1 << 20)
            .ok_or_else(|| anyhow!("--cache-mib {cache_mib} is too large"))?,
        log: Some(Arc::new(|line: &str| eprintln!("vta-board serve: {line}"))),
        ..ServeOptions::default()
    };
    serve(listener, &mut dev, serve_opts).with_context(|| format!("serving on {bound}"))
}

/// The compiled model (within its memory budget) and its inputs, one list per inference.
fn read_model(a: &ModelArgs) -> Result<(vta_runtime::Model, Vec<Vec<vta_runtime::Tensor>>)> {
    let (file, timeout) = (&a.model, a.timeout);
    if !(timeout > 0.0 && timeout.is_finite()) {
        bail!("--timeout {timeout}: give a positive number of seconds");
    }
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let budget = a
        .memory_budget
        .unwrap_or(vta_runtime::budget::DEFAULT_MEMORY_BUDGET);
    let model = vta_runtime::file::read(&bytes, None, budget)
        .map_err(|e| anyhow!("{}: {e}", file.display()))?;
    let tensors = a
        .inputs
        .iter()
        .map(|p| {
            let a = npy::read_file(p)?;
            tensor_from_npy(&a).map_err(|e| anyhow!("{}: {e}", p.display()))
        })
        .collect::<Result<Vec<_>>>()?;
    let runs = model
        .split_samples(tensors)
        .map_err(|e| anyhow!("inputs: {e}"))?;
    Ok((model, runs))
}

fn profile_model(a: &ModelArgs, output: &Path, runs: usize, board: &BoardArgs) -> Result<()> {
    if runs == 0 {
        bail!("--runs must be at least 1");
    }
    let file = &a.model;
    let (model, samples) = read_model(a)?;
    let x = samples
        .into_iter()
        .next()
        .context("inputs: no inference in them")?;
    let opts = board.options(Duration::from_secs_f64(a.timeout))?;
    // The serial run on the board is the reference every profiling run must reproduce.
    let want = {
        let mut dev = BoardDevice::open(&model.config, &opts)?;
        let mut resident = model
            .load(&mut dev, LoadOptions::default())
            .context("loading the model onto the board")?;
        resident.run(&x).context("the serial run")?.outputs
    };
    let model = Arc::new(model);
    let cfg = model.config.clone();
    let board_dev = DeviceSpec::new("board", move || {
        BoardDevice::open(&cfg, &opts)
            .map(|d| Box::new(d) as Box<dyn drivers::Device>)
            .map_err(|e| e.to_string())
    });
    let ex = Executor::new(
        Arc::clone(&model),
        vec![board_dev],
        ExecOptions {
            trace: true,
            ..ExecOptions::default()
        },
    )?;
    let secs = profile::measure(&ex, &x, &want, runs)?;
    let measured_on = format!(
        "vta-board on {} ({} cores), the fastest of {runs} serial run(s) per step",
        std::env::consts::ARCH,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let doc = profile::to_json(
        &model,
        ex.graph(),
        &secs,
        &file.display().to_string(),
        &measured_on,
    );
    let text = serde_json::to_string_pretty(&doc)? + "\n";
    std::fs::write(output, text).with_context(|| format!("writing {}", output.display()))?;
    let cpu_us: f64 = ex
        .graph()
        .tasks
        .iter()
        .zip(&secs)
        .filter(|(t, _)| !t.is_launch())
        .map(|(_, s)| s * 1e6)
        .sum();
    eprintln!(
        "profiled {} CPU step(s) of {} ({cpu_us:.0} us per inference on the CPU), wrote {}",
        ex.graph().tasks.iter().filter(|t| !t.is_launch()).count(),
        file.display(),
        output.display()
    );
    Ok(())
}

fn run_model(a: &ModelArgs, outputs: &[PathBuf], board: &BoardArgs) -> Result<()> {
    let (model, runs) = read_model(a)?;
    let plan = &model.plan;
    if outputs.len() != plan.outputs.len() {
        bail!(
            "the model has {} output(s); give one --output per output ({} given)",
            plan.outputs.len(),
            outputs.len()
        );
    }

    let opts = board.options(Duration::from_secs_f64(a.timeout))?;
    let mut dev = BoardDevice::open(&model.config, &opts)?;
    let mut resident = model
        .load(&mut dev, LoadOptions::default())
        .context("loading the model onto the board")?;
    let mut per_output: Vec<Vec<_>> = vec![Vec::new(); outputs.len()];
    let t = Instant::now();
    for (i, x) in runs.iter().enumerate() {
        let r = resident
            .run(x)
            .with_context(|| format!("inference {} of {}", i + 1, runs.len()))?;
        let cycles: u64 = r.launches.iter().filter_map(|l| l.get("cycles")).sum();
        eprintln!(
            "inference {}: {:.3} ms host, {} B to the device, {} B back, {} device cycles in {} launch(es)",
            i + 1,
            r.wall.as_secs_f64() * 1e3,
            r.host_to_device_bytes(),
            r.device_to_host_bytes(),
            cycles,
            r.launches.len()
        );
        for (k, o) in r.outputs.into_iter().enumerate() {
            per_output[k].push(o);
        }
    }
    eprintln!(
        "{} inference(s) in {:.3} s",
        runs.len(),
        t.elapsed().as_secs_f64()
    );
    for (path, parts) in outputs.iter().zip(per_output) {
        let t = concat_samples(&parts).map_err(|e| anyhow!("outputs: {e}"))?;
        let (elem, shape, data) = tensor_to_npy(&t);
        npy::write_file(path, elem, &shape, &data)?;
    }
    Ok(())
}
