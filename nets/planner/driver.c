/* The planner's driver (planner.h): planning a run. Attaching a net whose parameters
 * the planner may swap, a fixed policy checked against the budget, `--policy dyn`
 * (profile, micro-batch choice, search, verification, application), a plan file, and a
 * data-parallel replica planned as one device would be. */
#include <stdio.h>
#include <string.h>

#include "nets/planner/planner.h"

vdnn_status plan_search_kind(const char *name, search_kind *k)
{
    if (!name || !strcmp(name, "bb")) *k = SEARCH_BB;
    else if (!strcmp(name, "vdnn")) *k = SEARCH_VDNN;
    else return vdnn_fail(VDNN_EINVAL, "--search: '%s' is not one of bb, vdnn", name);
    return VDNN_OK;
}

static void summary(FILE *out, const plan *p, const char *what)
{
    char b[32];
    fprintf(out, "  %-22s predicted %8.2f ms", what, 1e3 * p->predicted_s);
    if (p->measured_s >= 0) fprintf(out, ", measured %8.2f ms (%+.1f%%)", 1e3 * p->measured_s,
                                   100 * (p->measured_s / p->predicted_s - 1));
    fprintf(out, ", peak %s\n", vdnn_fmt_bytes(p->peak_bytes, b, sizeof b));
}

/* The micro-batch size (0: none) to plan with: the whole batch when its best plan is
 * within MICRO_SLACK of the net's speed with unlimited memory; else the split (batch/2,
 * /4, ...) whose best plan is predicted fastest per batch, each profiled at its size.
 * Prediction only: the chosen one is verified afterwards. */
#define MICRO_SLACK 1.05

/* The search limits of the flags. */
static search_limits limits_of(const planner_opts *f)
{
    search_limits lim = {.nodes = (long)f->node_limit, .seconds = f->search_seconds, .gap = f->search_gap,
                         .patience = f->search_gap > 0 ? PLAN_PATIENCE : 0};
    return lim;
}

/* `--search-seconds` is the time of the whole planning, measurements apart: each size
 * the micro-batch choice weighs is searched for at most this share of it, and the size
 * chosen is then searched again, from the plan found for it, for what is left (this
 * share at least). */
#define MICRO_SHARE 0.25

/* A split none of whose seeds fits gets this many nodes of the tree to find a plan that
 * fits (search_limits): proving that none does can take the whole tree. */
#define MICRO_FIT_NODES 1000

/* The limits of one search of a planning that began at *start (moved on by the time
 * spent measuring profiles): `share` of the time at most, what is left of it, and
 * MICRO_SHARE of it at least. */
static search_limits limits_left(const planner_opts *f, double start, double share)
{
    search_limits lim = limits_of(f);
    if (lim.seconds <= 0) return lim;
    double left = start + f->search_seconds - vdnn_now_s();
    if (left > f->search_seconds * share) left = f->search_seconds * share;
    lim.seconds = left > f->search_seconds * MICRO_SHARE ? left : f->search_seconds * MICRO_SHARE;
    return lim;
}

/* Whether `dyn` weighs splits of the batch (pick_micro): not where the split is given
 * (--micro-batch, or the config's), for a batch of one, or for vDNN's ladder. */
static int weighs_splits(const net *n, const planner_opts *f, search_kind k)
{
    return !f->fixed_split && !n->micro && n->minibatch > 1 && k == SEARCH_BB;
}

/* The final search's limits, after pick_micro (started at `start`) chose `micro`: the
 * whole batch's floor handed on (floor_s: pick_micro's, of this very profile; a split's
 * floor was of the profile its weighing read, which the cache may have rounded since). */
static search_limits final_limits(const planner_opts *f, double start, int micro, double floor_s)
{
    search_limits lim = limits_left(f, start, 1.0);
    if (!micro) lim.floor_s = floor_s;
    return lim;
}

/* pick_micro's search of one size, with one climb: the size chosen is searched again,
 * fully, from its plan (which that search's seeds need not be measured for again); the
 * best plan so far kept in *found when this one is faster. floor_s: the size's (floor_of),
 * 0 where not known. */
