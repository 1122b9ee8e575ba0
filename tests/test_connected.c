/* Tests for the fully connected layer: forward and every gradient against a
 * double-precision reference on an odd shape, the shared gradient checker, gradient
 * accumulation, dx == NULL, the parameter declarations and the config keys. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"
#include "tests/gradcheck.h"
#include "tests/testnet.h"
#include "vdnn/config.h"

extern const layer_ops connected_ops;

static const shape4 odd_shape = {3, 5, 3, 7};   /* (N, C, H, W): IN = 105 */
enum { OUT = 4 };

static layer *make_layer(const char *text, shape4 in) { return test_layer(&connected_ops, 0, text, in); }
static vdnn_status config_status(const char *text) { return test_layer_status(&connected_ops, text, odd_shape); }
/* the key check alone (range and type errors end there) */
static vdnn_status check_status(const char *text) { return test_check_status(&connected_ops, text); }

static void expect_close(const float *got, const double *want, size_t n, double tol,
                         const char *what)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs(got[i] - want[i]) <= tol * (1.0 + fabs(want[i])),
                      "%s[%zu]: got %.7g, want %.7g", what, i, got[i], want[i]);
}

/* A layer with allocated params, the bias (zero-initialised) made non-zero. */
static layer *make_ready_layer(device *d, const char *text)
{
    layer *l = make_layer(text, odd_shape);
    ck_assert_int_eq(layer_alloc_params(l, d, 5), VDNN_OK);
    if (l->nparams > 1) test_fill_uniform(l->params[1].value, OUT, 1.0f, 6);
    return l;
}

START_TEST(test_params_declared)
{
    layer *l = make_layer("[connected]\noutput=4\n", odd_shape);
    ck_assert_int_eq(l->nparams, 2);
    ck_assert_int_eq(l->needs_input, 1);
    ck_assert_int_eq(l->needs_output, 0);
    ck_assert_int_eq(l->out.n, 3);
    ck_assert_int_eq(l->out.c, OUT);
    ck_assert_int_eq(l->out.h, 1);
    ck_assert_int_eq(l->out.w, 1);
    const param *w = &l->params[0], *b = &l->params[1];
    ck_assert_str_eq(w->name, "weights");
    ck_assert_int_eq(w->shape.n, OUT);
    ck_assert_int_eq(w->shape.c, 105);
    ck_assert_int_eq(w->init, INIT_LINEAR);
    ck_assert_int_eq(w->fan_in, 105);
    ck_assert_int_eq(w->decay, 1);
    ck_assert_int_eq(w->trainable, 1);
    ck_assert_str_eq(b->name, "bias");
    ck_assert_int_eq(b->shape.n, OUT);
    ck_assert_int_eq((int)shape_count(b->shape), OUT);
    ck_assert_int_eq(b->init, INIT_ZERO);
    ck_assert_int_eq(b->decay, 0);
    ck_assert_int_eq(b->trainable, 1);
    ck_assert_str_eq(l->name, "fc1");
    char buf[64];
    connected_ops.describe(l, buf, sizeof buf);
    ck_assert_str_eq(buf, "105 -> 4");
    layer_destroy(l, NULL);

    l = make_layer("[connected]\noutput=4\nbias=0\n", odd_shape);
    ck_assert_int_eq(l->nparams, 1);
    connected_ops.describe(l, buf, sizeof buf);
    ck_assert_str_eq(buf, "105 -> 4 nobias");
    layer_destroy(l, NULL);
}
END_TEST

