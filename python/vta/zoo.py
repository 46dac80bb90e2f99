"""Models that ship with the toolkit."""

from __future__ import annotations

from typing import Any, Dict

from . import _native

__all__ = ["digits"]


def digits() -> Dict[str, Any]:
    """The small trained CNN ``vta demo`` runs: scikit-learn's 8x8 handwritten digits (two
    convolutions with BatchNorm and ReLU, max pool, a residual add, global average pool, a
    dense layer and softmax; 98% on its held-out digits).

    Returns a dict with ``onnx`` (the float32 model's bytes; input ``image`` float32[1,1,8,8],
    output ``probs``, 10 scores), ``calibration`` (float32[32,1,8,8]), ``test``
    (float32[100,1,8,8] held-out digits), ``labels`` (int64[100]) and ``fp32_outputs`` (the
    float model's scores on ``test``, float32[100,10]).
    """
    _native.require_full_build("vta.zoo.digits")
    return _native.digits()
