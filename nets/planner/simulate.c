/* The simulator: one training iteration of a plan replayed on the simulated device,
 * with the profile's costs on its clocks (planner.h); and the measurement of a plan
 * with real iterations, which the simulator's predictions are checked against. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nets/planner/planner.h"
#include "vdnn/hash.h"
#include "vdnn/rng.h"

/* A plan replayed before and what its replay gave. The searches meet the same plan
 * again and again (a climb's move is a plan its last round simulated; a node of the
 * branch and bound shares its smallest completion with its first child), and a replay
 * depends on nothing but the plan, so each is replayed once. */
typedef struct memo_entry {
    uint64_t hash;            /* 0: an empty slot */
    double time_s, busy_s;
    size_t peak, used;
    size_t over;              /* > 0: the replay stopped past this cap (sim_run_within): */
} memo_entry;                 /* peak SIZE_MAX, the real one unknown but over it */

/* The memo stops growing at this many bytes (keys and slots together). */
#define SIM_MEMO_BYTES ((size_t)64 << 20)

/* A clone of the net attached to a simulated device of its own, its parameters placed
 * as a plan swaps them. */
typedef struct sim_net {
    net *m;
    device *d;
    uint64_t attached;        /* the pool's state key once the net was attached, */
    pool_marks marks;         /* and its marks; */
    int clean;                /* the last replay on it succeeded: the net and pool are reusable */
    long used;                /* the run that last used it */
} sim_net;

/* Two: a climb's round replays plan after plan with the same swaps, and between them the
 * plans that swap one layer otherwise (each a swap decision's choice), so that the net
 * attached for the former waits while the latter take the other (an attach, a fresh pool
 * and its first replay cost a few replays' worth of allocations). */
#define SIM_NETS 2

struct simulator {
    const profile *pr;
    sim_net net[SIM_NETS];
    long runs, attaches;
    size_t used_peak;         /* the last run's high-water mark of bytes in use */
    double busy_s;            /* and its compute stream's own work */
    size_t key_bytes;         /* a plan's key: every field of it that a replay reads */
    unsigned char *key;       /* the key of the plan in hand */
    memo_entry *slot;         /* open addressing, a power of two of slots */
    unsigned char *keys;      /* slot k's key at keys + k * key_bytes */
    size_t nslots, count;
    long hits;
};

vdnn_status sim_create(const net *n, const profile *pr, simulator **out)
{
    *out = NULL;
    if (pr && (pr->nlayers != n->nlayers || pr->batch != n->input.n))
        return vdnn_fail(VDNN_EINVAL, "the profile is of a net of %d layers at batch %d, not %d layers at batch %d",
                         pr->nlayers, pr->batch, n->nlayers, n->input.n);
    simulator *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(VDNN_ENOMEM, "out of host memory for the simulator");
    s->pr = pr;
    s->key_bytes = 5 * sizeof(int) + (size_t)n->nlayers * (2 + PASS_COUNT) + 1;
    s->key = malloc(s->key_bytes);
    vdnn_status st = s->key ? VDNN_OK : vdnn_fail(VDNN_ENOMEM, "out of host memory for the simulator");
    for (int k = 0; k < SIM_NETS && st == VDNN_OK; k++) {
        st = net_clone(n, &s->net[k].m);
        if (st != VDNN_OK) break;
        s->net[k].m->sync_layers = n->sync_layers;
        for (int i = 0; pr && i < n->nlayers; i++) s->net[k].m->layers[i]->cost = &pr->layers[i];
    }
    if (st != VDNN_OK) {
        sim_destroy(s);
        return st;
    }
    *out = s;
    return VDNN_OK;
}

void sim_destroy(simulator *s)
{
    if (!s) return;
    for (int k = 0; k < SIM_NETS; k++) {
        net_free(s->net[k].m);
        device_destroy(s->net[k].d);
    }
    free(s->key);
    free(s->slot);
    free(s->keys);
    free(s);
}

long sim_runs(const simulator *s) { return s->runs; }
long sim_repeats(const simulator *s) { return s->hits; }
long sim_attaches(const simulator *s) { return s->attaches; }
size_t sim_used_peak(const simulator *s) { return s->used_peak; }
double sim_busy_s(const simulator *s) { return s->busy_s; }

