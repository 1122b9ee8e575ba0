#!/bin/sh
# Beyond vDNN on the CPU device (emulated link): how large a batch fits a fixed budget
# under each family of plans, and how fast a model four times the budget trains.
#   sh bench/beyond.sh [THREADS] [LINK_GBPS]
# Part 1 (exact, simulated): the largest batch of vgg-cifar (128 MiB) and VGG-16 at
#   224x224 (4 GiB) whose least budget fits, for: none; all; vDNN's policies (none,
#   conv, all; either algorithms); + parameter swapping; + recomputation; + micro-
#   batches (down to a sixteenth of the batch, as `vdnn info` lists them). Minimum
#   budgets come from `vdnn info --batch N --json` (a replay on the real pool, exact);
#   dyn's own search can only go lower, so its largest batch is at least these.
# Part 2 (measured): vgg-cifar at the largest batch of the micro-batch family trains a
#   step in the budget, planned by dyn (pool peak printed).
# Part 3 (measured): vgg-cifar at batch 64 with a budget of a quarter of its
#   parameters + feature maps, `--policy dyn`, against `--policy none` with unlimited
#   memory: median step time.
set -eu
threads=${1:-1}
link=${2:-12}
bin=${VDNN_BIN:-build/vdnn}
export VDNN_CACHE=${VDNN_CACHE:-$(mktemp -d)}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

. "$(dirname "$0")/common.sh"

echo "Machine: $(nproc) cores, $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "Date: $(date -u +%Y-%m-%d); command: sh bench/beyond.sh $threads $link"
echo
echo "## 1. Largest batch in a fixed budget (exact minimum budgets, simulated)"
echo
echo "| net | budget | none | all | vDNN policies | + swap | + recompute | + micro-batches | best / none |"
echo "|---|---|---|---|---|---|---|---|---|"
for spec in "vgg-cifar 134217728 4096" "vgg16 4294967296 2048"; do
    set -- $spec
    python3 bench/largest_batch.py "$bin" "configs/$1.cfg" "$2" "$3"
done
echo
echo "## 2. vgg-cifar at the largest micro-batched batch, trained"
echo
synthetic configs/vgg-cifar.cfg "$tmp/vgg.cfg"
set -- $(python3 bench/largest_batch.py "$bin" configs/vgg-cifar.cfg 134217728 4096 --micro)
batch=$1
micro=$2
echo '```'
echo "\$ vdnn train vgg-cifar(synthetic) --batch $batch --micro-batch $micro --policy dyn --budget 128M --steps 1"
"$bin" train --no-save "$tmp/vgg.cfg" --batch "$batch" --micro-batch "$micro" --policy dyn --budget 128M \
    --steps 1 --threads "$threads" --link-gbps "$link" 2>&1 | grep -E "chosen plan|swapped|^done"
echo '```'
echo
echo "## 3. A model four times the budget"
echo
set -- $("$bin" info "$tmp/vgg.cfg" --json | python3 -c "
import json, sys
j = json.load(sys.stdin)
total = j['param_bytes'] + j['feature_map_bytes']
print(total, total // 4 // 256 * 256)")
total=$1
budget=$2
"$bin" train --no-save "$tmp/vgg.cfg" --policy dyn --budget "$budget" --steps 12 --threads "$threads" --link-gbps "$link" \
    --log "$tmp/dyn.log" > "$tmp/dyn.out"
"$bin" train --no-save "$tmp/vgg.cfg" --policy none --steps 12 --threads "$threads" --link-gbps "$link" --log "$tmp/none.log" --quiet
dyn_ms=$(median_step "$tmp/dyn.log")
none_ms=$(median_step "$tmp/none.log")
echo "vgg-cifar, batch 64: parameters (with gradients and momenta) + feature maps = $total bytes; budget $budget bytes (a quarter)."
echo
echo '```'
grep -E "planner|chosen|other|micro-batches|offloaded|predicted|measured|done" "$tmp/dyn.out" | head -n 12
echo '```'
echo
python3 -c "print(f'- median step: dyn in a quarter of the model {$dyn_ms:.1f} ms, none with unlimited memory {$none_ms:.1f} ms: '
             f'{100 * $none_ms / $dyn_ms:.1f}% of the unlimited speed (SwapAdvisor: 53-99% at up to 12x).')"
