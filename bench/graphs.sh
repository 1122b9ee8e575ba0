#!/bin/sh
# Graphs (ResNet, GoogLeNet, DenseNet) under vdnn's memory policies and planner.
#   sh bench/graphs.sh memory              the vDNN paper's memory table, extended
#   sh bench/graphs.sh largest [BUDGET]    largest batch in a fixed budget (default 4G)
#   sh bench/graphs.sh dtr [THREADS] [GBPS] [BATCH]   DTR's ResNet-1202 experiment
#   sh bench/graphs.sh fmnist [THREADS]    configs/resnet-fmnist.cfg trained to the end
# Each part prints Markdown; bench/graphs.md holds the recorded runs.
set -eu
bin=${VDNN_BIN:-build/vdnn}
export VDNN_CACHE=${VDNN_CACHE:-$(mktemp -d)}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/common.sh"
part=${1:-memory}
[ $# -gt 0 ] && shift

header() {
    echo "Machine: $(nproc) cores, $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
    echo "Date: $(date -u +%Y-%m-%d); command: sh bench/graphs.sh $part $*"
    echo
}

gib() { awk -v b="$1" 'BEGIN{printf "%.2f", b / 1073741824}'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1f%%", 100 * (1 - a / b)}'; }

case "$part" in
memory)
    # Exact minimum budgets (`vdnn info`: a replay of one iteration on the real pool,
    # fragmentation included), memory-optimal algorithms, against vDNN's baseline: the
    # network-wide allocation (every map and gradient allocated for the whole net).
    header
    echo "| net | batch | network-wide (GiB) | none | conv | all | recompute | dyn | all vs network-wide | dyn vs network-wide |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    for net in googlenet resnet50; do
        for batch in 64 128 256; do
            "$bin" info "configs/$net.cfg" --batch "$batch" --json > "$tmp/info.json"
            set -- $(python3 -c "
import json
d = json.load(open('$tmp/info.json'))
m = d['min_budget_bytes']
print(d['network_wide_bytes']['mem'], m['none']['mem'], m['conv']['mem'], m['all']['mem'], m['recompute']['mem'],
      d['dyn_min_budget_bytes'])")
            echo "| $net | $batch | $(gib "$1") | $(gib "$2") | $(gib "$3") | $(gib "$4") | $(gib "$5") | $(gib "$6") | $(pct "$4" "$1") | $(pct "$6" "$1") |"
        done
    done
    ;;
largest)
    budget=${1:-4294967296}
    header "$@"
    echo "| net | budget | none | all | vDNN policies | + swap | + recompute | dyn | + micro-batches | best / none |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    for net in resnet50 googlenet; do
        python3 bench/largest_batch.py "$bin" "configs/$net.cfg" "$budget" 4096 --dyn
    done
    ;;
dtr)
    # DTR (Kirisame et al. 2021): ResNet-1202 trains in 9x less memory at 1.31x the step
    # time. Here: the least budget whose dyn plan (whole batch, no split) is predicted at
    # no more than 1.31x the step time with unlimited memory, found by bisection over
    # budgets, then both measured with real steps on the CPU device and its link.
    threads=${1:-2}
    gbps=${2:-12}
    batch=${3:-32}
    header "$@"
    synthetic configs/resnet1202.cfg "$tmp/r.cfg"
    flags="--batch $batch --threads $threads --link-gbps $gbps --search-seconds 20"
    none=$("$bin" info "$tmp/r.cfg" --batch "$batch" --json | python3 -c "import json,sys; print(json.load(sys.stdin)['min_budget_bytes']['none']['perf'])")
    predict() {   # predicted ms of dyn's plan at budget $1, or "none"
        "$bin" profile "$tmp/r.cfg" $flags --budget "$1" --micro-batch "$batch" > "$tmp/p.out" 2>&1 || { echo none; return; }
        sed -nE 's/.*chosen plan: +predicted +([0-9.]+) ms.*/\1/p' "$tmp/p.out"
    }
    ideal=$(predict "$none")
    limit=$(awk -v t="$ideal" 'BEGIN{printf "%.3f", 1.31 * t}')
    echo "ResNet-1202, batch $batch, $threads threads, link $gbps GB/s. none needs $(gib "$none") GiB;"
    echo "predicted step with unlimited memory $ideal ms; 1.31x: $limit ms."
    echo
    echo "| budget (MiB) | dyn predicted (ms) | / unlimited |"
    echo "|---|---|---|"
    lo=$((none / 1000)); hi=$none
    while [ $((hi - lo)) -gt $((none / 200)) ]; do
        mid=$(( (lo + hi) / 2 / 256 * 256 ))
        t=$(predict "$mid")
        ratio=$( [ "$t" = none ] && echo - || awk -v a="$t" -v b="$ideal" 'BEGIN{printf "%.3f", a / b}')
        echo "| $((mid / 1048576)) | $t | $ratio |"
        if [ "$t" != none ] && awk -v a="$t" -v l="$limit" 'BEGIN{exit !(a <= l)}'; then hi=$mid; else lo=$mid; fi
    done
    echo
    echo "Least budget found: $((hi / 1048576)) MiB, $(awk -v a="$none" -v b="$hi" 'BEGIN{printf "%.1f", a / b}')x less than none."
    echo
    echo "Measured (median step of 6 after 3 warm-up; planning and verification excluded):"
    echo
    "$bin" train --no-save "$tmp/r.cfg" --batch "$batch" --threads "$threads" --steps 9 --log "$tmp/none.log" --quiet
    "$bin" train --no-save "$tmp/r.cfg" $flags --policy dyn --budget "$hi" --micro-batch "$batch" --steps 9 \
        --log "$tmp/dyn.log" > "$tmp/dyn.out" 2>&1
    grep -E "chosen plan|other candidate|^done" "$tmp/dyn.out" | sed 's/^/    /'
    a=$(median_step "$tmp/none.log"); b=$(median_step "$tmp/dyn.log")
    echo
    echo "| run | budget | median step (ms) | / none |"
    echo "|---|---|---|---|"
    echo "| none, unlimited memory | $(gib "$none") GiB needed | $a | 1.00 |"
    echo "| dyn | $((hi / 1048576)) MiB | $b | $(awk -v a="$b" -v b="$a" 'BEGIN{printf "%.2f", a / b}') |"
    ;;
fmnist)
    threads=${1:-1}
    header "$@"
    start=$(date +%s)
    "$bin" train --no-save configs/resnet-fmnist.cfg --threads "$threads" --log "$tmp/log" --save "$tmp/c.ckpt" --quiet
    end=$(date +%s)
    echo "Wall time: $((end - start)) s"
    echo
    echo "| epoch | train loss | train acc | test loss | test acc | images/s | epoch time (s) |"
    echo "|---|---|---|---|---|---|---|"
    grep '"train_loss"' "$tmp/log" | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    print(f"| {e[\"epoch\"]} | {e[\"train_loss\"]:.4f} | {100 * e[\"train_acc\"]:.2f}% | {e[\"test_loss\"]:.4f} | {100 * e[\"test_acc\"]:.2f}% | {e[\"images_per_s\"]:.0f} | {e[\"epoch_time_s\"]:.1f} |")
'
    ;;
*)
    echo "usage: sh bench/graphs.sh memory|largest|dtr|fmnist [args]" >&2
    exit 2
    ;;
esac
