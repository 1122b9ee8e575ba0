/* Tests for the convolutional layer: every algorithm of every pass against a naive
 * double-precision reference on odd shapes, the shared gradient checker, workspace
 * sizes, gradient accumulation, dx == NULL, too-small workspaces, the config keys and
 * the parameter declarations. */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/conv.h"
#include "tests/gradcheck.h"
#include "tests/testnet.h"
#include "tests/tsan.h"
#include "vdnn/onednn.h"
#include "vdnn/config.h"

/* One geometry: input (n, c, h, w) and the layer's keys. The fields after bias, left 0,
 * give a plain square convolution: kw (kernel width, else size), sw (horizontal stride,
 * else stride), dil (dilation), groups, and with `sides` the pads bottom, left and right
 * (pad is then the top one). */
typedef struct conv_case {
    int n, c, h, w;
    int filters, size, stride, pad, bias;
    int kw, sw, dil, groups, sides, pb, pl, pr;
} conv_case;

/* The options of a plain square convolution, all left at their defaults. */
#define PLAIN 0, 0, 0, 0, 0, 0, 0, 0

static const conv_case cases[] = {
    {3, 3, 7, 5, 4, 3, 2, 1, 1, PLAIN},   /* odd shape, stride 2, pad 1 */
    {2, 5, 4, 6, 3, 1, 1, 0, 1, PLAIN},   /* 1x1, stride 1, pad 0: the pointwise path */
    {2, 2, 6, 7, 3, 5, 1, 2, 1, PLAIN},   /* 5x5 pad 2 */
    {3, 3, 9, 8, 5, 3, 2, 0, 0, PLAIN},   /* kernel larger than stride, no bias */
    {2, 2, 8, 7, 3, 2, 3, 0, 1, PLAIN},   /* stride larger than kernel: pixels skipped */
    {2, 3, 5, 4, 2, 1, 2, 1, 1, PLAIN},   /* 1x1 with pad: border outputs see only padding */
    {2, 3, 11, 10, 4, 4, 3, 2, 1, PLAIN}, /* even kernel, stride 3, pad 2 */
    {4, 16, 13, 13, 32, 3, 1, 1, 1, PLAIN}, /* big enough for OpenBLAS and OpenMP to split */
    /* "same" padding (OW == W) whose windows can lie wholly in the padding */
    {3, 3, 3, 2, 4, 5, 1, 2, 1, PLAIN},
    /* column buffers of 0.8 and 1.6 MB per image: im2col-chunk runs in several chunks,
     * one of them partial (test_workspace_bytes checks that it does) */
    {3, 8, 36, 36, 4, 5, 1, 0, 1, PLAIN},
    {3, 16, 36, 36, 3, 5, 1, 0, 0, PLAIN},
    /* "same" padding on maps large enough for im2col-par to build the column buffer in
     * three bands of output rows (15, 15 and 10) */
    {2, 24, 40, 40, 4, 3, 1, 1, 1, PLAIN},
    /* groups, dilation, rectangular kernels and strides, asymmetric padding */
    {2, 4, 6, 5, 6, 3, 1, 1, 1, .groups = 2},
    {2, 3, 7, 6, 3, 3, 2, 1, 1, .groups = 3},          /* depthwise, stride 2 */
    {2, 4, 5, 5, 8, 1, 1, 0, 1, .groups = 4},          /* grouped pointwise */
    {2, 3, 9, 8, 4, 3, 1, 2, 1, .dil = 2},             /* dilated "same" */
    {2, 3, 9, 10, 4, 3, 2, 0, 0, .dil = 3},            /* dilated, strided */
    {2, 3, 7, 6, 4, 3, 2, 1, 1, .kw = 1, .sw = 1},     /* 3x1 kernel, stride 2x1 */
    {2, 2, 6, 9, 3, 1, 1, 0, 1, .kw = 5, .sw = 2},     /* 1x5 kernel, stride 1x2 */
    {2, 3, 6, 7, 4, 3, 1, 0, 1, .sides = 1, .pb = 2, .pl = 1, .pr = 0},
    /* TensorFlow's "same" for an even kernel: the extra pad below and on the right */
    {2, 3, 5, 6, 4, 2, 1, 0, 1, .sides = 1, .pb = 1, .pl = 0, .pr = 1},
    /* all of them at once */
    {3, 4, 9, 8, 6, 3, 2, 1, 0, .kw = 2, .sw = 1, .dil = 2, .groups = 2, .sides = 1, .pb = 0,
     .pl = 2, .pr = 1},
    /* depthwise "same" on maps large enough for OpenMP, im2col-par's bands and chunks */
    {2, 16, 24, 24, 32, 3, 1, 1, 1, .groups = 16},
};
enum { CASE_BIG = 7, CASE_CHUNKED_A = 9, CASE_CHUNKED_B = 10, CASE_OPTIONS = 12 };
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* A case's resolved geometry. */
static int kh_of(const conv_case *k) { return k->size; }
static int kw_of(const conv_case *k) { return k->kw ? k->kw : k->size; }
static int sh_of(const conv_case *k) { return k->stride; }
static int sw_of(const conv_case *k) { return k->sw ? k->sw : k->stride; }
static int dil_of(const conv_case *k) { return k->dil ? k->dil : 1; }
static int groups_of(const conv_case *k) { return k->groups ? k->groups : 1; }
static int pt_of(const conv_case *k) { return k->pad; }
static int pb_of(const conv_case *k) { return k->sides ? k->pb : k->pad; }
static int pl_of(const conv_case *k) { return k->sides ? k->pl : k->pad; }
static int pr_of(const conv_case *k) { return k->sides ? k->pr : k->pad; }

static int out_side(int in, int k, int s, int p0, int p1, int d)
{
    return (in + p0 + p1 - ((k - 1) * d + 1)) / s + 1;
}
static int out_h(const conv_case *k)
{
    return out_side(k->h, kh_of(k), sh_of(k), pt_of(k), pb_of(k), dil_of(k));
}
static int out_w(const conv_case *k)
{
    return out_side(k->w, kw_of(k), sw_of(k), pl_of(k), pr_of(k), dil_of(k));
}

/* The case's section, in the spellings a config would use for it. */
static void case_text(const conv_case *k, char *text, size_t len)
{
    int n = snprintf(text, len, "[convolutional]\nfilters=%d\nbias=%d\n", k->filters, k->bias);
    if (k->kw) n += snprintf(text + n, len - n, "size_h=%d\nsize_w=%d\n", k->size, k->kw);
    else n += snprintf(text + n, len - n, "size=%d\n", k->size);
    if (k->sw) n += snprintf(text + n, len - n, "stride_h=%d\nstride_w=%d\n", k->stride, k->sw);
    else n += snprintf(text + n, len - n, "stride=%d\n", k->stride);
    if (k->sides)
        n += snprintf(text + n, len - n, "pad_top=%d\npad_bottom=%d\npad_left=%d\npad_right=%d\n",
                      k->pad, k->pb, k->pl, k->pr);
    else n += snprintf(text + n, len - n, "pad=%d\n", k->pad);
    if (k->dil) n += snprintf(text + n, len - n, "dilation=%d\n", k->dil);
    if (k->groups) snprintf(text + n, len - n, "groups=%d\n", k->groups);
}

static layer *make_conv(const conv_case *k)
{
    char text[512];
    case_text(k, text, sizeof text);
    return test_layer(&conv_ops, 0, text, shape_make(k->n, k->c, k->h, k->w));
}

/* What cfg_check and layer_create say about a config, on a 5x5 input. */
static vdnn_status config_status(const char *text)
{
    return test_layer_status(&conv_ops, text, shape_make(2, 3, 5, 5));
}

/* ---- the naive reference, in double --------------------------------------------- */

/* Calls visit(arg, xi, wi, yi) for every (input, weight, output) triple of the first n
 * items that a product of the convolution joins, padding excluded. */
static void ref_visit(const conv_case *k, int n, void (*visit)(void *, size_t, size_t, size_t),
                      void *arg)
{
    const int oh = out_h(k), ow = out_w(k), KH = kh_of(k), KW = kw_of(k), d = dil_of(k);
    const int icg = k->c / groups_of(k), ocg = k->filters / groups_of(k);
    for (int i = 0; i < n; i++)
        for (int o = 0; o < k->filters; o++)
            for (int p = 0; p < oh; p++)
                for (int q = 0; q < ow; q++)
                    for (int cg = 0; cg < icg; cg++)
                        for (int u = 0; u < KH; u++)
                            for (int v = 0; v < KW; v++) {
                                const int c = o / ocg * icg + cg;
                                const int ih = p * sh_of(k) - pt_of(k) + u * d;
                                const int iw = q * sw_of(k) - pl_of(k) + v * d;
                                if (ih < 0 || ih >= k->h || iw < 0 || iw >= k->w) continue;
                                visit(arg, (((size_t)i * k->c + c) * k->h + ih) * k->w + iw,
                                      (((size_t)o * icg + cg) * KH + u) * KW + v,
                                      (((size_t)i * k->filters + o) * oh + p) * ow + q);
                            }
}

