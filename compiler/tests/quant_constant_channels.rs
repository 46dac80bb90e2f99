//! Convolutions of onnxruntime-quantized models with dead output channels: per-channel weight
//! scales of 1e-20 (onnxruntime's scale for a channel whose float weights are all but zero)
//! next to 5e-3 give per-channel multipliers no shared requantization shift fits. Such a
//! channel outputs one constant for every input, which the compiler realizes exactly (zero
//! weights, a bias the requantization maps to that constant), so the layer runs on the
//! accelerator; a small channel whose output does vary still keeps the layer on the CPU.
//! Both the QOperator (QLinearConv) and the QDQ form, built here.

mod onnx_builder;

use compiler::compile::Compiled;
use compiler::frontend::FrontendOptions;
use compiler::graph::{Support, Tensor};
use ndarray::{ArrayD, IxDyn};
use onnx_builder::{sample, Model, A};
use vta_sim::FsimDevice;

const C_IN: usize = 8;
const C_OUT: usize = 16;
const SX: f32 = 0.02;
const SY: f32 = 0.05;
const ZX: u8 = 120;
const ZY: u8 = 128;

/// Channel 3 is dead with bias 0 (outputs its zero point), channel 9 is dead with a bias
/// worth 3 output LSBs (outputs `ZY + 3`); with `varying_small`, channel 5's multiplier is
/// 4e-9 too but its bias sits on a rounding boundary, so it outputs 0 or 1 depending on the
/// input.
fn channels(varying_small: bool) -> (Vec<f32>, Vec<i32>) {
    let mut sw: Vec<f32> = (0..C_OUT).map(|c| 0.003 + 0.0004 * c as f32).collect();
    let mut bias: Vec<i32> = (0..C_OUT as i32).map(|c| 40 * c - 300).collect();
    sw[3] = 1e-20;
    bias[3] = 0;
    sw[9] = 1e-8;
    bias[9] = 750_000_000;
    if varying_small {
        sw[5] = 1e-8;
        bias[5] = 125_000_000;
    }
    (sw, bias)
}

fn weights() -> Vec<i8> {
    let mut s = 12345u32;
    (0..C_OUT * C_IN * 9)
        .map(|_| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (((s >> 8) % 255) as i32 - 127) as i8
        })
        .collect()
}

fn u8s(v: u8) -> Tensor {
    Tensor::U8(ArrayD::from_elem(IxDyn(&[]), v))
}

fn tensor_i8(shape: &[usize], v: Vec<i8>) -> Tensor {
    Tensor::I8(ArrayD::from_shape_vec(IxDyn(shape), v).unwrap())
}

fn tensor_i32(v: Vec<i32>) -> Tensor {
    Tensor::I32(ArrayD::from_shape_vec(IxDyn(&[v.len()]), v).unwrap())
}

/// `x -> QuantizeLinear -> [conv] -> DequantizeLinear -> y`, the conv in QOperator form
/// (`QLinearConv`) or QDQ form (`DQ -> Conv(DQ(w), DQ(b)) -> Q`), padded 3x3.
fn model(qdq: bool, varying_small: bool) -> Model {
    let (sw, bias) = channels(varying_small);
    let mut m = Model::new(17);
    m.input("x", &[1, C_IN, 6, 6])
        .values("sx", &[], &[SX])
        .init("zx", u8s(ZX))
        .values("sy", &[], &[SY])
        .init("zy", u8s(ZY))
        .values("sw", &[C_OUT], &sw)
        .init("zw", tensor_i8(&[C_OUT], vec![0; C_OUT]))
        .init("wq", tensor_i8(&[C_OUT, C_IN, 3, 3], weights()))
        .init("bq", tensor_i32(bias))
        .node("qx", "QuantizeLinear", &["x", "sx", "zx"], &["xq"], vec![]);
    let pads = ("pads", A::Is(vec![1, 1, 1, 1]));
    if qdq {
        let sb: Vec<f32> = sw.iter().map(|s| SX * s).collect();
        m.values("sb", &[C_OUT], &sb)
            .init("zb", tensor_i32(vec![0; C_OUT]))
            .node(
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
                vec![("axis", A::I(0))],
            )
            .node(
                "dqb",
                "DequantizeLinear",
                &["bq", "sb", "zb"],
                &["b"],
                vec![("axis", A::I(0))],
            )
            .node("conv", "Conv", &["a", "w", "b"], &["c"], vec![pads])
            .node("qy", "QuantizeLinear", &["c", "sy", "zy"], &["yq"], vec![]);
    } else {
        m.node(
            "conv",
            "QLinearConv",
            &["xq", "sx", "zx", "wq", "sw", "zw", "sy", "zy", "bq"],
            &["yq"],
            vec![pads],
        );
    }
    m.node(
        "dqy",
        "DequantizeLinear",
        &["yq", "sy", "zy"],
        &["y"],
        vec![],
    )
    .output("y");
    m
}

