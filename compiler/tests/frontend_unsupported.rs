//! A model that cannot compile fails with the whole support table: every unsupported node
//! (name, op type, why, and what would make it compile), never just the first; nodes after an
//! unsupported one are still analysed when the model declares the shapes between them
//! (`value_info`), the unsupported node is an onnxruntime contrib operator of known signature
//! or a standard element-wise operator, or only an attribute that does not change its output
//! shape is unsupported (a Resize of an unknown mode); only after an output of unknowable shape are they
//! "not analysed".

mod onnx_builder;

use compiler::frontend::{import_graph, FrontendError};
use compiler::graph::{DType, Support, SupportTable};
use onnx_builder::{vi, Model, A};
use vta_runtime::budget::DEFAULT_MEMORY_BUDGET;

fn table(m: &Model) -> (usize, SupportTable, String) {
    match import_graph(&m.bytes(), "m.onnx", DEFAULT_MEMORY_BUDGET) {
        Err(e @ FrontendError::Unsupported { .. }) => {
            let text = e.to_string();
            let FrontendError::Unsupported { count, table, .. } = e else {
                unreachable!()
            };
            (count, table, text)
        }
        Err(e) => panic!("expected the support table, got: {e}"),
        Ok(_) => panic!("the model imported"),
    }
}

#[test]
fn every_unsupported_node_is_listed_with_a_fix() {
    // Conv -> LpNormalization (unknown) -> Relu -> com.microsoft QLinearSoftmax -> Conv
    //      -> Resize of an unknown mode (unsupported attribute) -> Sigmoid.
    let mut m = Model::new(13);
    m.input("x", &[1, 4, 8, 8])
        .weight("w", &[4, 4, 3, 3], 0.3)
        .node(
            "conv",
            "Conv",
            &["x", "w"],
            &["a"],
            vec![("pads", A::Is(vec![1; 4]))],
        )
        .node("norm", "LpNormalization", &["a"], &["b"], vec![])
        .node("relu", "Relu", &["b"], &["c"], vec![])
        .values("s", &[], &[0.1])
        .node(
            "qs",
            "QLinearSoftmax",
            &["c", "s", "s", "s", "s"],
            &["d"],
            vec![],
        )
        .weight("w2", &[4, 4, 1, 1], 0.3)
        .node("conv2", "Conv", &["d", "w2"], &["e"], vec![])
        .values("roi", &[0], &[])
        .values("scales", &[4], &[1.0, 1.0, 2.0, 2.0])
        .node(
            "up",
            "Resize",
            &["e", "roi", "scales"],
            &["f"],
            vec![("mode", A::S("lanczos"))],
        )
        .node("sig", "Sigmoid", &["f"], &["y"], vec![])
        .output("y");
    m.nodes[3].domain = "com.microsoft".into();
    // The shape between the unknown LpNormalization and the Relu, as ONNX shape inference
    // writes it.
    m.value_info.push(vi("b", DType::F32, &[1, 4, 8, 8]));
    let (count, t, text) = table(&m);
    println!("{text}");
    assert_eq!(count, 3, "{t}");
    let unsupported: Vec<&str> = t.unsupported().map(|e| e.node.as_str()).collect();
    assert_eq!(unsupported, ["norm", "qs", "up"], "{t}");
    let get = |n: &str| t.get(n).unwrap().support.clone();
    assert!(
        matches!(get("norm"), Support::Unsupported { reason, fix } if reason.contains("LpNormalization is not supported") && fix.contains("user guide's operator table")),
        "{t}"
    );
    assert!(
        matches!(get("qs"), Support::Unsupported { fix, .. } if fix.contains("QuantFormat.QDQ")),
        "{t}"
    );
    assert!(
        matches!(get("up"), Support::Unsupported { reason, .. } if reason.contains("unknown mode 'lanczos'")),
        "{t}"
    );
    // Nodes after the unsupported ones were analysed: the Relu and the second Conv (facts from
    // value_info and from QLinearSoftmax's signature) and the Sigmoid (after the Resize, whose
    // output shape does not depend on its mode).
    for n in ["conv", "relu", "conv2", "sig"] {
        assert!(
            matches!(get(n), Support::NotPlaced { reason } if reason.contains("supported operator; not placed")),
            "{n}: {t}"
        );
    }
    // The error message is the whole table, with the fixes.
    assert!(
        text.starts_with("m.onnx: 3 node(s) cannot be compiled:"),
        "{text}"
    );
    for n in ["conv", "norm", "relu", "qs", "conv2", "up", "sig"] {
        assert!(text.contains(n), "{n} missing from\n{text}");
    }
    assert!(text.contains("to compile:"), "{text}");
}

#[test]
fn a_supported_node_after_an_unknown_shape_is_still_checked_for_its_attributes() {
    // The Conv after an op whose output shape depends on the data (NonZero, unsupported) has
    // an invalid attribute: reported, not "not analysed".
    let mut m = Model::new(13);
    m.input("x", &[1, 4, 8, 8])
        .node("odd", "NonZero", &["x"], &["a"], vec![])
        .weight("w", &[4, 4, 3, 3], 0.3)
        .node(
            "conv",
            "Conv",
            &["a", "w"],
            &["y"],
            vec![("auto_pad", A::S("SOMETIMES"))],
        )
        .output("y");
    let (count, t, _) = table(&m);
    assert_eq!(count, 2, "{t}");
    assert!(
        matches!(&t.get("conv").unwrap().support, Support::Unsupported { reason, .. } if reason.contains("unknown auto_pad")),
        "{t}"
    );
}

#[test]
fn a_node_after_an_unknown_shape_is_not_analysed() {
    let mut m = Model::new(13);
    m.input("x", &[1, 4, 8, 8])
        .node("nz", "NonZero", &["x"], &["a"], vec![])
        .node("cast", "Cast", &["a"], &["y"], vec![("to", A::I(1))])
        .output("y");
    let (count, t, _) = table(&m);
    assert_eq!(count, 1, "{t}");
    assert!(
        matches!(&t.get("cast").unwrap().support, Support::NotAnalyzed { reason } if reason.contains("comes from node 'nz'")),
        "{t}"
    );
}
