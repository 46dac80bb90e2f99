//! Import of low-bit quantized models: before parsing, the forms of sub-8-bit quantization
//! the IR has no op for are rewritten into standard QDQ on int8/uint8 tensors, exactly.
//!
//! - ONNX `QuantizeLinear` to int4/uint4 (opset 21) or int2/uint2 (opset 25): the same
//!   quantization to int8/uint8 followed by an integer `Clip` to the narrow type's range
//!   (`saturate_int4(v) = clamp(saturate_int8(v), -8, 7)`). Tensors of those types are held in
//!   int8/uint8 storage ([`super::ir_dtype`]), so `DequantizeLinear` needs no rewrite.
//! - QONNX `Quant` / `IntQuant` (domains `qonnx.custom_op.general`, `finn.custom_op.general`,
//!   Brevitas's `onnx.brevitas`) and `BipolarQuant`: on a constant (weights) the op is
//!   evaluated here with qonnx's exact arithmetic (`x / scale + zeropt` in f32, clamp, the
//!   node's rounding mode) into an int8/uint8 constant and a `DequantizeLinear`; on a run-time
//!   tensor it becomes Brevitas's QCDQ form, `QuantizeLinear -> Clip -> DequantizeLinear`,
//!   which is the same function when the zero point is 0 and the rounding is ROUND (half to
//!   even); anything else is refused with the reason.
//!
//! The graph's simplification then fuses each integer Clip into its QuantizeLinear as a
//! narrower saturation range ([`crate::graph::passes::fuse_clip_into_quantize`]), which is
//! how the lowering learns the width (the int8 form of a Brevitas QCDQ export goes the same
//! way without any rewrite).

use std::collections::{HashMap, HashSet};

use ndarray::{ArrayD, IxDyn};

use super::proto::{attribute_type, data_type, AttributeProto, GraphProto, NodeProto, TensorProto};
use super::tensor_from_proto;
use crate::graph::Tensor;

/// The domains in which QONNX's quantization operators are found.
pub const QONNX_DOMAINS: [&str; 3] = [
    "qonnx.custom_op.general",
    "finn.custom_op.general",
    "onnx.brevitas",
];

/// Whether `node` is a QONNX quantization operator the importer rewrites.
pub fn is_qonnx_quant(node: &NodeProto) -> bool {
    QONNX_DOMAINS.contains(&node.domain.as_str())
        && matches!(node.op_type.as_str(), "Quant" | "IntQuant" | "BipolarQuant")
}

/// The graph with low-bit quantization rewritten (see the module doc), or `None` if it has
/// none. An error names the node that cannot be imported exactly and says how to fix it.
pub fn rewrite(g: &GraphProto, opset: i64) -> Result<Option<GraphProto>, String> {
    let types = elem_types(g);
    let needs = g
        .node
        .iter()
        .any(|n| is_qonnx_quant(n) || low_bit_quantize(n, &types).is_some());
    if !needs {
        return Ok(None);
    }
    let mut rw = Rewriter::new(g);
    let mut nodes = Vec::with_capacity(g.node.len());
    for (i, n) in g.node.iter().enumerate() {
        let name = if n.name.is_empty() {
            format!("{}_{i}", n.op_type)
        } else {
            n.name.clone()
        };
        let why = |m: String| format!("node '{name}' ({}): {m}", n.op_type);
        if is_qonnx_quant(n) {
            if opset < 11 {
                return Err(why(format!(
                    "its rewrite uses Clip with bound inputs, which needs ai.onnx opset 11 or \
                     later (the model imports {opset}); re-export the model at opset 13"
                )));
            }
            nodes.extend(rw.qonnx(n, &name).map_err(why)?);
        } else if let Some((signed, bits)) = low_bit_quantize(n, &types) {
            nodes.extend(rw.narrow_quantize(n, &name, signed, bits));
        } else {
            nodes.push(n.clone());
        }
    }
    let mut out = g.clone();
    out.node = nodes;
    out.initializer.extend(rw.new_inits);
    Ok(Some(out))
}

