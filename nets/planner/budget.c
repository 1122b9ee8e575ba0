/* The fixed policies' plans with measured algorithms (net_plan), and the smallest
 * budget a net's plan fits in, found by replaying it on the simulated device (planner.h;
 * the plans without measuring are nets/net.c's net_plan_static). */
#include <stdlib.h>
#include <string.h>

#include "nets/net.h"
#include "nets/planner/planner.h"

void net_take_profile_algos(net *n, const profile *pr)
{
    n->algo = ALGO_PERF;
    for (int i = 0; i < n->nlayers; i++)
        for (int p = 0; p < PASS_COUNT; p++)
            n->layers[i]->algo[p] = plan_choose_algo(n->layers[i], p, ALGO_PERF, &pr->layers[i]);
}

/* The fastest algorithm per pass, from the net's profile on its device: measured once
 * at the net's batch and then read from the profile cache (nets/planner/planner.h), so that
 * every run on the same device picks the same algorithms. */
static vdnn_status measure_algos(net *n)
{
    const device_options *o = device_get_options(n->dev);
    profile pr;
    int cached = 0;
    vdnn_status st = profile_get(n, n->dev, o->link_gbps, o->threads, NULL, &pr, &cached);
    if (st != VDNN_OK) return vdnn_wrap(st, "measuring convolution algorithms");
    net_take_profile_algos(n, &pr);
    profile_free(&pr);
    return VDNN_OK;
}

vdnn_status net_plan(net *n, mem_policy p, algo_mode a)
{
    net_plan_static(n, p, a);
    if (a == ALGO_PERF && n->dev && device_get_code(n->dev) != DEVICE_CODE_NONE) return measure_algos(n);
    return VDNN_OK;
}

/* The least budget of n's plan as it stands (plan_from_net, which takes the maps and
 * the swaps its policy gives where it is not attached), replayed on sim, a simulator of
 * n. The pool decides the same way in any capacity, so one replay in a pool too large
 * to fill gives the frontier's high-water mark: the least budget that works, and one
 * that works in every larger budget. */
static vdnn_status min_budget_on(simulator *sim, const net *n, size_t *bytes)
{
    plan p = {0};
    double t = 0;
    vdnn_status st = plan_from_net(n, &p);
    if (st == VDNN_OK) st = sim_run(sim, &p, &t, bytes);
    plan_free(&p);
    return st;
}

vdnn_status net_min_budget(net *n, size_t *bytes)
{
    simulator *sim = NULL;
    vdnn_status st = sim_create(n, NULL, &sim);
    if (st == VDNN_OK) st = min_budget_on(sim, n, bytes);
    sim_destroy(sim);
    return st;
}

/* How early copies may run, fastest first; each needs more memory than the next. */
static const struct { int ahead, lag; } overlap_modes[] = {
    {PREFETCH_FAR, 1}, {PREFETCH_NEXT, 1}, {PREFETCH_NEXT, 0}, {PREFETCH_ON_DEMAND, 0},
};

static vdnn_status fit_budget_on(simulator *sim, net *n, size_t budget, size_t *need)
{
    size_t least = 0;
    int count = (int)(sizeof overlap_modes / sizeof *overlap_modes);
    for (int k = 0; k < count; k++)
        for (int in_place = n->may_in_place ? IN_PLACE_OVER_OUTPUT : IN_PLACE_OFF; in_place >= 0; in_place--) {
            n->prefetch_ahead = overlap_modes[k].ahead;
            n->release_lag = overlap_modes[k].lag;
            n->in_place = in_place;
            vdnn_status st = min_budget_on(sim, n, need);
            if (st != VDNN_OK) return st;
            if (!budget || *need <= budget) return VDNN_OK;
            if (!least || *need < least) least = *need;
        }
    *need = least;
    return VDNN_EBUDGET;
}

