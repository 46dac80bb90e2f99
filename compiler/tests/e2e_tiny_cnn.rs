//! End to end on the committed tiny CNN (sklearn digits, 8x8; `tests/data/make_models.py`):
//! compile the float model (calibrated with `digits_calib.npy`) and its QDQ and QOperator
//! forms, write and read the compiled-model file, run on the functional simulator, check every
//! step against the integer reference, and measure accuracy against the fp32 model.

use std::path::{Path, PathBuf};

use compiler::compile::Compiled;
use compiler::frontend::{load_calibration_npy, npy_to_f32, FrontendOptions};
use compiler::graph::plan::StepKind;
use compiler::graph::{Layer, Tensor};
use ndarray::{ArrayD, Axis, IxDyn};
use vta_runtime::model::{Check, Model, Place};
use vta_sim::FsimDevice;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn npy(name: &str) -> ArrayD<f32> {
    npy_to_f32(&isa::npy::read_file(&data().join(name)).unwrap()).unwrap()
}

fn images() -> Vec<Tensor> {
    npy("digits_test.npy")
        .axis_iter(Axis(0))
        .map(|x| {
            Tensor::F32(
                x.to_owned()
                    .into_shape_with_order(IxDyn(&[1, 1, 8, 8]))
                    .unwrap(),
            )
        })
        .collect()
}

fn labels() -> Vec<usize> {
    let a = isa::npy::read_file(&data().join("digits_test_labels.npy")).unwrap();
    a.data
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as usize)
        .collect()
}

fn argmax(v: &[f32]) -> usize {
    v.iter()
        .enumerate()
        .fold(0, |b, (i, x)| if *x > v[b] { i } else { b })
}

fn compile(model: &str, cfg: &str) -> Compiled {
    let calib = load_calibration_npy(&[&data().join("digits_calib.npy")]).unwrap();
    let bytes = std::fs::read(data().join(model)).unwrap();
    let cfg = isa::HwConfig::preset(cfg).unwrap();
    Compiled::compile(bytes, model, &calib, &cfg, &FrontendOptions::default()).unwrap()
}

/// Runs `n` test images on fsim, checks every run against the integer reference, and
/// returns the output scores.
fn run_checked(m: &Model, n: usize) -> Vec<Vec<f32>> {
    let mut dev = FsimDevice::new(&m.config);
    images()
        .into_iter()
        .take(n)
        .map(|x| {
            let inputs = [x];
            let r = m.run(&mut dev, &inputs).unwrap();
            let c = m.check(&inputs, &r).unwrap();
            assert!(c.is_exact(), "{}: {c}", m.source);
            r.outputs[0].as_f32().unwrap().iter().copied().collect()
        })
        .collect()
}

#[test]
fn float_model_is_bit_exact_and_as_accurate_as_fp32() {
    let m = compile("tiny_cnn.onnx", "default");
    let (accel, cpu) = m.counts();
    assert_eq!(accel, 8, "{}", m.compile_report());
    // quantize, flatten, dequantize, softmax
    assert_eq!(cpu, 4, "{}", m.compile_report());
    // Through the file: the plan and the programs are stored (no front end, no calibration data
    // at load), and writing again gives the same bytes.
    let bytes = m.to_bytes().unwrap();
    let m = Model::from_bytes(&bytes, "tiny_cnn.vtab").unwrap();
    assert_eq!(m.to_bytes().unwrap(), bytes);

    let ours = run_checked(&m, 100);
    let fp32: Vec<Vec<f32>> = npy("tiny_cnn_out.npy")
        .axis_iter(Axis(0))
        .map(|r| r.iter().copied().collect())
        .collect();
    let labels = labels();
    let acc = |s: &[Vec<f32>]| {
        s.iter()
            .zip(&labels)
            .filter(|(p, &l)| argmax(p) == l)
            .count()
    };
    let agree = ours
        .iter()
        .zip(&fp32)
        .filter(|(a, b)| argmax(a) == argmax(b))
        .count();
    let (acc_q, acc_f) = (acc(&ours), acc(&fp32));
    println!("tiny CNN on fsim: accuracy {acc_q}/100 (fp32 {acc_f}/100), top-1 agreement with fp32 {agree}/100");
    // Measured: 98/100 for both, 100/100 agreement.
    assert!(acc_f >= 97, "fp32 accuracy {acc_f}");
    assert!(acc_q + 1 >= acc_f, "int8 accuracy {acc_q} vs fp32 {acc_f}");
    assert!(agree >= 98, "agreement {agree}");
}

