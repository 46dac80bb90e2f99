//! ONNX's own quantized-operator test cases (`tests/data/onnx-testdata`, from Debian's
//! `libonnx-testdata`) compiled as models, written to and read from the compiled-model file,
//! and run with the runtime on the functional simulator device: every output must equal
//! ONNX's expected output exactly.
//!
//! Compiled as they are, every input of these one-node models (scales, zero points and weights
//! included) is a run-time input, so every node runs on the CPU fallback with ONNX's exact
//! integer semantics, and the support table says why (non-constant quantization parameters or
//! weights, int32 outputs).

use std::path::{Path, PathBuf};

use compiler::compile::Compiled;
use compiler::frontend::FrontendOptions;
use compiler::graph::Support;
use compiler::onnx::load_tensor_pb;
use vta_runtime::model::{Model, Place};
use vta_sim::FsimDevice;

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

fn dir(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/onnx-testdata")
        .join(case)
}

#[test]
fn onnx_quantized_operator_cases_run_exactly() {
    let cfg = isa::HwConfig::preset("default").unwrap();
    for case in CASES {
        let d = dir(case);
        let onnx = std::fs::read(d.join("model.onnx")).unwrap();
        let compiled =
            Compiled::compile(onnx, case, &[], &cfg, &FrontendOptions::default()).unwrap();
        let m = Model::from_bytes(&compiled.to_bytes().unwrap(), case).unwrap();
        let mut inputs = Vec::new();
        for i in 0.. {
            let p = d.join(format!("test_data_set_0/input_{i}.pb"));
            if !p.exists() {
                break;
            }
            inputs.push(load_tensor_pb(&p).unwrap().1);
        }
        let (_, want) = load_tensor_pb(&d.join("test_data_set_0/output_0.pb")).unwrap();
        let mut dev = FsimDevice::checking_races(&cfg);
        let r = m.run(&mut dev, &inputs).unwrap();
        assert_eq!(r.outputs[0], want, "{case}");
        assert!(r.layers.iter().all(|l| l.place == Place::Cpu), "{case}");
        let table = compiled.support.to_string();
        assert_eq!(compiled.support.entries.len(), 1, "{case}: {table}");
        let Support::Cpu { reason, .. } = &compiled.support.entries[0].support else {
            panic!("{case}: {table}")
        };
        let why = if case.contains("integer") {
            "int32 accumulators"
        } else {
            "not a constant"
        };
        assert!(reason.contains(why), "{case}: {reason}");
    }
}
