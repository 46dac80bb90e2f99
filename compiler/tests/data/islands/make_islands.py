#!/usr/bin/env python3
"""Makes the float-island test models of compiler/tests/float_islands.rs: the digits CNN
(../tiny_cnn.onnx) quantized by onnxruntime's `quantize_static` with only its convolutions
quantized (`op_types_to_quantize=["Conv"]`), so that its BatchNormalizations, Relus, MaxPool,
residual Add and pooling stay in float between DequantizeLinear and QuantizeLinear, in QDQ
and QOperator form; and onnxruntime's outputs on the first 8 test digits (optimizations off).

Run from this directory with a Python that has numpy, onnx and onnxruntime:

    python3 make_islands.py
"""
import numpy as np
import onnxruntime as ort
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_static)

SRC = "../tiny_cnn.onnx"
calib = np.load("../digits_calib.npy")[:32]
test = np.load("../digits_test.npy")[:8]
name = ort.InferenceSession(SRC, providers=["CPUExecutionProvider"]).get_inputs()[0].name


class Reader(CalibrationDataReader):
    def __init__(self):
        self.it = iter([{name: x[None]} for x in calib])

    def get_next(self):
        return next(self.it, None)


np.save("inputs.npy", test)
for form, fmt in (("qdq", QuantFormat.QDQ), ("qop", QuantFormat.QOperator)):
    path = f"conv_only_{form}.onnx"
    quantize_static(SRC, path, Reader(), quant_format=fmt, op_types_to_quantize=["Conv"],
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    np.save(f"conv_only_{form}_ort.npy",
            np.concatenate([s.run(None, {name: x[None]})[0] for x in test]))