/* p's key into s->key and its hash; 0 when p cannot be keyed (a plan of another net,
 * or one sim_run rejects: it is replayed, and fails there). */
static uint64_t plan_key(simulator *s, const plan *p)
{
    int n = s->net[0].m->nlayers;
    if (p->nlayers != n || !p->offload || !p->swap || !p->algo) return 0;
    const int head[5] = {p->micro, p->prefetch_ahead, p->release_lag, p->in_place, p->batch};
    unsigned char *k = s->key;
    memcpy(k, head, sizeof head);
    k += sizeof head;
    memcpy(k, p->offload, (size_t)n + 1);
    k += n + 1;
    memcpy(k, p->swap, (size_t)n);
    k += n;
    for (int i = 0; i < n; i++)
        for (int pass = 0; pass < PASS_COUNT; pass++) {
            if (p->algo[i][pass] < 0 || p->algo[i][pass] > UCHAR_MAX) return 0;
            *k++ = (unsigned char)p->algo[i][pass];
        }
    uint64_t h = vdnn_hash_bytes(VDNN_HASH_START, s->key, s->key_bytes);
    return h ? h : 1;
}

/* The slot of the key in hand: its entry, or the empty slot it would go to. */
static size_t memo_slot(const simulator *s, uint64_t h)
{
    size_t k = (size_t)h & (s->nslots - 1);
    while (s->slot[k].hash && (s->slot[k].hash != h || memcmp(s->keys + k * s->key_bytes, s->key, s->key_bytes)))
        k = (k + 1) & (s->nslots - 1);
    return k;
}

/* Keeps the key in hand's results; quietly does not once the memo is full or memory
 * is short (the replay is only repeated then). */
static void memo_put(simulator *s, uint64_t h, double time_s, double busy_s, size_t peak, size_t used, size_t over)
{
    if (2 * (s->count + 1) > s->nslots) {
        size_t n = s->nslots ? 2 * s->nslots : 1024;
        if (n * (sizeof *s->slot + s->key_bytes) > SIM_MEMO_BYTES) return;
        memo_entry *slot = calloc(n, sizeof *slot);
        unsigned char *keys = malloc(n * s->key_bytes);
        if (!slot || !keys) {
            free(slot);
            free(keys);
            return;
        }
        for (size_t k = 0; k < s->nslots; k++) {
            if (!s->slot[k].hash) continue;
            size_t at = (size_t)s->slot[k].hash & (n - 1);
            while (slot[at].hash) at = (at + 1) & (n - 1);
            slot[at] = s->slot[k];
            memcpy(keys + at * s->key_bytes, s->keys + k * s->key_bytes, s->key_bytes);
        }
        free(s->slot);
        free(s->keys);
        s->slot = slot;
        s->keys = keys;
        s->nslots = n;
    }
    size_t k = memo_slot(s, h);
    if (!s->slot[k].hash) s->count++;
    s->slot[k] = (memo_entry){.hash = h, .time_s = time_s, .busy_s = busy_s, .peak = peak, .used = used, .over = over};
    memcpy(s->keys + k * s->key_bytes, s->key, s->key_bytes);
}

/* Whether net a, attached for an earlier run, can replay p as it stands: p places the
 * parameters as that run did (swapped or not), and the iterations since returned the
 * pool to its state once attached (the same blocks, none pending: it then decides
 * alike, mempool.h). Else a run attaches it again, to a fresh device. */
static int reusable(const sim_net *a, const plan *p)
{
    if (!a->d || !a->clean || !p->swap || p->nlayers != a->m->nlayers) return 0;
    for (int i = 0; i < p->nlayers; i++)
        if (!p->swap[i] != !a->m->layers[i]->swap) return 0;
    const pool *pl = device_pool(a->d);
    return !pool_pending_bytes(pl) && pool_state_key(pl) == a->attached;
}

/* The net to replay p on: one that can as it stands, else the one used least recently,
 * attached afresh with p's swaps. */
