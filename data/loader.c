/* The background loader: float batches from a dataset, one batch ahead of the trainer.
 *
 * One worker thread prepares batches into its private buffer and hands each over
 * through a one-batch slot (mutex + condition variable); loader_next copies the slot
 * out and the worker, already busy with the following batch, publishes that one as soon
 * as the slot is free. loader_seek bumps a generation counter: the worker polls it
 * (atomically, without the lock) while preparing, drops stale work at once, and starts
 * over at the new position.
 *
 * Every value is a pure function of (seed, epoch, position): the order of an epoch is a
 * Fisher-Yates shuffle driven by rng_hash(seed, epoch, 0), and the crop offset and flip
 * of the item at position p come from rng_hash(seed, epoch, p + 1) (the + 1 keeps
 * position 0 apart from the shuffle's key). Timing never changes a batch, so a loader
 * sought to a saved position repeats an uninterrupted run exactly. */
#include "data/data_impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdnn/rng.h"

#define LOADER_MAX_PAD 4096

struct loader {
    /* Fixed once the thread starts. */
    const dataset *d;
    int batch, shuffle, crop_pad, flip;   /* crop_pad and flip are 0 without augment */
    uint64_t seed;
    size_t item;                          /* floats per item: C*H*W */
    float lut[DATA_MAX_CHANNELS][256];    /* (channel, pixel) -> normalised value */

    /* The caller's thread only. */
    int epoch, index;                     /* where the next loader_next reads */
    vdnn_status seek_err;                 /* a bad loader_seek, reported by loader_next */
    char seek_msg[256];

    /* The worker's thread only. */
    int *perm;                            /* (count) the order of perm_epoch */
    int perm_epoch;
    float *work_x;                        /* (batch, C, H, W) being prepared */
    int32_t *work_y;

    /* Shared: under mu (gen and stop are atomic so the worker may poll them unlocked). */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_uint gen;
    atomic_int stop;
    int want_epoch, want_index;           /* the next batch the worker prepares */
    int full;                             /* the slot holds a batch for the caller */
    float *slot_x;                        /* (batch, C, H, W) */
    int32_t *slot_y;
    int slot_n, slot_epoch, slot_index;
    pthread_t thread;
};

static void make_lut(loader *l, const data_cfg *cfg)
{
    float mean[DATA_MAX_CHANNELS], std[DATA_MAX_CHANNELS];
    data_norm_values(cfg, l->d->c, mean, std);
    for (int c = 0; c < l->d->c; c++)
        for (int v = 0; v < 256; v++) l->lut[c][v] = ((float)v / 255.0f - mean[c]) / std[c];
}

static void make_perm(loader *l, int epoch)
{
    int n = l->d->count;
    rng r;
    rng_seed(&r, rng_hash(l->seed, (uint64_t)epoch, 0));
    for (int i = 0; i < n; i++) l->perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)rng_below(&r, (uint32_t)i + 1);
        int t = l->perm[i];
        l->perm[i] = l->perm[j];
        l->perm[j] = t;
    }
    l->perm_epoch = epoch;
}

/* Writes one item: out(c, y, x) = in(c, y + dy, (flip ? W-1-x : x) + dx), where cells
 * outside the image are the zero padding. Padding is 0 before normalisation, so it
 * becomes (0 - mean) / std like a black pixel. */
static void put_item(const loader *l, const uint8_t *src, float *dst, int epoch, int pos)
{
    const dataset *d = l->d;
    uint64_t bits = rng_hash(l->seed, (uint64_t)epoch, (uint64_t)pos + 1);
    int dy = 0, dx = 0, flip = l->flip && (bits >> 63);
    if (l->crop_pad > 0) {
        int span = 2 * l->crop_pad + 1;
        dy = (int)((bits & 0xFFFFF) % (uint64_t)span) - l->crop_pad;
        dx = (int)(((bits >> 20) & 0xFFFFF) % (uint64_t)span) - l->crop_pad;
    }
    for (int c = 0; c < d->c; c++) {
        const float *lut = l->lut[c];
        for (int y = 0; y < d->h; y++) {
            float *out = dst + ((size_t)c * d->h + y) * d->w;
            int sy = y + dy;
            if (sy < 0 || sy >= d->h) {
                for (int x = 0; x < d->w; x++) out[x] = lut[0];
                continue;
            }
            const uint8_t *in = src + ((size_t)c * d->h + sy) * d->w;
            for (int x = 0; x < d->w; x++) {
                int sx = (flip ? d->w - 1 - x : x) + dx;
                out[x] = sx < 0 || sx >= d->w ? lut[0] : lut[in[sx]];
            }
        }
    }
}

