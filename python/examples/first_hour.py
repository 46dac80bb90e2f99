"""A first hour with the VTA toolkit, from Python (run it as a script, or cell by cell in a
notebook: every `# %%` starts a cell).

1. compile a trained network (the digits CNN `vta demo` uses) for VTA's default config;
2. run it on the functional simulator and on the cycle-accurate RTL simulator, from numpy;
3. read the per-layer report: host times, device cycles, hardware counters, bytes moved;
   then run a batch on two accelerators and two CPU workers at once (the task-graph pool)
   and write its timeline, which https://ui.perfetto.dev or chrome://tracing opens;
4. sweep three accelerator configs with vta.dse and plot the Pareto front (with matplotlib
   when it is installed).

The sweep's resource estimates come from yosys (minutes per config, cached in
$VTA_CACHE_DIR or ~/.cache/vta); the test suite runs this script on a cache of made-up
estimates.
"""

# %%
import argparse
import os
import time

import numpy as np

import vta

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--out", default="first-hour", help="directory for the outputs")
args = parser.parse_args()
os.makedirs(args.out, exist_ok=True)

# %% 1. Compile a trained network.
# The digits CNN ships inside the package: an fp32 ONNX model, its calibration samples and
# 100 held-out test digits with labels. Any ONNX file, bytes or onnx.ModelProto works the same.
digits = vta.zoo.digits()
cfg = vta.Config("default")
print(f"config {cfg.config_string}: {2 ** cfg.log_block_in}x{2 ** cfg.log_block_out} GEMM core, "
      f"{cfg.axi_data_width}-bit bus")

t = time.perf_counter()
model = vta.compile(digits["onnx"], config=cfg, calibration=[digits["calibration"]], name="digits CNN")
total, accel, cpu = model.steps
print(f"compiled {model.source} in {time.perf_counter() - t:.2f} s: {total} steps, "
      f"{accel} on the accelerator, {cpu} on the CPU")
for row in model.support:
    print(f"  {row['node']:<24} {row['op']:<20} {row['status']}")
model.save(os.path.join(args.out, "digits.vtab"))

# %% 2. Run it on the functional simulator (bit-exact, no timing) ...
x = digits["test"]                      # float32[100, 1, 8, 8]: 100 samples stacked
t = time.perf_counter()
(scores,) = model.run({"image": x}, backend="fsim")
accuracy = float((scores.argmax(1) == digits["labels"]).mean())
print(f"fsim: {len(x)} digits in {time.perf_counter() - t:.2f} s, accuracy {accuracy:.0%}")

# ... and on the RTL simulator (the accelerator's Verilog in Verilator: cycle counts). The
# default config's model is built into the package; other configs are verilated on first use.
t = time.perf_counter()
outs, report = model.run_with_report({"image": x[:4]}, backend="rtl", check=True)
print(f"rtl: 4 digits in {time.perf_counter() - t:.2f} s, bit-exact against the integer "
      f"reference: {report['check']['bit_exact']}")
assert np.array_equal(outs[0], scores[:4]), "fsim and rtl must agree bit for bit"

# %% 3. The per-layer report.
print("per layer (summed over the 4 samples):")
print(report["table"])
run = report["run"]
for launch in run["launches"]:
    cycles = launch["extras"].get("cycles", 0)   # the RTL's cycle counter; fsim has none
    print(f"launch {launch['launch']}: steps {launch['steps']}, {cycles} cycles, "
          f"{launch['counters']['macs']} MACs, "
          f"{launch['dram_bytes']} DRAM bytes, device {launch['device_ms']:.2f} ms")
print(f"host->device {run['host_to_device_bytes']} B, device->host {run['device_to_host_bytes']} B "
      f"per inference")
slowest = max(run["steps"], key=lambda s: s["host_ms"])
print(f"slowest step on the host: {slowest['name']} ({slowest['kind']}, {slowest['host_ms']:.2f} ms)")

# %% 3b. Several devices at once, and the timeline.
# The compiled model is a task graph of accelerator launches and CPU steps; a pool of two
# functional simulators and two CPU worker threads runs 16 digits with 4 in flight, under the
# policy `auto` measures as fastest, bit-identical to the serial run.
trace = os.path.join(args.out, "timeline.json")
(pooled,), pool = model.run_pool({"image": x[:16]}, schedule="auto", devices="fsim,fsim",
                                 cpu_threads=2, in_flight=4, trace=trace)
assert np.array_equal(pooled, scores[:16]), "the pool must agree with the serial run bit for bit"
print(f"pool: 16 digits under {pool['policy']} (auto's choice) at "
      f"{pool['throughput_per_s']:.0f} samples/s; per worker:")
for w in pool["workers"]:
    print(f"  {w['name']:<10} {w['tasks']:>3} tasks, busy {w['utilization']:.0%}")
print(f"timeline of every launch and CPU step: {trace} (open it in https://ui.perfetto.dev)")

# %% 4. Sweep three configs and plot the Pareto front.
# Blocks of 8, 16 and 32 lanes, with the default config's scratchpad rows (INP and ACC 2048,
# WGT 1024 tiles): the buffers' bytes follow the block.
axes = {"block": [8, 16, 32], "inp_depth": [2048], "wgt_depth": [1024], "acc_depth": [2048]}
sweep = vta.dse.sweep("digits", axes, base=cfg, output_dir=os.path.join(args.out, "dse"))
print(sweep.summary)
front = sweep.pareto
print("Pareto front: " + ", ".join(f"{r['config_string']} ({r['latency_ms']:.3f} ms, "
                                   f"{r['resources']['luts']} LUTs)" for r in front))
try:
    import matplotlib

    matplotlib.use(os.environ.get("MPLBACKEND", "Agg"))
    import matplotlib.pyplot as plt
except ImportError:
    print("matplotlib is not installed: no plot (the sweep wrote dse/pareto.svg anyway)")
else:
    rows = [r for r in sweep.rows if r["latency_ms"] is not None and r["resources"]]
    fig, ax = plt.subplots()
    ax.scatter([r["resources"]["luts"] for r in rows], [r["latency_ms"] for r in rows], label="configs")
    ax.plot([r["resources"]["luts"] for r in front], [r["latency_ms"] for r in front], "r-o", label="Pareto front")
    for r in rows:
        ax.annotate(r["config_string"].split("_")[0], (r["resources"]["luts"], r["latency_ms"]))
    ax.set_xlabel("LUTs")
    ax.set_ylabel("latency per inference (ms)")
    ax.legend()
    fig.savefig(os.path.join(args.out, "pareto.png"))
    print(f"plotted the front to {os.path.join(args.out, 'pareto.png')}")
