//! A CNN + bidirectional LSTM + CTC-style captcha OCR (`tests/data/ocr/make_ocr.py`: three
//! conv/ReLU/MaxPool stages, a reshape to a time-major sequence, an LSTM whose zero initial
//! states come from a Shape -> ConstantOfShape subgraph as PyTorch exports them, a dense
//! layer and a Softmax over the classes per step) compiles from the float model with
//! post-training quantization: the convolutions on the accelerator, the LSTM on the CPU in
//! float; the run is bit-exact against the integer reference and the per-step probabilities
//! agree with onnxruntime's float model to within the quantization error (a step's class
//! differs only where onnxruntime's two best classes are that close). The same model
//! quantized by onnxruntime's `quantize_dynamic` (DynamicQuantizeLinear, ConvInteger,
//! DynamicQuantizeLSTM, MatMulInteger) compiles and agrees with onnxruntime to float rounding.

use std::path::{Path, PathBuf};

use compiler::compile::Compiled;
use compiler::frontend::{load_calibration_npy, npy_to_f32, FrontendOptions};
use compiler::graph::{Support, Tensor};
use ndarray::{ArrayD, Axis};
use vta_sim::FsimDevice;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ocr")
}

fn npy(name: &str) -> ArrayD<f32> {
    npy_to_f32(&isa::npy::read_file(&data().join(name)).unwrap()).unwrap()
}

fn compile() -> Compiled {
    let calib = load_calibration_npy(&[&data().join("ocr_calib.npy")]).unwrap();
    let bytes = std::fs::read(data().join("ocr_lstm.onnx")).unwrap();
    Compiled::compile(
        bytes,
        "ocr_lstm.onnx",
        &calib,
        &isa::HwConfig::default(),
        &FrontendOptions::default(),
    )
    .unwrap()
}

/// The best class of every step (CTC greedy decoding reads these).
fn path(p: ndarray::ArrayViewD<f32>) -> Vec<usize> {
    p.axis_iter(Axis(0))
        .map(|s| {
            s.iter()
                .enumerate()
                .fold((0, f32::MIN), |b, (i, &v)| if v > b.1 { (i, v) } else { b })
                .0
        })
        .collect()
}

#[test]
fn convolutions_run_on_the_accelerator_and_the_lstm_on_the_cpu() {
    let c = compile();
    let report = c.compile_report();
    for e in &c.support.entries {
        let accel = matches!(e.support, Support::Accel { .. });
        match e.op_type.as_str() {
            "Conv" | "MaxPool" => assert!(accel, "{}:\n{report}", e.node),
            "LSTM" => assert!(
                matches!(&e.support, Support::Cpu { reason, .. } if reason.contains("float")),
                "{report}"
            ),
            // The zero initial states are folded to constants.
            "ConstantOfShape" | "Shape" => {
                assert!(matches!(e.support, Support::Removed { .. }), "{report}")
            }
            _ => {}
        }
    }
}

#[test]
fn runs_bit_exact_and_agree_with_onnxruntime() {
    let c = compile();
    let mut dev = FsimDevice::checking_races(&c.model.config);
    let want = npy("ocr_ort.npy");
    let (mut worst, mut same, mut steps, mut tie) = (0f32, 0, 0, 0f32);
    for (x, y) in npy("ocr_test.npy")
        .axis_iter(Axis(0))
        .zip(want.axis_iter(Axis(0)))
    {
        let inputs = [Tensor::F32(x.to_owned().insert_axis(Axis(0)))];
        let r = c.model.run(&mut dev, &inputs).unwrap();
        let check = c.model.check(&inputs, &r).unwrap();
        assert!(check.is_exact(), "{check}");
        let got = r.outputs[0].as_f32().unwrap();
        assert_eq!(got.shape(), y.shape());
        for (a, b) in got.iter().zip(y.iter()) {
            worst = worst.max((a - b).abs());
        }
        let (p, q) = (path(got.view()), path(y.view()));
        for (t, (&a, &b)) in p.iter().zip(&q).enumerate() {
            steps += 1;
            if a == b {
                same += 1;
            } else {
                // How close onnxruntime's probabilities of the two classes are.
                tie = tie.max(y[[t, 0, b]] - y[[t, 0, a]]);
            }
        }
    }
    println!(
        "largest probability difference {worst}, {same} of {steps} steps' classes equal, \
         the others within {tie} in onnxruntime's probabilities"
    );
    // Measured: 0.0086; 88 of 96 classes equal, the others where onnxruntime's two classes
    // are within 0.013 of each other (the random weights leave near-ties).
    assert!(worst < 0.02, "{worst}");
    assert!(tie <= 2.0 * worst, "{tie}");
    assert!(same * 10 >= steps * 9, "{same} of {steps}");
}

#[test]
fn dynamically_quantized_ocr_compiles_and_agrees_with_onnxruntime() {
    // onnxruntime's quantize_dynamic of the same model: DynamicQuantizeLinear before every
    // ConvInteger and the MatMulInteger, com.microsoft.DynamicQuantizeLSTM; all of it on the
    // CPU, the integer products exact.
    let bytes = std::fs::read(data().join("ocr_lstm_dyn.onnx")).unwrap();
    let c = Compiled::compile(
        bytes,
        "ocr_lstm_dyn.onnx",
        &[],
        &isa::HwConfig::default(),
        &FrontendOptions::default(),
    )
    .unwrap();
    let report = c.compile_report();
    let per_inference =
        |s: &Support| matches!(s, Support::Cpu { reason, .. } if reason.contains("per inference"));
    for op in ["DynamicQuantizeLSTM", "ConvInteger", "MatMulInteger"] {
        assert!(
            c.support
                .entries
                .iter()
                .any(|e| e.op_type == op && per_inference(&e.support)),
            "{op}:\n{report}"
        );
    }
    let mut dev = FsimDevice::new(&c.model.config);
    let want = npy("ocr_dyn_ort.npy");
    let mut worst = 0f32;
    for (x, y) in npy("ocr_test.npy")
        .axis_iter(Axis(0))
        .zip(want.axis_iter(Axis(0)))
    {
        let r = c
            .model
            .run(&mut dev, &[Tensor::F32(x.to_owned().insert_axis(Axis(0)))])
            .unwrap();
        let got = r.outputs[0].as_f32().unwrap();
        assert_eq!(got.shape(), y.shape());
        for (a, b) in got.iter().zip(y.iter()) {
            worst = worst.max((a - b).abs());
        }
        assert_eq!(path(got.view()), path(y.view()));
    }
    println!("dynamically quantized: largest probability difference {worst}");
    // Measured: 4.5e-8 (the float gates and scalings in another order than onnxruntime's).
    assert!(worst < 1e-6, "{worst}");
}
