//! The tiny CNN of `tests/data/make_models.py` (sklearn digits, 8x8) in its three forms:
//! float (post-training quantized here), QDQ and QOperator (quantized by onnxruntime).
//! Checks the float executor against onnxruntime, the quantized plans' integer reference
//! outputs against the float model and against onnxruntime, the layers and the support table.

use std::path::{Path, PathBuf};

use compiler::frontend::{
    load_and_plan, load_calibration_npy, npy_to_f32, FrontendError, FrontendOptions,
    RequantFidelity,
};
use compiler::graph::plan::StepKind;
use compiler::graph::{passes, Layer, Plan, Support, SupportTable, Tensor};
use compiler::onnx::import::import;
use compiler::onnx::load_model;
use compiler::reference::{first_mismatch, run_plan};
use ndarray::{ArrayD, Axis, IxDyn};
use vta_runtime::budget::DEFAULT_MEMORY_BUDGET;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn npy(name: &str) -> ArrayD<f32> {
    npy_to_f32(&isa::npy::read_file(&data().join(name)).unwrap()).unwrap()
}

fn labels() -> Vec<i64> {
    let a = isa::npy::read_file(&data().join("digits_test_labels.npy")).unwrap();
    a.data
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn images() -> Vec<Tensor> {
    let t = npy("digits_test.npy");
    t.axis_iter(Axis(0))
        .map(|x| {
            Tensor::F32(
                x.to_owned()
                    .into_shape_with_order(IxDyn(&[1, 1, 8, 8]))
                    .unwrap(),
            )
        })
        .collect()
}

fn plan(model: &str, opts: &FrontendOptions) -> (Plan, SupportTable) {
    let calib = load_calibration_npy(&[&data().join("digits_calib.npy")]).unwrap();
    let cfg = isa::HwConfig::preset("default").unwrap();
    load_and_plan(&data().join(model), &calib, &cfg, opts).unwrap()
}

fn argmax(v: &[f32]) -> usize {
    v.iter()
        .enumerate()
        .fold(0, |b, (i, x)| if *x > v[b] { i } else { b })
}

fn run_all(p: &Plan) -> Vec<Vec<f32>> {
    images()
        .iter()
        .map(|x| {
            let t = run_plan(p, std::slice::from_ref(x)).unwrap();
            t.outputs(p)[0].as_f32().unwrap().iter().cloned().collect()
        })
        .collect()
}

fn rows(a: &ArrayD<f32>) -> Vec<Vec<f32>> {
    a.axis_iter(Axis(0))
        .map(|r| r.iter().cloned().collect())
        .collect()
}

#[test]
fn float_executor_matches_onnxruntime() {
    let path = data().join("tiny_cnn.onnx");
    let g0 = import(
        &load_model(&path).unwrap(),
        "tiny_cnn.onnx",
        DEFAULT_MEMORY_BUDGET,
        &[],
    )
    .unwrap();
    let mut g = g0.clone();
    passes::simplify(&mut g);
    let want = rows(&npy("tiny_cnn_out.npy"));
    for (x, w) in images().iter().zip(&want) {
        for graph in [&g0, &g] {
            let y = graph.run_outputs(std::slice::from_ref(x)).unwrap();
            let y = y[0].as_f32().unwrap();
            let d = y
                .iter()
                .zip(w)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(d < 1e-5, "difference {d}");
        }
    }
}

#[test]
fn float_model_quantized_agrees_with_float() {
    let (p, table) = plan("tiny_cnn.onnx", &FrontendOptions::default());
    let kinds: Vec<&str> = p.layers().map(|l| l.kind()).collect();
    assert_eq!(
        kinds,
        [
            "QConv2d",
            "QMaxPool",
            "QConv2d",
            "QConv2d",
            "QAdd",
            "QConv2d",
            "QGlobalAvgPool",
            "QDense"
        ]
    );
    // The depthwise convolution keeps its groups.
    let dw = p.layers().find(|l| l.name() == "/dw/Conv").unwrap();
    assert!(matches!(dw, Layer::Conv2d(c) if c.groups == 8 && c.weight.shape() == [8, 1, 3, 3]));
    // Steps: input quantization, 8 layers, a free int8 Flatten, dequantization, Softmax.
    assert!(
        matches!(p.steps[0].kind, StepKind::Quantize { q, lo: -128, hi: 127 } if q.zero_point == 0)
    );
    assert!(matches!(
        p.steps[p.steps.len() - 2].kind,
        StepKind::Dequantize(_)
    ));
    assert_eq!(p.steps.last().unwrap().kind_name(), "Cpu:Softmax");
    assert_eq!(table.unsupported().count(), 0);

    let float = rows(&npy("tiny_cnn_out.npy"));
    let quant = run_all(&p);
    let labels = labels();
    let n = float.len();
    let agree = float
        .iter()
        .zip(&quant)
        .filter(|(f, q)| argmax(f) == argmax(q))
        .count();
    let acc_f = float
        .iter()
        .zip(&labels)
        .filter(|(f, l)| argmax(f) as i64 == **l)
        .count();
    let acc_q = quant
        .iter()
        .zip(&labels)
        .filter(|(q, l)| argmax(q) as i64 == **l)
        .count();
    let max_d = float
        .iter()
        .zip(&quant)
        .flat_map(|(f, q)| f.iter().zip(q).map(|(a, b)| (a - b).abs()))
        .fold(0f32, f32::max);
    let cos: f32 = {
        let dot: f32 = float
            .iter()
            .flatten()
            .zip(quant.iter().flatten())
            .map(|(a, b)| a * b)
            .sum();
        let na: f32 = float.iter().flatten().map(|a| a * a).sum::<f32>().sqrt();
        let nb: f32 = quant.iter().flatten().map(|a| a * a).sum::<f32>().sqrt();
        dot / (na * nb)
    };
    println!("top-1 agreement {agree}/{n}, accuracy float {acc_f}/{n} int8 {acc_q}/{n}, max |dp| {max_d:.4}, cosine {cos:.5}");
    // Measured: 100/100 agreement, accuracy 98 -> 98, cosine 0.9999; thresholds leave room.
    assert!(agree >= 97, "top-1 agreement {agree}/{n}");
    assert!(acc_q + 2 >= acc_f, "accuracy {acc_q} vs float {acc_f}");
    assert!(cos > 0.995, "cosine similarity {cos}");
}

#[test]
fn requantization_never_overflows() {
    for model in ["tiny_cnn.onnx", "tiny_cnn_qdq.onnx", "tiny_cnn_qop.onnx"] {
        let (p, _) = plan(model, &FrontendOptions::default());
        for l in p.layers() {
            let (w, bias, rq) = match l {
                Layer::Conv2d(c) => (c.weight.clone().into_dyn(), c.bias.clone(), &c.requant),
                Layer::Dense(d) => (d.weight.clone().into_dyn(), d.bias.clone(), &d.requant),
                Layer::Add(a) => {
                    assert!(a.requant.shift <= 16);
                    continue;
                }
                Layer::GlobalAvgPool(g) => {
                    assert!(g.requant.shift <= 16);
                    continue;
                }
                Layer::Affine(a) => {
                    // A clamp of the QOperator form: |x * w + b| stays far from overflow.
                    assert!(a.requant.shift <= 16);
                    continue;
                }
                Layer::Binary(b) => {
                    // The QOperator form's float residual Add, run on int8 data.
                    assert!(b.requant.shift <= 16);
                    continue;
                }
                Layer::MaxPool(_) => continue,
                other => panic!("the tiny CNN has no {} layers", other.kind()),
            };
            // With an accumulator clamp the multiplication only sees the clamped range.
            let max_shift = if rq.acc_clamp.is_some() { 30 } else { 16 };
            assert!(rq.shift <= max_shift, "{}", l.name());
            let o = w.shape()[0];
            let per = w.len() / o;
            let wv: Vec<i64> = w.iter().map(|&v| i64::from(v)).collect();
            for c in 0..o {
                // Worst case over any int8 input (padding zeros included).
                let hi: i64 = i64::from(bias[c])
                    + wv[c * per..(c + 1) * per]
                        .iter()
                        .map(|&v| (v * 127).max(v * -128))
                        .sum::<i64>();
                let lo: i64 = i64::from(bias[c])
                    + wv[c * per..(c + 1) * per]
                        .iter()
                        .map(|&v| (v * 127).min(v * -128))
                        .sum::<i64>();
                for acc in [lo, hi] {
                    let a = match rq.acc_clamp {
                        Some((lo, hi)) => (acc >> rq.pre_shift).clamp(lo.into(), hi.into()),
                        None => acc >> rq.pre_shift,
                    };
                    let v = a * i64::from(rq.mul_of(c)) + (1i64 << rq.shift) / 2;
                    assert!(
                        v <= i64::from(i32::MAX) && v >= i64::from(i32::MIN),
                        "{}: channel {c} acc {acc}",
                        l.name()
                    );
                }
            }
        }
    }
}

fn max_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    a.iter()
        .zip(b)
        .flat_map(|(x, y)| x.iter().zip(y).map(|(p, q)| (p - q).abs()))
        .fold(0f32, f32::max)
}

