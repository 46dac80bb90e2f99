//! Building small ONNX models in Rust for the tests (no Python): a [`Model`] of nodes,
//! initializers, inputs and outputs, encoded with the compiler's own protobuf messages.

#![allow(dead_code)]

use compiler::graph::{DType, Tensor};
use compiler::onnx::proto::{
    attribute_type as at, AttributeProto, Dimension, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorShapeProto, TypeProto, TypeProtoTensor, ValueInfoProto,
};
use compiler::onnx::{tensor_to_proto, OnnxDType};
use ndarray::{ArrayD, IxDyn};

/// An attribute value.
pub enum A {
    I(i64),
    Is(Vec<i64>),
    F(f32),
    Fs(Vec<f32>),
    S(&'static str),
    Ss(Vec<&'static str>),
}

/// A typed value (graph input or output).
pub fn vi(name: &str, dt: DType, shape: &[usize]) -> ValueInfoProto {
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type: dt.onnx_code(),
                shape: Some(TensorShapeProto {
                    dim: shape
                        .iter()
                        .map(|&d| Dimension {
                            dim_value: Some(d as i64),
                            ..Default::default()
                        })
                        .collect(),
                }),
            }),
            denotation: String::new(),
        }),
        doc_string: String::new(),
    }
}

/// A model under construction.
pub struct Model {
    pub opset: i64,
    pub nodes: Vec<NodeProto>,
    pub inits: Vec<(String, Tensor)>,
    pub inputs: Vec<ValueInfoProto>,
    pub outputs: Vec<ValueInfoProto>,
    pub value_info: Vec<ValueInfoProto>,
    seed: u32,
}

impl Model {
    pub fn new(opset: i64) -> Model {
        Model {
            opset,
            nodes: Vec::new(),
            inits: Vec::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            value_info: Vec::new(),
            seed: 1,
        }
    }

    pub fn input(&mut self, name: &str, shape: &[usize]) -> &mut Self {
        self.inputs.push(vi(name, DType::F32, shape));
        self
    }

    /// A graph output without a declared type.
    pub fn output(&mut self, name: &str) -> &mut Self {
        self.outputs.push(ValueInfoProto {
            name: name.into(),
            ..Default::default()
        });
        self
    }

    pub fn init(&mut self, name: &str, t: Tensor) -> &mut Self {
        self.inits.push((name.into(), t));
        self
    }

    /// A float initializer of deterministic values in `[-scale, scale]`.
    pub fn weight(&mut self, name: &str, shape: &[usize], scale: f32) -> &mut Self {
        self.seed = self.seed.wrapping_add(1);
        let t = floats(shape, self.seed, scale);
        self.init(name, t)
    }

    /// A float initializer from values.
    pub fn values(&mut self, name: &str, shape: &[usize], v: &[f32]) -> &mut Self {
        self.init(
            name,
            Tensor::F32(ArrayD::from_shape_vec(IxDyn(shape), v.to_vec()).expect("shape")),
        )
    }

    pub fn ints(&mut self, name: &str, v: &[i64]) -> &mut Self {
        self.init(
            name,
            Tensor::I64(ArrayD::from_shape_vec(IxDyn(&[v.len()]), v.to_vec()).expect("1-D")),
        )
    }

    /// Adds a node named `name` (the ONNX node name the support table shows).
    pub fn node(
        &mut self,
        name: &str,
        op: &str,
        ins: &[&str],
        outs: &[&str],
        attrs: Vec<(&str, A)>,
    ) -> &mut Self {
        self.nodes.push(node(name, op, ins, outs, attrs));
        self
    }

    pub fn proto(&self) -> ModelProto {
        ModelProto {
            ir_version: 8,
            opset_import: vec![OperatorSetIdProto {
                domain: String::new(),
                version: self.opset,
            }],
            graph: Some(GraphProto {
                node: self.nodes.clone(),
                name: "test".into(),
                input: self.inputs.clone(),
                output: self.outputs.clone(),
                value_info: self.value_info.clone(),
                initializer: self
                    .inits
                    .iter()
                    .map(|(n, t)| tensor_to_proto(n, t))
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    pub fn bytes(&self) -> Vec<u8> {
        compiler::zoo::encode_model(&self.proto())
    }
}

pub fn node(name: &str, op: &str, ins: &[&str], outs: &[&str], attrs: Vec<(&str, A)>) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        name: name.into(),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: outs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs
            .into_iter()
            .map(|(n, a)| {
                let mut p = AttributeProto {
                    name: n.into(),
                    ..Default::default()
                };
                match a {
                    A::I(i) => (p.r#type, p.i) = (at::INT, i),
                    A::Is(v) => (p.r#type, p.ints) = (at::INTS, v),
                    A::F(f) => (p.r#type, p.f) = (at::FLOAT, f),
                    A::Fs(v) => (p.r#type, p.floats) = (at::FLOATS, v),
                    A::S(s) => (p.r#type, p.s) = (at::STRING, s.as_bytes().to_vec()),
                    A::Ss(v) => {
                        (p.r#type, p.strings) = (
                            at::STRINGS,
                            v.iter().map(|s| s.as_bytes().to_vec()).collect(),
                        )
                    }
                }
                p
            })
            .collect(),
        ..Default::default()
    }
}

/// Deterministic float values in `[-scale, scale]`.
pub fn floats(shape: &[usize], seed: u32, scale: f32) -> Tensor {
    let n: usize = shape.iter().product();
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(12345);
    let v = (0..n)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            ((s >> 8) % 20001) as f32 / 10000.0 - 1.0
        })
        .map(|v| v * scale)
        .collect();
    Tensor::F32(ArrayD::from_shape_vec(IxDyn(shape), v).expect("shape"))
}

/// A float array of deterministic values in `[-scale, scale]`.
pub fn sample(shape: &[usize], seed: u32, scale: f32) -> ArrayD<f32> {
    match floats(shape, seed, scale) {
        Tensor::F32(a) => a,
        _ => unreachable!(),
    }
}
