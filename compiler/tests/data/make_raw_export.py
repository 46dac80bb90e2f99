#!/usr/bin/env python3
"""Makes the raw-export test model of the compiler's front-end tests: a detector head whose
anchor grid is computed from the input's shape, as PyTorch's exporter writes it.

Run from this directory with a Python that has numpy, onnx and onnxruntime:

    python3 make_raw_export.py

The model is the graph that `torch.onnx.export(Head(), torch.zeros(1, 3, 16, 16), ...,
opset_version=17, do_constant_folding=False)` (the TorchScript exporter) writes for

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.anchors = torch.tensor([2.0, 3.0])

        def forward(self, x):
            y = self.conv(x)                                   # [b, 4, h, w]
            b = y.shape[0]
            h, w = y.shape[2:]
            gy, gx = torch.meshgrid(torch.arange(h, dtype=torch.float32) + 0.5,
                                    torch.arange(w, dtype=torch.float32) + 0.5, indexing="ij")
            grid = torch.stack((gx, gy), 0).unsqueeze(0).expand(b, -1, -1, -1)
            stride = torch.full((1, 1, h, w), 8.0)
            xy = (y[:, :2].sigmoid() * 2 - 0.5 + grid) * stride
            wh = (y[:, 2:].sigmoid() * 2) ** 2 * self.anchors.view(1, 2, 1, 1).repeat(b, 1, h, w)
            return torch.cat((xy, wh), 1).view(b, 4, -1)

written node by node here with onnx.helper, following the exporter's symbolic functions
(Shape + Gather for sizes, Slice of a shape, Range for arange, Reshape/Shape/Concat/Expand for
meshgrid, Unsqueeze + Concat for stack and size lists, ConstantOfShape + Mul + Equal + Where
for expand's -1, ConstantOfShape for full, Tile for repeat), since PyTorch itself cannot be
installed where the tests are made. Nothing is folded: every shape computation is in the graph.

It also writes YOLOv5's Focus stem (`torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2],
x[..., ::2, 1::2], x[..., 1::2, 1::2]], 1)` then a Conv: four pairs of strided Slices and a
Concat) as onnxruntime's `quant_pre_process` rewrites it (SpaceToDepth and a Gather of the
channels) and `quantize_static` then quantizes it (QDQ, its defaults).

Outputs:
- raw_export_head.onnx: the model (input "x" [1, 3, 16, 16], output "boxes" [1, 4, 256])
- raw_export_calib.npy: 8 calibration inputs [8, 3, 16, 16] float32
- raw_export_test.npy: 4 test inputs [4, 3, 16, 16] float32
- raw_export_out.npy: onnxruntime's outputs on the test inputs [4, 4, 256]
- focus_stem_qdq.onnx: the quantized stem (input "x" [1, 3, 16, 16], output "y" [1, 16, 8, 8])
- focus_stem_qdq_out.npy: onnxruntime's outputs of it on raw_export_test.npy [4, 16, 8, 8]
"""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime import quantization as q
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))


