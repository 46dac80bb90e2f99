//! ONNX's variadic `Max` and `Min` with other than two inputs, rewritten before parsing into
//! what the IR has: a chain of two-input nodes (`Max(a, b, c) = Max(Max(a, b), c)`, which
//! broadcasts as the variadic form does), or an `Identity` for one input. The last node keeps
//! the node's name and output, so the support table names it.

use super::proto::{GraphProto, NodeProto};

fn is_variadic(n: &NodeProto) -> bool {
    (n.domain.is_empty() || n.domain == "ai.onnx")
        && matches!(n.op_type.as_str(), "Max" | "Min")
        && n.input.len() != 2
}

/// The graph with every `Max`/`Min` of one or of three or more inputs replaced; `None` when
/// it has none (the graph is used as it is, not copied).
pub fn rewrite(gp: &GraphProto) -> Option<GraphProto> {
    if !gp.node.iter().any(is_variadic) {
        return None;
    }
    let mut out = gp.clone();
    out.node.clear();
    for n in &gp.node {
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
    fn max_of_three_becomes_a_chain_and_of_one_an_identity() {
        let g = GraphProto {
            node: vec![node("Max", &["a", "b", "c"]), node("Min", &["y"])],
            ..Default::default()
        };
        let r = rewrite(&g).unwrap();
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
        assert!(rewrite(&two).is_none());
    }
}
