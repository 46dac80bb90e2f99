//! Lowering of a simplified graph to a [`Plan`]: pattern matching of quantized layers
//! (post-training, QDQ, QOperator), CPU fallback, and the support table.
//!
//! Every graph tensor gets a *representation* in the plan ([`Repr`]): the exact ONNX value,
//! a uint8 tensor held as int8 (`u - 128`), or a float tensor held as int8 `q` with
//! `x = scale * (q - zero_point)` (exact for a DequantizeLinear output, the quantization
//! itself for post-training quantization). Accelerator layers consume and produce the int8
//! forms; CPU ops get the exact form, materialized on demand by Dequantize / I8ToU8 steps.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ndarray::{Array2, Array4, ArrayD, Dimension};
use petgraph::stable_graph::NodeIndex;

use super::calibrate::Stats;
use super::requant::{choose_requant, conv_acc_ranges, AccRange, MulRounding, RequantChoice};
use super::{config_blocker, is_quantized, FrontendOptions, RequantFidelity};
use crate::frontend::FrontendError;
use crate::graph::ops::average_pool::AveragePool;
use crate::graph::ops::binary::{BinKind, Binary};
use crate::graph::ops::concat::Concat;
use crate::graph::ops::conv::Conv;
use crate::graph::ops::conv_integer::ConvInteger;
use crate::graph::ops::dequantize_linear::DequantizeLinear;
use crate::graph::ops::flatten::Flatten;
use crate::graph::ops::gemm::Gemm;
use crate::graph::ops::global_average_pool::GlobalAveragePool;
use crate::graph::ops::internal::{I8ToU8, U8ToI8};
use crate::graph::ops::kernels::{dims4, Geometry};
use crate::graph::ops::matmul::MatMul;
use crate::graph::ops::matmul_integer::MatMulInteger;
use crate::graph::ops::max_pool::MaxPool;
use crate::graph::ops::qlinear_conv::QLinearConv;
use crate::graph::ops::qlinear_matmul::QLinearMatMul;
use crate::graph::ops::quantize_linear::{quantize_value, QParams, QuantizeLinear};
use crate::graph::ops::reshape::Reshape;
use crate::graph::ops::squeeze::Squeeze;
use crate::graph::ops::{Activation, Op};
use crate::graph::plan::{CpuOp, QuantParams, StepKind, ValueId};
use crate::graph::{
    DType, Fact, Graph, Layer, Plan, Step, Support, SupportEntry, SupportTable, Tensor, TensorId,
};
use crate::qlayer::{QAdd, QConv2d, QDense, QGlobalAvgPool, QMaxPool, Requant};

