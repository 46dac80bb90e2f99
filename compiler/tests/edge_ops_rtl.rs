//! The element-wise ALU layers of edge CNNs (LeakyRelu, squeeze-and-excite Mul, HardSigmoid,
//! nearest upsampling, channel Concat and Split) on the cycle-accurate RTL simulator: every
//! step gives the same bytes as on the functional simulator and matches the integer reference.

mod onnx_builder;

use std::path::PathBuf;

use compiler::compile::Compiled;
use compiler::frontend::FrontendOptions;
use compiler::graph::Tensor;
use onnx_builder::{sample, Model, A};
use vta_sim::rtl::{RtlDevice, RtlOptions};
use vta_sim::FsimDevice;

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

#[test]
fn edge_alu_layers_on_rtl_match_fsim_and_the_reference() {
    let mut m = Model::new(17);
    m.input("x", &[1, 16, 8, 8])
        .weight("w1", &[32, 16, 3, 3], 0.3)
        .node(
            "conv1",
            "Conv",
            &["x", "w1"],
            &["c"],
            vec![("pads", A::Is(vec![1; 4]))],
        )
        .node(
            "lrelu",
            "LeakyRelu",
            &["c"],
            &["a"],
            vec![("alpha", A::F(0.1))],
        )
        .node("gap", "GlobalAveragePool", &["a"], &["g"], vec![])
        .node("se", "Mul", &["a", "g"], &["b"], vec![])
        .node("hsig", "HardSigmoid", &["b"], &["h"], vec![])
        .values("roi", &[0], &[])
        .values("scales", &[4], &[1.0, 1.0, 2.0, 2.0])
        .node(
            "up",
            "Resize",
            &["h", "roi", "scales"],
            &["u"],
            vec![("mode", A::S("nearest"))],
        )
        .node(
            "pool",
            "MaxPool",
            &["u"],
            &["d"],
            vec![
                ("kernel_shape", A::Is(vec![2, 2])),
                ("strides", A::Is(vec![2, 2])),
            ],
        )
        .node(
            "cat",
            "Concat",
            &["d", "a"],
            &["k"],
            vec![("axis", A::I(1))],
        )
        .node(
            "split",
            "Split",
            &["k"],
            &["s1", "s2"],
            vec![("axis", A::I(1))],
        )
        .node("add", "Add", &["s1", "s2"], &["e"], vec![])
        .weight("w2", &[16, 32, 1, 1], 0.3)
        .node("conv2", "Conv", &["e", "w2"], &["y"], vec![])
        .output("y");
    let cfg = isa::HwConfig::preset("default").unwrap();
    let x = sample(&[1, 16, 8, 8], 3, 2.0);
    let c = Compiled::compile(
        m.bytes(),
        "edge.onnx",
        std::slice::from_ref(&x),
        &cfg,
        &FrontendOptions::default(),
    )
    .unwrap();
    let kinds: Vec<&str> = c
        .steps
        .iter()
        .filter(|s| !s.is_refused())
        .map(|s| s.kind.as_str())
        .collect();
    for k in [
        "QLeakyRelu",
        "QBinary",
        "QAffine",
        "QUpsample",
        "QConcat",
        "QSlice",
    ] {
        assert!(kinds.contains(&k), "{k} not on the accelerator: {kinds:?}");
    }
    let inputs = [Tensor::F32(x)];
    let want = c
        .run(&mut FsimDevice::checking_races(&cfg), &inputs)
        .unwrap();
    let got = c.run(&mut rtl(&cfg), &inputs).unwrap();
    assert_eq!(got.backend, "rtl");
    assert_eq!(
        want.values, got.values,
        "a step differs between fsim and rtl"
    );
    assert!(c.check(&inputs, &got).unwrap().is_exact());
    eprintln!("{}", got.table());
}
