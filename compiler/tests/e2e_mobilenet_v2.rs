//! A whole MobileNetV2 (torchvision's architecture: stem, the 17 inverted residual blocks,
//! the 1280-channel head and the classifier, batch norms folded into the convolutions,
//! deterministic weights) at 64 x 64: compiled from ONNX, run on the functional simulator
//! bit for bit with the integer reference, with its depthwise convolutions on the ALU at
//! their real MAC count (device MACs / real MACs at most 1.3 over the whole network) and,
//! with `depthwise_on_gemm`, on diagonal GEMM tiles (BLOCK_IN times those layers' MACs, fewer
//! cycles); and both ways on the RTL simulator, byte for byte as on the functional one.

mod onnx_builder;

use compiler::backend::roofline::{IssueRates, Work};
use compiler::compile::{BackendOptions, Compiled};
use compiler::frontend::FrontendOptions;
use compiler::graph::Tensor;
use onnx_builder::{sample, Model, A};
use vta_sim::FsimDevice;

/// MobileNetV2 (width 1.0) on a `1 x 3 x size x size` input.
fn mobilenet_v2(size: usize) -> Model {
    let mut m = Model::new(17);
    m.input("x", &[1, 3, size, size])
        .values("six_lo", &[], &[0.0])
        .values("six_hi", &[], &[6.0]);
    let mut k = 0;
    // Conv (+ folded batch norm) [+ ReLU6]; returns the output's name.
    let mut conv = |m: &mut Model,
                    x: &str,
                    c: usize,
                    o: usize,
                    kernel: usize,
                    stride: usize,
                    groups: usize,
                    relu6: bool|
     -> String {
        k += 1;
        let (w, b, y) = (format!("w{k}"), format!("b{k}"), format!("c{k}"));
        let fan_in = (c / groups * kernel * kernel) as f32;
        let p = (kernel / 2) as i64;
        m.weight(&w, &[o, c / groups, kernel, kernel], 1.7 / fan_in.sqrt())
            .weight(&b, &[o], 0.1)
            .node(
                &format!("conv{k}"),
                "Conv",
                &[x, &w, &b],
                &[&y],
                vec![
                    ("group", A::I(groups as i64)),
                    ("pads", A::Is(vec![p; 4])),
                    ("strides", A::Is(vec![stride as i64; 2])),
                ],
            );
        if !relu6 {
            return y;
        }
        let r = format!("r{k}");
        m.node(
            &format!("relu6_{k}"),
            "Clip",
            &[&y, "six_lo", "six_hi"],
            &[&r],
            vec![],
        );
        r
    };
    let mut x = conv(&mut m, "x", 3, 32, 3, 2, 1, true);
    let mut c = 32;
    let settings = [
        (1, 16, 1, 1),
        (6, 24, 2, 2),
        (6, 32, 3, 2),
        (6, 64, 4, 2),
        (6, 96, 3, 1),
        (6, 160, 3, 2),
        (6, 320, 1, 1),
    ];
    let mut adds = 0;
    for (t, o, n, s) in settings {
        for i in 0..n {
            let stride = if i == 0 { s } else { 1 };
            let e = c * t;
            let h = if t == 1 {
                x.clone()
            } else {
                conv(&mut m, &x, c, e, 1, 1, 1, true)
            };
            let d = conv(&mut m, &h, e, e, 3, stride, e, true);
            let p = conv(&mut m, &d, e, o, 1, 1, 1, false);
            x = if stride == 1 && c == o {
                adds += 1;
                let a = format!("add{adds}");
                m.node(&a, "Add", &[&p, &x], &[&a], vec![]);
                a
            } else {
                p
            };
            c = o;
        }
    }
    let head = conv(&mut m, &x, c, 1280, 1, 1, 1, true);
    m.node("pool", "GlobalAveragePool", &[&head], &["g"], vec![])
        .node("flatten", "Flatten", &["g"], &["f"], vec![])
        .weight("wc", &[1000, 1280], 0.05)
        .weight("bc", &[1000], 0.1)
        .node(
            "classifier",
            "Gemm",
            &["f", "wc", "bc"],
            &["y"],
            vec![("transB", A::I(1))],
        )
        .output("y");
    m
}

