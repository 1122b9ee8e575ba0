#!/bin/sh
# Training-step time of vdnn (CPU backend) against PyTorch (CPU), same nets, same shapes
# and batch sizes, run interleaved: for each net and thread count, ROUNDS rounds of one
# vdnn run then one PyTorch run (A, B, A, B, ...), children of this script, on the same
# cores (taskset) with the same thread count, so that whatever else the machine does
# falls on both alike.
#   sh bench/compare_cpu.sh [THREADS_LIST] [STEPS] [ROUNDS] [NETS]
#   e.g. sh bench/compare_cpu.sh "1 2" 20 3 "lenet fmnist vgg-cifar alexnet-64 resnet20"
# Each run prints the median of STEPS steps after 5 warm-up steps; the table gives, per
# framework, the median of its ROUNDS run medians and their spread (lowest-highest), and
# the ratio of the two medians. vdnn chooses its algorithms from a profile measured by
# its first round and cached (--profile-cache, as a user's runs do); its later rounds
# reuse it.
# Needs: python3-torch (Debian; PyTorch uses oneDNN for convolutions, OpenBLAS
# (libopenblas0-pthread) for the rest) and `make`.
set -eu
threads_list=${1:-"1 2"}
steps=${2:-20}
rounds=${3:-3}
nets=${4:-"lenet fmnist vgg-cifar alexnet-64 resnet20"}
bin=${VDNN_BIN:-build/vdnn}
py=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The nets train on synthetic data of the config's shape, so no data set is needed.
synthetic() {
    awk 'BEGIN{skip=0}
         /^\[data\]/{print "[data]\nset = synthetic\ntrain_size = 100000\ntest_size = 64\nclasses = 10"; skip=1; next}
         /^\[/{skip=0}
         !skip{print}' "$1" > "$2"
}

median() { sort -n | awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# pin CMD...: on cores 0..threads-1 when taskset is there.
pin() {
    if command -v taskset >/dev/null 2>&1; then taskset -c "0-$((threads - 1))" "$@"; else "$@"; fi
}

vdnn_ms() {
    pin "$bin" train --no-save "$1" --steps $((steps + 5)) --threads "$threads" --quiet \
        --profile-cache "$tmp/cache-$threads" --log "$tmp/log.json"
    grep '"step_time_ms"' "$tmp/log.json" | tail -n "$steps" | sed -E 's/.*"step_time_ms": ([0-9.]+).*/\1/' | median
}

torch_ms() { pin "$py" bench/torch_step.py "$1" --steps "$steps" --threads "$threads"; }

# summary FILE: "median (lowest-highest)" of the numbers in FILE.
summary() {
    m=$(median < "$1")
    sort -n "$1" | awk -v m="$m" 'NR==1{lo=$1} {hi=$1} END{printf "%.1f (%.1f-%.1f)", m, lo, hi}'
}

echo "| net | batch | threads | vdnn ms/step (spread) | PyTorch ms/step (spread) | vdnn / PyTorch |"
echo "|---|---|---|---|---|---|"
for threads in $threads_list; do
    # PyTorch's OpenMP pool and OpenBLAS get the same thread count as vdnn.
    export OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads"
    for net in $nets; do
        synthetic "configs/$net.cfg" "$tmp/$net.cfg"
        batch=$(awk -F= '/^batch/{gsub(/ /,"",$2); print $2; exit}' "$tmp/$net.cfg")
        : > "$tmp/v"
        : > "$tmp/t"
        r=0
        while [ "$r" -lt "$rounds" ]; do
            vdnn_ms "$tmp/$net.cfg" >> "$tmp/v"
            torch_ms "$tmp/$net.cfg" >> "$tmp/t"
            r=$((r + 1))
        done
        ratio=$(awk -v v="$(median < "$tmp/v")" -v t="$(median < "$tmp/t")" 'BEGIN{printf "%.2f", v / t}')
        echo "| $net | $batch | $threads | $(summary "$tmp/v") | $(summary "$tmp/t") | $ratio |"
        echo "raw $net threads=$threads vdnn: $(tr '\n' ' ' < "$tmp/v")PyTorch: $(tr '\n' ' ' < "$tmp/t")" >&2
    done
done
