//! Float islands of quantized models: operators a quantizer left in float between a
//! `DequantizeLinear` and a `QuantizeLinear` (an onnxruntime QOperator model whose Relu and
//! MaxPool were not fused: `QLinearConv -> DequantizeLinear -> Relu -> MaxPool ->
//! QuantizeLinear`), given quantization parameters where that changes no value, so that the
//! lowering sees the usual `DequantizeLinear -> op -> QuantizeLinear` groups and runs them on
//! int8 data.
//!
//! The operators are those that map the grid of a per-tensor quantization onto itself and
//! commute with its rounding: Relu (`Q(max(r, 0)) = max(Q(r), zp)`: rounding is monotone
//! and 0 is on the grid), MaxPool (a maximum of values on the grid), and the layout
//! operators (Reshape, Flatten, Transpose, Squeeze and Unsqueeze). For such an operator `f`:
//!
//! - after a `DequantizeLinear` with parameters `(s, z)`, `f`'s output is on that grid, so a
//!   `QuantizeLinear -> DequantizeLinear` pair with `(s, z)` inserted after it is the
//!   identity (forward; needed after a Relu only, since the lowering passes a dequantized
//!   tensor through the others as it is);
//! - before a `QuantizeLinear` with `(s, z)` that alone reads its output, `Q(f(r)) =
//!   f(Q(r))` on the grid, so the same pair inserted before `f` changes nothing either
//!   (backward): the operator producing `r` (a BatchNormalization, say) then meets a
//!   `QuantizeLinear` of its own.
//!
//! An inserted quantization keeps the saturation range of the one it copies (a narrow
//! int4 range held in int8). Each rewrite is exact, so the compiled model keeps ONNX's
//! meaning; the operators that are
//! not exact in the integer domain stay in float on the CPU.

use petgraph::stable_graph::NodeIndex;

use super::ops::dequantize_linear::DequantizeLinear;
use super::ops::flatten::Flatten;
use super::ops::max_pool::MaxPool;
use super::ops::quantize_linear::QuantizeLinear;
use super::ops::relu::Relu;
use super::ops::reshape::Reshape;
use super::ops::squeeze::Squeeze;
use super::ops::transpose::Transpose;
use super::{DType, Fact, Graph, OnnxNode, Op, TensorId};

/// Whether node `ix` is a single-output operator that commutes with a per-tensor
/// quantization (see the module docs).
fn commutes_with_quantization(g: &Graph, ix: NodeIndex) -> bool {
    let op = g.dag[ix].op.as_any();
    let single = match op.downcast_ref::<MaxPool>() {
        Some(p) => p.indices.is_none(),
        None => true,
    };
    single
        && g.dag[ix].outputs.len() == 1
        && (op.is::<Relu>()
            || op.is::<MaxPool>()
            || op.is::<Reshape>()
            || op.is::<Flatten>()
            || op.is::<Transpose>()
            || op.is::<Squeeze>())
}

/// The scale and zero-point tensors of a Q or DQ node `ix` when they are constant scalars
/// (per-tensor quantization), with the integer type they quantize to.
fn per_tensor(g: &Graph, ix: NodeIndex, int_tensor: TensorId) -> Option<QParamsIds> {
    let n = &g.dag[ix];
    let scale = n.inputs.get(1).copied().flatten()?;
    let zp = n.inputs.get(2).copied().flatten();
    let scalar = |t: TensorId| g.const_value(t).is_some_and(|v| v.len() == 1);
    if !scalar(scale) || zp.is_some_and(|z| !scalar(z)) {
        return None;
    }
    let dtype = g.fact(int_tensor).dtype;
    // The range of the quantization that wrote the integers, if one did.
    let range = g
        .producer(int_tensor)
        .and_then(|q| g.dag[q].op.as_any().downcast_ref::<QuantizeLinear>())
        .and_then(|q| q.range);
    matches!(dtype, DType::I8 | DType::U8).then_some(QParamsIds {
        scale,
        zp,
        dtype,
        range,
    })
}

#[derive(Clone, Copy)]
struct QParamsIds {
    scale: TensorId,
    zp: Option<TensorId>,
    dtype: DType,
    /// A saturation range narrower than the type's (an int4 quantization held in int8).
    range: Option<(i32, i32)>,
}

