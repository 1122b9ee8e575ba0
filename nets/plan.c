/* The memory plan of a net: which feature maps are offloaded, which algorithm each
 * convolution pass uses, and the smallest budget the resulting iteration fits in. */
#include <stdlib.h>
#include <string.h>

#include "nets/net.h"

/* How many items the algorithm measurement runs with: enough for the batch-wide
 * algorithms to show their advantage, few enough that the slow direct loops stay short. */
#define MEASURE_ITEMS 32

static int offloads(const net *n, int j, mem_policy p)
{
    if (j >= n->nlayers || net_first_reader(n, j) < 0) return 0;
    const layer *l = n->layers[j];
    if (l->offload >= 0) return l->offload;
    if (p == POLICY_ALL) return 1;
    if (p == POLICY_CONV) return l->ops->algo_count != NULL;
    return 0;
}

static int smallest_workspace(const layer *l, int pass)
{
    int best = 0;
    for (int a = 1; a < layer_algo_count(l, pass); a++)
        if (layer_workspace_bytes(l, pass, a) < layer_workspace_bytes(l, pass, best)) best = a;
    return best;
}

static int largest_workspace(const layer *l, int pass)
{
    int best = 0;
    for (int a = 1; a < layer_algo_count(l, pass); a++)
        if (layer_workspace_bytes(l, pass, a) > layer_workspace_bytes(l, pass, best)) best = a;
    return best;
}

/* Scratch buffers for measuring one layer, on a device of its own. */
typedef struct bench_bufs {
    void *x, *y, *dy, *dx, *ws;
    size_t ws_bytes;
} bench_bufs;

/* Seconds for one call: forward (fwd >= 0), or backward with data algorithm `bd` (dx
 * computed when bd >= 0) and filter algorithm `bf`. */
static vdnn_status time_call(layer *l, device *d, bench_bufs *b, int items, int fwd, int bd, int bf,
                             double best_so_far, double *secs)
{
    int saved[PASS_COUNT];
    memcpy(saved, l->algo, sizeof saved);
    l->algo[PASS_FWD] = fwd >= 0 ? fwd : 0;
    l->algo[PASS_BWD_DATA] = bd >= 0 ? bd : 0;
    l->algo[PASS_BWD_FILTER] = bf >= 0 ? bf : 0;
    exec_ctx c = {.dev = d, .n = items, .train = 1, .workspace = b->ws, .workspace_bytes = b->ws_bytes,
                  .grad_scale = 1};
    vdnn_status st = VDNN_OK;
    *secs = 1e30;
    /* A probe on an eighth of the items first: an algorithm whose probe alone, scaled
     * up, is three times the best so far is out (so slow loops cost little to rule
     * out); the others get the best of three full runs. */
    int probe = items / 8 > 0 ? items / 8 : 1;
    for (int run = 0; run < 4 && st == VDNN_OK; run++) {
        c.n = run == 0 ? probe : items;
        double t0 = vdnn_now_s();
        st = fwd >= 0 ? layer_forward(l, &c, b->x, b->y)
                      : layer_backward(l, &c, b->x, b->y, b->dy, bd >= 0 ? b->dx : NULL);
        device_stream_sync(d, STREAM_COMPUTE);
        double t = vdnn_now_s() - t0;
        if (run == 0) {
            t *= (double)items / probe;
            if (t > 3 * best_so_far) {
                *secs = t;
                break;
            }
            continue;
        }
        if (t < *secs) *secs = t;
    }
    memcpy(l->algo, saved, sizeof saved);
    return st;
}

static size_t max_workspace(const layer *l)
{
    size_t m = 0;
    for (int p = 0; p < PASS_COUNT; p++)
        for (int a = 0; a < layer_algo_count(l, p); a++)
            if (layer_workspace_bytes(l, p, a) > m) m = layer_workspace_bytes(l, p, a);
    return m;
}

static int argmin(const double *t, int count)
{
    int best = 0;
    for (int a = 1; a < count; a++)
        if (t[a] < t[best]) best = a;
    return best;
}

#define MAX_ALGOS 16

/* The best of `count` times (unmeasured ones are 1e30). */
static double best(const double *t, int count)
{
    return count ? t[argmin(t, count)] : 1e30;
}

/* The k-th algorithm of a pass in order of decreasing workspace. */
static int by_workspace(const layer *l, int pass, int k)
{
    int order[MAX_ALGOS], n = layer_algo_count(l, pass) < MAX_ALGOS ? layer_algo_count(l, pass) : MAX_ALGOS;
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && layer_workspace_bytes(l, pass, order[j]) > layer_workspace_bytes(l, pass, order[j - 1]); j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    return order[k];
}

