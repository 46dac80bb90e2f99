//! Operators of the graph IR, one file per ONNX op kind (tract-style): each op parses its
//! attributes from the ONNX node, infers its output facts (type and static shape) from its
//! input facts, and evaluates itself on tensors with ONNX's semantics (float ops in f32,
//! integer ops exactly).

use std::any::Any;
use std::fmt;

use crate::graph::{Fact, Tensor, TensorInfo};
use crate::onnx::proto::{attribute_type, AttributeProto, NodeProto};

pub mod average_pool;
pub mod batch_norm;
pub mod binary;
pub mod cast;
pub mod clip;
pub mod concat;
pub mod constant;
pub mod conv;
pub mod conv_integer;
pub mod dequantize_linear;
pub mod flatten;
pub mod gather;
pub mod gemm;
pub mod global_average_pool;
pub mod identity;
pub mod internal;
pub mod kernels;
pub mod matmul;
pub mod matmul_integer;
pub mod max_pool;
pub mod qlinear_conv;
pub mod qlinear_matmul;
pub mod quantize_linear;
pub mod relu;
pub mod reshape;
pub mod shape;
pub mod softmax;
pub mod squeeze;
pub mod transpose;

/// An operator of the graph IR.
pub trait Op: fmt::Debug + Send + Sync + Any {
    /// The ONNX op type (`"Conv"`), or a descriptive name for internal ops.
    fn op_type(&self) -> &'static str;

    /// Output facts from input facts (optional inputs that are absent are `None`; constant
    /// inputs carry their value in [`TensorInfo::value`]).
    fn infer(&self, inputs: &[Option<&TensorInfo>]) -> Result<Vec<Fact>, String>;

    /// Evaluates the op with ONNX semantics.
    fn eval(&self, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, String>;

    fn as_any(&self) -> &dyn Any;

    fn box_clone(&self) -> Box<dyn Op>;

    /// Whether the op may be evaluated at load time when all its inputs are constants.
    /// `DequantizeLinear` says no: folding it would turn quantized weights into floats.
    fn foldable(&self) -> bool {
        true
    }

    /// Outputs computable from the input facts alone (`Shape`), for constant folding.
    fn fold_from_facts(&self, _inputs: &[Option<&TensorInfo>]) -> Option<Vec<Tensor>> {
        None
    }

    /// A one-line summary of the attributes, for support tables and debugging.
    fn summary(&self) -> String {
        String::new()
    }
}

impl Clone for Box<dyn Op> {
    fn clone(&self) -> Self {
        self.box_clone()
    }
}

/// Implements the boilerplate methods of [`Op`].
macro_rules! op_boilerplate {
    () => {
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
        fn box_clone(&self) -> Box<dyn crate::graph::ops::Op> {
            Box::new(self.clone())
        }
    };
}
pub(crate) use op_boilerplate;

/// The clamp of a fused activation (`Relu` is `[0, +inf]`, `Clip(a, b)` is `[a, b]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Activation {
    pub min: f32,
    pub max: f32,
}

impl Activation {
    pub const RELU: Activation = Activation {
        min: 0.0,
        max: f32::INFINITY,
    };

    pub fn apply(&self, v: f32) -> f32 {
        // NaN-preserving clamp, as Relu/Clip do.
        if v < self.min {
            self.min
        } else if v > self.max {
            self.max
        } else {
            v
        }
    }

    /// The intersection of two clamps (an activation fused after another).
    pub fn then(self, next: Activation) -> Activation {
        Activation {
            min: self.min.max(next.min),
            max: self.max.min(next.max),
        }
    }
}

/// Parsing context of a node.
pub struct ParseCtx<'a> {
    pub node: &'a NodeProto,
    /// The model's ai.onnx opset version.
    pub opset: i64,
}

impl ParseCtx<'_> {
    fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.node.attribute.iter().find(|a| a.name == name)
    }

    fn typed(&self, name: &str, ty: i32, tyname: &str) -> Result<Option<&AttributeProto>, String> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) if a.r#type == ty || a.r#type == attribute_type::UNDEFINED => Ok(Some(a)),
            Some(a) => Err(format!(
                "attribute '{name}' has type {} but should be {tyname}",
                a.r#type
            )),
        }
    }

    pub fn int(&self, name: &str, default: i64) -> Result<i64, String> {
        Ok(self
            .typed(name, attribute_type::INT, "INT")?
            .map_or(default, |a| a.i))
    }

    pub fn opt_int(&self, name: &str) -> Result<Option<i64>, String> {
        Ok(self.typed(name, attribute_type::INT, "INT")?.map(|a| a.i))
    }

    pub fn float(&self, name: &str, default: f32) -> Result<f32, String> {
        Ok(self
            .typed(name, attribute_type::FLOAT, "FLOAT")?
            .map_or(default, |a| a.f))
    }

    pub fn opt_float(&self, name: &str) -> Result<Option<f32>, String> {
        Ok(self
            .typed(name, attribute_type::FLOAT, "FLOAT")?
            .map(|a| a.f))
    }

    pub fn ints(&self, name: &str) -> Result<Option<Vec<i64>>, String> {
        Ok(self
            .typed(name, attribute_type::INTS, "INTS")?
            .map(|a| a.ints.clone()))
    }

    pub fn floats(&self, name: &str) -> Result<Option<Vec<f32>>, String> {
        Ok(self
            .typed(name, attribute_type::FLOATS, "FLOATS")?
            .map(|a| a.floats.clone()))
    }

    pub fn string(&self, name: &str) -> Result<Option<String>, String> {
        self.typed(name, attribute_type::STRING, "STRING")?
            .map(|a| {
                String::from_utf8(a.s.clone())
                    .map_err(|_| format!("attribute '{name}' is not UTF-8"))
            })
            .transpose()
    }

    pub fn tensor(&self, name: &str) -> Result<Option<Tensor>, String> {
        match self.typed(name, attribute_type::TENSOR, "TENSOR")? {
            None => Ok(None),
            Some(a) => match &a.t {
                None => Err(format!("attribute '{name}' has no tensor")),
                Some(t) => crate::onnx::tensor_from_proto(t).map(Some),
            },
        }
    }

    /// Refuses an attribute whose presence changes semantics the op does not implement.
    pub fn refuse(&self, name: &str, why: &str) -> Result<(), String> {
        if self.attr(name).is_some() {
            Err(format!("attribute '{name}' is not supported ({why})"))
        } else {
            Ok(())
        }
    }
}

