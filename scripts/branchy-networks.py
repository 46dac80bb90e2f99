#!/usr/bin/env python3
"""Writes branchy networks for the pool executor and `vta bench schedule`: GoogLeNet
(inception blocks, four branches each), SqueezeNet 1.1 (fire modules, two expand branches
each) and the inception-style test network of compiler/tests/exec_pool.rs (one block of four
branches, one through a softmax that runs on the CPU), as float ONNX models (opset 13) with
deterministic weights, plus a calibration set and a sample input for each.

With torch and torchvision installed, the models are torchvision's (`weights=None`,
`torch.manual_seed(0)`, eval mode, GoogLeNet without aux logits) exported by torch.onnx.
Without them (the default here), the same architectures are built directly with the `onnx`
package: the layers, shapes and branch structure of torchvision's GoogLeNet (batch norm
folded into the convolutions, the "5x5" branch with torchvision's 3x3 kernel, ceil-mode
pooling) and SqueezeNet 1.1, with He-normal weights from numpy's seed 0 instead of
torchvision's initialisation, whose tiny weights (std 0.01) would leave nothing to quantize.
The test network is built here in either case (32 channels per branch, 8 input channels).
Either way the weights are untrained: these networks measure schedules, not accuracy.

    python3 scripts/branchy-networks.py OUT_DIR [--size 64] [--samples 8]
    vta compile OUT_DIR/googlenet.onnx --split-branches --calibrate OUT_DIR/googlenet_calib.npy -o googlenet.vtab
    vta bench schedule googlenet.vtab -i OUT_DIR/googlenet_x.npy --time device --devices fsim,fsim

Files: `<name>.onnx`, `<name>_calib.npy` (N x C x S x S, float32; C is 3, 8 for the test
network), `<name>_x.npy` (1 x C x S x S). Needs numpy and onnx.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Builder:
    """A float ONNX graph grown layer by layer; `rng` draws every weight."""

    def __init__(self, name, size, rng, channels=3):
        self.name, self.rng = name, rng
        self.nodes, self.inits, self.n = [], [], 0
        self.input = helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                   [1, channels, size, size])

    def fresh(self, what):
        self.n += 1
        return f"{what}{self.n}"

    def const(self, what, array):
        name = self.fresh(what)
        self.inits.append(numpy_helper.from_array(array.astype(np.float32), name))
        return name

    def const_i64(self, what, values):
        name = self.fresh(what)
        self.inits.append(numpy_helper.from_array(np.array(values, np.int64), name))
        return name

    def node(self, op, inputs, **attrs):
        out = self.fresh(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def conv(self, x, cin, cout, k, stride=1, pad=0, relu=True):
        w = self.rng.normal(0.0, np.sqrt(2.0 / (cin * k * k)), (cout, cin, k, k))
        b = self.rng.normal(0.0, 0.01, cout)
        y = self.node("Conv", [x, self.const("w", w), self.const("b", b)],
                      kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)
        return self.node("Relu", [y]) if relu else y

    def maxpool(self, x, k, stride, pad=0, ceil=1):
        return self.node("MaxPool", [x], kernel_shape=[k, k], strides=[stride, stride],
                         pads=[pad] * 4, ceil_mode=ceil)

    def concat(self, xs):
        return self.node("Concat", xs, axis=1)

    def head(self, x, cin, classes):
        x = self.node("GlobalAveragePool", [x])
        x = self.node("Flatten", [x], axis=1)
        w = self.rng.normal(0.0, np.sqrt(1.0 / cin), (classes, cin))
        return self.node("Gemm", [x, self.const("fc_w", w), self.const("fc_b", np.zeros(classes))],
                         transB=1)

    def model(self, y, classes):
        out = helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, classes])
        g = helper.make_graph(self.nodes, self.name, [self.input], [out], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="branchy-networks.py")
        onnx.checker.check_model(m)
        return m


def googlenet(size, rng):
    """torchvision's GoogLeNet (transform_input off, no aux logits), batch norm folded."""
    b = Builder("googlenet", size, rng)
    x = b.conv("x", 3, 64, 7, stride=2, pad=3)
    x = b.maxpool(x, 3, 2)
    x = b.conv(x, 64, 64, 1)
    x = b.conv(x, 64, 192, 3, pad=1)
    x = b.maxpool(x, 3, 2)

    def inception(x, cin, c1, c3r, c3, c5r, c5, pp):
        b1 = b.conv(x, cin, c1, 1)
        b2 = b.conv(b.conv(x, cin, c3r, 1), c3r, c3, 3, pad=1)
        b3 = b.conv(b.conv(x, cin, c5r, 1), c5r, c5, 3, pad=1)
        b4 = b.conv(b.maxpool(x, 3, 1, pad=1), cin, pp, 1)
        return b.concat([b1, b2, b3, b4]), c1 + c3 + c5 + pp

    x, c = inception(x, 192, 64, 96, 128, 16, 32, 32)
    x, c = inception(x, c, 128, 128, 192, 32, 96, 64)
    x = b.maxpool(x, 3, 2)
    for cfg in [(192, 96, 208, 16, 48, 64), (160, 112, 224, 24, 64, 64),
                (128, 128, 256, 24, 64, 64), (112, 144, 288, 32, 64, 64),
                (256, 160, 320, 32, 128, 128)]:
        x, c = inception(x, c, *cfg)
    x = b.maxpool(x, 2, 2)
    x, c = inception(x, c, 256, 160, 320, 32, 128, 128)
    x, c = inception(x, c, 384, 192, 384, 48, 128, 128)
    return b.model(b.head(x, c, 1000), 1000)


