//! Resource use of a generated design: synthesis with yosys (`synth_xilinx`) and a report
//! of LUTs, flip-flops, DSP48E1s and block RAMs against an FPGA part's totals, with the GEMM
//! array's multiply-accumulates per cycle per DSP48E1 and per thousand LUTs ([`Density`]):
//! what low-bit configs and packed multipliers buy at equal area.
//!
//! LUTs count every LUT1..LUT6 and inverter plus the LUTs inside distributed-RAM and
//! shift-register primitives (a RAM64M is four LUTs, ...), as Vivado's "Slice LUTs" does. Block RAM is
//! counted in 36 Kb units: RAMB36E1 + RAMB18E1 / 2. The counts come from yosys' machine-readable
//! `stat -json`, and [`Utilization::to_json`] is what `vta hw report --json` prints (and what
//! `vta hw bitstream`'s fit pre-check reads).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// An FPGA part's resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Part {
    /// Part name, e.g. `xc7z020`.
    pub name: &'static str,
    /// yosys `synth_xilinx -family` value.
    pub family: &'static str,
    pub luts: u64,
    pub ffs: u64,
    pub dsps: u64,
    /// Block RAM in 36 Kb units.
    pub bram36: u64,
}

/// The parts `vta hw report --part` knows.
pub const PARTS: &[Part] = &[
    Part {
        name: "xc7z020",
        family: "xc7",
        luts: 53_200,
        ffs: 106_400,
        dsps: 220,
        bram36: 140,
    },
    Part {
        name: "xc7z010",
        family: "xc7",
        luts: 17_600,
        ffs: 35_200,
        dsps: 80,
        bram36: 60,
    },
    Part {
        name: "xc7z045",
        family: "xc7",
        luts: 218_600,
        ffs: 437_200,
        dsps: 900,
        bram36: 545,
    },
];

/// The part called `name`.
pub fn part(name: &str) -> Option<Part> {
    PARTS
        .iter()
        .copied()
        .find(|p| p.name.eq_ignore_ascii_case(name))
}

/// Resource use after synthesis.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Utilization {
    pub luts: u64,
    /// LUTs used as distributed RAM or shift registers (included in `luts`).
    pub lutram: u64,
    pub ffs: u64,
    pub dsps: u64,
    pub ramb36: u64,
    pub ramb18: u64,
    /// UltraRAM blocks (URAM288), UltraScale+ only.
    pub urams: u64,
    /// Every cell type and its count, as yosys' `stat` lists them.
    pub cells: BTreeMap<String, u64>,
}

impl Utilization {
    /// Block RAM in 36 Kb units (RAMB36 + RAMB18 / 2).
    pub fn bram36(&self) -> f64 {
        self.ramb36 as f64 + self.ramb18 as f64 / 2.0
    }
}

/// LUTs a distributed-RAM or shift-register primitive occupies.
fn lut_cost(cell: &str) -> Option<u64> {
    Some(match cell {
        // An inverter yosys leaves unabsorbed becomes a LUT1 in the FPGA.
        "LUT1" | "LUT2" | "LUT3" | "LUT4" | "LUT5" | "LUT6" | "INV" => return None,
        "RAM32X1S" | "RAM64X1S" | "SRL16E" | "SRLC16E" | "SRLC32E" => 1,
        "RAM32X1D" | "RAM64X1D" | "RAM128X1S" => 2,
        "RAM32M" | "RAM64M" | "RAM128X1D" | "RAM256X1S" => 4,
        "RAM32M16" | "RAM64M8" => 8,
        _ => return Some(0),
    })
}

