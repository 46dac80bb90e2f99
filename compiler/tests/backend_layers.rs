//! Every layer kind, compiled for every test config and run on the functional simulator,
//! against the qlayer reference (bit for bit).

#[path = "backend_util.rs"]
mod util;

use compiler::backend::{self, dense_input, dense_output, BackendError};
use compiler::qlayer::{QAdd, QDense, QGlobalAvgPool, QMaxPool, Requant};
use util::{assert_same, check_conv, config, requant, run, ConvSpec, Draw, Rng, CONFIGS};

/// Convolution shapes: kernel sizes 1/3/5/7, strides 1/2, symmetric and asymmetric padding,
/// channels and batches that are not multiples of the blocks, groups and depthwise.
fn conv_specs() -> Vec<(&'static str, ConvSpec)> {
    vec![
        ("1x1", ConvSpec::new(1, 16, 6, 16, 1, 1, 0)),
        (
            "1x1_s2_odd_channels",
            ConvSpec::new(2, 13, 9, 21, 1, 2, 0).per_channel(),
        ),
        ("3x3_p1", ConvSpec::new(1, 20, 8, 12, 3, 1, 1).relu()),
        (
            "3x3_s2_p1_batch3",
            ConvSpec::new(3, 8, 9, 16, 3, 2, 1).per_channel(),
        ),
        (
            "3x3_asym_pad",
            ConvSpec::new(1, 5, 7, 7, 3, 1, 0).pad4([0, 1, 2, 2]),
        ),
        (
            "5x5_p2",
            ConvSpec::new(1, 6, 8, 9, 5, 1, 2).per_channel().relu(),
        ),
        ("7x7_s2_p3", ConvSpec::new(1, 3, 12, 8, 7, 2, 3)),
        (
            "3x3_groups2",
            ConvSpec::new(1, 24, 6, 20, 3, 1, 1).groups(2),
        ),
        (
            "3x3_depthwise",
            ConvSpec::new(2, 24, 7, 24, 3, 1, 1)
                .groups(24)
                .per_channel(),
        ),
        (
            "3x3_depthwise_s2",
            ConvSpec::new(1, 10, 8, 10, 3, 2, 1).groups(10).relu(),
        ),
        (
            "1x5_rect_kernel",
            ConvSpec {
                k: (1, 5),
                stride: (2, 1),
                pad: [0, 2, 0, 2],
                ..ConvSpec::new(1, 9, 6, 5, 1, 1, 0)
            },
        ),
    ]
}

#[test]
fn convolutions_match_the_reference_on_every_config() {
    for cfg_name in CONFIGS {
        let cfg = config(cfg_name);
        for (i, (name, spec)) in conv_specs().into_iter().enumerate() {
            let mut rng = Rng::new(1000 + i as u64);
            let layer = spec.build(&mut rng, name);
            let x = rng.act(layer.input_shape, -128, 127);
            check_conv(&cfg, &layer, &x);
        }
    }
}

#[test]
fn dense_layers_match_the_reference() {
    for cfg_name in CONFIGS {
        let cfg = config(cfg_name);
        for (n, k, m, per_channel) in [(1, 64, 10, false), (3, 40, 20, true), (9, 33, 7, false)] {
            let mut rng = Rng::new(7 + n as u64);
            let layer = QDense {
                name: format!("fc{n}"),
                weight: rng.mat(m, k, -128, 127),
                bias: (0..m).map(|_| rng.range(-5000, 5000)).collect(),
                requant: requant(
                    &mut rng,
                    m,
                    per_channel,
                    74.0 * 74.0 * (k as f64).sqrt(),
                    false,
                ),
            };
            let x = rng.mat(n, k, -128, 127);
            let lp = backend::compile_dense(&cfg, &layer, n).unwrap();
            let (out, _) = run(&cfg, &lp, &[dense_input(&x).view()]);
            let got = dense_output(out.into_iter().next().unwrap());
            assert_eq!(got, layer.reference(&x), "{cfg_name} dense {n}x{k}x{m}");
        }
    }
}

