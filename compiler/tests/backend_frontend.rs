//! The front end's real layers: the tiny CNN of `tests/data` (float, QDQ and QOperator
//! forms) is planned by the front end; every accelerator step of the plan is compiled by the
//! back end, run on the functional simulator with the inputs the integer reference executor
//! gave it, and must reproduce the executor's output for that step exactly. Steps the back
//! end refuses must say why (they would run on the CPU).

use std::path::Path;

use compiler::backend::{self, LayerProgram};
use compiler::frontend::{load_and_plan, load_calibration_npy, npy_to_f32, FrontendOptions};
use compiler::graph::plan::StepKind;
use compiler::graph::{Layer, Tensor};
use compiler::reference::run_plan;
use drivers::RunTimeout;
use ndarray::{Array4, Axis, IxDyn};
use vta_sim::FsimDevice;

/// A rank-2..4 int8 tensor as NCHW (missing trailing dimensions are 1).
fn nchw(t: &Tensor) -> Array4<i8> {
    let Tensor::I8(a) = t else {
        panic!("accelerator tensors are int8")
    };
    let mut s = a.shape().to_vec();
    s.resize(4, 1);
    a.clone()
        .into_shape_with_order((s[0], s[1], s[2], s[3]))
        .unwrap()
}

/// Compiles one plan layer for inputs of the given NCHW shapes.
fn compile(
    cfg: &isa::HwConfig,
    layer: &Layer,
    shapes: &[[usize; 4]],
) -> Result<LayerProgram, backend::BackendError> {
    backend::compile_layer(cfg, layer, shapes)
}

#[test]
fn every_accelerator_step_of_the_tiny_cnn_is_exact() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let calib = load_calibration_npy(&[&data.join("digits_calib.npy")]).unwrap();
    let images = npy_to_f32(&isa::npy::read_file(&data.join("digits_test.npy")).unwrap()).unwrap();
    let mut compiled = 0;
    for cfg_name in ["default", "batched", "rect", "small"] {
        let cfg = isa::HwConfig::preset(cfg_name).unwrap();
        for model in ["tiny_cnn.onnx", "tiny_cnn_qdq.onnx", "tiny_cnn_qop.onnx"] {
            let (plan, _) =
                load_and_plan(&data.join(model), &calib, &cfg, &FrontendOptions::default())
                    .unwrap();
            for img in images.axis_iter(Axis(0)).take(3) {
                let x = Tensor::F32(
                    img.to_owned()
                        .into_shape_with_order(IxDyn(&[1, 1, 8, 8]))
                        .unwrap(),
                );
                let trace = run_plan(&plan, &[x]).unwrap();
                for step in &plan.steps {
                    let StepKind::Accel(layer) = &step.kind else {
                        continue;
                    };
                    let ins: Vec<Array4<i8>> = step
                        .inputs
                        .iter()
                        .map(|&v| nchw(trace.get(v).unwrap()))
                        .collect();
                    let shapes: Vec<[usize; 4]> =
                        ins.iter().map(|a| a.shape().try_into().unwrap()).collect();
                    let lp = match compile(&cfg, layer, &shapes) {
                        Ok(lp) => lp,
                        Err(e) => {
                            assert!(!e.to_string().is_empty());
                            continue;
                        }
                    };
                    let views: Vec<_> = ins.iter().map(|a| a.view()).collect();
                    let mut dev = FsimDevice::checking_races(&cfg);
                    let (out, _) = lp.run_all(&mut dev, &views, RunTimeout::default()).unwrap();
                    let want = nchw(trace.get(step.outputs[0]).unwrap());
                    assert_eq!(
                        out[0],
                        want,
                        "{cfg_name} {model} step {} ({})",
                        step.name,
                        layer.kind()
                    );
                    compiled += 1;
                }
            }
        }
    }
    assert!(
        compiled >= 4 * 3 * 3,
        "only {compiled} accelerator steps ran"
    );
}
