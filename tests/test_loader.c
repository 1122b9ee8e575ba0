/* Tests of the background loader: coverage and order of epochs, determinism from
 * (seed, epoch, position), seek reproducing an uninterrupted run (the basis of exact
 * resume), short last batches and the n = 0 epoch marker, normalisation, crop and flip,
 * batches handed over without a copy (loader_next_swap, the loader's allocator), argument
 * checks, and destroying the loader while its thread is busy. Run under
 * ThreadSanitizer by `make tsan`. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data/data.h"
#include "tests/testnet.h"

/* count items of (c, h, w); pixel k of item i is (7 i + k) & 255, label i. */
static dataset *make_set(int count, int c, int h, int w)
{
    dataset *d = calloc(1, sizeof *d);
    size_t item = (size_t)c * h * w;
    d->count = count; d->c = c; d->h = h; d->w = w; d->classes = count;
    d->images = malloc(item * (size_t)count);
    d->labels = malloc(sizeof(int32_t) * (size_t)count);
    for (int i = 0; i < count; i++) {
        d->labels[i] = i;
        for (size_t k = 0; k < item; k++) d->images[(size_t)i * item + k] = (uint8_t)((7 * (size_t)i + k) & 255);
    }
    snprintf(d->source, sizeof d->source, "test-set");
    return d;
}

static loader_opts opts(int batch, int shuffle, int augment, uint64_t seed, const data_cfg *cfg)
{
    loader_opts o = { batch, shuffle, augment, seed, cfg, 0, {NULL, NULL, NULL} };
    return o;
}

static loader *start(const dataset *d, const loader_opts *o)
{
    loader *l = NULL;
    vdnn_status s = loader_create(d, o, &l);
    ck_assert_msg(s == VDNN_OK, "loader_create: %s", vdnn_errmsg());
    return l;
}

/* The labels (item ids) of one whole epoch, checking batch sizes and the n = 0 marker. */
static void read_epoch(loader *l, int count, int batch, int32_t *order)
{
    float *x = malloc(sizeof(float) * (size_t)batch * 64);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)batch);
    int got = 0, n, epoch, index;
    loader_position(l, &epoch, &index);
    ck_assert_int_eq(index, 0);
    for (;;) {
        ck_assert_int_eq(loader_next(l, x, y, &n), VDNN_OK);
        if (n == 0) break;
        int want = count - got < batch ? count - got : batch;
        ck_assert_int_eq(n, want);
        memcpy(order + got, y, sizeof(int32_t) * (size_t)n);
        got += n;
        int e2, i2;
        loader_position(l, &e2, &i2);
        ck_assert_int_eq(e2, epoch);
        ck_assert_int_eq(i2, got);
    }
    ck_assert_int_eq(got, count);
    int e2, i2;
    loader_position(l, &e2, &i2);
    ck_assert_int_eq(e2, epoch + 1);
    ck_assert_int_eq(i2, 0);
    free(x);
    free(y);
}

static void check_permutation(const int32_t *order, int count)
{
    int *seen = calloc((size_t)count, sizeof *seen);
    for (int i = 0; i < count; i++) {
        ck_assert(order[i] >= 0 && order[i] < count);
        seen[order[i]]++;
    }
    for (int i = 0; i < count; i++) ck_assert_int_eq(seen[i], 1);
    free(seen);
}

START_TEST(every_item_once_per_epoch)
{
    dataset *d = make_set(50, 1, 2, 2);
    loader_opts o = opts(7, 1, 0, 11, NULL);
    loader *l = start(d, &o);
    int32_t e0[50], e1[50], e2[50];
    read_epoch(l, 50, 7, e0);   /* 7 full batches, a short one of 1, then n = 0 */
    read_epoch(l, 50, 7, e1);
    read_epoch(l, 50, 7, e2);
    check_permutation(e0, 50);
    check_permutation(e1, 50);
    check_permutation(e2, 50);
    ck_assert_int_ne(memcmp(e0, e1, sizeof e0), 0);
    ck_assert_int_ne(memcmp(e1, e2, sizeof e1), 0);
    loader_destroy(l);
    dataset_free(d);
}
END_TEST

