#!/bin/sh
# A folder of the C libraries vdnn builds against (OpenBLAS with the libgfortran and
# libquadmath it loads, libpng, libjpeg-turbo, Jansson, zlib, Check) and make, from Debian 12's packages, for a
# machine that cannot install them: the lent GPU machines have no package registry.
#   sh tools/sysroot.sh fetch DIR        on a Debian 12 machine: the .deb files into DIR
#   sh tools/sysroot.sh unpack DIR ROOT  on the other machine: unpacks them into ROOT
# then build with `make SYSROOT=ROOT` (ROOT/usr/bin/make if the machine has no make).
# The libraries need glibc 2.36 or newer (Debian 12, Ubuntu 23.04 and later).
set -eu
PKGS="libopenblas0-openmp libopenblas-openmp-dev libopenblas-dev libgfortran5 libquadmath0 libpng-dev libpng16-16
libjpeg62-turbo libjpeg62-turbo-dev libjansson4 libjansson-dev zlib1g zlib1g-dev check libsubunit-dev libsubunit0 make"
case "${1:-}" in
fetch)
    mkdir -p "$2"
    cd "$2"
    # shellcheck disable=SC2086
    apt-get download $PKGS
    ;;
unpack)
    mkdir -p "$3"
    root=$(cd "$3" && pwd)
    for deb in "$2"/*.deb; do dpkg -x "$deb" "$root"; done
    # Debian's development links may be absolute (libz.so -> /lib/...): point them into ROOT.
    find "$root" -type l | while read -r link; do
        target=$(readlink "$link")
        case "$target" in /*) [ -e "$root$target" ] && ln -sf "$root$target" "$link" ;; esac
    done
    echo "sysroot ready: make SYSROOT=$root"
    ;;
*)
    echo "usage: sh tools/sysroot.sh fetch DIR | unpack DIR ROOT" >&2
    exit 2
    ;;
esac
