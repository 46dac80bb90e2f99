//! `vta check diff`: the randomized differential campaign of the RTL simulator against the
//! functional simulator (`vta_sim::diff` does the work) as a command: a fixed set of units
//! (config, program seed) drawn from one seed, run whole, by shard (by hand or as a Slurm
//! array task), or one reproducer at a time.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use dse::sweep::Shard;
use isa::HwConfig;
use serde_json::{json, Value};
use vta_sim::diff::{campaign, check, Agreement, Campaign, Case, Mismatch, Reproducer};
use vta_sim::rtl::RtlOptions;

use super::progress::Progress;
use super::sim::rtl_device;

#[derive(Subcommand)]
pub enum CheckCmd {
    /// Randomized differential campaign: random valid programs on presets and random configs,
    /// each run on the functional and the RTL simulator (random memory timing and AXI stalls)
    /// and compared byte for byte; every mismatch is kept as a reproducer file
    Diff(DiffArgs),
}

#[derive(Args)]
pub struct DiffArgs {
    /// Random valid configs to draw (each built into a Verilator model on first use, 1-2
    /// minutes, then cached)
    #[arg(long, value_name = "N")]
    configs: Option<u64>,
    /// Also run on built-in presets: all of them, or the listed ones (e.g. default,small)
    #[arg(
        long,
        value_name = "NAMES",
        num_args = 0..=1,
        default_missing_value = "all",
        value_delimiter = ','
    )]
    presets: Option<Vec<String>>,
    /// Programs per config
    #[arg(long, value_name = "M", default_value_t = 100)]
    programs: u64,
    /// Campaign seed: every config seed and program seed derives from it
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    /// Run only shard I of N (I from 0): the I-th of N contiguous blocks of the campaign's
    /// units, which are numbered config by config, so that a shard builds the Verilator models
    /// of only the configs its block touches. Default in a Slurm array task:
    /// SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT
    #[arg(long, value_name = "I/N")]
    shard: Option<String>,
    /// Directory for the reproducer files, DIR/unit-K.json (one campaign per directory; shards
    /// may share it)
    #[arg(long, value_name = "DIR", default_value = "diff-repro")]
    out: PathBuf,
    /// Units run at once [default: the number of cores]
    #[arg(short, long, value_name = "J")]
    jobs: Option<usize>,
    /// Test the campaign itself: corrupt the RTL's result of unit UNIT (the first byte its
    /// first STORE writes), so that exactly that unit mismatches; its reproducer records the
    /// planted fault, and its replay plants it again
    #[arg(long, value_name = "UNIT")]
    plant_mismatch: Option<u64>,
    /// Run the case of a reproducer file again and report whether fsim and rtl still differ
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["configs", "presets", "shard", "plant_mismatch", "dry_run"]
    )]
    replay: Option<PathBuf>,
    /// Only list the units this run (or shard) would run; build and run nothing
    #[arg(long)]
    dry_run: bool,
    /// Print the summary as JSON
    #[arg(long)]
    json: bool,
}

pub fn run(c: CheckCmd) -> Result<String> {
    match c {
        CheckCmd::Diff(a) => match &a.replay {
            Some(path) => replay(path, a.json),
            None => diff(&a),
        },
    }
}

/// The simulator options of every campaign device: 64 MiB of memory is plenty for the
/// generated programs and quicker to set up than the default 256 MiB.
fn rtl_options() -> RtlOptions {
    RtlOptions {
        mem_size: 64 << 20,
        ..RtlOptions::default()
    }
}

/// The campaign the options describe.
fn plan(a: &DiffArgs) -> Result<Campaign> {
    if a.configs == Some(0) {
        bail!(
            "--configs 0: draw at least 1 random config, or leave --configs out and give --presets"
        );
    }
    if a.programs == 0 {
        bail!("--programs 0: run at least 1 program per config");
    }
    let presets: Vec<String> = match &a.presets {
        None => Vec::new(),
        Some(names) if names.iter().any(|n| n == "all") => {
            isa::PRESETS.iter().map(|p| p.0.to_string()).collect()
        }
        Some(names) => {
            for n in names {
                if !isa::PRESETS.iter().any(|p| p.0 == n) {
                    let known: Vec<&str> = isa::PRESETS.iter().map(|p| p.0).collect();
                    bail!(
                        "--presets: no preset '{n}' (presets: {}, or all)",
                        known.join(", ")
                    );
                }
            }
            names.clone()
        }
    };
    if presets.is_empty() && a.configs.is_none() {
        bail!("nothing to run: give --configs N (random configs), --presets, or both");
    }
    Ok(Campaign::new(
        a.seed,
        &presets,
        a.configs.unwrap_or(0),
        a.programs,
    ))
}

