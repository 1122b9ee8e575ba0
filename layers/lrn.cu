/* Local response normalisation across channels (CUDA half), as the CPU half:
 *
 *     y_c = x_c / s_c^beta,   s_c = k + alpha / size * sum_{c' = c - size/2}^{c + size/2} x_c'^2
 *
 * cuDNN's cross-channel LRN has this definition: a window of lrnN channels from
 * c - floor((lrnN - 1) / 2) to c + lrnN - 1 - that, which for our odd sizes is centred,
 * zero beyond the first and last channel, and alpha divided by the window width inside
 * the library. Its backward reads x, y and dy, which we keep (needs_input =
 * needs_output = 1). So cudnnLRNCrossChannelForward/Backward run the layer when its
 * parameters lie in cuDNN's ranges (lrnN in [1, 16], k >= 1e-5, beta >= 0.01). The CPU
 * accepts smaller k and beta (down to 0); such a layer runs own kernels, a thread per
 * element, which compute as the CPU does (windows summed in channel order, products
 * rounded before they are added). */
#include "vdnn/cuda_util.h"

#include <limits.h>
#include <stdlib.h>

#include "layers/lrn.h"

/* l->gpu, when cuDNN runs the layer */
typedef struct lrn_gpu {
    cudnnLRNDescriptor_t lrn;
    cudnnTensorDescriptor_t t;   /* (n, C, H, W), set per call */
} lrn_gpu;

static int cudnn_fits(const lrn_priv *p)
{
    return p->size >= CUDNN_LRN_MIN_N && p->size <= CUDNN_LRN_MAX_N &&
           (double)p->k >= CUDNN_LRN_MIN_K && (double)p->beta >= CUDNN_LRN_MIN_BETA;
}

extern "C" vdnn_status lrn_bind_cuda(layer *l, device *d)
{
    (void)d;
    const lrn_priv *p = (const lrn_priv *)l->priv;
    if (!cudnn_fits(p)) return VDNN_OK;
    lrn_gpu *g = (lrn_gpu *)calloc(1, sizeof *g);
    if (!g) return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory for its CUDA state", l->name);
    l->gpu = g;   /* the caller unbinds it on failure */
    CUDNN_TRY(cudnnCreateLRNDescriptor(&g->lrn));
    CUDNN_TRY(cudnnSetLRNDescriptor(g->lrn, (unsigned)p->size, (double)p->alpha, (double)p->beta,
                                    (double)p->k));
    CUDNN_TRY(cudnnCreateTensorDescriptor(&g->t));
    return VDNN_OK;
}

extern "C" void lrn_unbind_cuda(layer *l)
{
    lrn_gpu *g = (lrn_gpu *)l->gpu;
    if (!g) return;
    if (g->t) cudnnDestroyTensorDescriptor(g->t);
    if (g->lrn) cudnnDestroyLRNDescriptor(g->lrn);
    free(g);
    l->gpu = NULL;
}

/* ---- own kernels ---- */

/* The layer's constants, each computed on the host as lrn.c computes it. */
typedef struct lrn_consts {
    int chans, half;
    size_t hw;
    float k, alpha_n, beta, coef;   /* alpha_n = alpha / size, coef = 2 alpha beta / size */
} lrn_consts;

/* s from the sum of squares of a window, as lrn_scale. */
__device__ static float scale_of(const lrn_consts &q, float sum_sq)
{
    return __fadd_rn(q.k, __fmul_rn(q.alpha_n, sum_sq));
}

static __global__ void vdnn_lrn_forward_kernel(lrn_consts q, size_t n, const float *x, float *y)
{
    const ptrdiff_t hw = (ptrdiff_t)q.hw;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        const int ch = (int)((e / q.hw) % (size_t)q.chans);
        const int lo = max(0, ch - q.half) - ch, hi = min(q.chans - 1, ch + q.half) - ch;
        const float *xp = x + e;
        float sum_sq = 0.0f;
        for (int d = lo; d <= hi; d++) {
            const float v = xp[(ptrdiff_t)d * hw];
            sum_sq += __fmul_rn(v, v);
        }
        y[e] = xp[0] * powf(scale_of(q, sum_sq), -q.beta);
    }
}

/* dx at element e of channel ch, as lrn_grad_at: the scales of every channel in its
 * window, each from its own window. */
