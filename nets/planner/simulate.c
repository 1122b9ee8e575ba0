/* The simulator: one training iteration of a plan replayed on the simulated device,
 * with the profile's costs on its clocks (planner.h); and the measurement of a plan
 * with real iterations, which the simulator's predictions are checked against. */
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "nets/planner/planner.h"
#include "vdnn/hash.h"
#include "vdnn/rng.h"

/* A table of what replays gave, by a key of every input they read: open addressing
 * over a power of two of slots, each a hash (0: empty), a key and a value. It stops
 * growing at max_bytes, or when memory is short: a replay is only repeated then. */
typedef struct memo {
    size_t key_bytes, value_bytes, max_bytes;
    unsigned char *key;       /* the key in hand */
    uint64_t *hash;
    unsigned char *keys;      /* slot k's key at keys + k * key_bytes */
    unsigned char *values;    /* and its value at values + k * value_bytes */
    size_t nslots, count;
} memo;

static vdnn_status memo_init(memo *m, size_t key_bytes, size_t value_bytes, size_t max_bytes)
{
    *m = (memo){.key_bytes = key_bytes, .value_bytes = value_bytes, .max_bytes = max_bytes};
    m->key = malloc(key_bytes);
    return m->key ? VDNN_OK : vdnn_fail(VDNN_ENOMEM, "out of host memory for the simulator");
}

static void memo_free(memo *m)
{
    free(m->key);
    free(m->hash);
    free(m->keys);
    free(m->values);
}

/* The key in hand's hash (never 0). */
static uint64_t memo_hash(const memo *m)
{
    uint64_t h = vdnn_hash_mem(m->key, m->key_bytes);
    return h ? h : 1;
}

/* The slot of the key in hand (hash h): its entry, or the empty slot it would go to. */
static size_t memo_slot(const memo *m, uint64_t h)
{
    size_t k = (size_t)h & (m->nslots - 1);
    while (m->hash[k] && (m->hash[k] != h || memcmp(m->keys + k * m->key_bytes, m->key, m->key_bytes)))
        k = (k + 1) & (m->nslots - 1);
    return k;
}

/* The value kept for the key in hand, or NULL. */
static void *memo_get(const memo *m, uint64_t h)
{
    if (!m->nslots) return NULL;
    size_t k = memo_slot(m, h);
    return m->hash[k] ? m->values + k * m->value_bytes : NULL;
}

static void memo_put(memo *m, uint64_t h, const void *value)
{
    if (2 * (m->count + 1) > m->nslots) {
        size_t n = m->nslots ? 2 * m->nslots : 1024;
        if (n * (sizeof *m->hash + m->key_bytes + m->value_bytes) > m->max_bytes) return;
        uint64_t *hash = calloc(n, sizeof *hash);
        unsigned char *keys = malloc(n * m->key_bytes), *values = malloc(n * m->value_bytes);
        if (!hash || !keys || !values) {
            free(hash);
            free(keys);
            free(values);
            return;
        }
        for (size_t k = 0; k < m->nslots; k++) {
            if (!m->hash[k]) continue;
            size_t at = (size_t)m->hash[k] & (n - 1);
            while (hash[at]) at = (at + 1) & (n - 1);
            hash[at] = m->hash[k];
            memcpy(keys + at * m->key_bytes, m->keys + k * m->key_bytes, m->key_bytes);
            memcpy(values + at * m->value_bytes, m->values + k * m->value_bytes, m->value_bytes);
        }
        free(m->hash);
        free(m->keys);
        free(m->values);
        m->hash = hash;
        m->keys = keys;
        m->values = values;
        m->nslots = n;
    }
    size_t k = memo_slot(m, h);
    if (!m->hash[k]) m->count++;
    m->hash[k] = h;
    memcpy(m->keys + k * m->key_bytes, m->key, m->key_bytes);
    memcpy(m->values + k * m->value_bytes, value, m->value_bytes);
}

/* A plan replayed before and what its replay gave. The searches meet the same plan
 * again and again (a climb's move is a plan its last round simulated; a node of the
 * branch and bound shares its smallest completion with its first child), and a replay
 * depends on nothing but the plan, so each is replayed once. */
