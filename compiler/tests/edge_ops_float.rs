//! The float semantics of the edge-CNN operators (Sigmoid, HardSigmoid, HardSwish, SiLU,
//! Tanh, LeakyRelu, PRelu, Erf, Exp, Gelu, Softplus, Mish, broadcast Mul/Add/Sub/Div, Resize,
//! ConvTranspose, Split, Slice, Pad, Concat), each imported from a small ONNX model and run by
//! the graph executor, against an independent computation in f64 (or, for ConvTranspose, the
//! adjoint identity with the convolution).

mod onnx_builder;

use compiler::frontend::import_graph;
use compiler::graph::{Graph, Tensor};
use ndarray::{ArrayD, Dimension, IxDyn};
use onnx_builder::{sample, Model, A};
use vta_runtime::budget::DEFAULT_MEMORY_BUDGET;

fn graph(m: &Model) -> Graph {
    import_graph(&m.bytes(), "t.onnx", DEFAULT_MEMORY_BUDGET).unwrap_or_else(|e| panic!("{e}"))
}

fn run(m: &Model, x: &ArrayD<f32>) -> Vec<ArrayD<f32>> {
    graph(m)
        .run_outputs(&[Tensor::F32(x.clone())])
        .unwrap()
        .into_iter()
        .map(|t| t.as_f32().unwrap().clone())
        .collect()
}

fn one_node(op: &str, attrs: Vec<(&str, A)>, shape: &[usize], opset: i64) -> Model {
    let mut m = Model::new(opset);
    m.input("x", shape)
        .node("n", op, &["x"], &["y"], attrs)
        .output("y");
    m
}

