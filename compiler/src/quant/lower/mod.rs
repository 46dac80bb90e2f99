//! Lowering of a simplified graph to a [`Plan`]: pattern matching of quantized layers
//! (post-training, QDQ, QOperator), CPU fallback, and the support table.
//!
//! Every graph tensor gets a *representation* in the plan ([`Repr`]): the exact ONNX value,
//! a uint8 tensor held as int8 (`u - 128`), or a float tensor held as int8 `q` with
//! `x = scale * (q - zero_point)` (exact for a DequantizeLinear output, the quantization
//! itself for post-training quantization). Accelerator layers consume and produce the int8
//! forms; CPU ops get the exact form, materialized on demand by Dequantize / I8ToU8 steps.
//!
//! This module holds the lowerer's state and bookkeeping, the CPU fallback, the dispatch by
//! op type and [`lower`]; representations, layer outputs, weights and quantization
//! parameters, and the layers themselves are in the submodules.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ndarray::{Array2, Array4, ArrayD, Dimension};
use petgraph::stable_graph::NodeIndex;

use super::calibrate::Stats;
use super::requant::{
    choose_requant, choose_requant_with_constants, constant_output, conv_acc_ranges, AccRange,
    ConstantChannel, MulRounding, RequantChoice,
};
use super::{
    config_blocker, is_quantized, ActivationClip, FrontendOptions, RequantFidelity, WeightClip,
    WeightRounding,
};
use crate::frontend::FrontendError;
use crate::graph::ops::average_pool::AveragePool;
use crate::graph::ops::batch_norm::BatchNorm;
use crate::graph::ops::binary::{BinKind, Binary};
use crate::graph::ops::clip::Clip;
use crate::graph::ops::concat::Concat;
use crate::graph::ops::conv::Conv;
use crate::graph::ops::conv_integer::ConvInteger;
use crate::graph::ops::conv_transpose::ConvTranspose;
use crate::graph::ops::depth_space::DepthSpace;
use crate::graph::ops::dequantize_linear::DequantizeLinear;
use crate::graph::ops::dynamic_quantize_linear::DynamicQuantizeLinear;
use crate::graph::ops::expand::Expand;
use crate::graph::ops::flatten::Flatten;
use crate::graph::ops::gemm::Gemm;
use crate::graph::ops::global_average_pool::GlobalAveragePool;
use crate::graph::ops::internal::{I8Offset, I8ToU8, U8ToI8};
use crate::graph::ops::kernels::{dims4, Geometry};
use crate::graph::ops::matmul::MatMul;
use crate::graph::ops::matmul_integer::MatMulInteger;
use crate::graph::ops::max_pool::MaxPool;
use crate::graph::ops::pad::Pad;
use crate::graph::ops::prelu::PRelu;
use crate::graph::ops::qlinear_conv::QLinearConv;
use crate::graph::ops::qlinear_matmul::QLinearMatMul;
use crate::graph::ops::quantize_linear::{quantize_value, QParams, QuantizeLinear};
use crate::graph::ops::relu::Relu;
use crate::graph::ops::reshape::Reshape;
use crate::graph::ops::resize::Resize;
use crate::graph::ops::rnn::Recurrent;
use crate::graph::ops::slice::Slice;
use crate::graph::ops::split::Split;
use crate::graph::ops::squeeze::Squeeze;
use crate::graph::ops::tile::Tile;
use crate::graph::ops::transpose::Transpose;
use crate::graph::ops::unary::Unary;
use crate::graph::ops::{Activation, Op};
use crate::graph::plan::{CpuOp, QuantParams, StepKind, ValueId};
use crate::graph::{
    DType, Fact, Graph, Layer, Plan, Step, Support, SupportEntry, SupportTable, Tensor, TensorId,
};
use crate::qlayer::{QAdd, QConcat, QConv2d, QDense, QGlobalAvgPool, QMaxPool, QSlice, Requant};

