/* The convolutional layer (CPU half): shape inference, parameters, and four CPU
 * algorithms for each pass, which trade workspace for speed (ids in layers/conv.h):
 *
 *   direct        no workspace; plain loops, OpenMP over independent output planes
 *                 (forward: (item, block of 4 filters); backward-data: (item, block of
 *                 4 channels); backward-filter: (filter, channel))
 *   im2col        one image's column buffer (IC*K*K, OH*OW) + a GEMM per image
 *   im2col-batch  the whole batch's column buffer (IC*K*K, N*OH*OW) + one large GEMM,
 *                 plus a (OC, N*OH*OW) buffer to move between that layout and NCHW
 *   im2col-chunk  as im2col-batch, a chunk of images at a time, the chunk sized so that
 *                 its column buffer stays in cache yet the GEMM stays wide
 *
 * A 1x1 convolution with stride 1 and no padding is already in column form, so the
 * per-image algorithm uses the input (or writes dx) in place and needs no workspace.
 *
 * Weights are (OC, IC, K, K), read as a row-major (OC, IC*K*K) matrix; bias is (OC).
 * Backward reads x for the filter gradient (needs_input) and never y; it needs the
 * larger of its two algorithms' workspaces (only the filter's when dx is NULL). Every
 * result is computed in a fixed order that does not depend on the thread count, except
 * what OpenBLAS does inside one GEMM (fixed for a given OpenBLAS thread count).
 *
 * cblas calls are made from the calling thread only, never inside an OpenMP region:
 * OpenBLAS threads itself, and nesting the two oversubscribes or deadlocks. */
#include "layers/conv.h"

#include <cblas.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { CONV_WEIGHTS = 0, CONV_BIAS = 1 };

/* The direct algorithm computes DIRECT_BLOCK planes per task, and sums rows in
 * DIRECT_LANES partial sums (one AVX vector). */
enum { DIRECT_BLOCK = 4, DIRECT_LANES = 8 };

/* Loops over fewer elements (or multiply-adds) than this run on one thread: starting a
 * parallel region costs more than such a loop. */
#define PAR_MIN_WORK ((size_t)1 << 15)

