#!/usr/bin/env bash
# Benchmark (opt-in, not run by ./test.sh): design sweeps through a real one-node Slurm cluster
# (scripts/slurm-cluster.sh) against one machine, with a fresh result cache for every run.
#   1. the Slurm path's own overhead: a 4-task array of shards whose results are all cached,
#      per task the time from submission to its start and from its start to its end;
#   2. a 208-config cycle-model sweep (ResNet-18 on the xc7z010 over weight and accumulator
#      widths, bus and clock: every config's scratchpads overflow the part, so nothing is
#      synthesized), on one machine with -j 1 and -j 2, then as 1, 2 and 4 Slurm shards;
#   3. the guide's ResNet-18 sweep on the xc7z020 (6 configs, each synthesized by yosys), as 1, 2
#      and 4 Slurm shards (VTA_BENCH_XC7Z020=0 skips it: about half an hour here).
# Every Slurm task runs `--jobs 1`; the cluster has this machine's cores, so on 2 cores two
# tasks run at once and 4 shards contend for them. Every sharded results.csv must equal the
# reference run's byte for byte. Run it as root with nothing else running.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
slurm_tag=bench-slurm-sweep

source scripts/slurm-cluster.sh

cargo build -q --release --bin vta
vta=${CARGO_TARGET_DIR:-$root/target}/release/vta

now() { date +%s.%N; }
secs() { printf '%.1f' "$(echo "$2 - $1" | bc)"; }

# Runs `vta dse ARGS --slurm N --wait` in $work/NAME with a fresh cache; prints its wall time.
slurm_sweep() {
    local name=$1 n=$2
    shift 2
    rm -rf "$work/cache" && mkdir -p "$work/$name" && cd "$work/$name"
    local t0 t1
    t0=$(now)
    VTA_CACHE_DIR=$work/cache "$vta" dse "$@" --jobs 1 -o out --slurm "$n" --wait >report.txt 2>&1
    t1=$(now)
    secs "$t0" "$t1"
}

# Runs `vta dse ARGS` on this machine in $work/NAME with a fresh cache; prints its wall time.
local_sweep() {
    local name=$1
    shift
    rm -rf "$work/cache" && mkdir -p "$work/$name" && cd "$work/$name"
    local t0 t1
    t0=$(now)
    VTA_CACHE_DIR=$work/cache "$vta" dse "$@" -o out >report.txt 2>&1
    t1=$(now)
    secs "$t0" "$t1"
}

same() { cmp -s "$work/$1/out/results.csv" "$work/$2/out/results.csv" || {
    echo "$slurm_tag: $1's results.csv differs from $2's" >&2
    exit 1
}; }

echo "$slurm_tag: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"

# 1. Overhead: a cached sweep as 4 tasks, each stamping its start and end.
small=(--net digits --part xc7z010 --bus 64,128 --clock 100,150)
rm -rf "$work/cache" && mkdir -p "$work/overhead" && cd "$work/overhead"
VTA_CACHE_DIR=$work/cache "$vta" dse "${small[@]}" -o warm >/dev/null 2>&1
submit=$(now)
VTA_CACHE_DIR=$work/cache sbatch --parsable --wait --array=0-3 -o /dev/null \
    --wrap "date +%s.%N >start-\$SLURM_ARRAY_TASK_ID; $vta dse ${small[*]} --jobs 1 -o out; date +%s.%N >end-\$SLURM_ARRAY_TASK_ID" \
    >/dev/null
for i in 0 1 2 3; do
    echo "$slurm_tag: overhead, cached task $i: submit to start $(secs "$submit" "$(cat start-$i)") s, start to result $(secs "$(cat start-$i)" "$(cat end-$i)") s"
done

# 2. 208 configs, cycle model only.
wide=(--net resnet18 --part xc7z010 --wgt-width 4,8 --acc-width 16,32 --bus 64,128,256,512
    --clock 50,60,70,80,90,100,110,120,130,140,150,160,170)
echo "$slurm_tag: 208-config cycle-model sweep, one machine -j 1: $(local_sweep wide-j1 "${wide[@]}" --jobs 1) s"
echo "$slurm_tag: 208-config cycle-model sweep, one machine -j 2: $(local_sweep wide-j2 "${wide[@]}" --jobs 2) s"
same wide-j2 wide-j1
for n in 1 2 4; do
    t=$(slurm_sweep "wide-slurm$n" "$n" "${wide[@]}")
    same "wide-slurm$n" wide-j1
    echo "$slurm_tag: 208-config cycle-model sweep, $n Slurm shard(s) + merge: $t s (results.csv identical)"
done

# 3. The guide's xc7z020 sweep, yosys for every config that may fit.
if [ "${VTA_BENCH_XC7Z020:-1}" != 0 ]; then
    z020=(--net resnet18 --part xc7z020 --block-in 8,16,32 --block-out 8,16 --inp-depth 2048
        --acc-depth 2048 --wgt-depth 512 --bus 64)
    for n in 1 2 4; do
        t=$(slurm_sweep "z020-slurm$n" "$n" "${z020[@]}")
        [ "$n" = 1 ] || same "z020-slurm$n" z020-slurm1
        echo "$slurm_tag: xc7z020 ResNet-18 sweep (6 configs, yosys), $n Slurm shard(s) + merge: $t s"
    done
fi
