//! End-to-end tests of `vta compile`, `vta run` and `vta zoo`: the tiny CNN of
//! `compiler/tests/data` (float, QDQ and QOperator forms) compiled and run on fsim with the
//! integer-reference check, its accuracy through the `.npy` files a user would compare, ONNX's
//! quantized-operator test cases, a small ResNet-18 from the zoo, and the error cases.

#[path = "support/cli.rs"]
mod support;

use std::path::Path;

use compiler::graph::Tensor;
use compiler::onnx::proto::{
    attribute_type, data_type, AttributeProto, Dimension, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorShapeProto, TypeProto, TypeProtoTensor, ValueInfoProto,
};
use isa::npy::{self, Elem};
use support::{fails, ok, scratch, vta, vta_in};
use vta_runtime::io::{tensor_from_npy, tensor_to_npy};

fn data(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("compiler/tests/data")
        .join(name)
        .display()
        .to_string()
}

fn read_npy(path: &Path) -> Tensor {
    tensor_from_npy(&npy::read_file(path).unwrap()).unwrap()
}

fn write_npy(path: &Path, t: &Tensor) {
    let (elem, shape, bytes) = tensor_to_npy(t);
    npy::write_file(path, elem, &shape, &bytes).unwrap();
}

fn argmaxes(t: &Tensor) -> Vec<usize> {
    let a = t.as_f32().unwrap();
    a.rows()
        .into_iter()
        .map(|r| {
            r.iter()
                .enumerate()
                .fold(0, |b, (i, &x)| if x > r[b] { i } else { b })
        })
        .collect()
}

/// The compiled tiny CNN (float model, calibrated) in a scratch directory.
fn compiled_tiny(dir: &Path) -> String {
    ok(vta_in(
        dir,
        &[
            "compile",
            &data("tiny_cnn.onnx"),
            "--calibrate",
            &data("digits_calib.npy"),
            "-o",
            "tiny.vtab",
        ],
    ))
}

#[test]
fn tiny_cnn_compiles_runs_bit_exact_and_is_accurate() {
    let dir = scratch("compile_tiny");
    let text = compiled_tiny(&dir);
    // The op-support table (every ONNX node), the tiling of every layer, the compile time.
    for want in [
        "compiled for 1x16_i8w8a32_15_15_18_17 -> tiny.vtab",
        "op support (19 ONNX nodes: 8 accelerator, 8 fused, 2 cpu, 1 removed)",
        "/c1/Conv                Conv                accelerator   QConv2d (step 1)",
        "/b1/BatchNormalization  BatchNormalization  fused         into /c1/Conv",
        "/Softmax                Softmax             cpu           step 11: no accelerator layer for Softmax",
        "co-outer",
        "plan: 12 steps, 8 on the accelerator, 4 on the CPU",
        "compile time: ",
        "calibration ",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }

    // All 100 test digits in one call (stacked along the batch axis), checked layer by layer.
    let text = ok(vta_in(
        &dir,
        &[
            "run",
            "tiny.vtab",
            "--input",
            &data("digits_test.npy"),
            "--output",
            "probs.npy",
            "--check",
        ],
    ));
    assert!(
        text.contains("check: bit-exact on all 100 samples: 11 layers (7 on the accelerator)"),
        "{text}"
    );
    assert!(
        text.contains("output 'probs' float[100, 10] -> probs.npy"),
        "{text}"
    );
    let probs = read_npy(&dir.join("probs.npy"));
    let ours = argmaxes(&probs);
    let fp32 = argmaxes(&read_npy(Path::new(&data("tiny_cnn_out.npy"))));
    let labels = npy::read_file(Path::new(&data("digits_test_labels.npy"))).unwrap();
    let labels: Vec<usize> = labels
        .data
        .chunks_exact(8)
        .map(|c| i64::from_le_bytes(c.try_into().unwrap()) as usize)
        .collect();
    let correct = ours.iter().zip(&labels).filter(|(a, b)| a == b).count();
    let correct_fp32 = fp32.iter().zip(&labels).filter(|(a, b)| a == b).count();
    let agree = ours.iter().zip(&fp32).filter(|(a, b)| a == b).count();
    // Measured: 98/100 for both, the same class as fp32 on 100/100.
    assert!(
        correct + 1 >= correct_fp32 && correct >= 96,
        "{correct} vs {correct_fp32}"
    );
    assert!(agree >= 98, "{agree}");
}

/// The first test digit, as `dir/x.npy`.
fn write_first_digit(dir: &Path) {
    let all = read_npy(Path::new(&data("digits_test.npy")));
    let x = all
        .as_f32()
        .unwrap()
        .slice(ndarray::s![0..1, .., .., ..])
        .to_owned();
    write_npy(&dir.join("x.npy"), &Tensor::F32(x.into_dyn()));
}

