/* Check suite for nets/checkpoint: a save/load round trip restores every parameter,
 * momentum and running statistic bit for bit with the training position; the file
 * format's header; every kind of bad file (corrupt, truncated, wrong magic or version,
 * another net's, missing) is an error that names the file, and a failed load changes
 * nothing; a failed save never harms the previous checkpoint and leaves no PATH.tmp. */
#include <check.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "nets/checkpoint.h"
#include "tests/testnet.h"

/* conv1 (4 filters), bn2, relu3, maxpool4, conv5 (CONV5 filters), relu6, fc7, softmax8:
 * weights, biases, batch-norm affine parameters and running statistics. */
#define CK_LAYERS(conv1_filters, conv5_filters)                                                   \
    "[convolutional]\nfilters = " #conv1_filters "\nsize = 3\npad = 1\n[batchnorm]\n[relu]\n"     \
    "[maxpool]\nsize = 2\n[convolutional]\nfilters = " #conv5_filters "\nsize = 3\npad = 1\n"     \
    "[relu]\n[connected]\noutput = 4\n[softmax]\n"
#define CK_NET TN_HEAD CK_LAYERS(4, 6)

/* Every device tensor of a net (values, then momenta where trainable), in a fixed order. */
typedef struct tensor_list {
    int count;
    float *dev[64];
    size_t n[64];
} tensor_list;

static tensor_list tensors_of(net *n)
{
    tensor_list t = {0};
    for (int i = 0; i < n->nlayers; i++)
        for (int j = 0; j < n->layers[i]->nparams; j++) {
            param *p = &n->layers[i]->params[j];
            ck_assert_int_lt(t.count + 2, 64);
            t.n[t.count] = shape_count(p->shape);
            t.dev[t.count++] = p->value;
            if (!p->trainable) continue;
            ck_assert_ptr_nonnull(p->momentum);
            t.n[t.count] = shape_count(p->shape);
            t.dev[t.count++] = p->momentum;
        }
    return t;
}

/* Fills every tensor with arbitrary bit patterns (NaNs, denormals and -0 included: a
 * checkpoint copies bits, it does not interpret them). */
static void scramble(net *n, uint32_t seed)
{
    tensor_list t = tensors_of(n);
    uint32_t x = seed * 2654435761u + 1;
    for (int k = 0; k < t.count; k++) {
        uint32_t *h = malloc(t.n[k] * sizeof *h);
        ck_assert_ptr_nonnull(h);
        for (size_t i = 0; i < t.n[k]; i++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            h[i] = x;
        }
        ck_assert_int_eq(device_upload(n->dev, t.dev[k], h, t.n[k] * sizeof *h), VDNN_OK);
        free(h);
    }
}

/* All tensors of a net, downloaded into one host buffer; free() it. */
static unsigned char *snapshot(net *n, size_t *bytes)
{
    tensor_list t = tensors_of(n);
    size_t total = 0;
    for (int k = 0; k < t.count; k++) total += t.n[k] * sizeof(float);
    unsigned char *buf = malloc(total), *p = buf;
    ck_assert_ptr_nonnull(buf);
    for (int k = 0; k < t.count; k++) {
        ck_assert_int_eq(device_download(n->dev, p, t.dev[k], t.n[k] * sizeof(float)), VDNN_OK);
        p += t.n[k] * sizeof(float);
    }
    *bytes = total;
    return buf;
}

static void assert_same_tensors(net *a, net *b)
{
    size_t la = 0, lb = 0;
    unsigned char *sa = snapshot(a, &la), *sb = snapshot(b, &lb);
    ck_assert_uint_eq(la, lb);
    size_t first = la;
    for (size_t i = 0; i < la && first == la; i++)
        if (sa[i] != sb[i]) first = i;
    free(sa);
    free(sb);
    ck_assert_msg(first == la, "tensors differ first at byte %zu of %zu", first, la);
}

static net *attached(const char *text, long long seed, device **d)
{
    net_overrides ov = net_no_overrides();
    ov.seed = seed;
    return tn_attached(text, &ov, d);
}

static void save_ok(net *n, const char *path, const ckpt_state *s)
{
    vdnn_status st = checkpoint_save(n, path, s);
    ck_assert_msg(st == VDNN_OK, "checkpoint_save(%s): %s", path, vdnn_errmsg());
}