/// The element type of every tensor whose type the graph states: initializers, inputs,
/// value_info and outputs, `Constant` values.
fn elem_types(g: &GraphProto) -> HashMap<&str, i32> {
    let mut m = HashMap::new();
    for v in g.input.iter().chain(&g.value_info).chain(&g.output) {
        if let Some(tt) = v.r#type.as_ref().and_then(|t| t.tensor_type.as_ref()) {
            m.insert(v.name.as_str(), tt.elem_type);
        }
    }
    for t in &g.initializer {
        m.insert(t.name.as_str(), t.data_type);
    }
    for (o, t) in constant_values(g) {
        m.insert(o, t.data_type);
    }
    m
}

/// The tensor each `Constant` node of `g` writes, by its output's name.
fn constant_values(g: &GraphProto) -> impl Iterator<Item = (&str, &TensorProto)> {
    g.node
        .iter()
        .filter(|n| n.op_type == "Constant")
        .filter_map(|n| {
            let t = n
                .attribute
                .iter()
                .find(|a| a.name == "value")
                .and_then(|a| a.t.as_ref())?;
            Some((n.output.first()?.as_str(), t))
        })
}

/// (signed, bits) of a standard `QuantizeLinear` whose output type is int4/uint4/int2/uint2
/// (its `output_dtype`, else its zero point's type).
fn low_bit_quantize(n: &NodeProto, types: &HashMap<&str, i32>) -> Option<(bool, u32)> {
    if n.op_type != "QuantizeLinear" || !(n.domain.is_empty() || n.domain == "ai.onnx") {
        return None;
    }
    let attr = n
        .attribute
        .iter()
        .find(|a| a.name == "output_dtype")
        .map_or(0, |a| a.i as i32);
    let ty = if attr != 0 {
        attr
    } else {
        let zp = n.input.get(2).filter(|s| !s.is_empty())?;
        *types.get(zp.as_str())?
    };
    data_type::sub_byte(ty)
}

struct Rewriter<'g> {
    /// Constant tensors by name (initializers and `Constant` values).
    consts: HashMap<&'g str, &'g TensorProto>,
    names: HashSet<String>,
    new_inits: Vec<TensorProto>,
}

/// A QONNX node's quantization parameters, read from its constant inputs.
struct QonnxParams {
    /// One scale per channel along `axis` (one in all when `axis` is `None`).
    scale: Vec<f32>,
    zeropt: Vec<f32>,
    /// The axis the parameters vary along, counted from the end (numpy broadcasting).
    axis: Option<i64>,
}

