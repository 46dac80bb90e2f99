//! What the importer does with nodes it cannot import, so that a model that does not compile
//! gets the whole picture at once: the output facts such a node must have (from the model's
//! own `value_info`, its outputs, the known signature of onnxruntime's contrib operators, the
//! definition of standard element-wise operators, or the op's own shape inference without the
//! attributes that only change values), so that the analysis of every later node goes on;
//! and for every unsupported node, what would make it compile.

use std::collections::HashMap;

use crate::graph::{DType, Fact};
use crate::onnx::proto::{GraphProto, NodeProto, ValueInfoProto};

/// The static fact of a value's declared type, if it is a tensor of a supported type with a
/// fully known shape (a symbolic first dimension, the batch, counts as 1).
fn declared_fact(v: &ValueInfoProto) -> Option<Fact> {
    let tt = v.r#type.as_ref()?.tensor_type.as_ref()?;
    let dtype = crate::onnx::ir_dtype(tt.elem_type).ok()?;
    let mut dims = Vec::new();
    for (i, d) in tt.shape.as_ref()?.dim.iter().enumerate() {
        match d.dim_value {
            Some(n) if n > 0 => dims.push(n as usize),
            _ if i == 0 => dims.push(1),
            _ => return None,
        }
    }
    Some(Fact::new(dtype, dims))
}

/// Facts the model declares for its intermediate values and outputs (`value_info`, written by
/// ONNX's shape inference and most exporters).
pub fn declared_facts(g: &GraphProto) -> HashMap<String, Fact> {
    g.value_info
        .iter()
        .chain(&g.output)
        .filter_map(|v| Some((v.name.clone(), declared_fact(v)?)))
        .collect()
}

/// Output facts of the common onnxruntime contrib operators (domain `com.microsoft`), from
/// their input facts: the quantized element-wise ops keep their first input's shape (the
/// output type is the type of the output zero point, input 7 or 4), the pools and QGemm
/// compute theirs.
pub fn contrib_facts(node: &NodeProto, ins: &[Option<Fact>]) -> Option<Vec<Fact>> {
    if node.domain != "com.microsoft" {
        return None;
    }
    let first = ins.first()?.as_ref()?;
    let typed = |zp: usize| {
        ins.get(zp)
            .and_then(|f| f.as_ref())
            .map_or(first.dtype, |f| f.dtype)
    };
    let attr = |name: &str| node.attribute.iter().find(|a| a.name == name).map(|a| a.i);
    let fact = match node.op_type.as_str() {
        "QLinearAdd" | "QLinearMul" => {
            let b = ins.get(3)?.as_ref()?;
            let shape = vta_runtime::ops::kernels::broadcast_shapes(&first.shape, &b.shape).ok()?;
            Fact::new(typed(7), shape)
        }
        "QLinearSigmoid" | "QLinearLeakyRelu" | "QLinearSoftmax" => {
            Fact::new(typed(4), first.shape.clone())
        }
        "QLinearGlobalAveragePool" => {
            let mut s = first.shape.clone();
            if attr("channels_last") == Some(1) {
                let r = s.len();
                s[1..r - 1].iter_mut().for_each(|d| *d = 1);
            } else {
                s[2..].iter_mut().for_each(|d| *d = 1);
            }
            Fact::new(typed(4), s)
        }
        "QLinearConcat" => {
            // Inputs: y_scale, y_zero_point, then (x, x_scale, x_zero_point) triples.
            let axis = attr("axis")?;
            let xs: Vec<&Fact> = ins
                .iter()
                .skip(2)
                .step_by(3)
                .map(|f| f.as_ref())
                .collect::<Option<_>>()?;
            let x0 = xs.first()?;
            let a = vta_runtime::ops::axis(axis, x0.rank()).ok()?;
            let mut s = x0.shape.clone();
            s[a] = xs
                .iter()
                .map(|f| f.shape.get(a).copied())
                .sum::<Option<usize>>()?;
            Fact::new(x0.dtype, s)
        }
        "QGemm" => {
            let b = ins.get(3)?.as_ref()?;
            let (ta, tb) = (attr("transA") == Some(1), attr("transB") == Some(1));
            let m = if ta {
                first.shape.get(1)?
            } else {
                first.shape.first()?
            };
            let n = if tb {
                b.shape.first()?
            } else {
                b.shape.get(1)?
            };
            let dtype = if ins.len() > 7 { typed(7) } else { DType::F32 };
            Fact::new(dtype, [*m, *n])
        }
        _ => return None,
    };
    Some(vec![fact])
}

/// Output facts of standard ONNX operators the importer does not take but whose output has
/// their first input's type and shape by definition (element-wise functions and
/// normalizations), so that the nodes after them are analysed too.
pub fn standard_facts(node: &NodeProto, ins: &[Option<Fact>]) -> Option<Vec<Fact>> {
    const SAME_AS_INPUT: &[&str] = &[
        "Abs",
        "Acos",
        "Acosh",
        "Asin",
        "Asinh",
        "Atan",
        "Atanh",
        "Celu",
        "Cos",
        "Cosh",
        "Elu",
        "Hardmax",
        "InstanceNormalization",
        "IsInf",
        "IsNaN",
        "LogSoftmax",
        "Log",
        "LpNormalization",
        "MeanVarianceNormalization",
        "Neg",
        "Reciprocal",
        "Selu",
        "Shrink",
        "Sign",
        "Sin",
        "Sinh",
        "Softsign",
        "Tan",
        "ThresholdedRelu",
    ];
    if !(node.domain.is_empty() || node.domain == "ai.onnx")
        || !SAME_AS_INPUT.contains(&node.op_type.as_str())
    {
        return None;
    }
    let x = ins.first()?.as_ref()?;
    // IsInf and IsNaN answer in bool, which the IR holds as uint8.
    let dtype = if node.op_type.starts_with("Is") {
        DType::U8
    } else {
        x.dtype
    };
    Some(vec![Fact::new(dtype, x.shape.clone())])
}