START_TEST(no_shuffle_keeps_order)
{
    dataset *d = make_set(10, 1, 1, 1);
    loader_opts o = opts(5, 0, 0, 11, NULL);
    loader *l = start(d, &o);
    int32_t order[10];
    read_epoch(l, 10, 5, order);   /* ends exactly on a batch: then n = 0 */
    for (int i = 0; i < 10; i++) ck_assert_int_eq(order[i], i);
    loader_destroy(l);
    dataset_free(d);
}
END_TEST

START_TEST(same_seed_same_order)
{
    dataset *d = make_set(40, 1, 1, 1);
    loader_opts o = opts(8, 1, 0, 5, NULL), p = opts(8, 1, 0, 6, NULL);
    loader *a = start(d, &o), *b = start(d, &o), *c = start(d, &p);
    int32_t oa[2][40], ob[2][40], oc[2][40];
    for (int e = 0; e < 2; e++) {
        read_epoch(a, 40, 8, oa[e]);
        read_epoch(b, 40, 8, ob[e]);
        read_epoch(c, 40, 8, oc[e]);
    }
    ck_assert_int_eq(memcmp(oa, ob, sizeof oa), 0);
    ck_assert_int_ne(memcmp(oa[0], oc[0], sizeof oa[0]), 0);
    ck_assert_int_ne(memcmp(oa[0], oa[1], sizeof oa[0]), 0);
    loader_destroy(a);
    loader_destroy(b);
    loader_destroy(c);
    dataset_free(d);
}
END_TEST

/* All batches from (epoch 0, 0) over `epochs` epochs, n = 0 markers included. */
typedef struct run { int nb; int n[64]; float *x; int32_t *y; } run;

static void record(loader *l, int batches, size_t bx, int batch, run *r, int sleep_us)
{
    r->nb = batches;
    r->x = malloc(sizeof(float) * bx * (size_t)batches);
    r->y = malloc(sizeof(int32_t) * (size_t)batch * (size_t)batches);
    for (int b = 0; b < batches; b++) {
        ck_assert_int_eq(loader_next(l, r->x + bx * (size_t)b, r->y + (size_t)batch * b, &r->n[b]), VDNN_OK);
        if (sleep_us) nanosleep(&(struct timespec){ 0, sleep_us * 1000L }, NULL);
    }
}

static void free_run(run *r)
{
    free(r->x);
    free(r->y);
}

static void expect_same(const run *a, int from, const run *b, size_t bx, int batch)
{
    for (int k = 0; k < b->nb; k++) {
        ck_assert_int_eq(a->n[from + k], b->n[k]);
        ck_assert_int_eq(memcmp(a->x + bx * (size_t)(from + k), b->x + bx * (size_t)k, sizeof(float) * bx), 0);
        ck_assert_int_eq(memcmp(a->y + (size_t)batch * (from + k), b->y + (size_t)batch * k, sizeof(int32_t) * (size_t)batch), 0);
    }
}

/* 30 items of 2x5x5 in batches of 8: an epoch is 4 batches (8, 8, 8, 6) and n = 0. */
START_TEST(seek_reproduces_uninterrupted_run)
{
    dataset *d = make_set(30, 2, 5, 5);
    data_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.crop_pad = 2; cfg.flip = 1; cfg.nmean = 2; cfg.mean[0] = 0.5f; cfg.mean[1] = 0.25f;
    cfg.nstd = 1; cfg.std[0] = 0.3f;
    loader_opts o = opts(8, 1, 1, 77, &cfg);
    size_t bx = 8 * 50;
    loader *l = start(d, &o);
    run full, slow, tail, again;
    record(l, 15, bx, 8, &full, 0);
    loader_destroy(l);
    l = start(d, &o);
    record(l, 15, bx, 8, &slow, 200);   /* a slow trainer sees the very same batches */
    expect_same(&full, 0, &slow, bx, 8);
    loader_destroy(l);

    l = start(d, &o);
    loader_seek(l, 1, 16);            /* batch 2 of epoch 1 = batch 7 of the full run */
    record(l, 8, bx, 8, &tail, 0);
    expect_same(&full, 7, &tail, bx, 8);
    loader_seek(l, 0, 8);             /* back, discarding what was prepared ahead */
    record(l, 3, bx, 8, &again, 0);
    expect_same(&full, 1, &again, bx, 8);
    loader_destroy(l);
    free_run(&full); free_run(&slow); free_run(&tail); free_run(&again);
    dataset_free(d);
}
END_TEST

