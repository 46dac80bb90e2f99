//! ONNX's own node conformance tests (`tests/data/onnx-node`, exported from the installed
//! `onnx` package by `make_node_tests.py`, which lists the operators and the excluded cases with
//! their reasons in its README) run through the front end's float executor, the one calibration
//! runs: every case imports, and every output has ONNX's expected type and shape, floats within
//! `1e-6 * max(1, |expected|)` (a few ulps: ONNX computes the expected outputs with numpy; the
//! one looser case is in [`tolerance`]), the outputs of the integer and quantized operators and
//! every other type exactly. The cases of the quantized operators are also compiled as models
//! and run on the functional simulator, exactly; the back end refuses all of ONNX's (int32
//! accumulators, uint8 weights whose zero point leaves int8's range, 3-D products: the
//! support table printed says which), so their steps run on the CPU fallback; QLinearConv and
//! QLinearMatMul on the accelerator are tested by `onnxruntime_quantized` (QOperator models).
//! The inputs the compiler needs as constants (weights, scales, zero points, pads, sizes, ...)
//! were made initializers with the case's values when the cases were generated, as ONNX's own
//! backend runner does; the cases of operators whose older versions took those constants as
//! attributes (or, Softmax, had other semantics) are there at that older opset too. `./test.sh` runs it with the workspace's tests.

use std::path::{Path, PathBuf};

use compiler::compile::Compiled;
use compiler::frontend::{import_graph, FrontendOptions};
use compiler::graph::Tensor;
use compiler::onnx::load_tensor_pb;
use vta_runtime::budget::DEFAULT_MEMORY_BUDGET;
use vta_runtime::model::Model;
use vta_sim::FsimDevice;

/// The integer and quantized operators' cases: their outputs (float ones included) are exact.
const QUANTIZED: [&str; 6] = [
    "test_quantizelinear",
    "test_dequantizelinear",
    "test_qlinearconv",
    "test_qlinearmatmul",
    "test_convinteger",
    "test_matmulinteger",
];

fn is_quantized(case: &str) -> bool {
    QUANTIZED.iter().any(|p| case.starts_with(p))
}

/// The float tolerance of a case, relative to `max(1, |expected|)`.
fn tolerance(case: &str) -> f32 {
    if is_quantized(case) {
        0.0
    } else if case == "test_averagepool_2d_ceil_last_window_starts_on_pad" {
        // onnx's generator gives this case's inputs and expected means rounded to four
        // decimals, computed from unrounded inputs: 0.2841 where the given inputs average
        // 2.5564 / 9 = 0.284044.
        1e-4
    } else {
        1e-6
    }
}

/// The cases, sorted.
fn cases() -> Vec<PathBuf> {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(root())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("model.onnx").exists())
        .collect();
    cases.sort();
    cases
}

fn name(dir: &Path) -> String {
    dir.file_name().unwrap().to_string_lossy().into_owned()
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/onnx-node")
}

/// The tensors `<prefix>_0.pb`, `<prefix>_1.pb`, ... of a case's data set.
fn tensors(dir: &Path, prefix: &str) -> Vec<Tensor> {
    (0..)
        .map(|k| dir.join(format!("test_data_set_0/{prefix}_{k}.pb")))
        .take_while(|p| p.exists())
        .map(|p| load_tensor_pb(&p).unwrap().1)
        .collect()
}

/// Why `got` is not ONNX's `want` (floats within `tol` relative), if it is not.
fn mismatch(got: &Tensor, want: &Tensor, tol: f32) -> Option<String> {
    if got.dtype() != want.dtype() || got.shape() != want.shape() {
        return Some(format!(
            "got {} {:?}, want {} {:?}",
            got.dtype(),
            got.shape(),
            want.dtype(),
            want.shape()
        ));
    }
    match (got, want) {
        (Tensor::F32(g), Tensor::F32(w)) => g.iter().zip(w).find_map(|(&a, &b)| {
            // (infinities equal, NaN where NaN is expected)
            let ok =
                a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= tol * b.abs().max(1.0);
            (!ok).then(|| format!("got {a}, want {b}"))
        }),
        _ => (got != want).then(|| format!("got {got:?}, want {want:?}")),
    }
}

/// Compares a case's outputs with ONNX's expected ones.
fn check(name: &str, outcome: Result<Vec<Tensor>, String>, want: &[Tensor]) -> Vec<String> {
    match outcome {
        Err(e) => vec![format!("{name}: {e}")],
        Ok(got) if got.len() != want.len() => {
            vec![format!(
                "{name}: {} outputs, want {}",
                got.len(),
                want.len()
            )]
        }
        Ok(got) => got
            .iter()
            .zip(want)
            .enumerate()
            .filter_map(|(k, (g, w))| {
                mismatch(g, w, tolerance(name)).map(|m| format!("{name} output {k}: {m}"))
            })
            .collect(),
    }
}

#[test]
fn onnx_node_tests_of_the_claimed_operators_pass() {
    let cases = cases();
    let mut failures = Vec::new();
    for dir in &cases {
        let name = name(dir);
        let bytes = std::fs::read(dir.join("model.onnx")).unwrap();
        let outcome = import_graph(&bytes, &name, DEFAULT_MEMORY_BUDGET)
            .map_err(|e| e.to_string())
            .and_then(|g| g.run_outputs(&tensors(dir, "input")));
        failures.extend(check(&name, outcome, &tensors(dir, "output")));
    }
    println!("{} ONNX node tests, {} failed", cases.len(), failures.len());
    assert!(cases.len() >= 430, "only {} cases found", cases.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn onnx_node_tests_of_the_quantized_operators_run_exactly_compiled_on_fsim() {
    let cfg = isa::HwConfig::preset("default").unwrap();
    let cases: Vec<PathBuf> = cases()
        .into_iter()
        .filter(|d| is_quantized(&name(d)))
        .collect();
    let mut failures = Vec::new();
    for dir in &cases {
        let name = name(dir);
        let bytes = std::fs::read(dir.join("model.onnx")).unwrap();
        let outcome = Compiled::compile(bytes, &name, &[], &cfg, &FrontendOptions::default())
            .map_err(|e| e.to_string())
            .and_then(|c| {
                // where each step runs, and why not on the accelerator
                println!("{name}:\n{}", c.support);
                c.to_bytes().map_err(|e| e.to_string())
            })
            .and_then(|b| Model::from_bytes(&b, &name).map_err(|e| e.to_string()))
            .and_then(|m| {
                let mut dev = FsimDevice::checking_races(&cfg);
                m.run(&mut dev, &tensors(dir, "input"))
                    .map(|r| r.outputs)
                    .map_err(|e| e.to_string())
            });
        failures.extend(check(&name, outcome, &tensors(dir, "output")));
    }
    println!(
        "{} quantized ONNX node tests compiled, {} failed",
        cases.len(),
        failures.len()
    );
    assert!(cases.len() >= 20, "only {} cases found", cases.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
