/* Check suite for ONNX in and out (onnx/, tools/onnx_cmd.c; docs/onnx.md).
 *
 * What is checked:
 *  - ONNX's own node tests (Debian's libonnx-testdata): `vdnn onnx-test` over the whole
 *    folder fails none, passes every 2-D case of the operators vdnn imports (listed
 *    below by name), and says UNSUPPORTED, naming the node, for the rest;
 *  - models PyTorch exported (tests/onnx/: bench/onnx_models.py's tinycnn, every layer
 *    kind vdnn imports) pass, and the opset-9 export, whose ceil-mode pooling is uneven
 *    padding, is refused as such;
 *  - a round trip: a net (every layer kind; shipped configs with graphs) exported and
 *    imported gives the same layers (names, inputs, shapes, hyper-parameters), the same
 *    parameters and the same predictions, bit for bit, and importing again writes the
 *    same config;
 *  - an implementation that is not vdnn's (tests/onnx_eval.py: onnx.checker and a NumPy
 *    evaluator) computes vdnn's predictions from its exports of trained shipped configs
 *    (make test only: under the sanitizers a SKIPPED line);
 *  - `vdnn import` writes a config and a checkpoint that `train --init` fine-tunes, under
 *    --policy dyn in a small budget bit for bit as under none;
 *  - hostile and broken models (truncated, a cycle, a value given twice, huge declared
 *    sizes, external data, colliding names, unknown operators, a ceil-mode window ONNX
 *    cannot express) give errors that name what is wrong, never a crash. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testnet.h"
#include "tests/tsan.h"

#ifdef VDNN_ONNX
#include "onnx/export.h"
#include "onnx/import.h"

#define NODE_DIR "/usr/share/libonnx-testdata/data/node"

static int skip_without(const char *path, const char *check)
{
    if (tn_exists(path)) return 0;
    printf("SKIPPED: %s: %s is missing (Debian's libonnx-testdata: sh tools/setup.sh)\n", check, path);
    return 1;
}

static int have_python_onnx(void)
{
    return system("/usr/bin/python3 -c 'import onnx, numpy' >/dev/null 2>&1") == 0;
}

/* ---- ONNX's node tests ---- */

/* Every 2-D case of the operators vdnn imports, in ONNX 1.12's node tests. */
static const char *const must_pass[] = {
    "averagepool_2d_ceil", "averagepool_2d_default", "averagepool_2d_pads", "averagepool_2d_pads_count_include_pad",
    "averagepool_2d_precomputed_pads", "averagepool_2d_precomputed_pads_count_include_pad",
    "averagepool_2d_precomputed_same_upper", "averagepool_2d_precomputed_strides", "averagepool_2d_strides",
    "basic_conv_with_padding", "basic_conv_without_padding", "batchnorm_epsilon", "batchnorm_example", "clip",
    "clip_default_inbounds", "clip_default_max", "clip_default_min", "clip_example", "clip_inbounds",
    "clip_outbounds", "clip_splitbounds", "conv_with_autopad_same", "conv_with_strides_and_asymmetric_padding",
    "conv_with_strides_no_padding", "conv_with_strides_padding", "dropout_default", "dropout_default_old",
    "dropout_default_ratio", "dropout_random_old", "flatten_axis0", "flatten_axis1", "flatten_axis2",
    "flatten_axis3", "flatten_default_axis", "flatten_negative_axis1", "flatten_negative_axis2",
    "flatten_negative_axis3", "flatten_negative_axis4", "gemm_alpha", "gemm_beta", "gemm_default_no_bias",
    "gemm_default_scalar_bias", "gemm_default_single_elem_vector_bias", "gemm_default_vector_bias",
    "gemm_default_zero_bias", "gemm_transposeB", "globalaveragepool", "globalaveragepool_precomputed",
    "globalmaxpool", "globalmaxpool_precomputed", "identity", "leakyrelu", "leakyrelu_default", "leakyrelu_example",
    "lrn", "lrn_default", "matmul_2d", "maxpool_2d_ceil", "maxpool_2d_default", "maxpool_2d_pads",
    "maxpool_2d_precomputed_pads", "maxpool_2d_precomputed_same_upper", "maxpool_2d_precomputed_strides",
    "maxpool_2d_strides", "relu", "reshape_extended_dims", "reshape_negative_dim", "reshape_negative_extended_dims",
    "reshape_one_dim", "reshape_reduced_dims", "reshape_reordered_all_dims", "reshape_reordered_last_dims",
    "reshape_zero_and_negative_dim", "reshape_zero_dim", "sigmoid", "sigmoid_example", "softmax_example",
    "softmax_large_number", "sum_one_input", "tanh", "tanh_example", NULL};

/* Cases of those operators vdnn cannot run exactly: refused, with the node named. */
static const char *const must_refuse[][2] = {
    {"maxpool_3d_default", "5 dimensions"},          {"averagepool_1d_default", "2-D"},
    {"maxpool_2d_same_upper", "uneven padding"},     {"maxpool_2d_dilations", "dilated"},
    {"gemm_transposeA", "transA"},                   {"softmax_axis_0", "axis 0"},
    {"add", "adds a constant"},                      {"convtranspose", "ConvTranspose"},
    {"maxpool_with_argmax_2d_precomputed_pads", "2 outputs"},
    {"batchnorm_example_training_mode", "3 outputs"},
};

START_TEST(node_tests_pass_or_are_refused)
{
    if (skip_without(NODE_DIR, "node_tests_pass_or_are_refused")) return;
    tn_run r = tn_vdnn(tn_dir, "", "onnx-test " NODE_DIR "/test_*");
    tn_run_ok(&r, "onnx-test " NODE_DIR "/test_*");
    ck_assert_msg(strstr(r.out, ", 0 failed, ") != NULL, "%s", tn_tail(r.out, 3000));
    for (int i = 0; must_pass[i]; i++) {
        char line[256];
        snprintf(line, sizeof line, "PASS " NODE_DIR "/test_%s\n", must_pass[i]);
        ck_assert_msg(strstr(r.out, line) != NULL, "test_%s did not pass:\n%s", must_pass[i], tn_tail(r.out, 2000));
    }
    for (size_t i = 0; i < sizeof must_refuse / sizeof *must_refuse; i++) {
        char line[256];
        snprintf(line, sizeof line, "UNSUPPORTED " NODE_DIR "/test_%s: ", must_refuse[i][0]);
        const char *at = strstr(r.out, line);
        ck_assert_msg(at != NULL, "test_%s was not refused:\n%s", must_refuse[i][0], tn_tail(r.out, 2000));
        const char *end = strchr(at, '\n');
        ck_assert_msg(end && memmem(at, (size_t)(end - at), must_refuse[i][1], strlen(must_refuse[i][1])),
                      "test_%s's refusal lacks '%s': %.*s", must_refuse[i][0], must_refuse[i][1],
                      end ? (int)(end - at) : 200, at);
    }
    tn_run_free(&r);
}
END_TEST

