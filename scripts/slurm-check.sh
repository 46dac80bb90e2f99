#!/usr/bin/env bash
# A sharded `vta dse` on a real one-node Slurm cluster: starts munged, slurmctld and slurmd
# (Debian's packages, as root, no systemd) with a generated slurm.conf on loopback in a
# temporary directory, and checks that
#   1. a 4-task array (`sbatch --array=0-3`, each task's shard from SLURM_ARRAY_TASK_ID) plus a
#      merge job depending on it (`afterok`) gives the single-machine sweep's results.csv,
#      byte for byte;
#   2. with one task failing, the merge names its configs and the command that reruns that
#      shard, and rerunning it completes the sweep;
#   3. `vta dse --slurm 4 --wait` submits both jobs itself and gives the same results;
#   4. the differential campaign (`vta check diff`) as a 4-task array with a mismatch planted in
#      one unit: exactly the shard holding it fails, its reproducer is in the shared out dir,
#      and replaying the reproducer reproduces the mismatch.
# The sweep (1-3): the digits CNN on the xc7z010 over bus and clock, cycle model only (every config's
# scratchpads overflow that part's block RAM, so nothing is synthesized: seconds, not minutes).
# Everything is torn down on exit. Used by ./test.sh (VTA_SLURM=0 skips it there).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
slurm_tag=slurm-check

source scripts/slurm-cluster.sh

cargo build -q --bin vta
vta=${CARGO_TARGET_DIR:-$root/target}/debug/vta

sweep=(dse --net digits --part xc7z010 --bus 64,128 --clock 100,150 --jobs 1 -o out)
export VTA_CACHE_DIR=$work/cache

# The single machine's results.
mkdir -p "$work/one" && (cd "$work/one" && VTA_CACHE_DIR=$work/one-cache "$vta" "${sweep[@]}" >/dev/null 2>&1)

# 1. Four array tasks and the merge.
mkdir -p "$work/array" && cd "$work/array"
t0=$(date +%s.%N)
job=$(sbatch --parsable --array=0-3 -o "$work/array/shard-%a.log" --wrap "$vta ${sweep[*]}")
sbatch --parsable --dependency="afterok:$job" --kill-on-invalid-dep=yes --wait \
    -o "$work/array/merge.log" --wrap "$vta ${sweep[*]} --merge 4" >/dev/null
t1=$(date +%s.%N)
cmp "$work/array/out/results.csv" "$work/one/out/results.csv"
echo "slurm-check: 4 shards + merge on Slurm: results.csv identical to one machine's ($(echo "$t1 - $t0" | bc) s end to end)"

# 2. Task 2 fails (it does not run its shard); the merge names it; rerunning it completes.
rm -rf "$work/cache" && mkdir -p "$work/partial" && cd "$work/partial"
job=$(sbatch --parsable --array=0-3 -o "$work/partial/shard-%a.log" \
    --wrap "if [ \"\$SLURM_ARRAY_TASK_ID\" = 2 ]; then exit 3; fi; $vta ${sweep[*]}")
sbatch --parsable --dependency="afterany:$job" --wait -o "$work/partial/merge.log" \
    --wrap "$vta ${sweep[*]} --merge 4" >/dev/null && {
    echo "slurm-check: the merge of a sweep with a failed shard succeeded" >&2
    exit 1
}
grep -q "the merge is incomplete" "$work/partial/merge.log"
rerun=$(grep -o "(shard 2/4): .*" "$work/partial/merge.log" | head -n 1 | sed 's/^(shard 2\/4): vta //')
[ -n "$rerun" ] || { echo "slurm-check: the merge did not name shard 2/4" >&2; exit 1; }
"$vta" $rerun >/dev/null 2>&1
"$vta" "${sweep[@]}" --merge 4 >/dev/null 2>&1
cmp "$work/partial/out/results.csv" "$work/one/out/results.csv"
echo "slurm-check: a failed shard is named by the merge with its rerun command; rerun, the sweep completes identically"

# 3. `vta dse --slurm 4 --wait`: the array, the merge and the wait in one command.
rm -rf "$work/cache" && mkdir -p "$work/submit" && cd "$work/submit"
"$vta" "${sweep[@]}" --slurm 4 --max-running 2 --wait >"$work/submit/report.txt" 2>&1
grep -q "submitted the sweep as Slurm job" "$work/submit/report.txt"
cmp "$work/submit/out/results.csv" "$work/one/out/results.csv"
echo "slurm-check: vta dse --slurm 4 --wait: submitted, merged, results identical to one machine's"

# 4. The differential campaign on the default preset (its Verilator model is compiled into vta,
#    so no task builds one) as a 4-task array: 8 units, 2 per shard, a mismatch planted in unit
#    5 (shard 2). Each task leaves its exit status beside its log.
mkdir -p "$work/diff" && cd "$work/diff"
campaign=(check diff --presets default --programs 8 --seed 5 --jobs 1 --plant-mismatch 5
    --out "$work/diff/repro")
t0=$(date +%s.%N)
job=$(sbatch --parsable --array=0-3 -o "$work/diff/shard-%a.log" \
    --wrap "$vta ${campaign[*]}; echo \$? >$work/diff/status-\$SLURM_ARRAY_TASK_ID")
sbatch --parsable --dependency="afterany:$job" --wait -o /dev/null --wrap true >/dev/null
t1=$(date +%s.%N)
for i in 0 1 2 3; do
    want=0
    [ "$i" = 2 ] && want=1
    got=$(cat "$work/diff/status-$i" 2>/dev/null || echo none)
    if [ "$got" != "$want" ]; then
        echo "slurm-check: diff shard $i/4 exited $got, expected $want; its log:" >&2
        cat "$work/diff/shard-$i.log" >&2
        exit 1
    fi
done
grep -q "unit 5 (preset default" "$work/diff/shard-2.log"
[ "$(ls "$work/diff/repro")" = unit-5.json ] || {
    echo "slurm-check: expected exactly repro/unit-5.json, found: $(ls "$work/diff/repro")" >&2
    exit 1
}
if "$vta" check diff --replay "$work/diff/repro/unit-5.json" >"$work/diff/replay.txt" 2>&1; then
    echo "slurm-check: the replay of the planted mismatch passed" >&2
    exit 1
fi
grep -q "mismatch reproduced (as recorded)" "$work/diff/replay.txt"
echo "slurm-check: vta check diff as 4 array tasks: only shard 2/4 (unit 5, planted) failed, its reproducer replays the mismatch ($(echo "$t1 - $t0" | bc) s end to end)"
