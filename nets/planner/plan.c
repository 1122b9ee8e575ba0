/* Plans as data (nets/planner/planner.h): making one (from a net, from a fixed policy),
 * copying, checking and applying it to a net. Saving and loading are planfile.c,
 * printing plan_print.c.
 *
 * Ownership: plan_init, plan_copy, plan_from_net, plan_policy and plan_load treat their
 * output plan as uninitialised (they never free what it held) and fill it; release it
 * with plan_free. On failure the output holds nothing (plan_free on it is harmless). */
#include <stdlib.h>
#include <string.h>

#include "nets/planner/plan_impl.h"

const char *const plan_map_words[3] = {"keep", "offload", "recompute"};   /* by MAP_* */
const char *const plan_pass_names[PASS_COUNT] = {"forward", "backward-data", "backward-filter"};

const char *const plan_prefetch_names[3] = {"on-demand", "next", "far"};   /* by PREFETCH_* */

const char *plan_prefetch_name(int ahead)
{
    return ahead >= PREFETCH_ON_DEMAND && ahead <= PREFETCH_FAR ? plan_prefetch_names[ahead] : "?";
}

const char *plan_in_place_name(int in_place)
{
    return in_place == IN_PLACE_OVER_OUTPUT ? "on (gradients over outputs)"
           : in_place == IN_PLACE_OVER_GRAD ? "on (gradients over gradients)"
                                            : "off";
}

/* ---- making, copying, freeing ------------------------------------------------------ */

vdnn_status plan_init(plan *p, const net *n)
{
    memset(p, 0, sizeof *p);
    if (!n || n->nlayers < 1) return vdnn_fail(VDNN_EINVAL, "plan_init: the net has no layers");
    p->offload = calloc((size_t)n->nlayers + 1, sizeof *p->offload);
    p->algo = calloc((size_t)n->nlayers, sizeof *p->algo);
    p->swap = calloc((size_t)n->nlayers, sizeof *p->swap);
    if (!p->offload || !p->algo || !p->swap) {
        plan_free(p);
        return vdnn_fail(VDNN_ENOMEM, "out of host memory for a plan of %d layers", n->nlayers);
    }
    p->nlayers = n->nlayers;
    p->batch = n->minibatch;
    p->micro = n->micro;
    p->prefetch_ahead = PREFETCH_FAR;
    p->release_lag = 1;
    p->in_place = n->may_in_place ? IN_PLACE_OVER_OUTPUT : IN_PLACE_OFF;
    p->predicted_s = -1;
    p->measured_s = -1;
    return VDNN_OK;
}

void plan_free(plan *p)
{
    if (!p) return;
    free(p->offload);
    free(p->algo);
    free(p->swap);
    p->offload = NULL;
    p->algo = NULL;
    p->swap = NULL;
    p->nlayers = 0;
}

vdnn_status plan_copy(plan *dst, const plan *src)
{
    *dst = *src;
    if (!src->offload || !src->algo || !src->swap) {   /* an empty (freed) plan copies as empty */
        dst->offload = NULL;
        dst->algo = NULL;
        dst->swap = NULL;
        dst->nlayers = 0;
        return VDNN_OK;
    }
    dst->offload = malloc((size_t)src->nlayers + 1);
    dst->algo = malloc((size_t)src->nlayers * sizeof *src->algo);
    dst->swap = malloc((size_t)src->nlayers);
    if (!dst->offload || !dst->algo || !dst->swap) {
        plan_free(dst);
        return vdnn_fail(VDNN_ENOMEM, "out of host memory copying a plan of %d layers", src->nlayers);
    }
    memcpy(dst->offload, src->offload, (size_t)src->nlayers + 1);
    memcpy(dst->swap, src->swap, (size_t)src->nlayers);
    memcpy(dst->algo, src->algo, (size_t)src->nlayers * sizeof *src->algo);
    return VDNN_OK;
}

int plan_offloadable(const net *n, int j)
{
    return j >= 0 && j < n->nlayers && net_first_reader(n, j) >= 0;
}

