/* Inverted dropout (CUDA half): an own kernel, not cuDNN's dropout.
 *
 * cuDNN's dropout draws its mask from RNG state that advances with each call and keeps
 * the mask in a reserve space between forward and backward: a recomputed forward would
 * get a fresh mask, and an item's mask would depend on how the mini-batch was split.
 * Here, as on the CPU, element e of item i is kept iff
 *     rng_u01(rng_hash(layer_seed, step, (item_offset + i) * per_item + e)) >= p
 * with the very same hash (vdnn/rng.h, compiled for the device too), so masks are
 * bit-identical to the CPU's, stateless, and regenerated in backward. */
#include "vdnn/cuda_util.h"

#include "layers/dropout.h"
#include "vdnn/rng.h"

/* out = in * scale where kept, 0 elsewhere, over count elements whose first has mask
 * counter `first`. */
static __global__ void vdnn_dropout_kernel(size_t count, uint64_t seed, uint64_t step, uint64_t first,
                                      float p, float scale, const float *in, float *out)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < count;
         e += (size_t)gridDim.x * blockDim.x) {
        const bool keep = rng_u01(rng_hash(seed, step, first + (uint64_t)e)) >= p;
        out[e] = keep ? in[e] * scale : 0.0f;
    }
}

/* The mask applied to in (training), or in copied (evaluation), as dropout_forward. */
static vdnn_status apply(layer *l, const exec_ctx *c, const float *in, float *out)
{
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    const size_t count = (size_t)c->n * shape_per_item(l->in);
    if (!c->train) {
        if (out != in)
            CUDA_TRY(cudaMemcpyAsync(out, in, count * sizeof *out, cudaMemcpyDeviceToDevice,
                                     ctx->compute));
        return VDNN_OK;
    }
    const float p = ((const dropout_priv *)l->priv)->probability;
    const float scale = 1.0f / (1.0f - p);
    const uint64_t seed = rng_hash(c->seed, DROPOUT_TAG, (uint64_t)l->index);
    const uint64_t first = (uint64_t)c->item_offset * shape_per_item(l->in);
    vdnn_dropout_kernel<<<cuda_blocks(count), CUDA_THREADS, 0, ctx->compute>>>(count, seed, c->step,
                                                                         first, p, scale, in, out);
    CUDA_LAUNCH_CHECK();
    return VDNN_OK;
}

extern "C" vdnn_status dropout_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y)
{
    return apply(l, c, x, y);
}

extern "C" vdnn_status dropout_backward_cuda(layer *l, const exec_ctx *c, const float *x,
                                             const float *y, const float *dy, float *dx)
{
    (void)x;
    (void)y;
    if (!dx) return VDNN_OK;
    return apply(l, c, dy, dx);
}
