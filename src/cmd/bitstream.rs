//! `vta hw bitstream`: for a Zynq board the fit pre-check, then a Vivado project (see the
//! `bitstreams` crate), and with `--run` the Vivado batch build; for an ECP5 or Gowin board
//! the open flow to a real bitstream (`super::openflow`).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use bitstreams::{board, cores, fit, project, shell, tcl::BuildSpec};
use clap::Args;

#[derive(Args)]
pub struct BitstreamArgs {
    /// Board: Zynq (Vivado project) pynq-z1, pynq-z2, ultra96-v2, zcu104, kv260; ECP5 (open
    /// tools) ulx3s-85f, ulx3s-25f, orangecrab-85f; Gowin (open tools) tang-nano-20k,
    /// tang-mega-138k-pro; or a board file (.json)
    #[arg(long, value_name = "NAME|FILE")]
    board: String,
    /// Config: a JSON file or a preset name (see `vta config presets`); ECP5 and Gowin boards
    /// default to their own config (see the board file), Zynq boards to `default`
    #[arg(long, value_name = "FILE|PRESET")]
    config: Option<String>,
    /// Output directory for the project or the open flow's bitstream, reports and logs
    /// (created if missing)
    #[arg(
        short = 'o',
        long = "output",
        value_name = "DIR",
        visible_alias = "out"
    )]
    out: PathBuf,
    /// Resource estimate for the fit pre-check: the output of `vta hw report --json` for this
    /// config (default: a cached yosys estimate, or a yosys run of a few minutes, then cached)
    #[arg(long, value_name = "FILE")]
    estimate: Option<PathBuf>,
    /// Zynq boards: accelerator cores in the design, each a whole accelerator with its own PS
    /// slave port to DRAM (up to 4 on HP ports, 2 on ZU+ HPC, 1 on ACP) and its own control
    /// window (core k at the board's control base + k x its range); the fit pre-check counts
    /// every core. The board binary opens core k with `--hwh vta.hwh --core K`
    #[arg(long, default_value_t = 1, value_name = "N")]
    cores: u32,
    /// Zynq boards: also run the build, `vivado -mode batch -source build.tcl` (needs Vivado
    /// on the PATH). ECP5 and Gowin boards always run their flow: yosys, nextpnr and the
    /// packer, from the PATH or installed on first use from PyPI into the tool cache
    #[arg(long)]
    run: bool,
    /// ECP5/Gowin: what to build
    #[arg(long, value_enum, default_value = "soc")]
    design: super::openflow::DesignKind,
    /// ECP5/Gowin: where the SoC's device memory lives
    #[arg(long, value_enum, default_value = "bram")]
    memory: super::openflow::MemoryKind,
    /// ECP5/Gowin: the SoC's on-chip device memory in KiB, a power of two (default: the
    /// board's, see its file)
    #[arg(long, value_name = "KIB")]
    memory_kib: Option<u32>,
    /// ECP5/Gowin: print the report as JSON (it is also written to DIR/report.json)
    #[arg(long)]
    json: bool,
    /// ECP5/Gowin: succeed even when a clock misses its target (the report still says so)
    #[arg(long)]
    allow_timing_fail: bool,
    /// ECP5/Gowin: nextpnr's placer seed (another seed may close timing on a tight design)
    #[arg(long, default_value_t = 1, value_name = "N")]
    seed: u64,
    /// ECP5/Gowin: stop after place and route (resources and Fmax, no bitstream); the run is
    /// cached under the cache directory, so the same design, board and clock again is instant
    #[arg(long)]
    no_bitstream: bool,
}

fn estimate_from_json(text: &str, what: &str) -> Result<fit::Estimate> {
    let v: serde_json::Value =
        serde_json::from_str(text).with_context(|| format!("{what} is not JSON"))?;
    let n = |k: &str| {
        v[k].as_u64().with_context(|| {
            format!("{what} has no number '{k}' (make it with `vta hw report --json`)")
        })
    };
    Ok(fit::Estimate {
        source: format!(
            "{} on {}",
            v["tool"].as_str().unwrap_or("yosys"),
            v["config_string"].as_str().unwrap_or("?")
        ),
        luts: n("luts")?,
        ffs: n("ffs")?,
        dsps: n("dsps")?,
        bram36: v["bram36"]
            .as_f64()
            .with_context(|| format!("{what} has no number 'bram36'"))?,
        urams: n("urams").unwrap_or(0),
    })
}