#[test]
fn residual_adds_match_the_reference() {
    for cfg_name in CONFIGS {
        let cfg = config(cfg_name);
        for (i, shape) in [[1, 16, 5, 5], [3, 20, 4, 3], [1, 8, 40, 40]]
            .into_iter()
            .enumerate()
        {
            let mut rng = Rng::new(50 + i as u64);
            let layer = QAdd {
                name: "add".into(),
                mul_a: rng.range(1, 300) as i16,
                mul_b: -(rng.range(1, 300) as i16),
                requant: requant(&mut rng, shape[1], i == 1, 128.0 * 300.0, i == 2),
            };
            let a = rng.act(shape, -128, 127);
            let b = rng.act(shape, -128, 127);
            let lp = backend::compile_add(&cfg, &layer, shape).unwrap();
            let (out, _) = run(&cfg, &lp, &[a.view(), b.view()]);
            assert_same(
                &out[0],
                &layer.reference(a.view(), b.view()),
                &format!("{cfg_name} add {shape:?}"),
            );
        }
    }
}

#[test]
fn max_pools_match_the_reference_including_padding() {
    let pools = [
        // ResNet's stem pool on relu-like inputs
        (
            QMaxPool {
                name: "pool3s2".into(),
                kernel: (3, 3),
                stride: (2, 2),
                pad: [1; 4],
            },
            [1, 16, 12, 12],
            0,
        ),
        // all-negative inputs: padding must never win
        (
            QMaxPool {
                name: "pool_neg".into(),
                kernel: (3, 3),
                stride: (2, 2),
                pad: [1; 4],
            },
            [3, 10, 9, 7],
            -128,
        ),
        (
            QMaxPool {
                name: "pool2".into(),
                kernel: (2, 2),
                stride: (2, 2),
                pad: [0; 4],
            },
            [1, 20, 8, 8],
            -128,
        ),
        (
            QMaxPool {
                name: "pool_asym".into(),
                kernel: (3, 2),
                stride: (1, 2),
                pad: [2, 0, 1, 1],
            },
            [2, 6, 5, 6],
            -128,
        ),
        // in place with the tap two columns on (another window's first column) first
        (
            QMaxPool {
                name: "pool_in_place_k4s2".into(),
                kernel: (2, 4),
                stride: (1, 2),
                pad: [0, 1, 1, 2],
            },
            [1, 18, 6, 11],
            -128,
        ),
        // two taps on other windows' first columns: through a row buffer
        (
            QMaxPool {
                name: "pool_buffered_k5s2".into(),
                kernel: (3, 5),
                stride: (2, 2),
                pad: [1, 2, 1, 2],
            },
            [2, 5, 9, 13],
            -128,
        ),
        // rows wider than half of ACC (a stem pool at 800x608): bands of columns
        (
            QMaxPool {
                name: "pool_wide_rows".into(),
                kernel: (3, 3),
                stride: (2, 2),
                pad: [1; 4],
            },
            [1, 20, 5, 700],
            -128,
        ),
    ];
    for cfg_name in CONFIGS {
        let cfg = config(cfg_name);
        for (i, (layer, shape, lo)) in pools.iter().enumerate() {
            let mut rng = Rng::new(90 + i as u64);
            let hi = if *lo < 0 { -1 } else { 127 };
            let x = rng.act(*shape, *lo, hi);
            let lp = backend::compile_max_pool(&cfg, layer, *shape).unwrap();
            let (out, _) = run(&cfg, &lp, &[x.view()]);
            assert_same(
                &out[0],
                &layer.reference(x.view()),
                &format!("{cfg_name} {}", layer.name),
            );
        }
    }
}

#[test]
fn global_average_pools_match_the_reference() {
    for cfg_name in CONFIGS {
        let cfg = config(cfg_name);
        // The last plane (80 x 80) is larger than half of any config's ACC: summed in bands.
        for (i, shape) in [[1, 64, 7, 7], [3, 10, 4, 5], [2, 5, 80, 80]]
            .into_iter()
            .enumerate()
        {
            let mut rng = Rng::new(130 + i as u64);
            let hw = (shape[2] * shape[3]) as f64;
            let layer = QGlobalAvgPool {
                name: "gap".into(),
                requant: requant(&mut rng, shape[1], i == 1, 74.0 * hw.sqrt() * 4.0, false),
            };
            let x = rng.act(shape, -128, 127);
            let lp = backend::compile_global_avg_pool(&cfg, &layer, shape).unwrap();
            let (out, _) = run(&cfg, &lp, &[x.view()]);
            assert_same(
                &out[0],
                &layer.reference(x.view()),
                &format!("{cfg_name} gap {shape:?}"),
            );
        }
    }
}