typedef struct replayed {
    double time_s, busy_s;
    size_t peak, used;
    size_t over;              /* > 0: the replay stopped past this cap (sim_run_within): */
} replayed;                   /* peak SIZE_MAX, the real one unknown but over it */

/* The plans' memo stops growing at this many bytes (keys and slots together). */
#define SIM_MEMO_BYTES ((size_t)64 << 20)

/* The evaluation batch that follows a replay's training step asks the same of the pool
 * for every plan that runs the same forward pass (each layer's algorithm, which maps
 * take their input's block, the swapped parameters, the release lag) from the pool as
 * attached: most of a search's changes (a map offloaded or recomputed, a backward
 * algorithm, the prefetch) leave it as it was, so its high-water marks are kept by
 * that (a tenth of a replay's work). This table stops growing at this many bytes. */
#define SIM_EVAL_BYTES ((size_t)16 << 20)

/* A clone of the net attached to a simulated device of its own, its parameters placed
 * as a plan swaps them. */
typedef struct sim_net {
    net *m;
    device *d;
    plan applied;             /* the plan m runs (plan_apply_from), when has_applied */
    int has_applied;
    uint64_t attached;        /* the pool's state key once the net was attached, */
    pool_marks marks;         /* and its marks; */
    int clean;                /* the pool as attached (its last replay succeeded, or none since): reusable */
    long used;                /* the run that last used it */
    const layer **by_address; /* m's layers in address order (critical_of), once asked for */
} sim_net;

/* Two: a climb's round replays plan after plan with the same swaps, and between them the
 * plans that swap one layer otherwise (each a swap decision's choice), so that the net
 * placed for the former waits while the latter take the other (placing the parameters
 * again and the first replay after it cost a few replays' worth of allocations). The
 * second is cloned when a plan first needs it: a simulator that replays one plan, or
 * plans of one placement, does not build the net's layers from its config again. */
#define SIM_NETS 2

struct simulator {
    const net *src;           /* the net the clones are of */
    const profile *pr;
    sim_net net[SIM_NETS];
    long runs, attaches;
    size_t used_peak;         /* the last run's high-water mark of bytes in use */
    double busy_s;            /* and its compute stream's own work */
    memo plans;               /* replayed, by every field of a plan that a replay reads */
    memo evals;               /* pool_marks of the evaluation batch, by eval_key */
    long hits, eval_hits, eval_peaks;
    size_t *param_bytes;      /* (nlayers) layer_param_bytes of each layer */
    size_t label_bytes;       /* the labels' block */
};

/* Net a: a clone of the simulator's net, its layers timed by the profile. */
static vdnn_status sim_clone(simulator *s, sim_net *a)
{
    vdnn_status st = net_clone(s->src, &a->m);
    if (st != VDNN_OK) return st;
    a->m->sync_layers = s->src->sync_layers;
    for (int i = 0; s->pr && i < a->m->nlayers; i++) a->m->layers[i]->cost = &s->pr->layers[i];
    return VDNN_OK;
}

vdnn_status sim_create(const net *n, const profile *pr, simulator **out)
{
    *out = NULL;
    if (pr && (pr->nlayers != n->nlayers || pr->batch != n->input.n))
        return vdnn_fail(VDNN_EINVAL, "the profile is of a net of %d layers at batch %d, not %d layers at batch %d",
                         pr->nlayers, pr->batch, n->nlayers, n->input.n);
    simulator *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(VDNN_ENOMEM, "out of host memory for the simulator");
    s->pr = pr;
    const size_t L = (size_t)n->nlayers;
    vdnn_status st = memo_init(&s->plans, 5 * sizeof(int) + L * (2 + PASS_COUNT) + 1, sizeof(replayed), SIM_MEMO_BYTES);
    if (st == VDNN_OK) st = memo_init(&s->evals, 3 * L + 1, sizeof(pool_marks), SIM_EVAL_BYTES);
    s->param_bytes = malloc(L * sizeof *s->param_bytes);
    if (st == VDNN_OK && !s->param_bytes) st = vdnn_fail(VDNN_ENOMEM, "out of host memory for the simulator");
    for (int i = 0; st == VDNN_OK && i < n->nlayers; i++) s->param_bytes[i] = layer_param_bytes(n->layers[i]);
    s->label_bytes = pool_round((size_t)n->input.n * sizeof(int32_t));
    s->src = n;
    if (st == VDNN_OK) st = sim_clone(s, &s->net[0]);
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
        free(s->net[k].by_address);
        device_destroy(s->net[k].d);
        plan_free(&s->net[k].applied);
    }
    memo_free(&s->plans);
    memo_free(&s->evals);
    free(s->param_bytes);
    free(s);
}

