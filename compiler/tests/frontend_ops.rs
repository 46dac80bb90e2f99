//! Per-op shape inference, graph passes (BatchNorm folding, activation fusion), and the
//! offloading of QLinearConv/QLinearMatMul with zero points against ONNX's exact semantics.

use compiler::frontend::FrontendOptions;
use compiler::graph::plan::StepKind;
use compiler::graph::{passes, DType, Fact, Graph, Layer, Support, Tensor};
use compiler::onnx::import::import;
use compiler::onnx::proto::{
    attribute_type as at, AttributeProto, Dimension, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorShapeProto, TypeProto, TypeProtoTensor, ValueInfoProto,
};
use compiler::onnx::OnnxDType;
use compiler::onnx::{decode_model, tensor_to_proto};
use compiler::quant::plan_graph;
use compiler::reference::run_plan;
use ndarray::{ArrayD, IxDyn};
use prost::Message;
use vta_runtime::budget::DEFAULT_MEMORY_BUDGET;

fn vi(name: &str, dt: DType, shape: &[usize]) -> ValueInfoProto {
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

enum A {
    I(i64),
    Is(Vec<i64>),
    F(f32),
    S(&'static str),
}

fn node(op: &str, ins: &[&str], outs: &[&str], attrs: Vec<(&str, A)>) -> NodeProto {
    NodeProto {
        op_type: op.into(),
        name: format!("{op}_node"),
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
                    A::S(s) => (p.r#type, p.s) = (at::STRING, s.as_bytes().to_vec()),
                }
                p
            })
            .collect(),
        ..Default::default()
    }
}

/// A deterministic tensor of the given type and shape.
fn tensor(dt: DType, shape: &[usize], seed: u32) -> Tensor {
    let n: usize = shape.iter().product();
    let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(12345);
    let mut next = || {
        s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        s >> 8
    };
    let sh = IxDyn(shape);
    match dt {
        DType::F32 => Tensor::F32(
            ArrayD::from_shape_vec(
                sh,
                (0..n)
                    .map(|_| (next() % 2001) as f32 / 1000.0 - 1.0)
                    .collect(),
            )
            .unwrap(),
        ),
        DType::I8 => Tensor::I8(
            ArrayD::from_shape_vec(sh, (0..n).map(|_| next() as u8 as i8).collect()).unwrap(),
        ),
        DType::U8 => {
            Tensor::U8(ArrayD::from_shape_vec(sh, (0..n).map(|_| next() as u8).collect()).unwrap())
        }
        DType::I32 => Tensor::I32(
            ArrayD::from_shape_vec(sh, (0..n).map(|_| (next() % 2001) as i32 - 1000).collect())
                .unwrap(),
        ),
        DType::I64 => Tensor::I64(
            ArrayD::from_shape_vec(sh, (0..n).map(|_| (next() % 100) as i64).collect()).unwrap(),
        ),
    }
}

fn scalar(t: Tensor) -> Tensor {
    t
}

/// A model of `nodes` with graph inputs `ins`, initializers `inits` and output `out`.
fn graph(
    nodes: Vec<NodeProto>,
    ins: Vec<ValueInfoProto>,
    inits: Vec<(&str, Tensor)>,
    out: &str,
    opset: i64,
) -> Result<Graph, String> {
    graph_shaped(nodes, ins, inits, out, opset, &[])
}

/// [`graph`] with input shapes fixed as `--input-shape` does.
fn graph_shaped(
    nodes: Vec<NodeProto>,
    ins: Vec<ValueInfoProto>,
    inits: Vec<(&str, Tensor)>,
    out: &str,
    opset: i64,
    shapes: &[(String, Vec<usize>)],
) -> Result<Graph, String> {
    let m = ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: opset,
        }],
        graph: Some(GraphProto {
            node: nodes,
            name: "t".into(),
            input: ins,
            output: vec![ValueInfoProto {
                name: out.into(),
                ..Default::default()
            }],
            initializer: inits.iter().map(|(n, t)| tensor_to_proto(n, t)).collect(),
            ..Default::default()
        }),
        ..Default::default()
    };
    let m = decode_model(&m.encode_to_vec(), "t.onnx").map_err(|e| e.to_string())?;
    import(&m, "t.onnx", DEFAULT_MEMORY_BUDGET, shapes).map_err(|e| e.to_string())
}

