"""The `vta` command the wheel installs, and Python runs against `vta run` byte for byte."""

import json
import shutil

import numpy as np
import pytest

import vta


def test_the_wheel_installs_the_vta_command(cli):
    r = cli("--version")
    assert r.stdout.startswith("vta ")
    assert "default" in cli("config", "presets").stdout
    bad = cli("run", "missing.vtab", "-i", "x.npy", check=False)
    assert bad.returncode == 1 and bad.stderr.startswith("error: cannot read missing.vtab")
    usage = cli("no-such-command", check=False)
    assert usage.returncode == 2


@pytest.mark.parametrize("backend", ["fsim", "rtl"])
def test_python_run_equals_vta_run_byte_for_byte(cli, model, digits, tmp_path, backend):
    if backend == "rtl" and not shutil.which("verilator"):
        pytest.skip("the RTL backend needs verilator for models not built in")
    path = tmp_path / "m.vtab"
    model.save(path)
    x = np.ascontiguousarray(digits["test"][:4])
    np.save(tmp_path / "x.npy", x)
    r = cli("run", str(path), "-i", str(tmp_path / "x.npy"), "-o", str(tmp_path / "y.npy"),
            "--backend", backend, "--json")
    doc = json.loads(r.stdout)
    cli_y = np.load(tmp_path / "y.npy")
    outs, rep = model.run_with_report({"image": x}, backend=backend)
    assert outs[0].dtype == cli_y.dtype and outs[0].shape == cli_y.shape
    assert outs[0].tobytes() == cli_y.tobytes()
    # The report has the CLI's fields and figures (times aside).
    assert set(rep) - {"table"} == set(doc)
    assert rep["run"]["backend"] == doc["run"]["backend"] == backend
    assert set(rep["run"]) == set(doc["run"])
    for k in ["host_to_device_bytes", "device_to_host_bytes", "device_launches", "samples",
              "device_memory_bytes"]:
        assert rep["run"][k] == doc["run"][k], k
    for mine, theirs in zip(rep["run"]["launches"], doc["run"]["launches"]):
        assert mine["counters"] == theirs["counters"]
        assert mine["dram_bytes"] == theirs["dram_bytes"]
    if backend == "rtl":
        # The simulated cycles are the CLI's, cycle for cycle.
        for mine, theirs in zip(rep["run"]["launches"], doc["run"]["launches"]):
            assert mine["extras"]["cycles"] > 0
            assert mine["extras"]["cycles"] == theirs["extras"]["cycles"]


def test_compile_json_matches_vta_compile(cli, model, digits_onnx, digits, tmp_path):
    np.save(tmp_path / "calib.npy", digits["calibration"])
    out = tmp_path / "cli.vtab"
    r = cli("compile", str(digits_onnx), "--calibrate", str(tmp_path / "calib.npy"), "-o", str(out), "--json")
    doc = json.loads(r.stdout)
    m = vta.compile(digits_onnx, calibration=[digits["calibration"]])
    rep = m.report
    assert set(doc) - {"output", "bytes"} == set(rep)
    assert doc["support"] == rep["support"] and doc["launches"] == rep["launches"]
    assert set(doc["times_ms"]) - {"total"} == set(rep["times_ms"])
    # The same compiled-model file.
    assert out.read_bytes() == m.to_bytes()
