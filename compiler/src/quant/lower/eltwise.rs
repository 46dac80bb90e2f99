//! The element-wise operators of edge CNNs lowered to int8 layers:
//!
//! - single-input functions (Sigmoid, Tanh, HardSwish, SiLU, GELU, Exp, ...) to a
//!   [`QTable`] built from the float function (exact: the table is `Quantize(f(Dequantize))`);
//! - HardSigmoid, standalone Relu/Clip, BatchNormalization, and Add/Sub/Mul/Div by scalar or
//!   per-channel constants to a [`QAffine`];
//! - LeakyRelu and PRelu to a [`QLeakyRelu`] (`max(x * p, x * n)` with fixed-point slopes);
//! - Add, Sub and Mul of two tensors (one possibly `[N, C, 1, 1]`) to [`QBinary`] (or
//!   [`QAdd`] for a plain residual add);
//! - nearest Resize by integer factors to [`QUpsample`]; other data movement (Split, Slice,
//!   Transpose, Pad, nearest Resize, SpaceToDepth, DepthToSpace, Expand, Tile) to exact CPU
//!   steps on the int8 data;
//! - ConvTranspose to an `InsertZeros` CPU step and a stride-1 [`QConv2d`]; AveragePool to a
//!   depthwise [`QConv2d`] of constant weights; Concat of differently quantized inputs to
//!   rescaling [`QAffine`] layers and an int8 concatenation.

use crate::graph::ops::average_pool::AveragePool;
use crate::graph::ops::batch_norm::BatchNorm;
use crate::graph::ops::clip::Clip;
use crate::graph::ops::conv_transpose::ConvTranspose;
use crate::graph::ops::internal::InsertZeros;
use crate::graph::ops::pad::Pad;
use crate::graph::ops::prelu::PRelu;
use crate::graph::ops::relu::Relu;
use crate::graph::ops::resize::{Resize, ResizeMode};
use crate::graph::ops::slice::Slice;
use crate::graph::ops::split::Split;
use crate::graph::ops::unary::{Unary, UnaryKind};
use crate::qlayer::{BinaryOp, QAffine, QBinary, QLeakyRelu, QTable, QUpsample};

use super::*;

/// Fixed-point denominator of LeakyRelu/PRelu slopes: `slope ~ mul_neg / 4096`.
const SLOPE_ONE: i16 = 4096;

/// Per-channel values of a constant that broadcasts to a tensor of shape `x` (rank 2 to 4,
/// channel axis 1): a scalar, or `C` values along the channel axis.
fn channel_values(c: &ArrayD<f32>, x: &[usize]) -> Option<Vec<f32>> {
    let ch = *x.get(1)?;
    let v: Vec<f32> = c.iter().cloned().collect();
    if v.len() == 1 && c.ndim() <= x.len() {
        return Some(vec![v[0]; ch]);
    }
    let s = c.shape();
    if s.len() > x.len() || v.len() != ch {
        return None;
    }
    // Right-aligned: the constant's axis facing axis 1 of x must hold the channels.
    let caxis = 1 + s.len() as isize - x.len() as isize;
    (caxis >= 0 && s[caxis as usize] == ch).then_some(v)
}

/// One value for all channels when they agree.
fn collapse<T: Copy + PartialEq>(v: Vec<T>) -> Vec<T> {
    if v.iter().all(|&x| x == v[0]) {
        vec![v[0]]
    } else {
        v
    }
}

fn rank_2_to_4(f: &Fact) -> R<()> {
    if (2..=4).contains(&f.rank()) {
        Ok(())
    } else {
        Err(format!(
            "a rank-{} tensor (the element-wise layers take rank 2 to 4, channel axis 1)",
            f.rank()
        ))
    }
}

impl<'g> Lowerer<'g> {
    /// The value of a float constant: an initializer, a folded value, or a DequantizeLinear of
    /// constants.
    fn float_const(&self, t: TensorId) -> Option<ArrayD<f32>> {
        if let Some(v) = self.g.const_value(t) {
            return v.as_f32().ok().cloned();
        }
        let dq = self.const_dq(t)?;
        let n = &self.g.dag[dq];
        let args: Vec<Option<&Tensor>> = n
            .inputs
            .iter()
            .map(|i| i.and_then(|i| self.g.const_value(i)))
            .collect();
        n.op.eval(&args).ok()?.remove(0).as_f32().ok().cloned()
    }

    /// Marks the DequantizeLinear producing constant `t` (if any) as part of node `into`.
    fn fuse_const_dq(&mut self, t: TensorId, into: &str) {
        if let Some(dq) = self.const_dq(t) {
            self.set_fused(dq, into, "quantized constant of the layer");
        }
    }

