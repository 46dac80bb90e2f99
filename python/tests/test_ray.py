"""vta.dse.sweep_on_ray on a real two-node Ray cluster on this machine (ray.cluster_utils):
the sharded sweep equals one machine's, also when a node dies in the middle of its task.
Opt-in: runs where ``ray`` is installed (``VTA_RAY=1 scripts/python-test.sh`` installs it)."""

import threading
import time

import pytest

import vta

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

# ResNet-18 at 64x64 over 12 configs: each shard takes seconds, long enough to kill a node
# while its task runs; cycle model only, the xc7z010 (nothing fits, so nothing synthesizes).
NETWORK = "resnet18"
AXES = {"wgt_width": [4, 8], "bus": [64, 128, 256], "clock": [100, 200]}
OPTIONS = {"part": "xc7z010", "size": 64}


@pytest.fixture
def cluster():
    c = Cluster()
    c.add_node(num_cpus=1)  # the head
    worker = c.add_node(num_cpus=1)
    ray.init(address=c.address)
    c.wait_for_nodes()
    yield c, worker
    ray.shutdown()
    c.shutdown()


@pytest.fixture
def one_machine(tmp_path):
    out = tmp_path / "one"
    vta.dse.sweep(NETWORK, AXES, cache_dir=tmp_path / "one-cache", output_dir=out, **OPTIONS)
    return (out / "results.csv").read_bytes()


def test_sweep_on_ray_equals_one_machine(cluster, one_machine, tmp_path):
    out = tmp_path / "ray"
    result = vta.dse.sweep_on_ray(NETWORK, AXES, shards=4, cache_dir=tmp_path / "cache",
                                  output_dir=out, **OPTIONS)
    assert len(result) == 12
    assert (out / "results.csv").read_bytes() == one_machine


def test_a_node_killed_mid_task_is_retried(cluster, one_machine, tmp_path):
    c, worker = cluster
    cache = tmp_path / "cache"

    killed = []

    def kill_mid_task():
        # Both shards hold their node's one CPU while they run; once a first result is in the
        # cache they are under way, and the worker's still holds its CPU: kill its node then.
        deadline = time.time() + 120
        while time.time() < deadline:
            running = ray.available_resources().get("CPU", 0) == 0
            if running and any(p.is_file() for p in cache.rglob("*")):
                c.remove_node(worker)
                killed.append(True)
                return
            time.sleep(0.02)

    killer = threading.Thread(target=kill_mid_task)
    killer.start()
    out = tmp_path / "ray"
    vta.dse.sweep_on_ray(NETWORK, AXES, shards=2, retries=2, cache_dir=cache, output_dir=out,
                         **OPTIONS)
    killer.join()
    assert killed, "the worker node was never seen running its shard"
    assert len([n for n in ray.nodes() if n["Alive"]]) == 1
    assert (out / "results.csv").read_bytes() == one_machine


def test_sweep_on_ray_refuses_options_it_sets(cluster):
    with pytest.raises(vta.DseError, match="sets jobs itself"):
        vta.dse.sweep_on_ray(NETWORK, AXES, jobs=2, **OPTIONS)

