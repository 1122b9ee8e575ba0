/* The searches for the fastest plan that fits a budget (planner.h, docs/planner.md):
 * vDNN's own ladder, kept as the reference, and a branch and bound over every
 * decision of a plan, both scored by the simulator. */
#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nets/planner/planner.h"
#include "vdnn/hash.h"

/* How early copies may run (nets/planner/budget.c orders them fastest first), each
 * with every way of running in-place layers (IN_PLACE_*: first fit packs each
 * differently; all compute the same at the same speed): prefetch, release lag, in-place. */
static const int timing_modes[][3] = {
    {PREFETCH_FAR, 1, IN_PLACE_OVER_OUTPUT},       {PREFETCH_FAR, 1, IN_PLACE_OVER_GRAD},
    {PREFETCH_FAR, 1, IN_PLACE_OFF},               {PREFETCH_NEXT, 1, IN_PLACE_OVER_OUTPUT},
    {PREFETCH_NEXT, 1, IN_PLACE_OVER_GRAD},        {PREFETCH_NEXT, 1, IN_PLACE_OFF},
    {PREFETCH_NEXT, 0, IN_PLACE_OVER_OUTPUT},      {PREFETCH_NEXT, 0, IN_PLACE_OVER_GRAD},
    {PREFETCH_NEXT, 0, IN_PLACE_OFF},              {PREFETCH_ON_DEMAND, 0, IN_PLACE_OVER_OUTPUT},
    {PREFETCH_ON_DEMAND, 0, IN_PLACE_OVER_GRAD},   {PREFETCH_ON_DEMAND, 0, IN_PLACE_OFF},
};
#define TIMING_MODES 12
#define IN_PLACE_WAYS 3   /* consecutive rows of one copy timing */

/* Mode m repeats another on this net: in place where the net forbids it. */
static int mode_skipped(const net *n, int m)
{
    return timing_modes[m][2] && !n->may_in_place;
}

/* plan_policy with copy timing m. */
static vdnn_status timing_plan(const net *n, const profile *pr, mem_policy pol, algo_mode a, int m, plan *p)
{
    vdnn_status st = plan_policy(n, pr, pol, a, timing_modes[m][0], timing_modes[m][1], p);
    p->in_place = timing_modes[m][2];
    return st;
}

/* plan_choose measures the best fixed policy too when its prediction is within this
 * factor of the chosen plan's. */
#define VERIFY_RIVAL 1.5

/* One choice of a plan: offload of map x[layer] (pass < 0) or a pass's algorithm. */
typedef struct decision {
    int layer, pass;
    int count;
    int choice[PLAN_MAX_ALGOS];   /* fastest first */
    int small;                    /* the choice that needs the least memory */
} decision;

typedef struct search {
    const net *n;
    const profile *pr;
    simulator *sim;
    size_t budget;
    decision *dec;
    int ndec;
    plan work;                /* the plan being built */
    plan best;                /* the incumbent; predicted_s < 0: none yet */
    size_t least;             /* the least peak seen (for the error when nothing fits) */
    size_t least_used;        /* the least sim_used_peak seen */
    long nodes, node_limit;
    double deadline;          /* vdnn_now_s() past which climbs and branching stop; 0: none */
    double t0;                /* when the search began */
    long patience;            /* the branch and bound's patience in nodes (search_limits.patience
                               * over the square of the net's layers, at least one); 0: none */
    int in_tree;              /* the branch and bound is under way (the climbs are done) */
    long tree_from, best_at;  /* s->nodes when it began, and when it last improved the plan */
    int stalled;              /* no better plan for as long as patience asks */
    int expired;
    double gap;               /* search_limits.gap */
    double floor_s;           /* none with the fastest algorithms: no plan is faster; < 0 unknown */
    int floor_known;          /* floor_s handed in (search_limits.floor_s) */
    long fit_nodes;           /* search_limits.fit_nodes */
    int one_climb;            /* search_limits.one_climb */
    int chunk;                /* search_limits.climb_chunk; 0: as CLIMB_ROUND_MAX says */
    int group;                /* search_limits.climb_group, else CLIMB_GROUP_FIRST */
    int own_rounds;           /* search_limits.own_rounds */
    int no_bounds;            /* search_limits.no_bounds */
    int measure_all;          /* search_limits.measure_all */
    size_t most_added;        /* live_bounds_most_added of the net */
    double last_round;        /* search_limits.last_round, else CLIMB_LAST_ROUND of the gap */
    void (*on_round)(void *ctx, double measured_s, double before_s, double after_s);
    void *round_ctx;          /* search_limits.on_round, round_ctx */
    uint64_t costs;           /* costs_key(pr, last_round, chunk, measure_all) */
    int threads;              /* search_limits.threads */
    int first_fit;            /* the branch and bound stops at its first plan that fits */
    int settled;              /* the incumbent is within the gap of floor_s */
    const int *over;          /* set (atomically) when a climb on another thread ended the search */
    long runs_elsewhere;      /* simulations on other threads' simulators */
    long lone_later;          /* search_stats.lone_later */
    long lone_spared;         /* search_stats.lone_spared */
    simulator **helper;       /* the seeds and a climb's full rounds share their work with these, */
    int nhelper;              /* one per thread besides the caller's (on_threads) */
    int view;                 /* a thread's view of the search, for its share of on_threads' jobs */
} search;

/* Whether the search is over (checked between simulations): its time is up once it
 * holds a plan that fits (until then it goes on, to the node limit), or its plan is
 * within the gap of the fastest any plan can be. */
static int out_of_time(search *s)
{
    if (!s->expired && s->deadline > 0 && s->best.predicted_s >= 0 && vdnn_now_s() > s->deadline) s->expired = 1;
    if (!s->expired && !s->stalled && s->in_tree && s->patience > 0 && s->best.predicted_s >= 0) {
        long since = s->best_at > s->tree_from ? s->best_at : s->tree_from;
        long idle = s->nodes - since, took = since - s->tree_from;
        if (idle >= (took > s->patience ? took : s->patience)) s->stalled = 1;
    }
    if (!s->settled && s->gap > 0 && s->floor_s >= 0 && s->best.predicted_s >= 0 &&
        s->best.predicted_s <= s->floor_s * (1 + s->gap))
        s->settled = 1;
    return s->expired || s->settled || s->stalled || (s->over && __atomic_load_n(s->over, __ATOMIC_RELAXED));
}

static double pass_s(const profile *pr, int layer, int pass, int algo)
{
    const layer_cost *c = &pr->layers[layer];
    return pass == PASS_FWD ? c->fwd_s[algo] : pass == PASS_BWD_DATA ? c->bwd_data_s[algo] : c->bwd_filter_s[algo];
}

/* pass: an algorithm's pass; DEC_MAP the layer's input map; DEC_SWAP its parameters;
 * DEC_TIMING the plan's copy timing (a timing_modes row) */
enum { DEC_MAP = -1, DEC_SWAP = -2, DEC_TIMING = -3 };

static void set_choice(plan *p, const decision *d, int value)
{
    if (d->pass == DEC_MAP) p->offload[d->layer] = (unsigned char)value;
    else if (d->pass == DEC_SWAP) p->swap[d->layer] = (unsigned char)value;
    else if (d->pass == DEC_TIMING) {
        p->prefetch_ahead = timing_modes[value][0];
        p->release_lag = timing_modes[value][1];
        p->in_place = timing_modes[value][2];
    }
    else p->algo[d->layer][d->pass] = value;
}

/* Whether x[j]'s keep/offload is the search's to decide (backward reads it and no
 * `offload =` in the config fixes it). */
static int free_map(const net *n, int j)
{
    return j < n->nlayers && net_first_reader(n, j) >= 0 && net_map_override(n, j) < 0;
}

/* (planner.h) Forward: the workspace, and the input and output maps (distinct blocks,
 * unless the layer runs in place); backward: the workspace and the output's gradient
 * (where one comes in: not into the layers before the first with parameters), and where
 * no gradient of the layer takes another's block (a layer that runs in place or passes
 * dy on), the maps it reads and its inputs' gradients (nets/iteration.c, fetch_own and
 * gradient_bufs). */
size_t plan_pass_held(const net *n, int i, int pass, size_t ws)
{
    const layer *l = n->layers[i];
    size_t held = pool_round(ws);
    if (l->ops->in_place) return held;
    if (pass == PASS_FWD) return held + pool_round(shape_bytes(l->in)) + pool_round(shape_bytes(l->out));
    if (!l->is_loss && n->graph[i + 1].grad) held += pool_round(shape_bytes(l->out));
    if (l->ops->passes_dy) return held;
    if (l->needs_output) held += plan_map_block(n, i + 1);
    for (int k = 0; k < l->ninputs; k++) {
        const int j = l->input[k];
        int again = 0;
        for (int e = 0; e < k; e++) again |= l->input[e] == j;
        if (again) continue;
        if (layer_reads_input(l, k)) held += plan_map_block(n, j);
        if (n->graph[j].grad) held += plan_map_block(n, j);
    }
    return held;
}

/* A pass's algorithms worth trying: for each, no other is both at least as fast and
 * at most as large (ties keep the lower index), fastest first. With `all`, every one.
 * With a budget (0: none), not those whose pass alone holds more (plan_pass_held): no plan
 * with them fits. When none is left, the one of least workspace, so that every pass
 * has a choice. */
static int algo_choices(const net *n, const profile *pr, size_t budget, int i, int pass, int all, decision *d)
{
    const layer *l = n->layers[i];
    int count = layer_algo_count(l, pass) < PLAN_MAX_ALGOS ? layer_algo_count(l, pass) : PLAN_MAX_ALGOS;
    d->layer = i;
    d->pass = pass;
    d->count = 0;
    size_t ws[PLAN_MAX_ALGOS];
    for (int a = 0; a < count; a++) ws[a] = layer_workspace_bytes(l, pass, a);
    int least = 0;
    for (int a = 1; a < count; a++)
        if (ws[a] < ws[least]) least = a;
    for (int a = 0; a < count; a++) {
        double ta = pass_s(pr, i, pass, a);
        if (budget && a != least && plan_pass_held(n, i, pass, ws[a]) > budget) continue;
        int dominated = 0;
        for (int b = 0; b < count && !all && !dominated; b++) {
            double tb = pass_s(pr, i, pass, b);
            if (b != a && tb <= ta && ws[b] <= ws[a] && (tb < ta || ws[b] < ws[a] || b < a)) dominated = 1;
        }
        if (!dominated) d->choice[d->count++] = a;
    }
    for (int x = 1; x < d->count; x++)
        for (int y = x; y > 0 && pass_s(pr, i, pass, d->choice[y]) < pass_s(pr, i, pass, d->choice[y - 1]); y--) {
            int t = d->choice[y];
            d->choice[y] = d->choice[y - 1];
            d->choice[y - 1] = t;
        }
    d->small = d->choice[0];
    for (int k = 1; k < d->count; k++)
        if (ws[d->choice[k]] < ws[d->small]) d->small = d->choice[k];
    return d->count;
}

/* The decisions in layer order (the early, large maps first): per layer, the offload
 * of its input, then its algorithms. Config overrides (offload=, algo=) are fixed, and
 * so are the maps `base` recomputes. With `climb` (the hill climb's moves; the branch
 * and bound keeps its variants), a map that may be recomputed has that as a third
 * choice, a swappable layer's parameters are a decision too (resident, swapped and
 * updated on the host, or swapped and updated on the device), and so is the copy
 * timing, last. */
static vdnn_status make_decisions(const net *n, const profile *pr, size_t budget, int all, const plan *base, int climb,
                                  decision **out, int *count)
{
    decision *d = calloc((size_t)n->nlayers * 5 + 2, sizeof *d);
    if (!d) return vdnn_fail(VDNN_ENOMEM, "out of host memory for the search");
    int k = 0;
    for (int i = 0; i < n->nlayers; i++) {
        if (free_map(n, i) && (!base || base->offload[i] != MAP_RECOMPUTE)) {
            d[k] = (decision){.layer = i, .pass = DEC_MAP, .count = 2, .choice = {0, 1}, .small = 1};
            if (climb && net_recomputable(n, i, base ? base->swap : NULL)) d[k].choice[d[k].count++] = MAP_RECOMPUTE;
            k++;
        }
        if (climb && layer_swappable(n->layers[i])) {
            d[k] = (decision){.layer = i, .pass = DEC_SWAP, .count = 3, .choice = {SWAP_NONE, SWAP_HOST, SWAP_DEVICE},
                              .small = SWAP_HOST};
            k++;
        }
        /* (one choice left by the budget is a decision too where base has another) */
        for (int p = 0; p < PASS_COUNT; p++)
            if (n->layers[i]->algo_pinned[p] < 0 && algo_choices(n, pr, budget, i, p, all, &d[k]) > 0 &&
                (d[k].count > 1 || (base && base->algo[i][p] != d[k].choice[0])))
                k++;
    }
    if (climb) {
        d[k] = (decision){.layer = -1, .pass = DEC_TIMING};
        for (int m = 0; m < TIMING_MODES; m++)
            if (!mode_skipped(n, m)) d[k].choice[d[k].count++] = m;
        k += d[k].count > 1;
    }
    *out = d;
    *count = k;
    return VDNN_OK;
}

static void fill_from(plan *p, const decision *d, int from, int to, int small)
{
    for (int k = from; k < to; k++) set_choice(p, &d[k], small ? d[k].small : d[k].choice[0]);
}

/* A plan's time and peak (sim_run_within with `cap`: 0 for the whole replay, the budget
 * where only a plan that fits is of use, one that does not then getting peak SIZE_MAX),
 * and the least peaks seen (of plans whose peak is known). */
static vdnn_status simulate_within(search *s, plan *p, size_t cap)
{
    vdnn_status st = sim_run_within(s->sim, p, cap, &p->predicted_s, &p->peak_bytes);
    if (st != VDNN_OK || p->peak_bytes == SIZE_MAX) return st;
    if (!s->least || p->peak_bytes < s->least) s->least = p->peak_bytes;
    if (!s->least_used || sim_used_peak(s->sim) < s->least_used) s->least_used = sim_used_peak(s->sim);
    return st;
}

static vdnn_status simulate(search *s, plan *p)
{
    return simulate_within(s, p, 0);
}

static vdnn_status offer(search *s, const plan *p)
{
    if (p->peak_bytes > s->budget) return VDNN_OK;
    if (s->best.predicted_s >= 0 && p->predicted_s >= s->best.predicted_s) return VDNN_OK;
    s->best_at = s->nodes;
    plan_free(&s->best);
    return plan_copy(&s->best, p);
}

/* Work in independent jobs, each of which writes results of its own: job k of fn on
 * search v (the search itself, or a thread's view of it with a simulator of its own),
 * as thread `thread` of on_threads; *stop set ends the thread's share. */
typedef vdnn_status (*job_fn)(search *v, void *ctx, int thread, int k, int *stop);