long sim_runs(const simulator *s) { return s->runs; }
long sim_repeats(const simulator *s) { return s->hits; }
long sim_eval_repeats(const simulator *s) { return s->eval_hits; }
long sim_eval_peaks(const simulator *s) { return s->eval_peaks; }
long sim_attaches(const simulator *s) { return s->attaches; }
size_t sim_used_peak(const simulator *s) { return s->used_peak; }
double sim_busy_s(const simulator *s) { return s->busy_s; }

/* p's key into s->plans' key in hand and its hash; 0 when p cannot be keyed (a plan of
 * another net, or one sim_run rejects: it is replayed, and fails there). */
static uint64_t plan_key(simulator *s, const plan *p)
{
    int n = s->net[0].m->nlayers;
    if (p->nlayers != n || !p->offload || !p->swap || !p->algo) return 0;
    const int head[5] = {p->micro, p->prefetch_ahead, p->release_lag, p->in_place, p->batch};
    unsigned char *k = s->plans.key;
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
    return memo_hash(&s->plans);
}

/* The key of the evaluation batch net m, trained by plan p, runs next (what its calls
 * to the pool read) into s->evals' key in hand, and its hash; 0 where p has no such
 * key (plan_key). m's fwd_in_place is as its training step's forward left it, which
 * the evaluation's takes again (the same maps' decisions). */
static uint64_t eval_key(simulator *s, const net *m, const plan *p)
{
    const int n = m->nlayers;
    if (p->release_lag < 0 || p->release_lag > UCHAR_MAX) return 0;
    unsigned char *k = s->evals.key;
    for (int i = 0; i < n; i++) {
        if (p->algo[i][PASS_FWD] < 0 || p->algo[i][PASS_FWD] > UCHAR_MAX) return 0;
        k[i] = (unsigned char)p->algo[i][PASS_FWD];
        k[n + i] = p->swap[i];
        k[2 * n + i] = m->fwd_in_place[i];
    }
    k[3 * n] = (unsigned char)p->release_lag;
    return memo_hash(&s->evals);
}

/* Whether net a, attached for an earlier run of a plan of p's size, holds nothing but
 * what attaching placed: the iterations since returned the pool to its state once
 * attached (the same blocks, none pending). */
static int between_steps(const sim_net *a, const plan *p)
{
    if (!a->d || !a->clean || !p->swap || p->nlayers != a->m->nlayers) return 0;
    const pool *pl = device_pool(a->d);
    return !pool_pending_bytes(pl) && pool_state_key(pl) == a->attached;
}

/* Whether net a can replay p as it stands: between steps (the pool then decides as it
 * did, mempool.h), and p places the parameters as a's last plan did (swapped or not).
 * Else net_for places them again. */
static int reusable(const sim_net *a, const plan *p)
{
    if (!between_steps(a, p)) return 0;
    const unsigned char *placed = a->has_applied ? a->applied.swap : NULL;   /* as the layers have them */
    for (int i = 0; i < p->nlayers; i++)
        if (!p->swap[i] != !(placed ? placed[i] : a->m->layers[i]->swap)) return 0;
    return 1;
}

/* p, just applied to a's net, kept as the plan it runs. */
static void remember_applied(sim_net *a, const plan *p)
{
    plan_free(&a->applied);
    a->has_applied = plan_copy(&a->applied, p) == VDNN_OK;
}

