/* Max and average pooling (CPU half).
 *
 * Both slide a size x size window with a stride over each (item, channel) plane of x
 * (N, C, H, W), with optional zero padding, giving y (N, C, OH, OW) where
 * OH = floor((H + 2*pad - size) / stride) + 1 (no ceil mode).
 *
 * Max pooling ignores padded cells (they never win, as in PyTorch), so every window
 * needs at least one real cell: pad < size guarantees it. Backward recomputes each
 * window's argmax from x instead of storing indices (needs_input = 1): nothing extra to
 * keep or offload, and the first maximum in row-major window order wins on ties, so
 * the routing is deterministic.
 *
 * Average pooling divides by size*size whatever the padding (PyTorch's
 * count_include_pad = True); its backward reads neither x nor y.
 *
 * OpenMP runs over (item, channel) planes: each thread owns its planes' outputs in
 * forward and their input gradients in backward, so overlapping windows never race. */
#include <stdio.h>
#include <string.h>

#include "layers/layer.h"

/* Loops over fewer window cells than this run on one thread: starting a parallel region
 * costs more than such a loop. */
#define PAR_MIN_WORK ((size_t)1 << 15)

typedef struct pool_params {
    int size;     /* window side, 1..64 */
    int stride;   /* 1..64 */
    int pad;      /* 0..32, < size */
} pool_params;

