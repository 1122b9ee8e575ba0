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
 * first micro-batch of the step (net_probe); the recomputation of a map and the copy
 * timing have no such bound. */
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

vdnn_status live_bounds_make(simulator *s, const net *n, const plan *p, live_bounds *b)
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
    b->bwd_ws = malloc(2 * z);
    b->fetched_in = malloc(((size_t)L + 1) * sizeof *b->fetched_in);
    if (!fwd_held || !bwd_held || !b->fwd_before || !b->fwd_after || !b->bwd_before || !b->bwd_after || !b->fwd_ws_at ||
        !b->bwd_ws_at || !b->bwd_ws || !b->fetched_in) {
        free(fwd_held);
        free(bwd_held);
        live_bounds_free(b);
        return vdnn_fail(VDNN_ENOMEM, "out of host memory for the search");
    }
    for (int j = 0; j <= L; j++) b->fetched_in[j] = -1;
    net_probe probe = {.fwd_held = fwd_held, .bwd_held = bwd_held, .fwd_ws_at = b->fwd_ws_at, .bwd_ws_at = b->bwd_ws_at,
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

/* The bytes map j's block takes (the iteration's map_room). */
static size_t map_block(const net *n, int j)
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
    return most_from(b, r + 1, f >= 0 ? f + 1 : -1) + map_block(n, j);
}

size_t live_bounds_most_added(const net *n)
{
    size_t most = 0;
    for (int j = 0; j < n->nlayers; j++)
        if (map_block(n, j) > most) most = map_block(n, j);
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

size_t live_bounds_workspace(const live_bounds *b, int i, int pass, size_t ws)
{
    if (!b->valid || i < 0 || i >= b->nlayers) return 0;
    if (pass == PASS_FWD) return b->fwd_ws_at[i] + pool_round(ws);
    /* backward's one buffer serves both of its passes: the larger of their workspaces */
    size_t other = b->bwd_ws[2 * i + (pass == PASS_BWD_DATA)];
    return b->bwd_ws_at[i] + pool_round(ws > other ? ws : other);
}