typedef struct ref_io {
    const float *x, *w, *dy;
    double *y, *dx, *dw;
} ref_io;

static void visit_forward(void *arg, size_t xi, size_t wi, size_t yi)
{
    ref_io *r = arg;
    r->y[yi] += (double)r->w[wi] * r->x[xi];
}

static void visit_backward(void *arg, size_t xi, size_t wi, size_t yi)
{
    ref_io *r = arg;
    r->dx[xi] += (double)r->dy[yi] * r->w[wi];
    r->dw[wi] += (double)r->dy[yi] * r->x[xi];
}

/* x (N, C, H, W), w (OC, C / groups, KH, KW), b (OC) or NULL -> y (N, OC, OH, OW). */
static void ref_forward(const conv_case *k, int n, const float *x, const float *w,
                        const float *b, double *y)
{
    const size_t plane = (size_t)out_h(k) * out_w(k);
    for (int i = 0; i < n; i++)
        for (int o = 0; o < k->filters; o++)
            for (size_t q = 0; q < plane; q++)
                y[((size_t)i * k->filters + o) * plane + q] = b ? b[o] : 0.0;
    ref_io r = {x, w, NULL, y, NULL, NULL};
    ref_visit(k, n, visit_forward, &r);
}

/* dy (N, OC, OH, OW) -> dx (N, C, H, W), dw (OC, C / groups, KH, KW), db (OC); all
 * overwritten. */
static void ref_backward(const conv_case *k, int n, const float *x, const float *w,
                         const float *dy, double *dx, double *dw, double *db)
{
    const size_t plane = (size_t)out_h(k) * out_w(k);
    memset(dx, 0, (size_t)n * k->c * k->h * k->w * sizeof *dx);
    memset(dw, 0, (size_t)k->filters * (k->c / groups_of(k)) * kh_of(k) * kw_of(k) * sizeof *dw);
    memset(db, 0, (size_t)k->filters * sizeof *db);
    for (int i = 0; i < n; i++)
        for (int o = 0; o < k->filters; o++)
            for (size_t q = 0; q < plane; q++) db[o] += dy[((size_t)i * k->filters + o) * plane + q];
    ref_io r = {x, w, dy, NULL, dx, dw};
    ref_visit(k, n, visit_backward, &r);
}

/* got agrees with want within 1e-4 of the largest |want| (a norm-wise relative error:
 * single entries may cancel to near zero). */
static void expect_close(const float *got, const double *want, size_t count, const char *what)
{
    double scale = 1e-6;
    for (size_t i = 0; i < count; i++) scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < count; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= 1e-4 * scale, "%s[%zu]: got %.7g, want %.7g",
                      what, i, got[i], want[i]);
}

/* ---- a layer with random tensors on a CPU device ---------------------------------- */

typedef struct rig {
    const conv_case *k;
    device *d;
    layer *l;
    size_t xcount, ycount, wcount;   /* at the max batch */
    float *x, *y, *dy, *dx;          /* device: (N, C, H, W), (N, OC, OH, OW) x2, (N, C, H, W) */
    float *ws;                       /* device: the largest workspace of any algorithm */
    size_t ws_bytes;
    float *hx, *hw, *hb, *hdy;       /* host copies of the random x, weights, bias, dy */
} rig;

static float *dev_alloc(rig *r, size_t bytes, const char *what)
{
    void *p = NULL;
    ck_assert_msg(device_alloc(r->d, bytes, "test", what, &p) == VDNN_OK, "%s", vdnn_errmsg());
    return p;
}

static float *host_random(size_t count, float scale, uint64_t seed)
{
    float *h = malloc(count * sizeof *h);
    ck_assert_ptr_nonnull(h);
    test_fill_uniform(h, count, scale, seed);
    return h;
}

static void upload(rig *r, float *dev, const float *host, size_t count)
{
    ck_assert_int_eq(device_upload(r->d, dev, host, count * sizeof *host), VDNN_OK);
}

static void rig_init(rig *r, const conv_case *k)
{
    memset(r, 0, sizeof *r);
    r->k = k;
    r->d = test_cpu_device();
    r->l = make_conv(k);
    ck_assert_msg(layer_alloc_params(r->l, r->d, 7) == VDNN_OK, "%s", vdnn_errmsg());
    r->xcount = shape_count(r->l->in);
    r->ycount = shape_count(r->l->out);
    r->wcount = shape_count(r->l->params[0].shape);
    r->x = dev_alloc(r, r->xcount * sizeof(float), "x");
    r->dx = dev_alloc(r, r->xcount * sizeof(float), "dx");
    r->y = dev_alloc(r, r->ycount * sizeof(float), "y");
    r->dy = dev_alloc(r, r->ycount * sizeof(float), "dy");
    for (int pass = 0; pass < PASS_COUNT; pass++)
        for (int a = 0; a < layer_algo_count(r->l, pass); a++) {
            size_t b = layer_workspace_bytes(r->l, pass, a);
            if (b > r->ws_bytes) r->ws_bytes = b;
        }
    if (r->ws_bytes) r->ws = dev_alloc(r, r->ws_bytes, "workspace");
    r->hx = host_random(r->xcount, 1.0f, 1);
    r->hw = host_random(r->wcount, 0.5f, 2);
    r->hb = host_random((size_t)k->filters, 1.0f, 3);
    r->hdy = host_random(r->ycount, 1.0f, 4);
    upload(r, r->x, r->hx, r->xcount);
    upload(r, r->l->params[0].value, r->hw, r->wcount);
    if (k->bias) upload(r, r->l->params[1].value, r->hb, (size_t)k->filters);
    upload(r, r->dy, r->hdy, r->ycount);
}

static void rig_free(rig *r)
{
    float *dev[] = {r->x, r->y, r->dy, r->dx, r->ws};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i]) device_free(r->d, dev[i]);
    layer_destroy(r->l, r->d);
    device_destroy(r->d);
    free(r->hx);
    free(r->hw);
    free(r->hb);
    free(r->hdy);
}

static exec_ctx rig_ctx(const rig *r, int n, int accumulate)
{
    exec_ctx c = test_ctx(r->d, n, 1);
    c.accumulate = accumulate;
    c.workspace = r->ws;
    c.workspace_bytes = r->ws_bytes;
    return c;
}

/* y of the first n items with forward algorithm `algo`, into hy (host). */
static void rig_forward(rig *r, int algo, int n, float *hy)
{
    r->l->algo[PASS_FWD] = algo;
    exec_ctx c = rig_ctx(r, n, 0);
    ck_assert_msg(layer_forward(r->l, &c, r->x, r->y) == VDNN_OK, "%s", vdnn_errmsg());
    size_t count = (size_t)n * shape_per_item(r->l->out);
    ck_assert_int_eq(device_download(r->d, hy, r->y, count * sizeof *hy), VDNN_OK);
}

/* Backward of the first n items with data algorithm da and filter algorithm fa; hdx
 * NULL passes dx = NULL. hdw/hdb receive the parameter gradients (hdb only with bias). */
static void rig_backward(rig *r, int da, int fa, int n, int accumulate, float *hdx,
                         float *hdw, float *hdb)
{
    r->l->algo[PASS_BWD_DATA] = da;
    r->l->algo[PASS_BWD_FILTER] = fa;
    exec_ctx c = rig_ctx(r, n, accumulate);
    ck_assert_msg(layer_backward(r->l, &c, r->x, r->y, r->dy, hdx ? r->dx : NULL) == VDNN_OK,
                  "%s", vdnn_errmsg());
    size_t count = (size_t)n * shape_per_item(r->l->in);
    if (hdx) ck_assert_int_eq(device_download(r->d, hdx, r->dx, count * sizeof *hdx), VDNN_OK);
    ck_assert_int_eq(device_download(r->d, hdw, r->l->params[0].grad, r->wcount * sizeof *hdw),
                     VDNN_OK);
    if (r->k->bias)
        ck_assert_int_eq(device_download(r->d, hdb, r->l->params[1].grad,
                                         (size_t)r->k->filters * sizeof *hdb),
                         VDNN_OK);
}

