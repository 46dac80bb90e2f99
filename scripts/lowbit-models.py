#!/usr/bin/env python3
"""Writes the low-bit import test models of compiler/tests/frontend_lowbit_import.rs into
compiler/tests/data/lowbit/, with their reference outputs.

One small CNN (input 1x1x8x8; Conv 3x3 pad 1 -> Relu -> Conv 3x3 stride 2 pad 1 -> Relu ->
Flatten -> Gemm to 10 logits; deterministic weights) in four low-bit forms:

- ort_w4a8.onnx, ort_w4a4.onnx, ort_w4a4u.onnx: onnxruntime's `quantize_static` in QDQ form,
  per channel, int4 weights (QuantType.QInt4, opset 21) with uint8, int4 and uint4 activations;
  ort_w2a8.onnx: the first with its weights re-quantized to int2 (opset 25);
  reference: onnxruntime running the model as written (graph optimizations off: the QDQ
  float definition);
- qcdq_w4a4.onnx: Brevitas's QCDQ export style, opset 13: every tensor quantized by int8
  QuantizeLinear -> Clip -> DequantizeLinear, weights Clip [-7, 7] (4-bit narrow, per
  channel), activations Clip [-8, 7] (4-bit), the logits 8-bit; reference: onnxruntime;
- qonnx_w4a4u.onnx: QONNX `Quant` nodes (domain qonnx.custom_op.general): 4-bit narrow signed
  per-channel weights, 4-bit unsigned activations (Brevitas's QuantReLU), 8-bit logits;
  qonnx_bipolar.onnx: BipolarQuant weights in the second convolution, 2-bit narrow weights
  elsewhere, 8-bit activations; reference: qonnx's executor (qonnx.core.onnx_exec);
- bad_*.onnx: one-node-deep models the importer must refuse, each for one reason.

inputs.npy holds 8 inputs; NAME_ref.npy the reference outputs on them; calib.npy inputs for
onnxruntime's calibration. Needs numpy, onnx, onnxruntime (1.17 or later for int4) and
qonnx 1.0 (`pip install --no-deps qonnx==1.0.0`: 0.4.0 imports `onnx.mapping`, which onnx 1.23
removed; its executor is qonnx.core.onnx_exec, its semantics of Quant that of 0.4.0):

    python3 scripts/lowbit-models.py
"""
import os
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_static)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compiler", "tests",
                   "data", "lowbit")
QONNX = "qonnx.custom_op.general"
rng = np.random.default_rng(32)
W1 = rng.normal(0, 0.5, (8, 1, 3, 3)).astype(np.float32)
B1 = rng.normal(0, 0.1, 8).astype(np.float32)
W2 = rng.normal(0, 0.2, (8, 8, 3, 3)).astype(np.float32)
B2 = rng.normal(0, 0.1, 8).astype(np.float32)
W3 = rng.normal(0, 0.2, (10, 128)).astype(np.float32)
B3 = rng.normal(0, 0.1, 10).astype(np.float32)
INPUTS = rng.uniform(0, 1, (8, 1, 1, 8, 8)).astype(np.float32)
CALIB = rng.uniform(0, 1, (16, 1, 1, 8, 8)).astype(np.float32)


def model(nodes, inits, opsets, name, out_shape=(1, 10)):
    g = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))],
        inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    m.ir_version = 8 if opsets[0][1] <= 17 else 10
    return m


def float_model(opset):
    inits = [numpy_helper.from_array(a, n) for a, n in
             [(W1, "w1"), (B1, "b1"), (W2, "w2"), (B2, "b2"), (W3, "w3"), (B3, "b3")]]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1],
                         strides=[2, 2], name="conv2"),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Flatten", ["r2"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], transB=1, name="fc"),
    ]
    return model(nodes, inits, [("", opset)], "lowbit_cnn")


class Reader(CalibrationDataReader):
    def __init__(self):
        self.it = iter([{"x": c} for c in CALIB])

    def get_next(self):
        return next(self.it, None)


def run_ort(path):
    o = ort.SessionOptions()
    o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])
    return np.stack([s.run(None, {"x": x})[0] for x in INPUTS])


def run_qonnx(path):
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx
    from qonnx.transformation.infer_shapes import InferShapes
    m = ModelWrapper(path).transform(InferShapes())
    return np.stack([execute_onnx(m, {"x": x})["y"] for x in INPUTS])