/// A unit's reproducer file in `dir`.
fn reproducer_path(dir: &Path, unit: u64) -> PathBuf {
    dir.join(format!("unit-{unit}.json"))
}

/// One unit's end: agreement, or the mismatch and its reproducer file.
struct Outcome {
    unit: u64,
    result: std::result::Result<Agreement, (Mismatch, PathBuf)>,
}

fn diff(a: &DiffArgs) -> Result<String> {
    let camp = plan(a)?;
    let shard = match &a.shard {
        Some(s) => Some(Shard::parse(s).map_err(|e| anyhow!("--shard: {e}"))?),
        None => Shard::from_env().transpose().map_err(|e| anyhow!(e))?,
    };
    if let Some(k) = a.plant_mismatch {
        if k >= camp.len() {
            bail!(
                "--plant-mismatch {k}: the campaign has units 0 to {} ({} config(s) x {} programs)",
                camp.len() - 1,
                camp.configs.len(),
                camp.programs
            );
        }
    }
    let range = match shard {
        Some(s) => camp.shard(s.index as u64, s.count as u64),
        None => 0..camp.len(),
    };
    // The configs this run touches, drawn before anything runs (random ones in microseconds).
    let mut configs: Vec<Option<HwConfig>> = vec![None; camp.configs.len()];
    for k in range.clone() {
        let c = camp.unit(k).config;
        if configs[c].is_none() {
            configs[c] = Some(camp.configs[c].config()?);
        }
    }
    let scope = match shard {
        Some(s) => format!(
            "shard {s}: units {}..{} of {}",
            range.start,
            range.end,
            camp.len()
        ),
        None => format!("all {} units", camp.len()),
    };
    let header = format!(
        "check diff, seed {}: {} config(s) x {} programs; {scope}",
        camp.seed,
        camp.configs.len(),
        camp.programs
    );
    if a.dry_run {
        let mut text = format!("{header}\n");
        for k in range {
            let u = camp.unit(k);
            let cfg = configs[u.config].as_ref().expect("drawn above");
            text.push_str(&format!(
                "unit {k}: {} ({cfg}), program seed {}\n",
                camp.configs[u.config],
                campaign::program_seed(camp.seed, cfg, u.program)
            ));
        }
        return Ok(text);
    }
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if jobs == 0 {
        bail!("--jobs must be at least 1");
    }
    eprintln!(
        "{header}; {jobs} job(s); reproducers into {}",
        a.out.display()
    );
    let start = Instant::now();
    let outcomes = run_units(&camp, &configs, range.clone(), a, jobs)?;
    let secs = start.elapsed().as_secs_f64();
    summarize(&camp, &configs, shard, range, &outcomes, secs, a.json)
}

