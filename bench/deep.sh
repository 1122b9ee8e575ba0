#!/bin/sh
# Deep chains: `vdnn info` and one training step under every policy (none, all, conv,
# swap, recompute, dyn, and two devices of one process) for chains of N [relu] layers
# between two small connected layers, every run on a 256 KiB stack (`ulimit -s`, which
# the device threads inherit) so that a recursion as deep as the net would crash it.
# Prints one line per run: depth, what ran, wall seconds, CPU seconds (user + system:
# the figure to compare on a shared machine), peak RSS in KiB, exit status.
#
# usage: sh bench/deep.sh [VDNN] [DEPTH...]   (defaults: build/vdnn; 10000 20000 50000 100000)
# STACK_KB (256) sets the stack, STEPS_ONLY=1 skips info, INFO_ONLY=1 the training steps.
set -u
vdnn=${1:-build/vdnn}
[ $# -gt 0 ] && shift
depths=${*:-10000 20000 50000 100000}
stack=${STACK_KB:-256}
dir=$(mktemp -d "${TMPDIR:-/tmp}/vdnn-deep.XXXXXX")
trap 'rm -rf "$dir"' EXIT

# chain N: the config of N relus
chain() {
    printf '[net]\nbatch = 2\nchannels = 1\nheight = 4\nwidth = 4\n'
    printf '[train]\nepochs = 1\nlearning_rate = 0.01\n'
    printf '[data]\nset = synthetic\ntrain_size = 4\ntest_size = 2\nclasses = 4\n'
    printf '[connected]\noutput = 8\n'
    awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) print "[relu]" }'
    printf '[connected]\noutput = 4\n[softmax]\n'
}

# run DEPTH WHAT ARGS...: times one vdnn run on the small stack
run() {
    depth=$1 what=$2
    shift 2
    (ulimit -s "$stack" && /usr/bin/time -f '%e %U %S %M' -o "$dir/time" "$vdnn" "$@" > "$dir/out" 2> "$dir/err")
    rc=$?
    set -- $(tail -n 1 "$dir/time")
    printf '%-7s %-24s %8s s wall %8s s cpu %8s KiB  rc=%s\n' "$depth" "$what" "$1" \
        "$(awk -v u="$2" -v s="$3" 'BEGIN { printf "%.2f", u + s }')" "$4" "$rc"
    [ "$rc" -eq 0 ] || tail -n 3 "$dir/err" | sed 's/^/        /'
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, stack ${stack} KiB, $vdnn of $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
for n in $depths; do
    chain "$n" > "$dir/deep.cfg"
    [ "${STEPS_ONLY:-0}" = 1 ] || run "$n" info info "$dir/deep.cfg"
    [ "${INFO_ONLY:-0}" = 1 ] && continue
    for p in none all conv swap recompute dyn; do
        run "$n" "train --policy $p" train --no-save "$dir/deep.cfg" --steps 1 --quiet --policy "$p"
    done
    run "$n" "train --devices cpu,cpu" train --no-save "$dir/deep.cfg" --steps 1 --quiet --devices cpu,cpu
done