def ort_models(tmp):
    f = os.path.join(tmp, "float.onnx")
    # At opset 21 onnxruntime writes standard int4 QuantizeLinear/DequantizeLinear (below it,
    # its com.microsoft ones).
    onnx.save(float_model(21), f)
    for name, act in [("ort_w4a8", QuantType.QUInt8), ("ort_w4a4", QuantType.QInt4),
                      ("ort_w4a4u", QuantType.QUInt4)]:
        p = os.path.join(OUT, name + ".onnx")
        quantize_static(f, p, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        weight_type=QuantType.QInt4, activation_type=act)
        m = onnx.load(p)
        types = {t.data_type for t in m.graph.initializer}
        assert TensorProto.INT4 in types, f"{name}: no int4 initializer"
        assert all(n.domain == "" for n in m.graph.node), f"{name}: non-standard operators"
        np.save(os.path.join(OUT, name + "_ref.npy"), run_ort(p))
    p = os.path.join(OUT, "ort_w2a8.onnx")
    int2_weights(os.path.join(OUT, "ort_w4a8.onnx"), p)
    np.save(os.path.join(OUT, "ort_w2a8_ref.npy"), run_ort(p))


def int2_weights(src, dst):
    """onnxruntime has no 2-bit quantizer: the W4A8 model with each int4 weight tensor
    re-quantized to int2 (scale x4, round half to even, saturate to [-2, 1]; the biases
    follow their new scales), at opset 25 where DequantizeLinear takes int2."""
    m = onnx.load(src)
    inits = {t.name: t for t in m.graph.initializer}
    for n in m.graph.node:
        q = inits.get(n.input[0])
        if n.op_type != "DequantizeLinear" or q is None or q.data_type != TensorProto.INT4:
            continue
        w = numpy_helper.to_array(q).astype(np.float32)
        w2 = np.clip(np.round(w / 4), -2, 1).astype(np.int8)
        q.CopyFrom(helper.make_tensor(q.name, TensorProto.INT2, w.shape, w2.ravel().tolist()))
        s = inits[n.input[1]]
        s.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(s) * np.float32(4), s.name))
        z = inits[n.input[2]]
        z.CopyFrom(helper.make_tensor(z.name, TensorProto.INT2, z.dims,
                                      [0] * int(np.prod(z.dims))))
    for n in m.graph.node:
        b = inits.get(n.input[0])
        if n.op_type != "DequantizeLinear" or b is None or b.data_type != TensorProto.INT32:
            continue
        bs = inits[n.input[1]]
        v = numpy_helper.to_array(b).astype(np.float64) * numpy_helper.to_array(bs)
        new_s = numpy_helper.to_array(bs) * np.float32(4)
        b.CopyFrom(numpy_helper.from_array(np.round(v / new_s).astype(np.int32), b.name))
        bs.CopyFrom(numpy_helper.from_array(new_s.astype(np.float32), bs.name))
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = 25
    m.ir_version = 13
    onnx.checker.check_model(m)
    onnx.save(m, dst)


def act_scales(bits_max):
    """Per-tensor activation scales from the float model's ranges on the calibration set."""
    def conv(x, w, b, stride):
        n, c, h, wd = x.shape
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        oh, ow = (h + 2 - 3) // stride + 1, (wd + 2 - 3) // stride + 1
        y = np.zeros((n, w.shape[0], oh, ow), np.float32)
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, :, i * stride:i * stride + 3, j * stride:j * stride + 3]
                y[:, :, i, j] = np.einsum("nchw,ochw->no", patch, w)
        return y + b[None, :, None, None]
    x = CALIB[:, 0]
    r1 = np.maximum(conv(x, W1, B1, 1), 0)
    r2 = np.maximum(conv(r1, W2, B2, 2), 0)
    y = r2.reshape(len(x), -1) @ W3.T + B3
    return [float(np.abs(v).max()) / m for v, m in zip([x, r1, r2, y], bits_max)]


