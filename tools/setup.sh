#!/bin/sh
# Installs what vdnn needs on Debian 12 (build tools, OpenBLAS, libpng, libjpeg-turbo, Jansson for
# every JSON it writes and reads, zlib, Check, Open MPI, the Fashion-MNIST data set,
# gnuplot for `vdnn sweep`'s plots, Python with NumPy for tools/ckpt_read.py, clang
# with libFuzzer and its OpenMP runtime for `make fuzz`, and for ONNX protobuf-c, ONNX's
# own onnx.proto and test data, and Python's onnx, with which the tests check vdnn's
# exports, and oneDNN, whose convolutions the CPU backend offers beside its own).
# bench/onnx.sh and bench/compare_cpu.sh also need python3-torch (and python3-torchvision). Uses sudo
# when not run as root. Safe to run twice.
set -eu
pkgs="build-essential pkg-config check libopenblas-dev libopenblas0-openmp libopenblas-openmp-dev
      libpng-dev libjpeg62-turbo-dev libjansson-dev zlib1g-dev dataset-fashion-mnist gnuplot-nox python3-numpy libopenmpi-dev openmpi-bin
      clang-14 libclang-rt-14-dev libomp-14-dev
      protobuf-c-compiler libprotobuf-c-dev libonnx-dev libonnx-testdata python3-onnx
      libdnnl-dev"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
as_root=""
[ "$(id -u)" -ne 0 ] && as_root="sudo"
export DEBIAN_FRONTEND=noninteractive
$as_root apt-get update -q
# shellcheck disable=SC2086
$as_root apt-get install -y -q --no-install-recommends $missing
