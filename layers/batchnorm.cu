/* Batch normalisation (CUDA half), per channel over (N, H, W), as the CPU half.
 *
 * cuDNN's spatial mode has our contract: in training it normalises with the batch mean
 * and biased variance and updates running = (1 - factor) running + factor batch with the
 * unbiased variance, so factor = momentum; in evaluation it normalises with the running
 * estimates; its backward, given no saved statistics, recomputes them from x (our
 * needs_input = 1, no state kept between passes). So:
 *  - training forward: cudnnBatchNormalizationForwardTraining. A recomputing forward
 *    makes the very same call with factor 0: the batch statistics come from the same
 *    code on the same x, so y is bit for bit the first forward's (policy invariance),
 *    and running = 1 * running + 0 * batch leaves the running statistics as they are.
 *    Passing no running tensors would leave them untouched too, but may take another
 *    path inside cuDNN, with no promise of the same bits;
 *  - evaluation forward: cudnnBatchNormalizationForwardInference;
 *  - training backward: cudnnBatchNormalizationBackward (betaParamDiff = 1 accumulates).
 * Own kernels, one block per channel summing in double in a fixed order as the CPU does,
 * cover what cuDNN does not: backward in evaluation (the statistics are constants, which
 * cuDNN's backward cannot express), backward without dx (cuDNN always writes it),
 * training with a single value per channel (N*H*W = 1: the unbiased variance divides by
 * zero, where the CPU uses the biased 0), and calls with more elements than a cuDNN
 * tensor holds. They also run every call on a deterministic device (the default):
 * cuDNN does not document its batch norm as bit-reproducible, and at large N*H*W its
 * reductions may split across blocks in an order that varies, while policy invariance
 * needs the very same bits from every run. With --nondeterministic, cuDNN's (faster)
 * batch norm runs. tests/test_cuda.c checks both at a shape large enough to tell. */
#include "vdnn/cuda_util.h"

#include <limits.h>
#include <stdlib.h>

#include "layers/batchnorm.h"

#define BN_THREADS 256   /* per block (one block per channel); a power of 2 */

/* l->gpu */
typedef struct bn_gpu {
    cudnnTensorDescriptor_t x;    /* (n, C, H, W), set per call */
    cudnnTensorDescriptor_t ch;   /* (1, C, 1, 1): gamma, beta, the running statistics */
} bn_gpu;

extern "C" vdnn_status bn_bind_cuda(layer *l, device *d)
{
    (void)d;
    const bn_priv *p = (const bn_priv *)l->priv;
    if ((double)p->eps < CUDNN_BN_MIN_EPSILON)
        return vdnn_fail(VDNN_EINVAL, "%s: eps %g is below cuDNN's minimum %g", l->name, p->eps,
                         (double)CUDNN_BN_MIN_EPSILON);
    bn_gpu *g = (bn_gpu *)calloc(1, sizeof *g);
    if (!g) return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory for its CUDA state", l->name);
    l->gpu = g;   /* the caller unbinds it on failure */
    CUDNN_TRY(cudnnCreateTensorDescriptor(&g->x));
    CUDNN_TRY(cudnnCreateTensorDescriptor(&g->ch));
    CUDNN_TRY(
        cudnnSetTensor4dDescriptor(g->ch, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, l->in.c, 1, 1));
    return VDNN_OK;
}

extern "C" void bn_unbind_cuda(layer *l)
{
    bn_gpu *g = (bn_gpu *)l->gpu;
    if (!g) return;
    if (g->x) cudnnDestroyTensorDescriptor(g->x);
    if (g->ch) cudnnDestroyTensorDescriptor(g->ch);
    free(g);
    l->gpu = NULL;
}

/* ---- own kernels: one block per channel, every sum in double in a fixed order ---- */

/* The geometry of one call: x (n, c, hw). */
typedef struct bn_geom {
    int n, c;
    size_t hw;
} bn_geom;

/* Offset of the e-th value of channel ch, e in [0, n*hw), items first. */
__device__ static size_t chan_at(const bn_geom &g, int ch, size_t e)
{
    const size_t i = e / g.hw;
    return (i * g.c + ch) * g.hw + (e - i * g.hw);
}