/* A thread's share of on_threads' jobs: thread, thread + step, ... (dealt out so, each
 * simulator replays the same plans, and remembers the same, on every run), or where
 * `next` is set, the next job not yet taken, whichever thread is free (jobs that take
 * unequal times: a round's changes, where a replay may take a few milliseconds or
 * nothing, a remembered plan or one its bounds rule out). */
typedef struct job_thread {
    search v;
    job_fn fn;
    void *ctx;
    int thread, step, count, omp_threads;
    int *next;                /* shared by the threads, taken atomically; or NULL */
    vdnn_status st;
    char err[1024];
    pthread_t tid;
} job_thread;

static int job_next(job_thread *t, int k)
{
    return t->next ? __atomic_fetch_add(t->next, 1, __ATOMIC_RELAXED) : k < 0 ? t->thread : k + t->step;
}

static vdnn_status jobs_take(job_thread *t)
{
    vdnn_status st = VDNN_OK;
    for (int stop = 0, k = job_next(t, -1); st == VDNN_OK && !stop && k < t->count; k = job_next(t, k))
        st = t->fn(&t->v, t->ctx, t->thread, k, &stop);
    if (st != VDNN_OK) snprintf(t->err, sizeof t->err, "%s", vdnn_errmsg());
    return st;
}

static void *job_main(void *arg)
{
    job_thread *t = arg;
    omp_set_num_threads(t->omp_threads);   /* workspaces are sized by it, as on the caller's */
    t->st = jobs_take(t);
    return NULL;
}

/* Jobs 0..count-1 of fn on the caller's thread and s->nhelper more (each job's results
 * depend on its inputs alone, as every replay depends on the plan alone, so the work
 * measures what it measures on one thread); without helpers, on s itself. A job's
 * `thread` is below 1 + s->nhelper; the helpers' simulators are made at the first such
 * work. Thread i takes jobs i, i + threads, ..., or with `shared`, whichever job is
 * next once it is free (for jobs that may run on any thread's copy of their inputs). */
static vdnn_status on_threads(search *s, int count, int shared, job_fn fn, void *ctx)
{
    int parts = 1 + s->nhelper < count ? 1 + s->nhelper : count;
    if (parts <= 1) {
        vdnn_status st = VDNN_OK;
        for (int stop = 0, k = 0; st == VDNN_OK && !stop && k < count; k++) st = fn(s, ctx, 0, k, &stop);
        return st;
    }
    job_thread *t = calloc((size_t)parts, sizeof *t);
    int next = 0;
    vdnn_status st = t ? VDNN_OK : vdnn_fail(VDNN_ENOMEM, "out of host memory for the search");
    for (int h = 0; st == VDNN_OK && h < parts - 1; h++)
        if (!s->helper[h]) st = sim_create(s->n, s->pr, &s->helper[h]);
    for (int i = 0; st == VDNN_OK && i < parts; i++) {
        t[i] = (job_thread){.v = *s, .fn = fn, .ctx = ctx, .thread = i, .step = parts, .count = count,
                            .omp_threads = omp_get_max_threads(), .next = shared ? &next : NULL};
        t[i].v.sim = i ? s->helper[i - 1] : s->sim;
        t[i].v.best = (plan){.predicted_s = -1};
        t[i].v.least = t[i].v.least_used = 0;
        t[i].v.view = 1;
    }
    int started = 1;
    for (int i = 1; st == VDNN_OK && i < parts; i++) {
        if (pthread_create(&t[i].tid, NULL, job_main, &t[i]) != 0) break;   /* fewer threads, then */
        started++;
    }
    if (st == VDNN_OK) {
        t[0].st = jobs_take(&t[0]);
        for (int i = 1; i < started; i++) pthread_join(t[i].tid, NULL);
        for (int i = started; i < parts; i++) t[i].st = jobs_take(&t[i]);   /* a thread that did not start */
    }
    for (int i = 0; st == VDNN_OK && i < parts; i++) {
        if (t[i].st != VDNN_OK) st = vdnn_fail(t[i].st, "%s", t[i].err);
        if (t[i].v.least && (!s->least || t[i].v.least < s->least)) s->least = t[i].v.least;
        if (t[i].v.least_used && (!s->least_used || t[i].v.least_used < s->least_used)) s->least_used = t[i].v.least_used;
        s->expired |= t[i].v.expired;
    }
    free(t);
    return st;
}

/* One node of the branch and bound: decisions ..k-1 of s->work are made. At each node
 * two completions bound the rest: the fastest choices (no offload, fastest algorithms)
 * bound the time from below, and the smallest (offload, smallest workspaces) bound the
 * bytes in use from below; a node whose bounds cannot beat the incumbent or cannot fit
 * is cut. The peak itself is no bound: where a block lands depends on every earlier
 * request, so offloading one more map can raise the highest end by a hole. *expand:
 * decision k's choices are to be tried, smallest first when *smallest_first. */
static vdnn_status bb_node(search *s, int k, int *expand, int *smallest_first)
{
    *expand = 0;
    if ((s->node_limit > 0 && s->nodes >= s->node_limit) || out_of_time(s) ||
        (s->first_fit && s->best.predicted_s >= 0))
        return VDNN_OK;
    s->nodes++;
    plan *p = &s->work;
    fill_from(p, s->dec, k, s->ndec, 1);
    vdnn_status st = simulate(s, p);
    if (st != VDNN_OK || sim_used_peak(s->sim) > s->budget) return st;
    if (k == s->ndec) return p->peak_bytes <= s->budget ? offer(s, p) : VDNN_OK;
    fill_from(p, s->dec, k, s->ndec, 0);
    st = simulate(s, p);
    if (st != VDNN_OK) return st;
    if (s->best.predicted_s >= 0 && p->predicted_s * (1 + s->gap) >= s->best.predicted_s) return VDNN_OK;
    if (p->peak_bytes <= s->budget) return offer(s, p);
    /* Fastest choices first once a plan fits, so that the time bound cuts early; until
     * then the smallest first (on a Pareto set, reversed order), so that one is found. */
    *expand = 1;
    *smallest_first = s->best.predicted_s < 0;
    return VDNN_OK;
}

/* A node whose children are being tried: its decision, the next choice, the order. */
typedef struct bb_frame {
    int k, c, smallest_first;
} bb_frame;

/* Depth-first over the decisions of s->work, from the root: the nodes under way wait
 * on a heap stack, one frame per decision, as a net may have a decision per layer. */
static vdnn_status branch(search *s)
{
    bb_frame *stack = malloc(((size_t)s->ndec + 1) * sizeof *stack);
    if (!stack) return vdnn_fail(VDNN_ENOMEM, "out of host memory for the search over %d decisions", s->ndec);
    int depth = 0, expand, first;
    vdnn_status st = bb_node(s, 0, &expand, &first);
    if (st == VDNN_OK && expand) stack[depth++] = (bb_frame){0, 0, first};
    while (st == VDNN_OK && depth > 0) {
        bb_frame *f = &stack[depth - 1];
        const decision *d = &s->dec[f->k];
        if (f->c == d->count) {
            depth--;
            continue;
        }
        set_choice(&s->work, d, d->choice[f->smallest_first ? d->count - 1 - f->c : f->c]);
        f->c++;
        int k = f->k + 1;
        st = bb_node(s, k, &expand, &first);
        if (st == VDNN_OK && expand) stack[depth++] = (bb_frame){k, 0, first};
    }
    free(stack);
    return st;
}

/* The plans of fixed policies: job i is pair[i]'s (a policy and an algorithm mode) at
 * every copy timing, the fastest that fits into out[i] where fits[i] (on a tie the
 * earlier timing); for none with the fastest algorithms, the least time of them all,
 * fitting or not, into fastest[i] (the others' replays stop where they pass the
 * budget). */
typedef struct policy_jobs {
    const int (*pair)[2];
    plan *out;
    int *fits;
    double *fastest;
} policy_jobs;

static vdnn_status policy_job(search *v, void *ctx, int thread, int i, int *stop)
{
    (void)thread, (void)stop;
    policy_jobs *j = ctx;
    vdnn_status st = VDNN_OK;
    /* none's time with the fastest algorithms is the floor, where not known: it counts
     * where it does not fit */
    const int floor = j->pair[i][0] == POLICY_NONE && j->pair[i][1] == ALGO_PERF && !v->floor_known;
    for (int m = 0; m < TIMING_MODES && st == VDNN_OK; m++) {
        if (mode_skipped(v->n, m)) continue;
        plan p = {0};
        st = timing_plan(v->n, v->pr, (mem_policy)j->pair[i][0], (algo_mode)j->pair[i][1], m, &p);
        if (st == VDNN_OK) st = simulate_within(v, &p, floor ? 0 : v->budget);
        if (st == VDNN_OK && (j->fastest[i] < 0 || p.predicted_s < j->fastest[i])) j->fastest[i] = p.predicted_s;
        if (st == VDNN_OK && p.peak_bytes <= v->budget && (!j->fits[i] || p.predicted_s < j->out[i].predicted_s)) {
            if (j->fits[i]) plan_free(&j->out[i]);
            j->out[i] = p;
            p = (plan){0};
            j->fits[i] = 1;
        }
        plan_free(&p);
    }
    return st;
}

/* For each of npairs (policy, algorithm mode) pairs, the fastest plan that fits over
 * every copy timing (on a tie the earlier), into out[i] where fits[i]; the pairs are
 * measured on the search's threads. None's with the fastest algorithms is the floor
 * (search.floor_s). */
static vdnn_status policy_plans(search *s, const int (*pair)[2], int npairs, plan *out, int *fits)
{
    double *fastest = malloc((size_t)npairs * sizeof *fastest);
    if (!fastest) return vdnn_fail(VDNN_ENOMEM, "out of host memory for the search");
    for (int i = 0; i < npairs; i++) {
        fits[i] = 0;
        fastest[i] = -1;
    }
    policy_jobs j = {.pair = pair, .out = out, .fits = fits, .fastest = fastest};
    vdnn_status st = on_threads(s, npairs, 0, policy_job, &j);
    for (int i = 0; i < npairs; i++) {
        if (st == VDNN_OK && pair[i][0] == POLICY_NONE && pair[i][1] == ALGO_PERF && !s->floor_known && fastest[i] >= 0 &&
            (s->floor_s < 0 || fastest[i] < s->floor_s))
            s->floor_s = fastest[i];
        if (st != VDNN_OK && fits[i]) {
            plan_free(&out[i]);
            fits[i] = 0;
        }
    }
    free(fastest);
    return st;
}

/* The fastest plan of a fixed policy that fits, over every copy timing; on a tie the
 * earlier wins. */
static vdnn_status best_policy_plan(search *s, mem_policy pol, algo_mode a, plan *out, int *fits)
{
    const int pair[1][2] = {{pol, a}};
    return policy_plans(s, pair, 1, out, fits);
}

/* The paper's vDNN_dyn: the first rung that fits. */
static vdnn_status search_vdnn(search *s)
{
    plan p = {0};
    int fits = 0;
    vdnn_status st = best_policy_plan(s, POLICY_ALL, ALGO_MEM, &p, &fits);
    if (st != VDNN_OK || !fits) return st;
    plan_free(&p);
    static const mem_policy rungs[] = {POLICY_NONE, POLICY_CONV, POLICY_ALL};
    for (int r = 0; r < 3 && st == VDNN_OK; r++) {
        st = best_policy_plan(s, rungs[r], ALGO_PERF, &p, &fits);
        if (st == VDNN_OK && fits) {
            st = offer(s, &p);
            plan_free(&p);
            return st;
        }
    }
    /* all + fastest, then each convolution in turn moved to memory-optimal algorithms */
    plan mem = {0};
    if (st == VDNN_OK) st = plan_policy(s->n, s->pr, POLICY_ALL, ALGO_MEM, PREFETCH_FAR, 1, &mem);
    for (int i = 0; i < s->n->nlayers && st == VDNN_OK; i++) {
        if (!s->n->layers[i]->ops->algo_count) continue;
        for (int m = 0; m < TIMING_MODES && st == VDNN_OK; m++) {
            if (mode_skipped(s->n, m)) continue;
            plan g = {0};
            st = timing_plan(s->n, s->pr, POLICY_ALL, ALGO_PERF, m, &g);
            for (int j = 0; j <= i && st == VDNN_OK; j++) memcpy(g.algo[j], mem.algo[j], sizeof g.algo[j]);
            if (st == VDNN_OK) st = simulate(s, &g);
            if (st == VDNN_OK) st = offer(s, &g);
            plan_free(&g);
        }
        if (s->best.predicted_s >= 0) break;
    }
    if (st == VDNN_OK && s->best.predicted_s < 0) {
        st = best_policy_plan(s, POLICY_ALL, ALGO_MEM, &p, &fits);
        if (st == VDNN_OK && fits) st = offer(s, &p);
        if (fits) plan_free(&p);
    }
    plan_free(&mem);
    return st;
}

/* A hash of every cost a replay reads from the profile, of the share of a plan's time
 * that ends a climb (search.last_round, a tenth of the search gap by default) and of the
 * parts a climb's rounds are measured in and how (search.chunk, search.measure_all): a
 * plan settled under other costs (a profile measured, then read back rounded from the
 * cache), another gap or other parts is climbed again. */
static uint64_t costs_key(const profile *pr, double last_round, int chunk, int measure_all)
{
    const double link[7] = {pr->h2d_bytes_per_s, pr->d2h_bytes_per_s, pr->duplex_bytes_per_s, pr->copy_latency_s,
                            last_round, (double)chunk, (double)measure_all};
    uint64_t h = vdnn_hash_bytes(VDNN_HASH_START, link, sizeof link);
    return pr->layers ? vdnn_hash_bytes(h, pr->layers, (size_t)pr->nlayers * sizeof *pr->layers) : h;
}

/* Whether a plan of time t is faster than one of time than_t (PLAN_GAIN_TOL). */
static int faster(double t, double than_t)
{
    return t < than_t * (1 - PLAN_GAIN_TOL);
}

static int get_choice(const plan *p, const decision *d)
{
    if (d->pass == DEC_TIMING) {
        for (int m = 0; m < TIMING_MODES; m++)
            if (p->prefetch_ahead == timing_modes[m][0] && p->release_lag == timing_modes[m][1] &&
                p->in_place == timing_modes[m][2])
                return m;
        return -1;
    }
    return d->pass == DEC_MAP ? p->offload[d->layer] : d->pass == DEC_SWAP ? p->swap[d->layer] : p->algo[d->layer][d->pass];
}

