//! End-to-end tests of `vta sim` and `vta bench`: the README's example runs and matches an
//! independent reference, inputs and outputs go through `.npy`, bad input fails cleanly.

#[path = "support/cli.rs"]
mod support;

use std::path::{Path, PathBuf};

use isa::asm::{parse_program, AsmContext};
use isa::npy::{self, Elem};
use isa::Program;
use support::{fails, ok, scratch, vta, vta_in};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/dense_relu.vasm")
}

fn parse_example() -> Program {
    let src = std::fs::read_to_string(example()).unwrap();
    let ctx = AsmContext {
        file_name: "dense_relu.vasm".into(),
        base_dir: example().parent().unwrap().to_path_buf(),
        config: None,
    };
    parse_program(&src, &ctx).unwrap()
}

fn bytes_of(p: &Program, name: &str) -> Vec<u8> {
    p.segment(name).unwrap().init.clone().unwrap()
}

/// clip((x . w^T + bias) >> 2, 0, 127), computed from the example's own buffers.
fn dense_relu_reference(x: &[u8], w: &[u8], bias: &[u8]) -> Vec<u8> {
    let (rows, k, m) = (4, 16, 16);
    let mut y = Vec::new();
    for r in 0..rows {
        for o in 0..m {
            let b = i32::from_le_bytes(bias[(r * m + o) * 4..][..4].try_into().unwrap());
            let dot: i32 = (0..k)
                .map(|i| i32::from(x[r * k + i] as i8) * i32::from(w[o * k + i] as i8))
                .sum();
            y.push(((dot + b) >> 2).clamp(0, 127) as u8);
        }
    }
    y
}

#[test]
fn example_runs_and_matches_the_reference() {
    let dir = scratch("sim_example");
    let text = ok(vta_in(
        &dir,
        &["sim", example().to_str().unwrap(), "--out", "out"],
    ));
    assert!(
        text.contains("macs") && text.contains("out/y.npy"),
        "{text}"
    );
    let y = npy::read_file(&dir.join("out/y.npy")).unwrap();
    assert_eq!((y.elem, y.shape.clone()), (Elem::I8, vec![4, 16]));
    let p = parse_example();
    let want = dense_relu_reference(
        &bytes_of(&p, "x"),
        &bytes_of(&p, "w"),
        &bytes_of(&p, "bias"),
    );
    assert_eq!(y.data, want);
}

#[test]
fn assembled_container_runs_with_a_new_input() {
    let dir = scratch("sim_input");
    ok(vta_in(
        &dir,
        &["asm", example().to_str().unwrap(), "-o", "p.vtab"],
    ));
    let x: Vec<u8> = (0..64).map(|i| (i % 13) as u8).collect();
    npy::write_file(&dir.join("x.npy"), Elem::I8, &[4, 16], &x).unwrap();
    ok(vta_in(
        &dir,
        &["sim", "p.vtab", "-i", "x=x.npy", "--out", "o"],
    ));
    let y = npy::read_file(&dir.join("o/y.npy")).unwrap();
    let p = parse_example();
    assert_eq!(
        y.data,
        dense_relu_reference(&x, &bytes_of(&p, "w"), &bytes_of(&p, "bias"))
    );
}

#[test]
fn bad_inputs_are_named() {
    let dir = scratch("sim_bad_input");
    let ex = example();
    let ex = ex.to_str().unwrap();
    npy::write_file(&dir.join("wrong.npy"), Elem::I8, &[2, 16], &[0; 32]).unwrap();
    let e = fails(vta_in(&dir, &["sim", ex, "-i", "x=wrong.npy"]));
    assert!(e.contains("[2, 16]") && e.contains("[4, 16]"), "{e}");
    let e = fails(vta_in(&dir, &["sim", ex, "-i", "nope=wrong.npy"]));
    assert!(
        e.contains("no buffer 'nope'") && e.contains("inputs: x"),
        "{e}"
    );
    let e = fails(vta_in(&dir, &["sim", ex, "-i", "y=wrong.npy"]));
    assert!(e.contains("not declared as an input"), "{e}");
    let e = fails(vta_in(&dir, &["sim", ex, "-i", "x"]));
    assert!(e.contains("NAME=FILE"), "{e}");
    let e = fails(vta_in(&dir, &["sim", ex, "-i", "x=missing.npy"]));
    assert!(e.contains("missing.npy"), "{e}");
}

#[test]
fn deadlocked_program_fails_with_a_diagnosis() {
    let dir = scratch("sim_deadlock");
    std::fs::write(
        dir.join("d.vasm"),
        "load uop sram=0 dram=0 y=0 x=0 stride=0 pop_prev\nfinish\n",
    )
    .unwrap();
    let e = fails(vta_in(&dir, &["sim", "d.vasm"]));
    assert!(e.contains("deadlock") && e.contains("l2g"), "{e}");
}

#[test]
fn check_races_catches_a_missing_token() {
    // The example without its load -> compute token still gives the right bytes on fsim (which
    // happens to run load first), but the GEMM may read INP before the load wrote it.
    let src = std::fs::read_to_string(example()).unwrap();
    let racy = src
        .replace("stride=1 push_next\n; compute", "stride=1\n; compute")
        .replace("wgt=0,0 pop_prev", "wgt=0,0");
    assert_ne!(racy, src);
    let dir = scratch("sim_races");
    std::fs::write(dir.join("racy.vasm"), &racy).unwrap();
    ok(vta_in(&dir, &["sim", "racy.vasm"]));
    ok(vta(&["sim", example().to_str().unwrap(), "--check-races"]));
    let e = fails(vta_in(&dir, &["sim", "racy.vasm", "--check-races"]));
    assert!(
        e.contains("race on INP row 0")
            && e.contains("LOAD inp, load module")
            && e.contains("GEMM"),
        "{e}"
    );
    let e = fails(vta_in(
        &dir,
        &["sim", "racy.vasm", "--check-races", "--backend", "rtl"],
    ));
    assert!(e.contains("--backend fsim"), "{e}");
}

