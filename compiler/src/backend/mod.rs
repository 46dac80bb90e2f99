//! Back end: quantized layers ([`crate::qlayer`]) to accelerator programs, bit-exact with the
//! layers' `reference` functions on any valid [`HwConfig`] with inputs and weights of 2, 4
//! or 8 bits and int32 accumulators.
//!
//! # Using it
//!
//! One layer:
//!
//! ```no_run
//! # use compiler::{backend, qlayer::QConv2d};
//! # fn f(conv: &QConv2d, x: ndarray::ArrayView4<i8>) -> Result<(), Box<dyn std::error::Error>> {
//! let cfg = isa::HwConfig::default();
//! let lp = backend::compile_conv(&cfg, conv)?; // Err: run the layer on the CPU instead
//! let mut dev = vta_sim::FsimDevice::new(&cfg);
//! let y = lp.run(&mut dev, x)?; // == conv.reference(x)
//! # Ok(()) }
//! ```
//!
//! Several layers in one program, activations staying packed in DRAM ([`NetBuilder`]):
//!
//! ```no_run
//! # use compiler::{backend::NetBuilder, qlayer::*};
//! # fn f(shape: [usize; 4], c1: &QConv2d, c2: &QConv2d, add: &QAdd, pool: &QMaxPool) -> Result<(), compiler::backend::BackendError> {
//! let mut net = NetBuilder::new(&isa::HwConfig::default())?;
//! let x = net.input("x", shape); // NCHW
//! let p = net.max_pool(pool, x)?;
//! let y = net.conv(c1, p)?;
//! let y = net.conv(c2, y)?;
//! let z = net.add(add, y, p)?;
//! let program = net.finish(&[z])?;
//! # Ok(()) }
//! ```
//!
//! [`compile_sequence`] does the same for a chain of [`QLayer`]s.
//!
//! # What is supported, what is refused
//!
//! Every function returns [`BackendError`] instead of a program that would not reproduce the
//! reference exactly; `Unsupported` and `UnsupportedConfig` mean "run this layer on the CPU".
//!
//! - **Configs**: `INP_WIDTH` and `WGT_WIDTH` of 2, 4 or 8 bits and `ACC_WIDTH = 32` (the
//!   qlayers are int8 x int8 -> int32); any tile shape (BATCH, BLOCK_IN != BLOCK_OUT) and
//!   buffer sizes. Without `ALU_MUL`, requant multipliers must be 0 or powers of two (applied
//!   as shifts). On narrower lanes, a layer's inputs must fit them (quantize them to the
//!   lane width); weights wider than the lanes (the 8-bit first and last layers of a 4-bit
//!   network) run bit-sliced, as one GEMM pass per weight digit combined exactly in the
//!   accumulators ([`slice`]); a convolution's or dense layer's outputs wider than the lanes
//!   (8-bit logits) are stored as digit planes for the host ([`out_digits`]), other layers'
//!   must fit ([`check_out_range`]); and layers that read activations through 8-bit ACC loads
//!   need 8-bit activations ([`check_acc8_reads`]).
//! - **Conv**: any kernel size, stride, padding (horizontal padding at most 15, the LOAD pad
//!   field; vertical padding of any size), channel and batch counts (padded to the blocks),
//!   groups (block-diagonal weights that keep only the input blocks each output block needs;
//!   depthwise convolutions run on the ALU at their real MAC count, see [`depthwise`]),
//!   per-tensor and
//!   per-channel requantization. A convolution over few input channels that reads a tensor
//!   from the host takes it with its kernel's columns or whole window folded into the
//!   channels ([`fold`]: ResNet's first layer does 10 instead of 49 GEMM micro-ops per
//!   output pixel and channel block).
//! - **Dense**: as a 1x1 convolution over a `[N, K, 1, 1]` tensor, tiled over the batch (a
//!   dense layer after flattening a `[N, C, H, W]` tensor is the `H x W` convolution with the
//!   reshaped weights, and reads the packed tensor directly).
//! - **Add**, **MaxPool**, **GlobalAvgPool**: on the ALU (see [`eltwise`]); refused only when
//!   one tile (a row band of a plane) does not fit half of ACC, or a max pool's horizontal
//!   padding exceeds 15.
//! - **Affine**, **Binary** (Add/Mul with a broadcast `[N, C, 1, 1]` operand), **LeakyRelu**,
//!   nearest **Upsample**: on the ALU (see [`pointwise`]); without `ALU_MUL`, refused when a
//!   multiplier is not a power of two.
//! - **Concat** and channel **Slice** (Split): free with one sample block (the inputs'
//!   producers write into the concatenation's output, a slice is a view of its input), else
//!   copies of whole channel blocks (see [`concat`](mod@concat)); refused when an input or the
//!   slice does not start at a block boundary.
//! - **Table** activations (any elementwise int8 -> int8 function as its 256 values): on the
//!   ALU's activation lookup table of configs with `ALU_LUT` (see [`table`], [`lut`]);
//!   refused otherwise: they run on the CPU.
//!
//! # Structure
//!
//! - [`layout`]: host packing of activations, weights and constants.
//! - [`epilogue`]: requantization as ALU instructions.
//! - [`tiling`]: convolution geometry, tilings and the cost model that chooses them.
//! - [`fold`]: folding a convolution's window into the input channels.
//! - [`roofline`]: memory and compute bounds of a program, from its instructions.
//! - [`emit`]: checked DMA, micro-op kernels, the token protocol.
//! - [`slice`]: weight digits of layers whose weights are wider than the lanes.
//! - `conv`, [`depthwise`], [`eltwise`], [`pointwise`], [`concat`](mod@concat), [`table`], [`lut`]: the
//!   lowerings; [`net`]: programs of several layers.
//!
//! # Chaining
//!
//! [`NetBuilder`] emits layers into one program: every tensor is a DRAM segment in the packed
//! layout of [`layout`], a layer reads its inputs' segments and writes its own, and a token
//! barrier between layers orders one layer's stores before the next layer's loads. The
//! per-layer emitters (`conv::emit`, `eltwise::emit_*`) take their DRAM segments from the
//! caller, so other program structures (several programs, segments shared with a host
//! runtime) can reuse them. Intermediate tensors each get their own segment (no liveness-based
//! reuse yet) except views (the inputs of a concatenation written in place, channel slices:
//! see [`net`]), and a convolution cannot read a tensor the accelerator wrote when
//! `BLOCK_IN != BLOCK_OUT` (its error asks for a host re-layout between programs).