/* Whether changing decision d of a plan from `was` to `to` may make it faster than
 * best_t, the plan's compute-stream work being busy_s (sim_busy_s). The simulated step
 * is a max-plus system (an operation starts when its stream and the events it waits for
 * are done: device_sim.c): a change that adds work (a slower algorithm for a pass, a
 * kept map offloaded or recomputed) makes it faster only by shortening a wait, where a
 * block lands differently (1-2% of such changes, by tests/test_beyond.c's count, and by
 * little): the climbs do not chase that. An offloaded map kept or recomputed instead
 * leaves the compute work as it is or adds to it, so that plan takes at least busy_s:
 * nothing to gain once that is best_t. Parameters updated on the device rather than
 * on the host (or kept) cost the same update (the profile's) and more copies (the
 * momenta both ways, the values back) and bytes: on ResNet-110 at its least budget
 * such a change gained in 45 of 1,784 replays, by rounding (1e-13 s), and took a
 * quarter of the search's time. */
static int may_gain(const search *s, const decision *d, int was, int to, double busy_s, double best_t)
{
    if (d->pass == DEC_MAP) return was == MAP_RECOMPUTE || (was == MAP_OFFLOAD && busy_s < best_t);
    if (d->pass == DEC_SWAP) return to != SWAP_DEVICE;
    if (d->pass == DEC_TIMING) return 1;
    return pass_s(s->pr, d->layer, d->pass, to) < pass_s(s->pr, d->layer, d->pass, was);
}

/* Whether changing decision d of a plan from `was` to `to` leaves out only copies that
 * are not on the longest path of its step (cr, sim_critical), adding no work or adding
 * compute work alone: then it is not replayed. An offloaded map kept or recomputed drops
 * its offload and its fetch; parameters swapped and updated on the host, kept on the
 * device, drop their copies, their update the same work in the same place. The replay
 * is a max-plus system (may_gain) in which every constraint of that path stays, so the
 * step is no shorter -- where each map is fetched where its own reader says. With far
 * prefetches (PREFETCH_FAR, vDNN's rule) a map kept moves the fetches of the maps after
 * it earlier, and such a change can gain a little; the climbs leave those out too: on
 * ResNet-1202 at batch 2, `vdnn sweep` of 10 budgets took 19-22 s instead of 26-29, its
 * plans as fast or faster (0.15-0.19% at five budgets), and bench/planning.sh's 39
 * points kept their plans but two (0.02% and 0.003% slower), in 11% less time on the
 * ImageNet-size configs (bench/planner.md). The path costs a replay: a round of fewer
 * than CRITICAL_LEAST decisions, or lone changes of a quarter of that, go without. */
#define CRITICAL_LEAST 64

static int off_path(const critical_copies *cr, const decision *d, int was, int to)
{
    if (!cr || !cr->valid) return 0;
    if (d->pass == DEC_MAP) return was == MAP_OFFLOAD && to != MAP_OFFLOAD && !cr->maps[d->layer];
    if (d->pass == DEC_SWAP) return was == SWAP_HOST && to == SWAP_NONE && !cr->params[d->layer];
    return 0;
}

/* Whether every choice of d after `c` (in d's order) adds work to the plan that takes c:
 * a pass's algorithms go fastest first, a map is kept before it is recomputed (compute)
 * or offloaded (copies), and parameters kept on the device need no copies, which both
 * ways of swapping them add. Once such a choice fits and gains, the ones after it could
 * make the plan faster only where a block lands elsewhere (may_gain). */
static int adds_work_after(const decision *d, int c)
{
    return d->pass >= 0 || d->pass == DEC_MAP || (d->pass == DEC_SWAP && c == SWAP_NONE);
}

/* The least cur holds at once with decision d changed from `was` to `to`, by the bounds
 * lb of cur (live_bounds; 0 where they say nothing of such a change). */
static size_t change_holds(const search *s, const live_bounds *lb, const plan *cur, const decision *d, int was, int to)
{
    if (d->pass == DEC_MAP && was == MAP_OFFLOAD)
        return to == MAP_KEEP ? live_bounds_keep(lb, s->n, d->layer)
               : to == MAP_RECOMPUTE ? live_bounds_recompute(lb, s->n, cur, d->layer) : 0;
    if (d->pass == DEC_MAP) return 0;
    if (d->pass == DEC_SWAP)
        return was != SWAP_NONE && to == SWAP_NONE ? live_bounds_resident(lb, s->n, d->layer) : 0;
    if (d->pass < 0) return 0;
    const size_t ws = layer_workspace_bytes(s->n->layers[d->layer], d->pass, to);
    if (!live_bounds_workspace_placed(lb, d->layer, d->pass, ws)) return SIZE_MAX;
    return live_bounds_workspace(lb, d->layer, d->pass, ws);
}

/* Decision d's choice for cur that makes it fastest while it still fits, into *best_c
 * (its current one if none is faster than *best_t, which it lowers; the choices after
 * one that fits and gains not tried where they add work: adds_work_after); cur, whose
 * compute-stream work is busy_s, is left as it was. With cr (cur's critical copies), a
 * choice that leaves out only copies off its longest path is not replayed (off_path).
 * With lb (cur's live_bounds), a
 * choice they show holds more than the budget at once is not replayed: it does not fit.
 * On ResNet-1202 at batch 2 and dyn's least they found 7,800 of the 12,500 changes that
 * did not fit, and planning took 5.3 s instead of 7.4 (bench/planner.md). An offloaded
 * map that, kept, fits and gains nothing is not replayed recomputed: recomputing drops
 * the same copies as keeping it and adds work, so it could gain only where its block
 * lands elsewhere (may_gain); on ResNet-1202 at batch 2 at 46.8 and 179 MiB, 800-960 such
 * replays a climb gained nothing (a sixth of its replays), and planning took 10-15% less,
 * the same plans; at bench/planning.sh's points every plan stayed the same. */
static vdnn_status best_choice(search *s, plan *cur, double busy_s, const decision *d, const live_bounds *lb,
                               const critical_copies *cr, int *best_c, double *best_t)
{
    const int was = get_choice(cur, d);
    const double t = cur->predicted_s;
    const size_t peak = cur->peak_bytes;
    vdnn_status st = VDNN_OK;
    int kept_fits = 0;   /* the map, kept, fit and was no faster */
    *best_c = was;
    for (int c = 0; c < d->count && st == VDNN_OK; c++) {
        if (d->choice[c] == was || !may_gain(s, d, was, d->choice[c], busy_s, *best_t)) continue;
        if (off_path(cr, d, was, d->choice[c])) continue;
        if (kept_fits && d->choice[c] == MAP_RECOMPUTE) continue;
        if (lb && change_holds(s, lb, cur, d, was, d->choice[c]) > s->budget) continue;
        set_choice(cur, d, d->choice[c]);
        st = simulate_within(s, cur, s->budget);
        if (st == VDNN_EINVAL) {   /* a recompute chain through a swapped layer: not a plan */
            st = VDNN_OK;
            cur->peak_bytes = (size_t)-1;
        }
        kept_fits = d->pass == DEC_MAP && d->choice[c] == MAP_KEEP && st == VDNN_OK && cur->peak_bytes <= s->budget;
        if (st == VDNN_OK && cur->peak_bytes <= s->budget && faster(cur->predicted_s, *best_t)) {
            *best_t = cur->predicted_s;
            *best_c = d->choice[c];
            if (adds_work_after(d, d->choice[c])) break;
        }
    }
    set_choice(cur, d, was);
    cur->predicted_s = t;
    cur->peak_bytes = peak;
    return st;
}

/* A full round of a climb whose moves gain less than this share of the search gap (of
 * the plan's time) is its last: the rounds after such a one gain less still (on
 * ResNet-110 at its least budget, 0.13 ms of 4885 over two more rounds, a third of the
 * climb's simulations). What the moves made gain counts, not what the round measured
 * its decisions' changes to gain one by one: a climb in parts measures gains that its
 * moves mostly do not keep (ResNet-1202 at batch 2 and dyn's least, micro-batches of
 * one: 1.63 ms measured, 0.054 ms made, then a round of 2,400 replays that gained
 * nothing). With no gap (--search-gap 0) every climb goes on to the end. */
#define CLIMB_LAST_ROUND 0.1

/* A climb's full round of more than CLIMB_ROUND_MAX decisions measures them in equal
 * parts of at most as many, each against the plan as it stands, and makes a part's
 * changes that gained before it goes on: on a net of thousands of decisions
 * (ResNet-1202: 7,218, a replay of 2-4 ms) a round against one plan outlasts the
 * search's time, and a climb that the deadline cuts short before its moves gains
 * nothing. Every other shipped config has fewer (VGG-116 578, ResNet-110 667, VGG-416
 * about 2,100) and climbs in whole rounds, as before. On ResNet-1202, with a run of
 * alike changes measured once (measure_alike), three parts of 2,407 reach faster plans
 * than eight of 903 in about the same time: at batch 2, 0.2-0.4% faster at five of the
 * ten budgets of `vdnn sweep --budgets auto:10`, the same at the others; at batch 4, 2.1%
 * at one of five (bench/planner.md; before measure_alike, parts of 1,024 reached better
 * plans within the search's time than parts of 2,406). With a
 * search gap, a climb in parts makes one full round: its parts measure against the plan
 * as the earlier parts' moves left it, and a second round, 2,200-3,700 replays of 1-2
 * ms, gained nothing of 1545.35 ms, 0.0006 ms of 192.29 ms, and nothing of 315.97 ms
 * (ResNet-1202 at batch 2: the whole batch at dyn's least and at half of none's, micro-
 * batches of one at dyn's least). Its plan is settled as a climb's last round leaves it
 * (CLIMB_LAST_ROUND). Such a round measures no algorithm change: each pass takes the
 * fastest faster algorithm its bounds allow at the time its passes save (estimate_choice),
 * and the moves replay it as any other (on ResNet-1202 at batch 2 in micro-batches of
 * one, at their least budget, 2,000 of the round's 2,300 measuring replays were of
 * algorithms, nearly all faster and fitting: planning took 2.7 s instead of 4.8, the
 * same plan). */
#define CLIMB_ROUND_MAX 2500

/* Whether a climb over ndec decisions measures its full rounds in parts. */
static int in_parts(const search *s, int ndec)
{
    return s->chunk || ndec > CLIMB_ROUND_MAX;
}

/* A decision whose change gained in a full round of a climb, and what it gained. */
typedef struct move {
    double gain;
    int k;
} move;

/* Largest gain first; on a tie, the earlier decision. */
static int cmp_move(const void *a, const void *b)
{
    const move *x = a, *y = b;
    if (x->gain != y->gain) return x->gain < y->gain ? 1 : -1;
    return (x->k > y->k) - (x->k < y->k);
}

/* cur replayed with changes just made to it (t: its time before them): *moved where it
 * still fits and is faster, its compute-stream work then into *busy; the caller puts
 * the changes back where not. */
static vdnn_status replay_changed(search *s, plan *cur, double t, double *busy, int *moved)
{
    vdnn_status st = simulate_within(s, cur, s->budget);
    if (st == VDNN_EINVAL) {   /* a recompute chain through a swapped layer: not a plan */
        st = VDNN_OK;
        cur->peak_bytes = (size_t)-1;
    }
    *moved = st == VDNN_OK && cur->peak_bytes <= s->budget && faster(cur->predicted_s, t);
    if (*moved) *busy = sim_busy_s(s->sim);
    return st;
}

/* Decision d of cur set to `to` where cur, replayed with it, still fits and is faster
 * (*moved set, its compute-stream work into *busy); else cur is left as it was. */
static vdnn_status try_move(search *s, plan *cur, const decision *d, int to, double *busy, int *moved)
{
    const int was = get_choice(cur, d);
    const double t = cur->predicted_s;
    const size_t peak = cur->peak_bytes;
    *moved = 0;
    if (to == was) return VDNN_OK;
    set_choice(cur, d, to);
    vdnn_status st = replay_changed(s, cur, t, busy, moved);
    if (*moved) return st;
    set_choice(cur, d, was);
    cur->predicted_s = t;
    cur->peak_bytes = peak;
    return st;
}

/* A climb's moves are tried in groups, the first of CLIMB_GROUP_FIRST changes (largest
 * gain first), all made at once where the plan with them still fits and is faster; a
 * group that is made doubles the next one's size (up to CLIMB_GROUP_MAX), one that is
 * not has its changes tried one at a time and halves it. On ResNet-110 at batch 128 and
 * its least budget 64 of the 128 groups tried were made (of 2 to 64 changes; 2,456
 * changes in all), and the search took 14% fewer replays; at the 36 budgets of
 * bench/planning.sh's shipped configs the plans were the same but at two points (0.04%
 * faster, 0.39% slower); of 288 searches over made-up cost tables 15 differed, 14
 * faster by up to 0.22% and one slower by 1.0%, in 81% of the simulations
 * (bench/planner.md). In a round in parts, whose algorithm changes are estimated and
 * more often fail, a group that is not made is halved and tried again from its first
 * change, down to that change alone, and each move made doubles the next group: on
 * ResNet-1202 at batch 2 in micro-batches of one at their least budget, groups of 64
 * with one change that did not fit had cost 64 replays, and planning took 2.0 s instead
 * of 2.7, the same plan. */
#define CLIMB_GROUP_FIRST 8
#define CLIMB_GROUP_MAX 64

/* The g changes of moves (decision k's to pick[k]) made together where cur, replayed
 * with them all, still fits and is faster (*moved set); else cur is left as it was. */
static vdnn_status try_group(search *s, plan *cur, const decision *dec, const move *moves, int g, const int *pick,
                             double *busy, int *moved)
{
    int was[CLIMB_GROUP_MAX];
    const double t = cur->predicted_s;
    const size_t peak = cur->peak_bytes;
    *moved = 0;
    for (int j = 0; j < g; j++) {
        was[j] = get_choice(cur, &dec[moves[j].k]);
        set_choice(cur, &dec[moves[j].k], pick[moves[j].k]);
    }
    vdnn_status st = replay_changed(s, cur, t, busy, moved);
    if (*moved) return st;
    for (int j = g - 1; j >= 0; j--) set_choice(cur, &dec[moves[j].k], was[j]);
    cur->predicted_s = t;
    cur->peak_bytes = peak;
    return st;
}

/* A change of the climb's moves tried alone: decision d of cur set to *to where cur,
 * replayed with it, still fits and is faster; else, where d has other choices, its best
 * choice against cur measured again (into *to) and tried in turn (the change no longer
 * gains or fits: another of them may). *moved, and *first where the first try made it;
 * cur is left as it was where neither did. */
static vdnn_status lone_move(search *s, plan *cur, const decision *d, const critical_copies *cr, int *to, double *busy,
                             int *moved, int *first)
{
    vdnn_status st = off_path(cr, d, get_choice(cur, d), *to) ? (*moved = 0, VDNN_OK) : try_move(s, cur, d, *to, busy, moved);
    *first = *moved;
    if (st == VDNN_OK && !*moved && d->count > 2) {
        double t = cur->predicted_s;
        st = best_choice(s, cur, *busy, d, NULL, cr, to, &t);
        if (st == VDNN_OK) st = try_move(s, cur, d, *to, busy, moved);
    }
    return st;
}

/* The most lone changes lone_moves tries in one go. */
#define LONE_MOST 64

