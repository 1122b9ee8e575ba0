/* One training iteration and one evaluation batch under the net's memory policy (the
 * rules are in net.h and docs/design.md). Every device byte comes from the pool; feature
 * maps that the plan offloads go to host memory on the memory stream during forward
 * and come back ahead of their readers during backward, as early as the net's copy
 * timing (prefetch_ahead, release_lag) allows.
 *
 * On a graph, a map lives in forward until its last reader is done; it is offloaded
 * when its first reader starts and released after the last. In backward it is back on
 * the device (prefetched, or recomputed with the dropped maps it comes from) before
 * its first backward reader and dropped after its last use, recomputations included
 * (lifetimes()). Its gradient is one buffer: the first reader in backward writes it,
 * the others add to it, and it is freed once the layer that wrote the map has read it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nets/net.h"
#include "nets/solver.h"

static size_t map_bytes(const net *n, int i, int items)
{
    shape4 s = i == 0 ? n->input : n->layers[i - 1]->out;
    return (size_t)items * shape_per_item(s) * sizeof(float);
}

/* What a map or its gradient takes from the pool: room for the whole batch the net is
 * built for, even when a batch is smaller (the last of an epoch). A smaller batch then
 * makes the same calls to the pool as a full one, so the budget the replay of a full
 * batch finds holds for it too; with sizes of its own, first fit could place them so
 * that a later request no longer fits. */