/// The synthesis estimate: `--estimate`, the cache, or a yosys run (stored in the cache).
fn synthesis_estimate(
    a: &BitstreamArgs,
    g: &vta_hw::Generated,
    family: &str,
) -> Result<fit::Estimate> {
    let rtl = super::hw::rtl_hash(&g.verilog);
    if let Some(path) = &a.estimate {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let v: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", path.display()))?;
        if v["rtl_hash"].as_str() != Some(rtl.as_str()) {
            bail!(
                "{} estimates other RTL (rtl_hash {} , this config's is {rtl}); make it with \
                 `vta hw report --json` and the same --config",
                path.display(),
                v["rtl_hash"]
            );
        }
        return estimate_from_json(&text, &path.display().to_string());
    }
    let cached = bitstreams::cache_dir().map(|d| d.join(format!("fit/{rtl}-{family}.json")));
    if let Some(c) = &cached {
        if let Ok(text) = std::fs::read_to_string(c) {
            let mut e = estimate_from_json(&text, &c.display().to_string())?;
            e.source = format!("{} (cached in {})", e.source, c.display());
            return Ok(e);
        }
    }
    let version = vta_hw::report::yosys_version().context(
        "the fit pre-check needs a resource estimate: install yosys, or pass --estimate FILE \
         made by `vta hw report --json` elsewhere",
    )?;
    eprintln!(
        "fit pre-check: synthesizing with {version} (synth_xilinx -family {family}; minutes, \
         cached afterwards)"
    );
    let u = vta_hw::report::synthesize_in_temp_dir(&g.verilog, "vta_top", family, &mut |s| {
        eprintln!("  {s}")
    })?;
    let json = u.to_json(super::hw::estimate_meta(g, "", family, &version));
    if let Some(c) = &cached {
        // A cache that cannot be written only costs the next run the synthesis again.
        if let Some(parent) = c.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        let _ = std::fs::write(c, format!("{json:#}\n"));
    }
    estimate_from_json(&json.to_string(), "the yosys estimate")
}

fn table(rows: &[fit::Usage]) -> String {
    rows.iter()
        .map(|u| {
            format!(
                "  {:<7} {:>9} of {:>7} ({:.1}%)\n",
                u.resource,
                u.used,
                u.available,
                u.percent()
            )
        })
        .collect()
}

pub fn run(a: BitstreamArgs) -> Result<String> {
    match board::load_any(&a.board)? {
        board::AnyBoard::Zynq(b) => zynq(a, *b),
        board::AnyBoard::Open(b) => {
            if a.cores != 1 {
                bail!(
                    "--cores is for Zynq boards; the open flow of {} builds one accelerator \
                     in its SoC",
                    b.name
                );
            }
            if a.estimate.is_some() {
                bail!(
                    "--estimate is for Zynq boards; the open flow of {} checks the fit with \
                     its own synthesis",
                    b.name
                );
            }
            super::openflow::build(&super::openflow::Build {
                board: &b,
                config: a.config.as_deref(),
                design: a.design,
                memory: a.memory,
                memory_kib: a.memory_kib,
                out: &a.out,
                json: a.json,
                allow_timing_fail: a.allow_timing_fail,
                seed: a.seed,
                no_bitstream: a.no_bitstream,
            })
        }
    }
}