START_TEST(pytorch_exports_pass)
{
    tn_run r = tn_vdnn(tn_dir, "", "onnx-test --verbose tests/onnx/tinycnn-opset13 tests/onnx/tinycnn-opset17");
    tn_run_ok(&r, "onnx-test tinycnn");
    ck_assert_msg(strstr(r.out, "PASS tests/onnx/tinycnn-opset13: largest error") &&
                      strstr(r.out, "PASS tests/onnx/tinycnn-opset17: largest error") &&
                      strstr(r.out, "2 passed, 0 failed, 0 unsupported"),
                  "%s", r.out);
    tn_run_free(&r);
    /* opset 9 has no ceil_mode: PyTorch pads the bottom and right instead */
    r = tn_vdnn(tn_dir, "", "onnx-test tests/onnx/tinycnn-opset9");
    tn_run_ok(&r, "onnx-test tinycnn-opset9");
    ck_assert_msg(strstr(r.out, "UNSUPPORTED tests/onnx/tinycnn-opset9: node '/pool1/MaxPool' (MaxPool): uneven "
                                "padding (0, 0, 2, 2)") != NULL,
                  "%s", r.out);
    tn_run_free(&r);
}
END_TEST

/* ---- round trips ---- */

/* Every layer kind export writes, in a graph (a three-way sum, a concat, a dropout). */
#define EVERY_LAYER                                                                                              \
    "[net]\nbatch = 3\nchannels = 4\nheight = 13\nwidth = 11\n"                                                  \
    "[data]\nset = synthetic\ntrain_size = 16\ntest_size = 8\nclasses = 5\n"                                     \
    "[convolutional]\nname = stem\nfilters = 8\nsize_h = 3\nsize_w = 2\npad_top = 1\npad_bottom = 2\n"           \
    "pad_left = 0\npad_right = 1\nstride_h = 1\nstride_w = 2\n"                                                  \
    "[batchnorm]\nname = bn\nmomentum = 0.25\neps = 0.001\n[relu]\nname = r1\n"                                \
    "[convolutional]\nname = grouped\nfilters = 8\nsize = 3\npad = 2\ndilation = 2\ngroups = 4\nbias = 0\n"      \
    "[leaky]\nslope = 0.2\n[convolutional]\nname = dw\ninput = r1\nfilters = 8\nsize = 3\npad = 1\ngroups = 8\n" \
    "[clip]\nmin = -1.5\nmax = 2.5\n[tanh]\nname = t\n[sigmoid]\nname = s\ninput = r1\n"                         \
    "[add]\nname = sum3\ninput = leaky5, t, s\n[dropout]\nprobability = 0.3\n"                                   \
    "[lrn]\nsize = 3\nalpha = 0.001\nbeta = 0.7\nk = 2\n"                                                        \
    "[maxpool]\nname = mp\nsize = 3\nstride = 2\npad = 1\nceil_mode = 1\n"                                       \
    "[avgpool]\nname = ap\ninput = lrn12\nsize_h = 2\nsize_w = 4\nstride = 2\npad_h = 1\npad_w = 2\ncount_pad = 0\n"        \
    "[concat]\ninput = mp, ap\n[avgpool]\nglobal = 1\n[maxpool]\nname = gmp\ninput = concat15\nglobal = 1\n"     \
    "[add]\ninput = avgpool16, gmp\n[connected]\noutput = 7\n[relu]\n[connected]\noutput = 5\nbias = 0\n"         \
    "[softmax]\n"

/* Which map a layer's input k is, seen through dropouts (export leaves them out). */
static int through_dropouts(const net *n, int j)
{
    while (j > 0 && !strcmp(n->layers[j - 1]->ops->type, "dropout")) j = n->layers[j - 1]->input[0];
    return j;
}

/* Random parameters of every tensor (variances positive), so that nothing is 0 or 1. */
static void scramble(net *n, uint64_t seed)
{
    for (int i = 0; i < n->nlayers; i++) {
        layer *l = n->layers[i];
        for (int k = 0; k < l->nparams; k++) {
            param *p = &l->params[k];
            size_t c = shape_count(p->shape);
            float *h = malloc(c * sizeof *h);
            ck_assert_ptr_nonnull(h);
            for (size_t e = 0; e < c; e++) {
                float v = 0.5f * (float)(((seed * 2654435761u + i * 97 + k * 13 + e * 7919) % 2001) - 1000) / 1000.f;
                h[e] = strstr(p->name, "var") ? 0.5f + v * v : v;
            }
            ck_assert_int_eq(device_upload(n->dev, p->value, h, c * sizeof *h), VDNN_OK);
            free(h);
        }
    }
}

/* Imports `path` as a net attached on its own device, its parameters loaded. */
static net *import_net(const char *path, onnx_import *r, device **d)
{
    Onnx__ModelProto *m = NULL;
    ck_assert_msg(onnx_model_read(path, &m) == VDNN_OK, "%s", vdnn_errmsg());
    onnx_import_opts o = {.source = "model.onnx"};
    ck_assert_msg(onnx_import_model(m, &o, r) == VDNN_OK, "%s", vdnn_errmsg());
    onnx_model_free(m);
    net *n = tn_attached(r->cfg, NULL, d);
    ck_assert_msg(onnx_import_load(r, n) == VDNN_OK, "%s", vdnn_errmsg());
    return n;
}