/// Imports a one-node model and returns its output fact, checking that evaluating it gives
/// a tensor of that fact.
fn infer(
    op: &str,
    attrs: Vec<(&str, A)>,
    x: (DType, &[usize]),
    consts: Vec<Tensor>,
    opset: i64,
) -> Result<Fact, String> {
    let mut names = vec!["x".to_string()];
    let mut inits = Vec::new();
    for (i, c) in consts.into_iter().enumerate() {
        let n = format!("c{i}");
        names.push(n.clone());
        inits.push((n, c));
    }
    let name_refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    let inits: Vec<(&str, Tensor)> = inits.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let g = graph(
        vec![node(op, &name_refs, &["y"], attrs)],
        vec![vi("x", x.0, x.1)],
        inits,
        "y",
        opset,
    )?;
    let f = g.fact(g.outputs[0]).clone();
    let y = g.run_outputs(&[tensor(x.0, x.1, 7)])?;
    assert_eq!(y[0].fact(), f, "{op}: evaluation disagrees with inference");
    Ok(f)
}

fn f32s(v: &[f32]) -> Tensor {
    Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[v.len()]), v.to_vec()).unwrap())
}

fn i64s(v: &[i64]) -> Tensor {
    Tensor::I64(ArrayD::from_shape_vec(IxDyn(&[v.len()]), v.to_vec()).unwrap())
}

fn s_f32(v: f32) -> Tensor {
    scalar(Tensor::F32(ArrayD::from_elem(IxDyn(&[]), v)))
}

fn s_u8(v: u8) -> Tensor {
    Tensor::U8(ArrayD::from_elem(IxDyn(&[]), v))
}

fn s_i8(v: i8) -> Tensor {
    Tensor::I8(ArrayD::from_elem(IxDyn(&[]), v))
}