static vdnn_status try_size(const net *c, const planner_opts *f, double start, search_kind k, const profile *pr,
                            double floor_s, plan *found, double *best, int *better)
{
    search_limits lim = limits_left(f, start, MICRO_SHARE);
    lim.fit_nodes = MICRO_FIT_NODES;
    lim.one_climb = 1;
    lim.floor_s = floor_s;
    plan p = {0};
    *better = 0;
    vdnn_status st = plan_search(c, pr, f->budget, k, lim, &p, NULL);
    if (st != VDNN_OK) return st;
    if (p.predicted_s < *best) {
        *best = p.predicted_s;
        *better = 1;
        plan_free(found);
        *found = p;
    } else {
        plan_free(&p);
    }
    return VDNN_OK;
}

/* The net's plan with unlimited memory and the fastest algorithms, into *ideal (empty,
 * predicted_s 0, where it cannot be made): no plan of it is faster. */
static void ideal_of(const net *n, const profile *pr, plan *ideal)
{
    if (plan_fit_policy(n, pr, 0, POLICY_NONE, ALGO_PERF, ideal) != VDNN_OK) *ideal = (plan){.predicted_s = 0};
}

/* Its predicted step (0 where not known). */
static double floor_of(const net *n, const profile *pr)
{
    plan ideal;
    ideal_of(n, pr, &ideal);
    double t = ideal.predicted_s;
    plan_free(&ideal);
    return t;
}

vdnn_status plan_clone_split(const net *n, device *dev, int micro, net **out)
{
    vdnn_status st = net_clone_micro(n, micro, out);
    /* an attached net's clone has its device's algorithms at the clone's batch already */
    for (int i = 0; st == VDNN_OK && !n->dev && dev && device_algos_by_batch(dev) && i < (*out)->nlayers; i++)
        st = layer_bind((*out)->layers[i], dev);
    if (st != VDNN_OK && *out) {
        net_free(*out);
        *out = NULL;
    }
    return st;
}

/* A split's weighing (pick_micro): the floor of micro-batches of m items (no plan of
 * them is faster), and where searched, what the search found (st VDNN_EBUDGET: no plan
 * fits, or the split could not be profiled in the device's memory), its plan in p. */
typedef struct split_try {
    int m;
    double floor_s;
    int searched;
    vdnn_status st;
    plan p;
} split_try;

/* Split m of n weighed into *t: searched unless its floor is at least `best` (such a
 * split is no better without a search). *start moves on by the time spent measuring
 * its profile. */
static vdnn_status weigh_split(const net *n, device *dev, const planner_opts *f, double *start, search_kind k, int m,
                               double best, split_try *t)
{
    *t = (split_try){.m = m, .st = VDNN_OK};
    net *c = NULL;
    profile cp = {0};
    int cached = 0;
    double t0 = vdnn_now_s();
    vdnn_status st = plan_clone_split(n, dev, m, &c);
    /* where no plan of the split fits, neither measured nor searched, while no size has
     * a plan (after one, a split whose floor is no better ends the choice, which needs
     * its profile); but micro-batches of one, the last size weighed: where nothing fits,
     * their search's error names the least budget any of their plans needs */
    if (st == VDNN_OK && m > 1 && best >= 1e300 && !f->whole_first && f->budget && plan_least_held(c) > f->budget)
        st = VDNN_EBUDGET;
    else if (st == VDNN_OK) st = profile_get(c, dev, f->link_gbps, (int)f->threads, f->cache, &cp, &cached);
    *start += vdnn_now_s() - t0;
    if (st == VDNN_EBUDGET) {   /* not even measured in the device's memory: no plan of it fits */
        t->searched = 1;
        t->st = st;
        st = VDNN_OK;
    } else if (st == VDNN_OK) {
        t->floor_s = floor_of(c, &cp);
    }
    if (st == VDNN_OK && !t->searched && (f->whole_first || !(best < 1e300 && t->floor_s >= best))) {
        double got = 1e300;
        int better = 0;
        t->searched = 1;
        t->st = try_size(c, f, *start, k, &cp, t->floor_s, &t->p, &got, &better);
        if (t->st != VDNN_OK && t->st != VDNN_EBUDGET) st = t->st;
    }
    profile_free(&cp);
    net_free(c);
    return st;
}

