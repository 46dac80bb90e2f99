//! `vta-board run` refuses bad input before it touches the board: a model beyond the memory
//! budget, a budget that is not a size.

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
