//! Quantization and lowering of a graph to a [`Plan`].
//!
//! Four kinds of models are accepted (the element-wise operators of edge CNNs, Sigmoid,
//! HardSwish, SiLU, LeakyRelu, Resize, ConvTranspose, Concat/Split, ..., in the first three:
//! single-input functions as 256-entry tables, the others as ALU layers or exact int8 data
//! movement):
//!
//! - **float models**: post-training quantization from calibration inputs. Activations are
//!   per-tensor symmetric int8 (zero point 0, so the accelerator's zero padding is exact),
//!   scale `max|x| / 127` over the calibration set (after BatchNorm folding and activation
//!   fusion, so a Relu'd tensor's range is its post-Relu range); weights per output channel
//!   symmetric int8 (`max|w[o]| / 127`, then widened by at most `1/mul` so that the
//!   requantization multiplier is exact, see [`requant`]); bias int32 at scale `s_x * s_w[o]`;
//! - **QDQ models** (QuantizeLinear/DequantizeLinear around float ops, as onnxruntime's
//!   `quantize_static(..., QuantFormat.QDQ)` writes them): `DQ(x) -> Conv(DQ(w), bias) ->
//!   [Relu] -> Q` and the same around Gemm/MatMul, Add and GlobalAveragePool become one
//!   accelerator layer each, as do the element-wise operators around which `DQ -> op -> Q`
//!   sits (tables, affine maps, LeakyRelu, Add/Mul of two tensors, nearest upsampling,
//!   channel Concat/Split; see `lower::eltwise`); MaxPool/Reshape/Flatten on DQ'd tensors
//!   work on the int8 data directly;
//! - **QOperator models**: QLinearConv and QLinearMatMul (constant weights) become layers
//!   (a MatMul's `[..., N, K]` operand of rank 3 or 4 as `[rows, K]`, reshaped on the CPU);
//!   ConvInteger/MatMulInteger (int32 outputs, no requantization) run on the CPU;
//!   onnxruntime's `com.microsoft` quantized operators are expanded by the importer into
//!   `DQ -> op -> Q` ([`crate::onnx::contrib`]) and lowered as QDQ;
//! - **dynamically quantized models** (onnxruntime's `quantize_dynamic`): DynamicQuantizeLinear
//!   computes each activation's scale per inference, ConvInteger/MatMulInteger take it as a
//!   run-time zero point and `com.microsoft.DynamicQuantizeLSTM` quantizes inside; all of it
//!   runs exactly on the CPU, since the accelerator's layers store requantized int8 with
//!   constant scales, not int32 accumulators.
//!
//! Zero points: int8 activations with zero point 0 map directly; uint8 tensors are held as
//! `uint8 - 128` (exact), so uint8 with zero point 128 is int8 with zero point 0. A tensor
//! quantized to a narrow range (an imported uint4 `[0, 15]`, a QONNX unsigned 4-bit
//! activation) is held centred in the signed lanes (`[-8, 7]`, the zero point moved with it),
//! so that it fits lanes of its width. Other input
//! zero points are folded into the bias (`sum (x - z) w = sum x w - z sum w`); a padded layer
//! needs the zero point as its pad value while the accelerator pads with 0, so its input is
//! first padded with the zero point by an exact int8 data-movement step on the CPU and the
//! layer runs unpadded. A GlobalAveragePool with an input zero point becomes a depthwise
//! convolution with unit weights, the zero point in its bias. Output zero points are the
//! requantization's `zero_point`.
//!
//! Requantization: the accelerator's [`crate::qlayer::Requant`] approximates the real
//! multiplier `M = s_x s_w / s_y` by `mul / 2^(pre + shift)` with round-half-up, while ONNX
//! rounds `acc * M` (computed in float) half to even; imported convolution and dense layers
//! clamp the accumulator first where that keeps more multiplier bits
//! ([`requant::choose_requant_clamped`]). For those, exact ties do not occur with
//! onnxruntime's f32 multipliers, so the tie rule does not matter there, the multiplier's
//! precision does; a dyadic multiplier (a pool over `2^k` pixels, an Add of equal scales)
//! has ties, which the accelerator rounds up where ONNX rounds to even (1 LSB). A channel
//! whose output is the same for every reachable accumulator (a "dead" channel whose weight
//! scale is 1e-20) takes no part in choosing the shared shift: its weights become 0 and its
//! bias the accumulator that requantizes to that output exactly (see [`requant`]).
//! [`RequantFidelity`] chooses what an
//! imported quantized layer must satisfy to be offloaded: a proven bound below 1 LSB on the
//! deviation before rounding (two reals less than 1 apart round to integers at most 1 apart,
//! so results differ from ONNX's by at most 1, and rarely), or bit-exactness. A layer that does not qualify runs on the CPU with ONNX's exact integer
//! semantics, and the support table says why. Nothing is approximated silently.