static void same_predictions(net *a, net *b)
{
    tn_batch x = tn_batch_make(a, a->input.n, 5);
    size_t count = (size_t)a->input.n * shape_per_item(a->layers[a->nlayers - 1]->out);
    float *ya = malloc(count * sizeof *ya), *yb = malloc(count * sizeof *yb);
    ck_assert_int_eq(net_predict(a, x.x, a->input.n, a->nlayers, ya), VDNN_OK);
    ck_assert_int_eq(net_predict(b, x.x, b->input.n, b->nlayers, yb), VDNN_OK);
    ck_assert_msg(!memcmp(ya, yb, count * sizeof *ya), "the imported net predicts other bits");
    free(ya);
    free(yb);
    tn_batch_free(&x);
}

static void round_trip(const char *text, const char *what)
{
    device *da, *db, *dc;
    net *a = tn_attached(text, NULL, &da);
    scramble(a, 3);
    char path[600], again[600];
    tn_path(path, sizeof path, "net.onnx");
    ck_assert_msg(onnx_export_net(a, path, NULL) == VDNN_OK, "%s: %s", what, vdnn_errmsg());
    onnx_import r = {0}, r2 = {0};
    net *b = import_net(path, &r, &db);
    /* the same layers but dropouts, in order, of the same names, inputs and shapes */
    int j = 0;
    for (int i = 0; i < a->nlayers; i++) {
        const layer *la = a->layers[i];
        if (!strcmp(la->ops->type, "dropout")) continue;
        ck_assert_msg(j < b->nlayers, "%s: the import has %d layers", what, b->nlayers);
        const layer *lb = b->layers[j++];
        ck_assert_msg(!strcmp(la->ops->type, lb->ops->type) && !strcmp(la->name, lb->name),
                      "%s: layer %s [%s] came back as %s [%s]", what, la->name, la->ops->type, lb->name, lb->ops->type);
        ck_assert_msg(!memcmp(&la->out, &lb->out, sizeof la->out), "%s: layer %s changed shape", what, la->name);
        ck_assert_int_eq(la->ninputs, lb->ninputs);
        for (int k = 0; k < la->ninputs; k++)
            ck_assert_str_eq(net_map_name(a, through_dropouts(a, la->input[k])), net_map_name(b, lb->input[k]));
        char da_[256] = "", db_[256] = "";
        if (la->ops->describe) la->ops->describe(la, da_, sizeof da_);
        if (lb->ops->describe) lb->ops->describe(lb, db_, sizeof db_);
        ck_assert_msg(!strcmp(da_, db_), "%s: layer %s was '%s', came back '%s'", what, la->name, da_, db_);
        ck_assert_int_eq(la->nparams, lb->nparams);
        ck_assert_int_eq(la->priv != NULL, lb->priv != NULL);
        if (la->priv && strcmp(la->ops->type, "convolutional") && strcmp(la->ops->type, "maxpool") &&
            strcmp(la->ops->type, "avgpool"))
            ck_assert_msg(!memcmp(la->priv, lb->priv, la->ops->priv_bytes), "%s: layer %s's settings differ", what,
                          la->name);
        for (int k = 0; k < la->nparams; k++) {
            size_t c = shape_count(la->params[k].shape);
            ck_assert_msg(!memcmp(&la->params[k].shape, &lb->params[k].shape, sizeof(shape4)), "%s: %s.%s changed shape", what,
                          la->name, la->params[k].name);
            float *pa = tn_download(a, la->params[k].value, c), *pb = tn_download(b, lb->params[k].value, c);
            ck_assert_msg(!memcmp(pa, pb, c * sizeof *pa), "%s: %s.%s differs", what, la->name, la->params[k].name);
            free(pa);
            free(pb);
        }
    }
    ck_assert_int_eq(j, b->nlayers);
    same_predictions(a, b);
    /* the import of the import's export is the same config */
    tn_path(again, sizeof again, "again.onnx");
    ck_assert_msg(onnx_export_net(b, again, NULL) == VDNN_OK, "%s", vdnn_errmsg());
    net *c = import_net(again, &r2, &dc);
    ck_assert_msg(!strcmp(r.cfg, r2.cfg), "%s: a second round trip wrote another config:\n%s\n----\n%s", what, r.cfg,
                  r2.cfg);
    tn_free(c, dc);
    tn_free(b, db);
    tn_free(a, da);
    onnx_import_free(&r);
    onnx_import_free(&r2);
}

START_TEST(round_trip_every_layer) { round_trip(EVERY_LAYER, "every layer"); }
END_TEST

/* Vectors read as maps: a convolution, an LRN and a pooling after a fully connected
 * layer (export reshapes its (N, features) output back to (N, C, 1, 1)), and a logistic
 * loss of one output. */
#define VECTORS_AS_MAPS                                                                                  \
    "[net]\nbatch = 2\nchannels = 3\nheight = 6\nwidth = 6\n"                                            \
    "[train]\nepochs = 1\nlearning_rate = 0.05\nseed = 2\n"                                              \
    "[data]\nset = synthetic\ntrain_size = 8\ntest_size = 4\nclasses = 2\n"                               \
    "[convolutional]\nfilters = 4\nsize = 3\npad = 1\n[connected]\noutput = 8\n"                          \
    "[convolutional]\nfilters = 6\nsize = 1\n[lrn]\nsize = 3\n[maxpool]\nglobal = 1\n"                     \
    "[connected]\noutput = 1\n[logistic]\n"

START_TEST(round_trip_vectors_as_maps) { round_trip(VECTORS_AS_MAPS, "vectors as maps"); }
END_TEST

/* Shipped configs, their classes, and whether they are ImageNet nets to shrink to 48x48. */
static const struct shipped_cfg {
    const char *path;
    int classes, shrink;
} shipped[] = {{"configs/lenet.cfg", 10, 0},   {"configs/resnet20.cfg", 10, 0}, {"configs/densenet40.cfg", 10, 0},
               {"configs/googlenet.cfg", 1000, 1}};

