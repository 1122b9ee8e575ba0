/* The CUDA device's context and the checked wrappers for CUDA, cuDNN and cuBLAS calls.
 *
 * Included only by code built with CUDA (VDNN_CUDA): the device (vdnn/device_cuda.c),
 * the CUDA halves of the layers (the .cu files in layers/) and the solver (nets/solver.cu). It can be
 * included from C and from CUDA C++; the project's headers it pulls in are C.
 *
 * Every CUDA, cuDNN and cuBLAS call goes through CUDA_TRY, CUDNN_TRY or CUBLAS_TRY,
 * which return a vdnn_status from the enclosing function with a message that names
 * file:line, the call, the library's own message and a hint on what to do. Kernel
 * launches are followed by CUDA_LAUNCH_CHECK(). */
#ifndef VDNN_CUDA_UTIL_H
#define VDNN_CUDA_UTIL_H

#include <limits.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "vdnn/device.h"
#include "vdnn/shape.h"
#include "vdnn/status.h"

/* Bytes of pinned host memory every CUDA device keeps for small results (the loss). */
#define CUDA_SCRATCH_BYTES 4096

typedef struct cuda_ctx {
    int index;                 /* the GPU's ordinal */
    cudaStream_t compute;      /* layers, the solver, cuDNN and cuBLAS */
    cudaStream_t memory;       /* the memory manager's copies */
    cudnnHandle_t cudnn;       /* bound to `compute` */
    cublasHandle_t cublas;     /* bound to `compute` */
    int tf32;                  /* math mode: 0 strict FP32 (FMA only), 1 TF32 tensor cores allowed */
    void *pinned_scratch;      /* host, pinned, CUDA_SCRATCH_BYTES */
    int sm_count;              /* multiprocessors, for grid sizes */
} cuda_ctx;

/* The context of a CUDA device, or NULL for any other device. */
cuda_ctx *device_cuda_ctx(device *d);

/* Failure messages for the wrappers below: "file:line: call failed: message (hint)". */
vdnn_status cuda_fail_rt(int err, const char *call, const char *file, int line);
vdnn_status cuda_fail_dnn(int err, const char *call, const char *file, int line);
vdnn_status cuda_fail_blas(int err, const char *call, const char *file, int line);

#define CUDA_TRY(call)                                                                          \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess) return cuda_fail_rt((int)e_, #call, __FILE__, __LINE__);        \
    } while (0)
#define CUDNN_TRY(call)                                                                         \
    do {                                                                                         \
        cudnnStatus_t e_ = (call);                                                               \
        if (e_ != CUDNN_STATUS_SUCCESS) return cuda_fail_dnn((int)e_, #call, __FILE__, __LINE__); \
    } while (0)
#define CUBLAS_TRY(call)                                                                        \
    do {                                                                                         \
        cublasStatus_t e_ = (call);                                                              \
        if (e_ != CUBLAS_STATUS_SUCCESS) return cuda_fail_blas((int)e_, #call, __FILE__, __LINE__); \
    } while (0)
/* After a kernel launch: a bad launch configuration shows here, not later. */
#define CUDA_LAUNCH_CHECK() CUDA_TRY(cudaGetLastError())

/* `count` standard normal floats into dst (device memory), rng_normal_at(seed, k) for
 * element k, by a kernel on `stream` (vdnn/fill.cu). */
vdnn_status cuda_fill_normal(cudaStream_t stream, float *dst, size_t count, uint64_t seed);

/* Threads per block of the project's elementwise kernels, and a grid for `count`
 * elements (grid-stride loops cover the rest). */
#define CUDA_THREADS 256
static inline unsigned cuda_blocks(size_t count)
{
    size_t b = (count + CUDA_THREADS - 1) / CUDA_THREADS;
    return b < 1 ? 1u : b > 65535u * 8u ? 65535u * 8u : (unsigned)b;
}

/* A cuDNN tensor holds at most 2^31 - 1 elements: calls on a tensor of shape `in` go
 * to cuDNN in chunks of this many items. */
static inline size_t cuda_cudnn_chunk(shape4 in)
{
    const size_t per_item = shape_per_item(in);
    return per_item < (size_t)INT_MAX ? (size_t)INT_MAX / per_item : 1;
}

#ifdef __cplusplus
}
#endif

#endif
