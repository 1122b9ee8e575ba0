/* Max and average pooling (CPU half).
 *
 * Both slide a size_h x size_w window with strides (stride_h, stride_w) over each (item,
 * channel) plane of x (N, C, H, W), with optional zero padding (pad_h above and below,
 * pad_w left and right), giving y (N, C, OH, OW) where
 * OH = floor((H + 2*pad_h - size_h) / stride_h) + 1, or with ceil_mode the same rounded
 * up, less one when the last window would start in the bottom padding (Caffe's and
 * PyTorch's rule: every window starts inside the input or its top/left padding). A
 * global pooling is one window over the whole map, of any size.
 *
 * Max pooling ignores padded cells (they never win, as in PyTorch), so every window
 * needs at least one real cell: pad < size and the ceil rule guarantee it. Backward
 * recomputes each window's argmax from x instead of storing indices (needs_input = 1):
 * nothing extra to keep or offload, and the first maximum in row-major window order wins
 * on ties, so the routing is deterministic.
 *
 * Average pooling divides by the cells of its window that lie inside the padded input
 * (PyTorch's count_include_pad = True, the default: size_h*size_w but for a ceil-mode
 * window that hangs past the bottom or right padding), or with count_pad = 0 by its real
 * cells only; its backward reads neither x nor y.
 *
 * Windows that tile the input without overlap (stride = size, no padding, every window
 * inside the input; the usual 2x2/2) take a faster backward: each input cell lies in at
 * most one window, so every window writes its cells directly (the gradient at its
 * argmax, zero elsewhere) and only the cells no window covers need clearing; 2x2/2
 * windows also get a branch-free argmax, in forward too. The routing is the same as in
 * the general path.
 *
 * OpenMP runs over (item, channel) planes: each thread owns its planes' outputs in
 * forward and their input gradients in backward, so overlapping windows never race. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "layers/pooling.h"

/* Loops over fewer window cells than this run on one thread: starting a parallel region
 * costs more than such a loop. */
#define PAR_MIN_WORK ((size_t)1 << 15)

#define POOL_KEYS                                                                              \
    {"size", CFG_INT, 0, 1, 64, NULL, 0, "side of a square window (or size_h and size_w)"},     \
    {"size_h", CFG_INT, 0, 1, 64, NULL, 0, "window height (default size)"},                     \
    {"size_w", CFG_INT, 0, 1, 64, NULL, 0, "window width (default size)"},                      \
    {"stride", CFG_INT, 0, 1, 64, NULL, 0, "step between windows (default: the window side)"},  \
    {"stride_h", CFG_INT, 0, 1, 64, NULL, 0, "vertical step (default stride, else size_h)"},    \
    {"stride_w", CFG_INT, 0, 1, 64, NULL, 0, "horizontal step (default stride, else size_w)"},  \
    {"pad", CFG_INT, 0, 0, 32, NULL, 0, "padding on each side, less than the window (default 0)"}, \
    {"pad_h", CFG_INT, 0, 0, 32, NULL, 0, "padding above and below (default pad)"},             \
    {"pad_w", CFG_INT, 0, 0, 32, NULL, 0, "padding left and right (default pad)"},              \
    {"ceil_mode", CFG_BOOL, 0, 0, 1, NULL, 0, "round output sides up, as Caffe (default 0)"},   \
    {"global", CFG_BOOL, 0, 0, 1, NULL, 0, "one window over the whole map (default 0)"}

