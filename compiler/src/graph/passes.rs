//! Graph simplification before quantization and lowering:
//!
//! - [`remove_identities`]: `Identity`, inference `Dropout`, same-type `Cast`;
//! - [`fold_batch_norm`]: `BatchNormalization` after a `Conv` folded into the Conv's
//!   weights and bias (`W' = W * m[o]`, `b' = b * m[o] + o[o]` with
//!   `m = scale / sqrt(var + eps)`, `o = B - mean * m`);
//! - [`fold_channel_affine`]: `Mul`/`Add` by a per-channel (or scalar) constant after a
//!   `Conv` folded the same way;
//! - [`matmul_to_gemm`]: float `MatMul` by a constant 2-D matrix, with an optional
//!   following `Add` of a constant bias, becomes `Gemm`;
//! - [`bounds_to_clip`]: `Max`/`Min` with a constant scalar bound becomes a `Clip`;
//! - [`pool_before_clamp`]: a constant-bound `Clip` before a `MaxPool` moves after it (they
//!   commute), where a quantized model's `QuantizeLinear` usually is;
//! - [`fuse_activations`]: `Relu` and constant-bound `Clip` fused into the producing
//!   `Conv`, `ConvTranspose`, `Gemm` or `Add` (float), as a clamp on its output;
//! - [`fuse_gated_activations`]: `Mul(x, Sigmoid(x))` becomes SiLU and
//!   `Mul(x, HardSigmoid(x))` (alpha 1/6, beta 1/2) `HardSwish`, one single-input function each
//!   (so that the quantized graph computes them as one table);
//! - [`fold_pad_into_conv`]: a constant zero `Pad` of the spatial axes before a `Conv`
//!   becomes the convolution's own padding;
//! - [`fuse_clip_into_quantize`]: an integer `Clip` with constant bounds after a
//!   `QuantizeLinear` (Brevitas's QCDQ, and the importer's form of int4/int2 outputs) becomes
//!   the quantization's narrower saturation range, so the lowering sees the width;
//! - [`super::islands`]: float islands of quantized models given exact quantization
//!   parameters.
//!
//! Each pass only rewrites a producer whose output has no other reader (and is not a graph
//! output), so every other tensor keeps its value.

use ndarray::{ArrayD, Axis, IxDyn};
use petgraph::stable_graph::NodeIndex;

use super::ops::batch_norm::BatchNorm;
use super::ops::binary::{BinKind, Binary};
use super::ops::cast::Cast;
use super::ops::clip::Clip;
use super::ops::conv::Conv;
use super::ops::conv_transpose::ConvTranspose;
use super::ops::gemm::Gemm;
use super::ops::identity::Identity;
use super::ops::kernels::PadSpec;
use super::ops::matmul::MatMul;
use super::ops::max_pool::MaxPool;
use super::ops::pad::{Pad, PadMode};
use super::ops::quantize_linear::QuantizeLinear;
use super::ops::relu::Relu;
use super::ops::unary::{Unary, UnaryKind};
use super::ops::Activation;
use super::{DType, Graph, Tensor, TensorId};

/// Runs all passes in order.
pub fn simplify(g: &mut Graph) {
    remove_identities(g);
    fuse_clip_into_quantize(g);
    fold_pad_into_conv(g);
    fuse_gated_activations(g);
    fold_batch_norm(g);
    fold_channel_affine(g);
    matmul_to_gemm(g);
    bounds_to_clip(g);
    pool_before_clamp(g);
    fuse_activations(g);
    super::islands::quantize_float_islands(g);
    g.prune();
}

fn op_is<T: 'static>(g: &Graph, ix: NodeIndex) -> Option<&T> {
    g.dag.node_weight(ix)?.op.as_any().downcast_ref::<T>()
}

/// Records that node `from` was merged into node `into`, and removes `from`, making readers
/// of its output read `into`'s output.
fn merge(g: &mut Graph, from: NodeIndex, into: NodeIndex, how: String) {
    let from_out = g.dag[from].outputs[0];
    let into_out = g.dag[into].outputs[0];
    // The merged node now produces the removed node's output tensor (keeping its name).
    g.dag[into].outputs[0] = from_out;
    g.producers[from_out] = Some(into);
    g.tensors[from_out].fact = g.tensors[into_out].fact.clone();
    g.producers[into_out] = None;
    let n = g.remove_node(from).expect("node exists");
    g.producers[from_out] = Some(into);
    let into_name = g.dag[into].name.clone();
    for o in n.origin {
        g.fusions.push((o.clone(), into_name.clone(), how.clone()));
        g.dag[into].origin.push(o);
    }
    g.rebuild_edges();
}