#[test]
fn shape_inference_per_op() {
    use DType::*;
    let f = |dt, s: &[usize]| Fact::new(dt, s.to_vec());
    let w = |o, c, k| tensor(F32, &[o, c, k, k], 3);
    // Conv: stride, padding, groups (depthwise), dilation, auto_pad.
    assert_eq!(
        infer(
            "Conv",
            vec![
                ("strides", A::Is(vec![2, 2])),
                ("pads", A::Is(vec![1, 1, 1, 1]))
            ],
            (F32, &[1, 3, 9, 9]),
            vec![w(8, 3, 3), tensor(F32, &[8], 1)],
            13
        ),
        Ok(f(F32, &[1, 8, 5, 5]))
    );
    assert_eq!(
        infer(
            "Conv",
            vec![("group", A::I(4)), ("pads", A::Is(vec![1, 1, 1, 1]))],
            (F32, &[2, 4, 6, 6]),
            vec![w(4, 1, 3)],
            13
        ),
        Ok(f(F32, &[2, 4, 6, 6]))
    );
    assert_eq!(
        infer(
            "Conv",
            vec![("dilations", A::Is(vec![2, 2]))],
            (F32, &[1, 1, 7, 7]),
            vec![w(2, 1, 3)],
            13
        ),
        Ok(f(F32, &[1, 2, 3, 3]))
    );
    assert_eq!(
        infer(
            "Conv",
            vec![
                ("auto_pad", A::S("SAME_UPPER")),
                ("strides", A::Is(vec![2, 2]))
            ],
            (F32, &[1, 1, 7, 7]),
            vec![w(2, 1, 3)],
            13
        ),
        Ok(f(F32, &[1, 2, 4, 4]))
    );
    assert!(
        infer("Conv", vec![], (F32, &[1, 3, 5, 5]), vec![w(2, 2, 3)], 13)
            .unwrap_err()
            .contains("do not agree")
    );
    // Gemm, MatMul.
    assert_eq!(
        infer(
            "Gemm",
            vec![("transB", A::I(1))],
            (F32, &[2, 5]),
            vec![tensor(F32, &[3, 5], 1), tensor(F32, &[3], 2)],
            13
        ),
        Ok(f(F32, &[2, 3]))
    );
    assert_eq!(
        infer(
            "MatMul",
            vec![],
            (F32, &[2, 4, 5]),
            vec![tensor(F32, &[5, 3], 1)],
            13
        ),
        Ok(f(F32, &[2, 4, 3]))
    );
    // Element-wise with broadcasting.
    assert_eq!(
        infer(
            "Add",
            vec![],
            (F32, &[1, 3, 4, 4]),
            vec![tensor(F32, &[3, 1, 1], 1)],
            13
        ),
        Ok(f(F32, &[1, 3, 4, 4]))
    );
    assert_eq!(
        infer("Mul", vec![], (F32, &[2, 3]), vec![s_f32(2.0)], 13),
        Ok(f(F32, &[2, 3]))
    );
    assert!(infer(
        "Add",
        vec![],
        (F32, &[2, 3]),
        vec![tensor(F32, &[4], 1)],
        13
    )
    .unwrap_err()
    .contains("broadcast"));
    assert_eq!(
        infer("Relu", vec![], (F32, &[2, 3]), vec![], 13),
        Ok(f(F32, &[2, 3]))
    );
    assert_eq!(
        infer(
            "Clip",
            vec![],
            (F32, &[2, 3]),
            vec![s_f32(0.0), s_f32(6.0)],
            13
        ),
        Ok(f(F32, &[2, 3]))
    );
    assert_eq!(
        infer(
            "Clip",
            vec![("min", A::F(0.0)), ("max", A::F(6.0))],
            (F32, &[2, 3]),
            vec![],
            9
        ),
        Ok(f(F32, &[2, 3]))
    );
    let c = || f32s(&[0.5, 1.0, 2.0]);
    assert_eq!(
        infer(
            "BatchNormalization",
            vec![],
            (F32, &[1, 3, 2, 2]),
            vec![c(), c(), c(), c()],
            13
        ),
        Ok(f(F32, &[1, 3, 2, 2]))
    );
    // Pools.
    let k2 = || ("kernel_shape", A::Is(vec![2, 2]));
    let s2 = || ("strides", A::Is(vec![2, 2]));
    assert_eq!(
        infer(
            "MaxPool",
            vec![k2(), s2()],
            (F32, &[1, 2, 5, 5]),
            vec![],
            13
        ),
        Ok(f(F32, &[1, 2, 2, 2]))
    );
    assert_eq!(
        infer(
            "MaxPool",
            vec![k2(), s2(), ("ceil_mode", A::I(1))],
            (F32, &[1, 2, 5, 5]),
            vec![],
            13
        ),
        Ok(f(F32, &[1, 2, 3, 3]))
    );
    assert_eq!(
        infer("MaxPool", vec![k2(), s2()], (U8, &[1, 2, 4, 4]), vec![], 13),
        Ok(f(U8, &[1, 2, 2, 2]))
    );
    assert_eq!(
        infer(
            "AveragePool",
            vec![
                ("kernel_shape", A::Is(vec![3, 3])),
                ("pads", A::Is(vec![1, 1, 1, 1]))
            ],
            (F32, &[1, 2, 4, 4]),
            vec![],
            13
        ),
        Ok(f(F32, &[1, 2, 4, 4]))
    );
    assert_eq!(
        infer(
            "GlobalAveragePool",
            vec![],
            (F32, &[2, 5, 3, 3]),
            vec![],
            13
        ),
        Ok(f(F32, &[2, 5, 1, 1]))
    );
    // Layout ops.
    assert_eq!(
        infer("Flatten", vec![], (F32, &[2, 3, 4, 5]), vec![], 13),
        Ok(f(F32, &[2, 60]))
    );
    assert_eq!(
        infer(
            "Flatten",
            vec![("axis", A::I(2))],
            (I8, &[2, 3, 4, 5]),
            vec![],
            13
        ),
        Ok(f(I8, &[6, 20]))
    );
    assert_eq!(
        infer(
            "Reshape",
            vec![],
            (F32, &[2, 3, 4]),
            vec![i64s(&[0, -1])],
            13
        ),
        Ok(f(F32, &[2, 12]))
    );
    assert_eq!(
        infer(
            "Transpose",
            vec![("perm", A::Is(vec![0, 2, 1]))],
            (F32, &[2, 3, 4]),
            vec![],
            13
        ),
        Ok(f(F32, &[2, 4, 3]))
    );
    assert_eq!(
        infer("Unsqueeze", vec![], (F32, &[3, 4]), vec![i64s(&[0])], 13),
        Ok(f(F32, &[1, 3, 4]))
    );
    assert_eq!(
        infer(
            "Squeeze",
            vec![("axes", A::Is(vec![1]))],
            (F32, &[3, 1, 4]),
            vec![],
            11
        ),
        Ok(f(F32, &[3, 4]))
    );
    assert_eq!(
        infer(
            "Concat",
            vec![("axis", A::I(1))],
            (F32, &[1, 2, 3]),
            vec![tensor(F32, &[1, 5, 3], 1)],
            13
        ),
        Ok(f(F32, &[1, 7, 3]))
    );
    assert_eq!(
        infer("Softmax", vec![], (F32, &[2, 10]), vec![], 13),
        Ok(f(F32, &[2, 10]))
    );
    assert_eq!(
        infer("Cast", vec![("to", A::I(6))], (F32, &[2, 2]), vec![], 13),
        Ok(f(I32, &[2, 2]))
    );
    assert_eq!(
        infer("Identity", vec![], (U8, &[2, 2]), vec![], 13),
        Ok(f(U8, &[2, 2]))
    );
    // Quantization ops.
    assert_eq!(
        infer(
            "QuantizeLinear",
            vec![],
            (F32, &[2, 3]),
            vec![s_f32(0.1), s_i8(0)],
            13
        ),
        Ok(f(I8, &[2, 3]))
    );
    assert_eq!(
        infer(
            "QuantizeLinear",
            vec![],
            (F32, &[2, 3]),
            vec![s_f32(0.1)],
            13
        ),
        Ok(f(U8, &[2, 3]))
    );
    assert_eq!(
        infer(
            "DequantizeLinear",
            vec![("axis", A::I(1))],
            (I8, &[2, 3]),
            vec![
                f32s(&[0.1, 0.2, 0.3]),
                Tensor::I8(ArrayD::zeros(IxDyn(&[3])))
            ],
            13
        ),
        Ok(f(F32, &[2, 3]))
    );
    let qc = vec![
        s_f32(0.02),
        s_u8(128),
        tensor(I8, &[4, 2, 3, 3], 5),
        f32s(&[0.01; 4]),
        Tensor::I8(ArrayD::zeros(IxDyn(&[4]))),
        s_f32(0.05),
        s_u8(10),
        tensor(I32, &[4], 6),
    ];
    assert_eq!(
        infer(
            "QLinearConv",
            vec![("pads", A::Is(vec![1, 1, 1, 1]))],
            (U8, &[1, 2, 5, 5]),
            qc.clone(),
            13
        ),
        Ok(f(U8, &[1, 4, 5, 5]))
    );
    // A bias of the wrong length is refused when the graph is built (it used to panic later).
    for n in [3, 5] {
        let mut bad = qc.clone();
        bad[7] = tensor(I32, &[n], 6);
        let e = infer(
            "QLinearConv",
            vec![("pads", A::Is(vec![1, 1, 1, 1]))],
            (U8, &[1, 2, 5, 5]),
            bad,
            13,
        )
        .unwrap_err();
        assert!(e.contains("one value per output channel ([4])"), "{e}");
    }
    let qm = vec![
        s_f32(0.02),
        s_i8(3),
        tensor(I8, &[6, 4], 5),
        s_f32(0.01),
        s_i8(0),
        s_f32(0.05),
        s_i8(-2),
    ];
    assert_eq!(
        infer("QLinearMatMul", vec![], (I8, &[3, 6]), qm, 13),
        Ok(f(I8, &[3, 4]))
    );
    assert_eq!(
        infer(
            "ConvInteger",
            vec![],
            (U8, &[1, 1, 4, 4]),
            vec![tensor(U8, &[2, 1, 2, 2], 1), s_u8(3)],
            13
        ),
        Ok(f(I32, &[1, 2, 3, 3]))
    );
    assert_eq!(
        infer(
            "MatMulInteger",
            vec![],
            (I8, &[3, 6]),
            vec![tensor(I8, &[6, 2], 1)],
            13
        ),
        Ok(f(I32, &[3, 2]))
    );
    // Unsupported ops and attributes are errors with the reason.
    assert!(infer("Loop", vec![], (F32, &[1, 2]), vec![], 13)
        .unwrap_err()
        .contains("Loop is not supported"));
    assert!(infer(
        "Conv",
        vec![("pads", A::Is(vec![1; 6]))],
        (F32, &[1, 1, 4, 4, 4]),
        vec![tensor(F32, &[1, 1, 3, 3, 3], 1)],
        13
    )
    .unwrap_err()
    .contains("2-D"));
    // A 1-D convolution is the 2-D one with a 1 x k window (`compiler::onnx::forms`).
    assert_eq!(
        infer(
            "Conv",
            vec![("pads", A::Is(vec![1, 1]))],
            (F32, &[1, 1, 4]),
            vec![tensor(F32, &[1, 1, 3], 1)],
            13
        ),
        Ok(f(F32, &[1, 1, 4]))
    );
}