pub mod act_clip;
pub mod calibrate;
pub mod gptq;
pub(crate) mod lower;
pub mod requant;

use ndarray::ArrayD;

use crate::frontend::FrontendError;
use crate::graph::ops::conv_integer::ConvInteger;
use crate::graph::ops::dequantize_linear::DequantizeLinear;
use crate::graph::ops::dynamic_quantize_linear::DynamicQuantizeLinear;
use crate::graph::ops::matmul_integer::MatMulInteger;
use crate::graph::ops::qlinear_conv::QLinearConv;
use crate::graph::ops::qlinear_matmul::QLinearMatMul;
use crate::graph::ops::quantize_linear::QuantizeLinear;
use crate::graph::{Graph, Plan, SupportTable};

pub use calibrate::Stats;
pub use requant::{
    choose_requant, choose_requant_clamped, choose_requant_with_constants, constant_output,
    AccRange, ConstantChannel, MulRounding, RequantChoice,
};

/// What an imported quantized layer (QDQ or QOperator) must satisfy to be offloaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RequantFidelity {
    /// The accelerator's requantization deviates from the exact real product by less than one
    /// output LSB (bound 0.99) for every reachable accumulator (proven from the integer
    /// weights and the input range), so outputs differ from ONNX's by at most 1, and only
    /// where the exact result lies near a rounding boundary. QDQ layers (whose ONNX semantics
    /// is float arithmetic) are held to the same bound.
    #[default]
    WithinOneLsb,
    /// Offload only layers whose result is bit-identical to ONNX's for every reachable
    /// accumulator (an integer multiplier, exact); everything else runs on the CPU exactly.
    BitExact,
}

/// Options of the front end.
#[derive(Debug, Clone, PartialEq)]
pub struct FrontendOptions {
    pub fidelity: RequantFidelity,
    /// `false` runs every node on the CPU (the plan is then the exact ONNX model, after
    /// post-training quantization is skipped): a debugging aid.
    pub offload: bool,
    /// The most bytes the model's tensors may take together (see
    /// [`vta_runtime::budget`]); a model asking for more is refused before anything is
    /// allocated.
    pub memory_budget: u64,
    /// Shapes of inputs by name, for models whose inputs have symbolic dimensions besides
    /// the batch (fixed dimensions must agree; an empty name is the only input's).
    pub input_shapes: Vec<(String, Vec<usize>)>,
    /// How post-training quantization chooses each output channel's weight range.
    pub weight_clip: WeightClip,
    /// How post-training quantization rounds weights to their levels.
    pub weight_rounding: WeightRounding,
    /// Below 8-bit weights, post-training quantization keeps the first and the last layer's
    /// weights at 8 bits (where a network loses the most accuracy); a core with narrower
    /// lanes then runs those two layers bit-sliced ([`crate::backend::slice`]).
    pub keep_ends_8bit: bool,
    /// How post-training quantization chooses each activation tensor's range.
    pub activation_clip: ActivationClip,
}

impl Default for FrontendOptions {
    fn default() -> Self {
        FrontendOptions {
            fidelity: RequantFidelity::default(),
            offload: true,
            memory_budget: vta_runtime::budget::DEFAULT_MEMORY_BUDGET,
            input_shapes: Vec::new(),
            weight_clip: WeightClip::default(),
            weight_rounding: WeightRounding::default(),
            keep_ends_8bit: true,
            activation_clip: ActivationClip::default(),
        }
    }
}

/// How post-training quantization chooses a channel's weight range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WeightClip {
    /// The largest magnitude: no weight is clipped.
    Max,
    /// The range with the least squared rounding-and-clipping error over the channel's
    /// weights (searched from the largest magnitude down to a fifth of it): at 4 bits and
    /// below, clipping a few outliers buys finer steps for all the others.
    MinError,
    /// [`WeightClip::MinError`] below 8-bit weights, [`WeightClip::Max`] at 8 bits.
    #[default]
    Auto,
}

