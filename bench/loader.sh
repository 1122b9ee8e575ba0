#!/bin/sh
# vdnn's streaming image-folder loader (`set = images`) against PyTorch's DataLoader over
# torchvision's ImageFolder: the same JPEG files, the same transforms, the same number
# of workers.
#   sh bench/loader.sh [WORKERS...]      (default: 1 2)
# 1. The loader alone, for each worker count K: `vdnn data CFG --batches N --workers K`
#    against bench/loader_torch.py with K DataLoader workers, with the training
#    transforms (random-resized crop, scale 0.08-1 and ratio 3/4-4/3, random flip,
#    normalisation by ImageNet's mean and std) and the test ones (shorter side to
#    SIZE * 8 / 7, centre crop); the two run interleaved, A B A B, REPS times each.
#    Each side times itself: `vdnn data` from its first batch on, loader_torch.py N
#    batches after 2 of warm-up.
# 2. Training a tiny net fed by the loader: `vdnn train CFG --steps N --no-save` against
#    the same net trained in PyTorch on its DataLoader's batches (loader_torch.py
#    --train-net), THREADS compute threads each beside K loader workers, interleaved
#    the same way. vdnn's training images/s is N batches over the wall time of a run of
#    2 + N steps less that of a run of 2 (so it counts the waits for data, and not
#    start-up); PyTorch's is timed in the process, N steps after 2.
# Keep BATCHES + 2 within an epoch (PHOTOS / BATCH batches, 31 by default): past it `vdnn train`
# would also evaluate the test folder.
# Prints Markdown tables of the median images/s of each and their spread (lowest-highest),
# then the raw lines.
# The photos (bench/make_photos.py: PHOTOS JPEGs of ImageNet's sizes, about 100 KB each)
# are made once under PHOTO_DIR and reused; both sides read them from the page cache.
# Environment: VDNN_BIN (build/vdnn), PYTHON (/usr/bin/python3), SIZE (224), BATCH (64),
# BATCHES (20: N), REPS (3), THREADS (1), PHOTOS (2000), CLASSES (10),
# PHOTO_DIR (${TMPDIR:-/tmp}/vdnn-photos-PHOTOS-CLASSES), PARTS ("data train").
# Needs: python3-torch, python3-torchvision, python3-pil, python3-numpy (Debian).
set -eu
workers=${*:-1 2}
bin=${VDNN_BIN:-build/vdnn}
py=${PYTHON:-/usr/bin/python3}
size=${SIZE:-224}
batch=${BATCH:-64}
batches=${BATCHES:-20}
reps=${REPS:-3}
threads=${THREADS:-1}
photos=${PHOTOS:-2000}
classes=${CLASSES:-10}
parts=${PARTS:-data train}
dir=${PHOTO_DIR:-${TMPDIR:-/tmp}/vdnn-photos-$photos-$classes}
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" "$dir.part$$"' EXIT
trap "exit 1" INT TERM
cores=$(nproc)   # before OMP_NUM_THREADS is set: nproc obeys it
# one thread for whatever PyTorch and OpenBLAS do outside what the flags set
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# The folder is made beside its place and renamed into it when complete, so that an
# interrupted run, or two runs at once, never leave a partial folder to be reused.
if [ ! -d "$dir" ]; then
    start=$(date +%s)
    "$py" "$here/make_photos.py" "$dir.part$$" "$photos" "$classes" > "$tmp/photos.out"
    mv -T "$dir.part$$" "$dir" 2> /dev/null || rm -rf "$dir.part$$"
    echo "photos made in $(($(date +%s) - start)) s: $(cat "$tmp/photos.out")" >&2
fi
# Both read every file once before timing, so neither pays for the disk.
cat "$dir"/train/*/* > /dev/null

# `vdnn data --split test` reads the test folder; this view's test folder is the
# training folder, so both sides apply the test transforms to the same files.
mkdir "$tmp/view"
ln -s "$dir/train" "$tmp/view/train"
ln -s "$dir/train" "$tmp/view/test"

# config K: a tiny net on SIZE x SIZE x 3 over the folder, K loader workers.
config() {
    cat <<EOF
[net]
batch = $batch
channels = 3
height = $size
width = $size

[train]
epochs = 1000
learning_rate = 0.002
momentum = 0.9
seed = 1

[data]
set = images
path = $dir
flip = 1
mean = 0.485, 0.456, 0.406
std = 0.229, 0.224, 0.225
workers = $1

[convolutional]
filters = 8
size = 7
stride = 4
pad = 3
[relu]
[maxpool]
size = 4
[connected]
output = $classes
[softmax]
EOF
}

rate() {   # the images/s of a line "... IMAGES images in SECONDS s: RATE images/s ..."
    sed -n -E 's/.* images in [0-9.]+ s: ([0-9.]+) images\/s.*/\1/p' "$1" | tail -n 1
}

