/* The convolutional layer (CPU half): shape inference, parameters, and four CPU
 * algorithms for each pass, which trade workspace for speed (ids in layers/conv.h):
 *
 *   direct        no workspace; plain loops, OpenMP over independent output planes
 *                 (forward: (item, block of 4 filters); backward-data: (item, block of
 *                 4 channels); backward-filter: (filter, channel))
 *   im2col        one image's column buffer (KDIM = IC*KH*KW, OH*OW) + a GEMM per image
 *   im2col-batch  the whole batch's column buffer (KDIM, N*OH*OW) + one large GEMM,
 *                 plus a (OC, N*OH*OW) buffer to move between that layout and NCHW
 *   im2col-chunk  as im2col-batch, a chunk of images at a time, the chunk sized so that
 *                 its column buffer stays in cache yet the GEMM stays wide
 *   im2col-par    as im2col, the images split into T contiguous slots (T = the OpenMP
 *                 thread count, at most N), each slot on one thread with a column buffer
 *                 of its own and single-threaded GEMMs: the GEMMs of a convolution are
 *                 small per image (OC rows), so OpenBLAS's own threading gains little on
 *                 them. Forward and filter passes build the columns in bands of output
 *                 rows that stay in L2. Each slot sums its filter gradient transposed,
 *                 (KDIM, OC) = col dy_i^T (the faster orientation for OpenBLAS when OC is
 *                 small), in a partial buffer of its own; the partials are added to dW
 *                 in slot order.
 *   onednn, onednn-winograd
 *                 in a build with oneDNN, its direct and Winograd convolutions
 *                 (vdnn/onednn.h), where oneDNN offers them for the layer's shape at its
 *                 max batch: the ids after the project's own, in that order. They take
 *                 the whole convolution (every group) in one call, their reorders and
 *                 scratchpad in the workspace; each pass needs its own workspace.
 *
 * With unit strides and "same" padding (OW == W), im2col copies each column-buffer row
 * in one piece, and col2im (when OH == H too and a tap reads its own pixel) adds it
 * back in one pass (see im2col_row_same, col2im_channel_same).
 *
 * A 1x1 convolution with stride 1 and no padding is already in column form, so the
 * per-image algorithm uses the input (or writes dx) in place and needs no workspace.
 *
 * Kernels may be rectangular (KH x KW), strided per axis, dilated (tap (kh, kw) reads
 * input row oh*SH - pad_top + kh*DH) and padded unevenly: every algorithm takes the
 * general geometry (conv_geom). A grouped convolution runs each algorithm once per group
 * on pointers moved to the group's channels, the item strides still the whole tensors',
 * so column buffers and workspaces are one group's (IC / groups channels) and the
 * groups reuse them in turn.
 *
 * Weights are (OC, IC / groups, KH, KW), group g's (OC / groups) filters read as a
 * row-major (OC / groups, KDIM) matrix; bias is (OC).
 * Backward reads x for the filter gradient (needs_input) and never y; it needs the
 * larger of its two algorithms' workspaces (only the filter's when dx is NULL). Every
 * result is computed in a fixed order that does not depend on the thread count, except
 * what OpenBLAS does inside one GEMM (fixed for a given OpenBLAS thread count) and
 * im2col-par's filter gradient (fixed for a given OpenMP thread count).
 *
 * cblas calls are made from the calling thread, or inside im2col-par's parallel loop:
 * the OpenMP build of OpenBLAS (the one the Makefile links) runs single-threaded inside
 * an active OpenMP region, so the two never nest. */
#include "layers/conv.h"

#include <cblas.h>
#include <limits.h>
#include <omp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "vdnn/onednn.h"

/* The direct algorithm computes DIRECT_BLOCK planes per task, and sums rows in
 * DIRECT_LANES partial sums (one AVX vector). */
enum { DIRECT_BLOCK = 4, DIRECT_LANES = 8 };

/* Loops over fewer elements (or multiply-adds) than this run on one thread: starting a
 * parallel region costs more than such a loop. */
#define PAR_MIN_WORK ((size_t)1 << 15)