/// Reads the cell counts of the whole (flat) design from yosys' `stat -json` output.
pub fn parse_stat_json(text: &str) -> Result<Utilization, ReportError> {
    let bad = |why: String| ReportError::Stat(why);
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| bad(format!("not JSON ({e})")))?;
    let by_type = v["design"]["num_cells_by_type"]
        .as_object()
        .ok_or_else(|| bad("no design.num_cells_by_type".into()))?;
    let mut u = Utilization::default();
    for (name, n) in by_type {
        let n = n
            .as_u64()
            .ok_or_else(|| bad(format!("count of {name} is not a number")))?;
        u.cells.insert(name.clone(), n);
    }
    for (name, &n) in &u.cells {
        match lut_cost(name) {
            None => u.luts += n,
            Some(c) if c > 0 => {
                u.luts += c * n;
                u.lutram += c * n;
            }
            _ => {}
        }
        if name.starts_with("FD") {
            u.ffs += n;
        }
        if name.starts_with("DSP48") {
            u.dsps += n;
        }
        if name.starts_with("RAMB36") || name.starts_with("FIFO36") {
            u.ramb36 += n;
        }
        if name.starts_with("RAMB18") || name.starts_with("FIFO18") {
            u.ramb18 += n;
        }
        if name.starts_with("URAM288") {
            u.urams += n;
        }
    }
    Ok(u)
}

impl Utilization {
    /// The figures as JSON, with what they describe (`meta`: config string, hashes, part,
    /// family, yosys version, ...) merged in front.
    pub fn to_json(&self, meta: serde_json::Map<String, serde_json::Value>) -> serde_json::Value {
        let mut m = meta;
        for (k, v) in [
            ("luts", self.luts),
            ("lutram", self.lutram),
            ("ffs", self.ffs),
            ("dsps", self.dsps),
            ("ramb36", self.ramb36),
            ("ramb18", self.ramb18),
            ("urams", self.urams),
        ] {
            m.insert(k.into(), v.into());
        }
        m.insert("bram36".into(), serde_json::json!(self.bram36()));
        m.insert("cells".into(), serde_json::json!(self.cells));
        serde_json::Value::Object(m)
    }
}

/// The GEMM array's MACs per cycle (`BATCH * BLOCK_IN * BLOCK_OUT`) against the whole
/// design's resources: what a config computes per DSP48E1 and per thousand LUTs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Density {
    pub macs_per_cycle: u64,
    /// `None` when the design uses no DSP48E1.
    pub per_dsp: Option<f64>,
    pub per_klut: f64,
}

impl Density {
    /// `macs_per_cycle` against `u`.
    pub fn new(u: &Utilization, macs_per_cycle: u64) -> Density {
        Density {
            macs_per_cycle,
            per_dsp: (u.dsps > 0).then(|| macs_per_cycle as f64 / u.dsps as f64),
            per_klut: macs_per_cycle as f64 * 1000.0 / u.luts.max(1) as f64,
        }
    }

    /// The line of the report, as `GEMM: 256 MACs/cycle, 1.45 per DSP48E1, 14.6 per 1k LUT`.
    pub fn line(&self) -> String {
        let dsp = match self.per_dsp {
            Some(d) => format!("{d:.2} per DSP48E1"),
            None => "no DSP48E1".to_string(),
        };
        format!(
            "GEMM: {} MACs/cycle, {dsp}, {:.1} per 1k LUT",
            self.macs_per_cycle, self.per_klut
        )
    }

    /// The figures as JSON fields (`macs_per_dsp` is null without DSP48E1s).
    pub fn insert_json(&self, m: &mut serde_json::Map<String, serde_json::Value>) {
        m.insert("macs_per_cycle".into(), self.macs_per_cycle.into());
        m.insert("macs_per_dsp".into(), serde_json::json!(self.per_dsp));
        m.insert("macs_per_klut".into(), serde_json::json!(self.per_klut));
    }
}

/// Why a report could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// yosys is not installed.
    #[error("`yosys` is needed for the resource report but could not be run ({0}); install it with `apt-get install yosys` (Debian/Ubuntu)")]
    YosysMissing(String),
    /// yosys failed.
    #[error("yosys failed (exit status {status}); the end of its log:\n{log}")]
    YosysFailed { status: String, log: String },
    /// yosys' `stat -json` output was not what it should be.
    #[error("cannot read yosys' statistics: {0}")]
    Stat(String),
    /// A top or family name that is not a plain identifier.
    #[error("top module and family must be plain identifiers, got {0}")]
    Name(String),
    /// A work file could not be written or read.
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: String,
        source: std::io::Error,
    },
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> ReportError + 'a {
    move |source| ReportError::Io {
        what,
        path: path.display().to_string(),
        source,
    }
}