#[test]
fn replaced_values_feed_the_later_steps_and_the_dump_keeps_each_steps_own() {
    let dir = scratch("run_replace");
    compiled_tiny(&dir);
    write_first_digit(&dir);
    let dump = |out: &str, extra: &[&str]| {
        let mut args = vec!["run", "tiny.vtab", "-i", "x.npy", "--dump-values", out];
        args.extend_from_slice(extra);
        vta_in(&dir, &args)
    };
    ok(dump("plain", &[]));
    let index: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("plain/values.json")).unwrap())
            .unwrap();
    let value = |root: &str, e: &serde_json::Value| {
        read_npy(&dir.join(root).join(e["file"].as_str().unwrap()))
    };
    // The first int8 tensor a step computes, replaced by zeros.
    let first = index
        .iter()
        .find(|e| e["producer"].is_string() && e["type"].as_str().unwrap().starts_with("int8["))
        .unwrap();
    let Tensor::I8(orig) = value("plain", first) else {
        panic!("{first}")
    };
    std::fs::create_dir_all(dir.join("given")).unwrap();
    write_npy(&dir.join("given/zeros.npy"), &Tensor::I8(orig.mapv(|_| 0)));
    let entry =
        serde_json::json!([{"value": first["value"], "name": first["name"], "file": "zeros.npy"}]);
    std::fs::write(dir.join("given/values.json"), entry.to_string()).unwrap();
    ok(dump("replaced", &["--replace-values", "given"]));
    let changed = index
        .iter()
        .filter(|e| value("plain", e) != value("replaced", e))
        .count();
    // The step's own output is kept; the steps after it read zeros instead.
    assert_eq!(value("replaced", first), Tensor::I8(orig.clone()));
    assert!(changed > 0, "no later value changed");

    // Bad replacements are named with the entry and the fix.
    let bad = |json: serde_json::Value, want: &str| {
        std::fs::write(dir.join("given/values.json"), json.to_string()).unwrap();
        let e = fails(dump("bad", &["--replace-values", "given"]));
        assert!(e.contains(want), "{e}");
    };
    bad(
        serde_json::json!([{"value": first["value"], "name": "other", "file": "zeros.npy"}]),
        "not 'other' (was DIR written for another model?)",
    );
    bad(
        serde_json::json!([{"value": 100000, "file": "zeros.npy"}]),
        "not 100000",
    );
    bad(
        serde_json::json!([{"value": 0}]),
        "needs a number `value` and a string `file`",
    );
    let input = index.iter().find(|e| e["producer"].is_null()).unwrap();
    bad(
        serde_json::json!([{"value": input["value"], "file": "zeros.npy"}]),
        "a constant or an input of the model",
    );
    let wrong_shape = index
        .iter()
        .find(|e| e["producer"].is_string() && e["type"] != first["type"])
        .unwrap();
    bad(
        serde_json::json!([{"value": wrong_shape["value"], "file": "zeros.npy"}]),
        &format!(
            "is int8[{}",
            orig.shape()
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    // A usage error (clap's exit code 2): the replacements only act on --dump-values.
    let out = vta_in(
        &dir,
        &[
            "run",
            "tiny.vtab",
            "-i",
            "x.npy",
            "--replace-values",
            "given",
        ],
    );
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(e.contains("--dump-values"), "{e}");
}

#[test]
fn one_sample_prints_top5_and_the_per_layer_table() {
    let dir = scratch("run_one");
    compiled_tiny(&dir);
    write_first_digit(&dir);
    let text = ok(vta_in(
        &dir,
        &["run", "tiny.vtab", "-i", "x.npy", "--check"],
    ));
    for want in [
        "12 steps (8 on the accelerator, 4 on the CPU), run on fsim",
        "top-5: ",
        "step name",
        "GEMM uops",
        "/dw/Conv",
        "QConv2d        accel L0",
        "Cpu:Softmax    cpu",
        "total: ",
        "no cycle counts (fsim is not cycle-accurate)",
        "check: bit-exact: 11 layers (7 on the accelerator), 1086 elements",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    // Every computed tensor of the run, named, for a comparison with another runtime; the
    // output equals the run's own.
    ok(vta_in(
        &dir,
        &[
            "run",
            "tiny.vtab",
            "-i",
            "x.npy",
            "-o",
            "y.npy",
            "--dump-values",
            "values",
        ],
    ));
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("values/values.json")).unwrap())
            .unwrap();
    let entries = index.as_array().unwrap();
    assert!(entries.len() >= 12, "{index:#}");
    assert!(entries
        .iter()
        .any(|e| e["scale"].is_number() && e["type"].as_str().unwrap().starts_with("int8[")));
    let last = entries.last().unwrap();
    let dumped = read_npy(&dir.join("values").join(last["file"].as_str().unwrap()));
    assert_eq!(dumped, read_npy(&dir.join("y.npy")), "{last}");
    // Inputs can be given by name; a wrong name is called that, not a missing file.
    ok(vta_in(&dir, &["run", "tiny.vtab", "-i", "image=x.npy"]));
    let e = fails(vta_in(&dir, &["run", "tiny.vtab", "-i", "wrong=x.npy"]));
    assert!(
        e.contains("no input named 'wrong'") && e.contains("'image'"),
        "{e}"
    );

    // --json: the same figures for scripts.
    let j: serde_json::Value = serde_json::from_str(&ok(vta_in(
        &dir,
        &[
            "run",
            "tiny.vtab",
            "-i",
            "x.npy",
            "--check",
            "--json",
            "-o",
            "y.npy",
        ],
    )))
    .unwrap();
    assert_eq!(j["steps"], 12, "{j}");
    assert_eq!(j["accel_steps"], 8, "{j}");
    assert_eq!(j["run"]["backend"], "fsim", "{j}");
    assert_eq!(j["run"]["device_launches"], 2, "{j}");
    let mem = &j["run"]["device_memory_bytes"];
    assert!(
        mem["constants"].as_u64().unwrap() > 0 && mem["activations"].as_u64().unwrap() > 0,
        "{j}"
    );
    // --check reads every intermediate back: more than the host writes.
    assert!(
        j["run"]["device_to_host_bytes"].as_u64().unwrap()
            > j["run"]["host_to_device_bytes"].as_u64().unwrap(),
        "{j}"
    );
    assert_eq!(j["outputs"][0]["file"], "y.npy", "{j}");
    assert_eq!(j["check"]["elements"], 1086, "{j}");
    let steps = j["run"]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 12, "{j}");
    assert_eq!(steps[1]["launch"], 0, "{j}");
    let launches = j["run"]["launches"].as_array().unwrap();
    assert_eq!(
        launches[0]["steps"],
        serde_json::json!([1, 2, 3, 4, 5, 6, 7]),
        "{j}"
    );
    assert!(
        launches[0]["counters"]["gemm_uops"].as_u64().unwrap() > 0,
        "{j}"
    );
    // Without --check only what the host needs crosses: the input, the flattened features
    // (a CPU step between the launches) and the logits.
    let j: serde_json::Value = serde_json::from_str(&ok(vta_in(
        &dir,
        &["run", "tiny.vtab", "-i", "x.npy", "--json"],
    )))
    .unwrap();
    assert_eq!(j["run"]["device_to_host_bytes"], 32, "{j}");
    // A launch per layer, for per-layer counters.
    ok(vta_in(
        &dir,
        &[
            "compile",
            &data("tiny_cnn.onnx"),
            "--calibrate",
            &data("digits_calib.npy"),
            "-o",
            "per-layer.vtab",
            "--launch-per-layer",
        ],
    ));
    let j: serde_json::Value = serde_json::from_str(&ok(vta_in(
        &dir,
        &["run", "per-layer.vtab", "-i", "x.npy", "--json"],
    )))
    .unwrap();
    // (the residual add runs in its convolution's epilogue, in that convolution's launch)
    assert_eq!(j["run"]["device_launches"], 7, "{j}");
    assert_eq!(steps[11]["place"], "cpu", "{j}");

    // RTL-only options are refused on the functional simulator, not ignored.
    let e = fails(vta_in(
        &dir,
        &["run", "tiny.vtab", "-i", "x.npy", "--mem-latency", "40"],
    ));
    assert!(
        e.contains("--mem-latency is an option of the cycle-accurate simulator")
            && e.contains("--backend rtl"),
        "{e}"
    );
    let e = fails(vta(&["demo", "--hang-cycles", "10"]));
    assert!(
        e.contains("--hang-cycles is an option of the cycle-accurate simulator"),
        "{e}"
    );
}

