/* The advice a refusal gives (planner.h, plan_budget_error): every fixed policy's
 * minimum budget, and the fastest one that fits, or how to split the batch so that one
 * does, or the least budget that works. */
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

vdnn_status plan_budget_error(net *n, size_t budget, size_t need)
{
    size_t t[POLICY_COUNT][ALGO_MODE_COUNT], least;
    /* below the parameters, the net was never planned: no perf algorithm was measured,
     * so the table bounds them by the largest workspaces */
    algo_mode mode = n->algo;
    if (!need) n->algo = ALGO_MEM;
    vdnn_status st = net_budget_table(n, t);
    n->algo = mode;
    if (st != VDNN_OK) return st;
    char msg[1536], b[48], c[48], micro[48] = "";
    if (n->micro) snprintf(micro, sizeof micro, " --micro-batch %d", n->micro);
    int len = snprintf(msg, sizeof msg, "budget %s is below the %s", vdnn_fmt_bytes_exact(budget, b, sizeof b),
                       need ? "" : "parameters; ");
    if (need) len += snprintf(msg + len, sizeof msg - len, "%s needed by policy %s with %s algorithms; ",
                              vdnn_fmt_bytes_exact(need, b, sizeof b), policy_name(n->policy), algo_mode_name(n->algo));
    len += snprintf(msg + len, sizeof msg - len, "minimum budgets:");
    for (int i = 0; i < NBY_SPEED; i++)
        len += snprintf(msg + len, sizeof msg - len, " %s/%s %s%s", policy_name(by_speed[i].p),
                        algo_mode_name(by_speed[i].a), vdnn_fmt_bytes(t[by_speed[i].p][by_speed[i].a], b, sizeof b),
                        i + 1 < NBY_SPEED ? "," : "");
    int at, fit = first_fit(t, budget, &least, &at);
    if (fit >= 0) {
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
