//! The ResNet-18 convolutions C2..C11 of VTA's `test_benchmark_topi_conv2d` (batch = BATCH,
//! conv -> requant -> relu clip), on the functional simulator against the qlayer reference.
//! Full sizes of C2 and C11 run on the default config; the others run with their spatial
//! size reduced (full channel counts on the default config, quartered on the others) to keep
//! the reference affordable in debug builds. `cargo bench -p compiler` runs all at full size.

#[path = "backend_util.rs"]
mod util;

use compiler::qlayer::QConv2d;
use util::{check_conv, config, ConvSpec, Draw, Rng};

/// (name, H=W, Cin, Cout, K, pad, stride) from vta.md section 9.2.
const RESNET: [(&str, usize, usize, usize, usize, usize, usize); 10] = [
    ("C2", 56, 64, 64, 3, 1, 1),
    ("C3", 56, 64, 128, 3, 1, 2),
    ("C4", 56, 64, 128, 1, 0, 2),
    ("C5", 28, 128, 128, 3, 1, 1),
    ("C6", 28, 128, 256, 3, 1, 2),
    ("C7", 28, 128, 256, 1, 0, 2),
    ("C8", 14, 256, 256, 3, 1, 1),
    ("C9", 14, 256, 512, 3, 1, 2),
    ("C10", 14, 256, 512, 1, 0, 2),
    ("C11", 7, 512, 512, 3, 1, 1),
];

fn layer(cfg_batch: usize, i: usize, hw: usize, ch_div: usize) -> QConv2d {
    let (name, _, cin, cout, k, pad, stride) = RESNET[i];
    let spec = ConvSpec::new(cfg_batch, cin / ch_div, hw, cout / ch_div, k, stride, pad).relu();
    spec.build(&mut Rng::new(0xC0 + i as u64), name)
}

fn run_case(cfg_name: &str, i: usize, max_hw: usize, ch_div: usize) {
    let cfg = config(cfg_name);
    let hw = RESNET[i].1.min(max_hw);
    let l = layer(cfg.batch() as usize, i, hw, ch_div);
    let x = Rng::new(0xD0 + i as u64).act(l.input_shape, -128, 127);
    let (lp, report) = check_conv(&cfg, &l, &x);
    // The cost model predicts the traffic exactly (groups == 1).
    let e = lp.layers[0].estimate.unwrap();
    for (what, want) in [
        ("inp_load_bytes", e.inp_bytes),
        ("wgt_load_bytes", e.wgt_bytes),
        ("acc_load_bytes", e.acc_bytes),
        ("out_store_bytes", e.out_bytes),
        ("gemm_uops", e.gemm_uops),
        ("alu_uops", e.alu_uops),
    ] {
        assert_eq!(
            report.get(what),
            Some(want),
            "{cfg_name} {}: {what}",
            l.name
        );
    }
}

#[test]
fn c2_full_size_on_default() {
    run_case("default", 0, 56, 1);
}

#[test]
fn c11_full_size_on_default() {
    run_case("default", 9, 7, 1);
}

#[test]
fn c3_to_c10_reduced_on_default() {
    for i in 1..9 {
        run_case("default", i, 8, 1);
    }
}

#[test]
fn c2_to_c11_reduced_on_batched_rect_small() {
    for cfg in ["batched", "rect", "small"] {
        for i in 0..10 {
            run_case(cfg, i, 6, 4);
        }
    }
}
