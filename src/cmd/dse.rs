//! `vta dse`: design-space exploration. Sweeps accelerator configs for a network on an FPGA
//! part or board (the `dse` crate does the work), prints the table and the best config that
//! fits, and writes CSV, JSON and an SVG Pareto plot.

use std::path::PathBuf;
use std::sync::Mutex;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, ValueEnum};
use dse::accuracy::EvalSet;
use dse::cache::Cache;
use dse::explore::{explore, Exploration, Observer, Options};
use dse::measure::CycleSource;
use dse::network::{Network, NetworkSpec};
use dse::resources::Target;
use dse::sweep::{self, Axes, Param, Shard};

mod slurm;

use super::progress::Progress;

/// Help heading of the axis options.
const AXES: &str = "Sweep axes (without any: block 8,16,32 x wgt-depth 512,1024 x bus 64,128, \
                    with 2048 INP and ACC rows)";

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Net {
    /// ResNet-18 from `vta zoo` (seed 0), calibrated on one pseudo-random sample
    Resnet18,
    /// The embedded trained digits CNN (8x8 inputs), calibrated on its own samples
    Digits,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Cycles {
    /// The analytic cycle model (milliseconds per config; its error against the RTL is
    /// reported with --validate)
    Model,
    /// The RTL simulator (exact; seconds per run of a network, and minutes to build the
    /// Verilator model of each new config)
    Rtl,
}

#[derive(Args)]
pub struct DseArgs {
    /// Built-in network to compile for every config [default: resnet18]
    #[arg(long, value_enum, conflicts_with = "model")]
    net: Option<Net>,
    /// ResNet-18's input height and width
    #[arg(long, default_value_t = 224, value_name = "N")]
    size: usize,
    /// An ONNX model to compile for every config instead of a built-in network
    #[arg(long, value_name = "FILE.onnx")]
    model: Option<PathBuf>,
    /// Calibration inputs of a float --model (.npy), repeatable (see `vta compile`)
    #[arg(long, value_name = "X.npy", requires = "model")]
    calibrate: Vec<PathBuf>,
    /// Also measure each config's top-1 accuracy, on the functional simulator, and make it an
    /// objective of the front: `--net digits` uses its 100 test digits; a --model needs
    /// --eval and --labels
    #[arg(long)]
    accuracy: bool,
    /// Evaluation inputs for --accuracy (.npy, the model's input with samples stacked on the
    /// first axis)
    #[arg(long, value_name = "X.npy", requires = "labels")]
    eval: Option<PathBuf>,
    /// The class of each --eval sample (.npy of integers)
    #[arg(long, value_name = "Y.npy", requires = "eval")]
    labels: Option<PathBuf>,
    /// FPGA part (xc7z020, xc7z010, xc7z045) [default: xc7z020]
    #[arg(long, conflicts_with = "board")]
    part: Option<String>,
    /// Board instead of a part: a Zynq board (pynq-z1, pynq-z2, ultra96-v2, zcu104, kv260:
    /// also checks the clock against what the board gives the fabric, and memory moves at most
    /// the board's DRAM port width per cycle), an ECP5/Gowin board (ulx3s-85f, ulx3s-25f,
    /// orangecrab-85f, tang-nano-20k, tang-mega-138k-pro: the SoC placed and routed by the
    /// open flow, tens of minutes per config, whose routed Fmax must reach the clock), or a
    /// board file
    #[arg(long, value_name = "NAME|FILE")]
    board: Option<String>,
    /// Base config: the parameters no axis sweeps come from it [default: default, or the
    /// sweep file's "base"]
    #[arg(long, value_name = "FILE|PRESET")]
    config: Option<String>,
    /// Sweep file (.json or .toml): axis keys (batch, block, block_in, block_out,
    /// log_uop_buff, log_inp_buff, log_wgt_buff, log_acc_buff, inp_depth, wgt_depth,
    /// acc_depth, inp_width, wgt_width, acc_width, bus, clock) to values (a number, a list,
    /// or a string such as "8..32"), and optionally "base"; axes given as options override
    /// the file's
    #[arg(long, value_name = "FILE")]
    sweep: Option<PathBuf>,
    /// Input (and output) widths in bits: 2, 4, 8 (e.g. 4,8); scratchpads keep their depth
    /// in elements, and the network is post-training quantized to each config's widths
    #[arg(long, value_name = "VALUES", help_heading = AXES)]
    inp_width: Option<String>,
    /// Weight widths in bits: 2, 4, 8
    #[arg(long, value_name = "VALUES", help_heading = AXES)]
    wgt_width: Option<String>,
    /// Accumulator widths in bits: 16, 32 (the compiled networks need 32)
    #[arg(long, value_name = "VALUES", help_heading = AXES)]
    acc_width: Option<String>,
    /// BATCH values: 1,2 or 1..4 (ranges of the power-of-two axes double)
    #[arg(long, value_name = "VALUES", help_heading = AXES)]
    batch: Option<String>,
    /// BLOCK_IN = BLOCK_OUT values (square blocks)
    #[arg(long, value_name = "VALUES", help_heading = AXES)]
    block: Option<String>,
    /// BLOCK_IN values
    #[arg(long, value_name = "VALUES", help_heading = AXES)]
    block_in: Option<String>,
    /// BLOCK_OUT values
    #[arg(long, value_name = "VALUES", help_heading = AXES)]
    block_out: Option<String>,
    /// LOG_UOP_BUFF_SIZE values (log2 bytes; ranges step by one: 14..16)
    #[arg(long, value_name = "VALUES", help_heading = AXES)]
    log_uop_buff: Option<String>,
    /// LOG_INP_BUFF_SIZE values (log2 bytes)
    #[arg(long, value_name = "VALUES", help_heading = AXES)]
    log_inp_buff: Option<String>,
    /// LOG_WGT_BUFF_SIZE values (log2 bytes)
    #[arg(long, value_name = "VALUES", help_heading = AXES)]
    log_wgt_buff: Option<String>,
    /// LOG_ACC_BUFF_SIZE values (log2 bytes)
    #[arg(long, value_name = "VALUES", help_heading = AXES)]
    log_acc_buff: Option<String>,
    /// INP buffer depths in rows (elements), instead of --log-inp-buff: the bytes follow the
    /// block (ranges double: 1024..4096)
    #[arg(long, value_name = "VALUES", help_heading = AXES)]
    inp_depth: Option<String>,
    /// WGT buffer depths in tiles, instead of --log-wgt-buff
    #[arg(long, value_name = "VALUES", help_heading = AXES)]
    wgt_depth: Option<String>,
    /// ACC buffer depths in rows, instead of --log-acc-buff
    #[arg(long, value_name = "VALUES", help_heading = AXES)]
    acc_depth: Option<String>,
    /// AXI_DATA_WIDTH values (bits: 64..512)
    #[arg(long, value_name = "VALUES", help_heading = AXES)]
    bus: Option<String>,
    /// CLOCK_MHZ values (100..200:25 steps by 25; latency scales with it; yosys does no
    /// timing analysis, so on a part or Zynq board only the fabric limit is checked, on an
    /// ECP5/Gowin board the routed Fmax)
    #[arg(long, value_name = "VALUES", help_heading = AXES)]
    clock: Option<String>,
    /// Where every config's cycles come from
    #[arg(long, value_enum, default_value_t = Cycles::Model)]
    cycles: Cycles,
    /// With the cycle model: also run this many configs (the Pareto front's first) on the RTL
    /// simulator and report the model's error on them
    #[arg(long, default_value_t = 0, value_name = "N")]
    validate: usize,
    /// Configs evaluated at once [default: the number of cores]
    #[arg(short, long, value_name = "N")]
    jobs: Option<usize>,
    /// Measure and synthesize everything again, overwriting the cache
    #[arg(long)]
    fresh: bool,
    /// Cache directory [default: $VTA_CACHE_DIR, else $XDG_CACHE_HOME/vta, else ~/.cache/vta]
    #[arg(long, value_name = "DIR")]
    cache: Option<PathBuf>,
    /// Directory for results.csv, results.json and pareto.svg [default: dse-NETWORK-PART]
    #[arg(short, long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Print the JSON document instead of the table
    #[arg(long)]
    json: bool,
    /// Evaluate only shard I of N of the sweep's configs (I from 0), into the cache, for a
    /// cluster's array job; `--merge N` then writes the results. Default in a Slurm array task:
    /// SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT
    #[arg(long, value_name = "I/N", conflicts_with_all = ["merge", "dry_run"])]
    shard: Option<String>,
    /// Write the results of a sweep run as N shards from the cache alone, measuring nothing;
    /// names each config not there with the command that reruns its shard
    #[arg(long, value_name = "N", conflicts_with_all = ["fresh", "dry_run"], value_parser = clap::value_parser!(u32).range(1..=100000))]
    merge: Option<u32>,
    #[command(flatten)]
    slurm: slurm::SlurmArgs,
    /// Only list the sweep's configs (with their scratchpads' block RAM) and the skipped
    /// combinations; measure and synthesize nothing
    #[arg(long)]
    dry_run: bool,
}

impl DseArgs {
    /// The axes given as options, by parameter.
    fn axis_options(&self) -> [(Param, Option<&String>); 16] {
        [
            (Param::InpWidth, self.inp_width.as_ref()),
            (Param::WgtWidth, self.wgt_width.as_ref()),
            (Param::AccWidth, self.acc_width.as_ref()),
            (Param::Batch, self.batch.as_ref()),
            (Param::Block, self.block.as_ref()),
            (Param::BlockIn, self.block_in.as_ref()),
            (Param::BlockOut, self.block_out.as_ref()),
            (Param::LogUopBuff, self.log_uop_buff.as_ref()),
            (Param::LogInpBuff, self.log_inp_buff.as_ref()),
            (Param::LogWgtBuff, self.log_wgt_buff.as_ref()),
            (Param::LogAccBuff, self.log_acc_buff.as_ref()),
            (Param::InpDepth, self.inp_depth.as_ref()),
            (Param::WgtDepth, self.wgt_depth.as_ref()),
            (Param::AccDepth, self.acc_depth.as_ref()),
            (Param::Bus, self.bus.as_ref()),
            (Param::Clock, self.clock.as_ref()),
        ]
    }

    /// The sweep's axes and its base config's spec.
    fn axes(&self) -> Result<(Axes, String)> {
        let (axes, file_base) = match &self.sweep {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("cannot read the sweep file {}", path.display()))?;
                let toml = path.extension().is_some_and(|e| e == "toml");
                Axes::from_file_text(&text, toml, &path.display().to_string())
                    .map_err(anyhow::Error::msg)?
            }
            None => (Axes::default(), None),
        };
        let mut options = Axes::default();
        for (param, text) in self.axis_options() {
            if let Some(text) = text {
                let flag = format!("--{}", param.key().replace('_', "-"));
                let values =
                    sweep::parse_values(param, text).map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
                options
                    .set(param, values)
                    .map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
            }
        }
        let mut axes = axes.overridden_by(&options);
        if axes.is_empty() {
            axes = Axes::default_sweep();
        }
        let base = self
            .config
            .clone()
            .or(file_base)
            .unwrap_or_else(|| "default".into());
        Ok((axes, base))
    }
}

