#!/usr/bin/env bash
# Runs every fuzz target of fuzz/ (or the ones named after SECONDS) for SECONDS each (default
# 60) with cargo-fuzz on the nightly toolchain, installing cargo-fuzz when it is missing. Each
# run starts from the committed seeds (fuzz/seeds/TARGET) plus what earlier runs kept
# (fuzz/corpus/TARGET). An allocation over 2 GiB (RSS or a single malloc) or an input taking
# over 10 s counts as a failure, like a crash; libFuzzer then leaves the input in
# fuzz/artifacts/TARGET. Prints the executions per target; exits non-zero when any failed.
#
#   scripts/fuzz.sh 600            # every target, 10 minutes each
#   scripts/fuzz.sh 60 onnx model  # two targets, a minute each
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

seconds=${1:-60}
[ $# -gt 0 ] && shift
rss_limit_mb=2048
timeout_s=10

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz.sh: cargo-fuzz needs a nightly toolchain: rustup toolchain install nightly" >&2
    exit 2
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked
fi

if [ $# -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo +nightly fuzz list)
fi
cargo +nightly fuzz build >&2

mkdir -p logs
failed=0
printf '%-10s %8s %14s %10s  %s\n' target seconds execs execs/s result
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    log="logs/$t.log"
    status=ok
    cargo +nightly fuzz run "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$seconds" -rss_limit_mb="$rss_limit_mb" \
        -malloc_limit_mb="$rss_limit_mb" -timeout="$timeout_s" -print_final_stats=1 \
        >"$log" 2>&1 || status="FAILED (see fuzz/$log and fuzz/artifacts/$t)"
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    [ "$status" = ok ] || failed=1
    printf '%-10s %8s %14s %10s  %s\n' "$t" "$seconds" "${execs:-?}" "${rate:-?}" "$status"
done
exit "$failed"
