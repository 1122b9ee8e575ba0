/* Check suite for nets/net: building a net from a config (sections, keys, the layer
 * chain and its shapes), the ready configs in configs/, command-line overrides and the
 * learning-rate schedules.
 *
 * Every bad config asserts VDNN_EINVAL and that the message names "t.cfg:LINE:" with
 * the line of the offending key or section header, and the key or section itself: the
 * user should never have to search the file for what is wrong. The layer sections of
 * the texts below start at line 16 (TN_HEAD is lines 1-15, see testnet.h). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nets/net.h"
#include "nets/trainer.h"
#include "tests/testnet.h"

static int same_shape(shape4 a, shape4 b)
{
    return a.n == b.n && a.c == b.c && a.h == b.h && a.w == b.w;
}

/* ---- sections ---- */

START_TEST(test_good_small_net)
{
    net *n = tn_parse(TN_SMALL, NULL);
    ck_assert_int_eq(n->input.n, 16);
    ck_assert_int_eq(n->input.c, 1);
    ck_assert_int_eq(n->input.h, 8);
    ck_assert_int_eq(n->input.w, 8);
    ck_assert_int_eq(n->nlayers, 5);
    ck_assert_int_eq(n->classes, 4);
    ck_assert_int_eq(n->train.epochs, 2);
    ck_assert(fabs(n->train.learning_rate - 0.05) < 1e-12);
    ck_assert(fabs(n->train.momentum - 0.9) < 1e-12);
    ck_assert_int_eq(n->train.schedule, LR_CONST);
    ck_assert_uint_eq(n->train.seed, 3);
    ck_assert_str_eq(n->data.set, "synthetic");
    ck_assert_int_eq(n->data.synthetic_train, 256);
    ck_assert_int_eq(n->data.synthetic_test, 64);
    ck_assert_int_eq(n->data.classes, 4);
    ck_assert_str_eq(n->layers[0]->name, "conv1");
    ck_assert_int_eq(n->layers[0]->line, 16);
    ck_assert_str_eq(n->layers[4]->name, "softmax5");
    ck_assert_int_eq(n->layers[4]->line, 25);
    ck_assert(n->layers[4]->is_loss);
    net_free(n);
    /* no overrides at all is the config as written */
    n = NULL;
    ck_assert_int_eq(net_parse(TN_SMALL, TN_NAME, NULL, &n), VDNN_OK);
    ck_assert_int_eq(n->input.n, 16);
    ck_assert_int_eq(n->train.epochs, 2);
    net_free(n);
}
END_TEST

START_TEST(test_unknown_section)
{
    tn_parse_fails(TN_HEAD "[convolution]\nfilters = 4\nsize = 3\n[connected]\noutput = 4\n[softmax]\n",
                   VDNN_EINVAL, TN_NAME ":16:", "[convolution]");
    /* The message lists what exists, so the typo is easy to fix. */
    tn_msg_has("convolutional", "softmax");
    tn_parse_fails(TN_HEAD "[connected]\noutput = 4\n[softmax]\n[Softmax]\n", VDNN_EINVAL, TN_NAME ":19:",
                   "[Softmax]");
}
END_TEST

START_TEST(test_softmax_not_last)
{
    tn_parse_fails(TN_HEAD "[convolutional]\nfilters = 4\nsize = 3\n[softmax]\n[connected]\noutput = 4\n",
                   VDNN_EINVAL, TN_NAME ":19:", "[softmax]");
    tn_msg_has("line 20", "[connected]");
}
END_TEST

START_TEST(test_no_softmax_at_end)
{
    tn_parse_fails(TN_HEAD "[convolutional]\nfilters = 4\nsize = 3\n[relu]\n[connected]\noutput = 4\n",
                   VDNN_EINVAL, TN_NAME ":20:", "[softmax]");
    tn_msg_has("[connected]", NULL);
}
END_TEST

START_TEST(test_no_layers)
{
    tn_parse_fails(TN_HEAD, VDNN_EINVAL, TN_NAME, "no layers");
}
END_TEST

START_TEST(test_softmax_of_one_output)
{
    tn_parse_fails(TN_HEAD "[connected]\noutput = 1\n[softmax]\n", VDNN_EINVAL, TN_NAME ":18:", "[softmax]");
}
END_TEST

START_TEST(test_missing_net)
{
    tn_parse_fails(TN_TRAIN TN_DATA TN_LAYERS, VDNN_EINVAL, TN_NAME ":1:", "[net]");
}
END_TEST

START_TEST(test_missing_train)
{
    /* Describing and planning a net need no [train] (issue 16); training does, and says
     * so naming the file. */
    net *n = tn_parse(TN_NET TN_DATA TN_LAYERS, NULL);
    ck_assert_int_eq(n->train.given, 0);
    ck_assert_int_eq(check_train_settings(n), VDNN_EINVAL);
    tn_msg_has(TN_NAME ": no [train] section", NULL);
    net_free(n);
    n = tn_parse(TN_SMALL, NULL);
    ck_assert_int_eq(n->train.given, 1);
    ck_assert_int_eq(check_train_settings(n), VDNN_OK);
    net_free(n);
}
END_TEST

