/* [concat] (CUDA half): each input's block of every item is one strided copy
 * (cudaMemcpy2DAsync: a row per item); adding a slice into a gradient is a kernel. */
#include "vdnn/cuda_util.h"

#include "layers/concat.h"

static size_t slice_offset(const layer *l, int k)
{
    size_t offset = 0;
    for (int i = 0; i < k; i++) offset += shape_per_item(l->ins[i]);
    return offset;
}

/* dst[n * block + e] += src[n * pitch + e] for n < items, e < block. */
static __global__ void vdnn_add_slice_kernel(size_t items, size_t block, size_t pitch, const float *src, float *dst)
{
    const size_t count = items * block;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        dst[i] += src[(i / block) * pitch + i % block];
}

extern "C" vdnn_status concat_forward_cuda(layer *l, const exec_ctx *c, const float *const *x, float *y)
{
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    const size_t pitch = shape_per_item(l->out) * sizeof(float);
    for (int k = 0; k < l->ninputs; k++) {
        const size_t block = shape_per_item(l->ins[k]) * sizeof(float);
        CUDA_TRY(cudaMemcpy2DAsync(y + slice_offset(l, k), pitch, x[k], block, block, (size_t)c->n,
                                   cudaMemcpyDeviceToDevice, ctx->compute));
    }
    return VDNN_OK;
}

extern "C" vdnn_status concat_backward_cuda(layer *l, const exec_ctx *c, const float *const *x, const float *y,
                                            const float *dy, float *const *dx)
{
    (void)x;
    (void)y;
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    const size_t per_item = shape_per_item(l->out);
    for (int k = 0; k < l->ninputs; k++) {
        if (!dx[k]) continue;
        const size_t block = shape_per_item(l->ins[k]);
        const float *src = dy + slice_offset(l, k);
        if (c->accumulate_dx >> k & 1) {
            const size_t count = (size_t)c->n * block;
            vdnn_add_slice_kernel<<<cuda_blocks(count), CUDA_THREADS, 0, ctx->compute>>>((size_t)c->n, block, per_item, src,
                                                                                    dx[k]);
            CUDA_LAUNCH_CHECK();
        } else {
            CUDA_TRY(cudaMemcpy2DAsync(dx[k], block * sizeof(float), src, per_item * sizeof(float), block * sizeof(float),
                                       (size_t)c->n, cudaMemcpyDeviceToDevice, ctx->compute));
        }
    }
    return VDNN_OK;
}