static vdnn_status net_for(simulator *s, const plan *p, sim_net **out)
{
    sim_net *a = NULL;
    for (int k = 0; k < SIM_NETS && !a; k++)
        if (reusable(&s->net[k], p)) a = &s->net[k];
    if (a) {
        pool_set_marks(device_pool(a->d), a->marks);
    } else {
        a = &s->net[0];
        for (int k = 1; k < SIM_NETS; k++)
            if (s->net[k].used < a->used) a = &s->net[k];
        /* a fresh device: the parameters placed into an empty pool */
        s->attaches++;
        net_detach(a->m);
        device_destroy(a->d);
        a->d = NULL;
        device_options o = {.kind = DEVICE_SIM, .budget_bytes = (size_t)1 << 50};
        vdnn_status st = device_create(&o, &a->d);
        /* swapping decides where the parameters are placed: before attaching */
        for (int i = 0; st == VDNN_OK && i < a->m->nlayers && p->swap && i < p->nlayers; i++)
            a->m->layers[i]->swap = p->swap[i];
        a->m->policy = POLICY_NONE;   /* the plan's swaps, not a config's `policy = swap` */
        if (st == VDNN_OK) st = net_attach_unplanned(a->m, a->d);   /* plan_apply below plans it */
        if (st == VDNN_OK) {
            a->attached = pool_state_key(device_pool(a->d));
            a->marks = pool_get_marks(device_pool(a->d));
        }
        a->clean = 0;
        if (st != VDNN_OK) return st;
    }
    a->used = s->runs + 1;
    *out = a;
    return VDNN_OK;
}

vdnn_status sim_run(simulator *s, const plan *p, double *time_s, size_t *peak_bytes)
{
    return sim_run_within(s, p, 0, time_s, peak_bytes);
}

vdnn_status sim_run_within(simulator *s, const plan *p, size_t cap, double *time_s, size_t *peak_bytes)
{
    uint64_t h = plan_key(s, p);
    if (h && s->nslots) {
        const memo_entry *e = &s->slot[memo_slot(s, h)];
        /* a replay stopped past a cap answers for that cap and any lower one */
        if (e->hash && (!e->over || (cap && cap <= e->over))) {
            *time_s = e->time_s;
            *peak_bytes = e->peak;
            s->used_peak = e->used;
            s->busy_s = e->busy_s;
            s->hits++;
            return VDNN_OK;
        }
    }
    sim_net *a = NULL;
    vdnn_status st = net_for(s, p, &a);
    if (st != VDNN_OK) return st;
    a->clean = 0;
    st = plan_apply(a->m, p);
    if (st != VDNN_OK) return st;
    sim_model model = {0};
    if (s->pr) {
        model.h2d_bytes_per_s = s->pr->h2d_bytes_per_s;
        model.d2h_bytes_per_s = s->pr->d2h_bytes_per_s;
        model.copy_latency_s = s->pr->copy_latency_s;
    }
    device_sim_set_model(a->d, &model);
    /* the parameters alone past the cap: nothing to replay */
    pool *pl = device_pool(a->d);
    int over = cap && pool_frontier_peak(pl) > cap;
    if (!over) {
        pool_set_cap(pl, cap);
        st = net_replay(a->m, a->m->minibatch, time_s, &s->busy_s);
        pool_set_cap(pl, 0);
        over = cap && st == VDNN_EBUDGET;
    }
    s->runs++;
    if (over) {
        /* The step's failure path returned what it held (iteration.c, release_all): once
         * its work is settled, the pool is as attached again and the next replay reuses
         * it; where it is not (reusable), the next run attaches afresh. */
        a->clean = device_sync(a->d) == VDNN_OK;
        *time_s = 1e30;
        *peak_bytes = SIZE_MAX;
        s->busy_s = 0;
        s->used_peak = SIZE_MAX;
        if (h) memo_put(s, h, *time_s, s->busy_s, SIZE_MAX, s->used_peak, cap);
        return VDNN_OK;
    }
    *peak_bytes = pool_frontier_peak(pl);
    s->used_peak = pool_live_peak(pl);
    a->clean = st == VDNN_OK;
    if (st == VDNN_OK && h) memo_put(s, h, *time_s, s->busy_s, *peak_bytes, s->used_peak, 0);
    return st;
}

/* ---- real iterations ---- */

