#!/bin/sh
# Checks that no include points up a floor (docs/design.md, "Floors"): vdnn/ includes
# only vdnn/; layers/ and data/ each only themselves and vdnn/; nets/ those three and
# itself; manager/ everything but tools/. Prints each include that breaks the rule as
# FILE:LINE: includes HEADER (floor) and exits 1 if there is one, else prints one line
# and exits 0. Run from the repository root (tests/test_build.c does).
set -u
floor() {
    case $1 in
    vdnn) echo 0 ;; layers | data) echo 1 ;; nets) echo 2 ;; manager) echo 3 ;; tools) echo 4 ;; *) echo "" ;;
    esac
}
bad=0; files=0
for dir in vdnn layers data nets manager; do
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
if [ "$bad" -ne 0 ]; then
    echo "check_floors: includes point up a floor (docs/design.md, \"Floors\")"
    exit 1
fi
echo "check_floors: $files files, every include points down or across its own folder"
