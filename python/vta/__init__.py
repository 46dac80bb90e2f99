"""VTA co-design toolkit: compile ONNX models for a VTA-class accelerator, run them from numpy.

The package wraps the same Rust libraries as the ``vta`` command line, with the same error
messages::

    import numpy as np, vta

    cfg = vta.Config("default")                      # a preset, a file, or fields
    m = vta.compile("net.onnx", config=cfg, calibration=[x])
    (y,) = m.run({"input": x}, backend="fsim")       # list of outputs, like onnxruntime
    outs, report = m.run_with_report([x], backend="rtl")
    report["run"]["launches"][0]["counters"]         # cycles and hardware counters
    m.save("net.vtab"); vta.load("net.vtab")
    vta.dse.sweep(network="digits", axes={"block": [8, 16]}).rows
    vta.hw.verilog(cfg)["verilog"]

Backends are named as in ``vta run --backend``: ``"fsim"`` (functional simulator),
``"rtl"`` (cycle-accurate Verilator simulation; needs ``verilator`` and a C++ compiler for
configs other than the default, whose model is built in), ``"remote://HOST:PORT"`` (a
``vta serve``), ``"serial://PORT"`` and ``"soc-sim"``; and ``"board"``: the accelerator of the
Zynq board the package runs on, where the board build of the package (a wheel for armv7 and
aarch64, ``vta.BUILD == "board"``) loads and runs compiled models::

    m = vta.load("net.vtab")                         # compiled on a workstation
    (y,) = m.run(x, backend="board")                 # /dev/uio0 and udmabuf0, as vta-board
    m.run(x, backend="board", board=vta.BoardOptions(hwh="vta.hwh"))

Errors are :class:`VtaError` subclasses: :class:`ConfigError`, :class:`ModelFileError`,
:class:`CompileError`, :class:`RunError` (with :class:`InputError`, :class:`BackendError`,
:class:`CheckError`), :class:`HardwareError` and :class:`DseError`.
"""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping, Optional, Sequence, Union

import numpy as np

from . import _native
from ._native import (
    BackendError,
    BoardOptions,
    CheckError,
    CompiledModel,
    CompileError,
    Config,
    ConfigError,
    DseError,
    HardwareError,
    InputError,
    ModelFileError,
    RunError,
    VtaError,
)

__version__: str = _native.__version__

#: ``"full"`` (the workstation wheel) or ``"board"`` (the wheel for armv7 and aarch64 boards,
#: which loads and runs compiled models: no :func:`compile`, :mod:`vta.dse`, :mod:`vta.hw`,
#: :func:`vta.zoo.digits` or ``vta`` command; those raise :class:`VtaError` there).
BUILD: str = _native.BUILD

__all__ = [
    "Config",
    "CompiledModel",
    "BoardOptions",
    "BUILD",
    "compile",
    "load",
    "dse",
    "hw",
    "zoo",
    "VtaError",
    "ConfigError",
    "ModelFileError",
    "CompileError",
    "RunError",
    "InputError",
    "BackendError",
    "CheckError",
    "HardwareError",
    "DseError",
]

PathLike = Union[str, "os.PathLike[str]"]
ConfigLike = Union[Config, str, "os.PathLike[str]", None]


