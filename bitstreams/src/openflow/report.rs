//! The reports of a routed design, read from nextpnr's `--report` JSON: resource use, the
//! maximum frequency of each clock against its target, and each clock's critical path named
//! by the signals of our RTL (nextpnr's cell names are yosys' mapping artefacts; the nets
//! keep the RTL's register and wire names).

use serde::{Deserialize, Serialize};

/// One resource of the part.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Use {
    /// nextpnr's cell type, e.g. `TRELLIS_COMB`, `DP16KD`.
    pub resource: String,
    /// What it is, e.g. `LUT4 (logic)`.
    pub meaning: String,
    pub used: u64,
    pub available: u64,
}

/// One clock's timing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClockTiming {
    /// The clock net, cleaned of the tools' decorations (e.g. `clk`).
    pub clock: String,
    pub fmax_mhz: f64,
    pub target_mhz: f64,
    pub met: bool,
    pub critical_path: Option<CriticalPath>,
}

/// The slowest register-to-register path of a clock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CriticalPath {
    pub delay_ns: f64,
    pub logic_ns: f64,
    pub routing_ns: f64,
    /// Logic cells passed through (carry-chain hops counted once per cell).
    pub cells: usize,
    /// The signal the path starts from (a register's output).
    pub from: String,
    /// The register (or RAM/DSP) it ends at.
    pub to: String,
    /// The RTL signals along the path, in order (start included), each with the line of our
    /// Verilog its logic comes from when the tools kept it (`rtl/design.v:2548`).
    pub through: Vec<String>,
}

/// The routed design's report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub resources: Vec<Use>,
    pub clocks: Vec<ClockTiming>,
}

impl Report {
    /// Every clock meets its target.
    pub fn timing_met(&self) -> bool {
        self.clocks.iter().all(|c| c.met)
    }

    /// The resource of that nextpnr cell type, if the part has it.
    pub fn resource(&self, cell: &str) -> Option<&Use> {
        self.resources.iter().find(|u| u.resource == cell)
    }
}

/// Why a report could not be read.
#[derive(Debug, thiserror::Error)]
#[error("nextpnr's report {path} cannot be read: {problem}")]
pub struct ReportError {
    pub path: String,
    pub problem: String,
}

/// Cell types worth showing, with their meaning, in the order shown; others are listed only
/// when used.
const KNOWN: &[(&str, &str)] = &[
    ("TRELLIS_COMB", "LUT4 (logic, carry, LUT RAM)"),
    ("TRELLIS_FF", "flip-flop"),
    ("TRELLIS_RAMW", "LUT RAM write port"),
    ("DP16KD", "block RAM 18 Kb"),
    ("MULT18X18D", "multiplier 18x18"),
    ("ALU54B", "DSP accumulator"),
    ("EHXPLLL", "PLL"),
    ("TRELLIS_IO", "I/O pin"),
    ("LUT4", "LUT4 (logic)"),
    ("ALU", "carry-chain ALU (1 LUT each)"),
    ("DFF", "flip-flop"),
    ("RAM16SDP4", "LUT RAM 16x4"),
    ("BSRAM", "block RAM 18 Kb"),
    ("MULT9X9", "multiplier 9x9"),
    ("MULT18X18", "multiplier 18x18"),
    ("MULT36X36", "multiplier 36x36"),
    ("MULTALU18X18", "multiplier + ALU"),
    ("MULTADDALU18X18", "multiply-add"),
    ("MULT12X12", "multiplier 12x12"),
    ("MULT27X36", "multiplier 27x36"),
    ("PLL", "PLL"),
    ("rPLL", "PLL"),
    ("IOB", "I/O pin"),
];

/// A clock net's name without the tools' decorations: `$glbnet$clk$TRELLIS_IO_IN` -> `clk`.
pub fn clean_clock(name: &str) -> String {
    let n = name
        .trim_start_matches("posedge ")
        .trim_start_matches("negedge ");
    let n = n.strip_prefix("$glbnet$").unwrap_or(n);
    n.split('$')
        .find(|s| !s.is_empty())
        .unwrap_or(n)
        .to_string()
}

/// Suffixes yosys adds to the names of the cells (and nets) it maps: what precedes them is
/// the RTL signal.
const MARKERS: &[&str] = &[
    "_TRELLIS_",
    "_DFF",
    "_DP16KD",
    "_PDPW16KD",
    "_MULT",
    "_ALU54",
    "_SDPB",
    "_DPB",
    "_SDPX9B",
    "_DPX9B",
    "_RAM16",
    "_LUT",
    "_CCU2",
    "_ALU",
    "_MUX2",
];

