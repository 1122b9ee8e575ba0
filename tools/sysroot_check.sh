#!/bin/sh
# Checks, on this machine, that a build made with `make SYSROOT=` runs on the sysroot's
# libraries alone, as it must on a GPU machine that has none of them installed:
#   sh tools/sysroot_check.sh WORKDIR
# It takes the .deb files from $DEBS (default: fetches them into WORKDIR/debs with
# tools/sysroot.sh), unpacks them into WORKDIR/root, builds WORKDIR/build/vdnn with
# SYSROOT (CPU only and -O0 unless CUDA and OPT say otherwise: the libraries are what is
# checked), then
#   1. the binary carries DT_RPATH (searched for its libraries' own dependencies too,
#      such as OpenBLAS's libgfortran), not DT_RUNPATH;
#   2. `ldd` resolves every library but the C and compiler runtimes (libc, libm, libgomp,
#      libstdc++, ...) and CUDA's from the sysroot;
#   3. in a mount namespace where this machine's own copies of those libraries are
#      replaced by empty files, `vdnn --version` and one training step of a net with a
#      convolution and a fully connected layer (OpenBLAS's GEMM) run.
# Step 3 needs `unshare --mount` (root, or a user namespace); without it the check says
# so and stops after step 2. Exits 0 when every step that ran passed, 77 when the
# packages could not be fetched, 1 on a failure (the reason on stderr).
set -eu
[ $# -eq 1 ] || {
    echo "usage: sh tools/sysroot_check.sh WORKDIR" >&2
    exit 2
}
mkdir -p "$1"
work=$(cd "$1" && pwd)
debs=${DEBS:-$work/debs}
fail() {
    echo "sysroot_check: $*" >&2
    exit 1
}
if ! ls "$debs"/*.deb > /dev/null 2>&1; then
    sh tools/sysroot.sh fetch "$debs" > "$work/fetch.log" 2>&1 || {
        echo "sysroot_check: apt-get download failed (see $work/fetch.log): nothing checked" >&2
        exit 77
    }
fi
root=$work/root
rm -rf "$root"
sh tools/sysroot.sh unpack "$debs" "$root" > /dev/null
bin=$work/build/vdnn
# a plain build, whatever build this runs under (make sanitize exports SAN)
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -j"$(nproc)" CUDA="${CUDA:-0}" OPT="${OPT:--O0}" SAN= BUILD="$work/build" \
    SYSROOT="$root" "$bin" \
    > "$work/build.log" 2>&1 || fail "the build with SYSROOT=$root failed: $work/build.log"

# 1. RPATH
dyn=$(readelf -d "$bin")
printf '%s\n' "$dyn" | grep -q '(RUNPATH)' && fail "$bin has DT_RUNPATH: OpenBLAS would not find the sysroot's libgfortran"
printf '%s\n' "$dyn" | grep '(RPATH)' | grep -q "$root" || fail "$bin has no DT_RPATH into $root"
echo "sysroot_check: 1. $bin has DT_RPATH into the sysroot"

# 2. ldd: the sysroot's libraries from the sysroot, the rest from the C and compiler
# runtimes or CUDA
ldd "$bin" > "$work/ldd.txt" 2>&1 || fail "ldd $bin failed: $work/ldd.txt"
provided=""
while read -r name arrow path rest; do
    [ "$arrow" = "=>" ] || continue
    case $path in
    "$root"/*) provided="$provided $name" ;;
    */libcuda* | */libcudnn* | */libcublas* | */libnvrtc*) ;;
    *) case $name in
        linux-vdso* | ld-linux* | libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | libgomp.so* | \
            libgcc_s.so* | libstdc++.so* | libz.so* | libcheck* | libsubunit*)
            # libz: only Debian's own zlib is here too; it must come from the sysroot, checked below
            [ "${name#libz.so}" != "$name" ] && fail "libz.so.1 resolved to $path, not into $root"
            ;;
        *) fail "$name resolved to $path, outside the sysroot (ldd: $work/ldd.txt)" ;;
        esac ;;
    esac
done < "$work/ldd.txt"
for want in libopenblas.so.0 libgfortran.so.5 libquadmath.so.0 libpng16.so.16 libjpeg.so.62 libjansson.so.4 libz.so.1; do
    case " $provided " in *" $want "*) ;; *) fail "$want does not resolve into $root (ldd: $work/ldd.txt)" ;; esac
done
echo "sysroot_check: 2. ldd resolves$provided from the sysroot"

# 3. a run with this machine's copies hidden
if ! unshare --mount true 2> /dev/null; then
    echo "sysroot_check: 3. SKIPPED: unshare --mount is not permitted here, so this machine's own copies cannot be hidden"
    exit 0
fi
cfg=$work/net.cfg
cat > "$cfg" << 'EOF'
[net]
batch = 4
channels = 1
height = 8
width = 8
[train]
epochs = 1
learning_rate = 0.01
[data]
set = synthetic
train_size = 8
test_size = 4
classes = 3
[convolutional]
filters = 4
size = 3
pad = 1
[relu]
[connected]
output = 3
[softmax]
EOF
hide=""
multi=$(cc -print-multiarch 2> /dev/null || echo x86_64-linux-gnu)
for name in $provided; do
    for dir in "/usr/lib/$multi" "/lib/$multi" "/usr/lib/$multi/openblas-openmp" "/usr/lib/$multi/openblas-pthread"; do
        [ -e "$dir/$name" ] || continue
        real=$(readlink -f "$dir/$name")
        case " $hide " in *" $real "*) ;; *) hide="$hide $real" ;; esac
    done
done
# shellcheck disable=SC2016 # expanded by the inner shell
unshare --mount sh -c '
    bin=$1 cfg=$2
    shift 2
    for f in "$@"; do mount --bind /dev/null "$f" || exit 3; done
    env -u LD_LIBRARY_PATH "$bin" --version && \
        env -u LD_LIBRARY_PATH VDNN_CACHE=$(dirname "$cfg")/cache "$bin" train --no-save "$cfg" --device cpu --steps 1 --algo perf
' sh "$bin" "$cfg" $hide > "$work/run.log" 2>&1 && grep -q '^done: 1 step,' "$work/run.log" || fail "with this machine's copies hidden ($hide), the sysroot build does not run: $work/run.log"
echo "sysroot_check: 3. ran with this machine's copies hidden:$hide"