/* The reference gradients of the first n items. */
typedef struct ref_grads { double *dx, *dw, *db; } ref_grads;

static ref_grads ref_grads_of(const rig *r, int n)
{
    ref_grads g;
    g.dx = malloc(r->xcount * sizeof *g.dx);
    g.dw = malloc(r->wcount * sizeof *g.dw);
    g.db = malloc((size_t)r->k->filters * sizeof *g.db);
    ck_assert(g.dx && g.dw && g.db);
    ref_backward(r->k, n, r->hx, r->hw, r->hdy, g.dx, g.dw, g.db);
    return g;
}

static void ref_grads_free(ref_grads *g)
{
    free(g->dx);
    free(g->dw);
    free(g->db);
}

/* The most algorithms any pass of l has, and the a-th of `pass` (its last where it has
 * fewer): a loop over the first visits every algorithm of every pass. */
static int most_algos(const layer *l)
{
    int most = 0;
    for (int pass = 0; pass < PASS_COUNT; pass++)
        if (layer_algo_count(l, pass) > most) most = layer_algo_count(l, pass);
    return most;
}

/* The id of the algorithm called `name` in `pass`, or -1. */
static int algo_named(const layer *l, int pass, const char *name)
{
    for (int a = 0; a < layer_algo_count(l, pass); a++)
        if (!strcmp(layer_algo_name(l, pass, a), name)) return a;
    return -1;
}

static int nth_algo(const layer *l, int pass, int a)
{
    return a < layer_algo_count(l, pass) ? a : layer_algo_count(l, pass) - 1;
}

static const char *algo_label(const layer *l, int pass, int a, char *buf, size_t len)
{
    static const char *const pass_names[PASS_COUNT] = {"fwd", "bwd-data", "bwd-filter"};
    snprintf(buf, len, "%s %s", pass_names[pass], layer_algo_name(l, pass, a));
    return buf;
}

/* ---- tests ------------------------------------------------------------------------ */

START_TEST(test_setup_shapes)
{
    const conv_case *k = &cases[_i];
    layer *l = make_conv(k);
    ck_assert_int_eq(l->out.n, k->n);
    ck_assert_int_eq(l->out.c, k->filters);
    ck_assert_int_eq(l->out.h, out_h(k));
    ck_assert_int_eq(l->out.w, out_w(k));
    ck_assert_int_eq(l->needs_input, 1);
    ck_assert_int_eq(l->needs_output, 0);
    ck_assert_int_eq(l->nparams, k->bias ? 2 : 1);
    const param *w = &l->params[0];
    ck_assert_str_eq(w->name, "weights");
    ck_assert_int_eq(w->shape.n, k->filters);
    ck_assert_int_eq(w->shape.c, k->c / groups_of(k));
    ck_assert_int_eq(w->shape.h, kh_of(k));
    ck_assert_int_eq(w->shape.w, kw_of(k));
    ck_assert_int_eq(w->init, INIT_HE);
    ck_assert_int_eq(w->fan_in, k->c / groups_of(k) * kh_of(k) * kw_of(k));
    ck_assert_int_eq(w->trainable, 1);
    ck_assert_int_eq(w->decay, 1);
    if (k->bias) {
        const param *b = &l->params[1];
        ck_assert_str_eq(b->name, "bias");
        ck_assert_int_eq(b->shape.n, k->filters);
        ck_assert_int_eq((int)shape_count(b->shape), k->filters);
        ck_assert_int_eq(b->init, INIT_ZERO);
        ck_assert_int_eq(b->trainable, 1);
        ck_assert_int_eq(b->decay, 0);
    }
    ck_assert_str_eq(l->name, "conv1");
    for (int pass = 0; pass < PASS_COUNT; pass++) {
        /* the project's own, then oneDNN's direct method in a build with it (and Winograd
         * where it takes the shape) */
        ck_assert_int_ge(layer_algo_count(l, pass), CONV_ALGO_OWN + onednn_built());
        ck_assert_int_le(layer_algo_count(l, pass), CONV_ALGO_OWN + (onednn_built() ? ONEDNN_METHODS : 0));
        if (onednn_built()) ck_assert_int_eq(algo_named(l, pass, "onednn"), CONV_ALGO_OWN);
        ck_assert_str_eq(layer_algo_name(l, pass, CONV_ALGO_DIRECT), "direct");
        ck_assert_str_eq(layer_algo_name(l, pass, CONV_ALGO_IM2COL), "im2col");
        ck_assert_str_eq(layer_algo_name(l, pass, CONV_ALGO_IM2COL_BATCH), "im2col-batch");
        ck_assert_str_eq(layer_algo_name(l, pass, CONV_ALGO_IM2COL_CHUNK), "im2col-chunk");
        ck_assert_str_eq(layer_algo_name(l, pass, CONV_ALGO_IM2COL_PAR), "im2col-par");
    }
    layer_destroy(l, NULL);
}
END_TEST

/* Every forward algorithm agrees with the reference, on the whole batch and on one item. */
/* Under a sanitizer, where each of these checks costs seconds, the cases of the newer
 * options run three of their eleven: depthwise strided, asymmetric padding, and all of
 * them at once; the others print a SKIPPED line (make test runs every case). */
static int left_to_make_test(const char *check, int i)
{
    static const int kept[] = {CASE_OPTIONS + 1, CASE_OPTIONS + 7, CASE_OPTIONS + 9};
    if (!UNDER_SANITIZER || i < CASE_OPTIONS) return 0;
    for (size_t k = 0; k < sizeof kept / sizeof *kept; k++)
        if (kept[k] == i) return 0;
    printf("SKIPPED: %s case %d under a sanitizer (make test runs it)\n", check, i);
    return 1;
}

START_TEST(test_forward_reference)
{
    if (left_to_make_test("test_forward_reference", _i)) return;
    rig r;
    rig_init(&r, &cases[_i]);
    float *hy = malloc(r.ycount * sizeof *hy);
    double *want = malloc(r.ycount * sizeof *want);
    ck_assert(hy && want);
    const int sizes[2] = {r.k->n, 1};
    for (int s = 0; s < 2; s++) {
        ref_forward(r.k, sizes[s], r.hx, r.hw, r.k->bias ? r.hb : NULL, want);
        size_t count = (size_t)sizes[s] * shape_per_item(r.l->out);
        for (int a = 0; a < layer_algo_count(r.l, PASS_FWD); a++) {
            char what[64];
            rig_forward(&r, a, sizes[s], hy);
            expect_close(hy, want, count, algo_label(r.l, PASS_FWD, a, what, sizeof what));
        }
    }
    free(hy);
    free(want);
    rig_free(&r);
}
END_TEST

/* Whether the backward check runs the pair (data algorithm da, filter algorithm fa).
 * Every pair in make test; under a sanitizer, where this check took most of the suite's
 * minutes, each algorithm with itself and with the next: every algorithm in both passes,
 * and each beside another whose workspace it shares. */
static int pair_checked(const layer *l, int da, int fa)
{
    int count = layer_algo_count(l, PASS_BWD_FILTER);
    return !UNDER_SANITIZER || fa == da % count || fa == (da + 1) % count;
}

/* Every pair (data algorithm, filter algorithm) agrees with the reference (under a
 * sanitizer, the pairs of pair_checked). */
START_TEST(test_backward_reference)
{
    if (left_to_make_test("test_backward_reference", _i)) return;
    rig r;
    rig_init(&r, &cases[_i]);
    float *hdx = malloc(r.xcount * sizeof *hdx), *hdw = malloc(r.wcount * sizeof *hdw);
    float *hdb = malloc((size_t)r.k->filters * sizeof *hdb);
    ck_assert(hdx && hdw && hdb);
    if (UNDER_SANITIZER && _i == 0)
        printf("SKIPPED: test_backward_reference's pairs of a data and a filter algorithm other than each "
               "algorithm with itself and the next, under a sanitizer (make test checks them all)\n");
    const int sizes[2] = {r.k->n, 1};
    for (int s = 0; s < 2; s++) {
        ref_grads g = ref_grads_of(&r, sizes[s]);
        size_t xcount = (size_t)sizes[s] * shape_per_item(r.l->in);
        for (int da = 0; da < layer_algo_count(r.l, PASS_BWD_DATA); da++)
            for (int fa = 0; fa < layer_algo_count(r.l, PASS_BWD_FILTER); fa++) {
                if (!pair_checked(r.l, da, fa)) continue;
                char what[64];
                rig_backward(&r, da, fa, sizes[s], 0, hdx, hdw, hdb);
                expect_close(hdx, g.dx, xcount, algo_label(r.l, PASS_BWD_DATA, da, what, 64));
                expect_close(hdw, g.dw, r.wcount, algo_label(r.l, PASS_BWD_FILTER, fa, what, 64));
                if (r.k->bias) expect_close(hdb, g.db, (size_t)r.k->filters, "bias grad");
            }
        ref_grads_free(&g);
    }
    free(hdx);
    free(hdw);
    free(hdb);
    rig_free(&r);
}
END_TEST