/// Quantization of a float activation by a Q node, per tensor: the node and its parameters.
fn quantizer_of(g: &Graph, t: TensorId) -> Option<QParamsIds> {
    let (c, slot) = g.consumers(t).pop().filter(|_| g.single_use(t))?;
    let q = &g.dag[c];
    if slot != 0 || !q.op.as_any().is::<QuantizeLinear>() {
        return None;
    }
    per_tensor(g, c, q.outputs[0])
}

/// Per-tensor parameters of the DQ node producing activation `t`, if it is one.
fn dequantizer_of(g: &Graph, t: TensorId) -> Option<QParamsIds> {
    let p = g.producer(t)?;
    let dq = &g.dag[p];
    if !dq.op.as_any().is::<DequantizeLinear>() {
        return None;
    }
    let q = dq.inputs.first().copied().flatten()?;
    if g.const_value(q).is_some() {
        return None;
    }
    per_tensor(g, p, q)
}

/// Inserts `Q -> DQ` with `params` on float tensor `t` and returns the DQ's output, which
/// holds the same values; the readers of `t` are left to the caller.
fn insert_pair(g: &mut Graph, t: TensorId, params: QParamsIds) -> TensorId {
    let name = g.tensors[t].name.clone();
    let shape = g.fact(t).shape.clone();
    let q_out = g.add_tensor(
        format!("{name}/island_quantized"),
        Fact::new(params.dtype, shape.clone()),
        None,
    );
    let dq_out = g.add_tensor(
        format!("{name}/island_dequantized"),
        Fact::new(DType::F32, shape),
        None,
    );
    let q = QuantizeLinear {
        axis: 1,
        default_dtype: params.dtype,
        range: params.range,
    };
    // The pair is listed in the support table as nodes of its own (named after the
    // tensor), so that the table says where it went.
    let origin = |what: &str, op_type: &str| OnnxNode {
        name: format!("{name}/island_{what}"),
        op_type: op_type.into(),
    };
    for (what, op_type, op, inputs, output) in [
        (
            "quantize",
            "QuantizeLinear",
            Box::new(q) as Box<dyn Op>,
            vec![Some(t), Some(params.scale), params.zp],
            q_out,
        ),
        (
            "dequantize",
            "DequantizeLinear",
            Box::new(DequantizeLinear { axis: 1 }),
            vec![Some(q_out), Some(params.scale), params.zp],
            dq_out,
        ),
    ] {
        let o = origin(what, op_type);
        g.onnx_nodes.push(o.clone());
        g.add_node(o.name.clone(), op, inputs, vec![output], vec![o]);
    }
    dq_out
}

/// Gives the float islands of a quantized model quantization parameters (module docs).
pub fn quantize_float_islands(g: &mut Graph) {
    // Backward first, from each QuantizeLinear towards the float operator that feeds the
    // island, so that operator meets a quantization of its own; then forward from each
    // DequantizeLinear. Each insertion may open the next, hence the loop.
    loop {
        let mut changed = false;
        for ix in g.topo_order().into_iter().rev() {
            if !g.dag.contains_node(ix) || !commutes_with_quantization(g, ix) {
                continue;
            }
            let y = g.dag[ix].outputs[0];
            let Some(x) = g.dag[ix].inputs.first().copied().flatten() else {
                continue;
            };
            if g.fact(x).dtype != DType::F32 || !g.single_use(x) || g.const_value(x).is_some() {
                continue;
            }
            if dequantizer_of(g, x).is_some() {
                continue;
            }
            let Some(params) = quantizer_of(g, y) else {
                continue;
            };
            let given = insert_pair(g, x, params);
            g.dag[ix].inputs[0] = Some(given);
            g.rebuild_edges();
            changed = true;
        }
        for ix in g.topo_order() {
            // Forward, only a Relu needs it: the lowering passes a dequantized tensor through
            // MaxPool and the layout operators as it is, but quantizes a Relu's output.
            if !g.dag.contains_node(ix) || !g.dag[ix].op.as_any().is::<Relu>() {
                continue;
            }
            let y = g.dag[ix].outputs[0];
            let Some(x) = g.dag[ix].inputs.first().copied().flatten() else {
                continue;
            };
            if g.fact(y).dtype != DType::F32 || g.is_output(y) || quantizer_of(g, y).is_some() {
                continue;
            }
            let Some(params) = dequantizer_of(g, x) else {
                continue;
            };
            let readers = g.consumers(y);
            let given = insert_pair(g, y, params);
            for (c, slot) in readers {
                g.dag[c].inputs[slot] = Some(given);
            }
            g.rebuild_edges();
            changed = true;
        }
        if !changed {
            return;
        }
    }
}
