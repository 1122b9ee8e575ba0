/* Lower bounds on what a changed plan holds (planner.h, live_bounds), from one replay of
 * the plan as it stands.
 *
 * The iteration asks the pool for blocks in an order the plan alone decides, and a
 * change of one decision leaves every request before its first effect as it was. The
 * bytes in blocks not yet freed (blocks freed after a copy not counted) are then those
 * of the replay until that point, and from there on at least those plus what the
 * change keeps: the map kept from its last forward reader until the replay brought it
 * back, the parameters kept on the device wherever the replay did not hold them, the
 * larger workspace for as long as the pass holds it. No block ends below the bytes held
 * at once, so where the sum passes the budget the changed plan does not fit, and the
 * search need not replay it to know (search.c, best_choice). The samples are of the
 * first micro-batch of the step (net_probe). A pass's workspace is asked for where the
 * replay asked for it, the pool as it was then: one larger than the pool could then
 * place below the budget does not fit (pool_room), whatever the bytes held say. A map
 * recomputed instead of offloaded is bounded by the inputs of the layer that writes it,
 * where they are kept only for that (live_bounds_recompute); the copy timing has no such
 * bound. */
#include <stdlib.h>
#include <string.h>

#include "nets/planner/planner.h"

void live_bounds_free(live_bounds *b)
{
    free(b->fwd_before);
    free(b->fwd_after);
    free(b->bwd_before);
    free(b->bwd_after);
    free(b->fwd_ws_at);
    free(b->bwd_ws_at);
    free(b->fwd_ws_room);
    free(b->bwd_ws_room);
    free(b->bwd_ws);
    free(b->fetched_in);
    memset(b, 0, sizeof *b);
}

/* before[i]: the largest of held[0..i), after[i]: of held[i..L). */
static void maxima(const size_t *held, int L, size_t *before, size_t *after)
{
    size_t m = 0;
    for (int i = 0; i < L; i++) {
        before[i] = m;
        if (held[i] > m) m = held[i];
    }
    m = 0;
    for (int i = L - 1; i >= 0; i--) {
        if (held[i] > m) m = held[i];
        after[i] = m;
    }
}

vdnn_status live_bounds_make(simulator *s, const net *n, const plan *p, size_t cap, live_bounds *b)
{
    const int L = n->nlayers;
    memset(b, 0, sizeof *b);
    b->nlayers = L;
    const size_t z = (size_t)L * sizeof(size_t);
    size_t *fwd_held = calloc((size_t)L, sizeof *fwd_held), *bwd_held = calloc((size_t)L, sizeof *bwd_held);
    b->fwd_before = malloc(z);
    b->fwd_after = malloc(z);
    b->bwd_before = malloc(z);
    b->bwd_after = malloc(z);
    b->fwd_ws_at = calloc((size_t)L, sizeof(size_t));
    b->bwd_ws_at = calloc((size_t)L, sizeof(size_t));
    b->fwd_ws_room = calloc((size_t)L, sizeof(size_t));
    b->bwd_ws_room = calloc((size_t)L, sizeof(size_t));
    b->bwd_ws = malloc(2 * z);
    b->fetched_in = malloc(((size_t)L + 1) * sizeof *b->fetched_in);
    if (!fwd_held || !bwd_held || !b->fwd_before || !b->fwd_after || !b->bwd_before || !b->bwd_after || !b->fwd_ws_at ||
        !b->bwd_ws_at || !b->fwd_ws_room || !b->bwd_ws_room || !b->bwd_ws || !b->fetched_in) {
        free(fwd_held);
        free(bwd_held);
        live_bounds_free(b);
        return vdnn_fail(VDNN_ENOMEM, "out of host memory for the search");
    }
    for (int j = 0; j <= L; j++) b->fetched_in[j] = -1;
    net_probe probe = {.fwd_held = fwd_held, .bwd_held = bwd_held, .fwd_ws_at = b->fwd_ws_at, .bwd_ws_at = b->bwd_ws_at,
                       .fwd_ws_room = b->fwd_ws_room, .bwd_ws_room = b->bwd_ws_room, .cap = cap,
                       .fetched_in = b->fetched_in, .layer = -1};
    vdnn_status st = sim_probe(s, p, &probe);
    if (st == VDNN_OK) {
        maxima(fwd_held, L, b->fwd_before, b->fwd_after);
        maxima(bwd_held, L, b->bwd_before, b->bwd_after);
        for (int i = 0; i < L; i++) {
            b->bwd_ws[2 * i] = layer_workspace_bytes(n->layers[i], PASS_BWD_DATA, p->algo[i][PASS_BWD_DATA]);
            b->bwd_ws[2 * i + 1] = layer_workspace_bytes(n->layers[i], PASS_BWD_FILTER, p->algo[i][PASS_BWD_FILTER]);
        }
        b->valid = 1;
    }
    free(fwd_held);
    free(bwd_held);
    /* a plan the replay refuses has no bounds: its changes are replayed */
    return st == VDNN_EBUDGET || st == VDNN_EINVAL ? VDNN_OK : st;
}

size_t plan_map_block(const net *n, int j)
{
    return pool_round(shape_bytes(j == 0 ? n->input : n->layers[j - 1]->out));
}

/* Of the samples from the forward of layer `from` on, and from the backward of layer
 * `to` down (to < 0: none of it), the most held. */