/* The runs of alike changes a climb's part took unmeasured from their first
 * (measure_alike), for its lone changes: run[k], the run of decision k's change (its
 * first's index; -1: none), and failed[r], `made` when a change of run r last failed
 * alone (-1: never), `made` counting the part's moves. A lone change is not tried while
 * one of its run has failed alone since the plan last changed: alike changes gain alike
 * and fail alike. On ResNet-1202 at batch 2 in micro-batches of one at 2.92 MiB, 590 lone
 * map changes failed where they were tried; planning there took 1.22 s instead of 2.20,
 * and `vdnn sweep` of 10 budgets 5.8 s instead of 6.5-6.6, the same plans at five
 * budgets, four 0.002-0.011% faster, one 0.011% slower (bench/planner.md). */
typedef struct runs {
    int *run, *failed;
    int made;
} runs;

/* Whether lone change j of a go (moves) is left out: a change of its run failed alone
 * since the plan last changed, or one before it in the go would fail first. */
static int spared(const runs *ru, const move *moves, int j)
{
    const int r = ru->run[moves[j].k];
    if (r < 0) return 0;
    if (ru->failed[r] == ru->made) return 1;
    for (int i = 0; i < j; i++)
        if (ru->run[moves[i].k] == r) return 1;
    return 0;
}

/* Lone changes tried at once on the search's threads, each against the plan as it
 * stands (lone_moves): thread i's copy of it. */
typedef struct lone_jobs {
    plan *at;
    const decision *dec;
    const move *moves;
    const int *pick;
    double busy;
    const critical_copies *cr;   /* the plan's, as it stands */
    int made;                 /* the first change made so far (taken and set atomically), or b */
    int *to, *moved, *first;
    double *busy_after, *t_after;
    size_t *peak_after;
    const unsigned char *spared;   /* not tried: spared() */
} lone_jobs;

/* Change k against the thread's copy of the plan, which the changes it tried before
 * left as it was unless one was made: then a change before k was made (the threads take
 * the changes in order), k's try counts for nothing, and the thread stops. */
static vdnn_status lone_job(search *v, void *ctx, int thread, int k, int *stop)
{
    lone_jobs *r = ctx;
    if (k > __atomic_load_n(&r->made, __ATOMIC_RELAXED)) {
        *stop = 1;
        return VDNN_OK;
    }
    plan *c = &r->at[thread];
    double busy = r->busy;
    r->to[k] = r->pick[r->moves[k].k];
    if (r->spared[k]) {
        r->moved[k] = r->first[k] = 0;
        return VDNN_OK;
    }
    vdnn_status st = lone_move(v, c, &r->dec[r->moves[k].k], r->cr, &r->to[k], &busy, &r->moved[k], &r->first[k]);
    r->busy_after[k] = busy;
    r->t_after[k] = c->predicted_s;
    r->peak_after[k] = c->peak_bytes;
    for (int m = __atomic_load_n(&r->made, __ATOMIC_RELAXED);
         r->moved[k] && k < m && !__atomic_compare_exchange_n(&r->made, &m, k, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);)
        ;
    return st;
}

/* The lone changes of moves[0..b) (decision k's to pick[k]; b at most LONE_MOST) tried
 * as lone_move would try them one after another, on the search's threads, each taking
 * the next change once it is free, against a copy of cur made for it: each against cur
 * as it stands, so that up to the first one made (*at, -1: none) each does just what it
 * would have done alone after the others failed, and that one is made in cur (*first as
 * lone_move's); those after it are not tried once it is made, or count for nothing (the
 * caller tries them again against the plan it made). pick[k] takes each tried change's
 * last choice, up to that one. A climb's lone changes mostly fail (on ResNet-1202 at
 * batch 2 and 179 MiB, 1,070 of 1,078), so the threads mostly all do work that stands:
 * there they took 1.29 s instead of 1.71 on two threads, one change each at a time, the
 * same plan. */
static vdnn_status lone_moves(search *s, plan *cur, const decision *dec, const move *moves, int b, int *pick,
                              double *busy, int *at, int *first, runs *ru)
{
    const int threads = 1 + s->nhelper < b ? 1 + s->nhelper : b;
    plan copy[LONE_MOST] = {{0}};
    int to[LONE_MOST], moved[LONE_MOST] = {0}, firsts[LONE_MOST];
    double busy_after[LONE_MOST], t_after[LONE_MOST];
    size_t peak_after[LONE_MOST];
    unsigned char left_out[LONE_MOST];
    if (b > LONE_MOST) b = LONE_MOST;
    for (int j = 0; j < b; j++) left_out[j] = (unsigned char)spared(ru, moves, j);
    vdnn_status st = VDNN_OK;
    for (int i = 0; i < threads && st == VDNN_OK; i++) st = plan_copy(&copy[i], cur);
    critical_copies cr = {0};
    if (st == VDNN_OK && b >= CRITICAL_LEAST / 4) st = sim_critical(s->sim, cur, &cr);
    lone_jobs r = {.at = copy, .dec = dec, .moves = moves, .pick = pick, .busy = *busy, .cr = &cr, .made = b, .to = to,
                   .moved = moved, .first = firsts, .busy_after = busy_after, .t_after = t_after,
                   .peak_after = peak_after, .spared = left_out};
    if (st == VDNN_OK) st = on_threads(s, b, 1, lone_job, &r);
    critical_copies_free(&cr);
    for (int i = 0; i < threads; i++) plan_free(&copy[i]);
    *at = -1;
    for (int j = 0; st == VDNN_OK && j < b && *at < 0; j++) {
        pick[moves[j].k] = to[j];
        if (!moved[j]) {
            const int r = ru->run[moves[j].k];
            if (r >= 0 && !left_out[j]) ru->failed[r] = ru->made;
            s->lone_spared += left_out[j];
            continue;
        }
        *at = j;
        s->lone_later += j > 0;
        *first = firsts[j];
        *busy = busy_after[j];
        set_choice(cur, &dec[moves[j].k], to[j]);
        cur->predicted_s = t_after[j];
        cur->peak_bytes = peak_after[j];
    }
    return st;
}

/* An algorithm decision's change that a round in parts makes without measuring it: the
 * fastest choice faster than cur's that the bounds lb (NULL: none) do not show past the
 * budget, into *pick, and what its passes save over the step, into *gain (0, and *pick
 * cur's, where none is faster). A move replays it as any other. */
static void estimate_choice(const search *s, const plan *cur, const decision *d, const live_bounds *lb, int *pick,
                            double *gain)
{
    const int was = get_choice(cur, d);
    const int runs = s->n->micro ? (s->n->minibatch + s->n->micro - 1) / s->n->micro : 1;
    *pick = was;
    *gain = 0;
    for (int c = 0; c < d->count; c++) {
        const int to = d->choice[c];
        if (to == was || pass_s(s->pr, d->layer, d->pass, to) >= pass_s(s->pr, d->layer, d->pass, was)) continue;
        if (lb && change_holds(s, lb, cur, d, was, to) > s->budget) continue;
        *pick = to;
        *gain = runs * (pass_s(s->pr, d->layer, d->pass, was) - pass_s(s->pr, d->layer, d->pass, to));
        return;
    }
}

/* A full round's jobs: decision k's best choice for the plan (thread i's copy of it,
 * cur[i]) and its gain; with `estimate`, an algorithm's estimated (estimate_choice), and
 * guessed[k] set. Job k is decision idx[k] (NULL: k). */
typedef struct round_jobs {
    plan **cur;
    const decision *dec;
    const live_bounds *lb;    /* the plan's, or NULL */
    const critical_copies *cr;   /* the plan's */
    double busy;
    int estimate;
    int *pick;
    double *gain;
    unsigned char *guessed;
    const int *idx;
    int *run;                 /* measure_alike's runs (runs.run), or NULL */
} round_jobs;

static vdnn_status round_job(search *v, void *ctx, int thread, int k, int *stop)
{
    round_jobs *r = ctx;
    if (r->idx) k = r->idx[k];
    if (r->estimate && r->dec[k].pass >= 0) {
        estimate_choice(v, r->cur[thread], &r->dec[k], r->lb, &r->pick[k], &r->gain[k]);
        r->guessed[k] = 1;
        return VDNN_OK;
    }
    /* a thread's view ends at the deadline alone; the search itself wherever it is over */
    if (v->view ? v->deadline > 0 && vdnn_now_s() > v->deadline : out_of_time(v)) {
        if (v->view) v->expired = 1;
        *stop = 1;
        return VDNN_OK;
    }
    plan *cur = r->cur[thread];
    double t = cur->predicted_s;
    vdnn_status st = best_choice(v, cur, r->busy, &r->dec[k], r->lb, r->cr, &r->pick[k], &t);
    r->gain[k] = cur->predicted_s - t;
    return st;
}

/* A round in parts (one with `estimate`) of ALIKE_LEAST decisions or more measures one
 * change in each run of up to ALIKE_RUN alike ones (alike_key: the same kind, choices
 * and choice, and the same neighbourhood within ALIKE_REACH layers -- the layers' types,
 * shapes, inputs and costs, and the plan's choices there); where that change gains, the
 * others of its run take its choice and its gain unmeasured (the moves replay them as
 * any other); where it gains nothing, the run's last is measured too, and where that
 * gains nothing either, the ones between keep their choice unmeasured; else each is
 * measured. On ResNet-1202 at batch 2 and 134.9 MiB nearly every map kept and every
 * layer's parameters kept on the device gained (the step waits on its copies
 * throughout): 2,636 of a climb's replays measured 2,636 gains, where 214 measured ones
 * now stand for them; at its least budget (micro-batches of one) the last two parts
 * replayed 766 changes that found two gains. `vdnn sweep` of 10 budgets took 6.2-6.7 s
 * instead of 20.1-20.4, every plan as fast or faster, and of 20 budgets it planned what
 * measuring each member of a run whose ends gained nothing planned (bench/planner.md); a
 * run of 32 or an unlimited one planned a little worse at some budgets. */
#define ALIKE_LEAST 64
#define ALIKE_REACH 2
#define ALIKE_RUN 16

/* What decides a decision's change in plan p, but for where it lies in the net (see
 * ALIKE_LEAST). */
static uint64_t alike_key(const search *s, const plan *p, const decision *d)
{
    const net *n = s->n;
    const int head[3] = {d->pass, get_choice(p, d), d->count};
    uint64_t h = vdnn_hash_bytes(VDNN_HASH_START, head, sizeof head);
    h = vdnn_hash_bytes(h, d->choice, (size_t)d->count * sizeof *d->choice);
    for (int t = d->layer - ALIKE_REACH; t <= d->layer + ALIKE_REACH; t++) {
        struct {
            uintptr_t ops;
            int in[4], out[4], ninputs, from[LAYER_MAX_INPUTS], offload, swap, algo[PASS_COUNT];
            double pass_s[PASS_COUNT];
        } at;
        memset(&at, 0, sizeof at);   /* the padding too */
        at.offload = t >= 0 && t <= n->nlayers ? p->offload[t] : -1;
        if (t >= 0 && t < n->nlayers) {
            const layer *l = n->layers[t];
            at.ops = (uintptr_t)l->ops;
            memcpy(at.in, &l->in, sizeof at.in);
            memcpy(at.out, &l->out, sizeof at.out);
            at.ninputs = l->ninputs;
            for (int k = 0; k < l->ninputs; k++) at.from[k] = t - l->input[k];
            at.swap = p->swap[t];
            for (int pass = 0; pass < PASS_COUNT; pass++) {
                at.algo[pass] = p->algo[t][pass];
                if (p->algo[t][pass] >= 0) at.pass_s[pass] = pass_s(s->pr, t, pass, p->algo[t][pass]);
            }
        }
        h = vdnn_hash_bytes(h, &at, sizeof at);
    }
    return h;
}

/* The round's jobs r (count decisions) as ALIKE_LEAST says: the first of each run of
 * alike maps and parameters, and every algorithm (estimated); then the last of each run
 * of three or more whose first gained nothing; then the others of the runs whose ends
 * disagree, and of the runs of two whose first gained nothing. */
static vdnn_status measure_alike(search *s, const plan *cur, round_jobs *r, int count)
{
    int slots = 1;
    while (slots < 2 * count) slots *= 2;
    uint64_t *key = malloc((size_t)slots * sizeof *key);
    int *at = malloc((size_t)slots * sizeof *at), *first = malloc((size_t)count * sizeof *first);
    int *others = calloc((size_t)count, sizeof *others), *last = malloc((size_t)count * sizeof *last);
    int *job = malloc((size_t)count * sizeof *job);
    vdnn_status st = key && at && first && others && last && job
                         ? VDNN_OK
                         : vdnn_fail(VDNN_ENOMEM, "out of host memory for the search");
    int jobs = 0;
    for (int j = 0; st == VDNN_OK && j < slots; j++) at[j] = -1;
    for (int k = 0; st == VDNN_OK && k < count; k++) {
        first[k] = k;
        const decision *d = &r->dec[k];
        if (d->pass == DEC_MAP || d->pass == DEC_SWAP) {
            const uint64_t h = alike_key(s, cur, d);
            int j = (int)(h & (uint64_t)(slots - 1));
            while (at[j] >= 0 && key[j] != h) j = (j + 1) & (slots - 1);
            if (at[j] >= 0 && others[at[j]] < ALIKE_RUN - 1) {
                first[k] = at[j];
                others[at[j]]++;
                last[at[j]] = k;
                continue;
            }
            key[j] = h;
            at[j] = k;
        }
        job[jobs++] = k;
    }
    r->idx = job;
    if (st == VDNN_OK) st = on_threads(s, jobs, 1, round_job, r);
    /* where a run's first gained nothing and others lie between it and its last: the last */
    jobs = 0;
    for (int k = 0; st == VDNN_OK && k < count; k++)
        if (first[k] == k && others[k] >= 2 && r->gain[k] <= 0) job[jobs++] = last[k];
    if (st == VDNN_OK && jobs) st = on_threads(s, jobs, 1, round_job, r);
    jobs = 0;
    for (int k = 0; st == VDNN_OK && k < count; k++) {
        const int f = first[k];
        const int ends = others[f] >= 2 && r->gain[f] <= 0;   /* its last measured */
        if (f == k || (ends && k == last[f])) continue;
        if (r->gain[f] > 0) {
            r->pick[k] = r->pick[f];
            r->gain[k] = r->gain[f];
            r->guessed[k] = 1;
            if (r->run) r->run[k] = r->run[f] = f;
        } else if (ends && r->gain[last[f]] <= 0) {
            r->pick[k] = get_choice(cur, &r->dec[k]);   /* as best_choice leaves one that gains nothing */
            r->guessed[k] = 1;
        } else {
            job[jobs++] = k;
        }
    }
    if (st == VDNN_OK && jobs) st = on_threads(s, jobs, 1, round_job, r);
    r->idx = NULL;
    free(key);
    free(at);
    free(first);
    free(others);
    free(last);
    free(job);
    return st;
}

