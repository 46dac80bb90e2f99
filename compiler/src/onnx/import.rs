//! ONNX `ModelProto` to [`Graph`]: initializers become constants, inputs get static facts
//! (a symbolic first dimension is the batch and becomes 1), nodes are parsed into ops in a
//! dependency order, every node's output facts are inferred, and nodes whose inputs are all
//! constants are evaluated at load time. onnxruntime's quantized contrib operators are first
//! expanded into their standard definition ([`super::contrib`]), and low-bit quantization
//! (int4/int2 types, QONNX's quantizers) rewritten into int8 QDQ ([`super::lowbit`]).

use std::collections::{HashMap, HashSet};

use super::ops::{self, ParseCtx};
use super::unsupported;
use crate::frontend::FrontendError;
use crate::graph::support::{Support, SupportEntry, SupportTable};
use crate::graph::{Fact, Graph, OnnxNode, TensorId};
use crate::onnx::proto::{ModelProto, NodeProto, ValueInfoProto};
use crate::onnx::{default_opset, tensor_from_proto};
use vta_runtime::budget::MemoryBudget;

/// A model that is not well formed (the file and what is wrong).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {message}")]
pub struct ImportError {
    pub file: String,
    pub message: String,
}

/// The facts of graph input `v`; `given` is the shape the user fixed for it, which fills its
/// symbolic dimensions and must agree with its fixed ones.
fn input_fact(v: &ValueInfoProto, given: Option<&[usize]>) -> Result<Fact, String> {
    let tt = v
        .r#type
        .as_ref()
        .and_then(|t| t.tensor_type.as_ref())
        .ok_or_else(|| format!("input '{}' is not a tensor", v.name))?;
    let dtype = crate::onnx::ir_dtype(tt.elem_type).map_err(|t| {
        format!(
            "input '{}' has element type {t}, which is not supported",
            v.name
        )
    })?;
    let shape = tt.shape.as_ref().ok_or_else(|| {
        format!(
            "input '{}' has no shape (static shapes are required)",
            v.name
        )
    })?;
    if let Some(g) = given {
        if g.len() != shape.dim.len() {
            return Err(format!(
                "--input-shape gives input '{}' {} dimension(s) ({}), the model {}",
                v.name,
                g.len(),
                dims_text(g),
                shape.dim.len()
            ));
        }
    }
    let mut dims = Vec::new();
    for (i, d) in shape.dim.iter().enumerate() {
        if let Some(&n) = given.and_then(|g| g.get(i)) {
            match d.dim_value {
                Some(m) if m > 0 && m as usize != n => {
                    return Err(format!(
                        "--input-shape gives input '{}' dimension {i} as {n}, but the model \
                         fixes it to {m}",
                        v.name
                    ));
                }
                _ if n == 0 => {
                    return Err(format!(
                        "--input-shape gives input '{}' dimension {i} as 0 (every dimension \
                         must be at least 1)",
                        v.name
                    ));
                }
                _ => dims.push(n),
            }
            continue;
        }
        match d.dim_value {
            Some(n) if n > 0 => dims.push(n as usize),
            Some(0) => {
                return Err(format!(
                    "input '{}' has dimension {i} fixed to 0: a tensor with no elements cannot \
                     be run (every dimension must be at least 1)",
                    v.name
                ));
            }
            // -1 is a common spelling of "any" for the batch.
            _ if i == 0 => dims.push(1),
            Some(n) => {
                return Err(format!(
                    "input '{}' has dimension {i} fixed to {n}, a negative size (every dimension \
                     must be at least 1; only the first, the batch, may be symbolic)",
                    v.name
                ));
            }
            None => {
                let what = d
                    .dim_param
                    .clone()
                    .map_or_else(|| "unknown".to_string(), |p| format!("'{p}'"));
                return Err(format!(
                    "input '{}' has a dynamic dimension {i} ({what}); only the first (batch) \
                     dimension may be symbolic: fix the others with --input-shape {}=DIMS \
                     (e.g. {})",
                    v.name,
                    v.name,
                    example_shape(shape)
                ));
            }
        }
    }
    if dims
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .is_none_or(|n| n > 1 << 31)
    {
        return Err(format!("input '{}' of shape {dims:?} is too large", v.name));
    }
    Ok(Fact::new(dtype, dims))
}

/// `1x3x224x224`.
fn dims_text(d: &[usize]) -> String {
    d.iter().map(usize::to_string).collect::<Vec<_>>().join("x")
}

