//! End-to-end tests of edge-CNN blocks through `vta compile` and `vta run --check`: a
//! MobileNetV3 bottleneck (expansion with HardSwish, depthwise convolution, squeeze-and-excite
//! with HardSigmoid, projection, residual, classifier with Softmax) and a YOLO/UNet-style neck
//! (SiLU, LeakyRelu, nearest upsampling, Concat, Split, a transposed convolution, a Sigmoid
//! head), both float models quantized after training, run bit-exactly on fsim against the
//! integer reference and compared with the float model.

#[path = "support/cli.rs"]
#[allow(dead_code)]
mod support;

#[path = "../compiler/tests/onnx_builder/mod.rs"]
mod onnx_builder;

use std::path::Path;

use compiler::frontend::import_graph;
use compiler::graph::Tensor;
use isa::npy;
use onnx_builder::{sample, Model, A};
use support::{ok, scratch, vta_in};
use vta_runtime::budget::DEFAULT_MEMORY_BUDGET;
use vta_runtime::io::{tensor_from_npy, tensor_to_npy};

fn write_npy(path: &Path, t: &Tensor) {
    let (elem, shape, bytes) = tensor_to_npy(t);
    npy::write_file(path, elem, &shape, &bytes).unwrap();
}

/// A MobileNetV3 bottleneck (16 -> 64 -> 16 channels, 16 x 16) and a 10-class head.
fn mobilenet_v3_block() -> Model {
    let mut m = Model::new(17);
    m.input("x", &[1, 16, 16, 16])
        .weight("we", &[64, 16, 1, 1], 0.4)
        .node("expand", "Conv", &["x", "we"], &["e"], vec![])
        .values("bn_s", &[64], &[1.1; 64])
        .weight("bn_b", &[64], 0.2)
        .values("bn_m", &[64], &[0.05; 64])
        .values("bn_v", &[64], &[0.9; 64])
        .node(
            "expand_bn",
            "BatchNormalization",
            &["e", "bn_s", "bn_b", "bn_m", "bn_v"],
            &["eb"],
            vec![],
        )
        .node("expand_act", "HardSwish", &["eb"], &["ea"], vec![])
        .weight("wd", &[64, 1, 3, 3], 0.5)
        .weight("bd", &[64], 0.1)
        .node(
            "dw",
            "Conv",
            &["ea", "wd", "bd"],
            &["d"],
            vec![("group", A::I(64)), ("pads", A::Is(vec![1; 4]))],
        )
        .node("dw_act", "HardSwish", &["d"], &["da"], vec![])
        .node("se_pool", "GlobalAveragePool", &["da"], &["sp"], vec![])
        .weight("wr", &[16, 64, 1, 1], 0.4)
        .weight("br", &[16], 0.1)
        .node("se_reduce", "Conv", &["sp", "wr", "br"], &["sr"], vec![])
        .node("se_relu", "Relu", &["sr"], &["sa"], vec![])
        .weight("wx", &[64, 16, 1, 1], 0.4)
        .weight("bx", &[64], 0.1)
        .node("se_expand", "Conv", &["sa", "wx", "bx"], &["sx"], vec![])
        .node(
            "se_gate",
            "HardSigmoid",
            &["sx"],
            &["sg"],
            vec![("alpha", A::F(1.0 / 6.0)), ("beta", A::F(0.5))],
        )
        .node("se_scale", "Mul", &["da", "sg"], &["ds"], vec![])
        .weight("wp", &[16, 64, 1, 1], 0.2)
        .node("project", "Conv", &["ds", "wp"], &["p"], vec![])
        .node("residual", "Add", &["p", "x"], &["r"], vec![])
        .node("pool", "GlobalAveragePool", &["r"], &["g"], vec![])
        .node("flatten", "Flatten", &["g"], &["f"], vec![])
        .weight("wc", &[10, 16], 0.5)
        .weight("bc", &[10], 0.1)
        .node(
            "classifier",
            "Gemm",
            &["f", "wc", "bc"],
            &["l"],
            vec![("transB", A::I(1))],
        )
        .node("softmax", "Softmax", &["l"], &["y"], vec![])
        .output("y");
    m
}

