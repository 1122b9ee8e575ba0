/* Local response normalisation across channels (CPU half), with PyTorch's semantics:
 *
 *     y_c = x_c / s_c^beta,   s_c = k + alpha / size * sum_{c' = c - size/2}^{c + size/2} x_c'^2
 *
 * the window centred on c and zero beyond the first and last channel.
 *
 * Backward reads x and y (needs_input = needs_output = 1) and recomputes the scales
 * from x rather than keeping them, so the layer holds no per-batch state:
 *
 *     dx_j = dy_j s_j^-beta - (2 alpha beta / size) x_j sum_{c in window(j)} dy_c y_c / s_c
 *
 * Every element is computed independently, each window summed in channel order, so the
 * results do not depend on the thread count. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>

#include "layers/lrn.h"

static const cfg_key lrn_keys[] = {
    {"size", CFG_INT, 0, 1, LRN_MAX_SIZE, NULL, 0, "channels in the window, odd (default 5)"},
    {"alpha", CFG_FLOAT, 0, 0.0, 1e3, NULL, 0, "scale (default 1e-4)"},
    {"beta", CFG_FLOAT, 0, 0.0, 10.0, NULL, 0, "exponent (default 0.75)"},
    /* The table is inclusive; setup rejects k = 0 (a zero input would divide by 0). */
    {"k", CFG_FLOAT, 0, 0.0, 1e3, NULL, 0, "additive constant, > 0 (default 1)"},
    {NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

static vdnn_status lrn_check(const layer *l, const cfg_file *f, const cfg_section *s)
{
    const lrn_priv *p = l->priv;
    const int named = f && s;
    if (p->size < 1 || p->size > LRN_MAX_SIZE || p->size % 2 == 0) {
        if (named)
            return cfg_error(f, s, "size", "must be odd, in [1, %d], not %d", LRN_MAX_SIZE,
                             p->size);
        return vdnn_fail(VDNN_EINVAL, "%s: size must be odd, in [1, %d], not %d", l->name,
                         LRN_MAX_SIZE, p->size);
    }
    if (!(p->k > 0.0f)) {
        if (named) return cfg_error(f, s, "k", "must be > 0, not %g", p->k);
        return vdnn_fail(VDNN_EINVAL, "%s: k must be > 0, not %g", l->name, p->k);
    }
    if (!(p->alpha >= 0.0f && p->beta >= 0.0f))
        return vdnn_fail(VDNN_EINVAL, "%s: alpha %g and beta %g must be >= 0", l->name,
                         p->alpha, p->beta);
    return VDNN_OK;
}

static vdnn_status lrn_setup(layer *l, const cfg_file *f, const cfg_section *s)
{
    lrn_priv *p = l->priv;
    if (s) {
        p->size = cfg_int(s, "size", 5);
        p->alpha = (float)cfg_float(s, "alpha", 1e-4);
        p->beta = (float)cfg_float(s, "beta", 0.75);
        p->k = (float)cfg_float(s, "k", 1.0);
    }
    vdnn_status st = lrn_check(l, f, s);
    if (st != VDNN_OK) return st;
    l->out = l->in;
    l->needs_input = 1;
    l->needs_output = 1;
    return VDNN_OK;
}

/* s from the sum of squares of a window; one definition so forward and backward agree. */
static inline float lrn_scale(const lrn_priv *p, float sum_sq)
{
    return p->k + p->alpha / (float)p->size * sum_sq;
}

static inline int imax(int a, int b) { return a > b ? a : b; }
static inline int imin(int a, int b) { return a < b ? a : b; }

static vdnn_status lrn_forward(layer *l, const exec_ctx *c, const float *x, float *y)
{
    const lrn_priv *p = l->priv;
    const int chans = l->in.c, half = p->size / 2;
    const size_t hw = (size_t)l->in.h * l->in.w;
    const ptrdiff_t planes = (ptrdiff_t)c->n * chans;
#pragma omp parallel for schedule(static)
    for (ptrdiff_t pl = 0; pl < planes; pl++) {
        /* Plane (i, ch); the window's planes are at offsets -half..half from it. */
        const int ch = (int)(pl % chans);
        const int lo = imax(0, ch - half) - ch, hi = imin(chans - 1, ch + half) - ch;
        const float *xp = x + (size_t)pl * hw;
        float *yp = y + (size_t)pl * hw;
        for (size_t k = 0; k < hw; k++) {
            float sum_sq = 0.0f;
            for (int d = lo; d <= hi; d++) {
                float v = xp[(ptrdiff_t)d * (ptrdiff_t)hw + (ptrdiff_t)k];
                sum_sq += v * v;
            }
            yp[k] = xp[k] * powf(lrn_scale(p, sum_sq), -p->beta);
        }
    }
    return VDNN_OK;
}

/* dx at one element of channel ch (pixel pointers already offset to it, channel stride
 * hw): needs the scales of every channel in its window, each from its own window. */
static float lrn_grad_at(const lrn_priv *p, int ch, int chans, ptrdiff_t hw, const float *x,
                         const float *y, const float *dy)
{
    const int half = p->size / 2;
    /* Squares of every channel any of those windows touches: ch - 2 half .. ch + 2 half. */
    float sq[2 * LRN_MAX_SIZE];
    const int lo2 = imax(0, ch - 2 * half), hi2 = imin(chans - 1, ch + 2 * half);
    for (int c2 = lo2; c2 <= hi2; c2++) {
        float v = x[(ptrdiff_t)(c2 - ch) * hw];
        sq[c2 - lo2] = v * v;
    }
    float acc = 0.0f, s_self = 1.0f;
    for (int c1 = imax(0, ch - half); c1 <= imin(chans - 1, ch + half); c1++) {
        float sum_sq = 0.0f;
        for (int c2 = imax(0, c1 - half); c2 <= imin(chans - 1, c1 + half); c2++)
            sum_sq += sq[c2 - lo2];
        const float s = lrn_scale(p, sum_sq);
        const ptrdiff_t off = (ptrdiff_t)(c1 - ch) * hw;
        acc += dy[off] * y[off] / s;
        if (c1 == ch) s_self = s;
    }
    const float coef = 2.0f * p->alpha * p->beta / (float)p->size;
    return dy[0] * powf(s_self, -p->beta) - coef * x[0] * acc;
}

static vdnn_status lrn_backward(layer *l, const exec_ctx *c, const float *x, const float *y,
                                const float *dy, float *dx)
{
    if (!dx) return VDNN_OK;
    const lrn_priv *p = l->priv;
    const int chans = l->in.c;
    const size_t hw = (size_t)l->in.h * l->in.w;
    const ptrdiff_t planes = (ptrdiff_t)c->n * chans;
#pragma omp parallel for schedule(static)
    for (ptrdiff_t pl = 0; pl < planes; pl++) {
        const int ch = (int)(pl % chans);
        const size_t base = (size_t)pl * hw;
        for (size_t k = 0; k < hw; k++)
            dx[base + k] = lrn_grad_at(p, ch, chans, (ptrdiff_t)hw, x + base + k, y + base + k,
                                       dy + base + k);
    }
    return VDNN_OK;
}

static void lrn_describe(const layer *l, char *buf, size_t len)
{
    const lrn_priv *p = l->priv;
    snprintf(buf, len, "size %d alpha %g beta %g k %g", p->size, p->alpha, p->beta, p->k);
}

const layer_ops lrn_ops = {
    .type = "lrn",
    .prefix = "lrn",
    .keys = lrn_keys,
    .priv_bytes = sizeof(lrn_priv),
    .setup = lrn_setup,
    .forward_cpu = lrn_forward,
    .backward_cpu = lrn_backward,
    .describe = lrn_describe,
    .forward_cuda = CUDA_HALF(lrn_forward_cuda),
    .backward_cuda = CUDA_HALF(lrn_backward_cuda),
    .bind_cuda = CUDA_HALF(lrn_bind_cuda),
    .unbind_cuda = CUDA_HALF(lrn_unbind_cuda),
};
