//! A layer the front end offloads but the back end refuses (a max pool whose window does not
//! fit half of the `small` config's accumulator scratchpad) runs on the CPU with its exact reference
//! semantics: the support table and the per-layer table say so, the compiled-model file keeps
//! the refusal, and the run is still bit-exact.

use compiler::compile::Compiled;
use compiler::frontend::FrontendOptions;
use compiler::graph::{Support, Tensor};
use compiler::onnx::proto::{
    attribute_type, data_type, AttributeProto, Dimension, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorShapeProto, TypeProto, TypeProtoTensor, ValueInfoProto,
};
use compiler::zoo;
use vta_runtime::model::{Model, Place};
use vta_sim::FsimDevice;

fn info(name: &str, shape: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
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
    }
}

fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::INTS,
        ints: v.to_vec(),
        ..Default::default()
    }
}

/// `x [1, 4, 16, 16] -> MaxPool 16x16 -> Relu`: one output pixel takes 273 ACC rows (the
/// window, its row maxima, the pixel), the `small` config's half of ACC 256.
fn wide_pool_model() -> Vec<u8> {
    let node = |op: &str, i: &str, o: &str, attribute| NodeProto {
        op_type: op.into(),
        name: format!("wide_{}", op.to_lowercase()),
        input: vec![i.into()],
        output: vec![o.into()],
        attribute,
        ..Default::default()
    };
    zoo::encode_model(&ModelProto {
        ir_version: 8,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: 13,
        }],
        graph: Some(GraphProto {
            node: vec![
                node("MaxPool", "x", "p", vec![ints("kernel_shape", &[16, 16])]),
                node("Relu", "p", "y", vec![]),
            ],
            name: "g".into(),
            input: vec![info("x", &[1, 4, 16, 16])],
            output: vec![info("y", &[1, 4, 1, 1])],
            ..Default::default()
        }),
        ..Default::default()
    })
}

#[test]
fn refused_layer_runs_on_the_cpu_exactly() {
    let x = zoo::sample_input(&[1, 4, 16, 16], 3);
    let onnx = wide_pool_model();
    let opts = FrontendOptions::default();
    let small = isa::HwConfig::preset("small").unwrap();
    let m = Compiled::compile(
        onnx.clone(),
        "wide.onnx",
        std::slice::from_ref(&x),
        &small,
        &opts,
    )
    .unwrap();
    let pool = m.steps.iter().find(|a| a.kind == "QMaxPool").unwrap();
    assert!(pool.is_refused(), "{}", m.compile_report());
    let entry = m.support.get("wide_maxpool").unwrap();
    assert!(
        matches!(&entry.support, Support::Cpu { reason, .. } if reason.contains("refused by the back end")),
        "{}",
        m.support
    );
    assert!(m.layer_report().contains("CPU: layer 'wide_maxpool'"));

    let m = Model::from_bytes(&m.to_bytes().unwrap(), "wide.vtab").unwrap();
    let mut dev = FsimDevice::checking_races(&small);
    let inputs = [Tensor::F32(x.clone())];
    let r = m.run(&mut dev, &inputs).unwrap();
    let l = r.layers.iter().find(|l| l.kind == "QMaxPool").unwrap();
    assert!(l.place == Place::Cpu && l.note.is_some());
    assert!(r.table().contains("cpu*"), "{}", r.table());
    assert!(m.check(&inputs, &r).unwrap().is_exact());

    // The default config's larger scratchpads take the same layer.
    let cfg = isa::HwConfig::preset("default").unwrap();
    let m = Compiled::compile(onnx, "wide.onnx", &[x], &cfg, &opts).unwrap();
    assert!(
        m.accel.iter().all(|a| a.launch().is_some()),
        "{}",
        m.compile_report()
    );
}
