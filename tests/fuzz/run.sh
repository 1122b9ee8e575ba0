#!/bin/sh
# Runs each fuzz target named on the command line (built by `make fuzz` in BUILD/fuzz/)
# for $FUZZ_SECONDS seconds (default 60), one after another, from a working corpus in
# BUILD/corpus/TARGET (new inputs land there, never in the repository), the seeds in
# tests/fuzz/seeds/TARGET, the past crashes in tests/fuzz/crashes/TARGET and the
# target's dictionary tests/fuzz/TARGET.dict when there is one. Prints one line per
# target (executions, corpus size) and exits non-zero if any target crashed, leaked,
# timed out or ran out of memory; the input that did it is in BUILD/crashes/ (copy it
# into tests/fuzz/crashes/TARGET/ with the fix, so that `make test` replays it).
#   usage: FUZZ_SECONDS=N sh tests/fuzz/run.sh BUILD TARGET...
set -u
build=$1
shift
secs=${FUZZ_SECONDS:-60}
mkdir -p "$build/corpus" "$build/crashes" "$build/logs"
bad=""
count=$#
for t in "$@"; do
    mkdir -p "$build/corpus/$t"
    set -- -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$build/crashes/$t-" "$build/corpus/$t" "tests/fuzz/seeds/$t"
    [ -f "tests/fuzz/$t.dict" ] && set -- -dict="tests/fuzz/$t.dict" "$@"
    [ -d "tests/fuzz/crashes/$t" ] && set -- "$@" "tests/fuzz/crashes/$t"
    log="$build/logs/$t.log"
    "$build/fuzz/fuzz_$t" "$@" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    units=$(ls "$build/corpus/$t" | wc -l)
    echo "fuzz $t: ${execs:-?} executions in $secs s, $units inputs in $build/corpus/$t, exit $rc"
    if [ "$rc" -ne 0 ]; then
        bad="$bad $t"
        tail -n 60 "$log"
    fi
done
if [ -n "$bad" ]; then
    echo "fuzz: failed:$bad (inputs in $build/crashes/, logs in $build/logs/)"
    exit 1
fi
echo "fuzz: no crash in $count targets"
