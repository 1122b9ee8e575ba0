/* One training iteration and one evaluation batch under the net's memory policy (the
 * rules are in net.h and DESIGN.md). Every device byte comes from the pool; feature
 * maps that the plan offloads go to host memory on the memory stream during forward
 * and come back ahead of their readers during backward, as early as the net's copy
 * timing (prefetch_ahead, release_lag) allows. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nets/net.h"
#include "nets/solver.h"

static size_t map_bytes(const net *n, int i, int items)
{
    shape4 s = i == 0 ? n->input : n->layers[i - 1]->out;
    return (size_t)items * shape_per_item(s) * sizeof(float);
}

static exec_ctx make_ctx(net *n, int items, int train, step_result *r, double *loss_sum)
{
    exec_ctx c = {0};
    c.dev = n->dev;
    c.n = items;
    c.train = train;
    c.seed = n->train.seed;
    c.step = n->step;
    c.labels = n->labels;
    c.grad_scale = 1.0f / (float)items;
    c.loss_sum = loss_sum;
    c.correct = &r->correct;
    return c;
}

static const char *pass_label(int pass)
{
    return pass == PASS_FWD ? "workspace (forward)" : "workspace (backward)";
}

/* The workspace of a pass: forward uses its algorithm's; backward the larger of
 * backward-data's and backward-filter's, as one buffer serves both in turn. */
static vdnn_status take_workspace(net *n, layer *l, int pass, exec_ctx *c)
{
    size_t ws = layer_workspace_bytes(l, pass, l->algo[pass]);
    if (pass != PASS_FWD) {
        size_t f = layer_workspace_bytes(l, PASS_BWD_FILTER, l->algo[PASS_BWD_FILTER]);
        if (f > ws) ws = f;
    }
    c->workspace = NULL;
    c->workspace_bytes = ws;
    return ws ? device_alloc(n->dev, ws, l->name, pass_label(pass), &c->workspace) : VDNN_OK;
}

static void give_workspace(net *n, exec_ctx *c)
{
    if (c->workspace) device_free(n->dev, c->workspace);
    c->workspace = NULL;
}

static void barrier(net *n)
{
    if (!n->sync_layers) return;
    device_stream_sync(n->dev, STREAM_MEMORY);
    device_stream_sync(n->dev, STREAM_COMPUTE);
}

static void trace_pass(net *n, const layer *l, const char *cat, double t0)
{
    if (!n->trace) return;
    double t1 = vdnn_now_s();
    trace_slice(n->trace, TRACE_TRACK_COMPUTE, l->name, cat, t0, t1);
    trace_counter(n->trace, "pool bytes in use", t1, (double)pool_used_bytes(device_pool(n->dev)));
}

/* x[i] after its last forward reader (layer i): keep it, release it after its offload,
 * or free it when no backward pass reads it. */
static vdnn_status settle_after_forward(net *n, int i, int train)
{
    fmap *m = &n->maps[i];
    if (m->state == RES_OFFLOADING) return mm_release(n->dev, m);
    if (!train || m->first_reader < 0) mm_drop(n->dev, m);
    return VDNN_OK;
}

static vdnn_status forward(net *n, exec_ctx *c, int train)
{
    for (int i = 0; i < n->nlayers; i++) {
        layer *l = n->layers[i];
        fmap *in = &n->maps[i], *out = &n->maps[i + 1];
        double t0 = vdnn_now_s();
        vdnn_status st = VDNN_OK;
        if (train && in->offload) st = mm_offload(n->dev, in, map_bytes(n, i, c->n), &n->stats);
        if (st == VDNN_OK) {
            char what[48];
            snprintf(what, sizeof what, "output %s", out->name);
            st = device_alloc(n->dev, map_bytes(n, i + 1, c->n), l->name, what, (void **)&out->dev);
            if (st == VDNN_OK) out->state = RES_DEVICE;
        }
        if (st == VDNN_OK) st = take_workspace(n, l, PASS_FWD, c);
        if (st == VDNN_OK) st = layer_forward(l, c, in->dev, out->dev);
        give_workspace(n, c);
        if (st == VDNN_OK) st = settle_after_forward(n, i, train);
        if (st != VDNN_OK) return st;
        trace_pass(n, l, "forward", t0);
        pool_tick(device_pool(n->dev));
        barrier(n);
    }
    return VDNN_OK;
}

/* The layer whose offloaded maps are prefetched while layer i computes, or -1 (see
 * PREFETCH_* in net.h). Far, vDNN's rule, overlaps a copy with all the compute up to
 * its reader, and holds the map on the device through it. */
static int next_reader(const net *n, int i)
{
    if (n->prefetch_ahead == PREFETCH_ON_DEMAND) return -1;
    if (n->prefetch_ahead == PREFETCH_NEXT) return i - 1;
    int best = -1;
    for (int j = 0; j <= n->nlayers; j++) {
        const fmap *m = &n->maps[j];
        if (m->offload && m->first_reader < i && m->first_reader > best) best = m->first_reader;
    }
    return best;
}

static vdnn_status fetch(net *n, int j, const layer *l, int items)
{
    fmap *m = &n->maps[j];
    return m->state == RES_HOST ? mm_prefetch(n->dev, m, map_bytes(n, j, items), l->name, &n->stats) : VDNN_OK;
}

/* Layer i's own inputs: requested first (the memory stream is FIFO). */
static vdnn_status fetch_own(net *n, int i, int items)
{
    const layer *l = n->layers[i];
    vdnn_status st = VDNN_OK;
    if (l->needs_input) st = fetch(n, i, l, items);
    if (st == VDNN_OK && l->needs_output) st = fetch(n, i + 1, l, items);
    return st;
}

