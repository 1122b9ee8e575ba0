#!/bin/sh
# Runs each Check suite binary given as an argument, prints its output and wall time,
# and one closing line:
# "tests: N passed, N failed, N skipped". Exits non-zero if any check failed.
# A suite prints "SKIPPED: ..." for each check it could not run (no GPU); those are
# counted as skipped, never as passed.
# Idle OpenMP threads that spin steal the cores from the suites running beside them.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
# The suites test the CPU device unless a check asks for a GPU by name (tests/test_cuda.c):
# `--device auto` would otherwise take the GPU on a machine that has one.
export VDNN_DEVICE="${VDNN_DEVICE:-cpu}"
# Measured profiles (nets/planner.h) go to a folder of this run, not the user's cache.
cache=$(mktemp -d "${TMPDIR:-/tmp}/vdnn-test-cache.XXXXXX")
export VDNN_CACHE="$cache"
trap 'rm -rf "$cache"' EXIT
passed=0; failed=0; skipped=0; bad=""
for t in "$@"; do
    t0=$(date +%s.%N)
    out=$("$t" 2>&1); rc=$?
    printf '%s\n' "$out"
    echo "$t: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b - a}') s"
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+%: Checks: ' | tail -n 1)
    s=$(printf '%s\n' "$out" | grep -c '^SKIPPED:')
    if [ -z "$line" ]; then
        failed=$((failed + 1)); bad="$bad $t(crashed:rc=$rc)"; continue
    fi
    n=$(printf '%s' "$line" | sed -E 's/.*Checks: ([0-9]+).*/\1/')
    f=$(printf '%s' "$line" | sed -E 's/.*Failures: ([0-9]+).*/\1/')
    e=$(printf '%s' "$line" | sed -E 's/.*Errors: ([0-9]+).*/\1/')
    passed=$((passed + n - f - e - s)); failed=$((failed + f + e)); skipped=$((skipped + s))
    [ "$rc" -ne 0 ] && [ $((f + e)) -eq 0 ] && { failed=$((failed + 1)); bad="$bad $t(rc=$rc)"; }
    [ $((f + e)) -gt 0 ] && bad="$bad $t"
done
[ -n "$bad" ] && echo "failing suites:$bad"
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
