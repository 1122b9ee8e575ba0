/* Batch normalisation (CPU half), per channel over (N, H, W), with PyTorch's semantics.
 *
 * Training: normalise with the batch mean and biased variance, and fold the batch
 * statistics into the running estimates (running = (1 - m) * running + m * batch, the
 * variance unbiased). Evaluation: normalise with the running estimates.
 *
 * Backward recomputes the batch statistics from x (needs_input = 1) instead of saving
 * them in forward: the layer keeps no per-batch state between passes, so feature maps
 * may be offloaded or recomputed freely. The running statistics change only in forward.
 *
 * Every per-channel statistic is accumulated in double, in one pass over x (and dy in
 * backward: chan_sums), by the one thread that owns the channel, in item order, in LANES
 * partial sums (element k of a row into lane k mod LANES, so that the compiler runs them
 * as vector adds) added in lane order at the end: results do not depend on the thread
 * count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/batchnorm.h"

static const cfg_key bn_keys[] = {
    {"momentum", CFG_FLOAT, 0, 0.0, 1.0, NULL, 0, "running-stat update weight (default 0.1)"},
    /* The table is inclusive; setup rejects eps = 0 (a constant channel would divide by 0). */
    {"eps", CFG_FLOAT, 0, 0.0, 1.0, NULL, 0, "variance epsilon, in (0, 1] (default 1e-5)"},
    {NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

/* The statistics one channel is normalised with. */
typedef struct bn_chan {
    double mean, var, inv_std;
} bn_chan;

static vdnn_status bn_setup(layer *l, const cfg_file *f, const cfg_section *s)
{
    bn_priv *p = l->priv;
    if (s) {
        p->momentum = (float)cfg_float(s, "momentum", 0.1);
        p->eps = (float)cfg_float(s, "eps", 1e-5);
    }
    /* Built in code, priv comes from the caller and is checked here instead. */
    if (!(p->momentum >= 0.0f && p->momentum <= 1.0f))
        return vdnn_fail(VDNN_EINVAL, "%s: momentum must lie in [0, 1], not %g", l->name,
                         p->momentum);
    if (!(p->eps > 0.0f && p->eps <= 1.0f)) {
        if (f && s) return cfg_error(f, s, "eps", "must lie in (0, 1], not %g", p->eps);
        return vdnn_fail(VDNN_EINVAL, "%s: eps must lie in (0, 1], not %g", l->name, p->eps);
    }
    l->out = l->in;
    l->needs_input = 1;
    l->needs_output = 0;
    l->nparams = BN_NPARAMS;
    shape4 per_channel = shape_make(l->in.c, 1, 1, 1);
    layer_declare_param(&l->params[BN_GAMMA], "gamma", per_channel, INIT_ONE, 0, 1, 0);
    layer_declare_param(&l->params[BN_BETA], "beta", per_channel, INIT_ZERO, 0, 1, 0);
    layer_declare_param(&l->params[BN_MEAN], "running_mean", per_channel, INIT_ZERO, 0, 0, 0);
    layer_declare_param(&l->params[BN_VAR], "running_var", per_channel, INIT_ONE, 0, 0, 0);
    return VDNN_OK;
}

enum { LANES = 8 };

/* The sums one pass over a channel gathers: of d = x - shift, d^2 and, in backward, dy
 * and dy d. The shift, the channel's first value, keeps the variance's one-pass formula
 * exact to float precision: no value lies further than sqrt(count) standard deviations
 * from the mean, so E[d^2] - E[d]^2 in double loses at most half the bits of count. */
typedef struct bn_sums {
    double shift, d, dd, dy, dyd;
} bn_sums;

/* Four doubles, and four floats to widen into them: the lanes as vector registers (GCC's
 * and Clang's vector extensions; the compiler does not find this form from scalar loops
 * that keep sixteen or thirty-two sums). */
typedef double v4d __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));

/* Partial sums, element k of a row into lane k mod LANES: lanes 0-3 in lo, 4-7 in hi. No
 * function takes or returns a vector by value: without AVX (a build for any x86-64) that
 * would change the calling convention. */
typedef struct lanes {
    v4d lo, hi;
} lanes;

