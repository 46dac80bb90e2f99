//! `vta hw`: generate the accelerator's Verilog for a config, report its resource use on an
//! FPGA part after synthesis with yosys, and write a Vivado project for a Zynq board.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub enum HwCmd {
    /// Write the accelerator's Verilog (DIR/vta_top.v; with --soc the SoC's, DIR/vta_soc.v;
    /// with --cores N the N-core design, DIR/vta_multicore_N.v),
    /// its control register map (DIR/regs.json) and its port manifest (DIR/ports.json)
    Verilog(VerilogArgs),
    /// Synthesize the accelerator with yosys and report LUT, FF, DSP and BRAM use against
    /// an FPGA part, and the GEMM's MACs per cycle, per DSP and per thousand LUTs (takes
    /// minutes on the larger configs)
    Report(ReportArgs),
    /// Build for a board after checking that the config fits its part: a Vivado project for
    /// a Zynq board (RTL, AXI shell, build.tcl, clock constraint, README), or a real
    /// bitstream for an ECP5 or Gowin board with the open tools (yosys, nextpnr, packer),
    /// with resource use and a timing report
    Bitstream(super::bitstream::BitstreamArgs),
}

#[derive(Args)]
pub struct VerilogArgs {
    #[arg(long, value_name = "FILE|PRESET", help = super::CONFIG_HELP)]
    config: Option<String>,
    /// Output directory (created if missing)
    #[arg(
        short = 'o',
        long = "output",
        value_name = "DIR",
        visible_alias = "out"
    )]
    out: PathBuf,
    /// Write the design with N cores (2 to 8; 1 is vta_top) sharing one AXI4 master port
    /// through an in-order interconnect (DIR/vta_multicore_N.v; core k's control port is
    /// s_axi_control<k>_*), the one the RTL simulator runs for --devices rtl-cores:N
    #[arg(long, value_name = "N", conflicts_with = "soc")]
    cores: Option<u32>,
    #[command(flatten)]
    soc: super::soc::SocArgs,
}

#[derive(Args)]
pub struct ReportArgs {
    #[arg(long, value_name = "FILE|PRESET", help = super::CONFIG_HELP)]
    config: Option<String>,
    /// FPGA part to compare against (xc7z020, xc7z010, xc7z045)
    #[arg(long, default_value = "xc7z020")]
    part: String,
    /// Keep yosys' input, log and statistics in DIR (default: a temporary directory,
    /// removed afterwards)
    #[arg(long, value_name = "DIR")]
    work_dir: Option<PathBuf>,
    /// Print the figures as JSON (what `vta hw bitstream --estimate` reads)
    #[arg(long, conflicts_with = "compare")]
    json: bool,
    /// Also synthesize this config and print both side by side with the difference, e.g.
    /// `--config lut --compare default` for the cost of the ALU's activation table
    #[arg(long, value_name = "FILE|PRESET")]
    compare: Option<String>,
}

pub fn run(c: HwCmd) -> Result<String> {
    match c {
        HwCmd::Verilog(a) => verilog(a),
        HwCmd::Report(a) => report(a),
        HwCmd::Bitstream(a) => super::bitstream::run(a),
    }
}

pub(super) fn generate(config: Option<&str>) -> Result<vta_hw::Generated> {
    let cfg = super::load_config(config)?;
    Ok(vta_hw::generate(&cfg)?)
}

fn write(dir: &Path, name: &str, text: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

fn verilog(a: VerilogArgs) -> Result<String> {
    if a.soc.soc {
        let cfg = super::load_config(a.config.as_deref())?;
        return super::soc::write_verilog(&cfg, &a.soc, &a.out);
    }
    let (g, top) = match a.cores {
        // One core is the accelerator itself, as `vta hw bitstream --cores 1` builds.
        Some(n) if n != 1 => {
            let cfg = super::load_config(a.config.as_deref())?;
            (
                vta_hw::multicore::generate(&cfg, n)?,
                format!("vta_multicore_{n}"),
            )
        }
        _ => (generate(a.config.as_deref())?, "vta_top".to_string()),
    };
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("cannot create {}", a.out.display()))?;
    let v = write(&a.out, &format!("{top}.v"), &g.verilog)?;
    let r = write(&a.out, "regs.json", &g.regs_json)?;
    let p = write(&a.out, "ports.json", &g.ports_json)?;
    let modules = g.design.definitions().len();
    Ok(format!(
        "{} (isa hash {:016x}), AXI {} bits\n\
         wrote {} ({} lines, {modules} modules, top {top})\n\
         wrote {} ({} control registers)\n\
         wrote {}\n",
        g.config.config_string(),
        g.config.isa_hash(),
        g.config.axi_data_width,
        v.display(),
        g.verilog.lines().count(),
        r.display(),
        vta_hw::regs::MAP.len(),
        p.display()
    ))
}