mod eltwise;
mod int8_ops;
mod linear;
mod output;
mod repr;
mod weights;

/// How a graph tensor is held in the plan.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Repr {
    /// The plan value is the ONNX tensor.
    Exact(ValueId),
    /// ONNX uint8 tensor `u`, held as int8 `u - 128`.
    Shifted(ValueId),
    /// ONNX float tensor `x = scale * (q - zp)` with `q` an int8 plan value.
    Deq { q: ValueId, scale: f32, zp: i32 },
    /// ONNX int8/uint8 tensor `v + offset` whose quantization saturates to a narrow range,
    /// held centred in the signed lanes (uint4 `[0, 15]` as `[-8, 7]`, offset 8; see
    /// [`centring`]).
    Offset(ValueId, i32),
}

/// The shift that centres a quantization's int8-domain saturation range `[lo, hi]` in the
/// signed lanes (`[0, 15]` -> `[-8, 7]`), so that a narrow unsigned tensor fits lanes of its
/// width; 0 for the full int8 range and for ranges already centred.
fn centring((lo, hi): (i32, i32)) -> i32 {
    (lo + hi + 1).div_euclid(2)
}

/// How an integer ONNX tensor of type `dt` is held when its int8 plan value is `v` and the
/// ONNX value is `v + offset`.
fn held(v: ValueId, offset: i32, dt: DType) -> Repr {
    match (offset, dt) {
        (0, _) => Repr::Exact(v),
        (128, DType::U8) => Repr::Shifted(v),
        _ => Repr::Offset(v, offset),
    }
}

/// How to represent an op's output given the int8 value computed for it.
type ReprOf = Box<dyn Fn(ValueId) -> Repr>;

/// An int8 activation operand of a layer.
#[derive(Debug, Clone, Copy)]
struct QIn {
    v: ValueId,
    scale: f64,
    /// Zero point in the int8 domain.
    zp: i32,
}

/// Output quantization of a layer.
#[derive(Debug, Clone, Copy)]
struct QOut {
    scale: f64,
    zp: i32,
    lo: i8,
    hi: i8,
    /// ONNX dtype of the output tensor (uint8 outputs are held shifted).
    dtype: DType,
    /// With a fused QuantizeLinear: the ONNX output is the int8 result plus this (128 for
    /// uint8, plus the [`centring`] of a narrow range).
    offset: i32,
    /// Extra deviation (output LSBs) from fusing a double quantization (QDQ `Q -> DQ ->
    /// Relu -> Q` after the layer) into one requantization.
    extra_dev: f64,
}

/// Where a layer's quantized output goes.
#[derive(Debug, Clone)]
struct OutTarget {
    /// The graph tensor that receives the layer's output.
    tensor: TensorId,
    /// The Q node fused as the output quantization (QDQ), if any.
    q_node: Option<NodeIndex>,
    /// Further nodes fused into the layer (a QDQ `DQ -> Relu -> Q` chain after it).
    chain: Vec<NodeIndex>,
}

struct Lowerer<'g> {
    g: &'g Graph,
    opts: &'g FrontendOptions,
    stats: Option<&'g Stats>,
    blocker: Option<String>,
    /// The int8 range post-training quantization gives activations: the core's input lanes
    /// (`[-8, 7]` for int4), or all of int8.
    act: (i32, i32),
    /// The largest magnitude post-training quantization gives weights (127 for int8, 7 for
    /// int4, 1 for int2: symmetric, narrow).
    wgt_max: i32,
    pow2_only: bool,
    quantized_model: bool,
    plan: Plan,
    repr: HashMap<TensorId, Repr>,
    exact_cache: HashMap<TensorId, ValueId>,
    i8_cache: HashMap<TensorId, ValueId>,
    q8_cache: HashMap<TensorId, QIn>,
    consts: HashMap<TensorId, ValueId>,
    /// Known value range of int8 plan values (from the producing layer's clamp).
    ranges: HashMap<ValueId, (i32, i32)>,
    status: HashMap<String, Support>,
    claimed: HashSet<NodeIndex>,
    /// The layers whose weights are rounded with error feedback.
    feedback: Option<&'g super::gptq::Feedbacks>,
    /// The first and last weight layers, kept at 8-bit weights
    /// ([`FrontendOptions::keep_ends_8bit`]).
    ends: HashSet<NodeIndex>,
}

