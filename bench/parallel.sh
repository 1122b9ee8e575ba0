#!/bin/sh
# Data-parallel training on this machine (docs/parallel.md): scaling, imbalance and the
# reduction that backward does not hide.
#   sh bench/parallel.sh [STEPS]
# 1. images/s of one device (1 thread), two devices in one process (1 thread each), and
#    two ranks (mpirun -np 2, one device of 1 thread each), on fmnist and vgg-cifar
#    (synthetic data of their shapes), and the efficiency: two devices' images/s over
#    twice one device's.
# 2. one of two devices slowed 2x (the VDNN_SLOWDOWN test knob): equal shares against
#    --shares auto, against the ideal (the two devices' speeds added: 1.5x one device).
# 3. the median milliseconds per step of gradient reduction after the last backward
#    ended (`reduce_exposed_ms` in the log), against the median step.
# Medians leave out each run's first three steps.
set -eu
steps=${1:-30}
bin=${VDNN_BIN:-build/vdnn}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/common.sh"

median_field() {   # median of a JSON field over the log's steps (the first three left out)
    grep "\"$2\"" "$1" | tail -n +4 | sed -E "s/.*\"$2\": ([0-9.]+).*/\\1/" | sort -n |
        awk '{a[NR]=$1} END{printf "%.2f", (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'
}
ips() { awk -v b="$1" -v ms="$2" 'BEGIN{printf "%.0f", 1000 * b / ms}'; }

echo "Machine: $(nproc) cores, $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "Date: $(date -u +%Y-%m-%d); command: sh bench/parallel.sh $steps"
echo
echo "## 1. Scaling"
echo
echo "| net | batch | 1 device img/s | 2 devices img/s | efficiency | mpirun -np 2 img/s | efficiency | exposed reduction ms (2 devices) | step ms (2 devices) |"
echo "|---|---|---|---|---|---|---|---|---|"
for spec in "fmnist 128" "vgg-cifar 64"; do
    set -- $spec
    synthetic "configs/$1.cfg" "$tmp/$1.cfg"
    common="$tmp/$1.cfg --batch $2 --steps $steps --threads 1 --quiet"
    "$bin" train --no-save $common --log "$tmp/one.log"
    "$bin" train --no-save $common --devices cpu,cpu --log "$tmp/two.log"
    mpirun --oversubscribe -np 2 "$bin" train --no-save $common --devices cpu --log "$tmp/mpi.log"
    one=$(median_field "$tmp/one.log" step_time_ms)
    two=$(median_field "$tmp/two.log" step_time_ms)
    mpi=$(median_field "$tmp/mpi.log" step_time_ms)
    exposed=$(median_field "$tmp/two.log" reduce_exposed_ms)
    i1=$(ips "$2" "$one"); i2=$(ips "$2" "$two"); im=$(ips "$2" "$mpi")
    echo "| $1 | $2 | $i1 | $i2 | $(awk -v a="$i2" -v b="$i1" 'BEGIN{printf "%.0f%%", 50 * a / b}') | $im | $(awk -v a="$im" -v b="$i1" 'BEGIN{printf "%.0f%%", 50 * a / b}') | $exposed | $two |"
done
echo
echo "## 2. One device slowed 2x (VDNN_SLOWDOWN=1,2), fmnist at batch 128"
echo
synthetic configs/fmnist.cfg "$tmp/fm.cfg"
common="$tmp/fm.cfg --batch 128 --steps $steps --threads 1 --quiet"
"$bin" train --no-save $common --log "$tmp/one.log"
VDNN_SLOWDOWN=1,2 "$bin" train --no-save $common --devices cpu,cpu --log "$tmp/equal.log"
VDNN_SLOWDOWN=1,2 "$bin" train --no-save $common --devices cpu,cpu --shares auto --share-every 5 --log "$tmp/auto.log"
one=$(median_field "$tmp/one.log" step_time_ms)
eq=$(median_field "$tmp/equal.log" step_time_ms)
au=$(median_field "$tmp/auto.log" step_time_ms)
ideal=$(awk -v o="$one" 'BEGIN{printf "%.0f", 1.5 * 1000 * 128 / o}')
final=$(grep '"shares"' "$tmp/auto.log" | tail -1 | sed -E 's/.*"shares": \[([0-9, ]*)\].*/\1/')
echo "| shares | img/s | of the ideal ($ideal img/s) |"
echo "|---|---|---|"
echo "| equal (64:64) | $(ips 128 "$eq") | $(awk -v a="$(ips 128 "$eq")" -v b="$ideal" 'BEGIN{printf "%.0f%%", 100 * a / b}') |"
echo "| auto (ends at $final) | $(ips 128 "$au") | $(awk -v a="$(ips 128 "$au")" -v b="$ideal" 'BEGIN{printf "%.0f%%", 100 * a / b}') |"
echo
echo "(auto's median includes the steps before its shares settled.)"