#[test]
fn qdq_and_qoperator_forms_are_bit_exact() {
    for (model, min_accel) in [("tiny_cnn_qdq.onnx", 8), ("tiny_cnn_qop.onnx", 1)] {
        let c = compile(model, "default");
        let bytes = c.to_bytes().unwrap();
        let m = Model::from_bytes(&bytes, model).unwrap();
        assert!(m.counts().0 >= min_accel, "{}", c.compile_report());
        let ort: Vec<usize> = npy(&model.replace(".onnx", "_out.npy"))
            .axis_iter(Axis(0))
            .map(|r| argmax(r.as_slice().unwrap()))
            .collect();
        let ours = run_checked(&m, 25);
        let agree = ours
            .iter()
            .zip(&ort)
            .filter(|(a, &b)| argmax(a) == b)
            .count();
        assert!(
            agree >= 24,
            "{model}: top-1 agreement with onnxruntime {agree}/25"
        );
    }
}

#[test]
fn other_configs_run_bit_exact() {
    for cfg in ["batched", "rect", "small"] {
        let m = compile("tiny_cnn.onnx", cfg);
        assert!(m.counts().0 >= 6, "{cfg}:\n{}", m.compile_report());
        run_checked(&m, 3);
    }
}

#[test]
fn per_layer_breakdown_has_device_counters() {
    let m = compile("tiny_cnn.onnx", "default");
    let mut dev = FsimDevice::new(&m.config);
    let x = images().swap_remove(0);
    let r = m.run(&mut dev, &[x]).unwrap();
    assert_eq!(r.layers.len(), m.plan.steps.len());
    for l in &r.layers {
        match l.place {
            Place::Accelerator => {
                assert!(l.get("alu_uops").is_some() && l.dram_bytes().unwrap() > 0);
                if l.kind == "QConv2d" || l.kind == "QDense" {
                    assert!(l.get("gemm_uops").unwrap() > 0, "{}", l.name);
                }
            }
            Place::Cpu => assert!(l.report.is_none()),
        }
    }
    let table = r.table();
    assert!(
        table.contains("GEMM uops") && table.contains("/c1/Conv"),
        "{table}"
    );
    assert!(
        table.contains("no cycle counts (fsim is not cycle-accurate)"),
        "{table}"
    );
    let report = m.compile_report();
    assert!(
        report.contains("co-outer") || report.contains("spatial-outer"),
        "{report}"
    );
}

#[test]
fn check_reports_the_first_mismatch() {
    let m = compile("tiny_cnn.onnx", "default");
    let mut dev = FsimDevice::new(&m.config);
    let inputs = [images().swap_remove(1)];
    let mut r = m.run(&mut dev, &inputs).unwrap();
    let c = m.check(&inputs, &r).unwrap();
    assert!(
        matches!(
            c,
            Check::BitExact {
                layers: 12,
                accel_layers: 8,
                ..
            }
        ),
        "{c}"
    );
    assert!(c.to_string().starts_with("bit-exact: 12 layers"), "{c}");
    // Corrupt the third accelerator step's output as if the device had computed it wrongly.
    let k = m.accel[2].step;
    let v = m.plan.steps[k].outputs[0];
    if let Some(Tensor::I8(a)) = &mut r.values[v] {
        let e = a.iter_mut().nth(5).unwrap();
        *e = e.wrapping_add(1);
    }
    let c = m.check(&inputs, &r).unwrap();
    let Check::Mismatch(mm) = &c else {
        panic!("{c}")
    };
    assert_eq!((mm.mismatch.step, mm.mismatch.flat_index), (k, 5));
    assert_eq!(mm.place, Place::Accelerator);
    assert!(c.to_string().contains(&m.plan.steps[k].name), "{c}");
}