/* The first layer whose parameters p places otherwise than net a has them (on the
 * device or in host memory), or nlayers. */
static int first_moved(const sim_net *a, const plan *p)
{
    int i = 0;
    while (i < p->nlayers && !p->swap[i] == !a->m->layers[i]->swap) i++;
    return i;
}

/* The net to replay p on: one that can as it stands, else the one used least recently
 * with p's swaps: its parameters placed again from the first layer p places otherwise
 * where it stands between steps (net_replace_params: as attached afresh, without a
 * new device, arrays and names), else attached afresh to a new device. */
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
        if (!a->m) {
            vdnn_status st = sim_clone(s, a);
            if (st != VDNN_OK) return st;
        }
        s->attaches++;
        a->has_applied = 0;
        vdnn_status st = VDNN_EINVAL;
        if (between_steps(a, p)) {
            int from = first_moved(a, p);
            for (int i = from; i < a->m->nlayers; i++) a->m->layers[i]->swap = p->swap[i];
            st = net_replace_params(a->m, from);
        }
        if (st != VDNN_OK) {
            /* a fresh device: the parameters placed into an empty pool */
            net_detach(a->m);
            device_destroy(a->d);
            a->d = NULL;
            device_options o = {.kind = DEVICE_SIM, .budget_bytes = (size_t)1 << 50};
            st = device_create(&o, &a->d);
            /* swapping decides where the parameters are placed: before attaching */
            for (int i = 0; st == VDNN_OK && i < a->m->nlayers && p->swap && i < p->nlayers; i++)
                a->m->layers[i]->swap = p->swap[i];
            a->m->policy = POLICY_NONE;   /* the plan's swaps, not a config's `policy = swap` */
            if (st == VDNN_OK) st = net_attach_unplanned(a->m, a->d);   /* plan_apply below plans it */
        }
        if (st == VDNN_OK) {
            a->attached = pool_state_key(device_pool(a->d));
            a->marks = pool_get_marks(device_pool(a->d));
        }
        a->clean = st == VDNN_OK;   /* as attached: reusable even if p is then refused */
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

vdnn_status net_replay_step(net *m, int items, double *step_s, double *busy_s)
{
    step_result r = {0};
    vdnn_status st = net_train_step(m, NULL, NULL, items, 0.0, &r);
    if (step_s) *step_s = device_sim_elapsed(m->dev);
    if (busy_s) *busy_s = device_sim_busy(m->dev);
    return st;
}

vdnn_status net_replay_eval(net *m)
{
    step_result r = {0};
    return net_eval_batch(m, NULL, NULL, m->input.n, &r);
}

vdnn_status net_replay(net *m, int items, double *step_s, double *busy_s)
{
    vdnn_status st = net_replay_step(m, items, step_s, busy_s);
    return st == VDNN_OK ? net_replay_eval(m) : st;
}

static int cmp_address(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t) * (const layer *const *)a, y = (uintptr_t) * (const layer *const *)b;
    return (x > y) - (x < y);
}

/* The copies on the longest path of m's step just replayed into c (c->valid 0 where
 * not known): each tagged with its map's name (memory_manager.c) or its layer's
 * (iteration.c, the parameters), known by where that name lies. */
