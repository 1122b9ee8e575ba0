/* Tests for the logistic (binary cross-entropy) and L2 loss layers: outputs, summed
 * losses, correct counts and gradients against a double reference, for one output
 * (targets 0 and 1) and for several (one-hot targets); known values and finiteness for
 * huge inputs; the shared gradient checker; label validation; and nets of one output,
 * which parse, report two classes and train. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"
#include "layers/loss.h"
#include "nets/net.h"
#include "tests/gradcheck.h"
#include "tests/testnet.h"

extern const layer_ops logistic_ops, l2_ops;

typedef struct loss_case {
    int kind;     /* LOSS_LOGISTIC or LOSS_L2 */
    shape4 in;
} loss_case;

static const loss_case cases[] = {
    {LOSS_LOGISTIC, {7, 1, 1, 1}},
    {LOSS_LOGISTIC, {4, 5, 1, 1}},
    {LOSS_L2, {7, 1, 1, 1}},
    {LOSS_L2, {4, 3, 2, 2}},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static const layer_ops *ops_of(int kind) { return kind == LOSS_LOGISTIC ? &logistic_ops : &l2_ops; }

static layer *make_layer(const loss_case *k)
{
    return test_layer(ops_of(k->kind), 0, k->kind == LOSS_LOGISTIC ? "[logistic]\n" : "[l2]\n", k->in);
}

/* The reference for one item of d outputs: y, the loss, dx for grad scale g, the hit. */
static double ref_item(int kind, const float *x, size_t d, int label, double g, double *y, double *dx, int *hit)
{
    double loss = 0.0;
    size_t best = 0;
    for (size_t j = 0; j < d; j++) {
        const double v = x[j], t = d == 1 ? label : (j == (size_t)label);
        const double p = 1.0 / (1.0 + exp(-v));
        y[j] = kind == LOSS_LOGISTIC ? p : v;
        loss += kind == LOSS_LOGISTIC ? -(t * log(p) + (1 - t) * log(1 - p)) : 0.5 * (v - t) * (v - t);
        dx[j] = (y[j] - t) * g;
        if (x[j] > x[best]) best = j;
    }
    if (d > 1) *hit = best == (size_t)label;
    else *hit = kind == LOSS_LOGISTIC ? (x[0] > 0) == (label == 1) : fabs(x[0] - label) < 0.5;
    return loss;
}

static exec_ctx loss_ctx(device *d, int n, const int32_t *labels, double *loss, int *correct)
{
    exec_ctx c = test_ctx(d, n, 1);
    c.labels = labels;
    c.loss_sum = loss;
    c.correct = correct;
    c.grad_scale = 1.0f / (float)n;
    return c;
}

/* Forward and backward on the whole batch and on one item, against the reference. */
START_TEST(test_reference)
{
    const loss_case *k = &cases[_i];
    device *d = test_cpu_device();
    layer *l = make_layer(k);
    ck_assert_int_eq(l->is_loss, 1);
    ck_assert_int_eq(l->needs_output, 1);
    ck_assert_int_eq(l->needs_input, 0);
    const size_t dim = shape_per_item(k->in), total = shape_count(k->in);
    const int classes = l->ops->loss_classes(l);
    ck_assert_int_eq(classes, dim == 1 ? 2 : (int)dim);
    float *x = test_random_floats(total, 3.0f, 1 + (uint64_t)_i), *y = malloc(total * sizeof *y);
    float *dx = malloc(total * sizeof *dx);
    double *ry = malloc(total * sizeof *ry), *rdx = malloc(total * sizeof *rdx);
    ck_assert(y && dx && ry && rdx);
    int32_t labels[8];
    for (int i = 0; i < k->in.n; i++) labels[i] = (int32_t)((i * 3 + 1) % classes);
    for (int n = k->in.n; n >= 1; n -= k->in.n - 1) {
        double loss = 0.0, want_loss = 0.0;
        int correct = 0, want_correct = 0;
        exec_ctx c = loss_ctx(d, n, labels, &loss, &correct);
        ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_OK);
        ck_assert_int_eq(layer_backward(l, &c, x, y, NULL, dx), VDNN_OK);
        for (int i = 0; i < n; i++) {
            int hit;
            want_loss += ref_item(k->kind, x + i * dim, dim, labels[i], 1.0 / n, ry + i * dim, rdx + i * dim, &hit);
            want_correct += hit;
        }
        ck_assert_msg(fabs(loss - want_loss) <= 1e-9 * (1 + want_loss), "loss %.12g, want %.12g", loss, want_loss);
        ck_assert_int_eq(correct, want_correct);
        for (size_t e = 0; e < (size_t)n * dim; e++) {
            ck_assert_msg(fabs(y[e] - ry[e]) <= 1e-6 * (1 + fabs(ry[e])), "y[%zu] %g, want %g", e, y[e], ry[e]);
            ck_assert_msg(fabs(dx[e] - rdx[e]) <= 1e-6, "dx[%zu] %g, want %g", e, dx[e], rdx[e]);
        }
        if (n == 1) break;
    }
    free(x), free(y), free(dx), free(ry), free(rdx);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

START_TEST(test_gradcheck)
{
    const loss_case *k = &cases[_i];
    device *d = test_cpu_device();
    layer *l = make_layer(k);
    gradcheck_opts o = gradcheck_defaults();
    o.seed = 40 + (uint64_t)_i;
    o.num_classes = l->ops->loss_classes(l);
    char msg[512];
    ck_assert_msg(gradcheck(l, d, &o, msg, sizeof msg) == 0, "%s: %s", l->name, msg);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* Known values: x = 0 costs log 2 whatever the label; a huge wrong logit costs about
 * itself and stays finite; l2 of one output regresses onto the label. */
START_TEST(test_known_values)
{
    device *d = test_cpu_device();
    layer *lg = make_layer(&cases[0]), *l2 = make_layer(&cases[2]);
    float x[7] = {0.0f, 0.0f, 100.0f, -100.0f, 1e30f, 0.7f, 0.2f}, y[7], dx[7];
    const int32_t labels[7] = {0, 1, 0, 0, 1, 1, 0};
    double loss = 0.0;
    int correct = 0;
    exec_ctx c = loss_ctx(d, 4, labels, &loss, &correct);
    ck_assert_int_eq(layer_forward(lg, &c, x, y), VDNN_OK);
    ck_assert_double_eq_tol(loss, 2 * log(2.0) + 100.0, 1e-9);
    ck_assert_int_eq(correct, 2);   /* x = 0 and x = -100 predict 0, their labels */
    loss = 0.0, correct = 0;
    c = loss_ctx(d, 7, labels, &loss, &correct);
    ck_assert_int_eq(layer_forward(lg, &c, x, y), VDNN_OK);
    ck_assert(isfinite(loss));
    ck_assert_int_eq(layer_backward(lg, &c, x, y, NULL, dx), VDNN_OK);
    ck_assert_float_eq_tol(dx[2], 1.0f / 7.0f, 1e-6f);   /* p = 1, t = 0 */
    loss = 0.0, correct = 0;
    c = loss_ctx(d, 2, labels + 5, &loss, &correct);
    ck_assert_int_eq(layer_forward(l2, &c, x + 5, y), VDNN_OK);
    ck_assert_double_eq_tol(loss, 0.5 * (0.3 * 0.3 + 0.2 * 0.2), 1e-6);
    ck_assert_int_eq(correct, 2);   /* 0.7 rounds to 1, 0.2 to 0 */
    layer_destroy(lg, d);
    layer_destroy(l2, d);
    device_destroy(d);
}
END_TEST

/* A label outside [0, classes) fails forward and backward with the layer's name. */
START_TEST(test_bad_labels)
{
    const loss_case *k = &cases[_i];
    device *d = test_cpu_device();
    layer *l = make_layer(k);
    const size_t total = shape_count(k->in);
    float *x = test_random_floats(total, 1.0f, 5), *y = malloc(total * sizeof *y), *dx = malloc(total * sizeof *dx);
    ck_assert(y && dx);
    int32_t labels[8] = {0};
    labels[1] = l->ops->loss_classes(l);
    double loss = 0.0;
    exec_ctx c = loss_ctx(d, 2, labels, &loss, NULL);
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_EINVAL);
    tn_msg_has(l->name, "label");
    labels[1] = -1;
    ck_assert_int_eq(layer_backward(l, &c, x, y, NULL, dx), VDNN_EINVAL);
    tn_msg_has("item 1", "outside");
    free(x), free(y), free(dx);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* ---- nets of one output ---- */

#define ONE_HEAD                                                                                  \
    "[net]\nbatch = 16\nchannels = 1\nheight = 8\nwidth = 8\n"                                      \
    "[train]\nepochs = 1\nlearning_rate = 0.1\nmomentum = 0.9\nseed = 3\n"                         \
    "[data]\nset = synthetic\ntrain_size = 64\ntest_size = 16\nclasses = 2\n"                       \
    "[convolutional]\nfilters = 4\nsize = 3\npad = 1\n[relu]\n[maxpool]\nsize = 2\n[connected]\noutput = 1\n"

/* A one-output net parses (as `vdnn info` does) with two classes, and its loss falls
 * over a few steps on a fixed batch. */
START_TEST(test_one_output_net_trains)
{
    const char *text = _i ? ONE_HEAD "[l2]\n" : ONE_HEAD "[logistic]\n";
    device *d;
    net *n = tn_attached(text, NULL, &d);
    ck_assert_int_eq(n->classes, 2);
    tn_batch b = tn_batch_make(n, n->input.n, 9);
    double first = 0.0, last = 0.0;
    for (int k = 0; k < 12; k++) {
        step_result r;
        ck_assert_msg(net_train_step(n, b.x, b.y, b.items, 0.1, &r) == VDNN_OK, "%s", vdnn_errmsg());
        ck_assert(isfinite(r.loss_sum));
        if (k == 0) first = r.loss_sum;
        last = r.loss_sum;
    }
    ck_assert_msg(last < 0.8 * first, "loss %g after 12 steps, %g at the first", last, first);
    tn_batch_free(&b);
    tn_free(n, d);
}
END_TEST

/* A loss must be last; softmax of one output names the losses that take one. */
START_TEST(test_net_errors)
{
    tn_parse_fails(ONE_HEAD "[logistic]\n[relu]\n", VDNN_EINVAL, TN_NAME ":25:", "[logistic] must be the last layer");
    tn_parse_fails(ONE_HEAD "[softmax]\n", VDNN_EINVAL, TN_NAME ":25:", "[softmax]");
    tn_msg_has("[logistic]", "[l2]");
    tn_parse_fails(ONE_HEAD "[relu]\n", VDNN_EINVAL, TN_NAME ":25:", "must be a loss");
    tn_parse_fails(ONE_HEAD "[l2]\nscale = 2\n", VDNN_EINVAL, TN_NAME ":26:", "scale");
}
END_TEST

static Suite *loss_suite(void)
{
    Suite *s = suite_create("loss");
    TCase *tc = tcase_create("loss");
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_reference, 0, NCASES);
    tcase_add_loop_test(tc, test_gradcheck, 0, NCASES);
    tcase_add_test(tc, test_known_values);
    tcase_add_loop_test(tc, test_bad_labels, 0, NCASES);
    tcase_add_loop_test(tc, test_one_output_net_trains, 0, 2);
    tcase_add_test(tc, test_net_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tn_run_suite(loss_suite()); }