static size_t map_room(const net *n, int i)
{
    return map_bytes(n, i, n->input.n);
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

/* The bytes the pool's blocks not yet freed hold now (net_probe). */
static size_t held_now(const net *n)
{
    const pool *p = device_pool(n->dev);
    return pool_used_bytes(p) - pool_pending_bytes(p);
}

/* Where the net is probed, what the pool holds now and the largest workspace it could
 * give, into *held and *room. */
static void probe_workspace(const net *n, size_t *held, size_t *room)
{
    if (!n->probe || !n->probe->on) return;
    *held = held_now(n);
    *room = pool_room(device_pool(n->dev), n->probe->cap);
}

/* *at, raised to what the pool's blocks hold now where the net is probed. */
static void probe_most(const net *n, size_t *at)
{
    if (!n->probe || !n->probe->on) return;
    size_t h = held_now(n);
    if (h > *at) *at = h;
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

/* A GPU reports a failed kernel or copy after the fact: checked (without waiting) after
 * each layer pass, the first failure is named by the pass issued last. */
static vdnn_status check_device(net *n, const layer *l, const char *pass)
{
    vdnn_status st = device_poll(n->dev);
    if (st == VDNN_OK) return st;
    return vdnn_wrap(st, "%s, %s pass (or work issued before it: the device reports failures late; --sync-layers "
                     "finds the pass)", l->name, pass);
}

/* A GPU runs the layer after the host has issued it: while tracing, the host waits for
 * each layer, so that its slice is the layer's run (copies on the memory stream still
 * overlap it, and are timed by events). */
static void trace_pass(net *n, const layer *l, const char *cat, double t0)
{
    if (!n->trace) return;
    if (device_is_async(n->dev)) device_stream_sync(n->dev, STREAM_COMPUTE);
    double t1 = vdnn_now_s();
    trace_slice(n->trace, TRACE_TRACK_COMPUTE, l->name, cat, t0, t1);
    trace_counter(n->trace, "pool bytes in use", t1, (double)pool_used_bytes(device_pool(n->dev)));
}

/* x[j] after its last forward reader: release it after its offload, drop it when
 * nothing uses it in backward (or it is recomputed there), else keep it. */
static vdnn_status settle_after_forward(net *n, int j, int train)
{
    fmap *m = &n->maps[j];
    if (m->state == RES_OFFLOADING) return mm_release(n->dev, m);
    if (!train || m->release < 0 || m->recompute) mm_drop(n->dev, m);
    return VDNN_OK;
}

/* When each map leaves the device in backward, for the plan the maps hold now: after
 * its last backward reader, or after the last recomputation that reads it, whichever
 * comes later. A dropped map x[p] is recomputed before its first backward reader, or
 * earlier when recomputing a later map needs it; it then needs the maps its layer
 * reads at that moment. Then which layers run in place in forward: those whose input
 * nothing needs after them (net_in_place, and no recomputation reads it). Also orders
 * the offloaded maps by first reader for fetch_ahead. */
static void lifetimes(net *n)
{
    int L = n->nlayers;
    for (int j = 0; j <= L; j++) {
        n->maps[j].release = n->graph[j].last_bwd;
        n->release_next[j] = -1;
    }
    /* first the time each recomputed map comes back, from the last map down: a map's
     * dependants all lie above it */
    int *at = n->fetch_order;   /* borrowed as scratch until the order below */
    for (int j = 0; j <= L; j++) at[j] = -1;
    for (int p = L; p >= 1; p--) {
        if (!n->maps[p].recompute) continue;
        int t = n->graph[p].first_bwd > at[p] ? n->graph[p].first_bwd : at[p];
        const layer *l = n->layers[p - 1];
        for (int k = 0; k < l->ninputs; k++) {
            int m = l->input[k];
            if (n->maps[m].release < 0 || n->maps[m].release > t) n->maps[m].release = t;
            if (n->maps[m].recompute && at[m] < t) at[m] = t;
        }
    }
    for (int i = 0; i < L; i++) n->release_head[i] = -1;
    for (int j = L; j >= 0; j--) {
        int r = n->maps[j].release;
        if (r < 0) continue;
        n->release_next[j] = n->release_head[r];
        n->release_head[r] = j;
    }
    for (int i = 0; i < L; i++) {
        const fmap *in = &n->maps[n->layers[i]->input[0]];
        n->fwd_in_place[i] = net_in_place(n, i) && !in->offload && !in->recompute && in->release < 0;
    }
    /* fetch_order: by first reader, the last layer's first; maps of one reader in map
     * order (the order the memory stream copies them in). A map's first backward
     * reader reads it as an input or as its own output, so the readers' maps give the
     * order without a sort. */
    n->nfetch = 0;
    for (int i = L - 1; i >= 0; i--) {
        const layer *l = n->layers[i];
        const int from = n->nfetch;
        for (int k = 0; k <= l->ninputs; k++) {
            int j = k < l->ninputs ? l->input[k] : i + 1, at = from;
            if (!n->maps[j].offload || n->maps[j].first_reader != i) continue;
            while (at < n->nfetch && n->fetch_order[at] < j) at++;
            if (at < n->nfetch && n->fetch_order[at] == j) continue;   /* read twice */
            memmove(&n->fetch_order[at + 1], &n->fetch_order[at], (size_t)(n->nfetch - at) * sizeof *n->fetch_order);
            n->fetch_order[at] = j;
            n->nfetch++;
        }
    }
}

/* ---- parameter swapping ---- */

/* Whether the layer's update runs on the device now, right after its backward. */
static int updates_here(const net *n, const layer *l)
{
    return l->swap == SWAP_DEVICE && n->update_lr >= 0;
}

/* Starts copying a swapped layer's parameters to the device (for backward, with
 * gradient buffers; when gradients accumulate, with their running sums too). */
static vdnn_status params_fetch(net *n, int i, int backward, int accumulate)
{
    if (i < 0 || i >= n->nlayers || !n->layers[i]->swap || n->wev[i]) return VDNN_OK;
    layer *l = n->layers[i];
    vdnn_status st = VDNN_OK;
    for (int k = 0; k < l->nparams && st == VDNN_OK; k++) {
        param *p = &l->params[k];
        size_t bytes = shape_count(p->shape) * sizeof(float);
        st = device_alloc_as(n->dev, bytes, l->name, p->name, " (swapped in)", (void **)&p->value);
        if (st == VDNN_OK) st = device_copy_tagged(n->dev, STREAM_MEMORY, p->value, p->host_value, bytes, COPY_H2D, l->name);
        if (st == VDNN_OK && backward) {
            st = device_alloc_as(n->dev, bytes, l->name, p->name, ".grad (swapped)", (void **)&p->grad);
            if (st == VDNN_OK && accumulate)
                st = device_copy_tagged(n->dev, STREAM_MEMORY, p->grad, p->host_grad, bytes, COPY_H2D, l->name);
        }
        if (st == VDNN_OK && backward && updates_here(n, l)) {
            st = device_alloc_as(n->dev, bytes, l->name, p->name, ".momentum (swapped)", (void **)&p->momentum);
            if (st == VDNN_OK)
                st = device_copy_tagged(n->dev, STREAM_MEMORY, p->momentum, p->host_momentum, bytes, COPY_H2D, l->name);
        }
    }
    if (st != VDNN_OK) return st;
    n->wev[i] = device_event_record(n->dev, STREAM_MEMORY);
    return n->wev[i] ? VDNN_OK : vdnn_fail(VDNN_ENOMEM, "out of host memory for an event");
}

static void params_wait(net *n, int i)
{
    if (!n->layers[i]->swap) return;
    device_stream_wait(n->dev, STREAM_COMPUTE, n->wev[i]);
    device_event_release(n->dev, n->wev[i]);
    n->wev[i] = NULL;
}

/* After the layer ran: its parameters leave the device once the compute stream is
 * done with them; after backward its gradients go to the host first. */
static vdnn_status params_release(net *n, int i, int backward)
{
    layer *l = n->layers[i];
    if (!l->swap) return VDNN_OK;
    dev_event *done = device_event_record(n->dev, STREAM_COMPUTE);
    if (!done) return vdnn_fail(VDNN_ENOMEM, "out of host memory for an event");
    vdnn_status st = VDNN_OK;
    int update = backward && updates_here(n, l);
    if (update) {
        st = solver_update_layer(n->dev, l, n->update_lr, n->train.momentum, n->train.weight_decay);
        device_event_release(n->dev, done);
        done = device_event_record(n->dev, STREAM_COMPUTE);
        if (!done) return vdnn_fail(VDNN_ENOMEM, "out of host memory for an event");
    }
    if (backward) {
        device_stream_wait(n->dev, STREAM_MEMORY, done);
        for (int k = 0; k < l->nparams && st == VDNN_OK; k++) {
            param *p = &l->params[k];
            size_t bytes = shape_count(p->shape) * sizeof(float);
            st = device_copy_tagged(n->dev, STREAM_MEMORY, p->host_grad, p->grad, bytes, COPY_D2H, l->name);
            if (st == VDNN_OK && update)
                st = device_copy_tagged(n->dev, STREAM_MEMORY, p->host_value, p->value, bytes, COPY_D2H, l->name);
            if (st == VDNN_OK && update)
                st = device_copy_tagged(n->dev, STREAM_MEMORY, p->host_momentum, p->momentum, bytes, COPY_D2H, l->name);
        }
        n->gev[i] = device_event_record(n->dev, STREAM_MEMORY);
        if (!n->gev[i] && st == VDNN_OK) st = vdnn_fail(VDNN_ENOMEM, "out of host memory for an event");
    }
    /* after an update the values go to the host too: freed after that copy */
    dev_event *values_done = update ? n->gev[i] : done;
    for (int k = 0; k < l->nparams; k++) {
        param *p = &l->params[k];
        if (p->value) device_free_after(n->dev, p->value, device_event_retain(values_done));
        if (p->grad) device_free_after(n->dev, p->grad, device_event_retain(n->gev[i]));
        if (p->momentum) device_free_after(n->dev, p->momentum, device_event_retain(n->gev[i]));
        p->value = p->grad = p->momentum = NULL;
    }
    device_event_release(n->dev, done);
    return st;
}

/* The device copies of the maps layer i reads. */
static void input_ptrs(const net *n, const layer *l, const float **xs)
{
    for (int k = 0; k < l->ninputs; k++) xs[k] = n->maps[l->input[k]].dev;
}

/* An in-place layer's output takes over its input's device block: the input is gone
 * from the device (nothing reads it again), the output is there. */
static void take_block(fmap *in, fmap *out)
{
    out->dev = in->dev;
    out->state = RES_DEVICE;
    in->dev = NULL;
    in->state = RES_NONE;
}

static vdnn_status forward(net *n, exec_ctx *c, int train)
{
    for (int i = 0; i < n->nlayers; i++) {
        layer *l = n->layers[i];
        fmap *out = &n->maps[i + 1];
        double t0 = n->trace ? vdnn_now_s() : 0;   /* for the trace alone */
        vdnn_status st = VDNN_OK;
        for (int k = 0; k < l->ninputs && st == VDNN_OK; k++) {
            int j = l->input[k];
            if (train && n->maps[j].offload && n->graph[j].first_fwd == i)
                st = mm_offload(n->dev, &n->maps[j], map_bytes(n, j, c->n), &n->stats);
        }
        const float *xs[LAYER_MAX_INPUTS];
        input_ptrs(n, l, xs);
        if (st == VDNN_OK && n->fwd_in_place[i]) {
            take_block(&n->maps[l->input[0]], out);
        } else if (st == VDNN_OK) {
            st = device_alloc_as(n->dev, map_room(n, i + 1), l->name, out->name, " (output)", (void **)&out->dev);
            if (st == VDNN_OK) out->state = RES_DEVICE;
        }
        if (n->probe) probe_workspace(n, &n->probe->fwd_ws_at[i], &n->probe->fwd_ws_room[i]);
        if (st == VDNN_OK) st = take_workspace(n, l, PASS_FWD, c);
        if (st == VDNN_OK) st = params_fetch(n, i, 0, 0);
        if (st == VDNN_OK) st = params_fetch(n, i + 1, 0, 0);
        if (st == VDNN_OK) params_wait(n, i);
        if (st == VDNN_OK) st = layer_forward_n(l, c, xs, out->dev);
        if (st == VDNN_OK && n->tap_out && n->tap_map == i + 1)
            st = device_download(n->dev, n->tap_out, out->dev, map_bytes(n, i + 1, c->n));
        if (n->probe) probe_most(n, &n->probe->fwd_held[i]);
        give_workspace(n, c);
        if (st == VDNN_OK) st = params_release(n, i, 0);
        for (int k = 0; k < l->ninputs && st == VDNN_OK; k++)
            if (n->graph[l->input[k]].last_fwd == i) st = settle_after_forward(n, l->input[k], train);
        if (st != VDNN_OK) return st;
        trace_pass(n, l, "forward", t0);
        pool_tick(device_pool(n->dev));
        barrier(n);
        if ((st = check_device(n, l, "forward")) != VDNN_OK) return st;
    }
    return VDNN_OK;
}

/* The layer whose offloaded maps are prefetched while layer i computes, or -1 (see
 * PREFETCH_* in net.h). Far, vDNN's rule, overlaps a copy with all the compute up to
 * its reader, and holds the map on the device through it. *pos walks fetch_order past
 * the maps of layers i and above, so that the reader's maps start at *pos. */
static int next_reader(const net *n, int i, int *pos)
{
    if (n->prefetch_ahead == PREFETCH_ON_DEMAND) return -1;
    while (*pos < n->nfetch && n->maps[n->fetch_order[*pos]].first_reader >= i) (*pos)++;
    if (n->prefetch_ahead == PREFETCH_NEXT) return i - 1;
    return *pos < n->nfetch ? n->maps[n->fetch_order[*pos]].first_reader : -1;
}

static vdnn_status fetch(net *n, int j, const layer *l, int items)
{
    fmap *m = &n->maps[j];
    if (n->probe && n->probe->on && m->state == RES_HOST && n->probe->fetched_in[j] < 0)
        n->probe->fetched_in[j] = n->probe->layer;
    return m->state == RES_HOST ? mm_prefetch(n->dev, m, map_room(n, j), map_bytes(n, j, items), l->name, &n->stats)
                                 : VDNN_OK;
}

/* One layer run again by recompute(): the map it writes, and the next of its inputs to
 * bring back. */
typedef struct redo {
    int map, next;
} redo;

/* Pushes x[j] on the stack of maps being recomputed (grown on the heap: a chain of
 * dropped maps is as deep as the net). */
static vdnn_status redo_push(redo **stack, int *depth, int *cap, int j)
{
    if (*depth == *cap) {
        int grown = *cap ? 2 * *cap : 16;
        redo *s = realloc(*stack, (size_t)grown * sizeof *s);
        if (!s) return vdnn_fail(VDNN_ENOMEM, "out of host memory recomputing %d dropped maps", *depth + 1);
        *stack = s;
        *cap = grown;
    }
    (*stack)[(*depth)++] = (redo){j, 0};
    return VDNN_OK;
}

/* Runs the layer that wrote x[j] forward again, its inputs on the device. */
static vdnn_status redo_layer(net *n, int j, exec_ctx *c)
{
    layer *l = n->layers[j - 1];
    fmap *out = &n->maps[j];
    exec_ctx rc = *c;
    rc.recompute = 1;
    rc.accumulate = 0;
    rc.accumulate_dx = 0;
    double t0 = n->trace ? vdnn_now_s() : 0;
    vdnn_status st = device_alloc_as(n->dev, map_room(n, j), l->name, out->name, " (recomputed)", (void **)&out->dev);
    if (st == VDNN_OK) out->state = RES_DEVICE;
    if (st == VDNN_OK) st = take_workspace(n, l, PASS_FWD, &rc);
    if (n->probe && n->probe->layer >= 0) probe_most(n, &n->probe->bwd_held[n->probe->layer]);
    const float *xs[LAYER_MAX_INPUTS];
    input_ptrs(n, l, xs);
    if (st == VDNN_OK) st = layer_forward_n(l, &rc, xs, out->dev);
    give_workspace(n, &rc);
    if (n->trace && device_is_async(n->dev)) device_stream_sync(n->dev, STREAM_COMPUTE);
    if (n->trace) trace_slice(n->trace, TRACE_TRACK_COMPUTE, l->name, "recompute", t0, vdnn_now_s());
    return st;
}

/* Recomputes x[j], dropped after forward: the layer that wrote it runs forward again
 * on the same inputs, parameters and dropout masks, so x[j] comes back bit for bit.
 * Its inputs are fetched, or recomputed first when they were dropped too, depth first
 * in input order; the maps under way wait on a stack, not on the C stack, so that a
 * chain of dropped maps may be as long as the net. */
static vdnn_status recompute(net *n, int j, exec_ctx *c)
{
    redo *stack = NULL;
    int depth = 0, cap = 0;
    vdnn_status st = redo_push(&stack, &depth, &cap, j);
    while (st == VDNN_OK && depth > 0) {
        redo *top = &stack[depth - 1];
        const layer *l = n->layers[top->map - 1];
        if (top->next == 0 && l->swap) {
            st = vdnn_fail(VDNN_EINVAL, "%s: recomputing %s would run the swapped layer %s again; a plan may not "
                           "recompute through swapped layers", l->name, n->maps[top->map].name, l->name);
        } else if (top->next < l->ninputs) {
            int m = l->input[top->next];
            fmap *in = &n->maps[m];
            if (in->recompute && in->state == RES_NONE) {
                st = redo_push(&stack, &depth, &cap, m);   /* comes back here once x[m] is */
                continue;
            }
            st = fetch(n, m, l, c->n);
            if (st == VDNN_OK) st = mm_ready(n->dev, in, &n->stats);
            top->next++;
        } else {
            st = redo_layer(n, top->map, c);
            if (--depth > 0) {   /* the reader below gets its input ready and moves on */
                redo *under = &stack[depth - 1];
                int m = n->layers[under->map - 1]->input[under->next];
                if (st == VDNN_OK) st = mm_ready(n->dev, &n->maps[m], &n->stats);
                under->next++;
            }
        }
    }
    free(stack);
    return st;
}

static vdnn_status fetch_or_recompute(net *n, int j, const layer *l, exec_ctx *c)
{
    fmap *m = &n->maps[j];
    if (m->recompute && m->state == RES_NONE) return recompute(n, j, c);
    return fetch(n, j, l, c->n);
}

/* Layer i's own inputs: requested first (the memory stream is FIFO). */
static vdnn_status fetch_own(net *n, int i, exec_ctx *c)
{
    const layer *l = n->layers[i];
    vdnn_status st = VDNN_OK;
    for (int k = 0; k < l->ninputs && st == VDNN_OK; k++)
        if (layer_reads_input(l, k)) st = fetch_or_recompute(n, l->input[k], l, c);
    if (st == VDNN_OK && l->needs_output) st = fetch_or_recompute(n, i + 1, l, c);
    return st;
}

/* Every offloaded map that the next reading layer needs (see next_reader), so that its
 * copy overlaps layer i's compute. Asked after layer i's own buffers. */
static vdnn_status fetch_ahead(net *n, int i, int items, int *pos)
{
    int r = next_reader(n, i, pos);
    vdnn_status st = VDNN_OK;
    if (r < 0) return VDNN_OK;
    /* fetch_order is by first reader, so the reader's maps lie together from *pos on */
    for (int k = *pos; k < n->nfetch && n->maps[n->fetch_order[k]].first_reader == r && st == VDNN_OK; k++)
        st = fetch(n, n->fetch_order[k], n->layers[i], items);
    return st;
}

/* Layer i waits on events for its own inputs only. */
static vdnn_status wait_own(net *n, int i)
{
    const layer *l = n->layers[i];
    vdnn_status st = VDNN_OK;
    for (int k = 0; k < l->ninputs && st == VDNN_OK; k++)
        if (layer_reads_input(l, k)) st = mm_ready(n->dev, &n->maps[l->input[k]], &n->stats);
    if (st == VDNN_OK && l->needs_output) st = mm_ready(n->dev, &n->maps[i + 1], &n->stats);
    return st;
}

/* Whether layer i writes its input's gradient in place: an in-place layer whose input's
 * gradient is new here (net_in_place in net.h). */
static int grad_in_place(const net *n, const layer *l, int i)
{
    int j = l->input[0];
    return n->in_place && l->ops->in_place && l->ninputs == 1 && n->graph[j].grad && !n->dx[j] && n->dx[i + 1] &&
           map_room(n, j) == map_room(n, i + 1);
}

/* Whether that gradient goes over the layer's output y rather than over y's gradient
 * (IN_PLACE_OVER_OUTPUT): when the layer reads y (relu, tanh, ...) and this is y's last
 * use. y's block is then free at once, its gradient's after the layer as usual (VGG-16
 * at 256 under `all`: no fragmentation at all, against 0.38 GiB over the gradient). */
static int grad_over_output(const net *n, const layer *l, int i)
{
    const fmap *y = &n->maps[i + 1];
    return n->in_place == IN_PLACE_OVER_OUTPUT && l->needs_output && y->dev && y->release == i &&
           (y->state == RES_DEVICE || y->state == RES_PREFETCHING);
}

/* The gradient buffers layer i's backward writes, one per input (NULL: x[0], or a map
 * no parameter lies before): the map's own, new when this is its first reader in
 * backward (for an in-place layer, its output's block or its output's gradient taken
 * over: *over_y says which); when it is not, the layer adds into it if it can
 * (c->accumulate_dx), else writes a part of its own in `part`, added by add_parts(). */
static vdnn_status gradient_bufs(net *n, layer *l, int i, exec_ctx *c, float **dxs, float **part, int *over_y)
{
    vdnn_status st = VDNN_OK;
    c->accumulate_dx = 0;
    *over_y = 0;
    for (int k = 0; k < l->ninputs; k++) dxs[k] = part[k] = NULL;
    if (grad_in_place(n, l, i)) {
        if ((*over_y = grad_over_output(n, l, i))) {
            dxs[0] = n->dx[l->input[0]] = n->maps[i + 1].dev;
        } else {
            dxs[0] = n->dx[l->input[0]] = n->dx[i + 1];
            n->dx[i + 1] = NULL;
        }
        return VDNN_OK;
    }
    int pass = net_passes_dy(n, i);
    for (int k = 0; k < l->ninputs && st == VDNN_OK; k++) {
        int j = l->input[k];
        if (!n->graph[j].grad) continue;
        if (k == pass && n->dx[i + 1] && !n->dx[j] && map_room(n, j) == map_room(n, i + 1)) {
            dxs[k] = n->dx[j] = n->dx[i + 1];
            n->dx[i + 1] = NULL;
        } else if (!n->dx[j]) {
            st = device_alloc_as(n->dev, map_room(n, j), l->name, n->maps[j].name, "'s gradient", (void **)&n->dx[j]);
            dxs[k] = n->dx[j];
        } else if (l->ops->accumulates_dx) {
            c->accumulate_dx |= 1u << k;
            dxs[k] = n->dx[j];
        } else {
            st = device_alloc_as(n->dev, map_room(n, j), l->name, n->maps[j].name, "'s gradient (a part)",
                                 (void **)&part[k]);
            dxs[k] = part[k];
        }
    }
    return st;
}

/* Adds each part into its map's gradient, and frees it. */
static vdnn_status add_parts(net *n, const layer *l, int items, float **part, vdnn_status st)
{
    for (int k = 0; k < l->ninputs; k++) {
        if (!part[k]) continue;
        int j = l->input[k];
        if (st == VDNN_OK) st = layer_accumulate(l, n->dev, n->dx[j], part[k], map_bytes(n, j, items) / sizeof(float));
        device_free(n->dev, part[k]);
        part[k] = NULL;
    }
    return st;
}

/* Layer i's parameter gradients are final (the last micro-batch's backward is done):
 * tells n->grads_ready, with an event that completes once they are written (a swapped
 * layer's have reached host memory). */
static void wait_grads(net *n, int i);

static vdnn_status announce_grads(net *n, int i)
{
    if (!n->layers[i]->nparams) return VDNN_OK;
    wait_grads(n, i);
    dev_event *ev = device_event_record(n->dev, STREAM_COMPUTE);
    if (!ev) return vdnn_fail(VDNN_ENOMEM, "out of host memory for an event");
    return n->grads_ready(n->grads_ctx, i, ev);
}

static vdnn_status backward(net *n, exec_ctx *c)
{
    int pos = 0;
    for (int i = n->nlayers - 1; i >= 0; i--) {
        layer *l = n->layers[i];
        double t0 = n->trace ? vdnn_now_s() : 0;
        float *dxs[LAYER_MAX_INPUTS], *part[LAYER_MAX_INPUTS] = {NULL};
        float *dy = l->is_loss ? NULL : n->dx[i + 1];
        int over_y = 0;
        if (n->probe) n->probe->layer = i;
        vdnn_status st = fetch_own(n, i, c);
        if (st == VDNN_OK) st = params_fetch(n, i, 1, c->accumulate);
        if (st == VDNN_OK) st = params_fetch(n, i - 1, 1, c->accumulate);
        if (st == VDNN_OK) st = gradient_bufs(n, l, i, c, dxs, part, &over_y);
        if (n->probe) probe_workspace(n, &n->probe->bwd_ws_at[i], &n->probe->bwd_ws_room[i]);
        if (st == VDNN_OK) st = take_workspace(n, l, PASS_BWD_DATA, c);
        if (st == VDNN_OK) st = fetch_ahead(n, i, c->n, &pos);
        if (n->probe) probe_most(n, &n->probe->bwd_held[i]);
        if (st == VDNN_OK) st = wait_own(n, i);
        if (st == VDNN_OK) params_wait(n, i);
        const float *xs[LAYER_MAX_INPUTS];
        input_ptrs(n, l, xs);
        if (st == VDNN_OK) st = layer_backward_n(l, c, xs, n->maps[i + 1].dev, dy, dxs);
        give_workspace(n, c);
        if (over_y && st == VDNN_OK) {   /* the block is the input's gradient now, no longer y */
            n->maps[i + 1].dev = NULL;
            n->maps[i + 1].state = RES_NONE;
        } else if (over_y) {             /* still y's: returned once, with y */
            n->dx[l->input[0]] = NULL;
        }
        st = add_parts(n, l, c->n, part, st);
        c->accumulate_dx = 0;
        if (st == VDNN_OK) st = params_release(n, i, 1);
        if (st == VDNN_OK && n->grads_ready && n->grads_final) st = announce_grads(n, i);
        if (st != VDNN_OK) return st;
        if (n->dx[i + 1]) device_free(n->dev, n->dx[i + 1]);
        n->dx[i + 1] = NULL;
        for (int j = n->release_head[i]; j >= 0; j = n->release_next[j]) mm_drop(n->dev, &n->maps[j]);
        trace_pass(n, l, "backward", t0);
        pool_tick(device_pool(n->dev));
        barrier(n);
        if ((st = check_device(n, l, "backward")) != VDNN_OK) return st;
    }
    return VDNN_OK;
}

/* Waits for a swapped layer's gradients to reach the host. */
static void wait_grads(net *n, int i)
{
    if (!n->gev[i]) return;
    device_event_wait(n->dev, n->gev[i]);
    device_event_release(n->dev, n->gev[i]);
    n->gev[i] = NULL;
}

/* Returns every device byte of the iteration and settles pending frees, so that each
 * iteration starts from the same pool state (and the simulator's replay holds). */
static void release_all(net *n)
{
    for (int i = 0; i < n->nlayers; i++) {   /* swapped parameters left on the device by a failure */
        if (n->wev[i]) device_event_wait(n->dev, n->wev[i]);
        device_event_release(n->dev, n->wev[i]);
        n->wev[i] = NULL;
        wait_grads(n, i);
        for (int k = 0; n->layers[i]->swap && k < n->layers[i]->nparams; k++) {
            param *p = &n->layers[i]->params[k];
            if (p->value) device_free(n->dev, p->value);
            if (p->grad) device_free(n->dev, p->grad);
            if (p->momentum) device_free(n->dev, p->momentum);
            p->value = p->grad = p->momentum = NULL;
        }
    }
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
    vdnn_status st = net_check_drawn(n, "a training or evaluation step");
    if (st != VDNN_OK) return st;
    fmap *m = &n->maps[0];
    st = device_alloc(n->dev, map_room(n, 0), "input", "x[0]", (void **)&m->dev);
    if (st != VDNN_OK) return st;
    m->state = RES_DEVICE;
    st = device_upload(n->dev, m->dev, x, map_bytes(n, 0, items));
    if (st == VDNN_OK) st = device_upload(n->dev, n->labels, y, (size_t)items * sizeof *y);
    return st;
}

/* One micro-batch (or the whole batch): forward and backward of `items` items that
 * start at `offset` in the mini-batch; gradients are added to the earlier ones when
 * `accumulate`. */
static vdnn_status run_chunk(net *n, const float *x, const int32_t *y, int items, int offset, int base, int total,
                             int accumulate, double *loss, step_result *r)
{
    exec_ctx c = make_ctx(n, items, 1, r, loss);
    c.item_offset = base + offset;
    c.accumulate = accumulate;
    c.grad_scale = 1.0f / (float)total;
    if (n->probe) n->probe->on = !accumulate;   /* the first micro-batch */
    size_t per_item = shape_per_item(n->input);
    vdnn_status st = load_input(n, x ? x + (size_t)offset * per_item : NULL, y ? y + offset : NULL, items);
    if (st == VDNN_OK) st = forward(n, &c, 1);
    if (st == VDNN_OK && !isfinite(*loss))
        st = vdnn_fail(VDNN_ENUMERIC, "the loss is %g at step %llu: training diverged (lower the learning rate?)",
                       *loss / total, (unsigned long long)n->step + 1);
    /* The offloads are long done by now but for the last few maps: settling them here
     * returns the bottom of the slab to the backward pass in one piece. */
    if (st == VDNN_OK) pool_reclaim(device_pool(n->dev), 1);
    if (st == VDNN_OK) st = backward(n, &c);
    if (n->probe) n->probe->on = 0;
    /* the next micro-batch's swapped gradients start from these sums */
    for (int i = 0; i < n->nlayers; i++) wait_grads(n, i);
    return st;
}

/* Whether a step's last micro-batch runs other work than a middle one: SWAP_DEVICE
 * layers update in its backward (with lr >= 0), and its gradients are announced to the
 * data-parallel reduction. */
static int last_differs(const net *n, double lr)
{
    if (n->grads_ready) return 1;
    for (int i = 0; lr >= 0 && i < n->nlayers; i++)
        if (n->layers[i]->swap == SWAP_DEVICE) return 1;
    return 0;
}

/* Forward and backward of `items` items in micro-batches: gradients of the loss sum
 * scaled by 1/total, dropout masks of items base.. of the whole batch. With lr >= 0,
 * SWAP_DEVICE layers update in the last backward (net_train_step); with lr < 0 every
 * update waits for net_update. Each micro-batch returns its blocks (release_all), the last
 * one and a failed one too. */
static vdnn_status chunks(net *n, const float *x, const int32_t *y, int items, int base, int total, double lr,
                          step_result *r)
{
    double loss = 0;
    memset(r, 0, sizeof *r);
    r->n = items;
    if (items < 1 || items > n->minibatch)
        return vdnn_fail(VDNN_EINVAL, "a batch of %d items for a net built for %d", items, n->minibatch);
    /* freed during layer k, reusable from layer k + 1 + lag: the copy runs through lag layers */
    pool_set_lag(device_pool(n->dev), n->release_lag ? (unsigned)n->release_lag + 1 : 0);
    lifetimes(n);
    vdnn_status st = VDNN_OK;
    sim_mark before, after;
    int marked = 0;
    const int last_like_middle = items % n->input.n == 0 && !last_differs(n, lr);
    for (int off = 0; off < items && st == VDNN_OK; off += n->input.n) {
        int k = items - off < n->input.n ? items - off : n->input.n;
        n->update_lr = off + k >= items ? lr : -1;   /* SWAP_DEVICE layers update in the last backward */
        n->grads_final = off + k >= items;
        st = run_chunk(n, x, y, k, off, base, total, off > 0, &loss, r);
        release_all(n);   /* a failed one's blocks too */
        if (st != VDNN_OK || off + k >= items) continue;
        /* A replay on the simulated device: a middle micro-batch (neither the first nor
         * the last) that leaves the device as it found it would be repeated exactly by
         * every middle one after it, so they take its time without being replayed; and
         * so would the last, where it runs the same work as a middle one. */
        int was_marked = marked;
        marked = device_sim_mark(n->dev, &after);
        int middle = (items - (off + k) - 1) / n->input.n;
        if (off > 0 && was_marked && marked && middle + last_like_middle > 0 && device_sim_same(&before, &after)) {
            device_sim_repeat(n->dev, &before, &after, middle + last_like_middle);
            off += (middle + last_like_middle) * n->input.n;
        }
        before = after;
    }
    n->update_lr = -1;
    n->grads_final = 0;
    r->loss_sum = loss;
    return st;
}

/* The optimizer step of every layer not updated in backward (lr_in_backward: the
 * SWAP_DEVICE layers were). */
static vdnn_status update(net *n, double lr, int lr_in_backward)
{
    vdnn_status st = VDNN_OK;
    for (int i = 0; i < n->nlayers && st == VDNN_OK; i++) {
        layer *l = n->layers[i];
        if (l->swap == SWAP_HOST || (l->swap == SWAP_DEVICE && !lr_in_backward))
            st = solver_update_host(n->dev, l, lr, n->train.momentum, n->train.weight_decay);
        else if (l->swap == SWAP_NONE)
            st = solver_update_layer(n->dev, l, lr, n->train.momentum, n->train.weight_decay);
    }
    return st;
}

vdnn_status net_train_step(net *n, const float *x, const int32_t *y, int items, double lr, step_result *r)
{
    vdnn_status st = chunks(n, x, y, items, 0, items, lr, r);
    if (st == VDNN_OK) st = update(n, lr, 1);   /* (chunks returned every block) */
    /* every failure of the step's work shows by its end, and every timed wait is read */
    vdnn_status done = st == VDNN_OK ? device_sync(n->dev) : VDNN_OK;
    n->stats.wait_s += device_take_wait_s(n->dev);
    if (st != VDNN_OK) return st;
    if (done != VDNN_OK) return vdnn_wrap(done, "step %llu (its last work: the parameter updates)",
                                          (unsigned long long)n->step + 1);
    n->step++;
    return VDNN_OK;
}

vdnn_status net_backprop(net *n, const float *x, const int32_t *y, int items, int base, int total, step_result *r)
{
    if (base < 0 || total < items)
        return vdnn_fail(VDNN_EINVAL, "items %d..%d of a batch of %d", base, base + items, total);
    vdnn_status st = chunks(n, x, y, items, base, total, -1, r);
    vdnn_status done = st == VDNN_OK ? device_sync(n->dev) : VDNN_OK;
    n->stats.wait_s += device_take_wait_s(n->dev);
    if (st != VDNN_OK) return st;
    if (done != VDNN_OK) return vdnn_wrap(done, "step %llu (forward and backward)", (unsigned long long)n->step + 1);
    return VDNN_OK;
}

vdnn_status net_update(net *n, double lr)
{
    vdnn_status st = update(n, lr, 0);
    vdnn_status done = st == VDNN_OK ? device_sync(n->dev) : VDNN_OK;
    if (st != VDNN_OK) return st;
    if (done != VDNN_OK) return vdnn_wrap(done, "step %llu (the parameter updates)", (unsigned long long)n->step + 1);
    n->step++;
    return VDNN_OK;
}

vdnn_status net_eval_batch(net *n, const float *x, const int32_t *y, int items, step_result *r)
{
    step_result one = {0};
    double loss = 0;
    exec_ctx c = make_ctx(n, items, 0, &one, &loss);
    lifetimes(n);
    vdnn_status st = load_input(n, x, y, items);
    if (st == VDNN_OK) st = forward(n, &c, 0);
    release_all(n);
    vdnn_status done = st == VDNN_OK ? device_sync(n->dev) : VDNN_OK;
    if (st != VDNN_OK) return st;
    if (done != VDNN_OK) return vdnn_wrap(done, "evaluation");
    r->loss_sum += loss;
    r->correct += one.correct;
    r->n += items;
    return VDNN_OK;
}

vdnn_status net_predict(net *n, const float *x, int items, int map, float *out)
{
    if (map < 0 || map > n->nlayers || items < 1 || items > n->input.n)
        return vdnn_fail(VDNN_EINVAL, "net_predict: map %d of %d, %d items of at most %d", map, n->nlayers, items,
                         n->input.n);
    int32_t *labels = calloc((size_t)items, sizeof *labels);
    if (!labels) return vdnn_fail(VDNN_ENOMEM, "out of memory for %d labels", items);
    step_result r = {0};
    vdnn_status st = VDNN_OK;
    if (map == 0) memcpy(out, x, map_bytes(n, 0, items));
    else {
        n->tap_map = map;
        n->tap_out = out;
        st = net_eval_batch(n, x, labels, items, &r);
        n->tap_out = NULL;
    }
    free(labels);
    return st;
}
