#!/bin/sh
# Runs each Check suite binary given as an argument, prints its output and wall time,
# and one closing line:
# "tests: N passed, N failed, N skipped". Exits non-zero if any check failed.
# A suite prints "SKIPPED: ..." for each check it could not run (no GPU); those are
# counted as skipped, never as passed.
# VDNN_SKIP_SUITES: suite names (test_pooling ...) not run this time, each with one
# "SKIPPED:" line that gives VDNN_SKIP_WHY (make tsan leaves out the single-threaded ones).
# VDNN_SUITE_TIMEOUT: seconds after which a suite is stopped and counted as failed; set
# where checks do not fork (CK_FORK=no, the sanitizer passes) and so have no timeout of
# their own.
# VDNN_TEST_JOBS: how many suites run at once (default 1). The sanitizer passes run one
# per core, where no check times anything; make test runs them one at a time, since
# some of its checks compare timings that a suite beside them would bend. Each suite's
# output is printed whole once it has ended.
# Idle OpenMP threads that spin steal the cores from the suites running beside them.
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
# The suites test the CPU device unless a check asks for a GPU by name (tests/test_cuda.c):
# `--device auto` would otherwise take the GPU on a machine that has one.
export VDNN_DEVICE="${VDNN_DEVICE:-cpu}"
# Measured profiles (nets/planner/planner.h) and the checkpoints train writes by default
# (VDNN_RUNS) go to folders of each suite's own in this run's folder, not to the user's
# cache or the source tree; each suite's outputs wait there until printed.
work=$(mktemp -d "${TMPDIR:-/tmp}/vdnn-test-run.XXXXXX")
trap 'rm -rf "$work"' EXIT
jobs=${VDNN_TEST_JOBS:-1}
case $jobs in '' | *[!0-9]* | 0) echo "VDNN_TEST_JOBS must be a positive number, not '$jobs'"; exit 2 ;; esac

# Suite number $1, binary $2: its output, exit status and wall time into $work/$1.*.
run_one() {
    t0=$(date +%s.%N)
    export VDNN_CACHE="$work/cache.$1" VDNN_RUNS="$work/runs.$1"
    mkdir -p "$VDNN_CACHE"
    if [ -n "${VDNN_SUITE_TIMEOUT:-}" ]; then
        timeout -k 10 "$VDNN_SUITE_TIMEOUT" "$2" >"$work/$1.out" 2>&1; rc=$?
        [ "$rc" -eq 124 ] && echo "$2: stopped after $VDNN_SUITE_TIMEOUT s (VDNN_SUITE_TIMEOUT)" >>"$work/$1.out"
    else
        "$2" >"$work/$1.out" 2>&1; rc=$?
    fi
    awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b - a}' >"$work/$1.time"
    echo "$rc" >"$work/$1.rc.part" && mv "$work/$1.rc.part" "$work/$1.rc"
}

passed=0; failed=0; skipped=0; bad=""

# Prints suite number $1 ($2) and adds its checks to the counts.
report() {
    out=$(cat "$work/$1.out"); rc=$(cat "$work/$1.rc")
    printf '%s\n' "$out"
    echo "$2: $(cat "$work/$1.time") s"
    line=$(printf '%s\n' "$out" | grep -E '^[0-9]+%: Checks: ' | tail -n 1)
    s=$(printf '%s\n' "$out" | grep -c '^SKIPPED:')
    if [ -z "$line" ]; then
        failed=$((failed + 1)); bad="$bad $2(crashed:rc=$rc)"; return
    fi
    n=$(printf '%s' "$line" | sed -E 's/.*Checks: ([0-9]+).*/\1/')
    f=$(printf '%s' "$line" | sed -E 's/.*Failures: ([0-9]+).*/\1/')
    e=$(printf '%s' "$line" | sed -E 's/.*Errors: ([0-9]+).*/\1/')
    passed=$((passed + n - f - e - s)); failed=$((failed + f + e)); skipped=$((skipped + s))
    [ "$rc" -ne 0 ] && [ $((f + e)) -eq 0 ] && { failed=$((failed + 1)); bad="$bad $2(rc=$rc)"; }
    [ $((f + e)) -gt 0 ] && bad="$bad $2"
}

# Waits for any running suite to end (its .rc file appears last), reports it and takes
# it off the list: a long suite does not hold up the slots beside it.
reap() {
    while :; do
        for k in $running; do
            [ -f "$work/$k.rc" ] || continue
            report "$k" "$(cat "$work/$k.name")"
            running=$(printf ' %s ' $running | sed "s/ $k / /"); count=$((count - 1))
            return
        done
        sleep 0.2
    done
}

# The suites left out first, then every other one, at most $jobs at a time, each
# reported whole as it ends (in the order given when they run one at a time).
for t in "$@"; do
    case " ${VDNN_SKIP_SUITES:-} " in
    *" ${t##*/} "*)
        echo "SKIPPED: $t: ${VDNN_SKIP_WHY:-left out of this run}"
        skipped=$((skipped + 1)) ;;
    esac
done
i=0; running=""; count=0
for t in "$@"; do
    i=$((i + 1))
    case " ${VDNN_SKIP_SUITES:-} " in *" ${t##*/} "*) continue ;; esac
    echo "$t" >"$work/$i.name"
    if [ "$jobs" -eq 1 ]; then
        # in the foreground: nothing else runs beside a suite that times itself
        run_one "$i" "$t"
        report "$i" "$t"
        continue
    fi
    run_one "$i" "$t" &
    running="$running $i"; count=$((count + 1))
    [ "$count" -ge "$jobs" ] && reap
done
while [ "$count" -gt 0 ]; do reap; done
wait
[ -n "$bad" ] && echo "failing suites:$bad"
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