/// The yosys version string, checking that yosys runs.
pub fn yosys_version() -> Result<String, ReportError> {
    let out = Command::new("yosys")
        .arg("-V")
        .output()
        .map_err(|e| ReportError::YosysMissing(e.to_string()))?;
    if !out.status.success() {
        return Err(ReportError::YosysMissing(format!(
            "`yosys -V` exited with {}",
            out.status
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Synthesizes `verilog` (top `top`) for `family` with yosys in `work_dir` and returns the
/// flat design's cell counts. `progress` receives the major synthesis steps as yosys
/// reaches them (with the elapsed time).
pub fn synthesize(
    verilog: &str,
    top: &str,
    family: &str,
    work_dir: &Path,
    progress: &mut dyn FnMut(&str),
) -> Result<Utilization, ReportError> {
    yosys_version()?;
    std::fs::create_dir_all(work_dir).map_err(io("creating", work_dir))?;
    let src = work_dir.join(format!("{top}.v"));
    std::fs::write(&src, verilog).map_err(io("writing", &src))?;
    let stat = work_dir.join("stat.json");
    // yosys runs in the work directory and its script names only the two file names, so no
    // path (spaces, quotes, semicolons) ever reaches yosys' command parser. `tee -o` takes
    // quotes literally, so quoting would not do.
    let script = format!(
        "read_verilog {top}.v; synth_xilinx -family {family} -top {top} -flatten; \
         tee -q -o stat.json stat -json"
    );
    if !top.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        || !family.chars().all(|c| c.is_ascii_alphanumeric())
    {
        return Err(ReportError::Name(format!("{top} / {family}")));
    }
    let t = Instant::now();
    let mut child = Command::new("yosys")
        .current_dir(work_dir)
        .args(["-l", "yosys.log"])
        .arg("-p")
        .arg(&script)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| ReportError::YosysMissing(e.to_string()))?;
    let mut tail: Vec<String> = vec![];
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            // Top-level steps and the synth_xilinx script's own steps: "4.12. Executing X".
            if let Some(rest) = line.strip_prefix(|c: char| c.is_ascii_digit()) {
                let depth = line.split(' ').next().unwrap_or("").matches('.').count();
                if depth <= 2 && rest.contains("Executing") {
                    progress(&format!(
                        "[{:6.1}s] {}",
                        t.elapsed().as_secs_f64(),
                        line.trim()
                    ));
                }
            }
            tail.push(line);
            if tail.len() > 40 {
                tail.remove(0);
            }
        }
    }
    let status = child
        .wait()
        .map_err(|e| ReportError::YosysMissing(e.to_string()))?;
    if !status.success() {
        return Err(ReportError::YosysFailed {
            status: status.to_string(),
            log: tail.join("\n"),
        });
    }
    progress(&format!("[{:6.1}s] done", t.elapsed().as_secs_f64()));
    let text = std::fs::read_to_string(&stat).map_err(io("reading", &stat))?;
    parse_stat_json(&text)
}

/// [`synthesize`] in a fresh temporary directory with an unpredictable name, removed
/// afterwards.
pub fn synthesize_in_temp_dir(
    verilog: &str,
    top: &str,
    family: &str,
    progress: &mut dyn FnMut(&str),
) -> Result<Utilization, ReportError> {
    let dir = tempfile::Builder::new()
        .prefix("vta-hw-report-")
        .tempdir()
        .map_err(io(
            "creating a temporary directory in",
            &std::env::temp_dir(),
        ))?;
    synthesize(verilog, top, family, dir.path(), progress)
}

/// The report table: each resource, used, available and percentage, then the GEMM array's
/// [`Density`] (`macs_per_cycle` MACs per cycle).
pub fn format_report(u: &Utilization, p: &Part, title: &str, macs_per_cycle: u64) -> String {
    let mut s = format!(
        "{title}\nresource use on {} (yosys synth_xilinx -family {})\n",
        p.name, p.family
    );
    let pct = |used: f64, total: u64| 100.0 * used / total as f64;
    let rows: [(&str, f64, u64, String); 4] = [
        (
            "LUT",
            u.luts as f64,
            p.luts,
            format!("{} as distributed RAM/SRL", u.lutram),
        ),
        ("FF", u.ffs as f64, p.ffs, String::new()),
        ("DSP48E1", u.dsps as f64, p.dsps, String::new()),
        (
            "BRAM36",
            u.bram36(),
            p.bram36,
            format!("{} RAMB36 + {} RAMB18", u.ramb36, u.ramb18),
        ),
    ];
    let _ = writeln!(
        s,
        "{:<8} {:>9} {:>9} {:>7}",
        "resource", "used", "available", "use"
    );
    for (name, used, total, note) in rows {
        let used_s = if used.fract() == 0.0 {
            format!("{used:.0}")
        } else {
            format!("{used:.1}")
        };
        let _ = writeln!(
            s,
            "{name:<8} {used_s:>9} {total:>9} {:>6.1}%{}",
            pct(used, total),
            if note.is_empty() {
                String::new()
            } else {
                format!("  ({note})")
            }
        );
    }
    s.push_str(&Density::new(u, macs_per_cycle).line());
    s.push('\n');
    s
}

/// Two designs side by side (`vta hw report --compare`): each resource used by `a` and by
/// `b`, the difference `a - b` and its share of the part, for example the cost of an option
/// such as `ALU_LUT` when `b` is the same config without it; then each one's [`Density`]
/// (the last number of each design is its MACs per cycle).
pub fn format_comparison(
    (a, a_name, a_macs): (&Utilization, &str, u64),
    (b, b_name, b_macs): (&Utilization, &str, u64),
    p: &Part,
    title: &str,
) -> String {
    let mut s = format!(
        "{title}\nresource use on {} (yosys synth_xilinx -family {}): A = {a_name}, B = {b_name}\n",
        p.name, p.family
    );
    let shown = |v: f64| {
        if v.fract() == 0.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    };
    let rows: [(&str, f64, f64, u64); 6] = [
        ("LUT", a.luts as f64, b.luts as f64, p.luts),
        ("LUTRAM", a.lutram as f64, b.lutram as f64, p.luts),
        ("FF", a.ffs as f64, b.ffs as f64, p.ffs),
        ("DSP48E1", a.dsps as f64, b.dsps as f64, p.dsps),
        ("BRAM36", a.bram36(), b.bram36(), p.bram36),
        ("RAMB18", a.ramb18 as f64, b.ramb18 as f64, p.bram36 * 2),
    ];
    let _ = writeln!(
        s,
        "{:<8} {:>9} {:>9} {:>10} {:>9}",
        "resource", "A", "B", "A - B", "of part"
    );
    for (name, ua, ub, total) in rows {
        let d = ua - ub;
        let sign = if d > 0.0 { "+" } else { "" };
        let _ = writeln!(
            s,
            "{name:<8} {:>9} {:>9} {:>10} {:>8.1}%",
            shown(ua),
            shown(ub),
            format!("{sign}{}", shown(d)),
            100.0 * d / total as f64
        );
    }
    let _ = writeln!(s, "A {}", Density::new(a, a_macs).line());
    let _ = writeln!(s, "B {}", Density::new(b, b_macs).line());
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_is_parsed_and_lutram_counted() {
        // The shape of yosys 0.23's `stat -json` (trimmed).
        let text = r#"{"creator": "Yosys 0.23", "invocation": "stat -json ",
            "modules": {"\\vta_top": {"num_cells": 149}},
            "design": {"num_cells": 149, "num_cells_by_type": {"CARRY4": 2, "DSP48E1": 3,
                "FDRE": 100, "FDSE": 2, "LUT2": 10, "LUT6": 20, "RAM64M": 5, "RAMB18E1": 3,
                "RAMB36E1": 4}}}"#;
        let u = parse_stat_json(text).unwrap();
        assert_eq!(u.luts, 10 + 20 + 20);
        assert_eq!(u.lutram, 20);
        assert_eq!(u.ffs, 102);
        assert_eq!(u.dsps, 3);
        assert_eq!(u.bram36(), 5.5);
        let r = format_report(&u, &part("xc7z020").unwrap(), "t", 16);
        assert!(r.contains("BRAM36"), "{r}");
        // 16 MACs on 3 DSP48E1s and 50 LUTs.
        assert!(
            r.contains("GEMM: 16 MACs/cycle, 5.33 per DSP48E1, 320.0 per 1k LUT"),
            "{r}"
        );
        let j = u.to_json(serde_json::Map::new());
        assert_eq!(j["bram36"], 5.5);
        assert_eq!(j["cells"]["LUT6"], 20);
    }

    #[test]
    fn a_comparison_shows_both_designs_and_the_difference() {
        let a = Utilization {
            luts: 1500,
            lutram: 512,
            ffs: 300,
            ramb36: 2,
            ramb18: 1,
            ..Utilization::default()
        };
        let b = Utilization {
            luts: 1000,
            ffs: 200,
            ramb36: 2,
            ..Utilization::default()
        };
        let r = format_comparison(
            (&a, "x_lut", 64),
            (&b, "x", 64),
            &part("xc7z020").unwrap(),
            "t",
        );
        assert!(
            r.contains("A GEMM: 64 MACs/cycle, no DSP48E1, 42.7 per 1k LUT"),
            "{r}"
        );
        assert!(
            r.contains("B GEMM: 64 MACs/cycle, no DSP48E1, 64.0 per 1k LUT"),
            "{r}"
        );
        assert!(r.contains("A = x_lut, B = x"), "{r}");
        let line = |name: &str| {
            r.lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("{name} in {r}"))
                .split_whitespace()
                .map(str::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(line("LUT ")[..4], ["LUT", "1500", "1000", "+500"]);
        assert_eq!(line("LUTRAM")[..4], ["LUTRAM", "512", "0", "+512"]);
        assert_eq!(line("BRAM36")[..4], ["BRAM36", "2.5", "2", "+0.5"]);
        assert_eq!(line("DSP48E1")[..4], ["DSP48E1", "0", "0", "0"]);
    }

    #[test]
    fn bad_stat_json_is_an_error() {
        assert!(parse_stat_json("Number of cells: 3").is_err());
        let e = parse_stat_json(r#"{"design": {}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("num_cells_by_type"), "{e}");
    }

    #[test]
    fn missing_yosys_says_how_to_install() {
        let e = ReportError::YosysMissing("not found".into()).to_string();
        assert!(e.contains("apt-get install yosys"), "{e}");
    }
}

/// The accelerator Verilog's FNV-1a hash, 16 hex digits: identifies the RTL an estimate is of
/// (`rtl_hash` in `vta hw report --json`, and the key of the design-space exploration's cache).
pub fn rtl_hash(verilog: &str) -> String {
    format!("{:016x}", isa::container::fnv1a(verilog.as_bytes()))
}

/// What a resource estimate (`vta hw report --json`) describes besides the figures: the
/// config, the RTL it synthesized, the part and family, and the tool (`yosys`: its version).
pub fn estimate_meta(
    g: &crate::Generated,
    part: &str,
    family: &str,
    yosys: &str,
) -> serde_json::Map<String, serde_json::Value> {
    let mut m = serde_json::Map::new();
    m.insert("config_string".into(), g.config.config_string().into());
    m.insert(
        "isa_hash".into(),
        format!("{:016x}", g.config.isa_hash()).into(),
    );
    m.insert("rtl_hash".into(), rtl_hash(&g.verilog).into());
    m.insert("part".into(), part.into());
    m.insert("family".into(), family.into());
    m.insert(
        "tool".into(),
        format!("{yosys} synth_xilinx -family {family}").into(),
    );
    m
}
