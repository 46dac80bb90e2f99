"""The walkthrough examples/first_hour.py runs (as a smoke test), on the fixture cache."""

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "first_hour.py"


def test_first_hour_runs(estimate_cache, tmp_path):
    env = dict(os.environ, VTA_CACHE_DIR=str(estimate_cache), MPLBACKEND="Agg")
    r = subprocess.run([sys.executable, str(EXAMPLE), "--out", str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    for needle in ["compiled", "fsim", "rtl", "per layer", "pool: 16 digits", "Pareto"]:
        assert needle in out, (needle, out)
    assert "traceEvents" in (tmp_path / "timeline.json").read_text()
