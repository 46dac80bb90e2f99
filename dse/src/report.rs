//! An exploration's outputs: the CSV table (one row per config), the JSON document (the
//! sweep, the target, every config with its figures, the skipped combinations, the model's
//! validation) and the text summary `vta dse` prints; [`write_files`] puts the table, the
//! document and the plot in a directory.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::explore::{Estimate, Exploration, Point};
use crate::sweep::{skip_summary, Param};
use crate::Error;

/// Writes `results.csv`, `results.json` and `pareto.svg` of `x` into `dir` (created if
/// missing); returns their paths in that order.
pub fn write_files(x: &Exploration, dir: &Path) -> Result<[PathBuf; 3], Error> {
    let err = |path: &Path, e: std::io::Error| Error::Write {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    std::fs::create_dir_all(dir).map_err(|e| err(dir, e))?;
    let files = [
        dir.join("results.csv"),
        dir.join("results.json"),
        dir.join("pareto.svg"),
    ];
    std::fs::write(&files[0], csv(x)).map_err(|e| err(&files[0], e))?;
    std::fs::write(&files[1], format!("{:#}\n", json(x))).map_err(|e| err(&files[1], e))?;
    crate::plot::write(x, &files[2])?;
    Ok(files)
}

/// The CSV columns, in order.
pub const CSV_COLUMNS: &[&str] = &[
    "config",
    "batch",
    "block_in",
    "block_out",
    "log_uop_buff",
    "log_inp_buff",
    "log_wgt_buff",
    "log_acc_buff",
    "bus",
    "clock_mhz",
    "inp_width",
    "wgt_width",
    "acc_width",
    "cycles",
    "latency_ms",
    "accuracy",
    "cycle_source",
    "rtl_cycles",
    "model_error_pct",
    "luts",
    "ffs",
    "dsps",
    "bram36",
    "urams",
    "fmax_mhz",
    "resource_source",
    "fits",
    "pareto",
    "accel_steps",
    "cpu_steps",
    "refused_layers",
    "problems",
];

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

/// A CSV field, quoted when it needs to be (RFC 4180).
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Where a point's resource counts come from.
fn resource_source(p: &Point) -> String {
    match &p.estimate {
        Estimate::Synthesized { tool, cached, .. } => {
            format!("{tool}{}", if *cached { " (cached)" } else { "" })
        }
        Estimate::BramOverflow { .. } => "analytic (memories only)".into(),
        Estimate::Failed(_) => String::new(),
    }
}

/// Everything wrong with a point: why it does not fit, failures, refused layers.
fn problems(p: &Point) -> Vec<String> {
    let mut v = p.misfit.clone();
    if let Err(e) = &p.cycles {
        v.push(format!("cycles: {e}"));
    }
    if let Some(Err(e)) = &p.rtl_check {
        v.push(format!("RTL check: {e}"));
    }
    if let Ok(c) = &p.cycles {
        if !c.refused.is_empty() {
            v.push(format!(
                "{} layer(s) refused by the back end, run on the CPU: {}",
                c.refused.len(),
                c.refused.join(" ")
            ));
        }
    }
    v
}

/// The CSV table: a header and one row per config, in sweep order.
pub fn csv(x: &Exploration) -> String {
    let mut s = CSV_COLUMNS.join(",");
    s.push('\n');
    for p in &x.points {
        let c = &p.config;
        let cycles = p.cycles.as_ref().ok();
        let r = p.resources();
        let bram = match &p.estimate {
            Estimate::BramOverflow { bram36 } => Some(*bram36),
            _ => r.map(|r| r.bram36),
        };
        let row = [
            c.config_string(),
            c.batch().to_string(),
            c.block_in().to_string(),
            c.block_out().to_string(),
            c.log_uop_buff_size.to_string(),
            c.log_inp_buff_size.to_string(),
            c.log_wgt_buff_size.to_string(),
            c.log_acc_buff_size.to_string(),
            c.axi_data_width.to_string(),
            c.clock_mhz.to_string(),
            c.inp_width().to_string(),
            c.wgt_width().to_string(),
            c.acc_width().to_string(),
            opt(cycles.map(|c| c.total)),
            opt(p.latency_ms().map(|l| format!("{l:.4}"))),
            opt(p.accuracy().map(|a| format!("{a:.4}"))),
            opt(cycles.map(|c| c.source.name())),
            opt(p.rtl_check.as_ref().and_then(|r| r.as_ref().ok())),
            opt(p.model_error().map(|e| format!("{e:.3}"))),
            opt(r.map(|r| r.luts)),
            opt(r.map(|r| r.ffs)),
            opt(r.map(|r| r.dsps)),
            opt(bram),
            opt(r.map(|r| r.urams)),
            opt(r.and_then(|r| r.fmax_mhz).map(|f| format!("{f:.1}"))),
            resource_source(p),
            p.fits().to_string(),
            p.pareto.to_string(),
            opt(cycles.map(|c| c.accel_steps)),
            opt(cycles.map(|c| c.cpu_steps)),
            opt(cycles.map(|c| c.refused.len())),
            problems(p).join("; "),
        ];
        let fields: Vec<String> = row.iter().map(|f| field(f)).collect();
        s.push_str(&fields.join(","));
        s.push('\n');
    }
    s
}

fn point_json(p: &Point) -> Value {
    let c = &p.config;
    let cycles = p.cycles.as_ref().ok();
    let config: Value = serde_json::from_str(&c.to_json()).expect("a config is JSON");
    json!({
        "config_string": c.config_string(),
        "config": config,
        "cycles": cycles.map(|c| c.total),
        "cycles_per_launch": cycles.map(|c| c.per_launch.clone()),
        "cycle_source": cycles.map(|c| c.source.name()),
        "cycles_cached": cycles.map(|c| c.cached),
        "latency_ms": p.latency_ms(),
        "accuracy": p.accuracy(),
        "rtl_cycles": p.rtl_check.as_ref().and_then(|r| r.as_ref().ok()),
        "model_error_pct": p.model_error(),
        "resources": p.resources(),
        "scratchpad_bram36": match &p.estimate {
            Estimate::BramOverflow { bram36 } => Some(*bram36),
            _ => None,
        },
        "resource_source": resource_source(p),
        "fits": p.fits(),
        "pareto": p.pareto,
        "accel_steps": cycles.map(|c| c.accel_steps),
        "cpu_steps": cycles.map(|c| c.cpu_steps),
        "refused_layers": cycles.map(|c| c.refused.clone()),
        "problems": problems(p),
    })
}

/// The JSON document.
pub fn json(x: &Exploration) -> Value {
    let t = &x.target;
    json!({
        "network": x.network,
        "target": {
            "name": t.name,
            "capacity": t.capacity,
            "clock_max_mhz": t.clock_max_mhz,
            "port_bits": t.port_bits,
        },
        "resource_tool": x.tool,
        "cycle_source": x.cycle_source.name(),
        "eval_set": x.eval,
        "combinations": x.combinations,
        "evaluated": x.points.len(),
        "skipped": x.skipped,
        "elapsed_seconds": x.elapsed.as_secs_f64(),
        "work": {
            "compiled": x.compiled,
            "synthesized": x.synthesized,
            "rtl_runs": x.rtl_runs,
        },
        "model_validation": x.model_error().map(|(mean, max, n)| json!({
            "configs": n, "mean_abs_error_pct": mean, "max_abs_error_pct": max,
        })),
        "best": x.best().map(|p| p.config.config_string()),
        "points": x.points.iter().map(point_json).collect::<Vec<_>>(),
    })
}

/// The text summary: the table (fastest first), the skipped combinations, the model's error
/// and the best config that fits.
pub fn summary(x: &Exploration) -> String {
    let mut s = String::new();
    let fitting = x.points.iter().filter(|p| p.fits()).count();
    let _ = writeln!(
        s,
        "{} on {}: {} combinations, {} valid, {} skipped; {} fit; cycles from the {}; resources from {}",
        x.network,
        x.target.name,
        x.combinations,
        x.points.len(),
        x.skipped.len(),
        fitting,
        match x.cycle_source {
            crate::measure::CycleSource::Model => "cycle model",
            crate::measure::CycleSource::Rtl => "RTL simulator",
        },
        x.tool
    );
    let mut order: Vec<&Point> = x.points.iter().collect();
    order.sort_by(|a, b| {
        a.latency_ms()
            .unwrap_or(f64::INFINITY)
            .total_cmp(&b.latency_ms().unwrap_or(f64::INFINITY))
    });
    if let Some(set) = &x.eval {
        let _ = writeln!(
            s,
            "top-1: accuracy on the {set}, run on the functional simulator"
        );
    }
    // The accuracy column only when it was measured.
    let top1 = |p: Option<&Point>| match (&x.eval, p) {
        (None, _) => String::new(),
        (Some(_), None) => format!(" {:>6}", "top-1"),
        (Some(_), Some(p)) => format!(
            " {:>6}",
            opt(p.accuracy().map(|a| format!("{:.1}%", 100.0 * a)))
        ),
    };
    let _ = writeln!(
        s,
        "{:<30} {:>4} {:>5} {:>11} {:>9}{} {:>7} {:>7} {:>5} {:>7}  fit",
        "config",
        "bus",
        "MHz",
        "cycles",
        "ms",
        top1(None),
        "LUT",
        "FF",
        "DSP",
        "BRAM36"
    );
    for p in order {
        let c = &p.config;
        let r = p.resources();
        let bram = match &p.estimate {
            Estimate::BramOverflow { bram36 } => format!("{bram36}*"),
            _ => opt(r.map(|r| r.bram36)),
        };
        let mut mark = match (p.fits(), p.pareto) {
            (true, true) => "yes, Pareto".to_string(),
            (true, false) => "yes".to_string(),
            (false, _) => format!("no: {}", problems(p).join("; ")),
        };
        if let (true, Some(f)) = (p.fits(), r.and_then(|r| r.fmax_mhz)) {
            let _ = write!(mark, " (Fmax {f:.1} MHz)");
        }
        let _ = writeln!(
            s,
            "{:<30} {:>4} {:>5} {:>11} {:>9}{} {:>7} {:>7} {:>5} {:>7}  {mark}",
            c.config_string(),
            c.axi_data_width,
            c.clock_mhz,
            opt(p.cycles.as_ref().ok().map(|c| c.total)),
            opt(p.latency_ms().map(|l| format!("{l:.3}"))),
            top1(Some(p)),
            opt(r.map(|r| r.luts)),
            opt(r.map(|r| r.ffs)),
            opt(r.map(|r| r.dsps)),
            bram,
        );
    }
    if x.points
        .iter()
        .any(|p| matches!(p.estimate, Estimate::BramOverflow { .. }))
    {
        let _ = writeln!(
            s,
            "* the memories' block RAM alone (analytic): over the part, so not synthesized"
        );
    }
    if !x.skipped.is_empty() {
        let axes: Vec<&str> = Param::ALL
            .iter()
            .map(|p| p.key())
            .filter(|k| x.skipped[0].values.contains_key(k))
            .collect();
        let _ = writeln!(
            s,
            "skipped {} invalid combination(s) of {}:",
            x.skipped.len(),
            axes.join(", ")
        );
        for (n, reason) in skip_summary(&x.skipped) {
            let _ = writeln!(s, "  {n} x {reason}");
        }
    }
    if let Some((mean, max, n)) = x.model_error() {
        let _ = writeln!(
            s,
            "cycle model against the RTL simulator on {n} config(s): mean |error| {mean:.2}%, max {max:.2}%"
        );
    }
    match x.best() {
        Some(p) => {
            let _ = writeln!(
                s,
                "best config that fits {}: {} (bus {} bits, {} MHz): {:.3} ms, {}",
                x.target.name,
                p.config.config_string(),
                p.config.axi_data_width,
                p.config.clock_mhz,
                p.latency_ms().unwrap_or(0.0),
                crate::resources::describe(p.resources().expect("fits")),
            );
        }
        None => {
            let _ = writeln!(s, "no config of the sweep fits {}", x.target.name);
        }
    }
    let _ = writeln!(
        s,
        "done in {:.1} s: {} compiled, {} synthesized, {} RTL run(s); the rest from the cache",
        x.elapsed.as_secs_f64(),
        x.compiled,
        x.synthesized,
        x.rtl_runs
    );
    s
}