/* The shared checker on each algorithm (the same one for all three passes). Under a
 * sanitizer the cases of the newer options check the direct algorithm only: the
 * reference checks above hold every algorithm to the same numbers. */
START_TEST(test_gradcheck)
{
    if (left_to_make_test("test_gradcheck", _i)) return;
    rig r;
    rig_init(&r, &cases[_i]);
    int count = UNDER_SANITIZER && _i >= CASE_OPTIONS ? 1 : most_algos(r.l);
    if (count < most_algos(r.l))
        printf("SKIPPED: test_gradcheck case %d with algorithms other than direct under a sanitizer (make test "
               "checks them all)\n", _i);
    for (int a = 0; a < count; a++) {
        for (int pass = 0; pass < PASS_COUNT; pass++) r.l->algo[pass] = nth_algo(r.l, pass, a);
        gradcheck_opts o = gradcheck_defaults();
        o.seed = 100 + (uint64_t)a;
        char msg[512];
        ck_assert_msg(gradcheck(r.l, r.d, &o, msg, sizeof msg) == 0, "%s: %s",
                      layer_algo_name(r.l, PASS_FWD, a), msg);
    }
    rig_free(&r);
}
END_TEST

START_TEST(test_workspace_bytes)
{
    /* case 0: KDIM = 3*3*3 = 27, OH*OW = 4*3 = 12, OC = 4, N = 3 */
    layer *l = make_conv(&cases[0]);
    /* case 1: pointwise, KDIM = 5, OH*OW = 4*6 = 24, OC = 3, N = 2 */
    layer *p = make_conv(&cases[1]);
    for (int pass = 0; pass < PASS_COUNT; pass++) {
        ck_assert_uint_eq(layer_workspace_bytes(l, pass, CONV_ALGO_DIRECT), 0);
        ck_assert_uint_eq(layer_workspace_bytes(l, pass, CONV_ALGO_IM2COL), 27 * 12 * 4);
        ck_assert_uint_eq(layer_workspace_bytes(l, pass, CONV_ALGO_IM2COL_BATCH),
                          (27 + 4) * 3 * 12 * 4);
        ck_assert_uint_eq(layer_workspace_bytes(p, pass, CONV_ALGO_DIRECT), 0);
        ck_assert_uint_eq(layer_workspace_bytes(p, pass, CONV_ALGO_IM2COL), 0);
        ck_assert_uint_eq(layer_workspace_bytes(p, pass, CONV_ALGO_IM2COL_BATCH),
                          (5 + 3) * 2 * 24 * 4);
        /* small maps: one chunk holds the whole batch */
        ck_assert_uint_eq(layer_workspace_bytes(l, pass, CONV_ALGO_IM2COL_CHUNK),
                          layer_workspace_bytes(l, pass, CONV_ALGO_IM2COL_BATCH));
    }
    /* large maps: chunks of fewer images than the batch, each (KDIM + OC) * OH*OW floats */
    const int chunked[2] = {CASE_CHUNKED_A, CASE_CHUNKED_B};
    for (int i = 0; i < 2; i++) {
        const conv_case *k = &cases[chunked[i]];
        layer *c = make_conv(k);
        size_t per_image = ((size_t)k->c * k->size * k->size + k->filters) *
                           (size_t)c->out.h * c->out.w * sizeof(float);
        size_t chunk = layer_workspace_bytes(c, PASS_FWD, CONV_ALGO_IM2COL_CHUNK);
        ck_assert_uint_eq(chunk % per_image, 0);
        ck_assert_uint_lt(chunk / per_image, (size_t)k->n);
        ck_assert_uint_eq(layer_workspace_bytes(c, PASS_FWD, CONV_ALGO_IM2COL_BATCH),
                          per_image * (size_t)k->n);
        layer_destroy(c, NULL);
    }
    layer_destroy(l, NULL);
    layer_destroy(p, NULL);
}
END_TEST

/* accumulate = 0 overwrites whatever the gradients held; accumulate = 1 adds to them. */
START_TEST(test_accumulate)
{
    rig r;
    rig_init(&r, &cases[0]);
    const int oc = r.k->filters;
    float *hdw = malloc(r.wcount * sizeof *hdw), *hdb = malloc((size_t)oc * sizeof *hdb);
    float *junk = host_random(r.wcount, 1000.0f, 9);
    ck_assert(hdw && hdb);
    ref_grads g = ref_grads_of(&r, r.k->n);
    double *twice_w = malloc(r.wcount * sizeof *twice_w), *twice_b = malloc(oc * sizeof *twice_b);
    ck_assert(twice_w && twice_b);
    for (size_t i = 0; i < r.wcount; i++) twice_w[i] = 2.0 * g.dw[i];
    for (int i = 0; i < oc; i++) twice_b[i] = 2.0 * g.db[i];
    for (int a = 0; a < layer_algo_count(r.l, PASS_BWD_FILTER); a++) {
        upload(&r, r.l->params[0].grad, junk, r.wcount);
        upload(&r, r.l->params[1].grad, junk, (size_t)oc);
        rig_backward(&r, nth_algo(r.l, PASS_BWD_DATA, a), a, r.k->n, 0, NULL, hdw, hdb);
        expect_close(hdw, g.dw, r.wcount, "overwritten weights grad");
        expect_close(hdb, g.db, (size_t)oc, "overwritten bias grad");
        rig_backward(&r, nth_algo(r.l, PASS_BWD_DATA, a), a, r.k->n, 1, NULL, hdw, hdb);
        expect_close(hdw, twice_w, r.wcount, "accumulated weights grad");
        expect_close(hdb, twice_b, (size_t)oc, "accumulated bias grad");
    }
    ref_grads_free(&g);
    free(twice_w);
    free(twice_b);
    free(junk);
    free(hdw);
    free(hdb);
    rig_free(&r);
}
END_TEST

/* dx == NULL: parameter gradients as usual, dx untouched, and no workspace is needed
 * for a data algorithm that does not run. */
START_TEST(test_dx_null)
{
    rig r;
    rig_init(&r, &cases[0]);
    float *hdw = malloc(r.wcount * sizeof *hdw), *hdb = malloc(4 * sizeof *hdb);
    float *sentinel = host_random(r.xcount, 3.0f, 8), *after = malloc(r.xcount * sizeof *after);
    ck_assert(hdw && hdb && after);
    ref_grads g = ref_grads_of(&r, r.k->n);
    upload(&r, r.dx, sentinel, r.xcount);
    for (int a = 0; a < layer_algo_count(r.l, PASS_BWD_FILTER); a++) {
        rig_backward(&r, nth_algo(r.l, PASS_BWD_DATA, a), a, r.k->n, 0, NULL, hdw, hdb);
        expect_close(hdw, g.dw, r.wcount, "weights grad");
        expect_close(hdb, g.db, 4, "bias grad");
    }
    ck_assert_int_eq(device_download(r.d, after, r.dx, r.xcount * sizeof *after), VDNN_OK);
    ck_assert_mem_eq(after, sentinel, r.xcount * sizeof *after);

    r.l->algo[PASS_BWD_DATA] = CONV_ALGO_IM2COL_BATCH;
    r.l->algo[PASS_BWD_FILTER] = CONV_ALGO_DIRECT;
    exec_ctx c = rig_ctx(&r, r.k->n, 0);
    c.workspace = NULL;
    c.workspace_bytes = 0;
    ck_assert_msg(layer_backward(r.l, &c, r.x, r.y, r.dy, NULL) == VDNN_OK, "%s", vdnn_errmsg());
    ref_grads_free(&g);
    free(hdw);
    free(hdb);
    free(sentinel);
    free(after);
    rig_free(&r);
}
END_TEST

/* Runs the pass `pass` alone (the others direct) with `bytes` of workspace. */
static vdnn_status run_pass(rig *r, int pass, int algo, int n, void *ws, size_t bytes)
{
    for (int p = 0; p < PASS_COUNT; p++) r->l->algo[p] = p == pass ? algo : CONV_ALGO_DIRECT;
    exec_ctx c = rig_ctx(r, n, 0);
    c.workspace = ws;
    c.workspace_bytes = bytes;
    if (pass == PASS_FWD) return layer_forward(r->l, &c, r->x, r->y);
    return layer_backward(r->l, &c, r->x, r->y, r->dy, r->dx);
}