/* The block's total of v, through s (BN_THREADS doubles); every thread gets it. */
__device__ static double block_sum(double v, double *s)
{
    const int t = threadIdx.x;
    s[t] = v;
    __syncthreads();
    for (int k = BN_THREADS / 2; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    const double total = s[0];
    __syncthreads();   /* s is reused by the next sum */
    return total;
}

/* The statistics channel ch is normalised with: the batch's (two-pass mean and biased
 * variance) or the running estimates, as batch_stats and running_stats on the CPU. */
typedef struct bn_chan { double mean, var, inv_std; } bn_chan;

__device__ static bn_chan chan_stats(const bn_geom &g, int ch, const float *x, int train,
                                     const float *rm, const float *rv, float eps, double *s)
{
    bn_chan r;
    if (!train) {
        r.mean = rm[ch];
        r.var = rv[ch];
        r.inv_std = 1.0 / sqrt(r.var + eps);
        return r;
    }
    const size_t m = (size_t)g.n * g.hw;
    double sum = 0.0, sq = 0.0;
    for (size_t e = threadIdx.x; e < m; e += BN_THREADS) sum += x[chan_at(g, ch, e)];
    r.mean = block_sum(sum, s) / (double)m;
    for (size_t e = threadIdx.x; e < m; e += BN_THREADS) {
        const double dv = x[chan_at(g, ch, e)] - r.mean;
        sq += dv * dv;
    }
    r.var = block_sum(sq, s) / (double)m;
    r.inv_std = 1.0 / sqrt(r.var + eps);
    return r;
}

/* bn_forward of the CPU half; update: fold the batch statistics into the running ones. */
static __global__ void vdnn_bn_forward_kernel(bn_geom g, const float *x, float *y, const float *gamma,
                                         const float *beta, float *rm, float *rv, float eps,
                                         float momentum, int train, int update)
{
    __shared__ double s[BN_THREADS];
    const size_t m = (size_t)g.n * g.hw;
    for (int ch = blockIdx.x; ch < g.c; ch += gridDim.x) {
        const bn_chan st = chan_stats(g, ch, x, train, rm, rv, eps, s);
        if (train && update && threadIdx.x == 0) {
            const double mom = momentum, count = (double)m;
            const double unbiased = count > 1.0 ? st.var * count / (count - 1.0) : st.var;
            rm[ch] = (float)((1.0 - mom) * rm[ch] + mom * st.mean);
            rv[ch] = (float)((1.0 - mom) * rv[ch] + mom * unbiased);
        }
        const double scale = gamma[ch] * st.inv_std, shift = beta[ch];
        for (size_t e = threadIdx.x; e < m; e += BN_THREADS) {
            const size_t o = chan_at(g, ch, e);
            y[o] = (float)((x[o] - st.mean) * scale + shift);
        }
    }
}

/* bn_backward of the CPU half: dgamma, dbeta (overwritten or accumulated) and, when dx is
 * not NULL, dx. */
static __global__ void vdnn_bn_backward_kernel(bn_geom g, const float *x, const float *dy, float *dx,
                                          const float *gamma, float *dgamma, float *dbeta,
                                          const float *rm, const float *rv, float eps, int train,
                                          int accumulate)
{
    __shared__ double s[BN_THREADS];
    const size_t m = (size_t)g.n * g.hw;
    const double count = (double)m;
    for (int ch = blockIdx.x; ch < g.c; ch += gridDim.x) {
        const bn_chan st = chan_stats(g, ch, x, train, rm, rv, eps, s);
        double a = 0.0, b = 0.0;
        for (size_t e = threadIdx.x; e < m; e += BN_THREADS) {
            const size_t o = chan_at(g, ch, e);
            a += dy[o];
            b += dy[o] * ((x[o] - st.mean) * st.inv_std);
        }
        const double sum_dy = block_sum(a, s), sum_dy_xhat = block_sum(b, s);
        if (threadIdx.x == 0) {
            dgamma[ch] = (float)(accumulate ? dgamma[ch] + sum_dy_xhat : sum_dy_xhat);
            dbeta[ch] = (float)(accumulate ? dbeta[ch] + sum_dy : sum_dy);
        }
        if (!dx) continue;
        const double gi = gamma[ch] * st.inv_std;
        const double mean_dy = train ? sum_dy / count : 0.0;
        const double mean_dy_xhat = train ? sum_dy_xhat / count : 0.0;
        for (size_t e = threadIdx.x; e < m; e += BN_THREADS) {
            const size_t o = chan_at(g, ch, e);
            const double xhat = (x[o] - st.mean) * st.inv_std;
            dx[o] = (float)(gi * (dy[o] - mean_dy - xhat * mean_dy_xhat));
        }
    }
}

static bn_geom geom_of(const layer *l, const exec_ctx *c)
{
    bn_geom g;
    g.n = c->n;
    g.c = l->in.c;
    g.hw = (size_t)l->in.h * l->in.w;
    return g;
}

static unsigned chan_blocks(int c)
{
    return c < 65535 ? (unsigned)c : 65535u;
}

/* Whether this call runs on the own kernels whatever the pass: on a deterministic
 * device, with a single value per channel in training, or with more than the 2^31 - 1
 * elements a cuDNN tensor can hold. */
static int own_kernels(const exec_ctx *c, const bn_geom &g)
{
    const size_t per_chan = (size_t)g.n * g.hw;
    return !device_get_options(c->dev)->nondeterministic || (c->train && per_chan == 1) ||
           per_chan * g.c > (size_t)INT_MAX;
}

extern "C" vdnn_status bn_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y)
{
    bn_gpu *g = (bn_gpu *)l->gpu;
    if (!g)
        return vdnn_fail(VDNN_EDEVICE, "%s: not bound to the CUDA device (layer_bind)", l->name);
    const bn_priv *p = (const bn_priv *)l->priv;
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    const bn_geom geom = geom_of(l, c);
    const float *gamma = l->params[BN_GAMMA].value, *beta = l->params[BN_BETA].value;
    float *rm = l->params[BN_MEAN].value, *rv = l->params[BN_VAR].value;
    const float one = 1.0f, zero = 0.0f;
    if (own_kernels(c, geom)) {
        vdnn_bn_forward_kernel<<<chan_blocks(geom.c), BN_THREADS, 0, ctx->compute>>>(
            geom, x, y, gamma, beta, rm, rv, p->eps, p->momentum, c->train, !c->recompute);
        CUDA_LAUNCH_CHECK();
        return VDNN_OK;
    }
    CUDNN_TRY(cudnnSetTensor4dDescriptor(g->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, c->n, l->in.c,
                                         l->in.h, l->in.w));
    if (c->train) {
        CUDNN_TRY(cudnnBatchNormalizationForwardTraining(
            ctx->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, g->x, x, g->x, y, g->ch, gamma, beta,
            c->recompute ? 0.0 : (double)p->momentum, rm, rv, (double)p->eps, NULL, NULL));
    } else {
        CUDNN_TRY(cudnnBatchNormalizationForwardInference(ctx->cudnn, CUDNN_BATCHNORM_SPATIAL, &one,
                                                          &zero, g->x, x, g->x, y, g->ch, gamma,
                                                          beta, rm, rv, (double)p->eps));
    }
    return VDNN_OK;
}