    /// `y = k[c] * x + b[c]`, then the clamp `act`, as a [`QAffine`].
    fn affine(
        &mut self,
        ix: NodeIndex,
        xt: TensorId,
        k: Vec<f32>,
        b: Vec<f32>,
        act: Option<Activation>,
        what: &str,
    ) -> R<()> {
        let fx = self.g.fact(xt).clone();
        rank_2_to_4(&fx)?;
        if fx.shape != self.g.fact(self.g.dag[ix].outputs[0]).shape {
            return Err("the constant broadcasts the input to a larger shape".into());
        }
        if k.iter().chain(&b).any(|v| !v.is_finite()) {
            return Err("a constant is not finite".into());
        }
        let ch = fx.shape[1];
        let (out, target) = self.out_target(ix, act)?;
        let x = self.as_q8(xt)?;
        let name = self.node_name(ix);
        let (weight, bias, requant, note) = if self.quantized_model {
            // k = w * s_w exactly with w = +-127 (0 for k = 0).
            let sw: Vec<f64> = k
                .iter()
                .map(|&v| {
                    if v == 0.0 {
                        1.0 / 127.0
                    } else {
                        f64::from(v).abs() / 127.0
                    }
                })
                .collect();
            let w: Vec<i32> = k
                .iter()
                .map(|&v| if v == 0.0 { 0 } else { 127 * v.signum() as i32 })
                .collect();
            let (lo, hi) = self.range_of(x.v);
            let mut bias = Vec::with_capacity(ch);
            let mut ranges = Vec::with_capacity(ch);
            let mut bias_dev = 0f64;
            for c in 0..ch {
                let unit = x.scale * sw[c];
                let bq = (f64::from(b[c]) / unit).round();
                bias_dev = bias_dev.max((bq * unit - f64::from(b[c])).abs() / out.scale);
                let bc = bq as i64 - i64::from(x.zp) * i64::from(w[c]);
                let (p, q) = (
                    i64::from(w[c]) * i64::from(lo),
                    i64::from(w[c]) * i64::from(hi),
                );
                ranges.push(AccRange {
                    lo: p.min(q) + bc,
                    hi: p.max(q) + bc,
                });
                bias.push(i32::try_from(bc).map_err(|_| format!("bias {bc} does not fit int32"))?);
            }
            let m: Vec<f64> = sw.iter().map(|s| x.scale * s / out.scale).collect();
            let mut c = self.make_requant(&m, &ranges, MulRounding::Nearest, &out)?;
            c.deviation += bias_dev;
            let note = self.check_fidelity(&c, &out, true)?;
            (w, bias, c.requant, format!("QDQ {what}: {note}"))
        } else {
            let kw =
                ArrayD::from_shape_vec(ndarray::IxDyn(&[ch, 1]), k).map_err(|e| e.to_string())?;
            let (q, bias, requant, note) = self.ptq_weights(x, &kw, Some(&b), &out, false, None)?;
            (
                q.into_iter().map(i32::from).collect(),
                bias,
                requant,
                format!("{what}: {note}"),
            )
        };
        let layer = QAffine {
            name,
            weight: collapse(weight.into_iter().map(|v| v as i16).collect()),
            bias: collapse(bias),
            requant: Requant {
                mul: collapse(requant.mul.clone()),
                ..requant
            },
        };
        self.accel(ix, Layer::Affine(layer), vec![x.v], out, target, note);
        Ok(())
    }

    /// A single-input function as a [`QTable`] (HardSigmoid and LeakyRelu go to the ALU
    /// layers instead).
    pub(super) fn unary(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let u =
            n.op.as_any()
                .downcast_ref::<Unary>()
                .expect("Unary")
                .clone();
        let xt = n.inputs[0].ok_or("no input")?;
        match u.kind {
            UnaryKind::HardSigmoid { alpha, beta } => {
                let ch = self.g.fact(xt).shape.get(1).copied().unwrap_or(1);
                let act = Activation { min: 0.0, max: 1.0 };
                self.affine(
                    ix,
                    xt,
                    vec![alpha; ch],
                    vec![beta; ch],
                    Some(act),
                    "HardSigmoid as alpha x + beta clamped to [0, 1]",
                )
            }
            UnaryKind::LeakyRelu { alpha } => {
                let ch = self.g.fact(xt).shape.get(1).copied().unwrap_or(1);
                self.leaky(ix, xt, vec![alpha; ch])
            }
            _ => self.table(ix, xt, &u),
        }
    }

    fn table(&mut self, ix: NodeIndex, xt: TensorId, u: &Unary) -> R<()> {
        let (out, target) = self.out_target(ix, None)?;
        let x = self.as_q8(xt)?;
        let name = self.node_name(ix);
        let f = u.kind.name();
        let layer = QTable::build(
            &name,
            f,
            |v| u.apply(v),
            (x.scale as f32, x.zp),
            (out.scale as f32, out.zp),
            (out.lo, out.hi),
        );
        let note = if self.quantized_model {
            format!("QDQ {f} as a 256-entry table of Quantize({f}(Dequantize(x))) (exact)")
        } else {
            format!("post-training int8: {f} as a 256-entry table (exact for the int8 input)")
        };
        self.accel(ix, Layer::Table(layer), vec![x.v], out, target, note);
        Ok(())
    }

