#!/bin/sh
# Iteration time of the offloading policies against `none` on the CPU device, with the
# copy engine throttled to an emulated PCIe link, for vgg-cifar and alexnet-64 (on
# synthetic data of their shapes).
#   sh bench/offload_cpu.sh [THREADS] [STEPS] [GBPS...]
# Prints a Markdown table: median step time (ms) per policy and link, and the ratio to
# `none`. Every run uses the same algorithms (im2col-chunk pinned in every convolution),
# so the runs differ only in their copies.
set -eu
threads=${1:-2}
steps=${2:-12}
shift 2 2>/dev/null || shift $#
links=${*:-12 50}
reps=${REPS:-3}
bin=${VDNN_BIN:-build/vdnn}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

synthetic() {
    awk 'BEGIN{skip=0}
         /^\[data\]/{print "[data]\nset = synthetic\ntrain_size = 100000\ntest_size = 64\nclasses = 10"; skip=1; next}
         /^\[convolutional\]/{print; print "algo = im2col-chunk"; skip=0; next}
         /^\[/{skip=0}
         !skip{print}' "$1" > "$2"
}

# median step time (ms) of a run: drop the first 3 steps (warm-up)
run() {
    "$bin" train --no-save "$@" --steps "$steps" --threads "$threads" --quiet --log "$tmp/log.json"
    grep '"step_time_ms"' "$tmp/log.json" | tail -n $((steps - 3)) | sed -E 's/.*"step_time_ms": ([0-9.]+).*/\1/' |
        sort -n | awk '{a[NR]=$1} END{printf "%.1f", (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'
}

med() { sort -n | awk '{a[NR]=$1} END{printf "%.1f", (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

echo "Machine: $(nproc) cores, $(uname -m); $(date -u +%Y-%m-%d); threads $threads; command: sh bench/offload_cpu.sh $threads $steps $links"
echo "Each cell: the median over $reps interleaved runs of each run's median step time (first 3 steps dropped)."
echo
echo "| net | link GB/s | none ms | conv ms | all ms | conv / none | all / none |"
echo "|---|---|---|---|---|---|---|"
for net in vgg-cifar alexnet-64; do
    synthetic "configs/$net.cfg" "$tmp/$net.cfg"
    for gbps in $links; do
        : > "$tmp/none" ; : > "$tmp/conv" ; : > "$tmp/all"
        for rep in $(seq "$reps"); do
            for policy in none conv all; do
                run "$tmp/$net.cfg" --policy "$policy" --link-gbps "$gbps" >> "$tmp/$policy"
                echo >> "$tmp/$policy"
            done
        done
        none=$(med < "$tmp/none"); conv=$(med < "$tmp/conv"); all=$(med < "$tmp/all")
        echo "| $net | $gbps | $none | $conv | $all | $(awk -v a="$conv" -v b="$none" 'BEGIN{printf "%.3f", a/b}') | $(awk -v a="$all" -v b="$none" 'BEGIN{printf "%.3f", a/b}') |"
    done
done