pub mod concat;
pub mod conv;
pub mod depthwise;
pub mod eltwise;
pub mod emit;
pub mod epilogue;
pub mod fold;
pub mod layout;
pub mod lut;
pub mod net;
pub mod pointwise;
pub mod roofline;
pub mod slice;
pub mod table;
pub mod tiling;

use isa::HwConfig;
use ndarray::Array4;

use crate::qlayer::{QAdd, QConv2d, QDense, QGlobalAvgPool, QMaxPool};

pub use fold::Fold;
pub use layout::ActLayout;
pub use net::{Home, LayerInfo, LayerKind, LayerProgram, Movement, NetBuilder, Tensor};
pub use tiling::{CostEstimate, LoopOrder, Tiling};
pub use vta_runtime::program::{DeviceProgram, TensorSegment};

/// Why a layer could not be compiled.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The config cannot run the qlayers exactly at all.
    #[error(
        "config {config} cannot run quantized layers exactly: {reason}; run the network on the CPU"
    )]
    UnsupportedConfig { config: String, reason: String },
    /// The layer itself is malformed (its reference is not defined either).
    #[error("layer '{layer}' is invalid: {reason}")]
    InvalidLayer { layer: String, reason: String },
    /// The accelerator cannot run this layer exactly; run it on the CPU.
    #[error(
        "layer '{layer}' cannot run on the accelerator ({config}): {reason}; run it on the CPU"
    )]
    Unsupported {
        layer: String,
        config: String,
        reason: String,
    },
    /// A tensor is not in the layout a layer needs.
    #[error("tensor '{tensor}': {reason}")]
    Layout { tensor: String, reason: String },
    /// The builder refused the program (a back-end bug).
    #[error("building the program failed: {0}")]
    Build(#[from] isa::builder::BuildError),
    /// An internal invariant failed (a back-end bug).
    #[error("internal back-end error: {0}")]
    Internal(String),
}