/// Removes `Identity`, inference `Dropout` and `Cast` to the same type.
pub fn remove_identities(g: &mut Graph) {
    let ixs: Vec<NodeIndex> = g.topo_order();
    for ix in ixs {
        let Some(n) = g.dag.node_weight(ix) else {
            continue;
        };
        let Some(inp) = n.inputs.first().copied().flatten() else {
            continue;
        };
        let out = n.outputs[0];
        let is_id = op_is::<Identity>(g, ix).is_some()
            || op_is::<Cast>(g, ix).is_some_and(|c| c.to == g.tensors[inp].fact.dtype);
        if !is_id || g.is_output(out) {
            continue;
        }
        let n = g.remove_node(ix).expect("exists");
        g.replace_uses(out, inp);
        for o in n.origin {
            g.removed.push((o, "removed (identity)".into()));
        }
    }
}

/// Fuses an integer `Clip` with constant bounds into the `QuantizeLinear` producing its input
/// (when the Clip is that output's only reader): `clamp(saturate(q), lo, hi)` is
/// `saturate(q)` over the intersection of the two ranges, since both clamp the same integer.
pub fn fuse_clip_into_quantize(g: &mut Graph) {
    for ix in g.topo_order() {
        if op_is::<Clip>(g, ix).is_none() {
            continue;
        }
        let Some(x) = g.dag[ix].inputs.first().copied().flatten() else {
            continue;
        };
        let dt = g.tensors[x].fact.dtype;
        if dt == DType::F32 || !g.single_use(x) {
            continue;
        }
        let bound = |k: usize| match g.dag[ix].inputs.get(k).copied().flatten() {
            None => Some(None),
            Some(t) => g
                .const_value(t)
                .and_then(|v| v.to_i64_vec().first().copied().map(Some)),
        };
        let (Some(lo), Some(hi)) = (bound(1), bound(2)) else {
            continue;
        };
        let Some(q) = g.producers[x] else {
            continue;
        };
        let Some(qop) = op_is::<QuantizeLinear>(g, q) else {
            continue;
        };
        let Ok((a, b)) = qop.saturation(dt) else {
            continue;
        };
        let (lo, hi) = (lo.unwrap_or(i64::from(a)), hi.unwrap_or(i64::from(b)));
        // An empty or disjoint range (every value clamped to one bound) stays a Clip.
        if lo > hi || lo > i64::from(b) || hi < i64::from(a) {
            continue;
        }
        let (lo, hi) = (lo.max(i64::from(a)) as i32, hi.min(i64::from(b)) as i32);
        let mut fused = qop.clone();
        fused.range = Some((lo, hi));
        g.dag[q].op = Box::new(fused);
        merge(
            g,
            ix,
            q,
            format!("integer Clip [{lo}, {hi}] fused into the quantization's saturation"),
        );
    }
}

/// The single node reading `t` with its slot, if `t` has exactly one reader and is not a
/// graph output.
fn sole_consumer(g: &Graph, t: TensorId) -> Option<(NodeIndex, usize)> {
    if g.single_use(t) {
        g.consumers(t).pop()
    } else {
        None
    }
}

/// A float Conv with constant weights (and bias, if any) and no fused activation.
fn plain_conv(g: &Graph, ix: NodeIndex) -> Option<(ArrayD<f32>, Option<ArrayD<f32>>)> {
    let c = op_is::<Conv>(g, ix)?;
    if c.activation.is_some() {
        return None;
    }
    let w = g.const_input(ix, 1)?.as_f32().ok()?.clone();
    let b = match g.dag[ix].inputs.get(2).copied().flatten() {
        None => None,
        Some(t) => Some(g.const_value(t)?.as_f32().ok()?.clone()),
    };
    Some((w, b))
}