/* A saved checkpoint of CK_NET with scrambled tensors, at `path`. */
static void saved_net(const char *path)
{
    device *d;
    net *n = attached(CK_NET, 3, &d);
    scramble(n, 1);
    ckpt_state s = {10, 1, 32, 3, 0};
    save_ok(n, path, &s);
    tn_free(n, d);
}

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void set_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

/* Recomputes the trailing CRC-32 of a checkpoint image, so that a crafted change gets
 * past the checksum to the check behind it. */
static void fix_crc(unsigned char *p, size_t len)
{
    set_u32(p + len - 4, (uint32_t)crc32(0L, p, (uInt)(len - 4)));
}

/* Loading `path` into a fresh CK_NET fails with `status` and a message naming the file
 * and containing `what`; the net's tensors are unchanged. */
static void load_fails(const char *path, int status, const char *what)
{
    device *d;
    net *n = attached(CK_NET, 5, &d);
    size_t before_len = 0, after_len = 0;
    unsigned char *before = snapshot(n, &before_len);
    ckpt_state s = {77, 77, 77, 77, 0};
    vdnn_status st = checkpoint_load(n, path, &s, 0);
    ck_assert_msg((int)st == status, "checkpoint_load(%s) returned %d (want %d): %s", path, (int)st, status,
                  st == VDNN_OK ? "" : vdnn_errmsg());
    tn_msg_has(path, what);
    unsigned char *after = snapshot(n, &after_len);
    ck_assert_uint_eq(before_len, after_len);
    ck_assert_msg(memcmp(before, after, before_len) == 0, "a failed load changed the net's tensors");
    ck_assert_uint_eq(s.step, 77);
    ck_assert_uint_eq(s.epoch, 77);
    free(before);
    free(after);
    tn_free(n, d);
}

/* ---- round trip ---- */

START_TEST(test_round_trip_bits)
{
    char path[512];
    tn_path(path, sizeof path, "a.ckpt");
    device *da, *db;
    net *a = attached(CK_NET, 3, &da);
    net *b = attached(CK_NET, 99, &db);
    scramble(a, 7);
    ckpt_state s = {123456789012ull, 7, 48, 3, 0};
    save_ok(a, path, &s);
    ckpt_state r = {0};
    vdnn_status st = checkpoint_load(b, path, &r, 0);
    ck_assert_msg(st == VDNN_OK, "checkpoint_load: %s", vdnn_errmsg());
    assert_same_tensors(a, b);
    ck_assert_uint_eq(r.step, 123456789012ull);
    ck_assert_uint_eq(r.epoch, 7);
    ck_assert_uint_eq(r.index, 48);
    ck_assert_uint_eq(r.seed, 3);
    ck_assert_uint_eq(r.batch, (uint32_t)a->minibatch);   /* 0 saves the net's own */
    /* Saving the loaded net again gives the same file. */
    char again[512];
    tn_path(again, sizeof again, "b.ckpt");
    save_ok(b, again, &r);
    ck_assert(tn_same_file(path, again));
    tn_free(a, da);
    tn_free(b, db);
}
END_TEST

START_TEST(test_round_trip_after_training)
{
    /* Real values: momenta and running statistics after a few steps of training. */
    char path[512];
    tn_path(path, sizeof path, "t.ckpt");
    device *da, *db;
    net *a = attached(CK_NET, 3, &da);
    dataset *train = NULL;
    ck_assert_int_eq(dataset_load(&a->data, SPLIT_TRAIN, 1, 8, 8, &train), VDNN_OK);
    float *host = malloc(shape_bytes(a->input));
    int32_t labels[16];
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < 16; i++) {
            int item = step * 16 + i;
            for (int k = 0; k < 64; k++) host[i * 64 + k] = train->images[item * 64 + k] / 255.0f;
            labels[i] = train->labels[item];
        }
        step_result r;
        ck_assert_msg(net_train_step(a, host, labels, 16, 0.05, &r) == VDNN_OK, "%s", vdnn_errmsg());
    }
    /* The momenta and running statistics are no longer their initial values. */
    float *mom = tn_download(a, tn_param(a, "conv1.weights")->momentum, 36);
    float *rm = tn_download(a, tn_param(a, "bn2.running_mean")->value, 4);
    int nonzero = 0;
    for (int i = 0; i < 36; i++) nonzero += mom[i] != 0;
    for (int i = 0; i < 4; i++) nonzero += rm[i] != 0;
    ck_assert_int_gt(nonzero, 30);
    free(mom);
    free(rm);
    ckpt_state s = {a->step, 0, 48, 3, 0};
    save_ok(a, path, &s);
    net *b = attached(CK_NET, 3, &db);
    ck_assert_int_eq(checkpoint_load(b, path, NULL, 1), VDNN_OK);
    assert_same_tensors(a, b);
    free(host);
    dataset_free(train);
    tn_free(a, da);
    tn_free(b, db);
}
END_TEST