fn compile(m: &Model, offload: bool) -> Compiled {
    let opts = FrontendOptions {
        offload,
        ..Default::default()
    };
    Compiled::compile(m.bytes(), "t.onnx", &[], &isa::HwConfig::default(), &opts).unwrap()
}

/// The output, checked bit-exact against the integer reference, in output LSBs (`u8`).
fn run(c: &Compiled, x: &ArrayD<f32>) -> Vec<i32> {
    let mut dev = FsimDevice::checking_races(&c.model.config);
    let inputs = [Tensor::F32(x.clone())];
    let r = c.model.run(&mut dev, &inputs).unwrap();
    assert!(c.model.check(&inputs, &r).unwrap().is_exact());
    r.outputs[0]
        .as_f32()
        .unwrap()
        .iter()
        .map(|v| (v / SY).round() as i32 + i32::from(ZY))
        .collect()
}

#[test]
fn dead_channels_leave_the_layer_on_the_accelerator_and_output_their_constant_exactly() {
    for qdq in [false, true] {
        let m = model(qdq, false);
        let c = compile(&m, true);
        let e = c.support.get("conv").unwrap();
        let Support::Accel { note, .. } = &e.support else {
            panic!("qdq {qdq}: not on the accelerator:\n{}", c.compile_report());
        };
        assert!(
            note.contains("2 channel(s) with a constant output"),
            "{note}"
        );
        // The ONNX definition, every node on the CPU.
        let exact = compile(&m, false);
        let plane = 36;
        for seed in 0..4 {
            let x = sample(&[1, C_IN, 6, 6], 30 + seed, 2.5);
            let (ours, want) = (run(&c, &x), run(&exact, &x));
            for (k, (&a, &b)) in ours.iter().zip(&want).enumerate() {
                let ch = k / plane;
                match ch {
                    3 => assert_eq!((a, b), (i32::from(ZY), i32::from(ZY)), "qdq {qdq}"),
                    9 => assert_eq!((a, b), (i32::from(ZY) + 3, i32::from(ZY) + 3), "qdq {qdq}"),
                    _ => assert!((a - b).abs() <= 1, "qdq {qdq} channel {ch}: {a} vs {b}"),
                }
            }
        }
    }
}

#[test]
fn a_small_channel_whose_output_varies_keeps_the_layer_on_the_cpu() {
    for qdq in [false, true] {
        let m = model(qdq, true);
        let c = compile(&m, true);
        let e = c.support.get("conv").unwrap();
        let Support::Cpu { reason, .. } = &e.support else {
            panic!("qdq {qdq}: offloaded:\n{}", c.compile_report());
        };
        assert!(
            reason.starts_with("no requantization fits multiplier(s) 4.000e-9..")
                && reason.contains("(2 channel(s) with a constant output left out)"),
            "{reason}"
        );
        // It does vary: channel 5 takes both values over these inputs.
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..4 {
            let y = run(&c, &sample(&[1, C_IN, 6, 6], 30 + seed, 2.5));
            seen.extend(y[5 * 36..6 * 36].iter().copied());
        }
        assert_eq!(
            seen.into_iter().collect::<Vec<_>>(),
            vec![i32::from(ZY), i32::from(ZY) + 1]
        );
    }
}