fn report(a: ReportArgs) -> Result<String> {
    let part = vta_hw::report::part(&a.part).ok_or_else(|| {
        let known: Vec<&str> = vta_hw::report::PARTS.iter().map(|p| p.name).collect();
        anyhow!(
            "unknown part '{}'; known parts: {}",
            a.part,
            known.join(", ")
        )
    })?;
    // Fail early, before generating anything, when yosys is missing.
    let version = vta_hw::report::yosys_version()?;
    let t = Instant::now();
    eprintln!("generating vta_top ...");
    let g = generate(a.config.as_deref())?;
    eprintln!("using {version}");
    let u = synthesize(&g, part.family, a.work_dir.as_deref())?;
    if let Some(other) = &a.compare {
        eprintln!("generating vta_top for --compare {other} ...");
        let h = generate(Some(other))?;
        let work = a.work_dir.as_ref().map(|d| d.join("compare"));
        let v = synthesize(&h, part.family, work.as_deref())?;
        let title = format!(
            "A: {} (AXI {} bits) vs B: {} (AXI {} bits), synthesized in {:.0} s",
            g.config.config_string(),
            g.config.axi_data_width,
            h.config.config_string(),
            h.config.axi_data_width,
            t.elapsed().as_secs_f64()
        );
        return Ok(vta_hw::report::format_comparison(
            (&u, &g.config.config_string(), macs_per_cycle(&g)),
            (&v, &h.config.config_string(), macs_per_cycle(&h)),
            &part,
            &title,
        ));
    }
    if a.json {
        let mut meta = estimate_meta(&g, part.name, part.family, &version);
        vta_hw::report::Density::new(&u, macs_per_cycle(&g)).insert_json(&mut meta);
        return Ok(format!("{:#}\n", u.to_json(meta)));
    }
    let title = format!(
        "{} (AXI {} bits), synthesized in {:.0} s",
        g.config.config_string(),
        g.config.axi_data_width,
        t.elapsed().as_secs_f64()
    );
    Ok(vta_hw::report::format_report(
        &u,
        &part,
        &title,
        macs_per_cycle(&g),
    ))
}

/// The GEMM array's multiply-accumulates per cycle: `BATCH * BLOCK_IN * BLOCK_OUT`.
fn macs_per_cycle(g: &vta_hw::Generated) -> u64 {
    let c = &g.config;
    u64::from(c.batch()) * u64::from(c.block_in()) * u64::from(c.block_out())
}

/// Synthesizes `g`'s `vta_top` (in `work_dir` if given, else a temporary directory).
fn synthesize(
    g: &vta_hw::Generated,
    family: &str,
    work_dir: Option<&Path>,
) -> Result<vta_hw::report::Utilization> {
    eprintln!(
        "running synth_xilinx -family {family} on {} lines of Verilog for {} (minutes on \
         large configs)",
        g.verilog.lines().count(),
        g.config.config_string()
    );
    let mut progress = |stage: &str| eprintln!("  {stage}");
    let u = match work_dir {
        Some(d) => vta_hw::report::synthesize(&g.verilog, "vta_top", family, d, &mut progress),
        None => {
            vta_hw::report::synthesize_in_temp_dir(&g.verilog, "vta_top", family, &mut progress)
        }
    }?;
    if u.cells.is_empty() {
        bail!("yosys reported no cells for vta_top");
    }
    Ok(u)
}

pub(super) use vta_hw::report::{estimate_meta, rtl_hash};