/* A size the micro-batch choice weighed, into `vdnn profile`'s report (plan_report). */
static void log_weighed(plan_report *log, int m, int kind, double s)
{
    if (log && log->nweighed < PLAN_WEIGHED_MAX) {
        log->weighed[log->nweighed].items = m;
        log->weighed[log->nweighed].kind = kind;
        log->weighed[log->nweighed++].s = s;
    }
}

static void log_split(plan_report *log, const split_try *t)
{
    if (!t->searched) log_weighed(log, t->m, PLAN_WEIGHED_FLOOR, t->floor_s);
    else if (t->st == VDNN_OK) log_weighed(log, t->m, PLAN_WEIGHED_PLAN, t->p.predicted_s);
    else log_weighed(log, t->m, PLAN_WEIGHED_NONE_FITS, 0);
}

/* *found: the best plan of the size chosen, for the final search to start from;
 * *ideal_s: the whole batch's step with unlimited memory (0 where not known).
 * The splits are profiled on dev; *start moves on by the time that takes. Each size
 * weighed goes to *log (may be NULL), and why the whole batch was not searched.
 *
 * The whole batch is searched first, then the splits in turn, halving, until one's
 * floor is no better than the best plan found or the best is as good as unlimited
 * memory (MICRO_SLACK). A size whose plans all hold more than the budget at once
 * (plan_least_held) is neither measured nor searched: no plan of it fits
 * (log->whole_least, for the whole batch; on ResNet-1202 at batch 2 and the least budget of
 * micro-batches of one, its search took 0.08 s to find none). And where no plan of the
 * whole batch can be as good as unlimited memory (its floor at the budget,
 * plan_floor_within, is above the target) nor as fast as the first split's floor, that
 * split is searched first, and the whole batch only where its plan is not below that
 * floor: else no plan of the whole batch could have been chosen. The same size and plan are chosen as in that order, and
 * nothing is searched that it would not search (on ResNet-1202 at batch 2 and the least
 * budget its whole batch fits, the whole batch's best plan is 1545 ms, its floor there
 * 654 ms, and micro-batches of one plan in 316 ms). */
static vdnn_status pick_micro(const net *n, device *dev, const planner_opts *f, double *start, search_kind k,
                              const profile *pr, int *micro, plan *found, double *ideal_s, plan_report *log)
{
    *micro = 0;
    double best = 1e300;
    plan ideal;
    ideal_of(n, pr, &ideal);
    *ideal_s = ideal.predicted_s;
    const double target = MICRO_SLACK * ideal.predicted_s;
    split_try first = {0};
    int have_first = 0, whole = 1;
    double within = 0;
    vdnn_status st = VDNN_OK;
    const size_t least_held = f->budget && !f->whole_first ? plan_least_held(n) : 0;
    if (least_held > f->budget) {   /* no plan of the whole batch fits */
        whole = 0;
        if (log) log->whole_least = least_held;
        log_weighed(log, n->minibatch, PLAN_WEIGHED_NONE_FITS, 0);
    } else if (!f->whole_first && n->minibatch >= 2 && f->budget &&
               plan_floor_within_from(n, pr, f->budget, ideal.nlayers ? &ideal : NULL, &within) == VDNN_OK &&
               within > target) {
        st = weigh_split(n, dev, f, start, k, n->minibatch / 2, within, &first);
        have_first = st == VDNN_OK;
        if (have_first) log_split(log, &first);
        whole = !(first.searched && first.st == VDNN_OK && first.p.predicted_s < within);
        if (!whole) {
            if (log) log->whole_floor_s = within;
            log_weighed(log, n->minibatch, PLAN_WEIGHED_FLOOR, within);
        }
    }
    if (st == VDNN_OK && whole) {
        int better = 0;
        st = try_size(n, f, *start, k, pr, ideal.predicted_s, found, &best, &better);
        if (st == VDNN_EBUDGET) st = VDNN_OK;
        if (st == VDNN_OK) log_weighed(log, n->minibatch, best < 1e300 ? PLAN_WEIGHED_PLAN : PLAN_WEIGHED_NONE_FITS, best);
        if (best <= target) best = -1;   /* the whole batch is good enough */
    }
    for (int m = n->minibatch / 2; st == VDNN_OK && best >= 0 && m >= 1; m /= 2) {
        split_try t;
        /* the first split, weighed before the whole batch: what it found stands where it
         * would have been searched after it, and where it was not searched, its floor
         * answers as it would have */
        if (m == first.m && have_first && (first.searched || (best < 1e300 && first.floor_s >= best))) {
            t = first;
            have_first = 0;
            first.p = (plan){0};
            if (best < 1e300 && t.floor_s >= best) {
                t.searched = 0;
                plan_free(&t.p);
            }
        } else {
            st = weigh_split(n, dev, f, start, k, m, best, &t);
            if (st != VDNN_OK) break;
            log_split(log, &t);
        }
        /* a split whose every plan is slower than the best found (its floor is) is no
         * better without a search, and ends the choice as such a split does */
        int done = !t.searched;
        int better = t.searched && t.st == VDNN_OK && t.p.predicted_s < best;
        if (better) {
            best = t.p.predicted_s;
            plan_free(found);
            *found = t.p;
            *micro = m;
        } else {
            plan_free(&t.p);
        }
        /* a smaller split may still be faster where this one fits and is no better: a
         * split is weighed by one climb, which can miss what its search finds (on
         * Fashion-MNIST's net at batch 128 and a 22.7 MiB budget the choice stopped at
         * micro-batches of 64 items, 129.65 ms, where 16 plan in 104.17 ms); the choice
         * ends at a split as good as unlimited memory, or at one whose floor is no
         * better than the best found (above: the splits' floors rise as they shrink) */
        done = done || (t.st == VDNN_OK && best <= target);
        if (done) break;
    }
    plan_free(&first.p);
    plan_free(&ideal);
    if (st != VDNN_OK) return st;
    if (best >= 1e300) return VDNN_EBUDGET;
    return VDNN_OK;
}