START_TEST(test_file_header)
{
    char path[512];
    tn_path(path, sizeof path, "h.ckpt");
    saved_net(path);
    size_t len = 0;
    unsigned char *p = (unsigned char *)tn_read(path, &len);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_gt(len, 56);
    ck_assert_int_eq(memcmp(p, "VDNNCKPT", 8), 0);
    ck_assert_int_eq(memcmp(p, CKPT_MAGIC, 8), 0);
    ck_assert_uint_eq(get_u32(p + 8), 1);
    ck_assert_uint_eq(get_u32(p + 8), CKPT_VERSION);
    /* step 10, epoch 1, index 32, seed 3, little-endian u64s after the header size. */
    ck_assert_uint_eq(get_u32(p + 16), 10);
    ck_assert_uint_eq(get_u32(p + 24), 1);
    ck_assert_uint_eq(get_u32(p + 32), 32);
    ck_assert_uint_eq(get_u32(p + 40), 3);
    /* The first tensor record names conv1.weights. */
    ck_assert_uint_eq(get_u32(p + 56), strlen("conv1.weights"));
    ck_assert_int_eq(memcmp(p + 60, "conv1.weights", 13), 0);
    /* The last four bytes are the CRC-32 of everything before them. */
    ck_assert_uint_eq(get_u32(p + len - 4), (uint32_t)crc32(0L, p, (uInt)(len - 4)));
    free(p);
}
END_TEST

START_TEST(test_no_tmp_left)
{
    char path[512], tmp[600];
    tn_path(path, sizeof path, "c.ckpt");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    saved_net(path);
    ck_assert(tn_exists(path));
    ck_assert_msg(!tn_exists(tmp), "%s remains after a successful save", tmp);
    /* Overwriting an existing checkpoint too. */
    saved_net(path);
    ck_assert(!tn_exists(tmp));
}
END_TEST

/* ---- bad files ---- */

START_TEST(test_corrupt_byte)
{
    char good[512], bad[512];
    tn_path(good, sizeof good, "good.ckpt");
    tn_path(bad, sizeof bad, "bad.ckpt");
    saved_net(good);
    size_t len = 0;
    unsigned char *p = (unsigned char *)tn_read(good, &len);
    p[len / 2] ^= 0x10;
    tn_write(bad, p, len);
    load_fails(bad, VDNN_EFORMAT, "checksum");
    /* A flipped bit in the header, and in the CRC itself. */
    p[len / 2] ^= 0x10;
    p[20] ^= 0x01;
    tn_write(bad, p, len);
    load_fails(bad, VDNN_EFORMAT, "checksum");
    p[20] ^= 0x01;
    p[len - 1] ^= 0x80;
    tn_write(bad, p, len);
    load_fails(bad, VDNN_EFORMAT, "checksum");
    free(p);
}
END_TEST

START_TEST(test_truncated)
{
    char good[512], bad[512];
    tn_path(good, sizeof good, "good.ckpt");
    tn_path(bad, sizeof bad, "trunc.ckpt");
    saved_net(good);
    size_t len = 0;
    char *p = tn_read(good, &len);
    static const size_t keep[] = {0, 4, 12, 15, 16, 40, 56, 100};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        tn_write(bad, p, keep[i]);
        load_fails(bad, VDNN_EFORMAT, NULL);
    }
    tn_write(bad, p, len / 2);
    load_fails(bad, VDNN_EFORMAT, NULL);
    tn_write(bad, p, len - 1);
    load_fails(bad, VDNN_EFORMAT, NULL);
    free(p);
}
END_TEST

START_TEST(test_wrong_magic)
{
    char good[512], bad[512];
    tn_path(good, sizeof good, "good.ckpt");
    tn_path(bad, sizeof bad, "magic.ckpt");
    saved_net(good);
    size_t len = 0;
    unsigned char *p = (unsigned char *)tn_read(good, &len);
    memcpy(p, "VDNNCKPX", 8);
    fix_crc(p, len);
    tn_write(bad, p, len);
    load_fails(bad, VDNN_EFORMAT, "magic");
    /* Something else entirely. */
    tn_write_text(bad, "[net]\nbatch = 16\nchannels = 1\nheight = 8\nwidth = 8\n");
    load_fails(bad, VDNN_EFORMAT, "magic");
    free(p);
}
END_TEST

