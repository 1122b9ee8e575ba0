/* Tests for inverted dropout: eval is the identity; in training every element is either
 * dropped or scaled by 1 / (1 - p), the kept fraction is close to 1 - p, the mask is a
 * pure function of (seed, layer, step, item, element) (same step, same mask; another
 * step, seed or layer, another mask; micro-batches and thread counts agree), backward
 * regenerates it, the shared gradient checker passes, and the config keys. */
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

extern const layer_ops dropout_ops;

static const shape4 odd_shape = {3, 5, 3, 7};     /* (N, C, H, W) */
static const shape4 big_shape = {4, 16, 32, 32};  /* 65536 elements for the statistics */

static layer *make_layer_at(const char *text, int index, shape4 in) { return test_layer(&dropout_ops, index, text, in); }
static layer *make_layer(const char *text, shape4 in) { return make_layer_at(text, 0, in); }
static vdnn_status config_status(const char *text) { return test_layer_status(&dropout_ops, text, odd_shape); }
/* the key check alone (range and type errors end there) */
static vdnn_status check_status(const char *text) { return test_check_status(&dropout_ops, text); }

static exec_ctx make_ctx(device *d, int n, int train, uint64_t seed, uint64_t step)
{
    exec_ctx c = test_ctx(d, n, train);
    c.seed = seed;
    c.step = step;
    return c;
}