    /// LeakyRelu / PRelu with per-channel `slopes`.
    fn leaky(&mut self, ix: NodeIndex, xt: TensorId, slopes: Vec<f32>) -> R<()> {
        rank_2_to_4(self.g.fact(xt))?;
        let one = f64::from(SLOPE_ONE);
        let neg: Vec<i16> = slopes
            .iter()
            .map(|&a| {
                let v = (f64::from(a) * one).round();
                if v.abs() <= f64::from(i16::MAX) {
                    Ok(v as i16)
                } else {
                    Err(format!(
                        "slope {a} does not fit the fixed-point multiplier (|slope| < 8)"
                    ))
                }
            })
            .collect::<R<_>>()?;
        let (out, target) = self.out_target(ix, None)?;
        let x = self.as_q8(xt)?;
        let (lo, hi) = self.range_of(x.v);
        let (lo, hi) = (i64::from(lo - x.zp), i64::from(hi - x.zp));
        let ranges: Vec<AccRange> = neg
            .iter()
            .map(|&nv| {
                let cands = [
                    lo * i64::from(SLOPE_ONE),
                    hi * i64::from(SLOPE_ONE),
                    lo * i64::from(nv),
                    hi * i64::from(nv),
                    0,
                ];
                AccRange {
                    lo: *cands.iter().min().expect("values"),
                    hi: *cands.iter().max().expect("values"),
                }
            })
            .collect();
        let m = x.scale / (one * out.scale);
        let mut c = self.make_requant(&[m], &ranges, MulRounding::Nearest, &out)?;
        // The fixed-point slope's error, for the most negative input.
        let slope_dev = neg
            .iter()
            .zip(&slopes)
            .map(|(&nv, &a)| (f64::from(nv) / one - f64::from(a)).abs())
            .fold(0.0, f64::max)
            * lo.abs().max(hi.abs()) as f64
            * x.scale
            / out.scale;
        c.deviation += slope_dev;
        let note = if self.quantized_model {
            format!("QDQ: {}", self.check_fidelity(&c, &out, true)?)
        } else {
            format!("post-training int8: max(x * {SLOPE_ONE}, x * slope * {SLOPE_ONE}), deviation <= {:.3} LSB", c.deviation)
        };
        let layer = QLeakyRelu {
            name: self.node_name(ix),
            zp: clamp_i8(i64::from(x.zp)),
            mul_pos: SLOPE_ONE,
            mul_neg: collapse(neg),
            requant: c.requant,
        };
        self.accel(ix, Layer::LeakyRelu(layer), vec![x.v], out, target, note);
        Ok(())
    }

    pub(super) fn prelu(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        debug_assert!(n.op.as_any().is::<PRelu>());
        let xt = n.inputs[0].ok_or("no input")?;
        let st = n.inputs[1].ok_or("no slope")?;
        let s = self.float_const(st).ok_or("the slope is not a constant")?;
        let slopes = channel_values(&s, &self.g.fact(xt).shape)
            .ok_or("the slope is neither a scalar nor per-channel")?;
        let name = self.node_name(ix);
        self.leaky(ix, xt, slopes)?;
        self.fuse_const_dq(st, &name);
        Ok(())
    }

    /// A standalone Relu or constant-bound Clip on a quantized tensor: the clamp of an
    /// identity [`QAffine`].
    pub(super) fn clamp(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let any = n.op.as_any();
        let act = if any.is::<Relu>() {
            Activation::RELU
        } else {
            let c = any.downcast_ref::<Clip>().expect("Clip");
            c.static_bounds(&self.g.input_infos(ix))
                .ok_or("the bounds are not constants")?
        };
        let xt = n.inputs[0].ok_or("no input")?;
        if self.g.fact(xt).dtype != DType::F32 {
            return Err(
                "a Clip of an integer tensor not fused into its QuantizeLinear (the \
                        quantized tensor has other readers)"
                    .into(),
            );
        }
        let ch = self.g.fact(xt).shape.get(1).copied().unwrap_or(1);
        self.affine(ix, xt, vec![1.0; ch], vec![0.0; ch], Some(act), "clamp")
    }

    /// BatchNormalization that no convolution before it absorbed (a quantizer left it in
    /// float after a `DequantizeLinear`, or a float model normalizes a pooled or
    /// concatenated tensor): the per-channel map `y = x * m + o` that ONNX defines, as a
    /// [`QAffine`].
    pub(super) fn batch_norm(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let bn =
            n.op.as_any()
                .downcast_ref::<BatchNorm>()
                .expect("BatchNorm")
                .clone();
        if n.outputs.len() > 1 {
            return Err("training mode (running mean and variance outputs)".into());
        }
        let xt = n.inputs[0].ok_or("no input")?;
        let param = |k: usize, what: &str| -> R<Vec<f32>> {
            n.inputs
                .get(k)
                .copied()
                .flatten()
                .and_then(|t| self.float_const(t))
                .map(|a| a.iter().copied().collect())
                .ok_or_else(|| format!("its {what} is not a constant"))
        };
        let (scale, bias) = (param(1, "scale")?, param(2, "bias")?);
        let (mean, var) = (param(3, "mean")?, param(4, "variance")?);
        let ch = self.g.fact(xt).shape.get(1).copied().unwrap_or(0);
        if [&scale, &bias, &mean, &var].iter().any(|p| p.len() != ch) {
            return Err(format!(
                "its parameters do not have one value per channel ({ch})"
            ));
        }
        let (m, o) = bn.affine(&scale, &bias, &mean, &var);
        self.affine(ix, xt, m, o, None, "BatchNormalization")
    }