/// Cell types that are always there and say nothing about the design.
const INFRASTRUCTURE: &[&str] = &["GND", "VCC", "GSR"];

/// The RTL register an endpoint cell stands for: yosys names mapped flip-flops, RAMs and DSPs
/// after the net they drive plus a suffix (`c_TRELLIS_FF_Q_19` is a bit of register `c`).
fn cell_signal(cell: &str) -> String {
    let cut = MARKERS
        .iter()
        .filter_map(|m| cell.find(m))
        .chain(cell.find('$'))
        .min()
        .unwrap_or(cell.len());
    if cut == 0 {
        cell.to_string()
    } else {
        cell[..cut].to_string()
    }
}

/// Parses nextpnr's `--report` JSON (a clock without a constraint gets target 0).
pub fn parse(json: &str, path: &str) -> Result<Report, ReportError> {
    let err = |problem: String| ReportError {
        path: path.into(),
        problem,
    };
    let v: serde_json::Value =
        serde_json::from_str(json).map_err(|e| err(format!("not JSON: {e}")))?;
    let util = v["utilization"]
        .as_object()
        .ok_or_else(|| err("no \"utilization\" object".into()))?;
    let mut resources = vec![];
    let num = |x: &serde_json::Value, k: &str| x[k].as_u64().unwrap_or(0);
    for (cell, meaning) in KNOWN {
        if let Some(u) = util.get(*cell) {
            if num(u, "available") > 0 {
                resources.push(Use {
                    resource: cell.to_string(),
                    meaning: meaning.to_string(),
                    used: num(u, "used"),
                    available: num(u, "available"),
                });
            }
        }
    }
    for (cell, u) in util {
        if num(u, "used") > 0
            && !KNOWN.iter().any(|(k, _)| k == cell)
            && !INFRASTRUCTURE.contains(&cell.as_str())
        {
            resources.push(Use {
                resource: cell.clone(),
                meaning: "other".into(),
                used: num(u, "used"),
                available: num(u, "available"),
            });
        }
    }
    let fmax = v["fmax"]
        .as_object()
        .ok_or_else(|| err("no \"fmax\" object (did nextpnr finish routing?)".into()))?;
    let paths = v["critical_paths"].as_array().cloned().unwrap_or_default();
    let mut clocks = vec![];
    for (clock, f) in fmax {
        let achieved = f["achieved"]
            .as_f64()
            .ok_or_else(|| err(format!("clock {clock} has no achieved frequency")))?;
        let target = f["constraint"].as_f64().unwrap_or(0.0);
        let critical_path = paths
            .iter()
            .find(|p| {
                p["from"].as_str().map(clean_clock) == Some(clean_clock(clock))
                    && p["to"].as_str().map(clean_clock) == Some(clean_clock(clock))
            })
            .and_then(critical_path);
        clocks.push(ClockTiming {
            clock: clean_clock(clock),
            fmax_mhz: achieved,
            target_mhz: target,
            met: achieved >= target,
            critical_path,
        });
    }
    Ok(Report { resources, clocks })
}

fn critical_path(p: &serde_json::Value) -> Option<CriticalPath> {
    let steps = p["path"].as_array()?;
    let mut logic_ns = 0.0;
    let mut routing_ns = 0.0;
    let mut cells = 0;
    let mut last_cell = String::new();
    let mut through: Vec<(String, Option<String>)> = vec![];
    for s in steps {
        let d = s["delay"].as_f64().unwrap_or(0.0);
        match s["type"].as_str().unwrap_or("") {
            "routing" => {
                routing_ns += d;
                if let Some(net) = s["net"].as_str() {
                    let name = net_signal(net);
                    let src = s["sources"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|x| x.as_str())
                        .find(|x| x.starts_with("rtl/"))
                        .map(|x| x.split('.').take(2).collect::<Vec<_>>().join("."));
                    match through.last_mut() {
                        // The same signal again: keep the first Verilog line found for it.
                        Some(last) if last.0 == name => last.1 = last.1.take().or(src),
                        _ if !name.is_empty() => through.push((name, src)),
                        _ => {}
                    }
                }
            }
            t => {
                logic_ns += d;
                if t == "logic" {
                    let cell = s["from"]["cell"].as_str().unwrap_or("").to_string();
                    if cell != last_cell {
                        cells += 1;
                        last_cell = cell;
                    }
                }
            }
        }
    }
    let first = steps.first()?;
    let last = steps.last()?;
    let from = through
        .first()
        .map(|t| t.0.clone())
        .unwrap_or_else(|| cell_signal(first["from"]["cell"].as_str().unwrap_or("?")));
    let to = cell_signal(last["to"]["cell"].as_str().unwrap_or("?"));
    // The endpoint's own input net repeats the endpoint.
    if through.len() > 1 && through.last().is_some_and(|t| t.0 == to) {
        through.pop();
    }
    Some(CriticalPath {
        delay_ns: logic_ns + routing_ns,
        logic_ns,
        routing_ns,
        cells,
        from,
        to,
        through: through
            .into_iter()
            .map(|(n, src)| match src {
                Some(s) => format!("{n} ({s})"),
                None => n,
            })
            .collect(),
    })
}

