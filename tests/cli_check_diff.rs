//! End-to-end tests of `vta check diff`, the differential campaign as a command: its shards
//! (disjoint, together the whole campaign, the index from Slurm's environment), a planted
//! mismatch found, named, kept as a reproducer and replayed, and bad input refused. The runs
//! use the default preset, whose Verilator model is compiled into vta, so nothing is built.

#[path = "support/cli.rs"]
mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use support::{fails, ok, scratch, vta, vta_in};

fn vta_check(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vta"));
    c.args(["check", "diff"]).args(args).current_dir(dir);
    // A test's shard comes from its arguments, not from a Slurm job the tests may run in.
    c.env_remove("SLURM_ARRAY_TASK_ID")
        .env_remove("SLURM_ARRAY_TASK_COUNT");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("the vta binary runs")
}

/// Stderr of a campaign that must fail: status 1, its progress lines, then one `error:`
/// message (the summary with the mismatches), no panic, nothing on stdout.
fn mismatched(out: Output) -> String {
    let err = String::from_utf8(out.stderr).expect("stderr is UTF-8");
    assert_eq!(out.status.code(), Some(1), "expected failure, got:\n{err}");
    assert_eq!(err.matches("error: ").count(), 1, "{err}");
    assert!(err.contains("\nerror: check diff, seed "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.stdout.is_empty(), "no output on failure");
    err
}

/// The unit lines of a dry run.
fn units(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| l.starts_with("unit "))
        .map(str::to_string)
        .collect()
}

#[test]
fn help() {
    insta::assert_snapshot!("help_check_diff", ok(vta(&["check", "diff", "--help"])));
}

/// Shards are disjoint contiguous blocks that together are the campaign, whatever the count;
/// without --shard a Slurm array task's index and count choose the shard.
#[test]
fn shards_split_the_campaign_into_disjoint_blocks_that_cover_it() {
    let dir = scratch("check_diff_shards");
    let campaign = [
        "--presets",
        "default,small",
        "--configs",
        "2",
        "--programs",
        "5",
        "--seed",
        "7",
        "--dry-run",
    ];
    let whole = units(&ok(vta_check(&dir, &campaign, &[])));
    assert_eq!(whole.len(), 20, "{whole:?}");
    assert!(whole[0].starts_with("unit 0: preset default (1x16_i8w8a32"));
    assert!(whole[19].starts_with("unit 19: random config "));
    for count in [1, 3, 4, 7, 25] {
        let mut joined = Vec::new();
        for i in 0..count {
            let s = format!("{i}/{count}");
            let mut args = campaign.to_vec();
            args.extend(["--shard", &s]);
            joined.extend(units(&ok(vta_check(&dir, &args, &[]))));
        }
        // In order and each unit once: disjoint, and the union is the campaign.
        assert_eq!(joined, whole, "{count} shards");
    }
    // Two shards of four configs x 5 programs: each shard's block is two whole configs.
    let mut args = campaign.to_vec();
    args.extend(["--shard", "1/2"]);
    let second = units(&ok(vta_check(&dir, &args, &[])));
    let configs: BTreeSet<&str> = second
        .iter()
        .map(|l| l.split(", program seed").next().unwrap())
        .map(|l| l.split_once(": ").unwrap().1)
        .collect();
    assert_eq!(configs.len(), 2, "{configs:?}");
    let from_slurm = ok(vta_check(
        &dir,
        &campaign,
        &[
            ("SLURM_ARRAY_TASK_ID", "1"),
            ("SLURM_ARRAY_TASK_COUNT", "2"),
        ],
    ));
    assert_eq!(units(&from_slurm), second);
    assert!(
        from_slurm.contains("shard 1/2: units 10..20 of 20"),
        "{from_slurm}"
    );
}