#[test]
fn qdq_model_is_offloaded_and_close_to_onnxruntime() {
    let (p, table) = plan("tiny_cnn_qdq.onnx", &FrontendOptions::default());
    let kinds: Vec<&str> = p.layers().map(|l| l.kind()).collect();
    assert_eq!(
        kinds,
        [
            "QConv2d",
            "QMaxPool",
            "QConv2d",
            "QConv2d",
            "QAdd",
            "QConv2d",
            "QGlobalAvgPool",
            "QDense"
        ]
    );
    // Only Softmax (and the Q/DQ around it, and the input quantization) run on the CPU.
    let cpu: Vec<&str> = table
        .entries
        .iter()
        .filter(|e| matches!(e.support, Support::Cpu { .. }))
        .map(|e| e.op_type.as_str())
        .collect();
    assert!(
        cpu.iter()
            .all(|t| ["Softmax", "QuantizeLinear", "DequantizeLinear", "Flatten"].contains(t)),
        "{table}"
    );
    let ort = rows(&npy("tiny_cnn_qdq_out.npy"));
    let ours = run_all(&p);
    let agree = ort
        .iter()
        .zip(&ours)
        .filter(|(a, b)| argmax(a) == argmax(b))
        .count();
    let d = max_diff(&ort, &ours);
    println!("QDQ vs onnxruntime: top-1 {agree}/100, max |dp| {d}");
    assert!(agree >= 98, "{agree}");
    // Outputs are probabilities quantized with scale 1/127; layer-level differences of one
    // LSB propagate, so allow a few output steps.
    assert!(d <= 6.0 / 127.0, "{d}");

    // Bit-exact mode keeps every QDQ layer (float semantics) on the CPU, exactly.
    let opts = FrontendOptions {
        fidelity: RequantFidelity::BitExact,
        ..Default::default()
    };
    let (p2, t2) = plan("tiny_cnn_qdq.onnx", &opts);
    assert_eq!(
        p2.layers()
            .filter(|l| !matches!(l, Layer::MaxPool(_)))
            .count(),
        0,
        "{t2}"
    );
    assert!(t2.to_string().contains("bit-exact mode"));
    let ours2 = run_all(&p2);
    let agree2 = ort
        .iter()
        .zip(&ours2)
        .filter(|(a, b)| argmax(a) == argmax(b))
        .count();
    assert!(agree2 >= 98);
}