/* Uniform in [1, 2]: never 0, so a zero output means a dropped element. */
static float *positive_floats(size_t n, uint64_t seed)
{
    float *x = malloc(n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    test_fill_uniform(x, n, 0.5f, seed);
    for (size_t i = 0; i < n; i++) x[i] += 1.5f;
    return x;
}

/* y = forward(x) of layer l under c, into a fresh buffer. */
static float *run_forward(layer *l, const exec_ctx *c, const float *x)
{
    float *y = positive_floats(shape_count(l->in), 99);
    ck_assert_msg(layer_forward(l, c, x, y) == VDNN_OK, "%s", vdnn_errmsg());
    return y;
}

static size_t count_differences(const float *a, const float *b, size_t n)
{
    size_t diff = 0;
    for (size_t i = 0; i < n; i++) diff += a[i] != b[i];
    return diff;
}

START_TEST(test_eval_identity)
{
    device *d = test_cpu_device();
    layer *l = make_layer("[dropout]\nprobability=0.4\n", odd_shape);
    ck_assert_int_eq(l->needs_input, 0);
    ck_assert_int_eq(l->needs_output, 0);
    const size_t total = shape_count(odd_shape);
    float *x = positive_floats(total, 1), *dx = positive_floats(total, 2);
    exec_ctx c = make_ctx(d, 3, 0, 7, 3);
    float *y = run_forward(l, &c, x);
    ck_assert_mem_eq(y, x, total * sizeof(float));
    ck_assert_int_eq(layer_backward(l, &c, NULL, NULL, x, dx), VDNN_OK);
    ck_assert_mem_eq(dx, x, total * sizeof(float));
    free(x);
    free(y);
    free(dx);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* Each output is 0 or x / (1 - p); about 1 - p of them are kept; backward uses the
 * same mask and scale. */
START_TEST(test_train_mask)
{
    device *d = test_cpu_device();
    layer *l = make_layer("[dropout]\nprobability=0.3\n", big_shape);
    const size_t total = shape_count(big_shape);
    float *x = positive_floats(total, 3), *dy = positive_floats(total, 4);
    float *dx = positive_floats(total, 5);
    exec_ctx c = make_ctx(d, 4, 1, 7, 3);
    float *y = run_forward(l, &c, x);
    ck_assert_int_eq(layer_backward(l, &c, NULL, NULL, dy, dx), VDNN_OK);
    const float scale = 1.0f / (1.0f - 0.3f);   /* as the layer computes it */
    size_t kept = 0;
    for (size_t i = 0; i < total; i++) {
        if (y[i] == 0.0f) {
            ck_assert_float_eq(dx[i], 0.0f);
            continue;
        }
        kept++;
        ck_assert_float_eq(y[i], x[i] * scale);
        ck_assert_float_eq(dx[i], dy[i] * scale);
    }
    double frac = (double)kept / (double)total;
    ck_assert_msg(fabs(frac - 0.7) < 0.01, "kept fraction %g, want about 0.7", frac);
    free(x);
    free(y);
    free(dy);
    free(dx);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* The mask depends on the step, the seed and the layer, and on nothing else. */
START_TEST(test_mask_reproducible)
{
    device *d = test_cpu_device();
    layer *l = make_layer("[dropout]\n", big_shape);
    layer *other = make_layer_at("[dropout]\n", 1, big_shape);
    const size_t total = shape_count(big_shape);
    float *x = positive_floats(total, 6);
    exec_ctx c = make_ctx(d, 4, 1, 7, 3);
    float *a = run_forward(l, &c, x), *b = run_forward(l, &c, x);
    ck_assert_mem_eq(a, b, total * sizeof(float));
    c.step = 4;
    float *step = run_forward(l, &c, x);
    c.step = 3;
    c.seed = 8;
    float *seed = run_forward(l, &c, x);
    c.seed = 7;
    float *layer2 = run_forward(other, &c, x);
    /* Two independent masks with p = 0.5 disagree on about half the elements. */
    ck_assert_uint_gt(count_differences(a, step, total), total / 3);
    ck_assert_uint_gt(count_differences(a, seed, total), total / 3);
    ck_assert_uint_gt(count_differences(a, layer2, total), total / 3);
    free(x);
    free(a);
    free(b);
    free(step);
    free(seed);
    free(layer2);
    layer_destroy(l, d);
    layer_destroy(other, d);
    device_destroy(d);
}
END_TEST

/* Items 0-1 then item 2 (at item_offset 2) give the mask of all three at once, and
 * so do 1 and 2 threads. */
START_TEST(test_micro_batches_and_threads)
{
    if (UNDER_TSAN) {
        printf("SKIPPED: test_micro_batches_and_threads: runs OpenMP with 2 threads, whose uninstrumented barriers ThreadSanitizer reports\n");
        return;
    }
    device *d = test_cpu_device();
    layer *l = make_layer("[dropout]\n", odd_shape);
    const size_t total = shape_count(odd_shape), per = shape_per_item(odd_shape);
    float *x = positive_floats(total, 9);
    omp_set_num_threads(2);
    exec_ctx c = make_ctx(d, 3, 1, 11, 5);
    float *whole = run_forward(l, &c, x);
    float *parts = positive_floats(total, 10);
    c.n = 2;
    ck_assert_int_eq(layer_forward(l, &c, x, parts), VDNN_OK);
    c.n = 1;
    c.item_offset = 2;
    ck_assert_int_eq(layer_forward(l, &c, x + 2 * per, parts + 2 * per), VDNN_OK);
    ck_assert_mem_eq(whole, parts, total * sizeof(float));
    omp_set_num_threads(1);
    c = make_ctx(d, 3, 1, 11, 5);
    float *single = run_forward(l, &c, x);
    ck_assert_mem_eq(whole, single, total * sizeof(float));
    free(x);
    free(whole);
    free(parts);
    free(single);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

START_TEST(test_zero_probability)
{
    device *d = test_cpu_device();
    layer *l = make_layer("[dropout]\nprobability=0\n", odd_shape);
    const size_t total = shape_count(odd_shape);
    float *x = positive_floats(total, 12);
    exec_ctx c = make_ctx(d, 3, 1, 1, 1);
    float *y = run_forward(l, &c, x);
    ck_assert_mem_eq(y, x, total * sizeof(float));
    ck_assert_int_eq(layer_backward(l, &c, NULL, NULL, x, NULL), VDNN_OK);
    free(x);
    free(y);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* Train with a fixed seed (the same mask in every forward), and eval. */
START_TEST(test_gradcheck)
{
    device *d = test_cpu_device();
    layer *l = make_layer("[dropout]\nprobability=0.25\n", odd_shape);
    ck_assert_int_eq(layer_alloc_params(l, d, 1), VDNN_OK);
    gradcheck_opts o = gradcheck_defaults();
    o.train = _i;
    o.seed = 77;
    char msg[512];
    ck_assert_msg(gradcheck(l, d, &o, msg, sizeof msg) == 0, "train %d: %s", (int)_i, msg);
    o.n = 2;
    ck_assert_msg(gradcheck(l, d, &o, msg, sizeof msg) == 0, "n=2 train %d: %s", (int)_i, msg);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

START_TEST(test_config)
{
    ck_assert_int_eq(config_status("[dropout]\nprobability=0.9\n"), VDNN_OK);
    ck_assert_int_eq(check_status("[dropout]\nprobability=1.5\n"), VDNN_EINVAL);
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "test.cfg:2"));
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "probability"));
    ck_assert_int_eq(check_status("[dropout]\nprobability=-0.5\n"), VDNN_EINVAL);
    ck_assert_int_eq(check_status("[dropout]\nrate=0.5\n"), VDNN_EINVAL);
    /* The key table is inclusive; setup rejects p = 1. */
    ck_assert_int_eq(config_status("[dropout]\nprobability=1\n"), VDNN_EINVAL);
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "probability"));
    ck_assert_ptr_eq(layer_find_type("dropout"), &dropout_ops);
    layer *l = make_layer("[dropout]\n", odd_shape);
    char buf[64];
    dropout_ops.describe(l, buf, sizeof buf);
    ck_assert_str_eq(buf, "p 0.5");
    ck_assert_str_eq(l->name, "dropout1");
    ck_assert_int_eq(l->nparams, 0);
    layer_destroy(l, NULL);
}
END_TEST

static Suite *dropout_suite(void)
{
    Suite *s = suite_create("dropout");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_eval_identity);
    tcase_add_test(tc, test_train_mask);
    tcase_add_test(tc, test_mask_reproducible);
    tcase_add_test(tc, test_micro_batches_and_threads);
    tcase_add_test(tc, test_zero_probability);
    tcase_add_loop_test(tc, test_gradcheck, 0, 2);
    tcase_add_test(tc, test_config);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tn_run_suite(dropout_suite()); }
