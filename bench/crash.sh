#!/bin/sh
# Crash safety of checkpoints, for bench/crash.md.
#  1. kill -9 at random moments of a training run that saves a checkpoint at every
#     epoch end (a net of wide layers: a 24 MiB checkpoint, written often, so that many
#     kills land in a save): after each kill, does the checkpoint on disk load (`vdnn
#     test`), and is any temporary file left beside it?
#  2. a full disk during a save (root: a tmpfs with room for one checkpoint and a half,
#     then an ext4 image of the same size when loop devices work): the run must stop
#     with a message, the previous checkpoint must still load, and nothing be left.
#   usage: [TRIES=20] [SEED=1] sh bench/crash.sh [VDNN]    (VDNN: default build/vdnn)
set -u
vdnn=$(cd "$(dirname "${1:-build/vdnn}")" && pwd)/$(basename "${1:-build/vdnn}")
tries=${TRIES:-20}
seed=${SEED:-1}
work=$(mktemp -d "${TMPDIR:-/tmp}/vdnn-crash.XXXXXX")
export VDNN_CACHE="$work/cache" VDNN_DEVICE=cpu
cfg="$work/wide.cfg"
cat >"$cfg" <<'EOF'
[net]
batch = 32
channels = 1
height = 16
width = 16
[train]
epochs = 100000
learning_rate = 0.01
momentum = 0.9
[data]
set = synthetic
train_size = 128
test_size = 32
classes = 10
[convolutional]
filters = 8
size = 3
pad = 1
[relu]
[connected]
output = 1024
[relu]
[connected]
output = 1024
[relu]
[connected]
output = 10
[softmax]
EOF
echo "crash bench: $vdnn, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, work folder $work"

# ---- 1. kill -9 at random moments ----
ck="$work/run/wide.ckpt"
mkdir -p "$work/run"
loaded=0; none=0; left=0; bad=0
for i in $(seq 1 "$tries"); do
    rm -f "$work/run/"*
    delay=$(awk -v s="$seed" -v i="$i" 'BEGIN { srand(s * 1000 + i); printf "%.3f", 0.5 + 5.5 * rand() }')
    "$vdnn" train "$cfg" --save "$ck" --threads 1 --quiet >"$work/train.out" 2>&1 &
    pid=$!
    sleep "$delay"
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    extra=$(ls -A "$work/run" | grep -v '^wide.ckpt$' | tr '\n' ' ')
    [ -n "$extra" ] && left=$((left + 1))
    if [ ! -e "$ck" ]; then
        none=$((none + 1)); state="no checkpoint yet"
    elif "$vdnn" test "$cfg" --weights "$ck" --threads 1 >"$work/test.out" 2>&1; then
        loaded=$((loaded + 1)); state="loads ($(stat -c %s "$ck") bytes)"
    else
        bad=$((bad + 1)); state="DOES NOT LOAD: $(cat "$work/test.out")"
    fi
    echo "kill $i at ${delay} s: checkpoint $state; other files: ${extra:-none}"
done
echo "kill -9: $tries tries, $loaded checkpoints load, $bad do not, $none killed before the first save, $left left other files"

# ---- 2. a full disk during a save ----
full_disk() {   # $1: the mounted folder
    mnt=$1
    "$vdnn" train "$cfg" --save "$mnt/wide.ckpt" --log "$mnt/log.jsonl" --threads 1 --quiet --epochs 3 \
        >"$work/full.out" 2>&1
    rc=$?
    echo "  train --epochs 3 --save on it: exit $rc: $(tr '\n' ' ' <"$work/full.out")"
    if "$vdnn" test "$cfg" --weights "$mnt/wide.ckpt" --threads 1 >"$work/test.out" 2>&1; then
        echo "  the checkpoint on it loads: $(tr '\n' ' ' <"$work/test.out")"
    else
        echo "  the checkpoint on it DOES NOT LOAD: $(tr '\n' ' ' <"$work/test.out")"
    fi
    echo "  files left: $(ls -A "$mnt" | tr '\n' ' ')"
}
size=$(stat -c %s "$ck" 2>/dev/null || echo 25165824)
room=$((size + size / 2))
mnt="$work/mnt"
mkdir -p "$mnt"
if [ "$(id -u)" -ne 0 ]; then
    echo "full disk: skipped (mounting a file system needs root)"
elif mount -t tmpfs -o size="$room" tmpfs "$mnt" 2>"$work/mount.err"; then
    echo "full disk: tmpfs of $room bytes (room for one checkpoint of $size bytes and a half)"
    full_disk "$mnt"
    umount "$mnt"
    img="$work/ext4.img"
    if truncate -s $((room + 4 * 1048576)) "$img" && mkfs.ext4 -q -F "$img" 2>/dev/null &&
        mount -o loop "$img" "$mnt" 2>"$work/mount.err"; then
        echo "full disk: ext4 image of $((room + 4 * 1048576)) bytes"
        full_disk "$mnt"
        umount "$mnt"
    else
        echo "full disk on ext4: skipped ($(cat "$work/mount.err"))"
    fi
else
    echo "full disk: skipped (mount failed: $(cat "$work/mount.err"))"
fi
rm -rf "$work"