static size_t most_from(const live_bounds *b, int from, int to)
{
    size_t m = from < b->nlayers ? b->fwd_after[from] : 0;
    if (to >= 0 && to < b->nlayers && b->bwd_after[to] > m) m = b->bwd_after[to];
    return m;
}

size_t live_bounds_keep(const live_bounds *b, const net *n, int j)
{
    if (!b->valid || j < 0 || j > n->nlayers) return 0;
    /* freed after its last forward reader's step in the replay, back during layer f's */
    const int r = n->graph[j].last_fwd, f = b->fetched_in[j];
    if (r < 0) return 0;
    /* the backward samples of the layers before f's step (above f), where the replay
     * had not brought it back */
    return most_from(b, r + 1, f >= 0 ? f + 1 : -1) + plan_map_block(n, j);
}

/* Whether a layer that reads map j writes a map other than x[except] that p recomputes
 * (whose recomputation then reads j). */
static int read_by_recomputed(const net *n, const plan *p, int j, int except)
{
    for (int i = n->graph[j].first_fwd; i >= 0 && i <= n->graph[j].last_fwd; i++)
        for (int k = 0; k < n->layers[i]->ninputs; k++)
            if (n->layers[i]->input[k] == j && i + 1 != except && p->offload[i + 1] == MAP_RECOMPUTE) return 1;
    return 0;
}

size_t live_bounds_recompute(const live_bounds *b, const net *n, const plan *p, int j)
{
    if (!b->valid || j < 1 || j >= n->nlayers) return 0;
    /* recomputed, x[j] comes back during its first backward reader's step t (no later
     * recomputation reads it), which the replay's prefetch was at or after: from the
     * step the replay brought it back in (f) on, p holds it and the changed plan not
     * yet, until t, where both do */
    const int f = b->fetched_in[j], t = n->graph[j].first_bwd;
    if (read_by_recomputed(n, p, j, j)) return 0;
    const int to = f < 0 ? -1 : f == t ? t : f + 1;
    const layer *w = n->layers[j - 1];
    size_t most = 0;
    for (int k = 0; k < w->ninputs; k++) {
        /* an input that nothing reads in backward, kept by p, is dropped after its last
         * forward reader's step; recomputing x[j] reads it, so it stays until step t */
        const int m = w->input[k], r = n->graph[m].last_fwd;
        if (m < 1 || r < 0 || n->graph[m].last_bwd >= 0 || p->offload[m] != MAP_KEEP || read_by_recomputed(n, p, m, j))
            continue;
        /* where its last reader ran in place over it, the block it adds is the reader's
         * output's */
        size_t add = plan_map_block(n, m);
        const layer *l = n->layers[r];
        if (l->ops->in_place && l->input[0] == m && plan_map_block(n, r + 1) < add) add = plan_map_block(n, r + 1);
        size_t held = most_from(b, r + 1, to) + add;
        if (held > most) most = held;
    }
    return most;
}

size_t live_bounds_most_added(const net *n)
{
    size_t most = 0;
    for (int j = 0; j < n->nlayers; j++)
        if (plan_map_block(n, j) > most) most = plan_map_block(n, j);
    for (int i = 0; i < n->nlayers; i++) {
        const layer *l = n->layers[i];
        if (layer_param_bytes(l) > most) most = layer_param_bytes(l);
        for (int pass = 0; pass < PASS_COUNT; pass++)
            for (int a = 0; a < layer_algo_count(l, pass); a++) {
                size_t ws = layer_workspace_bytes(l, pass, a);
                if (ws != SIZE_MAX && pool_round(ws) > most) most = pool_round(ws);
            }
    }
    return most;
}

size_t live_bounds_resident(const live_bounds *b, const net *n, int i)
{
    if (!b->valid || i < 0 || i >= n->nlayers) return 0;
    /* swapped, they are on the device from the forward of layer i - 1 (fetched ahead)
     * through i's, and in backward from i + 1's (fetched ahead) through i's */
    size_t m = i > 1 ? b->fwd_before[i - 1] : 0;
    if (i + 1 < b->nlayers && b->fwd_after[i + 1] > m) m = b->fwd_after[i + 1];
    if (b->bwd_before[i] > m) m = b->bwd_before[i];
    if (i + 2 < b->nlayers && b->bwd_after[i + 2] > m) m = b->bwd_after[i + 2];
    /* resident: each value, and the gradient and momentum of each trainable one */
    return m + layer_param_bytes(n->layers[i]);
}

/* The bytes layer i asks for its `pass`'s workspace with an algorithm of `ws` bytes:
 * backward's one buffer serves both of its passes, the larger of their workspaces. */
static size_t ws_request(const live_bounds *b, int i, int pass, size_t ws)
{
    if (pass == PASS_FWD) return pool_round(ws);
    size_t other = b->bwd_ws[2 * i + (pass == PASS_BWD_DATA)];
    return pool_round(ws > other ? ws : other);
}

size_t live_bounds_workspace(const live_bounds *b, int i, int pass, size_t ws)
{
    if (!b->valid || i < 0 || i >= b->nlayers) return 0;
    return (pass == PASS_FWD ? b->fwd_ws_at[i] : b->bwd_ws_at[i]) + ws_request(b, i, pass, ws);
}

int live_bounds_workspace_placed(const live_bounds *b, int i, int pass, size_t ws)
{
    if (!b->valid || i < 0 || i >= b->nlayers) return 1;
    return ws_request(b, i, pass, ws) <= (pass == PASS_FWD ? b->fwd_ws_room[i] : b->bwd_ws_room[i]);
}
