//! Models quantized by onnxruntime's `quantize_dynamic` (`tests/data/make_dynquant.py`): a
//! small MLP (DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul by the scales -> Add) and
//! a small CNN (the same around ConvInteger, then GlobalAveragePool and a MatMulInteger)
//! compile, run, and agree with onnxruntime's outputs.
//! (Their weights are full-range int8: onnxruntime's uint8 x int8 kernels on AVX2 CPUs
//! without VNNI add pairs of products in saturating int16, which these inputs do not reach,
//! as the bit-identical MLP shows; see `tests/data/rnn/make_rnn_cases.py`.)

use std::path::{Path, PathBuf};

use compiler::compile::Compiled;
use compiler::frontend::{npy_to_f32, FrontendOptions};
use compiler::graph::{Support, Tensor};
use ndarray::{ArrayD, Axis};
use vta_runtime::model::Model;
use vta_sim::FsimDevice;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/dynq")
}

fn npy(name: &str) -> ArrayD<f32> {
    npy_to_f32(&isa::npy::read_file(&data().join(name)).unwrap()).unwrap()
}

fn compile(model: &str) -> Compiled {
    let file = format!("{model}_dyn.onnx");
    let bytes = std::fs::read(data().join(&file)).unwrap();
    Compiled::compile(
        bytes,
        &file,
        &[],
        &isa::HwConfig::default(),
        &FrontendOptions::default(),
    )
    .unwrap()
}

/// The largest difference from onnxruntime over the stored inputs, relative to the largest
/// magnitude of onnxruntime's outputs.
fn worst_relative(model: &str) -> f32 {
    let c = compile(model);
    let m = Model::from_bytes(&c.to_bytes().unwrap(), model).unwrap();
    let mut dev = FsimDevice::new(&m.config);
    let want = npy(&format!("{model}_dyn_ort.npy"));
    let top = want.iter().fold(0f32, |a, v| a.max(v.abs()));
    let mut worst = 0f32;
    for (x, y) in npy(&format!("{model}_inputs.npy"))
        .axis_iter(Axis(0))
        .zip(want.axis_iter(Axis(0)))
    {
        let r = m.run(&mut dev, &[Tensor::F32(x.to_owned())]).unwrap();
        let got = r.outputs[0].as_f32().unwrap();
        assert_eq!(got.shape(), y.shape(), "{model}");
        for (a, b) in got.iter().zip(y.iter()) {
            worst = worst.max((a - b).abs() / top);
        }
    }
    worst
}

#[test]
fn dynamically_quantized_mlp_matches_onnxruntime_exactly() {
    // Every step is exact integer arithmetic (DynamicQuantizeLinear, MatMulInteger) or one f32
    // operation per element in onnxruntime's order (Cast, Mul by the product of the two
    // scales, Add of the bias, Relu): bit-identical outputs.
    assert_eq!(worst_relative("mlp"), 0.0);
}

#[test]
fn dynamically_quantized_cnn_matches_onnxruntime() {
    // The convolutions' integer results are exact; GlobalAveragePool sums in float in its
    // own order, so the outputs agree to float rounding (measured: 1.7e-7 of the largest).
    let w = worst_relative("cnn");
    println!("cnn: largest difference {w:e} of the largest output");
    assert!(w <= 1e-6, "{w}");
}

#[test]
fn integer_gemms_run_on_the_cpu_and_say_why() {
    for model in ["mlp", "cnn"] {
        let c = compile(model);
        let report = c.compile_report();
        for e in &c.support.entries {
            // The Muls by the scales too.
            if matches!(
                e.op_type.as_str(),
                "ConvInteger" | "MatMulInteger" | "DynamicQuantizeLinear" | "Mul"
            ) {
                let Support::Cpu { reason, .. } = &e.support else {
                    panic!("{model}: {} is not on the CPU:\n{report}", e.node);
                };
                assert!(
                    reason.contains("per inference") || reason.contains("per-inference"),
                    "{model}: {reason}"
                );
            }
        }
    }
}
