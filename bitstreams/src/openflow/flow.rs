//! One run of the open flow in a directory: constraints, board top and PLL, yosys synthesis,
//! the fit check of what yosys mapped, nextpnr place and route (with its timing report), and
//! the packer. Every tool's output goes to `logs/`; the stages and their times to `progress`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::board::{Chip, OpenBoard, NEXTPNR_CONFIG_PIN_GROUPS};
use super::fit::{self, DoesNotFit, Mapped};
use super::report::{self, Report, ReportError};
use super::tools::{self, Run, Tool, ToolError, Toolbox};
use super::top::{self, Design, BOARD_TOP, PLL_MODULE};

/// What to build.
pub struct Spec<'a> {
    pub board: &'a OpenBoard,
    pub design: &'a Design,
    /// The design clock's target, MHz (the config's `CLOCK_MHZ`).
    pub clock_mhz: f64,
    /// The directory the flow writes (created if missing).
    pub out: &'a Path,
    /// Run the packer (false: stop after place and route, for resource and Fmax estimates).
    pub pack: bool,
    /// nextpnr's placer seed.
    pub seed: u64,
}

/// What a run produced.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Outcome {
    /// The design clock the PLL makes (or the oscillator's), MHz.
    pub clock_mhz: f64,
    /// What yosys mapped.
    pub mapped: Mapped,
    /// The routed design's resources and timing.
    pub report: Report,
    /// The bitstream, when packed.
    pub bitstream: Option<PathBuf>,
    /// Each stage and its run time, seconds.
    pub stages: Vec<(String, f64)>,
    /// Each tool used and where it was found.
    pub tools: Vec<(String, PathBuf)>,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum FlowError {
    #[error(transparent)]
    Fit(#[from] DoesNotFit),
    #[error(transparent)]
    Tool(#[from] ToolError),
    #[error(transparent)]
    Report(#[from] ReportError),
    #[error("{0}")]
    Clock(String),
    /// The design needs something the board does not have.
    #[error("{0}")]
    Board(String),
    #[error("cannot write {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{tool} gave no {what}; see {log}")]
    Output {
        tool: &'static str,
        what: String,
        log: String,
    },
}

fn write(path: &Path, text: &str) -> Result<(), FlowError> {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).map_err(|source| FlowError::Io {
            path: p.display().to_string(),
            source,
        })?;
    }
    std::fs::write(path, text).map_err(|source| FlowError::Io {
        path: path.display().to_string(),
        source,
    })
}

/// The checks that need no tool: the clock can be made, the memories fit. Run before
/// anything is written.
pub fn precheck(s: &Spec) -> Result<Vec<(String, u64)>, FlowError> {
    let b = s.board;
    if s.design.ports.sdram && b.sdram.is_none() {
        return Err(FlowError::Board(format!(
            "{} uses SDRAM but board {} has none in its board file (no \"sdram\" field); \
             build it with block-RAM device memory",
            s.design.top, b.name
        )));
    }
    if !(1.0..=500.0).contains(&s.clock_mhz) {
        return Err(FlowError::Clock(format!(
            "CLOCK_MHZ {} is not a clock this flow can make",
            s.clock_mhz
        )));
    }
    let needs_pll = (s.clock_mhz - b.clock.mhz).abs() > 1e-6;
    if needs_pll {
        if let Chip::Gowin {
            pll_device: None, ..
        } = &b.chip
        {
            return Err(FlowError::Clock(format!(
                "CLOCK_MHZ {} differs from the {} MHz oscillator of {} and the open tools have \
                 no PLL calculator for {}; set \"CLOCK_MHZ\": {} in the config",
                s.clock_mhz, b.clock.mhz, b.name, b.part, b.clock.mhz
            )));
        }
    }
    Ok(fit::check_memories(
        &s.design.memories,
        &b.resources,
        &b.part,
    )?)
}

fn yosys_phase(l: &str) -> bool {
    let mut parts = l.splitn(3, '.');
    let (a, b) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    !a.is_empty()
        && a.chars().all(|c| c.is_ascii_digit())
        && !b.is_empty()
        && b.chars().all(|c| c.is_ascii_digit())
        && l.contains(" Executing ")
}

fn nextpnr_phase(l: &str) -> bool {
    let Some(rest) = l.strip_prefix("Info: ") else {
        return false;
    };
    let r = rest.trim_start();
    [
        "Packing",
        "Running",
        "Routing..",
        "Routing complete",
        "at initial placer iter",
        "at iteration #",
        "Max frequency",
        "iter=",
        "Program finished",
    ]
    .iter()
    .any(|p| r.starts_with(p))
        || (r.starts_with(|c: char| c.is_ascii_digit()) && r.contains('|'))
}

fn any_line(_: &str) -> bool {
    true
}

/// Runs the flow (see the module docs); `progress` hears each stage and the tools' phases.
pub fn run(
    s: &Spec,
    tools: &Toolbox,
    progress: &mut dyn FnMut(&str),
) -> Result<Outcome, FlowError> {
    let b = s.board;
    precheck(s)?;
    let out = s.out;
    let logs = out.join("logs");
    let build = out.join("build");
    for d in [&logs, &build] {
        std::fs::create_dir_all(d).map_err(|source| FlowError::Io {
            path: d.display().to_string(),
            source,
        })?;
    }
    let mut stages = vec![];
    let mut used = vec![];
    let mut find = |t: Tool, progress: &mut dyn FnMut(&str)| -> Result<PathBuf, FlowError> {
        let p = tools.find(t, progress)?;
        used.push((t.label().to_string(), p.clone()));
        Ok(p)
    };

    // Clock: a PLL when the target differs from the oscillator.
    let mut clock_mhz = b.clock.mhz;
    let needs_pll = (s.clock_mhz - b.clock.mhz).abs() > 1e-6;
    let mut sources = vec!["rtl/design.v".to_string()];
    if needs_pll {
        let (tool, args) = match &b.chip {
            Chip::Ecp5 { .. } => (
                Tool::Ecppll,
                vec![
                    "-n".into(),
                    PLL_MODULE.into(),
                    "-i".into(),
                    b.clock.mhz.to_string(),
                    "-o".into(),
                    s.clock_mhz.to_string(),
                    "-f".into(),
                    "rtl/pll.v".into(),
                ],
            ),
            Chip::Gowin { pll_device, .. } => (
                Tool::GowinPll,
                vec![
                    "-i".into(),
                    b.clock.mhz.to_string(),
                    "-o".into(),
                    s.clock_mhz.to_string(),
                    "-d".into(),
                    pll_device.clone().expect("prechecked"),
                    "-m".into(),
                    PLL_MODULE.into(),
                    "-f".into(),
                    "rtl/pll.v".into(),
                ],
            ),
        };
        std::fs::create_dir_all(out.join("rtl")).map_err(|source| FlowError::Io {
            path: out.join("rtl").display().to_string(),
            source,
        })?;
        let exe = find(tool, progress)?;
        let log = logs.join("pll.log");
        progress(&format!(
            "PLL: {} MHz -> {} MHz ({})",
            b.clock.mhz,
            s.clock_mhz,
            tool.label()
        ));
        let t = tools::run(
            &Run {
                tool,
                exe: &exe,
                args,
                dir: out,
                log: log.clone(),
                phase: |_| false,
            },
            progress,
        )?;
        stages.push(("pll".to_string(), t.as_secs_f64()));
        let text = std::fs::read_to_string(&log).unwrap_or_default()
            + &std::fs::read_to_string(out.join("rtl/pll.v")).unwrap_or_default();
        clock_mhz = pll_frequency(&text).ok_or_else(|| FlowError::Output {
            tool: tool.label(),
            what: "output frequency".into(),
            log: log.display().to_string(),
        })?;
        if (clock_mhz - s.clock_mhz).abs() > s.clock_mhz * 0.005 {
            return Err(FlowError::Clock(format!(
                "the PLL of {} cannot make {} MHz from {} MHz (nearest: {clock_mhz} MHz); set \
                 \"CLOCK_MHZ\" to a frequency it can make, e.g. {}",
                b.part,
                s.clock_mhz,
                b.clock.mhz,
                clock_mhz.round()
            )));
        }
        sources.push("rtl/pll.v".into());
    }
    sources.push("rtl/board_top.v".into());
    write(&out.join("rtl/design.v"), &s.design.verilog)?;
    write(
        &out.join("rtl/board_top.v"),
        &top::board_top(b, s.design, needs_pll),
    )?;
    let (cname, ctext) = top::constraints(b, s.design);
    write(&out.join(cname), &ctext)?;

    // Synthesis.
    let synth = match &b.chip {
        Chip::Ecp5 { .. } => format!("synth_ecp5 -top {BOARD_TOP} -json build/synth.json"),
        Chip::Gowin { synth_family, .. } => format!(
            "synth_gowin -top {BOARD_TOP} -family {synth_family}{} -json build/synth.json",
            gw5a_dffs(synth_family)
        ),
    };
    let script = format!(
        "# yosys script written by `vta hw bitstream` (run in this directory: yosys -s synth.ys)\n\
         read_verilog {}\n{synth}\ntee -q -o build/stat.json stat -json\n",
        sources.join(" ")
    );
    write(&out.join("synth.ys"), &script)?;
    let exe = find(Tool::Yosys, progress)?;
    progress(&format!(
        "synthesis: {} ({}; log logs/yosys.log)",
        synth.split(" -json").next().unwrap_or(&synth),
        exe.display()
    ));
    let t = tools::run(
        &Run {
            tool: Tool::Yosys,
            exe: &exe,
            args: vec!["-s".into(), "synth.ys".into()],
            dir: out,
            log: logs.join("yosys.log"),
            phase: yosys_phase,
        },
        &mut throttled(progress),
    )?;
    progress(&format!("synthesis done in {}", tools::elapsed(t)));
    stages.push(("synthesis".to_string(), t.as_secs_f64()));
    let stat = std::fs::read_to_string(build.join("stat.json")).map_err(|_| FlowError::Output {
        tool: "yosys",
        what: "build/stat.json".into(),
        log: logs.join("yosys.log").display().to_string(),
    })?;
    let mapped = fit::mapped_from_stat(&stat).map_err(|what| FlowError::Output {
        tool: "yosys",
        what,
        log: logs.join("yosys.log").display().to_string(),
    })?;
    fit::check_synthesis(&mapped, &b.resources, &b.part)?;

    // Place and route.
    let freq = format!("{}", clock_mhz);
    let common = |v: &mut Vec<String>| {
        v.extend(
            [
                "--json",
                "build/synth.json",
                "--report",
                "build/nextpnr-report.json",
                "--timing-allow-fail",
                "--freq",
                &freq,
                "--seed",
                &s.seed.to_string(),
            ]
            .iter()
            .map(|x| x.to_string()),
        )
    };
    let (tool, mut args, routed) = match &b.chip {
        Chip::Ecp5 {
            device,
            package,
            speed,
        } => (
            Tool::NextpnrEcp5,
            vec![
                format!("--{device}"),
                "--package".into(),
                package.clone(),
                "--speed".into(),
                speed.to_string(),
                "--lpf".into(),
                cname.into(),
                "--textcfg".into(),
                "build/routed.config".into(),
            ],
            "build/routed.config",
        ),
        Chip::Gowin {
            device,
            chip,
            config_pins_as_gpio,
            ..
        } => {
            let mut args = vec![
                "--device".into(),
                device.clone(),
                "--vopt".into(),
                format!("family={chip}"),
                "--vopt".into(),
                format!("cst={cname}"),
                "--write".into(),
                "build/routed.json".into(),
            ];
            args.extend(nextpnr_config_pin_opts(config_pins_as_gpio));
            (Tool::NextpnrGowin, args, "build/routed.json")
        }
    };
    common(&mut args);
    let exe = find(tool, progress)?;
    progress(&format!(
        "place and route: {} for {} at {clock_mhz} MHz ({}; log logs/nextpnr.log)",
        tool.label(),
        b.part,
        exe.display()
    ));
    let t = tools::run(
        &Run {
            tool,
            exe: &exe,
            args,
            dir: out,
            log: logs.join("nextpnr.log"),
            phase: nextpnr_phase,
        },
        &mut throttled(progress),
    )?;
    progress(&format!("place and route done in {}", tools::elapsed(t)));
    stages.push(("place and route".to_string(), t.as_secs_f64()));
    let rpath = build.join("nextpnr-report.json");
    let rtext = std::fs::read_to_string(&rpath).map_err(|_| FlowError::Output {
        tool: tool.label(),
        what: "build/nextpnr-report.json".into(),
        log: logs.join("nextpnr.log").display().to_string(),
    })?;
    let mut report = report::parse(&rtext, &rpath.display().to_string())?;
    // Clocks nextpnr derived no constraint for are held to the design clock's target.
    for c in &mut report.clocks {
        if c.target_mhz <= 0.0 {
            c.target_mhz = clock_mhz;
            c.met = c.fmax_mhz >= clock_mhz;
        }
    }

    // Pack.
    let mut bitstream = None;
    if s.pack {
        let (tool, file, args) = match &b.chip {
            Chip::Ecp5 { .. } => (
                Tool::Ecppack,
                "vta.bit",
                vec![routed.to_string(), "vta.bit".to_string()],
            ),
            Chip::Gowin {
                chip,
                config_pins_as_gpio,
                ..
            } => {
                let mut args = vec!["-d".to_string(), chip.clone()];
                args.extend(gowin_pack_config_pin_opts(config_pins_as_gpio));
                args.extend(["-o".into(), "vta.fs".into(), routed.to_string()]);
                (Tool::GowinPack, "vta.fs", args)
            }
        };
        let exe = find(tool, progress)?;
        progress(&format!(
            "pack: {} -> {file} (log logs/pack.log)",
            tool.label()
        ));
        let _ = std::fs::remove_file(out.join(file));
        let t = tools::run(
            &Run {
                tool,
                exe: &exe,
                args,
                dir: out,
                log: logs.join("pack.log"),
                phase: any_line,
            },
            progress,
        )?;
        stages.push(("pack".to_string(), t.as_secs_f64()));
        let path = out.join(file);
        if std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0) == 0 {
            return Err(FlowError::Output {
                tool: tool.label(),
                what: format!("bitstream {file}"),
                log: logs.join("pack.log").display().to_string(),
            });
        }
        bitstream = Some(path);
    }
    Ok(Outcome {
        clock_mhz,
        mapped,
        report,
        bitstream,
        stages,
        tools: used,
    })
}

