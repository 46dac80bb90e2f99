"""vta.dse and vta.hw. Resource estimates come from the fixture cache (conftest.py), so no
yosys run of minutes happens here."""

import json
import shutil

import pytest

import vta
from conftest import SWEEP, sweep_configs


def test_verilog(tmp_path):
    g = vta.hw.verilog(vta.Config("small"))
    assert "module vta_top" in g["verilog"]
    assert g["config_string"] == vta.Config("small").config_string
    assert json.loads(g["regs_json"]) and json.loads(g["ports_json"])
    assert len(g["rtl_hash"]) == 16 and g["modules"] > 1
    g2 = vta.hw.verilog("small", out_dir=tmp_path / "rtl")
    assert (tmp_path / "rtl" / "vta_top.v").read_text() == g["verilog"]
    assert set(g2["files"]) == {"verilog", "regs_json", "ports_json"}
    with pytest.raises(vta.ConfigError):
        vta.hw.verilog("no-such-preset")


def test_report_refuses_an_unknown_part():
    with pytest.raises(vta.HardwareError, match="unknown part 'xc9'"):
        vta.hw.report("small", part="xc9")


@pytest.mark.skipif(not shutil.which("yosys"), reason="needs yosys")
@pytest.mark.slow
def test_report_synthesizes_with_yosys():
    r = vta.hw.report("small", part="xc7z020")
    assert r["config_string"] == vta.Config("small").config_string
    assert r["luts"] > 0 and r["rtl_hash"] == vta.hw.verilog("small")["rtl_hash"]


def test_bitstream_writes_a_zynq_project(tmp_path, estimate_cache, monkeypatch):
    monkeypatch.setenv("VTA_CACHE_DIR", str(estimate_cache))
    out = tmp_path / "proj"
    text = vta.hw.bitstream("pynq-z2", out, config=vta.Config("default"))
    assert (out / "build.tcl").exists(), text
    with pytest.raises(vta.HardwareError, match="unknown board 'zedboard'"):
        vta.hw.bitstream("zedboard", tmp_path / "x")
    with pytest.raises(vta.HardwareError, match="unexpected argument"):
        vta.hw.bitstream("pynq-z2", tmp_path / "y", extra_args=["--no-such-option"])


def test_dse_plan():
    p = vta.dse.plan(dict(SWEEP, bus="64..128"))
    assert p["combinations"] == 6 and len(p["configs"]) == 6 and not p["skipped"]
    skipping = vta.dse.plan({"block": [8, 16]})
    assert len(skipping["configs"]) == 1 and "LOG_ACC_BUFF_SIZE" in skipping["skipped"][0]["reason"]
    assert all(vta.Config.from_json(json.dumps(c["config"])).config_string == c["config_string"]
               for c in p["configs"])


def test_dse_sweep_three_configs(estimate_cache, tmp_path):
    r = vta.dse.sweep(
        "digits",
        SWEEP,
        base=vta.Config("default"),
        cache_dir=estimate_cache,
        jobs=2,
        output_dir=tmp_path / "out",
    )
    assert len(r.rows) == 3 and len(r) == 3
    names = {row["config_string"] for row in r.rows}
    assert names == {c.config_string for c in sweep_configs()}
    for row in r.rows:
        assert row["cycles"] > 0 and row["resource_source"]
        # Synthesized (here: the fixture's figures), or refused for its memories alone.
        assert (row["resources"] and row["resources"]["luts"] > 0) or row["problems"]
    assert sum(row["fits"] for row in r.rows) == 2
    assert r.pareto and all(row["pareto"] for row in r.pareto)
    assert r.best is None or r.best["fits"]
    assert r.doc["network"] == "digits" and "best" in r.doc
    assert "digits" in r.summary or r.summary
    assert (tmp_path / "out" / "results.csv").exists() and (tmp_path / "out" / "pareto.svg").exists()
    assert "SweepResult(3 configs" in repr(r)
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError):
            r.to_pandas()
    else:
        assert len(r.to_pandas()) == 3


def test_dse_bad_arguments(estimate_cache):
    with pytest.raises(vta.DseError, match="unknown sweep axis 'blok'"):
        vta.dse.sweep("digits", {"blok": [8]}, cache_dir=estimate_cache)
    with pytest.raises(vta.DseError, match="cycles='fast'"):
        vta.dse.sweep("digits", {"block": [16]}, cycles="fast", cache_dir=estimate_cache)
    with pytest.raises(vta.DseError):
        vta.dse.sweep("digits", {"block": [16]}, part="xc9", cache_dir=estimate_cache)
    with pytest.raises(vta.DseError):
        vta.dse.sweep("digits", {"block": "x..y"}, cache_dir=estimate_cache)


def test_shards_and_their_merge_equal_one_sweep(tmp_path):
    axes = {"bus": [64, 128], "clock": [100, 150]}
    one = vta.dse.sweep("digits", axes, part="xc7z010", cache_dir=tmp_path / "one",
                        output_dir=tmp_path / "one-out")
    for i in range(3):
        shard = vta.dse.sweep("digits", axes, part="xc7z010", cache_dir=tmp_path / "c",
                              shard=f"{i}/3")
        assert len(shard) == len(range(i, 4, 3))
    merged = vta.dse.sweep("digits", axes, part="xc7z010", cache_dir=tmp_path / "c",
                           merge=3, output_dir=tmp_path / "merged")
    assert [r["config_string"] for r in merged.rows] == [r["config_string"] for r in one.rows]
    assert (tmp_path / "merged" / "results.csv").read_bytes() == \
        (tmp_path / "one-out" / "results.csv").read_bytes()


def test_shard_and_merge_refuse_bad_requests(tmp_path):
    with pytest.raises(vta.DseError, match="shard '3/2'"):
        vta.dse.sweep("digits", {"bus": [64]}, part="xc7z010", cache_dir=tmp_path, shard="3/2")
    with pytest.raises(vta.DseError, match="drop output_dir"):
        vta.dse.sweep("digits", {"bus": [64]}, part="xc7z010", cache_dir=tmp_path, shard="0/2",
                      output_dir=tmp_path / "out")
    with pytest.raises(vta.DseError, match="not both"):
        vta.dse.sweep("digits", {"bus": [64]}, part="xc7z010", cache_dir=tmp_path, shard="0/2",
                      merge=2)


def test_merge_names_a_missing_shard(tmp_path):
    vta.dse.sweep("digits", {"bus": [64, 128], "clock": [100, 150]}, part="xc7z010",
                  cache_dir=tmp_path, shard="0/2")
    with pytest.raises(vta.DseError, match=r"\(shard 1/2\)"):
        vta.dse.sweep("digits", {"bus": [64, 128], "clock": [100, 150]}, part="xc7z010",
                      cache_dir=tmp_path, merge=2)


def test_sweep_on_ray_without_ray_says_how_to_get_it():
    try:
        import ray  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("Ray is installed here (tests/test_ray.py covers sweep_on_ray)")
    with pytest.raises(vta.DseError, match="pip install ray"):
        vta.dse.sweep_on_ray("digits", {"bus": [64]})
