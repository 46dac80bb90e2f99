"""scripts/ort-compare.py, the layer-by-layer differential harness against onnxruntime, on the
repository's onnxruntime-quantized test models: every integer tensor of the compiled model
within 1 LSB of onnxruntime's (optimizations off), and a departure named with its step."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import vta_command

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "ort-compare.py"
ORTQ = ROOT / "compiler" / "tests" / "data" / "ortq"


def compare(model, x, *extra):
    cmd = vta_command()
    if len(cmd) != 1:
        pytest.skip("the wheel's vta console script is not installed")
    return subprocess.run([sys.executable, str(SCRIPT), str(model), "-i", str(x),
                           "--vta", cmd[0], *extra], capture_output=True, text=True)


@pytest.mark.parametrize("name", ["small_cnn_qdq", "small_cnn_qop"])
def test_quantized_models_agree_with_onnxruntime_within_one_lsb(name):
    r = compare(ORTQ / f"{name}.onnx", ORTQ / "inputs.npy")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "integer tensors compared" in r.stdout
    assert "every tensor within 1.0 LSB of onnxruntime" in r.stdout


def test_a_departure_is_named_with_its_step_and_size(tmp_path):
    # Half an LSB allowed: the compiled requantization's rounding (within 1 LSB of ONNX's
    # result by construction) shows up as the first departure, named.
    r = compare(ORTQ / "small_cnn_qdq.onnx", ORTQ / "inputs.npy", "--max-lsb", "0.5")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "first departure beyond 0.5 LSB: " in r.stdout and "(step " in r.stdout


def test_a_float_model_is_refused_with_the_reason(tmp_path):
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 1, 8, 8), np.float32))
    r = compare(ROOT / "compiler" / "tests" / "data" / "tiny_cnn.onnx", x)
    assert r.returncode != 0
    assert "vta compile" in r.stderr or "no tensor of the compiled model" in r.stderr


def test_a_missing_file_is_named():
    r = compare(ORTQ / "missing.onnx", ORTQ / "inputs.npy")
    assert r.returncode == 2 and "missing.onnx: no such file" in r.stderr


def test_per_layer_runs_each_step_on_onnxruntimes_inputs():
    # Carried over from the layers before it, the per-channel model's residual Add is 2 LSB
    # from onnxruntime; on onnxruntime's own inputs every step is within 1.
    carried = compare(ORTQ / "small_cnn_qdq_pc.onnx", ORTQ / "inputs.npy")
    assert carried.returncode == 1, carried.stdout + carried.stderr
    r = compare(ORTQ / "small_cnn_qdq_pc.onnx", ORTQ / "inputs.npy", "--per-layer")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "given to the next steps as onnxruntime computed them" in r.stdout
    assert "every tensor within 1.0 LSB of onnxruntime per layer" in r.stdout


def test_onnxruntimes_own_departure_from_onnx_is_named_not_counted(tmp_path):
    # onnxruntime's QLinearConv on x86 without VNNI saturates pairs of uint8 x int8 products
    # in int16: recomputed by ONNX's definition, its value is off and the compiled one not.
    report = tmp_path / "r.json"
    r = compare(ORTQ / "small_cnn_qop_pc.onnx", ORTQ / "inputs.npy", "--per-layer",
                "--json", str(report))
    assert r.returncode == 0, r.stdout + r.stderr
    verdict = json.loads(report.read_text())
    for name, _step, diff, theirs, ours in verdict["onnxruntime_departures"]:
        assert ours <= 1.0 < theirs and diff > 1.0, verdict
    if verdict["onnxruntime_departures"]:
        assert "onnxruntime's departure: c1.out_quantized" in r.stdout
    assert all(row["own_lsb"] is None or row["own_lsb"] <= 1.0 or
               row["tensor"] in {d[0] for d in verdict["onnxruntime_departures"]}
               for row in verdict["rows"]), verdict