/// Replaces a Conv's weight and bias with new constants.
fn set_conv_params(g: &mut Graph, ix: NodeIndex, w: ArrayD<f32>, b: ArrayD<f32>) {
    let name = g.dag[ix].name.clone();
    let wt = g.add_const(format!("{name}.weight_folded"), Tensor::F32(w));
    let bt = g.add_const(format!("{name}.bias_folded"), Tensor::F32(b));
    let n = &mut g.dag[ix];
    n.inputs.resize(3, None);
    n.inputs[1] = Some(wt);
    n.inputs[2] = Some(bt);
}

/// Scales output channel `o` of the weight by `m[o]`, and computes `b * m + add`.
fn affine_conv(
    w: &ArrayD<f32>,
    b: Option<&ArrayD<f32>>,
    m: &[f32],
    add: &[f32],
) -> (ArrayD<f32>, ArrayD<f32>) {
    let mut w = w.clone();
    for (o, mut sub) in w.axis_iter_mut(Axis(0)).enumerate() {
        sub.mapv_inplace(|v| v * m[o]);
    }
    let nb: Vec<f32> = (0..m.len())
        .map(|o| b.map_or(0.0, |b| b[[o]]) * m[o] + add[o])
        .collect();
    (
        w,
        ArrayD::from_shape_vec(IxDyn(&[m.len()]), nb).expect("1-D"),
    )
}

/// Folds `BatchNormalization` into the preceding `Conv`.
pub fn fold_batch_norm(g: &mut Graph) {
    for ix in g.topo_order() {
        let Some(bn) = op_is::<BatchNorm>(g, ix).cloned() else {
            continue;
        };
        let Some(x) = g.dag[ix].inputs[0] else {
            continue;
        };
        let Some(conv) = g.producer(x) else { continue };
        if sole_consumer(g, x).is_none() {
            continue;
        }
        let Some((w, b)) = plain_conv(g, conv) else {
            continue;
        };
        let p: Option<Vec<Vec<f32>>> = (1..5)
            .map(|i| {
                g.const_input(ix, i)
                    .and_then(|t| t.as_f32().ok())
                    .map(|a| a.iter().cloned().collect())
            })
            .collect();
        let Some(p) = p else { continue };
        let (m, o) = bn.affine(&p[0], &p[1], &p[2], &p[3]);
        let (w2, b2) = affine_conv(&w, b.as_ref(), &m, &o);
        set_conv_params(g, conv, w2, b2);
        merge(
            g,
            ix,
            conv,
            "BatchNormalization folded into the convolution's weights and bias".into(),
        );
    }
}

/// A constant that is a scalar or per-channel for `channels` channels of an NCHW tensor.
fn per_channel(t: &Tensor, channels: usize, out_rank: usize) -> Option<Vec<f32>> {
    let a = t.as_f32().ok()?;
    let s = a.shape();
    let v: Vec<f32> = a.iter().cloned().collect();
    if v.len() == 1 && s.len() <= out_rank {
        return Some(vec![v[0]; channels]);
    }
    // [C, 1, 1] or [1, C, 1, 1]: channel axis at out_rank - 3 after right alignment.
    if s.len() > out_rank || v.len() != channels {
        return None;
    }
    let caxis = 1 + s.len() as isize - out_rank as isize;
    if caxis < 0 || s[caxis as usize] != channels {
        return None;
    }
    Some(v)
}

/// Folds a per-channel or scalar constant `Mul`/`Add` after a `Conv` into it.
pub fn fold_channel_affine(g: &mut Graph) {
    for ix in g.topo_order() {
        let Some(bin) = op_is::<Binary>(g, ix).cloned() else {
            continue;
        };
        if !matches!(bin.kind, BinKind::Mul | BinKind::Add) || bin.activation.is_some() {
            continue;
        }
        let ins = g.dag[ix].inputs.clone();
        let (Some(a), Some(b)) = (ins[0], ins[1]) else {
            continue;
        };
        let (x, c) = if g.const_value(b).is_some() {
            (a, b)
        } else {
            (b, a)
        };
        let Some(conv) = g.producer(x) else { continue };
        if sole_consumer(g, x).is_none() || g.const_value(c).is_none() {
            continue;
        }
        let Some((w, bias)) = plain_conv(g, conv) else {
            continue;
        };
        let oc = w.shape()[0];
        let Some(v) = per_channel(g.const_value(c).expect("const"), oc, 4) else {
            continue;
        };
        let (m, add) = if bin.kind == BinKind::Mul {
            (v, vec![0.0; oc])
        } else {
            (vec![1.0; oc], v)
        };
        let (w2, b2) = affine_conv(&w, bias.as_ref(), &m, &add);
        set_conv_params(g, conv, w2, b2);
        let what = if bin.kind == BinKind::Mul {
            "Mul by a constant folded into the convolution's weights and bias"
        } else {
            "Add of a constant folded into the convolution's bias"
        };
        merge(g, ix, conv, what.into());
    }
}

