"""Design-space exploration (``vta dse``): sweep accelerator configs for a network on an
FPGA part or board, with cycles, resources, fit and the Pareto front."""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from . import _native
from ._native import Config, DseError

__all__ = ["sweep", "sweep_on_ray", "plan", "SweepResult"]

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
    shard: Optional[str] = None,
    merge: Optional[int] = None,
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
        shard: ``"I/N"``: evaluate only every N-th config from the I-th (``vta dse --shard``)
            into the cache; the result has that shard's rows and nothing is written.
        merge: ``N``: measure nothing, take every result of a sweep run as N shards from the
            cache (``vta dse --merge``); a config not there raises :class:`DseError` naming
            it and its shard.

    Returns:
        A :class:`SweepResult`; ``.rows`` is a list of dicts, ``.to_pandas()`` a DataFrame.

    Raises:
        DseError: a bad axis, part, board or network, or a failed measurement.
    """
    _native.require_full_build("vta.dse.sweep")
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
        shard,
        merge,
    )
    return SweepResult(doc)


def sweep_on_ray(
    network: Union[str, "os.PathLike[str]"] = "digits",
    axes: Optional[Mapping[str, AxisValues]] = None,
    *,
    shards: Optional[int] = None,
    retries: int = 3,
    cache_dir: Union[str, "os.PathLike[str]", None] = None,
    output_dir: Union[str, "os.PathLike[str]", None] = None,
    **options: Any,
) -> SweepResult:
    """Runs :func:`sweep` on a Ray cluster: one Ray task per shard, retried when it fails or
    its node dies, then the merge here. The results equal :func:`sweep`'s on one machine.

    Ray must be initialised by the caller (``ray.init(address=...)``), and every node must see
    ``cache_dir`` (a shared filesystem; results are written whole and renamed into place, so
    tasks on several nodes may fill it at once) and have this package installed.

    Args:
        network, axes: as :func:`sweep`.
        shards: how many Ray tasks (default: the cluster's CPUs). Each evaluates every
            ``shards``-th config with one job.
        retries: how many times Ray reruns a shard whose task raised or whose node died.
        cache_dir: the shared result cache (default as :func:`sweep`).
        output_dir: where the merge writes ``results.csv``, ``results.json`` and
            ``pareto.svg``.
        options: any other keyword of :func:`sweep` (``part``, ``base``, ``cycles``, ...),
            except ``jobs``, ``shard`` and ``merge``.

    Raises:
        DseError: a shard failed on every try (its error is named), or the merge found
            results missing.
    """
    try:
        import ray  # optional dependency
    except ImportError as e:
        raise DseError("sweep_on_ray needs Ray: pip install ray (or run the shards with "
                       "sweep(..., shard=\"I/N\") and merge with sweep(..., merge=N))") from e

    for name in ("jobs", "shard", "merge"):
        if name in options:
            raise DseError(f"sweep_on_ray sets {name} itself: drop {name}=")
    if not ray.is_initialized():
        raise DseError("sweep_on_ray needs Ray initialised: call ray.init(address=...) first")
    if shards is None:
        shards = max(1, int(ray.cluster_resources().get("CPU", 1)))
    if shards < 1:
        raise DseError("shards must be at least 1")
    if retries < 0:
        raise DseError("retries must be at least 0")
    if cache_dir is not None:
        cache_dir = os.fspath(cache_dir)
    run_shard = ray.remote(num_cpus=1, max_retries=retries, retry_exceptions=True)(_ray_shard)
    tasks = {
        i: run_shard.remote(network, axes, f"{i}/{shards}", cache_dir, options)
        for i in range(shards)
    }
    failed = []
    for i, task in tasks.items():
        try:
            ray.get(task)
        except Exception as e:  # the task's error after its retries, or Ray's
            failed.append(f"  shard {i}/{shards}: {e}")
    try:
        return sweep(network, axes, cache_dir=cache_dir, output_dir=output_dir, merge=shards,
                     **options)
    except DseError as e:
        if not failed:
            raise
        raise DseError(f"{e}\nshards that failed on every try:\n" + "\n".join(failed)) from e


def _ray_shard(network: Any, axes: Any, shard: str, cache_dir: Optional[str],
               options: Dict[str, Any]) -> int:
    """One Ray task of :func:`sweep_on_ray`: a shard into the cache; its number of configs."""
    return len(sweep(network, axes, shard=shard, jobs=1, cache_dir=cache_dir, **options))


def plan(axes: Optional[Mapping[str, AxisValues]] = None, *, base: ConfigLike = None) -> Dict[str, Any]:
    """The configs a sweep would evaluate and the combinations it skips (``vta dse
    --dry-run``), without measuring anything: ``{"combinations", "configs", "skipped"}``."""
    _native.require_full_build("vta.dse.plan")
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