/* A workspace one byte short (or missing, or for oneDNN's algorithms misaligned) is an
 * error naming the workspace, never a crash; a smaller batch needs only its own share. */
START_TEST(test_small_workspace)
{
    rig r;
    rig_init(&r, &cases[0]);
    for (int pass = 0; pass < PASS_COUNT; pass++)
        for (int a = CONV_ALGO_IM2COL; a < layer_algo_count(r.l, pass); a++) {
            size_t need = layer_workspace_bytes(r.l, pass, a);
            ck_assert_int_eq(run_pass(&r, pass, a, r.k->n, r.ws, need - 1), VDNN_EINVAL);
            ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "workspace"));
            ck_assert_int_eq(run_pass(&r, pass, a, r.k->n, NULL, 0), VDNN_EINVAL);
            ck_assert_int_eq(run_pass(&r, pass, a, r.k->n, r.ws, need), VDNN_OK);
            if (a < CONV_ALGO_OWN || !need) continue;
            /* oneDNN's, on a workspace not aligned as the pool aligns blocks: an error, not a fault */
            char *ws = (char *)dev_alloc(&r, need + 64, "workspace");
            ck_assert_int_eq(run_pass(&r, pass, a, r.k->n, ws + 16, need), VDNN_EINVAL);
            ck_assert_msg(strstr(vdnn_errmsg(), "aligned"), "%s", vdnn_errmsg());
            device_free(r.d, ws);
        }
    /* the batch algorithm for one item of three: a third of the max-batch workspace */
    size_t one = layer_workspace_bytes(r.l, PASS_FWD, CONV_ALGO_IM2COL_BATCH) / 3;
    ck_assert_int_eq(run_pass(&r, PASS_FWD, CONV_ALGO_IM2COL_BATCH, 1, r.ws, one), VDNN_OK);
    ck_assert_int_eq(run_pass(&r, PASS_FWD, CONV_ALGO_IM2COL_BATCH, 2, r.ws, one), VDNN_EINVAL);
    rig_free(&r);
}
END_TEST

/* oneDNN's algorithms, where the build has them: named after their methods, offered in
 * every pass of a plain convolution, and the same bits on a second run of every pass
 * (policy invariance and recomputation rely on it). A build without oneDNN offers the
 * project's own only. */
START_TEST(test_onednn_algorithms)
{
    if (left_to_make_test("test_onednn_algorithms", _i)) return;
    rig r;
    rig_init(&r, &cases[_i]);
    if (!onednn_built()) {
        printf("SKIPPED: test_onednn_algorithms: this build has no oneDNN (make ONEDNN=0)\n");
        for (int pass = 0; pass < PASS_COUNT; pass++) ck_assert_int_eq(layer_algo_count(r.l, pass), CONV_ALGO_OWN);
        rig_free(&r);
        return;
    }
    char desc[64];
    onednn_describe(desc, sizeof desc);
    ck_assert_msg(!strncmp(desc, "oneDNN ", 7), "%s", desc);
    const size_t ycount = r.ycount, xcount = r.xcount, wcount = r.wcount;
    float *y1 = malloc(ycount * sizeof *y1), *y2 = malloc(ycount * sizeof *y2);
    float *dx1 = malloc(xcount * sizeof *dx1), *dx2 = malloc(xcount * sizeof *dx2);
    float *dw1 = malloc(wcount * sizeof *dw1), *dw2 = malloc(wcount * sizeof *dw2);
    float *db = malloc((size_t)r.k->filters * sizeof *db);
    ck_assert(y1 && y2 && dx1 && dx2 && dw1 && dw2 && db);
    for (int pass = 0; pass < PASS_COUNT; pass++) {
        ck_assert_int_eq(algo_named(r.l, pass, "onednn"), CONV_ALGO_OWN);
        for (int a = algo_named(r.l, pass, "onednn"); a < layer_algo_count(r.l, pass); a++)
            ck_assert_ptr_nonnull(strstr(layer_algo_name(r.l, pass, a), "onednn"));
    }
    for (int a = algo_named(r.l, PASS_FWD, "onednn"); a < most_algos(r.l); a++) {
        rig_forward(&r, nth_algo(r.l, PASS_FWD, a), r.k->n, y1);
        rig_forward(&r, nth_algo(r.l, PASS_FWD, a), r.k->n, y2);
        ck_assert_mem_eq(y1, y2, ycount * sizeof *y1);
        for (int acc = 0; acc < 2; acc++) {
            rig_backward(&r, nth_algo(r.l, PASS_BWD_DATA, a), nth_algo(r.l, PASS_BWD_FILTER, a), r.k->n, acc, dx1,
                         dw1, db);
            rig_backward(&r, nth_algo(r.l, PASS_BWD_DATA, a), nth_algo(r.l, PASS_BWD_FILTER, a), r.k->n, acc, dx2,
                         dw2, db);
            ck_assert_mem_eq(dx1, dx2, xcount * sizeof *dx1);
            if (!acc) ck_assert_mem_eq(dw1, dw2, wcount * sizeof *dw1);
        }
    }
    free(y1), free(y2), free(dx1), free(dx2), free(dw1), free(dw2), free(db);
    rig_free(&r);
}
END_TEST

/* A batch smaller than the max, given the workspace of the max batch (the last, partial
 * batch of an epoch; the profiler's probe): where the chosen algorithm needs more at that
 * batch than at the max (oneDNN's Winograd does at some batches), another that fits runs
 * in its place, and the results are right. */
START_TEST(test_smaller_batch_needing_more)
{
    static const conv_case k = {16, 64, 8, 8, 64, 3, 1, 1, 0, PLAIN};   /* ResNet's third stage */
    rig r;
    rig_init(&r, &k);
    float *got = malloc(r.xcount * sizeof *got);
    double *want = malloc(r.ycount * sizeof *want);
    ck_assert(got && want && r.ycount == r.xcount);
    int found = 0;
    for (int pass = 0; pass < PASS_COUNT; pass++)
        for (int a = 0; a < layer_algo_count(r.l, pass); a++) {
            const size_t need = layer_workspace_bytes(r.l, pass, a);
            int n = k.n - 1;
            while (n > 0 && layer_workspace_bytes_at(r.l, n, pass, a) <= need) n--;
            if (n == 0) continue;
            found++;
            ck_assert_uint_ne(layer_workspace_bytes_at(r.l, n, pass, a), SIZE_MAX);
            for (int p = 0; p < PASS_COUNT; p++) r.l->algo[p] = p == pass ? a : CONV_ALGO_DIRECT;
            exec_ctx c = rig_ctx(&r, n, 0);
            c.workspace_bytes = need;
            ref_grads g = ref_grads_of(&r, n);
            char label[64];
            algo_label(r.l, pass, a, label, sizeof label);
            if (pass == PASS_FWD) {
                ck_assert_msg(layer_forward(r.l, &c, r.x, r.y) == VDNN_OK, "%s: %s", label, vdnn_errmsg());
                ck_assert_int_eq(device_download(r.d, got, r.y, (size_t)n * shape_per_item(r.l->out) * sizeof *got),
                                 VDNN_OK);
                ref_forward(&k, n, r.hx, r.hw, NULL, want);
                expect_close(got, want, (size_t)n * shape_per_item(r.l->out), label);
            } else {
                ck_assert_msg(layer_backward(r.l, &c, r.x, r.y, r.dy, r.dx) == VDNN_OK, "%s: %s", label,
                              vdnn_errmsg());
                if (pass == PASS_BWD_DATA) {
                    ck_assert_int_eq(device_download(r.d, got, r.dx, (size_t)n * shape_per_item(r.l->in) * sizeof *got),
                                     VDNN_OK);
                    expect_close(got, g.dx, (size_t)n * shape_per_item(r.l->in), label);
                } else {
                    ck_assert_int_eq(device_download(r.d, got, r.l->params[0].grad, r.wcount * sizeof *got), VDNN_OK);
                    expect_close(got, g.dw, r.wcount, label);
                }
            }
            /* the algorithm chosen stays chosen: the substitute is for this call alone */
            ck_assert_int_eq(r.l->algo[pass], a);
            ref_grads_free(&g);
        }
    if (!found)
        printf("SKIPPED: test_smaller_batch_needing_more: no algorithm of this build needs more workspace at a "
               "smaller batch on this machine (%d threads)\n", omp_get_max_threads());
    free(got), free(want);
    rig_free(&r);
}
END_TEST

