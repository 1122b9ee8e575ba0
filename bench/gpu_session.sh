#!/bin/sh
# One stage of a GPU session in one command: build if needed, run the stage, pack what
# it wrote. The lent GPU machines may be new and bare at every command and give back at
# most 8 files of 16 MiB, so each stage stands alone and leaves two files:
#   sh bench/gpu_session.sh STAGE OUTDIR       (OUTDIR: $OUT on the device machine)
#     OUTDIR/STAGE.tar.gz   every file the stage wrote (logs, JSON lines, summaries)
#     OUTDIR/STAGE.txt      the summary: machine, toolchain, build, the stage's results
#     OUTDIR/vdnn           (stage test only) the binary it built: carried back as
#                           .deps/vdnn, later stages run it instead of building
# Stages (bench/gpu.md gives the device calls, their times and what to do when one fails):
#   test       the GPU suite (tests/test_cuda) and the device suite, cuDNN's log of
#              warnings and errors on
#   sanitize   bench/gpu_sanitizer.sh: memcheck, racecheck (the project's kernels),
#              synccheck
#   fp32       bench/gpu.sh info and compare in strict FP32: vdnn against PyTorch
#   tf32       the same with TF32 on both sides
#   policies   bench/gpu.sh policies: VGG-16 at batch 64 under none, conv, all and dyn,
#              the link, and a trace of two steps
#   big        bench/gpu.sh big: VGG-16 at batch 256 in 8 GiB (dyn) against none
#   layers     bench/gpu.sh layers: where the time goes in TF32, vdnn's traced layers
#              beside PyTorch's profiler, AlexNet at 128 and VGG-16 at 64
# The C libraries come from Debian packages carried in .deps (sh tools/sysroot.sh fetch
# .deps, here, once) when the machine lacks them. The build is for this GPU's generation
# only (nvidia-smi's compute capability), to save minutes; if the compiler stops on a
# warning (a newer gcc than the one this code is checked with), it builds again without
# -Werror and the summary says so. Environment: JOBS (default: all cores).
set -u
usage() {
    echo "usage: sh bench/gpu_session.sh test|sanitize|fp32|tf32|policies|big|layers OUTDIR" >&2
    exit 2
}
[ $# -eq 2 ] || usage
stage=$1
case $stage in test | sanitize | fp32 | tf32 | policies | big | layers) ;; *) usage ;; esac
mkdir -p "$2" || exit 1
out=$(cd "$2" && pwd)
started=$(date +%s)
work=${TMPDIR:-/tmp}/vdnn-gpu-$stage
rm -rf "$work"
mkdir -p "$work"
summary=$work/$stage.txt
jobs=${JOBS:-$(nproc 2> /dev/null || echo 4)}
say() { echo "$*" | tee -a "$summary"; }

# Leaves OUTDIR/STAGE.tar.gz and OUTDIR/STAGE.txt and exits with $1. A file too large
# for what comes back (a runaway log) keeps its first and last 2 MiB.
finish() {
    find "$work" -type f -size +8M | while read -r f; do
        { head -c 2097152 "$f"; printf '\n[... cut by gpu_session.sh ...]\n'; tail -c 2097152 "$f"; } > "$f.cut" &&
            mv "$f.cut" "$f"
    done
    cp "$summary" "$out/$stage.txt"
    tar czf "$out/$stage.tar.gz" -C "$work" .
    echo "gpu_session: $stage: exit $1; $out/$stage.tar.gz ($(du -k "$out/$stage.tar.gz" | cut -f1) KiB), $out/$stage.txt"
    exit "$1"
}

{
    echo "# vdnn GPU session, stage $stage"
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
    echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 | head -n 1)"
    echo "nvcc: $(nvcc --version 2> /dev/null | grep -i release || echo "not on PATH")"
    echo "cc: $(cc --version 2> /dev/null | head -n 1)"
    echo "python: $(python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1 | tail -n 1)"
    for f in nvcc inc libs nccl; do echo "find_cuda $f: $(sh tools/find_cuda.sh $f 2>&1)"; done
} > "$summary"

# ---- the build ----
sysroot=""
if ! printf '#include <cblas.h>\n#include <check.h>\n#include <png.h>\n#include <stdio.h>\n#include <jpeglib.h>\n#include <jansson.h>\n' | cc -E - > /dev/null 2>&1; then
    if [ -d .deps ]; then
        sysroot=${TMPDIR:-/tmp}/vdnn-sysroot
        [ -d "$sysroot/usr" ] || sh tools/sysroot.sh unpack .deps "$sysroot" >> "$summary" 2>&1
    else
        say "build: this machine lacks OpenBLAS, Check, libpng, libjpeg or Jansson and no .deps was carried (sh tools/sysroot.sh fetch .deps, then carry it)"
        finish 1
    fi