def squeezenet(size, rng):
    """torchvision's SqueezeNet 1.1."""
    b = Builder("squeezenet1_1", size, rng)
    x = b.conv("x", 3, 64, 3, stride=2)
    x = b.maxpool(x, 3, 2)

    def fire(x, cin, s, e1, e3):
        sq = b.conv(x, cin, s, 1)
        return b.concat([b.conv(sq, s, e1, 1), b.conv(sq, s, e3, 3, pad=1)]), e1 + e3

    x, c = fire(x, 64, 16, 64, 64)
    x, c = fire(x, c, 16, 64, 64)
    x = b.maxpool(x, 3, 2)
    x, c = fire(x, c, 32, 128, 128)
    x, c = fire(x, c, 32, 128, 128)
    x = b.maxpool(x, 3, 2)
    for s, e in [(48, 192), (48, 192), (64, 256), (64, 256)]:
        x, c = fire(x, c, s, e, e)
    x = b.conv(x, c, 1000, 1)
    x = b.node("GlobalAveragePool", [x])
    y = b.node("Flatten", [x], axis=1)
    return b.model(y, 1000)


def inception_test(size, rng, ch=32):
    """compiler/tests/exec_pool.rs's inception-style network: a stem convolution, four
    branches (1x1; 1x1 -> 3x3; 3x3 max pool -> 1x1; 1x1 -> softmax over channels, on the
    CPU) concatenated, a 1x1 convolution, global pooling and a classifier."""
    b = Builder("inception_test", size, rng, channels=INCEPTION_CHANNELS)
    stem = b.conv("x", INCEPTION_CHANNELS, ch, 3, pad=1)
    a = b.conv(stem, ch, ch, 1)
    bb = b.conv(b.conv(stem, ch, ch, 1), ch, ch, 3, pad=1)
    c = b.conv(b.maxpool(stem, 3, 1, pad=1, ceil=0), ch, ch, 1)
    d = b.node("Softmax", [b.conv(stem, ch, ch, 1, relu=False)], axis=1)
    y = b.conv(b.concat([a, bb, c, d]), 4 * ch, 32, 1)
    return b.model(b.head(y, 32, 10), 10)


INCEPTION_CHANNELS = 8


