#!/bin/sh
# How long `vdnn profile` takes to plan (the profile measured once beforehand and read
# from the cache, so that only planning is timed): for each net, at three budgets, the
# least budget any plan of the whole batch fits (dyn's least), half of none's least
# with the fastest algorithms, and the least budget of its smallest micro-batch split.
#   sh bench/planning.sh [BIN...]        (default build/vdnn; several to compare builds)
# Environment: NETS ("name:batch" pairs, default below), THREADS (default 1),
# SEARCH_SECONDS (default: the binaries' own), VDNN_CACHE (default: a fresh folder, so
# that every binary plans from the same profile, measured by the first), WARM (default
# 1: each binary plans each point once untimed first, so that the profiles of the
# micro-batch sizes it weighs are cached, and their measuring is not counted).
# SWEEPS=0 leaves out the sweeps (the second table).
# Prints one Markdown table: net, batch, budget, binary, micro-batch choice s, search s,
# simulations, stop, wall s (the command's whole run, the cached profile read included),
# and the predicted step of the plan; then a second: the wall time of `vdnn sweep
# --policies dyn --budgets auto:10 --simulate` of each net (the profile cached), and
# how many of its rows a plan fits.
set -eu
[ $# -gt 0 ] || set -- build/vdnn
nets=${NETS:-"lenet:64 fmnist:128 vgg-cifar:64 alexnet-64:32 resnet20:16 resnet-fmnist:32"}
threads=${THREADS:-1}
export VDNN_CACHE="${VDNN_CACHE:-$(mktemp -d)}"
extra=""
[ -n "${SEARCH_SECONDS:-}" ] && extra="--search-seconds $SEARCH_SECONDS"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); threads $threads"
echo "Date: $(date -u '+%Y-%m-%d %H:%M UTC'); command: sh bench/planning.sh $*"
echo
echo "| net | batch | budget | binary | micro-batch choice s | search s | simulations | stop | wall s | predicted ms |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for pair in $nets; do
    net=${pair%%:*}
    batch=${pair#*:}
    cfg=configs/$net.cfg
    # the profile, measured once (the first binary's budget is of no account here)
    "$1" profile "$cfg" --batch "$batch" --budget 64G --threads "$threads" > /dev/null 2>&1
    "$1" info "$cfg" --batch "$batch" --threads "$threads" --json > "$tmp/info.json"
    budgets=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
micro = d["micro_batch_min_budget_bytes"]
least_micro = min(micro.values()) if micro else d["dyn_min_budget_bytes"]
print(d["dyn_min_budget_bytes"], d["min_budget_bytes"]["none"]["perf"] // 2, least_micro)' "$tmp/info.json")
    for budget in $budgets; do
        for bin in "$@"; do
            # (a budget no plan fits fails here too: the timed run below records why)
            # shellcheck disable=SC2086
            [ "${WARM:-1}" = 1 ] && { "$bin" profile "$cfg" --batch "$batch" --budget "$budget" --threads "$threads" \
                $extra > /dev/null 2>&1 || true; }
            t0=$(date +%s.%N)
            # shellcheck disable=SC2086 # $extra splits into flags
            "$bin" profile "$cfg" --batch "$batch" --budget "$budget" --threads "$threads" $extra > "$tmp/out" 2>&1 || true
            t1=$(date +%s.%N)
            python3 - "$tmp/out" "$net" "$batch" "$budget" "$bin" "$t0" "$t1" << 'EOF'
import re, sys
out, net, batch, budget, binary, t0, t1 = sys.argv[1:]
text = open(out).read()
m = re.search(r"micro-batch choice ([0-9.]+) s, search ([0-9.]+) s over ([0-9]+) simulations( \(([^)]*)\))?", text)
p = re.search(r"^predicted: ([0-9.]+) ms", text, re.M)
stop = "complete"
if m and m.group(5):
    stop = ("gap" if "gap" in m.group(5) else "time" if "time limit" in m.group(5)
            else "stalled" if "improved" in m.group(5) else "nodes")
if not m:
    stop = "failed: " + (text.strip().splitlines() or ["no output"])[-1][:80]
mib = int(budget) / 2**20
cells = [net, batch, f"{mib:.2f} MiB", binary,
         m.group(1) if m else "-", m.group(2) if m else "-", m.group(3) if m else "-", stop,
         f"{float(t1) - float(t0):.2f}", p.group(1) if p else "-"]
print("| " + " | ".join(cells) + " |")
EOF
        done
    done
done
[ "${SWEEPS:-1}" = 0 ] && exit 0
echo
echo "| net | batch | binary | sweep of 10 budgets, wall s | rows that fit |"
echo "|---|---|---|---|---|"
for pair in $nets; do
    net=${pair%%:*}
    batch=${pair#*:}
    for bin in "$@"; do
        t0=$(date +%s.%N)
        # shellcheck disable=SC2086 # $extra splits into flags
        "$bin" sweep "configs/$net.cfg" --batch "$batch" --threads "$threads" --budgets auto:10 --policies dyn \
            --simulate --out "$tmp/sweep" $extra > "$tmp/out" 2>&1 || true
        t1=$(date +%s.%N)
        fits=$(grep -c "policy dyn  *predicted" "$tmp/out" || true)
        echo "| $net | $batch | $bin | $(python3 -c "print(f'{$t1 - $t0:.2f}')") | $fits |"
    done
done
