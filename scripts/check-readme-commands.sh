#!/usr/bin/env bash
# Runs every command that README.md shows in its "Quick start" and its user paths ("Three things
# to do with it"): each line of a ```sh block there, from the first `## Quick start` heading to
# the next `## ` heading after the user paths (`## The guide`). `vta ...` runs the release build
# of this checkout (target/release/vta, or $CARGO_TARGET_DIR's; `cargo build` first), in a
# fresh temporary directory in which `compiler/` and `examples/` are links to this checkout's,
# so that the README's relative paths and output files work without touching the checkout
# (`cargo ...` lines run in the checkout itself).
#
# How the README marks commands (a comment after the command, `# ...`):
#   `# slow...`   takes minutes (synthesis, place and route): skipped unless VTA_README_SLOW=1;
#   `# needs...`  needs what a test machine has not (a board, Vivado): always skipped, listed.
# `./test.sh` is never run from here (it is what runs this script).
#
# Usage: scripts/check-readme-commands.sh [--list]   (--list prints the commands and what would
# happen to each, and runs nothing). Exit status 1 when a command fails; each failure's output
# is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
readme="$repo/README.md"

list_only=0
[ "${1:-}" = "--list" ] && list_only=1

# The command lines, one per line, in order.
commands=$(awk '
    /^## Quick start/ { on = 1 }
    on && /^## The guide/ { on = 0 }
    on && /^```sh/ { code = 1; next }
    on && code && /^```/ { code = 0; next }
    on && code && NF > 0 && $1 !~ /^#/ { print }
' "$readme")
if [ -z "$commands" ]; then
    echo "check-readme-commands: no commands found in README.md's Quick start and user paths" >&2
    exit 1
fi

target_dir=${CARGO_TARGET_DIR:-$repo/target}
vta="$target_dir/release/vta"
if [ "$list_only" = 0 ]; then
    cargo build --release --bin vta    # nothing to do when it is up to date
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ln -s "$repo/compiler" "$work/compiler"
ln -s "$repo/examples" "$work/examples"

failed=()
ran=0
skipped=0
while IFS= read -r line; do
    cmd=${line%%  #*}                      # the command, without a trailing "  # comment"
    cmd=$(printf '%s' "$cmd" | sed 's/[[:space:]]*$//')
    comment=""
    [ "$cmd" != "$line" ] && comment=$(printf '%s' "${line#*  #}" | sed 's/^[[:space:]]*//')
    skip=""
    case "$cmd" in
        ./test.sh*) skip="the script that runs this one" ;;
    esac
    case "$comment" in
        needs*) skip="$comment" ;;
        slow*) [ "${VTA_README_SLOW:-0}" = 1 ] || skip="$comment (VTA_README_SLOW=1 runs it)" ;;
    esac
    if [ -n "$skip" ]; then
        echo "skip  $cmd    ($skip)"
        skipped=$((skipped + 1))
        continue
    fi
    case "$cmd" in
        "vta "*) run="\"$vta\" ${cmd#vta }" ;;
        "cargo "*) run="cd \"$repo\" && $cmd" ;;   # cargo commands run in the checkout
        *) echo "check-readme-commands: do not know how to run: $cmd" >&2; failed+=("$cmd"); continue ;;
    esac
    if [ "$list_only" = 1 ]; then
        echo "run   $cmd"
        continue
    fi
    start=$(date +%s)
    if (cd "$work" && eval "$run") >"$work/.out" 2>&1 </dev/null; then
        echo "ok    $cmd    ($(( $(date +%s) - start )) s)"
        ran=$((ran + 1))
    else
        status=$?
        echo "FAIL  $cmd    (exit $status)"
        sed 's/^/      | /' "$work/.out" | tail -40
        failed+=("$cmd")
    fi
done <<<"$commands"

[ "$list_only" = 1 ] && exit 0
echo "check-readme-commands: $ran command(s) ran, $skipped skipped, ${#failed[@]} failed"
if [ ${#failed[@]} -gt 0 ]; then
    printf '  failed: %s\n' "${failed[@]}"
    exit 1
fi
