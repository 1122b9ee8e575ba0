/* Data-parallel training (see parallel.h): a thread per device of this rank runs its
 * replica's forward and backward; the calling thread sums the gradients in buckets as
 * they are announced (net.h, grads_ready), in device order across the job's ranks
 * (vdnn/comm.h), and hands the sums back; then every replica steps. */
#include "nets/parallel/parallel.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nets/planner/planner.h"

#define DEFAULT_BUCKET_BYTES ((size_t)4 << 20)
#define DEFAULT_SHARE_EVERY 10
/* Shares move only when the slowest device's predicted time falls by this fraction:
 * more than the noise of timing a step on a shared machine. */
#define SHARE_HYSTERESIS 0.1

enum { CMD_IDLE = 0, CMD_BACKPROP, CMD_UPDATE, CMD_QUIT };

typedef struct worker {
    struct dp_group *g;
    int global;               /* its device's index in the job */
    device *dev;
    net *n;                   /* its replica, built for `built` items (0: none yet) */
    int built;
    pthread_t thread;
    int started;
    int cmd;                  /* what it is asked to do; CMD_IDLE once done */
    int base, items;          /* this step's items of the global batch */
    vdnn_status st;           /* of its last command */
    char err[1024];
    step_result r;
    double busy_s;            /* its last backprop, on the device's own clock */
    double update_s;          /* its last update, likewise */
    double end_s;             /* when it ended */
    unsigned char *ready;     /* (nlayers) the layer's gradients are announced this step */
    dev_event **ev;           /* (nlayers) with this event */
} worker;

/* A gradient tensor in a bucket: layer and parameter index. */
typedef struct entry {
    int layer, param;
    size_t count;
} entry;

/* What the workers' next command works on. */
typedef struct job {
    const float *x;
    const int32_t *y;
    int total;
    double lr;
} job;