static const cfg_key conv_keys[] = {
    {"filters", CFG_INT, 1, 1, 65536, NULL, 0, "number of filters (output channels)"},
    {"size", CFG_INT, 1, 1, 64, NULL, 0, "side of the square kernel"},
    {"stride", CFG_INT, 0, 1, 64, NULL, 0, "step between windows (default 1)"},
    {"pad", CFG_INT, 0, 0, 64, NULL, 0, "zero padding on each side (default 0)"},
    {"bias", CFG_BOOL, 0, 0, 1, NULL, 0, "add a learned bias per filter (default 1)"},
    {NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

static const char *const algo_names[CONV_ALGO_COUNT] = {"direct", "im2col", "im2col-batch",
                                                         "im2col-chunk"};

/* im2col-chunk takes as many images per GEMM as keep one chunk's column buffer within
 * CONV_CHUNK_COL_BYTES (about one core's L2, so that it is still in cache when the GEMM
 * reads it), but at least CONV_CHUNK_MIN_COLS columns (so that small feature maps still
 * make a wide GEMM). Both can be tuned at build time with -D. */
#ifndef CONV_CHUNK_COL_BYTES
#define CONV_CHUNK_COL_BYTES ((size_t)2 << 20)
#endif
#ifndef CONV_CHUNK_MIN_COLS
#define CONV_CHUNK_MIN_COLS 1024
#endif

/* Everything a kernel needs, for one call with n items. */
typedef struct conv_geom {
    int n;               /* items in this call */
    int ic, h, w;        /* input (N, IC, H, W) */
    int oc, oh, ow;      /* output (N, OC, OH, OW) */
    int k, s, p;         /* kernel side, stride, pad */
    int kdim;            /* IC*K*K: rows of a column buffer, columns of the weights */
    int ipix, opix;      /* H*W, OH*OW */
    int pointwise;       /* 1x1, stride 1, pad 0: the input is its own column buffer */
} conv_geom;

static conv_geom geom_of(const layer *l, int n)
{
    const conv_params *p = l->priv;
    conv_geom g;
    g.n = n;
    g.ic = l->in.c, g.h = l->in.h, g.w = l->in.w;
    g.oc = l->out.c, g.oh = l->out.h, g.ow = l->out.w;
    g.k = p->size, g.s = p->stride, g.p = p->pad;
    g.kdim = g.ic * g.k * g.k;
    g.ipix = g.h * g.w;
    g.opix = g.oh * g.ow;
    g.pointwise = g.k == 1 && g.s == 1 && g.p == 0;
    return g;
}

/* ---- set-up ---------------------------------------------------------------------- */

/* A setup error: with file:line when built from a config, else with the layer name. */
static vdnn_status setup_error(const layer *l, const cfg_file *f, const cfg_section *s,
                               const char *key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static vdnn_status setup_error(const layer *l, const cfg_file *f, const cfg_section *s,
                               const char *key, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (f && s) return cfg_error(f, s, key, "%s", msg);
    return vdnn_fail(VDNN_EINVAL, "%s: %s", l->name, msg);
}

/* Range checks for a conv_params filled in code (a config was range-checked already). */
static vdnn_status check_params(const layer *l, const conv_params *p)
{
    if (p->filters < 1 || p->filters > 65536)
        return vdnn_fail(VDNN_EINVAL, "%s: filters must lie in [1, 65536], not %d", l->name,
                         p->filters);
    if (p->size < 1 || p->size > 64)
        return vdnn_fail(VDNN_EINVAL, "%s: size must lie in [1, 64], not %d", l->name, p->size);
    if (p->stride < 1 || p->stride > 64)
        return vdnn_fail(VDNN_EINVAL, "%s: stride must lie in [1, 64], not %d", l->name, p->stride);
    if (p->pad < 0 || p->pad > 64)
        return vdnn_fail(VDNN_EINVAL, "%s: pad must lie in [0, 64], not %d", l->name, p->pad);
    if (p->bias != 0 && p->bias != 1)
        return vdnn_fail(VDNN_EINVAL, "%s: bias must be 0 or 1, not %d", l->name, p->bias);
    return VDNN_OK;
}

static void declare_param(param *p, const char *name, shape4 shape, param_init init,
                          int fan_in, int decay)
{
    snprintf(p->name, sizeof p->name, "%s", name);
    p->shape = shape;
    p->init = init;
    p->fan_in = fan_in;
    p->trainable = 1;
    p->decay = decay;
}

static vdnn_status conv_setup(layer *l, const cfg_file *f, const cfg_section *s)
{
    conv_params *p = l->priv;
    if (s) {
        p->filters = cfg_int(s, "filters", 0);
        p->size = cfg_int(s, "size", 0);
        p->stride = cfg_int(s, "stride", 1);
        p->pad = cfg_int(s, "pad", 0);
        p->bias = cfg_int(s, "bias", 1);
    }
    vdnn_status st = check_params(l, p);
    if (st != VDNN_OK) return st;
    const int k = p->size, hp = l->in.h + 2 * p->pad, wp = l->in.w + 2 * p->pad;
    if (hp < k || wp < k)
        return setup_error(l, f, s, "size", "kernel %dx%d is larger than the padded input %dx%d",
                           k, k, hp, wp);
    const int oh = (hp - k) / p->stride + 1, ow = (wp - k) / p->stride + 1;
    /* cblas takes int dimensions: a column buffer's rows and the batch's columns. */
    const size_t kdim = (size_t)l->in.c * k * k, cols = (size_t)l->in.n * oh * ow;
    if (kdim > INT_MAX || cols > INT_MAX || (size_t)l->in.h * l->in.w > INT_MAX)
        return setup_error(l, f, s, NULL, "input %dx%dx%dx%d is too large for one GEMM",
                           l->in.n, l->in.c, l->in.h, l->in.w);
    l->out = shape_make(l->in.n, p->filters, oh, ow);
    l->needs_input = 1;
    l->needs_output = 0;
    l->nparams = p->bias ? 2 : 1;
    declare_param(&l->params[CONV_WEIGHTS], "weights", shape_make(p->filters, l->in.c, k, k),
                  INIT_HE, (int)kdim, 1);
    if (p->bias)
        declare_param(&l->params[CONV_BIAS], "bias", shape_make(p->filters, 1, 1, 1), INIT_ZERO,
                      0, 0);
    return VDNN_OK;
}

/* ---- workspace ------------------------------------------------------------------- */

/* Images per GEMM of the batched algorithms for g->n items; 0 for the others. */
static int chunk_images(const conv_geom *g, int algo)
{
    if (algo == CONV_ALGO_IM2COL_BATCH) return g->n;
    if (algo != CONV_ALGO_IM2COL_CHUNK) return 0;
    size_t by_bytes = CONV_CHUNK_COL_BYTES / ((size_t)g->kdim * g->opix * sizeof(float));
    size_t by_cols = (CONV_CHUNK_MIN_COLS + (size_t)g->opix - 1) / (size_t)g->opix;
    size_t k = by_bytes > by_cols ? by_bytes : by_cols;
    return k < (size_t)g->n ? (int)k : g->n;
}

/* Floats of workspace that `algo` needs for g->n items: the column buffer of one image
 * (per-image), or of one chunk plus the (OC, chunk*OH*OW) reorder buffer (batched). */
static size_t workspace_floats(const conv_geom *g, int algo)
{
    if (algo == CONV_ALGO_IM2COL) return g->pointwise ? 0 : (size_t)g->kdim * g->opix;
    return ((size_t)g->kdim + g->oc) * (size_t)chunk_images(g, algo) * g->opix;
}

static int conv_algo_count(const layer *l, int pass)
{
    (void)l;
    return pass >= 0 && pass < PASS_COUNT ? CONV_ALGO_COUNT : 0;
}

static const char *conv_algo_name(const layer *l, int pass, int algo)
{
    (void)l;
    (void)pass;
    return algo >= 0 && algo < CONV_ALGO_COUNT ? algo_names[algo] : "unknown";
}

/* The same for every pass: each algorithm's buffers have the same sizes in all three. */
static size_t conv_workspace_bytes(const layer *l, int pass, int algo)
{
    (void)pass;
    conv_geom g = geom_of(l, l->in.n);
    return workspace_floats(&g, algo) * sizeof(float);
}

/* Checks the algorithms chosen for the passes that will run and the workspace for n
 * items; `passes` is a bit set of (1 << PASS_*). */
static vdnn_status check_call(const layer *l, const exec_ctx *c, const conv_geom *g, int passes)
{
    size_t need = 0;
    for (int pass = 0; pass < PASS_COUNT; pass++) {
        if (!(passes & (1 << pass))) continue;
        int a = l->algo[pass];
        if (a < 0 || a >= CONV_ALGO_COUNT)
            return vdnn_fail(VDNN_EINVAL, "%s: no convolution algorithm %d for pass %d", l->name,
                             a, pass);
        size_t b = workspace_floats(g, a) * sizeof(float);
        if (b > need) need = b;
    }
    if (c->n < 1 || c->n > l->in.n)
        return vdnn_fail(VDNN_EINVAL, "%s: batch of %d items, expected 1..%d", l->name, c->n,
                         l->in.n);
    if (need > 0 && (!c->workspace || c->workspace_bytes < need))
        return vdnn_fail(VDNN_EINVAL, "%s: workspace of %zu bytes given, %zu needed for %d items",
                         l->name, c->workspace ? c->workspace_bytes : 0, need, c->n);
    return VDNN_OK;
}

/* ---- im2col, col2im and layout changes -------------------------------------------- */

/* The outputs o in [*lo, *hi) whose input index o*stride - pad + kx lies in [0, in). */
static void valid_range(int kx, int pad, int stride, int in, int out, int *lo, int *hi)
{
    int first = pad - kx, last = in - 1 + pad - kx;   /* o*stride must lie in [first, last] */
    int l = first > 0 ? (first + stride - 1) / stride : 0;
    int h = last < 0 ? 0 : last / stride + 1;
    if (h > out) h = out;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* Row r = (ci, kh, kw) of a column buffer, for one image x (IC, H, W): dst (OH*OW)
 * receives x[ci][oh*s - p + kh][ow*s - p + kw], zero where that falls in the padding. */
static void im2col_row(const conv_geom *g, const float *x, int r, float *dst)
{
    const int kk = g->k * g->k, ci = r / kk, kh = (r / g->k) % g->k, kw = r % g->k;
    const float *xc = x + (size_t)ci * g->ipix;
    int olo, ohi, lo, hi;
    valid_range(kh, g->p, g->s, g->h, g->oh, &olo, &ohi);
    valid_range(kw, g->p, g->s, g->w, g->ow, &lo, &hi);
    memset(dst, 0, (size_t)olo * g->ow * sizeof *dst);
    for (int oh = olo; oh < ohi; oh++) {
        const float *xr = xc + (size_t)(oh * g->s - g->p + kh) * g->w;
        float *d = dst + (size_t)oh * g->ow;
        for (int ow = 0; ow < lo; ow++) d[ow] = 0.0f;
        if (g->s == 1 && hi > lo)
            memcpy(d + lo, xr + (lo - g->p + kw), (size_t)(hi - lo) * sizeof *d);
        else if (g->s > 1)
            for (int ow = lo; ow < hi; ow++) d[ow] = xr[ow * g->s - g->p + kw];
        for (int ow = hi; ow < g->ow; ow++) d[ow] = 0.0f;
    }
    memset(dst + (size_t)ohi * g->ow, 0, (size_t)(g->oh - ohi) * g->ow * sizeof *dst);
}

/* col (KDIM, OH*OW) <- the patches of one image x (IC, H, W). */
static void im2col_image(const conv_geom *g, const float *x, float *col)
{
    const int par = (size_t)g->kdim * g->opix >= PAR_MIN_WORK;
#pragma omp parallel for if (par) schedule(static)
    for (int r = 0; r < g->kdim; r++) im2col_row(g, x, r, col + (size_t)r * g->opix);
}

/* col (KDIM, N*OH*OW) <- the patches of every image of x (N, IC, H, W); image i fills
 * columns [i*OH*OW, (i+1)*OH*OW) of each row. */
static void im2col_batch(const conv_geom *g, const float *x, float *col)
{
    const size_t ld = (size_t)g->n * g->opix;
    const int par = (size_t)g->kdim * g->n * g->opix >= PAR_MIN_WORK;
#pragma omp parallel for if (par) collapse(2) schedule(static)
    for (int r = 0; r < g->kdim; r++)
        for (int i = 0; i < g->n; i++)
            im2col_row(g, x + (size_t)i * g->ic * g->ipix, r, col + r * ld + (size_t)i * g->opix);
}

/* dxc (H, W) of channel ci = the sum of the column rows (ci, kh, kw) scattered back to
 * the pixels they were read from; `col` rows have `ld` floats. One thread per channel
 * owns every write into it. */
static void col2im_channel(const conv_geom *g, const float *col, size_t ld, int ci, float *dxc)
{
    memset(dxc, 0, (size_t)g->ipix * sizeof *dxc);
    for (int kh = 0; kh < g->k; kh++) {
        int olo, ohi;
        valid_range(kh, g->p, g->s, g->h, g->oh, &olo, &ohi);
        for (int kw = 0; kw < g->k; kw++) {
            int lo, hi;
            valid_range(kw, g->p, g->s, g->w, g->ow, &lo, &hi);
            const float *src = col + ((size_t)(ci * g->k + kh) * g->k + kw) * ld;
            for (int oh = olo; oh < ohi; oh++) {
                float *dr = dxc + (size_t)(oh * g->s - g->p + kh) * g->w;
                const float *sr = src + (size_t)oh * g->ow;
                for (int ow = lo; ow < hi; ow++) dr[ow * g->s - g->p + kw] += sr[ow];
            }
        }
    }
}

/* dx (IC, H, W) of one image <- col (KDIM, OH*OW). */
static void col2im_image(const conv_geom *g, const float *col, float *dx)
{
    const int par = (size_t)g->kdim * g->opix >= PAR_MIN_WORK;
#pragma omp parallel for if (par) schedule(static)
    for (int ci = 0; ci < g->ic; ci++)
        col2im_channel(g, col, g->opix, ci, dx + (size_t)ci * g->ipix);
}

/* dx (N, IC, H, W) <- col (KDIM, N*OH*OW). */
static void col2im_batch(const conv_geom *g, const float *col, float *dx)
{
    const size_t ld = (size_t)g->n * g->opix;
    const int par = (size_t)g->kdim * g->n * g->opix >= PAR_MIN_WORK;
#pragma omp parallel for if (par) collapse(2) schedule(static)
    for (int i = 0; i < g->n; i++)
        for (int ci = 0; ci < g->ic; ci++)
            col2im_channel(g, col + (size_t)i * g->opix, ld, ci,
                           dx + ((size_t)i * g->ic + ci) * g->ipix);
}

/* y (N, OC, OH*OW) <- t (OC, N*OH*OW), adding bias (OC) when not NULL. */
static void channels_to_nchw(const conv_geom *g, const float *t, const float *bias, float *y)
{
    const size_t ld = (size_t)g->n * g->opix;
    const int par = (size_t)g->oc * g->n * g->opix >= PAR_MIN_WORK;
#pragma omp parallel for if (par) collapse(2) schedule(static)
    for (int i = 0; i < g->n; i++)
        for (int o = 0; o < g->oc; o++) {
            const float *src = t + o * ld + (size_t)i * g->opix;
            float *dst = y + ((size_t)i * g->oc + o) * g->opix;
            float b = bias ? bias[o] : 0.0f;
            for (int q = 0; q < g->opix; q++) dst[q] = src[q] + b;
        }
}

/* t (OC, N*OH*OW) <- dy (N, OC, OH*OW). */
static void nchw_to_channels(const conv_geom *g, const float *dy, float *t)
{
    const size_t ld = (size_t)g->n * g->opix;
    const int par = (size_t)g->oc * g->n * g->opix >= PAR_MIN_WORK;
#pragma omp parallel for if (par) collapse(2) schedule(static)
    for (int o = 0; o < g->oc; o++)
        for (int i = 0; i < g->n; i++)
            memcpy(t + o * ld + (size_t)i * g->opix, dy + ((size_t)i * g->oc + o) * g->opix,
                   (size_t)g->opix * sizeof *t);
}

/* ---- forward --------------------------------------------------------------------- */

/* Output planes y (nb, OH, OW) of one item x (IC, H, W) for the nb <= DIRECT_BLOCK
 * filters w (nb, IC, K, K): each x value loaded feeds nb multiply-adds, which is what
 * makes plain loops tolerable. */
static void direct_fwd_block(const conv_geom *g, const float *x, const float *w,
                             const float *bias, int nb, float *y)
{
    for (int b = 0; b < nb; b++)
        for (int q = 0; q < g->opix; q++) y[(size_t)b * g->opix + q] = bias ? bias[b] : 0.0f;
    for (int ci = 0; ci < g->ic; ci++)
        for (int kh = 0; kh < g->k; kh++) {
            int olo, ohi;
            valid_range(kh, g->p, g->s, g->h, g->oh, &olo, &ohi);
            for (int kw = 0; kw < g->k; kw++) {
                float wv[DIRECT_BLOCK] = {0.0f};
                for (int b = 0; b < nb; b++)
                    wv[b] = w[(size_t)b * g->kdim + (ci * g->k + kh) * g->k + kw];
                int lo, hi;
                valid_range(kw, g->p, g->s, g->w, g->ow, &lo, &hi);
                for (int oh = olo; oh < ohi; oh++) {
                    const float *restrict xr = x + (size_t)ci * g->ipix +
                                               (size_t)(oh * g->s - g->p + kh) * g->w;
                    float *restrict y0 = y + (size_t)oh * g->ow;
                    if (nb == DIRECT_BLOCK) {
                        float *restrict y1 = y0 + g->opix, *restrict y2 = y1 + g->opix;
                        float *restrict y3 = y2 + g->opix;
                        for (int ow = lo; ow < hi; ow++) {
                            const float xv = xr[ow * g->s - g->p + kw];
                            y0[ow] += wv[0] * xv;
                            y1[ow] += wv[1] * xv;
                            y2[ow] += wv[2] * xv;
                            y3[ow] += wv[3] * xv;
                        }
                    } else {
                        for (int b = 0; b < nb; b++)
                            for (int ow = lo; ow < hi; ow++)
                                y0[(size_t)b * g->opix + ow] += wv[b] * xr[ow * g->s - g->p + kw];
                    }
                }
            }
        }
}

static void fwd_direct(const conv_geom *g, const float *x, const float *w, const float *bias,
                       float *y)
{
    const int blocks = (g->oc + DIRECT_BLOCK - 1) / DIRECT_BLOCK;
    const int par = (size_t)g->n * g->oc * g->opix * g->kdim >= PAR_MIN_WORK;
#pragma omp parallel for if (par) collapse(2) schedule(static)
    for (int i = 0; i < g->n; i++)
        for (int ob = 0; ob < blocks; ob++) {
            const int o = ob * DIRECT_BLOCK;
            const int nb = g->oc - o < DIRECT_BLOCK ? g->oc - o : DIRECT_BLOCK;
            direct_fwd_block(g, x + (size_t)i * g->ic * g->ipix, w + (size_t)o * g->kdim,
                             bias ? bias + o : NULL, nb, y + ((size_t)i * g->oc + o) * g->opix);
        }
}

/* y (OC, OH*OW) of one image = bias, so that a GEMM with beta = 1 adds to it. */
static void fill_bias(const conv_geom *g, const float *bias, float *y)
{
    for (int o = 0; o < g->oc; o++)
        for (int q = 0; q < g->opix; q++) y[(size_t)o * g->opix + q] = bias[o];
}

static void fwd_im2col(const conv_geom *g, const float *x, const float *w, const float *bias,
                       float *y, float *col)
{
    for (int i = 0; i < g->n; i++) {
        const float *xi = x + (size_t)i * g->ic * g->ipix;
        float *yi = y + (size_t)i * g->oc * g->opix;
        if (!g->pointwise) im2col_image(g, xi, col);
        if (bias) fill_bias(g, bias, yi);
        /* y_i (OC, OH*OW) = W (OC, KDIM) col (KDIM, OH*OW) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->oc, g->opix, g->kdim, 1.0f, w,
                    g->kdim, g->pointwise ? xi : col, g->opix, bias ? 1.0f : 0.0f, yi, g->opix);
    }
}

static void fwd_im2col_batch(const conv_geom *g, const float *x, const float *w,
                             const float *bias, float *y, float *ws)
{
    const int cols = g->n * g->opix;
    float *col = ws;                              /* (KDIM, N*OH*OW) */
    float *t = ws + (size_t)g->kdim * cols;       /* (OC, N*OH*OW) */
    im2col_batch(g, x, col);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->oc, cols, g->kdim, 1.0f, w,
                g->kdim, col, cols, 0.0f, t, cols);
    channels_to_nchw(g, t, bias, y);
}

/* The items [i0, i0 + chunk) of g, clipped to g->n, as a geometry of their own. */
static conv_geom chunk_of(const conv_geom *g, int i0, int chunk)
{
    conv_geom sub = *g;
    sub.n = chunk < g->n - i0 ? chunk : g->n - i0;
    return sub;
}

static void fwd_chunks(const conv_geom *g, int chunk, const float *x, const float *w,
                       const float *bias, float *y, float *ws)
{
    for (int i0 = 0; i0 < g->n; i0 += chunk) {
        conv_geom sub = chunk_of(g, i0, chunk);
        fwd_im2col_batch(&sub, x + (size_t)i0 * g->ic * g->ipix, w, bias,
                         y + (size_t)i0 * g->oc * g->opix, ws);
    }
}

static vdnn_status conv_forward(layer *l, const exec_ctx *c, const float *x, float *y)
{
    const conv_params *p = l->priv;
    const conv_geom g = geom_of(l, c->n);
    vdnn_status st = check_call(l, c, &g, 1 << PASS_FWD);
    if (st != VDNN_OK) return st;
    const float *w = l->params[CONV_WEIGHTS].value;   /* (OC, IC, K, K) */
    const float *b = p->bias ? l->params[CONV_BIAS].value : NULL;   /* (OC) */
    switch (l->algo[PASS_FWD]) {
    case CONV_ALGO_DIRECT: fwd_direct(&g, x, w, b, y); break;
    case CONV_ALGO_IM2COL: fwd_im2col(&g, x, w, b, y, c->workspace); break;
    default: fwd_chunks(&g, chunk_images(&g, l->algo[PASS_FWD]), x, w, b, y, c->workspace); break;
    }
    return VDNN_OK;
}

/* ---- backward: data ---------------------------------------------------------------- */

/* Input-gradient planes dx (nb, H, W) of channels [ci, ci + nb) of one item, from its
 * output gradients dy (OC, OH, OW) scattered back through the filters: each dy value
 * loaded feeds nb multiply-adds. */
static void direct_bwd_data_block(const conv_geom *g, const float *dy, const float *w, int ci,
                                  int nb, float *dx)
{
    memset(dx, 0, (size_t)nb * g->ipix * sizeof *dx);
    for (int o = 0; o < g->oc; o++)
        for (int kh = 0; kh < g->k; kh++) {
            int olo, ohi;
            valid_range(kh, g->p, g->s, g->h, g->oh, &olo, &ohi);
            for (int kw = 0; kw < g->k; kw++) {
                float wv[DIRECT_BLOCK] = {0.0f};
                for (int b = 0; b < nb; b++)
                    wv[b] = w[(size_t)o * g->kdim + ((ci + b) * g->k + kh) * g->k + kw];
                int lo, hi;
                valid_range(kw, g->p, g->s, g->w, g->ow, &lo, &hi);
                for (int oh = olo; oh < ohi; oh++) {
                    float *restrict d0 = dx + (size_t)(oh * g->s - g->p + kh) * g->w;
                    const float *restrict yr = dy + (size_t)o * g->opix + (size_t)oh * g->ow;
                    if (nb == DIRECT_BLOCK) {
                        float *restrict d1 = d0 + g->ipix, *restrict d2 = d1 + g->ipix;
                        float *restrict d3 = d2 + g->ipix;
                        for (int ow = lo; ow < hi; ow++) {
                            const int iw = ow * g->s - g->p + kw;
                            d0[iw] += wv[0] * yr[ow];
                            d1[iw] += wv[1] * yr[ow];
                            d2[iw] += wv[2] * yr[ow];
                            d3[iw] += wv[3] * yr[ow];
                        }
                    } else {
                        for (int b = 0; b < nb; b++)
                            for (int ow = lo; ow < hi; ow++)
                                d0[(size_t)b * g->ipix + ow * g->s - g->p + kw] += wv[b] * yr[ow];
                    }
                }
            }
        }
}

static void bwd_data_direct(const conv_geom *g, const float *dy, const float *w, float *dx)
{
    const int blocks = (g->ic + DIRECT_BLOCK - 1) / DIRECT_BLOCK;
    const int par = (size_t)g->n * g->oc * g->opix * g->kdim >= PAR_MIN_WORK;
#pragma omp parallel for if (par) collapse(2) schedule(static)
    for (int i = 0; i < g->n; i++)
        for (int cb = 0; cb < blocks; cb++) {
            const int ci = cb * DIRECT_BLOCK;
            const int nb = g->ic - ci < DIRECT_BLOCK ? g->ic - ci : DIRECT_BLOCK;
            direct_bwd_data_block(g, dy + (size_t)i * g->oc * g->opix, w, ci, nb,
                                  dx + ((size_t)i * g->ic + ci) * g->ipix);
        }
}

static void bwd_data_im2col(const conv_geom *g, const float *dy, const float *w, float *dx,
                            float *col)
{
    for (int i = 0; i < g->n; i++) {
        const float *dyi = dy + (size_t)i * g->oc * g->opix;
        float *dxi = dx + (size_t)i * g->ic * g->ipix;
        /* col (KDIM, OH*OW) = W^T (KDIM, OC) dy_i (OC, OH*OW); pointwise: col is dx_i */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, g->kdim, g->opix, g->oc, 1.0f, w,
                    g->kdim, dyi, g->opix, 0.0f, g->pointwise ? dxi : col, g->opix);
        if (!g->pointwise) col2im_image(g, col, dxi);
    }
}

/* t (OC, N*OH*OW) must already hold dy in channel-major order (nchw_to_channels);
 * overwrites the column part of the workspace. */
static void bwd_data_im2col_batch(const conv_geom *g, const float *w, float *dx, float *ws)
{
    const int cols = g->n * g->opix;
    float *col = ws;                              /* (KDIM, N*OH*OW) */
    const float *t = ws + (size_t)g->kdim * cols; /* (OC, N*OH*OW) */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, g->kdim, cols, g->oc, 1.0f, w,
                g->kdim, t, cols, 0.0f, col, cols);
    col2im_batch(g, col, dx);
}

/* ---- backward: filter and bias ----------------------------------------------------- */

/* sum over ow in [lo, hi) of yr[ow] * xr[ow*s + off], in DIRECT_LANES independent
 * partial sums: the compiler vectorises the lanes (it may not reorder a plain float
 * sum), and the order stays fixed whatever the thread count. */
static float row_dot(const float *restrict yr, const float *restrict xr, int s, int off, int lo,
                     int hi)
{
    float part[DIRECT_LANES] = {0.0f};
    int ow = lo;
    if (s == 1)
        for (; ow + DIRECT_LANES <= hi; ow += DIRECT_LANES)
            for (int v = 0; v < DIRECT_LANES; v++) part[v] += yr[ow + v] * xr[ow + v + off];
    for (; ow < hi; ow++) part[0] += yr[ow] * xr[ow * s + off];
    float sum = 0.0f;
    for (int v = 0; v < DIRECT_LANES; v++) sum += part[v];
    return sum;
}

/* dw (K, K) of filter o, channel ci: sums over items and output pixels, each row's
 * products added in float and the rows in double. */
static void direct_bwd_filter_slice(const conv_geom *g, const float *x, const float *dy, int o,
                                    int ci, int accumulate, float *dw)
{
    for (int kh = 0; kh < g->k; kh++) {
        int olo, ohi;
        valid_range(kh, g->p, g->s, g->h, g->oh, &olo, &ohi);
        for (int kw = 0; kw < g->k; kw++) {
            int lo, hi;
            valid_range(kw, g->p, g->s, g->w, g->ow, &lo, &hi);
            double sum = accumulate ? dw[kh * g->k + kw] : 0.0;
            for (int i = 0; i < g->n; i++) {
                const float *xc = x + ((size_t)i * g->ic + ci) * g->ipix;
                const float *dyo = dy + ((size_t)i * g->oc + o) * g->opix;
                for (int oh = olo; oh < ohi; oh++) {
                    const float *xr = xc + (size_t)(oh * g->s - g->p + kh) * g->w;
                    sum += row_dot(dyo + (size_t)oh * g->ow, xr, g->s, kw - g->p, lo, hi);
                }
            }
            dw[kh * g->k + kw] = (float)sum;
        }
    }
}

static void bwd_filter_direct(const conv_geom *g, const float *x, const float *dy,
                              int accumulate, float *dw)
{
    const int par = (size_t)g->n * g->oc * g->opix * g->kdim >= PAR_MIN_WORK;
#pragma omp parallel for if (par) collapse(2) schedule(static)
    for (int o = 0; o < g->oc; o++)
        for (int ci = 0; ci < g->ic; ci++)
            direct_bwd_filter_slice(g, x, dy, o, ci, accumulate,
                                    dw + (size_t)o * g->kdim + (size_t)ci * g->k * g->k);
}

static void bwd_filter_im2col(const conv_geom *g, const float *x, const float *dy,
                              int accumulate, float *dw, float *col)
{
    for (int i = 0; i < g->n; i++) {
        const float *xi = x + (size_t)i * g->ic * g->ipix;
        if (!g->pointwise) im2col_image(g, xi, col);
        /* dW (OC, KDIM) += dy_i (OC, OH*OW) col^T (OH*OW, KDIM) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g->oc, g->kdim, g->opix, 1.0f,
                    dy + (size_t)i * g->oc * g->opix, g->opix, g->pointwise ? xi : col, g->opix,
                    (i > 0 || accumulate) ? 1.0f : 0.0f, dw, g->kdim);
    }
}

/* t (OC, N*OH*OW) must already hold dy in channel-major order; overwrites the column
 * part of the workspace. dW is added to when `accumulate`, else overwritten. */
static void bwd_filter_im2col_batch(const conv_geom *g, const float *x, int accumulate,
                                    float *dw, float *ws)
{
    const int cols = g->n * g->opix;
    float *col = ws;                              /* (KDIM, N*OH*OW) */
    const float *t = ws + (size_t)g->kdim * cols; /* (OC, N*OH*OW) */
    im2col_batch(g, x, col);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g->oc, g->kdim, cols, 1.0f, t, cols,
                col, cols, accumulate ? 1.0f : 0.0f, dw, g->kdim);
}

/* db (OC) = the sum of dy (N, OC, OH, OW) over items and pixels, in a fixed order. */
static void bias_grad(const conv_geom *g, const float *dy, int accumulate, float *db)
{
    const int par = (size_t)g->oc * g->n * g->opix >= PAR_MIN_WORK;
#pragma omp parallel for if (par) schedule(static)
    for (int o = 0; o < g->oc; o++) {
        double s = accumulate ? db[o] : 0.0;
        for (int i = 0; i < g->n; i++) {
            const float *d = dy + ((size_t)i * g->oc + o) * g->opix;
            float plane = 0.0f;
            for (int q = 0; q < g->opix; q++) plane += d[q];
            s += plane;
        }
        db[o] = (float)s;
    }
}

/* The batched backward passes, chunk by chunk: dy of each chunk is reordered once and
 * serves the filter pass (dw non-NULL, which runs first: it needs the column buffer of x)
 * and the data pass (dx non-NULL, which then reuses the column buffer for its own). */
static void bwd_chunks(const conv_geom *g, int chunk, const float *x, const float *dy,
                       const float *w, int accumulate, float *dw, float *dx, float *ws)
{
    for (int i0 = 0; i0 < g->n; i0 += chunk) {
        conv_geom sub = chunk_of(g, i0, chunk);
        const size_t xoff = (size_t)i0 * g->ic * g->ipix;
        nchw_to_channels(&sub, dy + (size_t)i0 * g->oc * g->opix,
                         ws + (size_t)sub.kdim * sub.n * sub.opix);
        if (dw) bwd_filter_im2col_batch(&sub, x + xoff, accumulate || i0 > 0, dw, ws);
        if (dx) bwd_data_im2col_batch(&sub, w, dx + xoff, ws);
    }
}

static vdnn_status conv_backward(layer *l, const exec_ctx *c, const float *x, const float *y,
                                 const float *dy, float *dx)
{
    (void)y;
    const conv_params *p = l->priv;
    const conv_geom g = geom_of(l, c->n);
    vdnn_status st = check_call(l, c, &g, (1 << PASS_BWD_FILTER) | (dx ? 1 << PASS_BWD_DATA : 0));
    if (st != VDNN_OK) return st;
    const param *w = &l->params[CONV_WEIGHTS];
    const int fa = l->algo[PASS_BWD_FILTER], da = l->algo[PASS_BWD_DATA];
    const int fchunk = chunk_images(&g, fa), dchunk = dx ? chunk_images(&g, da) : 0;
    float *ws = c->workspace;
    if (p->bias) bias_grad(&g, dy, c->accumulate, l->params[CONV_BIAS].grad);
    /* Batched filter and data passes with the same chunks share one reorder of dy. */
    if (fchunk && fchunk == dchunk) {
        bwd_chunks(&g, fchunk, x, dy, w->value, c->accumulate, w->grad, dx, ws);
        return VDNN_OK;
    }
    switch (fa) {
    case CONV_ALGO_DIRECT: bwd_filter_direct(&g, x, dy, c->accumulate, w->grad); break;
    case CONV_ALGO_IM2COL: bwd_filter_im2col(&g, x, dy, c->accumulate, w->grad, ws); break;
    default: bwd_chunks(&g, fchunk, x, dy, w->value, c->accumulate, w->grad, NULL, ws); break;
    }
    if (!dx) return VDNN_OK;
    switch (da) {
    case CONV_ALGO_DIRECT: bwd_data_direct(&g, dy, w->value, dx); break;
    case CONV_ALGO_IM2COL: bwd_data_im2col(&g, dy, w->value, dx, ws); break;
    default: bwd_chunks(&g, dchunk, x, dy, w->value, 0, NULL, dx, ws); break;
    }
    return VDNN_OK;
}

static void conv_describe(const layer *l, char *buf, size_t len)
{
    const conv_params *p = l->priv;
    snprintf(buf, len, "%dx%d/%d p%d, %d filters%s", p->size, p->size, p->stride, p->pad,
             p->filters, p->bias ? "" : ", no bias");
}

const layer_ops conv_ops = {
    .type = "convolutional",
    .prefix = "conv",
    .keys = conv_keys,
    .priv_bytes = sizeof(conv_params),
    .setup = conv_setup,
    .forward_cpu = conv_forward,
    .backward_cpu = conv_backward,
    .algo_count = conv_algo_count,
    .algo_name = conv_algo_name,
    .workspace_bytes = conv_workspace_bytes,
    .describe = conv_describe,
};