    /// Add/Sub/Mul/Div with one constant operand: a change of scale (Mul/Div by a positive
    /// scalar) or a [`QAffine`].
    pub(super) fn binary_const(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let bin =
            n.op.as_any()
                .downcast_ref::<Binary>()
                .expect("Binary")
                .clone();
        let (at, bt) = (n.inputs[0].ok_or("no A")?, n.inputs[1].ok_or("no B")?);
        let (xt, ct, const_first) = match (self.float_const(at), self.float_const(bt)) {
            (None, Some(_)) => (at, bt, false),
            (Some(_), None) => (bt, at, true),
            _ => return Err("not a tensor and a constant".into()),
        };
        let cv = self.float_const(ct).expect("constant");
        let xs = self.g.fact(xt).shape.clone();
        if matches!(bin.kind, BinKind::Mul | BinKind::Div) && !const_first && cv.len() == 1 {
            let k = cv.iter().next().copied().expect("one value");
            let k = if bin.kind == BinKind::Div { 1.0 / k } else { k };
            if k > 0.0 && k.is_finite() && bin.activation.is_none() {
                if let Some(Repr::Deq { q, scale, zp }) = self.repr.get(&xt).copied() {
                    let yt = n.outputs[0];
                    if self.g.fact(yt).shape == xs {
                        self.repr.insert(
                            yt,
                            Repr::Deq {
                                q,
                                scale: scale * k,
                                zp,
                            },
                        );
                        let name = n.origin[0].name.clone();
                        self.status.insert(
                            name.clone(),
                            Support::Removed {
                                how: format!("folded into the quantization scale (x {k})"),
                            },
                        );
                        self.fuse_const_dq(ct, &name);
                        return Ok(());
                    }
                }
            }
        }
        let v = channel_values(&cv, &xs).ok_or_else(|| {
            format!(
                "constant of shape {:?} is neither a scalar nor per-channel for {:?}",
                cv.shape(),
                xs
            )
        })?;
        let ch = v.len();
        let (k, b): (Vec<f32>, Vec<f32>) = match (bin.kind, const_first) {
            (BinKind::Add, _) => (vec![1.0; ch], v),
            (BinKind::Sub, false) => (vec![1.0; ch], v.iter().map(|c| -c).collect()),
            (BinKind::Sub, true) => (vec![-1.0; ch], v),
            (BinKind::Mul, _) => (v, vec![0.0; ch]),
            (BinKind::Div, false) => {
                if v.contains(&0.0) {
                    return Err("division by zero".into());
                }
                (v.iter().map(|c| 1.0 / c).collect(), vec![0.0; ch])
            }
            (BinKind::Div, true) => {
                return Err("division of a constant by a tensor (not affine)".into())
            }
            (BinKind::Pow, _) => return Err("Pow is not affine".into()),
            (BinKind::Mod | BinKind::Fmod, _) => return Err("Mod is not affine".into()),
            (BinKind::Max | BinKind::Min, _) => {
                return Err(format!(
                    "{} by a constant of several values (a per-element bound, not a clamp)",
                    bin.op_type()
                ))
            }
        };
        let name = self.node_name(ix);
        let what = format!("{} by a constant", bin.op_type());
        self.affine(ix, xt, k, b, bin.activation, &what)?;
        self.fuse_const_dq(ct, &name);
        Ok(())
    }

    /// Add, Sub or Mul of two tensors: [`QAdd`] for a plain residual add, else [`QBinary`].
    pub(super) fn binary(&mut self, ix: NodeIndex) -> R<()> {
        let bin = self.g.dag[ix]
            .op
            .as_any()
            .downcast_ref::<Binary>()
            .expect("Binary")
            .clone();
        if bin.kind == BinKind::Add {
            let snap = self.snapshot();
            match self.add(ix) {
                Ok(()) => return Ok(()),
                Err(_) => self.restore(snap),
            }
        }
        let n = &self.g.dag[ix];
        let (mut at, mut bt) = (n.inputs[0].ok_or("no A")?, n.inputs[1].ok_or("no B")?);
        let (fa, fb) = (self.g.fact(at).clone(), self.g.fact(bt).clone());
        rank_2_to_4(&fa)?;
        rank_2_to_4(&fb)?;
        if !QBinary::operands_fit(&fa.shape, &fb.shape) {
            if bin.kind != BinKind::Sub && QBinary::operands_fit(&fb.shape, &fa.shape) {
                std::mem::swap(&mut at, &mut bt);
            } else {
                return Err(format!(
                    "operands {:?} and {:?}: the accelerator broadcasts only an [N, C, 1, 1] operand",
                    fa.shape, fb.shape
                ));
            }
        }
        let (out, target) = self.out_target(ix, bin.activation)?;
        let a = self.as_q8(at)?;
        let b = self.as_q8(bt)?;
        let (la, ha) = self.range_of(a.v);
        let (lb, hb) = self.range_of(b.v);
        let (la, ha) = (i64::from(la - a.zp), i64::from(ha - a.zp));
        let (lb, hb) = (i64::from(lb - b.zp), i64::from(hb - b.zp));
        let name = self.node_name(ix);
        let (op, ma, mb, requant, dev) = match bin.kind {
            BinKind::Mul => {
                let p = [la * lb, la * hb, ha * lb, ha * hb];
                let ranges = [AccRange {
                    lo: *p.iter().min().expect("values"),
                    hi: *p.iter().max().expect("values"),
                }];
                let m = a.scale * b.scale / out.scale;
                let c = self.make_requant(&[m], &ranges, MulRounding::Nearest, &out)?;
                (BinaryOp::Mul, 1, 1, c.requant, c.deviation)
            }
            BinKind::Add | BinKind::Sub => {
                let sign = if bin.kind == BinKind::Sub { -1.0 } else { 1.0 };
                let (ra, rb) = (a.scale / out.scale, sign * b.scale / out.scale);
                let (xa, xb) = (la.abs().max(ha.abs()) as f64, lb.abs().max(hb.abs()) as f64);
                let mut chosen = None;
                for s in (0u8..=16).rev() {
                    let k = f64::from(1u32 << s);
                    let (ma, mb) = ((ra * k).round(), (rb * k).round());
                    if ma.abs() <= 32767.0 && mb.abs() <= 32767.0 && ma != 0.0 && mb != 0.0 {
                        let dev = xa * (ma / k - ra).abs() + xb * (mb / k - rb).abs();
                        chosen = Some((s, ma as i16, mb as i16, dev));
                        break;
                    }
                }
                let (s, ma, mb, dev) =
                    chosen.ok_or("operand scale ratios do not fit 16-bit multipliers")?;
                let requant = Requant {
                    pre_shift: 0,
                    acc_clamp: None,
                    mul: vec![1],
                    shift: s,
                    zero_point: clamp_i8(i64::from(out.zp)),
                    lo: out.lo,
                    hi: out.hi,
                };
                (BinaryOp::Add, ma, mb, requant, dev)
            }
            BinKind::Div => return Err("division of two tensors".into()),
            BinKind::Pow => return Err("Pow of two tensors".into()),
            BinKind::Max | BinKind::Min | BinKind::Mod | BinKind::Fmod => {
                return Err(format!("{} of two tensors", bin.op_type()))
            }
        };
        self.check_muls(&requant)?;
        let c = RequantChoice {
            effective: vec![],
            mul_rel_error: 0.0,
            trunc_error: 0.0,
            deviation: dev,
            requant: requant.clone(),
        };
        let note = if self.quantized_model {
            format!("QDQ: {}", self.check_fidelity(&c, &out, true)?)
        } else {
            format!("post-training int8 (deviation <= {dev:.3} LSB)")
        };
        let layer = QBinary {
            name,
            op,
            zp_a: clamp_i8(i64::from(a.zp)),
            zp_b: clamp_i8(i64::from(b.zp)),
            mul_a: ma,
            mul_b: mb,
            requant,
        };
        self.accel(ix, Layer::Binary(layer), vec![a.v, b.v], out, target, note);
        Ok(())
    }

