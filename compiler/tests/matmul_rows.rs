//! MatMul of a rank-3 or rank-4 activation `[..., T, K]` by a constant `[K, M]` matrix (a
//! transformer's projections, as in PP-OCRv5's SVTR neck) runs as one dense layer over the
//! `rows = prod(...) * T` rows, its operand and result reshaped on the CPU (row-major: no data
//! change). In all three forms: a float model quantized after training, QOperator
//! (`QLinearMatMul`) and QDQ; each runs bit-exact against the integer reference on fsim and
//! agrees with the ONNX definition (within 1 LSB for onnxruntime's forms).

mod onnx_builder;

use compiler::compile::Compiled;
use compiler::frontend::{import_graph, FrontendOptions};
use compiler::graph::{Layer, Support, Tensor};
use ndarray::{ArrayD, IxDyn};
use onnx_builder::{sample, Model, A};
use vta_runtime::budget::DEFAULT_MEMORY_BUDGET;
use vta_sim::FsimDevice;

const K: usize = 20;
const M: usize = 24;
const SX: f32 = 0.02;
const SY: f32 = 0.06;

fn u8s(v: u8) -> Tensor {
    Tensor::U8(ArrayD::from_elem(IxDyn(&[]), v))
}

fn weights() -> Tensor {
    let mut s = 777u32;
    let v = (0..K * M)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (((s >> 8) % 255) as i32 - 127) as i8
        })
        .collect();
    Tensor::I8(ArrayD::from_shape_vec(IxDyn(&[K, M]), v).unwrap())
}

/// `x [..., K] -> MatMul [K, M] -> y` in `form` ("float", "qop" or "qdq").
fn model(form: &str, shape: &[usize]) -> Model {
    let mut m = Model::new(17);
    m.input("x", shape);
    let sw: Vec<f32> = (0..M).map(|j| 0.002 + 0.0001 * j as f32).collect();
    match form {
        "float" => {
            m.weight("w", &[K, M], 0.4)
                .node("mm", "MatMul", &["x", "w"], &["y"], vec![]);
        }
        _ => {
            m.values("sx", &[], &[SX])
                .init("zx", u8s(110))
                .values("sy", &[], &[SY])
                .init("zy", u8s(125))
                .values("sw", &[M], &sw)
                .init(
                    "zw",
                    Tensor::I8(ArrayD::from_shape_vec(IxDyn(&[M]), vec![0; M]).unwrap()),
                )
                .init("wq", weights())
                .node("qx", "QuantizeLinear", &["x", "sx", "zx"], &["xq"], vec![]);
            if form == "qop" {
                m.node(
                    "mm",
                    "QLinearMatMul",
                    &["xq", "sx", "zx", "wq", "sw", "zw", "sy", "zy"],
                    &["yq"],
                    vec![],
                );
            } else {
                m.node(
                    "dqx",
                    "DequantizeLinear",
                    &["xq", "sx", "zx"],
                    &["a"],
                    vec![],
                )
                .node(
                    "dqw",
                    "DequantizeLinear",
                    &["wq", "sw", "zw"],
                    &["w"],
                    vec![("axis", A::I(1))],
                )
                .node("mm", "MatMul", &["a", "w"], &["c"], vec![])
                .node("qy", "QuantizeLinear", &["c", "sy", "zy"], &["yq"], vec![]);
            }
            m.node(
                "dqy",
                "DequantizeLinear",
                &["yq", "sy", "zy"],
                &["y"],
                vec![],
            );
        }
    }
    m.output("y");
    m
}

fn run(c: &Compiled, x: &ArrayD<f32>) -> ArrayD<f32> {
    let mut dev = FsimDevice::checking_races(&c.model.config);
    let inputs = [Tensor::F32(x.clone())];
    let r = c.model.run(&mut dev, &inputs).unwrap();
    assert!(c.model.check(&inputs, &r).unwrap().is_exact());
    r.outputs[0].as_f32().unwrap().clone()
}