/// How a graph tensor is held in the plan.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Repr {
    /// The plan value is the ONNX tensor.
    Exact(ValueId),
    /// ONNX uint8 tensor `u`, held as int8 `u - 128`.
    Shifted(ValueId),
    /// ONNX float tensor `x = scale * (q - zp)` with `q` an int8 plan value.
    Deq { q: ValueId, scale: f32, zp: i32 },
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

    /// A DequantizeLinear node with constant inputs producing `t`, if any.
    fn const_dq(&self, t: TensorId) -> Option<NodeIndex> {
        let p = self.g.producer(t)?;
        let n = &self.g.dag[p];
        let all_const = n
            .inputs
            .iter()
            .flatten()
            .all(|&i| self.g.const_value(i).is_some());
        (n.op.as_any().is::<DequantizeLinear>() && all_const).then_some(p)
    }

    /// The plan value holding exactly the ONNX value of `t` (for CPU ops and outputs).
    fn exact(&mut self, t: TensorId, consumer: &str) -> R<ValueId> {
        if let Some(v) = self.g.tensors[t].value.clone() {
            return Ok(self.const_value(t, v));
        }
        if let Some(&v) = self.exact_cache.get(&t) {
            return Ok(v);
        }
        if let Some(dq) = self.const_dq(t) {
            let n = &self.g.dag[dq];
            let args: Vec<Option<&Tensor>> = n
                .inputs
                .iter()
                .map(|i| i.and_then(|i| self.g.const_value(i)))
                .collect();
            let v = n.op.eval(&args)?.remove(0);
            let id = self.const_value(t, Arc::new(v));
            self.exact_cache.insert(t, id);
            self.set_status(
                dq,
                Support::Removed {
                    how: "dequantized constant, evaluated at compile time".into(),
                },
            );
            return Ok(id);
        }
        let name = self.g.tensors[t].name.clone();
        let fact = self.g.fact(t).clone();
        let v = match self.repr.get(&t).copied() {
            Some(Repr::Exact(v)) => v,
            Some(Repr::Shifted(q)) => {
                let out = self.plan.add_value(name.clone(), fact.clone(), None);
                self.push(
                    &format!("{name}:to_uint8"),
                    vec![q],
                    vec![out],
                    StepKind::Cpu(CpuOp {
                        op: I8ToU8.into(),
                        args: vec![Some(q)],
                        reason: format!("uint8 value for {consumer}"),
                    }),
                );
                out
            }
            Some(Repr::Deq { q, scale, zp }) => {
                let out = self.plan.add_value(name.clone(), fact.clone(), None);
                let step = self.push(
                    &format!("{name}:dequantize"),
                    vec![q],
                    vec![out],
                    StepKind::Dequantize(QuantParams {
                        scale,
                        zero_point: zp,
                    }),
                );
                if let Some(p) = self.g.producer(t) {
                    if self.g.dag[p].op.as_any().is::<DequantizeLinear>() {
                        self.set_status(
                            p,
                            Support::Cpu {
                                step,
                                reason: format!("float value needed by {consumer} (CPU)"),
                            },
                        );
                    }
                }
                out
            }
            None => {
                return Err(format!(
                    "internal: tensor '{name}' has no value in the plan"
                ))
            }
        };
        self.exact_cache.insert(t, v);
        Ok(v)
    }

    /// An integer ONNX tensor as int8: (value, offset) with `onnx = value + offset`.
    fn as_i8(&mut self, t: TensorId) -> R<(ValueId, i32)> {
        if let Some(&v) = self.i8_cache.get(&t) {
            return Ok((v, 128));
        }
        let fact = self.g.fact(t).clone();
        match (self.repr.get(&t).copied(), fact.dtype) {
            (Some(Repr::Shifted(v)), _) => Ok((v, 128)),
            (Some(Repr::Exact(v)), DType::I8) => Ok((v, 0)),
            (Some(Repr::Exact(v)), DType::U8) => {
                let name = self.g.tensors[t].name.clone();
                let out = self.plan.add_value(
                    format!("{name}:i8"),
                    Fact::new(DType::I8, fact.shape.clone()),
                    None,
                );
                self.push(
                    &format!("{name}:to_int8"),
                    vec![v],
                    vec![out],
                    StepKind::Cpu(CpuOp {
                        op: U8ToI8.into(),
                        args: vec![Some(v)],
                        reason: "uint8 held as int8 (u - 128) for the accelerator".into(),
                    }),
                );
                self.i8_cache.insert(t, out);
                Ok((out, 128))
            }
            _ => Err(format!(
                "tensor '{}' ({}) is not an int8/uint8 activation",
                self.g.tensors[t].name, fact
            )),
        }
    }

    /// A float ONNX tensor as a quantized int8 operand.
    fn as_q8(&mut self, t: TensorId) -> R<QIn> {
        if let Some(Repr::Deq { q, scale, zp }) = self.repr.get(&t).copied() {
            return Ok(QIn {
                v: q,
                scale: f64::from(scale),
                zp,
            });
        }
        if let Some(&q) = self.q8_cache.get(&t) {
            return Ok(q);
        }
        let Some(stats) = self.stats else {
            return Err(format!(
                "input '{}' is a float tensor without quantization parameters",
                self.g.tensors[t].name
            ));
        };
        if self.g.tensors[t].value.is_some() {
            return Err(format!("input '{}' is a constant", self.g.tensors[t].name));
        }
        let x = self.exact(t, "quantization")?;
        let scale = stats.scale(t);
        let name = self.g.tensors[t].name.clone();
        let fact = Fact::new(DType::I8, self.g.fact(t).shape.clone());
        let qp = QuantParams {
            scale,
            zero_point: 0,
        };
        let out = self.plan.add_value(format!("{name}:q"), fact, Some(qp));
        self.push(
            &format!("{name}:quantize"),
            vec![x],
            vec![out],
            StepKind::Quantize(qp),
        );
        let q = QIn {
            v: out,
            scale: f64::from(scale),
            zp: 0,
        };
        self.q8_cache.insert(t, q);
        Ok(q)
    }

    fn range_of(&self, v: ValueId) -> (i32, i32) {
        self.ranges.get(&v).copied().unwrap_or((-128, 127))
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
    ) {
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
        let r = match (target.q_node, out.dtype) {
            (None, _) => Repr::Deq {
                q: v,
                scale: out.scale as f32,
                zp: out.zp,
            },
            (Some(_), DType::U8) => Repr::Shifted(v),
            (Some(_), _) => Repr::Exact(v),
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

    fn check_fidelity(&self, c: &RequantChoice, out: &QOut, float_semantics: bool) -> R<String> {
        let r = &c.requant;
        match self.opts.fidelity {
            RequantFidelity::BitExact => {
                if float_semantics {
                    return Err("bit-exact mode: a QDQ layer is defined by float arithmetic, which the integer accelerator cannot reproduce bit for bit".into());
                }
                if c.mul_rel_error != 0.0 || r.pre_shift != 0 || r.shift != 0 {
                    return Err(format!(
                        "bit-exact mode: ONNX rounds acc * M (M = {:.4e}) half to even; the accelerator's mul/2^{} with round-half-up is not bit-identical",
                        c.effective[0],
                        u32::from(r.pre_shift) + u32::from(r.shift)
                    ));
                }
                Ok("bit-exact requantization".into())
            }
            RequantFidelity::WithinOneLsb => {
                let total = c.deviation + out.extra_dev;
                if total >= MAX_DEVIATION {
                    return Err(format!(
                        "the requantization needs more precision than the accelerator's Requant gives (deviation bound {total:.2} LSB >= {MAX_DEVIATION}; mul <= 32767, shift <= 16)"
                    ));
                }
                let fused = if out.extra_dev > 0.0 {
                    format!(" incl. {:.2} from fusing two quantizations", out.extra_dev)
                } else {
                    String::new()
                };
                Ok(format!(
                    "requant mul/2^{} (rel. error {:.1e}, deviation <= {total:.3} LSB{fused}): within 1 of ONNX's result",
                    u32::from(r.pre_shift) + u32::from(r.shift),
                    c.mul_rel_error,
                ))
            }
        }
    }

    fn check_muls(&self, r: &Requant) -> R<()> {
        if self.pow2_only
            && r.mul
                .iter()
                .any(|&m| m <= 0 || !(m as u16).is_power_of_two())
        {
            return Err("the config has no ALU multiplier and the requantization needs one".into());
        }
        Ok(())
    }

    /// The clamp of an activation in the output's int8 domain (ONNX: `Q(clip(r)) =
    /// clamp(Q(r), Q(min), Q(max))` since rounding is monotonic).
    fn out_clamp(act: Option<Activation>, scale: f32, zp: i32) -> (i8, i8) {
        match act {
            None => (-128, 127),
            Some(a) => {
                let q = |v: f32| {
                    if v.is_infinite() {
                        if v > 0.0 {
                            127
                        } else {
                            -128
                        }
                    } else {
                        quantize_value(v, scale, zp, -128, 127)
                    }
                };
                (q(a.min) as i8, q(a.max) as i8)
            }
        }
    }

    /// Quantization of a layer's output tensor: the following Q node (quantized models) or
    /// the calibrated scale (float models).
    fn out_target(&self, ix: NodeIndex, act: Option<Activation>) -> R<(QOut, OutTarget)> {
        let t = self.g.dag[ix].outputs[0];
        if self.quantized_model {
            let q = self.sole_q(t).ok_or_else(|| {
                format!(
                    "its output '{}' is not quantized by a single QuantizeLinear",
                    self.g.tensors[t].name
                )
            })?;
            let (scale, zp, dtype) = self.q_params(q)?;
            let zp8 = zp - offset_of(dtype);
            let qt = self.g.dag[q].outputs[0];
            // QDQ exporters quantize before an activation: `Q -> DQ -> Relu -> Q`. Fuse it:
            // the clamp becomes the layer's; with other parameters for the second Q, the
            // first rounding (at most s1/2 in real terms) is the extra deviation.
            if let Some((dq, relu, a2, q2)) = self.activation_chain(qt) {
                let (s1, z1) = self.dq_params(dq)?;
                if s1 == scale && z1 == zp {
                    let (s2, z2, dt2) = self.q_params(q2)?;
                    let z28 = z2 - offset_of(dt2);
                    let act2 = act.map_or(a2, |a| a.then(a2));
                    let (lo, hi) = Self::out_clamp(Some(act2), s2, z28);
                    let extra_dev = if s2 == scale && z28 == zp8 {
                        0.0
                    } else {
                        0.5 * f64::from(scale) / f64::from(s2)
                    };
                    let out = QOut {
                        scale: f64::from(s2),
                        zp: z28,
                        lo,
                        hi,
                        dtype: dt2,
                        extra_dev,
                    };
                    let tensor = self.g.dag[q2].outputs[0];
                    return Ok((
                        out,
                        OutTarget {
                            tensor,
                            q_node: Some(q),
                            chain: vec![dq, relu, q2],
                        },
                    ));
                }
            }
            let (lo, hi) = Self::out_clamp(act, scale, zp8);
            Ok((
                QOut {
                    scale: f64::from(scale),
                    zp: zp8,
                    lo,
                    hi,
                    dtype,
                    extra_dev: 0.0,
                },
                OutTarget {
                    tensor: qt,
                    q_node: Some(q),
                    chain: vec![],
                },
            ))
        } else {
            let stats = self.stats.ok_or("no calibration")?;
            let scale = stats.scale(t);
            let (lo, hi) = Self::out_clamp(act, scale, 0);
            Ok((
                QOut {
                    scale: f64::from(scale),
                    zp: 0,
                    lo,
                    hi,
                    dtype: DType::F32,
                    extra_dev: 0.0,
                },
                OutTarget {
                    tensor: t,
                    q_node: None,
                    chain: vec![],
                },
            ))
        }
    }

    /// `t -> DequantizeLinear -> Relu/Clip -> QuantizeLinear`, each the sole reader of the
    /// previous one's output: (DQ, activation node, its clamp, Q).
    fn activation_chain(
        &self,
        t: TensorId,
    ) -> Option<(NodeIndex, NodeIndex, Activation, NodeIndex)> {
        let sole = |t: TensorId| -> Option<NodeIndex> {
            if self.g.is_output(t) {
                return None;
            }
            match self.g.consumers(t).as_slice() {
                [(n, 0)] => Some(*n),
                _ => None,
            }
        };
        let dq = sole(t)?;
        if !self.g.dag[dq].op.as_any().is::<DequantizeLinear>() {
            return None;
        }
        let relu = sole(self.g.dag[dq].outputs[0])?;
        let any = self.g.dag[relu].op.as_any();
        let act = if any.is::<crate::graph::ops::relu::Relu>() {
            Activation::RELU
        } else if let Some(c) = any.downcast_ref::<crate::graph::ops::clip::Clip>() {
            c.static_bounds(&self.g.input_infos(relu))?
        } else {
            return None;
        };
        let q2 = self.sole_q(self.g.dag[relu].outputs[0])?;
        Some((dq, relu, act, q2))
    }

    /// Per-tensor constant (scale, zero point) of a DequantizeLinear node.
    fn dq_params(&self, dq: NodeIndex) -> R<(f32, i32)> {
        let s = self
            .g
            .const_input(dq, 1)
            .ok_or("DequantizeLinear scale is not a constant")?;
        if s.len() != 1 {
            return Err("per-axis dequantization".into());
        }
        Ok((s.scalar_f32()?, scalar_i32(self.g.const_input(dq, 2))))
    }

    /// The single QuantizeLinear node reading `t`.
    fn sole_q(&self, t: TensorId) -> Option<NodeIndex> {
        if self.g.is_output(t) {
            return None;
        }
        let c = self.g.consumers(t);
        match c.as_slice() {
            [(q, 0)] if self.g.dag[*q].op.as_any().is::<QuantizeLinear>() => Some(*q),
            _ => None,
        }
    }

    /// Per-tensor constant (scale, zero point, dtype) of a QuantizeLinear node.
    fn q_params(&self, q: NodeIndex) -> R<(f32, i32, DType)> {
        let s = self
            .g
            .const_input(q, 1)
            .ok_or("QuantizeLinear scale is not a constant")?;
        let z = self.g.const_input(q, 2);
        if self.g.dag[q].inputs.get(2).copied().flatten().is_some() && z.is_none() {
            return Err("QuantizeLinear zero point is not a constant".into());
        }
        if s.len() != 1 {
            return Err("per-axis output quantization".into());
        }
        let dt = match z {
            Some(z) => z.dtype(),
            None => self.g.fact(self.g.dag[q].outputs[0]).dtype,
        };
        Ok((s.scalar_f32()?, scalar_i32(z), dt))
    }

    /// Quantized constant weights behind a DequantizeLinear: (int values minus zero point,
    /// per-channel scales along `axis`, the DQ node).
    fn dq_weights(&self, t: TensorId, axis: usize) -> R<(ArrayD<i32>, Vec<f64>, NodeIndex)> {
        let dq = self.const_dq(t).ok_or_else(|| {
            format!(
                "weight '{}' is not a DequantizeLinear of constants",
                self.g.tensors[t].name
            )
        })?;
        let n = &self.g.dag[dq];
        let op =
            n.op.as_any()
                .downcast_ref::<DequantizeLinear>()
                .expect("DQ");
        let x = self.g.const_input(dq, 0).expect("const");
        let p = QParams::new(
            self.g.const_input(dq, 1).expect("const"),
            self.g.const_input(dq, 2),
            op.axis,
            x.shape(),
        )?;
        let c = x.shape().get(axis).copied().unwrap_or(1);
        if p.axis.is_some_and(|a| a != axis) {
            return Err(format!(
                "weights quantized along axis {:?}, expected per-tensor or axis {axis}",
                p.axis
            ));
        }
        let mut w = x.to_i32_array()?;
        for (idx, v) in w.indexed_iter_mut() {
            let (_, z) = p.at(idx.slice());
            *v -= z;
        }
        let scales: Vec<f64> = (0..c)
            .map(|i| {
                f64::from(if p.axis.is_some() {
                    p.scale[i]
                } else {
                    p.scale[0]
                })
            })
            .collect();
        Ok((w, scales, dq))
    }

    /// Integer bias at scale `s_x * s_w[c]` from a bias input that is absent, a float
    /// constant, or a DequantizeLinear of an int32 constant; also returns the DQ node.
    fn int_bias(
        &self,
        t: Option<TensorId>,
        n: usize,
        sx: f64,
        sw: &[f64],
    ) -> R<(Vec<i64>, Option<NodeIndex>)> {
        let Some(t) = t else {
            return Ok((vec![0; n], None));
        };
        if let Some(dq) = self.const_dq(t) {
            let x = self.g.const_input(dq, 0).expect("const");
            if x.dtype() != DType::I32 || x.len() != n {
                return Err("bias is not an int32 vector".into());
            }
            let op = self.g.dag[dq]
                .op
                .as_any()
                .downcast_ref::<DequantizeLinear>()
                .expect("DQ");
            let p = QParams::new(
                self.g.const_input(dq, 1).expect("const"),
                self.g.const_input(dq, 2),
                op.axis,
                x.shape(),
            )?;
            let b = x.to_i64_vec();
            let v = (0..n)
                .map(|c| {
                    let (s, z) = p.at(&[c]);
                    let want = sx * sw[c];
                    // onnxruntime writes the bias scale as the f32 product s_x * s_w.
                    if (f64::from(s) - want).abs() <= want * 1e-6 && z == 0 {
                        b[c]
                    } else {
                        ((b[c] - i64::from(z)) as f64 * f64::from(s) / want).round() as i64
                    }
                })
                .collect();
            return Ok((v, Some(dq)));
        }
        let v = self.g.const_value(t).ok_or("bias is not a constant")?;
        let f = f32_of(v)?;
        if f.len() != n {
            return Err(format!("bias has {} values, expected {n}", f.len()));
        }
        Ok((
            (0..n)
                .map(|c| (f64::from(f[c]) / (sx * sw[c])).round() as i64)
                .collect(),
            None,
        ))
    }

    fn make_requant(
        &self,
        m: &[f64],
        ranges: &[AccRange],
        rounding: MulRounding,
        out: &QOut,
    ) -> R<RequantChoice> {
        let c = choose_requant(
            m,
            ranges,
            rounding,
            self.pow2_only,
            clamp_i8(i64::from(out.zp)),
            out.lo,
            out.hi,
        )?;
        self.check_muls(&c.requant)?;
        Ok(c)
    }

    // ---------------------------------------------------------------- convolution / dense

    /// An imported quantized convolution (QLinearConv or QDQ), weights already centered.
    #[allow(clippy::too_many_arguments)]
    fn imported_conv(
        &self,
        name: &str,
        x: QIn,
        x_shape: [usize; 4],
        w: ArrayD<i32>,
        sw: &[f64],
        mut bias: Vec<i64>,
        geo: &Geometry,
        group: usize,
        out: &QOut,
        float_semantics: bool,
    ) -> R<(QConv2d, String)> {
        if geo.dilation != (1, 1) {
            return Err(format!(
                "dilation {:?}: the accelerator's convolution has no dilation",
                geo.dilation
            ));
        }
        let o = w.shape()[0];
        let per = w.len() / o.max(1);
        let wv: Vec<i32> = w.iter().cloned().collect();
        if x.zp != 0 {
            if geo.pad != [0; 4] {
                return Err(format!(
                    "input zero point {} (int8 domain) with padding: the accelerator pads with 0, which would not be the real zero",
                    x.zp
                ));
            }
            for (c, b) in bias.iter_mut().enumerate() {
                let s: i64 = wv[c * per..(c + 1) * per]
                    .iter()
                    .map(|&v| i64::from(v))
                    .sum();
                *b -= i64::from(x.zp) * s;
            }
        }
        if let Some(bad) = wv.iter().find(|v| !(-128..=127).contains(*v)) {
            return Err(format!(
                "weights minus their zero point do not fit int8 (value {bad})"
            ));
        }
        let (mut lo, mut hi) = self.range_of(x.v);
        if geo.pad != [0; 4] {
            lo = lo.min(0);
            hi = hi.max(0);
        }
        let ranges = conv_acc_ranges(&wv, o, &bias, lo, hi);
        let m: Vec<f64> = sw.iter().map(|s| x.scale * s / out.scale).collect();
        let c = self.make_requant(&m, &ranges, MulRounding::Nearest, out)?;
        let note = self.check_fidelity(&c, out, float_semantics)?;
        let bias32 = bias
            .iter()
            .map(|&b| i32::try_from(b).map_err(|_| format!("bias {b} does not fit int32")))
            .collect::<R<Vec<_>>>()?;
        let shape = w.shape().to_vec();
        let w8 = Array4::from_shape_vec(
            (shape[0], shape[1], shape[2], shape[3]),
            wv.iter().map(|&v| v as i8).collect(),
        )
        .map_err(|e| e.to_string())?;
        let layer = QConv2d {
            name: name.to_string(),
            input_shape: x_shape,
            weight: w8,
            bias: bias32,
            stride: geo.stride,
            pad: geo.pad,
            groups: group,
            requant: c.requant,
        };
        if layer.output_shape() != [x_shape[0], o, geo.out.0, geo.out.1] {
            return Err("internal: output shape mismatch".into());
        }
        Ok((layer, note))
    }

    /// An imported quantized dense layer (weights [M, K] centered).
    #[allow(clippy::too_many_arguments)]
    fn imported_dense(
        &self,
        name: &str,
        x: QIn,
        w: Array2<i32>,
        sw: &[f64],
        mut bias: Vec<i64>,
        out: &QOut,
        float_semantics: bool,
    ) -> R<(QDense, String)> {
        let (mo, _) = w.dim();
        if x.zp != 0 {
            for (c, b) in bias.iter_mut().enumerate() {
                let s: i64 = w.row(c).iter().map(|&v| i64::from(v)).sum();
                *b -= i64::from(x.zp) * s;
            }
        }
        let wv: Vec<i32> = w.iter().cloned().collect();
        if let Some(bad) = wv.iter().find(|v| !(-128..=127).contains(*v)) {
            return Err(format!(
                "weights minus their zero point do not fit int8 (value {bad})"
            ));
        }
        let (lo, hi) = self.range_of(x.v);
        let ranges = conv_acc_ranges(&wv, mo, &bias, lo, hi);
        let m: Vec<f64> = sw.iter().map(|s| x.scale * s / out.scale).collect();
        let c = self.make_requant(&m, &ranges, MulRounding::Nearest, out)?;
        let note = self.check_fidelity(&c, out, float_semantics)?;
        let bias32 = bias
            .iter()
            .map(|&b| i32::try_from(b).map_err(|_| format!("bias {b} does not fit int32")))
            .collect::<R<Vec<_>>>()?;
        Ok((
            QDense {
                name: name.to_string(),
                weight: w.mapv(|v| v as i8),
                bias: bias32,
                requant: c.requant,
            },
            note,
        ))
    }

    /// Post-training quantization of float weights `w` ([O, ...]) and bias: per-channel
    /// symmetric int8 weights whose scales are widened so that the requantization multiplier
    /// is exact. Returns (int8 weights, int32 bias, requant, note).
    fn ptq_weights(
        &self,
        x: QIn,
        w: &ArrayD<f32>,
        b: Option<&[f32]>,
        out: &QOut,
        pad_zero: bool,
    ) -> R<(Vec<i8>, Vec<i32>, Requant, String)> {
        if x.zp != 0 {
            return Err("internal: post-training quantized inputs have zero point 0".into());
        }
        let o = w.shape()[0];
        let per = w.len() / o.max(1);
        let wv: Vec<f32> = w.iter().cloned().collect();
        let sw: Vec<f64> = (0..o)
            .map(|c| {
                let m = wv[c * per..(c + 1) * per]
                    .iter()
                    .fold(0f32, |a, v| a.max(v.abs()));
                if m > 0.0 {
                    f64::from(m) / 127.0
                } else {
                    1.0 / 127.0
                }
            })
            .collect();
        let quant = |sw: &[f64]| -> (Vec<i32>, Vec<i64>) {
            let q = (0..o * per)
                .map(|i| {
                    (f64::from(wv[i]) / sw[i / per])
                        .round()
                        .clamp(-127.0, 127.0) as i32
                })
                .collect();
            let bq = (0..o)
                .map(|c| b.map_or(0, |b| (f64::from(b[c]) / (x.scale * sw[c])).round() as i64))
                .collect();
            (q, bq)
        };
        let (q0, b0) = quant(&sw);
        let (mut lo, mut hi) = self.range_of(x.v);
        if pad_zero {
            lo = lo.min(0);
            hi = hi.max(0);
        }
        let ranges = conv_acc_ranges(&q0, o, &b0, lo, hi);
        let m: Vec<f64> = sw.iter().map(|s| x.scale * s / out.scale).collect();
        let c = self.make_requant(&m, &ranges, MulRounding::Up, out)?;
        // Widen each channel's weight scale so that x_scale * w_scale / y_scale == mul / 2^e.
        let sw2: Vec<f64> = c
            .effective
            .iter()
            .map(|me| me * out.scale / x.scale)
            .collect();
        let (q, bq) = quant(&sw2);
        let bias = bq
            .iter()
            .map(|&v| i32::try_from(v).map_err(|_| format!("bias {v} does not fit int32")))
            .collect::<R<Vec<_>>>()?;
        let widen = sw2
            .iter()
            .zip(&sw)
            .map(|(a, b)| a / b - 1.0)
            .fold(0.0, f64::max);
        let note = format!(
            "post-training int8 (per-channel weights widened <= {:.2}%, requant mul/2^{}, pre-shift loss <= {:.3} LSB)",
            widen * 100.0,
            u32::from(c.requant.pre_shift) + u32::from(c.requant.shift),
            c.trunc_error
        );
        Ok((q.iter().map(|&v| v as i8).collect(), bias, c.requant, note))
    }

    fn conv(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let conv = n.op.as_any().downcast_ref::<Conv>().expect("Conv").clone();
        let (xt, wt, bt) = (
            n.inputs[0].ok_or("no input")?,
            n.inputs[1].ok_or("no weight")?,
            n.inputs.get(2).copied().flatten(),
        );
        let xs = self.g.fact(xt).shape.clone();
        let ws = self.g.fact(wt).shape.clone();
        let x_shape = [xs[0], xs[1], xs[2], xs[3]];
        let geo = conv.window.resolve((xs[2], xs[3]), (ws[2], ws[3]))?;
        if geo.dilation != (1, 1) {
            return Err(format!(
                "dilation {:?}: the accelerator's convolution has no dilation",
                geo.dilation
            ));
        }
        let name = self.node_name(ix);
        if self.quantized_model {
            let (w, sw, wdq) = self.dq_weights(wt, 0)?;
            let (out, target) = self.out_target(ix, conv.activation)?;
            let x = self.as_q8(xt)?;
            let (bias, bdq) = self.int_bias(bt, ws[0], x.scale, &sw)?;
            let (layer, note) = self.imported_conv(
                &name, x, x_shape, w, &sw, bias, &geo, conv.group, &out, true,
            )?;
            self.accel(
                ix,
                Layer::Conv2d(layer),
                vec![x.v],
                out,
                target,
                format!("QDQ conv: {note}"),
            );
            self.set_fused_params(wdq, bdq, &name);
        } else {
            let w = self
                .g
                .const_value(wt)
                .ok_or("weights are not constant")?
                .as_f32()?
                .clone();
            let b = match bt {
                None => None,
                Some(b) => Some(f32_of(
                    self.g.const_value(b).ok_or("bias is not constant")?,
                )?),
            };
            let (out, target) = self.out_target(ix, conv.activation)?;
            let x = self.as_q8(xt)?;
            let (q, bias, requant, note) =
                self.ptq_weights(x, &w, b.as_deref(), &out, geo.pad != [0; 4])?;
            let weight = Array4::from_shape_vec((ws[0], ws[1], ws[2], ws[3]), q)
                .map_err(|e| e.to_string())?;
            let layer = QConv2d {
                name: name.clone(),
                input_shape: x_shape,
                weight,
                bias,
                stride: geo.stride,
                pad: geo.pad,
                groups: conv.group,
                requant,
            };
            self.accel(ix, Layer::Conv2d(layer), vec![x.v], out, target, note);
        }
        Ok(())
    }

    fn qlinear_conv(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let op =
            n.op.as_any()
                .downcast_ref::<QLinearConv>()
                .expect("QLinearConv")
                .clone();
        let ins = n.inputs.clone();
        let c = |i: usize| {
            ins.get(i)
                .copied()
                .flatten()
                .and_then(|t| self.g.const_value(t))
        };
        for (i, what) in [
            (1, "x_scale"),
            (2, "x_zero_point"),
            (3, "w"),
            (4, "w_scale"),
            (5, "w_zero_point"),
            (6, "y_scale"),
            (7, "y_zero_point"),
        ] {
            if ins.get(i).copied().flatten().is_some() && c(i).is_none() {
                return Err(format!("{what} is not a constant"));
            }
        }
        if ins.get(8).copied().flatten().is_some() && c(8).is_none() {
            return Err("bias is not a constant".into());
        }
        let w = c(3).ok_or("no weights")?;
        let (o, _, kh, kw) = dims4(w.shape(), "w")?;
        let sw: Vec<f64> = crate::graph::ops::qlinear_conv::per_channel_f32(
            c(4).ok_or("no w_scale")?,
            o,
            "w_scale",
        )?
        .into_iter()
        .map(f64::from)
        .collect();
        let wz = crate::graph::ops::qlinear_conv::per_channel_i32(c(5), o, "w_zero_point")?;
        let wc = crate::graph::ops::qlinear_conv::centered_per_channel(w, &wz)?;
        let xs_ = c(1).ok_or("no x_scale")?.scalar_f32()?;
        let xz = scalar_i32(c(2));
        let ys = c(6).ok_or("no y_scale")?.scalar_f32()?;
        let yzt = c(7).ok_or("no y_zero_point")?;
        let ydt = yzt.dtype();
        let yz8 = scalar_i32(Some(yzt)) - offset_of(ydt);
        let bias: Vec<i64> = match c(8) {
            Some(b) => b.to_i64_vec(),
            None => vec![0; o],
        };
        let xt = ins[0].ok_or("no input")?;
        let xsh = self.g.fact(xt).shape.clone();
        let geo = op.window.resolve((xsh[2], xsh[3]), (kh, kw))?;
        let (xv, off) = self.as_i8(xt)?;
        let x = QIn {
            v: xv,
            scale: f64::from(xs_),
            zp: xz - off,
        };
        let out = QOut {
            scale: f64::from(ys),
            zp: yz8,
            lo: -128,
            hi: 127,
            dtype: ydt,
            extra_dev: 0.0,
        };
        let name = self.node_name(ix);
        let (layer, note) = self.imported_conv(
            &name,
            x,
            [xsh[0], xsh[1], xsh[2], xsh[3]],
            wc,
            &sw,
            bias,
            &geo,
            op.group,
            &out,
            false,
        )?;
        self.integer_output(ix, Layer::Conv2d(layer), xv, out, note, ydt);
        Ok(())
    }

    fn dense(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let any = n.op.as_any();
        let (gemm, is_matmul) = if let Some(g) = any.downcast_ref::<Gemm>() {
            (g.clone(), false)
        } else if any.is::<MatMul>() {
            (
                Gemm {
                    alpha: 1.0,
                    beta: 1.0,
                    trans_a: false,
                    trans_b: false,
                    activation: None,
                },
                true,
            )
        } else {
            return Err("not a matrix product".into());
        };
        if gemm.trans_a {
            return Err("transA = 1".into());
        }
        let (at, bt) = (n.inputs[0].ok_or("no A")?, n.inputs[1].ok_or("no B")?);
        let ct = if is_matmul {
            None
        } else {
            n.inputs.get(2).copied().flatten()
        };
        if self.g.fact(at).rank() != 2 {
            return Err(format!(
                "input of rank {} (the dense layer takes [N, K])",
                self.g.fact(at).rank()
            ));
        }
        let name = self.node_name(ix);
        if self.quantized_model {
            let (w, sw, wdq) = self.dq_weights(bt, if gemm.trans_b { 0 } else { 1 })?;
            let w = w
                .into_dimensionality::<ndarray::Ix2>()
                .map_err(|_| "weights are not 2-D")?;
            let w = if gemm.trans_b { w } else { w.t().to_owned() };
            let (out, target) = self.out_target(ix, gemm.activation)?;
            let x = self.as_q8(at)?;
            if gemm.alpha != 1.0 || gemm.beta != 1.0 {
                return Err("alpha/beta != 1 in a quantized Gemm".into());
            }
            let (bias, bdq) = match ct {
                Some(c) if self.g.fact(c).len() != w.nrows() => {
                    return Err("bias is not a vector".into())
                }
                c => self.int_bias(c, w.nrows(), x.scale, &sw)?,
            };
            let (layer, note) = self.imported_dense(&name, x, w, &sw, bias, &out, true)?;
            self.accel(
                ix,
                Layer::Dense(layer),
                vec![x.v],
                out,
                target,
                format!("QDQ dense: {note}"),
            );
            self.set_fused_params(wdq, bdq, &name);
        } else {
            let b = self
                .g
                .const_value(bt)
                .ok_or("B is not constant")?
                .as_f32()?;
            let b2 = b
                .view()
                .into_dimensionality::<ndarray::Ix2>()
                .map_err(|_| "B is not 2-D")?;
            let w = if gemm.trans_b {
                b2.to_owned()
            } else {
                b2.t().to_owned()
            };
            let w = w.mapv(|v| v * gemm.alpha).into_dyn();
            let m = w.shape()[0];
            let bias: Option<Vec<f32>> = match ct {
                None => None,
                Some(c) => {
                    let cv = self.g.const_value(c).ok_or("C is not constant")?;
                    let v = f32_of(cv)?;
                    if v.len() == m {
                        Some(v.iter().map(|x| x * gemm.beta).collect())
                    } else if v.len() == 1 {
                        Some(vec![v[0] * gemm.beta; m])
                    } else {
                        return Err("C is not a bias vector".into());
                    }
                }
            };
            let (out, target) = self.out_target(ix, gemm.activation)?;
            let x = self.as_q8(at)?;
            let (q, bias, requant, note) = self.ptq_weights(x, &w, bias.as_deref(), &out, false)?;
            let k = w.shape()[1];
            let layer = QDense {
                name: name.clone(),
                weight: Array2::from_shape_vec((m, k), q).map_err(|e| e.to_string())?,
                bias,
                requant,
            };
            self.accel(ix, Layer::Dense(layer), vec![x.v], out, target, note);
        }
        Ok(())
    }

    fn qlinear_matmul(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let ins = n.inputs.clone();
        let c = |i: usize| {
            ins.get(i)
                .copied()
                .flatten()
                .and_then(|t| self.g.const_value(t))
        };
        for (i, what) in [
            (1, "a_scale"),
            (2, "a_zero_point"),
            (3, "b"),
            (4, "b_scale"),
            (5, "b_zero_point"),
            (6, "y_scale"),
            (7, "y_zero_point"),
        ] {
            if c(i).is_none() {
                return Err(format!("{what} is not a constant"));
            }
        }
        let at = ins[0].ok_or("no a")?;
        if self.g.fact(at).rank() != 2 {
            return Err(format!(
                "a has rank {} (the dense layer takes [N, K])",
                self.g.fact(at).rank()
            ));
        }
        let b = c(3).expect("checked");
        if b.shape().len() != 2 {
            return Err("b is not a 2-D matrix".into());
        }
        let nn = b.shape()[1];
        let bs: Vec<f64> = crate::graph::ops::qlinear_conv::per_channel_f32(
            c(4).expect("checked"),
            nn,
            "b_scale",
        )?
        .into_iter()
        .map(f64::from)
        .collect();
        let bc = crate::graph::ops::matmul_integer::center_cols(b, c(5))?;
        let w = bc
            .into_dimensionality::<ndarray::Ix2>()
            .map_err(|e| e.to_string())?
            .t()
            .to_owned();
        let as_ = c(1).expect("checked").scalar_f32()?;
        let az = scalar_i32(c(2));
        let ys = c(6).expect("checked").scalar_f32()?;
        let yzt = c(7).expect("checked");
        let ydt = yzt.dtype();
        let (av, off) = self.as_i8(at)?;
        let x = QIn {
            v: av,
            scale: f64::from(as_),
            zp: az - off,
        };
        let out = QOut {
            scale: f64::from(ys),
            zp: scalar_i32(Some(yzt)) - offset_of(ydt),
            lo: -128,
            hi: 127,
            dtype: ydt,
            extra_dev: 0.0,
        };
        let name = self.node_name(ix);
        let (layer, note) = self.imported_dense(&name, x, w, &bs, vec![0; nn], &out, false)?;
        self.integer_output(ix, Layer::Dense(layer), av, out, note, ydt);
        Ok(())
    }

    // ---------------------------------------------------------------- element-wise / pools

    fn add(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let bin =
            n.op.as_any()
                .downcast_ref::<Binary>()
                .expect("Binary")
                .clone();
        let (at, bt) = (n.inputs[0].ok_or("no A")?, n.inputs[1].ok_or("no B")?);
        if self.g.const_value(at).is_some() || self.g.const_value(bt).is_some() {
            return Err("Add of a constant (bias-like add outside a layer)".into());
        }
        let (fa, fb) = (self.g.fact(at).clone(), self.g.fact(bt).clone());
        if fa.shape != fb.shape || !(2..=4).contains(&fa.rank()) {
            return Err(format!("operands {:?} and {:?}: the accelerator adds tensors of the same shape (no broadcasting)", fa.shape, fb.shape));
        }
        let (out, target) = self.out_target(ix, bin.activation)?;
        let a = self.as_q8(at)?;
        let b = self.as_q8(bt)?;
        if a.zp != 0 || b.zp != 0 {
            return Err(format!("operand zero points {} and {} (int8 domain): the accelerator's add has no input offsets", a.zp, b.zp));
        }
        let (ra, rb) = (a.scale / out.scale, b.scale / out.scale);
        let mut chosen = None;
        for s in (0u8..=16).rev() {
            let k = f64::from(1u32 << s);
            let (ma, mb) = ((ra * k).round(), (rb * k).round());
            if ma <= 32767.0 && mb <= 32767.0 && ma >= 1.0 && mb >= 1.0 {
                let dev = 128.0 * ((ma / k - ra).abs() + (mb / k - rb).abs());
                chosen = Some((s, ma as i16, mb as i16, dev));
                break;
            }
        }
        let (s, ma, mb, dev) =
            chosen.ok_or("operand scale ratios do not fit 16-bit multipliers")?;
        if self.pow2_only && !((ma as u16).is_power_of_two() && (mb as u16).is_power_of_two()) {
            return Err("the config has no ALU multiplier and the add needs one".into());
        }
        let requant = Requant {
            pre_shift: 0,
            mul: vec![1],
            shift: s,
            zero_point: clamp_i8(i64::from(out.zp)),
            lo: out.lo,
            hi: out.hi,
        };
        let note = if self.quantized_model {
            let c = RequantChoice {
                requant: requant.clone(),
                effective: vec![f64::from(ma) / f64::from(1u32 << s)],
                mul_rel_error: dev / 256.0,
                trunc_error: 0.0,
                deviation: dev,
            };
            self.check_fidelity(&c, &out, true)?
        } else {
            format!("post-training int8 (operand multipliers {ma}, {mb} / 2^{s})")
        };
        let name = self.node_name(ix);
        let layer = QAdd {
            name,
            mul_a: ma,
            mul_b: mb,
            requant,
        };
        self.accel(ix, Layer::Add(layer), vec![a.v, b.v], out, target, note);
        Ok(())
    }

    fn global_pool(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let xt = n.inputs[0].ok_or("no input")?;
        let (_, _, h, w) = dims4(&self.g.fact(xt).shape, "input")?;
        if let Some(ap) = n.op.as_any().downcast_ref::<AveragePool>() {
            if !ap.is_global(h, w) {
                return Err("AveragePool with a window smaller than the input (only global average pooling is offloaded)".into());
            }
        }
        let (out, target) = self.out_target(ix, None)?;
        let x = self.as_q8(xt)?;
        if x.zp != 0 {
            return Err(format!("input zero point {} (int8 domain): the accelerator's average pool has no input offset", x.zp));
        }
        let hw = (h * w) as i64;
        let (lo, hi) = self.range_of(x.v);
        let ranges = [AccRange {
            lo: hw * i64::from(lo),
            hi: hw * i64::from(hi),
        }];
        let m = x.scale / (out.scale * hw as f64);
        let c = self.make_requant(&[m], &ranges, MulRounding::Nearest, &out)?;
        let note = if self.quantized_model {
            self.check_fidelity(&c, &out, true)?
        } else {
            format!(
                "post-training int8 (1/{hw} as mul/2^{}, deviation <= {:.3} LSB)",
                u32::from(c.requant.pre_shift) + u32::from(c.requant.shift),
                c.deviation
            )
        };
        let name = self.node_name(ix);
        self.accel(
            ix,
            Layer::GlobalAvgPool(QGlobalAvgPool {
                name,
                requant: c.requant,
            }),
            vec![x.v],
            out,
            target,
            note,
        );
        Ok(())
    }

    /// The int8 form of a pooling/reshaping op's input: (value, how to represent the output).
    fn int8_passthrough(&mut self, t: TensorId) -> R<(ValueId, ReprOf)> {
        match self.repr.get(&t).copied() {
            Some(Repr::Deq { q, scale, zp }) => {
                Ok((q, Box::new(move |v| Repr::Deq { q: v, scale, zp })))
            }
            Some(Repr::Shifted(v)) => Ok((v, Box::new(Repr::Shifted))),
            Some(Repr::Exact(_)) if matches!(self.g.fact(t).dtype, DType::I8 | DType::U8) => {
                let (v, off) = self.as_i8(t)?;
                Ok((
                    v,
                    if off == 128 {
                        Box::new(Repr::Shifted)
                    } else {
                        Box::new(Repr::Exact)
                    },
                ))
            }
            _ if self.stats.is_some() && self.g.fact(t).dtype == DType::F32 => {
                let q = self.as_q8(t)?;
                let (scale, zp) = (q.scale as f32, q.zp);
                Ok((q.v, Box::new(move |v| Repr::Deq { q: v, scale, zp })))
            }
            _ => Err(format!(
                "input '{}' is not an int8 tensor",
                self.g.tensors[t].name
            )),
        }
    }

    fn max_pool(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let mp =
            n.op.as_any()
                .downcast_ref::<MaxPool>()
                .expect("MaxPool")
                .clone();
        let xt = n.inputs[0].ok_or("no input")?;
        let yt = n.outputs[0];
        let (_, _, h, w) = dims4(&self.g.fact(xt).shape, "input")?;
        let geo = mp.window.resolve((h, w), (1, 1))?;
        if geo.dilation != (1, 1) {
            return Err("dilated max pooling".into());
        }
        let mut pad = geo.pad;
        // ceil_mode: extend the bottom/right padding so the floor formula gives the same
        // size (padding never wins, and every window keeps a real cell).
        pad[2] =
            pad[2].max(((geo.out.0 - 1) * geo.stride.0 + geo.kernel.0).saturating_sub(h + pad[0]));
        pad[3] =
            pad[3].max(((geo.out.1 - 1) * geo.stride.1 + geo.kernel.1).saturating_sub(w + pad[1]));
        let layer = QMaxPool {
            name: self.node_name(ix),
            kernel: geo.kernel,
            stride: geo.stride,
            pad,
        };
        if layer.output_hw(h, w) != geo.out {
            return Err("internal: max pool output size".into());
        }
        let (xv, mk) = self.int8_passthrough(xt)?;
        let range = self.range_of(xv);
        let qp = self.plan.values[xv].quant;
        let fact = Fact::new(DType::I8, self.g.fact(yt).shape.clone());
        let v = self
            .plan
            .add_value(format!("{}:i8", self.g.tensors[yt].name), fact, qp);
        self.ranges.insert(v, range);
        let step = self.push(
            &self.node_name(ix),
            vec![xv],
            vec![v],
            StepKind::Accel(Layer::MaxPool(layer)),
        );
        self.repr.insert(yt, mk(v));
        self.set_status(
            ix,
            Support::Accel {
                layer: "QMaxPool",
                step,
                note: "max commutes with the int8 quantization (exact)".into(),
            },
        );
        Ok(())
    }

    /// Reshape-like ops on an int8 tensor: an exact CPU step on the int8 data.
    fn reshape_int8(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let xt = n.inputs[0].ok_or("no input")?;
        let yt = n.outputs[0];
        let (xv, mk) = self.int8_passthrough(xt)?;
        let mut args = vec![Some(xv)];
        for t in n.inputs.iter().skip(1).copied().collect::<Vec<_>>() {
            args.push(match t {
                Some(t) => Some(self.exact(t, "reshape")?),
                None => None,
            });
        }
        let range = self.range_of(xv);
        let qp = self.plan.values[xv].quant;
        let fact = Fact::new(DType::I8, self.g.fact(yt).shape.clone());
        let v = self
            .plan
            .add_value(format!("{}:i8", self.g.tensors[yt].name), fact, qp);
        self.ranges.insert(v, range);
        let reason =
            "layout-only op on the int8 tensor (a row-major reshape: no data change)".to_string();
        let inputs = args.iter().flatten().copied().collect();
        let op = self.g.dag[ix].op.to_any();
        let step = self.push(
            &self.node_name(ix),
            inputs,
            vec![v],
            StepKind::Cpu(CpuOp {
                op,
                args,
                reason: reason.clone(),
            }),
        );
        self.repr.insert(yt, mk(v));
        self.set_status(ix, Support::Cpu { step, reason });
        Ok(())
    }

    fn concat(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let ins: Vec<TensorId> = n.inputs.iter().flatten().copied().collect();
        let yt = n.outputs[0];
        let mut params = None;
        let mut vals = Vec::new();
        for &t in &ins {
            match self.repr.get(&t).copied() {
                Some(Repr::Deq { q, scale, zp }) if params.is_none_or(|p| p == (scale, zp)) => {
                    params = Some((scale, zp));
                    vals.push(q);
                }
                _ => {
                    return Err(
                        "inputs with different quantization (concatenated in float on the CPU)"
                            .into(),
                    )
                }
            }
        }
        let (scale, zp) = params.ok_or("no inputs")?;
        let fact = Fact::new(DType::I8, self.g.fact(yt).shape.clone());
        let qp = QuantParams {
            scale,
            zero_point: zp,
        };
        let v = self
            .plan
            .add_value(format!("{}:i8", self.g.tensors[yt].name), fact, Some(qp));
        let reason = "concatenation of int8 tensors with equal quantization (exact data movement)"
            .to_string();
        let op = self.g.dag[ix].op.to_any();
        let step = self.push(
            &self.node_name(ix),
            vals.clone(),
            vec![v],
            StepKind::Cpu(CpuOp {
                op,
                args: vals.into_iter().map(Some).collect(),
                reason: reason.clone(),
            }),
        );
        self.repr.insert(yt, Repr::Deq { q: v, scale, zp });
        self.set_status(ix, Support::Cpu { step, reason });
        Ok(())
    }

    /// A Mul by a positive scalar constant of a quantized tensor only changes its scale.
    fn scale_mul(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let ins = [n.inputs[0].ok_or("no A")?, n.inputs[1].ok_or("no B")?];
        let (xt, ct) = if self.g.const_value(ins[1]).is_some() {
            (ins[0], ins[1])
        } else {
            (ins[1], ins[0])
        };
        let c = self.g.const_value(ct).ok_or("Mul of two activations")?;
        if c.len() != 1 || self.g.fact(xt).shape != self.g.fact(n.outputs[0]).shape {
            return Err("Mul by a non-scalar constant".into());
        }
        let k = c.scalar_f32()?;
        if !(k > 0.0 && k.is_finite()) {
            return Err("Mul by a non-positive constant".into());
        }
        let Some(Repr::Deq { q, scale, zp }) = self.repr.get(&xt).copied() else {
            return Err("input is not a quantized tensor".into());
        };
        let yt = n.outputs[0];
        self.repr.insert(
            yt,
            Repr::Deq {
                q,
                scale: scale * k,
                zp,
            },
        );
        self.status.insert(
            n.origin[0].name.clone(),
            Support::Removed {
                how: format!("folded into the quantization scale (x {k})"),
            },
        );
        Ok(())
    }

    fn quantize_node(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let xt = n.inputs[0].ok_or("no input")?;
        let yt = n.outputs[0];
        if self.g.fact(xt).dtype != DType::F32 {
            return Err("QuantizeLinear of an integer tensor".into());
        }
        let (scale, zp, dt) = self.q_params(ix)?;
        let zp8 = zp - offset_of(dt);
        let shifted = |v| {
            if dt == DType::U8 {
                Repr::Shifted(v)
            } else {
                Repr::Exact(v)
            }
        };
        match self.repr.get(&xt).copied() {
            Some(Repr::Deq { q, scale: s, zp: z }) if s == scale && z == zp8 => {
                self.repr.insert(yt, shifted(q));
                self.status.insert(n.origin[0].name.clone(), Support::Removed { how: "QuantizeLinear of a DequantizeLinear with the same parameters (identity on the int8 data)".into() });
                Ok(())
            }
            Some(Repr::Deq { .. }) => {
                Err("requantization to other parameters (done in float on the CPU)".into())
            }
            _ => {
                let x = self.exact(xt, "QuantizeLinear")?;
                let qp = QuantParams {
                    scale,
                    zero_point: zp8,
                };
                let fact = Fact::new(DType::I8, self.g.fact(yt).shape.clone());
                let v =
                    self.plan
                        .add_value(format!("{}:i8", self.g.tensors[yt].name), fact, Some(qp));
                let step = self.push(
                    &self.node_name(ix),
                    vec![x],
                    vec![v],
                    StepKind::Quantize(qp),
                );
                self.repr.insert(yt, shifted(v));
                let how = if dt == DType::U8 {
                    " (to uint8 held as int8: zero point - 128)"
                } else {
                    ""
                };
                self.set_status(
                    ix,
                    Support::Cpu {
                        step,
                        reason: format!("quantization of a float tensor{how}"),
                    },
                );
                Ok(())
            }
        }
    }

    fn dequantize_node(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let xt = n.inputs[0].ok_or("no input")?;
        if self.g.const_value(xt).is_some() {
            // Quantized weights: read by the consuming layer, or evaluated if a CPU op needs them.
            self.set_status(
                ix,
                Support::Removed {
                    how: "dequantized constant (read by its consumer)".into(),
                },
            );
            return Ok(());
        }
        let s = self.g.const_input(ix, 1).ok_or("scale is not a constant")?;
        let z = self.g.const_input(ix, 2);
        if s.len() != 1 {
            return Err("per-axis dequantization of an activation".into());
        }
        if !matches!(self.g.fact(xt).dtype, DType::I8 | DType::U8) {
            return Err(format!("dequantization of {}", self.g.fact(xt).dtype));
        }
        let (v, off) = self.as_i8(xt)?;
        let yt = n.outputs[0];
        self.repr.insert(
            yt,
            Repr::Deq {
                q: v,
                scale: s.scalar_f32()?,
                zp: scalar_i32(z) - off,
            },
        );
        let name = n.origin[0].name.clone();
        self.status.insert(name, Support::Fused { into: "its consumers".into(), how: "the int8 tensor is used directly (dequantization is a change of interpretation)".into() });
        Ok(())
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
        } else if let Some(b) = any.downcast_ref::<Binary>() {
            match b.kind {
                BinKind::Add => self.add(ix),
                BinKind::Mul => self.scale_mul(ix),
                _ => Err(format!("no accelerator layer for {}", b.op_type())),
            }
        } else if any.is::<GlobalAveragePool>() || any.is::<AveragePool>() {
            self.global_pool(ix)
        } else if any.is::<MaxPool>() {
            self.max_pool(ix)
        } else if any.is::<Flatten>() || any.is::<Reshape>() || any.is::<Squeeze>() {
            self.reshape_int8(ix)
        } else if any.is::<Concat>() {
            self.concat(ix)
        } else if any.is::<ConvInteger>() || any.is::<MatMulInteger>() {
            Err("produces int32 accumulators without requantization; the accelerator's layers output int8".into())
        } else {
            Err(format!(
                "no accelerator layer for {}",
                self.g.dag[ix].op.op_type()
            ))
        }
    }
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
    let mut lw = Lowerer {
        g,
        opts,
        stats,
        blocker,
        pow2_only: !cfg.alu_mul,
        quantized_model: is_quantized(g),
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
    Ok((lw.plan, SupportTable { entries }))
}
