/* The advice a refusal gives (planner.h, plan_budget_error): every fixed policy's
 * minimum budget, and the fastest plan that fits as the planner predicts it from the
 * net's profile (a fixed policy, or --policy dyn when its own plan is faster), or how
 * to split the batch so that one fits, or the least budget that works. */
#include <string.h>

#include "nets/planner/planner.h"

/* Every fixed policy and algorithm mode, in the usual order of speed: suggestions take
 * the first that fits. */
static const struct { mem_policy p; algo_mode a; } by_speed[] = {
    {POLICY_NONE, ALGO_PERF}, {POLICY_CONV, ALGO_PERF}, {POLICY_ALL, ALGO_PERF}, {POLICY_RECOMPUTE, ALGO_PERF},
    {POLICY_NONE, ALGO_MEM},  {POLICY_CONV, ALGO_MEM},  {POLICY_ALL, ALGO_MEM},  {POLICY_RECOMPUTE, ALGO_MEM},
    {POLICY_SWAP, ALGO_PERF}, {POLICY_SWAP, ALGO_MEM},
};
#define NBY_SPEED ((int)(sizeof by_speed / sizeof *by_speed))

/* The first of by_speed whose minimum in `t` fits `budget`, or -1; *least is the least
 * minimum of them all, *at its index. */
static int first_fit(size_t t[POLICY_COUNT][ALGO_MODE_COUNT], size_t budget, size_t *least, int *at)
{
    int fit = -1;
    *at = 0;
    for (int i = 0; i < NBY_SPEED; i++) {
        size_t need = t[by_speed[i].p][by_speed[i].a];
        if (fit < 0 && need <= budget) fit = i;
        if (need < t[by_speed[*at].p][by_speed[*at].a]) *at = i;
    }
    *least = t[by_speed[*at].p][by_speed[*at].a];
    return fit;
}

/* When no policy fits the whole batch: the largest split (batch/2, /4, ... 1) in which
 * one fits, and the least budget any split needs. */
typedef struct micro_fit {
    int micro, fit;            /* the micro-batch and by_speed index that fit; micro 0: none */
    size_t need;               /* what that fit needs */
    int least_micro, least_at; /* the split and by_speed index of the least budget */
    size_t least;
} micro_fit;

static vdnn_status find_micro_fit(const net *n, size_t budget, micro_fit *mf)
{
    memset(mf, 0, sizeof *mf);
    vdnn_status st = VDNN_OK;
    for (int m = n->minibatch / 2; m >= 1 && st == VDNN_OK; m /= 2) {
        net *c = NULL;
        size_t t[POLICY_COUNT][ALGO_MODE_COUNT], least;
        int at;
        st = net_clone_micro(n, m, &c);
        /* a run with --micro-batch measures its own perf algorithms: the table bounds
         * them by the largest workspaces, as for a net not yet measured */
        if (st == VDNN_OK) c->algo = ALGO_MEM;
        if (st == VDNN_OK) st = net_budget_table(c, t);
        net_free(c);
        if (st != VDNN_OK) break;
        int fit = first_fit(t, budget, &least, &at);
        if (!mf->least || least < mf->least) {
            mf->least = least;
            mf->least_micro = m;
            mf->least_at = at;
        }
        if (fit >= 0 && !mf->micro) {
            mf->micro = m;
            mf->fit = fit;
            mf->need = t[by_speed[fit].p][by_speed[fit].a];
        }
    }
    return st;
}

/* What the planner predicts at the budget, from the net's profile: the fastest fixed
 * policy whose exact minimum fits (by_speed index, -1: none) and the planner's own plan
 * (dyn_s < 0: none fits), each with its predicted step. */
typedef struct prediction {
    int fixed;
    double fixed_s, dyn_s;
    char when[128];           /* when the profile was measured */
} prediction;

/* A planner's plan must beat the fixed policy by this much to be the advice: a fixed
 * policy is simpler to run and to reason about. */
#define DYN_GAIN 0.95

/* Measures (or reads) the profile, fills t with the measured algorithms' minimums, and
 * predicts each candidate at `budget` into pd (which starts with none: fixed -1, dyn_s -1). */