struct dp_group {
    net *model;
    comm *comm;
    dp_opts o;
    int batch;                /* the global batch */
    int njob, nlocal, first;  /* devices of the job; of this rank, from global index `first` */
    worker *w;
    double *weights;          /* (njob) share weights */
    int *cap;                 /* (njob) the largest share each device's plan fits */
    int *shares;              /* (njob) this step's */
    int automatic, every, since;
    int votes;                /* consecutive windows that asked for new shares */
    double *rates;            /* (njob x every) items per second of each step since the last
                               * rebalancing, 0 where the device had none */
    double *speed;            /* (njob) items per second, as last measured; 0: unknown */
    entry *entries;
    int nentries, nbuckets;
    int *bucket;              /* (nbuckets + 1) first entry of each bucket */
    size_t max_floats;        /* the largest bucket, or parameter set, in floats */
    float *acc, *tmp;
    job cur;                  /* under mu */
    double exposed_s;         /* the last step's reduction after the last backward ended */
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

/* ---- parameters on the host ---- */

/* Floats of a replica's state: every parameter's value, and a trainable one's momentum. */
static size_t state_floats(const net *n)
{
    size_t total = 0;
    for (int i = 0; i < n->nlayers; i++)
        for (int p = 0; p < n->layers[i]->nparams; p++) {
            const param *q = &n->layers[i]->params[p];
            total += shape_count(q->shape) * (q->trainable ? 2 : 1);
        }
    return total;
}

/* Copies a tensor between a replica (its device copy, or a swapped layer's host copy)
 * and host memory. */
static vdnn_status move(net *n, float *dev, float *host_master, float *buf, size_t count, int to_host)
{
    size_t bytes = count * sizeof(float);
    if (host_master) {
        if (to_host) memcpy(buf, host_master, bytes);
        else memcpy(host_master, buf, bytes);
        return VDNN_OK;
    }
    return to_host ? device_download(n->dev, buf, dev, bytes) : device_upload(n->dev, dev, buf, bytes);
}

/* A replica's state into buf (state_floats of it), or back. */
static vdnn_status state_io(net *n, float *buf, int to_host)
{
    vdnn_status st = VDNN_OK;
    for (int i = 0; i < n->nlayers && st == VDNN_OK; i++)
        for (int p = 0; p < n->layers[i]->nparams && st == VDNN_OK; p++) {
            param *q = &n->layers[i]->params[p];
            size_t count = shape_count(q->shape);
            st = move(n, q->value, q->host_value, buf, count, to_host);
            buf += count;
            if (st == VDNN_OK && q->trainable) {
                st = move(n, q->momentum, q->host_momentum, buf, count, to_host);
                buf += count;
            }
        }
    return st;
}

/* ---- replicas ---- */

/* Replica k built for `items` items (at least 1), planned, its state taken from `state`
 * (NULL: as initialised). */
static vdnn_status build(dp_group *g, worker *w, int items, const float *state)
{
    /* what the replica carries over: its trace, its counters and its algorithms */
    trace *tr = w->n ? w->n->trace : NULL;
    mm_stats stats = w->n ? w->n->stats : (mm_stats){0};
    size_t peak = w->n ? w->n->peak_iter_bytes : 0;
    int (*algos)[PASS_COUNT] = NULL;
    /* (not those of a stand-in built for one item while the device had no share) */
    if (w->n && w->built > 1 && !w->n->micro && (algos = malloc((size_t)w->n->nlayers * sizeof *algos)) != NULL)
        for (int i = 0; i < w->n->nlayers; i++) memcpy(algos[i], w->n->layers[i]->algo, sizeof algos[i]);
    if (w->n) {
        net_free(w->n);
        w->n = NULL;
    }
    net *n = NULL;
    vdnn_status st = net_clone_batch(g->model, items, 0, &n);
    if (st == VDNN_OK) st = net_attach(n, w->dev);
    if (st == VDNN_OK) st = g->o.plan ? g->o.plan(g->o.plan_ctx, &n, (const int(*)[PASS_COUNT])algos)
                                      : net_plan(n, n->policy, n->algo);
    free(algos);
    if (st == VDNN_OK && state) st = state_io(n, (float *)state, 0);
    if (st == VDNN_OK) {
        n->step = g->model->step;
        n->trace = tr;
        n->stats = stats;
        n->peak_iter_bytes = peak;
        n->grads_ctx = w;
        unsigned char *ready = realloc(w->ready, (size_t)n->nlayers);
        dev_event **ev = realloc(w->ev, (size_t)n->nlayers * sizeof *ev);
        if (ready) w->ready = ready;
        if (ev) w->ev = ev;
        if (!ready || !ev) st = vdnn_fail(VDNN_ENOMEM, "out of host memory");
        else memset(w->ev, 0, (size_t)n->nlayers * sizeof *ev);
    }
    if (st != VDNN_OK) {
        net_free(n);
        return vdnn_wrap(st, "device %d (%s), a share of %d items", w->global, device_describe(w->dev), items);
    }
    w->n = n;
    w->built = items;
    return VDNN_OK;
}

/* The largest share (<= the batch) whose least plan fits device w's budget: the
 * policy's, or for dyn the planner's smallest (plan_least). */
static vdnn_status largest_share(dp_group *g, const worker *w, int *out)
{
    size_t budget = device_get_options(w->dev)->budget_bytes;
    int lo = 0, hi = g->batch;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        net *n = NULL;
        size_t need = 0;
        vdnn_status st = net_clone_batch(g->model, mid, 0, &n);
        if (st == VDNN_OK) st = n->dyn ? plan_least(n, &need) : net_plan_static(n, n->policy, ALGO_MEM);
        if (st == VDNN_OK && !n->dyn) st = net_least_budget(n, &need);
        net_free(n);
        if (st != VDNN_OK) return st;
        if (need <= budget) lo = mid;
        else hi = mid - 1;
    }
    *out = lo;
    return VDNN_OK;
}

/* ---- the threads ---- */

static vdnn_status announce(void *ctx, int layer, dev_event *ev)
{
    worker *w = ctx;
    pthread_mutex_lock(&w->g->mu);
    w->ready[layer] = 1;
    w->ev[layer] = ev;
    pthread_cond_broadcast(&w->g->cv);
    pthread_mutex_unlock(&w->g->mu);
    return VDNN_OK;
}

static vdnn_status run(worker *w, int cmd, const float *x, const int32_t *y, int total, double lr)
{
    net *n = w->n;
    if (cmd == CMD_UPDATE) {
        double t0 = device_busy_clock(w->dev);
        vdnn_status st = net_update(n, lr);
        w->update_s = device_busy_clock(w->dev) - t0;
        return st;
    }
    memset(&w->r, 0, sizeof w->r);
    if (!w->items) return VDNN_OK;
    size_t per_item = shape_per_item(n->input);
    n->grads_ready = announce;
    double t0 = device_busy_clock(w->dev);
    vdnn_status st = net_backprop(n, x + (size_t)w->base * per_item, y + w->base, w->items, w->base, total, &w->r);
    w->end_s = vdnn_now_s();
    w->busy_s = device_busy_clock(w->dev) - t0;
    n->grads_ready = NULL;
    return st;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    dp_group *g = w->g;
    device_pin_thread(w->dev);   /* an emulated device's cores, shared with other jobs on it */
    pthread_mutex_lock(&g->mu);
    for (;;) {
        while (w->cmd == CMD_IDLE) pthread_cond_wait(&g->cv, &g->mu);
        int cmd = w->cmd;
        job j = g->cur;
        pthread_mutex_unlock(&g->mu);
        if (cmd == CMD_QUIT) return NULL;
        device_bind_thread(w->dev);
        vdnn_status st = run(w, cmd, j.x, j.y, j.total, j.lr);
        pthread_mutex_lock(&g->mu);
        w->st = st;
        if (st != VDNN_OK) snprintf(w->err, sizeof w->err, "device %d: %s", w->global, vdnn_errmsg());
        w->cmd = CMD_IDLE;
        pthread_cond_broadcast(&g->cv);
    }
}

