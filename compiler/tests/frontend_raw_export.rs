//! A detector head as PyTorch's exporter writes it (`tests/data/make_raw_export.py`): its anchor
//! grid is computed from the input's shape (Shape, Slice and Gather of shapes, Range, meshgrid's
//! Reshape/Concat/Expand, expand's ConstantOfShape/Equal/Where, ConstantOfShape for `full`,
//! Tile for `repeat`), nothing folded by onnxruntime. With the input shape fixed the importer
//! folds all of it (also when the export left height and width symbolic and `--input-shape`
//! fixes them), the float executor matches onnxruntime, and the calibrated model compiles and
//! runs on the functional simulator close to onnxruntime's float output. YOLOv5's Focus stem,
//! as onnxruntime pre-processes (SpaceToDepth) and quantizes it, runs as onnxruntime does.

use std::path::{Path, PathBuf};

use compiler::compile::Compiled;
use compiler::frontend::{
    import_graph, import_graph_shaped, load_calibration_npy, npy_to_f32, FrontendOptions,
};
use compiler::graph::Tensor;
use ndarray::{ArrayD, Axis};
use vta_runtime::budget::DEFAULT_MEMORY_BUDGET;
use vta_runtime::model::Model;
use vta_sim::FsimDevice;

const MODEL: &str = "raw_export_head.onnx";

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn npy(name: &str) -> ArrayD<f32> {
    npy_to_f32(&isa::npy::read_file(&data().join(name)).unwrap()).unwrap()
}

/// The test inputs, one [1, 3, 16, 16] tensor each, and onnxruntime's outputs.
fn cases() -> Vec<(Tensor, ArrayD<f32>)> {
    let x = npy("raw_export_test.npy");
    let y = npy("raw_export_out.npy");
    x.axis_iter(Axis(0))
        .zip(y.axis_iter(Axis(0)))
        .map(|(x, y)| {
            (
                Tensor::F32(x.insert_axis(Axis(0)).to_owned()),
                y.insert_axis(Axis(0)).to_owned(),
            )
        })
        .collect()
}

#[test]
fn shape_subgraphs_fold_and_the_float_executor_matches_onnxruntime() {
    let bytes = std::fs::read(data().join(MODEL)).unwrap();
    let g = import_graph(&bytes, MODEL, DEFAULT_MEMORY_BUDGET).unwrap_or_else(|e| panic!("{e}"));
    let mut ops: Vec<&str> = g.dag.node_weights().map(|n| n.op.op_type()).collect();
    ops.sort_unstable();
    ops.dedup();
    // Only the computation on the image is left: every shape node folded to a constant.
    assert_eq!(
        ops,
        ["Add", "Concat", "Conv", "Mul", "Pow", "Reshape", "Sigmoid", "Slice", "Sub"]
    );
    assert_matches_onnxruntime(&g);
}

/// The float executor's outputs on the test inputs are onnxruntime's.
fn assert_matches_onnxruntime(g: &compiler::graph::Graph) {
    for (x, want) in cases() {
        let y = g.run_outputs(&[x]).unwrap();
        let y = y[0].as_f32().unwrap();
        assert_eq!(y.shape(), want.shape());
        for (a, b) in y.iter().zip(&want) {
            assert!(
                (a - b).abs() <= 1e-5 * b.abs().max(1.0),
                "float executor {a}, onnxruntime {b}"
            );
        }
    }
}

#[test]
fn exported_with_symbolic_height_and_width_it_folds_once_the_input_shape_is_given() {
    // As `torch.onnx.export(..., dynamic_axes={"x": {2: "h", 3: "w"}})` writes the input.
    let bytes = std::fs::read(data().join(MODEL)).unwrap();
    let mut m = compiler::onnx::decode_model(&bytes, MODEL).unwrap();
    let input = &mut m.graph.as_mut().unwrap().input[0];
    let tt = input.r#type.as_mut().unwrap().tensor_type.as_mut().unwrap();
    let dims = &mut tt.shape.as_mut().unwrap().dim;
    for (i, name) in [(2, "h"), (3, "w")] {
        dims[i].dim_value = None;
        dims[i].dim_param = Some(name.into());
    }
    let bytes = compiler::zoo::encode_model(&m);
    let Err(e) = import_graph(&bytes, MODEL, DEFAULT_MEMORY_BUDGET) else {
        panic!("imported without the input shape");
    };
    let e = e.to_string();
    assert!(e.contains("--input-shape x=DIMS"), "{e}");
    let shape = [("x".to_string(), vec![1, 3, 16, 16])];
    let g = import_graph_shaped(&bytes, MODEL, DEFAULT_MEMORY_BUDGET, &shape)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_matches_onnxruntime(&g);
}

