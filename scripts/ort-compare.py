#!/usr/bin/env python3
"""Compares a quantized ONNX model compiled by the toolkit with onnxruntime, tensor by tensor.

The model (QDQ or QOperator form, as onnxruntime's quantizer or another writes it) is
compiled with `vta compile` and run with `vta run --dump-values` (every tensor the compiled
model computes, from the integer reference that `vta run --check` proves the accelerator
equal to). onnxruntime runs the same model with its graph optimizations off (its reference
kernels) and every intermediate tensor exposed as an output. Each integer tensor both have
(the compiler keeps ONNX's names; a uint8 tensor becomes int8 with its zero point shifted,
named `NAME:i8`) is compared in real values, in units of the compiled tensor's scale (LSB):

    python3 scripts/ort-compare.py model.onnx --input x.npy [--max-lsb 1] [--config C] [--per-layer]

It prints one row per compared tensor in the compiled model's order, names the first that
departs by more than --max-lsb, and exits with status 1 if any does (2 on bad usage).
A difference in one tensor carries over into the tensors computed from it. With
--per-layer, the compiled model runs a second time with onnxruntime's tensors put in place
of its own (`vta run --replace-values`) wherever both quantize a tensor alike, so each step
works on onnxruntime's inputs: the second column is then each step's own departure, and
the exit status follows it.
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


def constants(model):
    """Initializers and Constant nodes' values, by name."""
    consts = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant" and n.attribute[0].name == "value":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    return consts


def quant_params(model):
    """Tensor name -> (scale, zero point) for every tensor a quantized op writes or reads:
    the output of a QuantizeLinear, and any input of a quantized op followed by its scale and
    zero point (DequantizeLinear and onnxruntime's QLinear* operators list each quantized
    operand so, and their output's scale and zero point last but for a bias)."""
    consts = constants(model)
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
    # Shape inference types no com.microsoft output, nor anything computed from one. Their
    # quantized outputs have the type of their zero point, so they are declared with it
    # first, and inference then reaches the tensors after them.
    consts = {t.name: t.data_type for t in model.graph.initializer}
    declared = {v.name for v in model.graph.value_info}
    for n in model.graph.node:
        zp = CONTRIB_OUTPUT_ZP.get(n.op_type)
        if n.domain != "com.microsoft" or zp is None or n.output[0] in declared:
            continue
        if zp < len(n.input) and n.input[zp] in consts:
            model.graph.value_info.append(onnx.helper.make_tensor_value_info(
                n.output[0], consts[n.input[zp]], None))
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


# onnxruntime's quantized contrib operators: the input holding the output's zero point.
CONTRIB_OUTPUT_ZP = {"QLinearAdd": 7, "QLinearMul": 7, "QLinearSigmoid": 4,
                     "QLinearLeakyRelu": 4, "QLinearGlobalAveragePool": 4,
                     "QLinearAveragePool": 4, "QLinearConcat": 1}
# Their definition on real values, after DequantizeLinear of each operand.
CONTRIB_FUNCTIONS = {
    "QLinearAdd": lambda a, b, attr: a + b,
    "QLinearMul": lambda a, b, attr: a * b,
    "QLinearSigmoid": lambda a, attr: 1 / (1 + np.exp(-a)),
    "QLinearLeakyRelu": lambda a, attr: np.where(a >= 0, a, a * attr.get("alpha", 0.01)),
}


def contrib_definition(node, get):
    """ONNX-style definition of an element-wise contrib operator: `Quantize(f(Dequantize))`
    in float64, rounding half to even; None for the others."""
    f = CONTRIB_FUNCTIONS.get(node.op_type)
    if f is None:
        return None
    binary = node.op_type in ("QLinearAdd", "QLinearMul")
    ins = [get(k) for k in range(8 if binary else 5)]
    if any(v is None for v in ins):
        return None
    attr = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    deq = lambda q, s, z: (q.astype(np.float64) - z.astype(np.float64)) * np.float64(s)
    if binary:
        a, as_, az, b, bs, bz, ys, yz = ins
        y = f(deq(a, as_, az), deq(b, bs, bz), attr)
    else:
        a, as_, az, ys, yz = ins
        y = f(deq(a, as_, az), attr)
    info = np.iinfo(yz.dtype)
    return np.clip(np.round(y / np.float64(ys)) + int(yz), info.min, info.max)