fn max_diff(a: &ArrayD<f32>, b: &ArrayD<f32>) -> f32 {
    assert_eq!(a.shape(), b.shape());
    a.iter()
        .zip(b.iter())
        .fold(0f32, |m, (x, y)| m.max((x - y).abs()))
}

#[test]
fn matmuls_of_rank_3_and_4_activations_run_as_one_dense_layer() {
    let cfg = isa::HwConfig::default();
    for shape in [vec![1, 6, K], vec![2, 3, 5, K]] {
        let rows: usize = shape[..shape.len() - 1].iter().product();
        let calib: Vec<ArrayD<f32>> = (0..3).map(|s| sample(&shape, 60 + s, 2.0)).collect();
        for form in ["float", "qop", "qdq"] {
            let m = model(form, &shape);
            let opts = FrontendOptions::default();
            let cal = if form == "float" { &calib[..] } else { &[] };
            let c = Compiled::compile(m.bytes(), "t.onnx", cal, &cfg, &opts).unwrap();
            let e = c.support.get("mm").unwrap();
            assert!(
                matches!(&e.support, Support::Accel { layer, .. } if *layer == "QDense"),
                "{form} {shape:?}:\n{}",
                c.compile_report()
            );
            let dense: Vec<_> = c
                .plan
                .layers()
                .filter_map(|l| match l {
                    Layer::Dense(d) => Some(d),
                    _ => None,
                })
                .collect();
            assert_eq!(dense.len(), 1);
            assert_eq!(dense[0].weight.dim(), (M, K));
            let x = sample(&shape, 9, 2.0);
            let ours = run(&c, &x);
            let mut out_shape = shape.clone();
            *out_shape.last_mut().unwrap() = M;
            assert_eq!(ours.shape(), &out_shape[..]);
            if form == "float" {
                let g = import_graph(&m.bytes(), "t.onnx", DEFAULT_MEMORY_BUDGET).unwrap();
                let want = g.run_outputs(&[Tensor::F32(x.clone())]).unwrap();
                let want = want[0].as_f32().unwrap();
                let range = want.iter().fold(0f32, |a, v| a.max(v.abs()));
                let d = max_diff(&ours, want);
                assert!(d <= 0.03 * range, "{shape:?}: {d} of {range}");
            } else {
                // The ONNX definition, every node on the CPU: within 1 output LSB.
                let exact = Compiled::compile(
                    m.bytes(),
                    "t.onnx",
                    &[],
                    &cfg,
                    &FrontendOptions {
                        offload: false,
                        ..Default::default()
                    },
                )
                .unwrap();
                let d = max_diff(&ours, &run(&exact, &x));
                assert!(d <= SY * 1.01, "{form} {shape:?}: {d}");
            }
            println!("{form} {shape:?}: one dense layer over {rows} rows");
        }
    }
}

#[test]
fn a_matmul_of_two_activations_stays_on_the_cpu_and_says_why() {
    // Attention's Q x K^T: both operands computed from the input.
    let calib = [sample(&[1, 6, K], 1, 1.0)];
    let mut m = Model::new(17);
    m.input("x", &[1, 6, K])
        .node(
            "t",
            "Transpose",
            &["x"],
            &["xt"],
            vec![("perm", A::Is(vec![0, 2, 1]))],
        )
        .node("mm", "MatMul", &["x", "xt"], &["y"], vec![])
        .output("y");
    let c = Compiled::compile(
        m.bytes(),
        "t.onnx",
        &calib,
        &isa::HwConfig::default(),
        &FrontendOptions::default(),
    )
    .unwrap();
    let e = c.support.get("mm").unwrap();
    assert!(
        matches!(&e.support, Support::Cpu { reason, .. } if reason.contains("B is not constant")),
        "{}",
        c.compile_report()
    );
}