START_TEST(test_wrong_version)
{
    char good[512], bad[512];
    tn_path(good, sizeof good, "good.ckpt");
    tn_path(bad, sizeof bad, "version.ckpt");
    saved_net(good);
    size_t len = 0;
    unsigned char *p = (unsigned char *)tn_read(good, &len);
    set_u32(p + 8, 2);
    fix_crc(p, len);
    tn_write(bad, p, len);
    load_fails(bad, VDNN_EFORMAT, "version 2");
    free(p);
}
END_TEST

/* The algorithm table is an index into the device's own algorithms: a table written on
 * another kind of device ("plan.algorithms.cuda", cuDNN's) is skipped, however large its
 * indices, so a GPU's checkpoint resumes or evaluates on the CPU; the CPU's own table
 * with an index it does not have is a format error. */
START_TEST(test_other_device_algorithms)
{
    char good[512], bad[512];
    tn_path(good, sizeof good, "good.ckpt");
    tn_path(bad, sizeof bad, "algos.ckpt");
    saved_net(good);
    size_t len = 0;
    unsigned char *p = (unsigned char *)tn_read(good, &len);
    const char *name = "plan.algorithms", *cuda = "plan.algorithms.cuda";
    unsigned char *at = memmem(p, len, name, strlen(name));
    ck_assert_ptr_nonnull(at);
    size_t name_at = (size_t)(at - p), count = get_u32(p + name_at + strlen(name) + 8);   /* dims[0]: layers */
    ck_assert_uint_eq(get_u32(p + name_at - 4), strlen(name));
    size_t data_at = name_at + strlen(name) + 24;   /* dtype, ndim, two dims, byte count */
    for (size_t k = 0; k < count * PASS_COUNT; k++) set_u32(p + data_at + 4 * k, 7);

    /* the CPU's own table naming algorithm 7: beyond the project's own five and oneDNN's two */
    fix_crc(p, len);
    tn_write(bad, p, len);
    load_fails(bad, VDNN_EFORMAT, "names algorithm 7");

    /* the same table as a GPU's: skipped */
    size_t extra = strlen(cuda) - strlen(name), qlen = len + extra;
    unsigned char *q = malloc(qlen);
    memcpy(q, p, name_at);
    set_u32(q + name_at - 4, (uint32_t)strlen(cuda));
    memcpy(q + name_at, cuda, strlen(cuda));
    memcpy(q + name_at + strlen(cuda), p + name_at + strlen(name), len - name_at - strlen(name));
    fix_crc(q, qlen);
    tn_write(bad, q, qlen);
    device *d;
    net *n = attached(CK_NET, 5, &d);
    int before[64][PASS_COUNT];
    ck_assert_int_le(n->nlayers, 64);
    for (int i = 0; i < n->nlayers; i++) memcpy(before[i], n->layers[i]->algo, sizeof before[i]);
    ckpt_state st;
    ck_assert_msg(checkpoint_load(n, bad, &st, 0) == VDNN_OK, "load: %s", vdnn_errmsg());
    ck_assert_uint_eq(st.step, 10);
    for (int i = 0; i < n->nlayers; i++)
        ck_assert_msg(!memcmp(before[i], n->layers[i]->algo, sizeof before[i]), "%s's algorithms changed",
                      n->layers[i]->name);
    tn_free(n, d);
    free(q);
    free(p);
}
END_TEST

/* tools/ckpt_read.py, the documented way to read a checkpoint from Python, reads every
 * record of a real one: the parameters and the int32 algorithm table. */
START_TEST(test_python_reader)
{
    static const char *pythons[] = {"python3", "/usr/bin/python3"};
    const char *py = NULL;
    for (size_t i = 0; i < sizeof pythons / sizeof *pythons && !py; i++) {
        char probe[256];
        snprintf(probe, sizeof probe, "%s -c 'import numpy' >/dev/null 2>&1", pythons[i]);
        if (system(probe) == 0) py = pythons[i];
    }
    if (!py) {
        printf("SKIPPED: test_python_reader: no python3 with NumPy (tools/setup.sh installs python3-numpy)\n");
        return;
    }
    char path[512], out[512], cmd[1600];
    tn_path(path, sizeof path, "py.ckpt");
    tn_path(out, sizeof out, "py.txt");
    saved_net(path);
    snprintf(cmd, sizeof cmd, "%s tools/ckpt_read.py '%s' >'%s' 2>&1", py, path, out);
    int rc = system(cmd);
    char *text = tn_read(out, NULL);
    ck_assert_msg(rc == 0, "%s exited %d:\n%s", cmd, rc, text);
    ck_assert_msg(strstr(text, "'step': 10") && strstr(text, "conv1.weights") && strstr(text, "plan.algorithms"),
                  "ckpt_read.py printed:\n%s", text);
    free(text);
}
END_TEST