START_TEST(test_bad_algo_and_batch)
{
    rig r;
    rig_init(&r, &cases[0]);
    ck_assert_int_eq(run_pass(&r, PASS_FWD, layer_algo_count(r.l, PASS_FWD), r.k->n, r.ws, r.ws_bytes),
                     VDNN_EINVAL);
    ck_assert_int_eq(run_pass(&r, PASS_BWD_DATA, -1, r.k->n, r.ws, r.ws_bytes), VDNN_EINVAL);
    ck_assert_int_eq(run_pass(&r, PASS_BWD_FILTER, 9, r.k->n, r.ws, r.ws_bytes), VDNN_EINVAL);
    ck_assert_int_eq(run_pass(&r, PASS_FWD, CONV_ALGO_DIRECT, r.k->n + 1, r.ws, r.ws_bytes),
                     VDNN_EINVAL);
    ck_assert_int_eq(run_pass(&r, PASS_FWD, CONV_ALGO_DIRECT, 0, r.ws, r.ws_bytes), VDNN_EINVAL);
    rig_free(&r);
}
END_TEST

START_TEST(test_config_keys)
{
    ck_assert_int_eq(config_status("[convolutional]\nsize=3\n"), VDNN_EINVAL);
    ck_assert_int_eq(config_status("[convolutional]\nfilters=2\n"), VDNN_EINVAL);
    ck_assert_int_eq(config_status("[convolutional]\nfilters=0\nsize=3\n"), VDNN_EINVAL);
    ck_assert_int_eq(config_status("[convolutional]\nfilters=65537\nsize=3\n"), VDNN_EINVAL);
    ck_assert_int_eq(config_status("[convolutional]\nfilters=2\nsize=65\n"), VDNN_EINVAL);
    ck_assert_int_eq(config_status("[convolutional]\nfilters=2\nsize=3\nstride=0\n"),
                     VDNN_EINVAL);
    ck_assert_int_eq(config_status("[convolutional]\nfilters=2\nsize=3\npad=65\n"), VDNN_EINVAL);
    ck_assert_int_eq(config_status("[convolutional]\nfilters=2\nsize=3\nbias=2\n"), VDNN_EINVAL);
    ck_assert_int_eq(config_status("[convolutional]\nfilters=2.5\nsize=3\n"), VDNN_EINVAL);
    /* a kernel larger than the padded 5x5 input names the file, line and key */
    ck_assert_int_eq(config_status("[convolutional]\nfilters=2\nsize=8\npad=1\n"), VDNN_EINVAL);
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "test.cfg:3"));
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "size"));
    ck_assert_int_eq(config_status("[convolutional]\nfilters=2\nsize=7\npad=1\n"), VDNN_OK);
}
END_TEST

/* A bad section fails with EINVAL and a message naming test.cfg:LINE and the key. */
static void expect_bad(const char *text, int line, const char *key)
{
    char where[32];
    snprintf(where, sizeof where, "test.cfg:%d", line);
    ck_assert_msg(config_status(text) == VDNN_EINVAL, "accepted: %s", text);
    ck_assert_msg(strstr(vdnn_errmsg(), where) && strstr(vdnn_errmsg(), key),
                  "%s: message '%s' lacks %s or %s", text, vdnn_errmsg(), where, key);
}

/* The keys of groups, dilation, rectangular kernels and strides and per-side padding,
 * on a 5x5 input of 3 channels. */
START_TEST(test_config_option_keys)
{
    expect_bad("[convolutional]\nfilters=3\nsize=3\ngroups=2\n", 4, "groups");
    expect_bad("[convolutional]\nfilters=2\nsize=3\ngroups=3\n", 4, "groups");
    expect_bad("[convolutional]\nfilters=3\nsize=3\ngroups=0\n", 4, "groups");
    expect_bad("[convolutional]\nfilters=3\nsize=3\ndilation=0\n", 4, "dilation");
    expect_bad("[convolutional]\nfilters=3\nsize=3\ndilation=65\n", 4, "dilation");
    expect_bad("[convolutional]\nfilters=3\nsize=3\ndilation_w=x\n", 4, "dilation_w");
    expect_bad("[convolutional]\nfilters=3\nsize=3\ndilation=3\n", 3, "size");
    expect_bad("[convolutional]\nfilters=3\nsize_h=3\n", 1, "size");
    expect_bad("[convolutional]\nfilters=3\nsize_h=3\nsize_w=65\n", 4, "size_w");
    expect_bad("[convolutional]\nfilters=3\nsize_h=7\nsize_w=1\n", 3, "size_h");
    expect_bad("[convolutional]\nfilters=3\nsize=3\nstride_w=0\n", 4, "stride_w");
    expect_bad("[convolutional]\nfilters=3\nsize=3\nstride_h=3x1\n", 4, "stride_h");
    expect_bad("[convolutional]\nfilters=3\nsize=3\npad_top=-1\n", 4, "pad_top");
    expect_bad("[convolutional]\nfilters=3\nsize=3\npad_right=65\n", 4, "pad_right");
    expect_bad("[convolutional]\nfilters=3\nsize=3\npad_left=1\npad_left=1\n", 5, "pad_left");
    ck_assert_int_eq(config_status("[convolutional]\nfilters=3\nsize=3\ngroups=3\n"), VDNN_OK);
    ck_assert_int_eq(config_status("[convolutional]\nfilters=3\nsize=3\ndilation=2\n"), VDNN_OK);
    ck_assert_int_eq(config_status("[convolutional]\nfilters=3\nsize_h=5\nsize_w=1\n"), VDNN_OK);
    /* pad covers the sides no per-side key names */
    layer *l = test_layer(&conv_ops, 0, "[convolutional]\nfilters=6\nsize=3\npad=1\npad_bottom=2\n"
                                        "stride_w=2\ngroups=3\ndilation_h=2\n",
                          shape_make(2, 3, 5, 5));
    const conv_params *p = l->priv;
    ck_assert_int_eq(p->pad_top, 1);
    ck_assert_int_eq(p->pad_bottom, 2);
    ck_assert_int_eq(p->pad_left, 1);
    ck_assert_int_eq(p->pad_right, 1);
    ck_assert_int_eq(l->out.h, 4);   /* (5 + 3 - 5) / 1 + 1 */
    ck_assert_int_eq(l->out.w, 3);   /* (5 + 2 - 3) / 2 + 1 */
    ck_assert_int_eq(l->params[0].shape.c, 1);
    char buf[96];
    l->ops->describe(l, buf, sizeof buf);
    ck_assert_str_eq(buf, "3x3/1x2 p1,2,1,1 d2x1 g3, 6 filters");
    layer_destroy(l, NULL);
}
END_TEST

START_TEST(test_defaults_and_describe)
{
    cfg_file *f;
    ck_assert_int_eq(cfg_parse("[convolutional]\nfilters=32\nsize=3\n", "t", &f), VDNN_OK);
    ck_assert_int_eq(cfg_check(f, &f->sec[0], conv_ops.keys), VDNN_OK);
    layer *l;
    ck_assert_int_eq(layer_create(&conv_ops, 2, shape_make(2, 3, 8, 6), f, &f->sec[0], &l),
                     VDNN_OK);
    cfg_free(f);
    ck_assert_str_eq(l->name, "conv3");
    ck_assert_int_eq(l->out.h, 6);   /* stride 1, pad 0 */
    ck_assert_int_eq(l->out.w, 4);
    ck_assert_int_eq(l->nparams, 2); /* bias on */
    char buf[64];
    l->ops->describe(l, buf, sizeof buf);
    ck_assert_str_eq(buf, "3x3/1 p0, 32 filters");
    layer_destroy(l, NULL);
    l = make_conv(&cases[3]);
    l->ops->describe(l, buf, sizeof buf);
    ck_assert_str_eq(buf, "3x3/2 p0, 5 filters, no bias");
    layer_destroy(l, NULL);
}
END_TEST

/* Host buffers of exactly `count` floats between two guard bands of canaries. On the
 * CPU device, device pointers are host addresses, so kernels can run on these directly:
 * inside the device arena an overrun would land in a neighbour block unnoticed (even by
 * ASan), here it hits a canary or ASan's redzone. */
enum { GUARD = 64 };
static const float canary = -12345.0f;

