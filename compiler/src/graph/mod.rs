//! The graph IR: what the ONNX importer builds, the passes simplify and the quantizer lowers
//! (the pipeline is [`crate::frontend`]).
//!
//! A [`Graph`] is a petgraph DAG whose nodes are operators ([`ops::Op`]; their semantics are
//! `vta_runtime::ops`, their ONNX parsing `crate::onnx::ops`) and whose edges are tensors: each edge from a producer to a
//! consumer carries the [`TensorId`] of the tensor that flows along it, and every tensor has a
//! static [`Fact`] (element type and shape; the batch dimension is fixed from the model, or 1
//! when symbolic). Constants (initializers, folded sub-graphs) are tensors with a value and no
//! producer; graph inputs are tensors with neither.

/// The ops of the IR (their facts and semantics live in the runtime, which runs them).
pub use vta_runtime::ops;
pub mod islands;
pub mod passes;
pub use vta_runtime::plan;
pub mod support;
pub use vta_runtime::tensor;

use std::collections::HashSet;
use std::sync::Arc;

use petgraph::stable_graph::{NodeIndex, StableDiGraph};

pub use ops::Op;
pub use plan::{Layer, Plan, Step};
pub use support::{Support, SupportEntry, SupportTable};
pub use tensor::{DType, Fact, Tensor};

/// Index of a tensor in [`Graph::tensors`].
pub type TensorId = usize;

/// A tensor of the graph: its name, static fact and constant value (if any); its producer is
/// in [`Graph::producers`].
pub use ops::TensorInfo;

/// An ONNX node of the source model (name as in the file, or `op_type#index` when unnamed).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OnnxNode {
    pub name: String,
    pub op_type: String,
}

/// A node of the graph: an operator applied to tensors.
#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub op: Box<dyn Op>,
    /// Inputs in ONNX order; `None` for an omitted optional input.
    pub inputs: Vec<Option<TensorId>>,
    pub outputs: Vec<TensorId>,
    /// The ONNX nodes this node stands for: the one it was imported from, plus those the
    /// passes fused into it.
    pub origin: Vec<OnnxNode>,
}

/// The graph IR.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// Nodes are ops; an edge `a -> b` carries a tensor produced by `a` and read by `b`.
    pub dag: StableDiGraph<Node, TensorId>,
    pub tensors: Vec<TensorInfo>,
    /// The node producing each tensor, by [`TensorId`].
    pub producers: Vec<Option<NodeIndex>>,
    pub inputs: Vec<TensorId>,
    pub outputs: Vec<TensorId>,
    /// The model's ai.onnx opset.
    pub opset: i64,
    /// Where the model came from (file name), for messages.
    pub source: String,
    /// Every ONNX node of the model, in file order.
    pub onnx_nodes: Vec<OnnxNode>,
    /// ONNX nodes the importer or the passes removed, and how (folded constant, identity,
    /// BatchNorm folded into a Conv, Relu fused into a Conv, ...).
    pub removed: Vec<(OnnxNode, String)>,
    /// ONNX nodes merged into another node by the passes: (node, name of the node it was
    /// merged into, how).
    pub fusions: Vec<(OnnxNode, String, String)>,
}

