//! `vta hw bitstream` for ECP5 and Gowin boards: the open flow of `bitstreams::openflow`
//! (yosys, nextpnr, ecppack / gowin_pack) run on the design, with the fit pre-check first and
//! the readable report (resources, Fmax per clock, critical path) last. The SoC design and
//! the cached flow without packing are `bitstreams::openflow::soc`'s.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use bitstreams::openflow::{flow, report, soc, tools::Toolbox, top, OpenBoard};
use isa::HwConfig;
use serde_json::json;

/// What `--design` builds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DesignKind {
    /// The SoC `vta_soc`: the accelerator, on-chip device memory and the UART host bridge
    Soc,
    /// A counter on the LEDs and a UART echo with the SoC's pins (board bring-up; ignores
    /// the config)
    Counter,
}

/// Where the SoC's device memory lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum MemoryKind {
    /// On-chip block RAM (--memory-kib, default: the board's)
    Bram,
    /// The board's SDR SDRAM behind a LiteDRAM controller generated on first use (ULX3S);
    /// verified in simulation against an SDRAM model, not yet on a board
    Sdram,
}

/// The design to build for `cfg` on board `b`: the SoC with `memory_kib` of block RAM or the
/// board's SDRAM as device memory, or the counter.
pub fn design(
    kind: DesignKind,
    cfg: &HwConfig,
    b: &OpenBoard,
    memory: MemoryKind,
    memory_kib: Option<u32>,
) -> Result<top::Design> {
    Ok(match (kind, memory) {
        (DesignKind::Counter, _) => top::counter_design(),
        (DesignKind::Soc, MemoryKind::Bram) => {
            soc::soc_design(cfg, memory_kib.unwrap_or(b.device_memory_kib))?
        }
        (DesignKind::Soc, MemoryKind::Sdram) => {
            if memory_kib.is_some() {
                bail!(
                    "--memory-kib sizes on-chip device memory; with --memory sdram the device \
                     memory is the board's SDRAM"
                );
            }
            let Some(sd) = &b.sdram else {
                bail!(
                    "board {} has no SDRAM in its board file (no \"sdram\" field): build the \
                     SoC with --memory bram",
                    b.name
                );
            };
            let ctl = bitstreams::openflow::sdram::controller(
                &cache_root()?,
                sd,
                cfg.clock_mhz * 1_000_000,
                cfg.axi_data_width,
                &mut |s| say(s),
            )?;
            soc::soc_design_sdram(cfg, sd, &ctl)?
        }
    })
}

/// The cache directory of the open tools and runs.
fn cache_root() -> Result<PathBuf> {
    bitstreams::cache_dir().context(
        "no cache directory for the open tools: set VTA_CACHE_DIR (or HOME or XDG_CACHE_HOME)",
    )
}

fn say(s: &str) {
    eprintln!("bitstream: {s}");
}

/// Options of one open-flow build.
pub struct Build<'a> {
    pub board: &'a OpenBoard,
    pub config: Option<&'a str>,
    pub design: DesignKind,
    pub memory: MemoryKind,
    /// Block-RAM device memory, KiB (None: the board's).
    pub memory_kib: Option<u32>,
    pub out: &'a Path,
    pub json: bool,
    pub allow_timing_fail: bool,
    pub seed: u64,
    /// Stop after place and route, through the cache of [`soc::resources_and_fmax`].
    pub no_bitstream: bool,
}

/// Runs the flow and returns the report (text or JSON); timing not met is an error (the
/// report then goes to stderr), unless allowed.
pub fn build(o: &Build) -> Result<String> {
    let b = o.board;
    let cfg = match o.config {
        Some(c) => super::load_config(Some(c))?,
        None => b.default_config(),
    };
    let config_from = match o.config {
        Some(c) => c.to_string(),
        None => "the board's default config".to_string(),
    };
    let d = design(o.design, &cfg, b, o.memory, o.memory_kib)?;
    let spec = flow::Spec {
        board: b,
        design: &d,
        clock_mhz: f64::from(cfg.clock_mhz),
        out: o.out,
        pack: true,
        seed: o.seed,
    };
    let blocks = flow::precheck(&spec)?;
    say(&format!(
        "{} on {} ({}), {} ({config_from}: {}), design clock {} MHz",
        d.top,
        b.name,
        b.part,
        d.description,
        cfg.config_string(),
        cfg.clock_mhz
    ));
    let outcome = if o.no_bitstream {
        let (outcome, work, cached) =
            soc::resources_and_fmax(&cache_root()?, b, &d, spec.clock_mhz, o.seed, &mut |s| {
                say(s)
            })?;
        say(&format!(
            "{} place and route in {} (no bitstream)",
            if cached {
                "reused the cached"
            } else {
                "cached the"
            },
            work.display()
        ));
        std::fs::create_dir_all(o.out)
            .with_context(|| format!("cannot create {}", o.out.display()))?;
        outcome
    } else {
        flow::run(&spec, &Toolbox::new(&cache_root()?), &mut |s| say(s))?
    };
    let text = text_report(o, &cfg, &d, &blocks, &outcome);
    let json = json_report(o, &cfg, &d, &outcome);
    let write = |name: &str, t: &str| -> Result<PathBuf> {
        let p = o.out.join(name);
        std::fs::write(&p, t).with_context(|| format!("cannot write {}", p.display()))?;
        Ok(p)
    };
    write("report.txt", &text)?;
    write("report.json", &format!("{json:#}\n"))?;
    let shown = if o.json { format!("{json:#}\n") } else { text };
    if !outcome.report.timing_met() && !o.allow_timing_fail {
        // A failed command prints nothing on stdout; the report goes with the error.
        eprint!("{shown}");
        let slow: Vec<String> = outcome
            .report
            .clocks
            .iter()
            .filter(|c| !c.met)
            .map(|c| {
                format!(
                    "clock {} reaches {:.1} MHz of {:.1}",
                    c.clock, c.fmax_mhz, c.target_mhz
                )
            })
            .collect();
        bail!(
            "timing not met on {}: {} (see the critical path above); the bitstream was written \
             but may fail on the board. Lower \"CLOCK_MHZ\" in the config (e.g. to {}), or pass \
             --allow-timing-fail to accept it",
            b.name,
            slow.join(", "),
            outcome
                .report
                .clocks
                .iter()
                .map(|c| c.fmax_mhz.floor() as u64)
                .min()
                .unwrap_or(0)
        );
    }
    Ok(shown)
}

