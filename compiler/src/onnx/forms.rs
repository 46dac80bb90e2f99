//! Standard operators in forms the IR has no op for, rewritten before parsing into nodes it
//! has; the node computing the original output keeps the node's name, so the support table
//! names it.
//!
//! - The variadic `Max` and `Min` with other than two inputs: a chain of two-input nodes
//!   (`Max(a, b, c) = Max(Max(a, b), c)`, which broadcasts as the variadic form does), or an
//!   `Identity` for one input.
//! - `Dropout`'s mask output in inference (no `training_mode` input): the mask is all true
//!   (ones of the input's type before opset 10), a `ConstantOfShape` of the input's shape,
//!   which the shape folding makes a constant.
//! - 1-D `Conv`, `ConvTranspose`, `MaxPool` and `AveragePool` (an `N x C x L` input): the 2-D
//!   operator on `N x C x 1 x L` with a `1 x k` window, between an `Unsqueeze` and a
//!   `Squeeze` of axis 2 (the weight unsqueezed too, which folds when it is constant). The
//!   2-D operator computes the same cells: the added axis has length 1, no padding and
//!   stride 1, and MaxPool's indices number the cells of either layout alike.

use super::proto::{
    attribute_type, data_type, AttributeProto, GraphProto, NodeProto, TensorProto, ValueInfoProto,
};

fn standard(n: &NodeProto) -> bool {
    n.domain.is_empty() || n.domain == "ai.onnx"
}

fn is_variadic(n: &NodeProto) -> bool {
    standard(n) && matches!(n.op_type.as_str(), "Max" | "Min") && n.input.len() != 2
}

fn is_inference_mask(n: &NodeProto) -> bool {
    standard(n)
        && n.op_type == "Dropout"
        && n.output.get(1).is_some_and(|m| !m.is_empty())
        && n.input.get(2).is_none_or(|t| t.is_empty())
}

/// The rank of a value as the graph declares it (an initializer's or an input's).
fn declared_rank(gp: &GraphProto, name: &str) -> Option<usize> {
    if let Some(t) = gp.initializer.iter().find(|t| t.name == name) {
        return Some(t.dims.len());
    }
    let typed = |v: &ValueInfoProto| {
        let shape = v.r#type.as_ref()?.tensor_type.as_ref()?.shape.as_ref()?;
        Some(shape.dim.len())
    };
    gp.input
        .iter()
        .chain(&gp.value_info)
        .find(|v| v.name == name)
        .and_then(typed)
}

/// Whether `n` is a windowed operator over a 1-D input.
fn is_one_d(gp: &GraphProto, n: &NodeProto) -> bool {
    if !(standard(n)
        && matches!(
            n.op_type.as_str(),
            "Conv" | "ConvTranspose" | "MaxPool" | "AveragePool"
        ))
    {
        return false;
    }
    match n.attribute.iter().find(|a| a.name == "kernel_shape") {
        Some(k) => k.ints.len() == 1,
        None => {
            let of = |k: usize| n.input.get(k).and_then(|t| declared_rank(gp, t));
            of(1) == Some(3) || of(0) == Some(3)
        }
    }
}

/// The graph with those forms replaced; `None` when it has none (the graph is used as it is,
/// not copied). `opset` is the model's ai.onnx opset.
pub fn rewrite(gp: &GraphProto, opset: i64) -> Option<GraphProto> {
    if !gp
        .node
        .iter()
        .any(|n| is_variadic(n) || is_inference_mask(n) || is_one_d(gp, n))
    {
        return None;
    }
    let mut out = gp.clone();
    out.node.clear();
    for n in &gp.node {
        if is_inference_mask(n) {
            out.node.extend(dropout_mask(n, opset));
            continue;
        }
        if is_one_d(gp, n) {
            let (nodes, axes) = one_d(n, opset);
            out.node.extend(nodes);
            out.initializer.extend(axes);
            continue;
        }
        if !is_variadic(n) || n.input.is_empty() || n.output.len() != 1 {
            // No input or several outputs: invalid, left for the parser to refuse.
            out.node.push(n.clone());
            continue;
        }
        if n.input.len() == 1 {
            out.node.push(NodeProto {
                op_type: "Identity".into(),
                ..n.clone()
            });
            continue;
        }
        let last = n.input.len() - 1;
        let mut acc = n.input[0].clone();
        for (k, b) in n.input.iter().enumerate().skip(1) {
            let (name, output) = if k == last {
                (n.name.clone(), n.output[0].clone())
            } else {
                (
                    if n.name.is_empty() {
                        String::new()
                    } else {
                        format!("{}/{k}", n.name)
                    },
                    format!("{}/{}{k}", n.output[0], n.op_type),
                )
            };
            out.node.push(NodeProto {
                input: vec![acc, b.clone()],
                output: vec![output.clone()],
                name,
                ..n.clone()
            });
            acc = output;
        }
    }
    Some(out)
}