static int abandoned(loader *l, unsigned gen)
{
    return atomic_load_explicit(&l->gen, memory_order_relaxed) != gen
        || atomic_load_explicit(&l->stop, memory_order_relaxed);
}

/* Prepares the batch at (epoch, index) into the work buffers; returns its item count,
 * or -1 when a seek or destroy made it moot. */
static int prepare(loader *l, unsigned gen, int epoch, int index)
{
    const dataset *d = l->d;
    if (l->shuffle && l->perm_epoch != epoch) make_perm(l, epoch);
    int n = index >= d->count ? 0 : d->count - index;
    if (n > l->batch) n = l->batch;
    for (int k = 0; k < n; k++) {
        if (abandoned(l, gen)) return -1;
        int pos = index + k, item = l->shuffle ? l->perm[pos] : pos;
        l->work_y[k] = d->labels[item];
        put_item(l, d->images + (size_t)item * l->item, l->work_x + (size_t)k * l->item, epoch, pos);
    }
    return n;
}

/* Under mu: hands the work buffers to the caller and takes the emptied slot's. */
static void publish(loader *l, int n, int epoch, int index)
{
    float *x = l->slot_x;
    int32_t *y = l->slot_y;
    l->slot_x = l->work_x;
    l->slot_y = l->work_y;
    l->work_x = x;
    l->work_y = y;
    l->slot_n = n;
    l->slot_epoch = epoch;
    l->slot_index = index;
    l->full = 1;
    l->want_epoch = n == 0 ? epoch + 1 : epoch;
    l->want_index = n == 0 ? 0 : index + n;
}