/// `MatMul(A, B const 2-D)` (+ `Add(bias const)`) to `Gemm`.
pub fn matmul_to_gemm(g: &mut Graph) {
    for ix in g.topo_order() {
        if op_is::<MatMul>(g, ix).is_none() {
            continue;
        }
        let ins = g.dag[ix].inputs.clone();
        let (Some(a), Some(b)) = (ins[0], ins[1]) else {
            continue;
        };
        if g.fact(a).rank() != 2 || g.fact(a).dtype != DType::F32 {
            continue;
        }
        let Some(bv) = g.const_value(b) else { continue };
        if bv.shape().len() != 2 {
            continue;
        }
        let n = bv.shape()[1];
        let gemm = Gemm {
            alpha: 1.0,
            beta: 1.0,
            trans_a: false,
            trans_b: false,
            activation: None,
        };
        g.dag[ix].op = Box::new(gemm);
        let out = g.dag[ix].outputs[0];
        // A following Add of a constant [N] or [1, N] becomes the bias.
        if let Some((add, slot)) = sole_consumer(g, out) {
            let is_add = op_is::<Binary>(g, add)
                .is_some_and(|b| b.kind == BinKind::Add && b.activation.is_none());
            if is_add {
                let other = g.dag[add].inputs[1 - slot];
                let bias = other
                    .and_then(|t| g.const_value(t))
                    .and_then(|t| t.as_f32().ok())
                    .filter(|c| c.len() == n && (c.shape() == [n] || c.shape() == [1, n]));
                if let Some(c) = bias {
                    let c = c
                        .clone()
                        .into_shape_with_order(IxDyn(&[n]))
                        .expect("n elements");
                    let name = g.dag[ix].name.clone();
                    let ct = g.add_const(format!("{name}.bias"), Tensor::F32(c));
                    g.dag[ix].inputs = vec![Some(a), Some(b), Some(ct)];
                    merge(
                        g,
                        add,
                        ix,
                        "bias Add merged into the matrix product (Gemm)".into(),
                    );
                }
            }
        }
    }
}

/// Rewrites float `Max(x, c)` / `Min(x, c)` with a constant `c` of one value (in any order,
/// not broadcasting `x`) as `Clip(x)` bounded below / above by `c`, so that it fuses and
/// quantizes like any clamp (TensorFlow exports bound a LeakyRelu's output this way).
pub fn bounds_to_clip(g: &mut Graph) {
    for ix in g.topo_order() {
        let Some(bin) = op_is::<Binary>(g, ix) else {
            continue;
        };
        if !matches!(bin.kind, BinKind::Max | BinKind::Min) || bin.activation.is_some() {
            continue;
        }
        let upper = bin.kind == BinKind::Min;
        let n = &g.dag[ix];
        let (Some(a), Some(b)) = (n.inputs[0], n.inputs[1]) else {
            continue;
        };
        let one_value = |t: TensorId| {
            let c = g.const_value(t)?.as_f32().ok()?;
            let v = *c.iter().next()?;
            c.iter().all(|&u| u == v).then_some(v)
        };
        let (x, bound) = match (one_value(a), one_value(b)) {
            (None, Some(v)) => (a, v),
            (Some(v), None) => (b, v),
            _ => continue,
        };
        let out = n.outputs[0];
        if g.fact(x).dtype != DType::F32 || g.fact(x).shape != g.fact(out).shape || bound.is_nan() {
            continue;
        }
        let act = if upper {
            Activation {
                min: f32::NEG_INFINITY,
                max: bound,
            }
        } else {
            Activation {
                min: bound,
                max: f32::INFINITY,
            }
        };
        g.dag[ix].op = Box::new(Clip {
            attr_bounds: Some(act),
        });
        g.dag[ix].inputs = vec![Some(x)];
        g.rebuild_edges();
    }
}

