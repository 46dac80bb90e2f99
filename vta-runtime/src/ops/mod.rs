//! Operators, one file per ONNX op kind (tract-style): each infers its output facts (type and
//! static shape) from its input facts and evaluates itself on tensors with ONNX's semantics
//! (float ops in f32, integer ops exactly). The compiler's graph IR holds them and parses them
//! from ONNX nodes; a compiled model's CPU steps run them.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::tensor::{Fact, Tensor};

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
pub mod dynamic_quantize_linear;
pub mod expand;
pub mod flatten;
pub mod gather;
pub mod gemm;
pub mod global_average_pool;
pub mod identity;
pub mod internal;
pub mod kernels;
pub mod logic;
pub mod matmul;
pub mod matmul_integer;
pub mod max_pool;
pub mod pad;
pub mod prelu;
pub mod qlinear_conv;
pub mod qlinear_matmul;
pub mod quantize_linear;
pub mod range;
pub mod reduce_mean;
pub mod relu;
pub mod reshape;
pub mod resize;
pub mod rnn;
pub mod shape;
pub mod size;
pub mod slice;
pub mod softmax;
pub mod split;
pub mod squeeze;
pub mod tile;
pub mod top_k;
pub mod transpose;
pub mod unary;
pub mod where_op;

/// What an op's shape inference sees of an input tensor: its name, static fact and constant
/// value (if any).
#[derive(Debug, Clone)]
pub struct TensorInfo {
    pub name: String,
    pub fact: Fact,
    pub value: Option<Arc<Tensor>>,
}

/// Declares [`AnyOp`], one variant per op type, with `From` for each and dispatch to [`Op`].
macro_rules! any_op {
    ($($variant:ident($ty:path)),* $(,)?) => {
        /// Any op, as a value: what a compiled model stores for a CPU step (serializable,
        /// unlike `Box<dyn Op>`).
        #[derive(serde::Serialize, serde::Deserialize, Debug, Clone)]
        pub enum AnyOp {
            $($variant($ty)),*
        }

        impl AnyOp {
            /// The op, to evaluate or describe.
            pub fn op(&self) -> &dyn Op {
                match self {
                    $(AnyOp::$variant(o) => o),*
                }
            }
        }

        $(impl From<$ty> for AnyOp {
            fn from(o: $ty) -> AnyOp {
                AnyOp::$variant(o)
            }
        })*
    };
}

any_op! {
    AveragePool(average_pool::AveragePool),
    BatchNorm(batch_norm::BatchNorm),
    Binary(binary::Binary),
    Cast(cast::Cast),
    Clip(clip::Clip),
    Concat(concat::Concat),
    Constant(constant::Constant),
    Conv(conv::Conv),
    ConvInteger(conv_integer::ConvInteger),
    DequantizeLinear(dequantize_linear::DequantizeLinear),
    Flatten(flatten::Flatten),
    Gather(gather::Gather),
    Gemm(gemm::Gemm),
    GlobalAveragePool(global_average_pool::GlobalAveragePool),
    Identity(identity::Identity),
    U8ToI8(internal::U8ToI8),
    I8ToU8(internal::I8ToU8),
    MatMul(matmul::MatMul),
    MatMulInteger(matmul_integer::MatMulInteger),
    MaxPool(max_pool::MaxPool),
    QLinearConv(qlinear_conv::QLinearConv),
    QLinearMatMul(qlinear_matmul::QLinearMatMul),
    QuantizeLinear(quantize_linear::QuantizeLinear),
    Relu(relu::Relu),
    Reshape(reshape::Reshape),
    Shape(shape::Shape),
    Softmax(softmax::Softmax),
    Squeeze(squeeze::Squeeze),
    Transpose(transpose::Transpose),
    Unary(unary::Unary),
    PRelu(prelu::PRelu),
    Resize(resize::Resize),
    ConvTranspose(conv_transpose::ConvTranspose),
    Split(split::Split),
    Slice(slice::Slice),
    Pad(pad::Pad),
    InsertZeros(internal::InsertZeros),
    ReduceMean(reduce_mean::ReduceMean),
    Size(size::Size),
    Range(range::Range),
    ConstantOfShape(constant_of_shape::ConstantOfShape),
    Expand(expand::Expand),
    Tile(tile::Tile),
    Compare(compare::Compare),
    Where(where_op::Where),
    DepthSpace(depth_space::DepthSpace),
    Logic(logic::Logic),
    I8Offset(internal::I8Offset),
    DynamicQuantizeLinear(dynamic_quantize_linear::DynamicQuantizeLinear),
    Recurrent(rnn::Recurrent),
    TopK(top_k::TopK),
}

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

    /// The op as a value of [`AnyOp`] (for a compiled model's CPU steps).
    fn to_any(&self) -> AnyOp;

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
        fn box_clone(&self) -> Box<dyn crate::ops::Op> {
            Box::new(self.clone())
        }
        fn to_any(&self) -> crate::ops::AnyOp {
            crate::ops::AnyOp::from(self.clone())
        }
    };
}
pub(crate) use op_boilerplate;

/// The clamp of a fused activation (`Relu` is `[0, +inf]`, `Clip(a, b)` is `[a, b]`).
#[derive(serde::Serialize, serde::Deserialize, Debug, Clone, Copy, PartialEq)]
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
        // NaN-preserving clamp, as Relu/Clip do; the upper bound last, so that bounds with
        // min > max give max everywhere (ONNX's Clip, numpy's clip).
        let v = if v < self.min { self.min } else { v };
        if v > self.max {
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

#[cfg(test)]
mod tests {
    use super::Activation;

    #[test]
    fn a_clamp_with_min_above_max_gives_max() {
        let a = Activation { min: 2.0, max: 1.0 };
        assert_eq!([0.0, 1.5, 3.0].map(|v| a.apply(v)), [1.0; 3]);
        assert!(a.apply(f32::NAN).is_nan());
    }
}