/// Requantization corner cases on the accelerator: accumulators that overflow the multiply,
/// a rounding constant beyond the 16-bit immediate, shift 0, negative multipliers, clips.
#[test]
fn requant_edge_cases_are_exact_on_the_accelerator() {
    let cases = [
        Requant {
            pre_shift: 0,
            acc_clamp: None,
            mul: vec![32767],
            shift: 16,
            zero_point: 0,
            lo: -128,
            hi: 127,
        },
        Requant {
            pre_shift: 0,
            acc_clamp: None,
            mul: vec![-32768],
            shift: 31,
            zero_point: 3,
            lo: -128,
            hi: 127,
        },
        Requant {
            pre_shift: 31,
            acc_clamp: None,
            mul: vec![1],
            shift: 0,
            zero_point: -128,
            lo: -128,
            hi: 127,
        },
        Requant {
            pre_shift: 5,
            acc_clamp: None,
            mul: vec![1],
            shift: 0,
            zero_point: 0,
            lo: -5,
            hi: 5,
        },
        Requant {
            pre_shift: 2,
            acc_clamp: None,
            mul: vec![-3, 7, 0, 12345, -1, 2, 4, 8],
            shift: 20,
            zero_point: 1,
            lo: 0,
            hi: 127,
        },
    ];
    for cfg_name in ["default", "rect"] {
        let cfg = config(cfg_name);
        for (i, r) in cases.iter().enumerate() {
            let mut rng = Rng::new(300 + i as u64);
            let mut layer = ConvSpec::new(1, 64, 4, 8, 3, 1, 1).build(&mut rng, "edge");
            // extreme weights and biases: large accumulators, wrapping products
            layer
                .weight
                .mapv_inplace(|_| if rng.coin() { 127 } else { -128 });
            layer.bias = (0..8).map(|_| rng.range(-(1 << 30), 1 << 30)).collect();
            layer.requant = r.clone();
            let x = rng.act(layer.input_shape, -128, 127);
            check_conv(&cfg, &layer, &x);
        }
    }
}

#[test]
fn configs_without_mul_use_shifts_or_refuse() {
    let mut cfg = config("default");
    cfg.alu_mul = false;
    let mut rng = Rng::new(5);
    let mut layer = ConvSpec::new(1, 16, 5, 16, 3, 1, 1).build(&mut rng, "nomul");
    layer.requant = Requant {
        pre_shift: 4,
        acc_clamp: None,
        mul: vec![8],
        shift: 12,
        zero_point: 0,
        lo: -128,
        hi: 127,
    };
    let x = rng.act(layer.input_shape, -128, 127);
    check_conv(&cfg, &layer, &x);
    layer.requant.mul = (0..16).map(|c| [0, 1, 2, 1024][c % 4]).collect();
    check_conv(&cfg, &layer, &x);
    layer.requant.mul = vec![3];
    let e = backend::compile_conv(&cfg, &layer).unwrap_err();
    assert!(
        matches!(e, BackendError::Unsupported { .. }) && e.to_string().contains("ALU_MUL"),
        "{e}"
    );
}

#[test]
fn layers_the_hardware_cannot_run_exactly_are_refused_with_a_reason() {
    let cfg = config("default");
    let mut rng = Rng::new(9);
    // horizontal padding beyond the 4-bit LOAD pad field (with 16 channels, which no fold of
    // the window into the channels makes cheaper)
    let layer = ConvSpec::new(1, 16, 4, 4, 3, 1, 16).build(&mut rng, "bigpad");
    let e = backend::compile_conv(&cfg, &layer).unwrap_err();
    assert!(
        matches!(e, BackendError::Unsupported { .. }) && e.to_string().contains("x-pad"),
        "{e}"
    );
    // 16-bit accumulators cannot reproduce int32 arithmetic
    let mut narrow = cfg.clone();
    narrow.log_acc_width = 4;
    let e = backend::compile_conv(
        &narrow,
        &ConvSpec::new(1, 4, 4, 4, 1, 1, 0).build(&mut rng, "c"),
    )
    .unwrap_err();
    assert!(matches!(e, BackendError::UnsupportedConfig { .. }), "{e}");
    // a max pool whose one output pixel does not fit half of the small config's ACC (256 rows:
    // a 16x16 window, its 16 row maxima and the pixel)
    let huge = QMaxPool {
        name: "huge".into(),
        kernel: (16, 16),
        stride: (1, 1),
        pad: [0; 4],
    };
    let e = backend::compile_max_pool(&config("small"), &huge, [1, 4, 16, 16]).unwrap_err();
    assert!(matches!(e, BackendError::Unsupported { .. }), "{e}");
    // malformed layers
    let mut bad = ConvSpec::new(1, 4, 4, 4, 1, 1, 0).build(&mut rng, "bad");
    bad.bias.pop();
    assert!(matches!(
        backend::compile_conv(&cfg, &bad),
        Err(BackendError::InvalidLayer { .. })
    ));
    // vertical padding beyond 15 is fine (zero fills)
    let tall = ConvSpec::new(1, 4, 3, 4, 3, 1, 0)
        .pad4([17, 1, 16, 1])
        .build(&mut rng, "tall");
    let x = rng.act(tall.input_shape, -128, 127);
    check_conv(&cfg, &tall, &x);
}

