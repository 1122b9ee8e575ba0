#!/bin/sh
# Training-step time of vdnn (CPU backend) against PyTorch (CPU, OpenBLAS), same nets,
# same shapes and batch sizes, measured side by side in one run.
#   sh bench/compare_cpu.sh [THREADS] [STEPS]
# Prints a Markdown table: median step time (ms) of each and the ratio vdnn / PyTorch.
# Needs: python3-torch (Debian), run with OpenBLAS (libopenblas0-pthread), and `make`.
set -eu
threads=${1:-2}
steps=${2:-30}
bin=${VDNN_BIN:-build/vdnn}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# PyTorch's own OpenMP pool and OpenBLAS get the same thread count as vdnn.
export OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads"

# The nets train on synthetic data of the config's shape, so no data set is needed.
synthetic() {
    awk 'BEGIN{skip=0}
         /^\[data\]/{print "[data]\nset = synthetic\ntrain_size = 100000\ntest_size = 64\nclasses = 10"; skip=1; next}
         /^\[/{skip=0}
         !skip{print}' "$1" > "$2"
}

vdnn_ms() {
    "$bin" train --no-save "$1" --steps $((steps + 5)) --threads "$threads" --quiet --log "$tmp/log.json"
    tail -n "$steps" "$tmp/log.json" | sed -E 's/.*"step_time_ms": ([0-9.]+).*/\1/' | sort -n |
        awk '{a[NR]=$1} END{print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'
}

echo "| net | batch | vdnn ms/step | PyTorch ms/step | vdnn / PyTorch |"
echo "|---|---|---|---|---|"
for net in lenet fmnist vgg-cifar alexnet-64; do
    synthetic "configs/$net.cfg" "$tmp/$net.cfg"
    batch=$(awk -F= '/^batch/{gsub(/ /,"",$2); print $2; exit}' "$tmp/$net.cfg")
    v=$(vdnn_ms "$tmp/$net.cfg")
    t=$("${PYTHON:-/usr/bin/python3}" bench/torch_step.py "$tmp/$net.cfg" --steps "$steps" --threads "$threads")
    r=$(awk -v v="$v" -v t="$t" 'BEGIN{printf "%.2f", v / t}')
    echo "| $net | $batch | $v | $t | $r |"
done