/// A YOLO-style neck with a UNet-style decoder: 16 x 16 x 16 in, 4 x 32 x 32 sigmoid maps out.
fn yolo_neck() -> Model {
    let silu = |m: &mut Model, name: &str, x: &str, y: &str| {
        let s = format!("{name}_sig");
        let g = format!("{name}_gate");
        m.node(&s, "Sigmoid", &[x], &[&g], vec![]).node(
            &format!("{name}_mul"),
            "Mul",
            &[x, &g],
            &[y],
            vec![],
        );
    };
    let mut m = Model::new(17);
    m.input("x", &[1, 16, 16, 16])
        .weight("w1", &[32, 16, 3, 3], 0.3)
        .node(
            "down",
            "Conv",
            &["x", "w1"],
            &["c1"],
            vec![("pads", A::Is(vec![1; 4])), ("strides", A::Is(vec![2, 2]))],
        );
    silu(&mut m, "down", "c1", "a1");
    m.weight("w2", &[32, 32, 1, 1], 0.3)
        .node("lateral", "Conv", &["a1", "w2"], &["c2"], vec![])
        .node(
            "lateral_act",
            "LeakyRelu",
            &["c2"],
            &["a2"],
            vec![("alpha", A::F(0.1))],
        )
        .values("roi", &[0], &[])
        .values("scales", &[4], &[1.0, 1.0, 2.0, 2.0])
        .node(
            "upsample",
            "Resize",
            &["a2", "roi", "scales"],
            &["u"],
            vec![("mode", A::S("nearest"))],
        )
        .node(
            "concat",
            "Concat",
            &["u", "x"],
            &["cat"],
            vec![("axis", A::I(1))],
        )
        .weight("w3", &[32, 48, 1, 1], 0.3)
        .node("fuse", "Conv", &["cat", "w3"], &["c3"], vec![]);
    silu(&mut m, "fuse", "c3", "a3");
    m.node(
        "split",
        "Split",
        &["a3"],
        &["s1", "s2"],
        vec![("axis", A::I(1))],
    )
    .weight("w4", &[16, 16, 3, 3], 0.3)
    .node(
        "branch",
        "Conv",
        &["s2", "w4"],
        &["c4"],
        vec![("pads", A::Is(vec![1; 4]))],
    );
    silu(&mut m, "branch", "c4", "a4");
    m.node(
        "merge",
        "Concat",
        &["s1", "a4"],
        &["mg"],
        vec![("axis", A::I(1))],
    )
    .weight("wt", &[32, 16, 2, 2], 0.3)
    .weight("bt", &[16], 0.1)
    .node(
        "decode",
        "ConvTranspose",
        &["mg", "wt", "bt"],
        &["dec"],
        vec![("strides", A::Is(vec![2, 2]))],
    )
    .node("decode_act", "Relu", &["dec"], &["da"], vec![])
    .weight("wh", &[4, 16, 1, 1], 0.5)
    .node("head", "Conv", &["da", "wh"], &["h"], vec![])
    .node("head_act", "Sigmoid", &["h"], &["y"], vec![])
    .output("y");
    m
}

