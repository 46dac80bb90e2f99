//! Running the `vta` binary from tests: scratch directories, success and failure checks.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A fresh, empty scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cli")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn vta_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vta"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the vta binary runs")
}

pub fn vta(args: &[&str]) -> Output {
    vta_in(Path::new(env!("CARGO_TARGET_TMPDIR")), args)
}

/// Stdout of a run that must succeed.
pub fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "vta failed ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("stdout is UTF-8")
}

/// Stderr of a run that must fail cleanly: exit code 1, one `error:` message, no panic.
pub fn fails(out: Output) -> String {
    let err = String::from_utf8(out.stderr).expect("stderr is UTF-8");
    assert_eq!(out.status.code(), Some(1), "expected failure, got:\n{err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.stdout.is_empty(), "no output on failure");
    err
}