START_TEST(round_trip_shipped)
{
    char *text = tn_synthetic_config(shipped[_i].path, shipped[_i].classes);
    if (shipped[_i].shrink) text = tn_imagenet_48(text);
    /* batch 2: the round trip's cost is the nets' forward passes */
    char *b = strstr(text, "batch = ");
    ck_assert_ptr_nonnull(b);
    char *end = strchr(b, '\n');
    memmove(b + 9, end, strlen(end) + 1);
    memcpy(b, "batch = 2", 9);
    round_trip(text, shipped[_i].path);
    free(text);
}
END_TEST

START_TEST(export_refuses_what_onnx_cannot_say)
{
    device *d;
    /* 5 + 2 - 2 over stride 2: ceil gives 4 windows, the last starting in the padding,
     * which vdnn drops and ONNX keeps */
    net *n = tn_attached("[net]\nbatch = 1\nchannels = 1\nheight = 5\nwidth = 5\n"
                         "[data]\nset = synthetic\ntrain_size = 8\ntest_size = 8\nclasses = 3\n"
                         "[maxpool]\nsize = 2\nstride = 2\npad = 1\nceil_mode = 1\n[connected]\noutput = 3\n[softmax]\n",
                         NULL, &d);
    char path[600];
    tn_path(path, sizeof path, "ceil.onnx");
    ck_assert_int_eq(onnx_export_net(n, path, NULL), VDNN_EINVAL);
    tn_msg_has("maxpool1", "ceil_mode");
    ck_assert(!tn_exists(path));
    tn_free(n, d);
}
END_TEST

/* ---- exports against another implementation ---- */

/* Trains `cfg` 2 steps at batch 2 on synthetic data, exports it with --test-data, and
 * has onnx.checker with tests/onnx_eval.py (NumPy), then vdnn's own runner, read the
 * layout: vdnn's prediction must be what the graph computes. */
static void export_and_check(const char *check, const char *cfg)
{
    if (UNDER_SANITIZER) {
        /* what it checks is arithmetic against another evaluator; the round trips and the
         * fuzz target run the export under the sanitizers */
        printf("SKIPPED: %s: trains a net and runs a Python evaluator (make test runs it)\n", check);
        return;
    }
    if (!have_python_onnx()) {
        printf("SKIPPED: %s: /usr/bin/python3 lacks onnx or numpy (python3-onnx: sh tools/setup.sh)\n", check);
        return;
    }
    char args[2048], ckpt[600], dir[600], cmd[1400];
    tn_path(ckpt, sizeof ckpt, "w.ckpt");
    tn_path(dir, sizeof dir, "layout");
    snprintf(args, sizeof args, "train %s --data synthetic --batch 2 --steps 2 --threads 1 --quiet --save %s", cfg,
             ckpt);
    tn_run r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    tn_run_free(&r);
    snprintf(args, sizeof args, "export %s --batch 2 --weights %s --test-data %s", cfg, ckpt, dir);
    r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    ck_assert_msg(strstr(r.out, "as ONNX opset 13") != NULL, "%s", r.out);
    tn_run_free(&r);
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/onnx_eval.py %s", dir);
    r = tn_shell(tn_dir, cmd);
    ck_assert_msg(r.status == 0 && strstr(r.out, "1 passed, 0 failed, 0 unsupported"),
                  "%s: the NumPy evaluator disagrees with vdnn (status %d):\n%s\n%s", cfg, r.status, r.out, r.err);
    tn_run_free(&r);
    snprintf(args, sizeof args, "onnx-test %s", dir);
    r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    tn_run_free(&r);
}

/* A chain and a graph of concats (ResNet's adds: the round trips) */
static const char *const checked[] = {"configs/lenet.cfg", "configs/densenet40.cfg", NULL};

START_TEST(exports_pass_onnx_checker_and_numpy)
{
    char check[128];
    snprintf(check, sizeof check, "exports_pass_onnx_checker_and_numpy[%s]", checked[_i]);
    export_and_check(check, checked[_i]);
}
END_TEST

START_TEST(vectors_as_maps_pass_numpy)
{
    char cfg[600];
    tn_path(cfg, sizeof cfg, "v.cfg");
    tn_write_text(cfg, VECTORS_AS_MAPS);
    export_and_check("vectors_as_maps_pass_numpy", cfg);
}
END_TEST

/* ---- the commands ---- */

START_TEST(import_then_fine_tune_in_a_budget)
{
    char cfg[600], ckpt[600], none[600], dyn[600], args[3000];
    tn_path(cfg, sizeof cfg, "tiny.cfg");
    tn_path(ckpt, sizeof ckpt, "tiny.ckpt");
    tn_path(none, sizeof none, "none.ckpt");
    tn_path(dyn, sizeof dyn, "dyn.ckpt");
    snprintf(args, sizeof args, "import tests/onnx/tinycnn-opset13/model.onnx --cfg %s --weights %s --batch 8", cfg,
             ckpt);
    tn_run r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    ck_assert_msg(strstr(r.out, "23 ONNX nodes as 21 layers") && strstr(r.out, "vdnn train"), "%s", r.out);
    tn_run_free(&r);
    size_t len;
    char *text = tn_read(cfg, &len);
    ck_assert_ptr_nonnull(text);
    ck_assert_msg(strstr(text, "# ONNX node \"/conv2/Conv\" (Conv)\n[convolutional]\nname = conv2_Conv\n") &&
                      strstr(text, "groups = 2\n") && strstr(text, "dilation = 2\n") &&
                      strstr(text, "[lrn]\nname = lrn_LRN\n") && strstr(text, "count_pad = 0\n") &&
                      strstr(text, "ceil_mode = 1\n") && strstr(text, "[clip]\nname = Clip\n") &&
                      strstr(text, "[softmax]\nname = loss\n") && strstr(text, "batch = 8\n"),
                  "%s", text);
    /* the same algorithms under both policies: CPU algorithms round differently */
    char *pinned = malloc(2 * len + 1), *o = pinned;
    for (const char *s = text; *s;) {
        const char *hit = strstr(s, "[convolutional]\n");
        size_t k = hit ? (size_t)(hit - s) + 16 : strlen(s);
        memcpy(o, s, k);
        o += k;
        s += k;
        if (hit) o += sprintf(o, "algo = im2col\n");
    }
    *o = 0;
    tn_write_text(cfg, pinned);
    free(pinned);
    free(text);
    snprintf(args, sizeof args, "train %s --init %s --steps 2 --threads 1 --policy none --save %s", cfg, ckpt, none);
    r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    ck_assert_msg(strstr(r.out, "16 of 16 tensors kept") != NULL, "%s", r.out);
    tn_run_free(&r);
    /* 2.4 MiB: under none's 3.4, over the least plan without micro-batches (2.3); the
     * whole batch (micro-batches would sum the gradients in another order) */
    snprintf(args, sizeof args,
             "train %s --init %s --steps 2 --threads 1 --policy dyn --budget 2400K --micro-batch 8 --save %s", cfg, ckpt,
             dyn);
    r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    tn_run_free(&r);
    ck_assert_msg(tn_same_file(none, dyn), "fine-tuning under dyn in 2.4 MiB differs from none");
}
END_TEST