vdnn_status net_fit_budget(net *n, size_t budget, size_t *need)
{
    simulator *sim = NULL;
    vdnn_status st = sim_create(n, NULL, &sim);
    if (st == VDNN_OK) st = fit_budget_on(sim, n, budget, need);
    sim_destroy(sim);
    return st;
}

static vdnn_status least_budget_on(simulator *sim, net *n, size_t *bytes)
{
    int ahead = n->prefetch_ahead, lag = n->release_lag, in_place = n->in_place;
    vdnn_status st = fit_budget_on(sim, n, 1, bytes);
    n->prefetch_ahead = ahead;
    n->release_lag = lag;
    n->in_place = in_place;
    return st == VDNN_EBUDGET ? VDNN_OK : st;
}

vdnn_status net_least_budget(net *n, size_t *bytes)
{
    simulator *sim = NULL;
    vdnn_status st = sim_create(n, NULL, &sim);
    if (st == VDNN_OK) st = least_budget_on(sim, n, bytes);
    sim_destroy(sim);
    return st;
}

vdnn_status net_budget_table(net *n, size_t table[POLICY_COUNT][ALGO_MODE_COUNT])
{
    int (*saved_algo)[PASS_COUNT] = malloc((size_t)n->nlayers * sizeof *saved_algo);
    unsigned char *saved_swap = malloc((size_t)n->nlayers);
    if (!saved_algo || !saved_swap) {
        free(saved_algo);
        free(saved_swap);
        return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    }
    for (int i = 0; i < n->nlayers; i++) memcpy(saved_algo[i], n->layers[i]->algo, sizeof saved_algo[i]);
    for (int i = 0; i < n->nlayers; i++) saved_swap[i] = (unsigned char)n->layers[i]->swap;
    mem_policy saved_policy = n->policy;
    algo_mode saved_mode = n->algo;
    int saved_far = n->prefetch_ahead, saved_lag = n->release_lag, saved_in_place = n->in_place;
    /* one simulator for the table's 100-odd replays (each policy, algorithm mode and copy
     * timing): its clone of the net places the parameters again where a policy swaps
     * them otherwise, instead of a clone built and attached afresh for each (ResNet-1202's
     * `vdnn info` took 6.5 s, three quarters of it so) */
    simulator *sim = NULL;
    vdnn_status st = sim_create(n, NULL, &sim);
    for (int a = 0; a < ALGO_MODE_COUNT && st == VDNN_OK; a++) {
        /* perf keeps the algorithms measured now if the net is in perf mode, else assumes
         * the largest-workspace ones; mem takes the smallest */
        if (a == ALGO_MEM || saved_mode != ALGO_PERF) net_pick_algos(n, (algo_mode)a);
        for (int p = 0; p < POLICY_COUNT && st == VDNN_OK; p++) {
            n->policy = (mem_policy)p;
            for (int j = 0; n->maps && j <= n->nlayers; j++) net_set_map(&n->maps[j], net_policy_map(n, j, (mem_policy)p));
            /* each policy with its own placement of the parameters, whatever the net's is
             * (the replay reads only the flags: nothing on the device moves) */
            for (int i = 0; i < n->nlayers; i++)
                n->layers[i]->swap = net_policy_swaps(n, i, (mem_policy)p) ? SWAP_HOST : SWAP_NONE;
            st = least_budget_on(sim, n, &table[p][a]);
        }
    }
    sim_destroy(sim);
    for (int i = 0; i < n->nlayers; i++) memcpy(n->layers[i]->algo, saved_algo[i], sizeof saved_algo[i]);
    for (int i = 0; i < n->nlayers; i++) n->layers[i]->swap = saved_swap[i];
    free(saved_algo);
    free(saved_swap);
    n->policy = saved_policy;
    n->algo = saved_mode;
    n->prefetch_ahead = saved_far;
    n->release_lag = saved_lag;
    n->in_place = saved_in_place;
    for (int j = 0; n->maps && j <= n->nlayers; j++) net_set_map(&n->maps[j], net_policy_map(n, j, saved_policy));
    return st;
}