vdnn_status plan_from_net(const net *n, plan *p)
{
    vdnn_status st = plan_init(p, n);
    if (st != VDNN_OK) return st;
    /* Unattached, the net has no maps yet: net_attach will plan them by its policy, and
     * nets/planner/budget.c's budget replay assumes the same, so that is the plan it runs. */
    for (int j = 0; j <= n->nlayers; j++)
        p->offload[j] = (unsigned char)(!n->maps               ? net_policy_map(n, j, n->policy)
                                        : n->maps[j].recompute ? MAP_RECOMPUTE
                                                               : n->maps[j].offload != 0);
    for (int i = 0; i < n->nlayers; i++)
        p->swap[i] = (unsigned char)(n->layers[i]->swap                                  ? n->layers[i]->swap
                                     : !n->dev && net_policy_swaps(n, i, n->policy) ? SWAP_HOST
                                                                                    : SWAP_NONE);
    for (int i = 0; i < n->nlayers; i++) memcpy(p->algo[i], n->layers[i]->algo, sizeof p->algo[i]);
    p->prefetch_ahead = n->prefetch_ahead;
    p->release_lag = n->release_lag;
    p->in_place = n->in_place;
    /* dyn leaves n->policy at none and the planner's plan in the maps: say who chose */
    snprintf(p->origin, sizeof p->origin, "%s", n->dyn ? "dyn" : policy_name(n->policy));
    return VDNN_OK;
}

/* Map j's decision: keep, offload or recompute, the last two only where a backward pass
 * reads the map, and no recomputation that runs a swapped layer again (swapped: from
 * net_recompute_runs_swapped; read only for a recomputed map). */
static vdnn_status check_map(const plan *p, const net *n, int j, const int *swapped, const char *who)
{
    if (p->offload[j] > MAP_RECOMPUTE)
        return vdnn_fail(VDNN_EINVAL, "%s: x[%d]: map decision %d is not keep, offload or recompute", who, j,
                         p->offload[j]);
    if (p->offload[j] && !plan_offloadable(n, j))
        return vdnn_fail(VDNN_EINVAL, "%s: the plan %s x[%d] (%s%s), but no backward pass reads it", who,
                         p->offload[j] == MAP_RECOMPUTE ? "recomputes" : "offloads", j,
                         j == n->nlayers ? "the loss output" : j ? net_map_name(n, j) : "the input",
                         j && j < n->nlayers ? "'s output" : "");
    if (p->offload[j] == MAP_RECOMPUTE && j == 0)
        return vdnn_fail(VDNN_EINVAL, "%s: x[0], the input, cannot be recomputed", who);
    /* recomputing x[j] runs the layers back to the nearest kept maps */
    if (p->offload[j] == MAP_RECOMPUTE && swapped[j] >= 0)
        return vdnn_fail(VDNN_EINVAL, "%s: recomputing x[%d] (%s's output) would run %s again, whose parameters "
                         "are swapped", who, j, net_map_name(n, j), n->layers[swapped[j]]->name);
    return VDNN_OK;
}

/* Every map's decision (check_map). */
static vdnn_status check_maps(const plan *p, const net *n, const char *who)
{
    int *swapped = malloc((size_t)(n->nlayers + 1) * sizeof *swapped);
    if (!swapped) return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory checking the plan", who);
    net_recompute_runs_swapped(n, p->offload, p->swap, swapped);
    vdnn_status st = VDNN_OK;
    for (int j = 0; j <= n->nlayers && st == VDNN_OK; j++) st = check_map(p, n, j, swapped, who);
    free(swapped);
    return st;
}

static vdnn_status check_algo(const plan *p, const net *n, int i, int pass, const char *who)
{
    int a = p->algo[i][pass], count = layer_algo_count(n->layers[i], pass);
    if (a < 0 || a >= count)
        return vdnn_fail(VDNN_EINVAL, "%s: %s: %s algorithm %d does not exist (the layer has %d)", who,
                         n->layers[i]->name, plan_pass_names[pass], a, count);
    return VDNN_OK;
}

static vdnn_status check_swap(const plan *p, const net *n, int i, const char *who)
{
    if (p->swap[i] > SWAP_DEVICE)
        return vdnn_fail(VDNN_EINVAL, "%s: %s: swap mode %d is not 0, 1 or 2", who, n->layers[i]->name, p->swap[i]);
    if (p->swap[i] && !layer_swappable(n->layers[i]))
        return vdnn_fail(VDNN_EINVAL, "%s: %s's parameters cannot be swapped (%s)", who, n->layers[i]->name,
                         n->layers[i]->nparams ? "its forward pass updates state in them" : "it has none");
    return VDNN_OK;
}

/* The plan's settings that are not per layer or map. */
static vdnn_status check_settings(const plan *p, const net *n, const char *who)
{
    if (p->micro != n->micro)
        return vdnn_fail(VDNN_EINVAL, "%s: the plan's micro-batches are of %d items, the net's of %d (0: no split)",
                         who, p->micro, n->micro);
    if (p->prefetch_ahead < PREFETCH_ON_DEMAND || p->prefetch_ahead > PREFETCH_FAR)
        return vdnn_fail(VDNN_EINVAL, "%s: prefetch mode %d is not one of PREFETCH_*", who, p->prefetch_ahead);
    if (p->release_lag < 0 || p->release_lag > PLAN_MAX_LAG)
        return vdnn_fail(VDNN_EINVAL, "%s: release lag %d is outside 0..%d", who, p->release_lag, PLAN_MAX_LAG);
    if (p->in_place && !n->may_in_place)
        return vdnn_fail(VDNN_EINVAL, "%s: the plan runs layers in place, and the net forbids it ([memory] in_place "
                         "= 0 or --in-place off)", who);
    return VDNN_OK;
}

