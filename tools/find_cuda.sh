#!/bin/sh
# Finds nvcc, the CUDA runtime, cuDNN and cuBLAS for the Makefile. `find_cuda.sh nvcc`
# prints nvcc's path, `inc` the -I flags, `libs` the libraries to link with their
# rpaths; each prints nothing when CUDA is off or a part is missing (the build is then
# CPU-only), and `nvcc` says why on stderr. `nccl` prints NCCL's -I flag, rpath and
# library, or nothing: it is optional, and not linked into vdnn yet (data-parallel
# training will use it). Where it looks, first hit wins:
#   nvcc     $CUDA_HOME/bin, the nvcc on PATH, /usr/local/cuda/bin
#   cuDNN    $CUDNN_HOME, the CUDA folder, /usr (Debian/Ubuntu packages), and the
#            nvidia-* Python wheels (site-packages/nvidia/cudnn, as PyTorch installs them)
#   cuBLAS   the CUDA folder, then the wheels (nvidia/cublas up to CUDA 12, nvidia/cu13
#            from CUDA 13 on)
#   runtime  the CUDA folder, then the wheels (nvidia/cuda_runtime, nvidia/cu13)
#   NCCL     $NCCL_HOME, the CUDA folder, /usr, then the wheels (nvidia/nccl)
# CUDA=0 turns the search off.
field=${1:-nvcc}
[ "${CUDA:-auto}" = 0 ] && exit 0
say() {
    [ "$field" = nvcc ] && echo "cuda: $*; building the CPU backend only" >&2
    exit 0
}
arch=$(uname -m)-linux
multi=$(cc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
wheels=""
for py in python3 python; do
    w=$($py -c 'import nvidia; print(" ".join(nvidia.__path__))' 2>/dev/null) && { wheels=$w; break; }
done
home=${CUDA_HOME:-}
if [ -z "$home" ]; then
    nv=$(command -v nvcc 2>/dev/null || true)
    if [ -n "$nv" ]; then home=$(dirname "$(dirname "$nv")"); else home=/usr/local/cuda; fi
fi
[ -x "$home/bin/nvcc" ] || say "no nvcc in $home/bin (set CUDA_HOME)"
# first_dir FILE DIR...: the first DIR holding FILE (a glob allowed)
first_dir() {
    f=$1; shift
    for d in "$@"; do
        for hit in "$d"/$f; do [ -e "$hit" ] && { echo "$d"; return; }; done
    done
}
# first_file GLOB DIR: the unversioned library if present, else the first versioned one
first_file() {
    for hit in "$2"/$1.so "$2"/$1.so.[0-9]*; do [ -e "$hit" ] && { echo "$hit"; return; }; done
}
wd() { for w in $wheels; do echo "$w/$1"; done; }
cudnn_home=${CUDNN_HOME:-}
cuda_inc=$(first_dir cuda_runtime.h "$home/include" "$home/targets/$arch/include" $(wd cu13/include))
[ -n "$cuda_inc" ] || say "no cuda_runtime.h under $home"
cudart_dir=$(first_dir 'libcudart.so*' "$home/lib64" "$home/lib" "$home/targets/$arch/lib" $(wd cuda_runtime/lib) \
    $(wd cu13/lib))
[ -n "$cudart_dir" ] || say "no libcudart under $home"
cudnn_inc=$(first_dir cudnn.h ${cudnn_home:+"$cudnn_home/include"} "$cuda_inc" /usr/include "/usr/include/$multi" $(wd cudnn/include))
[ -n "$cudnn_inc" ] || say "no cudnn.h (set CUDNN_HOME, or install cuDNN 9)"
cudnn_dir=$(first_dir 'libcudnn.so*' ${cudnn_home:+"$cudnn_home/lib64" "$cudnn_home/lib"} "$cudart_dir" "/usr/lib/$multi" $(wd cudnn/lib))
[ -n "$cudnn_dir" ] || say "no libcudnn (set CUDNN_HOME, or install cuDNN 9)"
cublas_inc=$(first_dir cublas_v2.h "$cuda_inc" $(wd cublas/include) $(wd cu13/include))
cublas_dir=$(first_dir 'libcublas.so*' "$cudart_dir" $(wd cublas/lib) $(wd cu13/lib))
[ -n "$cublas_inc" ] && [ -n "$cublas_dir" ] || say "no cuBLAS (cublas_v2.h and libcublas) under $home"
major=$(sed -n 's/^#define CUDNN_MAJOR  *\([0-9]*\).*/\1/p' "$cudnn_inc/cudnn_version.h" 2>/dev/null)
[ "${major:-0}" -ge 8 ] 2>/dev/null || say "cuDNN in $cudnn_inc is older than 8 (found '${major:-?}')"
incs=""
for d in "$cuda_inc" "$cudnn_inc" "$cublas_inc"; do
    case " $incs " in *" -I$d "*) ;; *) incs="$incs -I$d" ;; esac
done
libs=""
for d in "$cudart_dir" "$cudnn_dir" "$cublas_dir"; do
    case " $libs " in *" -Wl,-rpath,$d "*) ;; *) libs="$libs -Wl,-rpath,$d" ;; esac
done
libs="$libs $(first_file libcudart "$cudart_dir") $(first_file libcudnn "$cudnn_dir") $(first_file libcublas "$cublas_dir")"
nccl_home=${NCCL_HOME:-}
nccl_inc=$(first_dir nccl.h ${nccl_home:+"$nccl_home/include"} "$cuda_inc" /usr/include "/usr/include/$multi" \
    $(wd nccl/include))
nccl_dir=$(first_dir 'libnccl.so*' ${nccl_home:+"$nccl_home/lib64" "$nccl_home/lib"} "$cudart_dir" "/usr/lib/$multi" \
    $(wd nccl/lib))
nccl=""
[ -n "$nccl_inc" ] && [ -n "$nccl_dir" ] && nccl="-I$nccl_inc -Wl,-rpath,$nccl_dir $(first_file libnccl "$nccl_dir")"
case $field in
nvcc) echo "$home/bin/nvcc" ;;
inc) echo "$incs" ;;
libs) echo "$libs" ;;
nccl) echo "$nccl" ;;
esac