START_TEST(test_missing_data)
{
    tn_parse_fails(TN_NET TN_TRAIN TN_LAYERS, VDNN_EINVAL, TN_NAME, "[data]");
}
END_TEST

START_TEST(test_net_not_first)
{
    /* [train] on line 1, [net] on line 6. */
    tn_parse_fails(TN_TRAIN TN_NET TN_DATA TN_LAYERS, VDNN_EINVAL, TN_NAME ":1:", "[net]");
    /* A layer before [net] too. */
    tn_parse_fails("[relu]\n" TN_HEAD TN_LAYERS, VDNN_EINVAL, TN_NAME ":1:", "[net]");
}
END_TEST

START_TEST(test_section_twice)
{
    /* The second [train] is on line 16, after [data]. */
    tn_parse_fails(TN_HEAD TN_TRAIN TN_LAYERS, VDNN_EINVAL, TN_NAME ":16:", "[train]");
    tn_msg_has("line 6", NULL);
    tn_parse_fails(TN_HEAD TN_LAYERS TN_NET, VDNN_EINVAL, TN_NAME ":26:", "[net]");
}
END_TEST

/* ---- keys ---- */

START_TEST(test_missing_required_key)
{
    /* Missing keys have no line: the section header's is named. */
    tn_parse_fails(TN_HEAD "[convolutional]\nsize = 3\n[connected]\noutput = 4\n[softmax]\n", VDNN_EINVAL,
                   TN_NAME ":16:", "filters");
    tn_parse_fails(TN_HEAD "[maxpool]\nstride = 2\n[connected]\noutput = 4\n[softmax]\n", VDNN_EINVAL,
                   TN_NAME ":16:", "size");
    tn_parse_fails(TN_HEAD "[connected]\n[softmax]\n", VDNN_EINVAL, TN_NAME ":16:", "output");
    tn_parse_fails("[net]\nbatch = 16\nchannels = 1\nwidth = 8\n" TN_TRAIN TN_DATA TN_LAYERS, VDNN_EINVAL,
                   TN_NAME ":1:", "height");
    tn_parse_fails(TN_NET "[train]\nepochs = 2\nmomentum = 0.9\nseed = 3\n" TN_DATA TN_LAYERS, VDNN_EINVAL,
                   TN_NAME ":6:", "learning_rate");
    tn_parse_fails(TN_NET TN_TRAIN "[data]\ntrain_size = 256\ntest_size = 64\nclasses = 4\n" TN_LAYERS,
                   VDNN_EINVAL, TN_NAME ":11:", "set");
}
END_TEST

START_TEST(test_unknown_key)
{
    tn_parse_fails(TN_HEAD "[convolutional]\nfilters = 4\nsize = 3\nfiltres = 5\n[connected]\noutput = 4\n"
                   "[softmax]\n", VDNN_EINVAL, TN_NAME ":19:", "'filtres'");
    tn_parse_fails("[net]\nbatch = 16\nchannels = 1\nheight = 8\nwidth = 8\ndepth = 3\n" TN_TRAIN TN_DATA
                   TN_LAYERS, VDNN_EINVAL, TN_NAME ":6:", "'depth'");
    /* [relu] takes no keys at all. */
    tn_parse_fails(TN_HEAD "[relu]\nslope = 0.1\n[connected]\noutput = 4\n[softmax]\n", VDNN_EINVAL,
                   TN_NAME ":17:", "'slope'");
}
END_TEST

START_TEST(test_not_a_number)
{
    tn_parse_fails(TN_HEAD "[convolutional]\nfilters = 4\nsize = 3\nstride=abc\n[connected]\noutput = 4\n"
                   "[softmax]\n", VDNN_EINVAL, TN_NAME ":19: [convolutional] stride", "'abc'");
    tn_parse_fails(TN_NET "[train]\nepochs = 2\nlearning_rate = fast\nmomentum = 0.9\nseed = 3\n" TN_DATA
                   TN_LAYERS, VDNN_EINVAL, TN_NAME ":8: [train] learning_rate", "'fast'");
    tn_parse_fails(TN_HEAD "[convolutional]\nfilters = 4.5\nsize = 3\n[connected]\noutput = 4\n[softmax]\n",
                   VDNN_EINVAL, TN_NAME ":17: [convolutional] filters", "4.5");
}
END_TEST