type R<T> = Result<T, String>;

/// Largest accepted bound on `|accelerator - exact|` before rounding, in output LSBs, for
/// [`RequantFidelity::WithinOneLsb`]: two reals closer than 1 round (with any tie rule) to
/// integers at most 1 apart, and clamping keeps that; the margin covers ONNX's own f32
/// rounding of `acc * M`.
const MAX_DEVIATION: f64 = 0.99;

fn f32_of(t: &Tensor) -> R<Vec<f32>> {
    Ok(t.as_f32()?.iter().cloned().collect())
}

fn scalar_i32(t: Option<&Tensor>) -> i32 {
    t.map_or(0, |t| t.to_i64_vec().first().copied().unwrap_or(0) as i32)
}

fn offset_of(dt: DType) -> i32 {
    if dt == DType::U8 {
        128
    } else {
        0
    }
}

fn clamp_i8(v: i64) -> i8 {
    v.clamp(-128, 127) as i8
}

/// State to roll back a failed lowering attempt.
struct Snapshot {
    steps: usize,
    values: usize,
    repr: HashMap<TensorId, Repr>,
    exact_cache: HashMap<TensorId, ValueId>,
    i8_cache: HashMap<TensorId, ValueId>,
    q8_cache: HashMap<TensorId, QIn>,
    consts: HashMap<TensorId, ValueId>,
    ranges: HashMap<ValueId, (i32, i32)>,
    status: HashMap<String, Support>,
    claimed: HashSet<NodeIndex>,
}

impl<'g> Lowerer<'g> {
    fn snapshot(&self) -> Snapshot {
        Snapshot {
            steps: self.plan.steps.len(),
            values: self.plan.values.len(),
            repr: self.repr.clone(),
            exact_cache: self.exact_cache.clone(),
            i8_cache: self.i8_cache.clone(),
            q8_cache: self.q8_cache.clone(),
            consts: self.consts.clone(),
            ranges: self.ranges.clone(),
            status: self.status.clone(),
            claimed: self.claimed.clone(),
        }
    }

    fn restore(&mut self, s: Snapshot) {
        self.plan.steps.truncate(s.steps);
        self.plan.values.truncate(s.values);
        self.repr = s.repr;
        self.exact_cache = s.exact_cache;
        self.i8_cache = s.i8_cache;
        self.q8_cache = s.q8_cache;
        self.consts = s.consts;
        self.ranges = s.ranges;
        self.status = s.status;
        self.claimed = s.claimed;
    }

    /// The widths post-training quantization gives weights and activations: `int8`, or
    /// e.g. `w4a4`.
    fn ptq_widths(&self) -> String {
        let bits = |max: i32| (max + 1).ilog2() + 1;
        let (w, a) = (bits(self.wgt_max), bits(self.act.1));
        if (w, a) == (8, 8) {
            "int8".into()
        } else {
            format!("w{w}a{a}")
        }
    }

    fn node_name(&self, ix: NodeIndex) -> String {
        self.g.dag[ix].name.clone()
    }

    fn set_status(&mut self, ix: NodeIndex, s: Support) {
        let n = &self.g.dag[ix];
        let primary = n.origin.first().map_or(n.name.clone(), |o| o.name.clone());
        for o in n.origin.iter().skip(1) {
            let how = self
                .g
                .fusions
                .iter()
                .find(|(f, _, _)| f == o)
                .map_or_else(|| "fused".to_string(), |(_, _, h)| h.clone());
            self.status.insert(
                o.name.clone(),
                Support::Fused {
                    into: primary.clone(),
                    how,
                },
            );
        }
        self.status.insert(primary, s);
    }

