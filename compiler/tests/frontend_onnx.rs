//! ONNX loading: the protobuf decoder on real files and on bad bytes, and ONNX's own
//! quantized-operator test cases (Debian `libonnx-testdata`), which the executor must
//! reproduce exactly, both as a graph and as a lowered plan.

use std::path::{Path, PathBuf};

use compiler::frontend::{FrontendError, FrontendOptions, RequantFidelity};
use compiler::graph::{passes, DType, Step, Tensor};
use compiler::onnx::import::import;
use compiler::onnx::proto::{GraphProto, ModelProto, NodeProto, OperatorSetIdProto};
use compiler::onnx::{decode_model, load_model, load_tensor_pb};
use compiler::quant::plan_graph;
use compiler::reference::run_plan;
use prost::Message;
use vta_runtime::budget::DEFAULT_MEMORY_BUDGET;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

const CASES: [&str; 11] = [
    "test_qlinearconv",
    "test_qlinearmatmul_2D",
    "test_qlinearmatmul_3D",
    "test_convinteger_with_padding",
    "test_convinteger_without_padding",
    "test_basic_convinteger",
    "test_matmulinteger",
    "test_quantizelinear",
    "test_quantizelinear_axis",
    "test_dequantizelinear",
    "test_dequantizelinear_axis",
];

/// The model, inputs and expected output of one ONNX test case.
fn case(name: &str) -> (compiler::graph::Graph, Vec<(String, Tensor)>, Tensor) {
    let dir = data().join("onnx-testdata").join(name);
    let path = dir.join("model.onnx");
    let model = load_model(&path).unwrap();
    let g = import(
        &model,
        &path.display().to_string(),
        DEFAULT_MEMORY_BUDGET,
        &[],
    )
    .unwrap();
    let mut inputs = Vec::new();
    for i in 0.. {
        let p = dir.join(format!("test_data_set_0/input_{i}.pb"));
        if !p.exists() {
            break;
        }
        inputs.push(load_tensor_pb(&p).unwrap());
    }
    let (_, out) = load_tensor_pb(&dir.join("test_data_set_0/output_0.pb")).unwrap();
    (g, inputs, out)
}

#[test]
fn onnx_test_cases_run_exactly_as_graphs() {
    for name in CASES {
        let (g, inputs, want) = case(name);
        let ins: Vec<Tensor> = inputs.into_iter().map(|(_, t)| t).collect();
        let got = g.run_outputs(&ins).unwrap();
        assert_eq!(got[0], want, "{name}");
    }
}

/// The same cases lowered to plans: the first input stays a model input, the others (scales,
/// zero points, weights) become constants, as in a deployed model. In bit-exact mode every
/// layer that is not provably bit-identical runs on the CPU with ONNX semantics, so the plan
/// reproduces the expected output exactly; in the default mode offloaded layers are within 1.
#[test]
fn onnx_test_cases_run_exactly_as_plans() {
    let cfg = isa::HwConfig::preset("default").unwrap();
    for name in CASES {
        for fidelity in [RequantFidelity::BitExact, RequantFidelity::WithinOneLsb] {
            let (mut g, inputs, want) = case(name);
            for (n, t) in &inputs[1..] {
                g.freeze_input(n, t.clone()).unwrap();
            }
            passes::simplify(&mut g);
            let opts = FrontendOptions {
                fidelity,
                ..Default::default()
            };
            let (plan, table) = plan_graph(&g, &[], &cfg, &opts).unwrap();
            assert_eq!(table.unsupported().count(), 0, "{name}:\n{table}");
            let trace = run_plan(&plan, &[inputs[0].1.clone()]).unwrap();
            let got = &trace.outputs(&plan)[0];
            assert_eq!(got.dtype(), want.dtype(), "{name}");
            if fidelity == RequantFidelity::BitExact {
                assert_eq!(got, &want, "{name} (bit-exact mode)\n{plan}\n{table}");
            } else {
                // These cases use uint8 weights far from their zero point, a 3-D right operand
                // (a batch of matrices, not one weight matrix) or int32 outputs: every one
                // runs on the CPU, and the table says why.
                assert!(plan.steps.iter().all(|s: &Step| !s.is_accel()), "{name}");
                let why = match name {
                    "test_qlinearconv" | "test_qlinearmatmul_2D" => "do not fit int8",
                    "test_qlinearmatmul_3D" => "b is not a 2-D matrix",
                    n if n.contains("integer") => "int32 accumulators",
                    _ => "",
                };
                assert!(table.to_string().contains(why), "{name}: {table}");
                let d = got
                    .to_f64_vec()
                    .iter()
                    .zip(want.to_f64_vec())
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f64::max);
                assert!(d <= 1.0, "{name}: max difference {d}\n{table}");
            }
        }
    }
}

