#!/bin/sh
# Long fuzzing campaign, for bench/fuzz.md: every target of tests/fuzz/ (this tree's
# harness) run for FUZZ_SECONDS (default 600) each, one after another, against the
# library of this working tree or of git revision REV (the readers before a fix). Runs
# in libFuzzer's fork mode with crashes, leaks, timeouts and out-of-memory ignored, so
# that a campaign counts every crash it finds instead of stopping at the first; prints
# one line per target: executions, crashes/timeouts/OOMs, and the distinct sanitizer
# reports (kind and top frame of our own code).
#   usage: [FUZZ_SECONDS=600] [FUZZ_TARGETS="idx png"] [FUZZ_CC=clang-14] sh bench/fuzz.sh [REV]
# Needs clang with libFuzzer (sh tools/setup.sh). Work folder: $TMPDIR or /tmp.
set -eu
rev=${1:-}
secs=${FUZZ_SECONDS:-600}
cc=${FUZZ_CC:-$(command -v clang-14 || command -v clang)}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/vdnn-fuzz-bench.XXXXXX")
src="$root"
if [ -n "$rev" ]; then
    src="$work/src"
    mkdir -p "$src"
    git -C "$root" archive "$rev" | tar -x -C "$src"
    mv "$src/tests/fuzz" "$src/tests/fuzz.rev" 2>/dev/null || true
    cp -r "$root/tests/fuzz" "$src/tests/fuzz"
fi
san="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
build="$work/build"
# the library as `make fuzz` builds it; REV's Makefile need not know about fuzzing
make -s -C "$src" BUILD="$build" CC="$cc" CUDA=0 MPI=0 OPT="-O1 -gline-tables-only" SAN="$san" \
    EXTRA_CFLAGS="-fsanitize=fuzzer-no-link -Wno-unknown-warning-option" "$build/libvdnn.a" >&2
multiarch=$($cc -print-multiarch)
blas="/usr/lib/$multiarch/openblas-openmp"
"$cc" -std=c11 -D_GNU_SOURCE -O1 -g $san -fsanitize=fuzzer-no-link -fopenmp -I"$src" \
    -c "$src/tests/fuzz/common.c" -o "$build/common.o"
echo "fuzz campaign: ${rev:-working tree} ($(git -C "$root" rev-parse --short "${rev:-HEAD}")), $secs s per target, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $cc"
targets=${FUZZ_TARGETS:-$(cd "$root/tests/fuzz" && ls fuzz_*.c | sed 's/^fuzz_//; s/\.c$//')}
link_target() {   # link_target HARNESS_FILE: builds $build/fuzz_$t
    "$cc" -std=c11 -D_GNU_SOURCE -O1 -g $san -fsanitize=fuzzer -fopenmp -I"$src" "$1" \
        "$build/common.o" "$build/libvdnn.a" -L"$blas" -Wl,-rpath,"$blas" -lopenblas -lpng -lz -lpthread -lm \
        -o "$build/fuzz_$t"
}
for t in $targets; do
    # a harness of this tree that does not build against REV's API: REV's own, if it has one
    note=""
    if ! link_target "$src/tests/fuzz/fuzz_$t.c" 2>"$work/$t.build"; then
        if [ -f "$src/tests/fuzz.rev/fuzz_$t.c" ] && link_target "$src/tests/fuzz.rev/fuzz_$t.c" 2>>"$work/$t.build"; then
            note=" (with $rev's own harness: this tree's does not build against it)"
        else
            cat "$work/$t.build" >&2
            exit 1
        fi
    fi
    mkdir -p "$work/corpus/$t" "$work/crashes/$t"
    set -- -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 -max_total_time="$secs" -timeout=10 \
        -rss_limit_mb=2048 -artifact_prefix="$work/crashes/$t/" "$work/corpus/$t" "$root/tests/fuzz/seeds/$t"
    [ -f "$root/tests/fuzz/$t.dict" ] && set -- -dict="$root/tests/fuzz/$t.dict" "$@"
    log="$work/$t.log"
    (cd "$work" && "$build/fuzz_$t" "$@") >"$log" 2>&1 || true
    # fork mode's status lines: "#RUNS: cov: ... oom/timeout/crash: O/T/C time: ..."
    last=$(grep 'oom/timeout/crash' "$log" | tail -n 1)
    runs=$(printf '%s\n' "$last" | sed -n 's/^#\([0-9]*\):.*/\1/p')
    otc=$(printf '%s\n' "$last" | sed -n 's/.*oom\/timeout\/crash: \([0-9\/]*\).*/\1/p')
    # each crash input run again alone: its report's kind and first frame in vdnn's code
    kinds=$(for c in "$work/crashes/$t"/*; do
        [ -f "$c" ] || continue
        (cd "$work" && timeout 60 "$build/fuzz_$t" -rss_limit_mb=2048 -timeout=10 "$c" 2>&1) |
            awk -v src="$src/" 'kind == "" && /SUMMARY: [A-Za-z]+: |ERROR: libFuzzer: / {
                    kind = $0; sub(/.*(SUMMARY: [A-Za-z]+|ERROR: libFuzzer): /, "", kind); sub(/ .*/, "", kind) }
                frame == "" && / in [A-Za-z_0-9]+ / && index($0, src) && !index($0, "tests/fuzz/") {
                    frame = $0; sub(/.* in /, "", frame); sub(src, "", frame) }
                END { print (kind == "" ? "no-report" : kind) " in " (frame == "" ? "?" : frame) }'
    done | sort | uniq -c | sort -rn | awk '{n = $1; $1 = ""; printf "%s%dx%s", sep, n, $0; sep = "; "}')
    echo "target $t$note: ${runs:-?} executions, oom/timeout/crash ${otc:-?}, $(ls "$work/crashes/$t" | wc -l) inputs kept${kinds:+: $kinds}"
done
echo "work folder (logs, corpora, crash inputs): $work"
