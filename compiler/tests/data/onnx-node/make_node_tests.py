#!/usr/bin/env python3
"""Exports ONNX's own node conformance tests (the `onnx.backend.test.case.node` generators of the
installed `onnx` package) for the operators listed in OPS, for `compiler/tests/onnx_node.rs`.

Run from this directory with a Python that has onnx and numpy:

    python3 make_node_tests.py

Every single-node test case of those operators becomes a directory `<case>/` with `model.onnx`
and `test_data_set_0/input_<k>.pb`, `output_<k>.pb`, as ONNX's own test data is laid out. Two
changes make a case something a compiler can take, as other backends' ONNX test runners do:
- the inputs the compiler needs as constants (CONST_INPUTS: weights and biases, scales and
  zero points, BatchNormalization's statistics, Clip's bounds, Pad's pads, Resize's scales and
  sizes, shapes, axes, repeats, Range's bounds) become initializers with the test's values;
- the model's opset is moved into the importer's range (7 to 25) when the generator wrote one
  outside it, and the case is kept only if the node is still valid for that opset (the ONNX
  checker passes), i.e. the test exercises the operator version the importer implements.
A case is excluded, with its reason written to README.md, if one of its tensors has an element
type the compiler's IR does not have (float16, double, bfloat16, strings, ...) or a value is
not a tensor (sequences, optionals), an input has no elements (a dimension 0, which the
importer refuses), it uses blocked quantization (block_size, which the importer refuses with
its reason), it casts to a sub-byte type (int4/int2 values are held in 8-bit storage, and the
importer refuses such a Cast), it uses an operator variant the importer refuses by design
(`refused`: 3-D windows, training mode), it does not check at opset 25, or one of its tensors
is larger than MAX_TENSOR_BYTES (kept out of the repository). The cases of the operators in
OLDER are also written at the older opset named there (`older`). The generated README.md
table counts cases per operator.
"""
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper
from onnx.backend.test.case import node
from onnx.reference import ReferenceEvaluator

HERE = os.path.dirname(os.path.abspath(__file__))
MIN_OPSET, MAX_OPSET = 7, 25
MAX_TENSOR_BYTES = 1 << 20

# One operator a line, grouped as in the importer's registry (`compiler/src/onnx/ops/mod.rs`).
OPS = [
    # convolutions, matrix products, normalization
    "Conv",
    "ConvTranspose",
    "Gemm",
    "MatMul",
    "BatchNormalization",
    # elementwise arithmetic
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Max",
    "Min",
    "Mod",
    # activations and other functions of one tensor
    "Relu",
    "Clip",
    "LeakyRelu",
    "PRelu",
    "Sigmoid",
    "HardSigmoid",
    "HardSwish",
    "Tanh",
    "Erf",
    "Exp",
    "Gelu",
    "Softplus",
    "Mish",
    "Sqrt",
    "Floor",
    "Ceil",
    "Round",
    "Softmax",
    # pooling and reduction
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "ReduceMean",
    # data movement
    "Identity",
    "Dropout",
    "Constant",
    "Flatten",
    "Reshape",
    "Transpose",
    "Concat",
    "Split",
    "Slice",
    "Squeeze",
    "Unsqueeze",
    "Pad",
    "Resize",
    "Upsample",
    "SpaceToDepth",
    "DepthToSpace",
    "Gather",
    # shape subgraphs
    "Shape",
    "Size",
    "Range",
    "ConstantOfShape",
    "Expand",
    "Tile",
    "Where",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "Not",
    "And",
    "Or",
    "Xor",
    "Cast",
    # detector post-processing
    "TopK",
    # quantized and integer
    "QuantizeLinear",
    "DequantizeLinear",
    "QLinearConv",
    "QLinearMatMul",
    "ConvInteger",
    "MatMulInteger",
    "DynamicQuantizeLinear",
    # recurrent
    "RNN",
    "GRU",
    "LSTM",
]
# The inputs (by index) that become initializers: what the compiler needs as constants.
CONST_INPUTS = {
    "BatchNormalization": [1, 2, 3, 4],
    "Clip": [1, 2],
    "ConstantOfShape": [0],
    "Conv": [1, 2],
    "ConvInteger": [1, 2, 3],
    "ConvTranspose": [1, 2],
    "DequantizeLinear": [1, 2],
    "Dropout": [1, 2],
    "Expand": [1],
    "Gather": [1],
    "Gemm": [1, 2],
    "MatMul": [1],
    "MatMulInteger": [1, 2, 3],
    "Pad": [1, 2, 3],
    "QLinearConv": [1, 2, 3, 4, 5, 6, 7, 8],
    "QLinearMatMul": [1, 2, 3, 4, 5, 6, 7],
    "QuantizeLinear": [1, 2],
    "Range": [0, 1, 2],
    "ReduceMean": [1],
    "Reshape": [1],
    "Resize": [1, 2, 3],
    "Slice": [1, 2, 3, 4],
    "Split": [1],
    "Squeeze": [1],
    "Tile": [1],
    "TopK": [1],
    "Unsqueeze": [1],
    "Upsample": [1],
}
# Operators that took as attributes what they now take as constant inputs (or, Softmax, had
# other semantics), with the last opset of that form: each case is also written at that opset
# (`<case>_opset<v>`), to check the importer's reading of the older form.
OLDER = {
    "Clip": 10,
    "Pad": 10,
    "ReduceMean": 17,
    "Slice": 9,
    "Softmax": 12,
    "Split": 12,
    "Squeeze": 12,
    "Unsqueeze": 12,
    "Upsample": 8,
}
# int4/uint4/int2/uint2 are held in int8/uint8 storage.
SUB_BYTE = {TensorProto.INT4, TensorProto.UINT4, TensorProto.INT2, TensorProto.UINT2}
TYPES = {TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32,
         TensorProto.INT64, TensorProto.BOOL} | SUB_BYTE