fn text_report(
    o: &Build,
    cfg: &HwConfig,
    d: &top::Design,
    blocks: &[(String, u64)],
    out: &flow::Outcome,
) -> String {
    let b = o.board;
    let mut t = format!(
        "{} on {} ({}): {}\nconfig {} (CLOCK_MHZ {}), design clock {:.3} MHz {}\n",
        d.top,
        b.name,
        b.part,
        d.description,
        cfg.config_string(),
        cfg.clock_mhz,
        out.clock_mhz,
        if (out.clock_mhz - b.clock.mhz).abs() < 1e-6 {
            format!("(the board's oscillator, pin {})", b.clock.pin)
        } else {
            format!("(PLL from the {} MHz oscillator)", b.clock.mhz)
        }
    );
    if !blocks.is_empty() {
        t.push_str(&format!(
            "block RAM pre-check: {} of {} blocks ({})\n",
            blocks.iter().map(|x| x.1).sum::<u64>(),
            b.resources.bram_blocks,
            blocks
                .iter()
                .map(|(n, k)| format!("{n} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    t.push_str(&format!(
        "synthesis mapped: {} LUT4, {} FF, {} block RAM, {} multipliers\n",
        out.mapped.luts, out.mapped.ffs, out.mapped.bram_blocks, out.mapped.dsps
    ));
    t.push_str(&report::format(&out.report));
    if let Some(bit) = &out.bitstream {
        let bytes = std::fs::metadata(bit).map(|m| m.len()).unwrap_or(0);
        t.push_str(&format!(
            "bitstream: {} ({bytes} bytes)\nload it with: {}\n",
            bit.display(),
            b.program.replace("{bitstream}", &bit.display().to_string())
        ));
    }
    t.push_str(&format!(
        "pins: {}; the host reaches the UART through {}\n",
        b.pin_summary(),
        b.uart.host
    ));
    t.push_str(&format!(
        "run time: {} (total {})\n",
        out.stages
            .iter()
            .map(|(s, secs)| format!(
                "{s} {}",
                bitstreams::openflow::tools::elapsed(std::time::Duration::from_secs_f64(*secs))
            ))
            .collect::<Vec<_>>()
            .join(", "),
        bitstreams::openflow::tools::elapsed(std::time::Duration::from_secs_f64(
            out.stages.iter().map(|s| s.1).sum()
        ))
    ));
    t.push_str(&format!(
        "logs and intermediate files in {} (logs/, build/, rtl/)\n",
        o.out.display()
    ));
    t
}

fn json_report(
    o: &Build,
    cfg: &HwConfig,
    d: &top::Design,
    out: &flow::Outcome,
) -> serde_json::Value {
    let b = o.board;
    json!({
        "board": b.name,
        "part": b.part,
        "family": b.chip.family(),
        "design": d.top,
        "description": d.description,
        "device_memory": match (o.design, o.memory) {
            (DesignKind::Counter, _) => "none",
            (DesignKind::Soc, MemoryKind::Bram) => "bram",
            (DesignKind::Soc, MemoryKind::Sdram) => "sdram",
        },
        "config_string": cfg.config_string(),
        "clock_mhz_target": cfg.clock_mhz,
        "clock_mhz": out.clock_mhz,
        "timing_met": out.report.timing_met(),
        "bitstream": out.bitstream,
        "bitstream_bytes": out.bitstream.as_ref().and_then(|p| std::fs::metadata(p).ok()).map(|m| m.len()),
        "mapped": out.mapped,
        "resources": out.report.resources,
        "clocks": out.report.clocks,
        "stages_s": out.stages.iter().map(|(s, t)| json!({"stage": s, "seconds": t})).collect::<Vec<_>>(),
        "tools": out.tools.iter().map(|(t, p)| json!({"tool": t, "path": p})).collect::<Vec<_>>(),
    })
}