/* A record's fields are checked against the file even when the CRC is right. */
START_TEST(test_bad_record)
{
    char good[512], bad[512];
    tn_path(good, sizeof good, "good.ckpt");
    tn_path(bad, sizeof bad, "record.ckpt");
    saved_net(good);
    size_t len = 0;
    unsigned char *p = (unsigned char *)tn_read(good, &len);
    unsigned char *q = malloc(len);
    /* conv1.weights: name length at 56, name at 60, dtype at 73, ndim at 77, dims at 81,
     * byte count at 97. */
    ck_assert_uint_eq(get_u32(p + 77), 4);
    ck_assert_uint_eq(get_u32(p + 97), 36 * 4);

    memcpy(q, p, len);
    set_u32(q + 73, 1);
    fix_crc(q, len);
    tn_write(bad, q, len);
    load_fails(bad, VDNN_EFORMAT, "dtype");

    memcpy(q, p, len);
    set_u32(q + 97, 0x7FFFFFF0u);
    fix_crc(q, len);
    tn_write(bad, q, len);
    load_fails(bad, VDNN_EFORMAT, "conv1.weights");

    memcpy(q, p, len);
    set_u32(q + 56, 0xFFFFFFFFu);
    fix_crc(q, len);
    tn_write(bad, q, len);
    load_fails(bad, VDNN_EFORMAT, NULL);

    memcpy(q, p, len);
    set_u32(q + 77, 1000);
    fix_crc(q, len);
    tn_write(bad, q, len);
    load_fails(bad, VDNN_EFORMAT, "conv1.weights");

    /* A tensor count larger than the records in the file. */
    memcpy(q, p, len);
    set_u32(q + 52, get_u32(p + 52) + 1);
    fix_crc(q, len);
    tn_write(bad, q, len);
    load_fails(bad, VDNN_EFORMAT, NULL);

    /* And smaller: the last tensor is missing, with bytes left over. */
    memcpy(q, p, len);
    set_u32(q + 52, get_u32(p + 52) - 1);
    fix_crc(q, len);
    tn_write(bad, q, len);
    load_fails(bad, VDNN_EFORMAT, NULL);
    free(q);
    free(p);
}
END_TEST

START_TEST(test_other_net)
{
    char path[512];
    tn_path(path, sizeof path, "eight.ckpt");
    device *d;
    net *n = attached(TN_HEAD CK_LAYERS(8, 6), 3, &d);
    ckpt_state s = {1, 0, 16, 3, 0};
    save_ok(n, path, &s);
    tn_free(n, d);
    /* conv1 has 8 filters in the file, 4 in the net: the message names the tensor and
     * both shapes. */
    load_fails(path, VDNN_EFORMAT, "conv1.weights");
    tn_msg_has("8x1x3x3", "4x1x3x3");
}
END_TEST

START_TEST(test_other_net_late_mismatch)
{
    /* conv1 matches, conv5 does not: nothing may be loaded, conv1 included. */
    char path[512];
    tn_path(path, sizeof path, "late.ckpt");
    device *d;
    net *n = attached(TN_HEAD CK_LAYERS(4, 5), 3, &d);
    scramble(n, 11);
    ckpt_state s = {1, 0, 16, 3, 0};
    save_ok(n, path, &s);
    tn_free(n, d);
    load_fails(path, VDNN_EFORMAT, "conv5.weights");
    tn_msg_has("5x4x3x3", "6x4x3x3");
}
END_TEST

/* CK_NET with conv5 split into two groups and dilated: its weights are 6x2x3x3. */
#define CK_GROUPED                                                                              \
    TN_HEAD "[convolutional]\nfilters = 4\nsize = 3\npad = 1\n[batchnorm]\n[relu]\n"            \
            "[maxpool]\nsize = 2\n[convolutional]\nfilters = 6\nsize = 3\npad = 2\ngroups = 2\n" \
            "dilation = 2\n[relu]\n[connected]\noutput = 4\n[softmax]\n"