/// Swaps `Clip(c) -> MaxPool` (constant bounds, the pool its only reader) into
/// `MaxPool -> Clip(c)`: a clamp is monotonic, so `max(clamp(x)) = clamp(max(x))` over every
/// window (the pool's padding never wins). A quantized model quantizes the pool's output, not
/// the clamp's (onnxruntime's QDQ form of a TensorFlow `Max(LeakyRelu(x), -0.4) -> MaxPool`),
/// and after the swap the clamp is the layer that the `QuantizeLinear` follows.
pub fn pool_before_clamp(g: &mut Graph) {
    for ix in g.topo_order() {
        let Some(clip) = op_is::<Clip>(g, ix) else {
            continue;
        };
        if clip.static_bounds(&g.input_infos(ix)).is_none() {
            continue;
        }
        let clipped = g.dag[ix].outputs[0];
        let Some((pool, 0)) = sole_consumer(g, clipped) else {
            continue;
        };
        if op_is::<MaxPool>(g, pool).is_none() || g.dag[pool].outputs.len() != 1 {
            continue;
        }
        // The nodes trade everything but their tensors: the first now pools into `clipped`
        // (which takes the pooled fact), the second clamps that into the pool's output.
        let pooled = g.dag[pool].outputs[0];
        let (a, b) = g.dag.index_twice_mut(ix, pool);
        std::mem::swap(&mut a.op, &mut b.op);
        std::mem::swap(&mut a.name, &mut b.name);
        std::mem::swap(&mut a.origin, &mut b.origin);
        let bounds: Vec<Option<TensorId>> = a.inputs.drain(1..).collect();
        b.inputs.extend(bounds);
        g.tensors[clipped].fact = g.tensors[pooled].fact.clone();
        g.rebuild_edges();
    }
}

/// Fuses `Relu` / constant-bound `Clip` into the producing `Conv`, `ConvTranspose`, `Gemm` or
/// float `Add`.
pub fn fuse_activations(g: &mut Graph) {
    for ix in g.topo_order() {
        let act = if op_is::<Relu>(g, ix).is_some() {
            Activation::RELU
        } else if let Some(c) = op_is::<Clip>(g, ix) {
            match c.static_bounds(&g.input_infos(ix)) {
                Some(a) => a,
                None => continue,
            }
        } else {
            continue;
        };
        let Some(x) = g.dag[ix].inputs[0] else {
            continue;
        };
        let Some(p) = g.producer(x) else { continue };
        if sole_consumer(g, x).is_none() || g.fact(x).dtype != DType::F32 {
            continue;
        }
        let op = &mut g.dag[p].op;
        let any = op.as_any();
        let fused = if let Some(c) = any.downcast_ref::<Conv>() {
            let mut c = c.clone();
            c.activation = Some(c.activation.map_or(act, |a| a.then(act)));
            Some(Box::new(c) as Box<dyn super::Op>)
        } else if let Some(c) = any.downcast_ref::<ConvTranspose>() {
            let mut c = c.clone();
            c.activation = Some(c.activation.map_or(act, |a| a.then(act)));
            Some(Box::new(c) as Box<dyn super::Op>)
        } else if let Some(c) = any.downcast_ref::<Gemm>() {
            let mut c = c.clone();
            c.activation = Some(c.activation.map_or(act, |a| a.then(act)));
            Some(Box::new(c) as Box<dyn super::Op>)
        } else if let Some(c) = any
            .downcast_ref::<Binary>()
            .filter(|b| b.kind == BinKind::Add)
        {
            let mut c = c.clone();
            c.activation = Some(c.activation.map_or(act, |a| a.then(act)));
            Some(Box::new(c) as Box<dyn super::Op>)
        } else {
            None
        };
        if let Some(f) = fused {
            *op = f;
            let what = g.dag[ix].op.op_type();
            merge(g, ix, p, format!("{what} fused as the output clamp"));
        }
    }
}

