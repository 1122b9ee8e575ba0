#!/bin/sh
# Whether the profile picks the same convolution algorithms from one measurement to the
# next: for each net, RUNS profiles from an empty cache (`vdnn profile` at a budget with
# room for everything, so the plan is the fastest algorithm of every pass), and how many
# of its convolutions got another (forward, backward-data, backward-filter) choice than
# in the first run. Several binaries run side by side, in turns, on the same cores.
#   sh bench/profile_choice.sh [BIN...]        (default build/vdnn); results in bench/profile_choice.md
# Environment: NETS (default: the shipped nets below), RUNS (default 3), THREADS
# (default 2; the binaries are pinned to cores 0..THREADS-1 where taskset is there).
# Prints one Markdown table: net, binary, convolutions, changed choices per run after
# the first, seconds per profile (median).
set -eu
[ $# -gt 0 ] || set -- build/vdnn
nets=${NETS:-"lenet fmnist vgg-cifar alexnet-64 resnet20"}
runs=${RUNS:-3}
threads=${THREADS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pin() {
    if command -v taskset >/dev/null 2>&1; then taskset -c "0-$((threads - 1))" "$@"; else "$@"; fi
}
echo "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); threads $threads"
echo "Date: $(date -u '+%Y-%m-%d %H:%M UTC'); command: RUNS=$runs sh bench/profile_choice.sh $*"
echo
echo "| net | binary | convolutions | choices changed from run 1 | profile s (median) |"
echo "|---|---|---|---|---|"
for net in $nets; do
    r=1
    while [ "$r" -le "$runs" ]; do
        b=0
        for bin in "$@"; do
            b=$((b + 1))
            rm -rf "$tmp/cache"
            t0=$(date +%s.%N)
            pin "$bin" profile "configs/$net.cfg" --budget 64G --threads "$threads" --profile-cache "$tmp/cache" \
                > "$tmp/out" 2>&1
            t1=$(date +%s.%N)
            echo "$t0 $t1" | awk '{printf "%.2f\n", $2 - $1}' >> "$tmp/secs.$b"
            # the plan's rows: layer, then the fwd, bwd-data and bwd-filter algorithms
            awk '$3 == "convolutional" {print $2, $7, $8, $9}' "$tmp/out" > "$tmp/choice.$b.$r"
        done
        r=$((r + 1))
    done
    b=0
    for bin in "$@"; do
        b=$((b + 1))
        convs=$(wc -l < "$tmp/choice.$b.1")
        changed=""
        r=2
        while [ "$r" -le "$runs" ]; do
            changed="$changed $(diff "$tmp/choice.$b.1" "$tmp/choice.$b.$r" | grep -c '^<' || true)"
            r=$((r + 1))
        done
        secs=$(sort -n "$tmp/secs.$b" | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
        echo "| $net | $bin | $convs |$changed | $secs |"
        rm -f "$tmp/secs.$b"
    done
done