START_TEST(test_grouped_round_trip_and_mismatch)
{
    /* a grouped net loads into the same config bit for bit ... */
    char path[512];
    tn_path(path, sizeof path, "grouped.ckpt");
    device *da, *db;
    net *a = attached(CK_GROUPED, 3, &da);
    net *b = attached(CK_GROUPED, 99, &db);
    scramble(a, 5);
    ckpt_state s = {1, 0, 16, 3, 0};
    save_ok(a, path, &s);
    ckpt_state r = {0};
    vdnn_status st = checkpoint_load(b, path, &r, 0);
    ck_assert_msg(st == VDNN_OK, "checkpoint_load: %s", vdnn_errmsg());
    assert_same_tensors(a, b);
    tn_free(a, da);
    tn_free(b, db);
    /* ... and not into the ungrouped one: the weights' shapes differ */
    load_fails(path, VDNN_EFORMAT, "conv5.weights");
    tn_msg_has("6x2x3x3", "6x4x3x3");
}
END_TEST

START_TEST(test_other_net_missing_tensor)
{
    /* Saved without biases in conv1: the net's conv1.bias is missing from the file. */
    char path[512];
    tn_path(path, sizeof path, "nobias.ckpt");
    device *d;
    net *n = attached(TN_HEAD "[convolutional]\nfilters = 4\nsize = 3\npad = 1\nbias = 0\n[batchnorm]\n[relu]\n"
                      "[maxpool]\nsize = 2\n[convolutional]\nfilters = 6\nsize = 3\npad = 1\n[relu]\n"
                      "[connected]\noutput = 4\n[softmax]\n", 3, &d);
    ckpt_state s = {1, 0, 16, 3, 0};
    save_ok(n, path, &s);
    tn_free(n, d);
    load_fails(path, VDNN_EFORMAT, "conv1.bias");
}
END_TEST

/* Fine-tuning's load (train --init): a checkpoint of a net whose conv5 has 6 filters
 * initialises one with 8: conv1, bn2 and fc7's bias come from the file, conv5 and fc7's
 * weights (whose shapes differ) stay as the seed made them, the momenta stay zero, the
 * step 0; the report names the fresh tensors with both shapes. A checkpoint sharing no
 * tensor is refused. */
