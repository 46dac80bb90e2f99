#!/usr/bin/env python3
"""Makes the CNN + LSTM + CTC captcha-style OCR of compiler/tests/ocr_lstm.rs, with
deterministic weights, and onnxruntime's outputs on its test images.

Run from this directory with a Python that has numpy, onnx and onnxruntime:

    python3 make_ocr.py

The model is laid out as PyTorch exports a CRNN captcha reader (opset 14):
- image [1, 1, 32, 96] -> Conv 3x3 (1->16) Relu MaxPool 2 -> Conv 3x3 (16->32) Relu
  MaxPool 2 -> Conv 3x3 (32->32) Relu MaxPool (2, 1) -> [1, 32, 4, 24];
- Reshape to [1, 128, 24] and Transpose to the sequence [24, 1, 128] (time-major);
- a bidirectional LSTM (hidden 32) whose zero initial states are built from the input's
  shape by Shape -> Gather -> Unsqueeze -> Concat -> ConstantOfShape, as `torch.zeros(2,
  x.size(1), 32)` exports;
- Y [24, 2, 1, 32] -> Transpose -> Reshape [24, 1, 64] -> MatMul + Add to 20 classes (blank
  first) -> Softmax over the classes: the per-step probabilities a CTC greedy decoder reads.

Outputs: ocr_lstm.onnx, ocr_calib.npy (16 images [16, 1, 32, 96]: random strokes on a
light background), ocr_test.npy (4 more), ocr_ort.npy (onnxruntime's outputs on those,
[4, 24, 1, 20]); ocr_lstm_dyn.onnx, the model quantized by onnxruntime's `quantize_dynamic`
(DynamicQuantizeLinear + ConvInteger, com.microsoft.DynamicQuantizeLSTM, MatMulInteger;
`reduce_range=True`, 7-bit weights, with which onnxruntime's AVX2 kernels compute exact
products, see ../rnn/make_rnn_cases.py) and ocr_dyn_ort.npy, onnxruntime's outputs of it.
"""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

HERE = os.path.dirname(os.path.abspath(__file__))
H, W, CLASSES, HID = 32, 96, 20, 32


def images(rng, n):
    """Dark strokes (random short line segments) on a noisy light background, in [0, 1]."""
    xs = 0.9 + 0.05 * rng.standard_normal((n, 1, H, W))
    for x in xs:
        for _ in range(12):
            y0, x0 = rng.integers(4, H - 4), rng.integers(4, W - 4)
            dy, dx = rng.integers(-3, 4), rng.integers(-3, 4)
            for t in np.linspace(0, 1, 8):
                x[0, int(y0 + t * dy), int(x0 + t * dx)] = 0.1
    return np.clip(xs, 0, 1).astype(np.float32)


def main():
    rng = np.random.default_rng(2024)
    nodes, inits = [], []

    def const(name, v):
        inits.append(numpy_helper.from_array(np.asarray(v), name))
        return name

    def conv(name, x, cin, cout, pool):
        w = (rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2.0 / (9 * cin))).astype(
            np.float32)
        b = (rng.standard_normal(cout) * 0.05).astype(np.float32)
        nodes.append(helper.make_node("Conv", [x, const(f"{name}.w", w), const(f"{name}.b", b)],
                                      [f"{name}.o"], name=name, pads=[1, 1, 1, 1],
                                      kernel_shape=[3, 3]))
        nodes.append(helper.make_node("Relu", [f"{name}.o"], [f"{name}.r"], name=f"{name}_relu"))
        nodes.append(helper.make_node("MaxPool", [f"{name}.r"], [f"{name}.p"],
                                      name=f"{name}_pool", kernel_shape=pool, strides=pool))
        return f"{name}.p"

    a = conv("c1", "image", 1, 16, [2, 2])
    b = conv("c2", a, 16, 32, [2, 2])
    c = conv("c3", b, 32, 32, [2, 1])
    nodes += [
        helper.make_node("Reshape", [c, const("feat_shape", np.array([1, 128, 24], np.int64))],
                         ["feat"], name="to_sequence"),
        helper.make_node("Transpose", ["feat"], ["seq"], name="time_major", perm=[2, 0, 1]),
        # torch.zeros(2, seq.size(1), HID)
        helper.make_node("Shape", ["seq"], ["seq_shape"], name="shape"),
        helper.make_node("Gather", ["seq_shape", const("one", np.array(1, np.int64))],
                         ["batch"], name="batch", axis=0),
        helper.make_node("Unsqueeze", ["batch", const("axes0", np.array([0], np.int64))],
                         ["batch1"], name="batch_1d"),
        helper.make_node("Concat", [const("two", np.array([2], np.int64)), "batch1",
                                    const("hid", np.array([HID], np.int64))],
                         ["h0_shape"], name="h0_shape", axis=0),
        helper.make_node("ConstantOfShape", ["h0_shape"], ["h0"], name="h0",
                         value=numpy_helper.from_array(np.zeros(1, np.float32))),
    ]
    lw = (rng.standard_normal((2, 4 * HID, 128)) * 0.15).astype(np.float32)
    lr = (rng.standard_normal((2, 4 * HID, HID)) * 0.15).astype(np.float32)
    lb = (rng.standard_normal((2, 8 * HID)) * 0.1).astype(np.float32)
    nodes.append(helper.make_node(
        "LSTM", ["seq", const("lstm.w", lw), const("lstm.r", lr), const("lstm.b", lb), "",
                 "h0", "h0"], ["lstm_y", "", ""], name="lstm", direction="bidirectional",
        hidden_size=HID))
    fw = (rng.standard_normal((2 * HID, CLASSES)) * 0.4).astype(np.float32)
    fb = (rng.standard_normal(CLASSES) * 0.1).astype(np.float32)
    nodes += [
        helper.make_node("Transpose", ["lstm_y"], ["lstm_t"], name="dirs_last",
                         perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["lstm_t", const("y_shape", np.array([24, 1, 2 * HID],
                                                                          np.int64))],
                         ["lstm_flat"], name="concat_dirs"),
        helper.make_node("MatMul", ["lstm_flat", const("fc.w", fw)], ["fc_mm"], name="fc"),
        helper.make_node("Add", ["fc_mm", const("fc.b", fb)], ["logits"], name="fc_bias"),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=2),
    ]
    g = helper.make_graph(
        nodes, "ocr_lstm",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, H, W])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [24, 1, CLASSES])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    path = os.path.join(HERE, "ocr_lstm.onnx")
    onnx.save(m, path)
    xs = images(rng, 20)
    np.save(os.path.join(HERE, "ocr_calib.npy"), xs[:16])
    np.save(os.path.join(HERE, "ocr_test.npy"), xs[16:])
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ys = np.stack([sess.run(None, {"image": x[None]})[0] for x in xs[16:]])
    np.save(os.path.join(HERE, "ocr_ort.npy"), ys)
    print("greedy CTC paths:", [y[:, 0].argmax(-1).tolist() for y in ys])
    dyn = os.path.join(HERE, "ocr_lstm_dyn.onnx")
    quantize_dynamic(path, dyn, weight_type=QuantType.QInt8, reduce_range=True)
    ops = {n.op_type for n in onnx.load(dyn).graph.node}
    assert {"DynamicQuantizeLSTM", "ConvInteger", "MatMulInteger"} <= ops, ops
    sess = ort.InferenceSession(dyn, providers=["CPUExecutionProvider"])
    ys = np.stack([sess.run(None, {"image": x[None]})[0] for x in xs[16:]])
    np.save(os.path.join(HERE, "ocr_dyn_ort.npy"), ys)


if __name__ == "__main__":
    main()