#[test]
fn output_over_the_model_is_refused() {
    let dir = scratch("compile_overwrite");
    let onnx = std::fs::read(data("tiny_cnn.onnx")).unwrap();
    std::fs::write(dir.join("m.onnx"), &onnx).unwrap();
    let e = fails(vta_in(
        &dir,
        &[
            "compile",
            "m.onnx",
            "--calibrate",
            &data("digits_calib.npy"),
            "-o",
            "./m.onnx",
        ],
    ));
    assert!(e.contains("would overwrite it"), "{e}");
    assert_eq!(std::fs::read(dir.join("m.onnx")).unwrap(), onnx);
}

/// `--memory-budget` bounds the tensors of `vta compile` and `vta run`; a model beyond it is
/// refused naming a tensor and the flag, and a bad size is named.
#[test]
fn memory_budget_is_a_flag_of_compile_and_run() {
    let dir = scratch("memory_budget");
    let calib = data("digits_calib.npy");
    let model = data("tiny_cnn.onnx");
    let small = [
        "compile",
        &model,
        "--calibrate",
        &calib,
        "--memory-budget",
        "4KiB",
    ];
    let e = fails(vta_in(&dir, &small));
    assert!(
        e.contains("beyond the memory budget of 4.0 KiB") && e.contains("--memory-budget"),
        "{e}"
    );
    compiled_tiny(&dir);
    let x = data("digits_test.npy");
    let run = |budget: &str| {
        vta_in(
            &dir,
            &["run", "tiny.vtab", "-i", &x, "--memory-budget", budget],
        )
    };
    let e = fails(run("100"));
    assert!(
        e.contains("tiny.vtab") && e.contains("beyond the memory budget of 100 B"),
        "{e}"
    );
    ok(run("64MiB"));
    let bad = run("4GB");
    assert_eq!(bad.status.code(), Some(2), "a usage error");
    let e = String::from_utf8_lossy(&bad.stderr);
    assert!(e.contains("unknown unit 'GB'"), "{e}");
}