static void critical_of(sim_net *a, critical_copies *c)
{
    const net *m = a->m;
    const int L = m->nlayers;
    const char *const *tags = NULL;
    const int count = device_sim_critical(m->dev, &tags);
    if (count > 0 && !a->by_address && (a->by_address = malloc((size_t)L * sizeof *a->by_address))) {
        memcpy(a->by_address, m->layers, (size_t)L * sizeof *a->by_address);
        qsort(a->by_address, (size_t)L, sizeof *a->by_address, cmp_address);
    }
    const uintptr_t maps = (uintptr_t)m->maps + offsetof(fmap, name);
    c->valid = count >= 0 && (count == 0 || a->by_address);
    for (int k = 0; k < count && c->valid; k++) {
        const uintptr_t t = (uintptr_t)tags[k];
        if (m->maps && t >= maps && (t - maps) % sizeof(fmap) == 0 && (t - maps) / sizeof(fmap) <= (uintptr_t)L) {
            c->maps[(t - maps) / sizeof(fmap)] = 1;
            continue;
        }
        /* a layer whose name it is (the address of that name less its place in the layer) */
        const layer *l = (const layer *)(t - offsetof(layer, name));
        const layer *const *at = bsearch(&l, a->by_address, (size_t)L, sizeof *a->by_address, cmp_address);
        const int i = at ? (*at)->index : -1;
        if (i >= 0 && i < L && m->layers[i] == *at) c->params[i] = 1;
        else c->valid = 0;   /* a copy of nothing known: every change may gain */
    }
}

/* net_replay of plan p on net a, the evaluation batch's marks taken from the memo where
 * it has them: the pool as attached (what the evaluation starts from after a step that
 * returned every block) then places the same blocks. Its marks kept are those it
 * reaches from the attached ones; the step's and its together are the larger of each,
 * as when it runs on from the step's. */
static vdnn_status replay(simulator *s, sim_net *a, const plan *p, size_t cap, double *time_s, critical_copies *c)
{
    net *m = a->m;
    pool *pl = device_pool(a->d);
    vdnn_status st = net_replay_step(m, m->minibatch, time_s, &s->busy_s);
    if (st != VDNN_OK) return st;
    if (c) critical_of(a, c);
    const uint64_t h = !pool_pending_bytes(pl) && pool_state_key(pl) == a->attached ? eval_key(s, m, p) : 0;
    const pool_marks *kept = h ? memo_get(&s->evals, h) : NULL;
    const pool_marks step = pool_get_marks(pl);
    pool_marks e;
    if (kept) {
        s->eval_hits++;
        e = *kept;
        if (cap && e.frontier_peak > cap) return VDNN_EBUDGET;
    } else {
        if (h) pool_set_marks(pl, a->marks);
        st = net_replay_eval(m);
        if (st != VDNN_OK) return st;
        e = pool_get_marks(pl);
        if (h) memo_put(&s->evals, h, &e);
    }
    s->eval_peaks += e.frontier_peak > step.frontier_peak;
    pool_set_marks(pl, (pool_marks){
                           .peak = step.peak > e.peak ? step.peak : e.peak,
                           .live_peak = step.live_peak > e.live_peak ? step.live_peak : e.live_peak,
                           .frontier_peak = step.frontier_peak > e.frontier_peak ? step.frontier_peak : e.frontier_peak,
                       });
    return VDNN_OK;
}

/* The net to replay p on (net_for), running p, its clocks at 0. A plan the net cannot
 * run leaves it as it was, still clean. */
static vdnn_status ready(simulator *s, const plan *p, int critical, sim_net **out)
{
    sim_net *a = NULL;
    vdnn_status st = net_for(s, p, &a);
    if (st != VDNN_OK) return st;
    st = a->has_applied ? plan_apply_from(a->m, p, &a->applied) : plan_apply(a->m, p);
    if (st != VDNN_OK) return st;
    a->clean = 0;
    remember_applied(a, p);
    sim_model model = {0};
    if (s->pr) {
        model.h2d_bytes_per_s = s->pr->h2d_bytes_per_s;
        model.d2h_bytes_per_s = s->pr->d2h_bytes_per_s;
        model.copy_latency_s = s->pr->copy_latency_s;
    }
    model.critical = critical;
    device_sim_set_model(a->d, &model);
    *out = a;
    return VDNN_OK;
}

/* (planner.h) The parameters of the layers p does not swap (net_replace_params counts
 * them alike) and the labels, placed end to end, attached afresh or placed again: the
 * pool's frontier as the replay starts. */
size_t sim_attached_bytes(const simulator *s, const plan *p)
{
    size_t b = s->label_bytes;
    for (int i = 0; i < s->net[0].m->nlayers; i++)
        if (!(p->swap && i < p->nlayers && p->swap[i])) b += s->param_bytes[i];
    return b;
}

