/* Tests for batch normalisation: forward in train and eval mode against a double
 * reference, the running statistics after several passes against a hand computation
 * (PyTorch's momentum and unbiased running variance), gradients against a reference
 * and the shared checker in both modes, accumulation, dx == NULL, determinism across
 * thread counts, and the config keys. */
#include <check.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"
#include "tests/gradcheck.h"
#include "tests/testnet.h"
#include "tests/tsan.h"
#include "vdnn/config.h"
#include <stdio.h>

extern const layer_ops batchnorm_ops;

static const shape4 odd_shape = {3, 5, 3, 7};   /* (N, C, H, W) */
enum { GAMMA = 0, BETA = 1, RMEAN = 2, RVAR = 3 };

static layer *make_layer(const char *text, shape4 in) { return test_layer(&batchnorm_ops, 0, text, in); }
static vdnn_status config_status(const char *text) { return test_layer_status(&batchnorm_ops, text, odd_shape); }
/* the key check alone (range and type errors end there) */
static vdnn_status check_status(const char *text) { return test_check_status(&batchnorm_ops, text); }

/* A layer with params allocated and gamma, beta made non-trivial. */
static layer *make_ready_layer(device *d, const char *text, shape4 in)
{
    layer *l = make_layer(text, in);
    ck_assert_int_eq(layer_alloc_params(l, d, 3), VDNN_OK);
    float *gamma = l->params[GAMMA].value, *beta = l->params[BETA].value;
    for (int c = 0; c < in.c; c++) {
        gamma[c] = 0.5f + 0.25f * (float)c;
        beta[c] = 0.1f * (float)c - 0.2f;
    }
    return l;
}

/* Per-channel mean and biased variance of x (n, C, HW) in double. */
static void ref_stats(const float *x, int n, shape4 s, int ch, double *mean, double *var)
{
    const size_t hw = (size_t)s.h * s.w;
    double sum = 0.0, sq = 0.0;
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < hw; k++) sum += x[((size_t)i * s.c + ch) * hw + k];
    *mean = sum / ((double)n * hw);
    for (int i = 0; i < n; i++)
        for (size_t k = 0; k < hw; k++) {
            double dv = x[((size_t)i * s.c + ch) * hw + k] - *mean;
            sq += dv * dv;
        }
    *var = sq / ((double)n * hw);
}

/* y = gamma (x - mean) / sqrt(var + eps) + beta with the batch's or the running stats. */
static void expect_forward(const layer *l, const float *x, const float *y, int n, int train,
                           double eps)
{
    const shape4 s = l->in;
    const size_t hw = (size_t)s.h * s.w;
    for (int ch = 0; ch < s.c; ch++) {
        double mean = l->params[RMEAN].value[ch], var = l->params[RVAR].value[ch];
        if (train) ref_stats(x, n, s, ch, &mean, &var);
        const double g = l->params[GAMMA].value[ch], b = l->params[BETA].value[ch];
        for (int i = 0; i < n; i++)
            for (size_t k = 0; k < hw; k++) {
                size_t e = ((size_t)i * s.c + ch) * hw + k;
                double want = g * (x[e] - mean) / sqrt(var + eps) + b;
                ck_assert_msg(fabs(y[e] - want) <= 1e-5 * (1 + fabs(want)),
                              "y[%zu] (train %d): %g vs %g", e, train, y[e], want);
            }
    }
}

