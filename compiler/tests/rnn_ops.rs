//! RNN, GRU and LSTM against onnxruntime (`tests/data/rnn`, made by `make_rnn_cases.py`) on
//! what ONNX's own node tests leave out: `sequence_lens` of different lengths, `clip`,
//! `input_forget`, `linear_before_reset`, non-default activation functions with their
//! `activation_alpha`/`beta`, peepholes with initial states, reverse and bidirectional
//! directions in both layouts, and a node whose `Y` output is absent; and onnxruntime's
//! `com.microsoft.DynamicQuantizeLSTM` (weights per tensor and per channel, forward and
//! bidirectional), whose matrix products are exact integer products of dynamically
//! quantized inputs. The front end's float executor (the one calibration runs, and a
//! compiled model's CPU steps) must agree with onnxruntime within
//! `1e-6 * max(1, |expected|)` (measured: 2e-7 for both; onnxruntime's kernels approximate
//! tanh and the sigmoid (MLAS) and sum the float gate products in another order).

use std::path::{Path, PathBuf};

use compiler::frontend::import_graph;
use compiler::graph::Tensor;
use compiler::onnx::load_tensor_pb;
use vta_runtime::budget::DEFAULT_MEMORY_BUDGET;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/rnn")
}

fn tensors(dir: &Path, prefix: &str) -> Vec<Tensor> {
    (0..)
        .map(|k| dir.join(format!("test_data_set_0/{prefix}_{k}.pb")))
        .take_while(|p| p.exists())
        .map(|p| load_tensor_pb(&p).unwrap().1)
        .collect()
}

#[test]
fn recurrent_ops_agree_with_onnxruntime() {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(root())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("model.onnx").exists())
        .collect();
    cases.sort();
    assert_eq!(cases.len(), 11);
    let (mut worst, mut worst_q) = (0f32, 0f32);
    for dir in &cases {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(dir.join("model.onnx")).unwrap();
        let g = import_graph(&bytes, &name, DEFAULT_MEMORY_BUDGET).unwrap();
        let got = g.run_outputs(&tensors(dir, "input")).unwrap();
        let want = tensors(dir, "output");
        assert_eq!(got.len(), want.len(), "{name}");
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.shape(), w.shape(), "{name} output {k}");
            for (a, b) in g.as_f32().unwrap().iter().zip(w.as_f32().unwrap()) {
                let d = (a - b).abs() / b.abs().max(1.0);
                let w = if name.starts_with("dynq_") {
                    &mut worst_q
                } else {
                    &mut worst
                };
                *w = w.max(d);
                assert!(d <= 1e-6, "{name} output {k}: got {a}, want {b}");
            }
        }
    }
    println!(
        "largest difference from onnxruntime: {worst:e} (float), {worst_q:e} (DynamicQuantizeLSTM)"
    );
}
