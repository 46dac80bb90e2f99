//! Convolutions over few input channels that read a network input take it folded (a row of
//! the window, or the whole window, in the channel axis, packed by the host;
//! `compiler::backend::fold`): bit-exact against the qlayer reference and race-free on every
//! test config, with fewer GEMM micro-ops than unfolded.

#[path = "backend_util.rs"]
mod util;

use compiler::backend::{self, BackendError, Fold, NetBuilder};
use compiler::qlayer::{QConv2d, QMaxPool};
use util::{check_conv, config, run, ConvSpec, Draw, Rng, CONFIGS};

fn specs() -> Vec<(&'static str, ConvSpec)> {
    vec![
        ("rgb_7x7_s2_p3", ConvSpec::new(1, 3, 20, 16, 7, 2, 3)),
        (
            "gray_3x3_p1_batch2",
            ConvSpec::new(2, 1, 9, 8, 3, 1, 1).relu(),
        ),
        (
            "c4_5x5_s2_asym_pad",
            ConvSpec::new(1, 4, 11, 20, 5, 2, 0)
                .pad4([2, 1, 0, 2])
                .per_channel(),
        ),
        ("c6_3x3_batch3", ConvSpec::new(3, 6, 8, 9, 3, 1, 1)),
        (
            "c2_1x5_rect",
            ConvSpec {
                k: (1, 5),
                stride: (1, 2),
                pad: [0, 2, 0, 2],
                ..ConvSpec::new(1, 2, 6, 7, 1, 1, 0)
            },
        ),
    ]
}

/// The same layer compiled with input folding off.
fn unfolded(cfg: &isa::HwConfig, layer: &QConv2d) -> Result<backend::LayerProgram, BackendError> {
    let mut net = NetBuilder::new(cfg)?;
    net.set_input_folding(false);
    let x = net.input("input", layer.input_shape);
    let y = net.conv(layer, x)?;
    net.finish(&[y])
}

#[test]
fn small_channel_convolutions_fold_their_input_and_stay_exact() {
    let mut rng = Rng::new(21);
    for name in CONFIGS {
        let cfg = config(name);
        let block_in = cfg.block_in() as usize;
        for (what, spec) in specs() {
            let layer = spec.build(&mut rng, what);
            let x = rng.act(layer.input_shape, -128, 127);
            let (lp, rep) = check_conv(&cfg, &layer, &x);
            let info = &lp.layers[0];
            let (taps, plain_taps) = (
                backend::fold::taps(&layer, info.fold, block_in),
                backend::fold::taps(&layer, None, block_in),
            );
            // The cost model folds when it pays; at least when it halves the GEMM work.
            let best = [Fold::Columns, Fold::Window]
                .map(|f| backend::fold::taps(&layer, Some(f), block_in))
                .into_iter()
                .min()
                .unwrap();
            if 2 * best <= plain_taps {
                assert!(info.fold.is_some(), "{name} {what}: not folded");
            }
            if info.fold.is_none() {
                continue;
            }
            assert!(taps < plain_taps);
            let plain = unfolded(&cfg, &layer).unwrap();
            assert_eq!(plain.layers[0].fold, None);
            let (_, plain_rep) = run(&cfg, &plain, &[x.view()]);
            let uops = |r: &drivers::RunReport| r.get("gemm_uops").unwrap();
            assert!(
                uops(&rep) < uops(&plain_rep),
                "{name} {what}: {} GEMM micro-ops folded ({:?}), {} unfolded",
                uops(&rep),
                info.fold,
                uops(&plain_rep)
            );
            assert!(lp.inputs[0].layout.fold.is_some());
        }
    }
}

#[test]
fn wide_channel_convolutions_are_not_folded() {
    let cfg = config("default");
    let mut rng = Rng::new(5);
    let layer = ConvSpec::new(1, 16, 6, 16, 3, 1, 1).build(&mut rng, "c16");
    let x = rng.act(layer.input_shape, -128, 127);
    let (lp, _) = check_conv(&cfg, &layer, &x);
    assert_eq!(lp.layers[0].fold, None);
    assert_eq!(lp.inputs[0].layout.fold, None);
}

/// Padding beyond the LOAD pad field refuses the plain convolution; folded, the host packs
/// the horizontal padding.
#[test]
fn a_folded_window_runs_what_the_pad_fields_cannot() {
    let mut rng = Rng::new(8);
    for name in CONFIGS {
        let cfg = config(name);
        let layer = ConvSpec::new(1, 5, 5, 6, 3, 1, 0)
            .pad4([1, 16, 1, 17])
            .build(&mut rng, "wide_pad");
        let e = unfolded(&cfg, &layer).unwrap_err();
        assert!(e.to_string().contains("x-pad"), "{e}");
        let x = rng.act(layer.input_shape, -128, 127);
        let (lp, _) = check_conv(&cfg, &layer, &x);
        assert!(lp.layers[0].fold.is_some(), "{name}");
    }
}

/// A folded input belongs to the convolution that folded it: another reader in the same
/// program is refused with a layout error (the compiler's launches then give that reader a
/// program of its own).
#[test]
fn a_folded_input_has_no_other_reader() {
    let cfg = config("default");
    let mut rng = Rng::new(3);
    let layer = ConvSpec::new(1, 3, 8, 16, 3, 1, 1).build(&mut rng, "c");
    let mut net = NetBuilder::new(&cfg).unwrap();
    let x = net.input("x", layer.input_shape);
    net.conv(&layer, x).unwrap();
    let pool = QMaxPool {
        name: "pool".into(),
        kernel: (2, 2),
        stride: (2, 2),
        pad: [0; 4],
    };
    let e = net.max_pool(&pool, x).unwrap_err();
    assert!(
        matches!(e, BackendError::Layout { .. }) && e.to_string().contains("folded"),
        "{e}"
    );
}