/* Decisions dec[0..count) of cur (whose compute-stream work is busy): each one's best
 * choice and gain into pick and gain, on the search's threads where it has helpers (each
 * with a copy of cur; best_choice leaves the caller's as it was), with cur's bounds
 * (one replay more, which spares those of changes they show cannot fit). With `estimate`
 * (a round in parts, or the round a variant's starts share), guessed[k] set where
 * decision k's is estimated, not measured; where `run` is given too (a round in parts),
 * alike changes are measured once a run (measure_alike) and run[k] is the run decision
 * k was taken with (runs; -1: none). guessed and run may be NULL without `estimate`. */
static vdnn_status measure_round(search *s, plan *cur, double busy, const decision *dec, int count, int estimate,
                                 int *pick, double *gain, unsigned char *guessed, int *run)
{
    memset(gain, 0, (size_t)count * sizeof *gain);
    if (guessed) memset(guessed, 0, (size_t)count * sizeof *guessed);
    for (int k = 0; run && k < count; k++) run[k] = -1;
    const int copies = 1 + s->nhelper;
    plan *copy = calloc((size_t)copies, sizeof *copy);
    plan **at = calloc((size_t)copies, sizeof *at);
    vdnn_status st = copy && at ? VDNN_OK : vdnn_fail(VDNN_ENOMEM, "out of host memory for the search");
    for (int i = 0; st == VDNN_OK && i < copies; i++) {
        at[i] = i ? &copy[i] : cur;
        if (i) st = plan_copy(&copy[i], cur);
    }
    /* bounds only where one may pass the budget: a plan that holds at most the budget
     * less what any change adds gets none (its replay, remembered, says what it holds) */
    live_bounds lb = {0};
    const double t = cur->predicted_s;
    const size_t peak = cur->peak_bytes;
    int tight = 0;
    if (st == VDNN_OK && !s->no_bounds) st = simulate(s, cur);
    if (st == VDNN_OK && !s->no_bounds) tight = sim_used_peak(s->sim) + s->most_added > s->budget;
    cur->predicted_s = t;
    cur->peak_bytes = peak;
    if (st == VDNN_OK && tight) st = live_bounds_make(s->sim, s->n, cur, s->budget, &lb);
    critical_copies cr = {0};
    if (st == VDNN_OK && count >= CRITICAL_LEAST) st = sim_critical(s->sim, cur, &cr);
    round_jobs r = {.cur = at, .dec = dec, .lb = lb.valid ? &lb : NULL, .cr = &cr, .busy = busy, .estimate = estimate,
                    .pick = pick, .gain = gain, .guessed = guessed, .run = run};
    const int alike = estimate && run && count >= ALIKE_LEAST && !s->measure_all;
    if (st == VDNN_OK) st = alike ? measure_alike(s, cur, &r, count) : on_threads(s, count, 1, round_job, &r);
    critical_copies_free(&cr);
    live_bounds_free(&lb);
    for (int i = 1; copy && i < copies; i++) plan_free(&copy[i]);
    free(copy);
    free(at);
    return st;
}

/* A full round measured against one start of the search's climbs, which the climbs from
 * the starts that differ from it only in copy timing take for their first round
 * (hinted_round; search_bb says which). */
typedef struct round_hint {
    plan base;
    decision *dec;
    int ndec;
    int *pick;
    double *gain;
    int *index;               /* decision_slot's: the decision's index in dec, or -1 */
} round_hint;

/* A decision's slot among a net's possible ones (each layer's map, swap and passes, and
 * the copy timing last). */
static int decision_slot(const net *n, const decision *d)
{
    return d->pass == DEC_TIMING ? n->nlayers * (PASS_COUNT + 2) : d->layer * (PASS_COUNT + 2) + d->pass + 2;
}

static void round_hint_free(round_hint *h)
{
    plan_free(&h->base);
    free(h->dec);
    free(h->pick);
    free(h->gain);
    free(h->index);
    memset(h, 0, sizeof *h);
}

/* A round a variant's starts share of HINT_ESTIMATE_LEAST decisions or more estimates
 * its algorithm changes, as a round in parts does (estimate_choice); the climbs replay
 * them as they make them. On VGG-416 at batch 2 (2,078 decisions) such rounds' 1,900
 * replays, most of them of algorithms, were half of a search's time (0.78 of 1.4 s at
 * 1.83 GiB; its sweep of 10 budgets took 7.2-7.5 s, now 4.8-4.9), and the plans stay
 * the same at the 36 points of bench/planning.sh. A smaller round costs tens of
 * milliseconds measured, and measured, its plan does not depend on the bounds (an
 * estimate does: it takes the fastest algorithm they allow;
 * a_rounds_bounds_spare_replays_and_change_no_plan). */
#define HINT_ESTIMATE_LEAST 512

/* Hint h: the full round of a climb from `start`. */
static vdnn_status round_hint_measure(search *s, const plan *start, round_hint *h)
{
    memset(h, 0, sizeof *h);
    const int slots = s->n->nlayers * (PASS_COUNT + 2) + 1;
    vdnn_status st = plan_copy(&h->base, start);
    if (st == VDNN_OK) st = make_decisions(s->n, s->pr, s->budget, 0, &h->base, 1, &h->dec, &h->ndec);
    if (st == VDNN_OK && in_parts(s, h->ndec)) {   /* no whole round to share */
        round_hint_free(h);
        return VDNN_OK;
    }
    if (st == VDNN_OK) {
        h->pick = calloc((size_t)h->ndec + 1, sizeof *h->pick);
        h->gain = calloc((size_t)h->ndec + 1, sizeof *h->gain);
        h->index = malloc((size_t)slots * sizeof *h->index);
        if (!h->pick || !h->gain || !h->index) st = vdnn_fail(VDNN_ENOMEM, "out of host memory for the search");
    }
    for (int k = 0; st == VDNN_OK && k < slots; k++) h->index[k] = -1;
    for (int k = 0; st == VDNN_OK && k < h->ndec; k++) h->index[decision_slot(s->n, &h->dec[k])] = k;
    if (st == VDNN_OK) st = simulate(s, &h->base);
    const int estimate = h->ndec >= HINT_ESTIMATE_LEAST && !s->measure_all;
    unsigned char *guessed = st == VDNN_OK ? calloc((size_t)h->ndec + 1, 1) : NULL;
    if (st == VDNN_OK && !guessed) st = vdnn_fail(VDNN_ENOMEM, "out of host memory for the search");
    if (st == VDNN_OK)
        st = measure_round(s, &h->base, sim_busy_s(s->sim), h->dec, h->ndec, estimate, h->pick, h->gain, guessed,
                           NULL);
    free(guessed);
    if (st != VDNN_OK) round_hint_free(h);
    return st;
}

/* A climb's first full round from hint h: each decision that h measured with the same
 * choices, and that stands in cur as it stood in h's plan, takes h's best choice and
 * gain; the others are measured against cur. */
static vdnn_status hinted_round(search *s, plan *cur, double busy, const round_hint *h, const decision *dec, int ndec,
                                int *pick, double *gain)
{
    decision *unmeasured = malloc((size_t)ndec * sizeof *unmeasured);
    int *at = malloc((size_t)ndec * sizeof *at), *upick = malloc((size_t)ndec * sizeof *upick);
    double *ugain = malloc((size_t)ndec * sizeof *ugain);
    vdnn_status st =
        unmeasured && at && upick && ugain ? VDNN_OK : vdnn_fail(VDNN_ENOMEM, "out of host memory for the search");
    int n = 0;
    for (int k = 0; st == VDNN_OK && k < ndec; k++) {
        int j = h->index[decision_slot(s->n, &dec[k])];
        const decision *a = j >= 0 ? &h->dec[j] : NULL;
        if (a && a->count == dec[k].count && !memcmp(a->choice, dec[k].choice, (size_t)a->count * sizeof *a->choice) &&
            get_choice(cur, &dec[k]) == get_choice(&h->base, a)) {
            pick[k] = h->pick[j];
            gain[k] = h->gain[j];
        } else {
            unmeasured[n] = dec[k];
            at[n++] = k;
        }
    }
    if (st == VDNN_OK && n) st = measure_round(s, cur, busy, unmeasured, n, 0, upick, ugain, NULL, NULL);
    for (int m = 0; st == VDNN_OK && m < n; m++) {
        pick[at[m]] = upick[m];
        gain[at[m]] = ugain[m];
    }
    free(unmeasured);
    free(at);
    free(upick);
    free(ugain);
    return st;
}

/* From a plan that fits, single changes (keep a map, another algorithm for one pass,
 * ...) while they make it faster and it still fits. A full round measures each
 * decision's best change against the plan (in parts on the largest nets:
 * CLIMB_ROUND_MAX); the changes that gained are then made largest gain first, in
 * groups (CLIMB_GROUP_FIRST) or else one after another, each group or change replayed
 * once more against the plan as it now stands and kept where it still fits and gains,
 * or else a decision's best change measured again where it has other choices (gains
 * change little from one move to the next: a move costs a replay or two, where the
 * steepest ascent, a full round per move, would cost a round). Full rounds repeat until
 * one finds no gain, so the climb ends where no single change helps; or, with a search
 * gap, after a round that gained less than CLIMB_LAST_ROUND of it (either way its plan
 * then settled at the budget: plan.settled_at, and not climbed again), or at a plan
 * within the gap; or after `rounds` full rounds and their moves (0: no such limit). A strong
 * incumbent for the branch and bound. *out: the plan it reached. */
static vdnn_status climb(search *s, const plan *start, const round_hint *hint, int rounds, plan *out)
{
    plan cur = {0};
    decision *dec = NULL;
    int ndec = 0;
    /* a plan a full round found no gain for, at this budget and these costs, gains nothing by another */
    if (start->settled_at && start->settled_at == s->budget && start->settled_costs == s->costs)
        return plan_copy(out, start);
    vdnn_status st = make_decisions(s->n, s->pr, s->budget, 0, start, 1, &dec, &ndec);
    if (st == VDNN_OK) st = plan_copy(&cur, start);
    cur.settled_at = 0;
    if (st == VDNN_OK) st = simulate(s, &cur);   /* for its compute work (remembered: no replay) */
    double busy = sim_busy_s(s->sim);
    int *pick = calloc((size_t)ndec + 1, sizeof *pick);
    double *gain = calloc((size_t)ndec + 1, sizeof *gain);
    move *moves = calloc((size_t)ndec + 1, sizeof *moves);
    unsigned char *guessed = calloc((size_t)ndec + 1, sizeof *guessed);
    runs ru = {.run = malloc(((size_t)ndec + 1) * sizeof *ru.run),
               .failed = malloc(((size_t)ndec + 1) * sizeof *ru.failed)};
    if (st == VDNN_OK && (!pick || !gain || !moves || !guessed || !ru.run || !ru.failed))
        st = vdnn_fail(VDNN_ENOMEM, "out of host memory for the search");
    const int most = !in_parts(s, ndec) ? ndec : s->chunk ? s->chunk : CLIMB_ROUND_MAX;
    const int parts = most ? (ndec + most - 1) / most : 0, size = parts ? (ndec + parts - 1) / parts : 0;
    for (int last = 0, round = 0; st == VDNN_OK && !last && !out_of_time(s);) {
        double sum = 0;
        const double t_round = cur.predicted_s;
        int hinted = 0;   /* this round took gains from the hint */
        int from = 0;
        for (; from < ndec && st == VDNN_OK && !last && !out_of_time(s); from += size) {
            int count = 0, part = ndec - from < size ? ndec - from : size;
            if (hint && !round && part == ndec) {
                st = hinted_round(s, &cur, busy, hint, dec, ndec, pick, gain);
                hinted = 1;
            } else {
                st = measure_round(s, &cur, busy, dec + from, part, parts > 1, pick + from, gain + from,
                                   guessed + from, ru.run + from);
                for (int k = from; k < from + part; k++) {
                    if (ru.run[k] >= 0) ru.run[k] += from;
                    ru.failed[k] = -1;
                }
            }
            for (int k = from; k < from + part && st == VDNN_OK; k++)
                if (gain[k] > 0) {
                    moves[count++] = (move){gain[k], k};
                    if (!guessed[k]) sum += gain[k];   /* measured, not estimated */
                }
            if (st != VDNN_OK || out_of_time(s)) break;
            qsort(moves, (size_t)count, sizeof *moves, cmp_move);
            int group = s->group, alone = 0;
            for (int m = 0; m < count && st == VDNN_OK && !out_of_time(s); m++) {
                const decision *d = &dec[moves[m].k];
                int moved = 0;
                if (m >= alone && count - m > 1 && group > 1) {
                    int g = count - m < group ? count - m : group;
                    st = try_group(s, &cur, dec, moves + m, g, pick, &busy, &moved);
                    if (st != VDNN_OK) break;
                    ru.made += moved;
                    if (moved) {
                        m += g - 1;
                        if (group < CLIMB_GROUP_MAX) group *= 2;
                    } else if (parts > 1) {   /* half of it again, down to its first change alone */
                        group = g / 2;
                        m--;
                        continue;
                    } else {
                        alone = m + g;   /* these one at a time, then a smaller group */
                        group /= 2;
                    }
                }
                if (!moved) {
                    /* this change alone, and those after it that would be tried alone
                     * if it failed, at once on the threads (lone_moves), in a climb in
                     * parts: its replays take milliseconds, where starting the threads
                     * costs little (on ResNet-110, whose replays take a tenth of one, it
                     * added 5-8% to the micro-batch choice); on one thread one after
                     * another, as a go all the same (its changes off the plan's longest
                     * path left out as on the threads: the same plan) */
                    int b = 1, at = -1, first = 0;
                    while (parts > 1 && b < LONE_MOST && m + b < count &&
                           !(m + b >= alone && count - (m + b) > 1 && group > 1))
                        b++;
                    if (parts > 1) {
                        st = lone_moves(s, &cur, dec, moves + m, b, pick, &busy, &at, &first, &ru);
                    } else {
                        st = lone_move(s, &cur, d, NULL, &pick[moves[m].k], &busy, &moved, &first);
                        at = moved ? 0 : -1;
                    }
                    moved = at >= 0;
                    ru.made += moved;
                    m += moved ? at : b - 1;
                    if (parts > 1 && moved && first && s->group > 1 && group < CLIMB_GROUP_MAX) group *= 2;
                }
                if (st == VDNN_OK && s->gap > 0 && s->floor_s >= 0 && cur.predicted_s <= s->floor_s * (1 + s->gap)) {
                    last = 1;   /* within the gap: the search ends with it */
                    break;
                }
            }
        }
        /* with a gap: a round that gained too little for another, or a round in parts */
        const int enough = s->last_round > 0 &&
                           (t_round - cur.predicted_s < s->last_round * cur.predicted_s || parts > 1);
        if (s->on_round && st == VDNN_OK && from >= ndec) s->on_round(s->round_ctx, sum, t_round, cur.predicted_s);
        /* a round in parts whose moves made the plan faster has more to measure: its
         * estimated changes count only once tried, and those that did not move were
         * tried against the plan as it then stood */
        const int none = sum <= 0 && !(parts > 1 && faster(cur.predicted_s, t_round));
        /* a whole round measured that gained nothing, or that is enough */
        if (st == VDNN_OK && (none || enough) && from >= ndec && !hinted) {
            cur.settled_at = s->budget;
            cur.settled_costs = s->costs;
        }
        if (st != VDNN_OK || none) break;
        last = last || enough || ++round == rounds;
    }
    free(pick);
    free(gain);
    free(moves);
    free(guessed);
    free(ru.run);
    free(ru.failed);
    free(dec);
    if (st == VDNN_OK) *out = cur;
    else plan_free(&cur);
    return st;
}