#[test]
fn calibrate_is_repeatable_and_leaves_the_model_argument_alone() {
    let dir = scratch("compile_calibrate");
    // Options before the model: `--calibrate` takes one file, so MODEL stays the model.
    let j: serde_json::Value = serde_json::from_str(&ok(vta_in(
        &dir,
        &[
            "compile",
            "--calibrate",
            &data("digits_calib.npy"),
            "--calibrate",
            &data("digits_test.npy"),
            &data("tiny_cnn.onnx"),
            "-o",
            "t.vtab",
            "--json",
        ],
    )))
    .unwrap();
    assert_eq!(j["output"], "t.vtab", "{j}");
    assert_eq!(j["calibration_samples"], 132, "{j}");
    assert_eq!(j["accel_steps"], 8, "{j}");
    let support = j["support"].as_array().unwrap();
    assert_eq!(support.len(), 19, "{j}");
    assert!(
        support
            .iter()
            .any(|e| e["node"] == "/Softmax" && e["status"] == "cpu"),
        "{j}"
    );
    assert!(j["times_ms"]["compile"].as_f64().unwrap() > 0.0, "{j}");
}

#[test]
fn quantized_forms_need_no_calibration_and_run_bit_exact() {
    let dir = scratch("compile_quantized");
    for model in ["tiny_cnn_qdq.onnx", "tiny_cnn_qop.onnx"] {
        let text = ok(vta_in(&dir, &["compile", &data(model), "-o", "m.vtab"]));
        assert!(text.contains("QConv2d"), "{text}");
        let text = ok(vta_in(
            &dir,
            &["run", "m.vtab", "-i", &data("digits_test.npy"), "--check"],
        ));
        assert!(
            text.contains("check: bit-exact on all 100 samples"),
            "{text}"
        );
    }
    // --bit-exact keeps QDQ layers whose requantization is not bit-identical to ONNX's on the
    // CPU; the table says so.
    let text = ok(vta_in(
        &dir,
        &[
            "compile",
            &data("tiny_cnn_qdq.onnx"),
            "--bit-exact",
            "-o",
            "b.vtab",
        ],
    ));
    assert!(text.contains("bit-exact mode"), "{text}");
}

#[test]
fn onnx_test_cases_run_exactly_through_vta_run() {
    let dir = scratch("onnx_cases");
    let cases = Path::new(&data("onnx-testdata")).to_path_buf();
    let mut n = 0;
    for entry in std::fs::read_dir(&cases).unwrap() {
        let case = entry.unwrap().path();
        if !case.is_dir() {
            continue;
        }
        let name = case.file_name().unwrap().to_str().unwrap().to_string();
        let model = case.join("model.onnx");
        let out = dir.join(format!("{name}.vtab"));
        let text = ok(vta(&[
            "compile",
            model.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]));
        assert!(text.contains("cpu"), "{name}: {text}");
        let mut args: Vec<String> = vec!["run".into(), out.display().to_string()];
        for i in 0.. {
            let pb = case.join(format!("test_data_set_0/input_{i}.pb"));
            if !pb.exists() {
                break;
            }
            let (_, t) = compiler::onnx::load_tensor_pb(&pb).unwrap();
            let p = dir.join(format!("{name}_in{i}.npy"));
            write_npy(&p, &t);
            args.extend(["--input".into(), p.display().to_string()]);
        }
        let y = dir.join(format!("{name}_out.npy"));
        args.extend(["--output".into(), y.display().to_string(), "--check".into()]);
        let argv: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        ok(vta(&argv));
        let (_, want) =
            compiler::onnx::load_tensor_pb(&case.join("test_data_set_0/output_0.pb")).unwrap();
        assert_eq!(read_npy(&y), want, "{name}");
        n += 1;
    }
    assert_eq!(n, 11);
}

