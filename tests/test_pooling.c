/* Tests for max and average pooling: forward and backward against a naive reference on
 * odd shapes, the shared gradient checker, padding that never wins a max, ties routed
 * to the first maximum, the average's divisor that counts padding, dx == NULL, and the
 * config keys. */
#include <check.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"
#include "tests/gradcheck.h"
#include "tests/testnet.h"
#include "vdnn/config.h"

extern const layer_ops maxpool_ops, avgpool_ops;

/* One geometry: input (n, c, h, w), the square keys, and options left 0 in a plain
 * case: with `rect`, the window width, horizontal stride and pad are kw, sw, pw (size,
 * stride and pad then being the vertical ones); ceil_mode; global; and `excl`, average
 * pooling that excludes padding (count_pad = 0). */
typedef struct pool_case {
    int n, c, h, w;
    int size, stride, pad;
    int rect, kw, sw, pw, ceil, global, excl;
} pool_case;

#define PLAIN 0, 0, 0, 0, 0, 0, 0

static const pool_case cases[] = {
    {3, 3, 7, 5, 3, 2, 1, PLAIN},   /* odd shape, overlapping windows, pad 1 */
    {2, 2, 7, 5, 2, 2, 0, PLAIN},   /* the usual 2x2/2 on odd sides: the last row/column dropped */
    {2, 3, 6, 6, 3, 1, 0, PLAIN},   /* stride 1 */
    {2, 2, 4, 5, 1, 1, 0, PLAIN},   /* 1x1: the identity */
    {2, 2, 9, 8, 4, 3, 2, PLAIN},   /* even window, stride 3, pad 2 */
    {2, 2, 8, 9, 2, 3, 1, PLAIN},   /* stride larger than the window: cells skipped */
    /* windows that tile without overlap (the tiled backward): exactly, and with a
     * remainder no window covers */
    {2, 3, 6, 8, 2, 2, 0, PLAIN},
    {2, 2, 9, 6, 3, 3, 0, PLAIN},
    {2, 2, 10, 7, 3, 3, 0, PLAIN},
    /* ceil_mode: a last window past the edge (2x2/2 on odd sides: not the tiled path),
     * and one that would start in the bottom padding, dropped */
    {2, 3, 7, 9, 2, 2, 0, .ceil = 1},
    {2, 3, 6, 6, 3, 2, 0, .ceil = 1},
    {2, 2, 5, 7, 2, 2, 1, .ceil = 1},
    /* rectangular windows, strides and pads */
    {2, 3, 7, 9, 3, 1, 1, .rect = 1, .kw = 2, .sw = 3, .pw = 0},
    {2, 2, 8, 6, 2, 2, 0, .rect = 1, .kw = 3, .sw = 3, .pw = 1, .ceil = 1},
    /* averages over the real cells only */
    {2, 2, 7, 5, 3, 2, 1, .excl = 1},
    {2, 2, 6, 7, 3, 2, 1, .ceil = 1, .excl = 1},
    /* global: a small map, and one larger than any window side a config may give */
    {2, 2, 5, 4, .global = 1},
    {2, 3, 70, 66, .global = 1, .excl = 1},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* A case's resolved window, strides and pads. */
static int kh_of(const pool_case *k) { return k->global ? k->h : k->size; }
static int kw_of(const pool_case *k) { return k->global ? k->w : k->rect ? k->kw : k->size; }
static int sh_of(const pool_case *k) { return k->global ? 1 : k->stride; }
static int sw_of(const pool_case *k) { return k->global ? 1 : k->rect ? k->sw : k->stride; }
static int ph_of(const pool_case *k) { return k->global ? 0 : k->pad; }
static int pw_of(const pool_case *k) { return k->global ? 0 : k->rect ? k->pw : k->pad; }

/* PyTorch's output size: rounded down, or up with the last window starting inside the
 * input or its top/left padding. */
static int out_side(int in, int k, int s, int p, int ceil_mode)
{
    int out = (in + 2 * p - k + (ceil_mode ? s - 1 : 0)) / s + 1;
    if (ceil_mode && (out - 1) * s >= in + p) out--;
    return out;
}
static int out_h(const pool_case *k) { return out_side(k->h, kh_of(k), sh_of(k), ph_of(k), k->ceil); }
static int out_w(const pool_case *k) { return out_side(k->w, kw_of(k), sw_of(k), pw_of(k), k->ceil); }

static const layer_ops *ops_of(int is_max) { return is_max ? &maxpool_ops : &avgpool_ops; }

static layer *make_pool(int is_max, const pool_case *k)
{
    char text[256];
    int n = snprintf(text, sizeof text, "[%s]\n", ops_of(is_max)->type);
    if (k->global) n += snprintf(text + n, sizeof text - n, "global=1\n");
    else if (k->rect)
        n += snprintf(text + n, sizeof text - n,
                      "size_h=%d\nsize_w=%d\nstride_h=%d\nstride_w=%d\npad_h=%d\npad_w=%d\n", k->size,
                      k->kw, k->stride, k->sw, k->pad, k->pw);
    else n += snprintf(text + n, sizeof text - n, "size=%d\nstride=%d\npad=%d\n", k->size, k->stride, k->pad);
    if (k->ceil) n += snprintf(text + n, sizeof text - n, "ceil_mode=1\n");
    if (k->excl && !is_max) snprintf(text + n, sizeof text - n, "count_pad=0\n");
    return test_layer(ops_of(is_max), 0, text, shape_make(k->n, k->c, k->h, k->w));
}

/* What cfg_check and layer_create say about a config, on a 5x5 input. */
static vdnn_status config_status(const char *text, const layer_ops *ops)
{
    return test_layer_status(ops, text, shape_make(2, 3, 5, 5));
}

/* ---- the naive reference ----------------------------------------------------------- */

/* The cells of window (p, q): rows [*r0, *r1), columns [*c0, *c1) before clipping. */
static void window_rows(const pool_case *k, int p, int q, int *r0, int *r1, int *c0, int *c1)
{
    *r0 = p * sh_of(k) - ph_of(k);
    *c0 = q * sw_of(k) - pw_of(k);
    *r1 = *r0 + kh_of(k);
    *c1 = *c0 + kw_of(k);
}

/* For output (i, c, p, q): the index in x of its first maximum over the real cells,
 * the sum over the real cells, and the average's divisor. */
static void ref_window(const pool_case *k, const float *x, int i, int c, int p, int q,
                       size_t *argmax, double *sum, int *div)
{
    double best = -INFINITY;
    int r0, r1, c0, c1, real = 0;
    window_rows(k, p, q, &r0, &r1, &c0, &c1);
    *sum = 0.0;
    for (int ih = r0; ih < r1; ih++)
        for (int iw = c0; iw < c1; iw++) {
            if (ih < 0 || ih >= k->h || iw < 0 || iw >= k->w) continue;
            size_t xi = (((size_t)i * k->c + c) * k->h + ih) * k->w + iw;
            *sum += x[xi];
            real++;
            if (x[xi] > best) {
                best = x[xi];
                *argmax = xi;
            }
        }
    /* counting padding: the window's cells inside the padded input */
    const int hp = (r1 < k->h + ph_of(k) ? r1 : k->h + ph_of(k)) - r0;
    const int wp = (c1 < k->w + pw_of(k) ? c1 : k->w + pw_of(k)) - c0;
    *div = k->excl ? real : hp * wp;
}

/* y (N, C, OH, OW), and dx (N, C, H, W) for dy (N, C, OH, OW). */
static void ref_pool(int is_max, const pool_case *k, const float *x, const float *dy, double *y,
                     double *dx)
{
    const int oh = out_h(k), ow = out_w(k);
    memset(dx, 0, (size_t)k->n * k->c * k->h * k->w * sizeof *dx);
    for (int i = 0; i < k->n; i++)
        for (int c = 0; c < k->c; c++)
            for (int p = 0; p < oh; p++)
                for (int q = 0; q < ow; q++) {
                    size_t yi = (((size_t)i * k->c + c) * oh + p) * ow + q, am = 0;
                    double sum;
                    int div, r0, r1, c0, c1;
                    ref_window(k, x, i, c, p, q, &am, &sum, &div);
                    y[yi] = is_max ? x[am] : sum / div;
                    if (is_max) {
                        dx[am] += dy[yi];
                        continue;
                    }
                    window_rows(k, p, q, &r0, &r1, &c0, &c1);
                    for (int ih = r0; ih < r1; ih++)
                        for (int iw = c0; iw < c1; iw++) {
                            if (ih < 0 || ih >= k->h || iw < 0 || iw >= k->w) continue;
                            dx[(((size_t)i * k->c + c) * k->h + ih) * k->w + iw] += dy[yi] / div;
                        }
                }
}

static void expect_close(const float *got, const double *want, size_t count, const char *what)
{
    for (size_t i = 0; i < count; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= 1e-5 * (1.0 + fabs(want[i])),
                      "%s[%zu]: got %.7g, want %.7g", what, i, got[i], want[i]);
}

/* ---- running a layer ---------------------------------------------------------------- */

static float *dev_upload(device *d, const float *h, size_t count)
{
    void *p = NULL;
    ck_assert_msg(device_alloc(d, count * sizeof *h, "test", "tensor", &p) == VDNN_OK, "%s",
                  vdnn_errmsg());
    if (h) ck_assert_int_eq(device_upload(d, p, h, count * sizeof *h), VDNN_OK);
    return p;
}

/* Forward then backward of layer l on host x and dy; y and dx come back to the host.
 * With pass_x == 0 backward gets x = NULL and y = NULL (for a layer that needs neither). */
static void run_layer(device *d, layer *l, const float *x, const float *dy, float *y, float *dx,
                      int pass_x)
{
    const size_t xc = shape_count(l->in), yc = shape_count(l->out);
    float *dxd = dev_upload(d, NULL, xc), *yd = dev_upload(d, NULL, yc);
    float *xd = dev_upload(d, x, xc), *dyd = dev_upload(d, dy, yc);
    exec_ctx c = test_ctx(d, l->in.n, 1);
    ck_assert_msg(layer_forward(l, &c, xd, yd) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_msg(layer_backward(l, &c, pass_x ? xd : NULL, pass_x ? yd : NULL, dyd, dxd) ==
                      VDNN_OK,
                  "%s", vdnn_errmsg());
    ck_assert_int_eq(device_download(d, y, yd, yc * sizeof *y), VDNN_OK);
    ck_assert_int_eq(device_download(d, dx, dxd, xc * sizeof *dx), VDNN_OK);
    float *bufs[] = {xd, yd, dyd, dxd};
    for (int i = 0; i < 4; i++) device_free(d, bufs[i]);
}

/* ---- tests -------------------------------------------------------------------------- */

/* Loop tests run over (case, kind): _i / 2 is the case, _i % 2 == 1 is max pooling. */

START_TEST(test_setup_shapes)
{
    const pool_case *k = &cases[_i / 2];
    const int is_max = _i % 2;
    layer *l = make_pool(is_max, k);
    ck_assert_int_eq(l->out.n, k->n);
    ck_assert_int_eq(l->out.c, k->c);
    ck_assert_int_eq(l->out.h, out_h(k));
    ck_assert_int_eq(l->out.w, out_w(k));
    ck_assert_int_eq(l->needs_input, is_max);
    ck_assert_int_eq(l->needs_output, 0);
    ck_assert_int_eq(l->nparams, 0);
    ck_assert_str_eq(l->name, is_max ? "maxpool1" : "avgpool1");
    layer_destroy(l, NULL);
}
END_TEST

/* Forward and backward against the reference; average pooling gets x = y = NULL in
 * backward, since it declares it needs neither. */
/* Loop over (case, kind, input): _i % 2 is max pooling, _i / 2 % NCASES the case, and
 * _i / (2 * NCASES) == 1 draws x from {0, 1, 2}, so that windows tie often. */
START_TEST(test_reference)
{
    const pool_case *k = &cases[_i / 2 % NCASES];
    const int is_max = _i % 2, ties = _i / (2 * NCASES);
    device *d = test_cpu_device();
    layer *l = make_pool(is_max, k);
    const size_t xc = shape_count(l->in), yc = shape_count(l->out);
    float *x = malloc(xc * sizeof *x), *dy = malloc(yc * sizeof *dy);
    float *y = malloc(yc * sizeof *y), *dx = malloc(xc * sizeof *dx);
    double *ry = malloc(yc * sizeof *ry), *rdx = malloc(xc * sizeof *rdx);
    ck_assert(x && dy && y && dx && ry && rdx);
    test_fill_uniform(x, xc, 1.0f, 1 + (uint64_t)_i);
    for (size_t i = 0; ties && i < xc; i++) x[i] = floorf(1.5f * (x[i] + 1.0f));
    test_fill_uniform(dy, yc, 1.0f, 100 + (uint64_t)_i);
    run_layer(d, l, x, dy, y, dx, is_max);
    ref_pool(is_max, k, x, dy, ry, rdx);
    expect_close(y, ry, yc, "y");
    expect_close(dx, rdx, xc, "dx");
    free(x);
    free(dy);
    free(y);
    free(dx);
    free(ry);
    free(rdx);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

START_TEST(test_gradcheck)
{
    const int is_max = _i % 2;
    device *d = test_cpu_device();
    layer *l = make_pool(is_max, &cases[_i / 2]);
    gradcheck_opts o = gradcheck_defaults();
    o.seed = 7 + (uint64_t)_i;
    char msg[512];
    ck_assert_msg(gradcheck(l, d, &o, msg, sizeof msg) == 0, "%s", msg);
    layer_destroy(l, d);
    device_destroy(d);
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
    float *b = malloc((count + 2 * GUARD) * sizeof *b);
    ck_assert_ptr_nonnull(b);
    for (size_t i = 0; i < count + 2 * GUARD; i++) b[i] = canary;
    for (size_t i = 0; init && i < count; i++) b[GUARD + i] = init[i];
    return b + GUARD;
}

static void guarded_check(float *p, size_t count, const char *what)
{
    for (size_t i = 0; i < GUARD; i++) {
        ck_assert_msg(p[-1 - (ptrdiff_t)i] == canary, "%s: written before its start", what);
        ck_assert_msg(p[count + i] == canary, "%s: written past its end", what);
    }
    free(p - GUARD);
}

START_TEST(test_stays_in_bounds)
{
    const pool_case *k = &cases[_i / 2];
    const int is_max = _i % 2;
    device *d = test_cpu_device();
    layer *l = make_pool(is_max, k);
    const size_t xc = shape_count(l->in), yc = shape_count(l->out);
    float *hx = malloc(xc * sizeof *hx), *hdy = malloc(yc * sizeof *hdy);
    double *ry = malloc(yc * sizeof *ry), *rdx = malloc(xc * sizeof *rdx);
    ck_assert(hx && hdy && ry && rdx);
    test_fill_uniform(hx, xc, 1.0f, 11 + (uint64_t)_i);
    test_fill_uniform(hdy, yc, 1.0f, 12 + (uint64_t)_i);
    ref_pool(is_max, k, hx, hdy, ry, rdx);
    float *x = guarded(xc, hx), *dy = guarded(yc, hdy), *y = guarded(yc, NULL);
    float *dx = guarded(xc, NULL);
    exec_ctx c = test_ctx(d, l->in.n, 1);
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
    ck_assert_int_eq(layer_backward(l, &c, x, y, dy, dx), VDNN_OK);
    expect_close(y, ry, yc, "y");
    expect_close(dx, rdx, xc, "dx");
    guarded_check(x, xc, "x");
    guarded_check(dy, yc, "dy");
    guarded_check(y, yc, "y");
    guarded_check(dx, xc, "dx");
    free(hx);
    free(hdy);
    free(ry);
    free(rdx);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* A smaller batch (c->n = 1 of 3) writes only its own outputs. */
START_TEST(test_smaller_batch)
{
    const pool_case *k = &cases[0];
    device *d = test_cpu_device();
    layer *l = make_pool(_i, k);
    const size_t xc = shape_count(l->in), yc = shape_count(l->out), per = yc / (size_t)k->n;
    float *x = malloc(xc * sizeof *x), *y = malloc(yc * sizeof *y), *dy = calloc(yc, sizeof *dy);
    double *ry = malloc(yc * sizeof *ry), *rdx = malloc(xc * sizeof *rdx);
    ck_assert(x && y && dy && ry && rdx);
    test_fill_uniform(x, xc, 1.0f, 3);
    float *xd = dev_upload(d, x, xc), *yd = dev_upload(d, NULL, yc);
    ck_assert_int_eq(device_zero(d, yd, yc * sizeof *y), VDNN_OK);
    exec_ctx c = test_ctx(d, 1, 1);
    ck_assert_msg(layer_forward(l, &c, xd, yd) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_int_eq(device_download(d, y, yd, yc * sizeof *y), VDNN_OK);
    ref_pool(_i, k, x, dy, ry, rdx);
    expect_close(y, ry, per, "y of item 0");
    for (size_t i = per; i < yc; i++) ck_assert_float_eq(y[i], 0.0f);
    device_free(d, xd);
    device_free(d, yd);
    free(x);
    free(y);
    free(dy);
    free(ry);
    free(rdx);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* All-negative input with pad 1: a padded zero never wins, every output is negative. */
START_TEST(test_max_padding_never_wins)
{
    const pool_case k = {2, 2, 5, 5, 3, 2, 1, PLAIN};
    device *d = test_cpu_device();
    layer *l = make_pool(1, &k);
    const size_t xc = shape_count(l->in), yc = shape_count(l->out);
    float *x = malloc(xc * sizeof *x), *dy = malloc(yc * sizeof *dy);
    float *y = malloc(yc * sizeof *y), *dx = malloc(xc * sizeof *dx);
    ck_assert(x && dy && y && dx);
    for (size_t i = 0; i < xc; i++) x[i] = -1.0f - (float)(i % 7);
    for (size_t i = 0; i < yc; i++) dy[i] = 1.0f;
    run_layer(d, l, x, dy, y, dx, 1);
    for (size_t i = 0; i < yc; i++) ck_assert_float_lt(y[i], 0.0f);
    /* the gradient lands on real cells only, one unit per output */
    double total = 0.0;
    for (size_t i = 0; i < xc; i++) total += dx[i];
    ck_assert_double_eq_tol(total, (double)yc, 1e-9);
    free(x);
    free(dy);
    free(y);
    free(dx);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* Constant input: every window ties; dy goes to its first cell in row-major order. */
START_TEST(test_max_ties_first_wins)
{
    const pool_case k = {1, 1, 4, 4, 2, 2, 0, PLAIN};
    device *d = test_cpu_device();
    layer *l = make_pool(1, &k);
    float x[16], dy[4] = {1.0f, 2.0f, 3.0f, 4.0f}, y[4], dx[16];
    for (int i = 0; i < 16; i++) x[i] = 0.5f;
    const float want[16] = {1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4, 0, 0, 0, 0, 0};
    for (int rep = 0; rep < 2; rep++) {
        run_layer(d, l, x, dy, y, dx, 1);
        for (int i = 0; i < 4; i++) ck_assert_float_eq(y[i], 0.5f);
        for (int i = 0; i < 16; i++) ck_assert_float_eq(dx[i], want[i]);
    }
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* Average pooling divides by size*size even where the window covers padding. */
START_TEST(test_avg_counts_padding)
{
    const pool_case k = {1, 1, 5, 5, 3, 2, 1, PLAIN};
    device *d = test_cpu_device();
    layer *l = make_pool(0, &k);
    ck_assert_int_eq(l->out.h, 3);
    float x[25], dy[9], y[9], dx[25];
    for (int i = 0; i < 25; i++) x[i] = 1.0f;
    for (int i = 0; i < 9; i++) dy[i] = 9.0f;
    run_layer(d, l, x, dy, y, dx, 0);
    ck_assert_float_eq_tol(y[0], 4.0f / 9.0f, 1e-6f);   /* corner: 2x2 real cells */
    ck_assert_float_eq_tol(y[1], 6.0f / 9.0f, 1e-6f);   /* edge: 2x3 */
    ck_assert_float_eq_tol(y[4], 1.0f, 1e-6f);          /* centre: all real */
    ck_assert_float_eq_tol(dx[0], 1.0f, 1e-6f);         /* in one window, dy/9 * 9 */
    ck_assert_float_eq_tol(dx[1], 2.0f, 1e-6f);         /* in two windows */
    ck_assert_float_eq_tol(dx[6], 4.0f, 1e-6f);         /* in four windows */
    ck_assert_float_eq_tol(dx[12], 1.0f, 1e-6f);        /* the centre: in one */
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

START_TEST(test_dx_null)
{
    device *d = test_cpu_device();
    layer *l = make_pool(_i, &cases[0]);
    const size_t xc = shape_count(l->in), yc = shape_count(l->out);
    float *xd = dev_upload(d, NULL, xc), *yd = dev_upload(d, NULL, yc);
    float *dyd = dev_upload(d, NULL, yc);
    ck_assert_int_eq(device_zero(d, xd, xc * sizeof(float)), VDNN_OK);
    ck_assert_int_eq(device_zero(d, dyd, yc * sizeof(float)), VDNN_OK);
    exec_ctx c = test_ctx(d, l->in.n, 1);
    ck_assert_int_eq(layer_forward(l, &c, xd, yd), VDNN_OK);
    ck_assert_int_eq(layer_backward(l, &c, xd, yd, dyd, NULL), VDNN_OK);
    device_free(d, xd);
    device_free(d, yd);
    device_free(d, dyd);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

START_TEST(test_config_keys)
{
    const layer_ops *ops = ops_of(_i);
    char text[128];
    /* stride defaults to size */
    snprintf(text, sizeof text, "[%s]\nsize=2\n", ops->type);
    cfg_file *f;
    ck_assert_int_eq(cfg_parse(text, "test.cfg", &f), VDNN_OK);
    ck_assert_int_eq(cfg_check(f, &f->sec[0], ops->keys), VDNN_OK);
    layer *l;
    ck_assert_int_eq(layer_create(ops, 0, shape_make(2, 3, 5, 5), f, &f->sec[0], &l), VDNN_OK);
    cfg_free(f);
    ck_assert_int_eq(l->out.h, 2);
    ck_assert_int_eq(l->out.w, 2);
    char buf[64];
    ops->describe(l, buf, sizeof buf);
    ck_assert_str_eq(buf, "2x2/2 p0");
    layer_destroy(l, NULL);

    static const char *const bad[] = {
        "stride=2\n", "size=0\n", "size=65\n", "size=2\nstride=0\n", "size=2\nstride=65\n",
        "size=2\npad=33\n", "size=2\npad=-1\n", "size=2\nkernel=2\n", "size=two\n",
        "size=6\n",            /* larger than the 5x5 input */
        "size=3\npad=3\n",     /* pad must be less than size */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(text, sizeof text, "[%s]\n%s", ops->type, bad[i]);
        ck_assert_msg(config_status(text, ops) == VDNN_EINVAL, "accepted: %s", bad[i]);
    }
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "test.cfg:3"));
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "pad"));
    snprintf(text, sizeof text, "[%s]\nsize=3\nstride=2\npad=2\n", ops->type);
    ck_assert_int_eq(config_status(text, ops), VDNN_OK);
}
END_TEST

/* Output sizes that Caffe and PyTorch give (ceil_mode = True), written out. */
START_TEST(test_ceil_sizes)
{
    static const struct { int in, k, s, p, floor_out, ceil_out; } t[] = {
        {6, 3, 2, 0, 2, 3},      /* a last window over rows 4..5 of 6 */
        {7, 3, 2, 0, 3, 3},      /* exact: the same either way */
        {5, 2, 2, 1, 3, 3},      /* a 4th window would start in the bottom padding */
        {112, 3, 2, 0, 55, 56},  /* GoogLeNet's pool1 in Caffe */
        {13, 3, 2, 0, 6, 6},
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++)
        for (int ceil_mode = 0; ceil_mode < 2; ceil_mode++) {
            char text[128];
            snprintf(text, sizeof text, "[maxpool]\nsize=%d\nstride=%d\npad=%d\nceil_mode=%d\n", t[i].k, t[i].s,
                     t[i].p, ceil_mode);
            layer *l = test_layer(&maxpool_ops, 0, text, shape_make(1, 1, t[i].in, 3));
            ck_assert_int_eq(l->out.h, ceil_mode ? t[i].ceil_out : t[i].floor_out);
            layer_destroy(l, NULL);
        }
}
END_TEST

/* A bad section fails with EINVAL and a message naming test.cfg:LINE and the key. */
static void expect_bad(const layer_ops *ops, const char *body, int line, const char *key)
{
    char text[256], where[32];
    snprintf(text, sizeof text, "[%s]\n%s", ops->type, body);
    snprintf(where, sizeof where, "test.cfg:%d", line);
    ck_assert_msg(config_status(text, ops) == VDNN_EINVAL, "accepted: %s", text);
    ck_assert_msg(strstr(vdnn_errmsg(), where) && strstr(vdnn_errmsg(), key), "%s: message '%s' lacks %s or %s",
                  text, vdnn_errmsg(), where, key);
}

/* The keys of rectangular, ceil-mode, global and padding-excluding pooling. */
START_TEST(test_option_keys)
{
    const layer_ops *ops = ops_of(_i);
    expect_bad(ops, "global=1\nsize=2\n", 3, "size");
    expect_bad(ops, "stride=2\nglobal=1\n", 2, "stride");
    expect_bad(ops, "global=1\nceil_mode=1\n", 3, "ceil_mode");
    expect_bad(ops, "global=2\n", 2, "global");
    expect_bad(ops, "size=2\nceil_mode=yes\n", 3, "ceil_mode");
    expect_bad(ops, "size_h=2\n", 1, "size");
    expect_bad(ops, "size_h=2\nsize_w=65\n", 3, "size_w");
    expect_bad(ops, "size=2\nstride_w=0\n", 3, "stride_w");
    expect_bad(ops, "size_h=3\nsize_w=2\npad_w=2\n", 4, "pad_w");
    expect_bad(ops, "size_h=6\nsize_w=2\n", 2, "size_h");
    expect_bad(&maxpool_ops, "size=2\ncount_pad=0\n", 3, "count_pad");
    expect_bad(&avgpool_ops, "size=2\ncount_pad=2\n", 3, "count_pad");
    char text[128], buf[64];
    snprintf(text, sizeof text, "[%s]\nsize_h=3\nsize_w=2\nstride_w=1\npad_h=1\nceil_mode=1\n", ops->type);
    layer *l = test_layer(ops, 0, text, shape_make(2, 3, 5, 5));
    ops->describe(l, buf, sizeof buf);
    ck_assert_str_eq(buf, "3x2/3x1 p1,0 ceil");
    ck_assert_int_eq(l->out.h, 2);   /* ceil((5 + 2 - 3) / 3) + 1 = 3, but (3-1)*3 = 6 >= 5 + 1 */
    layer_destroy(l, NULL);
    snprintf(text, sizeof text, "[%s]\nglobal=1\n%s", ops->type, _i ? "" : "count_pad=0\n");
    l = test_layer(ops, 0, text, shape_make(2, 3, 200, 90));
    ops->describe(l, buf, sizeof buf);
    ck_assert_str_eq(buf, _i ? "global 200x90" : "global 200x90, count_pad 0");
    ck_assert_int_eq(l->out.h, 1);
    ck_assert_int_eq(l->out.w, 1);
    layer_destroy(l, NULL);
}
END_TEST

static Suite *pool_suite(void)
{
    Suite *s = suite_create("pool");
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_setup_shapes, 0, 2 * NCASES);
    tcase_add_loop_test(tc, test_reference, 0, 4 * NCASES);
    tcase_add_loop_test(tc, test_gradcheck, 0, 2 * NCASES);
    tcase_add_loop_test(tc, test_stays_in_bounds, 0, 2 * NCASES);
    tcase_add_loop_test(tc, test_smaller_batch, 0, 2);
    tcase_add_test(tc, test_max_padding_never_wins);
    tcase_add_test(tc, test_max_ties_first_wins);
    tcase_add_test(tc, test_avg_counts_padding);
    tcase_add_loop_test(tc, test_dx_null, 0, 2);
    tcase_add_loop_test(tc, test_config_keys, 0, 2);
    tcase_add_test(tc, test_ceil_sizes);
    tcase_add_loop_test(tc, test_option_keys, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tn_run_suite(pool_suite()); }
