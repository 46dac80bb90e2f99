#!/usr/bin/env bash
# Benchmark (opt-in, not run by ./test.sh): the scheduling policies of the pool executor in
# device time on the guide's networks, the figures of docs/src/running/parallel.md and the
# README. Writes the networks with scripts/branchy-networks.py (GoogLeNet, SqueezeNet 1.1, the
# inception test network, the YOLO-style detector) and `vta zoo resnet18`, all at 64x64,
# compiles each with --split-branches, and runs `vta bench schedule --time device` with one
# and with two accelerators (and 2 CPU workers), launch cycles from the cycle model, CPU steps
# timed on this host (the fastest of 3 serial runs). Run it with nothing else running.
#   scripts/bench-schedule.sh [OUT_DIR]      (default target/bench-schedule)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/bench-schedule}
mkdir -p "$out"
cargo build -q --release --bin vta
vta=${CARGO_TARGET_DIR:-$PWD/target}/release/vta

python3 scripts/branchy-networks.py "$out/nets" >/dev/null
"$vta" zoo resnet18 --size 64 -o "$out/nets/resnet18.onnx" >/dev/null
python3 - "$out/nets" <<'EOF'
import sys, numpy as np
d = sys.argv[1]
x = np.random.default_rng(1).normal(0.0, 1.0, (8, 3, 64, 64)).astype(np.float32)
np.save(f"{d}/resnet18_calib.npy", x)
np.save(f"{d}/resnet18_x.npy", x[:1])
EOF

echo "bench-schedule: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(date -u +%FT%TZ)"
for net in googlenet squeezenet resnet18 inception_test detector; do
    "$vta" compile "$out/nets/$net.onnx" --split-branches --calibrate "$out/nets/${net}_calib.npy" \
        -o "$out/$net.vtab" >"$out/$net.compile.txt"
    grep "task graph" "$out/$net.compile.txt" | sed "s/^/$net: /"
    for devices in fsim fsim,fsim; do
        echo "== $net, --devices $devices --cpu-threads 2"
        "$vta" bench schedule "$out/$net.vtab" -i "$out/nets/${net}_x.npy" --time device \
            --devices "$devices" --cpu-threads 2
    done
done