/// The `synth_gowin` option for GW5A flip-flops: only DFFSE/DFFRE/DFFPE/DFFCE, the four
/// types Gowin's UG303 (Arora V CFU) documents. The plain DFF/DFFE types yosys otherwise
/// maps leave a flip-flop's clock-enable mux to the chip's default wiring, which Apycula 0.32
/// (the one nextpnr 0.11.1 takes) does not set (Apicula PR #501 sets it from 0.33 on).
fn gw5a_dffs(synth_family: &str) -> &'static str {
    if synth_family == "gw5a" {
        " -strict-gw5a-dffs"
    } else {
        ""
    }
}

/// nextpnr-himbaechel's options for the board's dual-purpose pin groups used as user I/O
/// (it checks only some groups; the packer sets them all).
fn nextpnr_config_pin_opts(groups: &[String]) -> Vec<String> {
    groups
        .iter()
        .filter(|g| NEXTPNR_CONFIG_PIN_GROUPS.contains(&g.as_str()))
        .flat_map(|g| ["--vopt".to_string(), format!("{g}_as_gpio")])
        .collect()
}

/// `gowin_pack`'s options for the board's dual-purpose pin groups used as user I/O.
fn gowin_pack_config_pin_opts(groups: &[String]) -> Vec<String> {
    groups.iter().map(|g| format!("--{g}_as_gpio")).collect()
}