#[test]
fn zoo_resnet18_compiles_and_runs() {
    let dir = scratch("zoo_resnet");
    let text = ok(vta_in(
        &dir,
        &[
            "zoo", "resnet18", "--size", "32", "-o", "r.onnx", "--sample", "x.npy",
        ],
    ));
    assert!(
        text.contains("ResNet-18 (torchvision architecture)"),
        "{text}"
    );
    let text = ok(vta_in(
        &dir,
        &["compile", "r.onnx", "--calibrate", "x.npy", "-o", "r.vtab"],
    ));
    assert!(
        text.contains("plan: 34 steps, 31 on the accelerator, 3 on the CPU"),
        "{text}"
    );
    let text = ok(vta_in(&dir, &["run", "r.vtab", "-i", "x.npy", "--check"]));
    assert!(
        text.contains("check: bit-exact: 26 layers (23 on the accelerator)"),
        "{text}"
    );
    assert!(text.contains("top-5: "), "{text}");
    let e = fails(vta_in(&dir, &["zoo", "resnet18", "--size", "8"]));
    assert!(e.contains("outside 16..=1024"), "{e}");
}

/// A model with a node the compiler cannot run (LpNormalization after a Conv).
fn unsupported_model() -> Vec<u8> {
    let info = |name: &str, shape: &[i64]| ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type: data_type::FLOAT,
                shape: Some(TensorShapeProto {
                    dim: shape
                        .iter()
                        .map(|&d| Dimension {
                            dim_value: Some(d),
                            ..Default::default()
                        })
                        .collect(),
                }),
            }),
            denotation: String::new(),
        }),
        doc_string: String::new(),
    };
    let w = compiler::onnx::tensor_to_proto(
        "w",
        &Tensor::F32(ndarray::ArrayD::from_elem(
            ndarray::IxDyn(&[4, 1, 3, 3]),
            0.1,
        )),
    );
    let node = |op: &str, ins: &[&str], out: &str| NodeProto {
        op_type: op.into(),
        name: format!("my_{}", op.to_lowercase()),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: vec![out.into()],
        attribute: if op == "Conv" {
            vec![AttributeProto {
                name: "pads".into(),
                r#type: attribute_type::INTS,
                ints: vec![1, 1, 1, 1],
                ..Default::default()
            }]
        } else {
            vec![]
        },
        ..Default::default()
    };
    let model = ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 13,
        }],
        graph: Some(GraphProto {
            node: vec![
                node("Conv", &["x", "w"], "c"),
                node("LpNormalization", &["c"], "y"),
            ],
            name: "g".into(),
            initializer: vec![w],
            input: vec![info("x", &[1, 1, 8, 8])],
            output: vec![info("y", &[1, 4, 8, 8])],
            ..Default::default()
        }),
        ..Default::default()
    };
    compiler::zoo::encode_model(&model)
}