def exclusion(model):
    """Why a case cannot run (None if it can)."""
    g = model.graph
    for v in list(g.input) + list(g.output):
        if not v.type.HasField("tensor_type"):
            kind = v.type.WhichOneof("value").replace("_type", "")
            return f"{kind} values (the IR has tensors alone)"
        t = v.type.tensor_type.elem_type
        if t not in TYPES:
            return f"element type {TensorProto.DataType.Name(t).lower()} is not in the IR"
        dims = v.type.tensor_type.shape.dim
        if v in g.input and any(d.HasField("dim_value") and d.dim_value == 0 for d in dims):
            return "an input without elements (the importer requires every dimension >= 1)"
    for a in g.node[0].attribute:
        if a.name == "block_size" and a.i != 0:
            return "blocked quantization (block_size), refused by the importer"
        if g.node[0].op_type == "Cast" and a.name == "to" and a.i in SUB_BYTE:
            return "a Cast to a sub-byte type (held in 8-bit storage, not cast to)"
        if a.type == onnx.AttributeProto.TENSOR and a.t.data_type not in TYPES:
            return (f"element type {TensorProto.DataType.Name(a.t.data_type).lower()} "
                    "is not in the IR")
    return refused(g)


def refused(g):
    """The operator variants the importer refuses by design, with the reason it gives."""
    n = g.node[0]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
    rank = len(g.input[0].type.tensor_type.shape.dim) if g.input else 0
    if n.op_type in ("Conv", "MaxPool", "AveragePool", "ConvTranspose") and rank > 4:
        return (f"{rank - 2}-D windows (the importer takes 2-D NCHW windows, the "
                "accelerator's layout, and 1-D ones as 1 x k)")
    if n.op_type == "BatchNormalization" and attrs.get("training_mode", 0):
        return "training_mode = 1 (refused: the compiler compiles inference)"
    if n.op_type == "Dropout" and len(n.input) > 2 and n.input[2]:
        return "Dropout's training_mode input (refused: the compiler compiles inference)"
    return None