def conv_definition(x, w, strides, pads, dilations, group):
    """ONNX's Conv over integers (int64, exact): x [N, C, H, W], w [O, C/group, kh, kw]."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    x = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (x.shape[2] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (x.shape[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    og = o // group
    acc = np.zeros((n, o, oh, ow), np.int64)
    for g in range(group):
        xg, wg = x[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og]
        for i in range(kh):
            for j in range(kw):
                win = xg[:, :, i * dilations[0]:i * dilations[0] + strides[0] * (oh - 1) + 1:strides[0],
                         j * dilations[1]:j * dilations[1] + strides[1] * (ow - 1) + 1:strides[1]]
                acc[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", win, wg[:, :, i, j])
    return acc


def definition(node, theirs, consts):
    """What ONNX's definition of a QLinearConv or QLinearMatMul `node` (or of an
    element-wise contrib operator, `contrib_definition`) gives on onnxruntime's own inputs
    (exact integer products, one rounding half to even), as the output's integers; None for
    other operators or operands that are not at hand."""
    get = lambda k: (None if k >= len(node.input) else consts.get(node.input[k])
                     if node.input[k] in consts else theirs.get(node.input[k]))
    if node.domain == "com.microsoft":
        return contrib_definition(node, get)
    if node.op_type not in ("QLinearConv", "QLinearMatMul"):
        return None
    ins = [get(k) for k in range(8)]
    if any(v is None for v in ins):
        return None
    x, xs, xz, w, ws, wz, ys, yz = ins
    xi, wi = x.astype(np.int64) - xz.astype(np.int64), w.astype(np.int64)
    if node.op_type == "QLinearConv":
        attr = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if attr.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            return None
        kdims = w.ndim - 2
        if kdims != 2:
            return None
        wi = wi - (wz.astype(np.int64).reshape(-1, 1, 1, 1) if wz.size > 1 else int(wz))
        acc = conv_definition(xi, wi, attr.get("strides", [1, 1]), attr.get("pads", [0] * 4),
                              attr.get("dilations", [1, 1]), attr.get("group", 1))
        if len(node.input) > 8 and node.input[8]:
            b = get(8)
            if b is None:
                return None
            acc += b.astype(np.int64).reshape(1, -1, 1, 1)
        scale = (np.float64(xs) * ws.astype(np.float64)).reshape(
            (1, -1, 1, 1) if ws.size > 1 else ())
    else:
        acc = np.matmul(xi, wi - wz.astype(np.int64))
        scale = np.float64(xs) * ws.astype(np.float64)
    info = np.iinfo(yz.dtype)
    return np.clip(np.round(acc * scale / np.float64(ys)) + int(yz), info.min, info.max)


def compiled_values(a, compiled, one, tmp, tag, replace=None):
    """The compiled model's values on input file `one` (index, value number -> array)."""
    dump = os.path.join(tmp, tag)
    cmd = [a.vta, "run", compiled, "-i", one, "--dump-values", dump]
    if replace:
        cmd += ["--replace-values", replace]
    run(cmd)
    with open(os.path.join(dump, "values.json")) as f:
        index = json.load(f)
    return index, {e["value"]: np.load(os.path.join(dump, e["file"])) for e in index}


def counterparts(index, theirs, params):
    """(index entry, onnxruntime's integer tensor, its scale, its zero point) for every
    compiled value that onnxruntime also computes as an integer tensor."""
    for e in index:
        if e["scale"] is None:
            continue
        name = e["name"][:-3] if e["name"].endswith(":i8") else e["name"]
        if name not in theirs or name not in params:
            continue
        t = theirs[name]
        if np.issubdtype(t.dtype, np.integer):
            yield e, name, t, params[name]


def departures(index, ours, theirs, params, model, max_lsb):
    """name -> (producing step, largest difference in LSB or None, elements off, note,
    None or (onnxruntime's and the compiled model's largest difference from ONNX's
    definition, in LSB) for a tensor beyond `max_lsb` whose definition can be recomputed)."""
    producers = {o: n for n in model.graph.node for o in n.output}
    consts = constants(model)
    rows = {}
    for e, name, t, (s, z) in counterparts(index, theirs, params):
        real_theirs = (t.astype(np.float64) - z) * s
        real_ours = (ours[e["value"]].astype(np.float64) - e["zero_point"]) * e["scale"]
        if real_ours.size == real_theirs.size:
            # A size-1 axis the compiled model dropped or added: the same row-major data.
            real_ours = real_ours.reshape(real_theirs.shape)
        else:
            rows[name] = (e["producer"], None, None,
                          f"shape {real_ours.shape} vs {real_theirs.shape}", None)
            continue
        lsb = np.abs(real_ours - real_theirs) / e["scale"]
        vs_definition = None
        if lsb.max() > max_lsb and name in producers:
            d = definition(producers[name], theirs, consts)
            if d is not None and d.shape == t.shape:
                real_d = (d - z) * s
                vs_definition = (float((np.abs(real_theirs - real_d) / e["scale"]).max()),
                                 float((np.abs(real_ours - real_d) / e["scale"]).max()))
        rows[name] = (e["producer"], float(lsb.max()), int((lsb > 0.5).sum()), f"of {lsb.size}",
                      vs_definition)
    return rows