#[test]
fn shape_of_a_static_tensor_is_folded() {
    // torch's `x.view(x.size(0), -1)`: Shape -> Gather -> Unsqueeze -> Concat -> Reshape.
    let nodes = vec![
        node("Shape", &["x"], &["s"], vec![]),
        node("Gather", &["s", "zero"], &["n"], vec![("axis", A::I(0))]),
        node("Unsqueeze", &["n", "ax"], &["n1"], vec![]),
        node(
            "Concat",
            &["n1", "minus1"],
            &["shape"],
            vec![("axis", A::I(0))],
        ),
        node("Reshape", &["x", "shape"], &["y"], vec![]),
    ];
    let inits = vec![
        ("zero", Tensor::I64(ArrayD::from_elem(IxDyn(&[]), 0))),
        ("ax", i64s(&[0])),
        ("minus1", i64s(&[-1])),
    ];
    let g = graph(nodes, vec![vi("x", DType::F32, &[2, 3, 4])], inits, "y", 13).unwrap();
    assert_eq!(g.node_count(), 1, "everything but the Reshape is folded");
    assert_eq!(g.fact(g.outputs[0]).shape, vec![2, 12]);
}

/// Conv -> BatchNormalization -> Relu, then Conv -> Mul(per-channel) -> Add(per-channel).
fn conv_bn_graph() -> Graph {
    let nodes = vec![
        node(
            "Conv",
            &["x", "w", "b"],
            &["c"],
            vec![("pads", A::Is(vec![1, 1, 1, 1]))],
        ),
        node(
            "BatchNormalization",
            &["c", "g", "beta", "mean", "var"],
            &["bn"],
            vec![("epsilon", A::F(1e-3))],
        ),
        node("Relu", &["bn"], &["r"], vec![]),
        node("Conv", &["r", "w2"], &["c2"], vec![]),
        node("Mul", &["c2", "m"], &["m2"], vec![]),
        node("Add", &["m2", "a"], &["y"], vec![]),
    ];
    let inits = vec![
        ("w", tensor(DType::F32, &[4, 3, 3, 3], 1)),
        ("b", tensor(DType::F32, &[4], 2)),
        ("g", f32s(&[0.5, 2.0, -1.0, 1.5])),
        ("beta", f32s(&[0.1, -0.2, 0.3, 0.0])),
        ("mean", f32s(&[0.05, -0.1, 0.2, 0.0])),
        ("var", f32s(&[0.5, 1.5, 0.25, 2.0])),
        ("w2", tensor(DType::F32, &[2, 4, 1, 1], 3)),
        (
            "m",
            Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[1, 2, 1, 1]), vec![0.5, -3.0]).unwrap()),
        ),
        (
            "a",
            Tensor::F32(ArrayD::from_shape_vec(IxDyn(&[2, 1, 1]), vec![1.0, 2.0]).unwrap()),
        ),
    ];
    graph(
        nodes,
        vec![vi("x", DType::F32, &[1, 3, 5, 5])],
        inits,
        "y",
        13,
    )
    .unwrap()
}