/// `progress` passing a tool's phase lines at most every 10 s (the tool's own heartbeat
/// every 30 s always passes).
fn throttled(progress: &mut dyn FnMut(&str)) -> impl FnMut(&str) + '_ {
    let mut last: Option<std::time::Instant> = None;
    move |line: &str| {
        let now = std::time::Instant::now();
        if last.is_none_or(|t| now.duration_since(t) >= Duration::from_secs(10))
            || line.contains("still:")
            || line.contains("Max frequency")
        {
            progress(&format!("  {line}"));
            last = Some(now);
        }
    }
}

/// The output frequency a PLL tool reports: `ecppll`'s "clkout0 frequency: 50 MHz" or
/// `gowin_pll`'s "Achieved output frequency:    60.000 MHz".
pub fn pll_frequency(text: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        let l = l.trim_start_matches([' ', '*', '/']);
        let rest = l
            .strip_prefix("clkout0 frequency:")
            .or_else(|| l.strip_prefix("Achieved output frequency:"))?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pll_tool_outputs_are_read() {
        assert_eq!(
            pll_frequency("Pll parameters:\nclkout0 frequency: 50 MHz\nVCO frequency: 600"),
            Some(50.0)
        );
        assert_eq!(
            pll_frequency(" * Achieved output frequency:    60.000 MHz\n"),
            Some(60.0)
        );
        assert_eq!(pll_frequency("nothing"), None);
    }

    #[test]
    fn phase_lines() {
        assert!(yosys_phase("4.12. Executing ABC pass."));
        assert!(!yosys_phase("4. Executing SYNTH pass."));
        assert!(nextpnr_phase("Info: Running main analytical placer."));
        assert!(nextpnr_phase(
            "Info:      10000 |        0       9999 |    0  9999 |      1234|       1.2       3.4|"
        ));
        assert!(!nextpnr_phase("Info:    routing  1.10  1.62 Net c[0]"));
    }

    #[test]
    fn gowin_options_follow_the_board() {
        let boards = super::super::board::builtin();
        let chip = |n: &str| boards.iter().find(|b| b.name == n).unwrap().chip.clone();
        let Chip::Gowin {
            synth_family,
            config_pins_as_gpio,
            ..
        } = chip("tang-mega-138k-pro")
        else {
            panic!("not Gowin")
        };
        assert_eq!(gw5a_dffs(&synth_family), " -strict-gw5a-dffs");
        assert_eq!(
            gowin_pack_config_pin_opts(&config_pins_as_gpio),
            ["--cpu_as_gpio", "--mspi_as_gpio"]
        );
        assert!(nextpnr_config_pin_opts(&config_pins_as_gpio).is_empty());
        let groups = ["sspi".to_string(), "done".to_string()];
        assert_eq!(nextpnr_config_pin_opts(&groups), ["--vopt", "sspi_as_gpio"]);
        let Chip::Gowin {
            synth_family,
            config_pins_as_gpio,
            ..
        } = chip("tang-nano-20k")
        else {
            panic!("not Gowin")
        };
        assert_eq!(gw5a_dffs(&synth_family), "");
        assert!(config_pins_as_gpio.is_empty());
    }

    #[test]
    fn a_clock_without_pll_is_refused_before_any_tool() {
        let b = super::super::board::builtin()
            .into_iter()
            .find(|b| b.name == "tang-mega-138k-pro")
            .unwrap();
        let d = top::counter_design();
        let dir = std::env::temp_dir().join("vta-never-written");
        let s = Spec {
            board: &b,
            design: &d,
            clock_mhz: 60.0,
            out: &dir,
            pack: true,
            seed: 1,
        };
        let e = precheck(&s).unwrap_err().to_string();
        assert!(e.contains("\"CLOCK_MHZ\": 50"), "{e}");
        assert!(!dir.exists());
    }
}
