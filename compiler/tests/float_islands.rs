//! Float islands of quantized models: the digits CNN quantized by onnxruntime with only its
//! convolutions quantized (`tests/data/islands/make_islands.py`), so that its batch norms,
//! Relus and MaxPool stay in float between DequantizeLinear and QuantizeLinear. Where the
//! rewrite is exact they run on the accelerator on int8 data; the runs are bit-exact against
//! the integer reference and agree with onnxruntime.

use std::path::{Path, PathBuf};

use compiler::compile::Compiled;
use compiler::frontend::{npy_to_f32, FrontendOptions};
use compiler::graph::{Support, Tensor};
use ndarray::{ArrayD, Axis};
use vta_sim::FsimDevice;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/islands")
}

fn npy(name: &str) -> ArrayD<f32> {
    npy_to_f32(&isa::npy::read_file(&data().join(name)).unwrap()).unwrap()
}

fn compile(form: &str) -> Compiled {
    let file = format!("conv_only_{form}.onnx");
    let bytes = std::fs::read(data().join(&file)).unwrap();
    let opts = FrontendOptions::default();
    Compiled::compile(bytes, &file, &[], &isa::HwConfig::default(), &opts).unwrap()
}

fn status<'a>(c: &'a Compiled, node: &str) -> &'a Support {
    &c.support
        .entries
        .iter()
        .find(|e| e.node == node)
        .unwrap_or_else(|| panic!("no node {node} in\n{}", c.support))
        .support
}

fn on_accelerator(c: &Compiled, node: &str) -> bool {
    matches!(status(c, node), Support::Accel { .. })
}

#[test]
fn exact_float_operators_between_quantizations_run_on_the_accelerator() {
    for form in ["qdq", "qop"] {
        let c = compile(form);
        // DequantizeLinear -> BatchNormalization -> Relu -> QuantizeLinear: the batch norm
        // meets the quantization of its Relu (moved before the Relu), so it becomes one
        // affine layer with the Relu as its clamp.
        assert!(
            on_accelerator(&c, "/b2/BatchNormalization"),
            "{form}\n{}",
            c.support
        );
        // A Relu after a DequantizeLinear whose output nothing quantizes keeps its input's
        // parameters.
        let relu3 = status(&c, "/Relu_3");
        assert!(
            matches!(relu3, Support::Accel { .. } | Support::Fused { .. }),
            "{form}: {relu3:?}"
        );
        assert!(
            c.support
                .entries
                .iter()
                .any(|e| e.node.ends_with("/island_quantize")),
            "{form}: the inserted quantizations are listed\n{}",
            c.support
        );
        // The residual Add reads a float MaxPool output that is also quantized: moving that
        // quantization before the MaxPool would change the Add's input, so it stays float.
        assert!(!on_accelerator(&c, "/Add"), "{form}");
    }
    // In QDQ form the first block's MaxPool output is read through its quantization only.
    let qdq = compile("qdq");
    for node in ["/b1/BatchNormalization", "/MaxPool"] {
        assert!(on_accelerator(&qdq, node), "{node}\n{}", qdq.support);
    }
}

#[test]
fn runs_are_bit_exact_and_agree_with_onnxruntime() {
    let inputs = npy("inputs.npy");
    for form in ["qdq", "qop"] {
        let c = compile(form);
        let m = &c.model;
        let theirs = npy(&format!("conv_only_{form}_ort.npy"));
        let mut dev = FsimDevice::checking_races(&m.config);
        for (k, x) in inputs.axis_iter(Axis(0)).enumerate() {
            let x = [Tensor::F32(x.to_owned().insert_axis(Axis(0)).into_dyn())];
            let r = m.run(&mut dev, &x).unwrap();
            let check = m.check(&x, &r).unwrap();
            assert!(check.is_exact(), "{form} sample {k}: {check}");
            let ours = r.outputs[0].as_f32().unwrap();
            let want = theirs.index_axis(Axis(0), k);
            let diff = ours
                .iter()
                .zip(want.iter())
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            // Softmax probabilities of logits within the 1-LSB contract of onnxruntime's.
            assert!(diff < 0.02, "{form} sample {k}: {diff}");
        }
    }
}