/// The RTL signal a net carries or is computed for: yosys names the nets of mapped logic
/// after the register or wire they feed plus a suffix; a nextpnr-made net has no RTL name.
fn net_signal(net: &str) -> String {
    if net.starts_with('$') {
        return String::new();
    }
    let base = cell_signal(net);
    if base.len() < net.len() {
        base
    } else {
        net.to_string()
    }
}

/// Signals of a path as lines, eliding the middle of long ones.
fn through_lines(through: &[String]) -> Vec<String> {
    const SHOW: usize = 10;
    if through.len() <= SHOW {
        return through.to_vec();
    }
    let mut v = through[..SHOW / 2].to_vec();
    v.push(format!("... {} more ...", through.len() - SHOW));
    v.extend_from_slice(&through[through.len() - SHOW / 2..]);
    v
}

/// The report as text for a person.
pub fn format(r: &Report) -> String {
    let mut t = String::from("resources (post-route):\n");
    for u in &r.resources {
        // nextpnr's own helper cells (Gowin's DUMMY_CELL) have no sites on the part.
        let share = if u.available == 0 {
            "  n/a".to_string()
        } else {
            format!("{:>5.1}%", 100.0 * u.used as f64 / u.available as f64)
        };
        t.push_str(&format!(
            "  {:<16} {:>7} of {:>7} ({share})  {}\n",
            u.resource, u.used, u.available, u.meaning
        ));
    }
    t.push_str("timing (post-route):\n");
    for c in &r.clocks {
        let verdict = if c.met {
            format!("met, slack {:.2} ns", 1e3 / c.target_mhz - 1e3 / c.fmax_mhz)
        } else {
            format!(
                "NOT MET, {:.2} ns too slow",
                1e3 / c.fmax_mhz - 1e3 / c.target_mhz
            )
        };
        t.push_str(&format!(
            "  clock {}: Fmax {:.1} MHz against a target of {:.1} MHz: {verdict}\n",
            c.clock, c.fmax_mhz, c.target_mhz
        ));
        if let Some(p) = &c.critical_path {
            t.push_str(&format!(
                "    critical path {:.2} ns ({:.2} logic + {:.2} routing, {} cells)\n      from {}\n",
                p.delay_ns, p.logic_ns, p.routing_ns, p.cells, p.from
            ));
            for s in through_lines(&p.through).iter().skip(1) {
                t.push_str(&format!("      via  {s}\n"));
            }
            t.push_str(&format!("      to   {}\n", p.to));
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trimmed nextpnr-ecp5 0.11 report of a 32-bit counter whose top byte drives LEDs.
    const REPORT: &str = r#"{
      "utilization": {
        "TRELLIS_COMB": {"available": 24288, "used": 60},
        "TRELLIS_FF": {"available": 24288, "used": 33},
        "DP16KD": {"available": 56, "used": 0},
        "MULT18X18D": {"available": 28, "used": 0},
        "TRELLIS_IO": {"available": 197, "used": 12},
        "DCCA": {"available": 56, "used": 1},
        "SEDGA": {"available": 1, "used": 0}
      },
      "fmax": {"$glbnet$clk$TRELLIS_IO_IN": {"achieved": 272.55, "constraint": 25}},
      "critical_paths": [
        {"from": "posedge $glbnet$clk$TRELLIS_IO_IN", "to": "posedge $glbnet$clk$TRELLIS_IO_IN",
         "path": [
          {"type": "clk-to-q", "delay": 0.525, "from": {"cell": "c_TRELLIS_FF_Q_23", "port": "Q"}, "to": {"cell": "c_TRELLIS_FF_Q_23", "port": "Q"}},
          {"type": "routing", "delay": 1.099, "net": "c[0]", "from": {"cell": "c_TRELLIS_FF_Q_23", "port": "Q"}, "to": {"cell": "c_TRELLIS_FF_Q_19_DI_CCU2C_S1$CCU2_COMB0", "port": "B"}},
          {"type": "logic", "delay": 0.447, "from": {"cell": "c_TRELLIS_FF_Q_19_DI_CCU2C_S1$CCU2_COMB0", "port": "B"}, "to": {"cell": "c_TRELLIS_FF_Q_19_DI_CCU2C_S1$CCU2_COMB0", "port": "FCO"}},
          {"type": "routing", "delay": 0, "net": "c_TRELLIS_FF_Q_19_DI_CCU2C_S1$CCU2_FCI_INT", "from": {"cell": "a", "port": "FCO"}, "to": {"cell": "b", "port": "FCI"}},
          {"type": "logic", "delay": 0.2, "from": {"cell": "led_TRELLIS_FF_Q_DI$CCU2_COMB1", "port": "FCI"}, "to": {"cell": "led_TRELLIS_FF_Q_DI$CCU2_COMB1", "port": "F"}},
          {"type": "routing", "delay": 0.3, "net": "led_TRELLIS_FF_Q_DI", "from": {"cell": "x", "port": "F"}, "to": {"cell": "led_TRELLIS_FF_Q_3", "port": "DI"}},
          {"type": "setup", "delay": 0.1, "from": {"cell": "led_TRELLIS_FF_Q_3", "port": "DI"}, "to": {"cell": "led_TRELLIS_FF_Q_3", "port": "CLK"}}
         ]}
      ]
    }"#;

    #[test]
    fn reads_resources_fmax_and_the_critical_path() {
        let r = parse(REPORT, "rep.json").unwrap();
        assert_eq!(r.resource("TRELLIS_FF").unwrap().used, 33);
        assert!(r.resource("DCCA").is_some(), "a used cell type is kept");
        assert!(
            r.resource("SEDGA").is_none(),
            "an unused unknown one is not"
        );
        assert_eq!(r.clocks.len(), 1);
        let c = &r.clocks[0];
        assert_eq!(c.clock, "clk");
        assert!(c.met && (c.fmax_mhz - 272.55).abs() < 1e-9);
        let p = c.critical_path.as_ref().unwrap();
        assert_eq!(p.from, "c[0]");
        assert_eq!(p.to, "led");
        assert_eq!(p.cells, 2);
        assert!((p.delay_ns - 2.671).abs() < 1e-9, "{}", p.delay_ns);
        let text = format(&r);
        assert!(
            text.contains("clock clk: Fmax 272.6 MHz against a target of 25.0 MHz: met"),
            "{text}"
        );
        assert!(
            text.contains("from c[0]") && text.contains("to   led"),
            "{text}"
        );
        let dummy = REPORT.replace(
            "\"DCCA\": {\"available\": 56,",
            "\"DUMMY_CELL\": {\"available\": 0,",
        );
        let text = format(&parse(&dummy, "rep.json").unwrap());
        assert!(
            text.contains("DUMMY_CELL") && text.contains("(  n/a)"),
            "{text}"
        );
    }

    #[test]
    fn a_missed_target_says_by_how_much() {
        let slow = REPORT.replace("\"constraint\": 25", "\"constraint\": 300");
        let r = parse(&slow, "rep.json").unwrap();
        assert!(!r.timing_met());
        assert!(
            format(&r).contains("NOT MET, 0.34 ns too slow"),
            "{}",
            format(&r)
        );
    }

    #[test]
    fn broken_reports_are_named() {
        let e = parse("{}", "x/rep.json").unwrap_err().to_string();
        assert!(e.contains("x/rep.json") && e.contains("utilization"), "{e}");
    }

    #[test]
    fn clock_and_cell_names_are_cleaned() {
        assert_eq!(clean_clock("posedge $glbnet$clk$TRELLIS_IO_IN"), "clk");
        assert_eq!(clean_clock("clk_osc"), "clk_osc");
        assert_eq!(cell_signal("soc.core.q_DFFRE_Q_3"), "soc.core.q");
        assert_eq!(cell_signal("mem.0.0_DP16KD"), "mem.0.0");
        assert_eq!(
            net_signal("design.count_DFFR_Q_28_D_ALU_SUM_CIN"),
            "design.count"
        );
        assert_eq!(net_signal("design.count[3]"), "design.count[3]");
        assert_eq!(net_signal("$nextpnr_CCU2C_75$CIN"), "");
    }
}