/// The progress bar of each phase.
struct Bars(Mutex<Option<Progress>>);

impl Observer for Bars {
    fn planned(&self, phase: &str, work: usize, cached: usize) {
        let mut bar = self.0.lock().expect("progress lock");
        // The previous phase's bar is cleared first.
        *bar = None;
        if cached > 0 {
            eprintln!("dse: {phase}: {cached} config(s) from the cache");
        }
        if work > 0 {
            *bar = Some(Progress::bar(&format!("dse: {phase}"), work as u64));
        }
    }

    fn stage(&self, config: &str, stage: &str) {
        if let Some(b) = &*self.0.lock().expect("progress lock") {
            b.message(&format!("{config}: {stage}"));
        }
    }

    fn done(&self, _config: &str, worked: bool) {
        if let (true, Some(b)) = (worked, &*self.0.lock().expect("progress lock")) {
            b.inc();
        }
    }
}

/// The configs a sweep would evaluate, and the combinations it skips.
fn dry_run(plan: &sweep::Plan, target: &Target) -> String {
    let mut text = format!(
        "{} combinations: {} valid, {} skipped\n",
        plan.combinations,
        plan.configs.len(),
        plan.skipped.len()
    );
    for c in &plan.configs {
        let bram = dse::resources::scratchpad_bram36(c);
        text.push_str(&format!(
            "  {:<30} bus {:>3}, {} MHz: scratchpads {bram} BRAM36{}\n",
            c.config_string(),
            c.axi_data_width,
            c.clock_mhz,
            if bram > target.capacity.bram36 {
                format!(" > {} (not synthesized)", target.capacity.bram36)
            } else {
                String::new()
            }
        ));
    }
    for (n, reason) in sweep::skip_summary(&plan.skipped) {
        text.push_str(&format!("  skipped {n} x {reason}\n"));
    }
    text
}