static int same_size(const plan *p, const net *n)
{
    return p->nlayers == n->nlayers && p->offload && p->algo && p->swap;
}

vdnn_status plan_check(const plan *p, const net *n, const char *who)
{
    if (!same_size(p, n))
        return vdnn_fail(VDNN_EINVAL, "%s: the plan has %d layers, the net has %d (a plan of another net?)", who,
                         p->nlayers, n->nlayers);
    vdnn_status st = VDNN_OK;
    for (int i = 0; i < n->nlayers && st == VDNN_OK; i++)
        for (int pass = 0; pass < PASS_COUNT && st == VDNN_OK; pass++) st = check_algo(p, n, i, pass, who);
    for (int i = 0; i < n->nlayers && st == VDNN_OK; i++) st = check_swap(p, n, i, who);
    if (st == VDNN_OK) st = check_maps(p, n, who);
    return st == VDNN_OK ? check_settings(p, n, who) : st;
}

/* Parameters are placed when the net is attached (on the device, or in host memory
 * for a swapped layer): a plan for an attached net places them alike. */
static vdnn_status check_placed(const plan *p, const net *n, int i)
{
    if (!n->dev || !p->swap[i] == !n->layers[i]->swap) return VDNN_OK;
    return vdnn_fail(VDNN_EINVAL, "plan_apply: the plan %s %s's parameters, but the net is on its device with "
                     "them %s; swapping is decided before the parameters are placed (net_attach)",
                     p->swap[i] ? "swaps" : "keeps", n->layers[i]->name,
                     n->layers[i]->swap ? "in host memory" : "on the device");
}

/* Layer i's algorithms and swap mode from p (placement is fixed once attached; where
 * a swapped layer updates is not). */
static void set_layer(net *n, const plan *p, int i)
{
    memcpy(n->layers[i]->algo, p->algo[i], sizeof p->algo[i]);
    if (!n->dev || (p->swap[i] && n->layers[i]->swap)) n->layers[i]->swap = p->swap[i];
}

static void set_map(net *n, const plan *p, int j)
{
    n->maps[j].offload = p->offload[j] == MAP_OFFLOAD;
    n->maps[j].recompute = p->offload[j] == MAP_RECOMPUTE;
}

static void set_settings(net *n, const plan *p)
{
    n->prefetch_ahead = p->prefetch_ahead;
    n->release_lag = p->release_lag;
    n->in_place = p->in_place;
}

vdnn_status plan_apply(net *n, const plan *p)
{
    /* all checks first, so that a rejected plan leaves the net as it was */
    vdnn_status st = plan_check(p, n, "plan_apply");
    for (int i = 0; st == VDNN_OK && i < n->nlayers; i++) st = check_placed(p, n, i);
    if (st != VDNN_OK) return st;
    for (int i = 0; i < n->nlayers; i++) set_layer(n, p, i);
    for (int j = 0; n->maps && j <= n->nlayers; j++) set_map(n, p, j);
    set_settings(n, p);
    return VDNN_OK;
}

vdnn_status plan_apply_from(net *n, const plan *p, const plan *prev)
{
    if (!prev || !same_size(prev, n) || !same_size(p, n) || !n->maps) return plan_apply(n, p);
    const char *who = "plan_apply";
    vdnn_status st = VDNN_OK;
    /* The net holds maps, so it is attached and its parameters placed: a swap that
     * changes passes only from one way of swapping to the other, and which
     * recomputations run a swapped layer depends on whether it is swapped alone. */
    for (int i = 0; i < n->nlayers && st == VDNN_OK; i++) {
        for (int pass = 0; pass < PASS_COUNT && st == VDNN_OK; pass++)
            if (p->algo[i][pass] != prev->algo[i][pass]) st = check_algo(p, n, i, pass, who);
        if (st == VDNN_OK && p->swap[i] != prev->swap[i]) st = check_swap(p, n, i, who);
        if (st == VDNN_OK && p->swap[i] != prev->swap[i]) st = check_placed(p, n, i);
    }
    /* a map now or before recomputed: which recomputations run a swapped layer may have
     * changed (they go back through recomputed maps alone), and every map is checked */
    int maps = 0;
    for (int j = 0; j <= n->nlayers && st == VDNN_OK && !maps; j++)
        if (p->offload[j] != prev->offload[j]) {
            maps = p->offload[j] == MAP_RECOMPUTE || prev->offload[j] == MAP_RECOMPUTE;
            if (!maps) st = check_map(p, n, j, NULL, who);
        }
    if (st == VDNN_OK && maps) st = check_maps(p, n, who);
    if (st == VDNN_OK) st = check_settings(p, n, who);
    if (st != VDNN_OK) return st;
    for (int i = 0; i < n->nlayers; i++)
        if (p->swap[i] != prev->swap[i] || memcmp(p->algo[i], prev->algo[i], sizeof p->algo[i])) set_layer(n, p, i);
    for (int j = 0; j <= n->nlayers; j++)
        if (p->offload[j] != prev->offload[j]) set_map(n, p, j);
    set_settings(n, p);
    return VDNN_OK;
}

