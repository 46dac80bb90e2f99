//! The activation lookup table end to end: a float model with Sigmoid, SiLU (Sigmoid x Mul,
//! fused into one table), HardSwish and Tanh between convolutions, quantized after training
//! and compiled with `vta compile --config lut`, runs every table activation on the
//! accelerator and `vta run --check` finds it bit-exact with the integer reference; compiled
//! for the default config (no table) the same activations run on the CPU, and both give the
//! same output bytes. The RTL backend runs the LUT model too.

#[path = "support/cli.rs"]
#[allow(dead_code)]
mod support;

#[path = "../compiler/tests/onnx_builder/mod.rs"]
#[allow(dead_code)]
mod onnx_builder;

use std::path::Path;

use compiler::graph::Tensor;
use isa::npy;
use onnx_builder::{sample, Model, A};
use support::{ok, scratch, vta_in};
use vta_runtime::io::tensor_to_npy;

fn write_npy(path: &Path, t: &Tensor) {
    let (elem, shape, bytes) = tensor_to_npy(t);
    npy::write_file(path, elem, &shape, &bytes).unwrap();
}

/// conv -> Sigmoid -> conv -> SiLU -> conv -> HardSwish -> conv -> Tanh, 16 channels.
fn activations_model() -> Model {
    let mut m = Model::new(17);
    let pads = || vec![("pads", A::Is(vec![1; 4]))];
    m.input("x", &[1, 16, 12, 12])
        .weight("w1", &[16, 16, 3, 3], 0.3)
        .node("conv1", "Conv", &["x", "w1"], &["c1"], pads())
        .node("sigmoid", "Sigmoid", &["c1"], &["a1"], vec![])
        .weight("w2", &[32, 16, 3, 3], 0.3)
        .node("conv2", "Conv", &["a1", "w2"], &["c2"], pads())
        .node("silu_sig", "Sigmoid", &["c2"], &["g2"], vec![])
        .node("silu_mul", "Mul", &["c2", "g2"], &["a2"], vec![])
        .weight("w3", &[16, 32, 1, 1], 0.3)
        .node("conv3", "Conv", &["a2", "w3"], &["c3"], vec![])
        .node("hswish", "HardSwish", &["c3"], &["a3"], vec![])
        .weight("w4", &[16, 16, 3, 3], 0.3)
        .node("conv4", "Conv", &["a3", "w4"], &["c4"], pads())
        .node("tanh", "Tanh", &["c4"], &["y"], vec![])
        .output("y");
    m
}

/// The support-table line of a node.
fn row<'a>(table: &'a str, node: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{node} ")))
        .unwrap_or_else(|| panic!("no row for {node} in\n{table}"))
}

#[test]
fn table_activations_run_on_the_accelerator_with_the_lut_config() {
    let dir = scratch("lut_e2e");
    let shape = [1, 16, 12, 12];
    std::fs::write(dir.join("m.onnx"), activations_model().bytes()).unwrap();
    let x = sample(&shape, 5, 2.0);
    write_npy(&dir.join("x.npy"), &Tensor::F32(x.clone()));
    let calib: Vec<_> = std::iter::once(x)
        .chain((0..3).map(|s| sample(&shape, 40 + s, 2.0)))
        .collect();
    let views: Vec<_> = calib.iter().map(|a| a.view()).collect();
    let stacked = ndarray::concatenate(ndarray::Axis(0), &views).unwrap();
    write_npy(&dir.join("calib.npy"), &Tensor::F32(stacked));
    let compile = |config: &str, out: &str| {
        ok(vta_in(
            &dir,
            &[
                "compile",
                "m.onnx",
                "--calibrate",
                "calib.npy",
                "--config",
                config,
                "-o",
                out,
            ],
        ))
    };
    let run = |model: &str, y: &str| {
        ok(vta_in(
            &dir,
            &["run", model, "--input", "x.npy", "--output", y, "--check"],
        ))
    };

    let with_lut = compile("lut", "lut.vtab");
    println!("{with_lut}");
    for node in ["sigmoid", "silu_sig", "hswish", "tanh"] {
        let r = row(&with_lut, node);
        assert!(
            r.contains("QTable") && r.contains("accelerator"),
            "{node}: {r}"
        );
    }
    assert!(row(&with_lut, "silu_mul").contains("fused"), "{with_lut}");
    let on_lut = run("lut.vtab", "y_lut.npy");
    println!("{on_lut}");
    assert!(on_lut.contains("check: bit-exact"), "{on_lut}");

    let without = compile("default", "default.vtab");
    for node in ["sigmoid", "silu_sig", "hswish", "tanh"] {
        assert!(row(&without, node).contains("cpu"), "{node}: {without}");
    }
    let on_default = run("default.vtab", "y_default.npy");
    assert!(on_default.contains("check: bit-exact"), "{on_default}");
    let read = |f: &str| npy::read_file(&dir.join(f)).unwrap();
    assert_eq!(
        read("y_lut.npy"),
        read("y_default.npy"),
        "the tables on the accelerator give the CPU's bytes"
    );

    // The cycle-accurate RTL runs the table layers too, with the same result (the Verilator
    // model from the cache the tests share, see tests/support/rtl.rs).
    let cache = std::env::var_os("VTA_HDL_CACHE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("vta-hw-models"));
    let on_rtl = ok(std::process::Command::new(env!("CARGO_BIN_EXE_vta"))
        .args([
            "run",
            "lut.vtab",
            "--input",
            "x.npy",
            "--output",
            "y_rtl.npy",
            "--check",
            "--backend",
            "rtl",
        ])
        .current_dir(&dir)
        .env("VTA_HDL_CACHE", cache)
        .output()
        .expect("the vta binary runs"));
    assert!(on_rtl.contains("check: bit-exact"), "{on_rtl}");
    assert_eq!(read("y_rtl.npy"), read("y_lut.npy"));
}