/* Gives every worker `cmd` on job j. */
static void dispatch(dp_group *g, int cmd, job j)
{
    pthread_mutex_lock(&g->mu);
    g->cur = j;
    for (int k = 0; k < g->nlocal; k++) {
        g->w[k].cmd = cmd;
        g->w[k].st = VDNN_OK;
    }
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* Waits for every worker to be done; the first failure's status and message. */
static vdnn_status wait_workers(dp_group *g)
{
    vdnn_status st = VDNN_OK;
    pthread_mutex_lock(&g->mu);
    for (int k = 0; k < g->nlocal; k++) {
        while (g->w[k].cmd != CMD_IDLE) pthread_cond_wait(&g->cv, &g->mu);
        if (st == VDNN_OK && g->w[k].st != VDNN_OK) {
            st = g->w[k].st;
            vdnn_fail(st, "%s", g->w[k].err);
        }
    }
    pthread_mutex_unlock(&g->mu);
    return st;
}

/* ---- the reduction ---- */

/* The gradient tensor of entry e in replica n: its device copy, or host master. */
static float *grad_of(net *n, const entry *e, int *host)
{
    param *q = &n->layers[e->layer]->params[e->param];
    *host = q->host_grad != NULL;
    return q->host_grad ? q->host_grad : q->grad;
}

/* Buckets of trainable gradients, in the order backward finishes them (the last layer
 * first), each at least o.bucket_bytes but for the last. */
static vdnn_status make_buckets(dp_group *g)
{
    const net *n = g->w[0].n;
    int count = 0;
    for (int i = 0; i < n->nlayers; i++)
        for (int p = 0; p < n->layers[i]->nparams; p++) count += n->layers[i]->params[p].trainable;
    g->entries = calloc((size_t)count + 1, sizeof *g->entries);
    g->bucket = calloc((size_t)count + 2, sizeof *g->bucket);
    if (!g->entries || !g->bucket) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    size_t bytes = 0, floats = 0;
    for (int i = n->nlayers - 1; i >= 0; i--)
        for (int p = 0; p < n->layers[i]->nparams; p++) {
            const param *q = &n->layers[i]->params[p];
            if (!q->trainable) continue;
            entry *e = &g->entries[g->nentries++];
            e->layer = i;
            e->param = p;
            e->count = shape_count(q->shape);
            bytes += e->count * sizeof(float);
            floats += e->count;
            if (bytes >= g->o.bucket_bytes) {
                g->bucket[++g->nbuckets] = g->nentries;
                if (floats > g->max_floats) g->max_floats = floats;
                bytes = floats = 0;
            }
        }
    if (bytes) {
        g->bucket[++g->nbuckets] = g->nentries;
        if (floats > g->max_floats) g->max_floats = floats;
    }
    return VDNN_OK;
}

/* Whether every local device with items has announced the layers of bucket b (or a
 * worker stopped). */
static int bucket_ready(dp_group *g, int b)
{
    for (int k = 0; k < g->nlocal; k++) {
        worker *w = &g->w[k];
        if (!w->items) continue;
        if (w->cmd == CMD_IDLE) continue;   /* done: all announced, or failed */
        for (int e = g->bucket[b]; e < g->bucket[b + 1]; e++)
            if (!w->ready[g->entries[e].layer]) return 0;
    }
    return 1;
}

/* fold for comm_fold_floats: adds this rank's devices' gradients of bucket `b` into acc,
 * device by device. acc[floats] counts the devices folded in so far. */
typedef struct fold_ctx {
    dp_group *g;
    int b;
    size_t floats;
} fold_ctx;

static vdnn_status fold_bucket(void *ctx, float *acc, int first)
{
    fold_ctx *f = ctx;
    dp_group *g = f->g;
    if (first) acc[f->floats] = 0;
    vdnn_status st = VDNN_OK;
    for (int k = 0; k < g->nlocal && st == VDNN_OK; k++) {
        worker *w = &g->w[k];
        if (!w->items) continue;
        device_bind_thread(w->dev);
        float *at = acc;
        int seen = acc[f->floats] > 0;
        for (int e = g->bucket[f->b]; e < g->bucket[f->b + 1] && st == VDNN_OK; e++) {
            const entry *en = &g->entries[e];
            if (w->ev[en->layer]) {   /* the gradients are written once it completes */
                device_event_wait(w->dev, w->ev[en->layer]);
                device_event_release(w->dev, w->ev[en->layer]);
                w->ev[en->layer] = NULL;
            }
            int host = 0;
            float *src = grad_of(w->n, en, &host);
            if (host) memcpy(g->tmp, src, en->count * sizeof(float));
            else st = device_download(w->dev, g->tmp, src, en->count * sizeof(float));
            if (!seen) memcpy(at, g->tmp, en->count * sizeof(float));
            else
                for (size_t i = 0; i < en->count; i++) at[i] += g->tmp[i];
            at += en->count;
        }
        acc[f->floats] += 1;
    }
    return st;
}

/* Every replica takes bucket b's sum. */
static vdnn_status hand_back(dp_group *g, int b, const float *acc)
{
    vdnn_status st = VDNN_OK;
    for (int k = 0; k < g->nlocal && st == VDNN_OK; k++) {
        worker *w = &g->w[k];
        device_bind_thread(w->dev);
        const float *at = acc;
        for (int e = g->bucket[b]; e < g->bucket[b + 1] && st == VDNN_OK; e++) {
            const entry *en = &g->entries[e];
            int host = 0;
            float *dst = grad_of(w->n, en, &host);
            if (host) memcpy(dst, at, en->count * sizeof(float));
            else st = device_upload(w->dev, dst, at, en->count * sizeof(float));
            at += en->count;
        }
    }
    return st;
}

/* Reduces bucket after bucket as the workers announce them; stops at a failure. */
static vdnn_status reduce(dp_group *g)
{
    vdnn_status st = VDNN_OK;
    for (int b = 0; b < g->nbuckets && st == VDNN_OK; b++) {
        pthread_mutex_lock(&g->mu);
        while (!bucket_ready(g, b)) pthread_cond_wait(&g->cv, &g->mu);
        int failed = 0;
        for (int k = 0; k < g->nlocal; k++) failed |= g->w[k].cmd == CMD_IDLE && g->w[k].st != VDNN_OK;
        pthread_mutex_unlock(&g->mu);
        if (failed) return VDNN_OK;   /* wait_workers reports it */
        size_t floats = 0;
        for (int e = g->bucket[b]; e < g->bucket[b + 1]; e++) floats += g->entries[e].count;
        fold_ctx f = {g, b, floats};
        st = comm_fold_floats(g->comm, g->acc, floats + 1, fold_bucket, &f);
        if (st == VDNN_OK) st = hand_back(g, b, g->acc);
    }
    return st;
}

/* Batch norm's running statistics (the parameters no gradient trains): every replica
 * takes their mean over the devices that had items, summed in device order. */
typedef struct stats_ctx {
    dp_group *g;
    int layer, param;
    size_t count;
} stats_ctx;

static vdnn_status fold_stats(void *ctx, float *acc, int first)
{
    stats_ctx *f = ctx;
    dp_group *g = f->g;
    if (first) acc[f->count] = 0;
    vdnn_status st = VDNN_OK;
    for (int k = 0; k < g->nlocal && st == VDNN_OK; k++) {
        worker *w = &g->w[k];
        if (!w->items) continue;
        param *q = &w->n->layers[f->layer]->params[f->param];
        st = move(w->n, q->value, q->host_value, g->tmp, f->count, 1);
        if (acc[f->count] == 0) memcpy(acc, g->tmp, f->count * sizeof(float));
        else
            for (size_t i = 0; i < f->count; i++) acc[i] += g->tmp[i];
        acc[f->count] += 1;
    }
    return st;
}

static vdnn_status average_stats(dp_group *g)
{
    net *n = g->w[0].n;
    vdnn_status st = VDNN_OK;
    for (int i = 0; i < n->nlayers && st == VDNN_OK; i++)
        for (int p = 0; p < n->layers[i]->nparams && st == VDNN_OK; p++) {
            if (n->layers[i]->params[p].trainable) continue;
            stats_ctx f = {g, i, p, shape_count(n->layers[i]->params[p].shape)};
            st = comm_fold_floats(g->comm, g->acc, f.count + 1, fold_stats, &f);
            float devices = g->acc[f.count];
            if (devices > 1)
                for (size_t e = 0; e < f.count; e++) g->acc[e] /= devices;
            for (int k = 0; k < g->nlocal && st == VDNN_OK; k++) {
                param *q = &g->w[k].n->layers[i]->params[p];
                st = move(g->w[k].n, q->value, q->host_value, g->acc, f.count, 0);
            }
        }
    return st;
}

/* ---- shares ---- */

/* Every K steps: each device's speed over the window (the median of its steps), and
 * shares in proportion when that makes the slowest device faster by more than the
 * hysteresis, two windows in a row. Every rank sees the same numbers and so makes the
 * same choice. */
static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of the window's rates of device k (0 when it had no items): a step that a
 * busy machine stretched does not move shares. */
static double median_rate(dp_group *g, int k)
{
    double *r = &g->rates[(size_t)k * (size_t)g->every], v[256];
    int n = 0;
    for (int i = 0; i < g->every && n < 256; i++)
        if (r[i] > 0) v[n++] = r[i];
    if (!n) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static vdnn_status rebalance(dp_group *g)
{
    double *win = calloc((size_t)g->njob, sizeof *win);
    int *want = malloc((size_t)g->njob * sizeof *want);
    vdnn_status st = win && want ? VDNN_OK : vdnn_fail(VDNN_ENOMEM, "out of host memory");
    for (int k = 0; k < g->nlocal && st == VDNN_OK; k++) win[g->w[k].global] = median_rate(g, g->w[k].global);
    if (st == VDNN_OK) st = comm_sum_doubles(g->comm, win, (size_t)g->njob);
    for (int k = 0; k < g->njob && st == VDNN_OK; k++)
        if (win[k] > 0) g->speed[k] = win[k];
    memset(g->rates, 0, (size_t)g->njob * (size_t)g->every * sizeof *g->rates);
    int known = 1;
    for (int k = 0; k < g->njob; k++) known &= g->speed[k] > 0 || g->cap[k] == 0;
    if (st == VDNN_OK && known) {
        dp_split(g->batch, g->speed, g->cap, g->njob, want);
        double now = 0, then = 0;
        int full[64], n = g->njob < 64 ? g->njob : 64;
        dp_split(g->batch, g->weights, g->cap, n, full);
        for (int k = 0; k < n; k++) {
            if (g->speed[k] <= 0) continue;
            if (full[k] / g->speed[k] > now) now = full[k] / g->speed[k];
            if (want[k] / g->speed[k] > then) then = want[k] / g->speed[k];
        }
        /* two windows in a row must ask for it: one a busy machine stretched does not */
        g->votes = then < (1 - SHARE_HYSTERESIS) * now ? g->votes + 1 : 0;
        if (g->votes >= 2) {
            for (int k = 0; k < g->njob; k++) g->weights[k] = g->speed[k];
            g->votes = 0;
        }
    }
    free(win);
    free(want);
    return st;
}

/* Replicas whose share of the whole batch outgrew (or shrank from) what they were built
 * for are built again for it, keeping the state all replicas share. */
static vdnn_status resize(dp_group *g)
{
    int *full = malloc((size_t)g->njob * sizeof *full);
    if (!full) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    dp_split(g->batch, g->weights, g->cap, g->njob, full);
    float *state = NULL;
    vdnn_status st = VDNN_OK;
    for (int k = 0; k < g->nlocal && st == VDNN_OK; k++) {
        worker *w = &g->w[k];
        int want = full[w->global];
        if (!want || want == w->built) continue;
        if (!state) {
            state = malloc(state_floats(w->n) * sizeof *state);
            if (!state) st = vdnn_fail(VDNN_ENOMEM, "out of host memory");
            if (st == VDNN_OK) st = state_io(w->n, state, 1);
        }
        uint64_t step = w->n->step;
        if (st == VDNN_OK) st = build(g, w, want, state);
        if (st == VDNN_OK) w->n->step = step;
    }
    free(state);
    free(full);
    return st;
}

/* ---- the group ---- */

/* Parses a list of `count` non-negative weights, not all 0. */
static vdnn_status parse_weights(const char *text, int count, double *out)
{
    const char *p = text;
    double total = 0;
    for (int k = 0; k < count; k++) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || !(v >= 0 && v <= 1e9))   /* relative weights: a huge one means nothing */
            return vdnn_fail(VDNN_EINVAL, "--shares %s: '%.20s' is not a share (a number from 0 to 1e9)", text, p);
        out[k] = v;
        total += v;
        p = end;
        if (k + 1 < count && *p != ',')
            return vdnn_fail(VDNN_EINVAL, "--shares %s: %d shares for the job's %d devices", text, k + 1, count);
        if (*p == ',') p++;
    }
    if (*p) return vdnn_fail(VDNN_EINVAL, "--shares %s: more shares than the job's %d devices", text, count);
    if (!(total > 0)) return vdnn_fail(VDNN_EINVAL, "--shares %s: every share is 0", text);
    return VDNN_OK;
}