/// How post-training quantization rounds each weight to a level of its channel's scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WeightRounding {
    /// To the nearest level, each weight on its own.
    Nearest,
    /// With error feedback over the calibration inputs ([`gptq`]): each rounding's error is
    /// compensated by the weights not yet rounded, so the layer's outputs stay close.
    /// Layers it does not reach (grouped or dilated convolutions, reductions wider than
    /// [`gptq::MAX_COLUMNS`]) round to nearest, as the compile report says.
    ErrorFeedback,
    /// [`WeightRounding::ErrorFeedback`] below 8-bit weights, [`WeightRounding::Nearest`] at
    /// 8 bits.
    #[default]
    Auto,
}

/// How post-training quantization chooses an activation tensor's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ActivationClip {
    /// The largest magnitude over the calibration samples.
    Max,
    /// The range with the least squared quantization error over the calibration values
    /// ([`act_clip`]).
    MinError,
    /// [`ActivationClip::MinError`] below 8-bit activations, [`ActivationClip::Max`] at 8.
    #[default]
    Auto,
}

/// Whether the graph is already quantized (has Q/DQ or QOperator nodes).
pub fn is_quantized(g: &Graph) -> bool {
    g.dag.node_indices().any(|ix| {
        let a = g.dag[ix].op.as_any();
        a.is::<QuantizeLinear>()
            || a.is::<DequantizeLinear>()
            || a.is::<QLinearConv>()
            || a.is::<QLinearMatMul>()
            || a.is::<ConvInteger>()
            || a.is::<MatMulInteger>()
            || a.is::<DynamicQuantizeLinear>()
    })
}

/// Quantizes (float models, with `calibration`) and lowers a simplified graph to a plan and
/// its support table. See [`crate::frontend::load_and_plan`].
pub fn plan_graph(
    g: &Graph,
    calibration: &[ArrayD<f32>],
    cfg: &isa::HwConfig,
    opts: &FrontendOptions,
) -> Result<(Plan, SupportTable), FrontendError> {
    let stats = if !is_quantized(g) && opts.offload {
        if calibration.is_empty() {
            return Err(FrontendError::Calibration {
                file: g.source.clone(),
                message: "the model is a float model: post-training quantization needs calibration inputs (one or more .npy samples of the model's input)".into(),
            });
        }
        Some(calibrate::calibrate(g, calibration).map_err(|message| {
            FrontendError::Calibration {
                file: g.source.clone(),
                message,
            }
        })?)
    } else {
        None
    };
    lower::lower(g, stats.as_ref(), cfg, opts)
}

/// Lowers a simplified graph with calibration statistics computed earlier by
/// [`calibrate::calibrate`] on the same graph (or stored with a compiled model), instead of
/// calibration inputs: the same plan as [`plan_graph`] with those inputs, without running the
/// float model again. `stats` is needed exactly when [`plan_graph`] would need calibration
/// inputs (a float model with offloading enabled), and must have one entry per graph tensor.
pub fn plan_graph_with_stats(
    g: &Graph,
    stats: Option<&Stats>,
    cfg: &isa::HwConfig,
    opts: &FrontendOptions,
) -> Result<(Plan, SupportTable), FrontendError> {
    let needed = !is_quantized(g) && opts.offload;
    let calib_err = |message: String| FrontendError::Calibration {
        file: g.source.clone(),
        message,
    };
    match stats {
        None if needed => {
            return Err(calib_err(
                "the model is a float model: post-training quantization needs calibration \
                 statistics"
                    .into(),
            ))
        }
        Some(s) if s.max_abs.len() != g.tensors.len() => {
            return Err(calib_err(format!(
                "the statistics cover {} tensors but the graph has {}",
                s.max_abs.len(),
                g.tensors.len()
            )))
        }
        _ => {}
    }
    lower::lower(g, stats.filter(|_| needed), cfg, opts)
}

/// Why an accelerator configuration cannot run the quantized layers at all, if it cannot
/// (inputs or weights of 16 bits, or 16-bit accumulators).
pub fn config_blocker(cfg: &isa::HwConfig) -> Option<String> {
    crate::backend::check_config(cfg)
        .err()
        .map(|e| e.to_string())
}