#[test]
fn step_limit_stops_a_run() {
    let e = fails(vta(&[
        "sim",
        example().to_str().unwrap(),
        "--max-steps",
        "2",
    ]));
    assert!(e.contains("--max-steps"), "{e}");
}

#[test]
fn bench_prints_figures() {
    let text = ok(vta(&[
        "bench",
        "fsim",
        "--config",
        "small",
        "--gemm-insns",
        "2",
        "--alu-insns",
        "2",
    ]));
    assert!(
        text.contains("GMAC/s") && text.contains("micro-ops/s"),
        "{text}"
    );
    let j: serde_json::Value = serde_json::from_str(&ok(vta(&[
        "bench",
        "fsim",
        "--config",
        "small",
        "--gemm-insns",
        "2",
        "--alu-insns",
        "2",
        "--json",
    ])))
    .unwrap();
    assert!(j["config"].as_str().unwrap().starts_with("1x4_"), "{j}");
    assert!(j["gemm"]["counters"]["macs"].as_u64().unwrap() > 0, "{j}");
    assert!(j["alu"]["uops_per_second"].as_f64().unwrap() > 0.0, "{j}");
}

#[test]
fn bench_calibration_and_whole_runs() {
    // ResNet-18 at its smallest input keeps these quick; the figures' shape is checked.
    let text = ok(vta(&[
        "bench",
        "calibration",
        "--size",
        "16",
        "--samples",
        "2",
    ]));
    assert!(
        text.contains("sample 2:") && text.contains("per sample:"),
        "{text}"
    );
    let j: serde_json::Value = serde_json::from_str(&ok(vta(&[
        "bench",
        "calibration",
        "--size",
        "16",
        "--samples",
        "1",
        "--json",
    ])))
    .unwrap();
    assert_eq!(j["samples"].as_array().unwrap().len(), 1, "{j}");
    assert!(j["cpu_seconds_fastest"].as_f64().unwrap() > 0.0, "{j}");
    let e = fails(vta(&["bench", "calibration", "--samples", "0"]));
    assert!(e.contains("--samples 0"), "{e}");

    let j: serde_json::Value = serde_json::from_str(&ok(vta(&[
        "bench", "run", "--size", "16", "--repeat", "2", "--json",
    ])))
    .unwrap();
    let runs = j["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{j}");
    assert!(
        runs.iter()
            .all(|r| r["cpu_seconds"].as_f64().unwrap() > 0.0),
        "{j}"
    );
    assert_eq!(j["command"][0], "run", "{j}");
    // A model that cannot be run names the failing `vta run`.
    let dir = scratch("bench_run");
    let bogus = dir.join("bogus.vtab");
    std::fs::write(&bogus, b"not a model").unwrap();
    let e = fails(vta(&[
        "bench",
        "run",
        bogus.to_str().unwrap(),
        "--input",
        "x.npy",
    ]));
    assert!(e.contains("`vta run") && e.contains("bogus.vtab"), "{e}");
}

#[test]
fn help_texts() {
    let help = ok(vta(&["sim", "--help"]));
    // The help restates the hang bound's default (the option is optional so that fsim can
    // refuse it): it must be the backend's.
    let default = vta_sim::rtl::RunLimits::DEFAULT_HANG_CYCLES;
    assert!(help.contains(&format!("[default: {default}]")), "{help}");
    insta::assert_snapshot!("help_sim", help);
    insta::assert_snapshot!("help_bench_fsim", ok(vta(&["bench", "fsim", "--help"])));
}

/// `vta disasm --json` on raw streams encoded by VTA's own `hw_spec.h` prints exactly VTA's
/// field values, for the default config and a smaller one (see isa/tests/data/README.md).
#[test]
fn disasm_json_of_vta_encoded_streams_gives_vta_field_values() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("isa/tests/data");
    for (config, golden) in [
        ("vta_config.json", "vta_golden_default.jsonl"),
        ("vta_config_small.json", "vta_golden_small.jsonl"),
    ] {
        let dir = scratch(&format!("golden_{config}"));
        let (mut insns, mut uops, mut want_insns, mut want_uops) = (vec![], vec![], vec![], vec![]);
        for line in std::fs::read_to_string(data.join(golden)).unwrap().lines() {
            let mut row: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(line).unwrap();
            let hex = |v: serde_json::Value| -> Vec<u8> {
                let s = v.as_str().unwrap().to_string();
                (0..s.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
                    .collect()
            };
            if let Some(b) = row.remove("bytes") {
                insns.extend(hex(b));
                want_insns.push(serde_json::Value::Object(row));
            } else {
                uops.extend(hex(row.remove("uop").unwrap()));
                want_uops.push(serde_json::Value::Object(row));
            }
        }
        std::fs::write(dir.join("insns.bin"), &insns).unwrap();
        std::fs::write(dir.join("uops.bin"), &uops).unwrap();
        let cfg = data.join(config);
        let cfg = cfg.to_str().unwrap();
        let parse = |text: String| -> Vec<serde_json::Value> {
            text.lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        };
        let got = parse(ok(vta_in(
            &dir,
            &["disasm", "insns.bin", "--json", "--config", cfg],
        )));
        assert_eq!(got, want_insns, "{golden}");
        let got = parse(ok(vta_in(
            &dir,
            &["disasm", "--uops", "uops.bin", "--json", "--config", cfg],
        )));
        assert_eq!(got, want_uops, "{golden}");
    }
}