/// The input's shape with 1 for the batch and a typical size for other symbolic dimensions,
/// as an example of what `--input-shape` takes.
fn example_shape(shape: &crate::onnx::proto::TensorShapeProto) -> String {
    let d: Vec<usize> = shape
        .dim
        .iter()
        .enumerate()
        .map(|(i, d)| match d.dim_value {
            Some(n) if n > 0 => n as usize,
            _ if i == 0 => 1,
            _ => 224,
        })
        .collect();
    dims_text(&d)
}

/// Orders nodes so that producers come first (ONNX requires it; tolerate files that do not).
fn order(nodes: &[NodeProto], known: &HashSet<String>) -> Result<Vec<usize>, String> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            if known.contains(o) || producer.insert(o, i).is_some() {
                return Err(format!("tensor '{o}' is defined more than once"));
            }
        }
    }
    let name = |i: usize| {
        if nodes[i].name.is_empty() {
            format!("#{i} ({})", nodes[i].op_type)
        } else {
            format!("'{}'", nodes[i].name)
        }
    };
    let mut deps: Vec<Vec<usize>> = Vec::with_capacity(nodes.len());
    for (i, n) in nodes.iter().enumerate() {
        let mut d = Vec::new();
        for inp in n.input.iter().filter(|s| !s.is_empty()) {
            if let Some(&p) = producer.get(inp.as_str()) {
                d.push(p);
            } else if !known.contains(inp) {
                return Err(format!(
                    "node {} reads '{inp}', which is not a graph input, an initializer or the output of any node (missing initializer?)",
                    name(i)
                ));
            }
        }
        deps.push(d);
    }
    // Depth-first topological sort keeping the file order where possible.
    let mut state = vec![0u8; nodes.len()];
    let mut out = Vec::with_capacity(nodes.len());
    for start in 0..nodes.len() {
        let mut stack = vec![(start, 0usize)];
        while let Some((i, k)) = stack.pop() {
            if k == 0 {
                if state[i] == 2 {
                    continue;
                }
                if state[i] == 1 {
                    return Err(format!("the graph has a cycle through node {}", name(i)));
                }
                state[i] = 1;
            }
            if k < deps[i].len() {
                stack.push((i, k + 1));
                let d = deps[i][k];
                if state[d] == 1 {
                    return Err(format!("the graph has a cycle through node {}", name(d)));
                }
                if state[d] == 0 {
                    stack.push((d, 0));
                }
            } else {
                state[i] = 2;
                out.push(i);
            }
        }
    }
    Ok(out)
}

