//! onnxruntime's quantized contrib operators (domain `com.microsoft`, written by
//! `quantize_static(..., QuantFormat.QOperator)`) expanded into the standard operators that
//! define them: `DequantizeLinear` of each quantized input, the float operator, and
//! `QuantizeLinear` of the result. The lowering then recognizes the `DQ -> op -> Q` pattern
//! as one integer layer, exactly as for QDQ models, and the CPU fallback computes the
//! definition.
//!
//! Expanded: QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu,
//! QLinearGlobalAveragePool, QLinearAveragePool, QLinearConcat, QLinearSoftmax and QGemm. The
//! float operator keeps the node's name (so the support table names it), the added DQ/Q nodes
//! are named after it. A node with a form this does not cover (channels-last pooling, a QGemm
//! whose scales are computed at run time, a QLinearSoftmax whose `opset` attribute asks for
//! other Softmax semantics than the model's opset gives) is left as it is and reported as
//! unsupported.

use crate::graph::Tensor;
use crate::onnx::proto::{attribute_type, AttributeProto, GraphProto, NodeProto};
use crate::onnx::{tensor_from_proto, tensor_to_proto};

const DOMAIN: &str = "com.microsoft";

/// The graph with every expandable contrib node replaced by its definition; `None` when it
/// has no contrib node (the graph is used as it is, not copied). `opset` is the model's
/// ai.onnx opset, which the expanded float operators are read with.
pub fn expand(gp: &GraphProto, opset: i64) -> Option<GraphProto> {
    if !gp.node.iter().any(|n| n.domain == DOMAIN) {
        return None;
    }
    let mut out = gp.clone();
    out.node.clear();
    for (i, n) in gp.node.iter().enumerate() {
        let name = if n.name.is_empty() {
            format!("{}_{i}", n.op_type)
        } else {
            n.name.clone()
        };
        match (n.domain == DOMAIN)
            .then(|| expand_node(n, &name, gp, opset))
            .flatten()
        {
            Some((nodes, inits)) => {
                out.node.extend(nodes);
                out.initializer.extend(inits);
            }
            None => out.node.push(n.clone()),
        }
    }
    Some(out)
}

fn node(op: &str, name: String, ins: &[&str], out: &str, attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: vec![out.to_string()],
        name,
        op_type: op.into(),
        attribute: attrs,
        ..Default::default()
    }
}

fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::INT,
        i: v,
        ..Default::default()
    }
}

fn attr<'a>(n: &'a NodeProto, name: &str) -> Option<&'a AttributeProto> {
    n.attribute.iter().find(|a| a.name == name)
}

fn input(n: &NodeProto, k: usize) -> &str {
    n.input.get(k).map_or("", String::as_str)
}

fn initializer(gp: &GraphProto, name: &str) -> Option<Tensor> {
    gp.initializer
        .iter()
        .find(|t| t.name == name)
        .and_then(|t| tensor_from_proto(t).ok())
}

/// Builds the expansion as a list of nodes, naming intermediate tensors after the node's
/// output (unique in a well-formed graph, unlike node names).
struct Expansion<'a> {
    name: &'a str,
    output: &'a str,
    nodes: Vec<NodeProto>,
}

impl Expansion<'_> {
    /// `DequantizeLinear(x, scale, zp)`, returns the float tensor's name.
    fn dq(&mut self, what: &str, x: &str, scale: &str, zp: &str, axis: Option<i64>) -> String {
        let out = format!("{}:{what}:dequantized", self.output);
        let ins: Vec<&str> = if zp.is_empty() {
            vec![x, scale]
        } else {
            vec![x, scale, zp]
        };
        let attrs = axis.map(|a| vec![int_attr("axis", a)]).unwrap_or_default();
        self.nodes.push(node(
            "DequantizeLinear",
            format!("{}:dequantize_{what}", self.name),
            &ins,
            &out,
            attrs,
        ));
        out
    }

    /// The float operator (named as the contrib node), then `QuantizeLinear` to `y`.
    fn op_then_q(
        &mut self,
        op: &str,
        ins: &[&str],
        attrs: Vec<AttributeProto>,
        q: (&str, &str),
        y: &str,
    ) {
        let f = format!("{}:float", self.output);
        self.nodes
            .push(node(op, self.name.to_string(), ins, &f, attrs));
        let qins: Vec<&str> = if q.1.is_empty() {
            vec![&f, q.0]
        } else {
            vec![&f, q.0, q.1]
        };
        self.nodes.push(node(
            "QuantizeLinear",
            format!("{}:quantize", self.name),
            &qins,
            y,
            vec![],
        ));
    }
}

type Expanded = (Vec<NodeProto>, Vec<crate::onnx::proto::TensorProto>);

