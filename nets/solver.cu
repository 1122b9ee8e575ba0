/* The SGD update on the GPU (see solver.h for the formula): one elementwise kernel per
 * parameter tensor on the compute stream, the same arithmetic as the CPU's loop. The CPU
 * build (ISO C) does not fuse multiply-adds, and a swapped layer is updated on the host
 * while the others are updated here, so every operation is rounded on its own (the _rn
 * intrinsics, which nvcc never fuses): swapping then changes no bit. */
#include "vdnn/cuda_util.h"
#include "nets/solver.h"

__global__ static void vdnn_sgd_kernel(float *w, const float *g, float *v, size_t count, float lr, float mom, float wd)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        float gi = __fadd_rn(g[i], __fmul_rn(wd, w[i]));
        v[i] = __fadd_rn(__fmul_rn(mom, v[i]), gi);
        w[i] = __fsub_rn(w[i], __fmul_rn(lr, v[i]));
    }
}

extern "C" vdnn_status solver_update_cuda(device *d, param *p, float lr, float momentum, float weight_decay)
{
    cuda_ctx *c = device_cuda_ctx(d);
    size_t count = shape_count(p->shape);
    if (!count) return VDNN_OK;
    vdnn_sgd_kernel<<<cuda_blocks(count), CUDA_THREADS, 0, c->compute>>>(p->value, p->grad, p->momentum, count, lr,
                                                                    momentum, weight_decay);
    CUDA_LAUNCH_CHECK();
    return VDNN_OK;
}