START_TEST(short_batch_tail_and_end_marker)
{
    dataset *d = make_set(5, 1, 1, 2);
    loader_opts o = opts(3, 0, 0, 1, NULL);
    loader *l = start(d, &o);
    float x[6];
    int32_t y[3];
    int n;
    ck_assert_int_eq(loader_next(l, x, y, &n), VDNN_OK);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(loader_next(l, x, y, &n), VDNN_OK);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(y[0], 3); ck_assert_int_eq(y[1], 4); ck_assert_int_eq(y[2], 0);
    ck_assert(x[4] == 0.0f && x[5] == 0.0f);   /* the unused tail is zeroed */
    ck_assert_int_eq(loader_next(l, x, y, &n), VDNN_OK);
    ck_assert_int_eq(n, 0);
    int e, i;
    loader_position(l, &e, &i);
    ck_assert_int_eq(e, 1); ck_assert_int_eq(i, 0);
    ck_assert_int_eq(loader_next(l, x, y, &n), VDNN_OK);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(y[0], 0);
    loader_destroy(l);
    dataset_free(d);
}
END_TEST

static void check_norm(const dataset *d, const data_cfg *cfg, const float *mean, const float *std)
{
    loader_opts o = opts(4, 0, 1, 3, cfg);   /* augment on, but cfg asks for no crop/flip */
    loader *l = start(d, &o);
    size_t item = (size_t)d->c * d->h * d->w, plane = (size_t)d->h * d->w;
    float x[4 * 48];
    int32_t y[4];
    int n;
    ck_assert_int_eq(loader_next(l, x, y, &n), VDNN_OK);
    ck_assert_int_eq(n, 4);
    for (int i = 0; i < 4; i++)
        for (size_t k = 0; k < item; k++) {
            int c = (int)(k / plane);
            float want = ((float)d->images[(size_t)i * item + k] / 255.0f - mean[c]) / std[c];
            ck_assert_msg(fabsf(x[(size_t)i * item + k] - want) < 1e-6f, "item %d value %zu: %g vs %g",
                          i, k, (double)x[(size_t)i * item + k], (double)want);
        }
    loader_destroy(l);
}

START_TEST(normalisation)
{
    dataset *d = make_set(4, 3, 4, 4);
    data_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    const float zero[3] = { 0, 0, 0 }, one[3] = { 1, 1, 1 };
    check_norm(d, &cfg, zero, one);
    check_norm(d, NULL, zero, one);
    cfg.nmean = 3; cfg.mean[0] = 0.1f; cfg.mean[1] = 0.2f; cfg.mean[2] = 0.3f;
    cfg.nstd = 3; cfg.std[0] = 0.5f; cfg.std[1] = 0.25f; cfg.std[2] = 2.0f;
    check_norm(d, &cfg, cfg.mean, cfg.std);
    cfg.nmean = 1; cfg.nstd = 1;
    const float m1[3] = { 0.1f, 0.1f, 0.1f }, s1[3] = { 0.5f, 0.5f, 0.5f };
    check_norm(d, &cfg, m1, s1);
    dataset_free(d);
}
END_TEST

/* 64 copies of one 1x4x5 image with values 1..20, padded zeros visible as -1 after
 * normalisation with mean 1 (0/255 - 1 = -1; every pixel maps to v/255 - 1 > -1). */
static dataset *copies_set(void)
{
    dataset *d = make_set(64, 1, 4, 5);
    for (int i = 0; i < 64; i++)
        for (int k = 0; k < 20; k++) d->images[i * 20 + k] = (uint8_t)(k + 1);
    return d;
}

static float pix(int y, int x) { return (float)(5 * y + x + 1) / 255.0f - 1.0f; }