/// Compiles `m` with `vta compile` (calibrated on `x` and other samples), runs it on `x` with
/// `vta run --check`, and returns the compile and run transcripts and the largest difference
/// from the float model relative to its output range.
fn compile_run_check(name: &str, m: &Model, shape: &[usize]) -> (String, String, f32) {
    let dir = scratch(name);
    std::fs::write(dir.join("m.onnx"), m.bytes()).unwrap();
    let x = sample(shape, 5, 2.0);
    write_npy(&dir.join("x.npy"), &Tensor::F32(x.clone()));
    let mut calib = vec![x.clone()];
    calib.extend((0..3).map(|s| sample(shape, 40 + s, 2.0)));
    let views: Vec<_> = calib.iter().map(|a| a.view()).collect();
    let stacked = ndarray::concatenate(ndarray::Axis(0), &views).unwrap();
    write_npy(&dir.join("calib.npy"), &Tensor::F32(stacked));
    let compile = ok(vta_in(
        &dir,
        &[
            "compile",
            "m.onnx",
            "--calibrate",
            "calib.npy",
            "-o",
            "m.vtab",
        ],
    ));
    let run = ok(vta_in(
        &dir,
        &[
            "run", "m.vtab", "--input", "x.npy", "--output", "y.npy", "--check",
        ],
    ));
    let got = tensor_from_npy(&npy::read_file(&dir.join("y.npy")).unwrap()).unwrap();
    let g = import_graph(&m.bytes(), name, DEFAULT_MEMORY_BUDGET).unwrap();
    let want = g.run_outputs(&[Tensor::F32(x)]).unwrap().remove(0);
    let (got, want) = (got.as_f32().unwrap(), want.as_f32().unwrap());
    assert_eq!(got.shape(), want.shape());
    let range = want.iter().fold(0f32, |a, v| a.max(v.abs()));
    let err = got
        .iter()
        .zip(want.iter())
        .fold(0f32, |a, (g, w)| a.max((g - w).abs()));
    (compile, run, err / range)
}

/// The support-table line of a node.
fn row<'a>(table: &'a str, node: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{node} ")))
        .unwrap_or_else(|| panic!("no row for {node} in\n{table}"))
}

#[test]
fn a_mobilenet_v3_block_compiles_runs_and_checks() {
    let (compile, run, err) = compile_run_check("mbv3", &mobilenet_v3_block(), &[1, 16, 16, 16]);
    println!("{compile}\n{run}\nrelative error {err:.4}");
    for (node, status) in [
        ("expand", "accelerator"),
        ("expand_bn", "fused"),
        ("dw", "accelerator"),
        ("se_pool", "accelerator"),
        ("se_gate", "accelerator"),
        ("se_scale", "accelerator"),
        ("project", "accelerator"),
        ("residual", "accelerator"),
        ("classifier", "accelerator"),
        ("softmax", "cpu"),
    ] {
        assert!(
            row(&compile, node).contains(status),
            "{node}: {}",
            row(&compile, node)
        );
    }
    // HardSwish is a table activation, which this ALU cannot run: the CPU does, by lookup.
    assert!(row(&compile, "expand_act").contains("QTable"), "{compile}");
    assert!(row(&compile, "expand_act").contains("cpu"), "{compile}");
    assert!(row(&compile, "se_gate").contains("QAffine"), "{compile}");
    assert!(row(&compile, "se_scale").contains("QBinary"), "{compile}");
    assert!(run.contains("check: bit-exact"), "{run}");
    // Measured: 0.34 % of the output range.
    assert!(err < 0.05, "relative error {err}");
}

#[test]
fn a_yolo_unet_neck_compiles_runs_and_checks() {
    let (compile, run, err) = compile_run_check("neck", &yolo_neck(), &[1, 16, 16, 16]);
    println!("{compile}\n{run}\nrelative error {err:.4}");
    for (node, text) in [
        ("down", "QConv2d"),
        ("down_sig", "QTable"),
        ("down_mul", "fused"),
        ("lateral_act", "QLeakyRelu"),
        ("upsample", "QUpsample"),
        ("concat", "cpu"),
        ("split", "cpu"),
        ("decode", "QConv2d"),
        ("head_act", "QTable"),
    ] {
        assert!(
            row(&compile, node).contains(text),
            "{node}: {}",
            row(&compile, node)
        );
    }
    assert!(run.contains("check: bit-exact"), "{run}");
    // Measured: 2.5 % of the output range (3 LSB of the Sigmoid's 1/127).
    assert!(err < 0.05, "relative error {err}");
}