/* The base plans the branch and bound starts from: what no per-map decision changes.
 * Variant bit 1 recomputes the maps policy `recompute` recomputes (the outputs of
 * cheap layers), bit 2 swaps every swappable layer's parameters. */
#define VARIANTS 4

static vdnn_status variant_plan(const net *n, const profile *pr, int v, int mode, plan *p)
{
    vdnn_status st = timing_plan(n, pr, POLICY_NONE, ALGO_PERF, mode, p);
    for (int j = 0; st == VDNN_OK && (v & 1) && j <= n->nlayers; j++)
        if (net_policy_map(n, j, POLICY_RECOMPUTE) == MAP_RECOMPUTE) p->offload[j] = MAP_RECOMPUTE;
    for (int i = 0; st == VDNN_OK && (v & 2) && i < n->nlayers; i++) p->swap[i] = (unsigned char)layer_swappable(n->layers[i]);
    return st;
}

/* Whether a variant changes anything on this net (else it repeats variant 0). */
static int variant_differs(const net *n, int v)
{
    int any = 0;
    for (int j = 0; (v & 1) && j <= n->nlayers; j++) any |= net_policy_map(n, j, POLICY_RECOMPUTE) == MAP_RECOMPUTE;
    int swaps = 0;
    for (int i = 0; (v & 2) && i < n->nlayers; i++) swaps |= layer_swappable(n->layers[i]);
    return (!(v & 1) || any) && (!(v & 2) || swaps);
}

/* The seeds that each take a job of their own (threshold_plans, smallest_plans): job k
 * is what[k] (an algorithm mode or a variant, and a copy timing), its plan made in
 * p[thread]. Each thread keeps the fastest of its jobs' plans that fits (best[thread],
 * job best_k[thread]: a thread takes its jobs in order, so on a tie the earlier), and
 * the fastest of those (on a tie the earlier job) is offered, which is what offering
 * every plan in turn offers, with a plan or two per thread held at once. */
typedef struct seed_jobs {
    int (*what)[2];
    int *order;               /* the order the jobs are taken in (NULL: 0, 1, ...) */
    int threads;
    plan *p, *best;
    int *best_k;
    size_t least;             /* the least peak of a job's plan so far (0: none yet; atomic) */
} seed_jobs;

static vdnn_status seed_jobs_make(seed_jobs *j, const search *s, int count)
{
    j->threads = 1 + s->nhelper;
    j->what = calloc((size_t)count, sizeof *j->what);
    j->p = calloc((size_t)j->threads, sizeof *j->p);
    j->best = calloc((size_t)j->threads, sizeof *j->best);
    j->best_k = malloc((size_t)j->threads * sizeof *j->best_k);
    if (!j->what || !j->p || !j->best || !j->best_k) return vdnn_fail(VDNN_ENOMEM, "out of host memory for the search");
    for (int t = 0; t < j->threads; t++) j->best_k[t] = -1;
    return VDNN_OK;
}

/* Job k's plan, made and simulated in p[thread]: the thread's best where it fits and is
 * faster. */
static void seed_keep(const search *v, seed_jobs *j, int thread, int k)
{
    plan *p = &j->p[thread], *b = &j->best[thread];
    if (p->peak_bytes <= v->budget && (j->best_k[thread] < 0 || p->predicted_s < b->predicted_s ||
                                       (p->predicted_s == b->predicted_s && k < j->best_k[thread]))) {
        plan was = *b;
        *b = *p;
        *p = was;
        j->best_k[thread] = k;
    }
    plan_free(p);
}

/* Jobs 0..count-1 of fn on the search's threads, then the fastest plan that fits offered. */
static vdnn_status seed_jobs_run(search *s, seed_jobs *j, int count, job_fn fn)
{
    vdnn_status st = on_threads(s, count, 0, fn, j);
    int w = -1;
    for (int t = 0; t < j->threads; t++)
        if (j->best_k[t] >= 0 && (w < 0 || j->best[t].predicted_s < j->best[w].predicted_s ||
                                  (j->best[t].predicted_s == j->best[w].predicted_s && j->best_k[t] < j->best_k[w])))
            w = t;
    if (st == VDNN_OK && w >= 0) st = offer(s, &j->best[w]);
    return st;
}

/* Jobs (what, m) for every copy timing m the net has, after the *count made. */
static void seed_jobs_timings(seed_jobs *j, const net *n, int what, int *count)
{
    for (int m = 0; m < TIMING_MODES; m++)
        if (!mode_skipped(n, m)) {
            j->what[*count][0] = what;
            j->what[(*count)++][1] = m;
        }
}

static void seed_jobs_free(seed_jobs *j)
{
    for (int t = 0; t < j->threads; t++) {
        if (j->p) plan_free(&j->p[t]);
        if (j->best) plan_free(&j->best[t]);
    }
    free(j->what);
    free(j->order);
    free(j->p);
    free(j->best);
    free(j->best_k);
}

/* vDNN's threshold idea: every map below map t that the search may offload goes to
 * the host, those above stay (backward reads them first). The least t that fits, found
 * by bisection (the bytes held fall as t grows, near enough), for every algorithm mode
 * and copy timing (a job each): a handful of simulations that scale to nets of
 * thousands of layers. */
static vdnn_status threshold_job(search *v, void *ctx, int thread, int k, int *stop)
{
    (void)stop;
    seed_jobs *j = ctx;
    plan *p = &j->p[thread];
    plan_free(p);
    vdnn_status st = timing_plan(v->n, v->pr, POLICY_NONE, (algo_mode)j->what[k][0], j->what[k][1], p);
    int lo = 0, hi = v->n->nlayers + 1, best = -1;
    while (st == VDNN_OK && lo <= hi) {
        int t = lo + (hi - lo) / 2;
        for (int i = 0; i <= v->n->nlayers; i++)
            if (free_map(v->n, i)) p->offload[i] = (unsigned char)(i < t);
        st = simulate_within(v, p, v->budget);
        if (st == VDNN_OK && p->peak_bytes <= v->budget) {
            best = t;
            hi = t - 1;
        } else {
            lo = t + 1;
        }
    }
    if (st == VDNN_OK && best >= 0) {
        for (int i = 0; i <= v->n->nlayers; i++)
            if (free_map(v->n, i)) p->offload[i] = (unsigned char)(i < best);
        st = simulate(v, p);
        if (st == VDNN_OK) seed_keep(v, j, thread, k);
    }
    return st;
}

static vdnn_status threshold_plans(search *s)
{
    seed_jobs j = {0};
    int count = 0;
    vdnn_status st = seed_jobs_make(&j, s, ALGO_MODE_COUNT * TIMING_MODES);
    for (int a = 0; st == VDNN_OK && a < ALGO_MODE_COUNT; a++) seed_jobs_timings(&j, s->n, a, &count);
    if (st == VDNN_OK) st = seed_jobs_run(s, &j, count, threshold_job);
    seed_jobs_free(&j);
    return st;
}

/* The smallest plan of every variant and copy timing (every map the branch and bound
 * may move offloaded, the smallest workspaces), and of every timing with each map that
 * can be recomputed recomputed (variant VARIANTS here), a job each: simulated (their
 * least peak kept in s->least) and offered. */
static vdnn_status smallest_job(search *v, void *ctx, int thread, int slot, int *stop)
{
    (void)stop;
    seed_jobs *j = ctx;
    const int k = j->order ? j->order[slot] : slot, var = j->what[k][0];
    plan *p = &j->p[thread];
    plan_free(p);
    decision *dec = NULL;
    int ndec = 0;
    vdnn_status st = variant_plan(v->n, v->pr, var < VARIANTS ? var : 0, j->what[k][1], p);
    /* parameters on the device past the budget and past a peak already seen: the plan
     * neither fits nor holds the least (peak or bytes in use), and is not needed */
    const size_t held = st == VDNN_OK ? sim_attached_bytes(v->sim, p) : 0,
                 least = __atomic_load_n(&j->least, __ATOMIC_RELAXED);
    if (held > v->budget && least && held > least) return st;
    for (int i = 0; var == VARIANTS && st == VDNN_OK && i <= v->n->nlayers; i++)
        if (net_recomputable(v->n, i, p->swap) && net_map_override(v->n, i) < 0) p->offload[i] = MAP_RECOMPUTE;
    if (st == VDNN_OK) st = make_decisions(v->n, v->pr, v->budget, 1, p, 0, &dec, &ndec);
    if (st == VDNN_OK) {
        fill_from(p, dec, 0, ndec, 1);
        st = simulate(v, p);
    }
    free(dec);
    for (size_t was = __atomic_load_n(&j->least, __ATOMIC_RELAXED);
         st == VDNN_OK && (!was || p->peak_bytes < was) &&
         !__atomic_compare_exchange_n(&j->least, &was, p->peak_bytes, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);)
        ;
    if (st == VDNN_OK) seed_keep(v, j, thread, k);
    return st;
}

static vdnn_status smallest_plans(search *s)
{
    seed_jobs j = {0};
    int count = 0;
    vdnn_status st = seed_jobs_make(&j, s, (VARIANTS + 1) * TIMING_MODES);
    for (int v = 0; st == VDNN_OK && v < VARIANTS + 1; v++)
        if (v == VARIANTS || !v || variant_differs(s->n, v)) seed_jobs_timings(&j, s->n, v, &count);
    /* the variants that swap first: the others' plans, holding every parameter, are
     * then seldom needed (smallest_job) */
    j.order = st == VDNN_OK ? malloc((size_t)count * sizeof *j.order) : NULL;
    if (st == VDNN_OK && !j.order) st = vdnn_fail(VDNN_ENOMEM, "out of host memory for the search");
    for (int h = 0, n = 0; st == VDNN_OK && h < 2; h++)
        for (int k = 0; k < count; k++)
            if ((j.what[k][0] < VARIANTS && (j.what[k][0] & 2)) == !h) j.order[n++] = k;
    if (st == VDNN_OK) st = seed_jobs_run(s, &j, count, smallest_job);
    seed_jobs_free(&j);
    return st;
}

/* The branch and bound over every variant and copy timing. */
static vdnn_status tree(search *s)
{
    vdnn_status st = VDNN_OK;
    for (int v = 0; v < VARIANTS && st == VDNN_OK && !out_of_time(s); v++) {
        if (v && !variant_differs(s->n, v)) continue;
        for (int m = 0; m < TIMING_MODES && st == VDNN_OK && !out_of_time(s); m++) {
            if (mode_skipped(s->n, m)) continue;
            if (s->first_fit && s->best.predicted_s >= 0) return st;
            plan_free(&s->work);
            st = variant_plan(s->n, s->pr, v, m, &s->work);
            free(s->dec);
            s->dec = NULL;
            /* every algorithm, dominated ones too: a larger workspace moves where later
             * blocks land, and can lower the peak */
            if (st == VDNN_OK) st = make_decisions(s->n, s->pr, s->budget, 1, &s->work, 0, &s->dec, &s->ndec);
            if (st == VDNN_OK) st = branch(s);
        }
    }
    return st;
}

/* A climb from the search's plan until no single change helps, its plan offered. */
static vdnn_status climb_best(search *s)
{
    plan from = {0}, got = {0};
    vdnn_status st = plan_copy(&from, &s->best);
    if (st == VDNN_OK) st = climb(s, &from, NULL, 0, &got);
    if (st == VDNN_OK) st = offer(s, &got);
    plan_free(&from);
    plan_free(&got);
    return st;
}

/* When no seed fits: the tree (smallest choices first while nothing fits) until its
 * first plan that fits (within s->fit_nodes nodes, when set), and a climb from there,
 * which finds in a few thousand simulations what the tree would in tens of thousands. */
static vdnn_status first_fit(search *s)
{
    long limit = s->node_limit;
    if (s->fit_nodes > 0 && (limit <= 0 || s->nodes + s->fit_nodes < limit)) s->node_limit = s->nodes + s->fit_nodes;
    s->first_fit = 1;
    vdnn_status st = tree(s);
    s->first_fit = 0;
    s->node_limit = limit;
    if (st != VDNN_OK || s->best.predicted_s < 0) return st;
    return climb_best(s);
}

/* A climb's start for variant v and the copy timing of timing_modes[m] (the first of
 * its IN_PLACE_WAYS rows): of the smallest plans of its ways of running in-place layers,
 * the one of least peak that fits (the climb moves between the ways); *p empty when none
 * fits. */
static vdnn_status climb_start(search *s, int v, int m, plan *p)
{
    vdnn_status st = VDNN_OK;
    memset(p, 0, sizeof *p);
    for (int w = m; w < m + IN_PLACE_WAYS && st == VDNN_OK; w++) {
        if (mode_skipped(s->n, w)) continue;
        plan q = {0};
        decision *dec = NULL;
        int ndec = 0;
        st = variant_plan(s->n, s->pr, v, w, &q);
        if (st == VDNN_OK) st = make_decisions(s->n, s->pr, s->budget, 0, &q, 0, &dec, &ndec);
        if (st == VDNN_OK) {
            fill_from(&q, dec, 0, ndec, 1);
            st = simulate(s, &q);
        }
        free(dec);
        if (st == VDNN_OK && q.peak_bytes <= s->budget && (!p->nlayers || q.peak_bytes < p->peak_bytes)) {
            plan_free(p);
            *p = q;
        } else {
            plan_free(&q);
        }
    }
    return st;
}

/* Climbs from a list of starts, on as many threads as the run computes with (OpenMP's
 * count, or search_limits.threads: each a simulator of its own, the calling thread the
 * search's). What they find is what climbing from each start in turn finds: each
 * climb's plan is offered in the starts' order, and once the search is over (its plan
 * within the gap, or out of time) no later climb starts, and those under way stop and
 * count for nothing. */
typedef struct climbs {
    search *s;
    const plan *start;
    const round_hint *const *hint;   /* climb i's first round from hint[i] where not NULL */
    plan *got;                /* what climb i reached, once done[i] */
    char *done;
    int count, next, offered;
    int rounds;               /* each climb's (climb()) */
    int over;                 /* read by the climbs under way (atomically) */
    int omp_threads;          /* the calling thread's: workspaces are sized by it */
    vdnn_status st;
    char err[1024];           /* a failing thread's message, for the calling thread */
    pthread_mutex_t mu;
} climbs;

