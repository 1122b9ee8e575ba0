/* Tests for the elementwise activations (relu, leaky, tanh, sigmoid): forward against a
 * double-precision reference, backward with the shared gradient checker and against
 * the closed-form derivative, the config keys, and the exec_ctx conventions. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"
#include "tests/gradcheck.h"
#include "tests/testnet.h"
#include "vdnn/config.h"

extern const layer_ops relu_ops, leaky_ops, tanh_ops, sigmoid_ops, clip_ops;

static const shape4 odd_shape = {3, 5, 3, 7};   /* (N, C, H, W) */

static layer *make_layer(const layer_ops *ops, const char *text, shape4 in) { return test_layer(ops, 0, text, in); }
static vdnn_status config_status(const layer_ops *ops, const char *text)
{
    return test_layer_status(ops, text, odd_shape);
}

static exec_ctx make_ctx(device *d, int n, int train)
{
    exec_ctx c = test_ctx(d, n, train);
    c.seed = 1234;
    return c;
}

/* The reference activation and its derivative, in double. */
typedef enum { ACT_RELU, ACT_LEAKY, ACT_TANH, ACT_SIGMOID, ACT_CLIP } act_kind;

/* clip's bounds (ref_act's `slope` is hi for ACT_CLIP) */
static double clip_lo(double hi) { return hi == 6 ? 0 : -1; }

static double ref_act(act_kind k, double x, double slope)
{
    switch (k) {
    case ACT_RELU: return x > 0 ? x : 0;
    case ACT_LEAKY: return x > 0 ? x : slope * x;
    case ACT_TANH: return tanh(x);
    case ACT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case ACT_CLIP: return fmin(fmax(x, clip_lo(slope)), slope);
    }
    return 0;
}

static double ref_grad(act_kind k, double x, double slope)
{
    switch (k) {
    case ACT_RELU: return x > 0 ? 1 : 0;
    case ACT_LEAKY: return x > 0 ? 1 : slope;
    case ACT_TANH: return 1.0 - tanh(x) * tanh(x);
    case ACT_SIGMOID: {
        double s = 1.0 / (1.0 + exp(-x));
        return s * (1.0 - s);
    }
    case ACT_CLIP: return x > clip_lo(slope) && x < slope ? 1 : 0;
    }
    return 0;
}