class Builder:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def op(self, op_type, inputs, **attrs):
        self.n += 1
        out = f"/{op_type}_{self.n}_output_0"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"/{op_type}_{self.n}",
                                           **attrs))
        return out

    def const(self, value):
        """A Constant node, as the exporter writes literals."""
        return self.op("Constant", [], value=numpy_helper.from_array(np.asarray(value)))

    def unsqueeze0(self, x):
        return self.op("Unsqueeze", [x, self.const(np.array([0], np.int64))])

    def dim(self, x, i):
        """x.shape[i]: Shape, Gather with a scalar index."""
        return self.op("Gather", [self.op("Shape", [x]), self.const(np.array(i, np.int64))],
                       axis=0)

    def arange(self, end):
        """torch.arange(end, dtype=float32): Range over casts of its bounds."""
        start = self.const(np.array(0.0, np.float32))
        step = self.const(np.array(1.0, np.float32))
        return self.op("Range", [start, self.op("Cast", [end], to=TensorProto.FLOAT), step])

    def meshgrid(self, ts):
        """torch.meshgrid(indexing='ij') as the opset-9 symbolic writes it."""
        flat = [self.op("Reshape", [t, self.const(np.array([-1], np.int64))]) for t in ts]
        shapes = [self.op("Shape", [t]) for t in flat]
        out_shape = self.op("Concat", shapes, axis=0)
        out = []
        for i, t in enumerate(flat):
            parts = [shapes[i] if j == i else self.const(np.ones(1, np.int64))
                     for j in range(len(ts))]
            shaped = self.op("Reshape", [t, self.op("Concat", parts, axis=0)])
            out.append(self.op("Expand", [shaped, out_shape]))
        return out

    def expand_keep(self, x, sizes):
        """x.expand(sizes) with -1 entries: the size list, then Where(size == -1, 1, size)."""
        size = self.op("Concat", sizes, axis=0)
        size = self.op("Reshape", [size, self.const(np.array([-1], np.int64))])
        ones = self.op("ConstantOfShape", [self.op("Shape", [size])],
                       value=numpy_helper.from_array(np.array([1], np.int64)))
        neg = self.op("Mul", [ones, self.const(np.array(-1, np.int64))])
        size = self.op("Where", [self.op("Equal", [size, neg]), ones, size])
        return self.op("Expand", [x, size])


