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
 * Windows that tile the input without overlap (stride = size, no padding; the usual
 * 2x2/2) take a faster backward: each input cell lies in at most one window, so every
 * window writes its cells directly (the gradient at its argmax, zero elsewhere) and
 * only the cells no window covers need clearing; 2x2/2 windows also get a branch-free
 * argmax, in forward too. The routing is the same as in the general path.
 *
 * OpenMP runs over (item, channel) planes: each thread owns its planes' outputs in
 * forward and their input gradients in backward, so overlapping windows never race. */
#include <stdio.h>
#include <string.h>

#include "layers/pool.h"

/* Loops over fewer window cells than this run on one thread: starting a parallel region
 * costs more than such a loop. */
#define PAR_MIN_WORK ((size_t)1 << 15)

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

/* One row of 2x2/2 windows: the first maximum of each, as argmax_of picks it. */
static void maxpool_fwd_row2(const float *restrict x0, const float *restrict x1,
                             float *restrict y, int ow)
{
    for (int j = 0; j < ow; j++) {
        float m = x0[2 * j];
        m = x0[2 * j + 1] > m ? x0[2 * j + 1] : m;
        m = x1[2 * j] > m ? x1[2 * j] : m;
        y[j] = x1[2 * j + 1] > m ? x1[2 * j + 1] : m;
    }
}

static vdnn_status maxpool_forward(layer *l, const exec_ctx *c, const float *x, float *y)
{
    const pool_params *p = l->priv;
    const int planes = c->n * l->in.c, h = l->in.h, w = l->in.w, oh = l->out.h, ow = l->out.w;
    const int par = (size_t)planes * oh * ow * p->size * p->size >= PAR_MIN_WORK;
    const int tiled2 = p->size == 2 && p->stride == 2 && p->pad == 0;
#pragma omp parallel for if (par) schedule(static)
    for (int pl = 0; pl < planes; pl++) {
        const float *xp = x + (size_t)pl * h * w;   /* (H, W) */
        float *yp = y + (size_t)pl * oh * ow;       /* (OH, OW) */
        if (tiled2) {
            for (int i = 0; i < oh; i++)
                maxpool_fwd_row2(xp + (size_t)2 * i * w, xp + (size_t)(2 * i + 1) * w,
                                 yp + (size_t)i * ow, ow);
            continue;
        }
        for (int i = 0; i < oh; i++)
            for (int j = 0; j < ow; j++)
                yp[i * ow + j] = xp[argmax_of(xp, w, window_of(p, h, w, i, j))];
    }
    return VDNN_OK;
}

/* One row of 2x2/2 windows: x0, x1 the two input rows, dx0, dx1 their gradients. The
 * first maximum in row-major order wins (strict >), as in argmax_of. */
static void maxpool_bwd_row2(const float *restrict x0, const float *restrict x1,
                             const float *restrict dy, float *restrict dx0, float *restrict dx1,
                             int ow)
{
    for (int j = 0; j < ow; j++) {
        const float a = x0[2 * j], b = x0[2 * j + 1], c = x1[2 * j], d = x1[2 * j + 1];
        const float g = dy[j];
        int k = b > a;
        float m = k ? b : a;
        k = c > m ? 2 : k;
        m = c > m ? c : m;
        k = d > m ? 3 : k;
        dx0[2 * j] = k == 0 ? g : 0.0f;
        dx0[2 * j + 1] = k == 1 ? g : 0.0f;
        dx1[2 * j] = k == 2 ? g : 0.0f;
        dx1[2 * j + 1] = k == 3 ? g : 0.0f;
    }
}

/* Backward of one plane whose windows tile without overlap (stride = size, pad 0). */
static void maxpool_bwd_tiled(const pool_params *p, int h, int w, int oh, int ow,
                              const float *xp, const float *dyp, float *dxp)
{
    const int k = p->size;
    if (oh * k < h || ow * k < w) memset(dxp, 0, (size_t)h * w * sizeof *dxp);
    for (int i = 0; i < oh; i++) {
        if (k == 2) {
            const size_t r0 = (size_t)2 * i * w;
            maxpool_bwd_row2(xp + r0, xp + r0 + w, dyp + (size_t)i * ow, dxp + r0, dxp + r0 + w,
                             ow);
            continue;
        }
        for (int j = 0; j < ow; j++) {
            pool_win r = window_of(p, h, w, i, j);
            const int best = argmax_of(xp, w, r);
            const float g = dyp[i * ow + j];
            for (int a = r.h0; a < r.h1; a++)
                for (int b = r.w0; b < r.w1; b++) dxp[a * w + b] = a * w + b == best ? g : 0.0f;
        }
    }
}

static vdnn_status maxpool_backward(layer *l, const exec_ctx *c, const float *x, const float *y,
                                    const float *dy, float *dx)
{
    (void)y;
    if (!dx) return VDNN_OK;
    const pool_params *p = l->priv;
    const int planes = c->n * l->in.c, h = l->in.h, w = l->in.w, oh = l->out.h, ow = l->out.w;
    const int par = (size_t)planes * oh * ow * p->size * p->size >= PAR_MIN_WORK;
    const int tiled = p->stride == p->size && p->pad == 0;
#pragma omp parallel for if (par) schedule(static)
    for (int pl = 0; pl < planes; pl++) {
        if (tiled) {
            maxpool_bwd_tiled(p, h, w, oh, ow, x + (size_t)pl * h * w, dy + (size_t)pl * oh * ow,
                              dx + (size_t)pl * h * w);
            continue;
        }
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
    .forward_cuda = CUDA_HALF(maxpool_forward_cuda),
    .backward_cuda = CUDA_HALF(maxpool_backward_cuda),
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
    .forward_cuda = CUDA_HALF(avgpool_forward_cuda),
    .backward_cuda = CUDA_HALF(avgpool_backward_cuda),
};
