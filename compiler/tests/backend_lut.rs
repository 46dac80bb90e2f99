//! Table activations on the accelerator (`backend::lut`, configs with `ALU_LUT`): a
//! convolution followed by two elementwise functions given as tables (an int8 sigmoid and
//! SiLU computed here as a quantized graph would), in one program, bit-exact with the layers'
//! references on the functional simulator and on the RTL.

#[path = "backend_util.rs"]
mod util;

use std::path::PathBuf;

use compiler::backend::lut::TableActivation;
use compiler::backend::NetBuilder;
use drivers::RunTimeout;
use isa::HwConfig;
use util::{assert_same, ConvSpec, Draw, Rng};
use vta_sim::rtl::{RtlDevice, RtlOptions};
use vta_sim::FsimDevice;

/// The table of `f` between int8 scales: `q_out = round(f(q_in * s_in) / s_out)`, clipped.
fn table(name: &str, s_in: f64, s_out: f64, f: impl Fn(f64) -> f64) -> TableActivation {
    TableActivation {
        name: name.into(),
        table: std::array::from_fn(|e| {
            let x = f64::from(e as u8 as i8) * s_in;
            (f(x) / s_out).round().clamp(-128.0, 127.0) as i8
        }),
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn rtl(cfg: &HwConfig) -> RtlDevice {
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
fn conv_then_two_table_activations_on_fsim_and_rtl() {
    let cfg = HwConfig::preset("lut").unwrap();
    let mut rng = Rng::new(0x1a7);
    let conv = ConvSpec::new(1, 16, 10, 24, 3, 1, 1).build(&mut rng, "conv");
    let silu = table("silu", 8.0 / 128.0, 8.0 / 128.0, |x| x * sigmoid(x));
    let sig = table("sigmoid", 8.0 / 128.0, 1.0 / 127.0, sigmoid);
    let mut net = NetBuilder::new(&cfg).unwrap();
    let x = net.input("x", conv.input_shape);
    let y = net.conv(&conv, x).unwrap();
    let y = net.table_activation(&silu, y).unwrap();
    let y = net.table_activation(&sig, y).unwrap();
    let lp = net.finish(&[y]).unwrap();
    let input = rng.act(conv.input_shape, -128, 127);
    let want = sig.reference(silu.reference(conv.reference(input.view()).view()).view());
    let (fsim, _) = lp
        .run_all(
            &mut FsimDevice::checking_races(&cfg),
            &[input.view()],
            RunTimeout::default(),
        )
        .unwrap();
    assert_same(&fsim[0], &want, "fsim");
    let (on_rtl, report) = lp
        .run_all(&mut rtl(&cfg), &[input.view()], RunTimeout::default())
        .unwrap();
    assert_same(&on_rtl[0], &want, "rtl");
    assert!(report.get("cycles").is_some_and(|c| c > 0));
}
