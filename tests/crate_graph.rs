//! The crate graph a board binary relies on: the board binary (`vta-board`), the device HAL
//! (`drivers`), the runtime (`vta-runtime`) and the functional simulator without its `rtl`
//! feature carry no simulator of the RTL, no HDL, no Verilator and no C++ build in their
//! dependency trees (normal and build dependencies, as `cargo tree` resolves them for that
//! crate alone), and the board binary and the runtime nothing of the ONNX front end; the board
//! build of the Python package (python/ without its `full` feature, the wheel for boards)
//! carries what the board binary does plus the functional simulator without its `rtl` feature.

use std::collections::BTreeSet;
use std::process::Command;

/// Crates that mean "simulators, HDL or a C++ toolchain": none may reach a board binary.
const HEAVY: [&str; 5] = ["vta-hw", "hdl", "cc", "libloading", "vta-sim"];

/// The names of every crate in the tree of `package` (itself included).
fn tree(package: &str, extra: &[&str]) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "--locked",
            "--offline",
            "-e",
            "normal,build",
            "--prefix",
            "none",
        ])
        .args(["--format", "{p}", "-p", package])
        .args(extra)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo tree -p {package} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("UTF-8")
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

fn heavy_in(crates: &BTreeSet<String>, allowed: &[&str]) -> Vec<String> {
    HEAVY
        .iter()
        .filter(|h| !allowed.contains(h) && crates.contains(**h))
        .map(|h| h.to_string())
        .collect()
}

#[test]
fn the_device_hal_depends_on_the_isa_alone() {
    let t = tree("drivers", &[]);
    assert!(t.contains("drivers") && t.contains("isa"), "{t:?}");
    assert!(
        heavy_in(&t, &[]).is_empty(),
        "drivers pulls in {:?}",
        heavy_in(&t, &[])
    );
}

#[test]
fn the_functional_simulator_builds_without_the_rtl_backend() {
    let lean = tree("vta-sim", &["--no-default-features"]);
    assert!(lean.contains("drivers"), "{lean:?}");
    assert!(
        heavy_in(&lean, &["vta-sim"]).is_empty(),
        "vta-sim without `rtl` pulls in {:?}",
        heavy_in(&lean, &["vta-sim"])
    );
    // The check can fail: with its default features the RTL backend is there.
    let full = tree("vta-sim", &[]);
    assert!(full.contains("vta-hw") && full.contains("cc"), "{full:?}");
}

#[test]
fn the_runtime_carries_no_simulator_and_no_front_end() {
    let t = tree("vta-runtime", &[]);
    assert!(t.contains("drivers") && t.contains("ndarray"), "{t:?}");
    assert!(
        heavy_in(&t, &[]).is_empty(),
        "vta-runtime pulls in {:?}",
        heavy_in(&t, &[])
    );
    // The ONNX reader (prost), the graph IR (petgraph) and the compiler itself.
    for front in ["compiler", "prost", "petgraph"] {
        assert!(!t.contains(front), "vta-runtime pulls in {front}: {t:?}");
    }
}

#[test]
fn the_board_binary_carries_no_simulator_and_no_front_end() {
    let t = tree("vta-board", &[]);
    assert!(t.contains("drivers") && t.contains("vta-runtime"), "{t:?}");
    assert!(
        heavy_in(&t, &[]).is_empty(),
        "vta-board pulls in {:?}",
        heavy_in(&t, &[])
    );
    for front in ["compiler", "prost", "petgraph"] {
        assert!(!t.contains(front), "vta-board pulls in {front}: {t:?}");
    }
    // Nor the Python package's extension (python/), nor the CLI it wraps.
    for py in ["vta-py", "pyo3", "numpy", "vta"] {
        assert!(!t.contains(py), "vta-board pulls in {py}: {t:?}");
    }
}

#[test]
fn the_board_build_of_the_python_package_carries_no_compiler_and_no_rtl() {
    let t = tree("vta-py", &["--no-default-features"]);
    assert!(
        t.contains("drivers") && t.contains("vta-runtime") && t.contains("pyo3"),
        "{t:?}"
    );
    // The functional simulator (backend="fsim") is in, its RTL backend is not.
    assert!(
        heavy_in(&t, &["vta-sim"]).is_empty(),
        "the board build of vta-py pulls in {:?}",
        heavy_in(&t, &["vta-sim"])
    );
    // Nor the ONNX front end, design-space exploration, or the CLI crate.
    for front in ["compiler", "prost", "petgraph", "dse", "vta"] {
        assert!(
            !t.contains(front),
            "the board build of vta-py pulls in {front}: {t:?}"
        );
    }
    // The check can fail: the workstation build (the default) has all of them.
    let full = tree("vta-py", &[]);
    for c in ["compiler", "dse", "vta", "vta-hw", "cc"] {
        assert!(
            full.contains(c),
            "the full build of vta-py lacks {c}: {full:?}"
        );
    }
}