START_TEST(test_out_of_range)
{
    tn_parse_fails("[net]\nbatch = 0\nchannels = 1\nheight = 8\nwidth = 8\n" TN_TRAIN TN_DATA TN_LAYERS,
                   VDNN_EINVAL, TN_NAME ":2: [net] batch", "out of range");
    tn_parse_fails(TN_NET "[train]\nepochs = 2\nlearning_rate = 0.05\nmomentum = 1.5\nseed = 3\n" TN_DATA
                   TN_LAYERS, VDNN_EINVAL, TN_NAME ":9: [train] momentum", "out of range");
    tn_parse_fails(TN_NET "[train]\nepochs = 0\nlearning_rate = 0.05\nmomentum = 0.9\nseed = 3\n" TN_DATA
                   TN_LAYERS, VDNN_EINVAL, TN_NAME ":7: [train] epochs", "out of range");
    tn_parse_fails(TN_HEAD "[dropout]\nprobability = 1.5\n[connected]\noutput = 4\n[softmax]\n", VDNN_EINVAL,
                   TN_NAME ":17: [dropout] probability", "out of range");
    tn_parse_fails(TN_NET TN_TRAIN "[data]\nset = synthetic\ntrain_size = 256\ntest_size = 64\nclasses = 1\n"
                   TN_LAYERS, VDNN_EINVAL, TN_NAME ":15: [data] classes", "out of range");
}
END_TEST

START_TEST(test_bad_enum_value)
{
    tn_parse_fails(TN_NET "[train]\nepochs = 2\nlearning_rate = 0.05\nlr_schedule = linear\n" TN_DATA TN_LAYERS,
                   VDNN_EINVAL, TN_NAME ":9: [train] lr_schedule", "'linear'");
    tn_parse_fails(TN_NET TN_TRAIN "[data]\nset = imagenet\npath = /x\n" TN_LAYERS, VDNN_EINVAL,
                   TN_NAME ":12: [data] set", "'imagenet'");
}
END_TEST

START_TEST(test_step_without_step_epochs)
{
    tn_parse_fails(TN_NET "[train]\nepochs = 2\nlearning_rate = 0.05\nlr_schedule = step\ngamma = 0.5\n"
                   TN_DATA TN_LAYERS, VDNN_EINVAL, TN_NAME ":9: [train] lr_schedule", "step_epochs");
}
END_TEST

START_TEST(test_schedule_keys_out_of_place)
{
    tn_parse_fails(TN_NET "[train]\nepochs = 2\nlearning_rate = 0.05\nstep_epochs = 3\nseed = 3\n" TN_DATA
                   TN_LAYERS, VDNN_EINVAL, TN_NAME ":9: [train] step_epochs", "lr_schedule = step");
    tn_parse_fails(TN_NET "[train]\nepochs = 2\nlearning_rate = 0.05\nlr_schedule = step\nstep_epochs = 1\n"
                   "min_lr = 0.001\n" TN_DATA TN_LAYERS, VDNN_EINVAL, TN_NAME ":11: [train] min_lr", "cosine");
    tn_parse_fails(TN_NET "[train]\nepochs = 2\nlearning_rate = 0.05\nlr_schedule = cosine\nmin_lr = 0.5\n"
                   TN_DATA TN_LAYERS, VDNN_EINVAL, TN_NAME ":10: [train] min_lr", "learning_rate");
}
END_TEST

START_TEST(test_mean_wrong_count)
{
    tn_parse_fails(TN_NET TN_TRAIN "[data]\nset = synthetic\ntrain_size = 256\ntest_size = 64\nclasses = 4\n"
                   "mean = 0.1, 0.2\n" TN_LAYERS, VDNN_EINVAL, TN_NAME ":16: [data] mean", "2 values");
    tn_parse_fails("[net]\nbatch = 16\nchannels = 3\nheight = 8\nwidth = 8\n" TN_TRAIN
                   "[data]\nset = synthetic\ntrain_size = 256\ntest_size = 64\nclasses = 4\n"
                   "std = 0.1, 0.2\n" TN_LAYERS, VDNN_EINVAL, TN_NAME ":16: [data] std", "3 channels");
    /* One value, or one per channel, is fine. */
    net *n = tn_parse("[net]\nbatch = 16\nchannels = 3\nheight = 8\nwidth = 8\n" TN_TRAIN
                      "[data]\nset = synthetic\ntrain_size = 256\ntest_size = 64\nclasses = 4\n"
                      "mean = 0.1, 0.2, 0.3\nstd = 0.5\n" TN_LAYERS, NULL);
    ck_assert_int_eq(n->data.nmean, 3);
    ck_assert_int_eq(n->data.nstd, 1);
    ck_assert(fabsf(n->data.mean[2] - 0.3f) < 1e-7f);
    net_free(n);
}
END_TEST

START_TEST(test_path_missing)
{
    /* The key is absent, so the [data] header's line is named. */
    tn_parse_fails(TN_NET TN_TRAIN "[data]\nset = fashion-mnist\nmean = 0.5\n" TN_LAYERS, VDNN_EINVAL,
                   TN_NAME ":11: [data] path", "fashion-mnist");
    tn_parse_fails(TN_NET TN_TRAIN "[data]\nset = cifar10\n" TN_LAYERS, VDNN_EINVAL, TN_NAME ":11: [data] path",
                   "cifar10");
}
END_TEST