static const cfg_key maxpool_keys[] = {
    POOL_KEYS,
    {NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

static const cfg_key avgpool_keys[] = {
    POOL_KEYS,
    {"count_pad", CFG_BOOL, 0, 0, 1, NULL, 0, "the divisor counts padded cells (default 1)"},
    {NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

/* The keys a global pooling takes none of: its window is the map. */
static const char *const window_keys[] = {"size", "size_h", "size_w", "stride", "stride_h",
                                          "stride_w", "pad", "pad_h", "pad_w", "ceil_mode"};

/* The window of output (oh, ow), clipped to the real cells: rows [*h0, *h1), columns
 * [*w0, *w1); n the cells the average divides by. */
typedef struct pool_win { int h0, h1, w0, w1, n; } pool_win;

static pool_win window_of(const pool_params *p, int h, int w, int oh, int ow)
{
    pool_win r;
    r.h0 = oh * p->stride_h - p->pad_h;
    r.w0 = ow * p->stride_w - p->pad_w;
    const int he = r.h0 + p->size_h, we = r.w0 + p->size_w;
    /* the window's part inside the padded input, for a divisor that counts padding */
    const int hp = (he < h + p->pad_h ? he : h + p->pad_h) - r.h0;
    const int wp = (we < w + p->pad_w ? we : w + p->pad_w) - r.w0;
    r.h1 = he < h ? he : h;
    r.w1 = we < w ? we : w;
    if (r.h0 < 0) r.h0 = 0;
    if (r.w0 < 0) r.w0 = 0;
    r.n = p->exclude_pad ? (r.h1 - r.h0) * (r.w1 - r.w0) : hp * wp;
    return r;
}

/* A setup error: with file:line when built from a config, else with the layer name. */
static vdnn_status pool_error(const layer *l, const cfg_file *f, const cfg_section *s,
                              const char *key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static vdnn_status pool_error(const layer *l, const cfg_file *f, const cfg_section *s,
                              const char *key, const char *fmt, ...)
{
    char msg[192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (f && s) return cfg_error(f, s, key, "%s", msg);
    return vdnn_fail(VDNN_EINVAL, "%s: %s: %s", l->name, key, msg);
}

/* Reads the section's keys into p (s non-NULL); a global pooling must give none of
 * window_keys. */
static vdnn_status read_params(layer *l, const cfg_file *f, const cfg_section *s)
{
    pool_params *p = l->priv;
    p->global = cfg_int(s, "global", 0);
    for (size_t i = 0; p->global && i < sizeof window_keys / sizeof *window_keys; i++)
        if (cfg_find(s, window_keys[i]))
            return cfg_error(f, s, window_keys[i], "does not apply with global = 1");
    p->size = cfg_int(s, "size", 0);
    p->size_h = cfg_int(s, "size_h", p->size);
    p->size_w = cfg_int(s, "size_w", p->size);
    p->stride = cfg_int(s, "stride", 0);
    p->stride_h = cfg_int(s, "stride_h", p->stride);
    p->stride_w = cfg_int(s, "stride_w", p->stride);
    p->pad = cfg_int(s, "pad", 0);
    p->pad_h = cfg_int(s, "pad_h", p->pad);
    p->pad_w = cfg_int(s, "pad_w", p->pad);
    p->ceil_mode = cfg_int(s, "ceil_mode", 0);
    p->exclude_pad = !cfg_int(s, "count_pad", 1);
    return VDNN_OK;
}

/* Fills what the caller left 0; a global window is the input map. */
static void resolve_params(layer *l)
{
    pool_params *p = l->priv;
    if (p->global) {
        p->size_h = l->in.h, p->size_w = l->in.w;
        p->stride_h = p->stride_w = 1;
        p->pad_h = p->pad_w = 0;
        p->ceil_mode = 0;
        return;
    }
    p->size_h = p->size_h ? p->size_h : p->size;
    p->size_w = p->size_w ? p->size_w : p->size;
    p->stride_h = p->stride_h ? p->stride_h : p->stride ? p->stride : p->size_h;
    p->stride_w = p->stride_w ? p->stride_w : p->stride ? p->stride : p->size_w;
    p->pad_h = p->pad_h ? p->pad_h : p->pad;
    p->pad_w = p->pad_w ? p->pad_w : p->pad;
}

/* Range checks for a pool_params filled in code (a config was range-checked already). */
static vdnn_status check_code_params(const layer *l, const pool_params *p)
{
    const int v[] = {p->size_h, p->size_w, p->stride_h, p->stride_w, p->pad_h, p->pad_w};
    const int lo[] = {1, 1, 1, 1, 0, 0}, hi[] = {64, 64, 64, 64, 32, 32};
    const char *name[] = {"size_h", "size_w", "stride_h", "stride_w", "pad_h", "pad_w"};
    for (int i = p->global ? 6 : 0; i < 6; i++)
        if (v[i] < lo[i] || v[i] > hi[i])
            return vdnn_fail(VDNN_EINVAL, "%s: %s %d out of range [%d, %d]", l->name, name[i], v[i],
                             lo[i], hi[i]);
    return VDNN_OK;
}

/* Output side for input `in`, window k, stride st, pad pd (the padded input holds k). */
static int out_side(int in, int k, int st, int pd, int ceil_mode)
{
    const int span = in + 2 * pd - k;
    int out = (ceil_mode ? (span + st - 1) / st : span / st) + 1;
    if (ceil_mode && (out - 1) * st >= in + pd) out--;   /* would start in the bottom pad */
    return out;
}

/* `key` when the section gives it, else `shorthand` (a message names what was written). */
static const char *key_or(const cfg_section *s, const char *key, const char *shorthand)
{
    return s && cfg_find(s, key) ? key : shorthand;
}

/* The window against the padded input; l->out on success. */
static vdnn_status pool_shape(layer *l, const cfg_file *f, const cfg_section *s)
{
    const pool_params *p = l->priv;
    if (p->size_h == 0 || p->size_w == 0)
        return pool_error(l, f, s, "size", "give size, or size_h and size_w, or global = 1");
    if (p->pad_h >= p->size_h)
        return pool_error(l, f, s, key_or(s, "pad_h", "pad"),
                          "must be less than the window height (%d), not %d", p->size_h, p->pad_h);
    if (p->pad_w >= p->size_w)
        return pool_error(l, f, s, key_or(s, "pad_w", "pad"),
                          "must be less than the window width (%d), not %d", p->size_w, p->pad_w);
    const int hp = l->in.h + 2 * p->pad_h, wp = l->in.w + 2 * p->pad_w;
    if (hp < p->size_h || wp < p->size_w)
        return pool_error(l, f, s, key_or(s, "size", key_or(s, "size_h", "size_w")),
                          "window %dx%d is larger than the padded input %dx%d", p->size_h, p->size_w,
                          hp, wp);
    l->out = shape_make(l->in.n, l->in.c, out_side(l->in.h, p->size_h, p->stride_h, p->pad_h, p->ceil_mode),
                        out_side(l->in.w, p->size_w, p->stride_w, p->pad_w, p->ceil_mode));
    return VDNN_OK;
}

static vdnn_status pool_setup(layer *l, const cfg_file *f, const cfg_section *s)
{
    vdnn_status st = s ? read_params(l, f, s) : VDNN_OK;
    if (st != VDNN_OK) return st;
    resolve_params(l);
    if (!s) st = check_code_params(l, l->priv);
    if (st == VDNN_OK) st = pool_shape(l, f, s);
    if (st != VDNN_OK) return st;
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

/* Whether the windows tile the input without overlap: stride = size, no padding, and
 * every window inside the input (a ceil-mode window past the edge is not). */
static int tiles(const pool_params *p, int h, int w, int oh, int ow)
{
    return p->stride_h == p->size_h && p->stride_w == p->size_w && p->pad_h == 0 && p->pad_w == 0 &&
           oh * p->size_h <= h && ow * p->size_w <= w;
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
    const int par = (size_t)planes * oh * ow * p->size_h * p->size_w >= PAR_MIN_WORK;
    const int tiled2 = tiles(p, h, w, oh, ow) && p->size_h == 2 && p->size_w == 2;
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

/* Backward of one plane whose windows tile without overlap (tiles()). */
static void maxpool_bwd_tiled(const pool_params *p, int h, int w, int oh, int ow,
                              const float *xp, const float *dyp, float *dxp)
{
    if (oh * p->size_h < h || ow * p->size_w < w) memset(dxp, 0, (size_t)h * w * sizeof *dxp);
    for (int i = 0; i < oh; i++) {
        if (p->size_h == 2 && p->size_w == 2) {
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
    const int par = (size_t)planes * oh * ow * p->size_h * p->size_w >= PAR_MIN_WORK;
    const int tiled = tiles(p, h, w, oh, ow);
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
    const int par = (size_t)planes * oh * ow * p->size_h * p->size_w >= PAR_MIN_WORK;
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
                yp[i * ow + j] = s * (1.0f / (float)r.n);
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
    const int par = (size_t)planes * oh * ow * p->size_h * p->size_w >= PAR_MIN_WORK;
#pragma omp parallel for if (par) schedule(static)
    for (int pl = 0; pl < planes; pl++) {
        const float *dyp = dy + (size_t)pl * oh * ow; /* (OH, OW) */
        float *dxp = dx + (size_t)pl * h * w;        /* (H, W) */
        memset(dxp, 0, (size_t)h * w * sizeof *dxp);
        for (int i = 0; i < oh; i++)
            for (int j = 0; j < ow; j++) {
                pool_win r = window_of(p, h, w, i, j);
                const float g = dyp[i * ow + j] * (1.0f / (float)r.n);
                for (int a = r.h0; a < r.h1; a++)
                    for (int b = r.w0; b < r.w1; b++) dxp[a * w + b] += g;
            }
    }
    return VDNN_OK;
}

/* "3x3/2 p1", or "3x2/2x1 p1,0 ceil", "global", with ", count_pad 0" for an average that
 * excludes padding. */
static void pool_describe(const layer *l, char *buf, size_t len)
{
    const pool_params *p = l->priv;
    const char *excl = l->ops->keys == avgpool_keys && p->exclude_pad ? ", count_pad 0" : "";
    if (p->global) {
        snprintf(buf, len, "global %dx%d%s", p->size_h, p->size_w, excl);
        return;
    }
    char st[24], pad[24];
    if (p->stride_h == p->stride_w) snprintf(st, sizeof st, "%d", p->stride_h);
    else snprintf(st, sizeof st, "%dx%d", p->stride_h, p->stride_w);
    if (p->pad_h == p->pad_w) snprintf(pad, sizeof pad, "%d", p->pad_h);
    else snprintf(pad, sizeof pad, "%d,%d", p->pad_h, p->pad_w);
    snprintf(buf, len, "%dx%d/%s p%s%s%s", p->size_h, p->size_w, st, pad, p->ceil_mode ? " ceil" : "", excl);
}

const layer_ops maxpool_ops = {
    .type = "maxpool",
    .prefix = "maxpool",
    .keys = maxpool_keys,
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
    .keys = avgpool_keys,
    .priv_bytes = sizeof(pool_params),
    .setup = avgpool_setup,
    .forward_cpu = avgpool_forward,
    .backward_cpu = avgpool_backward,
    .describe = pool_describe,
    .forward_cuda = CUDA_HALF(avgpool_forward_cuda),
    .backward_cuda = CUDA_HALF(avgpool_backward_cuda),
};