/* The test knob VDNN_SLOWDOWN: a slow-down factor per device of the job, comma-separated. */
static double slowdown_of(int global)
{
    const char *v = getenv("VDNN_SLOWDOWN");
    for (int k = 0; v && *v; k++) {
        char *end;
        double f = strtod(v, &end);
        if (end == v) return 0;
        if (k == global) return f;
        v = *end == ',' ? end + 1 : end;
        if (!*end) break;
    }
    return 0;
}

/* This rank's devices from o.devices, numbered in the job: every rank tells the others
 * how many it has, so device k of rank r is global device (devices of ranks < r) + k. */
static vdnn_status open_devices(dp_group *g)
{
    device_options *opts = NULL;
    int count = 0;
    vdnn_status st = device_parse_list("--devices", g->o.devices ? g->o.devices : "cpu", &g->o.dev, 0, &opts, &count);
    if (st != VDNN_OK) return st;
    if (!(g->w = calloc((size_t)count, sizeof *g->w))) {
        free(opts);
        return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    }
    g->nlocal = count;
    int ranks = comm_size(g->comm), me = comm_rank(g->comm);
    double *per = calloc((size_t)ranks, sizeof *per);
    if (st == VDNN_OK && !per) st = vdnn_fail(VDNN_ENOMEM, "out of host memory");
    if (st == VDNN_OK) {
        per[me] = g->nlocal;
        st = comm_sum_doubles(g->comm, per, (size_t)ranks);
    }
    for (int r = 0; r < ranks && st == VDNN_OK; r++) {
        if (r < me) g->first += (int)per[r];
        g->njob += (int)per[r];
    }
    free(per);
    /* before any device is made: a list far longer than the batch would make them all */
    if (st == VDNN_OK && g->njob > g->batch)
        st = vdnn_fail(VDNN_EINVAL, "%d devices for a batch of %d: each needs at least one item (--batch)", g->njob,
                       g->batch);
    for (int k = 0; k < g->nlocal && st == VDNN_OK; k++) {
        worker *w = &g->w[k];
        w->g = g;
        w->global = g->first + k;
        opts[k].slowdown = slowdown_of(w->global);
        st = device_create(&opts[k], &w->dev);
        if (st != VDNN_OK) st = vdnn_wrap(st, "device %d of the job", w->global);
    }
    free(opts);
    return st;
}

