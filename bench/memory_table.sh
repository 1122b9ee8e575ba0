#!/bin/sh
# The vDNN paper's memory figures for its own nets: the device bytes one training
# iteration needs under each policy with memory-optimal algorithms (`mem`), from
# `vdnn info --json` (exact replays of the pool, fragmentation included), with in-place
# layers on (the default) and off, against the network-wide allocation the paper uses
# as its baseline; and a PNG of the in-place figures.
#   sh bench/memory_table.sh [OUTDIR] > bench/memory_table.md
# OUTDIR (default bench/) receives memory_table.png and its data, memory_table.dat
# (the PNG needs gnuplot; without it the table is still written).
set -eu
bin=${VDNN_BIN:-build/vdnn}
out=${1:-bench}
mkdir -p "$out"
dat="$out/memory_table.dat"
gib() { awk -v b="$1" 'BEGIN{printf "%.2f", b / 1073741824}'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.0f%%", 100 * (1 - a / b)}'; }
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# net, batch: the paper's nets (Caffe's AlexNet, OverFeat fast, GoogLeNet with Caffe's
# pooling, VGG-16) at its batches, and its very deep VGGs at batch 32
rows="alexnet-caffe 128
overfeat 128
googlenet 128
vgg16 64
vgg16 128
vgg16 256
vgg116 32
vgg216 32
vgg316 32
vgg416 32"

echo "# Memory per policy for the vDNN paper's nets, in-place layers on and off"
echo
echo "Machine: $(uname -m) ($(nproc) cores), $(date -u +%Y-%m-%d). Build: $(git rev-parse --short HEAD 2>/dev/null || echo '?')."
echo "Command: \`sh bench/memory_table.sh > bench/memory_table.md\` (each figure from \`vdnn info CFG --batch B --json [--in-place off]\`)."
echo
echo "GiB of device memory (2^30 bytes). Every column uses memory-optimal convolution"
echo "algorithms (\`mem\`), as the paper's vDNN(m) does. \`network-wide\` is the paper's"
echo "baseline: every feature map and gradient map allocated for the whole run, plus"
echo "parameters, their gradients and momenta (an in-place layer's maps shared with its"
echo "input's when in-place is on). \`none\`, \`conv\`, \`all\` are the exact least budgets"
echo "of one training iteration and the evaluation of a batch (the pool's own first-fit"
echo "fragmentation included); \`dyn\` is the planner's smallest plan."
echo
echo "| net | batch | in-place | network-wide | none | conv | all | dyn | all vs network-wide |"
echo "|---|---|---|---|---|---|---|---|---|"
: > "$dat"
echo "$rows" | while read -r net batch; do
    for ip in on off; do
        json=$("$bin" info "configs/$net.cfg" --batch "$batch" --in-place "$ip" --json)
        nw=$(printf '%s' "$json" | field "d['network_wide_bytes']['mem']")
        none=$(printf '%s' "$json" | field "d['min_budget_bytes']['none']['mem']")
        conv=$(printf '%s' "$json" | field "d['min_budget_bytes']['conv']['mem']")
        all=$(printf '%s' "$json" | field "d['min_budget_bytes']['all']['mem']")
        dyn=$(printf '%s' "$json" | field "d['dyn_min_budget_bytes']")
        echo "| $net | $batch | $ip | $(gib "$nw") | $(gib "$none") | $(gib "$conv") | $(gib "$all") | $(gib "$dyn") | $(pct "$all" "$nw") |"
        if [ "$ip" = on ]; then
            echo "\"$net ($batch)\" $(gib "$nw") $(gib "$none") $(gib "$conv") $(gib "$all") $(gib "$dyn")" >> "$dat"
        fi
    done
done

# Beside the paper's published figures (Rhu et al. 2016): VGG-16 at batch 256 needs
# 28 GB network-wide; vDNN_all cuts the average memory usage of AlexNet, OverFeat and
# GoogLeNet by 89%, 91% and 95% (an average over the iteration; vdnn's figures are
# peaks, the budget a run needs).
wide_of() { "$bin" info "configs/$1.cfg" --batch "$2" --json | field "d['network_wide_bytes']['mem']"; }
all_of() { "$bin" info "configs/$1.cfg" --batch "$2" --json | field "d['min_budget_bytes']['all']['mem']"; }
echo
echo "Beside the paper's figures (in-place on):"
echo
echo "| figure | paper | vdnn |"
echo "|---|---|---|"
w=$(wide_of vgg16 256)
echo "| VGG-16 (256), network-wide | 28 GB | $(awk -v b="$w" 'BEGIN{printf "%.1f GB (%.2f GiB)", b / 1e9, b / 1073741824}') |"
for row in "alexnet-caffe 128 89%" "overfeat 128 91%" "googlenet 128 95%"; do
    set -- $row
    echo "| $1 ($2), all vs network-wide | $3 less on average | $(pct "$(all_of "$1" "$2")" "$(wide_of "$1" "$2")") less at the peak |"
done

if command -v gnuplot >/dev/null 2>&1; then
    gnuplot <<EOF
set terminal pngcairo size 1200,600 font "sans,10"
set output "$out/memory_table.png"
set title "vDNN paper's nets: device memory per policy, mem algorithms, in-place layers on (vdnn info)"
set ylabel "GiB"
set logscale y
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set xtics rotate by -30
set key top left
set grid ytics
plot "$dat" using 2:xtic(1) title "network-wide", '' using 3 title "none", '' using 4 title "conv", \
     '' using 5 title "all", '' using 6 title "dyn"
EOF
    echo
    echo "Plot: memory_table.png (log scale; data in memory_table.dat)."
fi