START_TEST(test_synthetic_keys_elsewhere)
{
    tn_parse_fails(TN_NET TN_TRAIN "[data]\nset = fashion-mnist\npath = /x\ntrain_size = 100\n" TN_LAYERS,
                   VDNN_EINVAL, TN_NAME ":14: [data] train_size", "synthetic");
    tn_parse_fails(TN_NET TN_TRAIN "[data]\nset = png\npath = /x\nclasses = 4\n" TN_LAYERS, VDNN_EINVAL,
                   TN_NAME ":14: [data] classes", "synthetic");
    /* And synthetic needs them. */
    tn_parse_fails(TN_NET TN_TRAIN "[data]\nset = synthetic\ntrain_size = 256\ntest_size = 64\n" TN_LAYERS,
                   VDNN_EINVAL, TN_NAME ":11: [data] classes", "synthetic");
}
END_TEST

/* ---- shapes ---- */

START_TEST(test_shape_to_zero)
{
    /* A 5x5 kernel on a 3x3 input: the size key (line 18) is named. */
    tn_parse_fails("[net]\nbatch = 4\nchannels = 1\nheight = 3\nwidth = 3\n" TN_TRAIN TN_DATA
                   "[convolutional]\nfilters = 4\nsize = 5\n[connected]\noutput = 4\n[softmax]\n",
                   VDNN_EINVAL, TN_NAME ":18: [convolutional] size", "5x5");
    /* Deeper in the chain: 8 -> conv3 -> 6 -> maxpool 4 -> 1 -> conv3 fails at line 23. */
    tn_parse_fails(TN_HEAD "[convolutional]\nfilters = 4\nsize = 3\n[maxpool]\nsize = 4\n"
                   "[convolutional]\nfilters = 4\nsize = 3\n[connected]\noutput = 4\n[softmax]\n",
                   VDNN_EINVAL, TN_NAME ":23: [convolutional] size", "1x1");
    /* A pooling window larger than its input. */
    tn_parse_fails(TN_HEAD "[maxpool]\nsize = 9\n[connected]\noutput = 4\n[softmax]\n", VDNN_EINVAL,
                   TN_NAME ":17: [maxpool] size", "8x8");
}
END_TEST

START_TEST(test_batch_norm_and_dropout_shapes)
{
    net *n = tn_parse(TN_HEAD "[convolutional]\nfilters = 6\nsize = 3\nstride = 2\npad = 1\n[batchnorm]\n"
                      "[leaky]\n[avgpool]\nsize = 2\n[dropout]\nprobability = 0.25\n[connected]\noutput = 5\n"
                      "[softmax]\n", NULL);
    ck_assert_int_eq(n->nlayers, 7);
    static const char *names[] = {"conv1", "bn2", "leaky3", "avgpool4", "dropout5", "fc6", "softmax7"};
    static const int c[] = {6, 6, 6, 6, 6, 5, 5}, hw[] = {4, 4, 4, 2, 2, 1, 1};
    for (int i = 0; i < 7; i++) {
        const layer *l = n->layers[i];
        ck_assert_str_eq(l->name, names[i]);
        ck_assert_int_eq(l->out.n, 16);
        ck_assert_int_eq(l->out.c, c[i]);
        ck_assert_int_eq(l->out.h, hw[i]);
        ck_assert_int_eq(l->out.w, hw[i]);
        if (i > 0) ck_assert(same_shape(l->in, n->layers[i - 1]->out));
    }
    ck_assert(same_shape(n->layers[0]->in, n->input));
    ck_assert_int_eq(n->classes, 5);
    net_free(n);
}
END_TEST

/* One expected layer: its name and output (C, H, W). */
typedef struct want_layer {
    const char *name;
    int c, h, w;
} want_layer;

/* Loads a ready config and checks its input, every layer's name and output shape, the
 * chain's continuity, the classes and the number of parameter values. */
static net *check_config(const char *path, int batch, int c, int h, int w, int classes, const want_layer *want,
                         int nwant, size_t param_values)
{
    net_overrides ov = net_no_overrides();
    net *n = NULL;
    vdnn_status st = net_load(path, &ov, &n);
    ck_assert_msg(st == VDNN_OK, "%s: %s", path, vdnn_errmsg());
    ck_assert_int_eq(n->input.n, batch);
    ck_assert_int_eq(n->input.c, c);
    ck_assert_int_eq(n->input.h, h);
    ck_assert_int_eq(n->input.w, w);
    ck_assert_int_eq(n->classes, classes);
    ck_assert_int_eq(n->nlayers, nwant);
    size_t values = 0;
    for (int i = 0; i < n->nlayers; i++) {
        const layer *l = n->layers[i];
        ck_assert_msg(!strcmp(l->name, want[i].name), "%s layer %d is %s, want %s", path, i, l->name,
                      want[i].name);
        ck_assert_msg(l->out.n == batch && l->out.c == want[i].c && l->out.h == want[i].h && l->out.w == want[i].w,
                      "%s %s: output %dx%dx%dx%d, want %dx%dx%dx%d", path, l->name, l->out.n, l->out.c, l->out.h,
                      l->out.w, batch, want[i].c, want[i].h, want[i].w);
        ck_assert(same_shape(l->in, i ? n->layers[i - 1]->out : n->input));
        for (int p = 0; p < l->nparams; p++) values += shape_count(l->params[p].shape);
    }
    ck_assert(n->layers[n->nlayers - 1]->is_loss);
    ck_assert_msg(values == param_values, "%s: %zu parameter values, want %zu", path, values, param_values);
    return n;
}

