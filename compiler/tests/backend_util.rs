//! Helpers shared by the back-end tests (included with `#[path]`; as a test target of its own
//! it has no tests): random test data, random quantized layers, and running a compiled
//! program on the functional simulator against the qlayer reference.
#![allow(dead_code)]

use compiler::backend::LayerProgram;
use compiler::qlayer::{QConv2d, Requant};
use drivers::{RunReport, RunTimeout};
use isa::HwConfig;
use ndarray::{Array2, Array4, ArrayView4};
use vta_sim::FsimDevice;

/// The configs every layer is tested on.
pub const CONFIGS: [&str; 4] = ["default", "batched", "rect", "small"];

pub fn config(name: &str) -> HwConfig {
    HwConfig::preset(name).unwrap()
}

pub use isa::rng::Rng;

/// Random test data from the toolkit's RNG.
pub trait Draw {
    /// A fair coin.
    fn coin(&mut self) -> bool;
    /// An activation tensor with values in `lo..=hi`.
    fn act(&mut self, shape: [usize; 4], lo: i64, hi: i64) -> Array4<i8>;
    /// A matrix with values in `lo..=hi`.
    fn mat(&mut self, r: usize, c: usize, lo: i64, hi: i64) -> Array2<i8>;
}

impl Draw for Rng {
    fn coin(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }
    fn act(&mut self, shape: [usize; 4], lo: i64, hi: i64) -> Array4<i8> {
        let [n, c, h, w] = shape;
        Array4::from_shape_simple_fn((n, c, h, w), || self.range(lo, hi) as i8)
    }
    fn mat(&mut self, r: usize, c: usize, lo: i64, hi: i64) -> Array2<i8> {
        Array2::from_shape_simple_fn((r, c), || self.range(lo, hi) as i8)
    }
}

/// A requantization that maps accumulators of about `typical` magnitude onto the int8 range,
/// with a random zero point and clip (`relu`: clip at 0 from below).
pub fn requant(
    rng: &mut Rng,
    channels: usize,
    per_channel: bool,
    typical: f64,
    relu: bool,
) -> Requant {
    let shift = rng.range(8, 16) as u8;
    let target = 90.0 * f64::from(1u32 << shift) / typical.max(1.0);
    let one = |rng: &mut Rng| {
        let m = (target * (0.5 + rng.range(0, 100) as f64 / 100.0)).clamp(1.0, 32767.0) as i16;
        if rng.range(0, 9) == 0 {
            -m
        } else {
            m
        }
    };
    let mul = if per_channel {
        (0..channels).map(|_| one(rng)).collect()
    } else {
        vec![one(rng)]
    };
    let (lo, hi) = if relu {
        (0, rng.range(60, 127) as i8)
    } else {
        let lo = rng.range(-128, -60) as i8;
        (lo, rng.range(60, 127) as i8)
    };
    Requant {
        pre_shift: rng.range(0, 2) as u8,
        acc_clamp: None,
        mul,
        shift,
        zero_point: rng.range(-8, 8) as i8,
        lo,
        hi,
    }
}

/// Shape of a random convolution.
#[derive(Debug, Clone, Copy)]
pub struct ConvSpec {
    pub n: usize,
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub o: usize,
    pub k: (usize, usize),
    pub stride: (usize, usize),
    pub pad: [usize; 4],
    pub groups: usize,
    pub per_channel: bool,
    pub relu: bool,
}

impl ConvSpec {
    pub fn new(
        n: usize,
        c: usize,
        hw: usize,
        o: usize,
        k: usize,
        stride: usize,
        pad: usize,
    ) -> Self {
        ConvSpec {
            n,
            c,
            h: hw,
            w: hw,
            o,
            k: (k, k),
            stride: (stride, stride),
            pad: [pad; 4],
            groups: 1,
            per_channel: false,
            relu: false,
        }
    }
    pub fn groups(mut self, g: usize) -> Self {
        self.groups = g;
        self
    }
    pub fn per_channel(mut self) -> Self {
        self.per_channel = true;
        self
    }
    pub fn relu(mut self) -> Self {
        self.relu = true;
        self
    }
    pub fn pad4(mut self, pad: [usize; 4]) -> Self {
        self.pad = pad;
        self
    }

    pub fn build(&self, rng: &mut Rng, name: &str) -> QConv2d {
        let cg = self.c / self.groups;
        let (kh, kw) = self.k;
        let weight =
            Array4::from_shape_simple_fn((self.o, cg, kh, kw), || rng.range(-128, 127) as i8);
        let bias = (0..self.o).map(|_| rng.range(-20000, 20000)).collect();
        let typical = 64.0 * 74.0 * ((cg * kh * kw) as f64).sqrt();
        QConv2d {
            name: name.into(),
            input_shape: [self.n, self.c, self.h, self.w],
            weight,
            bias,
            stride: self.stride,
            pad: self.pad,
            groups: self.groups,
            requant: requant(rng, self.o, self.per_channel, typical, self.relu),
        }
    }
}

/// Runs `lp` on a fresh functional simulator.
pub fn run(
    cfg: &HwConfig,
    lp: &LayerProgram,
    inputs: &[ArrayView4<i8>],
) -> (Vec<Array4<i8>>, RunReport) {
    let mut dev = FsimDevice::checking_races(cfg);
    lp.run_all(&mut dev, inputs, RunTimeout::default())
        .unwrap_or_else(|e| panic!("{cfg}: run failed: {e}"))
}

/// Asserts equality, reporting the first differing element.
pub fn assert_same(got: &Array4<i8>, want: &Array4<i8>, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    if got != want {
        let (idx, (g, w)) = got
            .indexed_iter()
            .zip(want.iter())
            .map(|((i, g), w)| (i, (*g, *w)))
            .find(|(_, (g, w))| g != w)
            .unwrap();
        let n = got.iter().zip(want.iter()).filter(|(g, w)| g != w).count();
        panic!(
            "{what}: {n} of {} values differ; first at {idx:?}: got {g}, want {w}",
            got.len()
        );
    }
}

/// Compiles and runs `layer` on `cfg`, checks it against the reference; returns the program
/// and the run's report.
pub fn check_conv(cfg: &HwConfig, layer: &QConv2d, x: &Array4<i8>) -> (LayerProgram, RunReport) {
    let lp = compiler::backend::compile_conv(cfg, layer)
        .unwrap_or_else(|e| panic!("{cfg} {}: {e}", layer.name));
    let (out, report) = run(cfg, &lp, &[x.view()]);
    assert_same(
        &out[0],
        &layer.reference(x.view()),
        &format!("{cfg} {}", layer.name),
    );
    (lp, report)
}