static vdnn_status bench_alloc(layer *l, device *d, int items, bench_bufs *b)
{
    size_t xb = (size_t)items * shape_per_item(l->in) * sizeof(float);
    size_t yb = (size_t)items * shape_per_item(l->out) * sizeof(float);
    b->ws_bytes = max_workspace(l);
    vdnn_status st = device_alloc(d, xb, l->name, "x (measuring)", &b->x);
    if (st == VDNN_OK) st = device_alloc(d, yb, l->name, "y (measuring)", &b->y);
    if (st == VDNN_OK) st = device_alloc(d, yb, l->name, "dy (measuring)", &b->dy);
    if (st == VDNN_OK) st = device_alloc(d, xb, l->name, "dx (measuring)", &b->dx);
    if (st == VDNN_OK && b->ws_bytes) st = device_alloc(d, b->ws_bytes, l->name, "workspace (measuring)", &b->ws);
    if (st == VDNN_OK) st = device_zero(d, b->x, xb);
    if (st == VDNN_OK) st = device_zero(d, b->dy, yb);
    return st;
}

static void bench_free(device *d, bench_bufs *b)
{
    void *bufs[] = {b->ws, b->dx, b->dy, b->y, b->x};
    for (int i = 0; i < 5; i++)
        if (bufs[i]) device_free(d, bufs[i]);
}

/* Measures every algorithm of every pass of a convolution and keeps the fastest of
 * each (unless pinned). The filter gradient is timed alone (no dx); the data gradient
 * as the whole backward with the fastest filter algorithm, less that one's time. */
static vdnn_status measure_layer(layer *l, device *d, int items)
{
    bench_bufs b = {0};
    vdnn_status st = bench_alloc(l, d, items, &b);
    double tf[MAX_ALGOS], tb[MAX_ALGOS], td[MAX_ALGOS];
    int nf = layer_algo_count(l, PASS_FWD), nb = layer_algo_count(l, PASS_BWD_FILTER);
    int nd = layer_algo_count(l, PASS_BWD_DATA);
    if (nf > MAX_ALGOS) nf = MAX_ALGOS;
    if (nb > MAX_ALGOS) nb = MAX_ALGOS;
    if (nd > MAX_ALGOS) nd = MAX_ALGOS;
    /* largest workspace first: the likely fastest set the bar the slow ones must pass */
    for (int k = 0; k < MAX_ALGOS; k++) tf[k] = tb[k] = td[k] = 1e30;
    for (int k = 0; k < nf && st == VDNN_OK; k++) {
        int a = by_workspace(l, PASS_FWD, k);
        st = time_call(l, d, &b, items, a, -1, 0, best(tf, nf), &tf[a]);
    }
    for (int k = 0; k < nb && st == VDNN_OK; k++) {
        int a = by_workspace(l, PASS_BWD_FILTER, k);
        st = time_call(l, d, &b, items, -1, -1, a, best(tb, nb), &tb[a]);
    }
    int bf = st == VDNN_OK ? argmin(tb, nb) : 0;
    for (int k = 0; k < nd && st == VDNN_OK; k++) {
        int a = by_workspace(l, PASS_BWD_DATA, k);
        st = time_call(l, d, &b, items, -1, a, bf, best(td, nd), &td[a]);
    }
    if (st == VDNN_OK) {
        int pick[PASS_COUNT] = {argmin(tf, nf), argmin(td, nd), bf};
        for (int p = 0; p < PASS_COUNT; p++) l->algo[p] = l->algo_pinned[p] >= 0 ? l->algo_pinned[p] : pick[p];
    }
    bench_free(d, &b);
    return st;
}

/* The fastest algorithm per pass, measured on a scratch device of the net's kind (so
 * the run's pool and budget are not touched). */
static vdnn_status measure_algos(net *n)
{
    int items = n->input.n < MEASURE_ITEMS ? n->input.n : MEASURE_ITEMS;
    size_t need = 0;
    for (int i = 0; i < n->nlayers; i++) {
        const layer *l = n->layers[i];
        if (!l->ops->algo_count) continue;
        size_t b = 2 * pool_round((size_t)items * shape_per_item(l->in) * sizeof(float)) +
                   2 * pool_round((size_t)items * shape_per_item(l->out) * sizeof(float)) +
                   pool_round(max_workspace(l));
        if (b > need) need = b;
    }
    if (!need) return VDNN_OK;
    device_options o = {.kind = device_get_kind(n->dev), .budget_bytes = need + POOL_ALIGN};
    device *d = NULL;
    vdnn_status st = device_create(&o, &d);
    for (int i = 0; i < n->nlayers && st == VDNN_OK; i++)
        if (n->layers[i]->ops->algo_count) st = measure_layer(n->layers[i], d, items);
    device_destroy(d);
    return st == VDNN_OK ? VDNN_OK : vdnn_wrap(st, "measuring convolution algorithms");
}

static void choose_without_measuring(net *n, algo_mode a)
{
    for (int i = 0; i < n->nlayers; i++) {
        layer *l = n->layers[i];
        for (int p = 0; p < PASS_COUNT; p++) {
            int pick = a == ALGO_MEM ? smallest_workspace(l, p) : largest_workspace(l, p);
            l->algo[p] = l->algo_pinned[p] >= 0 ? l->algo_pinned[p] : pick;
        }
    }
}

