//! Low-bit quantized models, written with their reference outputs by
//! `scripts/lowbit-models.py` into `tests/data/lowbit`: onnxruntime's int4 QDQ (opset 21,
//! `quantize_static` with `QInt4` weights, uint8, int4 or uint4 activations; and with int2
//! weights at opset 25), a Brevitas-style QCDQ
//! export (int8 `QuantizeLinear -> Clip -> DequantizeLinear`, 4-bit by the Clip bounds) and
//! QONNX `Quant`/`BipolarQuant` models, all the same small CNN (two 3x3 convolutions, a
//! dense layer). Each imports; compiles for the default int8 config and for a config whose
//! lanes match its widths, with its convolutions and dense layer on the accelerator (the
//! narrow config's refusals named); runs bit-exact against the compiler's integer reference
//! on fsim; and agrees with the reference outputs (onnxruntime running the model as written,
//! or qonnx's executor). Models the importer cannot take exactly are refused with the reason.

mod onnx_builder;

use std::path::{Path, PathBuf};

use compiler::compile::Compiled;
use compiler::frontend::{import_graph, npy_to_f32, FrontendOptions};
use compiler::graph::{Support, Tensor};
use compiler::onnx::proto::{data_type, TensorProto};
use compiler::onnx::tensor_from_proto;
use ndarray::{ArrayD, Axis, IxDyn};
use onnx_builder::{Model as Onnx, A};
use vta_runtime::budget::DEFAULT_MEMORY_BUDGET;
use vta_runtime::model::Model;
use vta_sim::FsimDevice;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/lowbit")
}

fn npy(name: &str) -> ArrayD<f32> {
    npy_to_f32(&isa::npy::read_file(&data().join(name)).unwrap()).unwrap()
}

fn try_compile(model: &str, config: &str, opts: &FrontendOptions) -> Result<Compiled, String> {
    let file = format!("{model}.onnx");
    let bytes = std::fs::read(data().join(&file)).unwrap();
    let cfg = isa::HwConfig::load(config).unwrap();
    Compiled::compile(bytes, &file, &[], &cfg, opts).map_err(|e| e.to_string())
}

fn compile(model: &str, config: &str, opts: &FrontendOptions) -> Compiled {
    try_compile(model, config, opts).unwrap_or_else(|e| panic!("{model} on {config}: {e}"))
}