/* The group's per-device arrays, and the share weights: equal, or as --shares gives them. */
static vdnn_status alloc_shares(dp_group *g, const dp_opts *o)
{
    int n = g->njob;
    g->weights = calloc((size_t)n, sizeof *g->weights);
    g->cap = calloc((size_t)n, sizeof *g->cap);
    g->shares = calloc((size_t)n, sizeof *g->shares);
    g->rates = calloc((size_t)n * (size_t)g->every, sizeof *g->rates);
    g->speed = calloc((size_t)n, sizeof *g->speed);
    if (!g->weights || !g->cap || !g->shares || !g->rates || !g->speed)
        return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    g->automatic = o->shares && !strcmp(o->shares, "auto");
    for (int k = 0; k < n; k++) g->weights[k] = 1;
    if (o->shares && strcmp(o->shares, "auto") && strcmp(o->shares, "equal"))
        return parse_weights(o->shares, n, g->weights);
    return VDNN_OK;
}

/* The largest share each device's plan fits (shares never exceed it), agreed by every
 * rank; an error when the job's devices cannot hold the batch. */
static vdnn_status find_caps(dp_group *g)
{
    int n = g->njob;
    double *caps = calloc((size_t)n, sizeof *caps);
    if (!caps) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    vdnn_status st = VDNN_OK;
    for (int k = 0; k < g->nlocal && st == VDNN_OK; k++) {
        int cap = 0;
        st = largest_share(g, &g->w[k], &cap);
        caps[g->w[k].global] = cap;
    }
    if (st == VDNN_OK) st = comm_sum_doubles(g->comm, caps, (size_t)n);
    long total_cap = 0;
    for (int k = 0; k < n && st == VDNN_OK; k++) {
        g->cap[k] = (int)caps[k];
        total_cap += g->cap[k];
    }
    free(caps);
    if (st == VDNN_OK && total_cap < g->batch)
        st = vdnn_fail(VDNN_EBUDGET, "the job's %d devices fit %ld items of the batch of %d in their budgets: "
                       "more devices, a larger --budget or a smaller --batch", n, total_cap, g->batch);
    return st;
}