#[test]
fn qoperator_model_matches_onnxruntime() {
    let (p, table) = plan("tiny_cnn_qop.onnx", &FrontendOptions::default());
    // onnxruntime's default uint8 activations put zero points where the accelerator's zero
    // padding would be wrong: the padded convolutions get their input padded with the zero
    // point first, and all four are offloaded.
    let e = table.get("/pw/Conv_quant").unwrap();
    assert!(
        matches!(
            e.support,
            Support::Accel {
                layer: "QConv2d",
                ..
            }
        ),
        "{table}"
    );
    for conv in ["/c1/Conv_quant", "/dw/Conv_quant", "/c3/Conv_quant"] {
        let e = table.get(conv).unwrap();
        assert!(
            matches!(&e.support, Support::Accel { note, .. } if note.contains("input padded with its zero point")),
            "{table}"
        );
    }
    let ort = rows(&npy("tiny_cnn_qop_out.npy"));
    let ours = run_all(&p);
    let agree = ort
        .iter()
        .zip(&ours)
        .filter(|(a, b)| argmax(a) == argmax(b))
        .count();
    let d = max_diff(&ort, &ours);
    println!("QOperator vs onnxruntime: top-1 {agree}/100, max |dp| {d}");
    assert!(agree >= 98, "{agree}");
    assert!(d < 0.05, "{d}");
    // Bit-exact mode: QLinearConv with ONNX semantics on the CPU, as onnxruntime; only the
    // MaxPool, exact on int8 data, stays on the accelerator.
    let opts = FrontendOptions {
        fidelity: RequantFidelity::BitExact,
        ..Default::default()
    };
    let (p2, _) = plan("tiny_cnn_qop.onnx", &opts);
    assert!(
        p2.layers().all(|l| matches!(l, Layer::MaxPool(_))),
        "{:?}",
        p2.layers().map(|l| l.kind()).collect::<Vec<_>>()
    );
    let d2 = max_diff(&ort, &run_all(&p2));
    assert!(d2 < 1e-5, "bit-exact plan differs from onnxruntime by {d2}");
}

