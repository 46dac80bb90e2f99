"""The board wheel's smoke test, run by the board's (or qemu's) Python with no pytest: the
package installed from the board wheel loads a compiled model and runs it on the board
device and on the functional simulator, with the outputs expected, and the workstation-only
functions and bad options raise the typed exceptions. tests/board.rs runs it under qemu
against the emulated board (its directory as --root), after scripts/cross-wheel.sh.

Usage: python board-wheel-smoke.py --root DIR --model M.vtab --input X.npy --expect Y.npy
"""

import argparse
import sys

import numpy as np

import vta


def raises(exc, words, f, *args, **kwargs):
    """Calls f and checks it raises `exc` with every word of `words` in its message."""
    try:
        f(*args, **kwargs)
    except exc as e:
        msg = str(e)
        missing = [w for w in words if w not in msg]
        assert not missing, f"{exc.__name__} without {missing}: {msg}"
        return msg
    raise AssertionError(f"{f.__name__} did not raise {exc.__name__}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True, help="the emulated board's directory")
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--expect", required=True, help="the model's outputs, computed on the host")
    a = ap.parse_args()

    assert vta.BUILD == "board", vta.BUILD
    m = vta.load(a.model)
    x = np.load(a.input)
    want = np.load(a.expect)
    board = vta.BoardOptions(root=a.root)

    (y,) = m.run(x, backend="board", board=board)
    assert y.dtype == want.dtype and y.shape == want.shape, (y.dtype, y.shape, want.shape)
    assert np.array_equal(y, want), "board outputs differ from the host's"
    print(f"board: {len(x)} samples bit-exact, argmax {np.argmax(y, axis=-1).tolist()}")

    (f,) = m.run({m.inputs[0]["name"]: x}, backend="fsim")
    assert np.array_equal(f, want), "fsim outputs differ from the host's"
    print("fsim: bit-exact")

    outs, report = m.run_with_report(x[:1], backend="board", board=board, check=True)
    assert np.array_equal(outs[0], want[:1])
    launches = report["run"]["launches"]
    assert launches and all(l["counters"] for l in launches), report["run"]
    assert report["check"]["bit_exact"], report["check"]
    print(f"board with check=True: bit-exact, {len(launches)} launch(es)")

    # The defaults are vta-board's: /dev/uio0 (not there on this host).
    raises(vta.BackendError, ["/dev/uio0"], m.run, x, backend="board")
    raises(vta.BackendError, ["udmabuf7"], m.run, x, backend="board",
           board=vta.BoardOptions(root=a.root, udmabuf="udmabuf7"))
    raises(vta.BackendError, ["uio and base"], vta.BoardOptions, uio=1, base="0x43C00000")
    raises(vta.BackendError, ["backend=\"board\""], m.run, x, backend="fsim", board=board)
    raises(vta.BackendError, ["board build", "fsim"], m.run, x, backend="rtl")
    raises(vta.InputError, ["float32", "int64"], m.run, x.astype(np.int64), backend="board",
           board=board)
    raises(vta.ModelFileError, [], vta.load, b"not a model")
    for what, f in [
        ("vta.compile", lambda: vta.compile(b"")),
        ("vta.dse.sweep", lambda: vta.dse.sweep()),
        ("vta.hw.verilog", lambda: vta.hw.verilog()),
        ("vta.zoo.digits", lambda: vta.zoo.digits()),
        ("CompiledModel.run_pool", lambda: m.run_pool(x)),
    ]:
        raises(vta.VtaError, [what, "not in the board build", "full wheel"], f)
    print("errors: typed, with their messages")
    print("board wheel smoke test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