#[test]
fn the_calibrated_model_runs_on_the_simulator_close_to_onnxruntime() {
    let calib = load_calibration_npy(&[&data().join("raw_export_calib.npy")]).unwrap();
    let bytes = std::fs::read(data().join(MODEL)).unwrap();
    let cfg = isa::HwConfig::preset("default").unwrap();
    let c = Compiled::compile(bytes, MODEL, &calib, &cfg, &FrontendOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let (accel, _) = c.counts();
    assert!(
        accel >= 1,
        "the convolution runs on the accelerator: {}",
        c.compile_report()
    );
    let m = Model::from_bytes(&c.to_bytes().unwrap(), MODEL).unwrap();
    let mut dev = FsimDevice::checking_races(&m.config);
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for (x, want) in cases() {
        let inputs = [x];
        let r = m.run(&mut dev, &inputs).unwrap();
        let chk = m.check(&inputs, &r).unwrap();
        assert!(chk.is_exact(), "{chk}");
        let y = r.outputs[0].as_f32().unwrap();
        assert_eq!(y.shape(), want.shape());
        for (a, b) in y.iter().zip(&want) {
            dot += f64::from(*a) * f64::from(*b);
            na += f64::from(*a).powi(2);
            nb += f64::from(*b).powi(2);
        }
    }
    let cos = dot / (na.sqrt() * nb.sqrt());
    println!("raw export head, int8 on fsim vs onnxruntime float: cosine {cos:.5}");
    assert!(cos > 0.99, "cosine similarity {cos}");
}

/// The scale of the quantized model's output (its last DequantizeLinear's): one LSB.
fn output_lsb(bytes: &[u8]) -> f32 {
    let m = compiler::onnx::decode_model(bytes, "focus_stem_qdq.onnx").unwrap();
    let g = m.graph.unwrap();
    let dq = g
        .node
        .iter()
        .find(|n| n.op_type == "DequantizeLinear" && n.output[0] == g.output[0].name)
        .expect("the output's DequantizeLinear");
    let scale = g
        .initializer
        .iter()
        .find(|t| t.name == dq.input[1])
        .unwrap();
    compiler::onnx::tensor_from_proto(scale)
        .unwrap()
        .scalar_f32()
        .unwrap()
}

#[test]
fn yolov5_focus_stem_as_onnxruntime_rewrites_and_quantizes_it_runs_as_onnxruntime_does() {
    let name = "focus_stem_qdq.onnx";
    let bytes = std::fs::read(data().join(name)).unwrap();
    let lsb = output_lsb(&bytes);
    let cfg = isa::HwConfig::preset("default").unwrap();
    let c = Compiled::compile(bytes, name, &[], &cfg, &FrontendOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    let report = c.compile_report();
    assert!(report.contains("SpaceToDepth"), "{report}");
    assert_eq!(
        c.counts().0,
        1,
        "the convolution on the accelerator: {report}"
    );
    let m = Model::from_bytes(&c.to_bytes().unwrap(), name).unwrap();
    let mut dev = FsimDevice::checking_races(&m.config);
    let want = npy("focus_stem_qdq_out.npy");
    let mut worst = 0f32;
    for (x, w) in cases().into_iter().zip(want.axis_iter(Axis(0))) {
        let inputs = [x.0];
        let r = m.run(&mut dev, &inputs).unwrap();
        let chk = m.check(&inputs, &r).unwrap();
        assert!(chk.is_exact(), "{chk}");
        let y = r.outputs[0].as_f32().unwrap();
        assert_eq!(y.shape()[1..], w.shape()[..]);
        for (a, b) in y.iter().zip(w.iter()) {
            worst = worst.max((a - b).abs() / lsb);
        }
    }
    println!("Focus stem (SpaceToDepth, QDQ): largest difference from onnxruntime {worst} LSB");
    // The convolution requantizes within 1 of ONNX's result (operators.md).
    assert!(worst <= 1.0 + 1e-3, "{worst} LSB from onnxruntime");
}