/* The eight floats at p, widened: into lo and hi. */
static inline void widen8(const float *p, v4d *lo, v4d *hi)
{
    v4f a, b;
    memcpy(&a, p, sizeof a);
    memcpy(&b, p + 4, sizeof b);
    *lo = __builtin_convertvector(a, v4d);
    *hi = __builtin_convertvector(b, v4d);
}

/* Adds lanes 0-3 and 4-7 of one block of a row. */
static inline void lanes_add(lanes *a, const v4d *lo, const v4d *hi)
{
    a->lo += *lo;
    a->hi += *hi;
}

/* Adds element j of a row's tail (j < LANES) into lane j. */
static inline void lane_add(lanes *a, int j, double v)
{
    if (j < 4) a->lo[j] += v;
    else a->hi[j - 4] += v;
}

static double lanes_total(const lanes *a)
{
    double t = 0.0;
    for (int j = 0; j < LANES; j++) t += j < 4 ? a->lo[j] : a->hi[j - 4];
    return t;
}

/* The sums of channel ch of x (N, C, HW) over n items, with dy's where dy is not NULL. */
static bn_sums chan_sums(const float *x, const float *dy, int n, int c, size_t hw, int ch)
{
    lanes d, dd, g, gd;
    memset(&d, 0, sizeof d);
    dd = g = gd = d;
    bn_sums s = {.shift = x[(size_t)ch * hw]};
    const v4d shift = {s.shift, s.shift, s.shift, s.shift};
    for (int i = 0; i < n; i++) {
        const size_t off = ((size_t)i * c + ch) * hw;
        const float *xr = x + off, *dr = dy ? dy + off : NULL;
        size_t k = 0;
        for (; k + LANES <= hw; k += LANES) {
            v4d lo, hi;
            widen8(xr + k, &lo, &hi);
            lo -= shift;
            hi -= shift;
            const v4d lo2 = lo * lo, hi2 = hi * hi;
            lanes_add(&d, &lo, &hi);
            lanes_add(&dd, &lo2, &hi2);
            if (dr) {
                v4d wlo, whi;
                widen8(dr + k, &wlo, &whi);
                const v4d plo = wlo * lo, phi = whi * hi;
                lanes_add(&g, &wlo, &whi);
                lanes_add(&gd, &plo, &phi);
            }
        }
        for (int j = 0; k + (size_t)j < hw; j++) {
            const double v = xr[k + j] - s.shift;
            lane_add(&d, j, v);
            lane_add(&dd, j, v * v);
            if (dr) {
                lane_add(&g, j, dr[k + j]);
                lane_add(&gd, j, dr[k + j] * v);
            }
        }
    }
    s.d = lanes_total(&d);
    s.dd = lanes_total(&dd);
    s.dy = lanes_total(&g);
    s.dyd = lanes_total(&gd);
    return s;
}

/* Mean and biased variance of a channel of count values, from its sums. */
static bn_chan batch_stats(const bn_sums *u, double count, float eps)
{
    const double dmean = u->d / count, var = fmax(u->dd / count - dmean * dmean, 0.0);
    bn_chan s = {u->shift + dmean, var, 1.0 / sqrt(var + eps)};
    return s;
}

static bn_chan running_stats(const layer *l, int ch, float eps)
{
    double mean = l->params[BN_MEAN].value[ch], var = l->params[BN_VAR].value[ch];
    bn_chan s = {mean, var, 1.0 / sqrt(var + eps)};
    return s;
}

/* running = (1 - m) running + m batch; the variance enters unbiased (m/(m-1)), except
 * for a single value per channel, where that is undefined and the biased 0 is used. */
static void update_running(layer *l, int ch, const bn_chan *b, double count)
{
    const double m = ((const bn_priv *)l->priv)->momentum;
    float *rm = l->params[BN_MEAN].value, *rv = l->params[BN_VAR].value;
    double unbiased = count > 1.0 ? b->var * count / (count - 1.0) : b->var;
    rm[ch] = (float)((1.0 - m) * rm[ch] + m * b->mean);
    rv[ch] = (float)((1.0 - m) * rv[ch] + m * unbiased);
}

