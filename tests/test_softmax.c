/* Tests for the softmax cross-entropy loss layer: probabilities against a double
 * reference over C*H*W per item, the loss for known logits, correct counts, finiteness
 * for huge logits, the gradient (p - onehot) * grad_scale with and without the shared
 * checker, label validation and the exec_ctx conventions. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"
#include "tests/gradcheck.h"
#include "tests/testnet.h"
#include "vdnn/config.h"

extern const layer_ops softmax_ops;

static const shape4 odd_shape = {3, 5, 3, 7};   /* (N, C, H, W): 105 classes per item */

static layer *make_layer(shape4 in) { return test_layer(&softmax_ops, 0, "[softmax]\n", in); }

/* A context that collects the loss and the correct count into *loss and *correct. */
static exec_ctx make_ctx(device *d, int n, const int32_t *labels, double *loss, int *correct)
{
    exec_ctx c = test_ctx(d, n, 1);
    c.labels = labels;
    c.loss_sum = loss;
    c.correct = correct;
    return c;
}

/* The reference: probabilities of one item (D) in double, its loss and argmax. */
static double ref_item(const float *x, size_t d, int label, double *p, size_t *argmax)
{
    size_t best = 0;
    for (size_t j = 1; j < d; j++)
        if (x[j] > x[best]) best = j;
    double sum = 0.0;
    for (size_t j = 0; j < d; j++) sum += exp((double)x[j] - x[best]);
    for (size_t j = 0; j < d; j++) p[j] = exp((double)x[j] - x[best]) / sum;
    *argmax = best;
    return -log(p[label]);
}