START_TEST(test_params_declared)
{
    layer *l = make_layer("[batchnorm]\n", odd_shape);
    ck_assert_int_eq(l->nparams, 4);
    ck_assert_int_eq(l->needs_input, 1);
    ck_assert_int_eq(l->needs_output, 0);
    const char *names[4] = {"gamma", "beta", "running_mean", "running_var"};
    const param_init inits[4] = {INIT_ONE, INIT_ZERO, INIT_ZERO, INIT_ONE};
    for (int i = 0; i < 4; i++) {
        ck_assert_str_eq(l->params[i].name, names[i]);
        ck_assert_int_eq(l->params[i].init, inits[i]);
        ck_assert_int_eq(l->params[i].trainable, i < 2);
        ck_assert_int_eq(l->params[i].decay, 0);
        ck_assert_int_eq((int)shape_count(l->params[i].shape), 5);
    }
    char buf[64];
    batchnorm_ops.describe(l, buf, sizeof buf);
    ck_assert_str_eq(buf, "momentum 0.1 eps 1e-05");
    ck_assert_str_eq(l->name, "bn1");
    layer_destroy(l, NULL);
}
END_TEST

START_TEST(test_forward_reference)
{
    device *d = test_cpu_device();
    layer *l = make_ready_layer(d, "[batchnorm]\neps=0.001\n", odd_shape);
    const size_t total = shape_count(odd_shape);
    float *x = test_random_floats(total, 3.0f, 21), *y = test_random_floats(total, 1.0f, 22);
    for (size_t i = 0; i < total; i++) x[i] += 1.5f;   /* a mean far from 0 */
    for (int n = 1; n <= 3; n++) {
        exec_ctx c = test_ctx(d, n, 1);
        ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
        expect_forward(l, x, y, n, 1, 1e-3);
    }
    /* Eval with non-trivial running statistics (set by the passes above). */
    exec_ctx c = test_ctx(d, 3, 0);
    ck_assert_float_ne(l->params[RMEAN].value[0], 0.0f);
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
    expect_forward(l, x, y, 3, 0, 1e-3);
    free(x);
    free(y);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* Three train passes of different sizes: running = 0.7 running + 0.3 batch, with the
 * batch variance made unbiased (m / (m - 1)). Eval and backward leave them alone. */
START_TEST(test_running_stats)
{
    device *d = test_cpu_device();
    layer *l = make_ready_layer(d, "[batchnorm]\nmomentum=0.3\n", odd_shape);
    const size_t total = shape_count(odd_shape), hw = 21;
    float *x = test_random_floats(total, 2.0f, 31), *y = test_random_floats(total, 1.0f, 32);
    double rm[5], rv[5];
    for (int ch = 0; ch < 5; ch++) {
        rm[ch] = 0.0;
        rv[ch] = 1.0;
    }
    const int sizes[3] = {3, 2, 3};
    for (int pass = 0; pass < 3; pass++) {
        test_fill_uniform(x, total, 2.0f + (float)pass, 33 + (uint64_t)pass);
        for (size_t i = 0; i < total; i++) x[i] += (float)pass;
        exec_ctx c = test_ctx(d, sizes[pass], 1);
        ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
        const double m = (double)sizes[pass] * hw;
        for (int ch = 0; ch < 5; ch++) {
            double mean, var;
            ref_stats(x, sizes[pass], odd_shape, ch, &mean, &var);
            rm[ch] = 0.7 * rm[ch] + 0.3 * mean;
            rv[ch] = 0.7 * rv[ch] + 0.3 * var * m / (m - 1.0);
        }
    }
    for (int ch = 0; ch < 5; ch++) {
        ck_assert_double_eq_tol(l->params[RMEAN].value[ch], rm[ch], 1e-5);
        ck_assert_double_eq_tol(l->params[RVAR].value[ch], rv[ch], 1e-5 * rv[ch]);
    }
    float before[10];
    memcpy(before, l->params[RMEAN].value, 5 * sizeof(float));
    memcpy(before + 5, l->params[RVAR].value, 5 * sizeof(float));
    exec_ctx c = test_ctx(d, 3, 0);
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
    expect_forward(l, x, y, 3, 0, 1e-5);
    c.train = 1;
    ck_assert_int_eq(layer_backward(l, &c, x, NULL, y, NULL), VDNN_OK);
    ck_assert_mem_eq(before, l->params[RMEAN].value, 5 * sizeof(float));
    ck_assert_mem_eq(before + 5, l->params[RVAR].value, 5 * sizeof(float));
    free(x);
    free(y);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* dgamma, dbeta and dx of odd_shape's first n items in double, with the batch's (train)
 * or the running statistics. */
static void ref_backward(const layer *l, const float *x, const float *dy, int n, int train, double *want_dg,
                         double *want_db, double *want_dx)
{
    const size_t hw = (size_t)odd_shape.h * odd_shape.w;
    for (int ch = 0; ch < 5; ch++) {
        double mean = l->params[RMEAN].value[ch], var = l->params[RVAR].value[ch];
        if (train) ref_stats(x, n, odd_shape, ch, &mean, &var);
        const double inv = 1.0 / sqrt(var + 1e-5), g = l->params[GAMMA].value[ch];
        double sdy = 0.0, sdyx = 0.0;
        for (int i = 0; i < n; i++)
            for (size_t k = 0; k < hw; k++) {
                size_t e = ((size_t)i * 5 + ch) * hw + k;
                sdy += dy[e];
                sdyx += dy[e] * (x[e] - mean) * inv;
            }
        want_dg[ch] = sdyx;
        want_db[ch] = sdy;
        const double m = (double)n * hw;
        for (int i = 0; i < n; i++)
            for (size_t k = 0; k < hw; k++) {
                size_t e = ((size_t)i * 5 + ch) * hw + k;
                double xhat = (x[e] - mean) * inv;
                want_dx[e] = train ? g * inv * (dy[e] - sdy / m - xhat * sdyx / m) : g * inv * dy[e];
            }
    }
}

/* dgamma, dbeta and dx against a double reference in train (_i = 1) and eval mode;
 * accumulate adds to the parameter gradients; dx == NULL gives the same ones. */
START_TEST(test_backward_reference)
{
    const int train = _i, n = 2;
    device *d = test_cpu_device();
    layer *l = make_ready_layer(d, "[batchnorm]\n", odd_shape);
    l->params[RMEAN].value[1] = 0.3f;
    l->params[RVAR].value[1] = 2.5f;
    const size_t total = shape_count(odd_shape), hw = 21;
    float *x = test_random_floats(total, 2.0f, 41), *dy = test_random_floats(total, 1.0f, 42);
    float *dx = test_random_floats(total, 1.0f, 43);
    double want_dg[5], want_db[5], *want_dx = calloc(total, sizeof *want_dx);
    ck_assert_ptr_nonnull(want_dx);
    ref_backward(l, x, dy, n, train, want_dg, want_db, want_dx);
    float *dg = l->params[GAMMA].grad, *db = l->params[BETA].grad;
    test_fill_uniform(dg, 5, 9.0f, 44);   /* stale values, to be overwritten */
    exec_ctx c = test_ctx(d, n, train);
    ck_assert_int_eq(layer_backward(l, &c, x, NULL, dy, dx), VDNN_OK);
    for (int ch = 0; ch < 5; ch++) {
        ck_assert_double_eq_tol(dg[ch], want_dg[ch], 1e-4 * (1 + fabs(want_dg[ch])));
        ck_assert_double_eq_tol(db[ch], want_db[ch], 1e-4 * (1 + fabs(want_db[ch])));
    }
    for (size_t e = 0; e < (size_t)n * 5 * hw; e++)
        ck_assert_msg(fabs(dx[e] - want_dx[e]) <= 1e-5 * (1 + fabs(want_dx[e])),
                      "dx[%zu]: %g vs %g", e, dx[e], want_dx[e]);
    c.accumulate = 1;
    ck_assert_int_eq(layer_backward(l, &c, x, NULL, dy, NULL), VDNN_OK);
    for (int ch = 0; ch < 5; ch++) {
        ck_assert_double_eq_tol(dg[ch], 2 * want_dg[ch], 2e-4 * (1 + fabs(want_dg[ch])));
        ck_assert_double_eq_tol(db[ch], 2 * want_db[ch], 2e-4 * (1 + fabs(want_db[ch])));
    }
    free(x);
    free(dy);
    free(dx);
    free(want_dx);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* Channels whose mean is 10^3 to 10^6 times their spread, and one whose first value (where
 * the statistics' one pass is centred) lies 40 spreads from the rest: forward and backward
 * still agree with the two-pass double reference to float precision. */
START_TEST(test_offset_channels)
{
    const int n = 3;
    device *d = test_cpu_device();
    layer *l = make_ready_layer(d, "[batchnorm]\n", odd_shape);
    const size_t total = shape_count(odd_shape), hw = 21;
    float *x = test_random_floats(total, 1.0f, 71), *dy = test_random_floats(total, 1.0f, 72);
    float *y = test_random_floats(total, 1.0f, 73), *dx = test_random_floats(total, 1.0f, 74);
    static const double centre[5] = {1e3, -3e3, 1e4, 0.0, 5e2}, spread[5] = {1.0, 1.0, 0.01, 1.0, 0.01};
    for (int i = 0; i < n; i++)
        for (int ch = 0; ch < 5; ch++)
            for (size_t k = 0; k < hw; k++) {
                float *v = &x[((size_t)i * 5 + ch) * hw + k];
                *v = (float)(centre[ch] + spread[ch] * *v);
            }
    x[3 * hw] = 40.0f;   /* channel 3's first value */
    exec_ctx c = test_ctx(d, n, 1);
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
    expect_forward(l, x, y, n, 1, 1e-5);
    double want_dg[5], want_db[5], *want_dx = calloc(total, sizeof *want_dx);
    ck_assert_ptr_nonnull(want_dx);
    ref_backward(l, x, dy, n, 1, want_dg, want_db, want_dx);
    ck_assert_int_eq(layer_backward(l, &c, x, NULL, dy, dx), VDNN_OK);
    for (int ch = 0; ch < 5; ch++) {
        ck_assert_double_eq_tol(l->params[GAMMA].grad[ch], want_dg[ch], 1e-4 * (1 + fabs(want_dg[ch])));
        ck_assert_double_eq_tol(l->params[BETA].grad[ch], want_db[ch], 1e-4 * (1 + fabs(want_db[ch])));
    }
    for (size_t e = 0; e < total; e++)
        ck_assert_msg(fabs(dx[e] - want_dx[e]) <= 1e-5 * (1 + fabs(want_dx[e])), "dx[%zu]: %g vs %g", e, dx[e],
                      want_dx[e]);
    free(x);
    free(dy);
    free(y);
    free(dx);
    free(want_dx);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* Train and eval, on feature maps and on (N, C, 1, 1) features. */
START_TEST(test_gradcheck)
{
    const int train = _i & 1, features = _i >> 1;
    device *d = test_cpu_device();
    layer *l = make_ready_layer(d, "[batchnorm]\n",
                                features ? shape_make(6, 4, 1, 1) : odd_shape);
    for (int ch = 0; ch < l->in.c; ch++) {
        l->params[RMEAN].value[ch] = 0.2f * (float)ch - 0.3f;
        l->params[RVAR].value[ch] = 0.5f + 0.3f * (float)ch;
    }
    gradcheck_opts o = gradcheck_defaults();
    o.train = train;
    o.seed = 51 + (uint64_t)_i;
    char msg[512];
    ck_assert_msg(gradcheck(l, d, &o, msg, sizeof msg) == 0, "train %d features %d: %s", train,
                  features, msg);
    o.n = 2;
    ck_assert_msg(gradcheck(l, d, &o, msg, sizeof msg) == 0, "n=2 train %d features %d: %s",
                  train, features, msg);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* One value per channel in train mode: normalises to beta and stays finite. */
START_TEST(test_single_value)
{
    device *d = test_cpu_device();
    layer *l = make_ready_layer(d, "[batchnorm]\n", shape_make(1, 3, 1, 1));
    const float x[3] = {5.0f, -2.0f, 0.0f}, dy[3] = {1.0f, 2.0f, 3.0f};
    float y[3], dx[3];
    exec_ctx c = test_ctx(d, 1, 1);
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
    ck_assert_int_eq(layer_backward(l, &c, x, y, dy, dx), VDNN_OK);
    for (int ch = 0; ch < 3; ch++) {
        ck_assert_float_eq_tol(y[ch], l->params[BETA].value[ch], 1e-6f);
        ck_assert_float_eq_tol(dx[ch], 0.0f, 1e-6f);
        ck_assert_float_finite(l->params[RVAR].value[ch]);
    }
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* Bit-identical results with 1 and 2 threads (recomputation relies on it). */
START_TEST(test_thread_invariance)
{
    if (UNDER_TSAN) {
        printf("SKIPPED: test_thread_invariance: runs OpenMP with 2 threads, whose uninstrumented barriers ThreadSanitizer reports\n");
        return;
    }
    device *d = test_cpu_device();
    const shape4 s = {4, 3, 17, 19};
    layer *l = make_ready_layer(d, "[batchnorm]\n", s);
    const size_t total = shape_count(s);
    float *x = test_random_floats(total, 2.0f, 61), *dy = test_random_floats(total, 1.0f, 62);
    float *y[2], *dx[2], dg[2][3];
    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(t + 1);
        y[t] = test_random_floats(total, 1.0f, 63);
        dx[t] = test_random_floats(total, 1.0f, 64);
        exec_ctx c = test_ctx(d, 4, 1);
        ck_assert_int_eq(layer_forward(l, &c, x, y[t]), VDNN_OK);
        ck_assert_int_eq(layer_backward(l, &c, x, y[t], dy, dx[t]), VDNN_OK);
        memcpy(dg[t], l->params[GAMMA].grad, sizeof dg[t]);
    }
    ck_assert_mem_eq(y[0], y[1], total * sizeof(float));
    ck_assert_mem_eq(dx[0], dx[1], total * sizeof(float));
    ck_assert_mem_eq(dg[0], dg[1], sizeof dg[0]);
    for (int t = 0; t < 2; t++) {
        free(y[t]);
        free(dx[t]);
    }
    free(x);
    free(dy);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

START_TEST(test_config)
{
    ck_assert_int_eq(config_status("[batchnorm]\nmomentum=0.01\neps=1e-3\n"), VDNN_OK);
    ck_assert_int_eq(config_status("[batchnorm]\nmomentum=1\n"), VDNN_OK);
    ck_assert_int_eq(check_status("[batchnorm]\nmomentum=1.5\n"), VDNN_EINVAL);
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "momentum"));
    ck_assert_int_eq(check_status("[batchnorm]\nmomentum=-0.1\n"), VDNN_EINVAL);
    ck_assert_int_eq(check_status("[batchnorm]\neps=2\n"), VDNN_EINVAL);
    ck_assert_int_eq(check_status("[batchnorm]\nsize=3\n"), VDNN_EINVAL);
    /* The key table is inclusive; setup rejects eps = 0. */
    ck_assert_int_eq(config_status("[batchnorm]\neps=0\n"), VDNN_EINVAL);
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "eps"));
    ck_assert_ptr_eq(layer_find_type("batchnorm"), &batchnorm_ops);
}
END_TEST

static Suite *batchnorm_suite(void)
{
    Suite *s = suite_create("batchnorm");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_params_declared);
    tcase_add_test(tc, test_forward_reference);
    tcase_add_test(tc, test_running_stats);
    tcase_add_loop_test(tc, test_backward_reference, 0, 2);
    tcase_add_test(tc, test_offset_channels);
    tcase_add_loop_test(tc, test_gradcheck, 0, 4);
    tcase_add_test(tc, test_single_value);
    tcase_add_test(tc, test_thread_invariance);
    tcase_add_test(tc, test_config);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tn_run_suite(batchnorm_suite()); }