/* The net rebuilt for micro-batches of `micro` items, attached where n was, with its
 * parameters placed as the whole-batch net could place them (swapped where they do not
 * fit: the plan for the micro-batches decides again). */
static vdnn_status remake(net **np, int micro)
{
    net *n = *np, *m = NULL;
    device *d = n->dev;
    net_detach(n);
    vdnn_status st = net_remake(n, micro, &m);
    if (st != VDNN_OK) return st;
    net_free(n);
    *np = m;
    return plan_attach(m, d);
}

/* The search's stops: the word of plan_report.stop, and what the text report says of it. */
static const struct {
    const char *word, *why;
} stops[] = {
    {"complete", ""},
    {"gap", " (stopped within --search-gap of unlimited memory's speed)"},
    {"time", " (time limit reached: --search-seconds)"},
    {"stalled", " (stopped: the branch and bound had not improved its plan for a while)"},
    {"nodes", " (node limit reached: --node-limit)"},
};

static const char *stop_word(const search_stats *ss)
{
    return stops[ss->within_gap ? 1 : ss->complete ? 0 : ss->timed_out ? 2 : ss->stalled ? 3 : 4].word;
}

/* `vdnn profile`'s report of how its plan was found, for people. */
static void print_report(FILE *out, const plan_report *r, const profile *pr, int batch)
{
    const char *why = "";
    for (size_t w = 0; r->stop && w < sizeof stops / sizeof stops[0]; w++)
        if (!strcmp(r->stop, stops[w].word)) why = stops[w].why;
    fprintf(out, "vdnn: planner (%s search): profile %s (%.2f s), micro-batch choice %.2f s, search %.3f s over "
            "%ld simulations%s, verification %.2f s\n", r->stop ? "branch-and-bound" : "vDNN",
            r->profile_cached ? "cached" : "measured", r->profile_s, r->micro_s, r->search_s, r->simulations, why,
            r->verify_s);
    if (r->profile_cached) {
        char when[128];
        profile_describe(pr, when, sizeof when);
        fprintf(out, "  the cached profile was %s (--reprofile measures it again)\n", when);
    }
    if (r->micro) fprintf(out, "  micro-batches of %d items: faster (or the only fit) in this budget\n", r->micro);
    if (r->nweighed > 1) {
        fprintf(out, "  sizes weighed (items per micro-batch, each by one climb):");
        for (int e = 0; e < r->nweighed; e++) {
            fprintf(out, "%s %d%s ", e ? "," : "", r->weighed[e].items, r->weighed[e].items == batch ? " (the batch)" : "");
            if (r->weighed[e].kind == PLAN_WEIGHED_PLAN) fprintf(out, "%.2f ms", 1e3 * r->weighed[e].s);
            else if (r->weighed[e].kind == PLAN_WEIGHED_NONE_FITS) fprintf(out, "none fits");
            else fprintf(out, "none faster than %.2f ms", 1e3 * r->weighed[e].s);
        }
        fputc('\n', out);
    }
    if (r->whole_floor_s > 0)
        fprintf(out, "  the whole batch not searched: no plan of it is faster than %.2f ms in this budget\n",
                1e3 * r->whole_floor_s);
    if (r->whole_least > 0) {
        char b[48];
        fprintf(out, "  the whole batch not searched: every plan of it holds at least %s at once\n",
                vdnn_fmt_bytes_exact(r->whole_least, b, sizeof b));
    }
}