/// A 1-D windowed operator as the 2-D one between an `Unsqueeze` and a `Squeeze` of axis 2,
/// and the initializer holding that axis (from opset 13 an input of theirs).
fn one_d(n: &NodeProto, opset: i64) -> (Vec<NodeProto>, Option<TensorProto>) {
    let axes_name = format!("{}/axis2", n.name);
    let axes = (opset >= 13).then(|| TensorProto {
        name: axes_name.clone(),
        dims: vec![1],
        data_type: data_type::INT64,
        int64_data: vec![2],
        ..Default::default()
    });
    let reshape = |op: &str, input: &str, output: &str| {
        let mut r = NodeProto {
            input: vec![input.into()],
            output: vec![output.into()],
            name: format!("{}/{}_{output}", n.name, op.to_lowercase()),
            op_type: op.into(),
            ..Default::default()
        };
        if opset >= 13 {
            r.input.push(axes_name.clone());
        } else {
            r.attribute.push(AttributeProto {
                name: "axes".into(),
                r#type: attribute_type::INTS,
                ints: vec![2],
                ..Default::default()
            });
        }
        r
    };
    let mut nodes = Vec::new();
    let mut op = n.clone();
    // The data, and a convolution's weight: a 2-D window over the new axis of length 1.
    let widened = if matches!(n.op_type.as_str(), "Conv" | "ConvTranspose") {
        2
    } else {
        1
    };
    for (k, t) in n.input.iter().enumerate().take(widened) {
        let wide = format!("{t}/2d");
        nodes.push(reshape("Unsqueeze", t, &wide));
        op.input[k] = wide;
    }
    for a in &mut op.attribute {
        match a.name.as_str() {
            "kernel_shape" | "output_shape" | "strides" | "dilations" => a.ints.insert(0, 1),
            "output_padding" => a.ints.insert(0, 0),
            // [begin, end] -> [0, begin, 0, end]
            "pads" if a.ints.len() == 2 => a.ints = vec![0, a.ints[0], 0, a.ints[1]],
            _ => {}
        }
    }
    op.output = n
        .output
        .iter()
        .map(|o| {
            if o.is_empty() {
                String::new()
            } else {
                format!("{o}/2d")
            }
        })
        .collect();
    let squeezes: Vec<NodeProto> = n
        .output
        .iter()
        .filter(|o| !o.is_empty())
        .map(|o| reshape("Squeeze", &format!("{o}/2d"), o))
        .collect();
    nodes.push(op);
    nodes.extend(squeezes);
    (nodes, axes)
}

