"""Design-space exploration (``vta dse``): sweep accelerator configs for a network on an
FPGA part or board, with cycles, resources, fit and the Pareto front."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from . import _native
from ._native import Config, DseError

__all__ = ["sweep", "plan", "SweepResult"]

ConfigLike = Union[Config, str, "os.PathLike[str]", None]
AxisValues = Union[Sequence[int], int, str]


class SweepResult:
    """The result of :func:`sweep`.

    Attributes:
        rows: one dict per config evaluated (``config_string``, ``config``, ``cycles``,
            ``latency_ms``, ``resources``, ``fits``, ``pareto``, ...), as ``vta dse --json``
            lists them under ``points``.
        doc: the whole ``vta dse --json`` document (target, tool, work done, best config).
        summary: the text table ``vta dse`` prints.
    """

    def __init__(self, doc: Dict[str, Any]) -> None:
        self.summary: str = doc.pop("summary", "")
        self.doc: Dict[str, Any] = doc
        self.rows: List[Dict[str, Any]] = list(doc.get("points", []))

    @property
    def pareto(self) -> List[Dict[str, Any]]:
        """The rows on the Pareto front (latency against resources), fastest first."""
        front = [r for r in self.rows if r.get("pareto")]
        return sorted(front, key=lambda r: (r.get("latency_ms") is None, r.get("latency_ms") or 0.0))

    @property
    def best(self) -> Optional[Dict[str, Any]]:
        """The fastest config that fits the target, or ``None``."""
        name = self.doc.get("best")
        return next((r for r in self.rows if r["config_string"] == name), None)

    def to_pandas(self) -> Any:
        """The rows as a pandas DataFrame (needs pandas)."""
        import pandas as pd  # optional dependency

        return pd.DataFrame(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __repr__(self) -> str:
        return f"SweepResult({len(self.rows)} configs, best {self.doc.get('best')!r})"


def sweep(
    network: Union[str, "os.PathLike[str]"] = "digits",
    axes: Optional[Mapping[str, AxisValues]] = None,
    *,
    base: ConfigLike = None,
    part: Optional[str] = None,
    board: Optional[str] = None,
    cycles: str = "model",
    validate: int = 0,
    jobs: Optional[int] = None,
    cache_dir: Union[str, "os.PathLike[str]", None] = None,
    fresh: bool = False,
    calibration: Sequence[Union[str, "os.PathLike[str]"]] = (),
    size: int = 224,
    output_dir: Union[str, "os.PathLike[str]", None] = None,
    accuracy: bool = False,
    eval: Union[str, "os.PathLike[str]", None] = None,
    labels: Union[str, "os.PathLike[str]", None] = None,
) -> SweepResult:
    """Sweeps accelerator configs for a network (``vta dse``).

    Args:
        network: ``"digits"`` (the embedded trained CNN), ``"resnet18"``, or an ONNX file.
        axes: axis name to values: ``batch``, ``block``, ``block_in``, ``block_out``,
            ``log_uop_buff``, ``log_inp_buff``, ``log_wgt_buff``, ``log_acc_buff``,
            ``inp_depth``, ``wgt_depth``, ``acc_depth``, ``inp_width``, ``wgt_width``,
            ``acc_width``, ``bus``, ``clock``; values are a
            list of integers or ``vta dse``'s strings (``"8..32"``). Default: the CLI's
            default sweep.
        base: the config the unswept fields come from (default ``"default"``).
        part: FPGA part (``xc7z020`` by default) or ``board`` (a Zynq, ECP5 or Gowin board).
        cycles: ``"model"`` (the analytic cycle model) or ``"rtl"`` (the RTL simulator).
        validate: with the model, run this many front configs on the RTL to report its error.
        jobs: configs evaluated at once (default: the number of cores).
        cache_dir: the cache (default ``$VTA_CACHE_DIR``, else ``~/.cache/vta``); resource
            estimates (yosys runs of minutes) and cycles are cached there.
        fresh: measure and synthesize everything again.
        calibration: ``.npy`` calibration files of a float ONNX ``network``.
        size: ResNet-18's input size.
        output_dir: also write ``results.csv``, ``results.json`` and ``pareto.svg`` there.
        accuracy: also measure each config's top-1 accuracy on the functional simulator (a
            row's ``accuracy``) and make it an objective of the front; ``"digits"`` uses its
            test digits, another network needs ``eval`` and ``labels``.
        eval, labels: ``.npy`` files of evaluation inputs (samples on the first axis) and
            their integer classes.

    Returns:
        A :class:`SweepResult`; ``.rows`` is a list of dicts, ``.to_pandas()`` a DataFrame.

    Raises:
        DseError: a bad axis, part, board or network, or a failed measurement.
    """
    doc = _native.dse_sweep(
        os.fspath(network),
        _axes(axes),
        base,
        part,
        board,
        cycles,
        validate,
        jobs,
        None if cache_dir is None else os.fspath(cache_dir),
        fresh,
        [os.fspath(c) for c in calibration],
        size,
        None if output_dir is None else os.fspath(output_dir),
        False,
        accuracy,
        None if eval is None else os.fspath(eval),
        None if labels is None else os.fspath(labels),
    )
    return SweepResult(doc)


def plan(axes: Optional[Mapping[str, AxisValues]] = None, *, base: ConfigLike = None) -> Dict[str, Any]:
    """The configs a sweep would evaluate and the combinations it skips (``vta dse
    --dry-run``), without measuring anything: ``{"combinations", "configs", "skipped"}``."""
    return _native.dse_sweep("digits", _axes(axes), base, None, None, "model", 0, None, None,
                             False, [], 224, None, True)


def _axes(axes: Optional[Mapping[str, AxisValues]]) -> Optional[Dict[str, Any]]:
    if axes is None:
        return None
    out: Dict[str, Any] = {}
    for k, v in axes.items():
        if isinstance(v, (str, int)):
            out[k] = v
        else:
            out[k] = [int(x) for x in v]
    return out
