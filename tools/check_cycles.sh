#!/bin/sh
# Checks that no source files call each other in a circle (docs/design.md, "Floors"):
# file A calls a function defined in file B, B (or a file B calls, and so on) calls back
# into A. The calls are read from the compiled objects with nm: the library's and the
# program's, in BUILD/obj (default build), for every source that exists (objects left
# behind by moved files do not count; the CUDA halves where the build has them). Prints each circle as its files, one line each,
# and exits 1 if there is one, else prints one line and exits 0. Run from the
# repository root after `make` (tests/test_build.c does).
set -u
build=${1:-build}
cuda=0
grep -q -- '-DVDNN_CUDA' "$build/build-config" 2>/dev/null && cuda=1
list=$(mktemp)
trap 'rm -f "$list"' EXIT
for src in vdnn/*.c vdnn/*.cu layers/*.c layers/*.cu nets/*.c nets/*.cu nets/*/*.c data/*.c manager/*.c onnx/*.c tools/*.c; do
    [ -f "$src" ] || continue
    case $src in *.cu) [ "$cuda" = 1 ] || continue ;; esac
    case $src in *.cu) obj=$build/obj/${src%.cu}.cu.o ;; *) obj=$build/obj/${src%.c}.o ;; esac
    if [ ! -f "$obj" ]; then
        echo "check_cycles: $obj is missing (run make first)"
        exit 2
    fi
    nm "$obj" | awk -v f="$src" 'NF == 3 && $2 ~ /^[TDBR]$/ { print f, "def", $3 } NF == 2 && $1 == "U" { print f, "use", $2 }'
done > "$list"
awk '
$2 == "def" { owner[$3] = $1; files[$1] = 1; next }
$2 == "use" { use[NR] = $1 " " $3; files[$1] = 1 }
END {
    n = 0
    for (f in files) { id[f] = n; name[n] = f; n++ }
    for (k in use) {
        split(use[k], p, " ")
        if (!(p[2] in owner) || owner[p[2]] == p[1]) continue
        r[id[p[1]], id[owner[p[2]]]] = 1
    }
    for (k = 0; k < n; k++)
        for (i = 0; i < n; i++) {
            if (!((i, k) in r)) continue
            for (j = 0; j < n; j++)
                if ((k, j) in r) r[i, j] = 1
        }
    bad = 0
    for (i = 0; i < n; i++) {
        if (done[i]) continue
        line = ""
        for (j = 0; j < n; j++)
            if (j != i && ((i, j) in r) && ((j, i) in r)) { line = line " " name[j]; done[j] = 1 }
        if (line != "") { print "circle: " name[i] line; bad = 1 }
    }
    if (bad) { print "check_cycles: source files call each other in a circle (docs/design.md, \"Floors\")"; exit 1 }
    print "check_cycles: " n " files, no circle of calls"
}' "$list"