static vdnn_status predict(net *n, size_t budget, size_t t[POLICY_COUNT][ALGO_MODE_COUNT], prediction *pd)
{
    const device_options *o = device_get_options(n->dev);
    profile pr = {0};
    int cached = 0;
    vdnn_status st = profile_get(n, n->dev, o->link_gbps, o->threads, NULL, &pr, &cached);
    if (st != VDNN_OK) return vdnn_wrap(st, "profiling the net for the refusal's advice");
    profile_describe(&pr, pd->when, sizeof pd->when);
    net_take_profile_algos(n, &pr);
    st = net_budget_table(n, t);
    for (int i = 0; i < NBY_SPEED && st == VDNN_OK; i++) {
        if (t[by_speed[i].p][by_speed[i].a] > budget) continue;
        plan p = {0};
        vdnn_status r = plan_fit_policy(n, &pr, budget, by_speed[i].p, by_speed[i].a, &p);
        if (r == VDNN_OK && (pd->fixed < 0 || p.predicted_s < pd->fixed_s)) {
            pd->fixed = i;
            pd->fixed_s = p.predicted_s;
        }
        if (r == VDNN_OK) plan_free(&p);
        else if (r != VDNN_EBUDGET) st = r;
    }
    plan p = {0};
    search_limits lim = {.nodes = PLAN_NODE_LIMIT, .seconds = PLAN_SEARCH_SECONDS, .gap = PLAN_SEARCH_GAP,
                         .patience = PLAN_PATIENCE};
    vdnn_status r = st == VDNN_OK ? plan_search(n, &pr, budget, SEARCH_BB, lim, &p, NULL) : st;
    if (r == VDNN_OK) {
        pd->dyn_s = p.predicted_s;
        plan_free(&p);
    } else if (r != VDNN_EBUDGET) {
        st = r;
    }
    profile_free(&pr);
    return st;
}

/* "; the fastest that fits: FLAGS (predicted ...)" from the planner's prediction; 0 when
 * nothing fits the whole batch. */
static int advise(const prediction *pd, const char *micro, char *msg, size_t len)
{
    if (pd->fixed < 0 && pd->dyn_s < 0) return 0;
    const char *pol = pd->fixed >= 0 ? policy_name(by_speed[pd->fixed].p) : "";
    const char *alg = pd->fixed >= 0 ? algo_mode_name(by_speed[pd->fixed].a) : "";
    if (pd->dyn_s >= 0 && (pd->fixed < 0 || pd->dyn_s < DYN_GAIN * pd->fixed_s)) {
        int k = snprintf(msg, len, "; the fastest that fits: --policy dyn%s (the planner's plan, predicted %.1f ms a step",
                         micro, 1e3 * pd->dyn_s);
        if (pd->fixed >= 0)
            k += snprintf(msg + k, len - (size_t)k, "; the fastest fixed policy, --policy %s --algo %s: %.1f ms", pol,
                          alg, 1e3 * pd->fixed_s);
        else
            k += snprintf(msg + k, len - (size_t)k, "; no fixed policy fits");
        snprintf(msg + k, len - (size_t)k, "; from the profile %s)", pd->when);
    } else {
        int k = snprintf(msg, len, "; the fastest that fits: --policy %s --algo %s%s (predicted %.1f ms a step", pol,
                         alg, micro, 1e3 * pd->fixed_s);
        if (pd->dyn_s >= 0) k += snprintf(msg + k, len - (size_t)k, "; --policy dyn: %.1f ms", 1e3 * pd->dyn_s);
        snprintf(msg + k, len - (size_t)k, "; from the profile %s)", pd->when);
    }
    return 1;
}