static __global__ void vdnn_lrn_backward_kernel(lrn_consts q, size_t n, const float *x, const float *y,
                                           const float *dy, float *dx)
{
    const ptrdiff_t hw = (ptrdiff_t)q.hw;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        const int ch = (int)((e / q.hw) % (size_t)q.chans);
        const float *xe = x + e, *ye = y + e, *dye = dy + e;
        float sq[2 * LRN_MAX_SIZE];
        const int lo2 = max(0, ch - 2 * q.half), hi2 = min(q.chans - 1, ch + 2 * q.half);
        for (int c2 = lo2; c2 <= hi2; c2++) {
            const float v = xe[(ptrdiff_t)(c2 - ch) * hw];
            sq[c2 - lo2] = __fmul_rn(v, v);
        }
        float acc = 0.0f, s_self = 1.0f;
        for (int c1 = max(0, ch - q.half); c1 <= min(q.chans - 1, ch + q.half); c1++) {
            float sum_sq = 0.0f;
            for (int c2 = max(0, c1 - q.half); c2 <= min(q.chans - 1, c1 + q.half); c2++)
                sum_sq += sq[c2 - lo2];
            const float s = scale_of(q, sum_sq);
            const ptrdiff_t off = (ptrdiff_t)(c1 - ch) * hw;
            acc += __fmul_rn(dye[off], ye[off]) / s;
            if (c1 == ch) s_self = s;
        }
        dx[e] = __fsub_rn(__fmul_rn(dye[0], powf(s_self, -q.beta)),
                          __fmul_rn(q.coef * xe[0], acc));
    }
}

static lrn_consts consts_of(const layer *l)
{
    const lrn_priv *p = (const lrn_priv *)l->priv;
    lrn_consts q;
    q.chans = l->in.c;
    q.half = p->size / 2;
    q.hw = (size_t)l->in.h * l->in.w;
    q.k = p->k;
    q.alpha_n = p->alpha / (float)p->size;
    q.beta = p->beta;
    q.coef = 2.0f * p->alpha * p->beta / (float)p->size;
    return q;
}

extern "C" vdnn_status lrn_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y)
{
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    lrn_gpu *g = (lrn_gpu *)l->gpu;
    if (g) {
        const float one = 1.0f, zero = 0.0f;
        const size_t per_item = shape_per_item(l->in), chunk = cuda_cudnn_chunk(l->in);
        for (size_t i0 = 0; i0 < (size_t)c->n; i0 += chunk) {
            const int items = (int)((size_t)c->n - i0 < chunk ? (size_t)c->n - i0 : chunk);
            const size_t o = i0 * per_item;
            CUDNN_TRY(cudnnSetTensor4dDescriptor(g->t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, items,
                                                 l->in.c, l->in.h, l->in.w));
            CUDNN_TRY(cudnnLRNCrossChannelForward(ctx->cudnn, g->lrn, CUDNN_LRN_CROSS_CHANNEL_DIM1,
                                                  &one, g->t, x + o, &zero, g->t, y + o));
        }
        return VDNN_OK;
    }
    const size_t n = (size_t)c->n * shape_per_item(l->in);
    vdnn_lrn_forward_kernel<<<cuda_blocks(n), CUDA_THREADS, 0, ctx->compute>>>(consts_of(l), n, x, y);
    CUDA_LAUNCH_CHECK();
    return VDNN_OK;
}

extern "C" vdnn_status lrn_backward_cuda(layer *l, const exec_ctx *c, const float *x,
                                         const float *y, const float *dy, float *dx)
{
    if (!dx) return VDNN_OK;
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    lrn_gpu *g = (lrn_gpu *)l->gpu;
    if (g) {
        const float one = 1.0f, zero = 0.0f;
        const size_t per_item = shape_per_item(l->in), chunk = cuda_cudnn_chunk(l->in);
        for (size_t i0 = 0; i0 < (size_t)c->n; i0 += chunk) {
            const int items = (int)((size_t)c->n - i0 < chunk ? (size_t)c->n - i0 : chunk);
            const size_t o = i0 * per_item;
            CUDNN_TRY(cudnnSetTensor4dDescriptor(g->t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, items,
                                                 l->in.c, l->in.h, l->in.w));
            CUDNN_TRY(cudnnLRNCrossChannelBackward(ctx->cudnn, g->lrn,
                                                   CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, g->t, y + o,
                                                   g->t, dy + o, g->t, x + o, &zero, g->t, dx + o));
        }
        return VDNN_OK;
    }
    const size_t n = (size_t)c->n * shape_per_item(l->in);
    vdnn_lrn_backward_kernel<<<cuda_blocks(n), CUDA_THREADS, 0, ctx->compute>>>(consts_of(l), n, x, y,
                                                                          dy, dx);
    CUDA_LAUNCH_CHECK();
    return VDNN_OK;
}