/* Which of the shifted / mirrored versions of the image `out` is; -1 if none. */
static int match_transform(const float *out, int pad, int allow_flip)
{
    for (int f = 0; f <= allow_flip; f++)
        for (int dy = -pad; dy <= pad; dy++)
            for (int dx = -pad; dx <= pad; dx++) {
                int ok = 1;
                for (int y = 0; ok && y < 4; y++)
                    for (int x = 0; ok && x < 5; x++) {
                        int sy = y + dy, sx = (f ? 4 - x : x) + dx;
                        float want = sy < 0 || sy >= 4 || sx < 0 || sx >= 5 ? -1.0f : pix(sy, sx);
                        ok = out[y * 5 + x] == want;
                    }
                if (ok) return f * 100 + (dy + pad) * 10 + (dx + pad);
            }
    return -1;
}

static int count_kinds(int pad, int flip, int augment, int *kinds)
{
    dataset *d = copies_set();
    data_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.crop_pad = pad; cfg.flip = flip; cfg.nmean = 1; cfg.mean[0] = 1.0f;
    loader_opts o = opts(64, 1, augment, 9, &cfg);
    loader *l = start(d, &o);
    float x[64 * 20];
    int32_t y[64];
    int n, distinct = 0;
    ck_assert_int_eq(loader_next(l, x, y, &n), VDNN_OK);
    ck_assert_int_eq(n, 64);
    for (int i = 0; i < 64; i++) {
        int k = match_transform(x + i * 20, pad, flip);
        ck_assert_msg(k >= 0, "item %d is not a crop/flip of the image", i);
        if (!kinds[k]++) distinct++;
    }
    loader_destroy(l);
    dataset_free(d);
    return distinct;
}

START_TEST(flip_of_known_image)
{
    int kinds[256] = { 0 };
    ck_assert_int_eq(count_kinds(0, 1, 1, kinds), 2);
    ck_assert_int_gt(kinds[0], 16);     /* p = 0.5 each over 64 draws */
    ck_assert_int_gt(kinds[100], 16);
}
END_TEST

START_TEST(crop_shifts_with_zero_padding)
{
    int kinds[256] = { 0 };
    ck_assert_int_ge(count_kinds(1, 0, 1, kinds), 7);   /* of 9 shifts over 64 draws */
    int both[256] = { 0 };
    ck_assert_int_ge(count_kinds(2, 1, 1, both), 20);   /* of 50 crop x flip kinds */
    int none[256] = { 0 };
    ck_assert_int_eq(count_kinds(2, 1, 0, none), 1);    /* augment off: the image as is */
    ck_assert_int_eq(none[22], 64);
}
END_TEST

/* A counting allocator standing in for a device's pinned memory. */
typedef struct counted {
    int live, made;
} counted;

static void *counted_alloc(void *ctx, size_t bytes)
{
    counted *c = ctx;
    c->live++;
    c->made++;
    return malloc(bytes);
}

static void counted_release(void *ctx, void *p)
{
    counted *c = ctx;
    c->live--;
    free(p);
}

/* loader_next_swap hands over the ready batch's own buffers (from the loader's `mem`)
 * in exchange for the caller's: the same floats and labels as loader_next, its short
 * batch's tail zeroed, the buffers going round the slots, and every buffer the loader's
 * allocator made released by it or by the caller at the end. */