def head(seed=0):
    rng = np.random.default_rng(seed)
    b = Builder()
    w = numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32),
                                "conv.weight")
    bias = numpy_helper.from_array((rng.standard_normal(4) * 0.1).astype(np.float32),
                                   "conv.bias")
    anchors = numpy_helper.from_array(np.array([2.0, 3.0], np.float32), "anchors")
    b.inits += [w, bias, anchors]
    y = b.op("Conv", ["x", "conv.weight", "conv.bias"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    n = b.dim(y, 0)
    # h, w = y.shape[2:]: a Slice of the shape, then Gather of its elements.
    hw = b.op("Slice", [b.op("Shape", [y]), b.const(np.array([2], np.int64)),
                        b.const(np.array([9223372036854775807], np.int64)),
                        b.const(np.array([0], np.int64))])
    h = b.op("Gather", [hw, b.const(np.array(0, np.int64))], axis=0)
    wd = b.op("Gather", [hw, b.const(np.array(1, np.int64))], axis=0)
    half = lambda t: b.op("Add", [t, b.const(np.array(0.5, np.float32))])
    gy, gx = b.meshgrid([half(b.arange(h)), half(b.arange(wd))])
    grid = b.op("Concat", [b.unsqueeze0(gx), b.unsqueeze0(gy)], axis=0)
    grid = b.unsqueeze0(grid)
    minus1 = b.const(np.array([-1], np.int64))
    grid = b.expand_keep(grid, [b.unsqueeze0(n), minus1, minus1, minus1])
    one = b.const(np.array([1], np.int64))
    stride = b.op("ConstantOfShape",
                  [b.op("Concat", [one, one, b.unsqueeze0(h), b.unsqueeze0(wd)], axis=0)],
                  value=numpy_helper.from_array(np.array([8.0], np.float32)))
    axes1 = b.const(np.array([1], np.int64))
    big = b.const(np.array([9223372036854775807], np.int64))
    two = b.const(np.array([2], np.int64))
    zero = b.const(np.array([0], np.int64))
    sxy = b.op("Sigmoid", [b.op("Slice", [y, zero, two, axes1])])
    xy = b.op("Sub", [b.op("Mul", [sxy, b.const(np.array(2.0, np.float32))]),
                      b.const(np.array(0.5, np.float32))])
    xy = b.op("Mul", [b.op("Add", [xy, grid]), stride])
    swh = b.op("Sigmoid", [b.op("Slice", [y, two, big, axes1])])
    swh = b.op("Pow", [b.op("Mul", [swh, b.const(np.array(2.0, np.float32))]),
                       b.const(np.array(2.0, np.float32))])
    anc = b.op("Reshape", ["anchors", b.const(np.array([1, 2, 1, 1], np.int64))])
    reps = b.op("Concat", [b.unsqueeze0(n), one, b.unsqueeze0(h), b.unsqueeze0(wd)], axis=0)
    wh = b.op("Mul", [swh, b.op("Tile", [anc, reps])])
    out = b.op("Concat", [xy, wh], axis=1)
    shape = b.op("Concat", [b.unsqueeze0(n), b.const(np.array([4], np.int64)), minus1], axis=0)
    b.nodes.append(helper.make_node("Reshape", [out, shape], ["boxes"], name="/Reshape_out"))
    g = helper.make_graph(
        b.nodes, "raw_export_head",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 4, 256])],
        b.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="make_raw_export.py")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def focus_stem(seed=2):
    """The float Focus stem: strided Slices of H and W, Concat, a 3x3 Conv."""
    rng = np.random.default_rng(seed)
    b = Builder()
    end = np.array([9223372036854775807], np.int64)
    parts = []
    for oh, ow in [(0, 0), (1, 0), (0, 1), (1, 1)]:
        t = "x"
        for axis, start in [(2, oh), (3, ow)]:
            t = b.op("Slice", [t, b.const(np.array([start], np.int64)), b.const(end),
                               b.const(np.array([axis], np.int64)),
                               b.const(np.array([2], np.int64))])
        parts.append(t)
    cat = b.op("Concat", parts, axis=1)
    b.inits += [
        numpy_helper.from_array((rng.standard_normal((16, 12, 3, 3)) * 0.2).astype(np.float32),
                                "conv.weight"),
        numpy_helper.from_array((rng.standard_normal(16) * 0.1).astype(np.float32), "conv.bias"),
    ]
    b.nodes.append(helper.make_node("Conv", [cat, "conv.weight", "conv.bias"], ["y"],
                                    name="/conv/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    g = helper.make_graph(
        b.nodes, "focus_stem",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 8, 8])], b.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="make_raw_export.py")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def quantized_focus_stem(calib, test):
    """The stem pre-processed and quantized by onnxruntime, and onnxruntime's outputs."""
    fp, pre = os.path.join(HERE, "focus_stem.onnx"), os.path.join(HERE, "focus_stem_pre.onnx")
    qdq = os.path.join(HERE, "focus_stem_qdq.onnx")
    onnx.save(focus_stem(), fp)
    q.quant_pre_process(fp, pre)
    ops = [n.op_type for n in onnx.load(pre).graph.node]
    assert "SpaceToDepth" in ops, ops

    class Reader(q.CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": calib[i:i + 1]} for i in range(len(calib))])

        def get_next(self):
            return next(self.it, None)

    q.quantize_static(pre, qdq, Reader(), quant_format=q.QuantFormat.QDQ)
    os.remove(fp)
    os.remove(pre)
    print(qdq, os.path.getsize(qdq), "bytes, ops:", [n.op_type for n in onnx.load(qdq).graph.node])
    s = ort.InferenceSession(qdq, providers=["CPUExecutionProvider"])
    out = np.concatenate([s.run(None, {"x": test[i:i + 1]})[0] for i in range(len(test))])
    np.save(os.path.join(HERE, "focus_stem_qdq_out.npy"), out.astype(np.float32))


def main():
    m = head()
    path = os.path.join(HERE, "raw_export_head.onnx")
    onnx.save(m, path)
    print(path, os.path.getsize(path), "bytes,", len(m.graph.node), "nodes, ops:",
          sorted({n.op_type for n in m.graph.node}))
    rng = np.random.default_rng(1)
    calib = rng.standard_normal((8, 3, 16, 16)).astype(np.float32)
    test = rng.standard_normal((4, 3, 16, 16)).astype(np.float32)
    np.save(os.path.join(HERE, "raw_export_calib.npy"), calib)
    np.save(os.path.join(HERE, "raw_export_test.npy"), test)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    out = np.concatenate([s.run(None, {"x": test[i:i + 1]})[0] for i in range(len(test))])
    np.save(os.path.join(HERE, "raw_export_out.npy"), out.astype(np.float32))
    print("outputs", out.shape, "range", out.min(), out.max())
    quantized_focus_stem(calib, test)


if __name__ == "__main__":
    main()
