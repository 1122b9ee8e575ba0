#!/bin/sh
# Checks that no include points up a floor (docs/design.md, "Floors"): vdnn/ includes
# only vdnn/; layers/ and data/ each only themselves and vdnn/; nets/ those three and
# itself; manager/ and onnx/ each themselves and the floors below; tools/ everything.
# And what includes cannot show: vdnn/ names no
# `struct layer`, and no code outside vdnn/ asks a device its kind (device_get_kind,
# DEVICE_CPU, DEVICE_CUDA) or names one but to create a simulated device
# (`.kind = DEVICE_SIM`). Prints each line that breaks a rule as FILE:LINE: why and
# exits 1 if there is one, else prints one line and exits 0. Run from the repository
# root (tests/test_build.c does).
set -u
floor() {
    case $1 in
    vdnn) echo 0 ;; layers | data) echo 1 ;; nets) echo 2 ;; manager | onnx) echo 3 ;; tools) echo 4 ;; *) echo "" ;;
    esac
}
bad=0; files=0
for dir in vdnn layers data nets manager onnx; do
    mine=$(floor "$dir")
    for f in "$dir"/*.c "$dir"/*.h "$dir"/*.cu "$dir"/*/*.c "$dir"/*/*.h "$dir"/*/*.cu; do
        [ -f "$f" ] || continue
        files=$((files + 1))
        out=$(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[a-z_]*/' "$f" | while IFS= read -r line; do
            n=${line%%:*}
            target=$(printf '%s\n' "$line" | sed -E 's/.*include[[:space:]]*"([a-z_]*)\/.*/\1/')
            header=$(printf '%s\n' "$line" | sed -E 's/.*include[[:space:]]*"([^"]*)".*/\1/')
            theirs=$(floor "$target")
            [ -z "$theirs" ] && continue
            if [ "$theirs" -gt "$mine" ] || { [ "$theirs" -eq "$mine" ] && [ "$target" != "$dir" ]; }; then
                echo "$f:$n: includes $header ($target/ is not below $dir/)"
            fi
        done)
        [ -n "$out" ] && { printf '%s\n' "$out"; bad=1; }
    done
done
for f in vdnn/*.c vdnn/*.h vdnn/*.cu; do
    [ -f "$f" ] || continue
    out=$(grep -n 'struct layer\b' "$f" | sed "s|^\([0-9]*\):.*|$f:\1: names struct layer (vdnn/ knows no layers)|")
    [ -n "$out" ] && { printf '%s\n' "$out"; bad=1; }
done
for dir in layers data nets manager onnx tools; do
    for f in "$dir"/*.c "$dir"/*.h "$dir"/*.cu "$dir"/*/*.c "$dir"/*/*.h "$dir"/*/*.cu; do
        [ -f "$f" ] || continue
        out=$(grep -nE 'device_get_kind|DEVICE_(CPU|CUDA)\b|DEVICE_SIM\b' "$f" | grep -vE '\.kind = DEVICE_SIM\b' |
            sed "s|^\([0-9]*\):.*|$f:\1: asks a device its kind (ask it a question: vdnn/device.h)|")
        [ -n "$out" ] && { printf '%s\n' "$out"; bad=1; }
    done
done
if [ "$bad" -ne 0 ]; then
    echo "check_floors: the floors are broken (docs/design.md, \"Floors\")"
    exit 1
fi
echo "check_floors: $files files, every include points down or across its own folder, no device kind asked above vdnn/"
