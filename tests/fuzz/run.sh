#!/bin/sh
# Runs each fuzz target named on the command line (built by `make fuzz` in BUILD/fuzz/)
# for $FUZZ_SECONDS seconds (default 60), $FUZZ_JOBS at a time (default: one per core;
# each target is one process of one thread), from a working corpus in
# BUILD/corpus/TARGET (new inputs land there, never in the repository), the seeds in
# tests/fuzz/seeds/TARGET, the past crashes in tests/fuzz/crashes/TARGET and the
# target's dictionary tests/fuzz/TARGET.dict when there is one. Prints one line per
# target (executions, corpus size) and exits non-zero if any target crashed, leaked,
# timed out or ran out of memory; the input that did it is in BUILD/crashes/ (copy it
# into tests/fuzz/crashes/TARGET/ with the fix, so that `make test` replays it).
#   usage: FUZZ_SECONDS=N [FUZZ_JOBS=N] sh tests/fuzz/run.sh BUILD TARGET...
set -u
build=$1
shift
secs=${FUZZ_SECONDS:-60}
mkdir -p "$build/corpus" "$build/crashes" "$build/logs"
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
case $jobs in '' | *[!0-9]* | 0) echo "FUZZ_JOBS must be a positive number, not '$jobs'"; exit 2 ;; esac

# One target's run; its exit status in BUILD/logs/TARGET.rc.
run_one() {
    t=$1
    mkdir -p "$build/corpus/$t"
    set -- -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$build/crashes/$t-" "$build/corpus/$t" "tests/fuzz/seeds/$t"
    [ -f "tests/fuzz/$t.dict" ] && set -- -dict="tests/fuzz/$t.dict" "$@"
    [ -d "tests/fuzz/crashes/$t" ] && set -- "$@" "tests/fuzz/crashes/$t"
    "$build/fuzz/fuzz_$t" "$@" >"$build/logs/$t.log" 2>&1
    echo $? >"$build/logs/$t.rc"
}

# The line for a finished target, and its log's end if it failed.
report() {
    t=$1
    log="$build/logs/$t.log"
    rc=$(cat "$build/logs/$t.rc" 2>/dev/null || echo "?")
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    units=$(ls "$build/corpus/$t" | wc -l)
    echo "fuzz $t: ${execs:-?} executions in $secs s, $units inputs in $build/corpus/$t, exit $rc"
    if [ "$rc" != 0 ]; then
        bad="$bad $t"
        tail -n 60 "$log"
    fi
}

bad=""
count=$#
batch=""
n=0
for t in "$@"; do
    rm -f "$build/logs/$t.rc"
    run_one "$t" &
    batch="$batch $t"
    n=$((n + 1))
    if [ "$n" -ge "$jobs" ]; then
        wait
        for b in $batch; do report "$b"; done
        batch=""
        n=0
    fi
done
wait
for b in $batch; do report "$b"; done
if [ -n "$bad" ]; then
    echo "fuzz: failed:$bad (inputs in $build/crashes/, logs in $build/logs/)"
    exit 1
fi
echo "fuzz: no crash in $count targets"