fn compile(m: &Model, x: &ndarray::ArrayD<f32>, depthwise_on_gemm: bool) -> Compiled {
    let cfg = isa::HwConfig::default();
    Compiled::compile_observed(
        m.bytes(),
        "mobilenet_v2.onnx",
        std::slice::from_ref(x),
        &cfg,
        &FrontendOptions::default(),
        &BackendOptions {
            depthwise_on_gemm,
            ..Default::default()
        },
        &mut |_| {},
    )
    .unwrap()
}

#[test]
fn mobilenet_v2_runs_exactly_with_its_depthwise_convolutions_at_their_real_macs() {
    let model = mobilenet_v2(64);
    let x = sample(&[1, 3, 64, 64], 5, 2.0);
    let cfg = isa::HwConfig::default();
    let mut ratios = Vec::new();
    for on_gemm in [false, true] {
        let c = compile(&model, &x, on_gemm);
        let convs = c.steps.iter().filter(|s| s.kind == "QConv2d").count();
        let refused: Vec<_> = c.steps.iter().filter(|s| s.is_refused()).collect();
        assert!(convs >= 52, "{convs} convolutions:\n{}", c.layer_report());
        assert!(refused.is_empty(), "{}", c.layer_report());
        let (real, device) = c.macs();
        let ratio = device as f64 / real as f64;
        let inputs = [Tensor::F32(x.clone())];
        let run = c
            .run(&mut FsimDevice::checking_races(&cfg), &inputs)
            .unwrap();
        let check = c.check(&inputs, &run).unwrap();
        assert!(check.is_exact(), "on_gemm {on_gemm}: {check:?}");
        // Lower bounds on the cycles from the instruction streams (RTL issue rates).
        let (mut compute, mut memory) = (0, 0);
        for l in &c.launches {
            let w = Work::of(&cfg, &l.program.program);
            compute += w.compute_bound(&cfg, IssueRates::RTL);
            memory += w.memory_bound(&cfg);
        }
        eprintln!(
            "depthwise on {}: real MACs {real}, device MACs {device}, ratio {ratio:.3}; \
             GEMM uops {}, ALU uops {}; compute bound {compute} cycles, memory bound {memory}",
            if on_gemm { "GEMM" } else { "ALU" },
            run.launches
                .iter()
                .filter_map(|l| l.get("gemm_uops"))
                .sum::<u64>(),
            run.launches
                .iter()
                .filter_map(|l| l.get("alu_uops"))
                .sum::<u64>(),
        );
        ratios.push(ratio);
    }
    assert!(ratios[0] <= 1.3, "ALU: device / real MACs {}", ratios[0]);
    assert!(
        ratios[1] > ratios[0] + 0.5,
        "the diagonal GEMM costs more MACs: {ratios:?}"
    );
}

/// The same network on the cycle-accurate RTL simulator, both lowerings: the same bytes as on
/// the functional simulator, and the measured cycles (the README's table).
#[test]
fn mobilenet_v2_on_rtl_matches_fsim_both_ways() {
    let model = mobilenet_v2(64);
    let x = sample(&[1, 3, 64, 64], 5, 2.0);
    let cfg = isa::HwConfig::default();
    let cache = std::env::var_os("VTA_HDL_CACHE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("vta-hw-models")
        });
    let opts = vta_sim::rtl::RtlOptions {
        cache_dir: Some(cache),
        ..Default::default()
    };
    let mut rtl =
        vta_sim::rtl::RtlDevice::with_options(&cfg, &opts, &mut |s| eprintln!("[rtl model] {s}"))
            .unwrap();
    for on_gemm in [false, true] {
        let c = compile(&model, &x, on_gemm);
        let inputs = [Tensor::F32(x.clone())];
        let want = c
            .run(&mut FsimDevice::checking_races(&cfg), &inputs)
            .unwrap();
        let got = c.run(&mut rtl, &inputs).unwrap();
        assert_eq!(want.values, got.values, "on_gemm {on_gemm}");
        assert!(
            c.check(&inputs, &got).unwrap().is_exact(),
            "on_gemm {on_gemm}"
        );
        let cycles: u64 = got.launches.iter().filter_map(|l| l.get("cycles")).sum();
        eprintln!(
            "depthwise on {}: {cycles} RTL cycles",
            if on_gemm { "GEMM" } else { "ALU" }
        );
    }
}