def lower_opset(model):
    """The model at an opset in 7..=25, or the reason it is not valid there."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = min(max(o.version, MIN_OPSET), MAX_OPSET)
    try:
        onnx.checker.check_model(m, full_check=True)
    except Exception as e:  # noqa: BLE001 (the checker raises several types)
        first = str(e).strip().splitlines()[0]
        v = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
        return None, f"not valid at opset {v} ({first[:80]})"
    return m, None


def to_proto(x, name):
    """A test value as a TensorProto (the sub-byte cases give theirs as TensorProtos)."""
    if isinstance(x, onnx.TensorProto):
        t = onnx.TensorProto()
        t.CopyFrom(x)
        t.name = name
        return t
    return numpy_helper.from_array(x, name)


def constify(model, inputs):
    """The model with the inputs of CONST_INPUTS made initializers, and the other inputs."""
    g = model.graph
    n = g.node[0]
    # by name: an omitted optional input is "" in the node's inputs but not a graph input
    const = {n.input[k] for k in CONST_INPUTS.get(n.op_type, []) if k < len(n.input)} - {""}
    keep = []
    for v, x in zip(list(g.input), inputs):
        if v.name in const:
            g.initializer.append(to_proto(x, v.name))
        else:
            keep.append((v, x))
    del g.input[:]
    g.input.extend(v for v, _ in keep)
    return model, [x for _, x in keep]


def older(model, inputs, outputs, version):
    """The case at `version` with its constant inputs moved to the attributes the operator had
    there, and its expected outputs; None if the case has no such form."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    n = g.node[0]
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}

    def arg(k):
        name = n.input[k] if k < len(n.input) else ""
        if name and name not in inits:
            raise ValueError("not a constant")
        return inits.get(name) if name else None

    floats = g.input[0].type.tensor_type.elem_type == TensorProto.FLOAT
    attrs, op = {}, n.op_type
    try:
        if op == "Clip" and floats:
            for k, key in [(1, "min"), (2, "max")]:
                if arg(k) is not None:
                    attrs[key] = float(arg(k))
        elif op == "Pad" and floats and arg(3) is None:
            attrs["pads"] = [int(p) for p in arg(1)]
            if arg(2) is not None:
                attrs["value"] = float(arg(2))
        elif op == "Upsample":
            attrs["scales"] = [float(f) for f in arg(1)]
        elif op in ("ReduceMean", "Squeeze", "Unsqueeze", "Split"):
            if arg(1) is not None:
                attrs["axes" if op != "Split" else "split"] = [int(a) for a in arg(1)]
        elif op == "Slice" and (arg(4) is None or all(arg(4) == 1)):
            for k, key in [(1, "starts"), (2, "ends"), (3, "axes")]:
                if arg(k) is not None:
                    attrs[key] = [int(a) for a in arg(k)]
        elif op != "Softmax":
            return None
    except ValueError:
        return None
    if op == "ReduceMean" and any(a.name == "noop_with_empty_axes" and a.i for a in n.attribute):
        return None
    if op != "Softmax":
        used = set(n.input[1:])
        del n.input[1:]
        kept = [t for t in g.initializer if t.name not in used]
        del g.initializer[:]
        g.initializer.extend(kept)
    if op == "Split":
        kept = [a for a in n.attribute if a.name != "num_outputs"]
        del n.attribute[:]
        n.attribute.extend(kept)
    n.attribute.extend(onnx.helper.make_attribute(k, v) for k, v in attrs.items())
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = version
    try:
        onnx.checker.check_model(m, full_check=True)
        # onnx's reference implementation of the older form, a check of the rewrite (it has
        # no Upsample-7, whose scales attribute holds the input's values as they are)
        feeds = {v.name: x for v, x in zip(g.input, inputs)}
        ref = outputs if op == "Upsample" else ReferenceEvaluator(m).run(None, feeds)
    except Exception:  # noqa: BLE001 (the checker and the evaluator raise several types)
        return None
    if op == "Softmax":
        # The operator's definition before opset 13 (onnx's reference implementation applies
        # the newer one): the input as a matrix [d0 * ... * d(axis-1), d(axis) * ...], each
        # row normalized. Default axis 1.
        x = inputs[0]
        axis = next((a.i for a in n.attribute if a.name == "axis"), 1) % x.ndim
        rows = x.reshape(int(np.prod(x.shape[:axis])), -1).astype(np.float64)
        e = np.exp(rows - rows.max(axis=1, keepdims=True))
        return m, [(e / e.sum(axis=1, keepdims=True)).reshape(x.shape).astype(np.float32)]
    same = all(np.array_equal(np.asarray(r), y) for r, y in zip(ref, outputs))
    return (m, outputs) if same else None