vdnn_status plan_attach_as(net *n, device *d, const plan *p)
{
    /* swapping is decided when the parameters are placed; a config's `policy = swap`,
     * which would swap every layer, is set aside meanwhile */
    mem_policy policy = n->policy;
    for (int i = 0; i < n->nlayers; i++) n->layers[i]->swap = p->swap[i];
    n->policy = POLICY_NONE;
    vdnn_status st = net_attach(n, d);
    n->policy = policy;
    return st;
}

/* ---- fixed policies ------------------------------------------------------------------ */

/* The algorithm of `pass` with the least time in t (NULL: all equal); ties go to the
 * smallest workspace, then the lowest index. Times only cover PLAN_MAX_ALGOS. */
static int best_algo(const layer *l, int pass, const double *t)
{
    int count = layer_algo_count(l, pass), best = 0;
    if (t && count > PLAN_MAX_ALGOS) count = PLAN_MAX_ALGOS;
    for (int a = 1; a < count; a++) {
        if (!layer_algo_usable(l, pass, a)) continue;   /* it failed to run on this device */
        if (!layer_algo_usable(l, pass, best)) {
            best = a;
            continue;
        }
        if (t && t[a] != t[best]) {
            if (t[a] < t[best]) best = a;
            continue;
        }
        if (layer_workspace_bytes(l, pass, a) < layer_workspace_bytes(l, pass, best)) best = a;
    }
    return best;
}

static const double *pass_times(const layer_cost *c, int pass)
{
    return pass == PASS_FWD ? c->fwd_s : pass == PASS_BWD_DATA ? c->bwd_data_s : c->bwd_filter_s;
}

int plan_choose_algo(const layer *l, int pass, algo_mode a, const layer_cost *c)
{
    if (l->algo_pinned[pass] >= 0) return l->algo_pinned[pass];
    if (a == ALGO_MEM) return best_algo(l, pass, NULL);
    /* The first layer's backward-data times are all 0 (no dx): the tie-break then
     * takes its smallest workspace, which is free speed-wise. */
    return c ? best_algo(l, pass, pass_times(c, pass)) : l->algo[pass];
}

vdnn_status plan_policy(const net *n, const profile *pr, mem_policy pol, algo_mode a, int prefetch_ahead,
                        int release_lag, plan *p)
{
    memset(p, 0, sizeof *p);
    if ((unsigned)pol >= POLICY_COUNT || (unsigned)a >= ALGO_MODE_COUNT)
        return vdnn_fail(VDNN_EINVAL, "plan_policy: unknown policy %d or algorithm mode %d", (int)pol, (int)a);
    if (pr && (pr->nlayers != n->nlayers || !pr->layers))
        return vdnn_fail(VDNN_EINVAL, "plan_policy: the profile has %d layers, the net has %d", pr->nlayers,
                         n->nlayers);
    vdnn_status st = plan_init(p, n);
    if (st != VDNN_OK) return st;
    p->prefetch_ahead = prefetch_ahead;
    p->release_lag = release_lag;
    snprintf(p->origin, sizeof p->origin, "%s", policy_name(pol));
    for (int j = 0; j <= n->nlayers; j++) p->offload[j] = (unsigned char)net_policy_map(n, j, pol);
    for (int i = 0; i < n->nlayers; i++) p->swap[i] = (unsigned char)net_policy_swaps(n, i, pol);
    for (int i = 0; i < n->nlayers; i++)
        for (int pass = 0; pass < PASS_COUNT; pass++)
            p->algo[i][pass] = plan_choose_algo(n->layers[i], pass, a, pr ? &pr->layers[i] : NULL);
    st = plan_check(p, n, "plan_policy");
    if (st != VDNN_OK) plan_free(p);
    return st;
}