/* A run stopped past `cap`: its peak SIZE_MAX, the real one unknown but over it. */
static void over_cap(simulator *s, uint64_t h, size_t cap, double *time_s, size_t *peak_bytes)
{
    *time_s = 1e30;
    *peak_bytes = SIZE_MAX;
    s->busy_s = 0;
    s->used_peak = SIZE_MAX;
    if (h) memo_put(&s->plans, h, &(replayed){.time_s = *time_s, .peak = SIZE_MAX, .used = SIZE_MAX, .over = cap});
}

vdnn_status sim_run_within(simulator *s, const plan *p, size_t cap, double *time_s, size_t *peak_bytes)
{
    uint64_t h = plan_key(s, p);
    const replayed *e = h ? memo_get(&s->plans, h) : NULL;
    /* a replay stopped past a cap answers for that cap and any lower one */
    if (e && (!e->over || (cap && cap <= e->over))) {
        *time_s = e->time_s;
        *peak_bytes = e->peak;
        s->used_peak = e->used;
        s->busy_s = e->busy_s;
        s->hits++;
        return VDNN_OK;
    }
    /* the parameters alone past the cap: nothing to attach or replay */
    if (cap && sim_attached_bytes(s, p) > cap) {
        over_cap(s, h, cap, time_s, peak_bytes);
        return VDNN_OK;
    }
    sim_net *a = NULL;
    vdnn_status st = ready(s, p, 0, &a);
    if (st != VDNN_OK) return st;
    pool *pl = device_pool(a->d);
    pool_set_cap(pl, cap);
    st = replay(s, a, p, cap, time_s, NULL);
    pool_set_cap(pl, 0);
    const int over = cap && st == VDNN_EBUDGET;
    s->runs++;
    if (over) {
        /* The step's failure path returned what it held (iteration.c, release_all): once
         * its work is settled, the pool is as attached again and the next replay reuses
         * it; where it is not (reusable), the next run attaches the net afresh. */
        a->clean = device_sync(a->d) == VDNN_OK;
        over_cap(s, h, cap, time_s, peak_bytes);
        return VDNN_OK;
    }
    *peak_bytes = pool_frontier_peak(pl);
    s->used_peak = pool_live_peak(pl);
    a->clean = st == VDNN_OK;
    if (st == VDNN_OK && h)
        memo_put(&s->plans, h,
                 &(replayed){.time_s = *time_s, .busy_s = s->busy_s, .peak = *peak_bytes, .used = s->used_peak});
    return st;
}

/* p replayed in full, whatever the simulator remembers of it: for what the probe records
 * (may be NULL), and where c is given, for its critical copies. */
static vdnn_status replay_anew(simulator *s, const plan *p, net_probe *probe, critical_copies *c)
{
    sim_net *a = NULL;
    vdnn_status st = ready(s, p, c != NULL, &a);
    if (st != VDNN_OK) return st;
    double t;
    a->m->probe = probe;
    st = replay(s, a, p, 0, &t, c);
    a->m->probe = NULL;
    s->runs++;
    a->clean = st == VDNN_OK;
    if (st == VDNN_OK) s->used_peak = pool_live_peak(device_pool(a->d));
    return st;
}

vdnn_status sim_probe(simulator *s, const plan *p, net_probe *probe)
{
    return replay_anew(s, p, probe, NULL);
}

void critical_copies_free(critical_copies *c)
{
    free(c->maps);
    free(c->params);
    memset(c, 0, sizeof *c);
}

vdnn_status sim_critical(simulator *s, const plan *p, critical_copies *c)
{
    critical_copies_free(c);
    const size_t L = (size_t)s->src->nlayers;
    c->maps = calloc(L + 1, 1);
    c->params = calloc(L, 1);
    if (!c->maps || !c->params) {
        critical_copies_free(c);
        return vdnn_fail(VDNN_ENOMEM, "out of host memory for the simulator");
    }
    vdnn_status st = replay_anew(s, p, NULL, c);
    if (st != VDNN_OK) c->valid = 0;
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