def qcdq_model():
    """Brevitas-style QCDQ: int8 Q -> Clip -> DQ everywhere, 4-bit by the Clip bounds."""
    inits, nodes = [], []
    s_x, s_1, s_2, s_y = act_scales([7, 7, 7, 127])

    def c(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a), name))
        return name

    def qcdq(x, y, scale, lo, hi, axis=None):
        attrs = {} if axis is None else {"axis": axis}
        sc = c(y + "_s", np.asarray(scale, np.float32))
        zp = c(y + "_z", np.zeros(np.shape(scale), np.int8))
        nodes.append(helper.make_node("QuantizeLinear", [x, sc, zp], [y + "_q"], **attrs,
                                      name=y + "_quant"))
        nodes.append(helper.make_node("Clip", [y + "_q", c(y + "_lo", np.int8(lo)),
                                              c(y + "_hi", np.int8(hi))], [y + "_c"],
                                      name=y + "_clip"))
        nodes.append(helper.make_node("DequantizeLinear", [y + "_c", sc, zp], [y], **attrs,
                                      name=y + "_dequant"))

    def wq(w, name):
        s = (np.abs(w.reshape(len(w), -1)).max(axis=1) / 7).astype(np.float32)
        c(name + "_f", w)
        qcdq(name + "_f", name, s, -7, 7, axis=0)
        return s

    def bias(b, s_in, s_w, name):
        s = (s_in * s_w).astype(np.float32)
        c(name + "_i", np.round(b / s).astype(np.int32))
        c(name + "_s", s)
        nodes.append(helper.make_node("DequantizeLinear", [name + "_i", name + "_s"], [name],
                                      axis=0, name=name + "_dequant"))

    qcdq("x", "xq", s_x, -8, 7)
    sw1 = wq(W1, "w1")
    bias(B1, s_x, sw1, "b1")
    nodes.append(helper.make_node("Conv", ["xq", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1],
                                  name="conv1"))
    nodes.append(helper.make_node("Relu", ["c1"], ["r1"], name="relu1"))
    qcdq("r1", "r1q", s_1, -8, 7)
    sw2 = wq(W2, "w2")
    bias(B2, s_1, sw2, "b2")
    nodes.append(helper.make_node("Conv", ["r1q", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1],
                                  strides=[2, 2], name="conv2"))
    nodes.append(helper.make_node("Relu", ["c2"], ["r2"], name="relu2"))
    qcdq("r2", "r2q", s_2, -8, 7)
    nodes.append(helper.make_node("Flatten", ["r2q"], ["f"], name="flatten"))
    sw3 = wq(W3, "w3")
    bias(B3, s_2, sw3, "b3")
    nodes.append(helper.make_node("Gemm", ["f", "w3", "b3"], ["g"], transB=1, name="fc"))
    qcdq("g", "y", s_y, -128, 127)
    return model(nodes, inits, [("", 13)], "qcdq_w4a4")


def qonnx_model(bipolar):
    """QONNX Quant nodes; with `bipolar`, BipolarQuant weights in conv2 and 2-bit elsewhere."""
    inits, nodes = [], []
    abits = 8 if bipolar else 4
    amax = 2 ** abits - 1
    s_x, s_1, s_2, s_y = act_scales([amax, amax, amax, 127])

    def c(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a, np.float32), name))
        return name

    def quant(x, y, scale, bits, signed, narrow, rounding="ROUND"):
        nodes.append(helper.make_node(
            "Quant", [x, c(y + "_s", scale), c(y + "_z", np.zeros_like(scale)),
                      c(y + "_b", np.float32(bits))], [y], domain=QONNX,
            signed=signed, narrow=narrow, rounding_mode=rounding, name=y + "_quant"))

    def wq(w, name, bits):
        m = np.abs(w.reshape(len(w), -1)).max(axis=1)
        s = (m / (2 ** (bits - 1) - 1)).astype(np.float32).reshape(
            (len(w),) + (1,) * (w.ndim - 1))
        c(name + "_f", w)
        quant(name + "_f", name, s, bits, 1, 1)

    wbits = 2 if bipolar else 4
    quant("x", "xq", np.float32(s_x), abits, 0, 0)
    wq(W1, "w1", wbits)
    nodes.append(helper.make_node("Conv", ["xq", "w1"], ["c1"], pads=[1, 1, 1, 1],
                                  name="conv1"))
    nodes.append(helper.make_node("Relu", ["c1"], ["r1"], name="relu1"))
    quant("r1", "r1q", np.float32(s_1), abits, 0, 0)
    if bipolar:
        c("w2_f", W2)
        s = np.abs(W2).mean(axis=(1, 2, 3)).astype(np.float32).reshape(8, 1, 1, 1)
        nodes.append(helper.make_node("BipolarQuant", ["w2_f", c("w2_s", s)], ["w2"],
                                      domain=QONNX, name="w2_bipolar"))
    else:
        wq(W2, "w2", wbits)
    nodes.append(helper.make_node("Conv", ["r1q", "w2"], ["c2"], pads=[1, 1, 1, 1],
                                  strides=[2, 2], name="conv2"))
    nodes.append(helper.make_node("Relu", ["c2"], ["r2"], name="relu2"))
    quant("r2", "r2q", np.float32(s_2), abits, 0, 0)
    nodes.append(helper.make_node("Flatten", ["r2q"], ["f"], name="flatten"))
    wq(W3, "w3", wbits)
    nodes.append(helper.make_node("Gemm", ["f", "w3"], ["g"], transB=1, name="fc"))
    quant("g", "y", np.float32(s_y), 8, 1, 0)
    name = "qonnx_bipolar" if bipolar else "qonnx_w4a4u"
    return model(nodes, inits, [("", 13), (QONNX, 1)], name)


