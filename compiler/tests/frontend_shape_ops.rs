//! The shape-subgraph operators (Range, ConstantOfShape, Expand, Tile, Size, comparisons,
//! Where) on bad input: a shape too large for the memory budget is refused naming the node,
//! before anything is allocated; an impossible range is refused with its reason; and a
//! refusal still analyses the nodes after the refused one where their shapes are known.

mod onnx_builder;

use compiler::frontend::{import_graph, FrontendError};
use compiler::graph::{Support, Tensor};
use ndarray::{ArrayD, IxDyn};
use onnx_builder::{Model, A};
use vta_runtime::budget::DEFAULT_MEMORY_BUDGET;

fn scalar(v: i64) -> Tensor {
    Tensor::I64(ArrayD::from_elem(IxDyn(&[]), v))
}

fn import_error(m: &Model) -> String {
    match import_graph(&m.bytes(), "m.onnx", DEFAULT_MEMORY_BUDGET) {
        Ok(_) => panic!("the model imported"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn huge_shapes_are_refused_against_the_memory_budget() {
    let huge = [1 << 20, 1 << 20, 1 << 10];
    let mut fill = Model::new(17);
    fill.input("x", &[1, 4])
        .ints("s", &huge)
        .node("fill", "ConstantOfShape", &["s"], &["y"], vec![])
        .output("y");
    let mut range = Model::new(17);
    range
        .input("x", &[1, 4])
        .init("a", scalar(0))
        .init("b", scalar(1 << 50))
        .init("d", scalar(1))
        .node("range", "Range", &["a", "b", "d"], &["y"], vec![])
        .output("y");
    let mut expand = Model::new(17);
    expand
        .input("x", &[1, 4])
        .ints("s", &[1 << 30, 1 << 20, 4])
        .node("expand", "Expand", &["x", "s"], &["y"], vec![])
        .output("y");
    let mut tile = Model::new(17);
    tile.input("x", &[1, 4])
        .ints("r", &[1 << 30, 1 << 30])
        .node("tile", "Tile", &["x", "r"], &["y"], vec![])
        .output("y");
    for (name, m) in [
        ("fill", fill),
        ("range", range),
        ("expand", expand),
        ("tile", tile),
    ] {
        let e = import_error(&m);
        assert!(
            e.contains(&format!("node '{name}'")) && e.contains("beyond the memory budget"),
            "{name}: {e}"
        );
    }
}

#[test]
fn a_range_with_zero_step_is_refused_with_its_reason() {
    let mut m = Model::new(17);
    m.input("x", &[1, 4])
        .init("a", scalar(0))
        .init("b", scalar(4))
        .init("d", scalar(0))
        .node("range", "Range", &["a", "b", "d"], &["y"], vec![])
        .output("y");
    let e = import_error(&m);
    assert!(e.contains("range") && e.contains("delta is 0"), "{e}");
}

#[test]
fn nodes_after_a_failed_fold_or_an_unsupported_function_are_analysed() {
    // Gather of a constant with an index out of range fails to fold, Celu is not supported;
    // the nodes after both still get facts, so they are "not placed", not "not analysed".
    let mut m = Model::new(17);
    m.input("x", &[1, 3])
        .ints("c", &[1, 2, 3])
        .ints("i", &[5])
        .node(
            "gather",
            "Gather",
            &["c", "i"],
            &["g"],
            vec![("axis", A::I(0))],
        )
        .node("cast", "Cast", &["g"], &["gf"], vec![("to", A::I(1))])
        .node("celu", "Celu", &["x"], &["h"], vec![])
        .node("add", "Add", &["h", "gf"], &["y"], vec![])
        .output("y");
    let Err(FrontendError::Unsupported { count, table, .. }) =
        import_graph(&m.bytes(), "m.onnx", DEFAULT_MEMORY_BUDGET)
    else {
        panic!("expected the support table");
    };
    assert_eq!(count, 2, "{table}");
    assert!(
        matches!(&table.get("gather").unwrap().support, Support::Unsupported { reason, .. } if reason.contains("index 5 out of range")),
        "{table}"
    );
    for n in ["cast", "add"] {
        assert!(
            matches!(table.get(n).unwrap().support, Support::NotPlaced { .. }),
            "{n}: {table}"
        );
    }
}

#[test]
fn equal_and_where_select_with_bool_masks() {
    // expand(-1) as PyTorch exports it: Where(size == -1, 1, size), all folded.
    let mut m = Model::new(17);
    m.input("x", &[1, 2, 1])
        .ints("size", &[-1, -1, 3])
        .ints("neg", &[-1])
        .ints("one", &[1])
        .node("eq", "Equal", &["size", "neg"], &["mask"], vec![])
        .node("sel", "Where", &["mask", "one", "size"], &["shape"], vec![])
        .node("expand", "Expand", &["x", "shape"], &["y"], vec![])
        .output("y");
    let g = import_graph(&m.bytes(), "m.onnx", DEFAULT_MEMORY_BUDGET).unwrap();
    let x = ArrayD::from_shape_vec(IxDyn(&[1, 2, 1]), vec![1.5f32, -2.0]).unwrap();
    let y = g.run_outputs(&[Tensor::F32(x)]).unwrap();
    let want = ArrayD::from_shape_vec(IxDyn(&[1, 2, 3]), vec![1.5f32, 1.5, 1.5, -2.0, -2.0, -2.0])
        .unwrap();
    assert_eq!(y[0], Tensor::F32(want));
    assert_eq!(
        g.dag.node_count(),
        1,
        "only the Expand of the input is left"
    );
}
