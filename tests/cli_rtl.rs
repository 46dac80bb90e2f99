//! End-to-end tests of the RTL backend through the `vta` command: `vta sim --backend rtl`
//! (outputs identical to fsim's, cycles and the hardware counters, memory options, traces,
//! waveforms), a config nobody built before (built on demand with progress on stderr), a
//! missing Verilator, `vta demo --backend rtl` and `vta bench rtl`.

#[path = "support/cli.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::{fails, ok, scratch, vta};

fn example() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples/dense_relu.vasm")
        .display()
        .to_string()
}

/// The Verilator model cache the tests share (see tests/support/rtl.rs).
fn cache() -> PathBuf {
    std::env::var_os("VTA_HDL_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("vta-hw-models"))
}

fn vta_env(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vta"));
    c.args(args).current_dir(env!("CARGO_TARGET_TMPDIR"));
    c.env("VTA_HDL_CACHE", cache());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("the vta binary runs")
}

/// The outputs (`output ...` lines) of a `vta sim` run.
fn outputs(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.starts_with("output ")).collect()
}

#[test]
fn sim_on_rtl_matches_fsim_and_reports_cycles() {
    let ex = example();
    let f = ok(vta(&["sim", &ex]));
    let r = ok(vta_env(&["sim", &ex, "--backend", "rtl"], &[]));
    assert_eq!(outputs(&f), outputs(&r));
    assert!(
        r.contains("11 instructions on rtl (1x16_i8w8a32_15_15_18_17)"),
        "{r}"
    );
    // The spec's counters, the same as fsim's.
    let counters = |t: &str| -> Vec<String> {
        t.lines()
            .skip_while(|l| *l != "counters:")
            .skip(1)
            .take(12)
            .map(String::from)
            .collect()
    };
    assert_eq!(counters(&f), counters(&r));
    // Cycles, the hardware's busy/stall counters per module, utilization.
    assert!(r.contains("cycles: ") && r.contains("at 100 MHz"), "{r}");
    for m in ["load", "compute", "store", "dma"] {
        assert!(r.lines().any(|l| l.trim_start().starts_with(m)), "{m}: {r}");
    }
    assert!(r.contains("GEMM core utilization: 4 GEMM micro-ops"), "{r}");
}