/// Converts a list of non-negative ints.
pub fn to_usizes(v: &[i64], what: &str) -> Result<Vec<usize>, String> {
    v.iter()
        .map(|&x| usize::try_from(x).map_err(|_| format!("{what} must be non-negative, got {x}")))
        .collect()
}

/// Resolves a possibly negative axis against a rank.
pub fn axis(a: i64, rank: usize) -> Result<usize, String> {
    let r = rank as i64;
    if a < -r || a >= r {
        return Err(format!("axis {a} is out of range for rank {rank}"));
    }
    Ok(if a < 0 { (a + r) as usize } else { a as usize })
}

/// The fact of input `i`, or an error naming it.
pub fn in_fact<'a>(
    inputs: &[Option<&'a TensorInfo>],
    i: usize,
    what: &str,
) -> Result<&'a Fact, String> {
    inputs
        .get(i)
        .copied()
        .flatten()
        .map(|t| &t.fact)
        .ok_or_else(|| format!("missing input {i} ({what})"))
}

/// The constant value of input `i` if it has one.
pub fn in_const<'a>(inputs: &[Option<&'a TensorInfo>], i: usize) -> Option<&'a Tensor> {
    inputs
        .get(i)
        .copied()
        .flatten()
        .and_then(|t| t.value.as_deref())
}

/// Input tensor `i`, or an error naming it.
pub fn arg<'a>(inputs: &[Option<&'a Tensor>], i: usize, what: &str) -> Result<&'a Tensor, String> {
    inputs
        .get(i)
        .copied()
        .flatten()
        .ok_or_else(|| format!("missing input {i} ({what})"))
}

/// The ONNX op types the importer knows, with their parser.
pub fn parse(ctx: &ParseCtx) -> Result<Box<dyn Op>, String> {
    let node = ctx.node;
    if !(node.domain.is_empty() || node.domain == "ai.onnx") {
        return Err(format!(
            "operator {}::{} is not in the standard ONNX domain",
            node.domain, node.op_type
        ));
    }
    Ok(match node.op_type.as_str() {
        "Conv" => Box::new(conv::Conv::parse(ctx)?),
        "Gemm" => Box::new(gemm::Gemm::parse(ctx)?),
        "MatMul" => Box::new(matmul::MatMul),
        "Add" | "Sub" | "Mul" | "Div" => Box::new(binary::Binary::parse(ctx)?),
        "Relu" => Box::new(relu::Relu),
        "Clip" => Box::new(clip::Clip::parse(ctx)?),
        "BatchNormalization" => Box::new(batch_norm::BatchNorm::parse(ctx)?),
        "MaxPool" => Box::new(max_pool::MaxPool::parse(ctx)?),
        "AveragePool" => Box::new(average_pool::AveragePool::parse(ctx)?),
        "GlobalAveragePool" => Box::new(global_average_pool::GlobalAveragePool),
        "Flatten" => Box::new(flatten::Flatten::parse(ctx)?),
        "Reshape" => Box::new(reshape::Reshape::parse(ctx)?),
        "Softmax" => Box::new(softmax::Softmax::parse(ctx)?),
        "Concat" => Box::new(concat::Concat::parse(ctx)?),
        "QuantizeLinear" => Box::new(quantize_linear::QuantizeLinear::parse(ctx)?),
        "DequantizeLinear" => Box::new(dequantize_linear::DequantizeLinear::parse(ctx)?),
        "QLinearConv" => Box::new(qlinear_conv::QLinearConv::parse(ctx)?),
        "QLinearMatMul" => Box::new(qlinear_matmul::QLinearMatMul),
        "ConvInteger" => Box::new(conv_integer::ConvInteger::parse(ctx)?),
        "MatMulInteger" => Box::new(matmul_integer::MatMulInteger),
        "Cast" => Box::new(cast::Cast::parse(ctx)?),
        "Identity" | "Dropout" => Box::new(identity::Identity::parse(ctx)?),
        "Constant" => Box::new(constant::Constant::parse(ctx)?),
        "Shape" => Box::new(shape::Shape::parse(ctx)?),
        "Gather" => Box::new(gather::Gather::parse(ctx)?),
        "Squeeze" | "Unsqueeze" => Box::new(squeeze::Squeeze::parse(ctx)?),
        "Transpose" => Box::new(transpose::Transpose::parse(ctx)?),
        other => return Err(format!("operator {other} is not supported by the importer")),
    })
}
