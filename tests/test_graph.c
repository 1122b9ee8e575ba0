/* Check suite for nets that are graphs, not chains (nets/net.c, nets/iteration.c,
 * layers/add.c, layers/concat.c):
 *
 *  - [add] and [concat]: exact forward values, the shared gradient checker on every
 *    input, adding into a gradient when asked (accumulate_dx), shapes refused by name;
 *  - configs: `name`, `input = NAME | -k | data`, the graph the net reads from them, and
 *    one test per kind of bad input, each naming the file, the line and the key;
 *  - the gradient of a map read by several layers (the sum of their parts, some added
 *    by the layer itself, some by the iteration) against central differences of the
 *    net's loss;
 *  - recomputation across a branch point (batch norm and dropout on the branch) and on
 *    every map a plan may recompute: bit for bit the weights of `none`;
 *  - a graph's checkpoint resumes exactly, under another policy too, and its plan file
 *    round-trips;
 *  - the shipped graph configs: their parameter counts, a few training steps, and the
 *    generator that writes them. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/layer.h"
#include "nets/planner/planner.h"
#include "tests/gradcheck.h"
#include "tests/tsan.h"
#include "tests/testnet.h"
#include "vdnn/rng.h"

extern const layer_ops add_ops, concat_ops, relu_ops;

/* ---- [add] and [concat] on their own ---- */

static layer *make_multi(const layer_ops *ops, const shape4 *ins, int nin)
{
    layer *l = NULL;
    vdnn_status st = layer_create_multi(ops, 0, ins, nin, NULL, NULL, &l);
    ck_assert_msg(st == VDNN_OK, "layer_create_multi: %s", vdnn_errmsg());
    return l;
}

static float *dev_of(device *d, const float *h, size_t count)
{
    float *p = NULL;
    ck_assert_int_eq(device_alloc(d, count * sizeof *p, "t", "t", (void **)&p), VDNN_OK);
    if (h) ck_assert_int_eq(device_upload(d, p, h, count * sizeof *p), VDNN_OK);
    return p;
}

static float *host_of(device *d, const float *p, size_t count)
{
    float *h = malloc(count * sizeof *h);
    ck_assert_ptr_nonnull(h);
    ck_assert_int_eq(device_download(d, h, p, count * sizeof *h), VDNN_OK);
    return h;
}