static float *guarded(size_t count, const float *init)
{
    /* aligned as the pool aligns its blocks: oneDNN's kernels need it (test_small_workspace) */
    float *b = aligned_alloc(256, ((count + 2 * GUARD) * sizeof *b + 255) / 256 * 256);
    ck_assert_ptr_nonnull(b);
    for (size_t i = 0; i < count + 2 * GUARD; i++) b[i] = canary;
    for (size_t i = 0; init && i < count; i++) b[GUARD + i] = init[i];
    return b + GUARD;
}

static void guarded_free(float *p, size_t count, const char *what)
{
    float *b = p - GUARD;
    for (size_t i = 0; i < GUARD; i++) {
        ck_assert_msg(b[i] == canary, "%s: written before its start", what);
        ck_assert_msg(p[count + i] == canary, "%s: written past its end", what);
    }
    free(b);
}

/* Every algorithm of every pass, on exact-size buffers and an exact-size workspace, for
 * the whole batch and for one item; the results still match the reference. */
START_TEST(test_stays_in_bounds)
{
    if (left_to_make_test("test_stays_in_bounds", _i)) return;
    rig r;
    rig_init(&r, &cases[_i]);
    const int oc = r.k->filters;
    float *w0 = r.l->params[0].value, *gw0 = r.l->params[0].grad;
    float *w = guarded(r.wcount, r.hw), *gw = guarded(r.wcount, NULL);
    float *b = guarded((size_t)oc, r.hb), *gb = guarded((size_t)oc, NULL);
    float *b0 = r.k->bias ? r.l->params[1].value : NULL;
    float *gb0 = r.k->bias ? r.l->params[1].grad : NULL;
    r.l->params[0].value = w, r.l->params[0].grad = gw;
    if (r.k->bias) r.l->params[1].value = b, r.l->params[1].grad = gb;
    const int sizes[2] = {r.k->n, 1};
    for (int s = 0; s < 2; s++) {
        const int n = sizes[s];
        const size_t xc = (size_t)n * shape_per_item(r.l->in);
        const size_t yc = (size_t)n * shape_per_item(r.l->out);
        ref_grads g = ref_grads_of(&r, n);
        double *want = malloc(yc * sizeof *want);
        ck_assert_ptr_nonnull(want);
        ref_forward(r.k, n, r.hx, r.hw, r.k->bias ? r.hb : NULL, want);
        for (int a = 0; a < most_algos(r.l); a++) {
            for (int p = 0; p < PASS_COUNT; p++) r.l->algo[p] = nth_algo(r.l, p, a);
            /* for one item, a batched algorithm needs one image's share, and im2col-par
             * one slot: one column buffer and one partial filter gradient; oneDNN's, each
             * pass its own (the largest at the whole batch is given for one item too) */
            size_t need = layer_workspace_bytes(r.l, PASS_BWD_FILTER, a);
            if (a >= CONV_ALGO_OWN)
                for (int p = 0; p < PASS_COUNT; p++)
                    if (layer_workspace_bytes(r.l, p, r.l->algo[p]) > need)
                        need = layer_workspace_bytes(r.l, p, r.l->algo[p]);
            if (n == 1 && (a == CONV_ALGO_IM2COL_BATCH || a == CONV_ALGO_IM2COL_CHUNK))
                need = layer_workspace_bytes(r.l, PASS_FWD, CONV_ALGO_IM2COL_BATCH) /
                       (size_t)r.k->n;
            if (n == 1 && a == CONV_ALGO_IM2COL_PAR)
                need = layer_workspace_bytes(r.l, PASS_FWD, CONV_ALGO_IM2COL) +
                       r.wcount * sizeof(float);
            float *x = guarded(xc, r.hx), *dy = guarded(yc, r.hdy);
            float *y = guarded(yc, NULL), *dx = guarded(xc, NULL);
            float *ws = guarded(need / sizeof(float), NULL);
            exec_ctx c = rig_ctx(&r, n, 0);
            c.workspace = need ? ws : NULL;
            c.workspace_bytes = need;
            ck_assert_msg(layer_forward(r.l, &c, x, y) == VDNN_OK, "%s", vdnn_errmsg());
            ck_assert_msg(layer_backward(r.l, &c, x, y, dy, dx) == VDNN_OK, "%s", vdnn_errmsg());
            expect_close(y, want, yc, layer_algo_name(r.l, PASS_FWD, r.l->algo[PASS_FWD]));
            expect_close(dx, g.dx, xc, layer_algo_name(r.l, PASS_BWD_DATA, r.l->algo[PASS_BWD_DATA]));
            expect_close(gw, g.dw, r.wcount, layer_algo_name(r.l, PASS_BWD_FILTER, r.l->algo[PASS_BWD_FILTER]));
            guarded_free(x, xc, "x");
            guarded_free(dy, yc, "dy");
            guarded_free(y, yc, "y");
            guarded_free(dx, xc, "dx");
            guarded_free(ws, need / sizeof(float), "workspace");
        }
        free(want);
        ref_grads_free(&g);
    }
    guarded_free(w, r.wcount, "weights");
    guarded_free(gw, r.wcount, "weights grad");
    guarded_free(b, (size_t)oc, "bias");
    guarded_free(gb, (size_t)oc, "bias grad");
    r.l->params[0].value = w0, r.l->params[0].grad = gw0;
    if (r.k->bias) r.l->params[1].value = b0, r.l->params[1].grad = gb0;
    rig_free(&r);
}
END_TEST

/* im2col-par: one column buffer per slot in every pass, plus one (KDIM, OC) partial
 * filter gradient per slot in the filter pass, with slots = min(threads, N). */
START_TEST(test_par_workspace)
{
    const int saved = omp_get_max_threads();
    layer *l = make_conv(&cases[0]);   /* KDIM = 27, OH*OW = 12, OC = 4, N = 3 */
    layer *p = make_conv(&cases[1]);   /* pointwise: KDIM = 5, OC = 3, N = 2 */
    for (int t = 1; t <= 4; t++) {
        omp_set_num_threads(t);
        size_t slots = t < 3 ? (size_t)t : 3, pslots = t < 2 ? (size_t)t : 2;
        ck_assert_uint_eq(layer_workspace_bytes(l, PASS_FWD, CONV_ALGO_IM2COL_PAR),
                          slots * 27 * 12 * 4);
        ck_assert_uint_eq(layer_workspace_bytes(l, PASS_BWD_DATA, CONV_ALGO_IM2COL_PAR),
                          slots * 27 * 12 * 4);
        ck_assert_uint_eq(layer_workspace_bytes(l, PASS_BWD_FILTER, CONV_ALGO_IM2COL_PAR),
                          slots * (27 * 12 + 27 * 4) * 4);
        ck_assert_uint_eq(layer_workspace_bytes(p, PASS_FWD, CONV_ALGO_IM2COL_PAR), 0);
        ck_assert_uint_eq(layer_workspace_bytes(p, PASS_BWD_FILTER, CONV_ALGO_IM2COL_PAR),
                          pslots * 5 * 3 * 4);
    }
    omp_set_num_threads(saved);
    layer_destroy(l, NULL);
    layer_destroy(p, NULL);
}
END_TEST

/* im2col-par with 1 to 5 threads (so 1 to N slots, some of one item, some of two):
 * every pass matches the reference, with and without accumulation, and a second run
 * with the same thread count gives the same bits. */