    /// Marks the DequantizeLinear nodes of a QDQ layer's weights (and bias) as fused into it.
    fn set_fused_params(&mut self, wdq: NodeIndex, bdq: Option<NodeIndex>, into: &str) {
        self.set_fused(wdq, into, "quantized weights of the layer");
        if let Some(b) = bdq {
            self.set_fused(b, into, "quantized bias of the layer");
        }
    }

    fn set_fused(&mut self, ix: NodeIndex, into: &str, how: &str) {
        let into = into.to_string();
        let how = how.to_string();
        let n = &self.g.dag[ix];
        for o in &n.origin {
            self.status.insert(
                o.name.clone(),
                Support::Fused {
                    into: into.clone(),
                    how: how.clone(),
                },
            );
        }
    }

    fn push(
        &mut self,
        name: &str,
        inputs: Vec<ValueId>,
        outputs: Vec<ValueId>,
        kind: StepKind,
    ) -> usize {
        self.plan.steps.push(Step {
            name: name.to_string(),
            inputs,
            outputs,
            kind,
        });
        self.plan.steps.len() - 1
    }

    fn const_value(&mut self, t: TensorId, v: Arc<Tensor>) -> ValueId {
        if let Some(&id) = self.consts.get(&t) {
            return id;
        }
        let id = self.plan.add_constant(self.g.tensors[t].name.clone(), v);
        self.consts.insert(t, id);
        id
    }

    /// Runs node `ix` on the CPU with ONNX semantics.
    fn cpu(&mut self, ix: NodeIndex, reason: String) -> R<()> {
        let n = &self.g.dag[ix];
        let name = n.name.clone();
        let ins = n.inputs.clone();
        let outs = n.outputs.clone();
        let op = n.op.to_any();
        let mut args = Vec::new();
        for t in ins {
            args.push(match t {
                None => None,
                Some(t) => Some(self.exact(t, &format!("'{name}'"))?),
            });
        }
        let mut ovs = Vec::new();
        for &o in &outs {
            let v =
                self.plan
                    .add_value(self.g.tensors[o].name.clone(), self.g.fact(o).clone(), None);
            self.repr.insert(o, Repr::Exact(v));
            ovs.push(v);
        }
        let inputs = args.iter().flatten().copied().collect();
        let step = self.push(
            &name,
            inputs,
            ovs,
            StepKind::Cpu(CpuOp {
                op,
                args,
                reason: reason.clone(),
            }),
        );
        self.set_status(ix, Support::Cpu { step, reason });
        Ok(())
    }

    /// Adds an accelerator step producing `target`'s tensor.
    /// Offloads an imported integer layer (QLinearConv, QLinearMatMul) whose output is an
    /// integer ONNX tensor of type `ydt`: a uint8 output is held shifted by -128.
    fn integer_output(
        &mut self,
        ix: NodeIndex,
        layer: Layer,
        input: ValueId,
        out: QOut,
        note: String,
        ydt: DType,
    ) -> usize {
        let t = self.g.dag[ix].outputs[0];
        let target = OutTarget {
            tensor: t,
            q_node: None,
            chain: vec![],
        };
        let step = self.accel(ix, layer, vec![input], out, target, note);
        let v = self.plan.steps[step].outputs[0];
        self.repr.insert(
            t,
            if ydt == DType::U8 {
                Repr::Shifted(v)
            } else {
                Repr::Exact(v)
            },
        );
        step
    }

