//! End to end on ResNet-18 from `compiler::zoo` (torchvision's architecture, deterministic
//! weights): compile the float model (calibrated on one pseudo-random input), write and read
//! the compiled-model file, run it on the functional simulator and compare every layer with
//! the integer reference executor.
//!
//! The test runs at 64x64 input: the same architecture, layers and layer count as 224x224
//! (20 convolutions, 8 residual adds, max pool, global pool, fc), with 4x4 to 32x32 feature
//! maps. At 224x224 the whole test takes about 53 s in the test profile, almost all of it in
//! the integer reference executor's direct convolutions and the float calibration run; the
//! full size is exercised by `cargo bench -p compiler --bench resnet` and the README.

use compiler::backend::Fold;
use compiler::compile::{Compiled, LayerReport};
use compiler::frontend::FrontendOptions;
use compiler::graph::{passes, Tensor};
use compiler::onnx::import::import;
use compiler::zoo::{self, ResNetOptions};
use vta_runtime::budget::DEFAULT_MEMORY_BUDGET;
use vta_runtime::model::{Check, Model, Place};
use vta_sim::FsimDevice;

#[test]
fn resnet18_runs_bit_exact_on_fsim() {
    let size = 64;
    let opts = ResNetOptions {
        size,
        ..Default::default()
    };
    let onnx = zoo::resnet18_bytes(&opts).unwrap();
    let x = zoo::sample_input(&[1, 3, size, size], 1);
    let cfg = isa::HwConfig::preset("default").unwrap();
    let m = Compiled::compile(
        onnx.clone(),
        "resnet18.onnx",
        std::slice::from_ref(&x),
        &cfg,
        &FrontendOptions::default(),
    )
    .unwrap();
    let report = m.compile_report();
    assert_eq!(m.support.unsupported().count(), 0, "{report}");
    let kinds = |k: &str| m.steps.iter().filter(|a| a.kind == k).count();
    assert_eq!(
        (
            kinds("QConv2d"),
            kinds("QAdd"),
            kinds("QMaxPool"),
            kinds("QGlobalAvgPool"),
            kinds("QDense")
        ),
        (20, 8, 1, 1, 1),
        "{report}"
    );
    // Every layer has a program; only the input quantization, the flatten and the output
    // dequantization run on the CPU.
    assert_eq!(m.counts(), (31, 3), "{report}");
    // conv1 (3 input channels) takes the image with its 7x7 window folded into the channels:
    // 10 instead of 49 GEMM micro-ops per output pixel and channel block; no other layer
    // folds.
    let folds: Vec<(String, Option<Fold>)> = m
        .steps
        .iter()
        .filter_map(|a| match &a.report {
            LayerReport::Compiled(_, info) => Some((a.name.clone(), info.fold)),
            LayerReport::Refused(_) => None,
        })
        .filter(|(_, f)| f.is_some())
        .collect();
    assert_eq!(
        folds,
        vec![("/conv1/Conv".to_string(), Some(Fold::Window))],
        "{report}"
    );

    let bytes = m.to_bytes().unwrap();
    let m = Model::from_bytes(&bytes, "resnet18.vtab").unwrap();

    let mut dev = FsimDevice::checking_races(&cfg);
    let inputs = [Tensor::F32(x.clone())];
    let r = m.run(&mut dev, &inputs).unwrap();
    assert_eq!(
        r.layers
            .iter()
            .filter(|l| l.place == Place::Accelerator)
            .count(),
        31
    );
    let c = m.check(&inputs, &r).unwrap();
    // Every layer's output but those of the 8 convolutions whose residual add runs in their
    // epilogue (they write none of their own).
    assert!(
        matches!(
            c,
            Check::BitExact {
                layers: 26,
                accel_layers: 23,
                ..
            }
        ),
        "{c}"
    );

    // The int8 network tracks the float one (untrained weights: the logits are not
    // meaningful as classes, but quantization must not destroy them).
    let mut g = import(
        &compiler::onnx::decode_model(&onnx, "r").unwrap(),
        "r",
        DEFAULT_MEMORY_BUDGET,
        &[],
    )
    .unwrap();
    passes::simplify(&mut g);
    let f = g.run_outputs(&inputs).unwrap();
    let (f, q) = (f[0].as_f32().unwrap(), r.outputs[0].as_f32().unwrap());
    let dot: f32 = f.iter().zip(q).map(|(a, b)| a * b).sum();
    let cos = dot
        / (f.iter().map(|a| a * a).sum::<f32>().sqrt()
            * q.iter().map(|a| a * a).sum::<f32>().sqrt());
    let argmax = |v: &ndarray::ArrayD<f32>| {
        v.iter()
            .enumerate()
            .fold((0, f32::MIN), |b, (i, &x)| if x > b.1 { (i, x) } else { b })
            .0
    };
    println!(
        "ResNet-18 {size}x{size}: cosine(int8 on fsim, fp32) = {cos:.4}, top-1 {} vs {}",
        argmax(q),
        argmax(f)
    );
    // Measured: 0.9997, same top-1.
    assert!(cos > 0.99, "cosine similarity {cos}");
}
