/* The profile: every layer pass and algorithm timed on the device in use, the link's
 * bandwidth, and a cache of both on disk (see planner.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "nets/planner/planner.h"
#include "nets/solver.h"
#include "vdnn/file.h"
#include "vdnn/hash.h"
#include "vdnn/rng.h"

/* Timed runs per measurement, after a probe and a warm-up; the median is kept. */
#define TIMED_RUNS 3

uint64_t net_fingerprint(const net *n)
{
    uint64_t h = VDNN_HASH_START;
    char buf[256];
    for (int i = 0; i < n->nlayers; i++) {
        const layer *l = n->layers[i];
        char desc[128] = "";
        if (l->ops->describe) l->ops->describe(l, desc, sizeof desc);
        int len = snprintf(buf, sizeof buf, "%s|%d,%d,%d,%d|%d,%d,%d|%d,%d,%d|%s;", l->ops->type, l->in.n, l->in.c,
                           l->in.h, l->in.w, l->out.c, l->out.h, l->out.w, layer_algo_count(l, PASS_FWD),
                           layer_algo_count(l, PASS_BWD_DATA), layer_algo_count(l, PASS_BWD_FILTER), desc);
        for (int k = 0; k < l->ninputs && len < (int)sizeof buf; k++)
            len += snprintf(buf + len, sizeof buf - (size_t)len, "<%d", l->input[k]);
        h = vdnn_hash_bytes(h, buf, (size_t)(len < 0 ? 0 : len < (int)sizeof buf ? len : (int)sizeof buf));
    }
    return h;
}

void profile_free(profile *p)
{
    free(p->layers);
    p->layers = NULL;
}

/* Buffers for timing one layer, on the scratch device: one x and dx per input. */
typedef struct bench_bufs {
    void *x[LAYER_MAX_INPUTS], *dx[LAYER_MAX_INPUTS], *y, *dy, *ws;
    int32_t *labels;
    size_t ws_bytes;
    int passes;               /* the input whose gradient is dy's block (net_passes_dy), or -1 */
} bench_bufs;

static size_t max_workspace(const layer *l)
{
    size_t m = 0;
    for (int p = 0; p < PASS_COUNT; p++)
        for (int a = 0; a < layer_algo_count(l, p) && a < PLAN_MAX_ALGOS; a++)
            if (layer_workspace_bytes(l, p, a) > m) m = layer_workspace_bytes(l, p, a);
    return m;
}

static size_t layer_scratch_bytes(const layer *l, int items)
{
    size_t x = 0;
    for (int k = 0; k < l->ninputs; k++) x += pool_round((size_t)items * shape_per_item(l->ins[k]) * sizeof(float));
    size_t y = pool_round((size_t)items * shape_per_item(l->out) * sizeof(float));
    return 2 * x + 2 * y + pool_round(max_workspace(l)) + layer_param_bytes(l) +
           pool_round((size_t)items * sizeof(int32_t)) + (8 + 2 * (size_t)l->ninputs) * POOL_ALIGN;
}

static vdnn_status bench_alloc(layer *l, device *d, int items, bench_bufs *b)
{
    size_t yb = (size_t)items * shape_per_item(l->out) * sizeof(float);
    vdnn_status st = layer_bind(l, d);
    b->ws_bytes = max_workspace(l);
    if (st == VDNN_OK) st = layer_alloc_params(l, d, 1);
    for (int k = 0; k < l->ninputs && st == VDNN_OK; k++) {
        size_t xb = (size_t)items * shape_per_item(l->ins[k]) * sizeof(float);
        st = device_alloc(d, xb, l->name, "x (measuring)", &b->x[k]);
        if (st == VDNN_OK) st = device_alloc(d, xb, l->name, "dx (measuring)", &b->dx[k]);
        /* random values, not zeros: branches on signs (ReLU, max pooling) must cost what
         * they cost on real data; drawn on the device, not on the host and copied */
        if (st == VDNN_OK) st = device_fill_normal(d, b->x[k], xb / sizeof(float), 1 + 16 * (uint64_t)k);
    }
    if (st == VDNN_OK) st = device_alloc(d, yb, l->name, "y (measuring)", &b->y);
    if (st == VDNN_OK) st = device_alloc(d, yb, l->name, "dy (measuring)", &b->dy);
    if (st == VDNN_OK) st = device_alloc(d, (size_t)items * sizeof(int32_t), l->name, "labels", (void **)&b->labels);
    /* The largest workspace that fits: an algorithm that needs more cannot run in this
     * budget and is not measured (on a GPU, some need gigabytes). */
    while (st == VDNN_OK && b->ws_bytes) {
        st = device_alloc(d, b->ws_bytes, l->name, "workspace (measuring)", &b->ws);
        if (st != VDNN_EBUDGET) break;
        size_t smaller = 0;
        for (int p = 0; p < PASS_COUNT; p++)
            for (int a = 0; a < layer_algo_count(l, p) && a < PLAN_MAX_ALGOS; a++)
                if (layer_workspace_bytes(l, p, a) < b->ws_bytes && layer_workspace_bytes(l, p, a) > smaller)
                    smaller = layer_workspace_bytes(l, p, a);
        b->ws_bytes = smaller;
        st = VDNN_OK;
    }
    if (st == VDNN_OK) st = device_fill_normal(d, b->dy, yb / sizeof(float), 2);
    if (st == VDNN_OK) st = device_zero(d, b->labels, (size_t)items * sizeof(int32_t));
    return st;
}