#[test]
fn memory_options_change_the_cycle_count_not_the_results() {
    let ex = example();
    let cycles = |t: &str| -> u64 {
        let l = t.lines().find(|l| l.starts_with("cycles: ")).unwrap();
        l["cycles: ".len()..]
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let fast = ok(vta_env(
        &["sim", &ex, "--backend", "rtl", "--mem-latency", "2"],
        &[],
    ));
    let slow = ok(vta_env(
        &[
            "sim",
            &ex,
            "--backend",
            "rtl",
            "--mem-latency",
            "100",
            "--mem-bytes-per-cycle",
            "2",
        ],
        &[],
    ));
    assert_eq!(outputs(&fast), outputs(&slow));
    assert!(cycles(&slow) > cycles(&fast) + 300, "{fast}\n{slow}");
    assert!(
        slow.contains("100-cycle read latency, 2 bytes/cycle"),
        "{slow}"
    );
    let e = fails(vta_env(
        &["sim", &ex, "--backend", "rtl", "--mem-bytes-per-cycle", "3"],
        &[],
    ));
    assert!(
        e.contains("must divide the 8-byte AXI bus") && e.contains("1, 2, 4, 8"),
        "{e}"
    );
    // Random stalls (fault injection): same outputs, more cycles.
    let stalled = ok(vta_env(
        &[
            "sim",
            &ex,
            "--backend",
            "rtl",
            "--mem-latency",
            "2",
            "--mem-stall-percent",
            "60",
            "--mem-stall-seed",
            "7",
        ],
        &[],
    ));
    assert_eq!(outputs(&fast), outputs(&stalled));
    assert!(cycles(&stalled) > cycles(&fast), "{fast}\n{stalled}");
    assert!(stalled.contains("60% random stalls (seed 7)"), "{stalled}");
    let e = fails(vta_env(
        &["sim", &ex, "--backend", "rtl", "--mem-stall-percent", "100"],
        &[],
    ));
    assert!(
        e.contains("--mem-stall-percent 100: must be below 100"),
        "{e}"
    );
    let e = fails(vta(&["bench", "rtl", "--mem-stall-percent", "5"]));
    assert!(
        e.contains("--mem-stall-percent does not apply to `vta bench rtl`"),
        "{e}"
    );
    let e = fails(vta(&["sim", &ex, "--mem-stall-percent", "5"]));
    assert!(
        e.contains("--mem-stall-percent is an option of the cycle-accurate simulator"),
        "{e}"
    );
    // A latency the hang detector would take for a hang is refused up front.
    let e = fails(vta_env(
        &[
            "sim",
            &ex,
            "--backend",
            "rtl",
            "--mem-latency",
            "4294967295",
        ],
        &[],
    ));
    assert!(
        e.contains("would stop as hung at its first memory access") && e.contains("100000"),
        "{e}"
    );
    let e = fails(vta(&["sim", &ex, "--mem-latency", "5"]));
    assert!(
        e.contains("--mem-latency is an option of the cycle-accurate simulator"),
        "{e}"
    );
    let e = fails(vta_env(
        &["sim", &ex, "--backend", "rtl", "--max-steps", "5"],
        &[],
    ));
    assert!(e.contains("--max-cycles"), "{e}");
    let e = fails(vta_env(
        &["sim", &ex, "--backend", "rtl", "--max-cycles", "50"],
        &[],
    ));
    assert!(e.contains("did not finish within 50 cycles"), "{e}");
}

#[test]
fn trace_and_vcd_files() {
    let dir = scratch("rtl-trace");
    let ex = example();
    let trace = dir.join("t.json");
    let vcd = dir.join("w.vcd");
    let out = ok(vta_env(
        &[
            "sim",
            &ex,
            "--backend",
            "rtl",
            "--config",
            "default",
            "--trace",
            trace.to_str().unwrap(),
            "--vcd",
            vcd.to_str().unwrap(),
            "--vcd-window",
            "100:150",
        ],
        &[],
    ));
    assert!(out.contains("(open it in ui.perfetto.dev)"), "{out}");
    assert!(out.contains("(cycles 100..150 of the run)"), "{out}");
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let ev = t["traceEvents"].as_array().unwrap();
    assert!(
        ev.iter().any(|e| e["name"] == "GEMM #5" && e["ph"] == "X"),
        "{t}"
    );
    assert!(ev.iter().any(|e| e["name"] == "wait g2s"), "{t}");
    let v = std::fs::read_to_string(&vcd).unwrap();
    let stamps = v.lines().filter(|l| l.starts_with('#')).count();
    assert!((95..=105).contains(&stamps), "{stamps}");
    let e = fails(vta(&["sim", &ex, "--trace", "x.json"]));
    assert!(
        e.contains("--trace is an option of the cycle-accurate simulator"),
        "{e}"
    );
    let e = fails(vta_env(
        &[
            "sim",
            &ex,
            "--backend",
            "rtl",
            "--vcd",
            "w.vcd",
            "--vcd-window",
            "9:3",
        ],
        &[],
    ));
    assert!(e.contains("END must be after START"), "{e}");
}

/// A config no cache has seen is generated, verilated, compiled and loaded on first use,
/// saying so on stderr; the second run finds it in the cache.
#[test]
fn a_new_config_is_built_on_demand() {
    let dir = scratch("rtl-new-config");
    let cfg = dir.join("my.json");
    std::fs::write(
        &cfg,
        r#"{"LOG_INP_WIDTH":3,"LOG_WGT_WIDTH":3,"LOG_ACC_WIDTH":5,"LOG_BATCH":0,"LOG_BLOCK":4,
            "LOG_UOP_BUFF_SIZE":15,"LOG_INP_BUFF_SIZE":15,"LOG_WGT_BUFF_SIZE":18,
            "LOG_ACC_BUFF_SIZE":17,"CMD_QUEUE_DEPTH":64,"TOKEN_QUEUE_DEPTH":8}"#,
    )
    .unwrap();
    let fresh = dir.join("cache");
    let fresh_s = fresh.to_str().unwrap();
    let args = [
        "sim",
        &example(),
        "--backend",
        "rtl",
        "--config",
        cfg.to_str().unwrap(),
    ];
    let first = vta_env(&args, &[("VTA_HDL_CACHE", fresh_s)]);
    let err = String::from_utf8_lossy(&first.stderr).to_string();
    let out = ok(first);
    assert!(
        err.contains("building the Verilator model of 1x16_i8w8a32_15_15_18_17"),
        "{err}"
    );
    for stage in ["verilating", "compiling", "linking", "model ready in"] {
        assert!(err.contains(stage), "{stage}: {err}");
    }
    assert!(out.contains("cycles: "), "{out}");
    let again = vta_env(&args, &[("VTA_HDL_CACHE", fresh_s)]);
    let err = String::from_utf8_lossy(&again.stderr).to_string();
    assert_eq!(outputs(&ok(again)), outputs(&out));
    assert!(!err.contains("building"), "cached: {err}");
}