vdnn_status net_plan_static(net *n, mem_policy p, algo_mode a)
{
    n->policy = p;
    n->algo = a;
    for (int j = 0; n->maps && j <= n->nlayers; j++) n->maps[j].offload = offloads(n, j, p);
    choose_without_measuring(n, a);
    return VDNN_OK;
}

vdnn_status net_plan(net *n, mem_policy p, algo_mode a)
{
    net_plan_static(n, p, a);
    if (a == ALGO_PERF && n->dev && device_get_kind(n->dev) != DEVICE_SIM) return measure_algos(n);
    return VDNN_OK;
}

/* Copies n's plan (algorithms, offload flags) onto its clone m. */
static void copy_plan(net *m, const net *n)
{
    m->policy = n->policy;
    m->algo = n->algo;
    m->sync_layers = n->sync_layers;
    m->prefetch_ahead = n->prefetch_ahead;
    m->release_lag = n->release_lag;
    for (int i = 0; i < n->nlayers; i++) memcpy(m->layers[i]->algo, n->layers[i]->algo, sizeof n->layers[i]->algo);
    for (int j = 0; j <= n->nlayers; j++) m->maps[j].offload = n->maps ? n->maps[j].offload : offloads(n, j, n->policy);
}

vdnn_status net_min_budget(net *n, size_t *bytes)
{
    /* The pool decides the same way in any capacity, so one replay in a pool too large
     * to fill gives the frontier's high-water mark: the least budget that works, and
     * one that works in every larger budget. */
    device_options o = {.kind = DEVICE_SIM, .budget_bytes = (size_t)1 << 50};
    device *d = NULL;
    net *m = NULL;
    vdnn_status st = net_clone(n, &m);
    if (st == VDNN_OK) st = device_create(&o, &d);
    if (st == VDNN_OK) st = net_attach(m, d);
    if (st == VDNN_OK) {
        copy_plan(m, n);
        step_result r;
        st = net_train_step(m, NULL, NULL, m->input.n, 0.0, &r);
    }
    *bytes = d ? pool_frontier_peak(device_pool(d)) : 0;
    net_free(m);
    device_destroy(d);
    return st;
}

vdnn_status net_budget_table(net *n, size_t table[POLICY_COUNT][ALGO_MODE_COUNT])
{
    int (*saved_algo)[PASS_COUNT] = malloc((size_t)n->nlayers * sizeof *saved_algo);
    if (!saved_algo) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    for (int i = 0; i < n->nlayers; i++) memcpy(saved_algo[i], n->layers[i]->algo, sizeof saved_algo[i]);
    mem_policy saved_policy = n->policy;
    algo_mode saved_mode = n->algo;
    int saved_far = n->prefetch_ahead, saved_lag = n->release_lag;
    vdnn_status st = VDNN_OK;
    for (int a = 0; a < ALGO_MODE_COUNT && st == VDNN_OK; a++) {
        /* perf keeps the algorithms measured now if the net is in perf mode, else assumes
         * the largest-workspace ones; mem takes the smallest */
        if (a == ALGO_MEM || saved_mode != ALGO_PERF) choose_without_measuring(n, (algo_mode)a);
        for (int p = 0; p < POLICY_COUNT && st == VDNN_OK; p++) {
            n->policy = (mem_policy)p;
            for (int j = 0; n->maps && j <= n->nlayers; j++) n->maps[j].offload = offloads(n, j, (mem_policy)p);
            st = net_least_budget(n, &table[p][a]);
        }
    }
    for (int i = 0; i < n->nlayers; i++) memcpy(n->layers[i]->algo, saved_algo[i], sizeof saved_algo[i]);
    free(saved_algo);
    n->policy = saved_policy;
    n->algo = saved_mode;
    n->prefetch_ahead = saved_far;
    n->release_lag = saved_lag;
    for (int j = 0; n->maps && j <= n->nlayers; j++) n->maps[j].offload = offloads(n, j, saved_policy);
    return st;
}

/* How early copies may run, fastest first; each needs more memory than the next. */
static const struct { int ahead, lag; } overlap_modes[] = {
    {PREFETCH_FAR, 1}, {PREFETCH_NEXT, 1}, {PREFETCH_NEXT, 0}, {PREFETCH_ON_DEMAND, 0},
};

vdnn_status net_fit_budget(net *n, size_t budget, size_t *need)
{
    size_t least = 0;
    int count = (int)(sizeof overlap_modes / sizeof *overlap_modes);
    for (int k = 0; k < count; k++) {
        n->prefetch_ahead = overlap_modes[k].ahead;
        n->release_lag = overlap_modes[k].lag;
        vdnn_status st = net_min_budget(n, need);
        if (st != VDNN_OK) return st;
        if (!budget || *need <= budget) return VDNN_OK;
        if (!least || *need < least) least = *need;
    }
    *need = least;
    return VDNN_EBUDGET;
}

vdnn_status net_least_budget(net *n, size_t *bytes)
{
    int ahead = n->prefetch_ahead, lag = n->release_lag;
    vdnn_status st = net_fit_budget(n, 1, bytes);
    n->prefetch_ahead = ahead;
    n->release_lag = lag;
    return st == VDNN_EBUDGET ? VDNN_OK : st;
}