    /// Resize: nearest by integer factors on the accelerator, other nearest resizing as an
    /// exact CPU step on the int8 data; linear and cubic interpolation compute new values in
    /// float.
    pub(super) fn resize(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let op =
            n.op.as_any()
                .downcast_ref::<Resize>()
                .expect("Resize")
                .clone();
        if op.mode != ResizeMode::Nearest {
            return Err(format!(
                "{:?} interpolation computes new values (in float on the CPU)",
                op.mode
            ));
        }
        if op.coord == crate::graph::ops::resize::CoordMode::TfCropAndResize {
            return Err("tf_crop_and_resize extrapolates in float (on the CPU)".into());
        }
        let xt = n.inputs[0].ok_or("no input")?;
        let yt = n.outputs[0];
        let xs = self.g.fact(xt).shape.clone();
        let ys = self.g.fact(yt).shape.clone();
        let c = |i: usize| {
            n.inputs
                .get(i)
                .copied()
                .flatten()
                .and_then(|t| self.g.const_value(t))
        };
        let (scales, sizes) = match op.source {
            crate::graph::ops::resize::SizeSource::ScalesInput => (c(1), None),
            crate::graph::ops::resize::SizeSource::ScalesOrSizes => (c(2), c(3)),
            crate::graph::ops::resize::SizeSource::Attribute(_) => (None, None),
        };
        let (_, sc) = op.resolve(&xs, scales, sizes)?;
        let repeat = xs.len() == 4
            && xs[..2] == ys[..2]
            // (a repeat of every cell k times also means the output is k times longer)
            && (2..4).all(|a| {
                Resize::is_repeat(&op.axis_map(xs[a], ys[a], sc[a]), ys[a] / xs[a])
            });
        if !repeat {
            return self.move_int8(
                ix,
                "nearest resize on the int8 tensor (exact data movement)",
            );
        }
        let (xv, mk) = self.int8_passthrough(xt)?;
        let layer = QUpsample {
            name: self.node_name(ix),
            factor: (ys[2] / xs[2], ys[3] / xs[3]),
        };
        let range = self.range_of(xv);
        let qp = self.passthrough_quant(xt, xv);
        let v = self.plan.add_value(
            format!("{}:i8", self.g.tensors[yt].name),
            Fact::new(DType::I8, ys),
            qp,
        );
        self.ranges.insert(v, range);
        let step = self.push(
            &self.node_name(ix),
            vec![xv],
            vec![v],
            StepKind::Accel(Layer::Upsample(layer)),
        );
        self.repr.insert(yt, mk(v));
        self.set_status(
            ix,
            Support::Accel {
                layer: "QUpsample",
                step,
                note: "nearest upsampling by integer factors moves int8 data (exact)".into(),
            },
        );
        Ok(())
    }