    fn accel(
        &mut self,
        ix: NodeIndex,
        layer: Layer,
        inputs: Vec<ValueId>,
        out: QOut,
        target: OutTarget,
        note: String,
    ) -> usize {
        let t = target.tensor;
        let name = self.node_name(ix);
        let fact = Fact::new(DType::I8, self.g.fact(t).shape.clone());
        let qp = QuantParams {
            scale: out.scale as f32,
            zero_point: out.zp,
        };
        let v = self
            .plan
            .add_value(format!("{}:i8", self.g.tensors[t].name), fact, Some(qp));
        self.ranges
            .insert(v, (i32::from(out.lo), i32::from(out.hi)));
        let kind = layer.kind();
        let step = self.push(&name, inputs, vec![v], StepKind::Accel(layer));
        let r = match target.q_node {
            None => Repr::Deq {
                q: v,
                scale: out.scale as f32,
                zp: out.zp,
            },
            Some(_) => held(v, out.offset, out.dtype),
        };
        self.repr.insert(t, r);
        self.set_status(
            ix,
            Support::Accel {
                layer: kind,
                step,
                note,
            },
        );
        if let Some(q) = target.q_node {
            self.claimed.insert(q);
            self.set_fused(
                q,
                &name,
                "output quantization of the layer (its requantization)",
            );
        }
        for &c in &target.chain {
            self.claimed.insert(c);
            self.set_fused(
                c,
                &name,
                "activation between quantizations, fused into the layer's requantization clamp",
            );
        }
        step
    }

    /// Tries the accelerator (or a free/int8 lowering) for a node; `Err` gives the reason
    /// for the CPU fallback.
    fn try_lower(&mut self, ix: NodeIndex) -> R<()> {
        let any = self.g.dag[ix].op.as_any();
        // Representation-only ops are handled whatever the config.
        if any.is::<QuantizeLinear>() {
            return self.quantize_node(ix);
        }
        if any.is::<DequantizeLinear>() {
            return self.dequantize_node(ix);
        }
        if let Some(b) = &self.blocker {
            return Err(b.clone());
        }
        if any.is::<Conv>() {
            self.conv(ix)
        } else if any.is::<Gemm>() || any.is::<MatMul>() {
            self.dense(ix)
        } else if any.is::<QLinearConv>() {
            self.qlinear_conv(ix)
        } else if any.is::<QLinearMatMul>() {
            self.qlinear_matmul(ix)
        } else if any.is::<Binary>() && self.g.fact(self.g.dag[ix].outputs[0]).rank() == 0 {
            // onnxruntime's dynamic quantization multiplies per-inference scales.
            Err("scalar arithmetic (such as a scale computed per inference), on the CPU".into())
        } else if any.is::<Binary>()
            && self.g.dag[ix].inputs.iter().flatten().any(|&t| {
                self.g.fact(t).rank() == 0
                    && self.g.const_value(t).is_none()
                    && self.const_dq(t).is_none()
            })
        {
            Err("an operand is a scalar computed at run time (such as a per-inference scale); the accelerator's layers take constant scales".into())
        } else if any.is::<Binary>() {
            let n = &self.g.dag[ix];
            let has_const = n
                .inputs
                .iter()
                .flatten()
                .any(|&t| self.g.const_value(t).is_some() || self.const_dq(t).is_some());
            if has_const {
                self.binary_const(ix)
            } else {
                self.binary(ix)
            }
        } else if any.is::<GlobalAveragePool>() {
            self.global_pool(ix)
        } else if any.is::<AveragePool>() {
            self.avg_pool(ix)
        } else if any.is::<MaxPool>() {
            self.max_pool(ix)
        } else if any.is::<Flatten>() || any.is::<Reshape>() || any.is::<Squeeze>() {
            self.reshape_int8(ix)
        } else if any.is::<Split>() || any.is::<Slice>() {
            self.channel_slices(ix)
        } else if any.is::<Transpose>()
            || any.is::<Pad>()
            || any.is::<DepthSpace>()
            || any.is::<Expand>()
            || any.is::<Tile>()
        {
            self.move_int8(ix, "data movement on the int8 tensor (exact)")
        } else if any.is::<Resize>() {
            self.resize(ix)
        } else if any.is::<Concat>() {
            self.concat(ix)
        } else if any.is::<Unary>() {
            self.unary(ix)
        } else if any.is::<PRelu>() {
            self.prelu(ix)
        } else if any.is::<Relu>() || any.is::<Clip>() {
            self.clamp(ix)
        } else if any.is::<BatchNorm>() {
            self.batch_norm(ix)
        } else if any.is::<ConvTranspose>() {
            self.conv_transpose(ix)
        } else if any.is::<ConvInteger>() || any.is::<MatMulInteger>() {
            let n = &self.g.dag[ix];
            let dynamic_zp = n
                .inputs
                .get(2)
                .copied()
                .flatten()
                .is_some_and(|t| self.g.const_value(t).is_none());
            if dynamic_zp {
                Err("produces int32 accumulators without requantization, with an input zero point computed per inference (DynamicQuantizeLinear); the accelerator's layers output requantized int8, so it runs exactly on the CPU".into())
            } else {
                Err("produces int32 accumulators without requantization; the accelerator's layers output int8".into())
            }
        } else if let Some(rnn) = any.downcast_ref::<Recurrent>() {
            Err(if rnn.quantized {
                "its matrix products quantize their inputs per inference (the whole sequence, then each step's state), exact int32 on the CPU; the gates are float functions of them"
            } else {
                "a recurrent network runs in float on the CPU: each step's matrix products need the previous step's state, and its gates are float functions of them"
            }
            .into())
        } else if any.is::<DynamicQuantizeLinear>() {
            Err("computes its scale and zero point per inference from the tensor's range (a reduction over the whole tensor), on the CPU".into())
        } else {
            Err(format!(
                "no accelerator layer for {}",
                self.g.dag[ix].op.op_type()
            ))
        }
    }
}