/// Runs units `range` on `jobs` threads, each unit on a fresh RTL simulator; writes a reproducer
/// for every mismatch. Fails (naming it) only when a config's model cannot be had or a
/// reproducer cannot be written.
fn run_units(
    camp: &Campaign,
    configs: &[Option<HwConfig>],
    range: Range<u64>,
    a: &DiffArgs,
    jobs: usize,
) -> Result<Vec<Outcome>> {
    let next = AtomicU64::new(range.start);
    let outcomes = Mutex::new(Vec::new());
    let failure: Mutex<Option<anyhow::Error>> = Mutex::new(None);
    let bar = Progress::bar("check diff", range.end - range.start);
    let opts = rtl_options();
    let unit = |k: u64| -> Result<Outcome> {
        let u = camp.unit(k);
        let cfg = configs[u.config].as_ref().expect("drawn before the run");
        // A fresh simulator (a new instance of the config's model, built or loaded once per
        // process) for every unit: the RTL simulator keeps state across runs that its reset
        // does not clear (a run's cycle count depends on the runs before it), and a unit must
        // run the same in any shard and in a replay.
        let rtl = &mut rtl_device(cfg, &opts)?;
        let program_seed = campaign::program_seed(camp.seed, cfg, u.program);
        let mut case = Case::generated(cfg, program_seed)?;
        if a.plant_mismatch == Some(k) {
            case.plant = Some(0);
        }
        let result = match check(&case, rtl) {
            Ok(agreed) => Ok(agreed),
            Err(mismatch) => {
                let path = reproducer_path(&a.out, k);
                let repro = Reproducer {
                    unit: k,
                    campaign_seed: camp.seed,
                    source: camp.configs[u.config].to_string(),
                    config_seed: camp.configs[u.config].seed(),
                    program_seed,
                    case,
                    mismatch: mismatch.clone(),
                };
                write_reproducer(&repro, &path)?;
                eprintln!(
                    "check diff: unit {k} ({}, program seed {program_seed}): mismatch; \
                     reproducer {}",
                    repro.source,
                    path.display()
                );
                Err((mismatch, path))
            }
        };
        Ok(Outcome { unit: k, result })
    };
    std::thread::scope(|s| {
        for _ in 0..jobs.min((range.end - range.start) as usize).max(1) {
            s.spawn(|| loop {
                if failure.lock().expect("failure lock").is_some() {
                    break;
                }
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= range.end {
                    break;
                }
                bar.message(&format!("unit {k}"));
                match unit(k) {
                    Ok(o) => outcomes.lock().expect("outcomes lock").push(o),
                    Err(e) => {
                        failure.lock().expect("failure lock").get_or_insert(e);
                        break;
                    }
                }
                bar.inc();
            });
        }
    });
    drop(bar);
    if let Some(e) = failure.into_inner().expect("failure lock") {
        return Err(e);
    }
    let mut outcomes = outcomes.into_inner().expect("outcomes lock");
    outcomes.sort_by_key(|o| o.unit);
    Ok(outcomes)
}

/// Writes the reproducer whole and renames it into place, so that a reader on a shared
/// filesystem never sees half a file.
fn write_reproducer(r: &Reproducer, path: &Path) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let text = r.to_json(&format!("vta check diff --replay {}", path.display()))?;
    let tmp = path.with_extension(format!("json.tmp{}", std::process::id()));
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))
}

/// The report of a campaign run; an error (after the report) when any unit mismatched.
fn summarize(
    camp: &Campaign,
    configs: &[Option<HwConfig>],
    shard: Option<Shard>,
    range: Range<u64>,
    outcomes: &[Outcome],
    secs: f64,
    json: bool,
) -> Result<String> {
    let agreed: Vec<&Agreement> = outcomes
        .iter()
        .filter_map(|o| o.result.as_ref().ok())
        .collect();
    let mismatches: Vec<(u64, &Mismatch, &PathBuf)> = outcomes
        .iter()
        .filter_map(|o| o.result.as_ref().err().map(|(m, p)| (o.unit, m, p)))
        .collect();
    let instructions: usize = agreed.iter().map(|g| g.instructions).sum();
    let cycles: u64 = agreed.iter().map(|g| g.cycles).sum();
    let zeros = agreed.iter().filter(|g| !g.nonzero).count();
    let rate = outcomes.len() as f64 / secs.max(1e-9);
    let source = |k: u64| {
        let u = camp.unit(k);
        let cfg = configs[u.config].as_ref().expect("drawn before the run");
        (
            camp.configs[u.config].to_string(),
            cfg,
            campaign::program_seed(camp.seed, cfg, u.program),
        )
    };
    if json {
        let doc = json!({
            "seed": camp.seed,
            "configs": camp.configs.iter().zip(configs).map(|(s, c)| json!({
                "source": s.to_string(),
                "config": c.as_ref().map(HwConfig::config_string),
            })).collect::<Vec<_>>(),
            "programs": camp.programs,
            "units": camp.len(),
            "shard": shard.map(|s| s.to_string()),
            "range": [range.start, range.end],
            "run": outcomes.len(),
            "identical": agreed.len(),
            "only_zeros": zeros,
            "instructions": instructions,
            "rtl_cycles": cycles,
            "seconds": secs,
            "units_per_second": rate,
            "mismatches": mismatches.iter().map(|(k, m, p)| {
                let (src, _, seed) = source(*k);
                json!({
                    "unit": k,
                    "config_source": src,
                    "program_seed": seed,
                    "kind": m.kind.name(),
                    "detail": m.detail,
                    "reproducer": p.display().to_string(),
                })
            }).collect::<Vec<_>>(),
        });
        let text = super::json::text(&doc);
        if mismatches.is_empty() {
            return Ok(text);
        }
        // The document is the output either way; the status says whether the campaign passed.
        print!("{text}");
        bail!(
            "{} mismatch(es); the JSON above lists them",
            mismatches.len()
        );
    }
    let mut text = format!(
        "check diff, seed {}: {} of {} units run ({}) in {secs:.1} s ({rate:.1} units/s): {} \
         identical on fsim and rtl ({instructions} instructions, {cycles} RTL cycles{}), {} \
         mismatch(es)\n",
        camp.seed,
        outcomes.len(),
        camp.len(),
        match shard {
            Some(s) => format!("shard {s}: units {}..{}", range.start, range.end),
            None => "the whole campaign".into(),
        },
        agreed.len(),
        if zeros > 0 {
            format!("; {zeros} stored only zeros")
        } else {
            String::new()
        },
        mismatches.len()
    );
    if mismatches.is_empty() {
        return Ok(text);
    }
    for (k, m, p) in &mismatches {
        let (src, cfg, seed) = source(*k);
        text.push_str(&format!(
            "unit {k} ({src}, {cfg}, program seed {seed}): {m}\n  reproducer: {}; replay: vta \
             check diff --replay {}\n",
            p.display(),
            p.display()
        ));
    }
    bail!(
        "{text}{} mismatch(es) between fsim and rtl",
        mismatches.len()
    )
}

