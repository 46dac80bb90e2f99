#!/usr/bin/env python3
"""Measures how onnxruntime-quantized models fare on the accelerator.

Builds a small CNN (padded 3x3 convolutions, a residual Add, GlobalAveragePool, Gemm) with
deterministic weights, quantizes it with onnxruntime's `quantize_static` defaults (uint8
activations with non-zero zero points, int8 weights) in QDQ and QOperator form, per tensor
and per channel, compiles each with `vta compile`, runs it with `vta run --check` on fsim and
compares with onnxruntime's own result on the same inputs.

Needs a Python with numpy, onnx and onnxruntime (`pip install numpy onnx onnxruntime`):

    python3 scripts/ort-quant.py --vta target/debug/vta [--out DIR] [--samples N]

Prints one row per model and form: ONNX nodes on the accelerator, % of the conv/matmul MACs
on the accelerator, outputs equal to onnxruntime's (in output LSBs: the outputs are
dequantized int8/uint8, so equal LSBs mean bit-identical quantized results) with the
largest difference in LSBs, the same against onnxruntime running the model as written (no
graph optimizations: the float definition of QDQ, which the compiler's CPU fallback
computes), how far onnxruntime's two modes differ, and top-1 agreement. With
--keep-models DIR it writes the models, inputs.npy (the first 8 inputs) and onnxruntime's
outputs on them (NAME_ort.npy, NAME_ort_noopt.npy) there: the compiler's tests read the
ones committed in compiler/tests/data/ortq/.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_static)
import onnxruntime as ort

H = W = 16
CIN = 3


def conv(nodes, inits, rng, name, x, cin, cout, stride=1, relu=True):
    w = (rng.standard_normal((cout, cin, 3, 3)) * np.sqrt(2.0 / (9 * cin))).astype(np.float32)
    b = (rng.standard_normal(cout) * 0.1).astype(np.float32)
    inits += [numpy_helper.from_array(w, f"{name}.w"), numpy_helper.from_array(b, f"{name}.b")]
    y = f"{name}.out"
    nodes.append(helper.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [y], name=name,
                                  pads=[1, 1, 1, 1], strides=[stride, stride],
                                  kernel_shape=[3, 3]))
    if relu:
        nodes.append(helper.make_node("Relu", [y], [f"{name}.relu"], name=f"{name}_relu"))
        return f"{name}.relu"
    return y


def small_cnn():
    """conv(3->16) relu, conv(16->16) relu, conv(16->16), Add residual, relu,
    conv(16->32, stride 2) relu, GlobalAveragePool, Flatten, Gemm(32->10)."""
    rng = np.random.default_rng(7)
    nodes, inits = [], []
    a = conv(nodes, inits, rng, "c1", "image", CIN, 16)
    b = conv(nodes, inits, rng, "c2", a, 16, 16)
    c = conv(nodes, inits, rng, "c3", b, 16, 16, relu=False)
    nodes.append(helper.make_node("Add", [c, a], ["res"], name="add"))
    nodes.append(helper.make_node("Relu", ["res"], ["res.relu"], name="add_relu"))
    d = conv(nodes, inits, rng, "c4", "res.relu", 16, 32, stride=2)
    nodes.append(helper.make_node("GlobalAveragePool", [d], ["gap"], name="gap"))
    nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"))
    fw = (rng.standard_normal((10, 32)) * 0.3).astype(np.float32)
    fb = (rng.standard_normal(10) * 0.1).astype(np.float32)
    inits += [numpy_helper.from_array(fw, "fc.w"), numpy_helper.from_array(fb, "fc.b")]
    nodes.append(helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="fc",
                                  transB=1))
    g = helper.make_graph(
        nodes, "small_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, CIN, H, W])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


class Reader(CalibrationDataReader):
    def __init__(self, xs):
        self.it = iter([{"image": x[None]} for x in xs])

    def get_next(self):
        return next(self.it, None)


def conv_macs(model):
    """MACs of every Conv and Gemm node of the float model, by name (onnxruntime's quantizer
    keeps the names in QDQ form and adds `_quant` in QOperator form)."""
    m = onnx.shape_inference.infer_shapes(model)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(m.graph.value_info) + list(m.graph.output)}
    inits = {i.name: list(i.dims) for i in m.graph.initializer}
    out = {}
    for n in m.graph.node:
        if n.op_type in ("Conv", "Gemm"):
            w = inits[n.input[1]]
            out[n.name] = int(np.prod(shapes[n.output[0]]) * np.prod(w[1:]))
    return out


def keep_inputs(xs):
    """The inputs whose onnxruntime outputs --keep-models stores (the tests run these)."""
    return xs[:8]


def ort_run(path, xs, optimized):
    """onnxruntime's output: `optimized` is its default session (QDQ groups fused into its
    integer kernels); otherwise every node is run as written (the float definition of QDQ)."""
    so = ort.SessionOptions()
    if not optimized:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return np.concatenate([sess.run(None, {"image": x[None]})[0] for x in xs])


def lsb_diff(got, want):
    """|got - want| in output LSBs (both are dequantized int8/uint8 values)."""
    u = np.unique(np.concatenate([got.ravel(), want.ravel()]))
    lsb = max(np.min(np.diff(u)), 1e-12) if len(u) > 1 else 1.0
    return np.rint(np.abs(got - want) / lsb)


def measure(vta, path, xs, name, tmp, keep, macs):
    want = ort_run(path, xs, True)
    want_def = ort_run(path, xs, False)
    if keep:
        np.save(os.path.join(keep, name + "_ort.npy"), want[:len(keep_inputs(xs))])
        np.save(os.path.join(keep, name + "_ort_noopt.npy"), want_def[:len(keep_inputs(xs))])
    vtab = os.path.join(tmp, name + ".vtab")
    r = subprocess.run([vta, "compile", path, "-o", vtab, "--json"], capture_output=True,
                       text=True)
    total = sum(macs.values())
    if r.returncode != 0:
        return dict(model=name, compiled=False, error=r.stderr.strip().splitlines()[:3],
                    total_macs=total)
    rep = json.loads(r.stdout)
    sup = rep["support"]
    accel = [e for e in sup if e["status"] == "accelerator"]
    on = sum(macs.get(e["node"].removesuffix("_quant"), 0) for e in sup
             if e["status"] == "accelerator")
    xin = os.path.join(tmp, name + "_x.npy")
    yout = os.path.join(tmp, name + "_y.npy")
    np.save(xin, xs)
    r = subprocess.run([vta, "run", vtab, "-i", xin, "-o", yout, "--check"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return dict(model=name, compiled=True, ran=False, error=r.stderr.strip()[-400:])
    got = np.load(yout).reshape(want.shape)
    # The logits are DequantizeLinear outputs: differences come in multiples of the scale.
    lsbs = lsb_diff(got, want)
    lsbs_def = lsb_diff(got, want_def)
    ort_self = lsb_diff(want, want_def)
    return dict(equal_def=float(np.mean(lsbs_def == 0)), max_lsb_def=int(lsbs_def.max()),
                ort_self_max=int(ort_self.max()), ort_self_equal=float(np.mean(ort_self == 0)),
                model=name, compiled=True, ran=True, nodes=len(sup),
                accel_nodes=len(accel), macs_on=on, total_macs=total,
                pct_macs=100.0 * on / max(total, 1),
                equal=float(np.mean(lsbs == 0)), max_lsb=int(lsbs.max()),
                top1=float(np.mean(got.argmax(1) == want.argmax(1))),
                cpu=[f'{e["node"]} ({e["op"]}): {e["details"]}' for e in sup
                     if e["status"] == "cpu" and e["op"] in
                     ("Conv", "QLinearConv", "Gemm", "QGemm", "MatMul", "QLinearMatMul")])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vta", default="target/debug/vta")
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--keep-models", metavar="DIR")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rng = np.random.default_rng(1)
    calib = rng.standard_normal((16, CIN, H, W)).astype(np.float32)
    xs = rng.standard_normal((a.samples, CIN, H, W)).astype(np.float32)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        fp = os.path.join(tmp, "small_cnn.onnx")
        model = small_cnn()
        onnx.save(model, fp)
        macs = conv_macs(model)
        # onnxruntime's defaults (uint8 activations), both forms, per tensor and per channel;
        # then int8 activations (asymmetric too), QDQ per channel.
        variants = [(fmt, fname, pc, QuantType.QUInt8, "")
                    for fmt, fname in ((QuantFormat.QDQ, "qdq"), (QuantFormat.QOperator, "qop"))
                    for pc in (False, True)]
        variants.append((QuantFormat.QDQ, "qdq", True, QuantType.QInt8, "_s8"))
        for fmt, fname, per_channel, act, suffix in variants:
            name = f"small_cnn_{fname}{'_pc' if per_channel else ''}{suffix}"
            path = os.path.join(a.keep_models or tmp, name + ".onnx")
            quantize_static(fp, path, Reader(calib), quant_format=fmt,
                            per_channel=per_channel, activation_type=act,
                            weight_type=QuantType.QInt8)
            rows.append(measure(a.vta, path, xs, name, tmp, a.keep_models, macs))
        if a.keep_models:
            np.save(os.path.join(a.keep_models, "inputs.npy"), keep_inputs(xs))
    if a.json:
        print(json.dumps(rows, indent=1))
        return
    print("| model | form | ONNX nodes on accel | conv/matmul MACs on accel | equal to onnxruntime "
          "(max diff) | equal to its unfused definition (max diff) | onnxruntime fused vs "
          "unfused | top-1 |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        form = r["model"].replace("small_cnn_", "")
        if not r.get("ran"):
            print(f"| small_cnn | {form} | fails: {r.get('error')} | | | | |")
            continue
        print(f"| small_cnn | {form} | {r['accel_nodes']}/{r['nodes']} | "
              f"{r['pct_macs']:.1f}% | {100 * r['equal']:.1f}% ({r['max_lsb']} LSB) | "
              f"{100 * r['equal_def']:.1f}% ({r['max_lsb_def']} LSB) | "
              f"{100 * r['ort_self_equal']:.1f}% ({r['ort_self_max']} LSB) | "
              f"{100 * r['top1']:.1f}% |")
        for c in r["cpu"]:
            print(f"    cpu: {c}", file=sys.stderr)


if __name__ == "__main__":
    main()