/* Values, gradients and momenta, each tensor rounded to the pool's alignment: what
 * net_attach takes from the pool. */
static size_t pool_bytes_of(const net *n)
{
    size_t total = 0;
    for (int i = 0; i < n->nlayers; i++)
        for (int p = 0; p < n->layers[i]->nparams; p++) {
            const param *q = &n->layers[i]->params[p];
            total += (q->trainable ? 3 : 1) * pool_round(shape_bytes(q->shape));
        }
    return total;
}

#define NWANT(a) ((int)(sizeof(a) / sizeof((a)[0])))

START_TEST(test_config_lenet)
{
    static const want_layer want[] = {
        {"conv1", 20, 24, 24}, {"relu2", 20, 24, 24}, {"maxpool3", 20, 12, 12}, {"conv4", 50, 8, 8},
        {"relu5", 50, 8, 8},   {"maxpool6", 50, 4, 4}, {"fc7", 500, 1, 1},       {"relu8", 500, 1, 1},
        {"fc9", 10, 1, 1},     {"softmax10", 10, 1, 1},
    };
    /* Caffe's LeNet has 431,080 parameters. */
    net *n = check_config("configs/lenet.cfg", 64, 1, 28, 28, 10, want, NWANT(want), 431080);
    ck_assert_uint_eq(net_param_bytes(n), pool_bytes_of(n));
    ck_assert_uint_ge(net_param_bytes(n), 3u * 4u * 431080u);
    ck_assert_str_eq(n->data.set, "fashion-mnist");
    ck_assert_str_eq(n->data.path, "/usr/share/datasets/fashion-mnist");
    ck_assert_int_eq(n->train.schedule, LR_CONST);
    net_free(n);
}
END_TEST

START_TEST(test_config_fmnist)
{
    static const want_layer want[] = {
        {"conv1", 32, 28, 28},  {"relu2", 32, 28, 28},   {"conv3", 32, 28, 28}, {"relu4", 32, 28, 28},
        {"maxpool5", 32, 14, 14}, {"conv6", 64, 14, 14}, {"relu7", 64, 14, 14}, {"conv8", 64, 14, 14},
        {"relu9", 64, 14, 14},  {"maxpool10", 64, 7, 7}, {"fc11", 256, 1, 1},   {"relu12", 256, 1, 1},
        {"dropout13", 256, 1, 1}, {"fc14", 10, 1, 1},    {"softmax15", 10, 1, 1},
    };
    net *n = check_config("configs/fmnist.cfg", 128, 1, 28, 28, 10, want, NWANT(want), 870634);
    ck_assert_int_eq(n->train.schedule, LR_COSINE);
    ck_assert_int_eq(n->train.epochs, 12);
    ck_assert(fabs(n->train.min_lr - 0.0005) < 1e-12);
    ck_assert(fabs(n->train.weight_decay - 0.0005) < 1e-12);
    ck_assert_int_eq(n->data.nmean, 1);
    ck_assert(fabsf(n->data.std[0] - 0.353f) < 1e-6f);
    net_free(n);
}
END_TEST

START_TEST(test_config_alexnet64)
{
    static const want_layer want[] = {
        {"conv1", 64, 15, 15},   {"relu2", 64, 15, 15}, {"maxpool3", 64, 7, 7}, {"conv4", 192, 7, 7},
        {"relu5", 192, 7, 7},    {"maxpool6", 192, 3, 3}, {"conv7", 384, 3, 3}, {"relu8", 384, 3, 3},
        {"conv9", 256, 3, 3},    {"relu10", 256, 3, 3}, {"conv11", 256, 3, 3},  {"relu12", 256, 3, 3},
        {"maxpool13", 256, 1, 1}, {"fc14", 1024, 1, 1}, {"relu15", 1024, 1, 1}, {"fc16", 10, 1, 1},
        {"softmax17", 10, 1, 1},
    };
    net *n = check_config("configs/alexnet-64.cfg", 32, 3, 64, 64, 10, want, NWANT(want), 2743114);
    ck_assert_str_eq(n->data.set, "synthetic");
    ck_assert_int_eq(n->data.classes, 10);
    net_free(n);
}
END_TEST

START_TEST(test_config_vgg_cifar)
{
    static const want_layer want[] = {
        {"conv1", 64, 32, 32},    {"relu2", 64, 32, 32},   {"conv3", 64, 32, 32},   {"relu4", 64, 32, 32},
        {"maxpool5", 64, 16, 16}, {"conv6", 128, 16, 16},  {"relu7", 128, 16, 16},  {"conv8", 128, 16, 16},
        {"relu9", 128, 16, 16},   {"maxpool10", 128, 8, 8}, {"conv11", 256, 8, 8},  {"relu12", 256, 8, 8},
        {"conv13", 256, 8, 8},    {"relu14", 256, 8, 8},   {"maxpool15", 256, 4, 4}, {"fc16", 512, 1, 1},
        {"relu17", 512, 1, 1},    {"fc18", 10, 1, 1},      {"softmax19", 10, 1, 1},
    };
    net *n = check_config("configs/vgg-cifar.cfg", 64, 3, 32, 32, 10, want, NWANT(want), 3248202);
    ck_assert_str_eq(n->data.set, "cifar10");
    ck_assert_int_eq(n->data.crop_pad, 4);
    ck_assert_int_eq(n->data.flip, 1);
    ck_assert_int_eq(n->data.nmean, 3);
    ck_assert_int_eq(n->data.nstd, 3);
    net_free(n);
}
END_TEST

