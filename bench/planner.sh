#!/bin/sh
# The planner on the CPU device with an emulated link: budget sweeps (CSV + PNG) of
# none, conv, all, dyn (branch and bound) and vdnn (the paper's ladder) for vgg-cifar
# and alexnet-64, every point measured with real iterations, and a summary of
#  - dyn at half of none's peak against none with all the memory it wants,
#  - dyn against vDNN's ladder at the least budget `all` fits in,
#  - the simulator's predicted time against the measured one,
#  - planning time (profile, search, verification) against an epoch.
#   sh bench/planner.sh [THREADS] [LINK_GBPS] [ITERS]
# Writes bench/planner/<net>/sweep.csv, sweep.png and prints Markdown.
set -eu
threads=${1:-2}
link=${2:-12}
iters=${3:-5}
bin=${VDNN_BIN:-build/vdnn}
cache=${VDNN_CACHE:-$(mktemp -d)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "Machine: $(nproc) cores, $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "Date: $(date -u +%Y-%m-%d); command: sh bench/planner.sh $threads $link $iters"
echo
for net in vgg-cifar alexnet-64; do
    cfg=configs/$net.cfg
    out=bench/planner/$net
    mkdir -p "$out"
    common="--link-gbps $link --threads $threads --profile-cache $cache"
    # the two ends of the range, simulated (exact peaks): none's peak and all's least
    "$bin" sweep "$cfg" --budgets 64G --policies none,all-mem --simulate $common --out "$tmp/$net" >/dev/null
    none_peak=$(awk -F, '$2=="none"{print $6}' "$tmp/$net/sweep.csv")
    least=$(awk -F, '$2=="all-mem"{print $6}' "$tmp/$net/sweep.csv")
    half=$((none_peak / 2))
    budgets=$(python3 -c "
lo, hi = $least, $none_peak
pts = sorted(set([lo, hi, $half] + [lo + (hi - lo) * k // 5 for k in range(1, 5)]))
print(','.join(str(p) for p in pts))")
    "$bin" sweep "$cfg" --budgets "$budgets" --policies none,conv,all,dyn,vdnn --iters "$iters" $common \
        --out "$out" > "$out/sweep.log"
    python3 bench/planner_summary.py "$net" "$out/sweep.csv" "$none_peak" "$half" "$least"
    echo
done