static const cfg_key conv_keys[] = {
    {"filters", CFG_INT, 1, 1, 65536, NULL, 0, "number of filters (output channels)"},
    {"size", CFG_INT, 0, 1, 64, NULL, 0, "side of a square kernel (or size_h and size_w)"},
    {"size_h", CFG_INT, 0, 1, 64, NULL, 0, "kernel height (default size)"},
    {"size_w", CFG_INT, 0, 1, 64, NULL, 0, "kernel width (default size)"},
    {"stride", CFG_INT, 0, 1, 64, NULL, 0, "step between windows (default 1)"},
    {"stride_h", CFG_INT, 0, 1, 64, NULL, 0, "vertical step (default stride)"},
    {"stride_w", CFG_INT, 0, 1, 64, NULL, 0, "horizontal step (default stride)"},
    {"pad", CFG_INT, 0, 0, 64, NULL, 0, "zero padding on each side (default 0)"},
    {"pad_top", CFG_INT, 0, 0, 64, NULL, 0, "zero rows above (default pad)"},
    {"pad_bottom", CFG_INT, 0, 0, 64, NULL, 0, "zero rows below (default pad)"},
    {"pad_left", CFG_INT, 0, 0, 64, NULL, 0, "zero columns on the left (default pad)"},
    {"pad_right", CFG_INT, 0, 0, 64, NULL, 0, "zero columns on the right (default pad)"},
    {"dilation", CFG_INT, 0, 1, 64, NULL, 0, "spacing of the kernel taps (default 1)"},
    {"dilation_h", CFG_INT, 0, 1, 64, NULL, 0, "vertical spacing of the taps (default dilation)"},
    {"dilation_w", CFG_INT, 0, 1, 64, NULL, 0, "horizontal spacing (default dilation)"},
    {"groups", CFG_INT, 0, 1, 65536, NULL, 0, "channel groups; divides channels and filters (default 1)"},
    {"bias", CFG_BOOL, 0, 0, 1, NULL, 0, "add a learned bias per filter (default 1)"},
    {"init", CFG_ENUM, 0, 0, 0, LAYER_INIT_CHOICES, 0, "the weights' start: he (default), pytorch or xavier"},
    {NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

static const char *const algo_names[CONV_ALGO_OWN] = {"direct", "im2col", "im2col-batch",
                                                         "im2col-chunk", "im2col-par"};

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

/* im2col-par builds an image's column buffer a band of output rows at a time, the band
 * as tall as keeps its columns within CONV_TILE_COL_BYTES, so that the GEMM finds them
 * still in L2 (a whole image's, 2.3 MB for 64 channels at 32x32, would not be). */
#ifndef CONV_TILE_COL_BYTES
#define CONV_TILE_COL_BYTES ((size_t)512 << 10)
#endif

/* Everything a kernel needs, for one call with n items, for one group of channels: a
 * grouped convolution runs the kernels once per group on pointers moved to the group's
 * channels, the item strides xs and ys still those of the whole tensors. */
typedef struct conv_geom {
    int n;               /* items in this call */
    int ic, h, w;        /* one group's input channels; input (N, IC * groups, H, W) */
    int oc, oh, ow;      /* one group's filters; output (N, OC * groups, OH, OW) */
    int kh, kw;          /* kernel height and width */
    int sh, sw;          /* strides */
    int pt, pl;          /* padding above and on the left (the other sides only shape OH, OW) */
    int dh, dw;          /* dilation: tap (kh, kw) reads input row oh*SH - PT + kh*DH */
    int groups;
    size_t xs, ys;       /* floats per item of x (and dx) and of y (and dy) */
    int kdim;            /* IC*KH*KW: rows of a column buffer, columns of the weights */
    int ipix, opix;      /* H*W, OH*OW */
    int pointwise;       /* 1x1, stride 1, pad 0: the input is its own column buffer */
    int same_centre;     /* unit strides, OH == H, OW == W and a tap that reads its own
                          * output pixel: col2im_channel_same applies */
} conv_geom;

static conv_geom geom_of(const layer *l, int n)
{
    const conv_params *p = l->priv;
    conv_geom g;
    g.n = n;
    g.groups = p->groups;
    g.ic = l->in.c / p->groups, g.h = l->in.h, g.w = l->in.w;
    g.oc = l->out.c / p->groups, g.oh = l->out.h, g.ow = l->out.w;
    g.kh = p->size_h, g.kw = p->size_w, g.sh = p->stride_h, g.sw = p->stride_w;
    g.pt = p->pad_top, g.pl = p->pad_left, g.dh = p->dilation_h, g.dw = p->dilation_w;
    g.kdim = g.ic * g.kh * g.kw;
    g.ipix = g.h * g.w;
    g.opix = g.oh * g.ow;
    g.xs = (size_t)l->in.c * g.ipix;
    g.ys = (size_t)l->out.c * g.opix;
    g.pointwise = g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 &&
                  g.oh == g.h && g.ow == g.w;
    g.same_centre = g.sh == 1 && g.sw == 1 && g.oh == g.h && g.ow == g.w && g.pt % g.dh == 0 &&
                    g.pl % g.dw == 0 && g.pt / g.dh < g.kh && g.pl / g.dw < g.kw;
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

/* `v` in [lo, hi], or an error naming `key` (priv filled in code: a config's values were
 * range-checked already). */
static vdnn_status check_range(const layer *l, const char *key, int v, int lo, int hi)
{
    if (v >= lo && v <= hi) return VDNN_OK;
    return vdnn_fail(VDNN_EINVAL, "%s: %s must lie in [%d, %d], not %d", l->name, key, lo, hi, v);
}

/* Range checks for a conv_params filled in code, after resolve_params. */
static vdnn_status check_params(const layer *l, const conv_params *p)
{
    const char *keys[] = {"filters", "size_h", "size_w", "stride_h", "stride_w", "pad_top",
                          "pad_bottom", "pad_left", "pad_right", "dilation_h", "dilation_w",
                          "groups", "bias"};
    const int vals[] = {p->filters, p->size_h, p->size_w, p->stride_h, p->stride_w,
                        p->pad_top, p->pad_bottom, p->pad_left, p->pad_right, p->dilation_h,
                        p->dilation_w, p->groups, p->bias};
    const int lo[] = {1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 0};
    const int hi[] = {65536, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 65536, 1};
    vdnn_status st = VDNN_OK;
    for (size_t i = 0; i < sizeof vals / sizeof *vals && st == VDNN_OK; i++)
        st = check_range(l, keys[i], vals[i], lo[i], hi[i]);
    return st;
}

/* `v` unless it is 0, else `dflt`. */
static int or_default(int v, int dflt) { return v ? v : dflt; }

/* Reads the section's keys into p (s non-NULL); the square shorthands fill what the
 * per-side keys leave out. */
static void read_params(conv_params *p, const cfg_section *s)
{
    p->filters = cfg_int(s, "filters", 0);
    p->size = cfg_int(s, "size", 0);
    p->size_h = cfg_int(s, "size_h", p->size);
    p->size_w = cfg_int(s, "size_w", p->size);
    p->stride = cfg_int(s, "stride", 1);
    p->stride_h = cfg_int(s, "stride_h", p->stride);
    p->stride_w = cfg_int(s, "stride_w", p->stride);
    p->pad = cfg_int(s, "pad", 0);
    p->sides = 1;
    p->pad_top = cfg_int(s, "pad_top", p->pad);
    p->pad_bottom = cfg_int(s, "pad_bottom", p->pad);
    p->pad_left = cfg_int(s, "pad_left", p->pad);
    p->pad_right = cfg_int(s, "pad_right", p->pad);
    const int d = cfg_int(s, "dilation", 1);
    p->dilation_h = cfg_int(s, "dilation_h", d);
    p->dilation_w = cfg_int(s, "dilation_w", d);
    p->groups = cfg_int(s, "groups", 1);
    p->bias = cfg_int(s, "bias", 1);
    p->init = layer_weight_init(s, INIT_HE);
}

/* Fills the fields a caller in code left 0 from the square shorthands. */
static void resolve_params(conv_params *p)
{
    p->size_h = or_default(p->size_h, p->size);
    p->size_w = or_default(p->size_w, p->size);
    p->stride_h = or_default(p->stride_h, p->stride);
    p->stride_w = or_default(p->stride_w, p->stride);
    if (!p->sides) {
        p->pad_top = p->pad_bottom = p->pad_left = p->pad_right = p->pad;
        p->sides = 1;
    }
    p->dilation_h = or_default(p->dilation_h, 1);
    p->dilation_w = or_default(p->dilation_w, 1);
    p->groups = or_default(p->groups, 1);
}

/* The kernel, groups and output shape against the input; l->out on success. */
static vdnn_status infer_shape(layer *l, const cfg_file *f, const cfg_section *s)
{
    const conv_params *p = l->priv;
    if (p->size_h == 0 || p->size_w == 0)
        return setup_error(l, f, s, "size", "give size, or both size_h and size_w");
    if (l->in.c % p->groups || p->filters % p->groups)
        return setup_error(l, f, s, "groups", "%d groups must divide the %d input channels and the %d filters",
                           p->groups, l->in.c, p->filters);
    /* the extent of a dilated kernel: its first tap to its last, inclusive */
    const int eh = (p->size_h - 1) * p->dilation_h + 1, ew = (p->size_w - 1) * p->dilation_w + 1;
    const int hp = l->in.h + p->pad_top + p->pad_bottom, wp = l->in.w + p->pad_left + p->pad_right;
    if (hp < eh || wp < ew)
        return setup_error(l, f, s, !s || cfg_find(s, "size") ? "size" : "size_h",
                           "kernel %dx%d (dilated extent %dx%d) is larger than the padded input %dx%d",
                           p->size_h, p->size_w, eh, ew, hp, wp);
    const int oh = (hp - eh) / p->stride_h + 1, ow = (wp - ew) / p->stride_w + 1;
    /* cblas takes int dimensions: a column buffer's rows and the batch's columns. */
    const size_t kdim = (size_t)(l->in.c / p->groups) * p->size_h * p->size_w;
    const size_t cols = (size_t)l->in.n * oh * ow;
    if (kdim > INT_MAX || cols > INT_MAX || (size_t)l->in.h * l->in.w > INT_MAX)
        return setup_error(l, f, s, NULL, "input %dx%dx%dx%d is too large for one GEMM",
                           l->in.n, l->in.c, l->in.h, l->in.w);
    l->out = shape_make(l->in.n, p->filters, oh, ow);
    return VDNN_OK;
}

static vdnn_status conv_setup(layer *l, const cfg_file *f, const cfg_section *s)
{
    conv_params *p = l->priv;
    if (s) read_params(p, s);
    resolve_params(p);
    vdnn_status st = s ? VDNN_OK : check_params(l, p);
    if (st == VDNN_OK) st = infer_shape(l, f, s);
    if (st != VDNN_OK) return st;
    const int icg = l->in.c / p->groups;
    l->needs_input = 1;
    l->needs_output = 0;
    l->nparams = p->bias ? 2 : 1;
    layer_declare_param(&l->params[CONV_WEIGHTS], "weights", shape_make(p->filters, icg, p->size_h, p->size_w),
                        (param_init)p->init, icg * p->size_h * p->size_w, 1, 1);
    if (p->bias)
        layer_declare_param(&l->params[CONV_BIAS], "bias", shape_make(p->filters, 1, 1, 1), INIT_ZERO, 0, 1, 0);
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

/* Slots of im2col-par for g->n items: one per OpenMP thread, at most one per item. */
static int par_slots(const conv_geom *g)
{
    int t = omp_get_max_threads();
    return t < g->n ? t : g->n;
}

/* Floats of one image's column buffer (none for a pointwise convolution). */
static size_t col_floats(const conv_geom *g)
{
    return g->pointwise ? 0 : (size_t)g->kdim * g->opix;
}

/* Floats of workspace that `algo` needs in `pass` for g->n items: the column buffer of
 * one image (per-image), of one chunk plus the (OC, chunk*OH*OW) reorder buffer
 * (batched), or one column buffer per slot plus, for the filter pass, a (KDIM, OC)
 * partial gradient per slot (im2col-par). */
static size_t workspace_floats(const conv_geom *g, int pass, int algo)
{
    if (algo == CONV_ALGO_IM2COL) return col_floats(g);
    if (algo == CONV_ALGO_IM2COL_PAR) {
        size_t slots = (size_t)par_slots(g);
        size_t partial = pass == PASS_BWD_FILTER ? slots * g->oc * (size_t)g->kdim : 0;
        return slots * col_floats(g) + partial;
    }
    return ((size_t)g->kdim + g->oc) * (size_t)chunk_images(g, algo) * g->opix;
}

/* ---- oneDNN's methods (vdnn/onednn.h) ------------------------------------------------ */

/* The whole convolution (every group) for n items, as oneDNN takes it. */
static onednn_conv onednn_shape(const layer *l, int n)
{
    const conv_params *p = l->priv;
    onednn_conv o = {.n = n, .c = l->in.c, .h = l->in.h, .w = l->in.w, .oc = l->out.c, .oh = l->out.h,
                     .ow = l->out.w, .kh = p->size_h, .kw = p->size_w, .sh = p->stride_h, .sw = p->stride_w,
                     .dh = p->dilation_h, .dw = p->dilation_w, .pt = p->pad_top, .pb = p->pad_bottom,
                     .pl = p->pad_left, .pr = p->pad_right, .groups = p->groups, .bias = p->bias};
    return o;
}

/* known_algos makes a record under it: a planner's threads ask of one net's layers at
 * once, and the first to ask of a fresh net (a clone for a micro-batch split, planned on
 * the threads at once) would otherwise find it half made, a count set to 0 by one thread
 * while another adds to it (`vdnn sweep` of ResNet-1202 then failed now and then with an
 * algorithm one thread counted and another did not). */
static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;

/* The layer's record of its algorithms (conv_params.onednn_* and own_bytes): what oneDNN
 * offers it, and every algorithm's workspace at the max batch, made or remade for the
 * calling thread's thread count (made whole, then published). */
static conv_params *known_algos(const layer *l)
{
    conv_params *p = l->priv;
    const int threads = omp_get_max_threads();
    if (__atomic_load_n(&p->onednn_threads, __ATOMIC_ACQUIRE) == threads) return p;
    pthread_mutex_lock(&known_lock);
    if (p->onednn_threads != threads) {
        const onednn_conv o = onednn_shape(l, l->in.n);
        const conv_geom g = geom_of(l, l->in.n);
        conv_params r = *p;
        for (int pass = 0; pass < PASS_COUNT; pass++) {
            for (int a = 0; a < CONV_ALGO_OWN; a++) r.own_bytes[pass][a] = workspace_floats(&g, pass, a) * sizeof(float);
            r.onednn_count[pass] = 0;
            for (int m = 0; m < ONEDNN_METHODS && onednn_built(); m++) {
                size_t b = onednn_conv_workspace(&o, (onednn_pass)pass, (onednn_method)m);
                if (b == SIZE_MAX) continue;
                r.onednn_method[pass][r.onednn_count[pass]] = m;
                r.onednn_bytes[pass][r.onednn_count[pass]++] = b;
            }
        }
        memcpy(p->onednn_count, r.onednn_count, sizeof r.onednn_count);
        memcpy(p->onednn_method, r.onednn_method, sizeof r.onednn_method);
        memcpy(p->onednn_bytes, r.onednn_bytes, sizeof r.onednn_bytes);
        memcpy(p->own_bytes, r.own_bytes, sizeof r.own_bytes);
        __atomic_store_n(&p->onednn_threads, threads, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&known_lock);
    return p;
}

/* The oneDNN method of algorithm `algo` in `pass`: the k-th that oneDNN offers for the
 * layer's shape at its max batch, k = algo - CONV_ALGO_OWN; -1 when there is none. */
static int onednn_method_of(const layer *l, int pass, int algo)
{
    const int k = algo - CONV_ALGO_OWN;
    if (!onednn_built() || k < 0) return -1;
    const conv_params *p = known_algos(l);
    return k < p->onednn_count[pass] ? p->onednn_method[pass][k] : -1;
}

/* ---- algorithms ---------------------------------------------------------------------- */

static int conv_algo_count(const layer *l, int pass)
{
    if (pass < 0 || pass >= PASS_COUNT) return 0;
    return CONV_ALGO_OWN + (onednn_built() ? known_algos(l)->onednn_count[pass] : 0);
}

static const char *conv_algo_name(const layer *l, int pass, int algo)
{
    if (algo >= 0 && algo < CONV_ALGO_OWN) return algo_names[algo];
    int m = onednn_method_of(l, pass, algo);
    return m >= 0 ? onednn_method_name((onednn_method)m) : "unknown";
}

/* Bytes of workspace `algo` needs in `pass` for n items; SIZE_MAX for an algorithm the
 * layer does not have. The project's own need the same for every pass but for
 * im2col-par's partial filter gradients. */
static size_t algo_bytes(const layer *l, int n, int pass, int algo)
{
    if (n == l->in.n && algo >= 0 && algo < CONV_ALGO_OWN) return known_algos(l)->own_bytes[pass][algo];
    if (algo >= 0 && algo < CONV_ALGO_OWN) {
        const conv_geom g = geom_of(l, n);
        return workspace_floats(&g, pass, algo) * sizeof(float);
    }
    int m = onednn_method_of(l, pass, algo);
    if (m < 0) return SIZE_MAX;
    if (n == l->in.n) return known_algos(l)->onednn_bytes[pass][algo - CONV_ALGO_OWN];
    const onednn_conv o = onednn_shape(l, n);
    return onednn_conv_workspace(&o, (onednn_pass)pass, (onednn_method)m);
}

static size_t conv_workspace_bytes(const layer *l, int n, int pass, int algo) { return algo_bytes(l, n, pass, algo); }

/* layer_need_fn: workspace bytes of `algo` for c->n items. */
static size_t need_bytes(layer *l, const exec_ctx *c, int pass, int algo, void *arg)
{
    (void)arg;
    return algo_bytes(l, c->n, pass, algo);
}

/* Moves a pass off an algorithm that failed to run (here only when VDNN_FAULTS says
 * so: the fallback path a GPU's failures take, tested on the CPU). */
static vdnn_status settle_algos(layer *l, const exec_ctx *c, int passes)
{
    vdnn_status st = VDNN_OK;
    for (int pass = 0; pass < PASS_COUNT && st == VDNN_OK; pass++)
        if (passes & (1 << pass)) st = layer_algo_check(l, c, pass, need_bytes, NULL);
    return st;
}

/* The algorithms that run the passes in `passes` (a bit set of (1 << PASS_*)) for c->n
 * items, into run[]: the chosen ones, checked, with the workspace for c->n items. A
 * smaller batch than the max (the last, partial batch of an epoch; the profiler's probe)
 * is given the workspace of the max batch, which holds what most algorithms need for
 * fewer items but not what oneDNN's Winograd needs at some smaller batches: there the
 * usable algorithm with the largest workspace that fits runs instead (layer_algo_fitting),
 * the same one under every policy, so runs stay comparable (a GPU does the same). */
static vdnn_status call_algos(layer *l, const exec_ctx *c, int passes, int run[PASS_COUNT])
{
    size_t need = 0;
    if (c->n < 1 || c->n > l->in.n)
        return vdnn_fail(VDNN_EINVAL, "%s: batch of %d items, expected 1..%d", l->name, c->n,
                         l->in.n);
    vdnn_status st = settle_algos(l, c, passes);
    const size_t given = c->workspace ? c->workspace_bytes : 0;
    for (int pass = 0; pass < PASS_COUNT && st == VDNN_OK; pass++) {
        run[pass] = l->algo[pass];
        if (!(passes & (1 << pass))) continue;
        int a = l->algo[pass];
        size_t b = a >= 0 ? algo_bytes(l, c->n, pass, a) : SIZE_MAX;
        if (b == SIZE_MAX)
            return vdnn_fail(VDNN_EINVAL, "%s: no convolution algorithm %d for pass %d", l->name,
                             a, pass);
        if (b > given && c->n < l->in.n && given >= algo_bytes(l, l->in.n, pass, a)) {
            int other = layer_algo_fitting(l, c, pass, need_bytes, NULL);
            if (other >= 0) run[pass] = other, b = algo_bytes(l, c->n, pass, other);
        }
        if (b > need) need = b;
    }
    if (st == VDNN_OK && need > 0 && given < need)
        return vdnn_fail(VDNN_EINVAL, "%s: workspace of %zu bytes given, %zu needed for %d items",
                         l->name, given, need, c->n);
    return st;
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

/* im2col_row for stride 1 and OW == W ("same" padding): output pixel q reads input
 * pixel q + (kh - p) * W + (kw - p) of the plane xc, so the valid rows [olo, ohi) (already
 * clipped to the rows [oh0, oh1) that dst holds) are one copy; the columns whose window
 * falls off the left or right edge (read wrapped around from the neighbouring row) are
 * zeroed afterwards. */
static void im2col_row_same(const conv_geom *g, const float *xc, int kh, int kw, int oh0,
                            int oh1, int olo, int ohi, int lo, int hi, float *dst)
{
    const int ow = g->ow;
    const size_t base = (size_t)oh0 * ow, end = (size_t)oh1 * ow;
    if (ohi <= olo || hi <= lo) {
        memset(dst, 0, (end - base) * sizeof *dst);
        return;
    }
    /* first and one-past-last valid outputs: both read inside the plane, so does all
     * that lies between them */
    const size_t q0 = (size_t)olo * ow + lo, q1 = (size_t)(ohi - 1) * ow + hi;
    const ptrdiff_t off = (ptrdiff_t)(kh * g->dh - g->pt) * g->w + (kw * g->dw - g->pl);
    memset(dst, 0, (q0 - base) * sizeof *dst);
    memcpy(dst + (q0 - base), xc + (ptrdiff_t)q0 + off, (q1 - q0) * sizeof *dst);
    memset(dst + (q1 - base), 0, (end - q1) * sizeof *dst);
    if (lo == 0 && hi == ow) return;
    for (int oh = olo; oh < ohi; oh++) {
        float *d = dst + ((size_t)oh * ow - base);
        for (int c = 0; c < lo; c++) d[c] = 0.0f;
        for (int c = hi; c < ow; c++) d[c] = 0.0f;
    }
}

/* Row r = (ci, kh, kw) of a column buffer, for the output rows [oh0, oh1) of one image x
 * (IC, H, W): dst ((oh1 - oh0) * OW) receives x[ci][oh*s - p + kh][ow*s - p + kw], zero
 * where that falls in the padding. */
static void im2col_row(const conv_geom *g, const float *x, int r, int oh0, int oh1, float *dst)
{
    const int kk = g->kh * g->kw, ci = r / kk, kh = (r / g->kw) % g->kh, kw = r % g->kw;
    const float *xc = x + (size_t)ci * g->ipix;
    int olo, ohi, lo, hi;
    valid_range(kh * g->dh, g->pt, g->sh, g->h, g->oh, &olo, &ohi);
    valid_range(kw * g->dw, g->pl, g->sw, g->w, g->ow, &lo, &hi);
    olo = olo < oh0 ? oh0 : olo > oh1 ? oh1 : olo;
    ohi = ohi > oh1 ? oh1 : ohi < olo ? olo : ohi;
    if (g->sh == 1 && g->sw == 1 && g->ow == g->w) {
        im2col_row_same(g, xc, kh, kw, oh0, oh1, olo, ohi, lo, hi, dst);
        return;
    }
    memset(dst, 0, (size_t)(olo - oh0) * g->ow * sizeof *dst);
    for (int oh = olo; oh < ohi; oh++) {
        const float *xr = xc + (size_t)(oh * g->sh - g->pt + kh * g->dh) * g->w;
        float *d = dst + (size_t)(oh - oh0) * g->ow;
        for (int ow = 0; ow < lo; ow++) d[ow] = 0.0f;
        if (g->sw == 1 && hi > lo)
            memcpy(d + lo, xr + (lo - g->pl + kw * g->dw), (size_t)(hi - lo) * sizeof *d);
        else if (g->sw > 1)
            for (int ow = lo; ow < hi; ow++) d[ow] = xr[ow * g->sw - g->pl + kw * g->dw];
        for (int ow = hi; ow < g->ow; ow++) d[ow] = 0.0f;
    }
    memset(dst + (size_t)(ohi - oh0) * g->ow, 0, (size_t)(oh1 - ohi) * g->ow * sizeof *dst);
}

/* col (KDIM, OH*OW) <- the patches of one image x (IC, H, W); on this thread alone
 * unless `may_fork`. */
static void im2col_image(const conv_geom *g, const float *x, float *col, int may_fork)
{
    const int par = may_fork && (size_t)g->kdim * g->opix >= PAR_MIN_WORK;
#pragma omp parallel for if (par) schedule(static)
    for (int r = 0; r < g->kdim; r++) im2col_row(g, x, r, 0, g->oh, col + (size_t)r * g->opix);
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
            im2col_row(g, x + (size_t)i * g->xs, r, 0, g->oh,
                       col + r * ld + (size_t)i * g->opix);
}

/* col2im_channel for unit strides, OH == H, OW == W, and a centre tap (ch, cw) that reads
 * the very pixel of its output (ch * DH == pad_top, cw * DW == pad_left; g->same_centre):
 * the reverse of im2col_row_same. The centre tap's row covers every pixel once, so it is
 * copied; each
 * other row, its off-edge columns zeroed first (the column buffer is scratch), is added
 * in one pass over its valid rows, the wrapped columns then adding zeros. */
static void col2im_channel_same(const conv_geom *g, float *col, size_t ld, int ci, float *dxc)
{
    const int ow = g->ow, ch = g->pt / g->dh, cw = g->pl / g->dw;
    float *rows = col + (size_t)ci * g->kh * g->kw * ld;
    memcpy(dxc, rows + (size_t)(ch * g->kw + cw) * ld, (size_t)g->ipix * sizeof *dxc);
    for (int kh = 0; kh < g->kh; kh++) {
        int olo, ohi;
        valid_range(kh * g->dh, g->pt, 1, g->h, g->oh, &olo, &ohi);
        for (int kw = 0; kw < g->kw; kw++) {
            int lo, hi;
            valid_range(kw * g->dw, g->pl, 1, g->w, g->ow, &lo, &hi);
            if ((kh == ch && kw == cw) || ohi <= olo || hi <= lo) continue;
            float *restrict src = rows + (size_t)(kh * g->kw + kw) * ld;
            for (int oh = olo; oh < ohi; oh++) {
                for (int q = 0; q < lo; q++) src[(size_t)oh * ow + q] = 0.0f;
                for (int q = hi; q < ow; q++) src[(size_t)oh * ow + q] = 0.0f;
            }
            /* outputs [q0, q1) read pixels [q0 + off, q1 + off), all inside the plane */
            const size_t q0 = (size_t)olo * ow + lo, q1 = (size_t)(ohi - 1) * ow + hi;
            const ptrdiff_t off = (ptrdiff_t)(kh * g->dh - g->pt) * g->w + (kw * g->dw - g->pl);
            float *restrict d = dxc + ((ptrdiff_t)q0 + off);
            const float *restrict sv = src + q0;
            for (size_t q = 0; q < q1 - q0; q++) d[q] += sv[q];
        }
    }
}

/* dxc (H, W) of channel ci = the sum of the column rows (ci, kh, kw) scattered back to
 * the pixels they were read from; `col` rows have `ld` floats, and may be overwritten.
 * One thread per channel owns every write into it. */
static void col2im_channel(const conv_geom *g, float *col, size_t ld, int ci, float *dxc)
{
    if (g->same_centre) {
        col2im_channel_same(g, col, ld, ci, dxc);
        return;
    }
    memset(dxc, 0, (size_t)g->ipix * sizeof *dxc);
    for (int kh = 0; kh < g->kh; kh++) {
        int olo, ohi;
        valid_range(kh * g->dh, g->pt, g->sh, g->h, g->oh, &olo, &ohi);
        for (int kw = 0; kw < g->kw; kw++) {
            int lo, hi;
            valid_range(kw * g->dw, g->pl, g->sw, g->w, g->ow, &lo, &hi);
            const float *src = col + ((size_t)(ci * g->kh + kh) * g->kw + kw) * ld;
            for (int oh = olo; oh < ohi; oh++) {
                float *dr = dxc + (size_t)(oh * g->sh - g->pt + kh * g->dh) * g->w;
                const float *sr = src + (size_t)oh * g->ow;
                if (g->sw == 1) {   /* unit stride: a loop the compiler vectorises */
                    float *restrict d = dr + (lo + kw * g->dw - g->pl);
                    const float *restrict sv = sr + lo;
                    for (int j = 0; j < hi - lo; j++) d[j] += sv[j];
                } else {
                    for (int ow = lo; ow < hi; ow++) dr[ow * g->sw - g->pl + kw * g->dw] += sr[ow];
                }
            }
        }
    }
}

/* dx (IC, H, W) of one image <- col (KDIM, OH*OW); on this thread alone unless
 * `may_fork`. */
static void col2im_image(const conv_geom *g, float *col, float *dx, int may_fork)
{
    const int par = may_fork && (size_t)g->kdim * g->opix >= PAR_MIN_WORK;
#pragma omp parallel for if (par) schedule(static)
    for (int ci = 0; ci < g->ic; ci++)
        col2im_channel(g, col, g->opix, ci, dx + (size_t)ci * g->ipix);
}

/* dx (N, IC, H, W) <- col (KDIM, N*OH*OW). */
static void col2im_batch(const conv_geom *g, float *col, float *dx)
{
    const size_t ld = (size_t)g->n * g->opix;
    const int par = (size_t)g->kdim * g->n * g->opix >= PAR_MIN_WORK;
#pragma omp parallel for if (par) collapse(2) schedule(static)
    for (int i = 0; i < g->n; i++)
        for (int ci = 0; ci < g->ic; ci++)
            col2im_channel(g, col + (size_t)i * g->opix, ld, ci,
                           dx + (size_t)i * g->xs + (size_t)ci * g->ipix);
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
            float *dst = y + (size_t)i * g->ys + (size_t)o * g->opix;
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
            memcpy(t + o * ld + (size_t)i * g->opix, dy + (size_t)i * g->ys + (size_t)o * g->opix,
                   (size_t)g->opix * sizeof *t);
}

/* ---- forward --------------------------------------------------------------------- */

/* Output planes y (nb, OH, OW) of one item x (IC, H, W) for the nb <= DIRECT_BLOCK
 * filters w (nb, IC, KH, KW): each x value loaded feeds nb multiply-adds, which is what
 * makes plain loops tolerable. */
static void direct_fwd_block(const conv_geom *g, const float *x, const float *w,
                             const float *bias, int nb, float *y)
{
    for (int b = 0; b < nb; b++)
        for (int q = 0; q < g->opix; q++) y[(size_t)b * g->opix + q] = bias ? bias[b] : 0.0f;
    for (int ci = 0; ci < g->ic; ci++)
        for (int kh = 0; kh < g->kh; kh++) {
            int olo, ohi;
            valid_range(kh * g->dh, g->pt, g->sh, g->h, g->oh, &olo, &ohi);
            for (int kw = 0; kw < g->kw; kw++) {
                float wv[DIRECT_BLOCK] = {0.0f};
                for (int b = 0; b < nb; b++)
                    wv[b] = w[(size_t)b * g->kdim + (ci * g->kh + kh) * g->kw + kw];
                int lo, hi;
                valid_range(kw * g->dw, g->pl, g->sw, g->w, g->ow, &lo, &hi);
                for (int oh = olo; oh < ohi; oh++) {
                    const float *restrict xr = x + (size_t)ci * g->ipix +
                                               (size_t)(oh * g->sh - g->pt + kh * g->dh) * g->w;
                    float *restrict y0 = y + (size_t)oh * g->ow;
                    if (nb == DIRECT_BLOCK) {
                        float *restrict y1 = y0 + g->opix, *restrict y2 = y1 + g->opix;
                        float *restrict y3 = y2 + g->opix;
                        for (int ow = lo; ow < hi; ow++) {
                            const float xv = xr[ow * g->sw - g->pl + kw * g->dw];
                            y0[ow] += wv[0] * xv;
                            y1[ow] += wv[1] * xv;
                            y2[ow] += wv[2] * xv;
                            y3[ow] += wv[3] * xv;
                        }
                    } else {
                        for (int b = 0; b < nb; b++)
                            for (int ow = lo; ow < hi; ow++)
                                y0[(size_t)b * g->opix + ow] += wv[b] * xr[ow * g->sw - g->pl + kw * g->dw];
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
            direct_fwd_block(g, x + (size_t)i * g->xs, w + (size_t)o * g->kdim,
                             bias ? bias + o : NULL, nb, y + (size_t)i * g->ys + (size_t)o * g->opix);
        }
}

/* y (OC, OH*OW) of one image = bias, so that a GEMM with beta = 1 adds to it. */
static void fill_bias(const conv_geom *g, const float *bias, float *y)
{
    for (int o = 0; o < g->oc; o++)
        for (int q = 0; q < g->opix; q++) y[(size_t)o * g->opix + q] = bias[o];
}

/* y_i (OC, OH*OW) of image i, through the column buffer col. */
static void fwd_image(const conv_geom *g, int i, const float *x, const float *w,
                      const float *bias, float *y, float *col, int may_fork)
{
    const float *xi = x + (size_t)i * g->xs;
    float *yi = y + (size_t)i * g->ys;
    if (!g->pointwise) im2col_image(g, xi, col, may_fork);
    if (bias) fill_bias(g, bias, yi);
    /* y_i (OC, OH*OW) = W (OC, KDIM) col (KDIM, OH*OW) */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->oc, g->opix, g->kdim, 1.0f, w,
                g->kdim, g->pointwise ? xi : col, g->opix, bias ? 1.0f : 0.0f, yi, g->opix);
}

static void fwd_im2col(const conv_geom *g, const float *x, const float *w, const float *bias,
                       float *y, float *col)
{
    for (int i = 0; i < g->n; i++) fwd_image(g, i, x, w, bias, y, col, 1);
}

/* The items [*lo, *hi) of slot s of `slots` (im2col-par). */
static void slot_items(const conv_geom *g, int s, int slots, int *lo, int *hi)
{
    *lo = (int)((long long)s * g->n / slots);
    *hi = (int)((long long)(s + 1) * g->n / slots);
}

/* Output rows per band of im2col-par: at least 1, at most OH. */
static int band_rows(const conv_geom *g)
{
    size_t rows = CONV_TILE_COL_BYTES / ((size_t)g->kdim * g->ow * sizeof(float));
    return rows < 1 ? 1 : rows > (size_t)g->oh ? g->oh : (int)rows;
}

/* col (KDIM, (oh1 - oh0) * OW) <- the patches of the output rows [oh0, oh1) of one image
 * x (IC, H, W), on this thread. */
static void im2col_band(const conv_geom *g, const float *x, int oh0, int oh1, float *col)
{
    const size_t cols = (size_t)(oh1 - oh0) * g->ow;
    for (int r = 0; r < g->kdim; r++) im2col_row(g, x, r, oh0, oh1, col + r * cols);
}

/* fwd_image, band by band: y_i[:, band] = W col_band, on this thread. */
static void fwd_image_banded(const conv_geom *g, int i, const float *x, const float *w,
                             const float *bias, float *y, float *col)
{
    if (g->pointwise) {
        fwd_image(g, i, x, w, bias, y, col, 0);
        return;
    }
    const float *xi = x + (size_t)i * g->xs;
    float *yi = y + (size_t)i * g->ys;
    if (bias) fill_bias(g, bias, yi);
    const int rows = band_rows(g);
    for (int oh0 = 0; oh0 < g->oh; oh0 += rows) {
        const int oh1 = oh0 + rows < g->oh ? oh0 + rows : g->oh, cols = (oh1 - oh0) * g->ow;
        im2col_band(g, xi, oh0, oh1, col);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g->oc, cols, g->kdim, 1.0f, w,
                    g->kdim, col, cols, bias ? 1.0f : 0.0f, yi + (size_t)oh0 * g->ow, g->opix);
    }
}

static void fwd_par(const conv_geom *g, const float *x, const float *w, const float *bias,
                    float *y, float *ws)
{
    const int slots = par_slots(g);
#pragma omp parallel for if (slots > 1) schedule(static)
    for (int s = 0; s < slots; s++) {
        int lo, hi;
        slot_items(g, s, slots, &lo, &hi);
        for (int i = lo; i < hi; i++)
            fwd_image_banded(g, i, x, w, bias, y, ws + (size_t)s * col_floats(g));
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
        fwd_im2col_batch(&sub, x + (size_t)i0 * g->xs, w, bias,
                         y + (size_t)i0 * g->ys, ws);
    }
}

/* The forward pass of one group: x, w, b, y already moved to the group's channels. */
static void fwd_group(const conv_geom *g, int algo, const float *x, const float *w,
                      const float *b, float *y, float *ws)
{
    switch (algo) {
    case CONV_ALGO_DIRECT: fwd_direct(g, x, w, b, y); break;
    case CONV_ALGO_IM2COL: fwd_im2col(g, x, w, b, y, ws); break;
    case CONV_ALGO_IM2COL_PAR: fwd_par(g, x, w, b, y, ws); break;
    default: fwd_chunks(g, chunk_images(g, algo), x, w, b, y, ws); break;
    }
}

static vdnn_status conv_forward(layer *l, const exec_ctx *c, const float *x, float *y)
{
    const conv_params *p = l->priv;
    const conv_geom g = geom_of(l, c->n);
    int run[PASS_COUNT];
    vdnn_status st = call_algos(l, c, 1 << PASS_FWD, run);
    if (st != VDNN_OK) return st;
    const float *w = l->params[CONV_WEIGHTS].value;   /* (OC, IC / groups, KH, KW) */
    const float *b = p->bias ? l->params[CONV_BIAS].value : NULL;   /* (OC) */
    int m = onednn_method_of(l, PASS_FWD, run[PASS_FWD]);
    if (m >= 0) {
        const onednn_conv o = onednn_shape(l, c->n);
        return onednn_conv_forward(&o, (onednn_method)m, x, w, b, y, c->workspace, c->workspace_bytes);
    }
    /* the groups one after the other, each with the whole workspace */
    for (int k = 0; k < g.groups; k++)
        fwd_group(&g, run[PASS_FWD], x + (size_t)k * g.ic * g.ipix,
                  w + (size_t)k * g.oc * g.kdim, b ? b + (size_t)k * g.oc : NULL,
                  y + (size_t)k * g.oc * g.opix, c->workspace);
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
        for (int kh = 0; kh < g->kh; kh++) {
            int olo, ohi;
            valid_range(kh * g->dh, g->pt, g->sh, g->h, g->oh, &olo, &ohi);
            for (int kw = 0; kw < g->kw; kw++) {
                float wv[DIRECT_BLOCK] = {0.0f};
                for (int b = 0; b < nb; b++)
                    wv[b] = w[(size_t)o * g->kdim + ((ci + b) * g->kh + kh) * g->kw + kw];
                int lo, hi;
                valid_range(kw * g->dw, g->pl, g->sw, g->w, g->ow, &lo, &hi);
                for (int oh = olo; oh < ohi; oh++) {
                    float *restrict d0 = dx + (size_t)(oh * g->sh - g->pt + kh * g->dh) * g->w;
                    const float *restrict yr = dy + (size_t)o * g->opix + (size_t)oh * g->ow;
                    if (nb == DIRECT_BLOCK) {
                        float *restrict d1 = d0 + g->ipix, *restrict d2 = d1 + g->ipix;
                        float *restrict d3 = d2 + g->ipix;
                        for (int ow = lo; ow < hi; ow++) {
                            const int iw = ow * g->sw - g->pl + kw * g->dw;
                            d0[iw] += wv[0] * yr[ow];
                            d1[iw] += wv[1] * yr[ow];
                            d2[iw] += wv[2] * yr[ow];
                            d3[iw] += wv[3] * yr[ow];
                        }
                    } else {
                        for (int b = 0; b < nb; b++)
                            for (int ow = lo; ow < hi; ow++)
                                d0[(size_t)b * g->ipix + ow * g->sw - g->pl + kw * g->dw] += wv[b] * yr[ow];
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
            direct_bwd_data_block(g, dy + (size_t)i * g->ys, w, ci, nb,
                                  dx + (size_t)i * g->xs + (size_t)ci * g->ipix);
        }
}

/* dx_i (IC, H, W) of image i, through the column buffer col. */
static void bwd_data_image(const conv_geom *g, int i, const float *dy, const float *w,
                           float *dx, float *col, int may_fork)
{
    const float *dyi = dy + (size_t)i * g->ys;
    float *dxi = dx + (size_t)i * g->xs;
    /* col (KDIM, OH*OW) = W^T (KDIM, OC) dy_i (OC, OH*OW); pointwise: col is dx_i */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, g->kdim, g->opix, g->oc, 1.0f, w,
                g->kdim, dyi, g->opix, 0.0f, g->pointwise ? dxi : col, g->opix);
    if (!g->pointwise) col2im_image(g, col, dxi, may_fork);
}

static void bwd_data_im2col(const conv_geom *g, const float *dy, const float *w, float *dx,
                            float *col)
{
    for (int i = 0; i < g->n; i++) bwd_data_image(g, i, dy, w, dx, col, 1);
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

/* dw (KH, KW) of filter o, channel ci: sums over items and output pixels, each row's
 * products added in float and the rows in double. */
static void direct_bwd_filter_slice(const conv_geom *g, const float *x, const float *dy, int o,
                                    int ci, int accumulate, float *dw)
{
    for (int kh = 0; kh < g->kh; kh++) {
        int olo, ohi;
        valid_range(kh * g->dh, g->pt, g->sh, g->h, g->oh, &olo, &ohi);
        for (int kw = 0; kw < g->kw; kw++) {
            int lo, hi;
            valid_range(kw * g->dw, g->pl, g->sw, g->w, g->ow, &lo, &hi);
            double sum = accumulate ? dw[kh * g->kw + kw] : 0.0;
            for (int i = 0; i < g->n; i++) {
                const float *xc = x + (size_t)i * g->xs + (size_t)ci * g->ipix;
                const float *dyo = dy + (size_t)i * g->ys + (size_t)o * g->opix;
                for (int oh = olo; oh < ohi; oh++) {
                    const float *xr = xc + (size_t)(oh * g->sh - g->pt + kh * g->dh) * g->w;
                    sum += row_dot(dyo + (size_t)oh * g->ow, xr, g->sw, kw * g->dw - g->pl, lo, hi);
                }
            }
            dw[kh * g->kw + kw] = (float)sum;
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
                                    dw + (size_t)o * g->kdim + (size_t)ci * g->kh * g->kw);
}

/* dW (OC, KDIM) = (add ? dW : 0) + dy_i (OC, OH*OW) col_i^T (OH*OW, KDIM), col_i the
 * column buffer of image i, built in col. */
static void bwd_filter_image(const conv_geom *g, int i, const float *x, const float *dy,
                             int add, float *dw, float *col, int may_fork)
{
    const float *xi = x + (size_t)i * g->xs;
    if (!g->pointwise) im2col_image(g, xi, col, may_fork);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g->oc, g->kdim, g->opix, 1.0f,
                dy + (size_t)i * g->ys, g->opix, g->pointwise ? xi : col, g->opix,
                add ? 1.0f : 0.0f, dw, g->kdim);
}

static void bwd_filter_im2col(const conv_geom *g, const float *x, const float *dy,
                              int accumulate, float *dw, float *col)
{
    for (int i = 0; i < g->n; i++) bwd_filter_image(g, i, x, dy, i > 0 || accumulate, dw, col, 1);
}

/* dWt (KDIM, OC) = (add ? dWt : 0) + col_i (KDIM, OH*OW) dy_i^T (OH*OW, OC), col_i the
 * column buffer of image i, built in col band by band: the filter gradient of image i,
 * transposed, on this thread. */
static void bwd_filter_image_t(const conv_geom *g, int i, const float *x, const float *dy,
                               int add, float *dwt, float *col)
{
    const float *xi = x + (size_t)i * g->xs, *dyi = dy + (size_t)i * g->ys;
    if (g->pointwise) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g->kdim, g->oc, g->opix, 1.0f, xi,
                    g->opix, dyi, g->opix, add ? 1.0f : 0.0f, dwt, g->oc);
        return;
    }
    const int rows = band_rows(g);
    for (int oh0 = 0; oh0 < g->oh; oh0 += rows) {
        const int oh1 = oh0 + rows < g->oh ? oh0 + rows : g->oh, cols = (oh1 - oh0) * g->ow;
        im2col_band(g, xi, oh0, oh1, col);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, g->kdim, g->oc, cols, 1.0f, col,
                    cols, dyi + (size_t)oh0 * g->ow, g->opix, (add || oh0 > 0) ? 1.0f : 0.0f,
                    dwt, g->oc);
    }
}

/* dW (OC, KDIM) = (accumulate ? dW : 0) + the sum of the `slots` partials (KDIM, OC)
 * transposed, added in slot order. */
static void add_partials(const conv_geom *g, const float *partials, int slots, int accumulate,
                         float *dw)
{
    const size_t wcount = (size_t)g->oc * g->kdim;
    const int par = wcount * slots >= PAR_MIN_WORK;
#pragma omp parallel for if (par) schedule(static)
    for (int o = 0; o < g->oc; o++)
        for (int k = 0; k < g->kdim; k++) {
            float v = accumulate ? dw[(size_t)o * g->kdim + k] : 0.0f;
            for (int s = 0; s < slots; s++) v += partials[s * wcount + (size_t)k * g->oc + o];
            dw[(size_t)o * g->kdim + k] = v;
        }
}

/* im2col-par's backward: the filter pass (dw non-NULL) and/or the data pass (dx non-NULL),
 * image by image in each slot, the data pass reusing the column buffer after the filter
 * pass of the same image. Slot s sums its transposed filter gradient in partial s (KDIM,
 * OC), after the column buffers. */
static void bwd_par(const conv_geom *g, const float *x, const float *dy, const float *w,
                    int accumulate, float *dw, float *dx, float *ws)
{
    const int slots = par_slots(g);
    const size_t wcount = (size_t)g->oc * g->kdim;
    float *partials = ws + (size_t)slots * col_floats(g);
#pragma omp parallel for if (slots > 1) schedule(static)
    for (int s = 0; s < slots; s++) {
        int lo, hi;
        slot_items(g, s, slots, &lo, &hi);
        float *col = ws + (size_t)s * col_floats(g);
        for (int i = lo; i < hi; i++) {
            if (dw) bwd_filter_image_t(g, i, x, dy, i > lo, partials + (size_t)s * wcount, col);
            if (dx) bwd_data_image(g, i, dy, w, dx, col, slots == 1);
        }
    }
    if (dw) add_partials(g, partials, slots, accumulate, dw);
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

/* db (OC * groups) = the sum of dy (N, OC * groups, OH, OW) over items and pixels, in a fixed order. */
static void bias_grad(const conv_geom *g, const float *dy, int accumulate, float *db)
{
    const int oc = g->oc * g->groups;   /* every group's filters */
    const int par = (size_t)oc * g->n * g->opix >= PAR_MIN_WORK;
#pragma omp parallel for if (par) schedule(static)
    for (int o = 0; o < oc; o++) {
        double s = accumulate ? db[o] : 0.0;
        for (int i = 0; i < g->n; i++) {
            const float *d = dy + (size_t)i * g->ys + (size_t)o * g->opix;
            /* DIRECT_LANES partial sums, which the compiler vectorises */
            float part[DIRECT_LANES] = {0.0f};
            int q = 0;
            for (; q + DIRECT_LANES <= g->opix; q += DIRECT_LANES)
                for (int v = 0; v < DIRECT_LANES; v++) part[v] += d[q + v];
            for (; q < g->opix; q++) part[0] += d[q];
            float plane = 0.0f;
            for (int v = 0; v < DIRECT_LANES; v++) plane += part[v];
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
        const size_t xoff = (size_t)i0 * g->xs;
        nchw_to_channels(&sub, dy + (size_t)i0 * g->ys,
                         ws + (size_t)sub.kdim * sub.n * sub.opix);
        if (dw) bwd_filter_im2col_batch(&sub, x + xoff, accumulate || i0 > 0, dw, ws);
        if (dx) bwd_data_im2col_batch(&sub, w, dx + xoff, ws);
    }
}

/* The filter and data passes of one group (fa -1: no filter pass; dx NULL: no data
 * pass): x, dy, w, dw, dx already moved to the group's channels. */
static void bwd_group(const conv_geom *g, int fa, int da, const float *x, const float *dy,
                      const float *w, int accumulate, float *dw, float *dx, float *ws)
{
    const int fchunk = chunk_images(g, fa), dchunk = dx ? chunk_images(g, da) : 0;
    if (fa == CONV_ALGO_IM2COL_PAR) {
        /* the data pass too when it is im2col-par: one column buffer per image serves both */
        float *pdx = da == CONV_ALGO_IM2COL_PAR ? dx : NULL;
        bwd_par(g, x, dy, w, accumulate, dw, pdx, ws);
        if (!dx || pdx) return;
    }
    /* Batched filter and data passes with the same chunks share one reorder of dy. */
    if (fchunk && fchunk == dchunk) {
        bwd_chunks(g, fchunk, x, dy, w, accumulate, dw, dx, ws);
        return;
    }
    switch (fa) {
    case -1:
    case CONV_ALGO_IM2COL_PAR: break;
    case CONV_ALGO_DIRECT: bwd_filter_direct(g, x, dy, accumulate, dw); break;
    case CONV_ALGO_IM2COL: bwd_filter_im2col(g, x, dy, accumulate, dw, ws); break;
    default: bwd_chunks(g, fchunk, x, dy, w, accumulate, dw, NULL, ws); break;
    }
    if (!dx) return;
    switch (da) {
    case CONV_ALGO_DIRECT: bwd_data_direct(g, dy, w, dx); break;
    case CONV_ALGO_IM2COL: bwd_data_im2col(g, dy, w, dx, ws); break;
    case CONV_ALGO_IM2COL_PAR: bwd_par(g, x, dy, w, 0, NULL, dx, ws); break;
    default: bwd_chunks(g, dchunk, x, dy, w, 0, NULL, dx, ws); break;
    }
}

static vdnn_status conv_backward(layer *l, const exec_ctx *c, const float *x, const float *y,
                                 const float *dy, float *dx)
{
    (void)y;
    const conv_params *p = l->priv;
    const conv_geom g = geom_of(l, c->n);
    const int passes = (1 << PASS_BWD_FILTER) | (dx ? 1 << PASS_BWD_DATA : 0);
    int run[PASS_COUNT];
    vdnn_status st = call_algos(l, c, passes, run);
    if (st != VDNN_OK) return st;
    const param *w = &l->params[CONV_WEIGHTS];
    if (p->bias) bias_grad(&g, dy, c->accumulate, l->params[CONV_BIAS].grad);
    /* oneDNN's passes take the whole convolution, one after the other in the workspace;
     * the project's own run per group as before, with what is left */
    const onednn_conv o = onednn_shape(l, c->n);
    int fm = onednn_method_of(l, PASS_BWD_FILTER, run[PASS_BWD_FILTER]);
    int dm = dx ? onednn_method_of(l, PASS_BWD_DATA, run[PASS_BWD_DATA]) : -1;
    if (fm >= 0 || dm >= 0)
        st = onednn_conv_backward(&o, fm, dm, x, dy, w->value, c->accumulate, w->grad, dx, c->workspace,
                                  c->workspace_bytes);
    if (st != VDNN_OK || (fm >= 0 && (!dx || dm >= 0))) return st;
    float *own_dx = dm >= 0 ? NULL : dx;
    for (int k = 0; k < g.groups; k++) {
        const size_t xo = (size_t)k * g.ic * g.ipix, yo = (size_t)k * g.oc * g.opix;
        const size_t wo = (size_t)k * g.oc * g.kdim;
        bwd_group(&g, fm >= 0 ? -1 : run[PASS_BWD_FILTER], run[PASS_BWD_DATA], x + xo, dy + yo,
                  w->value + wo, c->accumulate, w->grad + wo, own_dx ? own_dx + xo : NULL, c->workspace);
    }
    return VDNN_OK;
}

/* "3x3/1 p1, 32 filters", with what differs from a plain convolution: "3x1/2x1 p1,0,1,0
 * d2 g32, 64 filters, no bias" (pads top, bottom, left, right). */
static void conv_describe(const layer *l, char *buf, size_t len)
{
    const conv_params *p = l->priv;
    char k[32], st[32], pad[48], dil[24] = "", grp[24] = "";
    snprintf(k, sizeof k, "%dx%d", p->size_h, p->size_w);
    if (p->stride_h == p->stride_w) snprintf(st, sizeof st, "%d", p->stride_h);
    else snprintf(st, sizeof st, "%dx%d", p->stride_h, p->stride_w);
    if (p->pad_top == p->pad_bottom && p->pad_top == p->pad_left && p->pad_top == p->pad_right)
        snprintf(pad, sizeof pad, "%d", p->pad_top);
    else
        snprintf(pad, sizeof pad, "%d,%d,%d,%d", p->pad_top, p->pad_bottom, p->pad_left,
                 p->pad_right);
    if (p->dilation_h != 1 || p->dilation_w != 1) {
        if (p->dilation_h == p->dilation_w) snprintf(dil, sizeof dil, " d%d", p->dilation_h);
        else snprintf(dil, sizeof dil, " d%dx%d", p->dilation_h, p->dilation_w);
    }
    if (p->groups != 1) snprintf(grp, sizeof grp, " g%d", p->groups);
    snprintf(buf, len, "%s/%s p%s%s%s, %d filters%s", k, st, pad, dil, grp, p->filters,
             p->bias ? "" : ", no bias");
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
    .forward_cuda = CUDA_HALF(conv_forward_cuda),
    .backward_cuda = CUDA_HALF(conv_backward_cuda),
    .bind_cuda = CUDA_HALF(conv_bind_cuda),
    .unbind_cuda = CUDA_HALF(conv_unbind_cuda),
    .find_cuda = CUDA_HALF(conv_find_cuda),
};