/// Random convolutions (deterministic seeds): any kernel, stride, padding, groups, batch.
#[test]
fn random_convolutions_match_the_reference() {
    for cfg_name in CONFIGS {
        let cfg = config(cfg_name);
        for seed in 0..24u64 {
            let mut rng = Rng::new(0xF00D + seed);
            let r = |rng: &mut Rng, lo: i64, hi: i64| rng.range(lo, hi) as usize;
            let (kh, kw) = (r(&mut rng, 1, 5), r(&mut rng, 1, 5));
            let pad = [
                r(&mut rng, 0, 3),
                r(&mut rng, 0, 3),
                r(&mut rng, 0, 3),
                r(&mut rng, 0, 3),
            ];
            let h = r(
                &mut rng,
                kh.saturating_sub(pad[0] + pad[2]).max(1) as i64,
                11,
            );
            let w = r(
                &mut rng,
                kw.saturating_sub(pad[1] + pad[3]).max(1) as i64,
                11,
            );
            let groups = [1, 1, 1, 2, 3, 4][r(&mut rng, 0, 5)];
            let (cg, og) = (r(&mut rng, 1, 12), r(&mut rng, 1, 12));
            let depthwise = rng.range(0, 5) == 0;
            let (c, o, groups) = if depthwise {
                (cg * 4, cg * 4, cg * 4)
            } else {
                (cg * groups, og * groups, groups)
            };
            let spec = ConvSpec {
                n: r(&mut rng, 1, 5),
                c,
                h,
                w,
                o,
                k: (kh, kw),
                stride: (r(&mut rng, 1, 3), r(&mut rng, 1, 3)),
                pad,
                groups,
                per_channel: rng.coin(),
                relu: rng.coin(),
            };
            let layer = spec.build(&mut rng, &format!("rand{seed}"));
            let x = rng.act(layer.input_shape, -128, 127);
            check_conv(&cfg, &layer, &x);
        }
    }
}

/// Random max pools: kernels, strides and paddings of every kind, all-negative inputs.
#[test]
fn random_max_pools_match_the_reference() {
    for cfg_name in CONFIGS {
        let cfg = config(cfg_name);
        for seed in 0..16u64 {
            let mut rng = Rng::new(0xBEEF + seed);
            let r = |rng: &mut Rng, lo: i64, hi: i64| rng.range(lo, hi) as usize;
            let kernel = (r(&mut rng, 1, 4), r(&mut rng, 1, 4));
            let pad = [
                r(&mut rng, 0, 2),
                r(&mut rng, 0, 2),
                r(&mut rng, 0, 2),
                r(&mut rng, 0, 2),
            ];
            let h = r(
                &mut rng,
                kernel.0.saturating_sub(pad[0] + pad[2]).max(1) as i64,
                12,
            );
            let w = r(
                &mut rng,
                kernel.1.saturating_sub(pad[1] + pad[3]).max(1) as i64,
                12,
            );
            let layer = QMaxPool {
                name: format!("pool{seed}"),
                kernel,
                stride: (r(&mut rng, 1, 3), r(&mut rng, 1, 3)),
                pad,
            };
            let shape = [r(&mut rng, 1, 5), r(&mut rng, 1, 20), h, w];
            let hi = if rng.coin() { -100 } else { 127 };
            let x = rng.act(shape, -128, hi);
            let lp = backend::compile_max_pool(&cfg, &layer, shape).unwrap();
            let (out, _) = run(&cfg, &lp, &[x.view()]);
            assert_same(
                &out[0],
                &layer.reference(x.view()),
                &format!("{cfg_name} {layer:?} {shape:?}"),
            );
        }
    }
}