/// `Dropout` without its mask output, and the mask.
fn dropout_mask(n: &NodeProto, opset: i64) -> [NodeProto; 3] {
    let mask = &n.output[1];
    let shape = format!("{mask}/shape");
    let one = if opset < 10 {
        TensorProto {
            dims: vec![1],
            data_type: data_type::FLOAT,
            float_data: vec![1.0],
            ..Default::default()
        }
    } else {
        TensorProto {
            dims: vec![1],
            data_type: data_type::BOOL,
            raw_data: vec![1],
            ..Default::default()
        }
    };
    let sub = |op: &str, input: &str, output: &str, what: &str| NodeProto {
        input: vec![input.into()],
        output: vec![output.into()],
        name: format!("{}/{what}", n.name),
        op_type: op.into(),
        ..Default::default()
    };
    let mut fill = sub("ConstantOfShape", &shape, mask, "mask");
    fill.attribute.push(AttributeProto {
        name: "value".into(),
        r#type: attribute_type::TENSOR,
        t: Some(one),
        ..Default::default()
    });
    [
        NodeProto {
            output: vec![n.output[0].clone()],
            ..n.clone()
        },
        sub("Shape", &n.input[0], &shape, "mask_shape"),
        fill,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(op: &str, inputs: &[&str]) -> NodeProto {
        NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec!["y".into()],
            name: "m".into(),
            op_type: op.into(),
            ..Default::default()
        }
    }

    #[test]
    fn an_inference_dropout_mask_is_a_constant_of_the_input_shape() {
        let mut d = node("Dropout", &["x"]);
        d.output.push("mask".into());
        let g = GraphProto {
            node: vec![d.clone()],
            ..Default::default()
        };
        let r = rewrite(&g, 22).unwrap();
        let ops: Vec<&str> = r.node.iter().map(|n| n.op_type.as_str()).collect();
        assert_eq!(ops, ["Dropout", "Shape", "ConstantOfShape"]);
        assert_eq!(r.node[0].output, ["y"]);
        assert_eq!(r.node[2].output, ["mask"]);
        let value = r.node[2].attribute[0].t.as_ref().unwrap();
        assert_eq!(value.data_type, data_type::BOOL);
        // In training the mask is random: left for the parser to refuse.
        d.input.extend(["ratio".into(), "training_mode".into()]);
        let training = GraphProto {
            node: vec![d],
            ..Default::default()
        };
        assert!(rewrite(&training, 22).is_none());
    }

    #[test]
    fn a_one_d_pool_is_the_two_d_pool_between_an_unsqueeze_and_a_squeeze() {
        let mut p = node("MaxPool", &["x"]);
        for (name, ints) in [("kernel_shape", vec![3]), ("pads", vec![1, 2])] {
            p.attribute.push(AttributeProto {
                name: name.into(),
                r#type: attribute_type::INTS,
                ints,
                ..Default::default()
            });
        }
        let g = GraphProto {
            node: vec![p],
            ..Default::default()
        };
        let r = rewrite(&g, 13).unwrap();
        let ops: Vec<&str> = r.node.iter().map(|n| n.op_type.as_str()).collect();
        assert_eq!(ops, ["Unsqueeze", "MaxPool", "Squeeze"]);
        let ints: Vec<&[i64]> = r.node[1].attribute.iter().map(|a| &a.ints[..]).collect();
        assert_eq!(ints, [&[1, 3][..], &[0, 1, 0, 2][..]]);
        assert_eq!(r.node[1].input, ["x/2d"]);
        assert_eq!(r.node[2].output, ["y"]);
        assert_eq!(r.initializer[0].int64_data, [2]);
        assert_eq!(r.node[0].input[1], r.initializer[0].name);
    }

    #[test]
    fn max_of_three_becomes_a_chain_and_of_one_an_identity() {
        let g = GraphProto {
            node: vec![node("Max", &["a", "b", "c"]), node("Min", &["y"])],
            ..Default::default()
        };
        let r = rewrite(&g, 25).unwrap();
        let got: Vec<(&str, Vec<String>, &str, &str)> = r
            .node
            .iter()
            .map(|n| {
                (
                    n.op_type.as_str(),
                    n.input.clone(),
                    n.output[0].as_str(),
                    n.name.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("Max", vec!["a".into(), "b".into()], "y/Max1", "m/1"),
                ("Max", vec!["y/Max1".into(), "c".into()], "y", "m"),
                ("Identity", vec!["y".into()], "y", "m"),
            ]
        );
        let two = GraphProto {
            node: vec![node("Max", &["a", "b"])],
            ..Default::default()
        };
        assert!(rewrite(&two, 25).is_none());
    }
}