START_TEST(test_config_alexnet)
{
    static const want_layer want[] = {
        {"conv1", 64, 55, 55},    {"relu2", 64, 55, 55},   {"maxpool3", 64, 27, 27}, {"conv4", 192, 27, 27},
        {"relu5", 192, 27, 27},   {"maxpool6", 192, 13, 13}, {"conv7", 384, 13, 13}, {"relu8", 384, 13, 13},
        {"conv9", 256, 13, 13},   {"relu10", 256, 13, 13}, {"conv11", 256, 13, 13}, {"relu12", 256, 13, 13},
        {"maxpool13", 256, 6, 6}, {"fc14", 4096, 1, 1},    {"relu15", 4096, 1, 1},  {"dropout16", 4096, 1, 1},
        {"fc17", 4096, 1, 1},     {"relu18", 4096, 1, 1},  {"dropout19", 4096, 1, 1}, {"fc20", 1000, 1, 1},
        {"softmax21", 1000, 1, 1},
    };
    /* torchvision's AlexNet has 61,100,840 parameters. */
    net *n = check_config("configs/alexnet.cfg", 128, 3, 224, 224, 1000, want, NWANT(want), 61100840);
    ck_assert_str_eq(n->data.set, "png");
    net_free(n);
}
END_TEST

START_TEST(test_config_vgg16)
{
    static const want_layer want[] = {
        {"conv1", 64, 224, 224},   {"relu2", 64, 224, 224},   {"conv3", 64, 224, 224},    {"relu4", 64, 224, 224},
        {"maxpool5", 64, 112, 112}, {"conv6", 128, 112, 112}, {"relu7", 128, 112, 112},   {"conv8", 128, 112, 112},
        {"relu9", 128, 112, 112},  {"maxpool10", 128, 56, 56}, {"conv11", 256, 56, 56},   {"relu12", 256, 56, 56},
        {"conv13", 256, 56, 56},   {"relu14", 256, 56, 56},   {"conv15", 256, 56, 56},    {"relu16", 256, 56, 56},
        {"maxpool17", 256, 28, 28}, {"conv18", 512, 28, 28},  {"relu19", 512, 28, 28},    {"conv20", 512, 28, 28},
        {"relu21", 512, 28, 28},   {"conv22", 512, 28, 28},   {"relu23", 512, 28, 28},    {"maxpool24", 512, 14, 14},
        {"conv25", 512, 14, 14},   {"relu26", 512, 14, 14},   {"conv27", 512, 14, 14},    {"relu28", 512, 14, 14},
        {"conv29", 512, 14, 14},   {"relu30", 512, 14, 14},   {"maxpool31", 512, 7, 7},   {"fc32", 4096, 1, 1},
        {"relu33", 4096, 1, 1},    {"dropout34", 4096, 1, 1}, {"fc35", 4096, 1, 1},       {"relu36", 4096, 1, 1},
        {"dropout37", 4096, 1, 1}, {"fc38", 1000, 1, 1},      {"softmax39", 1000, 1, 1},
    };
    /* VGG-16 (configuration D) has 138,357,544 parameters. */
    net *n = check_config("configs/vgg16.cfg", 64, 3, 224, 224, 1000, want, NWANT(want), 138357544);
    ck_assert_uint_eq(net_param_bytes(n), pool_bytes_of(n));
    ck_assert_uint_ge(net_param_bytes(n), (size_t)138357544 * 12);
    net_free(n);
}
END_TEST

START_TEST(test_load_file_errors)
{
    char dir[256], path[512];
    tn_tmpdir(dir, sizeof dir, "test_net");
    tn_join(path, sizeof path, dir, "bad.cfg");
    tn_write_text(path, TN_HEAD "[convolutional]\nfilters = 4\nsize = 3\nstride = abc\n[connected]\noutput = 4\n"
                        "[softmax]\n");
    net_overrides ov = net_no_overrides();
    net *n = NULL;
    ck_assert_int_eq(net_load(path, &ov, &n), VDNN_EINVAL);
    ck_assert_ptr_null(n);
    char where[600];
    snprintf(where, sizeof where, "%s:19: [convolutional] stride", path);
    tn_msg_has(where, "'abc'");

    tn_join(path, sizeof path, dir, "missing.cfg");
    n = NULL;
    ck_assert_int_eq(net_load(path, &ov, &n), VDNN_EIO);
    tn_msg_has(path, NULL);
    tn_rmtree(dir);
}
END_TEST