def bad_models():
    """One reason each for the importer to refuse the model."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    f = lambda n, a: numpy_helper.from_array(np.asarray(a, np.float32), n)

    def save(name, nodes, inits, opsets, ir=8):
        g = helper.make_graph(nodes, name, [x], [y], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
        m.ir_version = ir
        onnx.save(m, os.path.join(OUT, name + ".onnx"))

    # Blocked int4 weights (block of 2 along the reduction axis), as MatMulNBits' QDQ form.
    wq = helper.make_tensor("wq", TensorProto.INT4, [4, 4], [1, -2, 3, -4] * 4)
    save("bad_blocked", [
        helper.make_node("DequantizeLinear", ["wq", "ws"], ["w"], axis=0, block_size=2),
        helper.make_node("MatMul", ["x", "w"], ["y"])],
        [wq, f("ws", np.full((2, 4), 0.1))], [("", 21)], ir=10)

    def quant_model(name, bits, signed=1, rounding="ROUND", zp=0.0, op="Quant", const=False):
        ins = ["w0" if const else "x", "s"] + ([] if op == "BipolarQuant" else ["z", "b"])
        inits = [f("s", 0.5), f("z", zp), f("b", bits)] + ([f("w0", np.eye(4))] if const else [])
        attrs = {} if op == "BipolarQuant" else dict(signed=signed, narrow=0,
                                                     rounding_mode=rounding)
        out = "wq" if const else "y"
        nodes = [helper.make_node(op, ins, [out], domain=QONNX, name="the_quant", **attrs)]
        if const:
            nodes.append(helper.make_node("MatMul", ["x", "wq"], ["y"]))
        save(name, nodes, inits, [("", 13), (QONNX, 1)])

    quant_model("bad_bitwidth_fraction", 2.5)
    quant_model("bad_bitwidth_16", 16)
    quant_model("bad_bipolar_activation", 1, op="BipolarQuant")
    quant_model("bad_floor_activation", 4, rounding="FLOOR")
    quant_model("bad_zeropt_activation", 4, signed=0, zp=3.0)


def main():
    os.makedirs(OUT, exist_ok=True)
    np.save(os.path.join(OUT, "inputs.npy"), INPUTS[:, 0])
    np.save(os.path.join(OUT, "calib.npy"), CALIB[:4, 0])
    with tempfile.TemporaryDirectory() as tmp:
        ort_models(tmp)
    p = os.path.join(OUT, "qcdq_w4a4.onnx")
    onnx.save(qcdq_model(), p)
    np.save(os.path.join(OUT, "qcdq_w4a4_ref.npy"), run_ort(p))
    for bipolar in (False, True):
        m = qonnx_model(bipolar)
        p = os.path.join(OUT, m.graph.name + ".onnx")
        onnx.save(m, p)
        np.save(os.path.join(OUT, m.graph.name + "_ref.npy"), run_qonnx(p))
    bad_models()


if __name__ == "__main__":
    main()