    /// A data-movement op (Split, Slice, Transpose, Pad, nearest Resize, SpaceToDepth,
    /// DepthToSpace, Expand, Tile) as an exact CPU step on the int8 tensor; its outputs keep
    /// the input's quantization.
    pub(super) fn move_int8(&mut self, ix: NodeIndex, reason: &str) -> R<()> {
        let n = &self.g.dag[ix];
        let xt = n.inputs[0].ok_or("no input")?;
        let outs = n.outputs.clone();
        let inputs = n.inputs.clone();
        let mut op = n.op.to_any();
        let pad = n.op.as_any().downcast_ref::<Pad>().cloned();
        let x_repr = self.repr.get(&xt).copied();
        let (xv, mk) = self.int8_passthrough(xt)?;
        let mut args = vec![Some(xv)];
        for (k, t) in inputs.iter().enumerate().skip(1) {
            args.push(match t {
                // A Pad's value is replaced by its int8 cell below.
                Some(_) if k == 2 && pad.is_some() => None,
                None => None,
                Some(t) => Some(self.exact(*t, "a data-movement op")?),
            });
        }
        let (mut lo, mut hi) = self.range_of(xv);
        if let Some(p) = pad {
            // The pad value becomes the int8 cell that stands for it exactly.
            let v = match inputs.get(2).copied().flatten() {
                Some(t) => self
                    .float_const(t)
                    .and_then(|v| v.iter().next().copied())
                    .ok_or("the pad value is not a float constant")?,
                None => p.attrs.as_ref().map_or(0.0, |a| a.1),
            };
            let q = self.pad_value(v, x_repr)?;
            if p.mode == crate::graph::ops::pad::PadMode::Constant {
                (lo, hi) = (lo.min(i32::from(q)), hi.max(i32::from(q)));
            }
            match &p.attrs {
                Some((pads, _)) => {
                    op = Pad {
                        mode: p.mode,
                        attrs: Some((pads.clone(), f32::from(q))),
                    }
                    .into()
                }
                None => {
                    let c = self.plan.add_constant(
                        format!("{}:pad_value", self.node_name(ix)),
                        Arc::new(Tensor::I8(ndarray::ArrayD::from_elem(
                            ndarray::IxDyn(&[]),
                            q,
                        ))),
                    );
                    args.resize(3, None);
                    args[2] = Some(c);
                }
            }
        }
        let range = (lo, hi);
        let qp = self.passthrough_quant(xt, xv);
        let mut ovs = Vec::new();
        for &o in &outs {
            let v = self.plan.add_value(
                format!("{}:i8", self.g.tensors[o].name),
                Fact::new(DType::I8, self.g.fact(o).shape.clone()),
                qp,
            );
            self.ranges.insert(v, range);
            self.repr.insert(o, mk(v));
            ovs.push(v);
        }
        let step = self.push(
            &self.node_name(ix),
            args.iter().flatten().copied().collect(),
            ovs,
            StepKind::Cpu(CpuOp {
                op,
                args,
                reason: reason.to_string(),
            }),
        );
        self.set_status(
            ix,
            Support::Cpu {
                step,
                reason: reason.to_string(),
            },
        );
        Ok(())
    }

    /// Split, and Slice of the channel axis alone (step 1), of a rank-2..4 tensor: one
    /// [`QSlice`] accelerator step per output; other slicing as an exact CPU step.
    pub(super) fn channel_slices(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let xt = n.inputs[0].ok_or("no input")?;
        let outs = n.outputs.clone();
        let xs = self.g.fact(xt).shape.clone();
        let r = xs.len();
        let any = n.op.as_any();
        let slices: Option<Vec<(usize, usize)>> = if !(2..=4).contains(&r) {
            None
        } else if let Some(sp) = any.downcast_ref::<Split>() {
            if crate::graph::ops::axis(sp.axis, r)? == 1 {
                let parts = sp.parts(xs[1], self.g.const_input(ix, 1))?;
                let mut at = 0;
                Some(
                    parts
                        .into_iter()
                        .map(|p| {
                            at += p;
                            (at - p, p)
                        })
                        .collect(),
                )
            } else {
                None
            }
        } else {
            let sl = any.downcast_ref::<Slice>().expect("Slice");
            let c = |i: usize| self.g.const_input(ix, i);
            let axes = sl.axes(&xs, [c(1), c(2), c(3), c(4)])?;
            let whole = |a: &crate::graph::ops::slice::AxisSlice| {
                a.start == 0 && a.step == 1 && a.len == xs[a.axis]
            };
            match axes.iter().find(|a| !whole(a)) {
                Some(a) if a.axis == 1 && a.step == 1 && a.len > 0 => {
                    if axes.iter().filter(|b| !whole(b)).count() == 1 {
                        Some(vec![(a.start, a.len)])
                    } else {
                        None
                    }
                }
                Some(_) => None,
                None => Some(vec![(0, xs[1])]),
            }
        };
        let Some(slices) = slices else {
            return self.move_int8(ix, "data movement on the int8 tensor (exact)");
        };
        let name = self.node_name(ix);
        let (xv, mk) = self.int8_passthrough(xt)?;
        let range = self.range_of(xv);
        let qp = self.passthrough_quant(xt, xv);
        let mut first = None;
        for (k, (&o, &(start, len))) in outs.iter().zip(&slices).enumerate() {
            let v = self.plan.add_value(
                format!("{}:i8", self.g.tensors[o].name),
                Fact::new(DType::I8, self.g.fact(o).shape.clone()),
                qp,
            );
            self.ranges.insert(v, range);
            let sname = if outs.len() == 1 {
                name.clone()
            } else {
                format!("{name}:{k}")
            };
            let step = self.push(
                &sname,
                vec![xv],
                vec![v],
                StepKind::Accel(Layer::Slice(QSlice {
                    name: sname.clone(),
                    start,
                    len,
                })),
            );
            first.get_or_insert(step);
            self.repr.insert(o, mk(v));
        }
        self.set_status(
            ix,
            Support::Accel {
                layer: "QSlice",
                step: first.ok_or("no outputs")?,
                note: format!(
                    "{} channel slice(s) of whole blocks (exact; views or copies: see the \
                     accelerator layers)",
                    slices.len()
                ),
            },
        );
        Ok(())
    }

