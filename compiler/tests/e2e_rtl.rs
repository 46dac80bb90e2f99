//! The trained tiny CNN, and imported 4-bit models, on the cycle-accurate RTL simulator
//! (`vta_sim::rtl::RtlDevice`): every accelerator layer of every input gives the same bytes as
//! on the functional simulator and matches the integer reference (bit-sliced layers
//! included), and each layer reports its cycle count.

use std::path::{Path, PathBuf};

use compiler::compile::Compiled;
use compiler::frontend::{load_calibration_npy, npy_to_f32, FrontendOptions};
use compiler::graph::Tensor;
use ndarray::{Axis, IxDyn};
use vta_runtime::resident::LoadOptions;
use vta_sim::rtl::{RtlDevice, RtlOptions};
use vta_sim::FsimDevice;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn images(n: usize) -> Vec<Tensor> {
    let a = npy_to_f32(&isa::npy::read_file(&data().join("digits_test.npy")).unwrap()).unwrap();
    a.axis_iter(Axis(0))
        .take(n)
        .map(|x| {
            Tensor::F32(
                x.to_owned()
                    .into_shape_with_order(IxDyn(&[1, 1, 8, 8]))
                    .unwrap(),
            )
        })
        .collect()
}

fn compile(cfg: &isa::HwConfig) -> Compiled {
    let calib = load_calibration_npy(&[&data().join("digits_calib.npy")]).unwrap();
    let bytes = std::fs::read(data().join("tiny_cnn.onnx")).unwrap();
    Compiled::compile(
        bytes,
        "tiny_cnn.onnx",
        &calib,
        cfg,
        &FrontendOptions::default(),
    )
    .unwrap()
}

/// The model cache shared with vta-hw's tests (`$VTA_HDL_CACHE` overrides it).
fn rtl(cfg: &isa::HwConfig) -> RtlDevice {
    let cache = std::env::var_os("VTA_HDL_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("vta-hw-models"));
    let opts = RtlOptions {
        cache_dir: Some(cache),
        ..RtlOptions::default()
    };
    RtlDevice::with_options(cfg, &opts, &mut |s| eprintln!("[rtl model] {s}")).unwrap()
}

fn on_rtl(preset: &str, digits: usize) {
    let cfg = isa::HwConfig::load(preset).unwrap();
    let m = compile(&cfg);
    let mut fsim = FsimDevice::checking_races(&cfg);
    let mut dev = rtl(&cfg);
    let mut wanted = Vec::new();
    for (i, x) in images(digits).into_iter().enumerate() {
        let inputs = [x];
        let want = m.run(&mut fsim, &inputs).unwrap();
        let got = m.run(&mut dev, &inputs).unwrap();
        assert_eq!(got.backend, "rtl");
        for (a, b) in want.values.iter().zip(&got.values) {
            assert_eq!(
                a, b,
                "{preset} digit {i}: a layer differs between fsim and rtl"
            );
        }
        let c = m.check(&inputs, &got).unwrap();
        assert!(c.is_exact(), "{preset} digit {i}: {c}");
        for l in &got.launches {
            let cycles = l.get("cycles").unwrap_or(0);
            assert!(
                cycles > 0,
                "{preset}: launch {} has no cycle count",
                l.launch
            );
        }
        if i == 0 {
            eprintln!("{preset}:\n{}", got.table());
            assert!(got.table().contains(" cycles"), "{}", got.table());
        }
        wanted.push((inputs, want.outputs));
    }
    // Loaded once, the model runs every digit with its weights and programs resident and
    // its activations placed by liveness: the same outputs.
    let mut resident = m.load(&mut dev, LoadOptions::default()).unwrap();
    for (inputs, want) in &wanted {
        assert_eq!(&resident.run(inputs).unwrap().outputs, want, "{preset}");
    }
}

#[test]
fn tiny_cnn_on_rtl_default() {
    on_rtl("default", 10);
}

#[test]
fn tiny_cnn_on_rtl_batched() {
    on_rtl("batched", 3);
}

/// Post-training quantized to 4-bit inputs and weights: the convolutions and the dense layer
/// on the 4-bit core, identical on fsim and rtl, device-resident too. The first convolution
/// and the dense layer keep 8-bit weights and run bit-sliced (three passes of 4-bit weight
/// digits each).
#[test]
fn tiny_cnn_on_rtl_i4w4() {
    let report = compile(&isa::HwConfig::load("i4w4").unwrap()).compile_report();
    assert_eq!(
        report
            .matches("bit-sliced: 3 passes of 4-bit weight digits")
            .count(),
        2,
        "{report}"
    );
    on_rtl("i4w4", 3);
}

/// Imported 4-bit models (`scripts/lowbit-models.py`: onnxruntime int4 QDQ with uint4
/// activations held centred in the lanes, a Brevitas-style QCDQ whose 8-bit logits the dense
/// layer stores as two planes of 4-bit digits) on the 4-bit core: the same bytes on rtl as on
/// fsim, and bit-exact against the integer reference.
#[test]
fn imported_low_bit_models_on_rtl_i4w4() {
    let cfg = isa::HwConfig::load("i4w4").unwrap();
    let dir = data().join("lowbit");
    let x = npy_to_f32(&isa::npy::read_file(&dir.join("inputs.npy")).unwrap()).unwrap();
    let mut fsim = FsimDevice::checking_races(&cfg);
    let mut dev = rtl(&cfg);
    for model in ["ort_w4a4u", "qcdq_w4a4"] {
        let file = format!("{model}.onnx");
        let bytes = std::fs::read(dir.join(&file)).unwrap();
        let m = Compiled::compile(bytes, &file, &[], &cfg, &FrontendOptions::default()).unwrap();
        assert_eq!(m.counts().0, 3, "{model}: {}", m.compile_report());
        let mut wanted = Vec::new();
        for (i, x) in x.axis_iter(Axis(0)).take(3).enumerate() {
            let inputs = [Tensor::F32(x.to_owned().insert_axis(Axis(0)).into_dyn())];
            let want = m.run(&mut fsim, &inputs).unwrap();
            let got = m.run(&mut dev, &inputs).unwrap();
            assert_eq!(got.backend, "rtl");
            assert_eq!(want.values, got.values, "{model} input {i}");
            let c = m.check(&inputs, &got).unwrap();
            assert!(c.is_exact(), "{model} input {i}: {c}");
            wanted.push((inputs, want.outputs));
        }
        // Device-resident (activations placed by liveness, digit planes read back the same).
        let mut resident = m.load(&mut dev, LoadOptions::default()).unwrap();
        for (inputs, want) in &wanted {
            assert_eq!(&resident.run(inputs).unwrap().outputs, want, "{model}");
        }
    }
}
