/* Tests for cross-channel local response normalisation: forward and backward against
 * a double-precision reference of PyTorch's formula (window centred, zero beyond the
 * edge channels) for several window sizes, the shared gradient checker, dx == NULL,
 * determinism across thread counts, and the config keys. */
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

extern const layer_ops lrn_ops;

static const shape4 odd_shape = {3, 5, 3, 7};   /* (N, C, H, W) */

static layer *make_layer(const char *text, shape4 in) { return test_layer(&lrn_ops, 0, text, in); }
static vdnn_status config_status(const char *text) { return test_layer_status(&lrn_ops, text, odd_shape); }
/* the key check alone (range and type errors end there) */
static vdnn_status check_status(const char *text) { return test_check_status(&lrn_ops, text); }

/* The cases: config, shape, and the hyper-parameters the reference uses. */
static const struct {
    const char *cfg;
    shape4 shape;
    int size;
    double alpha, beta, k;
} cases[] = {
    {"[lrn]\nsize=5\nalpha=0.5\nbeta=0.75\nk=2\n", {3, 5, 3, 7}, 5, 0.5, 0.75, 2.0},
    {"[lrn]\nsize=3\nalpha=1.5\nbeta=0.5\nk=1\n", {2, 7, 3, 5}, 3, 1.5, 0.5, 1.0},
    {"[lrn]\nsize=7\nalpha=0.8\nbeta=1.2\nk=0.5\n", {2, 4, 2, 3}, 7, 0.8, 1.2, 0.5},
    {"[lrn]\nsize=1\nalpha=2\n", {1, 3, 5, 1}, 1, 2.0, 0.75, 1.0},
    {"[lrn]\n", {3, 5, 3, 7}, 5, 1e-4, 0.75, 1.0},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* s at (item i, channel ch, pixel k) of x (n, C, HW), in double. */
static double ref_scale(int t, const float *x, int i, int ch, size_t k)
{
    const shape4 s = cases[t].shape;
    const size_t hw = (size_t)s.h * s.w;
    const int half = cases[t].size / 2;
    double sum = 0.0;
    for (int c2 = ch - half; c2 <= ch + half; c2++)
        if (c2 >= 0 && c2 < s.c) {
            double v = x[((size_t)i * s.c + c2) * hw + k];
            sum += v * v;
        }
    return cases[t].k + cases[t].alpha / cases[t].size * sum;
}

/* y and dx of case t against the reference, for all items. */
static void check_case(int t, const float *x, const float *y, const float *dy, const float *dx)
{
    const shape4 s = cases[t].shape;
    const size_t hw = (size_t)s.h * s.w;
    const int half = cases[t].size / 2;
    const double a = cases[t].alpha, b = cases[t].beta, size = cases[t].size;
    for (int i = 0; i < s.n; i++)
        for (int ch = 0; ch < s.c; ch++)
            for (size_t k = 0; k < hw; k++) {
                size_t e = ((size_t)i * s.c + ch) * hw + k;
                double sj = ref_scale(t, x, i, ch, k), want_y = x[e] * pow(sj, -b), acc = 0.0;
                for (int c1 = ch - half; c1 <= ch + half; c1++) {
                    if (c1 < 0 || c1 >= s.c) continue;
                    size_t e1 = ((size_t)i * s.c + c1) * hw + k;
                    acc += dy[e1] * x[e1] * pow(ref_scale(t, x, i, c1, k), -b - 1.0);
                }
                double want_dx = dy[e] * pow(sj, -b) - 2.0 * a * b / size * x[e] * acc;
                ck_assert_msg(fabs(y[e] - want_y) <= 1e-5 * (1 + fabs(want_y)),
                              "case %d y[%zu]: %g vs %g", t, e, y[e], want_y);
                ck_assert_msg(fabs(dx[e] - want_dx) <= 1e-5 * (1 + fabs(want_dx)),
                              "case %d dx[%zu]: %g vs %g", t, e, dx[e], want_dx);
            }
}

START_TEST(test_reference)
{
    device *d = test_cpu_device();
    const shape4 s = cases[_i].shape;
    layer *l = make_layer(cases[_i].cfg, s);
    ck_assert_int_eq(l->needs_input, 1);
    ck_assert_int_eq(l->needs_output, 1);
    const size_t total = shape_count(s);
    float *x = test_random_floats(total, 2.0f, 1 + (uint64_t)_i), *dy = test_random_floats(total, 1.0f, 2);
    float *y = test_random_floats(total, 1.0f, 3), *dx = test_random_floats(total, 1.0f, 4);
    exec_ctx c = test_ctx(d, s.n, 1);
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
    ck_assert_int_eq(layer_backward(l, &c, x, y, dy, dx), VDNN_OK);
    check_case(_i, x, y, dy, dx);
    ck_assert_int_eq(layer_backward(l, &c, x, y, dy, NULL), VDNN_OK);
    free(x);
    free(dy);
    free(y);
    free(dx);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* Only c->n items are touched. */
START_TEST(test_partial_batch)
{
    device *d = test_cpu_device();
    layer *l = make_layer(cases[0].cfg, odd_shape);
    const size_t total = shape_count(odd_shape), per = shape_per_item(odd_shape);
    float *x = test_random_floats(total, 2.0f, 5), *y = test_random_floats(total, 1.0f, 6);
    float *dx = test_random_floats(total, 1.0f, 7);
    const float y_last = y[2 * per], dx_last = dx[2 * per + per - 1];
    exec_ctx c = test_ctx(d, 2, 1);
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
    ck_assert_int_eq(layer_backward(l, &c, x, y, x, dx), VDNN_OK);
    ck_assert_float_eq(y[2 * per], y_last);
    ck_assert_float_eq(dx[2 * per + per - 1], dx_last);
    free(x);
    free(y);
    free(dx);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

START_TEST(test_gradcheck)
{
    device *d = test_cpu_device();
    layer *l = make_layer(cases[_i].cfg, cases[_i].shape);
    ck_assert_int_eq(layer_alloc_params(l, d, 1), VDNN_OK);
    gradcheck_opts o = gradcheck_defaults();
    o.seed = 21 + (uint64_t)_i;
    /* Large alpha makes y strongly curved in x; a smaller step keeps the one-sided
     * differences of smooth points within the checker's kink tolerance. */
    o.eps = 2e-3;
    char msg[512];
    ck_assert_msg(gradcheck(l, d, &o, msg, sizeof msg) == 0, "case %d: %s", (int)_i, msg);
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
    const shape4 s = {2, 9, 13, 11};
    layer *l = make_layer(cases[0].cfg, s);
    const size_t total = shape_count(s);
    float *x = test_random_floats(total, 2.0f, 8), *dy = test_random_floats(total, 1.0f, 9);
    float *y[2], *dx[2];
    for (int t = 0; t < 2; t++) {
        omp_set_num_threads(t + 1);
        y[t] = test_random_floats(total, 1.0f, 10);
        dx[t] = test_random_floats(total, 1.0f, 11);
        exec_ctx c = test_ctx(d, 2, 1);
        ck_assert_int_eq(layer_forward(l, &c, x, y[t]), VDNN_OK);
        ck_assert_int_eq(layer_backward(l, &c, x, y[t], dy, dx[t]), VDNN_OK);
    }
    ck_assert_mem_eq(y[0], y[1], total * sizeof(float));
    ck_assert_mem_eq(dx[0], dx[1], total * sizeof(float));
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
    ck_assert_int_eq(config_status("[lrn]\nsize=5\n"), VDNN_OK);
    ck_assert_int_eq(config_status("[lrn]\nsize=15\n"), VDNN_OK);
    ck_assert_int_eq(check_status("[lrn]\nsize=17\n"), VDNN_EINVAL);
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "size"));
    ck_assert_int_eq(check_status("[lrn]\nsize=0\n"), VDNN_EINVAL);
    ck_assert_int_eq(check_status("[lrn]\nalpha=-1\n"), VDNN_EINVAL);
    ck_assert_int_eq(check_status("[lrn]\nbeta=-0.5\n"), VDNN_EINVAL);
    ck_assert_int_eq(check_status("[lrn]\nk=-1\n"), VDNN_EINVAL);
    ck_assert_int_eq(check_status("[lrn]\nbias=1\n"), VDNN_EINVAL);
    /* Even sizes and k = 0 pass the key table and are rejected by setup. */
    ck_assert_int_eq(config_status("[lrn]\nsize=4\n"), VDNN_EINVAL);
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "test.cfg:2"));
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "odd"));
    ck_assert_int_eq(config_status("[lrn]\nk=0\n"), VDNN_EINVAL);
    ck_assert_ptr_eq(layer_find_type("lrn"), &lrn_ops);
    layer *l = make_layer("[lrn]\n", odd_shape);
    char buf[96];
    lrn_ops.describe(l, buf, sizeof buf);
    ck_assert_str_eq(buf, "size 5 alpha 0.0001 beta 0.75 k 1");
    ck_assert_str_eq(l->name, "lrn1");
    ck_assert_int_eq(l->nparams, 0);
    layer_destroy(l, NULL);
}
END_TEST

static Suite *lrn_suite(void)
{
    Suite *s = suite_create("lrn");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_reference, 0, NCASES);
    tcase_add_test(tc, test_partial_batch);
    tcase_add_loop_test(tc, test_gradcheck, 0, NCASES);
    tcase_add_test(tc, test_thread_invariance);
    tcase_add_test(tc, test_config);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tn_run_suite(lrn_suite()); }