/// Without Verilator a config that is not compiled in cannot be simulated; the message says
/// how to install it.
#[test]
fn a_missing_verilator_says_how_to_install_it() {
    let dir = scratch("rtl-no-verilator");
    let empty = dir.join("bin");
    std::fs::create_dir_all(&empty).unwrap();
    let e = fails(vta_env(
        &[
            "sim",
            &example(),
            "--backend",
            "rtl",
            "--config",
            "wide-bus",
        ],
        &[
            ("PATH", empty.to_str().unwrap()),
            ("VTA_HDL_CACHE", dir.join("cache").to_str().unwrap()),
        ],
    ));
    assert!(e.contains("`verilator` is needed"), "{e}");
    assert!(e.contains("apt-get install verilator"), "{e}");
}

#[test]
fn demo_on_rtl() {
    let out = ok(vta_env(&["demo", "--backend", "rtl"], &[]));
    assert!(out.contains("ran 100 test digits on rtl"), "{out}");
    assert!(out.contains(" cycles"), "{out}");
    assert!(
        out.contains("bit-exact against the integer reference: 100 digits"),
        "{out}"
    );
    assert!(out.contains("accuracy: accelerator (int8) 98/100"), "{out}");
}

#[test]
fn bench_rtl_on_a_network() {
    let j: serde_json::Value = serde_json::from_str(&ok(vta_env(
        &[
            "bench",
            "rtl",
            "--network",
            "resnet18",
            "--size",
            "16",
            "--json",
        ],
        &[],
    )))
    .unwrap();
    assert_eq!(j["network"], "resnet18", "{j}");
    let (cycles, host) = (
        j["cycles"].as_u64().unwrap(),
        j["host_cycles"].as_u64().unwrap(),
    );
    assert!(cycles > 0 && host >= cycles, "{j}");
    assert!(j["cycles_per_second"].as_f64().unwrap() > 0.0, "{j}");
}

/// `vta bench rtl --cores 2`: the blocked GEMM on one core of the two-core design alone, then
/// on both at once; a core count outside 2..=8 is refused.
#[test]
fn bench_rtl_on_two_cores() {
    let j: serde_json::Value = serde_json::from_str(&ok(vta_env(
        &[
            "bench",
            "rtl",
            "--cores",
            "2",
            "--config",
            "small",
            "--batch",
            "32",
            "--channels",
            "32",
            "--block",
            "16",
            "--json",
        ],
        &[],
    )))
    .unwrap();
    assert_eq!(j["cores"], 2, "{j}");
    let alone = j["alone_cycles"].as_u64().unwrap();
    let together: Vec<u64> = j["together_cycles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .collect();
    assert!(
        together.len() == 2 && together.iter().all(|&c| c >= alone),
        "{j}"
    );
    let speedup = j["speedup"].as_f64().unwrap();
    assert!(speedup > 1.0 && speedup <= 2.0, "{j}");
    let e = fails(vta_env(
        &["bench", "rtl", "--cores", "1", "--config", "small"],
        &[],
    ));
    assert!(e.contains("a multi-core design has 2 to 8"), "{e}");
}

#[test]
fn bench_rtl() {
    let out = ok(vta_env(
        &[
            "bench",
            "rtl",
            "--batch",
            "32",
            "--channels",
            "64",
            "--block",
            "32",
        ],
        &[],
    ));
    assert!(
        out.contains("1 virtual thread") && out.contains("2 virtual threads"),
        "{out}"
    );
    assert!(
        out.contains("GEMM-core utilization") && out.contains("M cycles/s"),
        "{out}"
    );
    let e = fails(vta(&["bench", "rtl", "--channels", "96"]));
    assert!(e.contains("must be a multiple of twice the block"), "{e}");
    let j: serde_json::Value = serde_json::from_str(&ok(vta_env(
        &[
            "bench",
            "rtl",
            "--batch",
            "32",
            "--channels",
            "64",
            "--block",
            "32",
            "--json",
        ],
        &[],
    )))
    .unwrap();
    let runs = j["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{j}");
    assert_eq!(runs[1]["virtual_threads"], 2, "{j}");
    assert!(runs[0]["gemm_utilization"].as_f64().unwrap() > 0.0, "{j}");
}