START_TEST(test_par_thread_counts)
{
    if (UNDER_TSAN) {
        printf("SKIPPED: test_par_thread_counts: runs OpenMP with up to 5 threads, whose uninstrumented barriers "
               "ThreadSanitizer reports\n");
        return;
    }
    const int saved = omp_get_max_threads();
    rig r;
    rig_init(&r, &cases[CASE_BIG]);
    const size_t yc = r.ycount;
    float *hy = malloc(yc * sizeof *hy), *hy2 = malloc(yc * sizeof *hy2);
    float *hdx = malloc(r.xcount * sizeof *hdx), *hdx2 = malloc(r.xcount * sizeof *hdx2);
    float *hdw = malloc(r.wcount * sizeof *hdw), *hdw2 = malloc(r.wcount * sizeof *hdw2);
    float *hdb = malloc((size_t)r.k->filters * sizeof *hdb);
    double *want = malloc(yc * sizeof *want), *twice = malloc(r.wcount * sizeof *twice);
    ck_assert(hy && hy2 && hdx && hdx2 && hdw && hdw2 && hdb && want && twice);
    ref_forward(r.k, r.k->n, r.hx, r.hw, r.hb, want);
    ref_grads g = ref_grads_of(&r, r.k->n);
    for (size_t i = 0; i < r.wcount; i++) twice[i] = 2.0 * g.dw[i];
    for (int t = 1; t <= 5; t++) {
        omp_set_num_threads(t);
        const int a = CONV_ALGO_IM2COL_PAR;
        rig_forward(&r, a, r.k->n, hy);
        expect_close(hy, want, yc, "im2col-par forward");
        rig_forward(&r, a, r.k->n, hy2);
        ck_assert_mem_eq(hy, hy2, yc * sizeof *hy);
        rig_backward(&r, a, a, r.k->n, 0, hdx, hdw, hdb);
        expect_close(hdx, g.dx, r.xcount, "im2col-par data");
        expect_close(hdw, g.dw, r.wcount, "im2col-par filter");
        rig_backward(&r, a, a, r.k->n, 0, hdx2, hdw2, hdb);
        ck_assert_mem_eq(hdx, hdx2, r.xcount * sizeof *hdx);
        ck_assert_mem_eq(hdw, hdw2, r.wcount * sizeof *hdw);
        /* the filter pass alone, then with another data algorithm, accumulating */
        rig_backward(&r, CONV_ALGO_DIRECT, a, r.k->n, 1, NULL, hdw, hdb);
        expect_close(hdw, twice, r.wcount, "im2col-par filter, accumulated");
        rig_backward(&r, a, CONV_ALGO_IM2COL, r.k->n, 0, hdx, hdw, hdb);
        expect_close(hdx, g.dx, r.xcount, "im2col-par data after im2col filter");
    }
    omp_set_num_threads(saved);
    ref_grads_free(&g);
    free(hy), free(hy2), free(hdx), free(hdx2), free(hdw), free(hdw2), free(hdb);
    free(want), free(twice);
    rig_free(&r);
}
END_TEST

static void copy_params(void *priv, const void *arg) { memcpy(priv, arg, sizeof(conv_params)); }

START_TEST(test_create_in_code)
{
    conv_params p = {.filters = 8, .size = 3, .stride = 2, .pad = 1, .bias = 1};
    layer *l = NULL;
    ck_assert_int_eq(layer_create_with(&conv_ops, 0, shape_make(2, 3, 9, 9), copy_params, &p, &l),
                     VDNN_OK);
    ck_assert_int_eq(l->out.c, 8);
    ck_assert_int_eq(l->out.h, 5);
    layer_destroy(l, NULL);
    p.stride = 0;
    ck_assert_int_eq(layer_create_with(&conv_ops, 0, shape_make(2, 3, 9, 9), copy_params, &p, &l),
                     VDNN_EINVAL);
    p.stride = 1;
    p.size = 12;
    ck_assert_int_eq(layer_create_with(&conv_ops, 0, shape_make(2, 3, 9, 9), copy_params, &p, &l),
                     VDNN_EINVAL);
    /* depthwise: weights (6, 1, 3, 3); a column buffer holds one group's 1*3*3 rows */
    conv_params d = {.filters = 6, .size = 3, .stride = 1, .pad = 1, .bias = 1, .groups = 3};
    ck_assert_int_eq(layer_create_with(&conv_ops, 0, shape_make(2, 3, 9, 9), copy_params, &d, &l),
                     VDNN_OK);
    ck_assert_int_eq(l->params[0].shape.c, 1);
    ck_assert_int_eq(l->out.h, 9);
    ck_assert_uint_eq(layer_workspace_bytes(l, PASS_FWD, CONV_ALGO_IM2COL), 9 * 81 * sizeof(float));
    layer_destroy(l, NULL);
    d.groups = 2;
    ck_assert_int_eq(layer_create_with(&conv_ops, 0, shape_make(2, 3, 9, 9), copy_params, &d, &l),
                     VDNN_EINVAL);
    d.groups = 3;
    d.dilation_w = 65;
    ck_assert_int_eq(layer_create_with(&conv_ops, 0, shape_make(2, 3, 9, 9), copy_params, &d, &l),
                     VDNN_EINVAL);
}
END_TEST

/* The weights' `init` key, on convolutions and fully connected layers: each choice draws
 * from its distribution (the bound of the uniform ones, the spread of each), the
 * defaults are he and pytorch, and a word not offered is refused with its line. */
static void init_moments(net *n, const char *name, float *max_abs, double *sd)
{
    param *p = tn_param(n, name);
    ck_assert_msg(p != NULL, "no param %s", name);
    size_t count = shape_count(p->shape);
    float *w = tn_download(n, p->value, count);
    double sq = 0;
    *max_abs = 0;
    for (size_t i = 0; i < count; i++) {
        sq += (double)w[i] * w[i];
        if (fabsf(w[i]) > *max_abs) *max_abs = fabsf(w[i]);
    }
    *sd = sqrt(sq / (double)count);
    free(w);
}

static void check_init(net *n, const char *name, const char *init, int fan_in)
{
    float max_abs;
    double sd;
    init_moments(n, name, &max_abs, &sd);
    double want = !strcmp(init, "he") ? sqrt(2.0 / fan_in) : !strcmp(init, "xavier") ? sqrt(1.0 / fan_in)
                                                                                    : sqrt(1.0 / (3.0 * fan_in));
    ck_assert_msg(fabs(sd / want - 1) < 0.1, "%s (%s): spread %g, expected %g", name, init, sd, want);
    if (strcmp(init, "he")) {
        double bound = want * sqrt(3.0);
        ck_assert_msg(max_abs <= bound * (1 + 1e-6), "%s (%s): %g beyond the bound %g", name, init, max_abs, bound);
        ck_assert_msg(max_abs > 0.9 * bound, "%s (%s): largest %g, bound %g", name, init, max_abs, bound);
    } else {
        ck_assert_msg(max_abs > 2 * want, "%s (he): largest %g is not a normal's tail (sd %g)", name, max_abs, want);
    }
}

START_TEST(test_init_key)
{
    static const char *const inits[] = {"he", "pytorch", "xavier"};
    for (int c = 0; c < 3; c++)
        for (int f = 0; f < 3; f++) {
            char text[1024];
            snprintf(text, sizeof text,
                     TN_HEAD "[convolutional]\nname = c\nfilters = 256\nsize = 3\npad = 1\ninit = %s\n[relu]\n"
                             "[connected]\nname = f\noutput = 4\ninit = %s\n[softmax]\n", inits[c], inits[f]);
            device *d;
            net *n = tn_attached(text, NULL, &d);
            check_init(n, "c.weights", inits[c], 9);
            check_init(n, "f.weights", inits[f], 256 * 8 * 8);
            tn_free(n, d);
        }
    device *d;
    net *n = tn_attached(TN_HEAD "[convolutional]\nname = c\nfilters = 256\nsize = 3\npad = 1\n[relu]\n"
                                 "[connected]\nname = f\noutput = 4\n[softmax]\n", NULL, &d);
    check_init(n, "c.weights", "he", 9);
    check_init(n, "f.weights", "pytorch", 256 * 8 * 8);
    tn_free(n, d);
    tn_parse_fails(TN_HEAD "[convolutional]\nfilters = 4\nsize = 3\ninit = gaussian\n[connected]\noutput = 4\n"
                           "[softmax]\n", VDNN_EINVAL, "init", "xavier");
}
END_TEST

static Suite *conv_suite(void)
{
    Suite *s = suite_create("conv");
    TCase *tc = tcase_create("conv");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_setup_shapes, 0, NCASES);
    tcase_add_loop_test(tc, test_forward_reference, 0, NCASES);
    tcase_add_loop_test(tc, test_backward_reference, 0, NCASES);
    /* the chunked cases are large and add no gradient path the reference misses */
    tcase_add_loop_test(tc, test_gradcheck, 0, CASE_CHUNKED_A);
    tcase_add_loop_test(tc, test_gradcheck, CASE_OPTIONS, NCASES);
    tcase_add_loop_test(tc, test_stays_in_bounds, 0, NCASES);
    tcase_add_test(tc, test_workspace_bytes);
    tcase_add_test(tc, test_par_workspace);
    tcase_add_test(tc, test_par_thread_counts);
    tcase_add_test(tc, test_accumulate);
    tcase_add_test(tc, test_dx_null);
    tcase_add_test(tc, test_small_workspace);
    tcase_add_test(tc, test_bad_algo_and_batch);
    tcase_add_loop_test(tc, test_onednn_algorithms, 0, NCASES);
    tcase_add_test(tc, test_smaller_batch_needing_more);
    tcase_add_test(tc, test_config_keys);
    tcase_add_test(tc, test_config_option_keys);
    tcase_add_test(tc, test_defaults_and_describe);
    tcase_add_test(tc, test_create_in_code);
    tcase_add_test(tc, test_init_key);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tn_run_suite(conv_suite()); }