/* Replicas for their shares of the whole batch, every one in the state of the first. */
static vdnn_status build_replicas(dp_group *g)
{
    int n = g->njob;
    int *full = malloc((size_t)n * sizeof *full);
    if (!full) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    dp_split(g->batch, g->weights, g->cap, n, full);
    for (int k = 0; k < n; k++) g->shares[k] = full[k];
    vdnn_status st = VDNN_OK;
    for (int k = 0; k < g->nlocal && st == VDNN_OK; k++) {
        worker *w = &g->w[k];
        st = build(g, w, full[w->global] ? full[w->global] : 1, NULL);
    }
    free(full);
    return st;
}

/* The host buffers the reduction sums in: the largest bucket or parameter, plus one. */
static vdnn_status alloc_reduce_buffers(dp_group *g)
{
    size_t most = g->max_floats;
    const net *n = g->w[0].n;
    for (int i = 0; i < n->nlayers; i++)
        for (int p = 0; p < n->layers[i]->nparams; p++)
            if (shape_count(n->layers[i]->params[p].shape) > most) most = shape_count(n->layers[i]->params[p].shape);
    g->acc = malloc((most + 1) * sizeof *g->acc);
    g->tmp = malloc((most + 1) * sizeof *g->tmp);
    if (!g->acc || !g->tmp) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    return VDNN_OK;
}

