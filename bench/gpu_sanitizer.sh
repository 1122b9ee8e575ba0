#!/bin/sh
# Short training runs of vdnn on the GPU under NVIDIA's compute-sanitizer, to catch what
# the Check suites cannot see: out-of-bounds and misaligned device accesses, device
# memory leaks (memcheck), shared-memory races in the project's kernels (racecheck) and
# barriers misused (synccheck).
#   sh bench/gpu_sanitizer.sh OUTDIR
# The net has one layer of every type and trains two steps on synthetic data, then
# evaluates, in a small budget; memcheck runs it under policy all (feature maps
# offloaded and prefetched on the memory stream) and swap (parameters streamed in and
# gradients out), racecheck and synccheck under all, each run stopped after SAN_TIMEOUT
# seconds (default 150: a tool slows the GPU down tens of times; the four take a few
# minutes). racecheck checks the project's own kernels only (every one is named vdnn_*,
# which tests/test_gpu_scripts.c enforces): cuDNN's and cuBLAS's kernels share memory in
# ways racecheck reports as hazards that are not ours to fix. Each tool's full
# output goes to OUTDIR/sanitizer-TOOL-POLICY.txt; the summary (OUTDIR/sanitizer.md, also
# printed) gives each run's exit status and the tool's own error count. Exits 1 when a
# run failed or a tool reported an error.
# Environment: VDNN_BIN (default build/vdnn, a CUDA build), SANITIZER (default
# compute-sanitizer on PATH, else /usr/local/cuda/bin/compute-sanitizer).
set -eu
[ $# -eq 1 ] || {
    echo "usage: sh bench/gpu_sanitizer.sh OUTDIR" >&2
    exit 2
}
out=$1
bin=${VDNN_BIN:-build/vdnn}
san=${SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
if [ ! -x "$san" ]; then
    echo "gpu_sanitizer: no compute-sanitizer at $san (it comes with the CUDA toolkit; set SANITIZER)" >&2
    exit 1
fi
mkdir -p "$out"
cfg=$out/sanitizer.cfg
cat > "$cfg" << 'EOF'
[net]
batch = 8
channels = 3
height = 16
width = 16

[train]
epochs = 1
learning_rate = 0.05
momentum = 0.9
weight_decay = 0.0005
seed = 1

[data]
set = synthetic
train_size = 16
test_size = 8
classes = 5

[convolutional]
filters = 8
size = 3
pad = 1
[batchnorm]
[relu]
[lrn]
size = 3
[maxpool]
size = 2
[convolutional]
filters = 8
size = 3
stride = 2
pad = 1
[leaky]
slope = 0.1
[avgpool]
size = 2
[tanh]
[dropout]
probability = 0.3
[connected]
output = 16
[sigmoid]
[connected]
output = 5
[softmax]
EOF

summary=$out/sanitizer.md
{
    echo "# compute-sanitizer on vdnn"
    echo
    gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2> /dev/null | head -n 1) || true
    version=$("$san" --version 2> /dev/null | grep -i version | head -n 1) || true
    echo "Date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); GPU (name, driver): ${gpu:-unknown}; ${version:-compute-sanitizer version unknown}"
    echo
    echo "| tool | policy | exit | the tool's summary | command |"
    echo "|---|---|---|---|---|"
} > "$summary"

bad=0
# sanitize TOOL POLICY [TOOL OPTIONS...]: one run, its output in a file of its own.
sanitize() {
    tool=$1 policy=$2
    shift 2
    log=$out/sanitizer-$tool-$policy.txt
    # --algo mem: no profiling run, which would time every cuDNN algorithm under the tool
    set -- "$san" --tool "$tool" "$@" "$bin" train --no-save "$cfg" --device cuda --budget 8M --policy "$policy" --algo mem --steps 2
    rc=0
    timeout "${SAN_TIMEOUT:-150}" "$@" > "$log" 2>&1 || rc=$?
    # memcheck, synccheck: "ERROR SUMMARY: N errors"; racecheck: "RACECHECK SUMMARY: N hazards displayed (N errors, N warnings)"
    said=$(grep -E "(ERROR|RACECHECK) SUMMARY" "$log" | tail -n 1 | sed 's/^=* *//')
    errors=$(printf '%s\n' "$said" | sed -nE 's/.*ERROR SUMMARY: ([0-9]+) error.*/\1/p; s/.*\(([0-9]+) error.*/\1/p')
    [ "$rc" -eq 0 ] && [ "${errors:-1}" -eq 0 ] || bad=1
    echo "| $tool | $policy | $rc | ${said:-no summary line (see the log)} | \`$*\` |" >> "$summary"
    echo "$tool, policy $policy: exit $rc; ${said:-no summary line}; full output in $log"
}

sanitize memcheck all --leak-check full
sanitize memcheck swap --leak-check full
sanitize racecheck all --kernel-name kns=vdnn_
sanitize synccheck all

echo >> "$summary"
echo "summary: $summary"
cat "$summary"
exit "$bad"