static void fails_with(const char *args, const char *a, const char *b)
{
    tn_run r = tn_vdnn(tn_dir, "", args);
    ck_assert_msg(r.status != 0 && strstr(r.err, a) && (!b || strstr(r.err, b)), "`vdnn %s` (status %d):\n%s\n%s",
                  args, r.status, r.out, r.err);
    tn_run_free(&r);
}

START_TEST(bad_command_lines_and_files)
{
    char junk[600], cut[600], args[2000], empty[600];
    tn_path(junk, sizeof junk, "junk.onnx");
    tn_write_text(junk, "[net]\nbatch = 1\n");
    size_t len;
    char *model = tn_read("tests/onnx/tinycnn-opset13/model.onnx", &len);
    ck_assert_ptr_nonnull(model);
    tn_path(cut, sizeof cut, "cut.onnx");
    tn_write(cut, model, len / 2);
    free(model);
    fails_with("import tests/onnx/tinycnn-opset13/model.onnx", "--cfg", NULL);
    fails_with("import /nonexistent.onnx --cfg a.cfg --weights a.ckpt", "/nonexistent.onnx", NULL);
    snprintf(args, sizeof args, "import %s --cfg %s.cfg --weights %s.ckpt", junk, junk, junk);
    fails_with(args, "junk.onnx", "not an ONNX model");
    snprintf(args, sizeof args, "import %s --cfg %s.cfg --weights %s.ckpt", cut, cut, cut);
    fails_with(args, "cut.onnx", "not an ONNX model");
    snprintf(args, sizeof args, "import tests/onnx/tinycnn-opset9/model.onnx --cfg %s.cfg --weights %s.ckpt", cut, cut);
    fails_with(args, "node '/pool1/MaxPool' (MaxPool)", "uneven padding");
    fails_with("export configs/lenet.cfg -o x.onnx", "--weights", NULL);
    fails_with("onnx-test", "one or more folders", NULL);
    /* a folder without a model is a FAIL line, and the run fails */
    tn_path(empty, sizeof empty, "nothing");
    {
        char mk[700];
        snprintf(mk, sizeof mk, "mkdir -p '%s'", empty);
        ck_assert_int_eq(system(mk), 0);
    }
    snprintf(args, sizeof args, "onnx-test %s tests/onnx/tinycnn-opset13", empty);
    tn_run r = tn_vdnn(tn_dir, "", args);
    ck_assert_msg(r.status == 1 && strstr(r.out, "FAIL ") && strstr(r.out, "model.onnx") &&
                      strstr(r.out, "PASS tests/onnx/tinycnn-opset13") && strstr(r.out, "1 passed, 1 failed, 0 unsupported"),
                  "%s", r.out);
    tn_run_free(&r);
}
END_TEST

/* ---- hostile models, built here ---- */

typedef struct mk {
    Onnx__ModelProto m;
    Onnx__GraphProto g;
    Onnx__OperatorSetIdProto op;
    Onnx__OperatorSetIdProto *ops[1];
    Onnx__NodeProto nodes[80], *pn[80];
    char *ins[80][3], *outs[80][1];
    Onnx__ValueInfoProto vin, vout, *pin[1], *pout[1];
    Onnx__TypeProto tin;
    Onnx__TypeProto__Tensor tt;
    Onnx__TensorShapeProto sh;
    Onnx__TensorShapeProto__Dimension dims[4], *pd[4];
    Onnx__TensorProto init[4], *pi[4];
} mk;

/* A graph of `n` one-input nodes on a 1x2x4x4 input "x", output "y". */
static void mk_init(mk *k, int nodes)
{
    memset(k, 0, sizeof *k);
    onnx__model_proto__init(&k->m);
    onnx__graph_proto__init(&k->g);
    onnx__operator_set_id_proto__init(&k->op);
    k->op.domain = "";
    k->op.has_version = 1;
    k->op.version = 13;
    k->ops[0] = &k->op;
    k->m.n_opset_import = 1;
    k->m.opset_import = k->ops;
    k->m.graph = &k->g;
    onnx__value_info_proto__init(&k->vin);
    onnx__value_info_proto__init(&k->vout);
    onnx__type_proto__init(&k->tin);
    onnx__type_proto__tensor__init(&k->tt);
    onnx__tensor_shape_proto__init(&k->sh);
    int64_t d[4] = {1, 2, 4, 4};
    for (int i = 0; i < 4; i++) {
        onnx__tensor_shape_proto__dimension__init(&k->dims[i]);
        k->dims[i].value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        k->dims[i].dim_value = d[i];
        k->pd[i] = &k->dims[i];
    }
    k->sh.n_dim = 4;
    k->sh.dim = k->pd;
    k->tt.has_elem_type = 1;
    k->tt.elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    k->tt.shape = &k->sh;
    k->tin.value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    k->tin.tensor_type = &k->tt;
    k->vin.name = "x";
    k->vin.type = &k->tin;
    k->vout.name = "y";
    k->pin[0] = &k->vin;
    k->pout[0] = &k->vout;
    k->g.n_input = 1;
    k->g.input = k->pin;
    k->g.n_output = 1;
    k->g.output = k->pout;
    for (int i = 0; i < nodes; i++) {
        onnx__node_proto__init(&k->nodes[i]);
        k->nodes[i].op_type = "Relu";
        k->nodes[i].n_input = 1;
        k->nodes[i].input = k->ins[i];
        k->nodes[i].n_output = 1;
        k->nodes[i].output = k->outs[i];
        k->pn[i] = &k->nodes[i];
    }
    k->g.n_node = (size_t)nodes;
    k->g.node = k->pn;
}

