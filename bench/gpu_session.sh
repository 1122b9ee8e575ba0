#!/bin/sh
# Builds vdnn on a lent GPU machine and runs its GPU checks, in one command, so that a
# session's short GPU time goes to running, not to setting up. Those machines have
# CUDA, cuDNN and cuBLAS (PyTorch's wheels) but no package registry, so the C libraries
# come from Debian packages fetched beforehand:
#   here, once:  sh tools/sysroot.sh fetch .deps        (.deps is git-ignored)
#   there:       sh bench/gpu_session.sh OUTDIR          (with .deps carried along)
# It writes OUTDIR/session.txt (the machine, the toolchain, where CUDA was found),
# OUTDIR/build.log and OUTDIR/tests.log (the GPU suite and the device suite), and
# prints the tests' closing line. Then run bench/gpu.sh and bench/gpu_sanitizer.sh.
set -u
out=${1:?usage: sh bench/gpu_session.sh OUTDIR}
mkdir -p "$out"
jobs=$(nproc 2>/dev/null || echo 4)
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
    command -v nvcc && nvcc --version | tail -2
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version())' 2>&1
    for f in nvcc inc libs; do echo "find_cuda $f: $(sh tools/find_cuda.sh $f 2>&1)"; done
    command -v make || echo "no make: using the sysroot's"
} >"$out/session.txt" 2>&1
sysroot=""
if [ -d .deps ] && ! printf '#include <cblas.h>\n#include <check.h>\n#include <png.h>\n' | cc -E - >/dev/null 2>&1; then
    sysroot=/tmp/vdnn-sysroot
    [ -d "$sysroot/usr" ] || sh tools/sysroot.sh unpack .deps "$sysroot" >>"$out/session.txt" 2>&1
fi
mk=make
command -v make >/dev/null 2>&1 || mk="$sysroot/usr/bin/make"
echo "sysroot: ${sysroot:-none needed}" >>"$out/session.txt"
if ! $mk -j"$jobs" CUDA=1 ${sysroot:+SYSROOT=$sysroot} tests >"$out/build.log" 2>&1; then
    tail -30 "$out/build.log"
    echo "gpu_session: the build failed (OUTDIR/build.log)"
    exit 1
fi
./build/vdnn devices >>"$out/session.txt" 2>&1
VDNN_DEVICE=cpu sh tests/run.sh build/tests/test_cuda build/tests/test_device >"$out/tests.log" 2>&1
rc=$?
grep -E '^(SKIPPED|tests:)|Failures: [1-9]|Errors: [1-9]|:[0-9]+:[EF]:' "$out/tests.log" | tail -40
exit $rc