static void *loader_main(void *arg)
{
    loader *l = arg;
    pthread_mutex_lock(&l->mu);
    while (!atomic_load(&l->stop)) {
        unsigned gen = atomic_load(&l->gen);
        int epoch = l->want_epoch, index = l->want_index;
        pthread_mutex_unlock(&l->mu);
        int n = prepare(l, gen, epoch, index);
        pthread_mutex_lock(&l->mu);
        while (n >= 0 && l->full && !atomic_load(&l->stop) && atomic_load(&l->gen) == gen)
            pthread_cond_wait(&l->cv, &l->mu);
        if (n < 0 || atomic_load(&l->stop) || atomic_load(&l->gen) != gen) continue;
        publish(l, n, epoch, index);
        pthread_cond_broadcast(&l->cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static vdnn_status check_args(const dataset *d, const loader_opts *o)
{
    if (!d || !o) return vdnn_fail(VDNN_EINVAL, "loader: no data set or options given");
    if (d->count < 1 || !d->images || !d->labels || d->c < 1 || d->c > DATA_MAX_CHANNELS || d->h < 1 || d->w < 1)
        return vdnn_fail(VDNN_EINVAL, "loader: %s: empty or malformed data set (%d items of %dx%dx%d)",
                         d->source, d->count, d->c, d->h, d->w);
    if (o->batch < 1) return vdnn_fail(VDNN_EINVAL, "loader: batch is %d; it must be >= 1", o->batch);
    size_t item = (size_t)d->c * d->h * d->w;
    if ((size_t)o->batch > SIZE_MAX / sizeof(float) / item)
        return vdnn_fail(VDNN_EINVAL, "loader: batch of %d items of %zu values is too large", o->batch, item);
    if (o->cfg && o->augment && (o->cfg->crop_pad < 0 || o->cfg->crop_pad > LOADER_MAX_PAD))
        return vdnn_fail(VDNN_EINVAL, "loader: crop_pad is %d; it must lie in [0, %d]", o->cfg->crop_pad, LOADER_MAX_PAD);
    return data_check_norm(o->cfg, d->c);
}

static void free_buffers(loader *l)
{
    free(l->perm);
    free(l->work_x);
    free(l->work_y);
    free(l->slot_x);
    free(l->slot_y);
    free(l);
}

static vdnn_status alloc_buffers(loader *l)
{
    size_t xs = sizeof(float) * (size_t)l->batch * l->item, ys = sizeof(int32_t) * (size_t)l->batch;
    l->work_x = malloc(xs);
    l->slot_x = malloc(xs);
    l->work_y = malloc(ys);
    l->slot_y = malloc(ys);
    l->perm = l->shuffle ? malloc(sizeof(int) * (size_t)l->d->count) : NULL;
    if (!l->work_x || !l->slot_x || !l->work_y || !l->slot_y || (l->shuffle && !l->perm))
        return vdnn_fail(VDNN_ENOMEM, "loader: out of host memory for two batches of %d items", l->batch);
    return VDNN_OK;
}

static vdnn_status start_thread(loader *l)
{
    if (pthread_mutex_init(&l->mu, NULL) != 0)
        return vdnn_fail(VDNN_ENOMEM, "loader: cannot create a mutex");
    if (pthread_cond_init(&l->cv, NULL) != 0) {
        pthread_mutex_destroy(&l->mu);
        return vdnn_fail(VDNN_ENOMEM, "loader: cannot create a condition variable");
    }
    if (pthread_create(&l->thread, NULL, loader_main, l) != 0) {
        pthread_cond_destroy(&l->cv);
        pthread_mutex_destroy(&l->mu);
        return vdnn_fail(VDNN_ENOMEM, "loader: cannot start the loader thread");
    }
    return VDNN_OK;
}

vdnn_status loader_create(const dataset *d, const loader_opts *o, loader **out)
{
    *out = NULL;
    vdnn_status s = check_args(d, o);
    if (s) return s;
    loader *l = calloc(1, sizeof *l);
    if (!l) return vdnn_fail(VDNN_ENOMEM, "loader: out of host memory");
    l->d = d;
    l->batch = o->batch;
    l->shuffle = o->shuffle != 0;
    l->seed = o->seed;
    l->crop_pad = o->augment && o->cfg ? o->cfg->crop_pad : 0;
    l->flip = o->augment && o->cfg && o->cfg->flip;
    l->item = (size_t)d->c * d->h * d->w;
    l->perm_epoch = -1;
    atomic_init(&l->gen, 0);
    atomic_init(&l->stop, 0);
    make_lut(l, o->cfg);
    s = alloc_buffers(l);
    if (!s) s = start_thread(l);
    if (s) {
        free_buffers(l);
        return s;
    }
    *out = l;
    return VDNN_OK;
}

void loader_destroy(loader *l)
{
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    atomic_store(&l->stop, 1);
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    free_buffers(l);
}

void loader_seek(loader *l, int epoch, int index)
{
    if (epoch < 0 || index < 0 || index > l->d->count) {
        l->seek_err = vdnn_fail(VDNN_EINVAL, "loader: cannot seek to epoch %d item %d of %s (%d items)",
                                epoch, index, l->d->source, l->d->count);
        snprintf(l->seek_msg, sizeof l->seek_msg, "%s", vdnn_errmsg());
        return;
    }
    l->seek_err = VDNN_OK;
    pthread_mutex_lock(&l->mu);
    atomic_fetch_add(&l->gen, 1);
    l->want_epoch = epoch;
    l->want_index = index;
    l->full = 0;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    l->epoch = epoch;
    l->index = index;
}

/* Under mu: copies the slot out; the tail past n is zeroed so that x and y are a pure
 * function of the position even when the caller runs the whole buffer. */
static int take_slot(loader *l, float *x, int32_t *y)
{
    int n = l->slot_n;
    memcpy(x, l->slot_x, sizeof(float) * (size_t)n * l->item);
    memcpy(y, l->slot_y, sizeof(int32_t) * (size_t)n);
    memset(x + (size_t)n * l->item, 0, sizeof(float) * (size_t)(l->batch - n) * l->item);
    memset(y + n, 0, sizeof(int32_t) * (size_t)(l->batch - n));
    l->epoch = n == 0 ? l->slot_epoch + 1 : l->slot_epoch;
    l->index = n == 0 ? 0 : l->slot_index + n;
    l->full = 0;
    return n;
}

vdnn_status loader_next(loader *l, float *x, int32_t *y, int *n)
{
    if (!l || !x || !y || !n) return vdnn_fail(VDNN_EINVAL, "loader_next: a NULL argument");
    *n = 0;
    if (l->seek_err) return vdnn_fail(l->seek_err, "%s", l->seek_msg);
    pthread_mutex_lock(&l->mu);
    while (!l->full) pthread_cond_wait(&l->cv, &l->mu);
    *n = take_slot(l, x, y);
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return VDNN_OK;
}

void loader_position(const loader *l, int *epoch, int *index)
{
    *epoch = l->epoch;
    *index = l->index;
}