#[test]
fn errors_are_one_clear_message() {
    let dir = scratch("compile_errors");
    compiled_tiny(&dir);
    // Missing files.
    let e = fails(vta_in(&dir, &["compile", "missing.onnx"]));
    assert!(e.contains("cannot read missing.onnx"), "{e}");
    let e = fails(vta_in(&dir, &["run", "missing.vtab", "-i", "x.npy"]));
    assert!(e.contains("cannot read missing.vtab"), "{e}");
    // Not ONNX.
    std::fs::write(dir.join("junk.onnx"), b"this is not a model").unwrap();
    let e = fails(vta_in(&dir, &["compile", "junk.onnx"]));
    assert!(e.contains("junk.onnx: not an ONNX model"), "{e}");
    // A float model without calibration data.
    let e = fails(vta_in(
        &dir,
        &["compile", &data("tiny_cnn.onnx"), "-o", "x.vtab"],
    ));
    assert!(e.contains("calibration inputs"), "{e}");
    // An empty calibration file is refused, not used to calibrate nothing.
    npy::write_file(&dir.join("none.npy"), Elem::F32, &[0, 1, 8, 8], &[]).unwrap();
    let e = fails(vta_in(
        &dir,
        &[
            "compile",
            &data("tiny_cnn.onnx"),
            "--calibrate",
            "none.npy",
            "-o",
            "x.vtab",
        ],
    ));
    assert!(
        e.contains("none.npy") && e.contains("holds no samples"),
        "{e}"
    );
    // Unsupported nodes: the whole support table.
    std::fs::write(dir.join("sig.onnx"), unsupported_model()).unwrap();
    let e = fails(vta_in(&dir, &["compile", "sig.onnx"]));
    assert!(!dir.join("sig.vtab").exists());
    assert!(e.contains("sig.onnx: 1 node(s) cannot be compiled"), "{e}");
    assert!(
        e.contains("my_lpnormalization")
            && e.contains("UNSUPPORTED")
            && e.contains("to compile:")
            && e.contains("my_conv"),
        "{e}"
    );
    // Wrong input shape and type.
    npy::write_file(&dir.join("flat.npy"), Elem::F32, &[8, 8], &[0; 256]).unwrap();
    let e = fails(vta_in(&dir, &["run", "tiny.vtab", "-i", "flat.npy"]));
    assert!(
        e.contains("input 'image' must be float[1, 1, 8, 8], got float[8, 8]"),
        "{e}"
    );
    npy::write_file(&dir.join("f64.npy"), Elem::F64, &[1, 1, 8, 8], &[0; 512]).unwrap();
    let e = fails(vta_in(&dir, &["run", "tiny.vtab", "-i", "f64.npy"]));
    assert!(e.contains("float64 arrays are not model tensors"), "{e}");
    npy::write_file(&dir.join("i8.npy"), Elem::I8, &[1, 1, 8, 8], &[0; 64]).unwrap();
    let e = fails(vta_in(&dir, &["run", "tiny.vtab", "-i", "i8.npy"]));
    assert!(e.contains("the element type must be float"), "{e}");
    let e = fails(vta_in(
        &dir,
        &["run", "tiny.vtab", "-i", "i8.npy", "-i", "i8.npy"],
    ));
    assert!(e.contains("the model has 1 input(s)"), "{e}");
    // A model compiled for another config.
    let e = fails(vta_in(
        &dir,
        &["run", "tiny.vtab", "-i", "i8.npy", "--config", "batched"],
    ));
    assert!(
        e.contains("compiled for config 1x16_i8w8a32_15_15_18_17")
            && e.contains("selected config is 4x8_"),
        "{e}"
    );
    // The wrong kind of file.
    let e = fails(vta_in(
        &dir,
        &["run", &data("tiny_cnn.onnx"), "-i", "i8.npy"],
    ));
    assert!(e.contains("compile it with `vta compile` first"), "{e}");
    // A corrupted compiled model.
    let mut b = std::fs::read(dir.join("tiny.vtab")).unwrap();
    let n = b.len() / 2;
    b[n] ^= 1;
    std::fs::write(dir.join("bad.vtab"), b).unwrap();
    let e = fails(vta_in(&dir, &["run", "bad.vtab", "-i", "i8.npy"]));
    assert!(e.contains("bad.vtab: checksum mismatch"), "{e}");
}

#[test]
fn help_texts() {
    insta::assert_snapshot!("help_compile", ok(vta(&["compile", "--help"])));
    insta::assert_snapshot!("help_run", ok(vta(&["run", "--help"])));
    insta::assert_snapshot!("help_zoo", ok(vta(&["zoo", "--help"])));
}

/// The README's main job: the embedded trained digits CNN compiles, runs bit-exactly and
/// keeps its fp32 accuracy, on VTA's default config and on configs with BATCH > 1 and
/// BLOCK_IN != BLOCK_OUT.
#[test]
fn demo_compiles_runs_checks_and_reports_accuracy() {
    for config in ["default", "batched", "rect"] {
        let out = ok(vta(&["demo", "--config", config]));
        assert!(
            out.contains("bit-exact against the integer reference: 100 digits"),
            "{out}"
        );
        let acc = out
            .lines()
            .find(|l| l.starts_with("accuracy:"))
            .expect("accuracy line");
        let nums: Vec<usize> = acc
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|s| s.parse().ok())
            .collect();
        // "accuracy: accelerator (int8) A/100, fp32 model F/100; same class as fp32 on S/100"
        let (ours, fp32, same) = (nums[1], nums[3], nums[5]);
        assert!(
            ours + 1 >= fp32 && ours >= 95 && same >= 97,
            "{config}: {acc}"
        );
    }
    insta::assert_snapshot!("help_demo", ok(vta(&["demo", "--help"])));
}