/* Takes climbs until none is left, on simulator w->sim. */
static void climbs_take(climbs *c, search *w)
{
    for (;;) {
        pthread_mutex_lock(&c->mu);
        int i = c->over || c->st != VDNN_OK || c->next == c->count ? -1 : c->next++;
        plan_free(&w->best);
        vdnn_status st = i < 0 ? VDNN_OK : plan_copy(&w->best, &c->s->best);   /* for out_of_time */
        pthread_mutex_unlock(&c->mu);
        if (i < 0) return;
        plan got = {0};
        if (st == VDNN_OK) st = climb(w, &c->start[i], c->hint[i], c->rounds, &got);
        pthread_mutex_lock(&c->mu);
        if (st != VDNN_OK && c->st == VDNN_OK) {
            c->st = st;
            snprintf(c->err, sizeof c->err, "%s", vdnn_errmsg());
            __atomic_store_n(&c->over, 1, __ATOMIC_RELAXED);
        }
        c->got[i] = got;
        c->done[i] = 1;
        while (c->st == VDNN_OK && !c->over && c->offered < c->count && c->done[c->offered]) {
            vdnn_status r = offer(c->s, &c->got[c->offered++]);
            if (r != VDNN_OK) {
                c->st = r;
                snprintf(c->err, sizeof c->err, "%s", vdnn_errmsg());
            }
            if (r != VDNN_OK || out_of_time(c->s)) __atomic_store_n(&c->over, 1, __ATOMIC_RELAXED);
        }
        pthread_mutex_unlock(&c->mu);
    }
}

typedef struct climber {
    climbs *c;
    search w;
    vdnn_status st;
    pthread_t tid;
} climber;

static void *climber_main(void *arg)
{
    climber *k = arg;
    omp_set_num_threads(k->c->omp_threads);
    k->st = sim_create(k->w.n, k->w.pr, &k->w.sim);
    if (k->st == VDNN_OK) {
        climbs_take(k->c, &k->w);
    } else {
        pthread_mutex_lock(&k->c->mu);
        if (k->c->st == VDNN_OK) {
            k->c->st = k->st;
            snprintf(k->c->err, sizeof k->c->err, "%s", vdnn_errmsg());
            __atomic_store_n(&k->c->over, 1, __ATOMIC_RELAXED);
        }
        pthread_mutex_unlock(&k->c->mu);
    }
    return NULL;
}

/* A climber's view of the search: its own simulator, least peaks and time flags. */
static search climber_view(const search *s, climbs *c)
{
    search w = *s;
    w.sim = NULL;
    w.best = (plan){.predicted_s = -1};
    w.over = &c->over;
    w.lone_later = w.lone_spared = 0;
    if (c->count > 1) w.helper = NULL, w.nhelper = 0;   /* the climbs have the threads */
    return w;
}

/* What a climber saw, into the search. */
static void climber_merge(search *s, search *w)
{
    if (w->least && (!s->least || w->least < s->least)) s->least = w->least;
    if (w->least_used && (!s->least_used || w->least_used < s->least_used)) s->least_used = w->least_used;
    s->expired |= w->expired;
    s->lone_later += w->lone_later;
    s->lone_spared += w->lone_spared;
    if (w->sim && w->sim != s->sim) {
        s->runs_elsewhere += sim_runs(w->sim);
        sim_destroy(w->sim);
    }
    plan_free(&w->best);
}

static vdnn_status climb_all(search *s, const plan *start, const round_hint *const *hint, int count, int rounds)
{
    if (count < 1) return VDNN_OK;
    climbs c = {.s = s, .start = start, .hint = hint, .count = count, .rounds = rounds, .omp_threads = omp_get_max_threads()};
    c.got = calloc((size_t)count, sizeof *c.got);
    c.done = calloc((size_t)count, 1);
    int threads = s->threads > 0 ? s->threads : c.omp_threads;
    if (threads > count) threads = count;
    climber *k = calloc((size_t)threads, sizeof *k);
    if (!c.got || !c.done || !k) {
        free(c.got);
        free(c.done);
        free(k);
        return vdnn_fail(VDNN_ENOMEM, "out of host memory for the search's climbs");
    }
    pthread_mutex_init(&c.mu, NULL);
    /* every view taken before any climber starts: a climber's offer writes the search */
    for (int t = 0; t < threads; t++) k[t] = (climber){.c = &c, .w = climber_view(s, &c)};
    k[0].w.sim = s->sim;
    int started = 1;
    for (int t = 1; t < threads; t++) {
        if (pthread_create(&k[t].tid, NULL, climber_main, &k[t]) != 0) break;   /* fewer threads, then */
        started++;
    }
    climbs_take(&c, &k[0].w);
    for (int t = 1; t < started; t++) pthread_join(k[t].tid, NULL);
    for (int t = 0; t < started; t++) climber_merge(s, &k[t].w);
    for (int i = 0; i < count; i++) plan_free(&c.got[i]);
    pthread_mutex_destroy(&c.mu);
    vdnn_status st = c.st;
    if (st != VDNN_OK) vdnn_fail(st, "%s", c.err);
    free(c.got);
    free(c.done);
    free(k);
    return st;
}

/* Whether two plans of the search's net make the same decisions. */
static int same_plan(const search *s, const plan *a, const plan *b)
{
    int n = s->n->nlayers;
    return a->prefetch_ahead == b->prefetch_ahead && a->release_lag == b->release_lag && a->in_place == b->in_place &&
           a->micro == b->micro && !memcmp(a->offload, b->offload, (size_t)n + 1) && !memcmp(a->swap, b->swap, (size_t)n) &&
           !memcmp(a->algo, b->algo, (size_t)n * sizeof *a->algo);
}

/* The seeds of every fixed policy and algorithm mode, offered in that order (with a
 * gap, none's with the fastest algorithms were offered first). */
static vdnn_status policy_seeds(search *s)
{
    int pair[POLICY_COUNT * ALGO_MODE_COUNT][2], fits[POLICY_COUNT * ALGO_MODE_COUNT], n = 0;
    plan got[POLICY_COUNT * ALGO_MODE_COUNT];
    for (int pol = 0; pol < POLICY_COUNT; pol++)
        for (int a = 0; a < ALGO_MODE_COUNT; a++)
            if (!(s->gap > 0 && pol == POLICY_NONE && a == ALGO_PERF)) {
                pair[n][0] = pol;
                pair[n++][1] = a;
            }
    vdnn_status st = policy_plans(s, (const int(*)[2])pair, n, got, fits);
    for (int i = 0; i < n; i++)
        if (fits[i]) {
            if (st == VDNN_OK) st = offer(s, &got[i]);
            plan_free(&got[i]);
        }
    return st;
}

/* Whether the seeds made so far end them: the search is out of time, or its plan is
 * within a tenth of the gap of the floor (s->last_round, as a climb's last round): the
 * other seeds can gain no more than that. A plan merely within the gap goes on to them,
 * which seldom cost more than the first seeds did and may be faster by most of the gap
 * (ResNet-20 at batch 16 and half of none's peak: a fixed policy's plan 0.33% slower
 * than the threshold plan that follows). */
static int seeds_over(search *s)
{
    if (!out_of_time(s)) return 0;
    const int cut = s->expired || (s->over && __atomic_load_n(s->over, __ATOMIC_RELAXED));
    return cut || s->best.predicted_s <= s->floor_s * (1 + s->last_round);
}

static vdnn_status search_bb(search *s)
{
    /* the seeds first (the fixed policies, the smallest plans, the threshold plans),
     * then climbs from the best of them (or from the tree's first plan that fits, when
     * none does) and from the smallest plan of every variant and copy timing
     * (climb_start): a good incumbent cuts most of the tree. With a gap, none's plans
     * with the fastest algorithms are measured first: where one fits, or a plan handed
     * in (the micro-batch choice's for the split it chose) is within the gap of their
     * speed, no other plan is needed. */
    vdnn_status st = VDNN_OK;
    if (s->gap > 0) {
        plan p = {0};
        int fits = 0;
        st = best_policy_plan(s, POLICY_NONE, ALGO_PERF, &p, &fits);
        if (st == VDNN_OK && fits) st = offer(s, &p);
        if (fits) plan_free(&p);
        if (st != VDNN_OK || out_of_time(s)) return st;
    }
    /* A plan handed in that a climb settled at this budget and under these costs (the
     * micro-batch choice's, for the split it chose) came from a search that offered
     * every seed below and climbed from the best of them: none is faster than it. */
    const int handed = s->best.predicted_s >= 0 && s->best.settled_at == s->budget && s->best.settled_costs == s->costs;
    /* The fixed policies first, then the smallest and the threshold plans while the seeds
     * are not over (seeds_over): on ResNet-1202 at batch 2 from 224.4 MiB, where `all`
     * with the fastest algorithms fits, to none's 399.2, its plan is 0.004% off the
     * floor, and the smallest plans and the threshold bisection after it took 0.22 of a
     * budget's 0.33 s. */
    if (!handed) st = policy_seeds(s);
    if (st != VDNN_OK || seeds_over(s)) return st;
    if (!handed) st = smallest_plans(s);
    /* where the tree's search for a first fit is capped, a budget below the bytes even
     * the smallest plans hold at once (the bound the tree cuts with) is out of reach */
    if (st != VDNN_OK || (!handed && s->fit_nodes > 0 && s->least_used > s->budget) || seeds_over(s)) return st;
    if (!handed) st = threshold_plans(s);
    int seeded = s->best.predicted_s >= 0;
    if (st == VDNN_OK && !seeded) st = first_fit(s);
    if (st != VDNN_OK || s->best.predicted_s < 0) return st;
    /* the starts: the best seed, and unless one climb is asked for, every variant's
     * and copy timing's */
    enum { STARTS = 1 + VARIANTS * TIMING_MODES / IN_PLACE_WAYS };
    plan start[STARTS] = {{0}};
    round_hint hints[VARIANTS];
    const round_hint *hint[STARTS] = {0};
    int variant[STARTS], tried[VARIANTS] = {0}, count = 0;
    memset(hints, 0, sizeof hints);
    if (seeded) st = plan_copy(&start[count++], &s->best);
    /* A net whose climbs go in parts shares no first rounds among its starts, and each
     * climb from a variant's smallest plan costs full rounds of thousands of replays:
     * the best seed, or a plan handed in, is climbed from alone. On ResNet-1202 at batch
     * 2 and its least budget (7,218 decisions, 2-4 ms a replay) such climbs took the 43 s
     * left of the default 60 and none beat the handed plan (with 40 s, none came within
     * four times its time); `vdnn sweep` of it over 10 budgets took 176 s with them, 35 s
     * without, the same plans at 9 budgets and one 0.03% slower (bench/planner.md). */
    int alone = 0;
    if (st == VDNN_OK && s->best.predicted_s >= 0) {
        decision *dec = NULL;
        int ndec = 0;
        st = make_decisions(s->n, s->pr, s->budget, 0, &s->best, 1, &dec, &ndec);
        alone = in_parts(s, ndec);
        free(dec);
    }
    for (int v = 0; v < VARIANTS && st == VDNN_OK && !s->one_climb && !alone && !out_of_time(s); v++) {
        if (v && !variant_differs(s->n, v)) continue;
        for (int m = 0; m < TIMING_MODES && st == VDNN_OK; m += IN_PLACE_WAYS) {
            st = climb_start(s, v, m, &start[count]);
            int again = 0;   /* the best seed may be one of them */
            for (int i = 0; i < count && start[count].nlayers && !again; i++) again = same_plan(s, &start[i], &start[count]);
            if (again) plan_free(&start[count]);
            variant[count] = v;
            count += start[count].nlayers > 0;
        }
    }
    /* A variant's starts differ in their copy timing alone, and their climbs' first full
     * rounds measure nearly the same gains: one round is measured, from the variant's
     * last start (the latest copies, which hold the least memory: a change that does not
     * fit there seldom fits at another timing), and its other starts take each
     * decision's best choice and gain from it where the decision stands as it did there
     * (hinted_round). The moves are replayed as ever, so a gain that does not hold under
     * another timing is not made. On ResNet-110 at batch 128 and its least budget, 7,200
     * of a search's 8,900 replays went to its eight climbs' first rounds; with the rounds
     * shared, 5,600 in all, the same plan (bench/planner.md). */
    for (int i = count - 1; i >= seeded && count > 1 && !s->own_rounds && st == VDNN_OK && !out_of_time(s); i--) {
        round_hint *h = &hints[variant[i]];
        if (!tried[variant[i]]++) st = round_hint_measure(s, &start[i], h);
        if (h->dec) hint[i] = h;
    }
    /* Of several climbs, each makes one full round and its moves, and the best plan they
     * reach is climbed on until no single change helps: the rounds after the first gain
     * little (on ResNet-110 at batch 16 and its least budget, 0.1-0.34 ms of 2835), and
     * would be paid for at every start. */
    if (st == VDNN_OK && !out_of_time(s)) st = climb_all(s, start, hint, count, count > 1);
    for (int i = 0; i <= count && i < STARTS; i++) plan_free(&start[i]);
    for (int v = 0; v < VARIANTS; v++) round_hint_free(&hints[v]);
    if (st == VDNN_OK && count > 1 && !out_of_time(s)) st = climb_best(s);
    if (st != VDNN_OK) return st;
    /* the climbs find most plans; the tree then mostly proves them, and stops once its
     * patience runs out (a search of one climb, which only weighs a split, leaves it
     * out) */
    if (s->one_climb) return st;
    s->in_tree = 1;
    s->tree_from = s->nodes;
    return tree(s);
}

/* The search's helpers (on_threads), for `threads` threads in all; their simulators are
 * made at their first work. None where that many cannot be had. */
static void helpers_make(search *s, int threads)
{
    if (threads > 1 && (s->helper = calloc((size_t)threads - 1, sizeof *s->helper))) s->nhelper = threads - 1;
}

/* Their simulators gone, their replays counted in s->runs_elsewhere. */
static void helpers_free(search *s)
{
    for (int h = 0; h < s->nhelper; h++) {
        if (s->helper[h]) s->runs_elsewhere += sim_runs(s->helper[h]);
        sim_destroy(s->helper[h]);
    }
    free(s->helper);
    s->helper = NULL;
    s->nhelper = 0;
}

vdnn_status plan_search(const net *n, const profile *pr, size_t budget, search_kind k, search_limits lim, plan *out,
                        search_stats *stats)
{
    return plan_search_from(n, pr, budget, k, lim, NULL, out, stats);
}

