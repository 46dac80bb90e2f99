#!/usr/bin/env python3
"""Makes the dynamically quantized models of the compiler's tests (compiler/tests/dynquant.rs).

Run from this directory with a Python that has numpy, onnx and onnxruntime:

    python3 make_dynquant.py

Two float models with deterministic weights, each quantized by onnxruntime's
`quantize_dynamic` with its defaults (uint8 activations quantized per inference by
DynamicQuantizeLinear, int8 weights per tensor):

- dynq/mlp.onnx (float) -> dynq/mlp_dyn.onnx: MatMul+Add, Relu, MatMul+Add on a [1, 16]
  input (DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul by the two scales);
- dynq/cnn.onnx (float) -> dynq/cnn_dyn.onnx: two padded 3x3 convolutions with Relu, the
  second of stride 2, GlobalAveragePool, Flatten, MatMul on a [1, 3, 12, 12] input,
  `op_types_to_quantize=["Conv", "MatMul"]` (DynamicQuantizeLinear -> ConvInteger -> Cast ->
  Mul -> Add bias);
- dynq/mlp_inputs.npy, dynq/cnn_inputs.npy: 6 inputs each (one of them all zeros: the scale
  is then 1/255, see DynamicQuantizeLinear);
- dynq/mlp_dyn_ort.npy, dynq/cnn_dyn_ort.npy: onnxruntime's outputs on them.
"""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "dynq")


def model(nodes, inits, name, x_shape, y_shape):
    g = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def mlp():
    rng = np.random.default_rng(11)
    w1 = (rng.standard_normal((16, 32)) * 0.3).astype(np.float32)
    b1 = (rng.standard_normal(32) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((32, 10)) * 0.3).astype(np.float32)
    b2 = (rng.standard_normal(10) * 0.1).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in
             [(w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2")]]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
        helper.make_node("Add", ["h0", "b1"], ["h1"], name="fc1_bias"),
        helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
        helper.make_node("MatMul", ["h2", "w2"], ["h3"], name="fc2"),
        helper.make_node("Add", ["h3", "b2"], ["y"], name="fc2_bias"),
    ]
    xs = rng.standard_normal((6, 1, 16)).astype(np.float32)
    xs[3] = 0
    return model(nodes, inits, "mlp", [1, 16], [1, 10]), xs


def cnn():
    rng = np.random.default_rng(12)

    def conv(name, x, cin, cout, stride):
        w = (rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2.0 / (9 * cin))).astype(
            np.float32)
        b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
        inits.extend([numpy_helper.from_array(w, f"{name}.w"),
                      numpy_helper.from_array(b, f"{name}.b")])
        nodes.append(helper.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [f"{name}.o"],
                                      name=name, pads=[1, 1, 1, 1], strides=[stride, stride],
                                      kernel_shape=[3, 3]))
        nodes.append(helper.make_node("Relu", [f"{name}.o"], [f"{name}.r"],
                                      name=f"{name}_relu"))
        return f"{name}.r"

    nodes, inits = [], []
    a = conv("c1", "x", 3, 8, 1)
    b = conv("c2", a, 8, 16, 2)
    fw = (rng.standard_normal((16, 10)) * 0.3).astype(np.float32)
    inits.append(numpy_helper.from_array(fw, "fc.w"))
    nodes += [
        helper.make_node("GlobalAveragePool", [b], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("MatMul", ["flat", "fc.w"], ["y"], name="fc"),
    ]
    xs = rng.standard_normal((6, 1, 3, 12, 12)).astype(np.float32)
    xs[3] = 0
    return model(nodes, inits, "cnn", [1, 3, 12, 12], [1, 10]), xs


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, (m, xs), ops in [("mlp", mlp(), ["MatMul"]), ("cnn", cnn(), ["Conv", "MatMul"])]:
        src = os.path.join(OUT, f"{name}.onnx")
        dst = os.path.join(OUT, f"{name}_dyn.onnx")
        onnx.save(m, src)
        quantize_dynamic(src, dst, weight_type=QuantType.QInt8, op_types_to_quantize=ops)
        sess = ort.InferenceSession(dst, providers=["CPUExecutionProvider"])
        ys = np.stack([sess.run(None, {"x": x})[0] for x in xs])
        np.save(os.path.join(OUT, f"{name}_inputs.npy"), xs)
        np.save(os.path.join(OUT, f"{name}_dyn_ort.npy"), ys)
        print(dst, [n.op_type for n in onnx.load(dst).graph.node])


if __name__ == "__main__":
    main()