#[test]
fn support_table_of_the_float_model() {
    let (_, t) = plan("tiny_cnn.onnx", &FrontendOptions::default());
    let status = |n: &str| {
        t.get(n)
            .unwrap_or_else(|| panic!("no entry {n}"))
            .support
            .clone()
    };
    assert!(matches!(
        status("/c1/Conv"),
        Support::Accel {
            layer: "QConv2d",
            ..
        }
    ));
    assert!(
        matches!(status("/b1/BatchNormalization"), Support::Fused { into, .. } if into == "/c1/Conv")
    );
    assert!(matches!(status("/Relu"), Support::Fused { into, .. } if into == "/c1/Conv"));
    assert!(matches!(status("/Relu_2"), Support::Fused { into, .. } if into == "/Add"));
    assert!(matches!(
        status("/Add"),
        Support::Accel { layer: "QAdd", .. }
    ));
    assert!(matches!(
        status("/MatMul"),
        Support::Accel {
            layer: "QDense",
            ..
        }
    ));
    assert!(matches!(status("/Add_1"), Support::Fused { into, .. } if into == "/MatMul"));
    assert!(matches!(status("/Transpose"), Support::Removed { .. }));
    assert!(matches!(status("/Softmax"), Support::Cpu { .. }));
    assert_eq!(
        t.entries.len(),
        load_model(&data().join("tiny_cnn.onnx"))
            .unwrap()
            .graph
            .unwrap()
            .node
            .len()
    );
    let text = t.to_string();
    assert!(
        text.contains("accelerator") && text.contains("fused"),
        "{text}"
    );
}

#[test]
fn configs_and_options_that_keep_layers_on_the_cpu() {
    let calib = load_calibration_npy(&[&data().join("digits_calib.npy")]).unwrap();
    let path = data().join("tiny_cnn.onnx");
    // An accelerator with 16-bit accumulators runs no quantized layer (yet).
    let cfg = isa::HwConfig::load("i8w8a16").unwrap();
    let (p, t) = load_and_plan(&path, &calib, &cfg, &FrontendOptions::default()).unwrap();
    assert_eq!(p.layers().count(), 0);
    assert!(t.to_string().contains("32-bit accumulators"), "{t}");
    // Without ALU multiplier, requantization must be a pure shift: post-training quantization
    // chooses power-of-two multipliers.
    let mut cfg = isa::HwConfig::preset("default").unwrap();
    cfg.alu_mul = false;
    let (p, _) = load_and_plan(&path, &calib, &cfg, &FrontendOptions::default()).unwrap();
    for l in p.layers() {
        if let Layer::Conv2d(c) = l {
            assert!(
                c.requant.mul.iter().all(|&m| (m as u16).is_power_of_two()),
                "{}",
                c.name
            );
        }
    }
    // Offloading disabled: the plan is the float model, exactly.
    let (p, _) = load_and_plan(
        &path,
        &[],
        &isa::HwConfig::preset("default").unwrap(),
        &FrontendOptions {
            offload: false,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(p.layers().count(), 0);
    let float = rows(&npy("tiny_cnn_out.npy"));
    assert!(max_diff(&float, &run_all(&p)) < 1e-5);
    // A float model needs calibration data.
    let e = load_and_plan(
        &path,
        &[],
        &isa::HwConfig::preset("default").unwrap(),
        &FrontendOptions::default(),
    )
    .unwrap_err();
    assert!(matches!(e, FrontendError::Calibration { .. }), "{e}");
    assert!(e.to_string().contains("calibration"));
}

#[test]
fn traces_locate_the_first_mismatch() {
    let (p, _) = plan("tiny_cnn.onnx", &FrontendOptions::default());
    let x = images()[0].clone();
    let reference = run_plan(&p, &[x]).unwrap();
    assert_eq!(first_mismatch(&p, &reference, &reference.values), None);
    // Corrupt the output of the third accelerator layer.
    let k = p
        .steps
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_accel())
        .nth(2)
        .unwrap()
        .0;
    let v = p.steps[k].outputs[0];
    let mut got = reference.values.clone();
    if let Some(Tensor::I8(a)) = &mut got[v] {
        a[[0, 3, 1, 2]] = a[[0, 3, 1, 2]].wrapping_add(1);
    }
    // Later steps still read the reference values: only this one differs.
    let m = first_mismatch(&p, &reference, &got).unwrap();
    assert_eq!((m.step, m.value), (k, v));
    assert_eq!(m.index, vec![0, 3, 1, 2]);
    assert_eq!(m.got, m.expected + 1.0);
}