impl<'g> Rewriter<'g> {
    fn new(g: &'g GraphProto) -> Rewriter<'g> {
        let consts: HashMap<&str, &TensorProto> = g
            .initializer
            .iter()
            .map(|t| (t.name.as_str(), t))
            .chain(constant_values(g))
            .collect();
        let mut names: HashSet<String> = g.initializer.iter().map(|t| t.name.clone()).collect();
        names.extend(g.input.iter().map(|v| v.name.clone()));
        for n in &g.node {
            names.extend(n.output.iter().cloned());
            names.insert(n.name.clone());
        }
        Rewriter {
            consts,
            names,
            new_inits: Vec::new(),
        }
    }

    /// A tensor or node name not used in the graph yet, from `base`.
    fn fresh(&mut self, base: String) -> String {
        let mut name = base.clone();
        let mut k = 1;
        while self.names.contains(&name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        self.names.insert(name.clone());
        name
    }

    /// Adds an initializer (int8 or uint8 `dtype`, or float) and returns its name.
    fn init(&mut self, base: String, t: &Tensor) -> String {
        let name = self.fresh(base);
        self.new_inits.push(super::tensor_to_proto(&name, t));
        name
    }

    fn int_tensor(signed: bool, shape: &[usize], v: Vec<i32>) -> Tensor {
        let s = IxDyn(shape);
        if signed {
            Tensor::I8(
                ArrayD::from_shape_vec(s, v.iter().map(|&x| x as i8).collect()).expect("shape"),
            )
        } else {
            Tensor::U8(
                ArrayD::from_shape_vec(s, v.iter().map(|&x| x as u8).collect()).expect("shape"),
            )
        }
    }

    /// An integer Clip to `[lo, hi]` of `input` (int8 or uint8 per `signed`) into `output`.
    fn clip(
        &mut self,
        name: String,
        input: String,
        output: String,
        signed: bool,
        (lo, hi): (i32, i32),
    ) -> NodeProto {
        let min = self.init(
            format!("{output}.min"),
            &Self::int_tensor(signed, &[], vec![lo]),
        );
        let max = self.init(
            format!("{output}.max"),
            &Self::int_tensor(signed, &[], vec![hi]),
        );
        NodeProto {
            input: vec![input, min, max],
            output: vec![output],
            name,
            op_type: "Clip".into(),
            ..Default::default()
        }
    }

    /// `QuantizeLinear` to a sub-byte type: the same to int8/uint8, then a Clip to the
    /// type's range (the zero point keeps its values, now in 8-bit storage).
    fn narrow_quantize(
        &mut self,
        n: &NodeProto,
        name: &str,
        signed: bool,
        bits: u32,
    ) -> Vec<NodeProto> {
        let code = match (signed, bits) {
            (true, 4) => data_type::INT4,
            (false, 4) => data_type::UINT4,
            (true, _) => data_type::INT2,
            (false, _) => data_type::UINT2,
        };
        let range = data_type::int_range(code).expect("a sub-byte type");
        let storage = if signed {
            data_type::INT8
        } else {
            data_type::UINT8
        };
        let out = n.output.first().cloned().unwrap_or_default();
        let wide = self.fresh(format!("{out}.saturated_8bit"));
        let mut q = n.clone();
        q.output = vec![wide.clone()];
        for a in q.attribute.iter_mut().filter(|a| a.name == "output_dtype") {
            a.i = i64::from(storage);
        }
        let cname = self.fresh(format!("{name}.{}_range", data_type::name(code)));
        let clip = self.clip(cname, wide, out, signed, range);
        vec![q, clip]
    }

    fn constant(&self, n: &NodeProto, k: usize, what: &str) -> Result<Tensor, String> {
        let name = n
            .input
            .get(k)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| format!("it has no {what} input (input {k})"))?;
        let t = self.consts.get(name.as_str()).ok_or_else(|| {
            format!(
                "its {what} '{name}' is computed at run time; the importer needs it as a \
                 constant (an initializer): fold the graph's constants first (e.g. qonnx's \
                 FoldConstants)"
            )
        })?;
        tensor_from_proto(t)
    }

    fn floats(t: &Tensor) -> Vec<f32> {
        t.to_f64_vec().into_iter().map(|v| v as f32).collect()
    }

    /// Scale and zero point of a QONNX node: scalars, or tensors broadcast along one axis.
    fn params(scale: &Tensor, zeropt: Option<&Tensor>) -> Result<QonnxParams, String> {
        let s = Self::floats(scale);
        if let Some(v) = s.iter().find(|v| !(v.is_finite() && **v > 0.0)) {
            return Err(format!(
                "its scale has the value {v}; scales must be positive and finite"
            ));
        }
        let axis_of = |shape: &[usize], what: &str| -> Result<Option<i64>, String> {
            let big: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] > 1).collect();
            match big.as_slice() {
                [] => Ok(None),
                [d] => Ok(Some(*d as i64 - shape.len() as i64)),
                _ => Err(format!(
                    "its {what} of shape {shape:?} varies along more than one axis; only \
                     per-tensor and per-channel quantization is supported"
                )),
            }
        };
        let axis = axis_of(scale.shape(), "scale")?;
        let z = match zeropt {
            None => vec![0.0; s.len()],
            Some(z) => {
                let zv = Self::floats(z);
                if let Some(v) = zv.iter().find(|v| v.fract() != 0.0 || !v.is_finite()) {
                    return Err(format!(
                        "its zero point has the value {v}; QuantizeLinear needs integer zero \
                         points"
                    ));
                }
                if zv.len() == s.len()
                    && (zv.len() == 1 || axis_of(z.shape(), "zero point")? == axis)
                {
                    zv
                } else if zv.len() == 1 {
                    vec![zv[0]; s.len()]
                } else {
                    return Err(format!(
                        "its zero point of shape {:?} does not match its scale of shape {:?}",
                        z.shape(),
                        scale.shape()
                    ));
                }
            }
        };
        Ok(QonnxParams {
            scale: s,
            zeropt: z,
            axis,
        })
    }

    /// `Quant`/`IntQuant`/`BipolarQuant` (see the module doc).
    fn qonnx(&mut self, n: &NodeProto, name: &str) -> Result<Vec<NodeProto>, String> {
        let out = n.output.first().cloned().ok_or("it has no output")?;
        let bipolar_op = n.op_type == "BipolarQuant";
        let scale = self.constant(n, 1, "scale")?;
        let (zeropt, bits, signed, narrow, mode) = if bipolar_op {
            (None, 1, true, false, "ROUND".to_string())
        } else {
            let zeropt = self.constant(n, 2, "zero point")?;
            let bw = self.constant(n, 3, "bit width")?;
            let b = Self::floats(&bw);
            let bits = match b.as_slice() {
                [b] if b.fract() == 0.0 && (1.0..=8.0).contains(b) => *b as u32,
                [b] if b.fract() == 0.0 && *b > 8.0 => {
                    return Err(format!(
                        "its bit width is {b}; the accelerator's lanes and the IR's quantized \
                         tensors are at most 8 bits wide: quantize this tensor to 8 bits or \
                         fewer (Brevitas: bit_width=8)"
                    ))
                }
                [b] => {
                    return Err(format!(
                        "its bit width is {b}; only integer bit widths from 1 to 8 are \
                         supported (a fractional or learned bit width has no integer type)"
                    ))
                }
                _ => {
                    return Err(format!(
                        "its bit width has {} values; it must be a scalar",
                        b.len()
                    ))
                }
            };
            let attr_int =
                |k: &str, d: i64| n.attribute.iter().find(|a| a.name == k).map_or(d, |a| a.i);
            let mode = n
                .attribute
                .iter()
                .find(|a| a.name == "rounding_mode")
                .map_or_else(
                    || "ROUND".to_string(),
                    |a| String::from_utf8_lossy(&a.s).to_uppercase(),
                );
            if rounding(&mode).is_none() {
                return Err(format!(
                    "its rounding_mode is '{mode}'; qonnx defines ROUND, HALF_EVEN, CEIL, \
                     FLOOR, UP, DOWN, HALF_UP and HALF_DOWN"
                ));
            }
            (
                Some(zeropt),
                bits,
                attr_int("signed", 1) != 0,
                attr_int("narrow", 0) != 0,
                mode,
            )
        };
        let p = Self::params(&scale, zeropt.as_ref())?;
        let bipolar = bits == 1 && signed;
        let range = if bipolar {
            (-1, 1)
        } else {
            qonnx_range(signed, narrow, bits)
        };
        // Unsigned values of at most 7 bits are held in int8 with zero point 0 (the same
        // function as uint8): the accelerator then takes them as they are, no shift by 128
        // and no zero point to fold into the next layer or to pad with.
        let storage_signed = signed || range.1 <= 127;
        let fits = |z: f32| {
            if storage_signed {
                (-128.0..=127.0).contains(&z)
            } else {
                (0.0..=255.0).contains(&z)
            }
        };
        if let Some(z) = p.zeropt.iter().find(|z| !fits(**z)) {
            return Err(format!(
                "its zero point {z} does not fit the {} 8-bit type of its values",
                if storage_signed { "signed" } else { "unsigned" }
            ));
        }
        let axis_attr = |axis: Option<i64>| AttributeProto {
            name: "axis".into(),
            r#type: attribute_type::INT,
            i: axis.unwrap_or(1),
            ..Default::default()
        };
        let pshape: Vec<usize> = if p.axis.is_some() {
            vec![p.scale.len()]
        } else {
            vec![]
        };
        let scale_t =
            Tensor::F32(ArrayD::from_shape_vec(IxDyn(&pshape), p.scale.clone()).expect("shape"));
        let zp_t = Self::int_tensor(
            storage_signed,
            &pshape,
            p.zeropt.iter().map(|&z| z as i32).collect(),
        );
        let scale_name = self.init(format!("{out}.scale"), &scale_t);
        let zp_name = self.init(format!("{out}.zero_point"), &zp_t);
        let x_name = n.input.first().cloned().unwrap_or_default();
        let dq = |input: String, dq_name: String| NodeProto {
            input: vec![input, scale_name.clone(), zp_name.clone()],
            output: vec![out.clone()],
            name: dq_name,
            op_type: "DequantizeLinear".into(),
            attribute: vec![axis_attr(p.axis)],
            ..Default::default()
        };
        if let Some(x) = self.consts.get(x_name.as_str()) {
            // Weights: evaluated here exactly as qonnx does.
            let x = tensor_from_proto(x)?;
            let xs = x.shape().to_vec();
            let xf = Self::floats(&x);
            if xf.iter().any(|v| v.is_nan()) {
                return Err("its constant input contains NaN, which has no quantized value".into());
            }
            let rank = xs.len() as i64;
            let axis = match p.axis {
                None => None,
                Some(a) if a + rank >= 0 && xs[(a + rank) as usize] == p.scale.len() => {
                    Some((a + rank) as usize)
                }
                Some(_) => {
                    return Err(format!(
                        "its {} scales do not broadcast over its input of shape {xs:?}",
                        p.scale.len()
                    ))
                }
            };
            let inner: usize = axis.map_or(1, |a| xs[a + 1..].iter().product());
            let round = rounding(&mode).expect("checked");
            let q: Vec<i32> = xf
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    let c = axis.map_or(0, |a| (i / inner) % xs[a]);
                    let y = v / p.scale[c] + p.zeropt[c];
                    let y = if bipolar {
                        if y >= 0.0 {
                            1.0
                        } else {
                            -1.0
                        }
                    } else {
                        round(y.clamp(range.0 as f32, range.1 as f32))
                    };
                    y as i32
                })
                .collect();
            let q_name = self.init(
                format!("{out}.quantized"),
                &Self::int_tensor(storage_signed, &xs, q),
            );
            let dq_name = self.fresh(format!("{name}.dequantize"));
            return Ok(vec![dq(q_name, dq_name)]);
        }
        // A run-time tensor: QuantizeLinear -> Clip -> DequantizeLinear.
        if bipolar {
            return Err(format!(
                "{} of a run-time tensor (a binarized activation) has no QuantizeLinear form: \
                 sign(x) is not a rounding of x / scale; only bipolar weights (constants) are \
                 supported",
                if bipolar_op {
                    "BipolarQuant"
                } else {
                    "a signed 1-bit Quant"
                }
            ));
        }
        if !matches!(mode.as_str(), "ROUND" | "HALF_EVEN") {
            return Err(format!(
                "rounding_mode {mode} on a run-time tensor: QuantizeLinear rounds half to \
                 even, so only ROUND (HALF_EVEN) can be imported there; export the activation \
                 quantizer with ROUND"
            ));
        }
        if p.zeropt.iter().any(|&z| z != 0.0) {
            return Err(
                "a non-zero zero point on a run-time tensor: qonnx rounds x / scale + zeropt \
                 (added in f32 before rounding) where QuantizeLinear rounds x / scale and adds \
                 the zero point after, which differs in rare ties; export the activation \
                 quantizer with zero point 0 (Brevitas's default)"
                    .into(),
            );
        }
        let q_out = self.fresh(format!("{out}.quantized"));
        let c_out = self.fresh(format!("{out}.clipped"));
        let q = NodeProto {
            input: vec![x_name, scale_name.clone(), zp_name.clone()],
            output: vec![q_out.clone()],
            name: self.fresh(format!("{name}.quantize")),
            op_type: "QuantizeLinear".into(),
            attribute: vec![axis_attr(p.axis)],
            ..Default::default()
        };
        let cname = self.fresh(format!("{name}.clip"));
        let clip = self.clip(cname, q_out, c_out.clone(), storage_signed, range);
        let dq_name = self.fresh(format!("{name}.dequantize"));
        Ok(vec![q, clip, dq(c_out, dq_name)])
    }
}

/// qonnx's `min_int`/`max_int`: the integers a `bits`-bit quantizer produces.
pub fn qonnx_range(signed: bool, narrow: bool, bits: u32) -> (i32, i32) {
    let half = 1i32 << (bits - 1);
    match (signed, narrow) {
        (true, true) => (-half + 1, half - 1),
        (true, false) => (-half, half - 1),
        (false, true) => (0, (1 << bits) - 2),
        (false, false) => (0, (1 << bits) - 1),
    }
}

/// qonnx's rounding functions (`resolve_rounding_mode`) by their upper-case name.
fn rounding(mode: &str) -> Option<fn(f32) -> f32> {
    Some(match mode {
        "ROUND" | "HALF_EVEN" => f32::round_ties_even,
        "CEIL" => f32::ceil,
        "FLOOR" => f32::floor,
        "UP" => |x: f32| x.signum() * x.abs().ceil(),
        "DOWN" => f32::trunc,
        "HALF_UP" => |x: f32| x.signum() * (x.abs() + 0.5).floor(),
        "HALF_DOWN" => |x: f32| x.signum() * (x.abs() - 0.5).ceil(),
        _ => return None,
    })
}