/* A failed load leaves *out NULL whatever stage failed, as it does for errors found
 * after parsing, so that a caller may net_free() it unconditionally. */
START_TEST(test_failed_load_clears_out)
{
    net_overrides ov = net_no_overrides();
    net *n = (net *)&n;
    ck_assert_int_eq(net_load("/nonexistent/vdnn/missing.cfg", &ov, &n), VDNN_EIO);
    ck_assert_msg(n == NULL, "net_load left *out at %p after a missing file", (void *)n);
    n = (net *)&n;
    ck_assert_int_eq(net_parse("[net]\nbatch 16\n", TN_NAME, &ov, &n), VDNN_EINVAL);
    ck_assert_msg(n == NULL, "net_parse left *out at %p after a syntax error", (void *)n);
    tn_msg_has(TN_NAME ":2:", NULL);
}
END_TEST

/* ---- overrides ---- */

START_TEST(test_overrides)
{
    net_overrides ov = net_no_overrides();
    ov.batch = 7;
    ov.epochs = 9;
    ov.lr = 0.125;
    ov.seed = 12345;
    ov.data_path = "/elsewhere/data";
    net *n = tn_parse(TN_SMALL, &ov);
    ck_assert_int_eq(n->input.n, 7);
    for (int i = 0; i < n->nlayers; i++) {
        ck_assert_int_eq(n->layers[i]->in.n, 7);
        ck_assert_int_eq(n->layers[i]->out.n, 7);
    }
    ck_assert_int_eq(n->train.epochs, 9);
    ck_assert(n->train.learning_rate == 0.125);
    ck_assert_uint_eq(n->train.seed, 12345);
    ck_assert_str_eq(n->data.path, "/elsewhere/data");
    /* What was not overridden keeps the config's values. */
    ck_assert(fabs(n->train.momentum - 0.9) < 1e-12);
    ck_assert_int_eq(n->input.h, 8);
    net_free(n);

    /* The "leave it" values leave every field alone; seed 0 is a real seed. */
    ov = net_no_overrides();
    ov.seed = 0;
    n = tn_parse(TN_SMALL, &ov);
    ck_assert_int_eq(n->input.n, 16);
    ck_assert_int_eq(n->train.epochs, 2);
    ck_assert(fabs(n->train.learning_rate - 0.05) < 1e-12);
    ck_assert_uint_eq(n->train.seed, 0);
    ck_assert_str_eq(n->data.path, "");
    net_free(n);
}
END_TEST

