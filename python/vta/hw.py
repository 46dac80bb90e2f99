"""Hardware: the accelerator's Verilog, its resource use, and bitstreams (``vta hw``)."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Dict, Optional, Union

from . import _native
from ._native import Config, HardwareError

__all__ = ["verilog", "report", "bitstream"]

ConfigLike = Union[Config, str, "os.PathLike[str]", None]


def verilog(config: ConfigLike = None, out_dir: Union[str, "os.PathLike[str]", None] = None) -> Dict[str, Any]:
    """Generates the accelerator's Verilog for a config (``vta hw verilog``).

    Returns a dict with ``verilog`` (the text, top module ``vta_top``), ``regs_json`` (the
    control register map), ``ports_json`` (the port manifest), ``config_string``,
    ``isa_hash``, ``rtl_hash`` and ``modules``. With ``out_dir``, also writes
    ``vta_top.v``, ``regs.json`` and ``ports.json`` there (created if missing) and adds
    their paths under ``files``.

    Raises:
        ConfigError: the config is invalid.
        HardwareError: the generator refused the config.
    """
    _native.require_full_build("vta.hw.verilog")
    g = _native.hw_verilog(config)
    if out_dir is not None:
        d = os.fspath(out_dir)
        os.makedirs(d, exist_ok=True)
        files = {}
        for key, name in (("verilog", "vta_top.v"), ("regs_json", "regs.json"), ("ports_json", "ports.json")):
            path = os.path.join(d, name)
            with open(path, "w") as f:
                f.write(g[key])
            files[key] = path
        g["files"] = files
    return g


def report(config: ConfigLike = None, part: str = "xc7z020") -> Dict[str, Any]:
    """Synthesizes the accelerator with yosys and reports its LUT, FF, DSP and BRAM use
    (``vta hw report --json``; takes minutes on large configs; needs ``yosys``).

    Args:
        config: a :class:`Config`, preset name or file (default ``"default"``).
        part: the FPGA part to compare against: ``xc7z020``, ``xc7z010`` or ``xc7z045``.

    Returns:
        The JSON document of ``vta hw report --json`` as a dict.

    Raises:
        HardwareError: unknown part, yosys missing or failing.
    """
    _native.require_full_build("vta.hw.report")
    return _native.hw_report(config, part)


def bitstream(
    board: str,
    output: Union[str, "os.PathLike[str]"],
    config: ConfigLike = None,
    *,
    estimate: Union[str, "os.PathLike[str]", None] = None,
    build: bool = False,
    extra_args: Optional[list] = None,
) -> str:
    """Builds for a board (``vta hw bitstream``): a Vivado project for a Zynq board
    (pynq-z1, pynq-z2, ultra96-v2, zcu104, kv260; ``build=True`` also runs Vivado), or a
    bitstream with the open tools for an ECP5 or Gowin board (ulx3s-85f, ulx3s-25f,
    orangecrab-85f, tang-nano-20k, tang-mega-138k-pro; tens of minutes).

    Runs the CLI's command in this process and returns the text it prints. ``estimate`` is
    a ``vta hw report --json`` file for the fit check; ``extra_args`` are further
    ``vta hw bitstream`` options (e.g. ``["--seed", "2"]``).

    Raises:
        HardwareError: the config does not fit the board, a tool failed, or an option is
            wrong (the CLI's message).
    """
    _native.require_full_build("vta.hw.bitstream")
    args = ["vta", "hw", "bitstream", "--board", board, "--output", os.fspath(output)]
    tmp = None
    try:
        if isinstance(config, Config):
            tmp = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
            tmp.write(config.to_json())
            tmp.close()
            args += ["--config", tmp.name]
        elif config is not None:
            args += ["--config", os.fspath(config)]
        if estimate is not None:
            args += ["--estimate", os.fspath(estimate)]
        if build:
            args.append("--build")
        args += [str(a) for a in (extra_args or [])]
        return _native.run_command(args, HardwareError)
    finally:
        if tmp is not None:
            os.unlink(tmp.name)
