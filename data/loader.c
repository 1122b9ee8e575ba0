/* The background loader: float batches from a dataset, prepared ahead by worker threads.
 *
 * The loader owns a ring of slots, one batch each, one more than it has workers. A
 * worker claims a free slot under the mutex: the claim fixes the batch's position (epoch,
 * index), its sequence number, and its items (the epoch's shuffled order is drawn there,
 * under the lock, once per epoch). The worker then prepares the batch without the lock:
 * it copies and augments items of an in-memory set, or reads, decodes, crops and
 * resizes files of an image folder (transform.c), and marks the slot ready. loader_next
 * takes the ready slot whose sequence number comes next, so batches reach the caller in
 * order whatever order the workers finish in. loader_seek bumps a generation counter:
 * workers poll it (atomically, without the lock) while preparing, drop stale work at
 * once, and claims start over at the new position.
 *
 * Every value is a pure function of (seed, epoch, position): the order of an epoch is a
 * Fisher-Yates shuffle driven by rng_hash(seed, epoch, 0), and the augmentation of the
 * item at position p comes from rng_hash(seed, epoch, p + 1) (the + 1 keeps position 0
 * apart from the shuffle's key). An unreadable file at position p is replaced by the
 * item rng_hash(seed ^ SUBST_KEY, epoch, p * SUBST_MAX + k) of the k-th try, with p's own
 * augmentation. Neither timing nor the number of workers changes a batch, so a loader
 * sought to a saved position repeats an uninterrupted run exactly. */
#include "data/data_impl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vdnn/file.h"
#include "vdnn/rng.h"

#define LOADER_MAX_PAD 4096
#define LOADER_MAX_WORKERS 64
/* An image file is refused beyond this size. */
#define IMAGE_FILE_MAX ((size_t)1 << 28)
/* Tries to find a readable file in place of an unreadable one before giving up. */
#define SUBST_MAX 16
#define SUBST_KEY 0x5B57u
#define SKIP_MSG_MAX 2048

typedef enum { SLOT_FREE, SLOT_WORK, SLOT_READY, SLOT_COPY } slot_state;

typedef struct slot {
    slot_state state;                     /* under mu */
    unsigned gen;                         /* the generation it was claimed in */
    long long seq;                        /* its place in that generation's order */
    int epoch, index, n;                  /* the batch: n items from position index */
    int *items;                           /* (batch) the data set's items, fixed at the claim */
    float *x;                             /* (batch, C, H, W) */
    int32_t *y;                           /* (batch) */
    vdnn_status err;                      /* a file that stopped the run (strict), and why */
    char msg[1024];
    int skipped;                          /* unreadable files replaced, and their messages */
    char skipmsg[SKIP_MSG_MAX];
} slot;

/* What one worker thread owns: the bytes of the file it is decoding. */
typedef struct worker {
    loader *l;
    uint8_t *buf;
    size_t cap;
} worker;

struct loader {
    /* Fixed once the threads start. */
    const dataset *d;
    int batch, shuffle, crop_pad, flip, strict;   /* crop_pad and flip are 0 without augment */
    uint64_t seed;
    size_t item;                          /* floats per item: C*H*W */
    float lut[DATA_MAX_CHANNELS][256];    /* (channel, pixel) -> normalised value */
    image_xform xf;                       /* an image folder's transform */
    loader_mem mem;                       /* where the slots' batches live */
    int nworkers, nslots, started;
    worker *workers;                      /* (nworkers) */
    pthread_t *threads;                   /* (nworkers) */
    slot *slots;                          /* (nslots) */

    /* The caller's thread only. */
    int epoch, index;                     /* where the next loader_next reads */
    vdnn_status seek_err;                 /* a bad loader_seek, reported by loader_next */
    char seek_msg[256];
    int skipped;                          /* unreadable files not yet taken by the caller */
    char skipmsg[SKIP_MSG_MAX];