pub fn run(a: DseArgs) -> Result<String> {
    let spec = match (&a.model, a.net) {
        (Some(path), _) => NetworkSpec::File {
            path: path.clone(),
            calibration: a.calibrate.clone(),
        },
        (None, Some(Net::Digits)) => NetworkSpec::Digits,
        (None, Some(Net::Resnet18) | None) => NetworkSpec::Resnet18 { size: a.size },
    };
    if a.size != 224 && !matches!(spec, NetworkSpec::Resnet18 { .. }) {
        bail!(
            "--size applies to ResNet-18 only (the network here is {})",
            spec.name()
        );
    }
    if a.validate > 0 && a.cycles == Cycles::Rtl {
        bail!("--validate checks the cycle model against the RTL; with --cycles rtl every config already runs on the RTL");
    }
    let eval = match (&a.eval, &a.labels, &spec) {
        (Some(x), Some(y), _) => Some(EvalSet::from_files(x, y)?),
        (None, _, NetworkSpec::Digits) if a.accuracy => Some(EvalSet::digits()?),
        (None, _, _) if a.accuracy => bail!(
            "--accuracy needs labelled samples for {}: give --eval X.npy --labels Y.npy (only \
             --net digits has its own)",
            spec.name()
        ),
        _ => None,
    };
    let target = match (&a.board, &a.part) {
        (Some(b), _) => Target::board(b)?,
        (None, p) => Target::part(p.as_deref().unwrap_or("xc7z020"))?,
    };
    let (axes, base_spec) = a.axes()?;
    let base = super::load_config(Some(&base_spec))?;
    let full = sweep::expand(&base, &axes);
    let shard = match (&a.shard, a.merge) {
        (Some(s), _) => Some(Shard::parse(s).map_err(|e| anyhow!("--shard: {e}"))?),
        (None, None) if !a.dry_run => Shard::from_env().transpose().map_err(|e| anyhow!(e))?,
        _ => None,
    };
    let plan = match shard {
        Some(s) => full.shard(s),
        None => full.clone(),
    };
    if let Some(shards) = a.slurm.shards {
        if a.shard.is_some() || a.merge.is_some() || a.dry_run {
            bail!("--slurm submits the shards and the merge itself: drop --shard, --merge and --dry-run");
        }
        let out_dir = a.output.clone().unwrap_or_else(|| {
            let part = target.name.split(' ').next().unwrap_or("part");
            PathBuf::from(format!("dse-{}-{part}", spec.name()))
        });
        return slurm::submit(&a.slurm, shards as usize, &sweep_arguments(), &out_dir);
    }
    if a.dry_run {
        return Ok(dry_run(&plan, &target));
    }
    let cache = match a.cache.clone().or_else(Cache::default_root) {
        Some(dir) => Cache::new(dir),
        None => bail!("no cache directory: give --cache DIR (or set VTA_CACHE_DIR or HOME)"),
    };
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if jobs == 0 {
        bail!("--jobs must be at least 1");
    }
    let out_dir = a.output.clone().unwrap_or_else(|| {
        let part = target.name.split(' ').next().unwrap_or("part");
        PathBuf::from(format!("dse-{}-{part}", spec.name()))
    });

    eprintln!(
        "dse: {} over {} ({} combinations, {} valid) on {}, {jobs} job(s); cache {}",
        spec.name(),
        axes.iter()
            .map(|(p, v)| format!(
                "{p} {}",
                v.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
            ))
            .collect::<Vec<_>>()
            .join("; "),
        plan.combinations,
        plan.configs.len(),
        target.name,
        cache.root().display()
    );
    let network = {
        let _p = Progress::spinner(&format!("dse: importing and calibrating {}", spec.name()));
        Network::load(&spec)?
    };
    let opts = Options {
        cycles: match a.cycles {
            Cycles::Model => CycleSource::Model,
            Cycles::Rtl => CycleSource::Rtl,
        },
        validate: a.validate,
        jobs,
        fresh: a.fresh,
        eval,
        cache_only: a.merge.is_some(),
    };
    let bars = Bars(Mutex::new(None));
    let estimator = target.estimator();
    let x = explore(
        &plan,
        &network,
        &target,
        estimator.as_ref(),
        &cache,
        &opts,
        &bars,
    )?;
    drop(bars);
    if let Some(s) = shard {
        // Shards share the cache, not the output directory: the merge writes the results.
        let mut text = dse::report::summary(&x);
        text.push_str(&format!(
            "shard {s}: {} of the sweep's {} configs are in the cache; when every shard is \
             done, `{}` writes the results\n",
            x.points.len(),
            full.configs.len(),
            rerun_command(None, Some(s.count))
        ));
        return Ok(text);
    }
    let missing = a.merge.map(|n| missing_shards(&x, &full, n as usize));

    let [csv, json, svg] = dse::report::write_files(&x, &out_dir)?;
    if a.json {
        return Ok(super::json::text(&dse::report::json(&x)));
    }
    let mut text = dse::report::summary(&x);
    text.push_str(&format!(
        "wrote {}, {} and {}\n",
        csv.display(),
        json.display(),
        svg.display()
    ));
    match missing {
        Some(lines) if !lines.is_empty() => bail!(
            "{text}the merge is incomplete: results of {} config(s) are not in the cache:\n{}",
            lines.len(),
            lines.join("\n")
        ),
        _ => Ok(text),
    }
}

