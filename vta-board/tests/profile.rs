//! `vta-board profile` on an emulated board (the root's tests/support/board_emu.rs, the
//! functional simulator behind the board's device files): the CPU profile it writes covers
//! every CPU step of the model with a time, names each step, and reads back as the
//! device-time simulation reads it.

#![cfg(target_os = "linux")]

#[path = "../../tests/support/board_emu.rs"]
mod board_emu;

use std::path::Path;
use std::process::Command;

use board_emu::EmulatedBoard;
use vta_runtime::exec::profile;
use vta_runtime::graph::TaskGraph;

const MEM: u64 = 32 << 20;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn vta_board(args: &[&str], board: &EmulatedBoard) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vta-board"))
        .args(args)
        .arg("--root")
        .arg(board.dir.path())
        .output()
        .expect("vta-board runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_profile_times_every_cpu_step_and_reads_back() {
    let model_file = root().join("fuzz/seeds/model/tiny_cnn.vtab");
    let bytes = std::fs::read(&model_file).unwrap();
    let model =
        vta_runtime::file::read(&bytes, None, vta_runtime::budget::DEFAULT_MEMORY_BUDGET).unwrap();
    let graph = TaskGraph::of_model(&model);
    let cpu_steps = graph.tasks.iter().filter(|t| !t.is_launch()).count();
    assert!(cpu_steps > 0, "the tiny CNN has CPU steps to time");

    let emu = EmulatedBoard::new(&model.config, model.config.isa_hash(), MEM);
    let out = emu.dir.path().join("profile.json");
    let digits = root().join("compiler/tests/data/digits_test.npy");
    let (ok, log) = vta_board(
        &[
            "profile",
            model_file.to_str().unwrap(),
            "-i",
            digits.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--runs",
            "2",
        ],
        &emu,
    );
    assert!(ok, "{log}");
    assert!(
        log.contains(&format!("profiled {cpu_steps} CPU step(s)")),
        "{log}"
    );

    let text = std::fs::read_to_string(&out).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["format"], profile::FORMAT);
    assert!(doc["measured_on"]
        .as_str()
        .unwrap()
        .starts_with("vta-board on "));
    let steps = doc["steps"].as_array().unwrap();
    assert_eq!(steps.len(), cpu_steps, "{text}");
    for s in steps {
        let k = s["step"].as_u64().unwrap() as usize;
        assert_eq!(s["name"], model.plan.steps[k].name.as_str(), "{text}");
        assert!(s["us"].as_f64().unwrap() > 0.0, "{text}");
    }
    let times = profile::read(&text, "profile.json", &model, &graph).unwrap();
    for (t, time) in graph.tasks.iter().zip(&times) {
        assert_eq!(t.is_launch(), time.is_none());
    }
}

#[test]
fn bad_profile_requests_are_refused_with_the_reason() {
    let cfg = isa::HwConfig::default();
    let emu = EmulatedBoard::new(&cfg, cfg.isa_hash(), MEM);
    let model_file = root().join("fuzz/seeds/model/tiny_cnn.vtab");
    let model = model_file.to_str().unwrap();
    let digits = root().join("compiler/tests/data/digits_test.npy");
    let digits = digits.to_str().unwrap();
    let (ok, e) = vta_board(
        &[
            "profile", model, "-i", digits, "-o", "p.json", "--runs", "0",
        ],
        &emu,
    );
    assert!(!ok && e.contains("--runs must be at least 1"), "{e}");
    let (ok, e) = vta_board(
        &["profile", model, "-i", "missing.npy", "-o", "p.json"],
        &emu,
    );
    assert!(!ok && e.contains("missing.npy"), "{e}");
}