fi
mk=make
command -v make > /dev/null 2>&1 || mk=$sysroot/usr/bin/make
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2> /dev/null | head -n 1 | tr -d ' .')
arch=""
case $cap in [0-9][0-9] | [0-9][0-9][0-9]) arch="-gencode arch=compute_$cap,code=sm_$cap" ;; esac
target=build/vdnn
# the test stage builds only the suites it runs: fewer minutes, and no suite that needs
# a library the machine lacks (MPI, say) can stop it
[ "$stage" = test ] && target="build/vdnn build/tests/test_cuda build/tests/test_device"
# build [MAKE ARGS...]: make with this session's settings; its output in build.log
build() {
    [ -n "$arch" ] && set -- CUDA_ARCH="$arch" "$@"
    [ -n "$sysroot" ] && set -- SYSROOT="$sysroot" "$@"
    # not -march=native: the binary travels to the next machine (.deps/vdnn), whose
    # processor may be another
    $mk -j"$jobs" CUDA=1 OPT="-O3 -march=x86-64-v3" "$@" $target >> "$work/build.log" 2>&1
}
t0=$(date +%s)
# The stage `test` builds and hands back its vdnn (OUTDIR/vdnn); carried to later stages
# as .deps/vdnn, it spares each of them the build (its rpaths name this same sysroot path).
# (files that come back from a device call are read-only: the execute bit is set here)
if [ "$stage" != test ] && [ -f .deps/vdnn ] && chmod +x .deps/vdnn 2> /dev/null &&
    .deps/vdnn --version 2> /dev/null | grep -q 'backends.*cuda'; then
    mkdir -p build && cp .deps/vdnn build/vdnn
    say "build: none: the vdnn carried in .deps/vdnn"
elif ! say "build: $target, sysroot ${sysroot:-not needed}, CUDA_ARCH ${arch:-the Makefile's default}" || ! build; then
    grep -E 'error:|warning:' "$work/build.log" | head -n 20 | tee -a "$summary"
    say "build: failed with -Werror; building again without it (WERROR=): the warnings above are this compiler's"
    if ! build WERROR=; then
        tail -n 30 "$work/build.log" | tee -a "$summary"
        say "build: FAILED without -Werror too (build.log in the tarball)"
        finish 1
    fi
    say "build: built WITHOUT -Werror"
fi
say "build: done in $(($(date +%s) - t0)) s"
./build/vdnn devices >> "$summary" 2>&1

# ---- the stage ----
# A device command is killed at 10 minutes, and then nothing would be packed: the stage
# gets what is left of 9.5 minutes, so that there is time to pack (SESSION_S: another
# limit).
left=$((${SESSION_S:-570} - ($(date +%s) - started)))
[ "$left" -gt 5 ] || left=5
say "stage: $left s left for it"
rc=0
case $stage in
test)
    cp build/vdnn "$out/vdnn"
    # cuDNN 9's own log: warnings and errors, to a file of its own
    CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=$work/cudnn.log timeout "$left" \
        sh tests/run.sh build/tests/test_cuda build/tests/test_device > "$work/tests.log" 2>&1 || rc=$?
    grep -E '^(SKIPPED|tests:)|Failures: [1-9]|Errors: [1-9]|:[0-9]+:[EF]:|notice:' "$work/tests.log" | tail -n 60 |
        tee -a "$summary"
    [ -s "$work/cudnn.log" ] && say "cuDNN log: $(grep -c -i 'error' "$work/cudnn.log") lines with 'error' (cudnn.log)"
    ;;
sanitize)
    SAN_TIMEOUT=${SAN_TIMEOUT:-120} timeout "$left" sh bench/gpu_sanitizer.sh "$work" > "$work/sanitizer.out" 2>&1 ||
        rc=$?
    cat "$work/sanitizer.md" >> "$summary" 2> /dev/null || tail -n 20 "$work/sanitizer.out" | tee -a "$summary"
    ;;
fp32 | tf32)
    sh bench/gpu.sh info "$work" > "$work/stage.out" 2>&1
    MATH=$stage timeout "$left" sh bench/gpu.sh compare "$work" >> "$work/stage.out" 2>&1 || rc=$?
    ;;
policies | big | layers)
    timeout "$left" sh bench/gpu.sh "$stage" "$work" > "$work/stage.out" 2>&1 || rc=$?
    ;;
esac
[ -f "$work/summary.md" ] && cat "$work/summary.md" >> "$summary"
[ "$rc" -eq 124 ] && say "stage $stage: stopped at its time limit: what it finished is in the tarball"
say "stage $stage: exit $rc"
finish "$rc"