    /// The int8 cell standing exactly for the real pad value `v` of a tensor held as `repr`.
    fn pad_value(&self, v: f32, repr: Option<Repr>) -> R<i8> {
        let q = match repr {
            Some(Repr::Deq { scale, zp, .. }) => {
                let q = quantize_value(v, scale, zp, -128, 127);
                if (q - zp) as f32 * scale != v {
                    return Err(format!(
                        "pad value {v} is not exactly representable in int8"
                    ));
                }
                q
            }
            Some(Repr::Shifted(_)) => v as i32 - 128,
            Some(Repr::Offset(_, off)) => v as i32 - off,
            _ => v as i32,
        };
        i8::try_from(q).map_err(|_| format!("pad value {v} does not fit int8"))
    }

    /// ConvTranspose as `InsertZeros` (CPU, exact) and a stride-1 convolution with the kernel
    /// flipped and its channel axes swapped.
    pub(super) fn conv_transpose(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let op =
            n.op.as_any()
                .downcast_ref::<ConvTranspose>()
                .expect("ConvTranspose")
                .clone();
        let (xt, wt, bt) = (
            n.inputs[0].ok_or("no input")?,
            n.inputs[1].ok_or("no weight")?,
            n.inputs.get(2).copied().flatten(),
        );
        let (nn, c, h, w) = dims4(&self.g.fact(xt).shape, "input")?;
        let (_, og, kh, kw) = dims4(&self.g.fact(wt).shape, "weight")?;
        let geo = op.resolve((h, w), (kh, kw))?;
        if geo.dilation != (1, 1) {
            return Err("dilated transposed convolution".into());
        }
        let side = |k: usize, p: usize, extra: usize| (k - 1 + extra).checked_sub(p);
        let pads = [
            side(kh, geo.pad[0], 0),
            side(kw, geo.pad[1], 0),
            side(kh, geo.pad[2], geo.output_padding.0),
            side(kw, geo.pad[3], geo.output_padding.1),
        ];
        let Some(pads) = pads.into_iter().collect::<Option<Vec<usize>>>() else {
            return Err("padding larger than the kernel crops the output (not a convolution of the inserted input)".into());
        };
        let g = op.group;
        let cg = c / g;
        let o = og * g;
        // W'[g*og + ol, cl, ky, kx] = w[g*cg + cl, ol, kh-1-ky, kw-1-kx]
        let flip = |wv: &ArrayD<i32>| -> ArrayD<i32> {
            ArrayD::from_shape_fn(ndarray::IxDyn(&[o, cg, kh, kw]), |ix| {
                let (oc, cl, ky, kx) = (ix[0], ix[1], ix[2], ix[3]);
                let (gi, ol) = (oc / og, oc % og);
                wv[[gi * cg + cl, ol, kh - 1 - ky, kw - 1 - kx]]
            })
        };
        let (out, target) = self.out_target(ix, op.activation)?;
        let x = self.as_q8(xt)?;
        let ins = InsertZeros {
            stride: geo.stride,
            pad: [pads[0], pads[1], pads[2], pads[3]],
            fill: clamp_i8(i64::from(x.zp)),
        };
        let (ih, iw) = ins.out_hw(h, w);
        let name = self.node_name(ix);
        let xq = self.plan.values[x.v].quant;
        let v = self.plan.add_value(
            format!("{name}:inserted"),
            Fact::new(DType::I8, [nn, c, ih, iw]),
            xq,
        );
        let (lo, hi) = self.range_of(x.v);
        self.ranges.insert(v, (lo.min(x.zp), hi.max(x.zp)));
        self.push(
            &format!("{name}:insert_zeros"),
            vec![x.v],
            vec![v],
            StepKind::Cpu(CpuOp {
                op: ins.into(),
                args: vec![Some(x.v)],
                reason: "the transposed convolution's input with zeros between cells (exact data movement)".into(),
            }),
        );
        let xi = QIn {
            v,
            scale: x.scale,
            zp: x.zp,
        };
        let cgeo = Geometry {
            kernel: (kh, kw),
            stride: (1, 1),
            dilation: (1, 1),
            pad: [0; 4],
            out: geo.out,
        };
        if (ih - kh + 1, iw - kw + 1) != geo.out {
            return Err("internal: transposed convolution size".into());
        }
        let (layer, note) = if self.quantized_model {
            let (wi, sw, wdq) = self.dq_weights(wt, 1)?;
            let sw_full: Vec<f64> = (0..o).map(|oc| sw[oc % og]).collect();
            let (bias, bdq) = self.int_bias(bt, o, x.scale, &sw_full)?;
            let (l, note) = self.imported_conv(
                &name,
                xi,
                [nn, c, ih, iw],
                flip(&wi),
                &sw_full,
                bias,
                &cgeo,
                g,
                &out,
                true,
            )?;
            self.set_fused_params(wdq, bdq, &name);
            (l, format!("QDQ transposed conv: {note}"))
        } else {
            let wf = self
                .g
                .const_value(wt)
                .ok_or("weights are not constant")?
                .as_f32()?
                .clone();
            let wflip = ArrayD::from_shape_fn(ndarray::IxDyn(&[o, cg, kh, kw]), |ix| {
                let (oc, cl, ky, kx) = (ix[0], ix[1], ix[2], ix[3]);
                wf[[(oc / og) * cg + cl, oc % og, kh - 1 - ky, kw - 1 - kx]]
            });
            let b = match bt {
                None => None,
                Some(b) => Some(f32_of(
                    self.g.const_value(b).ok_or("bias is not constant")?,
                )?),
            };
            let (q, bias, requant, note) =
                self.ptq_weights(xi, &wflip, b.as_deref(), &out, false, None)?;
            let weight = Array4::from_shape_vec((o, cg, kh, kw), q).map_err(|e| e.to_string())?;
            (
                QConv2d {
                    name: name.clone(),
                    input_shape: [nn, c, ih, iw],
                    weight,
                    bias,
                    stride: (1, 1),
                    pad: [0; 4],
                    groups: g,
                    requant,
                },
                note,
            )
        };
        let note = format!(
            "{note}; as zeros inserted between input cells (CPU) and a stride-1 convolution"
        );
        self.accel(ix, Layer::Conv2d(layer), vec![v], out, target, note);
        Ok(())
    }

