#!/usr/bin/env bash
# Smoke-fuzz every target for a short while on the stable toolchain; exits non-zero when any
# target crashes (panics), times out or runs out of memory. For CI; see README.md.
#
#   bash fuzz/smoke.sh            # each target for 20 s, two at a time
#   SMOKE_SECONDS=60 bash fuzz/smoke.sh
#   SMOKE_TARGETS="brief_json hf_config" bash fuzz/smoke.sh
#
# Installs cargo-fuzz (idempotent). Needs a C++ compiler (g++) for libFuzzer's runtime.
# New inputs go to a temporary directory, so the committed seed corpora are left unchanged;
# a crashing input is kept under fuzz/target/smoke-artifacts/<target>/ and printed in hex.
set -euo pipefail

SECONDS_PER_TARGET=${SMOKE_SECONDS:-20}
JOBS=${SMOKE_JOBS:-2}
FUZZ_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
read -r -a TARGETS <<<"${SMOKE_TARGETS:-brief_json brief_toml hf_config plan_json plan_struct partial_json launcher_from runs_json calibration_json}"
start=$(date +%s)

if ! cargo fuzz --version 2>/dev/null | grep -q '^cargo-fuzz 0\.13\.'; then
    cargo install cargo-fuzz --locked --version '~0.13'
fi

cd "$FUZZ_DIR"
# -s none: no sanitizer, the one mode that builds on stable; -a: debug assertions and overflow
# checks, so an arithmetic overflow is a crash as in the test suite's debug builds.
cargo fuzz build -s none -a

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
artifacts="$FUZZ_DIR/target/smoke-artifacts"
rm -rf "$artifacts"

run() {
    local t=$1
    local dict=()
    [ -f "$FUZZ_DIR/dict/$t.dict" ] && dict=(-dict="$FUZZ_DIR/dict/$t.dict")
    mkdir -p "$work/$t" "$artifacts/$t"
    if cargo fuzz run -s none -a "$t" "$work/$t" "$FUZZ_DIR/corpus/$t" -- \
        "${dict[@]}" -max_total_time="$SECONDS_PER_TARGET" \
        -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts/$t/" >"$work/$t.log" 2>&1; then
        echo "ok    $t: $(grep -E '^stat::number_of_executed_units' "$work/$t.log" | awk '{print $2}') runs, $(grep -E '^stat::average_exec_per_sec' "$work/$t.log" | awk '{print $2}') exec/s"
    else
        echo "FAIL  $t"
        { grep -E -A1 'panicked at' "$work/$t.log" | head -n 2
          grep -E 'ERROR: libFuzzer|SUMMARY|Test unit written' "$work/$t.log"; } || tail -n 30 "$work/$t.log"
        for f in "$artifacts/$t"/*; do
            [ -f "$f" ] && { echo "input $f:"; od -An -tx1 -v "$f" | head -n 20; }
        done
        return 1
    fi
}

failed=0
pids=()
for t in "${TARGETS[@]}"; do
    run "$t" & pids+=($!)
    if [ "${#pids[@]}" -ge "$JOBS" ]; then
        wait "${pids[0]}" || failed=1
        pids=("${pids[@]:1}")
    fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done

echo "fuzz smoke: $(( $(date +%s) - start )) s in all"
exit "$failed"
