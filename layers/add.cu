/* [add] (CUDA half) and the gradient sum of the iteration: own kernels that sum in the
 * CPU half's order, so both devices give the same bits. */
#include "vdnn/cuda_util.h"

#include "layers/add.h"

/* The input pointers of one call, passed by value. */
struct add_inputs {
    const float *x[LAYER_MAX_INPUTS];
    int count;
};

static __global__ void vdnn_add_kernel(size_t count, add_inputs in, float *y)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < count; e += (size_t)gridDim.x * blockDim.x) {
        float acc = in.x[0][e];
        for (int k = 1; k < in.count; k++) acc += in.x[k][e];
        y[e] = acc;
    }
}

static __global__ void vdnn_accumulate_kernel(size_t count, const float *src, float *dst)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < count; e += (size_t)gridDim.x * blockDim.x)
        dst[e] += src[e];
}

extern "C" vdnn_status add_accumulate_cuda(device *d, float *dst, const float *src, size_t count)
{
    cuda_ctx *ctx = device_cuda_ctx(d);
    vdnn_accumulate_kernel<<<cuda_blocks(count), CUDA_THREADS, 0, ctx->compute>>>(count, src, dst);
    CUDA_LAUNCH_CHECK();
    return VDNN_OK;
}

extern "C" vdnn_status add_forward_cuda(layer *l, const exec_ctx *c, const float *const *x, float *y)
{
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    const size_t count = (size_t)c->n * shape_per_item(l->out);
    add_inputs in;
    in.count = l->ninputs;
    for (int k = 0; k < l->ninputs; k++) in.x[k] = x[k];
    vdnn_add_kernel<<<cuda_blocks(count), CUDA_THREADS, 0, ctx->compute>>>(count, in, y);
    CUDA_LAUNCH_CHECK();
    return VDNN_OK;
}

extern "C" vdnn_status add_backward_cuda(layer *l, const exec_ctx *c, const float *const *x, const float *y,
                                         const float *dy, float *const *dx)
{
    (void)x;
    (void)y;
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    const size_t count = (size_t)c->n * shape_per_item(l->out);
    for (int k = 0; k < l->ninputs; k++) {
        if (!dx[k] || (dx[k] == dy && !(c->accumulate_dx >> k & 1))) continue;
        if (c->accumulate_dx >> k & 1) {
            vdnn_status st = add_accumulate_cuda(c->dev, dx[k], dy, count);
            if (st != VDNN_OK) return st;
        } else {
            CUDA_TRY(cudaMemcpyAsync(dx[k], dy, count * sizeof *dy, cudaMemcpyDeviceToDevice, ctx->compute));
        }
    }
    return VDNN_OK;
}
