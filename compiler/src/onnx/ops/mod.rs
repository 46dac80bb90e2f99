//! Operators of the graph IR: the ops themselves (facts, ONNX semantics) are
//! `vta_runtime::ops`; this module parses them from ONNX nodes ([`FromOnnx`], one file per op
//! kind) and knows which ONNX op types the importer takes ([`parse`]).

use crate::graph::Tensor;
use crate::onnx::proto::{attribute_type, AttributeProto, NodeProto};

pub use vta_runtime::ops::{arg, axis, in_const, in_fact, to_usizes, Activation, Op, TensorInfo};
/// Ops with no ONNX attributes: nothing to parse.
pub use vta_runtime::ops::{
    dynamic_quantize_linear, expand, global_average_pool, internal, matmul, matmul_integer,
    qlinear_matmul, range, relu, size, tile, where_op,
};

pub mod average_pool;
pub mod batch_norm;
pub mod binary;
pub mod cast;
pub mod clip;
pub mod compare;
pub mod concat;
pub mod constant;
pub mod constant_of_shape;
pub mod conv;
pub mod conv_integer;
pub mod conv_transpose;
pub mod depth_space;
pub mod dequantize_linear;
pub mod flatten;
pub mod gather;
pub mod gemm;
pub mod identity;
pub mod kernels;
pub mod logic;
pub mod max_pool;
pub mod pad;
pub mod prelu;
pub mod qlinear_conv;
pub mod quantize_linear;
pub mod reduce_mean;
pub mod reshape;
pub mod resize;
pub mod rnn;
pub mod shape;
pub mod slice;
pub mod softmax;
pub mod split;
pub mod squeeze;
pub mod top_k;
pub mod transpose;
pub mod unary;

/// An op parsed from the attributes of an ONNX node.
pub trait FromOnnx: Sized {
    fn parse(ctx: &ParseCtx) -> Result<Self, String>;
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

    pub fn strings(&self, name: &str) -> Result<Option<Vec<String>>, String> {
        self.typed(name, attribute_type::STRINGS, "STRINGS")?
            .map(|a| {
                a.strings
                    .iter()
                    .map(|s| {
                        String::from_utf8(s.clone())
                            .map_err(|_| format!("attribute '{name}' is not UTF-8"))
                    })
                    .collect()
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

/// The ONNX op types the importer knows, with their parser.
pub fn parse(ctx: &ParseCtx) -> Result<Box<dyn Op>, String> {
    let node = ctx.node;
    // The one contrib operator that is not expanded into standard ones (see
    // `crate::onnx::contrib`): an LSTM with onnxruntime's dynamically quantized weights.
    if node.domain == "com.microsoft" && node.op_type == "DynamicQuantizeLSTM" {
        return Ok(Box::new(rnn::Recurrent::parse(ctx)?));
    }
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
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Max" | "Min" | "Mod" => {
            Box::new(binary::Binary::parse(ctx)?)
        }
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
        "RNN" | "GRU" | "LSTM" => Box::new(rnn::Recurrent::parse(ctx)?),
        "DynamicQuantizeLinear" => Box::new(dynamic_quantize_linear::DynamicQuantizeLinear),
        // The IR holds bools as uint8 0/1, so a cast to bool is `x != 0`.
        "Cast" if ctx.int("to", 0)? == i64::from(crate::onnx::proto::data_type::BOOL) => {
            Box::new(compare::Compare {
                kind: compare::CompareKind::NonZero,
            })
        }
        "Cast" => Box::new(cast::Cast::parse(ctx)?),
        "Identity" | "Dropout" => Box::new(identity::Identity::parse(ctx)?),
        "Constant" => Box::new(constant::Constant::parse(ctx)?),
        "Shape" => Box::new(shape::Shape::parse(ctx)?),
        "Gather" => Box::new(gather::Gather::parse(ctx)?),
        "Squeeze" | "Unsqueeze" => Box::new(squeeze::Squeeze::parse(ctx)?),
        "Transpose" => Box::new(transpose::Transpose::parse(ctx)?),
        "Sigmoid" | "HardSigmoid" | "HardSwish" | "Tanh" | "LeakyRelu" | "Erf" | "Exp" | "Gelu"
        | "Softplus" | "Mish" | "Sqrt" | "Floor" | "Ceil" | "Round" => {
            Box::new(unary::Unary::parse(ctx)?)
        }
        "PRelu" => Box::new(prelu::PRelu),
        "Resize" | "Upsample" => Box::new(resize::Resize::parse(ctx)?),
        "ConvTranspose" => Box::new(conv_transpose::ConvTranspose::parse(ctx)?),
        "Split" => Box::new(split::Split::parse(ctx)?),
        "Slice" => Box::new(slice::Slice::parse(ctx)?),
        "Pad" => Box::new(pad::Pad::parse(ctx)?),
        "ReduceMean" => Box::new(reduce_mean::ReduceMean::parse(ctx)?),
        "Size" => Box::new(size::Size),
        "Range" => Box::new(range::Range),
        "ConstantOfShape" => Box::new(constant_of_shape::ConstantOfShape::parse(ctx)?),
        "Expand" => Box::new(expand::Expand),
        "Tile" => Box::new(tile::Tile),
        "Where" => Box::new(where_op::Where),
        "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual" => {
            Box::new(compare::Compare::parse(ctx)?)
        }
        "SpaceToDepth" | "DepthToSpace" => Box::new(depth_space::DepthSpace::parse(ctx)?),
        "Not" | "And" | "Or" | "Xor" => Box::new(logic::Logic::parse(ctx)?),
        "TopK" => Box::new(top_k::TopK::parse(ctx)?),
        other => return Err(format!("operator {other} is not supported by the importer")),
    })
}