#[test]
fn real_models_decode() {
    for m in ["tiny_cnn.onnx", "tiny_cnn_qdq.onnx", "tiny_cnn_qop.onnx"] {
        let model = load_model(&data().join(m)).unwrap();
        assert!(model.graph.as_ref().unwrap().node.len() > 5, "{m}");
        assert_eq!(compiler::onnx::default_opset(&model), Some(13));
    }
    let (_, t) =
        load_tensor_pb(&data().join("onnx-testdata/test_qlinearconv/test_data_set_0/input_0.pb"))
            .unwrap();
    assert_eq!(t.dtype(), DType::U8);
    assert_eq!(t.shape(), &[1, 1, 7, 7]);
}

#[test]
fn bad_files_are_errors_not_panics() {
    let bytes = std::fs::read(data().join("tiny_cnn.onnx")).unwrap();
    // Every truncation of a real model, and a few corruptions.
    for n in (0..bytes.len()).step_by(7) {
        let r = decode_model(&bytes[..n], "cut.onnx");
        if let Err(e) = &r {
            assert!(e.to_string().starts_with("cut.onnx: "), "{e}");
        } else {
            // A prefix that happens to be a valid model must still import or fail cleanly.
            let _ = import(&r.unwrap(), "cut.onnx", DEFAULT_MEMORY_BUDGET, &[]);
        }
    }
    let mut state = 0x1234_5678u32;
    for round in 0..300 {
        let mut b = bytes.clone();
        for _ in 0..1 + round % 8 {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let i = (state as usize >> 8) % b.len();
            b[i] = (state >> 24) as u8;
        }
        if let Ok(m) = decode_model(&b, "x.onnx") {
            if let Ok(mut g) = import(&m, "x.onnx", DEFAULT_MEMORY_BUDGET, &[]) {
                passes::simplify(&mut g);
            }
        }
    }
    // Random garbage.
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let e = decode_model(&garbage, "garbage.bin").unwrap_err();
    assert!(e.to_string().contains("not an ONNX model"), "{e}");
    assert!(decode_model(&[], "empty.onnx")
        .unwrap_err()
        .to_string()
        .contains("empty"));
    // A missing file names the file.
    let e = load_model(Path::new("/nonexistent/model.onnx")).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/model.onnx"), "{e}");
}

fn model_with(nodes: Vec<NodeProto>, opset: i64) -> Vec<u8> {
    ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: opset,
        }],
        graph: Some(GraphProto {
            node: nodes,
            name: "g".into(),
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

#[test]
fn structural_errors_name_the_problem() {
    let e = decode_model(&model_with(vec![], 3), "old.onnx").unwrap_err();
    assert!(e.to_string().contains("unsupported opset"), "{e}");
    assert!(e.to_string().contains("old.onnx"), "{e}");
    let relu = NodeProto {
        op_type: "Relu".into(),
        name: "r".into(),
        input: vec!["w".into()],
        output: vec!["y".into()],
        ..Default::default()
    };
    let m = decode_model(&model_with(vec![relu], 13), "m.onnx").unwrap();
    let e = import(&m, "m.onnx", DEFAULT_MEMORY_BUDGET, &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("missing initializer"), "{e}");
    assert!(e.starts_with("m.onnx: "), "{e}");
    // An unknown op: the error carries the support table.
    let mut m2 = m.clone();
    let g = m2.graph.as_mut().unwrap();
    g.node[0].op_type = "FancyOp".into();
    g.input.push(compiler::onnx::proto::ValueInfoProto {
        name: "w".into(),
        r#type: Some(compiler::onnx::proto::TypeProto {
            tensor_type: Some(compiler::onnx::proto::TypeProtoTensor {
                elem_type: 1,
                shape: Some(compiler::onnx::proto::TensorShapeProto { dim: vec![] }),
            }),
            denotation: String::new(),
        }),
        doc_string: String::new(),
    });
    match import(&m2, "m.onnx", DEFAULT_MEMORY_BUDGET, &[]) {
        Err(FrontendError::Unsupported { table, count, .. }) => {
            assert_eq!(count, 1);
            assert!(
                table.to_string().contains("FancyOp is not supported"),
                "{table}"
            );
        }
        other => panic!("{other:?}"),
    }
}