START_TEST(test_forward_reference)
{
    device *d = test_cpu_device();
    layer *l = make_layer(odd_shape);
    ck_assert_int_eq(l->is_loss, 1);
    ck_assert_int_eq(l->needs_output, 1);
    ck_assert_int_eq(l->needs_input, 0);
    const size_t dim = shape_per_item(odd_shape), total = shape_count(odd_shape);
    float *x = test_random_floats(total, 4.0f, 1), *y = test_random_floats(total, 1.0f, 2);
    /* Item 1's label is its argmax, so exactly one of the first two is correct. */
    int32_t labels[3] = {17, 0, 104};
    size_t best;
    double p[105];
    ref_item(x + dim, dim, 0, p, &best);
    labels[1] = (int32_t)best;
    for (int n = 1; n <= 3; n++) {
        double loss = 0.5, want_loss = 0.5;
        int correct = 2, want_correct = 2;
        exec_ctx c = make_ctx(d, n, labels, &loss, &correct);
        ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
        for (int i = 0; i < n; i++) {
            want_loss += ref_item(x + i * dim, dim, labels[i], p, &best);
            want_correct += (size_t)labels[i] == best;
            double sum = 0.0;
            for (size_t j = 0; j < dim; j++) {
                float got = y[i * dim + j];
                ck_assert_msg(fabs(got - p[j]) <= 1e-6 * (1 + p[j]), "p[%d][%zu]: %g vs %g", i,
                              j, got, p[j]);
                sum += got;
            }
            ck_assert_double_eq_tol(sum, 1.0, 1e-5);
        }
        ck_assert_double_eq_tol(loss, want_loss, 1e-9 * fabs(want_loss) + 1e-5);
        ck_assert_int_eq(correct, want_correct);
    }
    free(x);
    free(y);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* Logits (1, 2, 3): p = e^k / (e + e^2 + e^3), loss -log p[label]. */
START_TEST(test_known_logits)
{
    device *d = test_cpu_device();
    layer *l = make_layer(shape_make(2, 3, 1, 1));
    const float x[6] = {1, 2, 3, 3, 2, 1};
    const int32_t labels[2] = {2, 1};
    float y[6];
    double loss = 0.0;
    int correct = 0;
    exec_ctx c = make_ctx(d, 2, labels, &loss, &correct);
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
    const double z = exp(1.0) + exp(2.0) + exp(3.0);
    ck_assert_double_eq_tol(y[0], exp(1.0) / z, 1e-7);
    ck_assert_double_eq_tol(y[2], exp(3.0) / z, 1e-7);
    ck_assert_double_eq_tol(y[3], exp(3.0) / z, 1e-7);
    ck_assert_double_eq_tol(loss, -log(exp(3.0) / z) - log(exp(2.0) / z), 1e-6);
    ck_assert_int_eq(correct, 1);

    /* Either counter may be NULL; without labels nothing is counted at all. */
    c.correct = NULL;
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
    ck_assert_int_eq(correct, 1);
    c.loss_sum = NULL;
    c.correct = &correct;
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
    ck_assert_int_eq(correct, 2);
    c.labels = NULL;
    c.loss_sum = &loss;
    double before = loss;
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
    ck_assert_double_eq(loss, before);
    ck_assert_int_eq(correct, 2);
    ck_assert_double_eq_tol(y[0], exp(1.0) / z, 1e-7);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* Huge logits: probabilities underflow to 0 but the loss stays finite and exact. */
START_TEST(test_huge_logits)
{
    device *d = test_cpu_device();
    layer *l = make_layer(shape_make(3, 3, 1, 1));
    const float x[9] = {1e30f, -1e30f, 0.0f, 100.0f, -100.0f, 0.0f, 3e38f, 3e38f, -3e38f};
    const int32_t labels[3] = {1, 1, 2};
    float y[9], dx[9];
    double loss = 0.0;
    int correct = 0;
    exec_ctx c = make_ctx(d, 3, labels, &loss, &correct);
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
    ck_assert_msg(isfinite(loss), "loss %g", loss);
    const double want = 2e30 + 200.0 + (3e38 + log(2.0) + 3e38);
    ck_assert_double_eq_tol(loss, want, 1e-6 * want);
    ck_assert_float_eq(y[1], 0.0f);
    ck_assert_float_eq(y[0], 1.0f);
    ck_assert_float_eq_tol(y[6], 0.5f, 1e-7f);
    ck_assert_int_eq(correct, 0);
    for (int i = 0; i < 9; i++) ck_assert_float_finite(y[i]);
    ck_assert_int_eq(layer_backward(l, &c, NULL, y, NULL, dx), VDNN_OK);
    for (int i = 0; i < 9; i++) ck_assert_float_finite(dx[i]);
    ck_assert_float_eq(dx[1], -1.0f);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* dx = (p - onehot) * grad_scale, whatever dy holds (here NULL); dx == NULL is fine. */
START_TEST(test_backward_reference)
{
    device *d = test_cpu_device();
    layer *l = make_layer(odd_shape);
    const size_t dim = shape_per_item(odd_shape), total = shape_count(odd_shape);
    float *x = test_random_floats(total, 3.0f, 5), *y = test_random_floats(total, 1.0f, 6);
    float *dx = test_random_floats(total, 1.0f, 7);
    const int32_t labels[3] = {3, 99, 0};
    exec_ctx c = make_ctx(d, 2, labels, NULL, NULL);
    c.grad_scale = 0.25f;
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
    const float untouched = dx[2 * dim];
    ck_assert_int_eq(layer_backward(l, &c, NULL, y, NULL, dx), VDNN_OK);
    for (int i = 0; i < 2; i++)
        for (size_t j = 0; j < dim; j++) {
            double want = ((double)y[i * dim + j] - ((size_t)labels[i] == j)) * 0.25;
            ck_assert_double_eq_tol(dx[i * dim + j], want, 1e-7);
        }
    ck_assert_float_eq(dx[2 * dim], untouched);
    ck_assert_int_eq(layer_backward(l, &c, NULL, y, NULL, NULL), VDNN_OK);
    free(x);
    free(y);
    free(dx);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

START_TEST(test_bad_labels)
{
    device *d = test_cpu_device();
    layer *l = make_layer(shape_make(2, 3, 1, 1));
    const float x[6] = {1, 2, 3, 3, 2, 1};
    float y[6], dx[6];
    double loss = 0.0;
    const int32_t high[2] = {0, 3}, negative[2] = {-1, 0};
    exec_ctx c = make_ctx(d, 2, high, &loss, NULL);
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_EINVAL);
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "label 3"));
    ck_assert_int_eq(layer_backward(l, &c, NULL, y, NULL, dx), VDNN_EINVAL);
    c.labels = negative;
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_EINVAL);
    c.labels = NULL;
    ck_assert_int_eq(layer_backward(l, &c, NULL, y, NULL, dx), VDNN_EINVAL);
    ck_assert_double_eq(loss, 0.0);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* Classes over C only (N, C, 1, 1) and over C*H*W, with several grad scales. */
START_TEST(test_gradcheck)
{
    device *d = test_cpu_device();
    layer *l = make_layer(_i ? odd_shape : shape_make(4, 10, 1, 1));
    ck_assert_int_eq(layer_alloc_params(l, d, 1), VDNN_OK);
    gradcheck_opts o = gradcheck_defaults();
    o.seed = 9 + (uint64_t)_i;
    char msg[512];
    ck_assert_msg(gradcheck(l, d, &o, msg, sizeof msg) == 0, "%s", msg);
    o.n = 2;
    o.num_classes = 3;
    ck_assert_msg(gradcheck(l, d, &o, msg, sizeof msg) == 0, "n=2: %s", msg);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

START_TEST(test_config)
{
    cfg_file *f;
    ck_assert_int_eq(cfg_parse("[softmax]\nclasses=3\n", "test", &f), VDNN_OK);
    ck_assert_int_eq(cfg_check(f, &f->sec[0], softmax_ops.keys), VDNN_EINVAL);
    cfg_free(f);
    ck_assert_ptr_eq(layer_find_type("softmax"), &softmax_ops);
    layer *l = make_layer(odd_shape);
    ck_assert_str_eq(l->name, "softmax1");
    ck_assert_int_eq(l->nparams, 0);
    ck_assert_int_eq((int)shape_count(l->out), (int)shape_count(odd_shape));
    layer_destroy(l, NULL);
}
END_TEST

static Suite *softmax_suite(void)
{
    Suite *s = suite_create("softmax");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_forward_reference);
    tcase_add_test(tc, test_known_logits);
    tcase_add_test(tc, test_huge_logits);
    tcase_add_test(tc, test_backward_reference);
    tcase_add_test(tc, test_bad_labels);
    tcase_add_loop_test(tc, test_gradcheck, 0, 2);
    tcase_add_test(tc, test_config);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tn_run_suite(softmax_suite()); }
