#!/bin/sh
# The vDNN paper's memory table for AlexNet and VGG-16 (224x224) at batch 64, 128, 256:
# device bytes one training iteration needs under each policy and algorithm mode, from
# `vdnn info --json` (exact replays of the pool, fragmentation included), and the
# reduction against `none` with the same algorithms and against the network-wide
# allocation the paper uses as its baseline.
#   sh bench/memory_table.sh > bench/memory_table.md
set -eu
bin=${VDNN_BIN:-build/vdnn}
gib() { awk -v b="$1" 'BEGIN{printf "%.2f", b / 1073741824}'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.0f%%", 100 * (1 - a / b)}'; }
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

echo "Machine: $(uname -m), $(date -u +%Y-%m-%d). Command: sh bench/memory_table.sh"
echo
echo "| net | batch | algos | network-wide (GiB) | none | conv | all | all vs none | all vs network-wide |"
echo "|---|---|---|---|---|---|---|---|---|"
for net in alexnet vgg16; do
    for batch in 64 128 256; do
        json=$("$bin" info "configs/$net.cfg" --batch "$batch" --json)
        for algo in perf mem; do
            nw=$(printf '%s' "$json" | field "d['network_wide_bytes']['$algo']")
            none=$(printf '%s' "$json" | field "d['min_budget_bytes']['none']['$algo']")
            conv=$(printf '%s' "$json" | field "d['min_budget_bytes']['conv']['$algo']")
            all=$(printf '%s' "$json" | field "d['min_budget_bytes']['all']['$algo']")
            echo "| $net | $batch | $algo | $(gib "$nw") | $(gib "$none") | $(gib "$conv") | $(gib "$all") | $(pct "$all" "$none") | $(pct "$all" "$nw") |"
        done
    done
done