static const struct {
    const layer_ops *ops;
    const char *cfg;
    act_kind kind;
    double slope;
} cases[] = {
    {&relu_ops, "[relu]\n", ACT_RELU, 0},
    {&leaky_ops, "[leaky]\n", ACT_LEAKY, 0.01},
    {&leaky_ops, "[leaky]\nslope=0.2\n", ACT_LEAKY, 0.2},
    {&tanh_ops, "[tanh]\n", ACT_TANH, 0},
    {&sigmoid_ops, "[sigmoid]\n", ACT_SIGMOID, 0},
    /* ReLU6, and bounds on both sides of 0 (slope: the upper bound) */
    {&clip_ops, "[clip]\n", ACT_CLIP, 6},
    {&clip_ops, "[clip]\nmin=-1\nmax=0.5\n", ACT_CLIP, 0.5},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

/* Forward and backward of case _i on n of the 3 items, against the reference; the
 * entries past item n stay untouched. */
START_TEST(test_forward_backward_reference)
{
    device *d = test_cpu_device();
    layer *l = make_layer(cases[_i].ops, cases[_i].cfg, odd_shape);
    ck_assert_int_eq(l->needs_output, 1);
    ck_assert_int_eq(l->needs_input, 0);
    const size_t total = shape_count(odd_shape), per = shape_per_item(odd_shape);
    float *x = test_random_floats(total, 6.0f, 11), *dy = test_random_floats(total, 1.0f, 12);
    float *y = test_random_floats(total, 1.0f, 13), *dx = test_random_floats(total, 1.0f, 14);
    const float sentinel = 12345.0f;
    for (int n = 1; n <= odd_shape.n; n++) {
        for (size_t i = 0; i < total; i++) y[i] = dx[i] = sentinel;
        exec_ctx c = make_ctx(d, n, 1);
        ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
        ck_assert_int_eq(layer_backward(l, &c, NULL, y, dy, dx), VDNN_OK);
        for (size_t i = 0; i < total; i++) {
            if (i >= (size_t)n * per) {
                ck_assert_float_eq(y[i], sentinel);
                ck_assert_float_eq(dx[i], sentinel);
                continue;
            }
            double ry = ref_act(cases[_i].kind, x[i], cases[_i].slope);
            double rdx = dy[i] * ref_grad(cases[_i].kind, x[i], cases[_i].slope);
            ck_assert_msg(fabs(y[i] - ry) <= 1e-6 * (1 + fabs(ry)), "y[%zu] %g vs %g", i, y[i], ry);
            ck_assert_msg(fabs(dx[i] - rdx) <= 1e-5 * (1 + fabs(rdx)), "dx[%zu] %g vs %g", i,
                          dx[i], rdx);
        }
    }
    free(x);
    free(dy);
    free(y);
    free(dx);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

START_TEST(test_gradcheck)
{
    device *d = test_cpu_device();
    layer *l = make_layer(cases[_i].ops, cases[_i].cfg, odd_shape);
    ck_assert_int_eq(layer_alloc_params(l, d, 1), VDNN_OK);
    gradcheck_opts o = gradcheck_defaults();
    o.n = 3;
    o.seed = 100 + (uint64_t)_i;
    char msg[512];
    ck_assert_msg(gradcheck(l, d, &o, msg, sizeof msg) == 0, "%s: %s", l->name, msg);
    o.n = 2;
    ck_assert_msg(gradcheck(l, d, &o, msg, sizeof msg) == 0, "%s n=2: %s", l->name, msg);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* Extreme inputs stay finite and saturate where they should. */
START_TEST(test_saturation)
{
    device *d = test_cpu_device();
    const float x[4] = {-1e30f, -100.0f, 100.0f, 1e30f};
    float y[4];
    exec_ctx c = make_ctx(d, 1, 1);
    layer *l = make_layer(&sigmoid_ops, "[sigmoid]\n", shape_make(1, 4, 1, 1));
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
    ck_assert_float_eq(y[0], 0.0f);
    ck_assert_float_eq(y[3], 1.0f);
    for (int i = 0; i < 4; i++) ck_assert_float_finite(y[i]);
    layer_destroy(l, d);
    l = make_layer(&tanh_ops, "[tanh]\n", shape_make(1, 4, 1, 1));
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
    ck_assert_float_eq(y[0], -1.0f);
    ck_assert_float_eq(y[3], 1.0f);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* At x = 0 relu and leaky take the "negative" branch, like PyTorch. */
START_TEST(test_kink_at_zero)
{
    device *d = test_cpu_device();
    const float x[2] = {0.0f, -0.0f}, dy[2] = {1.0f, 1.0f};
    float y[2], dx[2];
    exec_ctx c = make_ctx(d, 1, 1);
    layer *l = make_layer(&leaky_ops, "[leaky]\nslope=0.25\n", shape_make(1, 2, 1, 1));
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
    ck_assert_int_eq(layer_backward(l, &c, NULL, y, dy, dx), VDNN_OK);
    ck_assert_float_eq(dx[0], 0.25f);
    ck_assert_float_eq(dx[1], 0.25f);
    layer_destroy(l, d);
    l = make_layer(&relu_ops, "[relu]\n", shape_make(1, 2, 1, 1));
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
    ck_assert_int_eq(layer_backward(l, &c, NULL, y, dy, dx), VDNN_OK);
    ck_assert_float_eq(dx[0], 0.0f);
    ck_assert_float_eq(dx[1], 0.0f);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

START_TEST(test_dx_null)
{
    device *d = test_cpu_device();
    layer *l = make_layer(cases[_i].ops, cases[_i].cfg, odd_shape);
    const size_t total = shape_count(odd_shape);
    float *x = test_random_floats(total, 2.0f, 3), *y = test_random_floats(total, 1.0f, 4);
    exec_ctx c = make_ctx(d, 3, 1);
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
    ck_assert_int_eq(layer_backward(l, &c, NULL, y, x, NULL), VDNN_OK);
    free(x);
    free(y);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

START_TEST(test_config)
{
    ck_assert_int_eq(test_check_status(&leaky_ops, "[leaky]\nslope=1.5\n"), VDNN_EINVAL);
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "test.cfg:2"));
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "slope"));
    ck_assert_int_eq(test_check_status(&leaky_ops, "[leaky]\nslope=-0.1\n"), VDNN_EINVAL);
    ck_assert_int_eq(test_check_status(&leaky_ops, "[leaky]\nslope=abc\n"), VDNN_EINVAL);
    ck_assert_int_eq(test_check_status(&relu_ops, "[relu]\nslope=0.1\n"), VDNN_EINVAL);
    ck_assert_int_eq(test_check_status(&tanh_ops, "[tanh]\nsize=1\n"), VDNN_EINVAL);
    ck_assert_int_eq(test_check_status(&sigmoid_ops, "[sigmoid]\nsize=1\n"), VDNN_EINVAL);
    /* The key table is inclusive; setup rejects the open end. */
    ck_assert_int_eq(test_check_status(&leaky_ops, "[leaky]\nslope=1\n"), VDNN_OK);
    ck_assert_int_eq(config_status(&leaky_ops, "[leaky]\nslope=1\n"), VDNN_EINVAL);
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "slope"));
    ck_assert_int_eq(config_status(&leaky_ops, "[leaky]\nslope=0\n"), VDNN_OK);
    ck_assert_ptr_eq(layer_find_type("relu"), &relu_ops);
    ck_assert_ptr_eq(layer_find_type("leaky"), &leaky_ops);
    ck_assert_ptr_eq(layer_find_type("tanh"), &tanh_ops);
    ck_assert_ptr_eq(layer_find_type("sigmoid"), &sigmoid_ops);
    ck_assert_ptr_eq(layer_find_type("clip"), &clip_ops);
    /* clip: min below max, both numbers, named with file:line */
    ck_assert_int_eq(config_status(&clip_ops, "[clip]\nmin=1\nmax=1\n"), VDNN_EINVAL);
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "test.cfg:3"));
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "max"));
    ck_assert_int_eq(config_status(&clip_ops, "[clip]\nmin=7\n"), VDNN_EINVAL);
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "test.cfg:2"));
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "min"));
    ck_assert_int_eq(test_check_status(&clip_ops, "[clip]\nmax=six\n"), VDNN_EINVAL);
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "test.cfg:2"));
    ck_assert_int_eq(test_check_status(&clip_ops, "[clip]\nslope=1\n"), VDNN_EINVAL);
    ck_assert_int_eq(config_status(&clip_ops, "[clip]\nmin=-2\nmax=-1\n"), VDNN_OK);

    layer *l = make_layer(&leaky_ops, "[leaky]\n", odd_shape);
    char buf[64];
    leaky_ops.describe(l, buf, sizeof buf);
    ck_assert_str_eq(buf, "slope 0.01");
    ck_assert_str_eq(l->name, "leaky1");
    ck_assert_int_eq(l->out.c, 5);
    ck_assert_int_eq(l->out.w, 7);
    layer_destroy(l, NULL);
}
END_TEST

static Suite *activation_suite(void)
{
    Suite *s = suite_create("activation");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_forward_backward_reference, 0, NCASES);
    tcase_add_loop_test(tc, test_gradcheck, 0, NCASES);
    tcase_add_loop_test(tc, test_dx_null, 0, NCASES);
    tcase_add_test(tc, test_saturation);
    tcase_add_test(tc, test_kink_at_zero);
    tcase_add_test(tc, test_config);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tn_run_suite(activation_suite()); }