/// Units run the same whatever shard runs them and whatever ran before: three shards' RTL
/// cycles and instructions add up to the whole campaign's (each unit gets a fresh simulator;
/// a reused one carries state from earlier runs that changes cycle counts).
#[test]
fn sharded_runs_add_up_to_the_whole_campaign() {
    let dir = scratch("check_diff_sum");
    let run = |shard: Option<&str>| -> serde_json::Value {
        let mut args = vec![
            "--presets",
            "default",
            "--programs",
            "12",
            "--seed",
            "11",
            "--json",
        ];
        args.extend(shard.iter().flat_map(|s| ["--shard", *s]));
        serde_json::from_str(&ok(vta_check(&dir, &args, &[]))).expect("JSON")
    };
    let whole = run(None);
    assert_eq!(whole["identical"], 12);
    let parts: Vec<serde_json::Value> = ["0/3", "1/3", "2/3"].map(|s| run(Some(s))).into();
    for key in ["run", "identical", "instructions", "rtl_cycles"] {
        let sum: u64 = parts.iter().map(|p| p[key].as_u64().unwrap()).sum();
        assert_eq!(sum, whole[key].as_u64().unwrap(), "{key}");
    }
}

/// A mismatch planted in unit 4 of 6 is found by the shard that runs it (and only by it), is
/// named with its reproducer, and replaying that reproducer reproduces it; without the planted
/// fault the same case matches, so the replay really runs it.
#[test]
fn a_planted_mismatch_is_found_named_kept_and_replayed() {
    let dir = scratch("check_diff_planted");
    let base = [
        "--presets",
        "default",
        "--programs",
        "6",
        "--seed",
        "3",
        "--plant-mismatch",
        "4",
        "--out",
        "repro",
        "-j",
        "1",
    ];
    let mut args = base.to_vec();
    args.extend(["--shard", "0/2", "--json"]);
    let doc: serde_json::Value =
        serde_json::from_str(&ok(vta_check(&dir, &args, &[]))).expect("JSON");
    assert_eq!(doc["range"], serde_json::json!([0, 3]));
    assert_eq!(doc["run"], 3);
    assert_eq!(doc["identical"], 3);
    assert_eq!(doc["mismatches"], serde_json::json!([]));
    assert!(
        !dir.join("repro").exists(),
        "no reproducer without a mismatch"
    );

    let mut args = base.to_vec();
    args.extend(["--shard", "1/2"]);
    let err = mismatched(vta_check(&dir, &args, &[]));
    assert!(
        err.contains("3 of 6 units run (shard 1/2: units 3..6)"),
        "{err}"
    );
    assert!(err.contains("2 identical on fsim and rtl"), "{err}");
    assert!(
        err.contains("unit 4 (preset default, 1x16_i8w8a32_15_15_18_17, program seed"),
        "{err}"
    );
    assert!(
        err.contains("outputs differ between fsim and rtl: first differing STORE"),
        "{err}"
    );
    assert!(err.contains("reproducer: repro/unit-4.json"), "{err}");
    assert!(err.contains("1 mismatch(es) between fsim and rtl"), "{err}");
    let repro = dir.join("repro/unit-4.json");
    let text = std::fs::read_to_string(&repro).unwrap();
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(r["unit"], 4);
    assert_eq!(r["planted_store"], 0);
    assert_eq!(r["config"]["LOG_BLOCK"], 4);
    assert_eq!(r["mismatch"]["kind"], "outputs");
    assert!(r["program"]["assembly"]
        .as_str()
        .unwrap()
        .contains("store out"));

    let err = fails(vta_check(&dir, &["--replay", "repro/unit-4.json"], &[]));
    assert!(
        err.contains("replay of unit 4 of campaign seed 3 (preset default"),
        "{err}"
    );
    assert!(err.contains("planted fault: STORE 0 corrupted"), "{err}");
    assert!(err.contains("mismatch reproduced (as recorded)"), "{err}");
    assert!(!err.contains("no longer draws"), "{err}");

    // With --json the result is a document on stdout, the status still says mismatch.
    let out = vta_check(&dir, &["--replay", "repro/unit-4.json", "--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["result"], "mismatch");
    assert_eq!(doc["mismatch"], r["mismatch"]);

    let mut healed = r.clone();
    healed["planted_store"] = serde_json::Value::Null;
    std::fs::write(dir.join("healed.json"), healed.to_string()).unwrap();
    let out = ok(vta_check(&dir, &["--replay", "healed.json"], &[]));
    assert!(
        out.contains("match: fsim and rtl agree on this case now"),
        "{out}"
    );
}

#[test]
fn bad_input_is_refused_with_clear_errors() {
    let dir = scratch("check_diff_bad");
    let refused = |args: &[&str]| {
        let args: Vec<&str> = ["check", "diff"].iter().chain(args).copied().collect();
        fails(vta_in(&dir, &args))
    };
    let err = refused(&["--configs", "2", "--shard", "3/2", "--dry-run"]);
    assert!(
        err.contains("--shard: shard '3/2': the index must be below the count (0/2 to 1/2)"),
        "{err}"
    );
    let err = refused(&["--configs", "2", "--shard", "two", "--dry-run"]);
    assert!(err.contains("write it INDEX/COUNT"), "{err}");
    let err = refused(&["--configs", "0"]);
    assert!(
        err.contains("--configs 0: draw at least 1 random config"),
        "{err}"
    );
    let err = refused(&[]);
    assert!(err.contains("nothing to run: give --configs N"), "{err}");
    let err = refused(&["--presets", "default,huge"]);
    assert!(
        err.contains("no preset 'huge' (presets: default, small"),
        "{err}"
    );
    let err = refused(&["--presets", "default", "--programs", "0"]);
    assert!(err.contains("--programs 0"), "{err}");
    let err = refused(&[
        "--presets",
        "default",
        "--programs",
        "3",
        "--plant-mismatch",
        "3",
    ]);
    assert!(
        err.contains("--plant-mismatch 3: the campaign has units 0 to 2"),
        "{err}"
    );
    let err = refused(&["--presets", "default", "--jobs", "0"]);
    assert!(err.contains("--jobs must be at least 1"), "{err}");
    let err = refused(&["--replay", "missing.json"]);
    assert!(err.contains("cannot read missing.json"), "{err}");

    let corrupt = |name: &str, text: &str| -> String {
        std::fs::write(dir.join(name), text).unwrap();
        let err = refused(&["--replay", name]);
        assert!(err.contains(&format!("reproducer {name}: ")), "{err}");
        assert!(
            err.contains("a reproducer is the JSON file `vta check diff` writes"),
            "{err}"
        );
        err
    };
    assert!(corrupt("half.json", "{\"format\": \"vta check").contains("not valid JSON"));
    assert!(corrupt("other.json", "{\"format\": \"results\"}")
        .contains("its \"format\" is not \"vta check diff reproducer\""));
    let bad_hex = r#"{"format": "vta check diff reproducer", "version": 1,
        "config": {"TARGET": "sim", "HW_VER": "0.0.2", "LOG_INP_WIDTH": 3, "LOG_WGT_WIDTH": 3,
        "LOG_ACC_WIDTH": 5, "LOG_BATCH": 0, "LOG_BLOCK": 4, "LOG_UOP_BUFF_SIZE": 15,
        "LOG_INP_BUFF_SIZE": 15, "LOG_WGT_BUFF_SIZE": 18, "LOG_ACC_BUFF_SIZE": 17},
        "memory": {"read_latency": 3, "write_latency": 2, "beat_interval": 1, "max_outstanding": 2},
        "stalls": null, "planted_store": null, "mismatch": {"kind": "outputs", "detail": "x"},
        "program": {"vtab_hex": "56544142zz"}, "unit": 1, "campaign_seed": 0,
        "config_source": "preset default", "program_seed": 5}"#;
    assert!(corrupt("hex.json", bad_hex).contains("\"program.vtab_hex\": not hexadecimal"));
    let no_memory = bad_hex.replace("\"memory\"", "\"mem\"");
    assert!(corrupt("memory.json", &no_memory).contains("no \"memory\" object"));
}