vdnn_status plan_dyn(net **np, const planner_opts *f, FILE *out, plan *chosen, plan_report *report)
{
    search_kind k = SEARCH_BB;
    vdnn_status st = plan_search_kind(f->search, &k);
    if (st != VDNN_OK) return st;
    net *n = *np;
    const int batch = n->minibatch;
    profile pr = {0};
    int micro = 0;
    double floor_s = 0;
    plan_report r = {0};
    double t0 = vdnn_now_s();
    st = profile_get(n, n->dev, f->link_gbps, (int)f->threads, f->cache, &pr, &r.profile_cached);
    if (st != VDNN_OK) return vdnn_wrap(st, "profiling the net");
    double t1 = vdnn_now_s();
    plan best = {0}, alt = {0}, found = {0};
    search_stats ss = {0};
    double start = t1;
    if (weighs_splits(n, f, k))
        st = pick_micro(n, n->dev, f, &start, k, &pr, &micro, &found, &floor_s, &r);
    if (st == VDNN_OK && micro) {
        st = remake(np, micro);
        n = *np;
        profile_free(&pr);
        int again = 0;   /* measured while choosing the split: cached by now */
        if (st == VDNN_OK) st = profile_get(n, n->dev, f->link_gbps, (int)f->threads, f->cache, &pr, &again);
    }
    double t_micro = vdnn_now_s();
    if (st == VDNN_OK)
        st = plan_choose(n, &pr, f->budget, k, final_limits(f, start, micro, floor_s), found.nlayers ? &found : NULL,
                         (int)f->verify, &best, &alt, &ss);
    plan_free(&found);
    if (st == VDNN_EBUDGET && k == SEARCH_BB && !n->micro)
        vdnn_wrap(st, "not even in micro-batches of one item");
    double t2 = vdnn_now_s();
    r.profile_s = t1 - t0;
    r.micro_s = t_micro - t1;
    r.search_s = ss.seconds;
    r.verify_s = t2 - t_micro - ss.seconds;
    r.simulations = ss.simulations;
    r.stop = k == SEARCH_BB ? stop_word(&ss) : NULL;
    r.micro = micro;
    if (st == VDNN_OK && out) {
        print_report(out, &r, &pr, batch);
        summary(out, &best, "chosen plan:");
        if (alt.nlayers) summary(out, &alt, "other candidate:");
    }
    if (alt.nlayers) plan_free(&alt);
    /* without verification the net may hold its parameters otherwise: nothing to apply */
    if (st == VDNN_OK && f->verify) st = plan_apply(n, &best);
    if (st == VDNN_OK && f->json) plan_print_json(stdout, &best, n, &pr, &r);
    else if (st == VDNN_OK && out) plan_print(out, &best, n, &pr);
    if (st == VDNN_OK && chosen) *chosen = best;
    else plan_free(&best);
    if (st == VDNN_OK && report) *report = r;
    profile_free(&pr);
    return st;
}