START_TEST(test_overrides_from_file)
{
    net_overrides ov = net_no_overrides();
    ov.batch = 256;
    ov.data_path = "/tmp/fm";
    net *n = NULL;
    ck_assert_msg(net_load("configs/vgg16.cfg", &ov, &n) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_int_eq(n->input.n, 256);
    ck_assert_int_eq(n->layers[n->nlayers - 1]->out.n, 256);
    ck_assert_int_eq(n->layers[30]->out.h, 7);
    ck_assert_str_eq(n->data.path, "/tmp/fm");
    net_free(n);
}
END_TEST

/* An --lr override below the config's min_lr must not turn the cosine schedule into a
 * rising one: the config check (min_lr <= learning_rate) holds for the overridden rate
 * too, either by refusing it or by a schedule that never exceeds the base rate. */
START_TEST(test_lr_override_below_min_lr)
{
    net_overrides ov = net_no_overrides();
    ov.lr = 0.0005;
    net *n = NULL;
    vdnn_status st = net_parse(TN_NET "[train]\nepochs = 5\nlearning_rate = 0.1\nlr_schedule = cosine\n"
                               "min_lr = 0.001\n" TN_DATA TN_LAYERS, TN_NAME, &ov, &n);
    if (st != VDNN_OK) {
        ck_assert_int_eq(st, VDNN_EINVAL);
        tn_msg_has("min_lr", NULL);
        return;
    }
    for (int e = 0; e < 5; e++)
        ck_assert_msg(net_lr_at(&n->train, e) <= n->train.learning_rate,
                      "epoch %d: lr %g above the base rate %g (min_lr %g)", e, net_lr_at(&n->train, e),
                      n->train.learning_rate, n->train.min_lr);
    net_free(n);
}
END_TEST

/* ---- learning-rate schedules ---- */

START_TEST(test_lr_const)
{
    net *n = tn_parse(TN_SMALL, NULL);
    for (int e = 0; e < 10; e++) ck_assert(net_lr_at(&n->train, e) == n->train.learning_rate);
    net_free(n);
}
END_TEST

START_TEST(test_lr_step)
{
    net *n = tn_parse(TN_NET "[train]\nepochs = 10\nlearning_rate = 0.1\nlr_schedule = step\nstep_epochs = 3\n"
                      "gamma = 0.5\n" TN_DATA TN_LAYERS, NULL);
    ck_assert_int_eq(n->train.schedule, LR_STEP);
    ck_assert_int_eq(n->train.step_epochs, 3);
    static const double want[] = {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.0125};
    for (int e = 0; e < 10; e++)
        ck_assert_msg(fabs(net_lr_at(&n->train, e) - want[e]) < 1e-12, "epoch %d: %g, want %g", e,
                      net_lr_at(&n->train, e), want[e]);
    net_free(n);
    /* gamma defaults to 0.1. */
    n = tn_parse(TN_NET "[train]\nepochs = 10\nlearning_rate = 0.1\nlr_schedule = step\nstep_epochs = 2\n"
                 TN_DATA TN_LAYERS, NULL);
    ck_assert(fabs(net_lr_at(&n->train, 1) - 0.1) < 1e-12);
    ck_assert(fabs(net_lr_at(&n->train, 2) - 0.01) < 1e-12);
    ck_assert(fabs(net_lr_at(&n->train, 5) - 0.001) < 1e-12);
    net_free(n);
}
END_TEST

START_TEST(test_lr_cosine)
{
    net *n = tn_parse(TN_NET "[train]\nepochs = 5\nlearning_rate = 0.1\nlr_schedule = cosine\nmin_lr = 0.001\n"
                      TN_DATA TN_LAYERS, NULL);
    const train_cfg *t = &n->train;
    ck_assert_int_eq(t->schedule, LR_COSINE);
    ck_assert(fabs(net_lr_at(t, 0) - 0.1) < 1e-12);
    ck_assert(fabs(net_lr_at(t, 2) - 0.0505) < 1e-12);
    /* The floor is reached at the last epoch, not after it. */
    ck_assert_msg(fabs(net_lr_at(t, 4) - 0.001) < 1e-12, "last epoch: %g", net_lr_at(t, 4));
    for (int e = 1; e < 5; e++) ck_assert(net_lr_at(t, e) < net_lr_at(t, e - 1));
    net_free(n);
    /* min_lr defaults to 0; one epoch keeps the base rate. */
    n = tn_parse(TN_NET "[train]\nepochs = 3\nlearning_rate = 0.2\nlr_schedule = cosine\n" TN_DATA TN_LAYERS,
                 NULL);
    ck_assert(fabs(net_lr_at(&n->train, 1) - 0.1) < 1e-12);
    ck_assert(fabs(net_lr_at(&n->train, 2)) < 1e-12);
    n->train.epochs = 1;
    ck_assert(net_lr_at(&n->train, 0) == 0.2);
    net_free(n);
}
END_TEST

static Suite *net_suite(void)
{
    Suite *s = suite_create("net");
    TCase *sec = tcase_create("sections");
    tcase_add_test(sec, test_good_small_net);
    tcase_add_test(sec, test_unknown_section);
    tcase_add_test(sec, test_softmax_not_last);
    tcase_add_test(sec, test_no_softmax_at_end);
    tcase_add_test(sec, test_no_layers);
    tcase_add_test(sec, test_softmax_of_one_output);
    tcase_add_test(sec, test_missing_net);
    tcase_add_test(sec, test_missing_train);
    tcase_add_test(sec, test_missing_data);
    tcase_add_test(sec, test_net_not_first);
    tcase_add_test(sec, test_section_twice);
    suite_add_tcase(s, sec);

    TCase *keys = tcase_create("keys");
    tcase_add_test(keys, test_missing_required_key);
    tcase_add_test(keys, test_unknown_key);
    tcase_add_test(keys, test_not_a_number);
    tcase_add_test(keys, test_out_of_range);
    tcase_add_test(keys, test_bad_enum_value);
    tcase_add_test(keys, test_step_without_step_epochs);
    tcase_add_test(keys, test_schedule_keys_out_of_place);
    tcase_add_test(keys, test_mean_wrong_count);
    tcase_add_test(keys, test_path_missing);
    tcase_add_test(keys, test_synthetic_keys_elsewhere);
    tcase_add_test(keys, test_load_file_errors);
    tcase_add_test(keys, test_failed_load_clears_out);
    suite_add_tcase(s, keys);

    TCase *shapes = tcase_create("shapes");
    tcase_add_test(shapes, test_shape_to_zero);
    tcase_add_test(shapes, test_batch_norm_and_dropout_shapes);
    tcase_add_test(shapes, test_config_lenet);
    tcase_add_test(shapes, test_config_fmnist);
    tcase_add_test(shapes, test_config_alexnet64);
    tcase_add_test(shapes, test_config_vgg_cifar);
    tcase_add_test(shapes, test_config_alexnet);
    tcase_add_test(shapes, test_config_vgg16);
    suite_add_tcase(s, shapes);

    TCase *ov = tcase_create("overrides");
    tcase_add_test(ov, test_overrides);
    tcase_add_test(ov, test_overrides_from_file);
    tcase_add_test(ov, test_lr_override_below_min_lr);
    suite_add_tcase(s, ov);

    TCase *lr = tcase_create("schedules");
    tcase_add_test(lr, test_lr_const);
    tcase_add_test(lr, test_lr_step);
    tcase_add_test(lr, test_lr_cosine);
    suite_add_tcase(s, lr);
    return s;
}

int main(void) { return tn_run_suite(net_suite()); }