def save(name, model, inputs, outputs):
    d = os.path.join(HERE, name)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    onnx.save(model, os.path.join(d, "model.onnx"))
    g = model.graph
    for k, (v, x) in enumerate(zip(g.input, inputs)):
        with open(os.path.join(d, f"test_data_set_0/input_{k}.pb"), "wb") as f:
            f.write(to_proto(x, v.name).SerializeToString())
    for k, (v, y) in enumerate(zip(g.output, outputs)):
        with open(os.path.join(d, f"test_data_set_0/output_{k}.pb"), "wb") as f:
            f.write(to_proto(y, v.name).SerializeToString())


def main():
    for e in os.listdir(HERE):
        if e.startswith("test_"):
            shutil.rmtree(os.path.join(HERE, e))
    seen, rows = set(), {op: [0, 0, [], 0] for op in OPS}
    for case in node.collect_testcases():
        m = case.model
        if case.name in seen or len(m.graph.node) != 1 or m.graph.node[0].op_type not in OPS:
            continue
        seen.add(case.name)
        op = m.graph.node[0].op_type
        row = rows[op]
        row[1] += 1
        why = exclusion(m)
        lowered = None
        if why is None:
            lowered, why = lower_opset(m)
        if why is not None:
            row[2].append((case.name, why))
            continue
        inputs, outputs = case.data_sets[0]
        big = max(to_proto(x, "").ByteSize() for x in list(inputs) + list(outputs))
        if big > MAX_TENSOR_BYTES:
            row[2].append((case.name, f"a tensor larger than {MAX_TENSOR_BYTES >> 20} MB "
                                      "(kept out of the repository)"))
            continue
        model, kept = constify(lowered, inputs)
        save(case.name, model, kept, outputs)
        row[0] += 1
        if op in OLDER:
            variant = older(model, kept, outputs, OLDER[op])
            if variant is not None:
                save(f"{case.name}_opset{OLDER[op]}", variant[0], kept, variant[1])
                row[3] += 1
    with open(os.path.join(HERE, "README.md"), "w") as f:
        f.write("# ONNX node conformance tests\n\n"
                f"Generated by `make_node_tests.py` from onnx {onnx.__version__}'s "
                "`onnx.backend.test.case.node`, one case per directory, with the inputs the "
                "compiler needs as constants (weights, biases, scales, zero points, pads, "
                "sizes, shapes, ...) made initializers with the case's values, as ONNX's "
                "backend runner does. `compiler/tests/onnx_node.rs` runs every case through "
                "the front end's float executor (the one calibration runs): float outputs "
                "must agree within `1e-6 * max(1, |expected|)` (one case, whose expected "
                "values onnx gives rounded to four decimals, within `1e-4`), every other "
                "type, and every output of the quantized and integer operators, exactly; "
                "it also compiles the cases of the quantized and integer operators "
                "(QuantizeLinear, DequantizeLinear, QLinearConv, QLinearMatMul, "
                "ConvInteger, MatMulInteger) as models and runs them on the functional "
                "simulator, exactly. Every case generated passes.\n\n"
                "The cases of operators whose older versions took as attributes what they now "
                "take as constant inputs (Clip, Pad, ReduceMean, Slice, Split, Squeeze, "
                "Unsqueeze, Upsample), or had other semantics (Softmax), are also written at "
                "that older opset (`<case>_opset<v>`), where the case has such a form, their "
                "expected outputs checked by onnx's reference implementation (Softmax's "
                "computed from its definition before opset 13, which that implementation does "
                "not apply).\n\n"
                "| operator | passed / total | at an older opset | excluded (reason) |\n"
                "|---|---|---|---|\n")
        for op in OPS:
            run, total, excl, old = rows[op]
            reasons = {}
            for n, r in excl:
                reasons.setdefault(r, []).append(n)
            why = "; ".join(f"{r}: `{ns[0]}`" if len(ns) == 1 else f"{r}: {len(ns)} cases"
                            for r, ns in reasons.items()) or "-"
            at = f"{old} at opset {OLDER[op]}" if op in OLDER else "-"
            f.write(f"| {op} | {run} / {total} | {at} | {why} |\n")
    n = sum(r[0] + r[3] for r in rows.values())
    print(f"{n} cases written", file=sys.stderr)


if __name__ == "__main__":
    main()
