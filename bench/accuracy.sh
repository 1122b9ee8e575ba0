#!/bin/sh
# Trains the default net to the end and records test accuracy per epoch and wall time.
#   sh bench/accuracy.sh [THREADS] > bench/accuracy.md
set -eu
threads=${1:-2}
bin=${VDNN_BIN:-build/vdnn}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
"$bin" train --no-save configs/fmnist.cfg --threads "$threads" --log "$log" --quiet
end=$(date +%s)
echo "Machine: $(nproc) cores, $(uname -m); $(date -u +%Y-%m-%d); command: sh bench/accuracy.sh $threads"
echo "Wall time: $((end - start)) s"
echo
echo "| epoch | train loss | test accuracy | images/s | epoch time (s) |"
echo "|---|---|---|---|---|"
grep '"train_loss"' "$log" | python3 -c '
import json, sys
for line in sys.stdin:
    e = json.loads(line)
    print("| %d | %.4f | %.2f%% | %.0f | %.1f |" % (e["epoch"], e["train_loss"], 100 * e["test_acc"],
                                                  e["images_per_s"], e["epoch_time_s"]))
'
