"""Shared fixtures: the embedded digits CNN, its compiled model, a resource-estimate cache
(so that no test runs yosys for minutes), and the `vta` command of the installed wheel."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import vta

# The sweep the DSE tests and the walkthrough run: the digits CNN on the default config with
# blocks of 8, 16 and 32 (2048 INP and ACC rows and 1024 WGT tiles, as the default config has).
# The fixture cache holds made-up resource estimates of its configs (marked as such in their
# `tool` field), growing with the block; the 32-wide one does not fit the xc7z020's DSPs.
SWEEP = {"block": [8, 16, 32], "inp_depth": [2048], "wgt_depth": [1024], "acc_depth": [2048]}


def sweep_configs() -> list:
    """The configs of SWEEP, as vta.Config."""
    return [vta.Config.from_json(json.dumps(c["config"])) for c in vta.dse.plan(SWEEP)["configs"]]


def write_estimate(cache: Path, cfg: vta.Config, luts: int, ffs: int, dsps: int, bram36: float) -> None:
    """A cache entry of `cfg`'s resource estimate on the xc7 family, as `vta hw report --json`
    writes it (the key is the RTL's hash)."""
    rtl = vta.hw.verilog(cfg)["rtl_hash"]
    path = cache / "fit" / f"{rtl}-xc7.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "config_string": cfg.config_string,
        "rtl_hash": rtl,
        "tool": "test fixture (made-up figures)",
        "luts": luts, "ffs": ffs, "dsps": dsps, "bram36": bram36, "urams": 0,
    }))


@pytest.fixture(scope="session")
def estimate_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache directory with the fixture estimates of FIXTURE_CONFIGS."""
    cache = tmp_path_factory.mktemp("cache")
    for cfg in sweep_configs():
        b = cfg.log_block_in
        write_estimate(cache, cfg, 1500 * 2 ** b, 1200 * 2 ** b, 2 ** (2 * b) // 4 + 14, 40.0 + 6 * b)
    # The default config (the bitstream test's) is one of them.
    assert vta.Config() in sweep_configs()
    return cache


@pytest.fixture(scope="session")
def digits() -> dict:
    return vta.zoo.digits()


@pytest.fixture(scope="session")
def digits_onnx(tmp_path_factory: pytest.TempPathFactory, digits: dict) -> Path:
    p = tmp_path_factory.mktemp("models") / "tiny_cnn.onnx"
    p.write_bytes(digits["onnx"])
    return p


@pytest.fixture(scope="session")
def model(digits: dict) -> vta.CompiledModel:
    """The digits CNN compiled for the default config, calibrated on its samples."""
    return vta.compile(digits["onnx"], calibration=[digits["calibration"]], name="tiny_cnn")


@pytest.fixture(scope="session")
def x(digits: dict) -> np.ndarray:
    """One test digit, float32[1,1,8,8]."""
    return np.ascontiguousarray(digits["test"][:1])


def vta_command() -> list:
    """The `vta` console script of the installed wheel (or `python -m vta._cli`)."""
    exe = shutil.which("vta", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if exe and Path(exe).parent == Path(sys.executable).parent:
        return [exe]
    return [sys.executable, "-m", "vta._cli"]


@pytest.fixture(scope="session")
def cli():
    """Runs the `vta` command; returns the CompletedProcess."""

    def run(*args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
        r = subprocess.run(vta_command() + list(args), capture_output=True, text=True, **kw)
        if check and r.returncode != 0:
            raise AssertionError(f"vta {' '.join(args)} failed ({r.returncode}):\n{r.stderr}")
        return r

    return run