vdnn_status dp_create(net *model, comm *c, const dp_opts *o, dp_group **out)
{
    *out = NULL;
    dp_group *g = calloc(1, sizeof *g);
    if (!g) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    g->model = model;
    g->comm = c;
    g->o = *o;
    if (!g->o.bucket_bytes) g->o.bucket_bytes = DEFAULT_BUCKET_BYTES;
    g->every = o->share_every > 0 ? o->share_every : DEFAULT_SHARE_EVERY;
    g->batch = model->minibatch;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    vdnn_status st = open_devices(g);
    if (st == VDNN_OK) st = alloc_shares(g, o);
    if (st == VDNN_OK) st = find_caps(g);
    if (st == VDNN_OK) st = build_replicas(g);
    if (st == VDNN_OK) st = make_buckets(g);
    if (st == VDNN_OK) st = alloc_reduce_buffers(g);
    for (int k = 0; k < g->nlocal && st == VDNN_OK; k++) {
        if (pthread_create(&g->w[k].thread, NULL, worker_main, &g->w[k]) != 0)
            st = vdnn_fail(VDNN_EDEVICE, "could not start the thread of device %d", g->w[k].global);
        else g->w[k].started = 1;
    }
    if (st == VDNN_OK) st = dp_sync(g, NULL);
    if (st != VDNN_OK) {
        dp_free(g);
        return st;
    }
    *out = g;
    return VDNN_OK;
}

void dp_free(dp_group *g)
{
    if (!g) return;
    dispatch(g, CMD_QUIT, (job){0});
    for (int k = 0; k < g->nlocal; k++) {
        worker *w = &g->w[k];
        if (w->started) pthread_join(w->thread, NULL);
        for (int i = 0; w->n && w->ev && i < w->n->nlayers; i++)
            if (w->ev[i]) device_event_release(w->dev, w->ev[i]);
        net_free(w->n);
        device_destroy(w->dev);
        free(w->ready);
        free(w->ev);
    }
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g->w);
    free(g->weights);
    free(g->cap);
    free(g->shares);
    free(g->rates);
    free(g->speed);
    free(g->entries);
    free(g->bucket);
    free(g->acc);
    free(g->tmp);
    free(g);
}

net *dp_primary(dp_group *g) { return g->w[0].n; }
const double *dp_weights(const dp_group *g) { return g->weights; }
int dp_local_devices(const dp_group *g) { return g->nlocal; }
device *dp_device(const dp_group *g, int k) { return g->w[k].dev; }

void dp_busy(const dp_group *g, double *backprop_s, double *update_s)
{
    for (int k = 0; k < g->nlocal; k++) {
        backprop_s[k] = g->w[k].items ? g->w[k].busy_s : 0;
        update_s[k] = g->w[k].update_s;
    }
}

vdnn_status dp_set_weights(dp_group *g, const double *weights)
{
    double total = 0;
    for (int k = 0; k < g->njob; k++) {
        if (!(weights[k] >= 0) || !isfinite(weights[k]))
            return vdnn_fail(VDNN_EINVAL, "share %g of device %d is not a number >= 0", weights[k], k);
        total += weights[k];
    }
    if (!(total > 0)) return vdnn_fail(VDNN_EINVAL, "every device's share is 0");
    memcpy(g->weights, weights, (size_t)g->njob * sizeof *weights);
    g->votes = 0;
    return resize(g);
}
double dp_exposed_s(const dp_group *g) { return g->exposed_s; }
int dp_batch(const dp_group *g) { return g->batch; }
int dp_devices(const dp_group *g) { return g->njob; }
const int *dp_shares(const dp_group *g) { return g->shares; }

