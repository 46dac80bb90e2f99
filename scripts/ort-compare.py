#!/usr/bin/env python3
"""Compares a quantized ONNX model compiled by the toolkit with onnxruntime, tensor by tensor.

The model (QDQ or QOperator form, as onnxruntime's quantizer or another writes it) is
compiled with `vta compile` and run with `vta run --dump-values` (every tensor the compiled
model computes, from the integer reference that `vta run --check` proves the accelerator
equal to). onnxruntime runs the same model with its graph optimizations off (its reference
kernels) and every intermediate tensor exposed as an output. Each integer tensor both have
(the compiler keeps ONNX's names; a uint8 tensor becomes int8 with its zero point shifted,
named `NAME:i8`) is compared in real values, in units of the compiled tensor's scale (LSB):

    python3 scripts/ort-compare.py model.onnx --input x.npy [--max-lsb 1] [--config C]

It prints one row per compared tensor in the compiled model's order, names the first that
departs by more than --max-lsb, and exits with status 1 if any does (2 on bad usage).
Needs numpy, onnx, onnxruntime and the `vta` command (--vta, else on the PATH).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"ort-compare: {' '.join(cmd)} failed:\n{r.stderr.strip()}")
    return r.stdout


def quant_params(model):
    """Tensor name -> (scale, zero point) for every tensor a quantized op writes or reads:
    the output of a QuantizeLinear, and any input of a quantized op followed by its scale and
    zero point (DequantizeLinear and onnxruntime's QLinear* operators list each quantized
    operand so, and their output's scale and zero point last but for a bias)."""
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    params = {}

    def put(name, s, z):
        if s in consts and consts[s].size == 1 and (z == "" or (z in consts and consts[z].size == 1)):
            zp = consts[z].item() if z else 0
            params.setdefault(name, (float(consts[s].item()), int(zp)))

    for n in model.graph.node:
        ins = list(n.input) + ["", ""]
        if n.op_type == "QuantizeLinear":
            put(n.output[0], ins[1], ins[2])
        elif n.op_type == "DequantizeLinear":
            put(ins[0], ins[1], ins[2])
        elif n.op_type.startswith("QLinear"):
            for i in range(0, len(n.input) - 2):
                put(n.input[i], n.input[i + 1], n.input[i + 2])
            # The output's scale and zero point: the two inputs before the bias of a
            # QLinearConv (inputs 6, 7), else the last two.
            k = 6 if n.op_type == "QLinearConv" else len(n.input) - 2
            put(n.output[0], ins[k], ins[k + 1])
    return params


def onnxruntime_values(model, x):
    """Every tensor of `model` on input `x`, by name, from onnxruntime without optimizations."""
    inferred = onnx.shape_inference.infer_shapes(model)
    have = {o.name for o in model.graph.output}
    # value_info may name tensors no node writes any more (left by a quantizer's rewrite).
    written = {o for n in model.graph.node for o in n.output}
    for vi in inferred.graph.value_info:
        if vi.name in written and vi.name not in have:
            model.graph.output.append(vi)
            have.add(vi.name)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    feed = {sess.get_inputs()[0].name: x}
    return dict(zip(names, sess.run(names, feed)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help="the quantized ONNX model")
    ap.add_argument("--input", "-i", required=True,
                    help=".npy input (samples stacked on the first axis: the first is used)")
    ap.add_argument("--config", help="accelerator config to compile for (vta compile --config)")
    ap.add_argument("--max-lsb", type=float, default=1.0,
                    help="largest difference allowed, in LSB of the compiled tensor [1]")
    ap.add_argument("--vta", default="vta", help="the vta command [vta on the PATH]")
    a = ap.parse_args()
    for what, path in (("model", a.model), ("--input", a.input)):
        if not os.path.isfile(path):
            ap.error(f"{what} {path}: no such file")
    try:
        x = np.load(a.input)[:1]
        model = onnx.load(a.model)
    except Exception as e:  # numpy's and onnx's own errors, named with the file
        sys.exit(f"ort-compare: cannot read {a.model} or {a.input}: {e}")
    with tempfile.TemporaryDirectory() as tmp:
        compiled = os.path.join(tmp, "m.vtab")
        cmd = [a.vta, "compile", a.model, "-o", compiled]
        if a.config:
            cmd += ["--config", a.config]
        run(cmd)
        one = os.path.join(tmp, "x.npy")
        np.save(one, x)
        dump = os.path.join(tmp, "values")
        run([a.vta, "run", compiled, "-i", one, "--dump-values", dump])
        with open(os.path.join(dump, "values.json")) as f:
            index = json.load(f)
        ours = {e["value"]: np.load(os.path.join(dump, e["file"])) for e in index}
    params = quant_params(model)
    theirs = onnxruntime_values(model, x)

    rows, first_bad, worst = [], None, 0.0
    for e in index:
        if e["scale"] is None:
            continue
        name = e["name"][:-3] if e["name"].endswith(":i8") else e["name"]
        if name not in theirs or name not in params:
            continue
        t = theirs[name]
        if not np.issubdtype(t.dtype, np.integer):
            continue
        s, z = params[name]
        real_theirs = (t.astype(np.float64) - z) * s
        q = ours[e["value"]].astype(np.float64)
        real_ours = (q - e["zero_point"]) * e["scale"]
        if real_ours.shape != real_theirs.shape:
            rows.append((name, e["producer"], None, None, f"shape {real_ours.shape} vs "
                         f"{real_theirs.shape}"))
            continue
        lsb = np.abs(real_ours - real_theirs) / e["scale"]
        diff, off = float(lsb.max()), int((lsb > 0.5).sum())
        worst = max(worst, diff)
        rows.append((name, e["producer"], diff, off, f"of {lsb.size}"))
        if diff > a.max_lsb and first_bad is None:
            first_bad = (name, e["producer"], diff)

    print(f"{a.model}: {len(rows)} integer tensors compared with onnxruntime "
          f"{ort.__version__} (optimizations off)")
    print(f"{'tensor':<44} {'step':<24} {'max LSB':>8} {'elements off':>14}")
    for name, step, diff, off, note in rows:
        d = "-" if diff is None else f"{diff:.2f}"
        o = "-" if off is None else str(off)
        print(f"{name[:44]:<44} {str(step)[:24]:<24} {d:>8} {o:>7} {note}")
    if not rows:
        sys.exit("ort-compare: no tensor of the compiled model has a quantized onnxruntime "
                 "counterpart (is the model quantized?)")
    if first_bad:
        name, step, diff = first_bad
        print(f"first departure beyond {a.max_lsb} LSB: {name} (step {step}), {diff:.2f} LSB")
        sys.exit(1)
    print(f"every tensor within {a.max_lsb} LSB of onnxruntime (largest {worst:.2f})")


if __name__ == "__main__":
    main()