static vdnn_status bn_forward(layer *l, const exec_ctx *c, const float *x, float *y)
{
    const bn_priv *p = l->priv;
    const int n = c->n, ch_count = l->in.c;
    const size_t hw = (size_t)l->in.h * l->in.w;
    const float *gamma = l->params[BN_GAMMA].value, *beta = l->params[BN_BETA].value;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < ch_count; ch++) {
        bn_chan s;
        if (c->train) {
            bn_sums u = chan_sums(x, NULL, n, ch_count, hw, ch);
            s = batch_stats(&u, (double)n * hw, p->eps);
            if (!c->recompute) update_running(l, ch, &s, (double)n * hw);
        } else {
            s = running_stats(l, ch, p->eps);
        }
        /* In double, centred first: folding the mean into a float shift loses the
         * small deviations of a channel whose mean is large next to its spread. */
        const double scale = gamma[ch] * s.inv_std, shift = beta[ch];
        for (int i = 0; i < n; i++) {
            size_t off = ((size_t)i * ch_count + ch) * hw;
            for (size_t k = 0; k < hw; k++)
                y[off + k] = (float)((x[off + k] - s.mean) * scale + shift);
        }
    }
    return VDNN_OK;
}

static vdnn_status bn_backward(layer *l, const exec_ctx *c, const float *x, const float *y,
                               const float *dy, float *dx)
{
    (void)y;
    const bn_priv *p = l->priv;
    const int n = c->n, ch_count = l->in.c;
    const size_t hw = (size_t)l->in.h * l->in.w;
    const double count = (double)n * hw;
    const float *gamma = l->params[BN_GAMMA].value;
    float *dgamma = l->params[BN_GAMMA].grad, *dbeta = l->params[BN_BETA].grad;
#pragma omp parallel for schedule(static)
    for (int ch = 0; ch < ch_count; ch++) {
        /* dy (x - mean) = dy d - dy (mean - shift) */
        const bn_sums u = chan_sums(x, dy, n, ch_count, hw, ch);
        const bn_chan s = c->train ? batch_stats(&u, count, p->eps) : running_stats(l, ch, p->eps);
        const double sum_dy = u.dy, sum_dy_xhat = s.inv_std * (u.dyd - (s.mean - u.shift) * u.dy);
        dgamma[ch] = (float)(c->accumulate ? dgamma[ch] + sum_dy_xhat : sum_dy_xhat);
        dbeta[ch] = (float)(c->accumulate ? dbeta[ch] + sum_dy : sum_dy);
        if (!dx) continue;
        /* With batch statistics, the mean and variance depend on x too:
         * dx = gamma inv_std (dy - mean(dy) - xhat mean(dy xhat)). In eval they are
         * constants and only the first term remains. */
        const double g = gamma[ch] * s.inv_std;
        const double mean_dy = c->train ? sum_dy / count : 0.0;
        const double mean_dy_xhat = c->train ? sum_dy_xhat / count : 0.0;
        for (int i = 0; i < n; i++) {
            size_t off = ((size_t)i * ch_count + ch) * hw;
            for (size_t k = 0; k < hw; k++) {
                double xhat = (x[off + k] - s.mean) * s.inv_std;
                dx[off + k] = (float)(g * (dy[off + k] - mean_dy - xhat * mean_dy_xhat));
            }
        }
    }
    return VDNN_OK;
}

static void bn_describe(const layer *l, char *buf, size_t len)
{
    const bn_priv *p = l->priv;
    snprintf(buf, len, "momentum %g eps %g", p->momentum, p->eps);
}

const layer_ops batchnorm_ops = {
    .type = "batchnorm",
    .prefix = "bn",
    .keys = bn_keys,
    .priv_bytes = sizeof(bn_priv),
    .setup = bn_setup,
    .forward_cpu = bn_forward,
    .backward_cpu = bn_backward,
    .describe = bn_describe,
    .forward_cuda = CUDA_HALF(bn_forward_cuda),
    .backward_cuda = CUDA_HALF(bn_backward_cuda),
    .bind_cuda = CUDA_HALF(bn_bind_cuda),
    .unbind_cuda = CUDA_HALF(bn_unbind_cuda),
};