vdnn_status plan_search_from(const net *n, const profile *pr, size_t budget, search_kind k, search_limits lim,
                             const plan *seed, plan *out, search_stats *stats)
{
    if (!pr) return vdnn_fail(VDNN_EINVAL, "planning needs a profile of the net");
    search s = {.n = n, .pr = pr, .budget = budget ? budget : (size_t)-1, .node_limit = lim.nodes,
                .gap = lim.gap > 0 ? lim.gap : 0, .floor_s = lim.floor_s > 0 ? lim.floor_s : -1,
                .floor_known = lim.floor_s > 0, .fit_nodes = lim.fit_nodes,
                .one_climb = lim.one_climb, .threads = lim.threads,
                .chunk = lim.climb_chunk > 0 ? lim.climb_chunk : 0, .own_rounds = lim.own_rounds, .no_bounds = lim.no_bounds,
                .measure_all = lim.measure_all,
                .on_round = lim.on_round, .round_ctx = lim.round_ctx,
                .group = lim.climb_group <= 0             ? CLIMB_GROUP_FIRST
                         : lim.climb_group > CLIMB_GROUP_MAX ? CLIMB_GROUP_MAX
                                                             : lim.climb_group};
    s.last_round = lim.last_round > 0 ? lim.last_round : CLIMB_LAST_ROUND * s.gap;
    if (!s.no_bounds) s.most_added = live_bounds_most_added(n);
    s.costs = costs_key(pr, s.last_round, s.chunk, s.measure_all);
    double t0 = vdnn_now_s();
    s.t0 = t0;
    if (lim.patience > 0) {
        const long per = (long)n->nlayers * n->nlayers;
        s.patience = lim.patience / per > 1 ? lim.patience / per : 1;
    }
    s.deadline = lim.seconds > 0 ? t0 + lim.seconds : 0;
    s.best.predicted_s = -1;
    if (k == SEARCH_BB) helpers_make(&s, lim.threads > 0 ? lim.threads : omp_get_max_threads());
    vdnn_status st = sim_create(n, pr, &s.sim);
    if (st == VDNN_OK && seed && k == SEARCH_BB) {
        plan p = {0};
        st = plan_copy(&p, seed);
        vdnn_status r = st == VDNN_OK ? simulate(&s, &p) : st;
        if (r == VDNN_OK) st = offer(&s, &p);
        else if (r != VDNN_EINVAL) st = r;   /* a seed that is not this net's plan: searched without */
        plan_free(&p);
    }
    if (st == VDNN_OK) st = k == SEARCH_VDNN ? search_vdnn(&s) : search_bb(&s);
    helpers_free(&s);
    if (stats) {
        stats->simulations = (s.sim ? sim_runs(s.sim) : 0) + s.runs_elsewhere;
        stats->nodes = s.nodes;
        stats->complete = k == SEARCH_BB && (lim.nodes <= 0 || s.nodes < lim.nodes) && !s.expired && !s.stalled &&
                          (!s.one_climb || s.settled);
        stats->timed_out = s.expired;
        stats->within_gap = s.settled && !s.expired;
        stats->stalled = s.stalled && !s.settled && !s.expired;
        stats->lone_later = s.lone_later;
        stats->lone_spared = s.lone_spared;
        stats->seconds = vdnn_now_s() - t0;
    }
    sim_destroy(s.sim);
    plan_free(&s.work);
    free(s.dec);
    if (st == VDNN_OK && s.best.predicted_s < 0) {
        /* the seeds' replays stop at the budget: the least is also plan_least's, whose
         * smallest plans and fixed policies run in full */
        char b[48], l[48];
        size_t least = 0;
        st = plan_least(n, &least);
        if (st == VDNN_OK && s.least && (!least || s.least < least)) least = s.least;
        if (st == VDNN_OK)
            st = vdnn_fail(VDNN_EBUDGET, "no plan fits the budget of %s: the least any plan tried needs is %s",
                           vdnn_fmt_bytes_exact(budget, b, sizeof b), vdnn_fmt_bytes_exact(least, l, sizeof l));
    }
    if (st != VDNN_OK) {
        plan_free(&s.best);
        return st;
    }
    snprintf(s.best.origin, sizeof s.best.origin, "%s", k == SEARCH_VDNN ? "vdnn" : "dyn");
    s.best.measured_s = -1;
    *out = s.best;
    return VDNN_OK;
}

vdnn_status plan_fit_policy_on(simulator *sim, const net *n, const profile *pr, size_t budget, mem_policy pol,
                               algo_mode a, plan *out)
{
    search s = {.n = n, .pr = pr, .budget = budget ? budget : (size_t)-1, .sim = sim};
    int fits = 0;
    vdnn_status st = best_policy_plan(&s, pol, a, out, &fits);
    if (st == VDNN_OK && !fits) return VDNN_EBUDGET;
    return st;
}

vdnn_status plan_fit_policy(const net *n, const profile *pr, size_t budget, mem_policy pol, algo_mode a, plan *out)
{
    simulator *sim = NULL;
    vdnn_status st = sim_create(n, pr, &sim);
    if (st == VDNN_OK) st = plan_fit_policy_on(sim, n, pr, budget, pol, a, out);
    sim_destroy(sim);
    return st;
}

size_t plan_resident_bytes(const net *n)
{
    size_t r = 0;
    for (int i = 0; i < n->nlayers; i++)
        if (!layer_swappable(n->layers[i])) r += layer_param_bytes(n->layers[i]);
    return r;
}

/* The least workspace layer i's `pass` can run with: its memory-optimal algorithm's. */
static size_t least_workspace(const layer *l, int pass)
{
    return layer_algo_count(l, pass) ? layer_workspace_bytes(l, pass, plan_choose_algo(l, pass, ALGO_MEM, NULL)) : 0;
}

/* The least the parameters of layer i, where swappable, hold on the device during its
 * pass or a neighbour's (which fetches them ahead: nets/iteration.c, params_fetch): the
 * values forward, the values and gradients backward; kept on the device, they hold their
 * momenta too. */
static size_t swapped_held(const net *n, int i, int backward)
{
    if (i < 0 || i >= n->nlayers || !layer_swappable(n->layers[i])) return 0;
    return layer_param_bytes(n->layers[i]) / 3 * (backward ? 2 : 1);
}

size_t plan_least_held(const net *n)
{
    size_t most = 0;
    for (int i = 0; i < n->nlayers; i++) {
        const layer *l = n->layers[i];
        size_t bwd_ws = least_workspace(l, PASS_BWD_DATA), f = least_workspace(l, PASS_BWD_FILTER);
        if (f > bwd_ws) bwd_ws = f;
        size_t fwd = plan_pass_held(n, i, PASS_FWD, least_workspace(l, PASS_FWD)) + swapped_held(n, i, 0) +
                     swapped_held(n, i + 1, 0);
        size_t bwd = plan_pass_held(n, i, PASS_BWD_DATA, bwd_ws) + swapped_held(n, i, 1) + swapped_held(n, i - 1, 1);
        if (fwd > most) most = fwd;
        if (bwd > most) most = bwd;
    }
    return plan_resident_bytes(n) + most;
}

vdnn_status plan_floor_within(const net *n, const profile *pr, size_t budget, double *floor_s)
{
    return plan_floor_within_from(n, pr, budget, NULL, floor_s);
}

vdnn_status plan_floor_within_from(const net *n, const profile *pr, size_t budget, const plan *ideal, double *floor_s)
{
    plan p = {0};
    simulator *sim = NULL;
    vdnn_status st = ideal ? plan_copy(&p, ideal) : plan_fit_policy(n, pr, 0, POLICY_NONE, ALGO_PERF, &p);
    /* each pass's fastest choice that fits beside the parameters no plan swaps (where
     * none does, no plan fits the budget, and any floor holds) */
    const size_t resident = plan_resident_bytes(n), room = budget > resident ? budget - resident : 1;
    for (int i = 0; st == VDNN_OK && budget && i < n->nlayers; i++)
        for (int pass = 0; pass < PASS_COUNT; pass++) {
            decision d;
            if (n->layers[i]->algo_pinned[pass] < 0 && algo_choices(n, pr, room, i, pass, 0, &d) > 0)
                p.algo[i][pass] = d.choice[0];
        }
    double t = 0;
    size_t peak = 0;
    if (st == VDNN_OK) st = sim_create(n, pr, &sim);
    if (st == VDNN_OK) st = sim_run(sim, &p, &t, &peak);
    if (st == VDNN_OK) *floor_s = sim_busy_s(sim);
    sim_destroy(sim);
    plan_free(&p);
    return st;
}

/* The fastest fixed policy (fastest algorithms, then smallest) whose peak fits. */
static vdnn_status best_fixed(const net *n, const profile *pr, size_t budget, plan *out)
{
    vdnn_status st = VDNN_EBUDGET;
    for (int a = 0; a < ALGO_MODE_COUNT; a++)
        for (int pol = 0; pol < POLICY_COUNT; pol++) {
            if (pol == POLICY_SWAP) continue;   /* measured only against plans that place parameters alike */
            plan p = {0};
            vdnn_status r = plan_fit_policy(n, pr, budget, (mem_policy)pol, (algo_mode)a, &p);
            if (r == VDNN_EBUDGET) continue;
            if (r != VDNN_OK) return r;
            if (st != VDNN_OK || p.predicted_s < out->predicted_s) {
                if (st == VDNN_OK) plan_free(out);
                *out = p;
                st = VDNN_OK;
            } else {
                plan_free(&p);
            }
        }
    return st;
}

static int same_swaps(const net *n, const plan *p)
{
    for (int i = 0; i < n->nlayers; i++)
        if (!p->swap[i] != !n->layers[i]->swap) return 0;
    return 1;
}

/* Places the parameters as the plan swaps them: attached again when that differs. */
static vdnn_status attach_for(net *n, const plan *p)
{
    if (same_swaps(n, p)) return VDNN_OK;
    device *d = n->dev;
    net_detach(n);
    return plan_attach_as(n, d, p);
}

vdnn_status plan_choose(net *n, const profile *pr, size_t budget, search_kind k, search_limits lim, const plan *seed,
                        int verify, plan *out, plan *alt, search_stats *stats)
{
    plan best = {0};
    if (alt) memset(alt, 0, sizeof *alt);
    vdnn_status st = plan_search_from(n, pr, budget, k, lim, seed, &best, stats);
    if (st != VDNN_OK) return st;
    return plan_verify(n, pr, budget, verify, &best, out, alt);
}

vdnn_status plan_verify(net *n, const profile *pr, size_t budget, int verify, plan *found, plan *out, plan *alt)
{
    plan best = *found, fixed = {0};
    memset(found, 0, sizeof *found);
    if (alt) memset(alt, 0, sizeof *alt);
    vdnn_status st = VDNN_OK;
    int have_fixed = 0;
    if (verify > 0) {
        st = attach_for(n, &best);
        if (st == VDNN_OK) st = plan_measure(n, &best, verify);
        vdnn_status f = st == VDNN_OK ? best_fixed(n, pr, budget, &fixed) : VDNN_EBUDGET;
        have_fixed = f == VDNN_OK;
        if (f != VDNN_OK && f != VDNN_EBUDGET) st = f;
        /* a fixed policy predicted far slower is not worth its iterations: the
         * simulator is not off by that much */
        if (st == VDNN_OK && have_fixed && fixed.predicted_s > best.predicted_s &&
            fixed.predicted_s < VERIFY_RIVAL * best.predicted_s) {
            st = attach_for(n, &fixed);
            if (st == VDNN_OK) st = plan_measure(n, &fixed, verify);
        } else if (have_fixed) {
            plan_free(&fixed);
            have_fixed = 0;
        }
    }
    if (st == VDNN_OK && have_fixed && fixed.measured_s >= 0 && fixed.measured_s < best.measured_s) {
        plan t = best;
        best = fixed;
        fixed = t;
    }
    if (st == VDNN_OK && verify > 0) st = attach_for(n, &best);
    if (st != VDNN_OK) {
        plan_free(&best);
        plan_free(&fixed);
        return st;
    }
    *out = best;
    if (alt && have_fixed) *alt = fixed;
    else plan_free(&fixed);
    return VDNN_OK;
}

/* The smallest plans of the branch and bound's variants (every map it may move
 * offloaded, smallest workspaces), every recomputable map recomputed, and the fixed
 * policies (one more offload can raise the peak by a hole): the least peak among them. */
vdnn_status plan_least(const net *n, size_t *bytes)
{
    profile zero = {.nlayers = n->nlayers, .batch = n->input.n};
    zero.layers = calloc((size_t)n->nlayers, sizeof *zero.layers);
    search s = {.n = n, .pr = &zero, .budget = (size_t)-1};
    s.best.predicted_s = -1;
    helpers_make(&s, omp_get_max_threads());   /* the run's --threads, as the searches' */
    vdnn_status st = zero.layers ? sim_create(n, &zero, &s.sim) : vdnn_fail(VDNN_ENOMEM, "out of host memory");
    int pair[POLICY_COUNT][2], fits[POLICY_COUNT];
    plan p[POLICY_COUNT];
    for (int pol = 0; pol < POLICY_COUNT; pol++) pair[pol][0] = pol, pair[pol][1] = ALGO_MEM;
    if (st == VDNN_OK) st = policy_plans(&s, (const int(*)[2])pair, POLICY_COUNT, p, fits);
    for (int pol = 0; st == VDNN_OK && pol < POLICY_COUNT; pol++)
        if (fits[pol]) plan_free(&p[pol]);
    if (st == VDNN_OK) st = smallest_plans(&s);
    *bytes = s.least;
    helpers_free(&s);
    plan_free(&s.best);
    sim_destroy(s.sim);
    free(zero.layers);
    return st;
}

/* ---- enumeration (tests) ---- */

typedef struct walk {
    const decision *dec;
    int ndec;
    plan *p;
    int (*visit)(void *, const plan *);
    void *ctx;
    long count;
    int stop;
} walk;

static void walk_all(walk *w, int k)
{
    if (w->stop) return;
    if (k == w->ndec) {
        w->count++;
        w->stop = w->visit(w->ctx, w->p);
        return;
    }
    for (int c = 0; c < w->dec[k].count && !w->stop; c++) {
        set_choice(w->p, &w->dec[k], w->dec[k].choice[c]);
        walk_all(w, k + 1);
    }
}

long plan_enumerate(const net *n, const profile *pr, int (*visit)(void *ctx, const plan *p), void *ctx)
{
    walk w = {.visit = visit, .ctx = ctx};
    for (int v = 0; v < VARIANTS && !w.stop; v++) {
        if (v && !variant_differs(n, v)) continue;
        for (int m = 0; m < TIMING_MODES && !w.stop; m++) {
            if (mode_skipped(n, m)) continue;
            plan p = {0};
            decision *dec = NULL;
            int ndec = 0;
            if (variant_plan(n, pr, v, m, &p) != VDNN_OK || make_decisions(n, pr, 0, 1, &p, 0, &dec, &ndec) != VDNN_OK) {
                plan_free(&p);
                return -1;
            }
            w.dec = dec;
            w.ndec = ndec;
            w.p = &p;
            walk_all(&w, 0);
            plan_free(&p);
            free(dec);
        }
    }
    return w.count;
}