fn expand_node(n: &NodeProto, name: &str, gp: &GraphProto, opset: i64) -> Option<Expanded> {
    let y = n.output.first()?.as_str();
    let mut e = Expansion {
        name,
        output: y,
        nodes: Vec::new(),
    };
    let mut inits = Vec::new();
    match n.op_type.as_str() {
        "QLinearAdd" | "QLinearMul" => {
            let a = e.dq("a", input(n, 0), input(n, 1), input(n, 2), None);
            let b = e.dq("b", input(n, 3), input(n, 4), input(n, 5), None);
            let op = &n.op_type["QLinear".len()..];
            e.op_then_q(op, &[&a, &b], vec![], (input(n, 6), input(n, 7)), y);
        }
        "QLinearSigmoid" | "QLinearLeakyRelu" => {
            let x = e.dq("x", input(n, 0), input(n, 1), input(n, 2), None);
            let attrs = attr(n, "alpha").cloned().into_iter().collect();
            let op = &n.op_type["QLinear".len()..];
            e.op_then_q(op, &[&x], attrs, (input(n, 3), input(n, 4)), y);
        }
        "QLinearSoftmax" => {
            // Its `opset` attribute says which Softmax it quantizes: before 13 the input is
            // flattened to 2-D at `axis` (default 1), from 13 on `axis` alone (default -1).
            // The float Softmax is read with the model's opset, so the two must agree.
            let node_opset = attr(n, "opset")?.i;
            if (node_opset >= 13) != (opset >= 13) {
                return None;
            }
            let x = e.dq("x", input(n, 0), input(n, 1), input(n, 2), None);
            let attrs = attr(n, "axis").cloned().into_iter().collect();
            e.op_then_q("Softmax", &[&x], attrs, (input(n, 3), input(n, 4)), y);
        }
        "QLinearGlobalAveragePool" | "QLinearAveragePool" => {
            if attr(n, "channels_last").is_some_and(|a| a.i != 0) {
                return None;
            }
            let x = e.dq("x", input(n, 0), input(n, 1), input(n, 2), None);
            let attrs = n
                .attribute
                .iter()
                .filter(|a| a.name != "channels_last")
                .cloned()
                .collect();
            let op = &n.op_type["QLinear".len()..];
            e.op_then_q(op, &[&x], attrs, (input(n, 3), input(n, 4)), y);
        }
        "QLinearConcat" => {
            // Inputs: y_scale, y_zero_point, then (x, x_scale, x_zero_point) triples.
            if n.input.len() < 5 || !(n.input.len() - 2).is_multiple_of(3) {
                return None;
            }
            let xs: Vec<String> = (0..(n.input.len() - 2) / 3)
                .map(|k| {
                    let b = 2 + 3 * k;
                    e.dq(
                        &format!("x{k}"),
                        input(n, b),
                        input(n, b + 1),
                        input(n, b + 2),
                        None,
                    )
                })
                .collect();
            let refs: Vec<&str> = xs.iter().map(String::as_str).collect();
            let attrs = attr(n, "axis").cloned().into_iter().collect();
            e.op_then_q("Concat", &refs, attrs, (input(n, 0), input(n, 1)), y);
        }
        "QGemm" => {
            // A, a_scale, a_zero_point, B, b_scale, b_zero_point, C (int32 at scale
            // a_scale * b_scale), y_scale, y_zero_point; without y_scale the output is float.
            let trans_b = attr(n, "transB").is_some_and(|a| a.i != 0);
            let a_scale = initializer(gp, input(n, 1))?.as_f32().ok()?.clone();
            let b_scale = initializer(gp, input(n, 4))?.as_f32().ok()?.clone();
            if a_scale.len() != 1 {
                return None;
            }
            let per_col = b_scale.len() > 1;
            let b_axis = per_col.then_some(if trans_b { 0 } else { 1 });
            let a = e.dq("a", input(n, 0), input(n, 1), input(n, 2), None);
            let b = e.dq("b", input(n, 3), input(n, 4), input(n, 5), b_axis);
            let mut ins = vec![a, b];
            if !input(n, 6).is_empty() {
                // The bias scale, computed in f32 as onnxruntime's quantizer does.
                let s = b_scale.mapv(|v| v * a_scale.iter().next().copied().unwrap_or(1.0));
                let sname = format!("{y}:bias_scale");
                inits.push(tensor_to_proto(&sname, &Tensor::F32(s)));
                ins.push(e.dq("c", input(n, 6), &sname, "", per_col.then_some(0)));
            }
            let attrs: Vec<AttributeProto> = n
                .attribute
                .iter()
                .filter(|a| matches!(a.name.as_str(), "alpha" | "transA" | "transB"))
                .cloned()
                .collect();
            let refs: Vec<&str> = ins.iter().map(String::as_str).collect();
            if input(n, 7).is_empty() {
                e.nodes
                    .push(node("Gemm", name.to_string(), &refs, y, attrs));
            } else {
                e.op_then_q("Gemm", &refs, attrs, (input(n, 7), input(n, 8)), y);
            }
        }
        _ => return None,
    }
    Some((e.nodes, inits))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contrib(op: &str, ins: &[&str]) -> NodeProto {
        NodeProto {
            domain: DOMAIN.into(),
            ..node(op, "n".into(), ins, "y", vec![])
        }
    }

    #[test]
    fn qlinear_add_becomes_dq_add_q() {
        let gp = GraphProto {
            node: vec![contrib(
                "QLinearAdd",
                &["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
            )],
            ..Default::default()
        };
        let out = expand(&gp, 13).unwrap();
        let ops: Vec<&str> = out.node.iter().map(|n| n.op_type.as_str()).collect();
        assert_eq!(
            ops,
            [
                "DequantizeLinear",
                "DequantizeLinear",
                "Add",
                "QuantizeLinear"
            ]
        );
        assert_eq!(out.node[2].name, "n");
        assert_eq!(out.node[3].input, ["y:float", "ys", "yz"]);
        assert_eq!(out.node[3].output, ["y"]);
        assert!(out.node.iter().all(|n| n.domain.is_empty()));
    }

    #[test]
    fn qgemm_dequantizes_its_bias_at_the_product_of_the_scales() {
        let f32s = |name: &str, shape: &[usize], v: &[f32]| {
            let a = ndarray::ArrayD::from_shape_vec(ndarray::IxDyn(shape), v.to_vec()).unwrap();
            tensor_to_proto(name, &Tensor::F32(a))
        };
        let mut qgemm = contrib(
            "QGemm",
            &["a", "as", "az", "b", "bs", "bz", "c", "ys", "yz"],
        );
        qgemm.attribute.push(int_attr("transB", 1));
        let gp = GraphProto {
            node: vec![qgemm],
            initializer: vec![f32s("as", &[], &[0.5]), f32s("bs", &[2], &[0.25, 0.125])],
            ..Default::default()
        };
        let out = expand(&gp, 13).unwrap();
        let ops: Vec<&str> = out.node.iter().map(|n| n.op_type.as_str()).collect();
        assert_eq!(
            ops,
            [
                "DequantizeLinear",
                "DequantizeLinear",
                "DequantizeLinear",
                "Gemm",
                "QuantizeLinear"
            ]
        );
        // Per-column weight scales along axis 0 (transB), the bias along its only axis.
        for k in [1, 2] {
            assert_eq!(out.node[k].attribute[0].name, "axis");
            assert_eq!(out.node[k].attribute[0].i, 0);
        }
        assert_eq!(out.node[2].input, ["c", "y:bias_scale"]);
        let scale = out.initializer.last().unwrap();
        assert_eq!(scale.name, "y:bias_scale");
        let v = tensor_from_proto(scale).unwrap();
        assert_eq!(
            v.as_f32().unwrap().iter().copied().collect::<Vec<_>>(),
            [0.125, 0.0625]
        );
        assert_eq!(out.node[3].attribute[0].name, "transB");
    }

    #[test]
    fn channels_last_pool_and_other_contrib_ops_stay() {
        let mut pool = contrib("QLinearGlobalAveragePool", &["x", "s", "z", "ys", "yz"]);
        pool.attribute.push(int_attr("channels_last", 1));
        let gp = GraphProto {
            node: vec![
                pool,
                contrib("QLinearSoftmax", &["x", "s", "z", "ys", "yz"]),
            ],
            ..Default::default()
        };
        assert_eq!(expand(&gp, 13).unwrap(), gp);
        assert_eq!(expand(&GraphProto::default(), 13), None);
    }

    #[test]
    fn a_quantized_softmax_expands_when_its_opset_matches_the_models() {
        let mut qs = contrib("QLinearSoftmax", &["x", "s", "z", "ys", "yz"]);
        qs.attribute.push(int_attr("axis", -1));
        qs.attribute.push(int_attr("opset", 13));
        let gp = GraphProto {
            node: vec![qs],
            ..Default::default()
        };
        let out = expand(&gp, 14).unwrap();
        let ops: Vec<&str> = out.node.iter().map(|n| n.op_type.as_str()).collect();
        assert_eq!(ops, ["DequantizeLinear", "Softmax", "QuantizeLinear"]);
        assert_eq!(out.node[1].attribute[0].name, "axis");
        assert_eq!(out.node[1].attribute[0].i, -1);
        // A Softmax of opset 11 semantics in an opset-13 model (and the reverse) stays.
        assert_eq!(expand(&gp, 11).unwrap(), gp);
    }
}
