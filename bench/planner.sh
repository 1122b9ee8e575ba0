#!/bin/sh
# The planner on the CPU device with an emulated link: budget sweeps (CSV + PNG) of
# none, conv, all, dyn (branch and bound) and vdnn (the paper's ladder) for vgg-cifar
# and alexnet-64 (synthetic data of their shapes), every point measured with real
# iterations, and a summary of
#  - dyn at half of none's peak against none with all the memory it wants,
#  - dyn against vDNN's ladder at the least budget `all` fits in,
#  - the simulator's predicted time against the measured one,
#  - planning time (search + verification) against an iteration.
#   sh bench/planner.sh [THREADS] [LINK_GBPS] [ITERS]        (NETS="vgg-cifar" for one net)
# Writes bench/planner/<net>/sweep.csv and sweep.png, prints Markdown.
set -eu
threads=${1:-1}
link=${2:-12}
iters=${3:-5}
bin=${VDNN_BIN:-build/vdnn}
cache=${VDNN_CACHE:-$(mktemp -d)}
export VDNN_CACHE="$cache"   # `--algo perf` reads the same profiles
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/common.sh"

echo "Machine: $(nproc) cores, $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "Date: $(date -u +%Y-%m-%d); command: sh bench/planner.sh $threads $link $iters"
echo
for net in ${NETS:-vgg-cifar alexnet-64}; do
    cfg=$tmp/$net.cfg
    synthetic configs/$net.cfg "$cfg"
    out=bench/planner/$net
    mkdir -p "$out"
    common="--link-gbps $link --threads $threads --profile-cache $cache"
    # the ends of the range, simulated (the peaks are exact): none's and all's least
    "$bin" sweep "$cfg" --budgets 64G --policies none --simulate $common --out "$tmp/none" >/dev/null
    none_peak=$(awk -F, '$2=="none"{print $6}' "$tmp/none/sweep.csv")
    "$bin" sweep "$cfg" --budgets auto:2 --policies all,all-mem --simulate $common --out "$tmp/all" >/dev/null
    least=$(awk -F, 'NR==2{print $1}' "$tmp/all/sweep.csv")
    half=$((none_peak / 2 / 256 * 256))
    budgets=$(python3 -c "
lo, hi = sorted(($least, $none_peak))
pts = sorted(set([lo, hi, $half] + [(lo + (hi - lo) * k // 4) // 256 * 256 for k in range(1, 4)]))
print(','.join(str(p) for p in pts))")
    "$bin" sweep "$cfg" --budgets "$budgets" --policies none,conv,all,dyn,vdnn --iters "$iters" $common \
        --out "$out" > "$out/sweep.log"
    # dyn as `train` runs it (micro-batches allowed) at half of none's peak, against none
    "$bin" train --no-save "$cfg" --policy dyn --budget "$half" --steps 12 $common --log "$tmp/dyn.log" > "$out/train-dyn.log"
    "$bin" train --no-save "$cfg" --policy none --steps 12 --link-gbps "$link" --threads "$threads" --profile-cache "$cache" \
        --log "$tmp/none.log" --quiet
    dyn_ms=$(median_step "$tmp/dyn.log")
    none_ms=$(median_step "$tmp/none.log")
    python3 bench/planner_summary.py "$net" "$out/sweep.csv" "$none_peak" "$half" "$least" "$dyn_ms" "$none_ms"
    echo
done