START_TEST(test_init_by_name_and_shape)
{
    char path[512];
    tn_path(path, sizeof path, "six.ckpt");
    device *da, *db;
    net *a = attached(TN_HEAD CK_LAYERS(4, 6), 3, &da);
    ckpt_state s = {7, 1, 16, 3, 0};
    save_ok(a, path, &s);
    net *b = attached(TN_HEAD CK_LAYERS(4, 8), 5, &db);
    float *a_conv1 = tn_download(a, tn_param(a, "conv1.weights")->value, 36);
    float *b_conv1 = tn_download(b, tn_param(b, "conv1.weights")->value, 36);
    ck_assert_msg(memcmp(a_conv1, b_conv1, 36 * sizeof(float)) != 0, "seeds 3 and 5 start alike");
    float *b_conv5 = tn_download(b, tn_param(b, "conv5.weights")->value, 8 * 4 * 9);
    ckpt_init_report rep;
    ck_assert_msg(checkpoint_init(b, path, &rep) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_int_eq(rep.total, 10);
    ck_assert_int_eq(rep.kept, 7);
    ck_assert_msg(strstr(rep.fresh, "conv5.weights (8x4x3x3 here, 6x4x3x3 in the file)") &&
                  strstr(rep.fresh, "conv5.bias") && strstr(rep.fresh, "fc7.weights") && !strstr(rep.fresh, "conv1") &&
                  !strstr(rep.fresh, "fc7.bias"), "%s", rep.fresh);
    float *now_conv1 = tn_download(b, tn_param(b, "conv1.weights")->value, 36);
    float *now_conv5 = tn_download(b, tn_param(b, "conv5.weights")->value, 8 * 4 * 9);
    float *mom = tn_download(b, tn_param(b, "conv1.weights")->momentum, 36);
    ck_assert(memcmp(now_conv1, a_conv1, 36 * sizeof(float)) == 0);
    ck_assert(memcmp(now_conv5, b_conv5, 8 * 4 * 9 * sizeof(float)) == 0);
    for (int i = 0; i < 36; i++) ck_assert(mom[i] == 0);
    ck_assert_uint_eq(b->step, 0);
    free(a_conv1);
    free(b_conv1);
    free(b_conv5);
    free(now_conv1);
    free(now_conv5);
    free(mom);
    tn_free(b, db);
    device *dc;
    net *c = attached(TN_HEAD "[connected]\nname = other\noutput = 4\n[softmax]\n", 3, &dc);
    ck_assert_int_eq(checkpoint_init(c, path, &rep), VDNN_EFORMAT);
    tn_msg_has("no tensor of this net", "other.weights (not in the file)");
    tn_free(c, dc);
    tn_free(a, da);
}
END_TEST

START_TEST(test_missing_file)
{
    char path[512];
    tn_path(path, sizeof path, "nothing-here.ckpt");
    load_fails(path, VDNN_EIO, NULL);
}
END_TEST

/* Where a checkpoint is expected, a folder (`--resume DIR` said only "read error"), a
 * device (/dev/zero would be read forever) and a file far larger than any checkpoint of
 * the net are refused before anything is read, each saying what the path is. */
START_TEST(test_not_a_checkpoint_file)
{
    load_fails(tn_dir, VDNN_EIO, "is a folder, not a checkpoint");
    load_fails("/dev/zero", VDNN_EIO, "is a character device, not a checkpoint");
    char big[512];
    tn_path(big, sizeof big, "huge.ckpt");
    FILE *f = fopen(big, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(ftruncate(fileno(f), (off_t)1 << 40), 0);   /* sparse: no disk used */
    fclose(f);
    load_fails(big, VDNN_EFORMAT, "(1099511627776 bytes) is over the");
    tn_msg_has("limit for a checkpoint of this net", NULL);
}
END_TEST

START_TEST(test_save_into_missing_folder)
{
    char good[512], bad[512], tmp[600];
    tn_path(good, sizeof good, "good.ckpt");
    tn_path(bad, sizeof bad, "no/such/folder/x.ckpt");
    saved_net(good);
    size_t len = 0;
    char *before = tn_read(good, &len);
    device *d;
    net *n = attached(CK_NET, 3, &d);
    ckpt_state s = {1, 0, 0, 3, 0};
    vdnn_status st = checkpoint_save(n, bad, &s);
    ck_assert_int_eq(st, VDNN_EIO);
    tn_msg_has(bad, NULL);
    ck_assert(!tn_exists(bad));
    snprintf(tmp, sizeof tmp, "%s.tmp", bad);
    ck_assert(!tn_exists(tmp));
    /* The good checkpoint elsewhere is untouched. */
    size_t len2 = 0;
    char *after = tn_read(good, &len2);
    ck_assert_uint_eq(len, len2);
    ck_assert_int_eq(memcmp(before, after, len), 0);
    free(before);
    free(after);
    tn_free(n, d);
}
END_TEST

START_TEST(test_failed_save_keeps_previous)
{
    /* A save over an existing checkpoint that cannot write its temporary file (a folder
     * is in the way) fails and leaves the previous checkpoint as it was. */
    char path[512], tmp[600];
    tn_path(path, sizeof path, "keep.ckpt");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    saved_net(path);
    size_t len = 0;
    char *before = tn_read(path, &len);
    ck_assert_int_eq(mkdir(tmp, 0700), 0);
    device *d;
    net *n = attached(CK_NET, 42, &d);
    ckpt_state s = {2, 0, 0, 42, 0};
    vdnn_status st = checkpoint_save(n, path, &s);
    ck_assert_int_eq(st, VDNN_EIO);
    tn_msg_has(path, NULL);
    size_t len2 = 0;
    char *after = tn_read(path, &len2);
    ck_assert_uint_eq(len, len2);
    ck_assert_int_eq(memcmp(before, after, len), 0);
    ck_assert_int_eq(rmdir(tmp), 0);
    /* With the way clear, the next save succeeds. */
    save_ok(n, path, &s);
    ck_assert(!tn_exists(tmp));
    free(after);
    after = tn_read(path, &len2);
    ck_assert_uint_eq(len, len2);
    ck_assert_msg(memcmp(before, after, len) != 0, "the second save did not replace the file");
    free(before);
    free(after);
    tn_free(n, d);
}
END_TEST

/* A first save that fails says that no checkpoint was written, not that "the previous
 * one is untouched" (issue 16). */
START_TEST(test_failed_first_save)
{
    char path[512], tmp[600];
    tn_path(path, sizeof path, "first.ckpt");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    ck_assert_int_eq(mkdir(tmp, 0700), 0);   /* in the way of naming the new file */
    device *d;
    net *n = attached(CK_NET, 3, &d);
    ckpt_state s = {1, 0, 0, 3, 0};
    ck_assert_int_eq(checkpoint_save(n, path, &s), VDNN_EIO);
    tn_msg_has(path, "(none was written)");
    ck_assert(!tn_exists(path));
    tn_free(n, d);
}
END_TEST

/* The first `bytes` of a saved checkpoint at `path`, with writes limited to `limit`
 * bytes in a child process: with SIGXFSZ ignored a write fails as on a full disk,
 * else the process is killed in the middle of the save. Returns the child's status. */
static int save_limited(const char *path, rlim_t limit, int killed)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        device *d;
        net *n = attached(CK_NET, 42, &d);
        signal(SIGXFSZ, killed ? SIG_DFL : SIG_IGN);
        struct rlimit r = {limit, limit};
        setrlimit(RLIMIT_FSIZE, &r);
        ckpt_state s = {2, 0, 0, 42, 0};
        vdnn_status st = checkpoint_save(n, path, &s);
        int ok = st == VDNN_EIO && strstr(vdnn_errmsg(), "(the previous one is untouched)");
        if (!ok) fprintf(stderr, "checkpoint_save: %d %s\n", (int)st, vdnn_errmsg());
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return status;
}

/* A full disk during a save (writes limited to half the file) and a process killed in
 * the middle of writing both leave the previous checkpoint whole and no PATH.tmp. */
START_TEST(test_full_disk_and_kill_keep_previous)
{
    char path[512], tmp[600];
    tn_path(path, sizeof path, "keep.ckpt");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    saved_net(path);
    size_t len = 0, len2 = 0;
    char *before = tn_read(path, &len);
    for (int killed = 0; killed < 2; killed++) {
        int status = save_limited(path, len / 2, killed);
        if (killed) ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ, "status %d", status);
        else ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d", status);
        char *after = tn_read(path, &len2);
        ck_assert_uint_eq(len, len2);
        ck_assert_int_eq(memcmp(before, after, len), 0);
        free(after);
        ck_assert_msg(!tn_exists(tmp), "%s left behind (killed %d)", tmp, killed);
    }
    free(before);
}
END_TEST