static void bench_free(layer *l, device *d, bench_bufs *b)
{
    void *bufs[] = {b->ws, b->labels, b->dy, b->y};
    for (int i = 0; i < 4; i++)
        if (bufs[i]) device_free(d, bufs[i]);
    for (int k = l->ninputs - 1; k >= 0; k--) {
        if (b->dx[k]) device_free(d, b->dx[k]);
        if (b->x[k]) device_free(d, b->x[k]);
    }
    layer_free_params(l, d);
    memset(b, 0, sizeof *b);
}

enum { RUN_FWD, RUN_BWD, RUN_BWD_FILTER, RUN_UPDATE, RUN_ACCUM };

/* with_dx: bit k, compute input k's gradient. */
static vdnn_status run_once(layer *l, device *d, bench_bufs *b, exec_ctx *c, int what, unsigned with_dx)
{
    const float *xs[LAYER_MAX_INPUTS];
    float *dxs[LAYER_MAX_INPUTS];
    for (int k = 0; k < l->ninputs; k++) {
        xs[k] = b->x[k];
        dxs[k] = !(with_dx >> k & 1) ? NULL : k == b->passes ? b->dy : b->dx[k];
    }
    if (what == RUN_FWD) return layer_forward_n(l, c, xs, b->y);
    if (what == RUN_UPDATE) {
        vdnn_status st = VDNN_OK;
        for (int p = 0; p < l->nparams && st == VDNN_OK; p++)
            if (l->params[p].trainable) st = solver_update(d, &l->params[p], 1e-9, 0.9, 0);
        return st;
    }
    if (what == RUN_ACCUM) return layer_accumulate(l, d, b->dx[0], b->x[0], (size_t)c->n * shape_per_item(l->in));
    return layer_backward_n(l, c, xs, b->y, b->dy, dxs);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Whether a probe of n items can run `algo` in the workspace of the measuring: some
 * algorithms need more at a smaller batch than at the whole (oneDNN's Winograd), and the
 * layer would then run another in their place, whose time is not theirs. */
static int probe_fits(const layer *l, int n, const int algo[PASS_COUNT], int what, size_t ws_bytes)
{
    for (int pass = 0; pass < PASS_COUNT; pass++) {
        int runs = what == RUN_FWD ? pass == PASS_FWD : what == RUN_BWD ? pass != PASS_FWD
                 : what == RUN_BWD_FILTER ? pass == PASS_BWD_FILTER : 0;
        if (runs && layer_workspace_bytes_at(l, n, pass, algo[pass]) > ws_bytes) return 0;
    }
    return 1;
}

/* Seconds of one call with the layer's algorithms set to `algo`. A probe on an eighth
 * of the items comes first: a call whose probe alone, scaled up, is three times
 * `bar` is out (so slow loops cost little to rule out) and gets the scaled probe;
 * the others get a warm-up and the median of TIMED_RUNS full calls. */
static vdnn_status time_call(layer *l, device *d, bench_bufs *b, int items, const int algo[PASS_COUNT], int what,
                             unsigned with_dx, double bar, double *secs)
{
    int saved[PASS_COUNT];
    memcpy(saved, l->algo, sizeof saved);
    memcpy(l->algo, algo, sizeof saved);
    double loss = 0;
    int correct = 0;
    exec_ctx c = {.dev = d, .n = items, .train = 1, .workspace = b->ws, .workspace_bytes = b->ws_bytes,
                  .labels = b->labels, .grad_scale = 1.0f / (float)items, .loss_sum = &loss, .correct = &correct};
    int probe = items / 8 > 0 ? items / 8 : 1;
    if (!probe_fits(l, probe, algo, what, b->ws_bytes)) probe = items;
    double t[TIMED_RUNS];
    vdnn_status st = VDNN_OK;
    *secs = 0;
    for (int run = 0; run < TIMED_RUNS + 2 && st == VDNN_OK; run++) {
        c.n = run == 0 && what != RUN_UPDATE ? probe : items;
        double t0 = vdnn_now_s();
        st = run_once(l, d, b, &c, what, with_dx);
        /* a kernel that failed after its launch shows here: no time for it */
        if (st == VDNN_OK) st = device_stream_sync(d, STREAM_COMPUTE);
        if (st == VDNN_OK) st = device_poll(d);
        if (st != VDNN_OK) break;
        double dt = vdnn_now_s() - t0;
        if (run == 0) {
            dt *= (double)items / c.n;
            if (dt > 3 * bar) {
                *secs = dt;
                break;
            }
        }
        if (run >= 2) t[run - 2] = dt;
        if (run == TIMED_RUNS + 1) {
            qsort(t, TIMED_RUNS, sizeof *t, cmp_double);
            *secs = t[TIMED_RUNS / 2];
        }
    }
    memcpy(l->algo, saved, sizeof saved);
    return st;
}

static double best_of(const double *t, int count)
{
    double b = 1e30;
    for (int a = 0; a < count; a++)
        if (t[a] < b) b = t[a];
    return b;
}

static int argmin_of(const double *t, int count)
{
    int b = 0;
    for (int a = 1; a < count; a++)
        if (t[a] < t[b]) b = a;
    return b;
}

/* The k-th algorithm of a pass in order of decreasing workspace: the likely fastest
 * first, so that it sets the bar the slow ones must pass. */
static int by_workspace(const layer *l, int pass, int k)
{
    int count = layer_algo_count(l, pass) < PLAN_MAX_ALGOS ? layer_algo_count(l, pass) : PLAN_MAX_ALGOS;
    int order[PLAN_MAX_ALGOS];
    for (int i = 0; i < count; i++) order[i] = i;
    for (int i = 1; i < count; i++)
        for (int j = i; j > 0 && layer_workspace_bytes(l, pass, order[j]) > layer_workspace_bytes(l, pass, order[j - 1]);
             j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    return order[k];
}

static int algos(const layer *l, int pass)
{
    int c = layer_algo_count(l, pass);
    return c < PLAN_MAX_ALGOS ? c : PLAN_MAX_ALGOS;
}

/* Every pass of one layer. Filter-gradient algorithms are timed alone (no dx); each
 * data-gradient algorithm as the whole backward with the fastest filter algorithm,
 * less that one's time. The first layer computes no dx, so its data time is 0. */
static void scale_cost(layer_cost *lc, double k)
{
    for (int a = 0; a < PLAN_MAX_ALGOS; a++) {
        if (lc->fwd_s[a] < 1e30) lc->fwd_s[a] *= k;
        if (lc->bwd_data_s[a] < 1e30) lc->bwd_data_s[a] *= k;
        if (lc->bwd_filter_s[a] < 1e30) lc->bwd_filter_s[a] *= k;
    }
}

/* On a GPU, a layer whose library searches its own algorithms (cuDNN's Find) is timed
 * that way, on the same buffers: every algorithm of every pass in one call, timed with
 * CUDA events. Returns 0 when there is no such search or it failed (the layer is then
 * timed call by call like any other). */
static int find_all(layer *l, device *d, bench_bufs *b, int items, unsigned with_dx, layer_cost *lc)
{
    if (!layer_has_search(l, d)) return 0;
    double t[PASS_COUNT][LAYER_MAX_ALGOS];
    double loss = 0;
    int correct = 0;
    exec_ctx c = {.dev = d, .n = items, .train = 1, .workspace = b->ws, .workspace_bytes = b->ws_bytes,
                  .labels = b->labels, .grad_scale = 1.0f / (float)items, .loss_sum = &loss, .correct = &correct};
    if (layer_search(l, &c, b->x[0], b->y, b->dy, with_dx ? b->dx[0] : NULL, t) != VDNN_OK) return 0;
    for (int a = 0; a < algos(l, PASS_FWD); a++) lc->fwd_s[a] = t[PASS_FWD][a];
    for (int a = 0; a < algos(l, PASS_BWD_FILTER); a++) lc->bwd_filter_s[a] = t[PASS_BWD_FILTER][a];
    for (int a = 0; a < algos(l, PASS_BWD_DATA); a++) lc->bwd_data_s[a] = with_dx ? t[PASS_BWD_DATA][a] : 0;
    return 1;
}

/* Whether an algorithm can be timed: its workspace fits, and it has not failed to run. */
static int runnable(const layer *l, int pass, int algo, size_t ws_bytes)
{
    return layer_workspace_bytes(l, pass, algo) <= ws_bytes && layer_algo_usable(l, pass, algo);
}

/* An algorithm that failed while it was timed (the layer ran another in its place) gets
 * no time: no plan may pick it. */
static void drop_failed(const layer *l, int pass, int algo, double *secs)
{
    if (!layer_algo_usable(l, pass, algo)) *secs = LAYER_UNMEASURED;
}

/* What a layer's costs depend on besides itself: which of its inputs get a gradient
 * (bit k), and whether a second reader's gradient part is added into its input's. */
typedef struct layer_role {
    unsigned with_dx;
    int accum;
    int passes;               /* net_passes_dy */
} layer_role;

static vdnn_status measure_layer(layer *l, device *d, int items, layer_role role, layer_cost *lc, int *short_ws)
{
    bench_bufs b = {0};
    vdnn_status st = bench_alloc(l, d, items, &b);
    b.passes = role.passes;
    if (st == VDNN_OK && b.ws_bytes < max_workspace(l)) *short_ws = 1;
    int nf = algos(l, PASS_FWD), nd = algos(l, PASS_BWD_DATA), nb = algos(l, PASS_BWD_FILTER);
    int a3[PASS_COUNT] = {0, 0, 0};
    unsigned with_dx = role.with_dx;
    for (int k = 0; k < PLAN_MAX_ALGOS; k++) lc->fwd_s[k] = lc->bwd_data_s[k] = lc->bwd_filter_s[k] = 1e30;
    if (st == VDNN_OK && find_all(l, d, &b, items, with_dx, lc)) nf = nb = nd = 0;   /* the library timed them */
    for (int k = 0; k < nf && st == VDNN_OK; k++) {
        a3[PASS_FWD] = by_workspace(l, PASS_FWD, k);
        if (!runnable(l, PASS_FWD, a3[PASS_FWD], b.ws_bytes)) continue;
        st = time_call(l, d, &b, items, a3, RUN_FWD, 0, best_of(lc->fwd_s, nf), &lc->fwd_s[a3[PASS_FWD]]);
        drop_failed(l, PASS_FWD, a3[PASS_FWD], &lc->fwd_s[a3[PASS_FWD]]);
    }
    a3[PASS_FWD] = 0;
    if (!l->ops->algo_count) {
        if (st == VDNN_OK) st = time_call(l, d, &b, items, a3, RUN_BWD, with_dx, 1e30, &lc->bwd_data_s[0]);
        lc->bwd_filter_s[0] = 0;
    } else {
        for (int k = 0; k < nb && st == VDNN_OK; k++) {
            a3[PASS_BWD_FILTER] = by_workspace(l, PASS_BWD_FILTER, k);
            if (!runnable(l, PASS_BWD_FILTER, a3[PASS_BWD_FILTER], b.ws_bytes)) continue;
            st = time_call(l, d, &b, items, a3, RUN_BWD_FILTER, 0, best_of(lc->bwd_filter_s, nb),
                           &lc->bwd_filter_s[a3[PASS_BWD_FILTER]]);
            drop_failed(l, PASS_BWD_FILTER, a3[PASS_BWD_FILTER], &lc->bwd_filter_s[a3[PASS_BWD_FILTER]]);
        }
        int bf = argmin_of(lc->bwd_filter_s, nb);
        a3[PASS_BWD_FILTER] = bf;
        for (int k = 0; k < nd && st == VDNN_OK; k++) {
            a3[PASS_BWD_DATA] = by_workspace(l, PASS_BWD_DATA, k);
            double *t = &lc->bwd_data_s[a3[PASS_BWD_DATA]];
            if (!with_dx) {
                *t = 0;
                continue;
            }
            if (!runnable(l, PASS_BWD_DATA, a3[PASS_BWD_DATA], b.ws_bytes)) continue;
            st = time_call(l, d, &b, items, a3, RUN_BWD, 1, best_of(lc->bwd_data_s, nd) + lc->bwd_filter_s[bf], t);
            *t = *t > lc->bwd_filter_s[bf] ? *t - lc->bwd_filter_s[bf] : 0;
            drop_failed(l, PASS_BWD_DATA, a3[PASS_BWD_DATA], t);
        }
    }
    lc->update_s = lc->accum_s = 0;
    if (st == VDNN_OK && l->nparams) st = time_call(l, d, &b, items, a3, RUN_UPDATE, 0, 1e30, &lc->update_s);
    if (st == VDNN_OK && role.accum) st = time_call(l, d, &b, items, a3, RUN_ACCUM, 0, 1e30, &lc->accum_s);
    bench_free(l, d, &b);
    return st == VDNN_OK ? VDNN_OK : vdnn_wrap(st, "measuring %s", l->name);
}

/* Layer i's role in the net (layer_role). */
static layer_role role_of(const net *n, int i)
{
    const layer *l = n->layers[i];
    layer_role r = {0, 0, net_passes_dy(n, i)};
    for (int k = 0; k < l->ninputs; k++) {
        const net_map *m = &n->graph[l->input[k]];
        if (m->grad) r.with_dx |= 1u << k;
        if (m->grad && m->readers > 1 && !l->ops->accumulates_dx) r.accum = 1;
    }
    return r;
}

/* Whether layers i and j of n cost the same: the same type, shapes, settings and role
 * (a deep net repeats a few blocks: each distinct layer is measured once). */
static int same_cost(const net *n, int i, int j)
{
    const layer *a = n->layers[i], *b = n->layers[j];
    layer_role ra = role_of(n, i), rb = role_of(n, j);
    if (a->ops != b->ops || a->ninputs != b->ninputs || ra.with_dx != rb.with_dx || ra.accum != rb.accum ||
        ra.passes != rb.passes || memcmp(&a->out, &b->out, sizeof a->out) ||
        memcmp(a->ins, b->ins, (size_t)a->ninputs * sizeof *a->ins))
        return 0;
    for (int p = 0; p < PASS_COUNT; p++)
        if (layer_algo_count(a, p) != layer_algo_count(b, p)) return 0;
    char da[128] = "", db[128] = "";
    if (a->ops->describe) a->ops->describe(a, da, sizeof da), b->ops->describe(b, db, sizeof db);
    return !strcmp(da, db);
}

/* Seconds per copy of `bytes` in `kind` (both directions alternating when kind < 0),
 * on the memory stream, over `count` copies; *st gets the first failure. */
static double time_copies(device *d, void *dev, void *host, size_t bytes, int kind, int count, vdnn_status *st)
{
    if (*st == VDNN_OK) *st = device_stream_sync(d, STREAM_MEMORY);
    double t0 = vdnn_now_s();
    for (int i = 0; i < count && *st == VDNN_OK; i++) {
        int k = kind >= 0 ? kind : (i % 2 ? COPY_D2H : COPY_H2D);
        if (k == COPY_H2D) *st = device_copy(d, STREAM_MEMORY, dev, host, bytes, COPY_H2D);
        else *st = device_copy(d, STREAM_MEMORY, host, dev, bytes, COPY_D2H);
    }
    if (*st == VDNN_OK) *st = device_stream_sync(d, STREAM_MEMORY);
    return (vdnn_now_s() - t0) / count;
}

/* The link: bandwidth per direction and both at once from copies the size of the
 * net's largest map (1 to 64 MiB), latency from small copies. */
static vdnn_status measure_link(device *d, size_t bytes, profile *p)
{
    void *dev = NULL, *host = device_host_alloc(d, bytes);
    vdnn_status st = host ? device_alloc(d, bytes, "link", "measuring", &dev) : VDNN_ENOMEM;
    if (st != VDNN_OK) {
        device_host_free(d, host);
        return st == VDNN_ENOMEM ? vdnn_fail(st, "out of host memory measuring the link") : st;
    }
    memset(host, 0, bytes);
    st = device_zero(d, dev, bytes);
    int count = 6;
    double lat = time_copies(d, dev, host, POOL_ALIGN, COPY_H2D, 32, &st);
    time_copies(d, dev, host, bytes, COPY_H2D, 1, &st);
    double h2d = time_copies(d, dev, host, bytes, COPY_H2D, count, &st);
    double d2h = time_copies(d, dev, host, bytes, COPY_D2H, count, &st);
    double both = time_copies(d, dev, host, bytes, -1, count, &st);
    p->copy_latency_s = lat;
    p->h2d_bytes_per_s = (double)bytes / (h2d > lat ? h2d - lat : h2d);
    p->d2h_bytes_per_s = (double)bytes / (d2h > lat ? d2h - lat : d2h);
    p->duplex_bytes_per_s = (double)bytes / both;
    device_free(d, dev);
    device_host_free(d, host);
    return st;
}

/* A device whose memory is the host's is measured on a fresh one of `threads` threads
 * and that link: the key names them. Another is measured on itself: its model. */
static void device_key(const device *d, double link_gbps, int threads, char *buf, size_t len)
{
    if (device_memory_is_host(d))
        snprintf(buf, len, "cpu threads=%d link_gbps=%g", threads, link_gbps);
    else
        snprintf(buf, len, "%s", device_model(d));
}

static FILE *progress_out;
static int progress_tty;

void profile_show_progress(FILE *f, int tty)
{
    progress_out = f;
    progress_tty = tty;
}

/* What is being measured and how far: on a terminal one line redrawn at most every
 * second, elsewhere a line every PROGRESS_EVERY_S seconds (none for a quick profile). */
#define PROGRESS_EVERY_S 10.0
static void show_progress(const net *m, int i, double t0, double *last)
{
    double now = vdnn_now_s(), every = progress_tty ? 1.0 : PROGRESS_EVERY_S;
    if (!progress_out || now - *last < every || now - t0 < every) return;
    *last = now;
    char eta[64] = "";
    if (i > 0) snprintf(eta, sizeof eta, ", about %.0f s left", (now - t0) * (m->nlayers - i) / i);
    fprintf(progress_out, "%svdnn: profiling %s (layer %d of %d), %.0f s so far%s%s", progress_tty ? "\r" : "",
            m->layers[i]->name, i + 1, m->nlayers, now - t0, eta, progress_tty ? "\033[K" : "\n");
    fflush(progress_out);
}

/* Unix time, to the nanosecond. */
static double wall_s(void)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

/* When, and under what load, a profile is measured. */
static void stamp(profile *out)
{
    double load = -1;
    out->measured_at = wall_s();
    out->load = getloadavg(&load, 1) == 1 ? load : -1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    out->cores = cores > 0 ? (int)cores : 0;
}

/* Every layer of m on device s (its own, or the training device's pool: `own` 0), each
 * distinct one measured once, with progress; into out->layers. */
static vdnn_status measure_layers(net *m, device *s, int own, int items, double t0, profile *out)
{
    int *first = malloc((size_t)m->nlayers * sizeof *first), distinct = 0;
    if (!first) return vdnn_fail(VDNN_ENOMEM, "out of host memory for a profile");
    vdnn_status st = VDNN_OK;
    double shown = 0;
    for (int i = 0; i < m->nlayers && st == VDNN_OK; i++) {
        show_progress(m, i, t0, &shown);
        int same = -1;
        for (int k = 0; k < distinct && same < 0; k++)
            if (same_cost(m, first[k], i)) same = first[k];
        if (same >= 0) {
            out->layers[i] = out->layers[same];
            continue;
        }
        first[distinct++] = i;
        /* in a GPU's own pool a layer's buffers may not fit at the whole batch: fewer
         * items, times scaled up (compute grows about linearly with the items) */
        int part = items;
        while ((st = measure_layer(m->layers[i], s, part, role_of(m, i), &out->layers[i], &out->partial)) ==
                   VDNN_EBUDGET &&
               !own && part > 1)
            part /= 2;
        if (st == VDNN_OK && part < items) {
            scale_cost(&out->layers[i], (double)items / part);
            out->partial = 1;
        }
    }
    free(first);
    if (progress_out && progress_tty && shown > 0) {
        fprintf(progress_out, "\r\033[K");
        fflush(progress_out);
    }
    return st;
}

vdnn_status profile_measure(const net *n, device *d, double link_gbps, int threads, profile *out)
{
    memset(out, 0, sizeof *out);
    double t0 = vdnn_now_s();
    stamp(out);
    net *m = NULL;
    vdnn_status st = net_clone(n, &m);
    if (st != VDNN_OK) return st;
    int items = n->input.n;
    size_t need = 0, largest_map = shape_bytes(n->input);
    for (int i = 0; i < m->nlayers; i++) {
        size_t b = layer_scratch_bytes(m->layers[i], items);
        if (b > need) need = b;
        if (shape_bytes(m->layers[i]->out) > largest_map) largest_map = shape_bytes(m->layers[i]->out);
    }
    size_t link_bytes = largest_map < ((size_t)1 << 20) ? (size_t)1 << 20 : largest_map > ((size_t)64 << 20) ? (size_t)64 << 20 : largest_map;
    if (link_bytes + POOL_ALIGN > need) need = link_bytes + POOL_ALIGN;
    device_options o = {.kind = device_get_options(d)->kind, .budget_bytes = need + POOL_ALIGN, .threads = threads,
                        .link_gbps = link_gbps};
    /* A GPU measures in its own pool (a second slab might not fit beside the first); the
     * CPU device in a fresh arena of its own. */
    int own = device_memory_is_host(d);
    device *s = own ? NULL : d;
    if (own) st = device_create(&o, &s);
    out->layers = calloc((size_t)m->nlayers, sizeof *out->layers);
    if (st == VDNN_OK && !out->layers) st = vdnn_fail(VDNN_ENOMEM, "out of host memory for a profile");
    out->nlayers = m->nlayers;
    out->batch = items;
    out->net_key = net_fingerprint(n);
    device_key(d, link_gbps, threads, out->device, sizeof out->device);
    if (st == VDNN_OK) st = measure_layers(m, s, own, items, t0, out);
    if (st == VDNN_OK) st = measure_link(s, link_bytes, out);
    if (own) device_destroy(s);
    else pool_reset_peak(device_pool(s));   /* the measuring is not the training's peak */
    net_free(m);
    out->measure_s = vdnn_now_s() - t0;
    if (st != VDNN_OK) profile_free(out);
    return st;
}

/* ---- the cache file ---- */

vdnn_status profile_save(const profile *p, const char *path)
{
    /* named after this process: two jobs that measure the same net at once each write
     * their own file, and the last rename wins whole */
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return vdnn_fail(VDNN_EIO, "cannot write profile %s: %s", tmp, strerror(errno));
    fprintf(f, "vdnn-profile %d\ndevice %s\nnet %016llx\nbatch %d\nlayers %d\n", PROFILE_VERSION, p->device,
            (unsigned long long)p->net_key, p->batch, p->nlayers);
    fprintf(f, "link %.9g %.9g %.9g %.9g\nmeasure_s %.6g\nmeasured %.3f %.3g %d\n", p->h2d_bytes_per_s,
            p->d2h_bytes_per_s, p->duplex_bytes_per_s, p->copy_latency_s, p->measure_s, p->measured_at, p->load,
            p->cores);
    for (int i = 0; i < p->nlayers; i++) {
        const layer_cost *c = &p->layers[i];
        fprintf(f, "layer %d %.9g %.9g\n", i, c->update_s, c->accum_s);
        const double *rows[3] = {c->fwd_s, c->bwd_data_s, c->bwd_filter_s};
        for (int r = 0; r < 3; r++) {
            int count = 0;
            for (int a = 0; a < PLAN_MAX_ALGOS; a++)
                if (rows[r][a] < 1e29) count = a + 1;
            fprintf(f, "%d", count);
            for (int a = 0; a < count; a++) fprintf(f, " %.9g", rows[r][a]);
            fputc('\n', f);
        }
    }
    int bad = ferror(f);
    if (fclose(f) != 0 || bad || rename(tmp, path) != 0) {
        remove(tmp);
        return vdnn_fail(VDNN_EIO, "cannot write profile %s", path);
    }
    return VDNN_OK;
}

static vdnn_status bad_line(const char *path, int line, const char *what)
{
    return vdnn_fail(VDNN_EFORMAT, "%s:%d: malformed profile (%s); delete it to measure again", path, line, what);
}

static int read_row(FILE *f, double *row)
{
    int count = 0;
    if (fscanf(f, "%d", &count) != 1 || count < 0 || count > PLAN_MAX_ALGOS) return 0;
    for (int a = 0; a < PLAN_MAX_ALGOS; a++) row[a] = 1e30;
    for (int a = 0; a < count; a++)
        if (fscanf(f, "%lf", &row[a]) != 1 || !(row[a] >= 0)) return 0;
    return 1;
}

/* The largest profile file read: a few lines per layer. */
#define PROFILE_MAX_BYTES ((size_t)64 << 20)
/* The least bytes a layer takes in the file ("layer 0 0" and three empty rows). */
#define PROFILE_LAYER_MIN_BYTES 16

vdnn_status profile_load(const char *path, profile *out)
{
    memset(out, 0, sizeof *out);
    FILE *f = NULL;
    long long size = 0;
    vdnn_status opened = vdnn_file_open(path, "profile", PROFILE_MAX_BYTES, 0, &f, &size);
    if (opened != VDNN_OK) return opened;
    unsigned long long key = 0;
    int version = 0;
    vdnn_status st = VDNN_OK;
    if (fscanf(f, "vdnn-profile %d\n", &version) != 1 || version < 2 || version > PROFILE_VERSION)
        st = bad_line(path, 1, "not a vdnn profile of a version this build reads");
    else if (fscanf(f, "device %159[^\n]\n", out->device) != 1) st = bad_line(path, 2, "device");
    else if (fscanf(f, "net %llx\n", &key) != 1) st = bad_line(path, 3, "net");
    else if (fscanf(f, "batch %d\n", &out->batch) != 1 || out->batch < 1) st = bad_line(path, 4, "batch");
    else if (fscanf(f, "layers %d\n", &out->nlayers) != 1 || out->nlayers < 1 || out->nlayers > 100000 ||
             out->nlayers > size / PROFILE_LAYER_MIN_BYTES)
        st = bad_line(path, 5, "layers");
    else if (fscanf(f, "link %lf %lf %lf %lf\n", &out->h2d_bytes_per_s, &out->d2h_bytes_per_s,
                    &out->duplex_bytes_per_s, &out->copy_latency_s) != 4 || !(out->h2d_bytes_per_s > 0) ||
             !(out->d2h_bytes_per_s > 0) || !(out->copy_latency_s >= 0))
        st = bad_line(path, 6, "link");
    else if (fscanf(f, "measure_s %lf\n", &out->measure_s) != 1) st = bad_line(path, 7, "measure_s");
    else if (version >= 3 && (fscanf(f, "measured %lf %lf %d\n", &out->measured_at, &out->load, &out->cores) != 3 ||
                              !(out->measured_at >= 0) || out->cores < 0))
        st = bad_line(path, 8, "measured");
    if (version < 3) out->load = -1;
    int first_layer_line = version >= 3 ? 9 : 8;
    out->net_key = key;
    if (st == VDNN_OK && !(out->layers = calloc((size_t)out->nlayers, sizeof *out->layers)))
        st = vdnn_fail(VDNN_ENOMEM, "out of host memory reading %s", path);
    for (int i = 0; i < out->nlayers && st == VDNN_OK; i++) {
        layer_cost *c = &out->layers[i];
        int idx = -1;
        if (fscanf(f, " layer %d %lf %lf", &idx, &c->update_s, &c->accum_s) != 3 || idx != i || !(c->accum_s >= 0) ||
            !read_row(f, c->fwd_s) ||
            !read_row(f, c->bwd_data_s) || !read_row(f, c->bwd_filter_s))
            st = bad_line(path, first_layer_line + 4 * i, "layer costs");
    }
    fclose(f);
    if (st != VDNN_OK) profile_free(out);
    else snprintf(out->path, sizeof out->path, "%s", path);
    return st;
}

static const char *default_dir;

void profile_cache_default(const char *dir) { default_dir = dir; }

static const char *cache_dir(const char *dir, char *buf, size_t len)
{
    if (dir) return dir;
    if (default_dir) return default_dir;
    return vdnn_cache_dir(buf, len);
}

vdnn_status profile_cache_path(const net *n, const char *device_desc, const char *dir, char *buf, size_t len)
{
    char d[1024];
    const char *folder = cache_dir(dir, d, sizeof d);
    uint64_t h = net_fingerprint(n) ^ ((uint64_t)n->input.n * 0x9e3779b97f4a7c15ull);
    for (const char *c = device_desc; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    int w = snprintf(buf, len, "%s/profile-%016llx.txt", folder, (unsigned long long)h);
    if (w < 0 || (size_t)w >= len) return vdnn_fail(VDNN_EINVAL, "profile cache path too long: %s", folder);
    return VDNN_OK;
}

static int matches(const profile *p, const net *n, const char *key)
{
    return p->net_key == net_fingerprint(n) && p->batch == n->input.n && p->nlayers == n->nlayers &&
           !strcmp(p->device, key);
}

static double refresh_before;

void profile_refresh(void) { refresh_before = wall_s(); }

void profile_describe(const profile *p, char *buf, size_t len)
{
    if (!(p->measured_at > 0)) {
        snprintf(buf, len, "measured at an unknown time");
        return;
    }
    time_t t = (time_t)p->measured_at;
    struct tm tm;
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M", localtime_r(&t, &tm));
    int w = snprintf(buf, len, "measured %s", when);
    if (p->load >= 0 && w >= 0 && (size_t)w < len)
        snprintf(buf + w, len - (size_t)w, ", load %.1f on %d core%s", p->load, p->cores, p->cores == 1 ? "" : "s");
}

/* The cached profile's path into path; 1 (and *out filled) when it holds one that
 * matches the net and device and is not older than --reprofile. */
static int cached_profile(const net *n, device *d, double link_gbps, int threads, const char *dir, char *path,
                          size_t len, profile *out, vdnn_status *st)
{
    char key[160];
    device_key(d, link_gbps, threads, key, sizeof key);
    *st = profile_cache_path(n, key, dir, path, len);
    if (*st != VDNN_OK || profile_load(path, out) != VDNN_OK) return 0;
    if (matches(out, n, key) && !(out->measured_at < refresh_before)) {
        out->measure_s = 0;
        return 1;
    }
    profile_free(out);
    return 0;
}

int profile_find(const net *n, device *d, double link_gbps, int threads, const char *dir, profile *out)
{
    char path[1200];
    vdnn_status st;
    return cached_profile(n, d, link_gbps, threads, dir, path, sizeof path, out, &st);
}

vdnn_status profile_get(const net *n, device *d, double link_gbps, int threads, const char *dir,
                        profile *out, int *cached)
{
    char path[1200];
    vdnn_status st;
    *cached = cached_profile(n, d, link_gbps, threads, dir, path, sizeof path, out, &st);
    if (*cached || st != VDNN_OK) return st;
    st = profile_measure(n, d, link_gbps, threads, out);
    if (st != VDNN_OK) return st;
    char folder[1200];
    snprintf(folder, sizeof folder, "%s", path);
    char *slash = strrchr(folder, '/');
    if (slash) {
        *slash = 0;
        vdnn_make_dirs(folder);
    }
    /* an unwritable cache only means measuring again next time; a partial profile is
     * not kept, as a larger budget would measure more */
    if (!out->partial && profile_save(out, path) == VDNN_OK) snprintf(out->path, sizeof out->path, "%s", path);
    return VDNN_OK;
}