def detector(size, rng, classes=20, anchors=3):
    """A YOLO-style single-scale detector: a stride-8 convolutional backbone and a 1x1 head
    (on the accelerator), then YOLOv5's box decoding in float on the CPU (sigmoid of every
    output; centres (2 s - 0.5 + grid) * stride, sizes (2 s)^2 * anchor), so that the CPU's
    post-processing is a large share of a frame: the network pipelining is for."""
    b = Builder("detector", size, rng)
    x = b.conv("x", 3, 16, 3, stride=2, pad=1)
    x = b.conv(x, 16, 32, 3, stride=2, pad=1)
    x = b.conv(x, 32, 64, 3, pad=1)
    x = b.conv(x, 64, 128, 3, stride=2, pad=1)
    per = 5 + classes
    x = b.conv(x, 128, anchors * per, 1, relu=False)
    g, stride = size // 8, 8
    x = b.node("Reshape", [x, b.const_i64("shape", [1, anchors, per, g, g])])
    x = b.node("Transpose", [x], perm=[0, 1, 3, 4, 2])
    s = b.node("Sigmoid", [x])
    outs = [b.fresh("split") for _ in range(3)]
    b.nodes.append(helper.make_node("Split", [s, b.const_i64("sizes", [2, 2, per - 4])], outs,
                                    axis=4))
    xy, wh, rest = outs
    gy, gx = np.meshgrid(np.arange(g), np.arange(g), indexing="ij")
    grid = np.stack([gx, gy], -1).reshape(1, 1, g, g, 2) - 0.5
    xy = b.node("Mul", [b.node("Add", [b.node("Mul", [xy, b.const("two", np.array(2.0))]),
                                       b.const("grid", grid)]),
                        b.const("stride", np.array(float(stride)))])
    anchor = np.array([[10, 13], [16, 30], [33, 23]][:anchors], np.float32).reshape(
        1, anchors, 1, 1, 2)
    wh2 = b.node("Mul", [wh, b.const("two", np.array(2.0))])
    wh = b.node("Mul", [b.node("Mul", [wh2, wh2]), b.const("anchor", anchor)])
    y = b.node("Concat", [xy, wh, rest], axis=4)
    y = b.node("Reshape", [y, b.const_i64("shape", [1, anchors * g * g, per])])
    out = helper.make_tensor_value_info(y, TensorProto.FLOAT, [1, anchors * g * g, per])
    gr = helper.make_graph(b.nodes, b.name, [b.input], [out], b.inits)
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)],
                          producer_name="branchy-networks.py")
    onnx.checker.check_model(m)
    return m


def torchvision_model(name, size, path):
    """Exports torchvision's model; False when torch or torchvision is missing."""
    try:
        import torch
        import torchvision
    except ImportError:
        return False
    torch.manual_seed(0)
    if name == "googlenet":
        m = torchvision.models.googlenet(weights=None, aux_logits=False, init_weights=True)
    else:
        m = torchvision.models.squeezenet1_1(weights=None)
    m.eval()
    torch.onnx.export(m, torch.zeros(1, 3, size, size), path, opset_version=13,
                      input_names=["x"], output_names=["y"])
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="directory to write the models into")
    ap.add_argument("--size", type=int, default=64, help="input height and width [64]")
    ap.add_argument("--samples", type=int, default=8, help="calibration samples [8]")
    a = ap.parse_args()
    if a.size < 32:
        ap.error("--size must be at least 32 (GoogLeNet pools its input down 32 times)")
    os.makedirs(a.out, exist_ok=True)
    for name, build in [("googlenet", googlenet), ("squeezenet", squeezenet),
                        ("inception_test", inception_test), ("detector", detector)]:
        path = os.path.join(a.out, f"{name}.onnx")
        channels = INCEPTION_CHANNELS if name == "inception_test" else 3
        if name in ("googlenet", "squeezenet") and torchvision_model(name, a.size, path):
            how = "torchvision"
        else:
            onnx.save(build(a.size, np.random.default_rng(0)), path)
            how = "onnx helper" if name in ("inception_test", "detector") else \
                "onnx helper, torchvision's architecture"
        rng = np.random.default_rng(1)
        calib = rng.normal(0.0, 1.0, (a.samples, channels, a.size, a.size)).astype(np.float32)
        np.save(os.path.join(a.out, f"{name}_calib.npy"), calib)
        np.save(os.path.join(a.out, f"{name}_x.npy"), calib[:1])
        print(f"{path}: {how}, input 1x{channels}x{a.size}x{a.size}; "
              f"{name}_calib.npy ({a.samples} samples), {name}_x.npy")


if __name__ == "__main__":
    main()