START_TEST(swap_hands_over_buffers)
{
    dataset *d = make_set(23, 2, 3, 3);
    data_cfg cfg = {0};
    cfg.workers = 2;
    counted c = {0, 0};
    loader_opts copy = opts(5, 1, 0, 9, &cfg), swap = copy;
    swap.mem = (loader_mem){counted_alloc, counted_release, &c};
    loader *a = start(d, &copy), *b = start(d, &swap);
    size_t item = 2 * 3 * 3;
    float *xa = malloc(sizeof(float) * 5 * item);
    int32_t *ya = malloc(sizeof(int32_t) * 5);
    float *xb = counted_alloc(&c, sizeof(float) * 5 * item);
    int32_t *yb = counted_alloc(&c, sizeof(int32_t) * 5);
    float *first = xb;
    int rotated = 0;
    for (int k = 0; k < 12; k++) {   /* two epochs and a half: short batches, n = 0 markers */
        int na = -1, nb = -1;
        for (size_t i = 0; i < 5 * item; i++) xb[i] = 7.0f;   /* stale data the tail must not keep */
        ck_assert_int_eq(loader_next(a, xa, ya, &na), VDNN_OK);
        ck_assert_int_eq(loader_next_swap(b, &xb, &yb, &nb), VDNN_OK);
        ck_assert_int_eq(na, nb);
        ck_assert_msg(!memcmp(xa, xb, sizeof(float) * 5 * item), "batch %d: other floats", k);
        ck_assert_msg(!memcmp(ya, yb, sizeof(int32_t) * 5), "batch %d: other labels", k);
        rotated |= xb != first;
    }
    ck_assert_msg(rotated, "the caller's buffer never changed: no hand-over");
    ck_assert_int_eq(loader_next_swap(b, NULL, &yb, NULL), VDNN_EINVAL);
    loader_destroy(a);
    loader_destroy(b);
    counted_release(&c, xb);
    counted_release(&c, yb);
    ck_assert_msg(c.live == 0, "%d of %d buffers not released", c.live, c.made);
    ck_assert_int_gt(c.made, 4);
    free(xa);
    free(ya);
    dataset_free(d);
}
END_TEST

START_TEST(bad_arguments)
{
    dataset *d = make_set(10, 3, 2, 2);
    data_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    loader *l = NULL;
    loader_opts o = opts(0, 1, 0, 1, NULL);
    ck_assert_int_eq(loader_create(d, &o, &l), VDNN_EINVAL);
    ck_assert_ptr_null(l);
    cfg.nmean = 2;
    o = opts(4, 1, 0, 1, &cfg);
    ck_assert_int_eq(loader_create(d, &o, &l), VDNN_EINVAL);
    cfg.nmean = 0; cfg.crop_pad = -1;
    o = opts(4, 1, 1, 1, &cfg);
    ck_assert_int_eq(loader_create(d, &o, &l), VDNN_EINVAL);
    cfg.crop_pad = 0;
    l = start(d, &o);
    float x[4 * 12];
    int32_t y[4];
    int n;
    loader_seek(l, 0, 11);
    ck_assert_int_eq(loader_next(l, x, y, &n), VDNN_EINVAL);
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "test-set"));
    loader_seek(l, 2, 8);
    ck_assert_int_eq(loader_next(l, x, y, &n), VDNN_OK);
    ck_assert_int_eq(n, 2);
    loader_destroy(l);
    dataset_free(d);
}
END_TEST

START_TEST(destroy_while_running)
{
    dataset *d;
    ck_assert_int_eq(synthetic_make(3000, 3, 32, 32, 10, 1, &d), VDNN_OK);
    loader_opts o = opts(1000, 1, 0, 1, NULL);
    float *x = malloc(sizeof(float) * 1000 * 3072);
    int32_t y[1000];
    int n;
    loader_destroy(start(d, &o));           /* before the first batch is ready */
    loader *l = start(d, &o);
    ck_assert_int_eq(loader_next(l, x, y, &n), VDNN_OK);
    loader_destroy(l);                      /* while the next batch is being prepared */
    l = start(d, &o);
    loader_seek(l, 3, 1000);
    loader_destroy(l);                      /* right after a seek */
    l = start(d, &o);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(loader_next(l, x, y, &n), VDNN_OK);
    nanosleep(&(struct timespec){ 0, 20 * 1000000L }, NULL);
    loader_destroy(l);                      /* slot full, worker waiting */
    loader_destroy(NULL);
    free(x);
    dataset_free(d);
}
END_TEST

static Suite *loader_suite(void)
{
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("loader");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, every_item_once_per_epoch);
    tcase_add_test(tc, no_shuffle_keeps_order);
    tcase_add_test(tc, same_seed_same_order);
    tcase_add_test(tc, seek_reproduces_uninterrupted_run);
    tcase_add_test(tc, short_batch_tail_and_end_marker);
    tcase_add_test(tc, normalisation);
    tcase_add_test(tc, flip_of_known_image);
    tcase_add_test(tc, crop_shifts_with_zero_padding);
    tcase_add_test(tc, swap_hands_over_buffers);
    tcase_add_test(tc, bad_arguments);
    tcase_add_test(tc, destroy_while_running);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tn_run_suite(loader_suite()); }