START_TEST(test_add_values)
{
    device *d = test_cpu_device();
    shape4 s = shape_make(2, 3, 4, 5), ins[3] = {s, s, s};
    layer *l = make_multi(&add_ops, ins, 3);
    ck_assert_int_eq(l->out.c, 3);
    ck_assert_int_eq(l->needs_input, 0);
    ck_assert_int_eq(l->needs_output, 0);
    size_t count = shape_count(s);
    float *h[3], *x[3];
    for (int k = 0; k < 3; k++) {
        h[k] = malloc(count * sizeof *h[k]);
        test_fill_uniform(h[k], count, 1.0f + (float)k, 10 + (uint64_t)k);
        x[k] = dev_of(d, h[k], count);
    }
    float *y = dev_of(d, NULL, count);
    exec_ctx c = {.dev = d, .n = 2, .train = 1};
    ck_assert_int_eq(layer_forward_n(l, &c, (const float *const *)x, y), VDNN_OK);
    float *hy = host_of(d, y, count);
    for (size_t e = 0; e < count; e++) {
        float want = h[0][e] + h[1][e];   /* in the listed order, in float */
        want += h[2][e];
        ck_assert_msg(hy[e] == want, "y[%zu] = %.9g, want %.9g", e, hy[e], want);
    }
    /* backward: dy to every input; input 1 adds into what its gradient holds */
    float *dy = dev_of(d, h[2], count), *dx[3] = {dev_of(d, NULL, count), dev_of(d, h[0], count), NULL};
    c.accumulate_dx = 1u << 1;
    ck_assert_int_eq(layer_backward_n(l, &c, (const float *const *)x, y, dy, dx), VDNN_OK);
    float *g0 = host_of(d, dx[0], count), *g1 = host_of(d, dx[1], count);
    for (size_t e = 0; e < count; e++) {
        ck_assert(g0[e] == h[2][e]);
        ck_assert(g1[e] == h[0][e] + h[2][e]);
    }
    free(g0);
    free(g1);
    free(hy);
    for (int k = 0; k < 3; k++) free(h[k]);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

START_TEST(test_concat_values)
{
    device *d = test_cpu_device();
    shape4 ins[3] = {shape_make(2, 1, 3, 2), shape_make(2, 3, 3, 2), shape_make(2, 2, 3, 2)};
    layer *l = make_multi(&concat_ops, ins, 3);
    ck_assert_int_eq(l->out.c, 6);
    ck_assert_int_eq(l->out.h, 3);
    float *h[3], *x[3];
    for (int k = 0; k < 3; k++) {
        size_t count = shape_count(ins[k]);
        h[k] = malloc(count * sizeof *h[k]);
        for (size_t e = 0; e < count; e++) h[k][e] = (float)(100 * k + (int)e);
        x[k] = dev_of(d, h[k], count);
    }
    size_t count = shape_count(l->out);
    float *y = dev_of(d, NULL, count);
    exec_ctx c = {.dev = d, .n = 2, .train = 1};
    ck_assert_int_eq(layer_forward_n(l, &c, (const float *const *)x, y), VDNN_OK);
    float *hy = host_of(d, y, count);
    /* item n: input 0's 1 channel, input 1's 3, input 2's 2 (6 planes of 3x2) */
    for (int n = 0; n < 2; n++)
        for (int ch = 0; ch < 6; ch++)
            for (int e = 0; e < 6; e++) {
                int k = ch < 1 ? 0 : ch < 4 ? 1 : 2, kc = ch < 1 ? ch : ch < 4 ? ch - 1 : ch - 4;
                float want = h[k][(size_t)n * shape_per_item(ins[k]) + (size_t)kc * 6 + (size_t)e];
                ck_assert_msg(hy[(size_t)n * 36 + (size_t)ch * 6 + (size_t)e] == want, "item %d channel %d", n, ch);
            }
    /* backward: each input its slice of dy; input 2 adds into its gradient */
    float *dx[3] = {dev_of(d, NULL, shape_count(ins[0])), NULL, dev_of(d, h[2], shape_count(ins[2]))};
    c.accumulate_dx = 1u << 2;
    ck_assert_int_eq(layer_backward_n(l, &c, (const float *const *)x, y, y, dx), VDNN_OK);
    float *g0 = host_of(d, dx[0], shape_count(ins[0])), *g2 = host_of(d, dx[2], shape_count(ins[2]));
    for (size_t e = 0; e < shape_count(ins[0]); e++) ck_assert(g0[e] == h[0][e]);
    for (size_t e = 0; e < shape_count(ins[2]); e++) ck_assert(g2[e] == 2 * h[2][e]);
    free(g0);
    free(g2);
    free(hy);
    for (int k = 0; k < 3; k++) free(h[k]);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

START_TEST(test_multi_gradcheck)
{
    device *d = test_cpu_device();
    shape4 s = shape_make(3, 2, 5, 4);
    shape4 add_in[2] = {s, s}, cat_in[3] = {shape_make(3, 1, 5, 4), s, shape_make(3, 3, 5, 4)};
    layer *ls[2] = {make_multi(&add_ops, add_in, 2), make_multi(&concat_ops, cat_in, 3)};
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(layer_alloc_params(ls[i], d, 1), VDNN_OK);
        gradcheck_opts o = gradcheck_defaults();
        char msg[256];
        ck_assert_msg(gradcheck(ls[i], d, &o, msg, sizeof msg) == 0, "%s", msg);
        layer_destroy(ls[i], d);
    }
    device_destroy(d);
}
END_TEST

START_TEST(test_multi_shapes_refused)
{
    shape4 a = shape_make(2, 3, 4, 4), b = shape_make(2, 4, 4, 4), c = shape_make(2, 3, 2, 4);
    shape4 add_bad[2] = {a, b}, cat_bad[2] = {a, c}, one[1] = {a};
    layer *l = NULL;
    ck_assert_int_eq(layer_create_multi(&add_ops, 0, add_bad, 2, NULL, NULL, &l), VDNN_EINVAL);
    tn_msg_has("3x4x4", "4x4x4");
    ck_assert_int_eq(layer_create_multi(&concat_ops, 0, cat_bad, 2, NULL, NULL, &l), VDNN_EINVAL);
    tn_msg_has("one height and width", "3x2x4");
    ck_assert_int_eq(layer_create_multi(&add_ops, 0, one, 1, NULL, NULL, &l), VDNN_EINVAL);
    tn_msg_has("2 to 32 inputs", "not 1");
    ck_assert_int_eq(layer_create_multi(&relu_ops, 0, add_bad, 2, NULL, NULL, &l), VDNN_EINVAL);
    tn_msg_has("reads one input", "not 2");
    /* a multi-input layer through the one-input call is an error, not a crash */
    shape4 same[2] = {a, a};
    layer *ok = make_multi(&add_ops, same, 2);
    device *d = test_cpu_device();
    exec_ctx ctx = {.dev = d, .n = 1};
    ck_assert_int_eq(layer_forward(ok, &ctx, NULL, NULL), VDNN_EINVAL);
    tn_msg_has("2 inputs called with one", NULL);
    layer_destroy(ok, d);
    device_destroy(d);
}
END_TEST

/* ---- configs ---- */

/* Layers start at line 16 (TN_HEAD). A residual block: conv (16), relu `a` (20),
 * conv (22), add (26), then a concat of the add and `a` (29), connected, softmax. */
#define GR_CONV "[convolutional]\nfilters = 4\nsize = 3\npad = 1\n"
#define GR_NET                                                                          \
    TN_HEAD GR_CONV "[relu]\nname = a\n" GR_CONV "[add]\ninput = -1, a\nname = sum\n"     \
    "[concat]\ninput = sum, a\n[connected]\noutput = 4\n[softmax]\n"

START_TEST(test_graph_of_net)
{
    net *n = tn_parse(GR_NET, NULL);
    ck_assert_int_eq(n->nlayers, 7);
    ck_assert(!n->chain);
    ck_assert_str_eq(n->layers[1]->name, "a");
    ck_assert_str_eq(n->layers[2]->name, "conv3");   /* default names keep their position */
    ck_assert_str_eq(n->layers[3]->name, "sum");
    ck_assert_int_eq(n->layers[3]->ninputs, 2);
    ck_assert_int_eq(n->layers[3]->input[0], 3);     /* -1: conv3's output */
    ck_assert_int_eq(n->layers[3]->input[1], 2);     /* a */
    ck_assert_int_eq(n->layers[4]->input[0], 4);
    ck_assert_int_eq(n->layers[4]->input[1], 2);
    ck_assert_int_eq(n->layers[4]->out.c, 8);
    /* a is read by conv3, the add and the concat; backward reads it in relu a (its
     * output) and conv3 (its input) */
    const net_map *m = &n->graph[2];
    ck_assert_int_eq(m->readers, 3);
    ck_assert_int_eq(m->first_fwd, 2);
    ck_assert_int_eq(m->last_fwd, 4);
    ck_assert_int_eq(m->first_bwd, 2);
    ck_assert_int_eq(m->last_bwd, 1);
    ck_assert(m->grad && !n->graph[0].grad);
    ck_assert_int_eq(net_find_map(n, "sum"), 4);
    ck_assert_int_eq(net_find_map(n, "data"), 0);
    ck_assert_str_eq(net_map_name(n, 2), "a");
    ck_assert_str_eq(net_map_name(n, 0), "data");
    net_free(n);
    /* a chain stays a chain: every layer reads the one before */
    n = tn_parse(TN_SMALL, NULL);
    ck_assert(n->chain);
    for (int i = 0; i < n->nlayers; i++) ck_assert_int_eq(n->layers[i]->input[0], i);
    net_free(n);
    /* `input = data` starts a branch from the image; `-k` counts sections up */
    n = tn_parse(TN_HEAD GR_CONV "name = c1\n[maxpool]\ninput = data\nsize = 1\n"
                 "[concat]\ninput = -2, -1\n[connected]\noutput = 4\n[softmax]\n", NULL);
    ck_assert_int_eq(n->layers[1]->input[0], 0);
    ck_assert_int_eq(n->layers[2]->input[0], 1);
    ck_assert_int_eq(n->layers[2]->input[1], 2);
    ck_assert_int_eq(n->layers[2]->out.c, 5);
    ck_assert_int_eq(n->graph[0].readers, 2);
    net_free(n);
}
END_TEST

/* One bad config per kind of mistake: the message names t.cfg, the line and the key. */
START_TEST(test_graph_config_errors)
{
    static const struct { const char *layers, *a, *b; } bad[] = {
        {GR_CONV "[relu]\ninput = nowhere\n[connected]\noutput = 4\n[softmax]\n", "t.cfg:21: [relu] input",
         "no layer is named 'nowhere'"},
        {GR_CONV "input = later\n[relu]\nname = later\n[connected]\noutput = 4\n[softmax]\n", "t.cfg:20: [convolutional] input",
         "'later' is a later layer (line 21)"},
        {GR_CONV "name = me\ninput = me\n[connected]\noutput = 4\n[softmax]\n", "t.cfg:21: ", "'me' is this layer"},
        {GR_CONV "name = x\n[relu]\nname = x\n[connected]\noutput = 4\n[softmax]\n", "t.cfg:22: [relu] name",
         "'x' is also the name of the [convolutional] at line 16"},
        {GR_CONV "name = relu2\n[relu]\n[connected]\noutput = 4\n[softmax]\n", "t.cfg:20: [convolutional] name",
         "'relu2' is the default name of the [relu] at line 21"},
        {GR_CONV "name = data\n[connected]\noutput = 4\n[softmax]\n", "t.cfg:20: ", "'data' names the net's input"},
        {GR_CONV "name = a b\n[connected]\noutput = 4\n[softmax]\n", "t.cfg:20: ", "letters, digits"},
        {GR_CONV "name = -x\n[connected]\noutput = 4\n[softmax]\n", "t.cfg:20: ", "'-x'"},
        {GR_CONV "name = a23456789012345678901234567890123\n[connected]\noutput = 4\n[softmax]\n", "t.cfg:20: ",
         "longer than 31 characters"},
        {GR_CONV "[relu]\ninput = -2\n[connected]\noutput = 4\n[softmax]\n", "t.cfg:21: ",
         "'-2' reaches above the first layer"},
        {GR_CONV "[relu]\ninput = -0\n[connected]\noutput = 4\n[softmax]\n", "t.cfg:21: ", "'-0' is not -k"},
        {GR_CONV "[relu]\ninput = -1x\n[connected]\noutput = 4\n[softmax]\n", "t.cfg:21: ", "'-1x'"},
        {GR_CONV "[relu]\n[add]\ninput = -1, -1\n[connected]\noutput = 4\n[softmax]\n", "t.cfg:22: [add] input",
         "'-1' is listed twice"},
        {GR_CONV "[relu]\n[add]\ninput = -1, , -2\n[connected]\noutput = 4\n[softmax]\n", "t.cfg:22: ",
         "an empty entry"},
        {GR_CONV "[relu]\n[add]\ninput = -1\n[connected]\noutput = 4\n[softmax]\n", "t.cfg:22: [add] input",
         "reads 2 to 32 inputs, not 1"},
        {GR_CONV "[relu]\n[add]\n[connected]\noutput = 4\n[softmax]\n", "t.cfg:21: [add] input",
         "reads 2 to 32 inputs, not 1"},
        {GR_CONV "[relu]\ninput = -1, data\n[connected]\noutput = 4\n[softmax]\n", "t.cfg:21: [relu] input",
         "reads one input, not 2"},
        {GR_CONV "name = c\n[maxpool]\nsize = 2\n[add]\ninput = c, -1\n[connected]\noutput = 4\n[softmax]\n",
         "t.cfg:24: [add] input", "c is 4x8x8 and -1 is 4x4x4"},
        {GR_CONV "name = c\n[maxpool]\nsize = 2\n[concat]\ninput = c, -1\n[connected]\noutput = 4\n[softmax]\n",
         "t.cfg:24: [concat] input", "one height and width, but c is 4x8x8 and -1 is 4x4x4"},
        {GR_CONV "name = dead\n[relu]\ninput = data\n[connected]\noutput = 4\n[softmax]\n",
         "t.cfg:16: [convolutional]", "nothing reads the output of dead (a dead branch)"},
        {GR_CONV "name = c\n[relu]\noffload = 1\n[add]\ninput = c, -1\noffload = 0\n[connected]\noutput = 4\n"
         "[softmax]\n", "t.cfg:25: [add] offload", "the [relu] at line 21, which reads c too"},
        {GR_CONV "[relu]\nname = r\n[add]\ninput = r, data\n[connected]\noutput = 4\n[softmax]\n",
         "t.cfg:23: [add] input", "r is 4x8x8 and data is 1x8x8"},
        {GR_CONV "[softmax]\n[connected]\noutput = 4\ninput = -2\n", "t.cfg:20: ", "[softmax] must be the last layer"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char text[2048];
        snprintf(text, sizeof text, "%s%s", TN_HEAD, bad[k].layers);
        net_overrides none = net_no_overrides();
        net *n = NULL;
        vdnn_status st = net_parse(text, TN_NAME, &none, &n);
        ck_assert_msg(st == VDNN_EINVAL, "case %zu parses (status %d)", k, (int)st);
        ck_assert_ptr_null(n);
        const char *msg = vdnn_errmsg();
        ck_assert_msg(strstr(msg, bad[k].a) && strstr(msg, bad[k].b), "case %zu: '%s' lacks '%s' or '%s'", k, msg,
                      bad[k].a, bad[k].b);
    }
}
END_TEST

/* `input =`'s grammar: every comma between two items, -k with its digits right after the
 * sign; blanks around an item are fine. */
START_TEST(test_graph_input_grammar)
{
    static const struct { const char *input, *a, *b; } bad[] = {
        {"a,,-1", "t.cfg:23: [add] input", "an empty entry, item 2 of 'a,,-1'"},
        {"a,-1,", "t.cfg:23: [add] input", "item 3"},
        {",a,-1", "t.cfg:23: [add] input", "item 1"},
        {"a, ,-1", "t.cfg:23: [add] input", "item 2"},
        {"a,- 1", "t.cfg:23: [add] input", "'- 1' is not -k"},
        {"a,-+1", "t.cfg:23: [add] input", "'-+1' is not -k"},
        {"a,--1", "t.cfg:23: [add] input", "'--1' is not -k"},
        {"a,-", "t.cfg:23: [add] input", "'-' is not -k"},
        {"a,-1 1", "t.cfg:23: [add] input", "'-1 1' is not -k"},
        {"a,-99999999999999999999", "t.cfg:23: [add] input", "reaches above the first layer"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char text[2048];
        snprintf(text, sizeof text, "%s" GR_CONV "name = a\n[relu]\n[add]\ninput = %s\n[connected]\noutput = 4\n"
                 "[softmax]\n", TN_HEAD, bad[k].input);
        net_overrides none = net_no_overrides();
        net *n = NULL;
        ck_assert_msg(net_parse(text, TN_NAME, &none, &n) == VDNN_EINVAL, "input = %s parses", bad[k].input);
        ck_assert_ptr_null(n);
        const char *msg = vdnn_errmsg();
        ck_assert_msg(strstr(msg, bad[k].a) && strstr(msg, bad[k].b), "input = %s: '%s' lacks '%s' or '%s'",
                      bad[k].input, msg, bad[k].a, bad[k].b);
    }
    static const char *good[] = {"a,-1", "a , -1", "-1,a", "\ta,\t-01\t"};
    for (size_t k = 0; k < sizeof good / sizeof *good; k++) {
        char text[2048];
        snprintf(text, sizeof text, "%s" GR_CONV "name = a\n[relu]\n[add]\ninput = %s\n[connected]\noutput = 4\n"
                 "[softmax]\n", TN_HEAD, good[k]);
        net_overrides none = net_no_overrides();
        net *n = NULL;
        ck_assert_msg(net_parse(text, TN_NAME, &none, &n) == VDNN_OK, "input = %s: %s", good[k], vdnn_errmsg());
        ck_assert_int_eq(n->layers[2]->ninputs, 2);
        net_free(n);
    }
}
END_TEST

/* ---- the gradient of a map read by several layers ---- */

/* `a` (tanh, smooth: no kinks for the differences) is read by conv3 (a convolution: its
 * part is added by the iteration), the add (which adds its part itself) and conv6 (the
 * first reader in backward, which writes the gradient). */
#define GRAD_NET                                                                         \
    TN_NET "[train]\nepochs = 1\nlearning_rate = 0.05\nseed = 9\n" TN_DATA                  \
    GR_CONV "algo = im2col\n[tanh]\nname = a\n" GR_CONV "algo = direct\n[tanh]\n"             \
    "[add]\ninput = -1, a\n[convolutional]\ninput = a\nfilters = 2\nsize = 1\n"               \
    "[concat]\ninput = -2, -1\n[avgpool]\nsize = 2\n[connected]\noutput = 4\n[softmax]\n"

/* The summed loss of the batch, forward only (no dropout or batch norm in GRAD_NET, so
 * evaluation computes what training does). */
static double net_loss(net *n, const tn_batch *b)
{
    step_result r = {0};
    ck_assert_msg(net_eval_batch(n, b->x, b->y, b->items, &r) == VDNN_OK, "%s", vdnn_errmsg());
    return r.loss_sum;
}

START_TEST(test_accumulated_gradient)
{
    device *d;
    net *n = tn_attached(GRAD_NET, NULL, &d);
    tn_batch b = tn_batch_make(n, n->input.n, 77);
    step_result r;
    /* lr 0 and no momentum: the step leaves the weights, and their gradients behind */
    ck_assert_msg(net_train_step(n, b.x, b.y, b.items, 0.0, &r) == VDNN_OK, "%s", vdnn_errmsg());
    param *w = tn_param(n, "conv1.weights");
    size_t count = shape_count(w->shape);
    float *g = tn_download(n, w->grad, count), *v = tn_download(n, w->value, count);
    double eps = 1e-2, worst = 0;
    int nonzero = 0;
    for (size_t e = 0; e < count; e += 3) {
        float keep = v[e];
        tn_fill(n, w->value + e, 1, keep + (float)eps);
        double lp = net_loss(n, &b);
        tn_fill(n, w->value + e, 1, keep - (float)eps);
        double lm = net_loss(n, &b);
        tn_fill(n, w->value + e, 1, keep);
        double num = (lp - lm) / (2 * eps * b.items), ana = g[e];
        double err = fabs(num - ana) / (1e-3 + fmax(fabs(num), fabs(ana)));
        if (err > worst) worst = err;
        nonzero += ana != 0;
        ck_assert_msg(err < 2e-2, "conv1.weights[%zu]: analytic %.6g, numeric %.6g", e, ana, num);
    }
    ck_assert_int_gt(nonzero, 0);
    free(g);
    free(v);
    tn_batch_free(&b);
    tn_free(n, d);
}
END_TEST

/* ---- recomputation and policies across branches ---- */

/* A branch off the map `fork` with batch norm and dropout whose outputs backward reads
 * (so recomputing them runs them again), joined by an add; a second branch reads `fork`
 * again and joins by a concat. */
#define BR_NET                                                                            \
    "[net]\nbatch = 6\nchannels = 2\nheight = 10\nwidth = 10\n"                             \
    "[train]\nepochs = 1\nlearning_rate = 0.05\nmomentum = 0.9\nweight_decay = 0.0005\nseed = 4\n" TN_DATA \
    "[convolutional]\nfilters = 4\nsize = 3\npad = 1\nalgo = im2col\n[batchnorm]\n[relu]\nname = fork\n"      \
    "[convolutional]\nfilters = 4\nsize = 3\npad = 1\nalgo = im2col\n[batchnorm]\n"                         \
    "[convolutional]\nfilters = 4\nsize = 1\n[dropout]\nprobability = 0.3\n[convolutional]\nfilters = 4\n"   \
    "size = 1\n[relu]\n[add]\ninput = -1, fork\n[maxpool]\nsize = 2\nstride = 1\n[lrn]\nsize = 3\n"        \
    "name = joined\n[avgpool]\ninput = fork\nsize = 2\nstride = 1\n[batchnorm]\n"                           \
    "[concat]\ninput = joined, -1\n[tanh]\n[connected]\noutput = 4\n[softmax]\n"

typedef struct result {
    double loss[3];
    unsigned char *bytes;
    size_t nbytes;
} result;

static void add_tensor(result *r, net *n, const float *dev, const float *host, size_t count)
{
    float *h = host ? NULL : tn_download(n, dev, count);
    r->bytes = realloc(r->bytes, r->nbytes + count * sizeof(float));
    ck_assert_ptr_nonnull(r->bytes);
    memcpy(r->bytes + r->nbytes, host ? host : h, count * sizeof(float));
    r->nbytes += count * sizeof(float);
    free(h);
}

/* Three steps of `text` under plan `p` (applied after attaching; NULL: none) with the
 * parameters swapped as `swap` says (NULL: resident), in `budget` (0: roomy). */
static result run_plan(const char *text, const plan *p, size_t budget)
{
    net *n = tn_parse(text, NULL);
    ck_assert_int_eq(net_plan(n, POLICY_NONE, ALGO_MEM), VDNN_OK);
    for (int i = 0; p && i < n->nlayers; i++) n->layers[i]->swap = p->swap[i];
    device_options o = {.kind = DEVICE_CPU, .threads = 1, .budget_bytes = budget ? budget : 4 * net_train_bytes_bound(n)};
    device *d = NULL;
    ck_assert_int_eq(device_create(&o, &d), VDNN_OK);
    ck_assert_msg(net_attach(n, d) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_int_eq(net_plan(n, POLICY_NONE, ALGO_MEM), VDNN_OK);
    if (p) ck_assert_msg(plan_apply(n, p) == VDNN_OK, "plan_apply: %s", vdnn_errmsg());
    result res = {0};
    for (int k = 0; k < 3; k++) {
        tn_batch b = tn_batch_make(n, n->input.n, 500 + (uint64_t)k);
        step_result r;
        vdnn_status st = net_train_step(n, b.x, b.y, b.items, n->train.learning_rate, &r);
        tn_batch_free(&b);
        ck_assert_msg(st == VDNN_OK, "step %d: %s", k + 1, vdnn_errmsg());
        res.loss[k] = r.loss_sum;
    }
    ck_assert_uint_le(pool_peak_bytes(device_pool(d)), o.budget_bytes);
    for (int i = 0; i < n->nlayers; i++)
        for (int k = 0; k < n->layers[i]->nparams; k++) {
            param *q = &n->layers[i]->params[k];
            size_t count = shape_count(q->shape);
            add_tensor(&res, n, q->value, q->host_value, count);
            if (q->trainable) add_tensor(&res, n, q->momentum, q->host_momentum, count);
        }
    tn_free(n, d);
    return res;
}

static void same_result(const result *a, const result *b, const char *what)
{
    for (int k = 0; k < 3; k++)
        ck_assert_msg(!memcmp(&a->loss[k], &b->loss[k], sizeof a->loss[k]), "%s: step %d loss %.17g, none %.17g",
                      what, k + 1, b->loss[k], a->loss[k]);
    ck_assert_uint_eq(a->nbytes, b->nbytes);
    ck_assert_msg(!memcmp(a->bytes, b->bytes, a->nbytes), "%s: the parameters differ from none's", what);
}

/* The least budget plan `p` of n runs in: its peak on the simulated device. */
static size_t plan_peak(const net *n, const plan *p)
{
    simulator *s = NULL;
    double t;
    size_t peak = 0;
    ck_assert_int_eq(sim_create(n, NULL, &s), VDNN_OK);
    ck_assert_msg(sim_run(s, p, &t, &peak) == VDNN_OK, "sim_run: %s", vdnn_errmsg());
    sim_destroy(s);
    ck_assert_uint_gt(peak, 0);
    return peak;
}

/* A plan of BR_NET: the smallest-workspace algorithms, no map decisions yet. */
static plan base_plan(const net *n)
{
    plan p;
    ck_assert_int_eq(plan_policy(n, NULL, POLICY_NONE, ALGO_MEM, PREFETCH_FAR, 1, &p), VDNN_OK);
    return p;
}

START_TEST(test_recompute_across_branches)
{
    net *n = tn_parse(BR_NET, NULL);
    result none = run_plan(BR_NET, NULL, 0);
    int fork = net_find_map(n, "fork");
    ck_assert_int_gt(fork, 0);
    ck_assert_int_ge(n->graph[fork].readers, 3);
    /* every map a plan may recompute, at once: recomputing one runs the layers back to
     * the nearest kept maps, through the branch and the joins */
    plan all = base_plan(n);
    int count = 0;
    for (int j = 1; j < n->nlayers; j++)
        if (net_recomputable(n, j, all.swap)) all.offload[j] = MAP_RECOMPUTE, count++;
    ck_assert_int_ge(count, 6);
    result r = run_plan(BR_NET, &all, 0);
    same_result(&none, &r, "every map recomputed");
    free(r.bytes);
    /* each map alone, and each with the maps before it offloaded, at the plan's own
     * minimum budget */
    for (int j = 1; j < n->nlayers; j++) {
        if (!net_recomputable(n, j, all.swap)) continue;
        plan p = base_plan(n);
        p.offload[j] = MAP_RECOMPUTE;
        for (int k = 0; k < j; k++)
            if (k % 2 && net_first_reader(n, k) >= 0) p.offload[k] = MAP_OFFLOAD;
        size_t least = plan_peak(n, &p);
        char what[64];
        snprintf(what, sizeof what, "x[%d] (%s) recomputed at %zu bytes", j, net_map_name(n, j), least);
        r = run_plan(BR_NET, &p, least);
        same_result(&none, &r, what);
        free(r.bytes);
        plan_free(&p);
    }
    plan_free(&all);
    free(none.bytes);
    net_free(n);
}
END_TEST

/* Every fixed policy on BR_NET, and swapped parameters with recomputed maps around
 * them (the chain that would run a swapped layer again is refused, not run). */
START_TEST(test_policies_on_graph)
{
    net *n = tn_parse(BR_NET, NULL);
    result none = run_plan(BR_NET, NULL, 0);
    for (int pol = POLICY_ALL; pol < POLICY_COUNT; pol++) {
        plan p;
        ck_assert_int_eq(plan_policy(n, NULL, (mem_policy)pol, ALGO_MEM, PREFETCH_FAR, 1, &p), VDNN_OK);
        result r = run_plan(BR_NET, &p, plan_peak(n, &p));
        same_result(&none, &r, policy_name((mem_policy)pol));
        free(r.bytes);
        plan_free(&p);
    }
    /* the branch's first convolution swapped: recomputing its output would run it again,
     * which the plan check refuses, naming it; recomputing the next map runs batch norm
     * alone, from the kept output of the swapped layer */
    plan p = base_plan(n);
    int conv = net_find_map(n, "conv4") - 1;
    ck_assert_int_eq(conv, 3);
    p.swap[conv] = SWAP_HOST;
    p.offload[conv + 1] = MAP_RECOMPUTE;
    ck_assert_int_eq(plan_apply(n, &p), VDNN_EINVAL);
    tn_msg_has("recomputing x[4] (conv4's output) would run conv4 again", "swapped");
    p.offload[conv + 1] = MAP_KEEP;
    p.offload[conv + 2] = MAP_RECOMPUTE;
    result r = run_plan(BR_NET, &p, 0);
    same_result(&none, &r, "conv4 swapped, bn5's output recomputed");
    free(r.bytes);
    plan_free(&p);
    free(none.bytes);
    net_free(n);
}
END_TEST

/* ---- the blocks of real nets under every policy ---- */

/* A ResNeXt-style bottleneck: 1x1, 3x3 in 32 groups of 2 channels, 1x1, around a
 * shortcut; a global average pooling. */
#define RESNEXT_NET                                                                                 \
    "[net]\nbatch = 4\nchannels = 3\nheight = 8\nwidth = 8\n"                                      \
    "[train]\nepochs = 1\nlearning_rate = 0.05\nmomentum = 0.9\nweight_decay = 0.0005\nseed = 4\n" TN_DATA \
    "[convolutional]\nfilters = 32\nsize = 3\npad = 1\n[batchnorm]\n[relu]\nname = block_in\n"       \
    "[convolutional]\nfilters = 64\nsize = 1\nbias = 0\n[batchnorm]\n[relu]\n"                       \
    "[convolutional]\nfilters = 64\nsize = 3\npad = 1\ngroups = 32\nbias = 0\n[batchnorm]\n[relu]\n"   \
    "[convolutional]\nfilters = 32\nsize = 1\nbias = 0\n[batchnorm]\n[add]\ninput = -1, block_in\n"   \
    "[relu]\n[avgpool]\nglobal = 1\n[connected]\noutput = 4\n[softmax]\n"

/* A MobileNet-style block: a strided stem, a depthwise 3x3 and a pointwise 1x1, each
 * with batch norm and ReLU6; then a convolution with the other options (a 3x2 kernel,
 * dilated, padded unevenly, in two groups), a ceil-mode max pooling (6x5 to 3x3, the
 * last column's windows half outside) and a global average of the real cells. */
#define MOBILE_NET                                                                                  \
    "[net]\nbatch = 4\nchannels = 3\nheight = 12\nwidth = 12\n"                                    \
    "[train]\nepochs = 1\nlearning_rate = 0.05\nmomentum = 0.9\nweight_decay = 0.0005\nseed = 4\n" TN_DATA \
    "[convolutional]\nfilters = 8\nsize = 3\nstride = 2\npad = 1\nbias = 0\n[batchnorm]\n[clip]\n"    \
    "[convolutional]\nfilters = 8\nsize = 3\npad = 1\ngroups = 8\nbias = 0\n[batchnorm]\n[clip]\n"    \
    "[convolutional]\nfilters = 16\nsize = 1\nbias = 0\n[batchnorm]\n[clip]\n"                       \
    "[convolutional]\nfilters = 8\nsize_h = 3\nsize_w = 2\ndilation = 2\npad_top = 2\npad_bottom = 2\n" \
    "pad_left = 0\npad_right = 1\ngroups = 2\n[clip]\nmin = -1\nmax = 1\n"                           \
    "[maxpool]\nsize = 2\nceil_mode = 1\n[avgpool]\nglobal = 1\ncount_pad = 0\n[connected]\noutput = 4\n"      \
    "[softmax]\n"

static const char *const block_nets[] = {RESNEXT_NET, MOBILE_NET};

/* Made-up costs for n, the later algorithms the faster, so that dyn's search mixes
 * algorithms, offloads, recomputation and swaps the same way on every machine. Free
 * pr->layers. */
static profile made_up_profile(const net *n)
{
    profile pr = {.nlayers = n->nlayers, .batch = n->input.n};
    pr.layers = calloc((size_t)n->nlayers, sizeof *pr.layers);
    ck_assert_ptr_nonnull(pr.layers);
    for (int i = 0; i < n->nlayers; i++)
        for (int a = 0; a < PLAN_MAX_ALGOS; a++) {
            pr.layers[i].fwd_s[a] = 1e-3 / (1 + a);
            pr.layers[i].bwd_data_s[a] = i ? 1e-3 / (1 + a) : 0;
            pr.layers[i].bwd_filter_s[a] = n->layers[i]->ops->algo_count ? 1e-3 / (1 + a) : 0;
        }
    pr.h2d_bytes_per_s = pr.d2h_bytes_per_s = pr.duplex_bytes_per_s = 1e8;
    return pr;
}

/* The net of `text` trains three steps bit for bit as under none: under every fixed
 * policy at its least budget, and under dyn's plan at the least budget the planner can
 * plan (against none with that plan's algorithms). */
static void every_policy(const char *text)
{
    net *n = tn_parse(text, NULL);
    result none = run_plan(text, NULL, 0);
    for (int pol = POLICY_ALL; pol < POLICY_COUNT; pol++) {
        plan p;
        ck_assert_int_eq(plan_policy(n, NULL, (mem_policy)pol, ALGO_MEM, PREFETCH_FAR, 1, &p), VDNN_OK);
        result r = run_plan(text, &p, plan_peak(n, &p));
        same_result(&none, &r, policy_name((mem_policy)pol));
        free(r.bytes);
        plan_free(&p);
    }
    profile pr = made_up_profile(n);
    size_t least = 0;
    ck_assert_int_eq(plan_least(n, &least), VDNN_OK);
    plan dyn, same_algos;
    ck_assert_msg(plan_search(n, &pr, least, SEARCH_BB, (search_limits){.seconds = 5}, &dyn, NULL) == VDNN_OK, "%s",
                  vdnn_errmsg());
    ck_assert_int_eq(plan_copy(&same_algos, &dyn), VDNN_OK);
    memset(same_algos.offload, MAP_KEEP, (size_t)n->nlayers + 1);
    memset(same_algos.swap, SWAP_NONE, (size_t)n->nlayers);
    int moved = 0;
    for (int i = 0; i < n->nlayers; i++) moved += dyn.offload[i] != MAP_KEEP || dyn.swap[i] != SWAP_NONE;
    ck_assert_msg(moved > 0, "dyn's plan at the least budget moves nothing");
    result base = run_plan(text, &same_algos, 0), r = run_plan(text, &dyn, dyn.peak_bytes);
    same_result(&base, &r, "dyn");
    free(base.bytes);
    free(r.bytes);
    plan_free(&dyn);
    plan_free(&same_algos);
    free(pr.layers);
    free(none.bytes);
    net_free(n);
}

START_TEST(test_blocks_under_every_policy)
{
    every_policy(block_nets[_i]);
}
END_TEST

/* The vDNN paper's AlexNet as Caffe ships it (grouped convolutions, LRN, in-place relus
 * and dropouts), at batch 2 on synthetic data, as the blocks: at 67x67 (its [net] lines
 * replaced in place; pool5 1x1, fc6 reading 256 values, 25 million parameters), since at
 * 227x227 the seven runs take 90 s here with the memory-optimal direct convolutions. */
START_TEST(test_alexnet_caffe_under_every_policy)
{
    if (UNDER_SANITIZER) {
        printf("SKIPPED: test_alexnet_caffe_under_every_policy under a sanitizer: seven runs of 61 million "
               "parameters (make test runs it)\n");
        return;
    }
    char *text = tn_synthetic_config("configs/alexnet-caffe.cfg", 1000);
    char *batch = strstr(text, "\nbatch = 256\n");
    ck_assert_ptr_nonnull(batch);
    memcpy(batch, "\nbatch =   2\n", 13);
    static const char from[] = "height = 227\nwidth = 227\n", to[] = "height =  67\nwidth =  67\n";
    char *hw = strstr(text, from);
    ck_assert_ptr_nonnull(hw);
    memcpy(hw, to, strlen(to));
    every_policy(text);
    free(text);
}
END_TEST

/* dyn's least budget (`vdnn info`): no fixed policy needs less, and the planner finds a
 * plan in exactly that budget. */
START_TEST(test_dyn_least)
{
    static const char *const nets[] = {BR_NET, GRAD_NET, TN_SMALL};
    for (size_t k = 0; k < sizeof nets / sizeof *nets; k++) {
        net *n = tn_parse(nets[k], NULL);
        size_t least = 0, table[POLICY_COUNT][ALGO_MODE_COUNT];
        ck_assert_int_eq(plan_least(n, &least), VDNN_OK);
        ck_assert_int_eq(net_budget_table(n, table), VDNN_OK);
        for (int p = 0; p < POLICY_COUNT; p++) ck_assert_uint_le(least, table[p][ALGO_MEM]);
        profile pr = {.nlayers = n->nlayers, .batch = n->input.n};
        pr.layers = calloc((size_t)n->nlayers, sizeof *pr.layers);
        pr.h2d_bytes_per_s = pr.d2h_bytes_per_s = 1e9;
        plan p;
        ck_assert_msg(plan_search(n, &pr, least, SEARCH_BB, (search_limits){.seconds = 5}, &p, NULL) == VDNN_OK, "net %zu: %s",
                      k, vdnn_errmsg());
        ck_assert_uint_le(p.peak_bytes, least);
        plan_free(&p);
        free(pr.layers);
        net_free(n);
    }
}
END_TEST

/* ---- files ---- */

START_TEST(test_plan_file_round_trip)
{
    net *n = tn_parse(BR_NET, NULL);
    ck_assert_int_eq(net_plan(n, POLICY_NONE, ALGO_MEM), VDNN_OK);
    plan p = base_plan(n), q;
    int fork = net_find_map(n, "fork"), joined = net_find_map(n, "joined");
    p.offload[0] = MAP_OFFLOAD;
    p.offload[fork] = MAP_OFFLOAD;
    p.offload[joined] = MAP_RECOMPUTE;
    p.swap[0] = SWAP_DEVICE;
    char path[512];
    tn_join(path, sizeof path, tn_dir, "graph.plan");
    ck_assert_msg(plan_save(&p, n, path) == VDNN_OK, "%s", vdnn_errmsg());
    char *text = tn_read(path, NULL);
    ck_assert_ptr_nonnull(strstr(text, "\ndata offload\n"));
    ck_assert_ptr_nonnull(strstr(text, "\nfork offload 0 "));
    ck_assert_ptr_nonnull(strstr(text, "\njoined recompute 0 "));
    ck_assert_ptr_nonnull(strstr(text, "\nconv1 keep 2 im2col "));
    free(text);
    ck_assert_msg(plan_load(n, path, &q) == VDNN_OK, "%s", vdnn_errmsg());
    for (int j = 0; j <= n->nlayers; j++) ck_assert_int_eq(p.offload[j], q.offload[j]);
    for (int i = 0; i < n->nlayers; i++) {
        ck_assert_int_eq(p.swap[i], q.swap[i]);
        ck_assert(!memcmp(p.algo[i], q.algo[i], sizeof p.algo[i]));
    }
    plan_free(&q);
    plan_free(&p);
    net_free(n);
}
END_TEST

START_TEST(test_resume_exact_graph)
{
    /* the program run seven times, half a minute to two under a sanitizer; its paths run
     * in-process in test_policies_on_graph and test_dyn_least, and the program's own
     * resume and plan files under sanitizers in test_cli */
    if (UNDER_SANITIZER) {
        printf("SKIPPED: test_resume_exact_graph under a sanitizer (runs the program seven times; make test runs "
               "it)\n");
        return;
    }
    /* 6 steps under none, or 3 under all then 3 resumed under recompute: the same bytes */
    char cfg[512], a[512], b[512], c[512], args[2048];
    tn_join(cfg, sizeof cfg, tn_dir, "net.cfg");
    tn_write_text(cfg, BR_NET);
    tn_join(a, sizeof a, tn_dir, "a.ckpt");
    tn_join(b, sizeof b, tn_dir, "b.ckpt");
    tn_join(c, sizeof c, tn_dir, "c.ckpt");
    snprintf(args, sizeof args, "train %s --steps 6 --save %s --quiet --threads 1 --algo mem", cfg, a);
    tn_run r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    tn_run_free(&r);
    snprintf(args, sizeof args, "train %s --steps 3 --save %s --quiet --threads 1 --algo mem --policy all", cfg, b);
    r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    tn_run_free(&r);
    snprintf(args, sizeof args, "train %s --steps 3 --resume %s --save %s --quiet --threads 1 --algo mem "
             "--policy recompute", cfg, b, c);
    r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    tn_run_free(&r);
    ck_assert_msg(tn_same_file(a, c), "resumed checkpoint %s differs from %s", c, a);
    ck_assert(!tn_same_file(a, b));
    /* the planner on a graph: a plan for a tight budget, saved, trained from the file */
    char plan_path[512];
    tn_join(plan_path, sizeof plan_path, tn_dir, "dyn.plan");
    snprintf(args, sizeof args, "profile %s --budget 120K --link-gbps 2 --threads 1 --save-plan %s", cfg, plan_path);
    r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    ck_assert_msg(strstr(r.out, "data") && strstr(r.out, "fork"), "%s", r.out);
    tn_run_free(&r);
    char *text = tn_read(plan_path, NULL);
    const char *split = text ? strstr(text, "\nmicro_batch ") : NULL;
    ck_assert_ptr_nonnull(split);
    int micro = atoi(split + 13);
    free(text);
    snprintf(args, sizeof args, "train %s --steps 2 --budget 120K --plan %s --link-gbps 2 --threads 1 --quiet%s%.0d",
             cfg, plan_path, micro ? " --micro-batch " : "", micro);
    r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    tn_run_free(&r);
    /* --micro-batch fixes the split (the batch: none), which dyn then keeps to */
    snprintf(args, sizeof args, "profile %s --budget 110K --link-gbps 2 --threads 1 --micro-batch 6 --save-plan %s",
             cfg, plan_path);
    r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    tn_run_free(&r);
    text = tn_read(plan_path, NULL);
    ck_assert_msg(text && strstr(text, "\nmicro_batch 0\n"), "%s", text ? text : "(no plan)");
    free(text);
}
END_TEST

/* ---- the shipped graph nets ---- */

static size_t trainable_params(const net *n)
{
    size_t count = 0;
    for (int i = 0; i < n->nlayers; i++)
        for (int k = 0; k < n->layers[i]->nparams; k++)
            if (n->layers[i]->params[k].trainable) count += shape_count(n->layers[i]->params[k].shape);
    return count;
}

/* The papers' parameter counts (trainable: weights, biases, batch norm's scale and
 * shift), in millions. */
START_TEST(test_shipped_param_counts)
{
    static const struct { const char *cfg; double lo, hi; } nets[] = {
        {"configs/resnet20.cfg", 0.265, 0.275},   {"configs/resnet56.cfg", 0.84, 0.87},
        {"configs/resnet110.cfg", 1.70, 1.75},    {"configs/resnet1202.cfg", 19.35, 19.45},
        {"configs/resnet50.cfg", 25.55, 25.56},   {"configs/googlenet.cfg", 6.6, 7.0},
        {"configs/densenet40.cfg", 0.98, 1.06},   {"configs/resnet-fmnist.cfg", 0.15, 0.2},
    };
    for (size_t k = 0; k < sizeof nets / sizeof *nets; k++) {
        net_overrides ov = net_no_overrides();
        net *n = NULL;
        ck_assert_msg(net_load(nets[k].cfg, &ov, &n) == VDNN_OK, "%s: %s", nets[k].cfg, vdnn_errmsg());
        double m = (double)trainable_params(n) / 1e6;
        ck_assert_msg(m >= nets[k].lo && m <= nets[k].hi, "%s: %.4f M parameters, not in [%g, %g]", nets[k].cfg, m,
                      nets[k].lo, nets[k].hi);
        ck_assert(!n->chain);
        net_free(n);
    }
}
END_TEST

/* A few steps of ResNet-50 and GoogLeNet (and the CIFAR nets) at batch 2: they run, and
 * their losses are numbers. Under AddressSanitizer, where a 224x224 step takes a minute,
 * only the CIFAR nets run (the same kinds of layers and joins). Under ThreadSanitizer (one OpenMP thread there) they have no
 * threads of their own to check (the policy is none: the copy engine idles): they are
 * left to the other builds. */
START_TEST(test_shipped_train_steps)
{
    static const struct { const char *cfg; int classes, imagenet; } nets[] = {
        {"configs/resnet50.cfg", 1000, 1}, {"configs/googlenet.cfg", 1000, 1}, {"configs/resnet20.cfg", 10, 0},
        {"configs/densenet40.cfg", 10, 0},
    };
    if (UNDER_TSAN) {
        printf("SKIPPED: test_shipped_train_steps under ThreadSanitizer (policy none, no thread of ours works): make "
               "test runs them, make sanitize the CIFAR nets\n");
        return;
    }
    if (UNDER_ASAN)
        printf("SKIPPED: test_shipped_train_steps, resnet50 and googlenet, under AddressSanitizer (make test runs "
               "them; the CIFAR nets run here)\n");
    for (size_t k = 0; k < sizeof nets / sizeof *nets; k++) {
        if (UNDER_ASAN && nets[k].imagenet) continue;
        char *text = tn_synthetic_config(nets[k].cfg, nets[k].classes);
        net_overrides ov = net_no_overrides();
        ov.batch = 2;
        device *d;
        net *n = tn_attached(text, &ov, &d);
        if (nets[k].imagenet) ck_assert_int_eq(n->input.h, 224);
        tn_batch b = tn_batch_make(n, 2, 3);
        for (int step = 0; step < 2; step++) {
            step_result r;
            vdnn_status st = net_train_step(n, b.x, b.y, 2, 0.01, &r);
            ck_assert_msg(st == VDNN_OK, "%s step %d: %s", nets[k].cfg, step + 1, vdnn_errmsg());
            ck_assert_msg(isfinite(r.loss_sum) && r.loss_sum > 0, "%s step %d: loss %g", nets[k].cfg, step + 1,
                          r.loss_sum);
        }
        tn_batch_free(&b);
        tn_free(n, d);
        free(text);
    }
}
END_TEST

/* configs/ holds exactly what tools/gen_configs.py writes. */
START_TEST(test_generated_configs)
{
    if (system("command -v python3 > /dev/null 2>&1") != 0) {
        printf("SKIPPED: python3 is not installed; tools/gen_configs.py --check not run\n");
        return;
    }
    int rc = system("python3 tools/gen_configs.py --check");
    ck_assert_msg(rc == 0, "tools/gen_configs.py --check failed (status %d): regenerate configs/", rc);
}
END_TEST

static Suite *graph_suite(void)
{
    Suite *s = suite_create("graph");
    TCase *layers = tcase_create("layers");
    tcase_add_test(layers, test_add_values);
    tcase_add_test(layers, test_concat_values);
    tcase_add_test(layers, test_multi_gradcheck);
    tcase_add_test(layers, test_multi_shapes_refused);
    suite_add_tcase(s, layers);

    TCase *cfg = tcase_create("config");
    tcase_add_test(cfg, test_graph_of_net);
    tcase_add_test(cfg, test_graph_config_errors);
    tcase_add_test(cfg, test_graph_input_grammar);
    suite_add_tcase(s, cfg);

    TCase *iter = tcase_create("iteration");
    tcase_set_timeout(iter, 120);
    tcase_add_test(iter, test_accumulated_gradient);
    tcase_add_test(iter, test_recompute_across_branches);
    tcase_add_test(iter, test_policies_on_graph);
    tcase_add_loop_test(iter, test_blocks_under_every_policy, 0, 2);
    tcase_add_test(iter, test_alexnet_caffe_under_every_policy);
    tcase_add_test(iter, test_dyn_least);
    suite_add_tcase(s, iter);

    TCase *files = tcase_create("files");
    tcase_set_timeout(files, 120);
    tcase_add_checked_fixture(files, tn_dir_setup, tn_dir_teardown);
    tcase_add_test(files, test_plan_file_round_trip);
    tcase_add_test(files, test_resume_exact_graph);
    suite_add_tcase(s, files);

    TCase *shipped = tcase_create("shipped");
    tcase_set_timeout(shipped, 600);
    tcase_add_test(shipped, test_shipped_param_counts);
    tcase_add_test(shipped, test_shipped_train_steps);
    tcase_add_test(shipped, test_generated_configs);
    suite_add_tcase(s, shipped);
    return s;
}

int main(void) { return tn_run_suite(graph_suite()); }