/// `vta run --devices rtl-cores:2`: the two cores of one RTL simulation of a two-core design
/// (one memory behind an AXI interconnect) as the pool's devices, bit-identical to the serial
/// run, with the RTL options applying to them.
#[test]
fn run_on_the_two_cores_of_one_rtl_simulation_matches_serial() {
    let dir = scratch("pool_cores");
    ok(vta_in(
        &dir,
        &[
            "compile",
            &data("tiny_cnn.onnx"),
            "--calibrate",
            &data("digits_calib.npy"),
            "-o",
            "tiny.vtab",
        ],
    ));
    let x = data("digits_test.npy");
    for policy in ["pipeline", "dynamic"] {
        let text = ok(vta_in(
            &dir,
            &[
                "run",
                "tiny.vtab",
                "-i",
                &x,
                "--schedule",
                policy,
                "--devices",
                "rtl-cores:2",
                "--in-flight",
                "4",
                "--mem-latency",
                "40",
                "--check",
            ],
        ));
        assert!(
            text.contains(
                "check: the outputs of all 100 sample(s) are bit-identical to the serial run's"
            ),
            "{policy}: {text}"
        );
        assert!(
            text.contains("dev0 rtl-cores:2#0") && text.contains("dev1 rtl-cores:2#1"),
            "{text}"
        );
    }
    let e = fails(vta_in(
        &dir,
        &["run", "tiny.vtab", "-i", &x, "--devices", "rtl-cores:1"],
    ));
    assert!(e.contains("the core count must be 2 to 8"), "{e}");
}