/// erf by Simpson's rule on 2/sqrt(pi) exp(-t^2) (independent of the runtime's series).
fn erf_simpson(x: f64) -> f64 {
    let n = 4000;
    let h = x / n as f64;
    let f = |t: f64| (-t * t).exp();
    let mut s = f(0.0) + f(x);
    for i in 1..n {
        s += f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    s * h / 3.0 * 2.0 / std::f64::consts::PI.sqrt()
}

fn assert_close(
    what: &str,
    got: &ArrayD<f32>,
    want: impl Fn(&[usize], f64) -> f64,
    x: &ArrayD<f32>,
) {
    assert_eq!(got.shape(), x.shape(), "{what}: shape");
    for ((ix, &g), &xv) in got.indexed_iter().zip(x.iter()) {
        let w = want(ix.slice(), f64::from(xv));
        let tol = 2e-6 * w.abs().max(1.0);
        assert!(
            (f64::from(g) - w).abs() <= tol,
            "{what} at {:?} (x = {xv}): got {g}, want {w}",
            ix.slice()
        );
    }
}

#[test]
fn single_input_functions_match_their_definitions() {
    let shape = [1, 3, 8, 8];
    let x = sample(&shape, 3, 6.0);
    let sig = |v: f64| 1.0 / (1.0 + (-v).exp());
    let softplus = |v: f64| (1.0 + v.exp()).ln();
    type F = Box<dyn Fn(f64) -> f64>;
    type Case<'a> = (&'a str, Vec<(&'a str, A)>, i64, F);
    let cases: Vec<Case> = vec![
        ("Sigmoid", vec![], 13, Box::new(sig)),
        (
            "HardSigmoid",
            vec![("alpha", A::F(0.3)), ("beta", A::F(0.4))],
            13,
            Box::new(|v| (0.3 * v + 0.4).clamp(0.0, 1.0)),
        ),
        (
            "HardSwish",
            vec![],
            14,
            Box::new(|v| v * (v + 3.0).clamp(0.0, 6.0) / 6.0),
        ),
        ("Tanh", vec![], 13, Box::new(f64::tanh)),
        (
            "LeakyRelu",
            vec![("alpha", A::F(0.2))],
            13,
            Box::new(|v| if v >= 0.0 { v } else { 0.2 * v }),
        ),
        ("Erf", vec![], 13, Box::new(erf_simpson)),
        ("Exp", vec![], 13, Box::new(f64::exp)),
        (
            "Gelu",
            vec![],
            20,
            Box::new(|v| 0.5 * v * (1.0 + erf_simpson(v / 2f64.sqrt()))),
        ),
        (
            "Gelu",
            vec![("approximate", A::S("tanh"))],
            20,
            Box::new(|v| {
                0.5 * v
                    * (1.0
                        + ((2.0 / std::f64::consts::PI).sqrt() * (v + 0.044715 * v * v * v)).tanh())
            }),
        ),
        ("Softplus", vec![], 13, Box::new(softplus)),
        (
            "Mish",
            vec![],
            18,
            Box::new(move |v| v * softplus(v).tanh()),
        ),
    ];
    for (op, attrs, opset, f) in cases {
        let y = run(&one_node(op, attrs, &shape, opset), &x);
        assert_close(op, &y[0], |_, v| f(v), &x);
    }
}

#[test]
fn silu_and_hardswish_gates_are_fused_and_keep_their_values() {
    let shape = [1, 4, 5, 5];
    let x = sample(&shape, 5, 5.0);
    // x * Sigmoid(x), as YOLOv5/v8 export SiLU.
    let mut m = Model::new(13);
    m.input("x", &shape)
        .node("sig", "Sigmoid", &["x"], &["s"], vec![])
        .node("mul", "Mul", &["x", "s"], &["y"], vec![])
        .output("y");
    let g = graph(&m);
    assert_eq!(g.node_count(), 1, "Sigmoid and Mul fuse into one SiLU");
    assert!(g
        .fusions
        .iter()
        .any(|(n, into, _)| n.name == "mul" && into == "sig"));
    let y = run(&m, &x);
    assert_close("SiLU", &y[0], |_, v| v / (1.0 + (-v).exp()), &x);
    // x * HardSigmoid(x) with HardSwish's constants.
    let mut m = Model::new(13);
    m.input("x", &shape)
        .node(
            "hs",
            "HardSigmoid",
            &["x"],
            &["s"],
            vec![("alpha", A::F(1.0 / 6.0)), ("beta", A::F(0.5))],
        )
        .node("mul", "Mul", &["s", "x"], &["y"], vec![])
        .output("y");
    assert_eq!(graph(&m).node_count(), 1);
    let y = run(&m, &x);
    assert_close(
        "HardSwish",
        &y[0],
        |_, v| v * (v + 3.0).clamp(0.0, 6.0) / 6.0,
        &x,
    );
}

#[test]
fn prelu_and_broadcast_arithmetic() {
    let shape = [2, 3, 4, 5];
    let x = sample(&shape, 7, 3.0);
    let slopes = [0.1f32, -0.5, 2.0];
    let c = [1.5f32, -2.0, 0.25];
    // PRelu with a per-channel slope [C, 1, 1].
    let mut m = Model::new(13);
    m.input("x", &shape)
        .values("s", &[3, 1, 1], &slopes)
        .node("p", "PRelu", &["x", "s"], &["y"], vec![])
        .output("y");
    let y = run(&m, &x);
    assert_close(
        "PRelu",
        &y[0],
        |ix, v| {
            if v >= 0.0 {
                v
            } else {
                f64::from(slopes[ix[1]]) * v
            }
        },
        &x,
    );
    for (op, f) in [
        (
            "Mul",
            Box::new(|v: f64, k: f64| v * k) as Box<dyn Fn(f64, f64) -> f64>,
        ),
        ("Add", Box::new(|v, k| v + k)),
        ("Sub", Box::new(|v, k| v - k)),
        ("Div", Box::new(|v, k| v / k)),
    ] {
        let mut m = Model::new(13);
        m.input("x", &shape)
            .values("c", &[1, 3, 1, 1], &c)
            .node("b", op, &["x", "c"], &["y"], vec![])
            .output("y");
        let y = run(&m, &x);
        assert_close(op, &y[0], |ix, v| f(v, f64::from(c[ix[1]])), &x);
    }
    // Two tensors, the second broadcast over the plane (squeeze-and-excite).
    let mut m = Model::new(13);
    m.input("x", &shape)
        .node("gap", "GlobalAveragePool", &["x"], &["p"], vec![])
        .node("mul", "Mul", &["x", "p"], &["y"], vec![])
        .output("y");
    let y = run(&m, &x);
    let mean = |b: usize, ch: usize| {
        (0..4)
            .flat_map(|i| (0..5).map(move |j| (i, j)))
            .map(|(i, j)| f64::from(x[[b, ch, i, j]]))
            .sum::<f64>()
            / 20.0
    };
    assert_close("SE Mul", &y[0], |ix, v| v * mean(ix[0], ix[1]), &x);
}

#[test]
fn resize_nearest_and_linear() {
    let shape = [1, 2, 3, 4];
    let x = sample(&shape, 11, 1.0);
    let scales = [1.0f32, 1.0, 2.0, 2.0];
    let nearest = |x: &ArrayD<f32>| {
        ArrayD::from_shape_fn(IxDyn(&[1, 2, 6, 8]), |ix| {
            x[[ix[0], ix[1], ix[2] / 2, ix[3] / 2]]
        })
    };
    // opset 11+: roi, scales; half_pixel with round_prefer_floor (the defaults), and
    // PyTorch's asymmetric + floor.
    for attrs in [
        vec![("mode", A::S("nearest"))],
        vec![
            ("mode", A::S("nearest")),
            ("coordinate_transformation_mode", A::S("asymmetric")),
            ("nearest_mode", A::S("floor")),
        ],
    ] {
        let mut m = Model::new(13);
        m.input("x", &shape)
            .values("roi", &[0], &[])
            .values("scales", &[4], &scales)
            .node("r", "Resize", &["x", "roi", "scales"], &["y"], attrs)
            .output("y");
        assert_eq!(run(&m, &x)[0], nearest(&x));
    }
    // sizes instead of scales, and the opset-9 Upsample.
    let mut m = Model::new(13);
    m.input("x", &shape)
        .values("roi", &[0], &[])
        .values("scales", &[0], &[])
        .ints("sizes", &[1, 2, 6, 8])
        .node(
            "r",
            "Resize",
            &["x", "roi", "scales", "sizes"],
            &["y"],
            vec![("mode", A::S("nearest"))],
        )
        .output("y");
    assert_eq!(run(&m, &x)[0], nearest(&x));
    let mut m = Model::new(9);
    m.input("x", &shape)
        .values("scales", &[4], &scales)
        .node("u", "Upsample", &["x", "scales"], &["y"], vec![])
        .output("y");
    assert_eq!(run(&m, &x)[0], nearest(&x));
    // Bilinear, half_pixel: source coordinate (o + 0.5) / 2 - 0.5 clamped to the input.
    let mut m = Model::new(13);
    m.input("x", &shape)
        .values("roi", &[0], &[])
        .values("scales", &[4], &scales)
        .node(
            "r",
            "Resize",
            &["x", "roi", "scales"],
            &["y"],
            vec![("mode", A::S("linear"))],
        )
        .output("y");
    let y = run(&m, &x);
    let tap = |o: usize, len: usize| {
        let s = ((o as f64 + 0.5) / 2.0 - 0.5).clamp(0.0, (len - 1) as f64);
        let i0 = s.floor() as usize;
        (i0, (i0 + 1).min(len - 1), s - i0 as f64)
    };
    let want = ArrayD::from_shape_fn(IxDyn(&[1, 2, 6, 8]), |ix| {
        let (y0, y1, wy) = tap(ix[2], 3);
        let (x0, x1, wx) = tap(ix[3], 4);
        let v = |a: usize, b: usize| f64::from(x[[0, ix[1], a, b]]);
        (1.0 - wy) * ((1.0 - wx) * v(y0, x0) + wx * v(y0, x1))
            + wy * ((1.0 - wx) * v(y1, x0) + wx * v(y1, x1))
    });
    for (g, w) in y[0].iter().zip(want.iter()) {
        assert!((f64::from(*g) - w).abs() < 1e-6, "bilinear {g} vs {w}");
    }
}

#[test]
fn conv_transpose_is_the_adjoint_of_the_convolution() {
    // <Conv_W(z), x> = <z, ConvTranspose_W(x)> for the convolution with the same stride and
    // pads [p, p, p - output_padding, p - output_padding].
    let (ci, co, h, k, s, p, op) = (3usize, 4usize, 5usize, 3usize, 2usize, 1usize, 1usize);
    let l = (h - 1) * s + k + op - 2 * p;
    let w = sample(&[ci, co, k, k], 21, 0.5);
    let x = sample(&[1, ci, h, h], 22, 1.0);
    let z = sample(&[1, co, l, l], 23, 1.0);
    let mut t = Model::new(13);
    t.input("x", &[1, ci, h, h])
        .init("w", Tensor::F32(w.clone()))
        .node(
            "ct",
            "ConvTranspose",
            &["x", "w"],
            &["y"],
            vec![
                ("strides", A::Is(vec![s as i64; 2])),
                ("pads", A::Is(vec![p as i64; 4])),
                ("output_padding", A::Is(vec![op as i64; 2])),
            ],
        )
        .output("y");
    let tx = run(&t, &x).remove(0);
    assert_eq!(tx.shape(), &[1, co, l, l]);
    let mut c = Model::new(13);
    let q = (p - op) as i64;
    c.input("z", &[1, co, l, l])
        .init("w", Tensor::F32(w))
        .node(
            "c",
            "Conv",
            &["z", "w"],
            &["y"],
            vec![
                ("strides", A::Is(vec![s as i64; 2])),
                ("pads", A::Is(vec![p as i64, p as i64, q, q])),
            ],
        )
        .output("y");
    let cz = run(&c, &z).remove(0);
    assert_eq!(cz.shape(), x.shape());
    let dot = |a: &ArrayD<f32>, b: &ArrayD<f32>| {
        a.iter()
            .zip(b.iter())
            .map(|(u, v)| f64::from(*u) * f64::from(*v))
            .sum::<f64>()
    };
    let (lhs, rhs) = (dot(&cz, &x), dot(&z, &tx));
    assert!(
        (lhs - rhs).abs() < 1e-4 * lhs.abs().max(1.0),
        "{lhs} vs {rhs}"
    );
    // The bias is added to every output.
    let mut b = Model::new(13);
    b.input("x", &[1, ci, h, h])
        .init("w", Tensor::F32(sample(&[ci, co, k, k], 21, 0.5)))
        .values("b", &[co], &[1.0, 2.0, 3.0, 4.0])
        .node(
            "ct",
            "ConvTranspose",
            &["x", "w", "b"],
            &["y"],
            vec![
                ("strides", A::Is(vec![s as i64; 2])),
                ("pads", A::Is(vec![p as i64; 4])),
                ("output_padding", A::Is(vec![op as i64; 2])),
            ],
        )
        .output("y");
    let tb = run(&b, &x).remove(0);
    for (ix, v) in tb.indexed_iter() {
        let want = tx[&ix] + (ix[1] + 1) as f32;
        assert!((v - want).abs() < 1e-5);
    }
}

#[test]
fn split_slice_pad_concat_move_data() {
    let shape = [1, 6, 4, 5];
    let x = sample(&shape, 31, 1.0);
    let mut m = Model::new(13);
    m.input("x", &shape)
        .ints("parts", &[2, 4])
        .node(
            "s",
            "Split",
            &["x", "parts"],
            &["a", "b"],
            vec![("axis", A::I(1))],
        )
        .ints("st", &[1, -1])
        .ints("en", &[4, 0])
        .ints("ax", &[2, 3])
        .ints("sp", &[2, -2])
        .node(
            "sl",
            "Slice",
            &["b", "st", "en", "ax", "sp"],
            &["c"],
            vec![],
        )
        .ints("pads", &[0, 0, 1, 2, 0, 0, 0, 1])
        .node(
            "p",
            "Pad",
            &["a", "pads"],
            &["d"],
            vec![("mode", A::S("reflect"))],
        )
        .node(
            "cat",
            "Concat",
            &["a", "x"],
            &["e"],
            vec![("axis", A::I(1))],
        )
        .output("c")
        .output("d")
        .output("e");
    let y = run(&m, &x);
    // Slice: rows 1, 3 of channels 2..6; columns 4, 2 (from -1 backwards by 2, end 0).
    assert_eq!(y[0].shape(), &[1, 4, 2, 2]);
    for (ix, v) in y[0].indexed_iter() {
        assert_eq!(*v, x[[0, 2 + ix[1], 1 + 2 * ix[2], 4 - 2 * ix[3]]]);
    }
    // Pad: reflect 1 row on top, 2 columns left, 1 column right.
    assert_eq!(y[1].shape(), &[1, 2, 5, 8]);
    let refl = |i: isize, n: isize| {
        if i < 0 {
            -i
        } else if i >= n {
            2 * (n - 1) - i
        } else {
            i
        }
    };
    for (ix, v) in y[1].indexed_iter() {
        let r = refl(ix[2] as isize - 1, 4) as usize;
        let c = refl(ix[3] as isize - 2, 5) as usize;
        assert_eq!(*v, x[[0, ix[1], r, c]]);
    }
    // Concat along channels.
    assert_eq!(y[2].shape(), &[1, 8, 4, 5]);
    for (ix, v) in y[2].indexed_iter() {
        let src = if ix[1] < 2 { ix[1] } else { ix[1] - 2 };
        assert_eq!(*v, x[[0, src, ix[2], ix[3]]]);
    }
    // A zero Pad before a Conv becomes the convolution's padding.
    let mut m = Model::new(13);
    m.input("x", &shape)
        .ints("pads", &[0, 0, 1, 1, 0, 0, 1, 1])
        .node("p", "Pad", &["x", "pads"], &["xp"], vec![])
        .weight("w", &[2, 6, 3, 3], 0.3)
        .node("c", "Conv", &["xp", "w"], &["y"], vec![])
        .output("y");
    let g = graph(&m);
    assert_eq!(g.node_count(), 1, "Pad folded into the Conv");
    let mut m2 = Model::new(13);
    m2.input("x", &shape)
        .init("w", m.inits[1].1.clone())
        .node(
            "c",
            "Conv",
            &["x", "w"],
            &["y"],
            vec![("pads", A::Is(vec![1; 4]))],
        )
        .output("y");
    assert_eq!(run(&m, &x), run(&m2, &x));
}
