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
 * Every per-channel statistic is accumulated in double by the one thread that owns
 * the channel, in item order, in LANES partial sums (element k of a row into lane
 * k mod LANES, so that the compiler runs them as vector adds) added in lane order at the
 * end: results do not depend on the thread count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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

static double lanes_total(const double acc[LANES])
{
    double t = 0.0;
    for (int j = 0; j < LANES; j++) t += acc[j];
    return t;
}

/* acc[j] += p[k] (centre 0) or (p[k] - centre)^2 (squares) over the k of a row of len
 * elements with k mod LANES = j. */
static void lanes_add(double acc[LANES], const float *p, size_t len, int squares, double centre)
{
    size_t k = 0;
    for (; k + LANES <= len; k += LANES)
        for (int j = 0; j < LANES; j++) {
            double v = p[k + j] - centre;
            acc[j] += squares ? v * v : v;
        }
    for (int j = 0; k + (size_t)j < len; j++) {
        double v = p[k + j] - centre;
        acc[j] += squares ? v * v : v;
    }
}

/* Mean and biased variance of channel ch of x (N, C, HW) over n items, two-pass. */
static bn_chan batch_stats(const float *x, int n, int c, size_t hw, int ch, float eps)
{
    double sum[LANES] = {0}, sq[LANES] = {0};
    for (int i = 0; i < n; i++) lanes_add(sum, x + ((size_t)i * c + ch) * hw, hw, 0, 0.0);
    const double m = (double)n * hw, mean = lanes_total(sum) / m;
    for (int i = 0; i < n; i++) lanes_add(sq, x + ((size_t)i * c + ch) * hw, hw, 1, mean);
    const double var = lanes_total(sq) / m;
    bn_chan s = {mean, var, 1.0 / sqrt(var + eps)};
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
            s = batch_stats(x, n, ch_count, hw, ch, p->eps);
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

/* Sums of dy and dy * xhat over channel ch. */
static void grad_sums(const float *x, const float *dy, int n, int c, size_t hw, int ch,
                      const bn_chan *s, double *sum_dy, double *sum_dy_xhat)
{
    double a[LANES] = {0}, b[LANES] = {0};
    for (int i = 0; i < n; i++) {
        const float *xr = x + ((size_t)i * c + ch) * hw, *dr = dy + ((size_t)i * c + ch) * hw;
        size_t k = 0;
        for (; k + LANES <= hw; k += LANES)
            for (int j = 0; j < LANES; j++) {
                a[j] += dr[k + j];
                b[j] += dr[k + j] * ((xr[k + j] - s->mean) * s->inv_std);
            }
        for (int j = 0; k + (size_t)j < hw; j++) {
            a[j] += dr[k + j];
            b[j] += dr[k + j] * ((xr[k + j] - s->mean) * s->inv_std);
        }
    }
    *sum_dy = lanes_total(a);
    *sum_dy_xhat = lanes_total(b);
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
        bn_chan s = c->train ? batch_stats(x, n, ch_count, hw, ch, p->eps)
                             : running_stats(l, ch, p->eps);
        double sum_dy, sum_dy_xhat;
        grad_sums(x, dy, n, ch_count, hw, ch, &s, &sum_dy, &sum_dy_xhat);
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