/// Fuses `Mul(x, Sigmoid(x))` into SiLU and `Mul(x, HardSigmoid(x))` with ONNX HardSwish's
/// constants into `HardSwish`. The fused op computes exactly what the two nodes did (the same
/// f32 operations), so the float graph keeps its values.
pub fn fuse_gated_activations(g: &mut Graph) {
    for ix in g.topo_order() {
        let Some(bin) = op_is::<Binary>(g, ix) else {
            continue;
        };
        if bin.kind != BinKind::Mul || bin.activation.is_some() {
            continue;
        }
        let ins = g.dag[ix].inputs.clone();
        let (Some(a), Some(b)) = (ins[0], ins[1]) else {
            continue;
        };
        for (x, gate) in [(a, b), (b, a)] {
            let Some(p) = g.producer(gate) else { continue };
            let Some(u) = op_is::<Unary>(g, p) else {
                continue;
            };
            let fused = match u.kind {
                UnaryKind::Sigmoid => UnaryKind::Silu,
                UnaryKind::HardSigmoid { alpha, beta } if alpha == 1.0 / 6.0 && beta == 0.5 => {
                    UnaryKind::HardSwish
                }
                _ => continue,
            };
            if g.dag[p].inputs.first().copied().flatten() != Some(x)
                || sole_consumer(g, gate).is_none()
                || g.fact(x) != g.fact(g.dag[ix].outputs[0])
            {
                continue;
            }
            g.dag[p].op = Box::new(Unary::new(fused));
            let how = format!("Mul of the input by its gate, fused into {}", fused.name());
            merge(g, ix, p, how);
            break;
        }
    }
}

/// Folds a constant-zero `Pad` of the two spatial axes of an NCHW tensor into the `Conv`
/// reading it (the padding becomes the convolution's, which pads with zeros).
pub fn fold_pad_into_conv(g: &mut Graph) {
    for ix in g.topo_order() {
        let Some(pad) = op_is::<Pad>(g, ix).cloned() else {
            continue;
        };
        if pad.mode != PadMode::Constant {
            continue;
        }
        let n = &g.dag[ix];
        let (Some(x), y) = (n.inputs[0], n.outputs[0]) else {
            continue;
        };
        if g.fact(x).rank() != 4 || g.fact(x).dtype != DType::F32 {
            continue;
        }
        let value_zero = match n.inputs.get(2).copied().flatten() {
            None => pad.attrs.as_ref().is_none_or(|a| a.1 == 0.0),
            Some(t) => g
                .const_value(t)
                .and_then(|v| v.scalar_f32().ok())
                .is_some_and(|v| v == 0.0),
        };
        let c = |i: usize| n.inputs.get(i).copied().flatten().map(|t| g.const_value(t));
        if !value_zero || matches!(c(1), Some(None)) || matches!(c(3), Some(None)) {
            continue;
        }
        let Ok(p) = pad.pads(4, c(1).flatten(), c(3).flatten()) else {
            continue;
        };
        if p[0] != (0, 0) || p[1] != (0, 0) || p.iter().any(|&(b, e)| b < 0 || e < 0) {
            continue;
        }
        let Some((conv, 0)) = sole_consumer(g, y) else {
            continue;
        };
        let Some(cv) = op_is::<Conv>(g, conv).cloned() else {
            continue;
        };
        let PadSpec::Explicit(cp) = cv.window.pad else {
            continue;
        };
        let mut cv = cv;
        cv.window.pad = PadSpec::Explicit([
            cp[0] + p[2].0 as usize,
            cp[1] + p[3].0 as usize,
            cp[2] + p[2].1 as usize,
            cp[3] + p[3].1 as usize,
        ]);
        g.dag[conv].op = Box::new(cv);
        g.dag[conv].inputs[0] = Some(x);
        let removed = g.remove_node(ix).expect("exists");
        g.rebuild_edges();
        let into = g.dag[conv].name.clone();
        for o in removed.origin {
            g.fusions.push((
                o.clone(),
                into.clone(),
                "zero padding folded into the convolution's padding".into(),
            ));
            g.dag[conv].origin.push(o);
        }
    }
}
