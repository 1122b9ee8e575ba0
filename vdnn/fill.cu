/* Random fills on the GPU: the profiler's input and gradient buffers, filled where they
 * live instead of drawn on the host and copied (VGG-16 at batch 128 draws billions). */
#include "vdnn/cuda_util.h"
#include "vdnn/rng.h"

static __global__ void vdnn_fill_normal_kernel(float *dst, size_t count, uint64_t seed)
{
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < count; k += (size_t)gridDim.x * blockDim.x)
        dst[k] = rng_normal_at(seed, k);
}

extern "C" vdnn_status cuda_fill_normal(cudaStream_t stream, float *dst, size_t count, uint64_t seed)
{
    vdnn_fill_normal_kernel<<<cuda_blocks(count), CUDA_THREADS, 0, stream>>>(dst, count, seed);
    CUDA_LAUNCH_CHECK();
    return VDNN_OK;
}