def write_replacements(index, theirs, params, ours, tmp):
    """onnxruntime's tensors in the compiled model's encoding, where that is exact (same
    scale; a zero point that only shifts), as `vta run --replace-values` reads them."""
    out = os.path.join(tmp, "replace")
    os.makedirs(out)
    entries = []
    for e, name, t, (s, z) in counterparts(index, theirs, params):
        mine = ours[e["value"]]
        if not np.isclose(s, e["scale"], rtol=1e-6, atol=0) or t.size != mine.size:
            continue
        # (a size-1 axis dropped or added: the same row-major data)
        q = (t.astype(np.int64) - z + e["zero_point"]).reshape(mine.shape)
        info = np.iinfo(mine.dtype)
        if q.min() < info.min or q.max() > info.max:
            continue
        f = f"value-{e['value']}.npy"
        np.save(os.path.join(out, f), q.astype(mine.dtype))
        entries.append({"value": e["value"], "name": e["name"], "file": f})
    with open(os.path.join(out, "values.json"), "w") as f:
        json.dump(entries, f)
    return out, len(entries)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", help="the quantized ONNX model")
    ap.add_argument("--input", "-i", required=True,
                    help=".npy input (samples stacked on the first axis: the first is used)")
    ap.add_argument("--config", help="accelerator config to compile for (vta compile --config)")
    ap.add_argument("--max-lsb", type=float, default=1.0,
                    help="largest difference allowed, in LSB of the compiled tensor [1]")
    ap.add_argument("--per-layer", action="store_true",
                    help="also run each step on onnxruntime's inputs, and judge by that")
    ap.add_argument("--json", metavar="FILE", help="also write the rows and verdict as JSON")
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
    params = quant_params(model)
    theirs = onnxruntime_values(model, x)
    with tempfile.TemporaryDirectory() as tmp:
        compiled = os.path.join(tmp, "m.vtab")
        cmd = [a.vta, "compile", a.model, "-o", compiled]
        if a.config:
            cmd += ["--config", a.config]
        run(cmd)
        one = os.path.join(tmp, "x.npy")
        np.save(one, x)
        index, ours = compiled_values(a, compiled, one, tmp, "values")
        carried = departures(index, ours, theirs, params, model, a.max_lsb)
        own, replaced = {}, 0
        if a.per_layer:
            replace, replaced = write_replacements(index, theirs, params, ours, tmp)
            _, ours_own = compiled_values(a, compiled, one, tmp, "own", replace)
            own = departures(index, ours_own, theirs, params, model, a.max_lsb)
    if not carried:
        sys.exit("ort-compare: no tensor of the compiled model has a quantized onnxruntime "
                 "counterpart (is the model quantized?)")

    judged = own if a.per_layer else carried
    first_bad, worst = None, 0.0
    print(f"{a.model}: {len(carried)} integer tensors compared with onnxruntime "
          f"{ort.__version__} (optimizations off)"
          + (f"; per layer, {replaced} of them given to the next steps as onnxruntime "
             "computed them" if a.per_layer else ""))
    cols = f"{'max LSB':>8} {'elements off':>14}"
    print(f"{'tensor':<44} {'step':<24} {cols}" + (f"   own: {cols}" if a.per_layer else ""))
    fmt = (lambda d, o: f"{'-' if d is None else f'{d:.2f}':>8} {'-' if o is None else o:>7}")
    exceptions = []
    for name, (step, diff, off, note, _) in carried.items():
        line = f"{name[:44]:<44} {str(step)[:24]:<24} {fmt(diff, off)} {note:<14}"
        if a.per_layer:
            _, d2, o2, note2, _ = own[name]
            line += f" {fmt(d2, o2)} {note2}"
        print(line.rstrip())
        d, vs_definition = judged[name][1], judged[name][4]
        if d is None:
            continue
        if vs_definition and vs_definition[1] <= a.max_lsb < vs_definition[0]:
            # onnxruntime departs from ONNX's definition here, the compiled model does not.
            exceptions.append((name, step, d, *vs_definition))
            continue
        worst = max(worst, d)
        if d > a.max_lsb and first_bad is None:
            first_bad = (name, step, d)
    for name, step, d, theirs_off, ours_off in exceptions:
        print(f"onnxruntime's departure: {name} (step {step}) differs by {d:.2f} LSB; "
              f"recomputed by ONNX's definition on onnxruntime's inputs, onnxruntime's "
              f"value is {theirs_off:.2f} LSB off and the compiled model's {ours_off:.2f} "
              "(its uint8 x int8 kernels saturate pairs of products in int16 on x86 CPUs "
              "without VNNI; its contrib kernels approximate)")
    what = "own " if a.per_layer else ""
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"model": a.model, "onnxruntime": ort.__version__,
                       "per_layer": a.per_layer, "replaced": replaced, "max_lsb": a.max_lsb,
                       "largest": worst, "first_beyond": first_bad and list(first_bad),
                       "onnxruntime_departures": [list(x) for x in exceptions],
                       "rows": [{"tensor": n, "step": st, "lsb": d, "off": o,
                                 "own_lsb": own[n][1] if n in own else None,
                                 "own_off": own[n][2] if n in own else None}
                                for n, (st, d, o, _, _) in carried.items()]}, f, indent=1)
    if first_bad:
        name, step, diff = first_bad
        print(f"first {what}departure beyond {a.max_lsb} LSB: {name} (step {step}), "
              f"{diff:.2f} LSB")
        sys.exit(1)
    print(f"every tensor within {a.max_lsb} LSB of onnxruntime{' per layer' if a.per_layer else ''} "
          f"(largest {worst:.2f})")


if __name__ == "__main__":
    main()