#[test]
fn compiled_model_file_rejects_bad_files() {
    let m = compile("tiny_cnn.onnx", "default");
    let bytes = m.to_bytes().unwrap();
    assert_eq!(&bytes[..8], b"VTAMODEL");
    let err = |b: &[u8]| Model::from_bytes(b, "m.vtab").unwrap_err().to_string();

    // Same ISA (bus width only differs): accepted; another ISA: refused, naming both configs.
    let wide = isa::HwConfig::preset("wide-bus").unwrap();
    assert!(Model::from_bytes_for(&bytes, "m.vtab", &wide).is_ok());
    let batched = isa::HwConfig::preset("batched").unwrap();
    let e = Model::from_bytes_for(&bytes, "m.vtab", &batched)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("m.vtab: ")
            && e.contains("compiled for config 1x16_i8w8a32_15_15_18_17")
            && e.contains(&batched.config_string()),
        "{e}"
    );
    // A newer format version is refused before anything else is read; version 1 (which
    // rebuilt the plan from a stored ONNX model) asks for a recompile.
    let mut b = bytes.clone();
    b[8..12].copy_from_slice(&3u32.to_le_bytes());
    assert!(err(&b).contains("format version 3 is newer"), "{}", err(&b));
    b[8..12].copy_from_slice(&1u32.to_le_bytes());
    assert!(err(&b).contains("recompile the model"), "{}", err(&b));
    // Corruption anywhere after the length is caught by the checksum; truncation is called
    // truncation, and trailing bytes are refused.
    for i in (20..bytes.len()).step_by(61) {
        let mut b = bytes.clone();
        b[i] ^= 0x20;
        assert!(
            err(&b).contains("checksum mismatch"),
            "byte {i}: {}",
            err(&b)
        );
    }
    for n in (0..bytes.len()).step_by(89) {
        let e = err(&bytes[..n]);
        assert!(e.starts_with("m.vtab: "), "{e}");
        if n >= 8 {
            assert!(e.contains("truncated"), "{n} bytes: {e}");
        }
    }
    let mut long = bytes.clone();
    long.push(0);
    assert!(
        err(&long).contains("1 byte after the end"),
        "{}",
        err(&long)
    );
    // Other files say what they are.
    assert!(err(b"").contains("the file is empty"), "{}", err(b""));
    let onnx = std::fs::read(data().join("tiny_cnn.onnx")).unwrap();
    assert!(
        err(&onnx).contains("compile it with `vta compile`"),
        "{}",
        err(&onnx)
    );
    let prog = m.accel[0].program().unwrap();
    let vtab = isa::container::write(&prog.program).unwrap();
    assert!(err(&vtab).contains("program container"), "{}", err(&vtab));
    // A plan that refers to values it does not have, or programs that do not match its
    // accelerator steps, are refused (a well-formed file with a valid checksum can still be
    // inconsistent).
    let mut bad = m.model.clone();
    bad.plan.steps[3].inputs[0] = 9999;
    let e = err(&bad.to_bytes().unwrap());
    assert!(e.contains("refers to value 9999"), "{e}");
    // Layer parameters that do not fit their tensors (a bias too short for the output
    // channels) would panic a kernel: refused at load, naming the step.
    let mut bad = m.model.clone();
    let k = bad.accel[0].step;
    let StepKind::Accel(Layer::Conv2d(conv)) = &mut bad.plan.steps[k].kind else {
        panic!("the first accelerator step is a convolution")
    };
    conv.bias.pop();
    let e = err(&bad.to_bytes().unwrap());
    assert!(
        e.contains(&format!("step {k}")) && e.contains("biases"),
        "{e}"
    );
    let mut bad = m.model.clone();
    bad.accel.remove(3);
    let e = err(&bad.to_bytes().unwrap());
    assert!(e.contains("the plan has accelerator steps"), "{e}");
}
