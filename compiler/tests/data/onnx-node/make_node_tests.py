#!/usr/bin/env python3
"""Exports ONNX's own node conformance tests (the `onnx.backend.test.case.node` generators of the
installed `onnx` package) for the operators listed in OPS, for `compiler/tests/onnx_node.rs`.

Run from this directory with a Python that has onnx and numpy:

    python3 make_node_tests.py

Every single-node test case of those operators becomes a directory `<case>/` with `model.onnx`
and `test_data_set_0/input_<k>.pb`, `output_<k>.pb`, as ONNX's own test data is laid out. Two
changes make a case something a compiler can take, as other backends' ONNX test runners do:
- the inputs the compiler needs as constants (CONST_INPUTS: shapes, repeats, Range's bounds)
  become initializers with the test's values;
- the model's opset is moved into the importer's range (7 to 25) when the generator wrote one
  outside it, and the case is kept only if the node is still valid for that opset (the ONNX
  checker passes), i.e. the test exercises the operator version the importer implements.
A case is excluded, with its reason written to README.md, if one of its tensors has an element
type the compiler's IR does not have (float16, double, bfloat16, strings, ...), an input has no
elements (a dimension 0, which the importer refuses), it uses blocked quantization (block_size,
which the importer refuses with its reason), it casts to a sub-byte type (int4/int2 values
are held in 8-bit storage, and the importer refuses such a Cast), or it does not check at
opset 25. The generated README.md table counts cases per operator.
"""
import os
import shutil
import sys

import onnx
from onnx import TensorProto, numpy_helper
from onnx.backend.test.case import node

HERE = os.path.dirname(os.path.abspath(__file__))
MIN_OPSET, MAX_OPSET = 7, 25

OPS = [
       "DynamicQuantizeLinear",
       "RNN",
       "GRU",
       "LSTM",
       "SpaceToDepth", "DepthToSpace", "Floor", "Ceil", "Round", "PRelu", "Shape", "Size",
       "Range", "ConstantOfShape", "Expand", "Tile", "Where", "Equal", "Less", "Greater",
       "LessOrEqual", "GreaterOrEqual", "Cast", "Gather", "Concat", "Slice", "Squeeze", "Unsqueeze",
       "Reshape", "Not", "And", "Or", "Xor", "Mod", "QuantizeLinear", "DequantizeLinear"]
CONST_INPUTS = {"Range": [0, 1, 2], "ConstantOfShape": [0], "Expand": [1], "Tile": [1],
                "Gather": [1], "Slice": [1, 2, 3, 4], "Squeeze": [1], "Unsqueeze": [1], "Reshape": [1]}
# int4/uint4/int2/uint2 are held in int8/uint8 storage.
SUB_BYTE = {TensorProto.INT4, TensorProto.UINT4, TensorProto.INT2, TensorProto.UINT2}
TYPES = {TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8, TensorProto.INT32,
         TensorProto.INT64, TensorProto.BOOL} | SUB_BYTE


def exclusion(model):
    """Why a case cannot run (None if it can)."""
    g = model.graph
    for v in list(g.input) + list(g.output):
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


def write(case, model, inputs, outputs):
    op = model.graph.node[0].op_type
    const = set(CONST_INPUTS.get(op, []))
    g = model.graph
    keep = []
    for k, (v, x) in enumerate(zip(list(g.input), inputs)):
        if k in const:
            g.initializer.append(to_proto(x, v.name))
        else:
            keep.append((v, x))
    del g.input[:]
    g.input.extend(v for v, _ in keep)
    d = os.path.join(HERE, case.name)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    onnx.save(model, os.path.join(d, "model.onnx"))
    for k, (v, x) in enumerate(keep):
        t = to_proto(x, v.name)
        with open(os.path.join(d, f"test_data_set_0/input_{k}.pb"), "wb") as f:
            f.write(t.SerializeToString())
    for k, (v, y) in enumerate(zip(g.output, outputs)):
        t = to_proto(y, v.name)
        with open(os.path.join(d, f"test_data_set_0/output_{k}.pb"), "wb") as f:
            f.write(t.SerializeToString())


def main():
    for e in os.listdir(HERE):
        if e.startswith("test_"):
            shutil.rmtree(os.path.join(HERE, e))
    seen, rows = set(), {op: [0, 0, []] for op in OPS}
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
        write(case, lowered, inputs, outputs)
        row[0] += 1
    with open(os.path.join(HERE, "README.md"), "w") as f:
        f.write("# ONNX node conformance tests\n\n"
                f"Generated by `make_node_tests.py` from onnx {onnx.__version__}'s "
                "`onnx.backend.test.case.node`; run by `compiler/tests/onnx_node.rs` through "
                "the front end's float executor. Float outputs must agree within "
                "`1e-6 * max(1, |expected|)`, every other type exactly.\n\n"
                "| operator | cases run / generated | excluded (reason) |\n|---|---|---|\n")
        for op in OPS:
            run, total, excl = rows[op]
            reasons = {}
            for n, r in excl:
                reasons.setdefault(r, []).append(n)
            why = "; ".join(f"{r}: `{ns[0]}`" if len(ns) == 1 else f"{r}: {len(ns)} cases"
                            for r, ns in reasons.items()) or "-"
            f.write(f"| {op} | {run} / {total} | {why} |\n")
    print(f"{sum(r[0] for r in rows.values())} cases written", file=sys.stderr)


if __name__ == "__main__":
    main()
