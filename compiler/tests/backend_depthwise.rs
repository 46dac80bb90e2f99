//! Depthwise convolutions on the ALU (`compiler::backend::depthwise`): bit for bit with the
//! reference on every test config, at their real MAC count, in a MobileNetV2 block; the
//! diagonal-GEMM lowering stays available and exact; and a small case on the RTL simulator.

#[path = "backend_util.rs"]
mod util;

use std::path::PathBuf;

use compiler::backend::{LayerKind, NetBuilder};
use compiler::qlayer::{QAdd, QConv2d};
use drivers::RunTimeout;
use util::{assert_same, check_conv, config, requant, run, ConvSpec, Draw, Rng, CONFIGS};

/// Depthwise shapes: 3x3 and 5x5, strides 1 and 2, symmetric and asymmetric padding, channel
/// counts that are not multiples of the blocks, batches, planes larger than half of ACC, rows
/// wider than half of ACC.
fn specs() -> Vec<(&'static str, ConvSpec)> {
    vec![
        ("dw3", ConvSpec::new(1, 32, 8, 32, 3, 1, 1).groups(32)),
        (
            "dw3_s2_batch2",
            ConvSpec::new(2, 24, 9, 24, 3, 2, 1)
                .groups(24)
                .per_channel(),
        ),
        (
            "dw5_p2",
            ConvSpec::new(1, 20, 7, 20, 5, 1, 2).groups(20).relu(),
        ),
        (
            "dw3_asym",
            ConvSpec::new(1, 17, 6, 17, 3, 1, 0)
                .groups(17)
                .pad4([0, 1, 2, 0]),
        ),
        (
            "dw3_large_plane",
            ConvSpec::new(1, 16, 40, 16, 3, 1, 1)
                .groups(16)
                .per_channel(),
        ),
        (
            "dw3_s2_last_tile_fewer_planes",
            ConvSpec::new(1, 144, 16, 144, 3, 2, 1)
                .groups(144)
                .per_channel(),
        ),
        // Rows too wide for half of ACC (a detector's first layers): bands of columns.
        (
            "dw3_s2_wide_rows",
            ConvSpec {
                h: 5,
                w: 700,
                ..ConvSpec::new(1, 16, 1, 16, 3, 2, 1)
                    .groups(16)
                    .per_channel()
            },
        ),
        (
            "dw5_wide_rows",
            ConvSpec {
                h: 3,
                w: 600,
                pad: [2, 2, 1, 0],
                ..ConvSpec::new(1, 20, 1, 20, 5, 1, 0).groups(20)
            },
        ),
        (
            "dw_1x3_s2",
            ConvSpec {
                k: (1, 3),
                stride: (2, 2),
                pad: [0, 1, 0, 1],
                ..ConvSpec::new(1, 16, 7, 16, 1, 1, 0).groups(16)
            },
        ),
    ]
}

/// The real multiply-accumulates of a convolution.
fn real_macs(l: &QConv2d) -> u64 {
    let [n, o, oh, ow] = l.output_shape();
    let [_, cg, kh, kw]: [usize; 4] = l.weight.shape().try_into().unwrap();
    (n * o * oh * ow * cg * kh * kw) as u64
}

#[test]
fn depthwise_convolutions_run_on_the_alu_exactly_on_every_config() {
    for cfg_name in CONFIGS {
        let cfg = config(cfg_name);
        for (i, (name, spec)) in specs().into_iter().enumerate() {
            let mut rng = Rng::new(7000 + i as u64);
            let layer = spec.build(&mut rng, name);
            let x = rng.act(layer.input_shape, -128, 127);
            let (lp, report) = check_conv(&cfg, &layer, &x);
            let info = &lp.layers[0];
            assert_eq!(info.kind, LayerKind::Conv);
            assert!(info.tiling.is_none(), "{cfg_name} {name}: not on the ALU");
            assert_eq!(report.get("gemm_uops"), Some(0), "{cfg_name} {name}");
            // Device MACs: the real ones, channels and batch padded to the blocks.
            let [n, c, _, _] = layer.input_shape;
            let (bb, bo) = (cfg.batch() as usize, cfg.block_out() as usize);
            let padded = real_macs(&layer) / (n * c) as u64
                * (n.div_ceil(bb) * bb * c.div_ceil(bo) * bo) as u64;
            assert_eq!(info.device_macs, padded, "{cfg_name} {name}");
        }
    }
}

#[test]
fn the_diagonal_gemm_lowering_stays_exact_and_costs_block_in_times_more() {
    let cfg = config("default");
    let mut rng = Rng::new(71);
    let layer = ConvSpec::new(1, 32, 8, 32, 3, 1, 1)
        .groups(32)
        .per_channel()
        .build(&mut rng, "dw");
    let x = rng.act(layer.input_shape, -128, 127);
    let compile = |alu: bool| {
        let mut net = NetBuilder::new(&cfg).unwrap();
        net.set_depthwise_alu(alu);
        let t = net.input("input", layer.input_shape);
        let y = net.conv(&layer, t).unwrap();
        net.finish(&[y]).unwrap()
    };
    let (alu, gemm) = (compile(true), compile(false));
    assert!(gemm.layers[0].tiling.is_some());
    for lp in [&alu, &gemm] {
        let (out, _) = run(&cfg, lp, &[x.view()]);
        assert_same(&out[0], &layer.reference(x.view()), "dw");
    }
    assert_eq!(alu.layers[0].device_macs, real_macs(&layer));
    assert_eq!(
        gemm.layers[0].device_macs,
        real_macs(&layer) * u64::from(cfg.block_in())
    );
}