/* Value, gradient or momentum (which = 0, 1, 2): the device copy, or for a swapped
 * layer the host master copy (*swapped set). */
static float *param_field(param *pm, int which, int *swapped)
{
    float *host = which == 0 ? pm->host_value : which == 1 ? pm->host_grad : pm->host_momentum;
    *swapped = host != NULL;
    if (host) return host;
    return which == 0 ? pm->value : which == 1 ? pm->grad : pm->momentum;
}

/* Copies every parameter, gradient and momentum to host memory (take) or back (give). */
static vdnn_status move_params(net *n, float **host, int take)
{
    vdnn_status st = VDNN_OK;
    for (int i = 0; i < n->nlayers && st == VDNN_OK; i++)
        for (int p = 0; p < n->layers[i]->nparams && st == VDNN_OK; p++)
            for (int w = 0; w < 3 && st == VDNN_OK; w++) {
                param *pm = &n->layers[i]->params[p];
                int swapped = 0;
                float *at = param_field(pm, w, &swapped);
                float **h = &host[(i * LAYER_MAX_PARAMS + p) * 3 + w];
                size_t bytes = shape_count(pm->shape) * sizeof(float);
                if (!at) continue;
                if (take) {
                    *h = malloc(bytes);
                    if (!*h) st = vdnn_fail(VDNN_ENOMEM, "out of host memory saving the parameters");
                    else if (swapped) memcpy(*h, at, bytes);
                    else st = device_download(n->dev, *h, at, bytes);
                } else if (*h) {
                    if (swapped) memcpy(at, *h, bytes);
                    else st = device_upload(n->dev, at, *h, bytes);
                }
            }
    return st;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static vdnn_status timed_steps(net *n, int iters, double *median_s)
{
    size_t count = (size_t)n->minibatch * shape_per_item(n->input);
    float *x = malloc(count * sizeof *x);
    int32_t *y = malloc((size_t)n->minibatch * sizeof *y);
    double *t = malloc((size_t)(iters + 1) * sizeof *t);
    vdnn_status st = x && y && t ? VDNN_OK : vdnn_fail(VDNN_ENOMEM, "out of host memory for a measuring batch");
    rng r;
    rng_seed(&r, 12345);
    for (size_t k = 0; x && k < count; k++) x[k] = rng_normal(&r);
    for (int k = 0; y && k < n->minibatch; k++) y[k] = (int32_t)(rng_next(&r) % (uint64_t)n->classes);
    for (int k = 0; k <= iters && st == VDNN_OK; k++) {
        step_result res;
        double t0 = vdnn_now_s();
        st = net_train_step(n, x, y, n->minibatch, 0.0, &res);
        t[k] = vdnn_now_s() - t0;
    }
    if (st == VDNN_OK) {
        qsort(t + 1, (size_t)iters, sizeof *t, cmp_double);   /* the first is a warm-up */
        *median_s = t[1 + iters / 2];
    }
    free(x);
    free(y);
    free(t);
    return st;
}

vdnn_status plan_measure(net *n, plan *p, int iters)
{
    if (!n->dev) return vdnn_fail(VDNN_EINVAL, "measuring a plan needs the net on a device");
    if (iters < 1) iters = 1;
    plan saved;
    vdnn_status st = plan_from_net(n, &saved);
    if (st != VDNN_OK) return st;
    size_t slots = (size_t)n->nlayers * LAYER_MAX_PARAMS * 3;
    float **host = calloc(slots, sizeof *host);
    uint64_t step = n->step;
    mm_stats stats = n->stats;
    st = host ? move_params(n, host, 1) : vdnn_fail(VDNN_ENOMEM, "out of host memory saving the parameters");
    if (st == VDNN_OK) st = plan_apply(n, p);
    if (st == VDNN_OK) st = timed_steps(n, iters, &p->measured_s);
    vdnn_status back = plan_apply(n, &saved);
    if (host && back == VDNN_OK) back = move_params(n, host, 0);
    for (size_t k = 0; host && k < slots; k++) free(host[k]);
    free(host);
    plan_free(&saved);
    n->step = step;
    n->stats = stats;
    pool_reset_peak(device_pool(n->dev));
    return st != VDNN_OK ? st : back;
}