/// `--replay FILE`: the reproducer's case run again on both simulators.
fn replay(path: &Path, json: bool) -> Result<String> {
    let bytes = super::read_input(path)?;
    let text = String::from_utf8(bytes).map_err(|_| {
        anyhow!(
            "reproducer {}: not a text file (a reproducer is the JSON file `vta check diff` \
             writes into its --out directory for each mismatch)",
            path.display()
        )
    })?;
    let r = Reproducer::from_json(&text, &path.display().to_string())?;
    let case = &r.case;
    // The stored program is what runs; say so when the generator no longer draws it from the
    // seed (the reproducer then outlives the generator that found it).
    let stored = isa::container::write(&case.program).ok();
    let drifted = Case::generated(&case.cfg, r.program_seed)
        .map(|g| isa::container::write(&g.program).ok() != stored)
        .unwrap_or(true);
    let what = format!(
        "unit {} of campaign seed {} ({}, {}, program seed {}; memory read latency {}, write \
         latency {}, a beat every {} cycle(s), {} outstanding; {}{})",
        r.unit,
        r.campaign_seed,
        r.source,
        case.cfg,
        r.program_seed,
        case.timing.read_latency,
        case.timing.write_latency,
        case.timing.beat_interval,
        case.timing.max_outstanding,
        match case.stalls {
            Some(s) => format!("AXI stalls {}% (seed {})", s.ar, s.seed),
            None => "no AXI stalls".into(),
        },
        match case.plant {
            Some(k) => format!("; planted fault: STORE {k} corrupted (--plant-mismatch)"),
            None => String::new(),
        }
    );
    let mut dev = rtl_device(&case.cfg, &rtl_options())?;
    let result = check(case, &mut dev);
    if json {
        let doc = json!({
            "reproducer": path.display().to_string(),
            "unit": r.unit,
            "config_source": r.source,
            "program_seed": r.program_seed,
            "planted_store": case.plant,
            "generator_drifted": drifted,
            "recorded": {"kind": r.mismatch.kind.name(), "detail": r.mismatch.detail},
            "result": match &result {
                Ok(_) => Value::from("match"),
                Err(_) => Value::from("mismatch"),
            },
            "mismatch": result.as_ref().err().map(|m| json!({"kind": m.kind.name(), "detail": m.detail})),
        });
        let text = super::json::text(&doc);
        if result.is_ok() {
            return Ok(text);
        }
        print!("{text}");
        bail!("the mismatch of {} reproduces", path.display());
    }
    let note = if drifted {
        "note: the program generator no longer draws this program from its seed; the stored \
         program ran\n"
    } else {
        ""
    };
    match result {
        Ok(_) => Ok(format!(
            "replay of {what}:\nmatch: fsim and rtl agree on this case now (recorded: {})\n{note}",
            r.mismatch
        )),
        Err(m) => {
            let same = if m == r.mismatch {
                "as recorded".to_string()
            } else {
                format!("recorded: {}", r.mismatch)
            };
            bail!("replay of {what}:\n{note}mismatch reproduced ({same}): {m}")
        }
    }
}
