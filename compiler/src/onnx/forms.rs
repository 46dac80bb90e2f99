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

use super::proto::{attribute_type, data_type, AttributeProto, GraphProto, NodeProto, TensorProto};

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

/// The graph with those forms replaced; `None` when it has none (the graph is used as it is,
/// not copied). `opset` is the model's ai.onnx opset.
pub fn rewrite(gp: &GraphProto, opset: i64) -> Option<GraphProto> {
    if !gp
        .node
        .iter()
        .any(|n| is_variadic(n) || is_inference_mask(n))
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