/// The node without the attributes that choose how its output values are computed but not
/// its output shape, for ops the importer takes with other values of them: a Resize's
/// interpolation and coordinate mapping (values the importer does not know).
pub fn shape_only_node(node: &NodeProto) -> Option<NodeProto> {
    const VALUES_ONLY: &[&str] = &[
        "mode",
        "antialias",
        "cubic_coeff_a",
        "exclude_outside",
        "extrapolation_value",
        "coordinate_transformation_mode",
        "nearest_mode",
    ];
    if !(node.domain.is_empty() || node.domain == "ai.onnx") || node.op_type != "Resize" {
        return None;
    }
    let mut n = node.clone();
    n.attribute
        .retain(|a| !VALUES_ONLY.contains(&a.name.as_str()));
    Some(n)
}

/// What would make an unsupported node compile, from its op and the reason it was refused.
pub fn fix_for(node: &NodeProto, reason: &str) -> String {
    let op = node.op_type.as_str();
    if node.domain == "com.microsoft" {
        return format!(
            "{op} is an onnxruntime contrib operator in a form the importer does not expand \
             (it expands QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu, \
             QLinearConcat, QLinearGlobalAveragePool and QLinearAveragePool in NCHW, \
             QLinearSoftmax with an `opset` attribute on the model's side of opset 13, and QGemm \
             with constant scales): quantize with quant_format=QuantFormat.QDQ (standard QuantizeLinear/DequantizeLinear around \
             float operators, which the compiler imports), or keep this part in float"
        );
    }
    if crate::onnx::lowbit::QONNX_DOMAINS.contains(&node.domain.as_str()) {
        return format!(
            "QONNX's {op} is not imported (Quant, IntQuant and BipolarQuant are, rewritten into \
             QuantizeLinear/DequantizeLinear): lower it with qonnx first (e.g. its \
             QuantToQCDQ for Quant; Trunc, FloatQuant and MultiThreshold have no integer QDQ \
             form the importer takes), or keep this part in float"
        );
    }
    if !(node.domain.is_empty() || node.domain == "ai.onnx") {
        return format!(
            "a custom operator of domain '{}': export the model with standard ONNX operators",
            node.domain
        );
    }
    if op == "NonMaxSuppression" {
        // Its output has as many rows as boxes survive, known only from the data; a
        // compiled model's tensors all have shapes fixed at compile time.
        return "NonMaxSuppression's output length depends on the scores, and compiled models \
                have static shapes: export the detector without it (ending at the boxes and \
                scores, or at a TopK of the scores) and run the suppression on the host"
            .into();
    }
    if reason.contains("is not supported by the importer") {
        return format!(
            "{op} is not implemented: export the model with the operators of the user guide's \
             operator table (docs/src/compiling/operators.md; an equivalent decomposition), or \
             open an issue naming {op}"
        );
    }
    if reason.contains("computed at run time")
        || reason.contains("is not a constant")
        || reason.contains("must be a constant")
    {
        // The importer folds computations on static shapes itself; what remains depends on
        // run-time values or on a symbolic dimension.
        return "make it a constant: fix every input shape (export with static shapes, or give                 --input-shape), so that the shape computation feeding it folds at load time; a                 value computed from run-time data cannot set a shape"
            .into();
    }
    if reason.contains("dynamic") {
        return "fix the input shapes when exporting (only the batch dimension may be symbolic)"
            .into();
    }
    if reason.contains("attribute") || reason.contains("mode") || reason.contains("antialias") {
        return format!(
            "export {op} with supported attribute values (see the reason), or an equivalent \
             decomposition"
        );
    }
    if reason.contains("constant folding failed") {
        return "the constant sub-graph cannot be evaluated: check its values".into();
    }
    format!("change {op} so that the reason no longer applies")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_max_suppression_says_to_run_it_on_the_host() {
        let node = NodeProto {
            op_type: "NonMaxSuppression".into(),
            ..Default::default()
        };
        let fix = fix_for(&node, "NonMaxSuppression is not supported by the importer");
        assert!(
            fix.contains("static shapes") && fix.contains("on the host"),
            "{fix}"
        );
    }

    #[test]
    fn contrib_elementwise_ops_keep_their_shape() {
        let node = NodeProto {
            op_type: "QLinearSigmoid".into(),
            domain: "com.microsoft".into(),
            ..Default::default()
        };
        let x = Fact::new(DType::U8, [1, 8, 4, 4]);
        let f = contrib_facts(&node, &[Some(x.clone()), None, None, None, None]).unwrap();
        assert_eq!(f, vec![x]);
        let node = NodeProto {
            op_type: "QLinearGlobalAveragePool".into(),
            ..node
        };
        let x = Fact::new(DType::I8, [1, 8, 4, 4]);
        let f = contrib_facts(&node, &[Some(x), None, None, None, None]).unwrap();
        assert_eq!(f[0].shape, [1, 8, 1, 1]);
        assert!(fix_for(&node, "").contains("QuantFormat.QDQ"));
    }
}