# vdnn_train K: images/s of `vdnn train` over `batches` steps, start-up left out. A
# first, untimed run has `--algo perf` measure the convolution and cache it, so that
# neither timed run does.
vdnn_train() {
    if [ ! -f "$tmp/warm$1" ]; then
        "$bin" train --no-save "$tmp/k$1.cfg" --steps 1 --threads "$threads" --quiet > /dev/null || return 1
        touch "$tmp/warm$1"
    fi
    t0=$(date +%s.%N)
    "$bin" train --no-save "$tmp/k$1.cfg" --steps 2 --threads "$threads" --quiet || return 1
    t1=$(date +%s.%N)
    "$bin" train --no-save "$tmp/k$1.cfg" --steps $((batches + 2)) --threads "$threads" --quiet || return 1
    t2=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" -v c="$t2" -v n=$((batches * batch)) 'BEGIN{
        s = (c - b) - (b - a); printf "vdnn train: %d images in %.3f s: %.1f images/s\n", n, s, n / s}'
}

# median and spread of the numbers in file $1: "MEDIAN (LOW-HIGH)"
summary() {
    sort -n "$1" | awk '{a[NR] = $1} END{
        m = (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
        printf "%.0f (%.0f-%.0f)", m, a[1], a[NR]}'
}
median() { sort -n "$1" | awk '{a[NR] = $1} END{print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

# row LABEL K VDNN_COMMAND TORCH_COMMAND: runs the two (shell text, eval'ed) REPS times,
# interleaved, and prints a table row.
row() {
    label=$1 k=$2
    : > "$tmp/v" && : > "$tmp/t"
    for r in $(seq "$reps"); do
        eval "$3" > "$tmp/out" 2>&1 || { cat "$tmp/out" >&2; exit 1; }
        rate "$tmp/out" >> "$tmp/v"
        echo "    [$label, $k workers, run $r] $(grep 'images in' "$tmp/out" | tail -n 1)" >> "$tmp/raw"
        eval "$4" > "$tmp/out" 2>&1 || { cat "$tmp/out" >&2; exit 1; }
        rate "$tmp/out" >> "$tmp/t"
        echo "    [$label, $k workers, run $r] $(grep 'images in' "$tmp/out" | tail -n 1)" >> "$tmp/raw"
    done
    echo "| $label | $k | $(summary "$tmp/v") | $(summary "$tmp/t") |" \
         "$(awk -v v="$(median "$tmp/v")" -v t="$(median "$tmp/t")" 'BEGIN{printf "%.2f", v / t}') |"
}

echo "Machine: $cores cores, $(uname -m), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "Date: $(date -u '+%Y-%m-%d %H:%M UTC'); command: sh bench/loader.sh $workers"
echo "Settings: SIZE=$size BATCH=$batch BATCHES=$batches REPS=$reps THREADS=$threads PHOTOS=$photos CLASSES=$classes"
echo "vdnn: $bin of $(git rev-parse --short HEAD 2> /dev/null || echo '?')$(git diff --quiet HEAD 2> /dev/null || echo ' + changes');" \
     "$("$py" -c 'import torch, torchvision, PIL; print("PyTorch", torch.__version__, "torchvision", torchvision.__version__, "Pillow", PIL.__version__)')"
echo "Load average at the start: $(cut -d' ' -f1-3 /proc/loadavg) (nothing else should run)"
echo "Photos: $dir, $(find "$dir/train" -name '*.jpg' | wc -l) training files," \
     "$(du -sk "$dir/train" | awk -v n="$(find "$dir/train" -name '*.jpg' | wc -l)" '{printf "%.0f KB", $1 / n}') on disk each"
: > "$tmp/raw"
for k in $workers; do config "$k" > "$tmp/k$k.cfg"; done

case " $parts " in *" data "*)
    echo
    echo "## The loader alone: images/s, median (lowest-highest) of $reps runs of $batches batches"
    echo
    echo "| transforms | workers | vdnn | PyTorch | vdnn / PyTorch |"
    echo "|---|---|---|---|---|"
    for k in $workers; do
        common="--size $size --batch $batch --batches $batches --workers $k"
        row train "$k" "'$bin' data '$tmp/k$k.cfg' --batches $batches --workers $k" \
                       "'$py' '$here/loader_torch.py' '$dir' $common --train"
        row test "$k" "'$bin' data '$tmp/k$k.cfg' --data '$tmp/view' --split test --batches $batches --workers $k" \
                      "'$py' '$here/loader_torch.py' '$dir' $common --test"
    done
esac

case " $parts " in *" train "*)
    [ $(((batches + 2) * batch)) -le "$photos" ] ||
        echo "loader.sh: warning: $((batches + 2)) steps pass the end of an epoch: vdnn's time includes an evaluation" >&2
    echo
    echo "## Training the tiny net (conv 7x7/4, 8 filters; maxpool 4; fc): images/s, $threads compute thread(s), median (lowest-highest) of $reps runs of $batches steps"
    echo
    echo "| transforms | workers | vdnn | PyTorch | vdnn / PyTorch |"
    echo "|---|---|---|---|---|"
    for k in $workers; do
        row train "$k" "vdnn_train $k" \
            "'$py' '$here/loader_torch.py' '$dir' --size $size --batch $batch --batches $batches --workers $k --train --train-net '$tmp/k$k.cfg' --threads $threads"
    done
esac

echo
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "Raw lines:"
echo
cat "$tmp/raw"