/// Imports a decoded model. `file` names it in errors. `input_shapes` fixes the shapes of
/// inputs by name (their symbolic dimensions; fixed ones must agree; an empty name is the
/// only input's). Every tensor
/// (initializers, inputs, inferred outputs) is charged to a memory budget of `memory_budget`
/// bytes before it is allocated or computed (see [`vta_runtime::budget`]).
pub fn import(
    model: &ModelProto,
    file: &str,
    memory_budget: u64,
    input_shapes: &[(String, Vec<usize>)],
) -> Result<Graph, FrontendError> {
    let err = |m: String| {
        FrontendError::Import(ImportError {
            file: file.to_string(),
            message: m,
        })
    };
    let gp = model
        .graph
        .as_ref()
        .ok_or_else(|| err("not an ONNX model: it has no graph".into()))?;
    let opset =
        default_opset(model).ok_or_else(|| err("the model imports no ai.onnx opset".into()))?;
    let expanded = super::contrib::expand(gp, opset);
    let gp = expanded.as_ref().unwrap_or(gp);
    let lowbit = super::lowbit::rewrite(gp, opset).map_err(err)?;
    let gp = lowbit.as_ref().unwrap_or(gp);
    let rewritten = super::forms::rewrite(gp, opset);
    let gp = rewritten.as_ref().unwrap_or(gp);
    let mut g = Graph {
        opset,
        source: file.to_string(),
        ..Default::default()
    };
    let mut budget = MemoryBudget::new(memory_budget);
    let mut names: HashMap<String, TensorId> = HashMap::new();
    for init in &gp.initializer {
        if init.name.is_empty() {
            return Err(err("an initializer has no name".into()));
        }
        let v = tensor_from_proto(init).map_err(|m| err(format!("initializer: {m}")))?;
        budget.charge(&init.name, &v.fact()).map_err(err)?;
        let t = g.add_const(init.name.clone(), v);
        names.insert(init.name.clone(), t);
    }
    let inputs: Vec<&str> = gp
        .input
        .iter()
        .filter(|i| !names.contains_key(&i.name))
        .map(|i| i.name.as_str())
        .collect();
    // A shape without a name is the only input's.
    let named: Vec<(&str, &[usize])> = input_shapes
        .iter()
        .map(|(n, d)| match (n.is_empty(), inputs.as_slice()) {
            (false, _) => Ok((n.as_str(), d.as_slice())),
            (true, [only]) => Ok((*only, d.as_slice())),
            (true, _) => Err(err(format!(
                "--input-shape {} has no input name, and the model has {} inputs ({}): give \
                 NAME=DIMS",
                dims_text(d),
                inputs.len(),
                inputs.join(", ")
            ))),
        })
        .collect::<Result<_, _>>()?;
    for (name, _) in &named {
        if !inputs.contains(name) {
            return Err(err(format!(
                "--input-shape names '{name}', which is not an input of the model (its inputs: \
                 {})",
                inputs.join(", ")
            )));
        }
    }
    for inp in &gp.input {
        if names.contains_key(&inp.name) {
            continue; // an initializer listed as an input (IR < 4): a constant
        }
        let given = named.iter().find(|(n, _)| *n == inp.name).map(|(_, d)| *d);
        let fact = input_fact(inp, given).map_err(err)?;
        budget.charge(&inp.name, &fact).map_err(err)?;
        let t = g.add_tensor(inp.name.clone(), fact, None);
        names.insert(inp.name.clone(), t);
        g.inputs.push(t);
    }
    let known: HashSet<String> = names.keys().cloned().collect();
    let ord = order(&gp.node, &known).map_err(err)?;

    let node_name = |i: usize| {
        let n = &gp.node[i];
        if n.name.is_empty() {
            format!("{}_{i}", n.op_type)
        } else {
            n.name.clone()
        }
    };
    g.onnx_nodes = (0..gp.node.len())
        .map(|i| OnnxNode {
            name: node_name(i),
            op_type: gp.node[i].op_type.clone(),
        })
        .collect();

    // Nodes that cannot be imported (unsupported) or whose inputs are unknown (not analysed).
    let mut problems: HashMap<usize, Support> = HashMap::new();
    // Tensors without a fact: name -> the node that could not produce it.
    let mut unknown: HashMap<String, String> = HashMap::new();
    // Facts the model declares, for the outputs of nodes that cannot be imported.
    let declared = unsupported::declared_facts(gp);
    for i in ord {
        let node = &gp.node[i];
        let name = node_name(i);
        let origin = vec![OnnxNode {
            name: name.clone(),
            op_type: node.op_type.clone(),
        }];
        let ctx = ParseCtx { node, opset };
        let parsed = ops::parse(&ctx);
        let unknown_input = node
            .input
            .iter()
            .find_map(|t| unknown.get(t).map(|src| (t.clone(), src.clone())));
        let attempt = match (parsed, unknown_input) {
            (Err(reason), _) => Err(Support::Unsupported {
                fix: unsupported::fix_for(node, &reason),
                reason,
            }),
            (Ok(_), Some((t, src))) => Err(Support::NotAnalyzed {
                reason: format!(
                    "supported operator, but its input '{t}' comes from node '{src}', whose \
                     output shape is unknown (the model declares no value_info for it)"
                ),
            }),
            (Ok(op), None) => {
                let inputs: Vec<Option<TensorId>> = node
                    .input
                    .iter()
                    .map(|s| {
                        if s.is_empty() {
                            None
                        } else {
                            names.get(s).copied()
                        }
                    })
                    .collect();
                let infos: Vec<_> = inputs.iter().map(|t| t.map(|t| &g.tensors[t])).collect();
                match op.infer(&infos).and_then(|facts| {
                    if node.output.len() > facts.len() {
                        Err(format!(
                            "the node has {} outputs, the op produces {}",
                            node.output.len(),
                            facts.len()
                        ))
                    } else {
                        Ok(facts)
                    }
                }) {
                    Ok(facts) => Ok((op, inputs, facts)),
                    Err(reason) => Err(Support::Unsupported {
                        fix: unsupported::fix_for(node, &reason),
                        reason,
                    }),
                }
            }
        };
        let (op, inputs, facts) = match attempt {
            Ok(v) => v,
            Err(support) => {
                // Go on with the facts the model declares (or a contrib operator's known
                // signature, or a standard element-wise operator's definition), so that every
                // later node is analysed too.
                let in_facts: Vec<Option<Fact>> = node
                    .input
                    .iter()
                    .map(|s| names.get(s).map(|&t| g.tensors[t].fact.clone()))
                    .collect();
                let contrib = unsupported::contrib_facts(node, &in_facts)
                    .or_else(|| unsupported::standard_facts(node, &in_facts))
                    .or_else(|| {
                        // The node without the attributes that change its values, not its
                        // shape (a Resize's interpolation mode), infers its output facts.
                        let relaxed = unsupported::shape_only_node(node)?;
                        let op = ops::parse(&ParseCtx {
                            node: &relaxed,
                            opset,
                        })
                        .ok()?;
                        let infos = node
                            .input
                            .iter()
                            .map(|s| match s.as_str() {
                                "" => Some(None),
                                s => names.get(s).map(|&t| Some(&g.tensors[t])),
                            })
                            .collect::<Option<Vec<_>>>()?;
                        op.infer(&infos).ok()
                    });
                let outs: Option<Vec<Fact>> = node
                    .output
                    .iter()
                    .enumerate()
                    .map(|(k, o)| {
                        declared
                            .get(o)
                            .cloned()
                            .or_else(|| contrib.as_ref().and_then(|c| c.get(k).cloned()))
                    })
                    .collect();
                match outs {
                    Some(facts) => {
                        for (o, f) in node.output.iter().zip(facts) {
                            if !o.is_empty() {
                                let t = g.add_tensor(o.clone(), f, None);
                                names.insert(o.clone(), t);
                            }
                        }
                    }
                    None => {
                        for o in &node.output {
                            unknown.insert(o.clone(), name.clone());
                        }
                    }
                }
                problems.insert(i, support);
                continue;
            }
        };
        for (k, f) in facts.iter().enumerate() {
            let output = node.output.get(k).filter(|s| !s.is_empty());
            let output = output.map_or_else(|| format!("{name}:unused{k}"), String::clone);
            budget
                .charge(&output, f)
                .map_err(|e| err(format!("node '{name}' ({}): {e}", node.op_type)))?;
        }
        // Constant folding.
        let infos: Vec<_> = inputs.iter().map(|t| t.map(|t| &g.tensors[t])).collect();
        let all_const = inputs
            .iter()
            .flatten()
            .all(|&t| g.tensors[t].value.is_some());
        let from_facts = op.fold_from_facts(&infos);
        let how = if from_facts.is_some() {
            "folded at load time (static shape)"
        } else {
            "folded at load time (constant inputs)"
        };
        let folded = if let Some(v) = from_facts {
            Some(Ok(v))
        } else if op.foldable() && all_const {
            let args: Vec<_> = inputs
                .iter()
                .map(|t| t.and_then(|t| g.tensors[t].value.as_deref()))
                .collect();
            Some(op.eval(&args))
        } else {
            None
        };
        match folded {
            Some(Ok(values)) => {
                for (o, v) in node.output.iter().zip(values) {
                    if !o.is_empty() {
                        let t = g.add_const(o.clone(), v);
                        names.insert(o.clone(), t);
                    }
                }
                g.removed.push((origin[0].clone(), how.into()));
            }
            Some(Err(e)) => {
                problems.insert(
                    i,
                    Support::Unsupported {
                        reason: format!("constant folding failed: {e}"),
                        fix: "the constant sub-graph cannot be evaluated: check its values".into(),
                    },
                );
                // The inferred facts still hold, so later nodes are analysed too.
                for (o, f) in node.output.iter().zip(facts) {
                    if !o.is_empty() {
                        let t = g.add_tensor(o.clone(), f, None);
                        names.insert(o.clone(), t);
                    }
                }
            }
            None => {
                let mut outs = Vec::new();
                for (k, f) in facts.into_iter().enumerate() {
                    let oname = node
                        .output
                        .get(k)
                        .filter(|s| !s.is_empty())
                        .cloned()
                        .unwrap_or_else(|| format!("{name}:unused{k}"));
                    let t = g.add_tensor(oname.clone(), f, None);
                    names.insert(oname, t);
                    outs.push(t);
                }
                g.add_node(name, op, inputs, outs, origin);
            }
        }
    }
    if !problems.is_empty() {
        let entries = (0..gp.node.len())
            .map(|i| SupportEntry {
                node: node_name(i),
                op_type: gp.node[i].op_type.clone(),
                support: problems
                    .get(&i)
                    .cloned()
                    .unwrap_or_else(|| Support::NotPlaced {
                        reason: "supported operator; not placed, since the model has unsupported \
                             nodes"
                            .into(),
                    }),
            })
            .collect();
        let count = problems.values().filter(|s| s.is_unsupported()).count();
        return Err(FrontendError::Unsupported {
            file: file.to_string(),
            count,
            table: SupportTable { entries },
        });
    }
    for o in &gp.output {
        let t = *names.get(&o.name).ok_or_else(|| {
            err(format!(
                "graph output '{}' is not produced by any node",
                o.name
            ))
        })?;
        g.outputs.push(t);
    }
    if g.outputs.is_empty() {
        return Err(err("the graph has no outputs".into()));
    }
    Ok(g)
}