/* Initializer t of k: `count` floats of `data`, shaped by dims. */
static void mk_tensor(mk *k, int t, char *name, int ndims, int64_t *dims, float *data, int count)
{
    onnx__tensor_proto__init(&k->init[t]);
    k->init[t].name = name;
    k->init[t].n_dims = (size_t)ndims;
    k->init[t].dims = dims;
    k->init[t].has_data_type = 1, k->init[t].data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    k->init[t].n_float_data = (size_t)count;
    k->init[t].float_data = data;
    k->pi[t] = &k->init[t];
    if ((size_t)t + 1 > k->g.n_initializer) k->g.n_initializer = (size_t)t + 1;
    k->g.initializer = k->pi;
}

/* Imports k (through its encoding, as a file would come) and returns the status. */
static vdnn_status mk_import(mk *k, onnx_import *r)
{
    size_t len = onnx__model_proto__get_packed_size(&k->m);
    uint8_t *buf = malloc(len + 1);
    onnx__model_proto__pack(&k->m, buf);
    Onnx__ModelProto *m = NULL;
    vdnn_status st = onnx_model_parse(buf, len, "hostile.onnx", &m);
    free(buf);
    onnx_import_opts o = {.source = "hostile.onnx"};
    if (st == VDNN_OK) st = onnx_import_model(m, &o, r);
    onnx_model_free(m);
    return st;
}