static const cfg_key pool_keys[] = {
    {"size", CFG_INT, 1, 1, 64, NULL, 0, "side of the square window"},
    {"stride", CFG_INT, 0, 1, 64, NULL, 0, "step between windows (default: size)"},
    {"pad", CFG_INT, 0, 0, 32, NULL, 0, "padding on each side, less than size (default 0)"},
    {NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

/* The window of output (oh, ow), clipped to the real cells: rows [*h0, *h1), columns
 * [*w0, *w1). */
typedef struct pool_win { int h0, h1, w0, w1; } pool_win;

static pool_win window_of(const pool_params *p, int h, int w, int oh, int ow)
{
    pool_win r;
    r.h0 = oh * p->stride - p->pad;
    r.w0 = ow * p->stride - p->pad;
    r.h1 = r.h0 + p->size < h ? r.h0 + p->size : h;
    r.w1 = r.w0 + p->size < w ? r.w0 + p->size : w;
    if (r.h0 < 0) r.h0 = 0;
    if (r.w0 < 0) r.w0 = 0;
    return r;
}

static vdnn_status pool_setup(layer *l, const cfg_file *f, const cfg_section *s)
{
    pool_params *p = l->priv;
    if (s) {
        p->size = cfg_int(s, "size", 0);
        p->stride = cfg_int(s, "stride", p->size);
        p->pad = cfg_int(s, "pad", 0);
    } else if (p->size < 1 || p->size > 64 || p->stride < 1 || p->stride > 64 || p->pad < 0 ||
               p->pad > 32) {
        return vdnn_fail(VDNN_EINVAL, "%s: size %d, stride %d, pad %d out of range", l->name,
                         p->size, p->stride, p->pad);
    }
    if (p->pad >= p->size) {
        if (f && s)
            return cfg_error(f, s, "pad", "must be less than size (%d), not %d", p->size, p->pad);
        return vdnn_fail(VDNN_EINVAL, "%s: pad %d must be less than size %d", l->name, p->pad,
                         p->size);
    }
    const int hp = l->in.h + 2 * p->pad, wp = l->in.w + 2 * p->pad;
    if (hp < p->size || wp < p->size) {
        if (f && s)
            return cfg_error(f, s, "size", "window %dx%d is larger than the padded input %dx%d",
                             p->size, p->size, hp, wp);
        return vdnn_fail(VDNN_EINVAL, "%s: window %d is larger than the padded input %dx%d",
                         l->name, p->size, hp, wp);
    }
    l->out = shape_make(l->in.n, l->in.c, (hp - p->size) / p->stride + 1,
                        (wp - p->size) / p->stride + 1);
    l->needs_output = 0;
    l->nparams = 0;
    return VDNN_OK;
}

static vdnn_status maxpool_setup(layer *l, const cfg_file *f, const cfg_section *s)
{
    l->needs_input = 1;
    return pool_setup(l, f, s);
}

static vdnn_status avgpool_setup(layer *l, const cfg_file *f, const cfg_section *s)
{
    l->needs_input = 0;
    return pool_setup(l, f, s);
}

/* Index in the plane x (H, W) of the first maximum of window r. */
static int argmax_of(const float *x, int w, pool_win r)
{
    int best = r.h0 * w + r.w0;
    for (int i = r.h0; i < r.h1; i++)
        for (int j = r.w0; j < r.w1; j++)
            if (x[i * w + j] > x[best]) best = i * w + j;
    return best;
}

static vdnn_status maxpool_forward(layer *l, const exec_ctx *c, const float *x, float *y)
{
    const pool_params *p = l->priv;
    const int planes = c->n * l->in.c, h = l->in.h, w = l->in.w, oh = l->out.h, ow = l->out.w;
    const int par = (size_t)planes * oh * ow * p->size * p->size >= PAR_MIN_WORK;
#pragma omp parallel for if (par) schedule(static)
    for (int pl = 0; pl < planes; pl++) {
        const float *xp = x + (size_t)pl * h * w;   /* (H, W) */
        float *yp = y + (size_t)pl * oh * ow;       /* (OH, OW) */
        for (int i = 0; i < oh; i++)
            for (int j = 0; j < ow; j++)
                yp[i * ow + j] = xp[argmax_of(xp, w, window_of(p, h, w, i, j))];
    }
    return VDNN_OK;
}

static vdnn_status maxpool_backward(layer *l, const exec_ctx *c, const float *x, const float *y,
                                    const float *dy, float *dx)
{
    (void)y;
    if (!dx) return VDNN_OK;
    const pool_params *p = l->priv;
    const int planes = c->n * l->in.c, h = l->in.h, w = l->in.w, oh = l->out.h, ow = l->out.w;
    const int par = (size_t)planes * oh * ow * p->size * p->size >= PAR_MIN_WORK;
#pragma omp parallel for if (par) schedule(static)
    for (int pl = 0; pl < planes; pl++) {
        const float *xp = x + (size_t)pl * h * w;    /* (H, W) */
        const float *dyp = dy + (size_t)pl * oh * ow; /* (OH, OW) */
        float *dxp = dx + (size_t)pl * h * w;        /* (H, W) */
        memset(dxp, 0, (size_t)h * w * sizeof *dxp);
        for (int i = 0; i < oh; i++)
            for (int j = 0; j < ow; j++)
                dxp[argmax_of(xp, w, window_of(p, h, w, i, j))] += dyp[i * ow + j];
    }
    return VDNN_OK;
}

static vdnn_status avgpool_forward(layer *l, const exec_ctx *c, const float *x, float *y)
{
    const pool_params *p = l->priv;
    const int planes = c->n * l->in.c, h = l->in.h, w = l->in.w, oh = l->out.h, ow = l->out.w;
    const float inv = 1.0f / (float)(p->size * p->size);
    const int par = (size_t)planes * oh * ow * p->size * p->size >= PAR_MIN_WORK;
#pragma omp parallel for if (par) schedule(static)
    for (int pl = 0; pl < planes; pl++) {
        const float *xp = x + (size_t)pl * h * w;   /* (H, W) */
        float *yp = y + (size_t)pl * oh * ow;       /* (OH, OW) */
        for (int i = 0; i < oh; i++)
            for (int j = 0; j < ow; j++) {
                pool_win r = window_of(p, h, w, i, j);
                float s = 0.0f;
                for (int a = r.h0; a < r.h1; a++)
                    for (int b = r.w0; b < r.w1; b++) s += xp[a * w + b];
                yp[i * ow + j] = s * inv;
            }
    }
    return VDNN_OK;
}

static vdnn_status avgpool_backward(layer *l, const exec_ctx *c, const float *x, const float *y,
                                    const float *dy, float *dx)
{
    (void)x;
    (void)y;
    if (!dx) return VDNN_OK;
    const pool_params *p = l->priv;
    const int planes = c->n * l->in.c, h = l->in.h, w = l->in.w, oh = l->out.h, ow = l->out.w;
    const float inv = 1.0f / (float)(p->size * p->size);
    const int par = (size_t)planes * oh * ow * p->size * p->size >= PAR_MIN_WORK;
#pragma omp parallel for if (par) schedule(static)
    for (int pl = 0; pl < planes; pl++) {
        const float *dyp = dy + (size_t)pl * oh * ow; /* (OH, OW) */
        float *dxp = dx + (size_t)pl * h * w;        /* (H, W) */
        memset(dxp, 0, (size_t)h * w * sizeof *dxp);
        for (int i = 0; i < oh; i++)
            for (int j = 0; j < ow; j++) {
                pool_win r = window_of(p, h, w, i, j);
                const float g = dyp[i * ow + j] * inv;
                for (int a = r.h0; a < r.h1; a++)
                    for (int b = r.w0; b < r.w1; b++) dxp[a * w + b] += g;
            }
    }
    return VDNN_OK;
}

static void pool_describe(const layer *l, char *buf, size_t len)
{
    const pool_params *p = l->priv;
    snprintf(buf, len, "%dx%d/%d p%d", p->size, p->size, p->stride, p->pad);
}

const layer_ops maxpool_ops = {
    .type = "maxpool",
    .prefix = "maxpool",
    .keys = pool_keys,
    .priv_bytes = sizeof(pool_params),
    .setup = maxpool_setup,
    .forward_cpu = maxpool_forward,
    .backward_cpu = maxpool_backward,
    .describe = pool_describe,
};

const layer_ops avgpool_ops = {
    .type = "avgpool",
    .prefix = "avgpool",
    .keys = pool_keys,
    .priv_bytes = sizeof(pool_params),
    .setup = avgpool_setup,
    .forward_cpu = avgpool_forward,
    .backward_cpu = avgpool_backward,
    .describe = pool_describe,
};