/* The refusal's first part: what the budget is below, then every policy's minimum. */
static int list_minimums(const net *n, algo_mode asked, size_t budget, size_t need,
                         size_t t[POLICY_COUNT][ALGO_MODE_COUNT], int measured, char *msg, size_t len)
{
    char b[48];
    int k = snprintf(msg, len, "budget %s is below the %s", vdnn_fmt_bytes_exact(budget, b, sizeof b),
                     need ? "" : "parameters; ");
    if (need) k += snprintf(msg + k, len - (size_t)k, "%s needed by policy %s with %s algorithms; ",
                            vdnn_fmt_bytes_exact(need, b, sizeof b), policy_name(n->policy), algo_mode_name(asked));
    k += snprintf(msg + k, len - (size_t)k, "minimum budgets (perf: %s; mem: the smallest workspaces):",
                  measured ? "the fastest algorithms measured on this device" : "the largest workspaces, unmeasured");
    for (int i = 0; i < NBY_SPEED; i++)
        k += snprintf(msg + k, len - (size_t)k, " %s/%s %s%s", policy_name(by_speed[i].p), algo_mode_name(by_speed[i].a),
                      vdnn_fmt_bytes(t[by_speed[i].p][by_speed[i].a], b, sizeof b), i + 1 < NBY_SPEED ? "," : "");
    return k;
}

vdnn_status plan_budget_error(net *n, size_t budget, size_t need)
{
    size_t t[POLICY_COUNT][ALGO_MODE_COUNT], least;
    prediction pd = {.fixed = -1, .dyn_s = -1};
    const algo_mode asked = n->algo;
    vdnn_status st;
    /* below the parameters the net is not attached: nothing can be measured, so the table
     * bounds the perf algorithms by the largest workspaces */
    int measured = need && n->dev && device_get_code(n->dev) != DEVICE_CODE_NONE;
    if (measured) {
        st = predict(n, budget, t, &pd);
    } else {
        algo_mode mode = n->algo;
        n->algo = ALGO_MEM;
        st = net_budget_table(n, t);
        n->algo = mode;
    }
    if (st != VDNN_OK) return st;
    char msg[2048], b[48], c[48], micro[48] = "";
    if (n->micro) snprintf(micro, sizeof micro, " --micro-batch %d", n->micro);
    int len = list_minimums(n, asked, budget, need, t, measured, msg, sizeof msg);
    int at, fit = first_fit(t, budget, &least, &at);
    if (measured && advise(&pd, micro, msg + len, sizeof msg - (size_t)len)) return vdnn_fail(VDNN_EBUDGET, "%s", msg);
    if (!measured && fit >= 0) {
        snprintf(msg + len, sizeof msg - len, "; the fastest that fits: --policy %s --algo %s%s",
                 policy_name(by_speed[fit].p), algo_mode_name(by_speed[fit].a), micro);
        return vdnn_fail(VDNN_EBUDGET, "%s", msg);
    }
    micro_fit mf = {0};
    if (!n->micro && (st = find_micro_fit(n, budget, &mf)) != VDNN_OK) return st;
    if (mf.micro)
        snprintf(msg + len, sizeof msg - len, "; none fits the whole batch: --policy dyn splits it, as does "
                 "--micro-batch %d --policy %s --algo %s (%s)", mf.micro, policy_name(by_speed[mf.fit].p),
                 algo_mode_name(by_speed[mf.fit].a), vdnn_fmt_bytes_exact(mf.need, b, sizeof b));
    else if (mf.least && mf.least < least)
        snprintf(msg + len, sizeof msg - len, "; none fits, not even in micro-batches: raise --budget to at least "
                 "%s with --micro-batch %d --policy %s --algo %s (the whole batch needs %s)",
                 vdnn_fmt_bytes_exact(mf.least, b, sizeof b), mf.least_micro, policy_name(by_speed[mf.least_at].p),
                 algo_mode_name(by_speed[mf.least_at].a), vdnn_fmt_bytes_exact(least, c, sizeof c));
    else
        snprintf(msg + len, sizeof msg - len, "; none fits: raise --budget to at least %s (--policy %s --algo %s%s)",
                 vdnn_fmt_bytes_exact(least, b, sizeof b), policy_name(by_speed[at].p), algo_mode_name(by_speed[at].a),
                 micro);
    return vdnn_fail(VDNN_EBUDGET, "%s", msg);
}
