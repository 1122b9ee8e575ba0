/* Elementwise activations: relu, leaky relu, tanh, sigmoid and clip (ReLU6 by default)
 * (CPU half).
 *
 * Every backward pass here reads only the output y (needs_output = 1, needs_input = 0):
 * each derivative can be written in terms of y, so the memory manager may drop or
 * offload x as soon as the forward is done. For leaky relu this relies on slope >= 0,
 * which makes y > 0 exactly when x > 0; for clip on lo < hi, which makes lo < y < hi
 * exactly when lo < x < hi (the gradient passes there, and is 0 at and beyond the
 * bounds). Every loop reads element i before it writes element i, so each layer runs
 * in place (y over x, dx over dy: in_place in layers/layer.h). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>

#include "layers/activation.h"

static const cfg_key leaky_keys[] = {
    /* The table is inclusive; setup rejects exactly 1 (that would be the identity). */
    {"slope", CFG_FLOAT, 0, 0.0, 1.0, NULL, 0, "slope for negative inputs, in [0, 1)"},
    {NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

static const cfg_key clip_keys[] = {
    {"min", CFG_FLOAT, 0, -3.5e38, 3.5e38, NULL, 0, "lower bound (default 0)"},
    {"max", CFG_FLOAT, 0, -3.5e38, 3.5e38, NULL, 0, "upper bound, above min (default 6: ReLU6)"},
    {NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

/* Loops over fewer elements than this run on one thread: they take microseconds, less
 * than starting (and, on a busy machine, waiting out) a parallel region. */
#define ACT_PAR_MIN ((ptrdiff_t)1 << 16)

/* Elements in the c->n items of this call. */
static size_t act_count(const layer *l, const exec_ctx *c)
{
    return (size_t)c->n * shape_per_item(l->in);
}

static vdnn_status act_setup(layer *l, const cfg_file *f, const cfg_section *s)
{
    (void)f;
    (void)s;
    l->out = l->in;
    l->needs_input = 0;
    l->needs_output = 1;
    return VDNN_OK;
}

static vdnn_status leaky_setup(layer *l, const cfg_file *f, const cfg_section *s)
{
    leaky_priv *p = l->priv;
    if (s) p->slope = (float)cfg_float(s, "slope", 0.01);
    /* Built in code, priv comes from the caller and is checked here instead. */
    if (!(p->slope >= 0.0f && p->slope < 1.0f)) {
        if (f && s) return cfg_error(f, s, "slope", "must lie in [0, 1), not %g", p->slope);
        return vdnn_fail(VDNN_EINVAL, "%s: slope must lie in [0, 1), not %g", l->name, p->slope);
    }
    return act_setup(l, f, s);
}

static void leaky_describe(const layer *l, char *buf, size_t len)
{
    const leaky_priv *p = l->priv;
    snprintf(buf, len, "slope %g", p->slope);
}

static vdnn_status clip_setup(layer *l, const cfg_file *f, const cfg_section *s)
{
    clip_priv *p = l->priv;
    if (s) {
        p->lo = (float)cfg_float(s, "min", 0.0);
        p->hi = (float)cfg_float(s, "max", 6.0);
    }
    if (!(p->lo < p->hi)) {
        if (f && s)
            return cfg_error(f, s, cfg_find(s, "max") ? "max" : "min", "min (%g) must be below max (%g)",
                             p->lo, p->hi);
        return vdnn_fail(VDNN_EINVAL, "%s: min (%g) must be below max (%g)", l->name, p->lo, p->hi);
    }
    return act_setup(l, f, s);
}

static void clip_describe(const layer *l, char *buf, size_t len)
{
    const clip_priv *p = l->priv;
    snprintf(buf, len, "[%g, %g]", p->lo, p->hi);
}

/* ---- relu ---- */

static vdnn_status relu_forward(layer *l, const exec_ctx *c, const float *x, float *y)
{
    ptrdiff_t n = (ptrdiff_t)act_count(l, c);
#pragma omp parallel for if (n >= ACT_PAR_MIN) schedule(static)
    for (ptrdiff_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    return VDNN_OK;
}

static vdnn_status relu_backward(layer *l, const exec_ctx *c, const float *x, const float *y,
                                 const float *dy, float *dx)
{
    (void)x;
    if (!dx) return VDNN_OK;
    ptrdiff_t n = (ptrdiff_t)act_count(l, c);
#pragma omp parallel for if (n >= ACT_PAR_MIN) schedule(static)
    for (ptrdiff_t i = 0; i < n; i++) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
    return VDNN_OK;
}

/* ---- leaky relu ---- */

static vdnn_status leaky_forward(layer *l, const exec_ctx *c, const float *x, float *y)
{
    const float slope = ((const leaky_priv *)l->priv)->slope;
    ptrdiff_t n = (ptrdiff_t)act_count(l, c);
#pragma omp parallel for if (n >= ACT_PAR_MIN) schedule(static)
    for (ptrdiff_t i = 0; i < n; i++) y[i] = x[i] > 0.0f ? x[i] : slope * x[i];
    return VDNN_OK;
}

static vdnn_status leaky_backward(layer *l, const exec_ctx *c, const float *x, const float *y,
                                  const float *dy, float *dx)
{
    (void)x;
    if (!dx) return VDNN_OK;
    const float slope = ((const leaky_priv *)l->priv)->slope;
    ptrdiff_t n = (ptrdiff_t)act_count(l, c);
#pragma omp parallel for if (n >= ACT_PAR_MIN) schedule(static)
    for (ptrdiff_t i = 0; i < n; i++) dx[i] = y[i] > 0.0f ? dy[i] : slope * dy[i];
    return VDNN_OK;
}

/* ---- tanh ---- */

static vdnn_status tanh_forward(layer *l, const exec_ctx *c, const float *x, float *y)
{
    ptrdiff_t n = (ptrdiff_t)act_count(l, c);
#pragma omp parallel for if (n >= ACT_PAR_MIN) schedule(static)
    for (ptrdiff_t i = 0; i < n; i++) y[i] = tanhf(x[i]);
    return VDNN_OK;
}

static vdnn_status tanh_backward(layer *l, const exec_ctx *c, const float *x, const float *y,
                                 const float *dy, float *dx)
{
    (void)x;
    if (!dx) return VDNN_OK;
    ptrdiff_t n = (ptrdiff_t)act_count(l, c);
#pragma omp parallel for if (n >= ACT_PAR_MIN) schedule(static)
    for (ptrdiff_t i = 0; i < n; i++) dx[i] = dy[i] * (1.0f - y[i] * y[i]);
    return VDNN_OK;
}

/* ---- clip ---- */

static vdnn_status clip_forward(layer *l, const exec_ctx *c, const float *x, float *y)
{
    const clip_priv *p = l->priv;
    const float lo = p->lo, hi = p->hi;
    ptrdiff_t n = (ptrdiff_t)act_count(l, c);
#pragma omp parallel for if (n >= ACT_PAR_MIN) schedule(static)
    for (ptrdiff_t i = 0; i < n; i++) y[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
    return VDNN_OK;
}

static vdnn_status clip_backward(layer *l, const exec_ctx *c, const float *x, const float *y,
                                 const float *dy, float *dx)
{
    (void)x;
    if (!dx) return VDNN_OK;
    const clip_priv *p = l->priv;
    const float lo = p->lo, hi = p->hi;
    ptrdiff_t n = (ptrdiff_t)act_count(l, c);
#pragma omp parallel for if (n >= ACT_PAR_MIN) schedule(static)
    for (ptrdiff_t i = 0; i < n; i++) dx[i] = y[i] > lo && y[i] < hi ? dy[i] : 0.0f;
    return VDNN_OK;
}

/* ---- sigmoid ---- */

static vdnn_status sigmoid_forward(layer *l, const exec_ctx *c, const float *x, float *y)
{
    ptrdiff_t n = (ptrdiff_t)act_count(l, c);
    /* expf(-x) overflows to inf for very negative x, and 1 / inf is the right 0. */
#pragma omp parallel for if (n >= ACT_PAR_MIN) schedule(static)
    for (ptrdiff_t i = 0; i < n; i++) y[i] = 1.0f / (1.0f + expf(-x[i]));
    return VDNN_OK;
}

static vdnn_status sigmoid_backward(layer *l, const exec_ctx *c, const float *x, const float *y,
                                    const float *dy, float *dx)
{
    (void)x;
    if (!dx) return VDNN_OK;
    ptrdiff_t n = (ptrdiff_t)act_count(l, c);
#pragma omp parallel for if (n >= ACT_PAR_MIN) schedule(static)
    for (ptrdiff_t i = 0; i < n; i++) dx[i] = dy[i] * y[i] * (1.0f - y[i]);
    return VDNN_OK;
}

const layer_ops relu_ops = {
    .type = "relu",
    .prefix = "relu",
    .setup = act_setup,
    .forward_cpu = relu_forward,
    .backward_cpu = relu_backward,
    .forward_cuda = CUDA_HALF(relu_forward_cuda),
    .backward_cuda = CUDA_HALF(relu_backward_cuda),
    .bind_cuda = CUDA_HALF(relu_bind_cuda),
    .unbind_cuda = CUDA_HALF(act_unbind_cuda),
    .in_place = 1,
};

const layer_ops leaky_ops = {
    .type = "leaky",
    .prefix = "leaky",
    .keys = leaky_keys,
    .priv_bytes = sizeof(leaky_priv),
    .setup = leaky_setup,
    .forward_cpu = leaky_forward,
    .backward_cpu = leaky_backward,
    .describe = leaky_describe,
    .forward_cuda = CUDA_HALF(leaky_forward_cuda),
    .backward_cuda = CUDA_HALF(leaky_backward_cuda),
    .in_place = 1,
};

const layer_ops tanh_ops = {
    .type = "tanh",
    .prefix = "tanh",
    .setup = act_setup,
    .forward_cpu = tanh_forward,
    .backward_cpu = tanh_backward,
    .forward_cuda = CUDA_HALF(tanh_forward_cuda),
    .backward_cuda = CUDA_HALF(tanh_backward_cuda),
    .bind_cuda = CUDA_HALF(tanh_bind_cuda),
    .unbind_cuda = CUDA_HALF(act_unbind_cuda),
    .in_place = 1,
};

const layer_ops sigmoid_ops = {
    .type = "sigmoid",
    .prefix = "sigmoid",
    .setup = act_setup,
    .forward_cpu = sigmoid_forward,
    .backward_cpu = sigmoid_backward,
    .forward_cuda = CUDA_HALF(sigmoid_forward_cuda),
    .backward_cuda = CUDA_HALF(sigmoid_backward_cuda),
    .bind_cuda = CUDA_HALF(sigmoid_bind_cuda),
    .unbind_cuda = CUDA_HALF(act_unbind_cuda),
    .in_place = 1,
};

const layer_ops clip_ops = {
    .type = "clip",
    .prefix = "clip",
    .keys = clip_keys,
    .priv_bytes = sizeof(clip_priv),
    .setup = clip_setup,
    .forward_cpu = clip_forward,
    .backward_cpu = clip_backward,
    .describe = clip_describe,
    .forward_cuda = CUDA_HALF(clip_forward_cuda),
    .backward_cuda = CUDA_HALF(clip_backward_cuda),
    .in_place = 1,
};