def _model_bytes(model: Any) -> tuple[bytes, str]:
    """The ONNX bytes of `model` (a path, bytes, or an object with SerializeToString) and a
    name for messages."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        return bytes(model), "<bytes>"
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        try:
            with open(path, "rb") as f:
                return f.read(), path
        except OSError as e:
            raise ModelFileError(f"cannot read {path}: {e.strerror or e}") from None
    serialize = getattr(model, "SerializeToString", None)
    if callable(serialize):
        graph = getattr(model, "graph", None)
        name = getattr(graph, "name", "") or "<onnx.ModelProto>"
        return serialize(), name
    raise TypeError(
        "model must be a path, bytes, or an onnx.ModelProto (anything with "
        f"SerializeToString), got {type(model).__name__}"
    )


def _calibration_arrays(calibration: Optional[Iterable[Any]]) -> list[np.ndarray]:
    out = []
    for i, x in enumerate(calibration or []):
        a = np.asarray(x)
        if a.dtype.kind != "f":
            raise CompileError(
                f"calibration[{i}] must be a float array (samples of the model's input), "
                f"got {a.dtype}"
            )
        out.append(np.ascontiguousarray(a, dtype=np.float32))
    return out


def compile(
    model: Any,
    config: ConfigLike = None,
    calibration: Optional[Iterable[Any]] = None,
    *,
    bit_exact: bool = False,
    launch_per_layer: bool = False,
    depthwise_on_gemm: bool = False,
    input_shapes: Optional[Mapping[str, Sequence[int]]] = None,
    memory_budget: Optional[int] = None,
    split_branches: bool = False,
    weight_clip: str = "auto",
    weight_rounding: str = "auto",
    keep_ends_8bit: bool = True,
    activation_clip: str = "auto",
    name: Optional[str] = None,
) -> CompiledModel:
    """Compiles an ONNX model for an accelerator config (``vta compile``).

    Args:
        model: an ONNX file's path, its bytes, or an ``onnx.ModelProto`` (anything with
            ``SerializeToString``). Float32, QDQ or QOperator models.
        config: a :class:`Config`, a preset name or a config file (default: ``"default"``).
        calibration: for a float model, samples of its input (float arrays of the input's
            shape, or several stacked along the first axis); the ranges found are stored.
        bit_exact: offload quantized layers only where the accelerator's requantization is
            bit-identical to ONNX's (``--bit-exact``).
        launch_per_layer: one device launch per accelerator layer, for per-layer counters.
        depthwise_on_gemm: run depthwise convolutions on the GEMM core.
        input_shapes: fix symbolic input dimensions, ``{"x": (1, 3, 48, 320)}``.
        memory_budget: most bytes the model's tensors may take (default 4 GiB).
        split_branches: give independent branches launches of their own, for the pool
            executor to overlap (``--split-branches``).
        weight_clip: how post-training quantization picks each output channel's weight
            range: ``"max"``, ``"min-error"`` or ``"auto"`` (min-error below 8-bit weights).
            The config's widths set the precision (``config="i4w4"``).
        weight_rounding: how post-training quantization rounds weights: ``"nearest"``,
            ``"error-feedback"`` (GPTQ-style, over the calibration inputs) or ``"auto"``
            (error-feedback below 8-bit weights).
        keep_ends_8bit: below 8-bit weights, keep the first and last layers' weights at 8
            bits (a core with narrower lanes runs them bit-sliced, one GEMM pass per weight
            digit).
        activation_clip: how post-training quantization picks each activation's range:
            ``"max"``, ``"min-error"`` or ``"auto"`` (min-error below 8-bit activations).
        name: the model's name in messages and reports (default: the file name).

    Returns:
        A :class:`CompiledModel` with its support table and layer report.

    Raises:
        ModelFileError: the file cannot be read or is not an ONNX model.
        CompileError: the model cannot be compiled (the message has the support table).
        ConfigError: the config is invalid.
    """
    _native.require_full_build("vta.compile")
    data, source = _model_bytes(model)
    shapes = None
    if input_shapes:
        shapes = [(str(k), [int(d) for d in v]) for k, v in input_shapes.items()]
    return _native.compile(
        data,
        name or source,
        config,
        _calibration_arrays(calibration),
        bit_exact,
        launch_per_layer,
        depthwise_on_gemm,
        shapes,
        memory_budget,
        split_branches,
        weight_clip,
        weight_rounding,
        keep_ends_8bit,
        activation_clip,
    )


def load(
    model: Union[PathLike, bytes], config: ConfigLike = None, *, memory_budget: Optional[int] = None
) -> CompiledModel:
    """Reads a compiled model: a ``.vtab`` file (from :meth:`CompiledModel.save` or
    ``vta compile``) or its bytes.

    Args:
        model: the file's path or bytes.
        config: run it on this config instead of its own (the ISA must match: configs
            differing only in bus width, queue depths or clock run the same programs).
        memory_budget: most bytes the model's tensors may take (default 4 GiB).

    Raises:
        ModelFileError: not a compiled model, corrupt, or compiled for another config.
    """
    if isinstance(model, (bytes, bytearray, memoryview)):
        return _native.load(bytes(model), "<bytes>", config, memory_budget)
    path = os.fspath(model)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ModelFileError(f"cannot read {path}: {e.strerror or e}") from None
    return _native.load(data, path, config, memory_budget)


from . import dse, hw, zoo  # noqa: E402  (submodules use the names above)