fn zynq(a: BitstreamArgs, b: board::Board) -> Result<String> {
    let cfg = super::load_config(a.config.as_deref())?;
    cfg.validate().map_err(anyhow::Error::msg)?;
    if cfg.clock_mhz > b.fabric_clock_max_mhz {
        bail!(
            "CLOCK_MHZ {} is above the {} MHz the {} board's PS provides to the fabric; lower \
             CLOCK_MHZ in the config",
            cfg.clock_mhz,
            b.fabric_clock_max_mhz,
            b.name
        );
    }
    let cores = cores::layout(&b, a.cores)?;
    // The instant analytic check first, so a config whose buffers cannot fit is refused
    // before minutes of synthesis.
    fit::check(
        &fit::for_cores(&fit::scratchpad_estimate(&cfg), a.cores),
        &b.resources,
        &b.part,
    )?;
    let g = super::hw::generate(a.config.as_deref())?;
    let estimate = fit::for_cores(
        &synthesis_estimate(&a, &g, &b.resources.yosys_family)?,
        a.cores,
    );
    let usage = fit::check(&estimate, &b.resources, &b.part)?;

    let ports = shell::top_ports(&g.ports_json)?;
    let shell_v = shell::verilog(
        &ports,
        &shell::ShellSpec {
            clock_mhz: cfg.clock_mhz,
            coherent: b.data.coherent,
        },
    )?;
    let spec = BuildSpec {
        clock_mhz: cfg.clock_mhz,
        axi_bits: cfg.axi_data_width,
        config_string: cfg.config_string(),
        isa_hash: format!("{:016x}", cfg.isa_hash()),
        rtl_hash: project::rtl_hash(&g.verilog, &shell_v),
        // It lands in a JSON string written by Tcl: no quotes or backslashes.
        fit_estimate: format!(
            "{}: LUT {} FF {} DSP {} BRAM36 {}",
            estimate.source, estimate.luts, estimate.ffs, estimate.dsps, estimate.bram36
        )
        .replace(['"', '\\'], "'"),
        cores,
    };
    let mut files = project::files(&b, &spec, &g.verilog, &shell_v);
    files.push(("regs.json".into(), g.regs_json.clone()));
    let written = project::write(&a.out, &files)
        .with_context(|| format!("cannot write the project to {}", a.out.display()))?;
    let mut text = format!(
        "{} on {} ({}), fabric clock {} MHz, AXI {} bits -> {} bits\n{}\
         fit pre-check against {} ({}), estimate: {}\n{}",
        cfg.config_string(),
        b.name,
        b.part,
        cfg.clock_mhz,
        cfg.axi_data_width,
        b.data_width_for(cfg.axi_data_width),
        spec.cores
            .iter()
            .map(|c| format!(
                "  {}: registers at {:#010X} on {}, DRAM through {}\n",
                c.instance, c.ctrl_base, b.control.port, c.data_port
            ))
            .collect::<String>(),
        b.part,
        b.resources.source,
        estimate.source,
        table(&usage)
    );
    for p in &written {
        text.push_str(&format!("wrote {}\n", p.display()));
    }
    let command = format!(
        "cd {} && vivado -mode batch -source build.tcl",
        shell_quote(&a.out)
    );
    if !a.run {
        text.push_str(&format!("build it with: {command}\n"));
        return Ok(text);
    }
    if !on_path("vivado") {
        text.push_str(&format!(
            "--run: vivado is not on the PATH; on a machine with Vivado run: {command}\n"
        ));
        return Ok(text);
    }
    print!("{text}");
    vivado_build(&a.out)
}

fn shell_quote(p: &Path) -> String {
    let s = p.display().to_string();
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c))
    {
        s
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(tool).is_file()))
}

/// Runs Vivado in `dir`, relaying its progress lines to stderr; returns utilization and slack.
fn vivado_build(dir: &Path) -> Result<String> {
    eprintln!(
        "running vivado -mode batch -source build.tcl in {} (tens of minutes)",
        dir.display()
    );
    let mut child = Command::new("vivado")
        .args(["-mode", "batch", "-source", "build.tcl", "-nojournal"])
        .current_dir(dir)
        .stdout(Stdio::piped())
        .spawn()
        .context("cannot start vivado")?;
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if line.starts_with("vta-build:") || line.starts_with("ERROR") {
                eprintln!("{line}");
            }
        }
    }
    let status = child.wait().context("vivado did not finish")?;
    if !status.success() {
        bail!(
            "vivado failed ({status}); see {}/vivado.log and the vta-build lines above",
            dir.display()
        );
    }
    let util = std::fs::read_to_string(dir.join("reports/utilization.rpt")).unwrap_or_default();
    let mut text: String = util
        .lines()
        .filter(|l| {
            [
                "Slice LUTs",
                "CLB LUTs",
                "Slice Registers",
                "CLB Registers",
                "Block RAM Tile",
                "DSPs",
            ]
            .iter()
            .any(|k| l.trim_start_matches(['|', ' ']).starts_with(k))
        })
        .map(|l| format!("{l}\n"))
        .collect();
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("output/manifest.json"))
            .context("vivado finished without output/manifest.json")?,
    )?;
    text.push_str(&format!(
        "worst negative slack {} ns; wrote {}/output/vta.bit and vta.hwh\n",
        manifest["wns_ns"],
        dir.display()
    ));
    Ok(text)
}