/* y (n, OUT) = b + W x, for n = 1..3 of the 3 items; with and without a bias. */
START_TEST(test_forward_reference)
{
    device *d = test_cpu_device();
    layer *l = make_ready_layer(d, _i ? "[connected]\noutput=4\nbias=0\n"
                                      : "[connected]\noutput=4\n");
    const int in = 105;
    const float *w = l->params[0].value, *b = _i ? NULL : l->params[1].value;
    float *x = test_random_floats(shape_count(odd_shape), 1.0f, 7);
    float y[3 * OUT];
    double want[3 * OUT];
    for (int n = 1; n <= 3; n++) {
        for (int i = 0; i < 3 * OUT; i++) y[i] = 777.0f;
        exec_ctx c = test_ctx(d, n, 1);
        ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
        for (int i = 0; i < n; i++)
            for (int o = 0; o < OUT; o++) {
                double s = b ? b[o] : 0.0;
                for (int k = 0; k < in; k++) s += (double)w[o * in + k] * x[i * in + k];
                want[i * OUT + o] = s;
            }
        expect_close(y, want, (size_t)n * OUT, 1e-5, "y");
        for (int i = n * OUT; i < 3 * OUT; i++) ck_assert_float_eq(y[i], 777.0f);
    }
    free(x);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* dW = dy^T x, db = sum dy, dx = dy W against a reference; accumulate adds to the
 * gradients; dx == NULL gives the same parameter gradients. */
START_TEST(test_backward_reference)
{
    device *d = test_cpu_device();
    layer *l = make_ready_layer(d, "[connected]\noutput=4\n");
    const int in = 105, n = 2;
    const float *w = l->params[0].value;
    float *dw = l->params[0].grad, *db = l->params[1].grad;
    float *x = test_random_floats(shape_count(odd_shape), 1.0f, 8);
    float *dy = test_random_floats(3 * OUT, 1.0f, 9);
    float *dx = test_random_floats(shape_count(odd_shape), 1.0f, 10);
    double *want_dw = calloc((size_t)OUT * in, sizeof *want_dw);
    double want_db[OUT] = {0}, *want_dx = calloc((size_t)n * in, sizeof *want_dx);
    ck_assert_ptr_nonnull(want_dw);
    ck_assert_ptr_nonnull(want_dx);
    for (int i = 0; i < n; i++)
        for (int o = 0; o < OUT; o++) {
            want_db[o] += dy[i * OUT + o];
            for (int k = 0; k < in; k++) {
                want_dw[o * in + k] += (double)dy[i * OUT + o] * x[i * in + k];
                want_dx[i * in + k] += (double)dy[i * OUT + o] * w[o * in + k];
            }
        }
    /* Without accumulate, stale gradients are overwritten. */
    test_fill_uniform(dw, (size_t)OUT * in, 5.0f, 11);
    test_fill_uniform(db, OUT, 5.0f, 12);
    exec_ctx c = test_ctx(d, n, 1);
    ck_assert_int_eq(layer_backward(l, &c, x, NULL, dy, dx), VDNN_OK);
    expect_close(dw, want_dw, (size_t)OUT * in, 1e-5, "dW");
    expect_close(db, want_db, OUT, 1e-5, "db");
    expect_close(dx, want_dx, (size_t)n * in, 1e-5, "dx");

    c.accumulate = 1;
    ck_assert_int_eq(layer_backward(l, &c, x, NULL, dy, NULL), VDNN_OK);
    for (int k = 0; k < OUT * in; k++) want_dw[k] *= 2;
    for (int o = 0; o < OUT; o++) want_db[o] *= 2;
    expect_close(dw, want_dw, (size_t)OUT * in, 1e-5, "accumulated dW");
    expect_close(db, want_db, OUT, 1e-5, "accumulated db");
    free(x);
    free(dy);
    free(dx);
    free(want_dw);
    free(want_dx);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

START_TEST(test_gradcheck)
{
    device *d = test_cpu_device();
    layer *l = make_ready_layer(d, _i ? "[connected]\noutput=4\nbias=0\n"
                                      : "[connected]\noutput=4\n");
    gradcheck_opts o = gradcheck_defaults();
    o.n = 3;
    o.seed = 41 + (uint64_t)_i;
    char msg[512];
    ck_assert_msg(gradcheck(l, d, &o, msg, sizeof msg) == 0, "%s", msg);
    o.n = 1;
    ck_assert_msg(gradcheck(l, d, &o, msg, sizeof msg) == 0, "n=1: %s", msg);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

START_TEST(test_config)
{
    ck_assert_int_eq(config_status("[connected]\noutput=10\n"), VDNN_OK);
    ck_assert_int_eq(check_status("[connected]\n"), VDNN_EINVAL);
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "output"));
    ck_assert_int_eq(check_status("[connected]\noutput=0\n"), VDNN_EINVAL);
    ck_assert_int_eq(check_status("[connected]\noutput=2000000\n"), VDNN_EINVAL);
    ck_assert_int_eq(check_status("[connected]\noutput=4.5\n"), VDNN_EINVAL);
    ck_assert_int_eq(check_status("[connected]\noutput=4\nbias=2\n"), VDNN_EINVAL);
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "test.cfg:3"));
    ck_assert_int_eq(check_status("[connected]\noutput=4\nsize=3\n"), VDNN_EINVAL);
    ck_assert_ptr_eq(layer_find_type("connected"), &connected_ops);
}
END_TEST

static Suite *connected_suite(void)
{
    Suite *s = suite_create("connected");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_params_declared);
    tcase_add_loop_test(tc, test_forward_reference, 0, 2);
    tcase_add_test(tc, test_backward_reference);
    tcase_add_loop_test(tc, test_gradcheck, 0, 2);
    tcase_add_test(tc, test_config);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tn_run_suite(connected_suite()); }
