//! The back end on cores with narrower lanes: convolutions and dense layers whose weights,
//! inputs and outputs fit 4- or 2-bit lanes run bit-exactly (weights and activations packed
//! at those widths), and so do those whose weights are wider (bit-sliced: one GEMM pass per
//! weight digit); layers whose inputs or outputs do not fit, and layers that read
//! activations through 8-bit ACC loads, are refused with the reason.

#[path = "backend_util.rs"]
mod util;

use compiler::backend::{self, dense_input, dense_output};
use compiler::qlayer::{QAdd, QConv2d, QDense, Requant};
use isa::HwConfig;
use util::{check_conv, config, requant, run, ConvSpec, Draw, Rng};

/// `preset` with `2^log_inp`-bit inputs and `2^log_wgt`-bit weights, as many INP and WGT
/// elements as before.
fn narrow(preset: &str, log_inp: u32, log_wgt: u32) -> HwConfig {
    let mut cfg = config(preset);
    cfg.log_inp_buff_size -= cfg.log_inp_width - log_inp;
    cfg.log_wgt_buff_size -= cfg.log_wgt_width - log_wgt;
    (cfg.log_inp_width, cfg.log_wgt_width) = (log_inp, log_wgt);
    cfg.validate().unwrap();
    cfg
}

fn lanes(bits: u32) -> (i64, i64) {
    (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
}

/// `r` (sized for int8 outputs) scaled down to `bits`-bit lanes, its clamp inside them.
fn within(r: Requant, bits: u32) -> Requant {
    let (lo, hi) = lanes(bits);
    let narrow = |v: i64| (v * (hi + 1) / 128) as i8;
    let mul = r
        .mul
        .iter()
        .map(|&m| {
            let m = i64::from(m) * (hi + 1) / 128;
            (if m == 0 { 1 } else { m }) as i16
        })
        .collect();
    Requant {
        mul,
        lo: narrow(i64::from(r.lo)).clamp(lo as i8, hi as i8),
        hi: narrow(i64::from(r.hi)).clamp(1, hi as i8),
        zero_point: narrow(i64::from(r.zero_point)),
        ..r
    }
}

/// Narrow configs: (preset, log2 input bits, log2 weight bits).
const NARROW: [(&str, u32, u32); 6] = [
    ("default", 3, 2),
    ("default", 2, 2),
    ("default", 1, 1),
    ("batched", 2, 2),
    ("rect", 2, 1),
    ("small", 1, 2),
];

fn conv_specs() -> Vec<(&'static str, ConvSpec)> {
    vec![
        ("1x1", ConvSpec::new(1, 16, 6, 16, 1, 1, 0)),
        (
            "1x1_s2_odd",
            ConvSpec::new(2, 13, 9, 21, 1, 2, 0).per_channel(),
        ),
        ("3x3_p1", ConvSpec::new(1, 20, 8, 12, 3, 1, 1).relu()),
        (
            "3x3_s2_batch3",
            ConvSpec::new(3, 8, 9, 16, 3, 2, 1).per_channel(),
        ),
        ("7x7_s2_rgb", ConvSpec::new(1, 3, 12, 8, 7, 2, 3)),
        (
            "3x3_depthwise",
            ConvSpec::new(2, 24, 7, 24, 3, 1, 1)
                .groups(24)
                .per_channel(),
        ),
        (
            "3x3_groups2",
            ConvSpec::new(1, 24, 6, 20, 3, 1, 1).groups(2),
        ),
    ]
}

/// A convolution quantized to the config's widths: weights and output clamp in its lanes,
/// a requantization sized for the narrower products.
fn narrow_conv(cfg: &HwConfig, spec: &ConvSpec, rng: &mut Rng, name: &str) -> QConv2d {
    let mut layer = spec.build(rng, name);
    let (wlo, whi) = lanes(cfg.wgt_width());
    layer.weight.mapv_inplace(|_| rng.range(wlo, whi) as i8);
    let (_, ihi) = lanes(cfg.inp_width());
    let taps = (layer.weight.len() / layer.weight.shape()[0]) as f64;
    let typical = 64.0 * 74.0 * taps.sqrt() * (ihi * whi) as f64 / (127.0 * 127.0);
    let products = (ihi * whi) as i32;
    layer
        .bias
        .iter_mut()
        .for_each(|b| *b = *b * products / (127 * 127));
    layer.requant = within(
        requant(rng, spec.o, spec.per_channel, typical, spec.relu),
        cfg.inp_width(),
    );
    layer
}

#[test]
fn convolutions_at_narrow_widths_match_the_reference() {
    for (preset, li, lw) in NARROW {
        let cfg = narrow(preset, li, lw);
        for (i, (name, spec)) in conv_specs().into_iter().enumerate() {
            let mut rng = Rng::new(3000 + i as u64);
            let layer = narrow_conv(&cfg, &spec, &mut rng, name);
            let (lo, hi) = lanes(cfg.inp_width());
            let x = rng.act(layer.input_shape, lo, hi);
            check_conv(&cfg, &layer, &x);
            // the outputs are not all one value: the test exercises the arithmetic
            let y = layer.reference(x.view());
            let distinct: std::collections::BTreeSet<i8> = y.iter().copied().collect();
            let span = i32::from(layer.requant.hi) - i32::from(layer.requant.lo) + 1;
            assert!(
                distinct.len() as i32 >= span.min(3),
                "{cfg} {name}: outputs {distinct:?}"
            );
        }
    }
}

#[test]
fn dense_layers_at_narrow_widths_match_the_reference() {
    for (preset, li, lw) in NARROW {
        let cfg = narrow(preset, li, lw);
        let (ilo, ihi) = lanes(cfg.inp_width());
        let (wlo, whi) = lanes(cfg.wgt_width());
        for (n, k, m) in [(1, 64, 10), (3, 40, 20)] {
            let mut rng = Rng::new(70 + n as u64);
            let typical = 74.0 * 74.0 * (k as f64).sqrt() * (ihi * whi) as f64 / (127.0 * 127.0);
            let layer = QDense {
                name: format!("fc{n}"),
                weight: rng.mat(m, k, wlo, whi),
                bias: (0..m).map(|_| rng.range(-50, 50)).collect(),
                requant: within(
                    requant(&mut rng, m, n == 3, typical, false),
                    cfg.inp_width(),
                ),
            };
            let x = rng.mat(n, k, ilo, ihi);
            let lp = backend::compile_dense(&cfg, &layer, n).unwrap();
            let (out, _) = run(&cfg, &lp, &[dense_input(&x).view()]);
            let got = dense_output(out.into_iter().next().unwrap());
            assert_eq!(got, layer.reference(&x), "{cfg} dense {n}x{k}x{m}");
        }
    }
}

/// Weights wider than the lanes (int8 weights over the whole range on 4- and 2-bit lanes, and
/// one just past 4 bits) run bit-sliced: one GEMM pass per weight digit, as many as the
/// weights need, bit-exact with the reference.
#[test]
fn wide_weights_run_bit_sliced_and_match_the_reference() {
    let cases = [
        // (preset, log2 input bits, log2 weight bits, weight range, passes)
        ("default", 3, 2, (-128, 127), 3),
        ("default", 2, 2, (-128, 127), 3),
        ("default", 2, 2, (-136, 119), 2),
        ("default", 2, 2, (-9, 7), 2),
        ("rect", 2, 1, (-128, 127), 5),
        ("batched", 3, 1, (-70, 70), 4),
        ("small", 1, 2, (-128, 127), 3),
    ];
    for (k, (preset, li, lw, (wlo, whi), passes)) in cases.into_iter().enumerate() {
        let cfg = narrow(preset, li, lw);
        for (i, (name, spec)) in conv_specs().into_iter().enumerate() {
            let mut rng = Rng::new(9000 + 10 * k as u64 + i as u64);
            let mut layer = narrow_conv(&cfg, &spec, &mut rng, name);
            let (lo, hi) = (wlo.max(-128), whi.min(127));
            layer.weight.mapv_inplace(|_| rng.range(lo, hi) as i8);
            // the extremes, so that the layer needs every pass
            layer.weight[[0, 0, 0, 0]] = lo as i8;
            layer.weight[[1, 0, 0, 0]] = hi as i8;
            // a requantization for the wider products
            let scale = (whi - wlo) as f64 / (2 * lanes(cfg.wgt_width()).1 + 1) as f64;
            let typical = 64.0
                * 74.0
                * (layer.weight.len() as f64 / spec.o as f64).sqrt()
                * (lanes(cfg.inp_width()).1 as f64 * scale * lanes(cfg.wgt_width()).1 as f64)
                / (127.0 * 127.0);
            layer.requant = within(
                requant(&mut rng, spec.o, spec.per_channel, typical, spec.relu),
                cfg.inp_width(),
            );
            let (ilo, ihi) = lanes(cfg.inp_width());
            let x = rng.act(layer.input_shape, ilo, ihi);
            let (lp, report) = check_conv(&cfg, &layer, &x);
            let info = &lp.layers[0];
            let expect = if info.tiling.is_some() { passes } else { 1 };
            assert_eq!(info.passes, expect, "{cfg} {name}");
            // The cost model counts every pass's weights.
            if let Some(e) = info.estimate {
                assert_eq!(
                    report.get("wgt_load_bytes"),
                    Some(e.wgt_bytes),
                    "{cfg} {name}: {:?}",
                    info.tiling
                );
            }
            let y = layer.reference(x.view());
            let distinct: std::collections::BTreeSet<i8> = y.iter().copied().collect();
            let span = i32::from(layer.requant.hi) - i32::from(layer.requant.lo) + 1;
            assert!(
                distinct.len() as i32 >= span.min(3),
                "{cfg} {name}: outputs {distinct:?}"
            );
        }
        let (ilo, ihi) = lanes(cfg.inp_width());
        let mut rng = Rng::new(80 + k as u64);
        let (n, kk, m) = (3, 40, 20);
        let layer = QDense {
            name: "fc".into(),
            weight: rng.mat(m, kk, wlo.max(-128), whi.min(127)),
            bias: (0..m).map(|_| rng.range(-500, 500)).collect(),
            requant: within(
                requant(
                    &mut rng,
                    m,
                    true,
                    74.0 * 74.0 * (kk as f64).sqrt() * ihi as f64 / 127.0,
                    false,
                ),
                cfg.inp_width(),
            ),
        };
        let x = rng.mat(n, kk, ilo, ihi);
        let lp = backend::compile_dense(&cfg, &layer, n).unwrap();
        let (out, _) = run(&cfg, &lp, &[dense_input(&x).view()]);
        let got = dense_output(out.into_iter().next().unwrap());
        assert_eq!(got, layer.reference(&x), "{cfg} dense");
        assert!(lp.layers[0].passes > 1, "{cfg} dense: {:?}", lp.layers[0]);
    }
}

/// Outputs wider than the output lanes (int8 on 4- and 2-bit cores, from convolutions and
/// dense layers, bit-sliced or not) are stored as digit planes: each the value shifted right
/// by the digits below it, the host combining them, bit-exact with the reference.
#[test]
fn wide_outputs_are_stored_as_digit_planes() {
    for (k, (preset, li, lw)) in [
        ("default", 2, 2),
        ("batched", 2, 2),
        ("rect", 2, 1),
        ("small", 1, 2),
    ]
    .into_iter()
    .enumerate()
    {
        let cfg = narrow(preset, li, lw);
        let planes = 8 / cfg.inp_width() as usize;
        let (ilo, ihi) = lanes(cfg.inp_width());
        for (i, (name, spec)) in conv_specs().into_iter().enumerate() {
            let mut rng = Rng::new(7000 + 10 * k as u64 + i as u64);
            let mut layer = narrow_conv(&cfg, &spec, &mut rng, name);
            if i % 2 == 1 {
                // bit-sliced too
                layer.weight.mapv_inplace(|_| rng.range(-30, 30) as i8);
            }
            // the accumulators' spread: sqrt(taps) x the inputs' x the weights' (uniform)
            let wmax = if i % 2 == 1 {
                30.0
            } else {
                lanes(cfg.wgt_width()).1 as f64
            };
            let typical = (layer.weight.len() as f64 / spec.o as f64).sqrt()
                * (0.6 * ihi as f64)
                * (0.6 * wmax);
            layer.requant = requant(&mut rng, spec.o, spec.per_channel, typical, spec.relu);
            let x = rng.act(layer.input_shape, ilo, ihi);
            let (lp, report) = check_conv(&cfg, &layer, &x);
            let info = &lp.layers[0];
            if info.tiling.is_none() {
                continue; // a depthwise convolution on the ALU: the CPU's
            }
            assert_eq!(info.out_planes, planes, "{cfg} {name}");
            let e = info.estimate.unwrap();
            assert_eq!(
                report.get("out_store_bytes"),
                Some(e.out_bytes),
                "{cfg} {name}"
            );
            let y = layer.reference(x.view());
            let beyond = y
                .iter()
                .filter(|&&v| i64::from(v) > ihi || i64::from(v) < ilo)
                .count();
            assert!(
                beyond * 4 >= y.len(),
                "{cfg} {name}: {beyond} of {} outputs beyond the lanes",
                y.len()
            );
        }
        let mut rng = Rng::new(90 + k as u64);
        let (n, kk, m) = (3, 40, 20);
        let layer = QDense {
            name: "logits".into(),
            weight: rng.mat(m, kk, -128, 127),
            bias: (0..m).map(|_| rng.range(-500, 500)).collect(),
            requant: requant(
                &mut rng,
                m,
                true,
                (kk as f64).sqrt() * 0.6 * ihi as f64 * 0.6 * 127.0,
                false,
            ),
        };
        let x = rng.mat(n, kk, ilo, ihi);
        let lp = backend::compile_dense(&cfg, &layer, n).unwrap();
        assert_eq!(lp.layers[0].out_planes, planes);
        let (out, _) = run(&cfg, &lp, &[dense_input(&x).view()]);
        let got = dense_output(out.into_iter().next().unwrap());
        assert_eq!(got, layer.reference(&x), "{cfg} dense");
    }
}

/// A bit-sliced convolution with a residual add in its epilogue (8-bit activations, 4-bit
/// weight lanes): the shortcut joins the accumulators after the last pass, bit-exact.
#[test]
fn a_bit_sliced_convolution_takes_a_fused_residual_add() {
    let cfg = narrow("default", 3, 2);
    let mut rng = Rng::new(41);
    let spec = ConvSpec::new(1, 32, 6, 32, 3, 1, 1).per_channel();
    let mut layer = spec.build(&mut rng, "sliced");
    layer.weight.mapv_inplace(|_| rng.range(-128, 127) as i8);
    let add = QAdd {
        name: "add".into(),
        mul_a: 1,
        mul_b: 1,
        requant: requant(&mut rng, 32, false, 200.0, true),
    };
    let shape = layer.output_shape();
    let mut net = backend::NetBuilder::new(&cfg).unwrap();
    let x = net.input("x", layer.input_shape);
    let sc = net.input("shortcut", shape);
    assert!(net.can_fuse_add(&layer));
    let y = net.conv_add(&layer, x, &add, sc, true).unwrap();
    let lp = net.finish(&[y]).unwrap();
    assert_eq!(lp.layers[0].passes, 3, "{:?}", lp.layers[0]);
    assert_eq!(lp.layers[1].fused_into.as_deref(), Some("sliced"));
    let xv = rng.act(layer.input_shape, -128, 127);
    let sv = rng.act(shape, -128, 127);
    let (out, _) = run(&cfg, &lp, &[xv.view(), sv.view()]);
    let want = add.reference(layer.reference(xv.view()).view(), sv.view());
    util::assert_same(&out[0], &want, "sliced conv + add");
    let distinct: std::collections::BTreeSet<i8> = want.iter().copied().collect();
    assert!(distinct.len() >= 3, "outputs {distinct:?}");
}

#[test]
fn values_beyond_the_lanes_and_acc8_layers_are_refused_with_the_reason() {
    let cfg = narrow("default", 2, 2);
    let mut rng = Rng::new(5);
    let spec = ConvSpec::new(1, 16, 6, 16, 3, 1, 1);
    // A bit-sliced layer (one weight of 100: two 4-bit digits) takes no resident tiling (its
    // weight places would multiply by the passes): a given one is refused with the reason.
    let mut layer = narrow_conv(&cfg, &spec, &mut rng, "sliced");
    layer.weight[[0, 0, 0, 0]] = 100;
    let resident = compiler::backend::Tiling {
        tn: 1,
        th: 6,
        tw: 6,
        tco: 1,
        tci: 1,
        order: compiler::backend::LoopOrder::CoOuter,
        col_skip: false,
        resident: true,
        taper: false,
    };
    let mut net = backend::NetBuilder::new(&cfg).unwrap();
    let x = net.input("x", layer.input_shape);
    let e = net.conv_tiled(&layer, x, resident).unwrap_err().to_string();
    assert!(
        e.contains("is resident") && e.contains("bit-sliced (2 passes"),
        "{e}"
    );
    let resident = compiler::backend::Tiling {
        resident: false,
        ..resident
    };
    let y = net.conv_tiled(&layer, x, resident).unwrap();
    let lp = net.finish(&[y]).unwrap();
    let xv = rng.act(layer.input_shape, -8, 7);
    let (out, _) = run(&cfg, &lp, &[xv.view()]);
    util::assert_same(&out[0], &layer.reference(xv.view()), "sliced, tiled");

    // Outputs wider than the lanes are stored as digit planes for the host; a layer
    // reading them on the accelerator is refused with the reason.
    let mut layer = narrow_conv(&cfg, &spec, &mut rng, "wide_output");
    layer.requant.hi = 100;
    let mut net = backend::NetBuilder::new(&cfg).unwrap();
    let x = net.input("x", layer.input_shape);
    let y = net.conv(&layer, x).unwrap();
    let next = narrow_conv(&cfg, &spec, &mut rng, "next");
    let e = net.conv(&next, y).unwrap_err().to_string();
    assert!(
        e.contains("stored as 2 digit planes, which only the host reads") && e.contains("'next'"),
        "{e}"
    );

    let add = QAdd {
        name: "add".into(),
        mul_a: 1,
        mul_b: 1,
        requant: within(requant(&mut rng, 16, false, 8.0, false), 4),
    };
    let e = backend::compile_add(&cfg, &add, [1, 16, 4, 4])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("8-bit ACC loads") && e.contains("activations are 4 bits"),
        "{e}"
    );
}