#[test]
fn configs_without_alu_mul_and_channel_multipliers_use_the_gemm() {
    let mut rng = Rng::new(72);
    let mut no_mul = config("default");
    no_mul.alu_mul = false;
    let dw = ConvSpec::new(1, 16, 6, 16, 3, 1, 1)
        .groups(16)
        .build(&mut rng, "dw");
    // Without ALU MUL the requant multiplier must be a power of two.
    let dw = QConv2d {
        requant: compiler::qlayer::Requant {
            mul: vec![4],
            ..dw.requant.clone()
        },
        ..dw
    };
    let x = rng.act(dw.input_shape, -128, 127);
    let (lp, _) = check_conv(&no_mul, &dw, &x);
    assert!(lp.layers[0].tiling.is_some());
    // Two output channels per input channel: not one lane to one lane.
    let mult2 = ConvSpec::new(1, 8, 6, 16, 3, 1, 1)
        .groups(8)
        .build(&mut rng, "dw_x2");
    let x = rng.act(mult2.input_shape, -128, 127);
    let (lp, _) = check_conv(&config("default"), &mult2, &x);
    assert!(lp.layers[0].tiling.is_some());
}

/// A MobileNetV2 inverted residual block (1x1 expand with ReLU6-like clip, 3x3 depthwise,
/// 1x1 project, residual add) in one program.
fn inverted_residual(rng: &mut Rng, shape: [usize; 4], t: usize) -> (Vec<QConv2d>, QAdd) {
    let [n, c, h, _] = shape;
    let e = c * t;
    let expand = ConvSpec::new(n, c, h, e, 1, 1, 0)
        .per_channel()
        .relu()
        .build(rng, "expand");
    let dw = ConvSpec::new(n, e, h, e, 3, 1, 1)
        .groups(e)
        .per_channel()
        .relu()
        .build(rng, "dw");
    let project = ConvSpec::new(n, e, h, c, 1, 1, 0)
        .per_channel()
        .build(rng, "project");
    let add = QAdd {
        name: "add".into(),
        mul_a: 3,
        mul_b: 5,
        requant: requant(rng, c, false, 700.0, false),
    };
    (vec![expand, dw, project], add)
}

#[test]
fn a_mobilenet_v2_block_is_exact_and_costs_its_real_macs() {
    for cfg_name in ["default", "batched"] {
        let cfg = config(cfg_name);
        let mut rng = Rng::new(73);
        let shape = [1, 16, 12, 12];
        let (convs, add) = inverted_residual(&mut rng, shape, 6);
        let x = rng.act(shape, -128, 127);
        let mut net = NetBuilder::new(&cfg).unwrap();
        let t0 = net.input("input", shape);
        let mut t = t0;
        for c in &convs {
            t = net.conv(c, t).unwrap();
        }
        let y = net.add(&add, t, t0).unwrap();
        let lp = net.finish(&[y]).unwrap();
        let (out, _) = run(&cfg, &lp, &[x.view()]);
        let mut want = x.clone();
        for c in &convs {
            want = c.reference(want.view());
        }
        let want = add.reference(want.view(), x.view());
        assert_same(&out[0], &want, cfg_name);
        let device: u64 = lp.layers.iter().map(|l| l.device_macs).sum();
        let real: u64 = convs.iter().map(real_macs).sum();
        let ratio = device as f64 / real as f64;
        // BATCH 4 ("batched") pads the single sample to 4.
        let bound = 1.0 * f64::from(cfg.batch());
        assert!(ratio <= bound + 1e-9, "{cfg_name}: ratio {ratio}");
    }
}

#[test]
fn a_depthwise_convolution_on_rtl_matches_fsim_and_the_reference() {
    let cfg = config("default");
    let mut rng = Rng::new(74);
    let layer = ConvSpec::new(1, 32, 6, 32, 3, 2, 1)
        .groups(32)
        .per_channel()
        .relu()
        .build(&mut rng, "dw");
    let x = rng.act(layer.input_shape, -128, 127);
    let cache = std::env::var_os("VTA_HDL_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("vta-hw-models"));
    let opts = vta_sim::rtl::RtlOptions {
        cache_dir: Some(cache),
        ..Default::default()
    };
    let mut dev =
        vta_sim::rtl::RtlDevice::with_options(&cfg, &opts, &mut |s| eprintln!("[rtl model] {s}"))
            .unwrap();
    let mut cycles = Vec::new();
    for alu in [true, false] {
        let mut net = NetBuilder::new(&cfg).unwrap();
        net.set_depthwise_alu(alu);
        let t = net.input("input", layer.input_shape);
        let y = net.conv(&layer, t).unwrap();
        let lp = net.finish(&[y]).unwrap();
        assert_eq!(lp.layers[0].tiling.is_none(), alu);
        let (want, _) = run(&cfg, &lp, &[x.view()]);
        let (got, report) = lp
            .run_all(&mut dev, &[x.view()], RunTimeout::default())
            .unwrap();
        assert_same(&got[0], &want[0], "rtl vs fsim");
        assert_same(&got[0], &layer.reference(x.view()), "rtl vs reference");
        cycles.push(report.get("cycles").unwrap());
    }
    eprintln!(
        "depthwise 32 x 6 x 6, 3x3 stride 2 on RTL: {} cycles on the ALU, {} on diagonal GEMM tiles",
        cycles[0], cycles[1]
    );
}