    /* Shared: under mu (gen and stop are atomic so the workers may poll them unlocked). */
    pthread_mutex_t mu;
    pthread_cond_t work_cv, ready_cv;     /* a slot came free / a batch is ready */
    atomic_uint gen;
    atomic_int stop;
    int claim_epoch, claim_index;         /* the next batch a worker claims */
    long long claim_seq, take_seq;        /* its sequence number; the one loader_next takes */
    int *perm;                            /* (count) the order of perm_epoch */
    int perm_epoch;
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

/* Reads a whole image file into the worker's buffer. */
static vdnn_status read_file(worker *w, const char *path, size_t *len)
{
    FILE *f = NULL;
    long long size = 0;
    vdnn_status s = vdnn_file_open(path, "image file", IMAGE_FILE_MAX, 0, &f, &size);
    if (s) return s;
    if ((size_t)size > w->cap) {
        uint8_t *b = realloc(w->buf, (size_t)size);
        if (!b) {
            fclose(f);
            return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory for %lld bytes", path, size);
        }
        w->buf = b;
        w->cap = (size_t)size;
    }
    *len = size ? fread(w->buf, 1, (size_t)size, f) : 0;
    int bad = ferror(f);
    fclose(f);
    if (bad || *len != (size_t)size) return vdnn_fail(VDNN_EIO, "%s: read failed after %zu of %lld bytes", path, *len, size);
    return VDNN_OK;
}

static void note_skip(slot *s, const char *msg)
{
    size_t used = strlen(s->skipmsg);
    if (used + 2 < sizeof s->skipmsg) snprintf(s->skipmsg + used, sizeof s->skipmsg - used, "%s\n", msg);
    s->skipped++;
}

/* Item k of an image folder's batch: its file, or in place of an unreadable one another
 * drawn from (seed, epoch, position), unless strict. */
static vdnn_status file_item(loader *l, worker *w, slot *s, int k, float *x, int32_t *y)
{
    const dataset *d = l->d;
    int pos = s->index + k, item = s->items[k];
    uint64_t bits = rng_hash(l->seed, (uint64_t)s->epoch, (uint64_t)pos + 1);
    for (int t = 0; t <= SUBST_MAX; t++) {
        if (t > 0)
            item = (int)(rng_hash(l->seed ^ SUBST_KEY, (uint64_t)s->epoch, (uint64_t)pos * SUBST_MAX + (uint64_t)t)
                         % (uint64_t)d->count);
        const char *path = images_path(d, item);
        size_t len = 0;
        vdnn_status st = read_file(w, path, &len);
        if (!st) st = image_item(path, w->buf, len, &l->xf, bits, x);
        if (!st) {
            *y = d->labels[item];
            return VDNN_OK;
        }
        if (l->strict || st == VDNN_ENOMEM) return st;
        note_skip(s, vdnn_errmsg());
    }
    return vdnn_fail(VDNN_EFORMAT, "%s: %d unreadable files in a row at item %d of epoch %d (the last: %s)",
                     d->source, SUBST_MAX + 1, pos, s->epoch + 1, images_path(d, item));
}

/* Prepares slot s's batch; returns 0, or -1 when a seek or destroy made it moot. */
static int prepare(loader *l, worker *w, slot *s, unsigned gen)
{
    const dataset *d = l->d;
    for (int k = 0; k < s->n; k++) {
        if (abandoned(l, gen)) return -1;
        float *x = s->x + (size_t)k * l->item;
        if (!d->files) {
            int item = s->items[k];
            s->y[k] = d->labels[item];
            put_item(l, d->images + (size_t)item * l->item, x, s->epoch, s->index + k);
            continue;
        }
        vdnn_status st = file_item(l, w, s, k, x, s->y + k);
        if (st) {
            s->err = st;
            snprintf(s->msg, sizeof s->msg, "%s", vdnn_errmsg());
            return 0;
        }
    }
    return 0;
}

/* Under mu: a free slot for the next batch, its position and items fixed; NULL when
 * every slot is busy or full. */
static slot *claim(loader *l)
{
    slot *s = NULL;
    for (int i = 0; i < l->nslots && !s; i++)
        if (l->slots[i].state == SLOT_FREE) s = &l->slots[i];
    if (!s) return NULL;
    const dataset *d = l->d;
    int epoch = l->claim_epoch, index = l->claim_index;
    int n = index >= d->count ? 0 : d->count - index;
    if (n > l->batch) n = l->batch;
    if (l->shuffle && n > 0 && l->perm_epoch != epoch) make_perm(l, epoch);
    for (int k = 0; k < n; k++) s->items[k] = l->shuffle ? l->perm[index + k] : index + k;
    s->state = SLOT_WORK;
    s->gen = atomic_load(&l->gen);
    s->seq = l->claim_seq++;
    s->epoch = epoch;
    s->index = index;
    s->n = n;
    s->err = VDNN_OK;
    s->msg[0] = 0;
    s->skipped = 0;
    s->skipmsg[0] = 0;
    l->claim_epoch = n == 0 ? epoch + 1 : epoch;
    l->claim_index = n == 0 ? 0 : index + n;
    return s;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    loader *l = w->l;
    pthread_mutex_lock(&l->mu);
    while (!atomic_load(&l->stop)) {
        slot *s = claim(l);
        if (!s) {
            pthread_cond_wait(&l->work_cv, &l->mu);
            continue;
        }
        unsigned gen = s->gen;
        pthread_mutex_unlock(&l->mu);
        int moot = prepare(l, w, s, gen);
        pthread_mutex_lock(&l->mu);
        if (moot || atomic_load(&l->gen) != gen || atomic_load(&l->stop)) {
            s->state = SLOT_FREE;
            pthread_cond_broadcast(&l->work_cv);
            continue;
        }
        s->state = SLOT_READY;
        pthread_cond_broadcast(&l->ready_cv);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static vdnn_status check_args(const dataset *d, const loader_opts *o)
{
    if (!d || !o) return vdnn_fail(VDNN_EINVAL, "loader: no data set or options given");
    if (d->count < 1 || (!d->images && !d->files) || !d->labels || d->c < 1 || d->c > DATA_MAX_CHANNELS || d->h < 1 ||
        d->w < 1)
        return vdnn_fail(VDNN_EINVAL, "loader: %s: empty or malformed data set (%d items of %dx%dx%d)",
                         d->source, d->count, d->c, d->h, d->w);
    if (o->batch < 1) return vdnn_fail(VDNN_EINVAL, "loader: batch is %d; it must be >= 1", o->batch);
    size_t item = (size_t)d->c * d->h * d->w;
    if ((size_t)o->batch > SIZE_MAX / sizeof(float) / item)
        return vdnn_fail(VDNN_EINVAL, "loader: batch of %d items of %zu values is too large", o->batch, item);
    if (o->cfg && o->augment && (o->cfg->crop_pad < 0 || o->cfg->crop_pad > LOADER_MAX_PAD))
        return vdnn_fail(VDNN_EINVAL, "loader: crop_pad is %d; it must lie in [0, %d]", o->cfg->crop_pad, LOADER_MAX_PAD);
    if (o->cfg && (o->cfg->workers < 0 || o->cfg->workers > LOADER_MAX_WORKERS))
        return vdnn_fail(VDNN_EINVAL, "loader: workers is %d; it must lie in [0, %d]", o->cfg->workers,
                         LOADER_MAX_WORKERS);
    return data_check_norm(o->cfg, d->c);
}

static void *mem_alloc(const loader *l, size_t bytes)
{
    return l->mem.alloc ? l->mem.alloc(l->mem.ctx, bytes) : malloc(bytes);
}

static void mem_release(const loader *l, void *p)
{
    if (!p) return;
    if (l->mem.release) l->mem.release(l->mem.ctx, p);
    else free(p);
}

static void free_buffers(loader *l)
{
    for (int i = 0; l->slots && i < l->nslots; i++) {
        free(l->slots[i].items);
        mem_release(l, l->slots[i].x);
        mem_release(l, l->slots[i].y);
    }
    for (int i = 0; l->workers && i < l->nworkers; i++) free(l->workers[i].buf);
    free(l->slots);
    free(l->workers);
    free(l->threads);
    free(l->perm);
    free(l);
}

static vdnn_status alloc_buffers(loader *l)
{
    size_t xs = sizeof(float) * (size_t)l->batch * l->item, ys = sizeof(int32_t) * (size_t)l->batch;
    l->slots = calloc((size_t)l->nslots, sizeof *l->slots);
    l->workers = calloc((size_t)l->nworkers, sizeof *l->workers);
    l->threads = calloc((size_t)l->nworkers, sizeof *l->threads);
    l->perm = l->shuffle ? malloc(sizeof(int) * (size_t)l->d->count) : NULL;
    int ok = l->slots && l->workers && l->threads && (!l->shuffle || l->perm);
    for (int i = 0; ok && i < l->nslots; i++) {
        slot *s = &l->slots[i];
        s->x = mem_alloc(l, xs);
        s->y = mem_alloc(l, ys);
        s->items = malloc(sizeof(int) * (size_t)l->batch);
        ok = s->x && s->y && s->items;
    }
    if (!ok)
        return vdnn_fail(VDNN_ENOMEM, "loader: out of host memory for %d batches of %d items", l->nslots, l->batch);
    return VDNN_OK;
}

static void stop_threads(loader *l)
{
    pthread_mutex_lock(&l->mu);
    atomic_store(&l->stop, 1);
    pthread_cond_broadcast(&l->work_cv);
    pthread_cond_broadcast(&l->ready_cv);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->started; i++) pthread_join(l->threads[i], NULL);
    pthread_cond_destroy(&l->ready_cv);
    pthread_cond_destroy(&l->work_cv);
    pthread_mutex_destroy(&l->mu);
}

static vdnn_status start_threads(loader *l)
{
    if (pthread_mutex_init(&l->mu, NULL) != 0)
        return vdnn_fail(VDNN_ENOMEM, "loader: cannot create a mutex");
    if (pthread_cond_init(&l->work_cv, NULL) != 0 || pthread_cond_init(&l->ready_cv, NULL) != 0) {
        pthread_mutex_destroy(&l->mu);
        return vdnn_fail(VDNN_ENOMEM, "loader: cannot create a condition variable");
    }
    for (; l->started < l->nworkers; l->started++) {
        l->workers[l->started].l = l;
        if (pthread_create(&l->threads[l->started], NULL, worker_main, &l->workers[l->started]) != 0) {
            stop_threads(l);
            return vdnn_fail(VDNN_ENOMEM, "loader: cannot start loader thread %d", l->started + 1);
        }
    }
    return VDNN_OK;
}

/* cfg's workers, or by default one for a set in memory and, for an image folder, the
 * cores left beside the compute threads (at least one). */
static int worker_count(const dataset *d, const loader_opts *o)
{
    if (o->cfg && o->cfg->workers > 0) return o->cfg->workers;
    if (!d->files) return 1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long left = cores - (o->compute_threads > 0 ? o->compute_threads : cores / 2);
    return left < 1 ? 1 : left > LOADER_MAX_WORKERS ? LOADER_MAX_WORKERS : (int)left;
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
    l->strict = o->cfg && o->cfg->strict;
    l->item = (size_t)d->c * d->h * d->w;
    l->perm_epoch = -1;
    l->mem = o->mem;
    l->nworkers = worker_count(d, o);
    l->nslots = l->nworkers + 1;
    image_xform_of(o->cfg, o->augment, d->c, d->h, d->w, &l->xf);
    atomic_init(&l->gen, 0);
    atomic_init(&l->stop, 0);
    make_lut(l, o->cfg);
    s = alloc_buffers(l);
    if (!s) s = start_threads(l);
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
    stop_threads(l);
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
    for (int i = 0; i < l->nslots; i++)
        if (l->slots[i].state == SLOT_READY) l->slots[i].state = SLOT_FREE;
    l->claim_epoch = epoch;
    l->claim_index = index;
    l->claim_seq = l->take_seq = 0;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    l->epoch = epoch;
    l->index = index;
}

/* Under mu: the ready slot loader_next takes now, or NULL. */
static slot *next_ready(loader *l)
{
    unsigned gen = atomic_load(&l->gen);
    for (int i = 0; i < l->nslots; i++) {
        slot *s = &l->slots[i];
        if (s->state == SLOT_READY && s->gen == gen && s->seq == l->take_seq) return s;
    }
    return NULL;
}

/* Hands slot s's batch over (without the lock: the slot is the caller's while
 * SLOT_COPY): copied into x and y, or, with swap, the slot's buffers change places with
 * *xp and *yp. The tail past n is zeroed so that x and y are a pure function of the
 * position even when the caller runs the whole buffer. */
static void take_slot(loader *l, slot *s, float **xp, int32_t **yp, int swap)
{
    int n = s->n;
    if (swap) {
        float *x = *xp;
        int32_t *y = *yp;
        *xp = s->x;
        *yp = s->y;
        s->x = x;
        s->y = y;
    } else {
        memcpy(*xp, s->x, sizeof(float) * (size_t)n * l->item);
        memcpy(*yp, s->y, sizeof(int32_t) * (size_t)n);
    }
    memset(*xp + (size_t)n * l->item, 0, sizeof(float) * (size_t)(l->batch - n) * l->item);
    memset(*yp + n, 0, sizeof(int32_t) * (size_t)(l->batch - n));
    l->epoch = n == 0 ? s->epoch + 1 : s->epoch;
    l->index = n == 0 ? 0 : s->index + n;
    l->skipped += s->skipped;
    size_t used = strlen(l->skipmsg);
    snprintf(l->skipmsg + used, sizeof l->skipmsg - used, "%s", s->skipmsg);
}

static vdnn_status next_batch(loader *l, float **x, int32_t **y, int *n, int swap)
{
    *n = 0;
    if (l->seek_err) return vdnn_fail(l->seek_err, "%s", l->seek_msg);
    pthread_mutex_lock(&l->mu);
    slot *s;
    while (!(s = next_ready(l))) pthread_cond_wait(&l->ready_cv, &l->mu);
    s->state = SLOT_COPY;
    l->take_seq++;
    pthread_mutex_unlock(&l->mu);
    vdnn_status err = s->err;
    char msg[sizeof s->msg];
    if (err) snprintf(msg, sizeof msg, "%s", s->msg);
    else take_slot(l, s, x, y, swap);
    if (!err) *n = s->n;
    pthread_mutex_lock(&l->mu);
    s->state = SLOT_FREE;
    pthread_cond_broadcast(&l->work_cv);
    pthread_mutex_unlock(&l->mu);
    if (err) return vdnn_fail(err, "%s", msg);
    return VDNN_OK;
}

vdnn_status loader_next(loader *l, float *x, int32_t *y, int *n)
{
    if (!l || !x || !y || !n) return vdnn_fail(VDNN_EINVAL, "loader_next: a NULL argument");
    return next_batch(l, &x, &y, n, 0);
}

vdnn_status loader_next_swap(loader *l, float **x, int32_t **y, int *n)
{
    if (!l || !x || !y || !*x || !*y || !n) return vdnn_fail(VDNN_EINVAL, "loader_next_swap: a NULL argument");
    return next_batch(l, x, y, n, 1);
}

void loader_position(const loader *l, int *epoch, int *index)
{
    *epoch = l->epoch;
    *index = l->index;
}

int loader_take_skipped(loader *l, char *msgs, size_t len)
{
    int n = l->skipped;
    if (msgs && len) snprintf(msgs, len, "%s", l->skipmsg);
    l->skipped = 0;
    l->skipmsg[0] = 0;
    return n;
}

int loader_workers(const loader *l) { return l->nworkers; }