/* Every offloaded map that the next reading layer needs (see next_reader), so that its
 * copy overlaps layer i's compute. Asked after layer i's own buffers. */
static vdnn_status fetch_ahead(net *n, int i, int items)
{
    int r = next_reader(n, i);
    vdnn_status st = VDNN_OK;
    for (int j = 0; j <= n->nlayers && r >= 0 && st == VDNN_OK; j++)
        if (n->maps[j].state == RES_HOST && n->maps[j].first_reader == r) st = fetch(n, j, n->layers[i], items);
    return st;
}

/* Layer i waits on events for its own inputs only. */
static vdnn_status wait_own(net *n, int i)
{
    const layer *l = n->layers[i];
    vdnn_status st = VDNN_OK;
    if (l->needs_input) st = mm_ready(n->dev, &n->maps[i], &n->stats);
    if (st == VDNN_OK && l->needs_output) st = mm_ready(n->dev, &n->maps[i + 1], &n->stats);
    return st;
}

static vdnn_status backward(net *n, exec_ctx *c)
{
    for (int i = n->nlayers - 1; i >= 0; i--) {
        layer *l = n->layers[i];
        double t0 = vdnn_now_s();
        vdnn_status st = fetch_own(n, i, c->n);
        if (st == VDNN_OK && i > 0) {
            char what[48];
            snprintf(what, sizeof what, "gradient of %s", n->maps[i].name);
            st = device_alloc(n->dev, map_bytes(n, i, c->n), l->name, what, (void **)&n->dx[i]);
        }
        if (st == VDNN_OK) st = take_workspace(n, l, PASS_BWD_DATA, c);
        if (st == VDNN_OK) st = fetch_ahead(n, i, c->n);
        if (st == VDNN_OK) st = wait_own(n, i);
        if (st == VDNN_OK)
            st = layer_backward(l, c, n->maps[i].dev, n->maps[i + 1].dev, l->is_loss ? NULL : n->dx[i + 1], n->dx[i]);
        give_workspace(n, c);
        if (st != VDNN_OK) return st;
        if (n->dx[i + 1]) device_free(n->dev, n->dx[i + 1]);
        n->dx[i + 1] = NULL;
        mm_drop(n->dev, &n->maps[i + 1]);
        if (i > 0 && !n->layers[i - 1]->needs_output) mm_drop(n->dev, &n->maps[i]);
        trace_pass(n, l, "backward", t0);
        pool_tick(device_pool(n->dev));
        barrier(n);
    }
    return VDNN_OK;
}

/* Returns every device byte of the iteration and settles pending frees, so that each
 * iteration starts from the same pool state (and the simulator's replay holds). */
static void release_all(net *n)
{
    for (int i = 0; i <= n->nlayers; i++) {
        mm_drop(n->dev, &n->maps[i]);
        if (n->dx[i]) device_free(n->dev, n->dx[i]);
        n->dx[i] = NULL;
    }
    pool_reclaim(device_pool(n->dev), 1);
    n->peak_iter_bytes = pool_peak_bytes(device_pool(n->dev));
}

static vdnn_status load_input(net *n, const float *x, const int32_t *y, int items)
{
    if (items < 1 || items > n->input.n)
        return vdnn_fail(VDNN_EINVAL, "a batch of %d items for a net built for %d", items, n->input.n);
    fmap *m = &n->maps[0];
    vdnn_status st = device_alloc(n->dev, map_bytes(n, 0, items), "input", "x[0]", (void **)&m->dev);
    if (st != VDNN_OK) return st;
    m->state = RES_DEVICE;
    st = device_upload(n->dev, m->dev, x, map_bytes(n, 0, items));
    if (st == VDNN_OK) st = device_upload(n->dev, n->labels, y, (size_t)items * sizeof *y);
    return st;
}

vdnn_status net_train_step(net *n, const float *x, const int32_t *y, int items, double lr, step_result *r)
{
    double loss = 0;
    memset(r, 0, sizeof *r);
    r->n = items;
    exec_ctx c = make_ctx(n, items, 1, r, &loss);
    /* freed during layer k, reusable from layer k + 1 + lag: the copy runs through lag layers */
    pool_set_lag(device_pool(n->dev), n->release_lag ? (unsigned)n->release_lag + 1 : 0);
    vdnn_status st = load_input(n, x, y, items);
    if (st == VDNN_OK) st = forward(n, &c, 1);
    if (st == VDNN_OK && !isfinite(loss))
        st = vdnn_fail(VDNN_ENUMERIC, "the loss is %g at step %llu: training diverged (lower the learning rate?)",
                       loss / items, (unsigned long long)n->step + 1);
    /* The offloads are long done by now but for the last few maps: settling them here
     * returns the bottom of the slab to the backward pass in one piece. */
    if (st == VDNN_OK) pool_reclaim(device_pool(n->dev), 1);
    if (st == VDNN_OK) st = backward(n, &c);
    for (int i = 0; i < n->nlayers && st == VDNN_OK; i++)
        st = solver_update_layer(n->dev, n->layers[i], lr, n->train.momentum, n->train.weight_decay);
    release_all(n);
    if (st != VDNN_OK) return st;
    r->loss_sum = loss;
    n->step++;
    return VDNN_OK;
}

vdnn_status net_eval_batch(net *n, const float *x, const int32_t *y, int items, step_result *r)
{
    step_result one = {0};
    double loss = 0;
    exec_ctx c = make_ctx(n, items, 0, &one, &loss);
    vdnn_status st = load_input(n, x, y, items);
    if (st == VDNN_OK) st = forward(n, &c, 0);
    release_all(n);
    if (st != VDNN_OK) return st;
    r->loss_sum += loss;
    r->correct += one.correct;
    r->n += items;
    return VDNN_OK;
}