/// Post-training statistics in which every float Concat's inputs and output share the
/// largest range among them, so that their producers requantize to one scale and the
/// concatenation is pure data movement (as TFLite does).
fn unify_concat_ranges(g: &Graph, stats: &Stats) -> Stats {
    let mut s = stats.clone();
    // Twice, for concatenations of concatenations.
    for _ in 0..2 {
        for ix in g.dag.node_indices() {
            let n = &g.dag[ix];
            if !n.op.as_any().is::<Concat>() || g.fact(n.outputs[0]).dtype != DType::F32 {
                continue;
            }
            let ts: Vec<TensorId> = n
                .inputs
                .iter()
                .flatten()
                .chain(&n.outputs)
                .copied()
                .collect();
            let m = ts
                .iter()
                .map(|&t| s.max_abs.get(t).copied().unwrap_or(0.0))
                .fold(0f32, f32::max);
            for t in ts {
                if let Some(v) = s.max_abs.get_mut(t) {
                    *v = m;
                }
            }
        }
    }
    s
}

/// Lowers a simplified graph (see [`crate::quant::plan_graph`]).
pub(crate) fn lower(
    g: &Graph,
    stats: Option<&Stats>,
    cfg: &isa::HwConfig,
    opts: &FrontendOptions,
) -> Result<(Plan, SupportTable), FrontendError> {
    let blocker = if !opts.offload {
        Some("offloading disabled by the options".to_string())
    } else {
        config_blocker(cfg)
    };
    let quantized_model = is_quantized(g);
    let act = crate::backend::lane_range(if quantized_model {
        8
    } else {
        cfg.inp_width().min(8)
    });
    let clip_acts = match opts.activation_clip {
        ActivationClip::Max => false,
        ActivationClip::MinError => true,
        ActivationClip::Auto => act.1 < 127,
    };
    let clipped = match stats {
        Some(s) if clip_acts && !quantized_model && blocker.is_none() => Some(Stats {
            max_abs: super::act_clip::clip_ranges(g, s, act.1).map_err(|message| {
                FrontendError::Calibration {
                    file: g.source.clone(),
                    message,
                }
            })?,
            ..s.clone()
        }),
        _ => None,
    };
    let unified = clipped
        .as_ref()
        .or(stats)
        .map(|s| unify_concat_ranges(g, s));
    // A quantized model's tensors keep the int8 range its quantizer gave them; a core with
    // narrower lanes runs only the layers whose values fit (the back end checks).
    let ptq_bits = |bits: u32| if quantized_model { 8 } else { bits.min(8) };
    let wgt_max = crate::backend::lane_range(ptq_bits(cfg.wgt_width())).1;
    let feedback = match opts.weight_rounding {
        WeightRounding::Nearest => false,
        WeightRounding::ErrorFeedback => true,
        WeightRounding::Auto => wgt_max < 127,
    };
    let feedback = match stats {
        Some(s) if feedback && !quantized_model && blocker.is_none() => Some(
            s.feedback
                .get_or_compute(|| super::gptq::collect(g, &s.inputs))
                .map_err(|message| FrontendError::Calibration {
                    file: g.source.clone(),
                    message,
                })?,
        ),
        _ => None,
    };
    let ends = if opts.keep_ends_8bit && wgt_max < 127 && !quantized_model {
        let layers = super::gptq::weight_layers(g);
        layers
            .first()
            .into_iter()
            .chain(layers.last())
            .copied()
            .collect()
    } else {
        HashSet::new()
    };
    let mut lw = Lowerer {
        g,
        opts,
        stats: unified.as_ref(),
        blocker,
        act,
        wgt_max,
        pow2_only: !cfg.alu_mul,
        quantized_model,
        plan: Plan {
            source: g.source.clone(),
            ..Default::default()
        },
        repr: HashMap::new(),
        exact_cache: HashMap::new(),
        i8_cache: HashMap::new(),
        q8_cache: HashMap::new(),
        consts: HashMap::new(),
        ranges: HashMap::new(),
        status: HashMap::new(),
        claimed: HashSet::new(),
        feedback,
        ends,
    };
    let other = |message: String| FrontendError::Other {
        file: g.source.clone(),
        message,
    };
    for &t in &g.inputs {
        let v = lw
            .plan
            .add_value(g.tensors[t].name.clone(), g.fact(t).clone(), None);
        lw.plan.inputs.push(v);
        lw.repr.insert(t, Repr::Exact(v));
    }
    for ix in g.topo_order() {
        if lw.claimed.contains(&ix) {
            continue;
        }
        // A failed attempt is rolled back entirely (conversion steps it may have added
        // included) before the node goes to the CPU.
        let snap = lw.snapshot();
        if let Err(reason) = lw.try_lower(ix) {
            lw.restore(snap);
            lw.cpu(ix, reason).map_err(other)?;
        }
    }
    for &t in &g.outputs {
        let v = lw.exact(t, "the model output").map_err(other)?;
        lw.plan.values[v].name = g.tensors[t].name.clone();
        lw.plan.outputs.push(v);
    }
    let mut entries = Vec::new();
    for o in &g.onnx_nodes {
        let support = lw
            .status
            .get(&o.name)
            .cloned()
            .or_else(|| {
                g.removed
                    .iter()
                    .find(|(r, _)| r == o)
                    .map(|(_, how)| Support::Removed { how: how.clone() })
            })
            .unwrap_or(Support::NotAnalyzed {
                reason: "internal: no status".into(),
            });
        entries.push(SupportEntry {
            node: o.name.clone(),
            op_type: o.op_type.clone(),
            support,
        });
    }
    for (&v, &(lo, hi)) in &lw.ranges {
        if let Some(value) = lw.plan.values.get_mut(v) {
            value.range = Some((lo.clamp(-128, 127) as i8, hi.clamp(-128, 127) as i8));
        }
    }
    lw.plan.check_budget(opts.memory_budget).map_err(other)?;
    Ok((lw.plan, SupportTable { entries }))
}