extern "C" vdnn_status bn_backward_cuda(layer *l, const exec_ctx *c, const float *x,
                                        const float *y, const float *dy, float *dx)
{
    (void)y;
    bn_gpu *g = (bn_gpu *)l->gpu;
    if (!g)
        return vdnn_fail(VDNN_EDEVICE, "%s: not bound to the CUDA device (layer_bind)", l->name);
    const bn_priv *p = (const bn_priv *)l->priv;
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    const bn_geom geom = geom_of(l, c);
    const float *gamma = l->params[BN_GAMMA].value;
    const float *rm = l->params[BN_MEAN].value, *rv = l->params[BN_VAR].value;
    float *dgamma = l->params[BN_GAMMA].grad, *dbeta = l->params[BN_BETA].grad;
    if (!c->train || !dx || own_kernels(c, geom)) {
        vdnn_bn_backward_kernel<<<chan_blocks(geom.c), BN_THREADS, 0, ctx->compute>>>(
            geom, x, dy, dx, gamma, dgamma, dbeta, rm, rv, p->eps, c->train, c->accumulate);
        CUDA_LAUNCH_CHECK();
        return VDNN_OK;
    }
    const float one = 1.0f, zero = 0.0f;
    const float *keep_grads = c->accumulate ? &one : &zero;   /* betaParamDiff */
    CUDNN_TRY(cudnnSetTensor4dDescriptor(g->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, c->n, l->in.c,
                                         l->in.h, l->in.w));
    CUDNN_TRY(cudnnBatchNormalizationBackward(
        ctx->cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, keep_grads, g->x, x, g->x, dy,
        g->x, dx, g->ch, gamma, dgamma, dbeta, (double)p->eps, NULL, NULL));
    return VDNN_OK;
}