/// The options that say how a sweep is split and run, not what it is: left out when the
/// command line is written again for a shard, a merge or a Slurm job.
const DISTRIBUTION_OPTIONS: &[&str] = &[
    "--shard",
    "--merge",
    "--slurm",
    "--partition",
    "--time",
    "--max-running",
];

/// This command's arguments (after `vta`) without [`DISTRIBUTION_OPTIONS`] and `--wait`.
fn sweep_arguments() -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let name = arg.split('=').next().unwrap_or_default();
        if arg == "--wait" {
            continue;
        }
        if DISTRIBUTION_OPTIONS.contains(&name) {
            if !arg.contains('=') {
                it.next();
            }
            continue;
        }
        args.push(arg);
    }
    args
}

/// This command line again, without how it was split, with `--shard S` or `--merge N`.
fn rerun_command(shard: Option<Shard>, merge: Option<usize>) -> String {
    let mut args = sweep_arguments();
    if let Some(s) = shard {
        args.push(format!("--shard {s}"));
    }
    if let Some(n) = merge {
        args.push(format!("--merge {n}"));
    }
    format!("vta {}", args.join(" "))
}

/// For a merge of `count` shards: one line per config whose results are not in the cache,
/// with the command that reruns its shard.
fn missing_shards(x: &Exploration, full: &sweep::Plan, count: usize) -> Vec<String> {
    x.not_cached(full, count)
        .into_iter()
        .map(|(config, s)| {
            format!(
                "  {} (shard {s}): {}",
                config.config_string(),
                rerun_command(Some(s), None)
            )
        })
        .collect()
}
