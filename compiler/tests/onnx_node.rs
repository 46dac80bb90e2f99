//! ONNX's own node conformance tests (`tests/data/onnx-node`, exported from the installed
//! `onnx` package by `make_node_tests.py`, which lists the operators and the excluded cases with
//! their reasons in its README) run through the front end's float executor, the one calibration
//! runs: every case imports, and every output has ONNX's expected type and shape, floats within
//! `1e-6 * max(1, |expected|)` (a few ulps: ONNX computes the expected outputs with numpy),
//! every other type exactly. `./test.sh` runs it with the workspace's tests.

use std::path::{Path, PathBuf};

use compiler::frontend::import_graph;
use compiler::graph::Tensor;
use compiler::onnx::load_tensor_pb;
use vta_runtime::budget::DEFAULT_MEMORY_BUDGET;

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

/// Why `got` is not ONNX's `want`, if it is not.
fn mismatch(got: &Tensor, want: &Tensor) -> Option<String> {
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
                a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-6 * b.abs().max(1.0);
            (!ok).then(|| format!("got {a}, want {b}"))
        }),
        _ => (got != want).then(|| format!("got {got:?}, want {want:?}")),
    }
}

#[test]
fn onnx_node_tests_of_the_claimed_operators_pass() {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(root())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("model.onnx").exists())
        .collect();
    cases.sort();
    let mut failures = Vec::new();
    for dir in &cases {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(dir.join("model.onnx")).unwrap();
        let outcome = import_graph(&bytes, &name, DEFAULT_MEMORY_BUDGET)
            .map_err(|e| e.to_string())
            .and_then(|g| g.run_outputs(&tensors(dir, "input")));
        let want = tensors(dir, "output");
        match outcome {
            Err(e) => failures.push(format!("{name}: {e}")),
            Ok(got) if got.len() != want.len() => failures.push(format!(
                "{name}: {} outputs, want {}",
                got.len(),
                want.len()
            )),
            Ok(got) => {
                failures.extend(got.iter().zip(&want).enumerate().filter_map(|(k, (g, w))| {
                    mismatch(g, w).map(|m| format!("{name} output {k}: {m}"))
                }))
            }
        }
    }
    println!("{} ONNX node tests, {} failed", cases.len(), failures.len());
    assert!(cases.len() >= 130, "only {} cases found", cases.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
