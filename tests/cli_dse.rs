//! End-to-end tests of `vta dse` on the digits CNN. The resource estimates come from a cache
//! fixture written here (so no yosys runs in CI): the default config's figures are those of
//! the README's yosys 0.23 run, the 1x32 config's are made up for the test, and both entries
//! say so in their `tool` field, which the outputs show. Cycles come from the cycle model,
//! validated against the RTL simulator on the default config (whose Verilator model is
//! built into the toolkit).

#[path = "support/cli.rs"]
mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::{fails, ok, scratch, vta};

fn vta_dse(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vta"))
        .arg("dse")
        .args(args)
        .current_dir(dir)
        .env("VTA_CACHE_DIR", dir.join("cache"))
        .output()
        .expect("the vta binary runs")
}

/// Writes the cache entry of `cfg`'s resource estimate on the xc7 family.
fn fixture(
    dir: &Path,
    cfg: &isa::HwConfig,
    tool: &str,
    luts: u64,
    ffs: u64,
    dsps: u64,
    bram36: f64,
) {
    let g = vta_hw::generate(cfg).unwrap();
    let path = dir.join(format!(
        "cache/fit/{}-xc7.json",
        dse::resources::rtl_hash(&g.verilog)
    ));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let doc = serde_json::json!({
        "config_string": cfg.config_string(),
        "tool": tool,
        "luts": luts, "ffs": ffs, "dsps": dsps, "bram36": bram36, "urams": 0,
    });
    std::fs::write(path, doc.to_string()).unwrap();
}