vdnn_status dp_sync(dp_group *g, uint64_t *step)
{
    net *n = g->w[0].n;
    size_t count = state_floats(n);
    float *state = malloc((count + 2) * sizeof *state);
    if (!state) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    vdnn_status st = state_io(n, state, 1);
    uint64_t s = step ? *step : n->step;
    memcpy(&state[count], &s, sizeof s);
    if (st == VDNN_OK) st = comm_bcast(g->comm, state, (count + 2) * sizeof *state, 0);
    memcpy(&s, &state[count], sizeof s);
    for (int k = 0; k < g->nlocal && st == VDNN_OK; k++) {
        st = state_io(g->w[k].n, state, 0);
        g->w[k].n->step = s;
    }
    if (step) *step = s;
    free(state);
    return st;
}

/* The test knob VDNN_TEST_RANK_FAULT=RANK:STEP:die|hang|term (docs/parallel.md): rank
 * RANK is killed, stops answering, or alone gets SIGTERM, as step STEP begins. The others
 * must stop with an error within --rank-timeout, and the last checkpoint must load; or,
 * for SIGTERM, every rank stops after that step, with the checkpoint saved. */
static void fault_knob(dp_group *g)
{
    const char *v = getenv("VDNN_TEST_RANK_FAULT");
    int rank = -1;
    long long step = -1;
    char what[8] = "";
    if (!v || sscanf(v, "%d:%lld:%7s", &rank, &step, what) != 3 || rank != comm_rank(g->comm) ||
        (long long)g->w[0].n->step + 1 != step)
        return;
    if (!strcmp(what, "die")) raise(SIGKILL);
    if (!strcmp(what, "term")) raise(SIGTERM);
    if (!strcmp(what, "hang"))
        for (;;) pause();
}

vdnn_status dp_train_step(dp_group *g, const float *x, const int32_t *y, int items, double lr, step_result *r)
{
    memset(r, 0, sizeof *r);
    if (items < 1 || items > g->batch)
        return vdnn_fail(VDNN_EINVAL, "a batch of %d items for a job whose batch is %d", items, g->batch);
    /* the replicas are built for their shares of the whole batch (every rank knows them
     * all): a short batch's shares stay within those */
    int *full = malloc((size_t)g->njob * sizeof *full);
    if (!full) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    dp_split(g->batch, g->weights, g->cap, g->njob, full);
    dp_split(items, g->weights, full, g->njob, g->shares);
    free(full);
    int base = 0;
    for (int k = 0; k < g->njob; k++) {
        for (int l = 0; l < g->nlocal; l++) {
            worker *w = &g->w[l];
            if (w->global != k) continue;
            w->base = base;
            w->items = g->shares[k];
            memset(w->ready, 0, (size_t)w->n->nlayers);
            for (int i = 0; i < w->n->nlayers; i++)   /* left by a failed step */
                if (w->ev[i]) device_event_release(w->dev, w->ev[i]), w->ev[i] = NULL;
        }
        base += g->shares[k];
    }
    fault_knob(g);
    dispatch(g, CMD_BACKPROP, (job){x, y, items, lr});
    vdnn_status st = reduce(g);
    double reduced = vdnn_now_s();
    vdnn_status ws = wait_workers(g);
    double last = 0;
    for (int k = 0; k < g->nlocal; k++)
        if (g->w[k].items && g->w[k].end_s > last) last = g->w[k].end_s;
    g->exposed_s = last > 0 && reduced > last ? reduced - last : 0;
    if (st == VDNN_OK) st = ws;
    if (st == VDNN_OK) st = average_stats(g);
    if (st == VDNN_OK) {
        dispatch(g, CMD_UPDATE, (job){x, y, items, lr});
        st = wait_workers(g);
    }
    /* the loss and the correct count over the job, in device order */
    double sums[2] = {0, 0};
    for (int k = 0; k < g->nlocal; k++) {
        sums[0] += g->w[k].r.loss_sum;
        sums[1] += g->w[k].r.correct;
        if (g->w[k].items && g->w[k].busy_s > 0)
            g->rates[(size_t)g->w[k].global * (size_t)g->every + (size_t)g->since] = g->w[k].items / g->w[k].busy_s;
    }
    if (st == VDNN_OK) st = comm_sum_doubles(g->comm, sums, 2);
    r->loss_sum = sums[0];
    r->correct = (int)sums[1];
    r->n = items;
    if (st == VDNN_OK && g->automatic && ++g->since >= g->every) {
        g->since = 0;
        st = rebalance(g);
        if (st == VDNN_OK) st = resize(g);
    }
    return st;
}