    /// AveragePool with a window smaller than the input: a depthwise convolution with
    /// constant weights `1 / (kh * kw)` (padding only with `count_include_pad`).
    pub(super) fn avg_pool(&mut self, ix: NodeIndex) -> R<()> {
        let n = &self.g.dag[ix];
        let ap =
            n.op.as_any()
                .downcast_ref::<AveragePool>()
                .expect("AveragePool")
                .clone();
        let xt = n.inputs[0].ok_or("no input")?;
        let (nn, c, h, w) = dims4(&self.g.fact(xt).shape, "input")?;
        if ap.is_global(h, w) {
            return self.global_pool(ix);
        }
        let geo = ap.window.resolve((h, w), (1, 1))?;
        if geo.dilation != (1, 1) {
            return Err("dilated average pooling".into());
        }
        let padded = geo.pad != [0; 4];
        if padded && !ap.count_include_pad {
            return Err("padded average pooling without count_include_pad divides border windows by fewer cells".into());
        }
        let (kh, kw) = geo.kernel;
        let floor_out = (
            (h + geo.pad[0] + geo.pad[2] - kh) / geo.stride.0 + 1,
            (w + geo.pad[1] + geo.pad[3] - kw) / geo.stride.1 + 1,
        );
        if floor_out != geo.out {
            return Err("ceil_mode windows hang over the padding".into());
        }
        let (out, target) = self.out_target(ix, None)?;
        let x = self.as_q8(xt)?;
        let name = self.node_name(ix);
        let k = (kh * kw) as f64;
        let (layer, note) = if self.quantized_model {
            let ones = ArrayD::from_elem(ndarray::IxDyn(&[c, 1, kh, kw]), 1i32);
            self.imported_conv(
                &name,
                x,
                [nn, c, h, w],
                ones,
                &vec![1.0 / k; c],
                vec![0; c],
                &geo,
                c,
                &out,
                true,
            )?
        } else {
            let wf = ArrayD::from_elem(ndarray::IxDyn(&[c, 1, kh, kw]), (1.0 / k) as f32);
            let (q, bias, requant, note) = self.ptq_weights(x, &wf, None, &out, padded, None)?;
            (
                QConv2d {
                    name: name.clone(),
                    input_shape: [nn, c, h, w],
                    weight: Array4::from_shape_vec((c, 1, kh, kw), q).map_err(|e| e.to_string())?,
                    bias,
                    stride: geo.stride,
                    pad: geo.pad,
                    groups: c,
                    requant,
                },
                note,
            )
        };
        let note = format!("average pooling as a depthwise convolution: {note}");
        self.accel(ix, Layer::Conv2d(layer), vec![x.v], out, target, note);
        Ok(())
    }

    /// Rescales an int8 value to `(scale, zp)` with an identity [`QAffine`] (an accelerator
    /// step of its own, named `name`).
    pub(super) fn rescale(
        &mut self,
        name: &str,
        x: QIn,
        shape: &[usize],
        scale: f32,
        zp: i32,
    ) -> R<ValueId> {
        let out = QOut {
            scale: f64::from(scale),
            zp,
            lo: self.act.0 as i8,
            hi: self.act.1 as i8,
            dtype: DType::F32,
            offset: 0,
            extra_dev: 0.0,
        };
        let (lo, hi) = self.range_of(x.v);
        let ranges = [AccRange {
            lo: i64::from(lo - x.zp),
            hi: i64::from(hi - x.zp),
        }];
        let c = self.make_requant(&[x.scale / out.scale], &ranges, MulRounding::Nearest, &out)?;
        if self.quantized_model {
            self.check_fidelity(&c, &out, true)?;
        }
        let layer = QAffine {
            name: name.to_string(),
            weight: vec![1],
            bias: vec![-x.zp],
            requant: c.requant,
        };
        let v = self.plan.add_value(
            format!("{name}:i8"),
            Fact::new(DType::I8, shape.to_vec()),
            Some(QuantParams {
                scale,
                zero_point: zp,
            }),
        );
        self.push(
            name,
            vec![x.v],
            vec![v],
            StepKind::Accel(Layer::Affine(layer)),
        );
        Ok(v)
    }
}