impl Graph {
    /// Adds a tensor.
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        fact: Fact,
        value: Option<Tensor>,
    ) -> TensorId {
        self.tensors.push(TensorInfo {
            name: name.into(),
            fact,
            value: value.map(Arc::new),
        });
        self.producers.push(None);
        self.tensors.len() - 1
    }

    /// Adds a constant tensor.
    pub fn add_const(&mut self, name: impl Into<String>, value: Tensor) -> TensorId {
        let fact = value.fact();
        self.add_tensor(name, fact, Some(value))
    }

    /// Adds a node reading `inputs` and producing the (already created) `outputs`.
    pub fn add_node(
        &mut self,
        name: impl Into<String>,
        op: Box<dyn Op>,
        inputs: Vec<Option<TensorId>>,
        outputs: Vec<TensorId>,
        origin: Vec<OnnxNode>,
    ) -> NodeIndex {
        let ix = self.dag.add_node(Node {
            name: name.into(),
            op,
            inputs: inputs.clone(),
            outputs: outputs.clone(),
            origin,
        });
        for &o in &outputs {
            self.producers[o] = Some(ix);
        }
        for t in inputs.into_iter().flatten() {
            if let Some(p) = self.producers[t] {
                self.dag.add_edge(p, ix, t);
            }
        }
        ix
    }

    /// Facts (with constant values) of a node's inputs.
    pub fn input_infos(&self, ix: NodeIndex) -> Vec<Option<&TensorInfo>> {
        self.dag[ix]
            .inputs
            .iter()
            .map(|t| t.map(|t| &self.tensors[t]))
            .collect()
    }

    /// The constant value of a tensor, if it is a constant.
    pub fn const_value(&self, t: TensorId) -> Option<&Tensor> {
        self.tensors[t].value.as_deref()
    }

    /// The constant value of a node's input `i`.
    pub fn const_input(&self, ix: NodeIndex, i: usize) -> Option<&Tensor> {
        self.dag[ix]
            .inputs
            .get(i)
            .copied()
            .flatten()
            .and_then(|t| self.const_value(t))
    }

    /// Fact of a tensor.
    pub fn fact(&self, t: TensorId) -> &Fact {
        &self.tensors[t].fact
    }

    /// The nodes reading tensor `t`, with the input slot.
    pub fn consumers(&self, t: TensorId) -> Vec<(NodeIndex, usize)> {
        let mut v = Vec::new();
        for ix in self.dag.node_indices() {
            for (i, inp) in self.dag[ix].inputs.iter().enumerate() {
                if *inp == Some(t) {
                    v.push((ix, i));
                }
            }
        }
        v
    }

    /// The node producing tensor `t`.
    pub fn producer(&self, t: TensorId) -> Option<NodeIndex> {
        self.producers[t]
    }

    pub fn is_output(&self, t: TensorId) -> bool {
        self.outputs.contains(&t)
    }

    /// Whether `t` is read by exactly one node input and is not a graph output.
    pub fn single_use(&self, t: TensorId) -> bool {
        !self.is_output(t) && self.consumers(t).len() == 1
    }

    /// Nodes in a topological order (producers before consumers).
    pub fn topo_order(&self) -> Vec<NodeIndex> {
        petgraph::algo::toposort(&self.dag, None)
            .unwrap_or_else(|_| self.dag.node_indices().collect())
    }

    /// Makes every reader of `old` (node inputs and graph outputs) read `new` instead.
    pub fn replace_uses(&mut self, old: TensorId, new: TensorId) {
        let ixs: Vec<NodeIndex> = self.dag.node_indices().collect();
        for ix in ixs {
            for inp in self.dag[ix].inputs.iter_mut() {
                if *inp == Some(old) {
                    *inp = Some(new);
                }
            }
        }
        for o in self.outputs.iter_mut() {
            if *o == old {
                *o = new;
            }
        }
        self.rebuild_edges();
    }

    /// Removes a node (its outputs lose their producer).
    pub fn remove_node(&mut self, ix: NodeIndex) -> Option<Node> {
        let n = self.dag.remove_node(ix)?;
        for &o in &n.outputs {
            if self.producers[o] == Some(ix) {
                self.producers[o] = None;
            }
        }
        Some(n)
    }

    /// Recomputes the edges from the nodes' input lists (after a rewrite).
    pub fn rebuild_edges(&mut self) {
        self.dag.clear_edges();
        let ixs: Vec<NodeIndex> = self.dag.node_indices().collect();
        for ix in ixs {
            let ins: Vec<TensorId> = self.dag[ix].inputs.iter().flatten().copied().collect();
            for t in ins {
                if let Some(p) = self.producers[t] {
                    self.dag.add_edge(p, ix, t);
                }
            }
        }
    }

    /// Removes nodes none of whose outputs is used.
    pub fn prune(&mut self) {
        loop {
            let mut used: HashSet<TensorId> = self.outputs.iter().copied().collect();
            for ix in self.dag.node_indices() {
                used.extend(self.dag[ix].inputs.iter().flatten());
            }
            let dead: Vec<NodeIndex> = self
                .dag
                .node_indices()
                .filter(|&ix| self.dag[ix].outputs.iter().all(|o| !used.contains(o)))
                .collect();
            if dead.is_empty() {
                break;
            }
            for ix in dead {
                if let Some(n) = self.remove_node(ix) {
                    for o in n.origin {
                        self.removed
                            .push((o, "removed: its outputs are not used".into()));
                    }
                }
            }
        }
    }

    /// Number of op nodes.
    pub fn node_count(&self) -> usize {
        self.dag.node_count()
    }

    /// The node with this name.
    pub fn find_node(&self, name: &str) -> Option<NodeIndex> {
        self.dag
            .node_indices()
            .find(|&ix| self.dag[ix].name == name)
    }

    /// The tensor with this name.
    pub fn find_tensor(&self, name: &str) -> Option<TensorId> {
        self.tensors.iter().position(|t| t.name == name)
    }

    /// Replaces a graph input by a constant (for testing op models whose "inputs" are
    /// really parameters, as in ONNX's node tests).
    pub fn freeze_input(&mut self, name: &str, value: Tensor) -> Result<(), String> {
        let t = self
            .inputs
            .iter()
            .copied()
            .find(|&t| self.tensors[t].name == name)
            .ok_or_else(|| format!("no graph input '{name}'"))?;
        if value.fact() != self.tensors[t].fact {
            return Err(format!(
                "input '{name}' is {} but the value is {}",
                self.tensors[t].fact,
                value.fact()
            ));
        }
        self.tensors[t].value = Some(Arc::new(value));
        self.inputs.retain(|&i| i != t);
        Ok(())
    }

    /// Runs the graph on the CPU with every op's own (ONNX) semantics: the float executor
    /// of the original model. Returns the value of every tensor computed, by [`TensorId`].
    pub fn run(&self, inputs: &[Tensor]) -> Result<Vec<Option<Tensor>>, String> {
        if inputs.len() != self.inputs.len() {
            return Err(format!(
                "the graph has {} inputs, {} given",
                self.inputs.len(),
                inputs.len()
            ));
        }
        let mut vals: Vec<Option<Tensor>> = self
            .tensors
            .iter()
            .map(|t| t.value.as_deref().cloned())
            .collect();
        for (&t, v) in self.inputs.iter().zip(inputs) {
            if v.fact() != self.tensors[t].fact {
                return Err(format!(
                    "input '{}' should be {}, got {}",
                    self.tensors[t].name,
                    self.tensors[t].fact,
                    v.fact()
                ));
            }
            vals[t] = Some(v.clone());
        }
        for ix in self.topo_order() {
            let n = &self.dag[ix];
            let args: Vec<Option<&Tensor>> = n
                .inputs
                .iter()
                .map(|t| t.and_then(|t| vals[t].as_ref()))
                .collect();
            let outs =
                n.op.eval(&args)
                    .map_err(|e| format!("node '{}' ({}): {e}", n.name, n.op.op_type()))?;
            for (&o, v) in n.outputs.iter().zip(outs) {
                vals[o] = Some(v);
            }
        }
        Ok(vals)
    }

    /// Runs the graph and returns its outputs.
    pub fn run_outputs(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
        let vals = self.run(inputs)?;
        self.outputs
            .iter()
            .map(|&o| {
                vals[o]
                    .clone()
                    .ok_or_else(|| format!("output '{}' was not computed", self.tensors[o].name))
            })
            .collect()
    }
}
