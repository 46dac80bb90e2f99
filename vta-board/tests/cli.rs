//! `vta-board` refuses bad input before it touches the board: a model beyond the memory
//! budget, a budget that is not a size, a core a multi-core bitstream does not have.

use std::process::Command;

fn vta_board(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vta-board"))
        .args(args)
        .output()
        .expect("vta-board runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_model_beyond_the_memory_budget_is_refused_before_the_board_is_opened() {
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fuzz/seeds/model/tiny_cnn.vtab"
    );
    let args = |budget: &'static str| {
        vec![
            "run",
            model,
            "-i",
            "x.npy",
            "-o",
            "y.npy",
            "--memory-budget",
            budget,
        ]
    };
    let (ok, e) = vta_board(&args("1KiB"));
    assert!(!ok && e.contains("memory budget"), "{e}");
    assert!(e.contains("tiny_cnn.vtab"), "{e}");
    let (ok, e) = vta_board(&args("8GB"));
    assert!(!ok && e.contains("unknown unit 'GB'"), "{e}");
}

/// `--core K` picks core K of a two-core bitstream's `.hwh`; one it does not have is refused
/// listing the cores there are, before the bitstream is read.
#[test]
fn a_core_is_picked_from_the_hwh_and_one_out_of_range_is_refused() {
    let hwh = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../bitstreams/tests/fixtures/kv260-2core.hwh"
    );
    let load = |core: &'static str| {
        vta_board(&[
            "load",
            "no-such.bit",
            "--ps",
            "ps8",
            "--hwh",
            hwh,
            "--core",
            core,
        ])
    };
    let (ok, e) = load("2");
    assert!(!ok, "{e}");
    assert!(
        e.contains("kv260-2core.hwh: --core 2: core 2 is out of range")
            && e.contains("0 = vta_0 at 0xA0000000, 1 = vta_1 at 0xA0010000"),
        "{e}"
    );
    // Core 1 and its clock are found; what fails then is the missing bitstream.
    let (ok, e) = load("1");
    assert!(!ok && e.contains("reading no-such.bit"), "{e}");
    let (ok, e) = vta_board(&["load", "x.bit", "--ps", "ps8", "--core", "1"]);
    assert!(!ok && e.contains("--hwh"), "{e}");
}