START_TEST(hostile_models)
{
    mk k;
    onnx_import r;
    /* a cycle: a reads b's output, b a's */
    mk_init(&k, 2);
    k.ins[0][0] = "b_out", k.outs[0][0] = "a_out", k.nodes[0].name = "a";
    k.ins[1][0] = "a_out", k.outs[1][0] = "y", k.nodes[1].name = "b";
    ck_assert_int_eq(mk_import(&k, &r), VDNN_EFORMAT);
    tn_msg_has("node 'a' (Relu)", "topological order, or the graph has a cycle");
    ck_assert_int_eq(r.refused, 0);
    /* one value given by two nodes */
    mk_init(&k, 2);
    k.ins[0][0] = "x", k.outs[0][0] = "y";
    k.ins[1][0] = "x", k.outs[1][0] = "y";
    ck_assert_int_eq(mk_import(&k, &r), VDNN_EFORMAT);
    tn_msg_has("value 'y' is given twice", NULL);
    /* names that collide once made vdnn names, and one that is the input's */
    mk_init(&k, 3);
    k.ins[0][0] = "x", k.outs[0][0] = "v0", k.nodes[0].name = "a.b";
    k.ins[1][0] = "v0", k.outs[1][0] = "v1", k.nodes[1].name = "a/b";
    k.ins[2][0] = "v1", k.outs[2][0] = "y", k.nodes[2].name = "data";
    ck_assert_msg(mk_import(&k, &r) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_msg(strstr(r.cfg, "name = a_b\n") && strstr(r.cfg, "name = a_b_2\n") && strstr(r.cfg, "name = data_2\n"),
                  "%s", r.cfg);
    onnx_import_free(&r);
    /* a name that would write config lines of its own stays inside its comment */
    mk_init(&k, 1);
    k.ins[0][0] = "x", k.outs[0][0] = "y", k.nodes[0].name = "a\n[relu]\n#";
    ck_assert_msg(mk_import(&k, &r) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_msg(strstr(r.cfg, "# ONNX node \"a?[relu]?#\" (Relu)\n[relu]\nname = a_relu\n") && r.nlayers == 2,
                  "%s", r.cfg);
    onnx_import_free(&r);
    /* an operator vdnn does not know: refused, the node named */
    mk_init(&k, 1);
    k.ins[0][0] = "x", k.outs[0][0] = "y", k.nodes[0].name = "odd", k.nodes[0].op_type = "Erf";
    ck_assert_int_eq(mk_import(&k, &r), VDNN_EINVAL);
    ck_assert_int_eq(r.refused, 1);
    tn_msg_has("node 'odd' (Erf)", "operator Erf is not supported");
    /* an opset of the future */
    mk_init(&k, 1);
    k.ins[0][0] = "x", k.outs[0][0] = "y";
    k.op.version = 99;
    ck_assert_int_eq(mk_import(&k, &r), VDNN_EINVAL);
    tn_msg_has("opset 99", NULL);
    /* weights that claim 2^50 elements and hold one */
    mk_init(&k, 1);
    static char *conv_in[2] = {"x", "w"};
    k.nodes[0].op_type = "Conv", k.nodes[0].name = "c", k.nodes[0].n_input = 2, k.nodes[0].input = conv_in;
    k.outs[0][0] = "y";
    onnx__tensor_proto__init(&k.init[0]);
    static int64_t huge[4] = {1 << 20, 2, 1 << 15, 1 << 15};
    static uint8_t four[4];
    k.init[0].name = "w", k.init[0].n_dims = 4, k.init[0].dims = huge;
    k.init[0].has_data_type = 1, k.init[0].data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    k.init[0].has_raw_data = 1, k.init[0].raw_data.len = 4, k.init[0].raw_data.data = four;
    k.pi[0] = &k.init[0];
    k.g.n_initializer = 1, k.g.initializer = k.pi;
    ck_assert(mk_import(&k, &r) != VDNN_OK);
    tn_msg_has("node 'c' (Conv)", NULL);
    /* the same weights of a sane shape, their data in an external file */
    static int64_t small[4] = {1, 2, 1, 1};
    k.init[0].dims = small;
    k.init[0].has_raw_data = 0, k.init[0].has_data_location = 1;
    k.init[0].data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    ck_assert(mk_import(&k, &r) != VDNN_OK);
    tn_msg_has("external file", NULL);
    /* batch-norm statistics that claim 2^40 elements */
    mk_init(&k, 1);
    static char *bn_in[5] = {"x", "s", "s", "s", "s"};
    static int64_t vast[2] = {1 << 20, 1 << 20};
    static float one[1];
    k.nodes[0].op_type = "BatchNormalization", k.nodes[0].name = "bn", k.nodes[0].n_input = 5;
    k.nodes[0].input = bn_in;
    k.outs[0][0] = "y";
    mk_tensor(&k, 0, "s", 2, vast, one, 1);
    ck_assert(mk_import(&k, &r) != VDNN_OK);
    tn_msg_has("node 'bn'", "2^32");
    /* a graph whose output no node computes */
    mk_init(&k, 1);
    k.ins[0][0] = "x", k.outs[0][0] = "z";
    ck_assert_int_eq(mk_import(&k, &r), VDNN_EFORMAT);
    tn_msg_has("output 'y'", NULL);
}
END_TEST

/* A MatMul and an Add of one value per output: a fully connected layer with its bias;
 * a Conv and an Add of one value per channel: its bias. The predictions are checked
 * by hand. */
START_TEST(bias_adds_fold)
{
    static mk k;
    static char *flat_in[1] = {"x"}, *mm_in[2] = {"flat", "w"}, *add_in[2] = {"mm", "b"};
    static char *flat_out[1] = {"flat"}, *mm_out[1] = {"mm"}, *add_out[1] = {"y"};
    static float w[32 * 3], b[3];
    static int64_t wd[2] = {32, 3}, bd[1] = {3};
    mk_init(&k, 3);
    k.nodes[0].op_type = "Flatten", k.nodes[0].input = flat_in, k.nodes[0].output = flat_out;
    k.nodes[1].op_type = "MatMul", k.nodes[1].name = "fc", k.nodes[1].n_input = 2, k.nodes[1].input = mm_in;
    k.nodes[1].output = mm_out;
    k.nodes[2].op_type = "Add", k.nodes[2].n_input = 2, k.nodes[2].input = add_in, k.nodes[2].output = add_out;
    for (int i = 0; i < 96; i++) w[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < 3; i++) b[i] = 0.5f * (float)i;
    mk_tensor(&k, 0, "w", 2, wd, w, 96);
    mk_tensor(&k, 1, "b", 1, bd, b, 3);
    onnx_import r;
    ck_assert_msg(mk_import(&k, &r) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_msg(strstr(r.cfg, "[connected]\nname = fc\noutput = 3\n") && !strstr(r.cfg, "bias = 0"), "%s", r.cfg);
    device *d;
    net *n = tn_attached(r.cfg, NULL, &d);
    ck_assert_int_eq(onnx_import_load(&r, n), VDNN_OK);
    float x[32], y[3];
    for (int i = 0; i < 32; i++) x[i] = 0.125f * (float)(i % 5);
    ck_assert_int_eq(net_predict(n, x, 1, 1, y), VDNN_OK);
    for (int o = 0; o < 3; o++) {
        double want = b[o];
        for (int i = 0; i < 32; i++) want += (double)x[i] * w[i * 3 + o];
        ck_assert_msg(fabs(y[o] - want) < 1e-4, "output %d: %g, %g expected", o, y[o], want);
    }
    tn_free(n, d);
    onnx_import_free(&r);
    /* the MatMul's output read twice cannot take the bias: the Add is refused (the
     * other reader's output, read by nobody, is left out of the net) */
    static char *relu_in[1] = {"mm"}, *relu_out[1] = {"unread"};
    mk_init(&k, 4);
    k.nodes[0].op_type = "Flatten", k.nodes[0].input = flat_in, k.nodes[0].output = flat_out;
    k.nodes[1].op_type = "MatMul", k.nodes[1].name = "fc", k.nodes[1].n_input = 2, k.nodes[1].input = mm_in;
    k.nodes[1].output = mm_out;
    k.nodes[2].op_type = "Relu", k.nodes[2].name = "dead", k.nodes[2].input = relu_in, k.nodes[2].output = relu_out;
    k.nodes[3].op_type = "Add", k.nodes[3].n_input = 2, k.nodes[3].input = add_in, k.nodes[3].output = add_out;
    mk_tensor(&k, 0, "w", 2, wd, w, 96);
    mk_tensor(&k, 1, "b", 1, bd, b, 3);
    ck_assert_int_eq(mk_import(&k, &r), VDNN_EINVAL);
    ck_assert_int_eq(r.refused, 1);
    tn_msg_has("adds a constant to 'mm'", NULL);
    /* without the Add, the output is the MatMul's and the Relu nobody reads is left out */
    k.g.n_node = 3;
    static Onnx__ValueInfoProto mm_info;
    static Onnx__ValueInfoProto *mm_outs[1] = {&mm_info};
    onnx__value_info_proto__init(&mm_info);
    mm_info.name = "mm";
    k.g.output = mm_outs;
    ck_assert_msg(mk_import(&k, &r) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_msg(!strstr(r.cfg, "dead") && r.nlayers == 2 && r.nparams == 1, "%s", r.cfg);
    n = tn_attached(r.cfg, NULL, &d);
    ck_assert_int_eq(onnx_import_load(&r, n), VDNN_OK);
    tn_free(n, d);
    onnx_import_free(&r);
    /* the bias Add of a Conv's output seen through an Identity, which another node reads too:
     * folding would change what that reader gets */
    static char *id_in[1] = {"c"}, *id_out[1] = {"c2"}, *fadd_in[2] = {"c2", "cb"}, *fadd_out[1] = {"z"};
    static char *r_in[1] = {"c"}, *r_out[1] = {"rc"}, *sum_in[2] = {"z", "rc"};
    static char *conv_in[2] = {"x", "cw"}, *cadd_in[2] = {"c", "cb"}, *conv_out[1] = {"c"};
    static float cw[3 * 2], cb[3] = {1, 2, 3};
    static int64_t cwd[4] = {3, 2, 1, 1}, cbd[3] = {3, 1, 1};
    mk_init(&k, 5);
    k.nodes[0].op_type = "Conv", k.nodes[0].name = "conv", k.nodes[0].n_input = 2, k.nodes[0].input = conv_in;
    k.nodes[0].output = conv_out;
    k.nodes[1].op_type = "Identity", k.nodes[1].input = id_in, k.nodes[1].output = id_out;
    k.nodes[2].op_type = "Add", k.nodes[2].name = "bias", k.nodes[2].n_input = 2, k.nodes[2].input = fadd_in;
    k.nodes[2].output = fadd_out;
    k.nodes[3].op_type = "Relu", k.nodes[3].input = r_in, k.nodes[3].output = r_out;
    k.nodes[4].op_type = "Add", k.nodes[4].n_input = 2, k.nodes[4].input = sum_in, k.nodes[4].output = add_out;
    mk_tensor(&k, 0, "cw", 4, cwd, cw, 6);
    mk_tensor(&k, 1, "cb", 3, cbd, cb, 3);
    ck_assert_int_eq(mk_import(&k, &r), VDNN_EINVAL);
    tn_msg_has("node 'bias' (Add)", "adds a constant to 'c2'");
    /* a Conv without bias, then an Add of one value per channel (C, 1, 1) */
    mk_init(&k, 2);
    k.nodes[0].op_type = "Conv", k.nodes[0].name = "conv", k.nodes[0].n_input = 2, k.nodes[0].input = conv_in;
    k.nodes[0].output = conv_out;
    k.nodes[1].op_type = "Add", k.nodes[1].n_input = 2, k.nodes[1].input = cadd_in, k.nodes[1].output = add_out;
    mk_tensor(&k, 0, "cw", 4, cwd, cw, 6);
    mk_tensor(&k, 1, "cb", 3, cbd, cb, 3);
    ck_assert_msg(mk_import(&k, &r) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_msg(strstr(r.cfg, "[convolutional]\nname = conv\nfilters = 3\nsize = 1\n") && !strstr(r.cfg, "bias = 0"),
                  "%s", r.cfg);
    ck_assert_int_eq(r.nparams, 2);
    ck_assert_str_eq(r.params[1].name, "bias");
    ck_assert(r.params[1].data[2] == 3.0f);
    onnx_import_free(&r);
}
END_TEST

/* Seventy layers of names that meet once cut to 31 characters, and a concat of 24 of
 * them whose names together are longer than a config value holds. */
START_TEST(long_names_and_wide_concats)
{
    static mk k;
    static char names[72][64], outs[72][16];
    static char *cat_in[24];
    static Onnx__AttributeProto axis;
    static Onnx__AttributeProto *attrs[1] = {&axis};
    mk_init(&k, 71);
    for (int i = 0; i < 70; i++) {
        snprintf(names[i], sizeof names[i], "/features/denseblock3/denselayer/relu%d", i);
        snprintf(outs[i], sizeof outs[i], "v%d", i);
        k.nodes[i].name = names[i];
        k.ins[i][0] = i ? outs[i - 1] : "x";
        k.outs[i][0] = outs[i];
    }
    for (int j = 0; j < 24; j++) cat_in[j] = outs[69 - j];
    onnx__attribute_proto__init(&axis);
    axis.name = "axis", axis.has_type = 1, axis.type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
    axis.has_i = 1, axis.i = 1;
    k.nodes[70].op_type = "Concat", k.nodes[70].name = "cat", k.nodes[70].n_input = 24, k.nodes[70].input = cat_in;
    k.nodes[70].n_attribute = 1, k.nodes[70].attribute = attrs;
    k.outs[70][0] = "y";
    onnx_import r;
    ck_assert_msg(mk_import(&k, &r) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_msg(strstr(r.cfg, "name = features_denseblock3_denselayer\n") &&
                      strstr(r.cfg, "name = features_denseblock3_denselay_2\n") &&
                      strstr(r.cfg, "name = features_denseblock3_densela_70\n") && strstr(r.cfg, "input = -1, -2, -3,"),
                  "%s", tn_tail(r.cfg, 1500));
    device *d;
    net *n = tn_attached(r.cfg, NULL, &d);
    ck_assert_int_eq(n->nlayers, 72);
    ck_assert_int_eq(n->layers[70]->ninputs, 24);
    ck_assert_int_eq(n->layers[70]->input[23], 47);
    tn_free(n, d);
    onnx_import_free(&r);
}
END_TEST

#endif

static Suite *onnx_suite(void)
{
    Suite *s = suite_create("onnx");
#ifdef VDNN_ONNX
    TCase *run = tcase_create("runner");
    tcase_add_checked_fixture(run, tn_dir_setup, tn_dir_teardown);
    tcase_set_timeout(run, 120);
    tcase_add_test(run, node_tests_pass_or_are_refused);
    tcase_add_test(run, pytorch_exports_pass);
    tcase_add_test(run, bad_command_lines_and_files);
    suite_add_tcase(s, run);
    TCase *rt = tcase_create("round_trip");
    tcase_add_checked_fixture(rt, tn_dir_setup, tn_dir_teardown);
    tcase_set_timeout(rt, 180);
    tcase_add_test(rt, round_trip_every_layer);
    tcase_add_test(rt, round_trip_vectors_as_maps);
    tcase_add_loop_test(rt, round_trip_shipped, 0, (int)(sizeof shipped / sizeof *shipped));
    tcase_add_test(rt, export_refuses_what_onnx_cannot_say);
    tcase_add_test(rt, hostile_models);
    tcase_add_test(rt, long_names_and_wide_concats);
    tcase_add_test(rt, bias_adds_fold);
    suite_add_tcase(s, rt);
    TCase *ext = tcase_create("others");
    tcase_add_checked_fixture(ext, tn_dir_setup, tn_dir_teardown);
    tcase_set_timeout(ext, 240);
    tcase_add_loop_test(ext, exports_pass_onnx_checker_and_numpy, 0, (int)(sizeof checked / sizeof *checked) - 1);
    tcase_add_test(ext, import_then_fine_tune_in_a_budget);
    tcase_add_test(ext, vectors_as_maps_pass_numpy);
    suite_add_tcase(s, ext);
#else
    TCase *none = tcase_create("none");
    suite_add_tcase(s, none);
    printf("SKIPPED: onnx: this build has no ONNX (ONNX=0)\n");
#endif
    return s;
}

int main(void) { return tn_run_suite(onnx_suite()); }
