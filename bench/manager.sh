#!/bin/sh
# The slow-down manager's experiment (docs/manager.md) on the CPU backend: three jobs of
# different nets and lengths on two emulated devices (cpu:0 and cpu:1, a core each),
# without the manager (a manager that only observes) and with it.
#   sh bench/manager.sh [SCALE] [CASES]
# SCALE multiplies every job's steps (1: about 25, 20 and 35 s alone on one device on
# this machine); CASES picks from 1 2 3 (default all):
#   1. crowded: A and B start on device 0 (DR 10,0), C on device 1 (0,10);
#   2. equal: every job starts with DR 5,5;
#   3. staggered: A, B and C start on device 0 (10,0), 10 s apart.
# Jobs (Fashion-MNIST, 1 thread per device): A configs/fmnist.cfg (batch 128, 150 steps),
# B configs/lenet.cfg (batch 64, 1500 steps), C configs/resnet-fmnist.cfg (batch 128,
# 120 steps). Each job's SD = its completion time (start to exit) / its time alone on one
# device (measured first, each job alone with --devices cpu:0). Every run starts with an
# empty profile cache, so a job pays for measuring a new share's algorithms as a user's
# would. Utilization: the busy share of the two cores (/proc/stat) over the run.
# Writes bench/out/manager/ (logs, each manager log's plot) and prints the tables.
set -eu
scale=${1:-1}
cases=${2:-1 2 3}
bin=${VDNN_BIN:-build/vdnn}
out=bench/out/manager
mkdir -p "$out"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

steps_a=$((150 * scale)); steps_b=$((1500 * scale)); steps_c=$((120 * scale))
job_args() {   # job_args A|B|C
    case $1 in
    A) echo "configs/fmnist.cfg --steps $steps_a" ;;
    B) echo "configs/lenet.cfg --steps $steps_b" ;;
    C) echo "configs/resnet-fmnist.cfg --steps $steps_c" ;;
    esac
}
now() { date +%s.%N; }
busy() {   # "busy total" jiffies of cores 0 and 1
    awk '$1 == "cpu0" || $1 == "cpu1" {for (i = 2; i <= NF; i++) t += $i; b += $2 + $3 + $4 + $7 + $8}
         END {print b, t}' /proc/stat
}

# run_job NAME DELAY DR SOCKET: one managed job, after DELAY seconds; its start and end
# times in $out/NAME.time
run_job() {
    sleep "$2"
    t0=$(now)
    VDNN_CACHE="$run/cache-$1" "$bin" train --no-save $(job_args "$1") --devices cpu:0,cpu:1 --shares "$3" --managed \
        --manager "$4" --quiet --log "$run/$1.jsonl" 2> "$run/$1.err"
    echo "$t0 $(now)" > "$run/$1.time"
}

echo "Machine: $(nproc) cores, $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "Date: $(date -u +%Y-%m-%d); command: sh bench/manager.sh $scale \"$cases\""
echo
echo "## Alone on one device (solo times)"
echo
for j in A B C; do
    rm -rf "$out/solo-cache"
    t0=$(now)
    VDNN_CACHE="$out/solo-cache" "$bin" train --no-save $(job_args $j) --devices cpu:0 --quiet --log "$out/solo-$j.jsonl"
    echo "$t0 $(now)" > "$out/solo-$j.time"
    echo "- job $j ($(job_args $j)): $(awk '{printf "%.1f", $2 - $1}' "$out/solo-$j.time") s"
done
rm -rf "$out/solo-cache"

for c in $cases; do
    case $c in
    1) name=crowded; plan="A 0 10,0 B 0 10,0 C 0 0,10" ;;
    2) name=equal; plan="A 0 5,5 B 0 5,5 C 0 5,5" ;;
    3) name=staggered; plan="A 0 10,0 B 10 10,0 C 20 10,0" ;;
    *) echo "bench/manager.sh: no case $c (1, 2 or 3)" >&2; exit 2 ;;
    esac
    for mode in observe manage; do
        run="$out/case$c-$mode"
        rm -rf "$run"
        mkdir -p "$run"
        sock="$run/m.sock"
        flag=""
        [ $mode = observe ] && flag=--observe
        "$bin" manager --manager "$sock" --log "$run/manager.jsonl" --until-idle $flag > "$run/manager.out" 2>&1 &
        mgr=$!
        while ! grep -q '"event": "start"' "$run/manager.jsonl" 2> /dev/null; do sleep 0.1; done
        b0=$(busy)
        set -- $plan
        pids=""
        while [ $# -gt 0 ]; do
            run_job "$1" "$2" "$3" "$sock" &
            pids="$pids $!"
            shift 3
        done
        for p in $pids; do wait "$p"; done
        wait "$mgr"
        echo "$b0 $(busy)" > "$run/busy"
        echo "$name" > "$run/case"
        "$bin" manager --plot "$run/manager.jsonl" --out "$run" > /dev/null
        for j in A B C; do
            if [ -s "$run/$j.err" ]; then
                echo "bench/manager.sh: job $j of case $c ($mode) wrote to stderr:" >&2
                cat "$run/$j.err" >&2
            fi
        done
    done
done
echo
python3 "$(dirname "$0")/manager_summary.py" "$out" $cases