#[test]
fn batch_norm_and_channel_affine_fold_exactly_in_float() {
    let g0 = conv_bn_graph();
    let mut g = g0.clone();
    passes::simplify(&mut g);
    assert_eq!(
        g.node_count(),
        2,
        "BN, Relu, Mul and Add are folded/fused into the two Convs"
    );
    assert_eq!(g.fusions.len(), 4);
    assert!(g
        .fusions
        .iter()
        .any(|(n, into, how)| n.op_type == "BatchNormalization"
            && into == "Conv_node"
            && how.contains("folded")));
    for seed in 0..5 {
        let x = tensor(DType::F32, &[1, 3, 5, 5], 100 + seed);
        let a = g0.run_outputs(std::slice::from_ref(&x)).unwrap();
        let b = g.run_outputs(&[x]).unwrap();
        let (a, b) = (a[0].as_f32().unwrap(), b[0].as_f32().unwrap());
        for (p, q) in a.iter().zip(b) {
            assert!((p - q).abs() <= 1e-5 * (1.0 + p.abs()), "{p} vs {q}");
        }
    }
}

/// QLinearConv with uint8 activations (zero points 128 in, 100 out), per-channel int8
/// weights and padding; and QLinearMatMul with an arbitrary input zero point (no padding:
/// folded into the bias). Offloaded results are within 1 of ONNX's and mostly identical.
#[test]
fn qlinear_layers_with_zero_points_are_offloaded_within_one_lsb() {
    let nodes = vec![
        node(
            "QLinearConv",
            &["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
            &["c"],
            vec![
                ("pads", A::Is(vec![1, 1, 1, 1])),
                ("strides", A::Is(vec![2, 1])),
            ],
        ),
        node("Flatten", &["c"], &["f"], vec![]),
        node(
            "QLinearMatMul",
            &["f", "ys", "yz", "w2", "w2s", "w2z", "zs", "zz"],
            &["y"],
            vec![],
        ),
    ];
    let inits = vec![
        ("xs", s_f32(0.02)),
        ("xz", s_u8(128)),
        ("w", tensor(DType::I8, &[6, 4, 3, 3], 11)),
        ("ws", f32s(&[0.003, 0.001, 0.002, 0.0015, 0.004, 0.0025])),
        ("wz", Tensor::I8(ArrayD::zeros(IxDyn(&[6])))),
        ("ys", s_f32(0.37)),
        ("yz", s_u8(100)),
        ("b", tensor(DType::I32, &[6], 12)),
        ("w2", tensor(DType::I8, &[6 * 3 * 6, 5], 13)),
        ("w2s", s_f32(0.004)),
        ("w2z", s_i8(0)),
        ("zs", s_f32(0.9)),
        ("zz", s_u8(131)),
    ];
    let mut g = graph(
        nodes,
        vec![vi("x", DType::U8, &[1, 4, 6, 6])],
        inits,
        "y",
        13,
    )
    .unwrap();
    passes::simplify(&mut g);
    let cfg = isa::HwConfig::preset("default").unwrap();
    let (plan, table) = plan_graph(&g, &[], &cfg, &FrontendOptions::default()).unwrap();
    let kinds: Vec<&str> = plan.layers().map(|l| l.kind()).collect();
    assert_eq!(kinds, ["QConv2d", "QDense"], "{table}");
    assert!(
        matches!(&table.get("QLinearMatMul_node").unwrap().support, Support::Accel { note, .. } if note.contains("within 1"))
    );
    // The uint8 input enters as int8 (u - 128), the uint8 output leaves as u8.
    assert!(plan.steps.iter().any(|s| s.kind_name() == "Cpu:U8ToI8"));
    assert!(plan.steps.iter().any(
        |s| matches!(&s.kind, StepKind::Accel(Layer::Conv2d(c)) if c.requant.zero_point == -28)
    ));
    let (mut diff, mut n, mut total) = (0.0f64, 0, 0);
    for seed in 0..20 {
        let x = tensor(DType::U8, &[1, 4, 6, 6], 200 + seed);
        let want = g.run_outputs(std::slice::from_ref(&x)).unwrap();
        let got = run_plan(&plan, &[x]).unwrap().outputs(&plan);
        assert_eq!(got[0].dtype(), DType::U8);
        for (a, b) in want[0].to_f64_vec().iter().zip(got[0].to_f64_vec()) {
            diff = diff.max((a - b).abs());
            n += usize::from(*a != b);
            total += 1;
        }
    }
    assert!(diff <= 1.0, "max difference {diff}");
    assert!(n * 10 < total, "{n}/{total} elements differ");
}

#[test]
fn huge_pads_are_refused_by_the_memory_budget_before_allocating() {
    use DType::F32;
    let pads = || ("pads", A::Is(vec![100_000; 4]));
    let w = tensor(F32, &[1, 1, 1, 1], 3);
    let conv = graph(
        vec![node("Conv", &["x", "w"], &["y"], vec![pads()])],
        vec![vi("x", F32, &[1, 1, 4, 4])],
        vec![("w", w)],
        "y",
        13,
    );
    assert_eq!(
        conv.unwrap_err(),
        "t.onnx: node 'Conv_node' (Conv): tensor 'y' (float[1, 1, 200004, 200004]) would take \
         149.0 GiB, beyond the memory budget of 4.0 GiB; check the model's shapes, pads and \
         strides (or raise the budget with --memory-budget)"
    );
    let pool = graph(
        vec![node(
            "MaxPool",
            &["x"],
            &["y"],
            vec![("kernel_shape", A::Is(vec![1, 1])), pads()],
        )],
        vec![vi("x", F32, &[1, 1, 4, 4])],
        vec![],
        "y",
        13,
    );
    let e = pool.unwrap_err();
    assert!(
        e.contains("tensor 'y'") && e.contains("beyond the memory budget"),
        "{e}"
    );
}

#[test]
fn a_fixed_input_dimension_of_zero_or_below_is_named_not_called_dynamic() {
    let with_dims = |dims: &[i64]| {
        let mut x = vi("x", DType::F32, &[1, 1, 1, 1]);
        let shape = x.r#type.as_mut().unwrap().tensor_type.as_mut().unwrap();
        for (d, &v) in shape.shape.as_mut().unwrap().dim.iter_mut().zip(dims) {
            d.dim_value = Some(v);
        }
        graph(
            vec![node("Relu", &["x"], &["y"], vec![])],
            vec![x],
            vec![],
            "y",
            13,
        )
    };
    let e = with_dims(&[1, 0, 4, 4]).unwrap_err();
    assert!(e.contains("input 'x' has dimension 1 fixed to 0"), "{e}");
    let e = with_dims(&[1, 3, -2, 4]).unwrap_err();
    assert!(
        e.contains("input 'x' has dimension 2 fixed to -2, a negative size"),
        "{e}"
    );
    assert!(!e.contains("dynamic"), "{e}");
    let e = with_dims(&[0, 3, 4, 4]).unwrap_err();
    assert!(e.contains("dimension 0 fixed to 0"), "{e}");
    // -1, the usual spelling of "any batch", stays the batch of one.
    let g = with_dims(&[-1, 3, 4, 4]).unwrap();
    assert_eq!(g.fact(g.inputs[0]).shape, vec![1, 3, 4, 4]);
}

#[test]
fn symbolic_input_dimensions_are_fixed_by_input_shape_and_checked() {
    // x: [N, 3, H, W] with H and W symbolic, as OCR models export it.
    let model = |shapes: &[(String, Vec<usize>)]| {
        let mut x = vi("x", DType::F32, &[1, 3, 1, 1]);
        let shape = x.r#type.as_mut().unwrap().tensor_type.as_mut().unwrap();
        for (i, d) in shape.shape.as_mut().unwrap().dim.iter_mut().enumerate() {
            if i != 1 {
                d.dim_value = None;
                d.dim_param = Some(format!("d{i}"));
            }
        }
        graph_shaped(
            vec![node("Relu", &["x"], &["y"], vec![])],
            vec![x],
            vec![],
            "y",
            13,
            shapes,
        )
    };
    let e = model(&[]).unwrap_err();
    assert!(
        e.contains("input 'x' has a dynamic dimension 2 ('d2')")
            && e.contains("--input-shape x=DIMS (e.g. 1x3x224x224)"),
        "{e}"
    );
    let shape = |n: &str, d: &[usize]| vec![(n.to_string(), d.to_vec())];
    let g = model(&shape("x", &[1, 3, 48, 160])).unwrap();
    assert_eq!(g.fact(g.inputs[0]).shape, vec![1, 3, 48, 160]);
    assert_eq!(g.fact(g.outputs[0]).shape, vec![1, 3, 48, 160]);
    // A nameless shape is the only input's.
    let g = model(&shape("", &[2, 3, 8, 8])).unwrap();
    assert_eq!(g.fact(g.inputs[0]).shape, vec![2, 3, 8, 8]);
    let e = model(&shape("x", &[1, 4, 48, 160])).unwrap_err();
    assert!(
        e.contains("gives input 'x' dimension 1 as 4, but the model fixes it to 3"),
        "{e}"
    );
    let e = model(&shape("x", &[1, 3, 48])).unwrap_err();
    assert!(
        e.contains("gives input 'x' 3 dimension(s) (1x3x48), the model 4"),
        "{e}"
    );
    let e = model(&shape("img", &[1, 3, 8, 8])).unwrap_err();
    assert!(
        e.contains("--input-shape names 'img', which is not an input of the model (its inputs: x)"),
        "{e}"
    );
}

/// A float convolution with a dead output channel (weights all but zero, as BatchNorm folding
/// leaves them) and a real bias: at the weights' own scale the bias would not fit int32 (the
/// accumulator range computation overflowed i64 here once). The channel's weight scale is
/// widened so the bias fits, and the layer runs on the accelerator, bit-exact with the
/// integer reference.
#[test]
fn a_dead_channel_with_a_bias_is_quantized_not_overflowed() {
    let mut w = tensor(DType::F32, &[2, 3, 3, 3], 7);
    if let Tensor::F32(a) = &mut w {
        for (i, v) in a.iter_mut().enumerate() {
            if i >= 27 {
                *v = 1e-12;
            }
        }
    }
    let mut g = graph(
        vec![node(
            "Conv",
            &["x", "w", "b"],
            &["y"],
            vec![("pads", A::Is(vec![1, 1, 1, 1]))],
        )],
        vec![vi("x", DType::F32, &[1, 3, 5, 5])],
        vec![("w", w), ("b", f32s(&[0.25, 3.0]))],
        "y",
        13,
    )
    .unwrap();
    passes::simplify(&mut g);
    let cfg = isa::HwConfig::preset("default").unwrap();
    let calib: Vec<ArrayD<f32>> = (0..4)
        .map(|s| match tensor(DType::F32, &[1, 3, 5, 5], 40 + s) {
            Tensor::F32(a) => a,
            _ => unreachable!(),
        })
        .collect();
    let (plan, table) = plan_graph(&g, &calib, &cfg, &FrontendOptions::default()).unwrap();
    let kinds: Vec<&str> = plan.layers().map(|l| l.kind()).collect();
    assert_eq!(kinds, ["QConv2d"], "{table}");
    let x = tensor(DType::F32, &[1, 3, 5, 5], 99);
    let y = run_plan(&plan, &[x]).unwrap().outputs(&plan)[0].to_f64_vec();
    // The dead channel's output (the second 5x5 plane) is its bias, up to one output LSB.
    let lsb = y.iter().fold(0f64, |a, v| a.max(v.abs())) / 127.0;
    for v in &y[25..] {
        assert!((v - 3.0).abs() <= lsb, "{v}");
    }
}

/// LayerNorm as transformer necks export it (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt,
/// Div) imports and runs on the CPU: every row normalized to mean 0 and variance 1.
#[test]
fn an_exported_layer_norm_imports_and_normalizes() {
    let mean = |x: &str, y: &str| node("ReduceMean", &[x], &[y], vec![("axes", A::Is(vec![-1]))]);
    let g = graph(
        vec![
            mean("x", "m"),
            node("Sub", &["x", "m"], &["d"], vec![]),
            node("Pow", &["d", "two"], &["d2"], vec![]),
            mean("d2", "v"),
            node("Add", &["v", "eps"], &["ve"], vec![]),
            node("Sqrt", &["ve"], &["s"], vec![]),
            node("Div", &["d", "s"], &["y"], vec![]),
        ],
        vec![vi("x", DType::F32, &[1, 4, 6])],
        vec![("two", s_f32(2.0)), ("eps", s_f32(1e-6))],
        "y",
        14,
    )
    .unwrap();
    assert_eq!(g.fact(g.outputs[0]).shape, vec![1, 4, 6]);
    let x = tensor(DType::F32, &[1, 4, 6], 5);
    let y = g.run_outputs(&[x]).unwrap()[0].to_f64_vec();
    for row in y.chunks(6) {
        let m = row.iter().sum::<f64>() / 6.0;
        let v = row.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / 6.0;
        assert!(m.abs() < 1e-5 && (v - 1.0).abs() < 1e-4, "{row:?}");
    }
}