/// Runs every stored input on fsim, each run checked bit-exact against the compiler's
/// integer reference of the plan; the outputs, flattened.
fn run_checked(m: &Model) -> Vec<f32> {
    let mut dev = FsimDevice::checking_races(&m.config);
    npy("inputs.npy")
        .axis_iter(Axis(0))
        .flat_map(|x| {
            let inputs = [Tensor::F32(x.to_owned().insert_axis(Axis(0)).into_dyn())];
            let r = m.run(&mut dev, &inputs).unwrap();
            let c = m.check(&inputs, &r).unwrap();
            assert!(c.is_exact(), "{}: {c}", m.source);
            r.outputs[0]
                .as_f32()
                .unwrap()
                .iter()
                .copied()
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The output's quantization step: the smallest gap between distinct reference outputs.
fn step_of(v: &ArrayD<f32>) -> f32 {
    let mut v: Vec<f32> = v.iter().copied().collect();
    v.sort_by(f32::total_cmp);
    v.dedup();
    v.windows(2)
        .map(|w| w[1] - w[0])
        .fold(f32::INFINITY, f32::min)
}

/// Differences from the reference in output steps (both are dequantized integers, so a
/// difference below half a step is float rounding of the same integer).
fn lsb_diffs(ours: &[f32], reference: &ArrayD<f32>) -> Vec<u32> {
    let step = step_of(reference);
    assert_eq!(ours.len(), reference.len());
    ours.iter()
        .zip(reference.iter())
        .map(|(a, b)| ((a - b).abs() / step).round() as u32)
        .collect()
}

/// (model, the config whose lanes match its widths, the layers on the accelerator there).
const CASES: [(&str, &str, &[&str]); 7] = [
    ("ort_w4a8", "i8w4", &["conv1", "conv2", "fc"]),
    // int2 weights (opset 25).
    ("ort_w2a8", "i8w2", &["conv1", "conv2", "fc"]),
    ("ort_w4a4", "i4w4", &["conv1", "conv2", "fc"]),
    // uint4 activations [0, 15] are held centred in the lanes ([-8, 7]): 4-bit lanes.
    ("ort_w4a4u", "i4w4", &["conv1", "conv2", "fc"]),
    // The logits are 8-bit: the dense layer stores them as two planes of 4-bit digits.
    ("qcdq_w4a4", "i4w4", &["conv1", "conv2", "fc"]),
    // Unsigned 4-bit activations, centred too; 8-bit logits.
    ("qonnx_w4a4u", "i4w4", &["conv1", "conv2", "fc"]),
    ("qonnx_bipolar", "i8w2", &["conv1", "conv2", "fc"]),
];

fn support<'a>(c: &'a Compiled, node: &str) -> &'a Support {
    &c.support
        .entries
        .iter()
        .find(|e| e.node == node)
        .unwrap_or_else(|| panic!("no node {node}"))
        .support
}

#[test]
fn convolutions_and_dense_layers_run_on_int8_and_on_matching_narrow_lanes() {
    for (model, narrow, on_narrow) in CASES {
        for config in ["default", narrow] {
            let c = compile(model, config, &FrontendOptions::default());
            let report = c.compile_report();
            for e in &c.support.entries {
                assert!(
                    !matches!(e.support, Support::NotAnalyzed { .. }),
                    "{model} on {config}: {} has no status\n{report}",
                    e.node
                );
            }
            for layer in ["conv1", "conv2", "fc"] {
                let want = config == "default" || on_narrow.contains(&layer);
                let got = matches!(support(&c, layer), Support::Accel { .. });
                assert_eq!(got, want, "{model} on {config}: {layer}\n{report}");
            }
        }
    }
    // 8-bit logits on the 4-bit core: stored as digit planes, which the report says.
    let c = compile("qcdq_w4a4", "i4w4", &FrontendOptions::default());
    let report = c.compile_report();
    assert!(
        report.contains("outputs as 2 planes of 4-bit digits"),
        "{report}"
    );
    let json = c.report_json();
    let planes: Vec<_> = json["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["output_planes"].as_u64())
        .collect();
    assert_eq!(planes, [Some(1), Some(1), Some(2)], "{json}");
    // What does not fit is named with the widths: 8-bit activations into 4-bit input lanes.
    let c = compile("ort_w4a8", "i4w4", &FrontendOptions::default());
    let Support::Cpu { reason, .. } = support(&c, "conv2") else {
        panic!("conv2 is not on the CPU\n{}", c.compile_report());
    };
    assert!(reason.contains("4-bit input lanes"), "{reason}");
}

/// 4-bit weights on 2-bit weight lanes (8-bit activations): the convolutions and the dense
/// layer run bit-sliced, three passes of 2-bit weight digits each, which the report says;
/// runs are bit-exact.
#[test]
fn weights_wider_than_the_lanes_run_bit_sliced() {
    let c = compile("qonnx_w4a4u", "i8w2", &FrontendOptions::default());
    let report = c.compile_report();
    for layer in ["conv1", "conv2", "fc"] {
        assert!(
            matches!(support(&c, layer), Support::Accel { .. }),
            "{layer}\n{report}"
        );
    }
    assert_eq!(
        report
            .matches("bit-sliced: 3 passes of 2-bit weight digits")
            .count(),
        3,
        "{report}"
    );
    let m = Model::from_bytes(&c.to_bytes().unwrap(), "qonnx_w4a4u").unwrap();
    run_checked(&m);
}

#[test]
fn runs_are_bit_exact_and_agree_with_the_reference() {
    // (model, most output steps from the reference with the layers on the accelerator).
    // The accelerator requantizes within 1 LSB of ONNX's float definition per layer
    // (`RequantFidelity::WithinOneLsb`), so a difference in a hidden 4-bit activation can move
    // the logits by a few steps; the CPU plan computes the definition and must agree to
    // the step.
    for (model, narrow, _) in CASES {
        let reference = npy(&format!("{model}_ref.npy"));
        let cpu = compile(
            model,
            "default",
            &FrontendOptions {
                offload: false,
                ..Default::default()
            },
        );
        let exact = lsb_diffs(&run_checked(&cpu.model), &reference);
        let equal = exact.iter().filter(|&&d| d == 0).count();
        println!(
            "{model}: CPU plan {equal}/{} outputs equal to the reference",
            exact.len()
        );
        assert_eq!(
            equal,
            exact.len(),
            "{model}: the CPU plan differs: {exact:?}"
        );
        for config in ["default", narrow] {
            let c = compile(model, config, &FrontendOptions::default());
            let m = Model::from_bytes(&c.to_bytes().unwrap(), model).unwrap();
            let d = lsb_diffs(&run_checked(&m), &reference);
            let worst = *d.iter().max().unwrap();
            let equal = d.iter().filter(|&&v| v == 0).count();
            println!(
                "{model} on {config}: {equal}/{} outputs equal to the reference, at most \
                 {worst} steps apart",
                d.len()
            );
            assert!(worst <= 2, "{model} on {config}: {worst} steps: {d:?}");
        }
    }
}

#[test]
fn low_bit_models_the_importer_cannot_take_exactly_are_refused_with_the_reason() {
    for (model, words) in [
        ("bad_blocked", &["block_size 2", "per channel"][..]),
        (
            "bad_bitwidth_fraction",
            &["'the_quant'", "bit width is 2.5", "integer bit widths"],
        ),
        (
            "bad_bitwidth_16",
            &["'the_quant'", "bit width is 16", "at most 8 bits"],
        ),
        (
            "bad_bipolar_activation",
            &["'the_quant'", "BipolarQuant of a run-time tensor"],
        ),
        (
            "bad_floor_activation",
            &[
                "'the_quant'",
                "FLOOR",
                "export the activation quantizer with ROUND",
            ],
        ),
        (
            "bad_zeropt_activation",
            &["'the_quant'", "non-zero zero point", "zero point 0"],
        ),
    ] {
        let e = match try_compile(model, "default", &FrontendOptions::default()) {
            Ok(_) => panic!("{model} compiled"),
            Err(e) => e,
        };
        for w in words {
            assert!(e.contains(w), "{model}: '{w}' not in: {e}");
        }
    }
}

#[test]
fn sub_byte_tensors_unpack_low_bits_first_from_raw_data_and_int32_data() {
    let t = |code: i32, n: i64, raw: Vec<u8>, int32: Vec<i32>| TensorProto {
        name: "t".into(),
        dims: vec![n],
        data_type: code,
        raw_data: raw,
        int32_data: int32,
        ..Default::default()
    };
    let values = |t: &TensorProto| tensor_from_proto(t).map(|v| v.to_i64_vec());
    // 0xE1: 1 in the low nibble, then 0xE = -2; 0x0F: -1 (and a padding nibble).
    assert_eq!(
        values(&t(data_type::INT4, 3, vec![0xE1, 0x0F], vec![])),
        Ok(vec![1, -2, -1])
    );
    assert_eq!(
        values(&t(data_type::UINT4, 3, vec![], vec![0xE1, 0x0F])),
        Ok(vec![1, 14, 15])
    );
    // 0xE4 = 0b11_10_01_00: 0, 1, 2, 3 from the lowest bits up.
    assert_eq!(
        values(&t(data_type::UINT2, 5, vec![0xE4, 0x01], vec![])),
        Ok(vec![0, 1, 2, 3, 1])
    );
    assert_eq!(
        values(&t(data_type::INT2, 5, vec![], vec![0xE4, 0x03])),
        Ok(vec![0, 1, -2, -1, -1])
    );
    assert!(matches!(
        tensor_from_proto(&t(data_type::INT4, 2, vec![], vec![0x21])).unwrap(),
        Tensor::I8(_)
    ));
    let e = values(&t(data_type::INT4, 5, vec![0, 0], vec![])).unwrap_err();
    assert!(
        e.contains("5 elements of 4 bits (3 packed bytes) but 2 bytes"),
        "{e}"
    );
    let e = values(&t(data_type::INT2, 1, vec![], vec![300])).unwrap_err();
    assert!(e.contains("int32_data value 300"), "{e}");
}

/// The integers a QONNX `Quant` of a constant gives, read back through its
/// DequantizeLinear (scale 1, zero point 0).
fn quant_of_constant(
    op: &str,
    v: &[f32],
    bits: f32,
    signed: i64,
    narrow: i64,
    mode: &'static str,
) -> Vec<i64> {
    let mut m = Onnx::new(13);
    m.input("x", &[v.len()])
        .output("y")
        .values("w", &[v.len()], v)
        .values("s", &[], &[1.0])
        .values("z", &[], &[0.0])
        .values("b", &[], &[bits])
        .node(
            "q",
            op,
            &["w", "s", "z", "b"],
            &["wq"],
            vec![
                ("signed", A::I(signed)),
                ("narrow", A::I(narrow)),
                ("rounding_mode", A::S(mode)),
            ],
        )
        .node("add", "Add", &["x", "wq"], &["y"], vec![]);
    m.nodes[0].domain = "qonnx.custom_op.general".into();
    let g = import_graph(&m.bytes(), "quant.onnx", DEFAULT_MEMORY_BUDGET).unwrap();
    let x = Tensor::F32(ArrayD::zeros(IxDyn(&[v.len()])));
    g.run_outputs(&[x]).unwrap()[0].to_i64_vec()
}

#[test]
fn qonnx_quant_of_constants_clamps_then_rounds_with_the_nodes_mode() {
    // qonnx: clamp x / scale + zeropt to the signed/narrow range of the bit width, then round
    // (numpy's functions: np.round is half to even, HALF_UP/HALF_DOWN are away from / towards
    // zero on ties, UP/DOWN away from / towards zero). Every expected row is what qonnx 1.0's
    // `int_quant` returns for these values.
    let v = [-2.5, -1.5, 0.5, 2.5, 9.0, -9.3, 1.2];
    for (mode, want) in [
        ("ROUND", [-2, -2, 0, 2, 7, -8, 1]),
        ("HALF_EVEN", [-2, -2, 0, 2, 7, -8, 1]),
        ("HALF_UP", [-3, -2, 1, 3, 7, -8, 1]),
        ("HALF_DOWN", [-2, -1, 0, 2, 7, -8, 1]),
        ("CEIL", [-2, -1, 1, 3, 7, -8, 2]),
        ("FLOOR", [-3, -2, 0, 2, 7, -8, 1]),
        ("UP", [-3, -2, 1, 3, 7, -8, 2]),
        ("DOWN", [-2, -1, 0, 2, 7, -8, 1]),
    ] {
        assert_eq!(
            quant_of_constant("Quant", &v, 4.0, 1, 0, mode),
            want,
            "{mode}"
        );
    }
    assert_eq!(
        quant_of_constant("Quant", &v, 4.0, 1, 1, "ROUND"),
        [-2, -2, 0, 2, 7, -7, 1]
    );
    assert_eq!(
        quant_of_constant("Quant", &v, 3.0, 1, 0, "ROUND"),
        [-2, -2, 0, 2, 3, -4, 1]
    );
    assert_eq!(
        quant_of_constant("Quant", &v, 2.0, 0, 0, "ROUND"),
        [0, 0, 0, 2, 3, 0, 1]
    );
    assert_eq!(
        quant_of_constant("Quant", &v, 2.0, 0, 1, "ROUND"),
        [0, 0, 0, 2, 2, 0, 1]
    );
    // IntQuant is qonnx 1.0's name of the same op.
    assert_eq!(
        quant_of_constant("IntQuant", &v, 4.0, 1, 0, "HALF_UP"),
        [-3, -2, 1, 3, 7, -8, 1]
    );
    // A signed 1-bit Quant is bipolar: the sign, 0 counting as positive.
    assert_eq!(
        quant_of_constant("Quant", &[-0.2, 0.0, 3.0], 1.0, 1, 0, "ROUND"),
        [-1, 1, 1]
    );
}

#[test]
fn other_qonnx_operators_are_unsupported_with_a_hint() {
    let mut m = Onnx::new(13);
    m.input("x", &[4])
        .output("y")
        .values("s", &[], &[1.0])
        .values("z", &[], &[0.0])
        .values("bi", &[], &[8.0])
        .values("bo", &[], &[4.0])
        .node(
            "trunc",
            "Trunc",
            &["x", "s", "z", "bi", "bo"],
            &["y"],
            vec![],
        );
    m.nodes[0].domain = "qonnx.custom_op.general".into();
    let e = import_graph(&m.bytes(), "trunc.onnx", DEFAULT_MEMORY_BUDGET)
        .unwrap_err()
        .to_string();
    assert!(e.contains("QONNX's Trunc is not imported"), "{e}");
}

#[test]
fn a_narrow_quantized_output_held_centred_comes_back_as_its_onnx_values() {
    // x -> QuantizeLinear to uint4 -> output: the plan holds the uint4 values
    // centred in int8 ([0, 15] as [-8, 7]) and moves them back for the output.
    let mut m = Onnx::new(21);
    m.input("x", &[1, 8])
        .output("y")
        .values("s", &[], &[0.25])
        .node(
            "q",
            "QuantizeLinear",
            &["x", "s"],
            &["y"],
            vec![("output_dtype", A::I(i64::from(data_type::UINT4)))],
        );
    let bytes = m.bytes();
    let g = import_graph(&bytes, "q.onnx", DEFAULT_MEMORY_BUDGET).unwrap();
    let cfg = isa::HwConfig::default();
    let c = Compiled::compile(bytes, "q.onnx", &[], &cfg, &FrontendOptions::default()).unwrap();
    let report = c.compile_report();
    assert!(report.contains("held centred as [-8, 7]"), "{report}");
    let x = Tensor::F32(
        ArrayD::from_shape_vec(
            IxDyn(&[1, 8]),
            vec![-1.0, 0.0, 0.125, 0.375, 1.0, 3.6, 3.9, 9.0],
        )
        .unwrap(),
    );
    let want = g.run_outputs(std::slice::from_ref(&x)).unwrap();
    // round half to even, then saturate to uint4
    assert_eq!(want[0].to_i64_vec(), [0, 0, 0, 2, 4, 14, 15, 15]);
    assert_eq!(want[0].dtype(), compiler::graph::DType::U8);
    let mut dev = FsimDevice::new(&c.model.config);
    let r = c.model.run(&mut dev, std::slice::from_ref(&x)).unwrap();
    assert_eq!(r.outputs, want);
}

#[test]
fn a_quantize_linear_dividing_in_another_precision_is_refused() {
    let mut m = Onnx::new(23);
    m.input("x", &[4])
        .output("y")
        .values("s", &[], &[0.5])
        .node(
            "q",
            "QuantizeLinear",
            &["x", "s"],
            &["y"],
            vec![
                ("output_dtype", A::I(i64::from(data_type::INT4))),
                ("precision", A::I(i64::from(data_type::FLOAT16))),
            ],
        );
    let e = import_graph(&m.bytes(), "p.onnx", DEFAULT_MEMORY_BUDGET)
        .unwrap_err()
        .to_string();
    assert!(e.contains("precision float16 is not supported"), "{e}");
}