#[test]
fn a_digits_sweep_marks_the_fit_validates_the_model_and_resumes_from_its_cache() {
    let dir = scratch("dse_digits");
    let default = isa::HwConfig::default();
    let mut big = default.clone();
    big.log_block_in = 5;
    big.log_block_out = 5;
    fixture(
        &dir,
        &default,
        "test fixture (the README's yosys 0.23 figures)",
        21975,
        16488,
        176,
        108.5,
    );
    fixture(
        &dir,
        &big,
        "test fixture (made-up figures)",
        45000,
        40000,
        560,
        120.0,
    );
    // 1x16 and 1x32 on a 64-bit bus; the 96-bit bus is refused by the config validation.
    let args = [
        "--net",
        "digits",
        "--part",
        "xc7z020",
        "--block",
        "16,32",
        "--bus",
        "64,96",
        "--validate",
        "1",
        "--jobs",
        "2",
        "-o",
        "out",
    ];
    let text = ok(vta_dse(&dir, &args));
    assert!(
        text.starts_with("digits on xc7z020: 4 combinations, 2 valid, 2 skipped; 1 fit;"),
        "{text}"
    );
    assert!(
        text.contains("2 x AXI_DATA_WIDTH = 96 is not a power of two"),
        "{text}"
    );
    assert!(
        text.contains(
            "best config that fits xc7z020: 1x16_i8w8a32_15_15_18_17 (bus 64 bits, 100 MHz)"
        ),
        "{text}"
    );
    assert!(text.contains("no: DSP 560 > 220"), "{text}");
    assert!(
        text.contains("3 compiled, 0 synthesized, 1 RTL run(s)"),
        "{text}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("out/results.json")).unwrap())
            .unwrap();
    let validation = &doc["model_validation"];
    assert_eq!(validation["configs"], 1, "{doc:#}");
    let err = validation["mean_abs_error_pct"].as_f64().unwrap();
    assert!(
        err < 10.0,
        "the cycle model is {err:.2}% off the RTL on the digits CNN"
    );
    let fitting: Vec<&serde_json::Value> = doc["points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["fits"] == true)
        .collect();
    assert_eq!(fitting.len(), 1);
    assert_eq!(fitting[0]["pareto"], true);
    assert!(fitting[0]["resource_source"]
        .as_str()
        .unwrap()
        .starts_with("test fixture"));
    let csv = std::fs::read_to_string(dir.join("out/results.csv")).unwrap();
    assert_eq!(csv.lines().count(), 3, "{csv}");
    let svg = std::fs::read_to_string(dir.join("out/pareto.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("best: 1x16_i8w8a32_15_15_18_17"));

    // The same sweep again does no work; --json prints the document.
    let json = ok(vta_dse(&dir, &[&args[..], &["--json"]].concat()));
    let again: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        again["work"],
        serde_json::json!({"compiled": 0, "synthesized": 0, "rtl_runs": 0})
    );
    let (before, after) = (
        doc["points"].as_array().unwrap(),
        again["points"].as_array().unwrap(),
    );
    assert_eq!(before.len(), after.len());
    for (a, b) in before.iter().zip(after) {
        assert_eq!(a["cycles"], b["cycles"]);
        assert_eq!(a["resources"], b["resources"]);
        assert_eq!(b["cycles_cached"], true);
    }
}

/// On an ECP5 board the estimate is the open flow's place and route of the SoC, with the
/// routed Fmax: a config whose clock the design does not reach does not fit. The estimates
/// come from cache entries written here (figures of the README's ULX3S-25F run, the Fmax the
/// same at both clocks for the test), so no nextpnr runs.
#[test]
fn an_open_flow_board_sweep_checks_the_clock_against_the_routed_fmax() {
    let dir = scratch("dse_openflow");
    let mut cfg = isa::HwConfig::preset("small").unwrap();
    for mhz in [50, 60] {
        cfg.clock_mhz = mhz;
        let g = vta_hw::generate(&cfg).unwrap();
        let path = dir.join(format!(
            "cache/fit/{}-ulx3s-25f-soc32k.json",
            dse::resources::rtl_hash(&g.verilog)
        ));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let doc = serde_json::json!({
            "config_string": cfg.config_string(),
            "tool": "test fixture (the README's ULX3S-25F figures)",
            "luts": 11732, "ffs": 7377, "dsps": 28, "bram36": 13.5, "urams": 0,
            "fmax_mhz": 53.2,
        });
        std::fs::write(path, doc.to_string()).unwrap();
    }
    let text = ok(vta_dse(
        &dir,
        &[
            "--net",
            "digits",
            "--board",
            "ulx3s-25f",
            "--config",
            "small",
            "--clock",
            "50,60",
            "-o",
            "out",
        ],
    ));
    assert!(
        text.starts_with(
            "digits on ulx3s-25f (LFE5U-25F-6BG381C): 2 combinations, 2 valid, 0 skipped; 1 fit;"
        ),
        "{text}"
    );
    assert!(text.contains("yes, Pareto (Fmax 53.2 MHz)"), "{text}");
    assert!(text.contains("no: Fmax 53.2 MHz < clock 60 MHz"), "{text}");
    assert!(text.contains("0 synthesized"), "{text}");
    let csv = std::fs::read_to_string(dir.join("out/results.csv")).unwrap();
    assert!(
        csv.lines().next().unwrap().contains(",urams,fmax_mhz,"),
        "{csv}"
    );
    assert!(csv.contains(",53.2,"), "{csv}");
}

#[test]
fn bad_sweeps_are_refused_naming_the_problem() {
    let dir = scratch("dse_bad");
    let e = fails(vta_dse(&dir, &["--net", "digits", "--block", "8..x"]));
    assert!(
        e.contains("--block: block '8..x': 'x' is not a whole number"),
        "{e}"
    );
    let e = fails(vta_dse(
        &dir,
        &["--net", "digits", "--block", "8", "--block-in", "16"],
    ));
    assert!(
        e.contains("block_in and block cannot both be swept")
            || e.contains("block and block_in cannot both be swept"),
        "{e}"
    );
    let e = fails(vta_dse(&dir, &["--net", "digits", "--part", "xc9z999"]));
    assert!(e.contains("unknown part 'xc9z999'"), "{e}");
    let e = fails(vta_dse(
        &dir,
        &["--net", "digits", "--sweep", "missing.toml"],
    ));
    assert!(e.contains("cannot read the sweep file missing.toml"), "{e}");
    std::fs::write(dir.join("s.json"), r#"{"blok": [8]}"#).unwrap();
    let e = fails(vta_dse(&dir, &["--net", "digits", "--sweep", "s.json"]));
    assert!(e.contains("s.json: unknown axis 'blok'"), "{e}");
    let e = fails(vta_dse(
        &dir,
        &["--net", "digits", "--cycles", "rtl", "--validate", "2"],
    ));
    assert!(e.contains("--validate checks the cycle model"), "{e}");
    let e = fails(vta_dse(&dir, &["--net", "digits", "--size", "56"]));
    assert!(e.contains("--size applies to ResNet-18 only"), "{e}");
    let help = ok(vta(&["dse", "--help"]));
    assert!(
        help.contains("--validate") && help.contains("Sweep axes"),
        "{help}"
    );
}

/// A precision sweep with accuracy as an objective: the digits CNN at 8- and 4-bit weights,
/// each config's top-1 on its test digits measured on fsim (the same figures as `vta bench
/// precision`), in the table, the CSV and the front. Resource figures: yosys 0.23 runs of
/// `vta hw report` for the two configs on this machine.
#[test]
fn a_width_sweep_with_accuracy_trades_accuracy_for_block_ram() {
    let dir = scratch("dse_accuracy");
    let default = isa::HwConfig::default();
    let w4 = default.with_widths(8, 4, 32).unwrap();
    let tool = "test fixture (yosys 0.23 synth_xilinx figures of vta hw report)";
    fixture(&dir, &default, tool, 30395, 18551, 176, 109.5);
    fixture(&dir, &w4, tool, 29384, 15672, 176, 81.0);
    let args = [
        "--net",
        "digits",
        "--wgt-width",
        "4,8",
        "--accuracy",
        "--jobs",
        "2",
        "-o",
        "out",
    ];
    let text = ok(vta_dse(&dir, &args));
    assert!(
        text.contains("top-1: accuracy on the digits test set (100)"),
        "{text}"
    );
    let row = |cfg: &str| {
        text.lines()
            .find(|l| l.starts_with(cfg))
            .unwrap_or_else(|| panic!("no row for {cfg}: {text}"))
            .to_string()
    };
    // 98/100 at int8, 97/100 at 4-bit weights (min-error clipping), both on the front: the
    // narrower one needs less block RAM.
    let (r8, r4) = (
        row("1x16_i8w8a32_15_15_18_17"),
        row("1x16_i8w4a32_15_15_17_17"),
    );
    assert!(r8.contains(" 98.0% ") && r8.contains("yes, Pareto"), "{r8}");
    assert!(r4.contains(" 97.0% ") && r4.contains("yes, Pareto"), "{r4}");
    let csv = std::fs::read_to_string(dir.join("out/results.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let w4_row: Vec<&str> = csv
        .lines()
        .find(|l| l.starts_with("1x16_i8w4a32"))
        .unwrap()
        .split(',')
        .collect();
    assert_eq!(w4_row[col("accuracy")], "0.9700", "{csv}");
    assert_eq!(w4_row[col("wgt_width")], "4", "{csv}");
    let svg = std::fs::read_to_string(dir.join("out/pareto.svg")).unwrap();
    assert!(svg.contains("97.0%") && svg.contains("labels: top-1 on the digits test set"));
    // A model of its own needs labelled samples.
    let e = fails(vta_dse(
        &dir,
        &["--net", "resnet18", "--size", "32", "--accuracy"],
    ));
    assert!(
        e.contains("--accuracy needs labelled samples for resnet18-32"),
        "{e}"
    );
}

/// A sweep run as two shards (one by `--shard`, one as a Slurm array task would, from the
/// environment) and merged from the cache equals the same sweep on one machine, byte for
/// byte; a merge with a shard missing names its configs and the command that reruns it.
#[test]
fn a_sharded_sweep_merges_to_the_single_machine_results() {
    let fixtures = |dir: &Path| {
        let default = isa::HwConfig::default();
        let tool = "test fixture (yosys 0.23 synth_xilinx figures of vta hw report)";
        fixture(dir, &default, tool, 30395, 18551, 176, 109.5);
        fixture(
            dir,
            &default.with_widths(8, 4, 32).unwrap(),
            tool,
            29384,
            15672,
            176,
            81.0,
        );
    };
    let sweep = [
        "--net",
        "digits",
        "--wgt-width",
        "4,8",
        "--jobs",
        "1",
        "-o",
        "out",
    ];
    let with = |extra: &[&str]| -> Vec<String> {
        sweep.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    let one = scratch("dse_single");
    fixtures(&one);
    let args = with(&[]);
    ok(vta_dse(
        &one,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    ));
    let want = std::fs::read_to_string(one.join("out/results.csv")).unwrap();

    let dir = scratch("dse_sharded");
    fixtures(&dir);
    let run = |extra: &[&str]| {
        vta_dse(
            &dir,
            &with(extra).iter().map(String::as_str).collect::<Vec<_>>(),
        )
    };
    let text = ok(run(&["--shard", "0/2"]));
    assert!(
        text.contains("shard 0/2: 1 of the sweep's 2 configs are in the cache"),
        "{text}"
    );
    assert!(
        !dir.join("out/results.csv").exists(),
        "a shard writes no results"
    );
    // (Not `fails`: the sweep's progress lines come first on stderr.)
    let out = run(&["--merge", "2"]);
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(e.contains("error: digits on xc7z020"), "{e}");
    assert!(
        e.contains("the merge is incomplete: results of 1 config(s)"),
        "{e}"
    );
    assert!(
        e.contains("(shard 1/2): vta dse --net digits --wgt-width 4,8"),
        "{e}"
    );
    assert!(e.contains("--shard 1/2"), "{e}");
    // The other shard as a Slurm array task runs it.
    let slurm = Command::new(env!("CARGO_BIN_EXE_vta"))
        .arg("dse")
        .args(sweep)
        .current_dir(&dir)
        .env("VTA_CACHE_DIR", dir.join("cache"))
        .env("SLURM_ARRAY_TASK_ID", "1")
        .env("SLURM_ARRAY_TASK_COUNT", "2")
        .output()
        .unwrap();
    assert!(ok(slurm).contains("shard 1/2"));
    let text = ok(run(&["--merge", "2"]));
    assert!(text.contains("0 compiled, 0 synthesized"), "{text}");
    let got = std::fs::read_to_string(dir.join("out/results.csv")).unwrap();
    assert_eq!(got, want);
    let e = fails(run(&["--shard", "2/2"]));
    assert!(e.contains("the index must be below the count"), "{e}");
    let e = fails(run(&["--slurm", "2", "--shard", "0/2"]));
    assert!(
        e.contains("--slurm submits the shards and the merge itself"),
        "{e}"
    );
    // A usage error (clap's exit status 2): --partition goes with --slurm.
    let out = run(&["--partition", "debug"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--slurm <N>"));
}

/// A config the back end refuses (16-bit accumulators for a network quantized for 32) fails
/// in its shard, and the merge takes that failure from the cache like a result: the merged
/// results equal one machine's instead of naming the config as never run.
#[test]
fn a_config_refused_in_a_shard_is_merged_as_refused() {
    let sweep = [
        "--net",
        "digits",
        "--part",
        "xc7z010",
        "--acc-width",
        "16,32",
        "--jobs",
        "1",
        "-o",
        "out",
    ];
    let run = |dir: &Path, extra: &[&str]| {
        let args: Vec<&str> = sweep.iter().chain(extra).copied().collect();
        vta_dse(dir, &args)
    };
    let one = scratch("dse_refused_single");
    ok(run(&one, &[]));
    let want = std::fs::read_to_string(one.join("out/results.csv")).unwrap();
    assert!(
        want.contains("cannot run quantized layers exactly"),
        "{want}"
    );

    let dir = scratch("dse_refused_sharded");
    ok(run(&dir, &["--shard", "0/2"]));
    ok(run(&dir, &["--shard", "1/2"]));
    let text = ok(run(&dir, &["--merge", "2"]));
    assert!(text.contains("0 compiled"), "{text}");
    let got = std::fs::read_to_string(dir.join("out/results.csv")).unwrap();
    assert_eq!(got, want);
}
