//! RNN, GRU and LSTM against onnxruntime (`tests/data/rnn`, made by `make_rnn_cases.py`) on
//! what ONNX's own node tests leave out: `sequence_lens` of different lengths, `clip`,
//! `input_forget`, `linear_before_reset`, non-default activation functions with their
//! `activation_alpha`/`beta`, peepholes with initial states, reverse and bidirectional
//! directions in both layouts, and a node whose `Y` output is absent; and onnxruntime's
//! `com.microsoft.DynamicQuantizeLSTM` (weights per tensor and per channel, forward with a
//! batch of 3 and bidirectional; onnxruntime with one intra-op thread), whose matrix
//! products are exact integer products of dynamically quantized inputs. The front end's
//! float executor (the one calibration runs, and a compiled model's CPU steps) must agree
//! with onnxruntime within `1e-6 * max(1, |expected|)` (measured: 2e-7 for both;
//! onnxruntime's kernels approximate tanh and the sigmoid (MLAS) and sum the float gate
//! products in another order). Refused attributes and inputs name what is wrong.

mod onnx_builder;

use std::path::{Path, PathBuf};

use compiler::frontend::import_graph;
use compiler::graph::Tensor;
use compiler::onnx::load_tensor_pb;
use onnx_builder::{sample, Model, A};
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

/// An LSTM (hidden size 2, input size 3, sequence of 4, batch 1) with these attributes and
/// weights of these shapes, imported and run on one input.
fn lstm(attrs: Vec<(&str, A)>, w: &[usize], lens: Option<i64>) -> Result<Vec<Tensor>, String> {
    let mut m = Model::new(14);
    m.input("x", &[4, 1, 3])
        .weight("w", w, 0.5)
        .weight("r", &[1, 8, 2], 0.5)
        .output("y");
    let mut ins = vec!["x", "w", "r"];
    if let Some(l) = lens {
        m.init(
            "lens",
            Tensor::I32(ndarray::ArrayD::from_elem(vec![1], l as i32)),
        );
        ins.extend(["", "lens"]);
    }
    m.node("lstm", "LSTM", &ins, &["y"], attrs);
    let g =
        import_graph(&m.bytes(), "lstm.onnx", DEFAULT_MEMORY_BUDGET).map_err(|e| e.to_string())?;
    g.run_outputs(&[Tensor::F32(sample(&[4, 1, 3], 5, 1.0))])
}

#[test]
fn refused_attributes_and_inputs_say_what_and_how() {
    let ok = [1, 8, 3];
    assert!(lstm(vec![], &ok, None).is_ok());
    for (attrs, w, lens, want) in [
        (
            vec![("direction", A::S("sideways"))],
            &ok,
            None,
            "attribute 'direction' is 'sideways'; it must be forward, reverse or bidirectional",
        ),
        (
            vec![("activations", A::Ss(vec!["Sigmoid", "Swish", "Tanh"]))],
            &ok,
            None,
            "activation function 'swish' is not one of ONNX's",
        ),
        (
            vec![("activations", A::Ss(vec!["Sigmoid"]))],
            &ok,
            None,
            "attribute 'activations' names 1 functions; LSTM with 1 direction(s) takes 3",
        ),
        (
            vec![("hidden_size", A::I(3))],
            &ok,
            None,
            "hidden_size is 3 but R's shape",
        ),
        (
            vec![],
            &[1, 6, 3],
            None,
            "W has shape [1, 6, 3], expected [1, 8, 3]",
        ),
        (
            vec![("layout", A::I(2))],
            &ok,
            None,
            "attribute 'layout' must be 0 or 1",
        ),
        (
            vec![],
            &ok,
            Some(0),
            "sequence_lens value 0 is not in 1..=4",
        ),
    ] {
        let err = lstm(attrs, w, lens).unwrap_err();
        assert!(err.contains(want), "{err}");
    }
}