/// Why a compiled program did not run.
pub use vta_runtime::program::RunError;

/// Checks that `cfg` can run the qlayers: inputs and weights of 2, 4 or 8 bits (inputs whose
/// values fit the lanes; wider weights run bit-sliced, [`slice`]; wider outputs as digit
/// planes, [`out_digits`]) and 32-bit accumulators.
pub fn check_config(cfg: &HwConfig) -> Result<(), BackendError> {
    let (i, w, a) = (cfg.inp_width(), cfg.wgt_width(), cfg.acc_width());
    if i > 8 || w > 8 || a != 32 {
        return Err(BackendError::UnsupportedConfig {
            config: cfg.config_string(),
            reason: format!(
                "inputs, weights and accumulators are {i}/{w}/{a} bits; the quantized layers \
                 need inputs and weights of 2, 4 or 8 bits and 32-bit accumulators"
            ),
        });
    }
    Ok(())
}

/// The values a signed lane of `bits` bits holds.
pub fn lane_range(bits: u32) -> (i32, i32) {
    (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
}

/// Checks that a layer's output clamp `[lo, hi]` fits the config's output lanes (`OUT_WIDTH
/// = INP_WIDTH`), which STORE truncates to.
pub fn check_out_range(cfg: &HwConfig, layer: &str, lo: i32, hi: i32) -> Result<(), BackendError> {
    let bits = cfg.inp_width();
    let (min, max) = lane_range(bits);
    if lo < min || hi > max {
        return Err(BackendError::Unsupported {
            layer: layer.into(),
            config: cfg.config_string(),
            reason: format!(
                "its outputs span [{lo}, {hi}] and the core's {bits}-bit output lanes hold \
                 [{min}, {max}] (quantize the layer's output to {bits} bits)"
            ),
        });
    }
    Ok(())
}

/// The digit planes a convolution or dense layer stores its outputs in: 1 when the clamp `[lo,
/// hi]` fits the output lanes, else the `8 / OUT_WIDTH` planes of int8 values
/// ([`ActLayout`]'s digit planes, which the host reads: a layer reading activations takes
/// only values that fit the lanes).
pub fn out_digits(cfg: &HwConfig, lo: i32, hi: i32) -> usize {
    let (min, max) = lane_range(cfg.inp_width());
    if lo < min || hi > max {
        (8 / cfg.inp_width()) as usize
    } else {
        1
    }
}

/// Refuses a layer that reads activations through 8-bit ACC loads (element-wise layers,
/// pools, the ALU's depthwise convolution) on a core whose activations are narrower.
pub fn check_acc8_reads(cfg: &HwConfig, layer: &str) -> Result<(), BackendError> {
    if cfg.inp_width() != 8 {
        return Err(BackendError::Unsupported {
            layer: layer.into(),
            config: cfg.config_string(),
            reason: format!(
                "the layer reads its inputs through 8-bit ACC loads and the core's \
                 activations are {} bits",
                cfg.inp_width()
            ),
        });
    }
    Ok(())
}

/// The 1x1 convolution over `[n, K, 1, 1]` that computes `layer` for a batch of `n`.
pub fn dense_as_conv(layer: &QDense, n: usize) -> QConv2d {
    let (m, k) = layer.weight.dim();
    // (any memory order: the front end may hand over a transposed view)
    let weight = Array4::from_shape_fn((m, k, 1, 1), |(o, i, _, _)| layer.weight[[o, i]]);
    QConv2d {
        name: layer.name.clone(),
        input_shape: [n, k, 1, 1],
        weight,
        bias: layer.bias.clone(),
        stride: (1, 1),
        pad: [0; 4],
        groups: 1,
        requant: layer.requant.clone(),
    }
}

/// A one-layer program for a convolution: input segment `input` (packed NCHW of
/// `layer.input_shape`), output `<name>.out`.
pub fn compile_conv(cfg: &HwConfig, layer: &QConv2d) -> Result<LayerProgram, BackendError> {
    let mut net = NetBuilder::new(cfg)?;
    let x = net.input("input", layer.input_shape);
    let y = net.conv(layer, x)?;
    net.finish(&[y])
}

/// A one-layer program for a dense layer over a batch of `batch` vectors; it takes and
/// returns `[N, K, 1, 1]` / `[N, M, 1, 1]` tensors (see [`dense_input`], [`dense_output`]).
pub fn compile_dense(
    cfg: &HwConfig,
    layer: &QDense,
    batch: usize,
) -> Result<LayerProgram, BackendError> {
    let mut net = NetBuilder::new(cfg)?;
    let x = net.input("input", [batch, layer.weight.dim().1, 1, 1]);
    let y = net.dense(layer, x)?;
    net.finish(&[y])
}

/// `[N, K]` as the `[N, K, 1, 1]` tensor a dense program takes.
pub fn dense_input(x: &ndarray::Array2<i8>) -> Array4<i8> {
    let (n, k) = x.dim();
    Array4::from_shape_fn((n, k, 1, 1), |(b, i, _, _)| x[[b, i]])
}

/// A dense program's `[N, M, 1, 1]` output as `[N, M]`.
pub fn dense_output(y: Array4<i8>) -> ndarray::Array2<i8> {
    let (n, m, _, _) = y.dim();
    ndarray::Array2::from_shape_fn((n, m), |(b, o)| y[[b, o, 0, 0]])
}

/// A one-layer program adding inputs `input_a` and `input_b` of logical shape `shape`.
pub fn compile_add(
    cfg: &HwConfig,
    layer: &QAdd,
    shape: [usize; 4],
) -> Result<LayerProgram, BackendError> {
    let mut net = NetBuilder::new(cfg)?;
    let a = net.input("input_a", shape);
    let b = net.input("input_b", shape);
    let y = net.add(layer, a, b)?;
    net.finish(&[y])
}

/// A one-layer max-pool program over an input of logical shape `shape`.
pub fn compile_max_pool(
    cfg: &HwConfig,
    layer: &QMaxPool,
    shape: [usize; 4],
) -> Result<LayerProgram, BackendError> {
    let mut net = NetBuilder::new(cfg)?;
    let x = net.input("input", shape);
    let y = net.max_pool(layer, x)?;
    net.finish(&[y])
}

/// A one-layer global-average-pool program over an input of logical shape `shape`.
pub fn compile_global_avg_pool(
    cfg: &HwConfig,
    layer: &QGlobalAvgPool,
    shape: [usize; 4],
) -> Result<LayerProgram, BackendError> {
    let mut net = NetBuilder::new(cfg)?;
    let x = net.input("input", shape);
    let y = net.global_avg_pool(layer, x)?;
    net.finish(&[y])
}

/// A one-layer program for any plan layer over inputs of the given logical NCHW shapes
/// (segments `input`, `input_a`/`input_b`, or `input_0`.. for a concatenation; a dense layer
/// reads `[N, K, 1, 1]`).
pub fn compile_layer(
    cfg: &HwConfig,
    layer: &vta_runtime::plan::Layer,
    shapes: &[[usize; 4]],
) -> Result<LayerProgram, BackendError> {
    use vta_runtime::plan::Layer;
    let first = *shapes.first().ok_or_else(|| BackendError::InvalidLayer {
        layer: layer.name().into(),
        reason: "no input shape".into(),
    })?;
    let mut net = NetBuilder::new(cfg)?;
    let two = |net: &mut NetBuilder| -> Result<(Tensor, Tensor), BackendError> {
        let second = *shapes.get(1).ok_or_else(|| BackendError::InvalidLayer {
            layer: layer.name().into(),
            reason: "a second input shape is needed".into(),
        })?;
        Ok((net.input("input_a", first), net.input("input_b", second)))
    };
    let y = match layer {
        Layer::Add(l) => {
            let (a, b) = two(&mut net)?;
            net.add(l, a, b)?
        }
        Layer::Binary(l) => {
            let (a, b) = two(&mut net)?;
            net.binary(l, a, b)?
        }
        Layer::Concat(l) => {
            let xs: Vec<Tensor> = shapes
                .iter()
                .enumerate()
                .map(|(k, &s)| net.input(&format!("input_{k}"), s))
                .collect();
            net.concat(l, &xs, None)?
        }
        _ => {
            let x = net.input("input", first);
            match layer {
                Layer::Conv2d(l) => net.conv(l, x)?,
                Layer::Dense(l) => net.dense(l, x)?,
                Layer::MaxPool(l) => net.max_pool(l, x)?,
                Layer::GlobalAvgPool(l) => net.global_avg_pool(l, x)?,
                Layer::Table(l) => net.table(l, x)?,
                Layer::Affine(l) => net.affine(l, x)?,
                Layer::LeakyRelu(l) => net.leaky_relu(l, x)?,
                Layer::Upsample(l) => net.upsample(l, x)?,
                Layer::Slice(l) => net.slice_channels(l, x)?,
                Layer::Add(_) | Layer::Binary(_) | Layer::Concat(_) => {
                    unreachable!("layers of several inputs above")
                }
            }
        }
    };
    net.finish(&[y])
}

/// One layer of a [`compile_sequence`] chain. Each layer reads the previous layer's output
/// (the first reads the network input); `Add` also reads an earlier tensor: `residual = 0` is
/// the network input, `residual = k` the output of layer `k - 1`.
#[derive(Debug, Clone, Copy)]
pub enum QLayer<'a> {
    Conv(&'a QConv2d),
    /// Reads `[N, K, 1, 1]`.
    Dense(&'a QDense),
    Add {
        layer: &'a QAdd,
        residual: usize,
    },
    MaxPool(&'a QMaxPool),
    GlobalAvgPool(&'a QGlobalAvgPool),
}

/// One program running `layers` in order on an input of logical shape `input_shape`, with
/// the intermediate activations kept packed in DRAM; its output is the last layer's.
pub fn compile_sequence(
    cfg: &HwConfig,
    input_shape: [usize; 4],
    layers: &[QLayer],
) -> Result<LayerProgram, BackendError> {
    let mut net = NetBuilder::new(cfg)?;
    let mut tensors = vec![net.input("input", input_shape)];
    for (i, l) in layers.iter().enumerate() {
        let x = tensors[i];
        let y = match *l {
            QLayer::Conv(c) => net.conv(c, x)?,
            QLayer::Dense(d) => net.dense(d, x)?,
            QLayer::MaxPool(p) => net.max_pool(p, x)?,
            QLayer::GlobalAvgPool(p) => net.global_avg_pool(p, x)?,
            QLayer::Add { layer, residual } => {
                let r = *tensors
                    .get(residual)
                    .filter(|_| residual <= i)
                    .ok_or_else(|| BackendError::InvalidLayer {
                        layer: layer.name.clone(),
                        reason: format!("residual {residual} is not an earlier tensor (0..={i})"),
                    })?;
                net.add(layer, x, r)?
            }
        };
        tensors.push(y);
    }
    let last = *tensors.last().expect("the input");
    if layers.is_empty() {
        return Err(BackendError::InvalidLayer {
            layer: "sequence".into(),
            reason: "no layers".into(),
        });
    }
    net.finish(&[last])
}