static Suite *checkpoint_suite(void)
{
    Suite *s = suite_create("checkpoint");
    TCase *rt = tcase_create("round_trip");
    tcase_add_checked_fixture(rt, tn_dir_setup, tn_dir_teardown);
    tcase_add_test(rt, test_round_trip_bits);
    tcase_add_test(rt, test_round_trip_after_training);
    tcase_add_test(rt, test_file_header);
    tcase_add_test(rt, test_no_tmp_left);
    tcase_add_test(rt, test_init_by_name_and_shape);
    suite_add_tcase(s, rt);

    TCase *bad = tcase_create("bad_files");
    tcase_add_checked_fixture(bad, tn_dir_setup, tn_dir_teardown);
    tcase_add_test(bad, test_corrupt_byte);
    tcase_add_test(bad, test_truncated);
    tcase_add_test(bad, test_wrong_magic);
    tcase_add_test(bad, test_wrong_version);
    tcase_add_test(bad, test_bad_record);
    tcase_add_test(bad, test_other_device_algorithms);
    tcase_add_test(bad, test_python_reader);
    tcase_add_test(bad, test_other_net);
    tcase_add_test(bad, test_other_net_late_mismatch);
    tcase_add_test(bad, test_other_net_missing_tensor);
    tcase_add_test(bad, test_grouped_round_trip_and_mismatch);
    tcase_add_test(bad, test_missing_file);
    tcase_add_test(bad, test_not_a_checkpoint_file);
    suite_add_tcase(s, bad);

    TCase *save = tcase_create("save");
    tcase_add_checked_fixture(save, tn_dir_setup, tn_dir_teardown);
    tcase_add_test(save, test_save_into_missing_folder);
    tcase_add_test(save, test_failed_save_keeps_previous);
    tcase_add_test(save, test_failed_first_save);
    tcase_add_test(save, test_full_disk_and_kill_keep_previous);
    suite_add_tcase(s, save);
    return s;
}

int main(void) { return tn_run_suite(checkpoint_suite()); }