vdnn_status plan_dyn_split(const net *n, device *dev, const profile *pr, const planner_opts *f, int *micro, plan *out,
                           search_stats *stats)
{
    search_kind k = SEARCH_BB;
    vdnn_status st = plan_search_kind(f->search, &k);
    *micro = 0;
    if (st != VDNN_OK) return st;
    plan found = {0};
    double start = vdnn_now_s(), floor_s = 0;
    if (weighs_splits(n, f, k)) st = pick_micro(n, dev, f, &start, k, pr, micro, &found, &floor_s, NULL);
    net *c = NULL;
    profile cp = {0};
    if (st == VDNN_OK && *micro) {
        int cached = 0;   /* measured while choosing the split */
        st = plan_clone_split(n, dev, *micro, &c);
        if (st == VDNN_OK) st = profile_get(c, dev, f->link_gbps, (int)f->threads, f->cache, &cp, &cached);
    }
    if (st == VDNN_OK)
        st = plan_search_from(c ? c : n, c ? &cp : pr, f->budget, k, final_limits(f, start, *micro, floor_s),
                              found.nlayers ? &found : NULL, out, stats);
    plan_free(&found);
    profile_free(&cp);
    net_free(c);
    return st;
}

vdnn_status plan_attach_file(net *n, device *d, const char *path, size_t budget)
{
    if (n->dev) return vdnn_fail(VDNN_EINVAL, "plan_attach_file: the net is already on a device");
    /* the plan names algorithms as the device's table does: the layers bound first */
    vdnn_status st = VDNN_OK;
    for (int i = 0; i < n->nlayers && st == VDNN_OK; i++) st = layer_bind(n->layers[i], d);
    plan p = {0};
    if (st == VDNN_OK) st = plan_load(n, path, &p);
    if (st != VDNN_OK) return st;
    simulator *s = NULL;
    double t;
    st = sim_create(n, NULL, &s);
    if (st == VDNN_OK) st = sim_run(s, &p, &t, &p.peak_bytes);
    sim_destroy(s);
    char b[48], need[48];
    if (st == VDNN_OK && budget && p.peak_bytes > budget)
        st = vdnn_fail(VDNN_EBUDGET, "--plan %s needs %s of device memory, more than the budget of %s", path,
                       vdnn_fmt_bytes_exact(p.peak_bytes, need, sizeof need), vdnn_fmt_bytes_exact(budget, b, sizeof b));
    if (st == VDNN_OK) st = plan_attach_as(n, d, &p);
    if (st == VDNN_OK) st = plan_apply(n, &p);
    plan_free(&p);
    return st;
}

vdnn_status plan_attach(net *n, device *d)
{
    vdnn_status st = net_attach(n, d);
    /* the planner may swap parameters that do not fit: it places them as it plans */
    if (st == VDNN_EBUDGET && n->dyn) {
        net_detach(n);
        for (int i = 0; i < n->nlayers; i++) n->layers[i]->swap = layer_swappable(n->layers[i]);
        st = net_attach(n, d);
    }
    return st;
}

vdnn_status plan_fixed(net *n, size_t budget, size_t *need)
{
    size_t bytes = 0;
    vdnn_status st = net_plan(n, n->policy, n->algo);
    if (st == VDNN_OK) st = net_fit_budget(n, budget, &bytes);
    if (need) *need = bytes;
    return st == VDNN_EBUDGET ? plan_budget_error(n, budget, bytes) : st;
}

/* A replica rebuilt for a new share keeps the algorithms measured for the old one where
 * they fit, rather than measuring every algorithm again at a batch size it may hold for
 * a few steps only. */
vdnn_status plan_replica(void *opts, net **np, const int (*algos)[PASS_COUNT])
{
    const planner_opts *f = opts;
    net *n = *np;
    size_t budget = device_get_options(n->dev)->budget_bytes;
    if (!n->dyn && algos && n->algo == ALGO_PERF) {
        vdnn_status st = net_plan_static(n, n->policy, ALGO_PERF);
        for (int i = 0; i < n->nlayers; i++)
            for (int p = 0; p < PASS_COUNT; p++)
                if (layer_algo_usable(n->layers[i], p, algos[i][p])) n->layers[i]->algo[p] = algos[i][p];
        size_t need = 0;
        if (st == VDNN_OK && net_fit_budget(n, budget, &need) == VDNN_OK) return VDNN_OK;
    }
    if (!n->dyn) return plan_fixed(n, budget, NULL);
    planner_opts pf = *f;
    pf.budget = budget;
    pf.json = 0;
    return plan_dyn(np, &pf, NULL, NULL, NULL);
}
