//! The quantized path of the edge-CNN operators: small float models (a convolution, the
//! operator, a convolution) are quantized after training, compiled for several accelerator
//! configs, run on the functional simulator (races checked) and compared with the integer
//! reference executor step by step (bit-exact), and with the float model (close). Where each
//! operator runs is checked on VTA's default config; QDQ forms are checked against ONNX's own
//! semantics (the float graph of the QDQ model).

mod onnx_builder;

use compiler::compile::{Compiled, LayerReport};
use compiler::frontend::{import_graph, FrontendOptions};
use compiler::graph::plan::StepKind;
use compiler::graph::{DType, Layer, Support, Tensor};
use ndarray::ArrayD;
use onnx_builder::{sample, Model, A};
use vta_runtime::budget::DEFAULT_MEMORY_BUDGET;
use vta_runtime::model::Model as Compiledmodel;
use vta_sim::FsimDevice;

/// Where the layer of ONNX node `node` runs on the default config.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Where {
    /// An accelerator layer of this kind, in a launch.
    Accel(&'static str),
    /// An accelerator layer the back end refuses (runs on the CPU by its reference).
    Refused(&'static str),
    /// A CPU step.
    Cpu,
}

fn float_out(m: &Model, x: &ArrayD<f32>) -> Vec<ArrayD<f32>> {
    let g = import_graph(&m.bytes(), "t.onnx", DEFAULT_MEMORY_BUDGET).unwrap();
    g.run_outputs(&[Tensor::F32(x.clone())])
        .unwrap()
        .into_iter()
        .map(|t| t.as_f32().unwrap().clone())
        .collect()
}

/// Compiles `m` (input shape `shape`) for several configs, runs it on fsim and checks it
/// bit-exactly against the integer reference; on the default config, checks where `expect`ed
/// nodes run and that the int8 outputs are within `tol` (relative to the output's range) of
/// the float model's. Returns the default config's compiled model.
fn check(name: &str, m: &Model, shape: &[usize], expect: &[(&str, Where)], tol: f32) -> Compiled {
    let x = sample(shape, 7, 2.0);
    // Calibrated on the test input too, so that the comparison with the float model measures
    // rounding, not saturation beyond the calibrated ranges.
    let calib: Vec<ArrayD<f32>> = std::iter::once(x.clone())
        .chain((0..3).map(|s| sample(shape, 100 + s, 2.0)))
        .collect();
    let opts = FrontendOptions::default();
    let mut default = None;
    for cfg_name in ["default", "small", "rect", "batched"] {
        let cfg = isa::HwConfig::preset(cfg_name).unwrap();
        let c = Compiled::compile(m.bytes(), name, &calib, &cfg, &opts)
            .unwrap_or_else(|e| panic!("{name} on {cfg_name}: {e}"));
        let model = Compiledmodel::from_bytes(&c.to_bytes().unwrap(), name).unwrap();
        let mut dev = FsimDevice::checking_races(&cfg);
        let inputs = [Tensor::F32(x.clone())];
        let r = model.run(&mut dev, &inputs).unwrap();
        let chk = model.check(&inputs, &r).unwrap();
        assert!(
            chk.is_exact(),
            "{name} on {cfg_name}: {chk:?}\n{}\n{}",
            c.support,
            c.plan
        );
        if cfg_name == "default" {
            let want = float_out(m, &x);
            for (got, want) in r.outputs.iter().zip(&want) {
                let got = got.as_f32().unwrap();
                let range = want.iter().fold(0f32, |a, v| a.max(v.abs())).max(1e-3);
                let err = got
                    .iter()
                    .zip(want.iter())
                    .fold(0f32, |a, (g, w)| a.max((g - w).abs()));
                println!("{name}: max |int8 - float| = {err:.4} of a range {range:.3}");
                assert!(
                    err <= tol * range,
                    "{name}: error {err} for a range {range}\n{}",
                    c.plan
                );
            }
            for &(node, wh) in expect {
                let e = c
                    .support
                    .get(node)
                    .unwrap_or_else(|| panic!("{name}: no node {node}"));
                let step = match &e.support {
                    Support::Accel { step, .. } | Support::Cpu { step, .. } => *step,
                    other => panic!("{name}: {node} is {other:?}"),
                };
                let got = match (
                    &c.plan.steps[step].kind,
                    c.steps.iter().find(|s| s.step == step),
                ) {
                    (StepKind::Accel(l), Some(rep)) => match rep.report {
                        LayerReport::Compiled(..) => Where::Accel(l.kind()),
                        LayerReport::Refused(_) => Where::Refused(l.kind()),
                    },
                    _ => Where::Cpu,
                };
                assert_eq!(
                    got,
                    wh,
                    "{name}: {node}\n{}\n{}",
                    c.support,
                    c.layer_report()
                );
            }
            assert!(
                c.support.entries.iter().all(|e| !matches!(
                    e.support,
                    Support::NotAnalyzed { .. }
                        | Support::NotPlaced { .. }
                        | Support::Unsupported { .. }
                )),
                "{name}: every node placed\n{}",
                c.support
            );
            default = Some(c);
        }
    }
    default.expect("the default config ran")
}

/// `x -> Conv 3x3 (C -> C) -> OP -> Conv 1x1 (C -> C) -> y`, the op given as nodes from
/// tensor `a` to tensor `b`.
fn sandwich(c: usize, op: impl FnOnce(&mut Model)) -> Model {
    let mut m = Model::new(17);
    m.input("x", &[1, c, 8, 8])
        .weight("w1", &[c, c, 3, 3], 0.3)
        .weight("b1", &[c], 0.2)
        .node(
            "conv1",
            "Conv",
            &["x", "w1", "b1"],
            &["a"],
            vec![("pads", A::Is(vec![1; 4]))],
        );
    op(&mut m);
    m.weight("w2", &[c, c, 1, 1], 0.5)
        .node("conv2", "Conv", &["b", "w2"], &["y"], vec![])
        .output("y");
    m
}

#[test]
fn single_input_functions_are_tables_on_the_cpu() {
    let cases: Vec<(&str, Vec<(&str, A)>)> = vec![
        ("Sigmoid", vec![]),
        ("Tanh", vec![]),
        ("HardSwish", vec![]),
        ("Exp", vec![]),
        ("Erf", vec![]),
        ("Gelu", vec![]),
        ("Softplus", vec![]),
        ("Mish", vec![]),
        ("Floor", vec![]),
        ("Ceil", vec![]),
        ("Round", vec![]),
    ];
    for (op, attrs) in cases {
        let m = sandwich(16, |m| {
            m.node("f", op, &["a"], &["b"], attrs);
        });
        let c = check(
            op,
            &m,
            &[1, 16, 8, 8],
            &[
                ("conv1", Where::Accel("QConv2d")),
                ("f", Where::Refused("QTable")),
                ("conv2", Where::Accel("QConv2d")),
            ],
            0.1,
        );
        let refusal = c.steps.iter().find(|s| s.kind == "QTable").unwrap();
        assert!(
            matches!(&refusal.report, LayerReport::Refused(r) if r.contains("lookup table")),
            "{op}"
        );
    }
    // SiLU as YOLO exports it: one table after the fusion.
    let m = sandwich(24, |m| {
        m.node("sig", "Sigmoid", &["a"], &["s"], vec![]).node(
            "mul",
            "Mul",
            &["a", "s"],
            &["b"],
            vec![],
        );
    });
    let c = check(
        "SiLU",
        &m,
        &[1, 24, 8, 8],
        &[("sig", Where::Refused("QTable"))],
        0.1,
    );
    assert!(
        matches!(&c.support.get("mul").unwrap().support, Support::Fused { into, .. } if into == "sig")
    );
}

#[test]
fn affine_and_clamp_layers_run_on_the_alu() {
    let hs = sandwich(16, |m| {
        m.node(
            "hsig",
            "HardSigmoid",
            &["a"],
            &["b"],
            vec![("alpha", A::F(0.2)), ("beta", A::F(0.5))],
        );
    });
    check(
        "HardSigmoid",
        &hs,
        &[1, 16, 8, 8],
        &[("hsig", Where::Accel("QAffine"))],
        0.05,
    );
    // Per-channel constants that no convolution absorbs (after a residual Add).
    for (op, k) in [
        ("Mul", [0.5f32, -2.0, 1.5]),
        ("Add", [0.5, -0.2, 1.0]),
        ("Sub", [0.1, 0.2, -0.3]),
        ("Div", [2.0, -4.0, 0.5]),
    ] {
        let m = sandwich(24, |m| {
            let v: Vec<f32> = (0..24).map(|i| k[i % 3]).collect();
            m.node("res", "Add", &["a", "x"], &["r"], vec![])
                .values("k", &[1, 24, 1, 1], &v)
                .node("op", op, &["r", "k"], &["b"], vec![]);
        });
        check(
            op,
            &m,
            &[1, 24, 8, 8],
            &[
                ("res", Where::Accel("QAdd")),
                ("op", Where::Accel("QAffine")),
            ],
            0.05,
        );
    }
    // A Relu and a Clip no producer absorbs (the Add's output has two readers).
    let m = sandwich(16, |m| {
        m.node("res", "Add", &["a", "x"], &["r"], vec![])
            .node("relu", "Relu", &["r"], &["r2"], vec![])
            .values("lo", &[], &[-0.5])
            .values("hi", &[], &[1.0])
            .node("clip", "Clip", &["r", "lo", "hi"], &["r3"], vec![])
            .node("sum", "Add", &["r2", "r3"], &["b"], vec![]);
    });
    check(
        "clamps",
        &m,
        &[1, 16, 8, 8],
        &[
            ("relu", Where::Accel("QAffine")),
            ("clip", Where::Accel("QAffine")),
        ],
        0.05,
    );
}

#[test]
fn leaky_relu_and_prelu_run_on_the_alu() {
    let m = sandwich(16, |m| {
        m.node(
            "lrelu",
            "LeakyRelu",
            &["a"],
            &["b"],
            vec![("alpha", A::F(0.1))],
        );
    });
    check(
        "LeakyRelu",
        &m,
        &[1, 16, 8, 8],
        &[("lrelu", Where::Accel("QLeakyRelu"))],
        0.05,
    );
    let m = sandwich(20, |m| {
        let s: Vec<f32> = (0..20).map(|i| 0.05 * i as f32).collect();
        m.values("slope", &[20, 1, 1], &s)
            .node("prelu", "PRelu", &["a", "slope"], &["b"], vec![]);
    });
    check(
        "PRelu",
        &m,
        &[1, 20, 8, 8],
        &[("prelu", Where::Accel("QLeakyRelu"))],
        0.05,
    );
}

/// `Max`/`Min` by a constant bound are clamps (TensorFlow's exports bound a LeakyRelu with
/// `Max(x, -0.4)`, openwakeword's embedding network 19 times); per-element bounds and the
/// maximum of two tensors run on the CPU.
#[test]
fn max_and_min_by_a_constant_are_clamps() {
    let m = sandwich(16, |m| {
        m.values("lo", &[], &[-0.4])
            .node("max", "Max", &["a", "lo"], &["b"], vec![]);
    });
    let c = check("Max after a Conv", &m, &[1, 16, 8, 8], &[], 0.05);
    assert!(
        matches!(&c.support.get("max").unwrap().support, Support::Fused { into, .. } if into == "conv1"),
        "{}",
        c.support
    );
    let m = sandwich(16, |m| {
        m.node(
            "lrelu",
            "LeakyRelu",
            &["a"],
            &["l"],
            vec![("alpha", A::F(0.2))],
        )
        .values("lo", &[1, 1, 1, 1], &[-0.4])
        .node("max", "Max", &["l", "lo"], &["l2"], vec![])
        .values("hi", &[1], &[0.6])
        .node("min", "Min", &["hi", "l2"], &["b"], vec![]);
    });
    check(
        "Max and Min after a LeakyRelu",
        &m,
        &[1, 16, 8, 8],
        &[
            ("lrelu", Where::Accel("QLeakyRelu")),
            ("max", Where::Accel("QAffine")),
            ("min", Where::Accel("QAffine")),
        ],
        0.05,
    );
    let m = sandwich(16, |m| {
        let v: Vec<f32> = (0..16).map(|i| -0.1 * i as f32).collect();
        m.values("k", &[1, 16, 1, 1], &v)
            .node("bound", "Max", &["a", "k"], &["r"], vec![])
            .node("relu", "Relu", &["a"], &["r2"], vec![])
            .node("pair", "Min", &["r", "r2"], &["b"], vec![]);
    });
    check(
        "per-channel and two-tensor bounds",
        &m,
        &[1, 16, 8, 8],
        &[("bound", Where::Cpu), ("pair", Where::Cpu)],
        0.05,
    );
}

#[test]
fn binary_layers_broadcast_over_the_plane() {
    // Squeeze-and-excite: x * HardSigmoid(Conv(Relu(Conv(GlobalAveragePool(x))))).
    let m = sandwich(32, |m| {
        m.node("gap", "GlobalAveragePool", &["a"], &["g"], vec![])
            .weight("wr", &[8, 32, 1, 1], 0.5)
            .node("se1", "Conv", &["g", "wr"], &["g1"], vec![])
            .node("serelu", "Relu", &["g1"], &["g2"], vec![])
            .weight("we", &[32, 8, 1, 1], 0.5)
            .node("se2", "Conv", &["g2", "we"], &["g3"], vec![])
            .node("gate", "HardSigmoid", &["g3"], &["g4"], vec![])
            .node("scale", "Mul", &["a", "g4"], &["b"], vec![]);
    });
    check(
        "SE block",
        &m,
        &[1, 32, 8, 8],
        &[
            ("gap", Where::Accel("QGlobalAvgPool")),
            ("gate", Where::Accel("QAffine")),
            ("scale", Where::Accel("QBinary")),
        ],
        0.1,
    );
    // Add and Sub of a broadcast tensor; Mul of two full tensors.
    let m = sandwich(16, |m| {
        m.node("gap", "GlobalAveragePool", &["a"], &["g"], vec![])
            .node("add", "Add", &["g", "a"], &["s1"], vec![])
            .node("sub", "Sub", &["s1", "g"], &["s2"], vec![])
            .node("sq", "Mul", &["s2", "a"], &["b"], vec![]);
    });
    check(
        "broadcast add/sub/mul",
        &m,
        &[1, 16, 8, 8],
        &[
            ("add", Where::Accel("QBinary")),
            ("sub", Where::Accel("QBinary")),
            ("sq", Where::Accel("QBinary")),
        ],
        0.1,
    );
}

#[test]
fn a_cpu_concatenation_off_the_channel_axis_feeds_an_accelerator_layer() {
    // YOLO's head: per-scale maps concatenated along the last axis on the CPU, then an
    // activation on the accelerator; the concatenation's result must upload as it is.
    let m = sandwich(16, |m| {
        m.node(
            "cat",
            "Concat",
            &["a", "a"],
            &["c"],
            vec![("axis", A::I(3))],
        )
        .node("gate", "HardSigmoid", &["c"], &["b"], vec![]);
    });
    check(
        "concat on W",
        &m,
        &[1, 16, 8, 8],
        &[("cat", Where::Cpu), ("gate", Where::Accel("QAffine"))],
        0.1,
    );
}

#[test]
fn resize_concat_split_slice_pad() {
    // A YOLO/UNet neck: upsample, concatenate with a skip connection, split and slice.
    let mut m = Model::new(17);
    m.input("x", &[1, 16, 8, 8])
        .weight("w1", &[16, 16, 3, 3], 0.3)
        .node(
            "down",
            "Conv",
            &["x", "w1"],
            &["d"],
            vec![("pads", A::Is(vec![1; 4])), ("strides", A::Is(vec![2, 2]))],
        )
        .values("roi", &[0], &[])
        .values("scales", &[4], &[1.0, 1.0, 2.0, 2.0])
        .node(
            "up",
            "Resize",
            &["d", "roi", "scales"],
            &["u"],
            vec![("mode", A::S("nearest"))],
        )
        .node(
            "cat",
            "Concat",
            &["u", "x"],
            &["c"],
            vec![("axis", A::I(1))],
        )
        .weight("w2", &[32, 32, 1, 1], 0.3)
        .node("mix", "Conv", &["c", "w2"], &["m"], vec![])
        .node(
            "split",
            "Split",
            &["m"],
            &["s1", "s2"],
            vec![("axis", A::I(1))],
        )
        .ints("st", &[0])
        .ints("en", &[8])
        .ints("ax", &[1])
        .node("slice", "Slice", &["s2", "st", "en", "ax"], &["s3"], vec![])
        .ints("pads", &[0, 0, 1, 1, 0, 0, 1, 1])
        .node("pad", "Pad", &["s3", "pads"], &["p"], vec![])
        .weight("w3", &[8, 8, 3, 3], 0.3)
        .node("head", "Conv", &["p", "w3"], &["h"], vec![])
        .values("lscales", &[4], &[1.0, 1.0, 0.5, 0.5])
        .node(
            "bilinear",
            "Resize",
            &["s1", "roi", "lscales"],
            &["y2"],
            vec![("mode", A::S("linear"))],
        )
        .output("h")
        .output("y2");
    check(
        "neck",
        &m,
        &[1, 16, 8, 8],
        &[
            ("up", Where::Accel("QUpsample")),
            ("cat", Where::Accel("QConcat")),
            ("split", Where::Accel("QSlice")),
            ("slice", Where::Accel("QSlice")),
            ("head", Where::Accel("QConv2d")),
            ("bilinear", Where::Cpu),
        ],
        0.1,
    );
    // Channel blocks move only as a whole: a concatenation whose second input starts at
    // channel 8 (of 16-lane blocks) and a slice from channel 4 run on the CPU, exactly.
    let mut m = Model::new(17);
    m.input("x", &[1, 8, 8, 8])
        .weight("w1", &[8, 8, 3, 3], 0.3)
        .node(
            "conv",
            "Conv",
            &["x", "w1"],
            &["a"],
            vec![("pads", A::Is(vec![1; 4]))],
        )
        .node(
            "cat",
            "Concat",
            &["a", "x"],
            &["c"],
            vec![("axis", A::I(1))],
        )
        .ints("st", &[4])
        .ints("en", &[12])
        .ints("ax", &[1])
        .node("slice", "Slice", &["c", "st", "en", "ax"], &["s"], vec![])
        .weight("w2", &[4, 8, 1, 1], 0.3)
        .node("head", "Conv", &["s", "w2"], &["y"], vec![])
        .output("y");
    check(
        "unaligned",
        &m,
        &[1, 8, 8, 8],
        &[
            ("cat", Where::Refused("QConcat")),
            ("slice", Where::Refused("QSlice")),
        ],
        0.1,
    );
    // Pads that no convolution absorbs, moving int8 data: a constant zero before a MaxPool
    // and a reflection.
    let m = sandwich(16, |m| {
        m.ints("p1", &[0, 0, 1, 1, 0, 0, 1, 1])
            .values("v", &[], &[0.0])
            .node("padc", "Pad", &["a", "p1", "v"], &["pa"], vec![])
            .node(
                "pool",
                "MaxPool",
                &["pa"],
                &["pp"],
                vec![("kernel_shape", A::Is(vec![3, 3]))],
            )
            .ints("p2", &[0, 0, 2, 1, 0, 0, 2, 1])
            .node(
                "padr",
                "Pad",
                &["a", "p2"],
                &["pr"],
                vec![("mode", A::S("reflect"))],
            )
            .ints("st", &[2, 1])
            .ints("en", &[10, 9])
            .ints("ax", &[2, 3])
            .node("crop", "Slice", &["pr", "st", "en", "ax"], &["pc"], vec![])
            .node("sum", "Add", &["pp", "pc"], &["b"], vec![]);
    });
    let c = check(
        "pads",
        &m,
        &[1, 16, 8, 8],
        &[
            ("padc", Where::Cpu),
            ("pool", Where::Accel("QMaxPool")),
            ("padr", Where::Cpu),
            ("crop", Where::Cpu),
        ],
        0.1,
    );
    for node in ["padc", "padr", "crop"] {
        let Support::Cpu { step, .. } = c.support.get(node).unwrap().support else {
            panic!("{node} is not a CPU step")
        };
        let out = c.plan.steps[step].outputs[0];
        assert_eq!(
            c.plan.values[out].fact.dtype,
            DType::I8,
            "{node} moves int8 data"
        );
    }
}

/// How the back end compiled the layer of ONNX node `node`.
fn layer_info(c: &Compiled, node: &str) -> compiler::backend::LayerInfo {
    let step = match &c.support.get(node).expect("node").support {
        Support::Accel { step, .. } => *step,
        other => panic!("{node} is {other:?}"),
    };
    match &c
        .steps
        .iter()
        .find(|s| s.step == step)
        .expect("a step")
        .report
    {
        LayerReport::Compiled(_, info) => (**info).clone(),
        LayerReport::Refused(r) => panic!("{node} refused: {r}"),
    }
}

#[test]
fn c2f_split_and_concat_are_free_views_of_one_buffer() {
    use compiler::backend::Movement;
    // YOLOv8's C2f block: a convolution, split in two halves, a bottleneck on the second,
    // the halves and the bottleneck's output concatenated, a convolution. The convolution
    // writes both halves into the concatenation's output, the bottleneck writes after them,
    // and the split and the concatenation emit nothing.
    let mut m = Model::new(23);
    m.input("x", &[1, 16, 8, 8])
        .weight("w1", &[32, 16, 1, 1], 0.3)
        .node("cv1", "Conv", &["x", "w1"], &["y0"], vec![])
        .node("act1", "Relu", &["y0"], &["y"], vec![])
        .node(
            "split",
            "Split",
            &["y"],
            &["a", "b"],
            vec![("axis", A::I(1))],
        )
        // Small weights: the bottleneck's range stays within the halves', so that post-training
        // quantization gives all three inputs the halves' scale and nothing is rescaled.
        .weight("wm", &[16, 16, 3, 3], 0.02)
        .node(
            "m",
            "Conv",
            &["b", "wm"],
            &["mo0"],
            vec![("pads", A::Is(vec![1; 4]))],
        )
        .node("act2", "Relu", &["mo0"], &["mo"], vec![])
        .node(
            "cat",
            "Concat",
            &["a", "b", "mo"],
            &["c"],
            vec![("axis", A::I(1))],
        )
        .weight("w2", &[16, 48, 1, 1], 0.3)
        .node("cv2", "Conv", &["c", "w2"], &["out"], vec![])
        .output("out");
    let c = check(
        "c2f",
        &m,
        &[1, 16, 8, 8],
        &[
            ("split", Where::Accel("QSlice")),
            ("cat", Where::Accel("QConcat")),
        ],
        0.1,
    );
    assert_eq!(c.launches.len(), 1, "{}", c.layer_report());
    for node in ["split", "cat"] {
        let info = layer_info(&c, node);
        assert_eq!(info.movement, Some(Movement::InPlace), "{node}");
        assert_eq!((info.insns, info.tiles), (0, 0), "{node}");
    }
    // Nothing moves through ACC8: only a copy would load int8 activations into ACC here.
    let acc8_loads = c.launches[0]
        .program
        .program
        .insns
        .iter()
        .filter(|i| matches!(i, isa::Insn::Load(m) if m.memory_type == isa::MemType::Acc8))
        .count();
    assert_eq!(acc8_loads, 0, "{}", c.layer_report());
    assert!(c.layer_report().contains("in place (no copy)"));

    // The fallback: a concatenation of a network input (uploaded by the host) with a
    // convolution's output copies the input and takes the convolution's output in place.
    let mut m = Model::new(23);
    m.input("x", &[1, 16, 8, 8])
        .weight("w1", &[16, 16, 3, 3], 0.3)
        .node(
            "conv",
            "Conv",
            &["x", "w1"],
            &["a"],
            vec![("pads", A::Is(vec![1; 4]))],
        )
        .node(
            "cat",
            "Concat",
            &["a", "x"],
            &["c"],
            vec![("axis", A::I(1))],
        )
        .weight("w2", &[16, 32, 1, 1], 0.3)
        .node("head", "Conv", &["c", "w2"], &["y"], vec![])
        .output("y");
    let c = check(
        "skip",
        &m,
        &[1, 16, 8, 8],
        &[("cat", Where::Accel("QConcat"))],
        0.1,
    );
    assert_eq!(
        layer_info(&c, "cat").movement,
        Some(Movement::Copied {
            copied: 1,
            inputs: 2
        })
    );
}

#[test]
fn conv_transpose_and_average_pools_are_convolutions() {
    let m = sandwich(16, |m| {
        m.weight("wt", &[16, 16, 2, 2], 0.3)
            .weight("bt", &[16], 0.1)
            .node(
                "deconv",
                "ConvTranspose",
                &["a", "wt", "bt"],
                &["t"],
                vec![("strides", A::Is(vec![2, 2]))],
            )
            .node(
                "avg",
                "AveragePool",
                &["t"],
                &["b"],
                vec![
                    ("kernel_shape", A::Is(vec![3, 3])),
                    ("pads", A::Is(vec![1; 4])),
                    ("count_include_pad", A::I(1)),
                    ("strides", A::Is(vec![2, 2])),
                ],
            );
    });
    check(
        "ConvTranspose + AveragePool",
        &m,
        &[1, 16, 8, 8],
        &[
            ("deconv", Where::Accel("QConv2d")),
            ("avg", Where::Accel("QConv2d")),
        ],
        0.1,
    );
    // A 3x3 transposed convolution with padding and output padding, 24 channels.
    let m = sandwich(24, |m| {
        m.weight("wt", &[24, 24, 3, 3], 0.3)
            .node(
                "deconv",
                "ConvTranspose",
                &["a", "wt"],
                &["t"],
                vec![
                    ("strides", A::Is(vec![2, 2])),
                    ("pads", A::Is(vec![1; 4])),
                    ("output_padding", A::Is(vec![1, 1])),
                ],
            )
            .node(
                "pool",
                "MaxPool",
                &["t"],
                &["b"],
                vec![
                    ("kernel_shape", A::Is(vec![2, 2])),
                    ("strides", A::Is(vec![2, 2])),
                ],
            );
    });
    check(
        "ConvTranspose 3x3",
        &m,
        &[1, 24, 8, 8],
        &[("deconv", Where::Accel("QConv2d"))],
        0.1,
    );
}

#[test]
fn global_average_pool_over_a_plane_larger_than_acc() {
    // 64 x 64 = 4096 pixels per plane, more than half of the default ACC (1024 rows).
    let mut m = Model::new(17);
    m.input("x", &[1, 16, 64, 64])
        .weight("w1", &[16, 16, 1, 1], 0.3)
        .node("conv", "Conv", &["x", "w1"], &["a"], vec![])
        .node("gap", "GlobalAveragePool", &["a"], &["g"], vec![])
        .node("flat", "Flatten", &["g"], &["f"], vec![])
        .weight("wd", &[16, 10], 0.3)
        .node("fc", "MatMul", &["f", "wd"], &["l"], vec![])
        .node("sm", "Softmax", &["l"], &["y"], vec![])
        .output("y");
    check(
        "large GAP",
        &m,
        &[1, 16, 64, 64],
        &[("gap", Where::Accel("QGlobalAvgPool")), ("sm", Where::Cpu)],
        0.1,
    );
}

/// `x -> Q -> DQ -> ops -> Q -> DQ -> y`: QDQ forms of single operators.
fn qdq(op: impl FnOnce(&mut Model), out_scale: f32, out_zp: u8) -> Model {
    let mut m = Model::new(17);
    m.input("x", &[1, 16, 4, 4])
        .values("sx", &[], &[0.02])
        .init(
            "zx",
            Tensor::U8(ndarray::ArrayD::from_elem(ndarray::IxDyn(&[]), 120)),
        )
        .node("qx", "QuantizeLinear", &["x", "sx", "zx"], &["xq"], vec![])
        .node(
            "dqx",
            "DequantizeLinear",
            &["xq", "sx", "zx"],
            &["a"],
            vec![],
        );
    op(&mut m);
    m.values("sy", &[], &[out_scale])
        .init(
            "zy",
            Tensor::U8(ndarray::ArrayD::from_elem(ndarray::IxDyn(&[]), out_zp)),
        )
        .node("qy", "QuantizeLinear", &["b", "sy", "zy"], &["yq"], vec![])
        .node(
            "dqy",
            "DequantizeLinear",
            &["yq", "sy", "zy"],
            &["y"],
            vec![],
        )
        .output("y");
    m
}

#[test]
fn qdq_tables_are_exactly_onnx_and_alu_layers_within_one_lsb() {
    let cfg = isa::HwConfig::preset("default").unwrap();
    let cases: Vec<(&str, Model, Option<&str>, f32)> = vec![
        (
            "Sigmoid",
            qdq(
                |m| {
                    m.node("f", "Sigmoid", &["a"], &["b"], vec![]);
                },
                1.0 / 255.0,
                0,
            ),
            Some("QTable"),
            1.0 / 255.0,
        ),
        (
            "Tanh",
            qdq(
                |m| {
                    m.node("f", "Tanh", &["a"], &["b"], vec![]);
                },
                1.0 / 128.0,
                128,
            ),
            Some("QTable"),
            1.0 / 128.0,
        ),
        (
            "HardSwish",
            qdq(
                |m| {
                    m.node("f", "HardSwish", &["a"], &["b"], vec![]);
                },
                0.02,
                20,
            ),
            Some("QTable"),
            0.02,
        ),
        (
            "LeakyRelu",
            qdq(
                |m| {
                    m.node("f", "LeakyRelu", &["a"], &["b"], vec![("alpha", A::F(0.1))]);
                },
                0.015,
                100,
            ),
            Some("QLeakyRelu"),
            0.015,
        ),
        (
            "HardSigmoid",
            qdq(
                |m| {
                    m.node("f", "HardSigmoid", &["a"], &["b"], vec![]);
                },
                1.0 / 255.0,
                0,
            ),
            Some("QAffine"),
            1.0 / 255.0,
        ),
        (
            "Mul const",
            qdq(
                |m| {
                    let v: Vec<f32> = (0..16).map(|i| 0.25 + 0.1 * i as f32).collect();
                    m.values("k", &[16, 1, 1], &v)
                        .node("f", "Mul", &["a", "k"], &["b"], vec![]);
                },
                0.05,
                128,
            ),
            Some("QAffine"),
            0.05,
        ),
        (
            "SE Mul",
            qdq(
                |m| {
                    m.node("gap", "GlobalAveragePool", &["a"], &["g"], vec![])
                        .values("sg", &[], &[0.01])
                        .init(
                            "zg",
                            Tensor::U8(ndarray::ArrayD::from_elem(ndarray::IxDyn(&[]), 128)),
                        )
                        .node("qg", "QuantizeLinear", &["g", "sg", "zg"], &["gq"], vec![])
                        .node(
                            "dqg",
                            "DequantizeLinear",
                            &["gq", "sg", "zg"],
                            &["gd"],
                            vec![],
                        )
                        .node("f", "Mul", &["a", "gd"], &["b"], vec![]);
                },
                0.002,
                128,
            ),
            Some("QBinary"),
            // The pool runs on the accelerator too (its input zero point -8 in the bias of a
            // depthwise convolution), within 1 of its own LSB (0.01; half-up where ONNX rounds
            // half to even), which the Mul scales by |a| <= 2.7.
            0.002 + 2.7 * 0.01,
        ),
        (
            "Concat rescaled",
            qdq(
                |m| {
                    m.values("s2", &[], &[0.03])
                        .init(
                            "z2",
                            Tensor::U8(ndarray::ArrayD::from_elem(ndarray::IxDyn(&[]), 100)),
                        )
                        .node("q2", "QuantizeLinear", &["a", "s2", "z2"], &["aq2"], vec![])
                        .node(
                            "dq2",
                            "DequantizeLinear",
                            &["aq2", "s2", "z2"],
                            &["a2"],
                            vec![],
                        )
                        .node("f", "Concat", &["a", "a2"], &["b"], vec![("axis", A::I(1))]);
                },
                0.025,
                128,
            ),
            Some("QConcat"),
            0.025,
        ),
        (
            "Resize",
            qdq(
                |m| {
                    m.values("roi", &[0], &[])
                        .values("scales", &[4], &[1.0, 1.0, 2.0, 2.0])
                        .node(
                            "f",
                            "Resize",
                            &["a", "roi", "scales"],
                            &["b"],
                            vec![("mode", A::S("nearest"))],
                        );
                },
                0.02,
                120,
            ),
            Some("QUpsample"),
            0.0,
        ),
        (
            // onnxruntime's QDQ form of TensorFlow's bounded LeakyRelu before a pool: the
            // bound is not quantized, the pool's output is (the clamp moves after the pool).
            "Max then MaxPool",
            qdq(
                |m| {
                    m.values("lo", &[], &[-0.4])
                        .node("f", "Max", &["a", "lo"], &["c"], vec![])
                        .node(
                            "pool",
                            "MaxPool",
                            &["c"],
                            &["b"],
                            vec![
                                ("kernel_shape", A::Is(vec![2, 2])),
                                ("strides", A::Is(vec![2, 2])),
                            ],
                        );
                },
                0.025,
                100,
            ),
            Some("QMaxPool"),
            0.025,
        ),
    ];
    for (name, m, layer, lsb) in cases {
        let c = Compiled::compile(m.bytes(), name, &[], &cfg, &FrontendOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let kinds: Vec<&str> = c.plan.layers().map(Layer::kind).collect();
        if let Some(l) = layer {
            assert!(kinds.contains(&l), "{name}: {kinds:?}\n{}", c.support);
        }
        for s in 0..3 {
            let x = sample(&[1, 16, 4, 4], 50 + s, 2.5);
            let want = float_out(&m, &x).remove(0);
            let inputs = [Tensor::F32(x)];
            let mut dev = FsimDevice::checking_races(&cfg);
            let r = c.model.run(&mut dev, &inputs).unwrap();
            assert!(c.model.check(&inputs, &r).unwrap().is_exact(), "{name}");
            let got = r.outputs[0].as_f32().unwrap();
            let worst = got
                .iter()
                .zip(want.iter())
                .fold(0f32, |a, (g, w)| a.max((g - w).abs()));
            // Tables and data movement are ONNX's result exactly; the ALU layers within 1 LSB.
            let bound = if layer == Some("QTable") {
                0.0
            } else {
                lsb * 1.001
            };
            assert!(worst <= bound, "{name}: {worst} > {bound}");
        }
    }
}

#[test]
fn space_to_depth_and_depth_to_space_move_int8_data_on_the_cpu() {
    for mode in ["DCR", "CRD"] {
        let m = sandwich(16, |m| {
            m.node(
                "s2d",
                "SpaceToDepth",
                &["a"],
                &["s"],
                vec![("blocksize", A::I(2))],
            )
            .node(
                "d2s",
                "DepthToSpace",
                &["s"],
                &["b"],
                vec![("blocksize", A::I(2)), ("mode", A::S(mode))],
            );
        });
        check(
            mode,
            &m,
            &[1, 16, 8, 8],
            &[
                ("conv1", Where::Accel("QConv2d")),
                ("s2d", Where::Cpu),
                ("d2s", Where::Cpu),
                ("conv2", Where::Accel("QConv2d")),
            ],
            0.05,
        );
    }
}

#[test]
fn comparisons_and_where_of_run_time_tensors_run_on_the_cpu() {
    // A leaky ReLU written as a mask: Where(a < 0, 0.1 a, a); the bool mask is uint8 0/1.
    let m = sandwich(16, |m| {
        m.values("zero", &[], &[0.0])
            .values("k", &[], &[0.1])
            .node("lt", "Less", &["a", "zero"], &["mask"], vec![])
            .node("small", "Mul", &["a", "k"], &["s"], vec![])
            .node("sel", "Where", &["mask", "s", "a"], &["b"], vec![]);
    });
    check(
        "where",
        &m,
        &[1, 16, 8, 8],
        &[
            ("conv1", Where::Accel("QConv2d")),
            ("lt", Where::Cpu),
            ("sel", Where::Cpu),
            ("conv2", Where::Accel("QConv2d")),
        ],
        0.05,
    );
}

/// YOLO's box decoding views the head's output as [N, anchors, H, W, box] (rank 5): a table
/// activation there is no accelerator operand, so it is refused and runs on the CPU; the
/// network compiles (it used to fail with "layer is invalid: a rank-5 tensor").
#[test]
fn a_table_activation_on_a_rank_5_tensor_runs_on_the_cpu() {
    let m = sandwich(24, |m| {
        m.ints("five", &[1, 3, 8, 8, 8])
            .ints("four", &[1, 24, 8, 8])
            .node("view5", "Reshape", &["a", "five"], &["a5"], vec![])
            .node("sig", "Sigmoid", &["a5"], &["s5"], vec![])
            .node("view4", "Reshape", &["s5", "four"], &["b"], vec![]);
    });
    let c = check(
        "rank-5 sigmoid",
        &m,
        &[1, 24, 8, 8],
        &[
            ("conv1", Where::Accel("QConv2d")),
            ("sig", Where::Refused("QTable")),
            ("conv2", Where::Accel("QConv2d")),
        ],
        0.1,
    );
    let refusal = c.steps.iter().find(|s| s.kind == "QTable").unwrap();
    assert!(
        matches!(&refusal.report, LayerReport::Refused(r) if r.contains("rank 2 to 4")),
        "{:?}",
        refusal.report
    );
}

/// A model output that is a constant (an inference Dropout's mask, all ones) survives the
/// compiled model file: it loads, runs with the constant as that output, and checks.
#[test]
fn a_constant_model_output_survives_the_model_file() {
    let mut m = Model::new(17);
    m.input("x", &[1, 4, 4, 4])
        .weight("w", &[4, 4, 3, 3], 0.5)
        .node(
            "conv",
            "Conv",
            &["x", "w"],
            &["c"],
            vec![("pads", A::Is(vec![1; 4]))],
        )
        .node("drop", "Dropout", &["c"], &["y", "mask"], vec![])
        .output("y")
        .output("mask");
    let x = sample(&[1, 4, 4, 4], 3, 1.0);
    let cfg = isa::HwConfig::default();
    let c = Compiled::compile(
        m.bytes(),
        "dropout_mask",
        std::slice::from_ref(&x),
        &cfg,
        &FrontendOptions::default(),
    )
    .unwrap();
    let model = Compiledmodel::from_bytes(&c.to_bytes().unwrap(), "dropout_mask").unwrap();
    let inputs = [Tensor::F32(x)];
    let r = model.run(&mut FsimDevice::new(&cfg), &inputs).unwrap();
    assert!(model.check(&inputs, &r).unwrap().is_exact());
    match &r.outputs[1] {
        Tensor::U8(mask) => {
            assert_eq!(mask.shape(), &[1, 4, 4, 4]);
            assert!(mask.iter().all(|&v| v == 1), "{mask:?}");
        }
        other => panic!("the mask is {}", other.dtype()),
    }
}