/// `vta run` on a pool: two fsim devices and two CPU workers, every policy, several samples in
/// flight, outputs bit-identical to the serial run (`--check`), a timeline, the per-worker
/// figures in `--json`; `vta bench schedule`; and the errors of bad pool options.
#[test]
fn run_on_a_pool_of_devices_matches_serial_under_every_policy() {
    let dir = scratch("pool_tiny");
    let text = ok(vta_in(
        &dir,
        &[
            "compile",
            &data("tiny_cnn.onnx"),
            "--calibrate",
            &data("digits_calib.npy"),
            "-o",
            "tiny.vtab",
        ],
    ));
    assert!(
        text.contains("task graph: 6 tasks (2 launches, 4 CPU steps)"),
        "{text}"
    );
    let x = data("digits_test.npy");
    for policy in ["serial", "pipeline", "by-op", "by-path", "dynamic", "auto"] {
        let text = ok(vta_in(
            &dir,
            &[
                "run",
                "tiny.vtab",
                "-i",
                &x,
                "--schedule",
                policy,
                "--devices",
                "fsim,fsim",
                "--cpu-threads",
                "2",
                "--in-flight",
                "3",
                "--check",
                "--trace",
                "t.json",
            ],
        ));
        assert!(
            text.contains(
                "check: the outputs of all 100 sample(s) are bit-identical to the serial run's"
            ),
            "{policy}: {text}"
        );
        assert!(
            text.contains("dev1 fsim") && text.contains("cpu1"),
            "{text}"
        );
        let trace = std::fs::read_to_string(dir.join("t.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&trace).unwrap();
        assert!(v["traceEvents"].as_array().unwrap().len() > 100, "{policy}");
    }
    let json = ok(vta_in(
        &dir,
        &[
            "run",
            "tiny.vtab",
            "-i",
            &x,
            "--schedule",
            "dynamic",
            "--devices",
            "fsim,fsim",
            "--json",
        ],
    ));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let workers = v["pool"]["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 4);
    assert!(workers[0]["utilization"].as_f64().is_some());
    assert!(v["pool"]["overlap_ms"].as_f64().is_some());

    let bench = ok(vta_in(
        &dir,
        &[
            "bench",
            "schedule",
            "tiny.vtab",
            "-i",
            &x,
            "--devices",
            "fsim,fsim",
            "--requests",
            "3",
        ],
    ));
    for p in [
        "serial:",
        "pipeline:",
        "by-op:",
        "by-path:",
        "dynamic:",
        "auto (chose ",
    ] {
        assert!(bench.contains(p), "{p}: {bench}");
    }
    assert!(!bench.contains("DIFFER"), "{bench}");

    let e = fails(vta_in(
        &dir,
        &["run", "tiny.vtab", "-i", &x, "--devices", "fsim,gpu"],
    ));
    assert!(
        e.contains("device 2 'gpu'") && e.contains("e.g. fsim,fsim or rtl,fsim"),
        "{e}"
    );
    let e = fails(vta_in(
        &dir,
        &["run", "tiny.vtab", "-i", &x, "--in-flight", "0"],
    ));
    assert!(e.contains("--in-flight must be at least 1"), "{e}");
    let e = fails(vta_in(
        &dir,
        &["run", "tiny.vtab", "-i", &x, "--cpu-threads", "0"],
    ));
    assert!(e.contains("no CPU worker"), "{e}");
}

/// `vta bench schedule --time device`: every policy simulated in device time from the cycle
/// model and a CPU profile measured here (and written), each policy's outputs checked on the
/// real pool; the same profile gives the same figures twice; the timeline has a process per
/// policy; bad device-time options are refused with the fix.
#[test]
fn bench_schedule_in_device_time_is_deterministic() {
    let dir = scratch("devtime_tiny");
    ok(vta_in(
        &dir,
        &[
            "compile",
            &data("tiny_cnn.onnx"),
            "--calibrate",
            &data("digits_calib.npy"),
            "-o",
            "tiny.vtab",
        ],
    ));
    let x = data("digits_test.npy");
    let text = ok(vta_in(
        &dir,
        &[
            "bench",
            "schedule",
            "tiny.vtab",
            "-i",
            &x,
            "--time",
            "device",
            "--devices",
            "fsim,fsim",
            "--write-cpu-profile",
            "profile.json",
            "--requests",
            "8",
            "--trace",
            "t.json",
        ],
    ));
    for p in [
        "\nserial ",
        "\npipeline ",
        "\nby-op ",
        "\nby-path ",
        "\ndynamic ",
        "\nauto (chose ",
    ] {
        assert!(text.contains(p), "{p}: {text}");
    }
    assert!(
        text.contains("device time on 2 accelerator(s) + 2 CPU worker(s)")
            && text.contains("cycle-model cycles at")
            && text.contains(
                "outputs: one request under every policy on the real pool, bit-identical to the serial run's"
            )
            && text.contains("lower bound: "),
        "{text}"
    );
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("t.json")).unwrap()).unwrap();
    let processes = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "process_name")
        .count();
    assert_eq!(processes, 6, "one process per policy");

    let sim = |extra: &[&str]| {
        let mut args = vec![
            "bench",
            "schedule",
            "tiny.vtab",
            "--time",
            "device",
            "--devices",
            "fsim,fsim",
            "--cpu-profile",
            "profile.json",
            "--json",
        ];
        args.extend_from_slice(extra);
        ok(vta_in(&dir, &args))
    };
    let a = sim(&[]);
    assert_eq!(a, sim(&[]), "device time is deterministic");
    let v: serde_json::Value = serde_json::from_str(&a).unwrap();
    let rows = v["policies"].as_array().unwrap();
    assert_eq!(rows.len(), 6);
    assert_eq!(rows[0]["policy"], "serial");
    assert!((rows[0]["vs_serial"].as_f64().unwrap() - 1.0).abs() < 1e-9);
    assert_eq!(rows[0]["throughput_per_s"].as_array().unwrap().len(), 4);
    assert_eq!(v["outputs_checked"], false);
    let auto = rows.iter().find(|r| r["policy"] == "auto").unwrap();
    assert!(auto["vs_serial"].as_f64().unwrap() >= 1.0 - 1e-9, "{a}");
    // A CPU three times slower: the CPU steps' share triples.
    let slow: serde_json::Value = serde_json::from_str(&sim(&["--cpu-scale", "3"])).unwrap();
    let cpu = |v: &serde_json::Value| v["cpu_ms_per_request"].as_f64().unwrap();
    assert!((cpu(&slow) - 3.0 * cpu(&v)).abs() < 1e-9 * cpu(&v).max(1.0));

    let e = fails(vta_in(
        &dir,
        &["bench", "schedule", "tiny.vtab", "--time", "device"],
    ));
    assert!(
        e.contains("give --cpu-profile FILE, or --input X.npy"),
        "{e}"
    );
    let e = fails(vta_in(
        &dir,
        &[
            "bench",
            "schedule",
            "tiny.vtab",
            "-i",
            &x,
            "--cpu-profile",
            "profile.json",
        ],
    ));
    assert!(
        e.contains("--cpu-profile applies to device time: add --time device"),
        "{e}"
    );
    std::fs::write(
        dir.join("bad.json"),
        r#"{"format": "vta-cpu-profile", "steps": []}"#,
    )
    .unwrap();
    let e = fails(vta_in(
        &dir,
        &[
            "bench",
            "schedule",
            "tiny.vtab",
            "--time",
            "device",
            "--cpu-profile",
            "bad.json",
        ],
    ));
    assert!(
        e.contains("no time for CPU step") && e.contains("--write-cpu-profile"),
        "{e}"
    );
    let e = fails(vta_in(
        &dir,
        &[
            "bench",
            "schedule",
            "tiny.vtab",
            "--time",
            "device",
            "--cpu-profile",
            "profile.json",
            "--cpu-scale",
            "0",
        ],
    ));
    assert!(e.contains("--cpu-scale must be a number above 0"), "{e}");
}
