/* Check suite for deep nets: a chain of DEEP [relu] layers between two small connected
 * layers, as `vdnn info` describes it (each policy's exact minimum budget), trained one
 * step under every policy and under a plan of the planner's, and recomputed in one
 * chain as deep as the net (policy recompute drops every relu's output).
 *
 * Each check does its work on a thread with a DEEP_STACK stack, whatever `ulimit -s`
 * says, so that any recursion as deep as the net crashes it: with 256 KiB, a recursion
 * of 20,000 levels needs frames under 14 bytes, less than a call's return address and
 * alignment. The iteration's recompute once recursed per dropped map and crashed here
 * at about 500 layers.
 *
 * Sanitizer builds (tests/tsan.h) run 5,000 layers on a 1 MiB stack: their frames are
 * larger and their arithmetic 10 to 50 times slower; a recursion of 5,000 levels
 * still needs frames under 210 bytes there. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nets/planner/planner.h"
#include "tests/testnet.h"
#include "tests/tsan.h"

#define DEEP (UNDER_SANITIZER ? 5000 : 20000)
#define DEEP_STACK ((size_t)(UNDER_SANITIZER ? 1024 : 256) * 1024)

/* The chain's config under `policy` ([memory] policy, so that attaching places the
 * parameters as the policy says); free() it. */
static char *deep_text(const char *policy)
{
    static const char head[] = "[net]\nbatch = 2\nchannels = 1\nheight = 4\nwidth = 4\n"
                               "[train]\nepochs = 1\nlearning_rate = 0.1\nseed = 5\n"
                               "[data]\nset = synthetic\ntrain_size = 4\ntest_size = 2\nclasses = 4\n"
                               "[memory]\npolicy = %s\n[connected]\noutput = 8\n";
    static const char relu[] = "[relu]\n", tail[] = "[connected]\noutput = 4\n[softmax]\n";
    size_t len = sizeof head + 16 + (size_t)DEEP * (sizeof relu - 1) + sizeof tail;
    char *text = malloc(len);
    ck_assert_ptr_nonnull(text);
    char *at = text + snprintf(text, len, head, policy);
    for (int i = 0; i < DEEP; i++, at += sizeof relu - 1) memcpy(at, relu, sizeof relu - 1);
    memcpy(at, tail, sizeof tail);
    return text;
}

/* Runs fn(arg) on a thread with a DEEP_STACK stack and waits for it. */
static void on_small_stack(void *(*fn)(void *), void *arg)
{
    pthread_attr_t attr;
    pthread_t t;
    ck_assert_int_eq(pthread_attr_init(&attr), 0);
    ck_assert_int_eq(pthread_attr_setstacksize(&attr, DEEP_STACK), 0);
    ck_assert_int_eq(pthread_create(&t, &attr, fn, arg), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    pthread_attr_destroy(&attr);
}

/* What a thread did: its status and message (vdnn_errmsg is per thread). */
typedef struct outcome {
    vdnn_status st;
    char msg[1024];
} outcome;

static void *note(outcome *o, vdnn_status st)
{
    o->st = st;
    snprintf(o->msg, sizeof o->msg, "%s", st == VDNN_OK ? "" : vdnn_errmsg());
    return NULL;
}

/* ---- info: the exact minimum budget of every policy ---- */

typedef struct budgets {
    outcome o;
    size_t least[POLICY_COUNT];
    int nlayers;
} budgets;

static void *least_budgets(void *arg)
{
    budgets *b = arg;
    char *text = deep_text("none");
    net *n = tn_parse(text, NULL);
    free(text);
    b->nlayers = n->nlayers;
    vdnn_status st = VDNN_OK;
    for (int p = 0; p < POLICY_COUNT && st == VDNN_OK; p++) {
        net_plan_static(n, (mem_policy)p, ALGO_MEM);
        for (int i = 0; i < n->nlayers; i++) n->layers[i]->swap = net_policy_swaps(n, i, (mem_policy)p) ? SWAP_HOST : 0;
        st = net_least_budget(n, &b->least[p]);
    }
    net_free(n);
    return note(&b->o, st);
}

START_TEST(deep_chain_budgets)
{
    budgets b = {0};
    on_small_stack(least_budgets, &b);
    ck_assert_msg(b.o.st == VDNN_OK, "%s", b.o.msg);
    ck_assert_int_eq(b.nlayers, DEEP + 3);
    /* none keeps a map per relu, and so does recompute at its peak: it drops every
     * relu's output, but the first backward brings the whole chain back at once; all
     * and swap keep a handful whatever the depth */
    size_t map = pool_round(2 * 8 * sizeof(float));
    ck_assert_uint_gt(b.least[POLICY_NONE], (size_t)DEEP * map);
    ck_assert_uint_eq(b.least[POLICY_CONV], b.least[POLICY_NONE]);
    ck_assert_uint_gt(b.least[POLICY_RECOMPUTE], (size_t)DEEP * map);
    ck_assert_uint_lt(b.least[POLICY_ALL], 128 * map);
    ck_assert_uint_le(b.least[POLICY_SWAP], b.least[POLICY_ALL]);
}
END_TEST

/* ---- one training step under every policy and under a planned plan ---- */

/* A cost for every pass, so that the planner has something to weigh. */
static profile flat_profile(const net *n)
{
    profile pr = {0};
    pr.nlayers = n->nlayers;
    pr.batch = n->input.n;
    pr.layers = calloc((size_t)n->nlayers, sizeof *pr.layers);
    ck_assert_ptr_nonnull(pr.layers);
    for (int i = 0; i < n->nlayers; i++) {
        pr.layers[i].fwd_s[0] = 1e-6;
        pr.layers[i].bwd_data_s[0] = i ? 1e-6 : 0;
    }
    pr.h2d_bytes_per_s = pr.d2h_bytes_per_s = pr.duplex_bytes_per_s = 1e9;
    return pr;
}

/* The planner's plan (vDNN's ladder) for the budget of policy all, applied to n. */
static vdnn_status apply_planned(net *n)
{
    profile pr = flat_profile(n);
    plan all = {0}, best = {0};
    vdnn_status st = plan_fit_policy(n, &pr, 0, POLICY_ALL, ALGO_MEM, &all);
    if (st == VDNN_OK) st = plan_search(n, &pr, all.peak_bytes, SEARCH_VDNN, (search_limits){0}, &best, NULL);
    if (st == VDNN_OK) st = plan_apply(n, &best);
    plan_free(&all);
    plan_free(&best);
    free(pr.layers);
    return st;
}

typedef struct step {
    const char *policy;       /* a [memory] policy, or "dyn": the planner's plan */
    outcome o;
    double loss;
    float w0[8 * 16], w[8 * 16];   /* fc1's weights before and after the step */
} step;

/* fc1's weights: in host memory when the policy swaps them. */
static void fc1_weights(net *n, float *w)
{
    const param *p = &n->layers[0]->params[0];
    if (n->layers[0]->swap) {
        memcpy(w, p->host_value, 8 * 16 * sizeof *w);
        return;
    }
    float *h = tn_download(n, p->value, 8 * 16);
    memcpy(w, h, 8 * 16 * sizeof *w);
    free(h);
}

static void *train_one_step(void *arg)
{
    step *s = arg;
    int dyn = !strcmp(s->policy, "dyn");
    char *text = deep_text(dyn ? "none" : s->policy);
    device *d = NULL;
    net *n = tn_attached(text, NULL, &d);
    free(text);
    tn_batch b = tn_batch_make(n, 2, 11);
    step_result r;
    fc1_weights(n, s->w0);
    vdnn_status st = dyn ? apply_planned(n) : VDNN_OK;
    if (st == VDNN_OK) st = net_train_step(n, b.x, b.y, b.items, n->train.learning_rate, &r);
    if (st == VDNN_OK) {
        s->loss = r.loss_sum;
        fc1_weights(n, s->w);
    }
    tn_batch_free(&b);
    tn_free(n, d);
    return note(&s->o, st);
}

/* Bit for bit the same step as policy none, the gradient back through every relu. */
START_TEST(deep_chain_trains_under_every_policy)
{
    static const char *const policies[] = {"none", "all", "conv", "swap", "recompute", "dyn"};
    static step ref, s;
    for (size_t k = 0; k < sizeof policies / sizeof *policies; k++) {
        s = (step){.policy = policies[k]};
        on_small_stack(train_one_step, &s);
        ck_assert_msg(s.o.st == VDNN_OK, "%s: %s", s.policy, s.o.msg);
        if (!k) {
            ref = s;
            ck_assert_msg(memcmp(s.w, s.w0, sizeof s.w), "fc1 learned nothing: no gradient came through");
            continue;
        }
        ck_assert_msg(s.loss == ref.loss, "%s: loss %.9g, none's %.9g", s.policy, s.loss, ref.loss);
        ck_assert_msg(!memcmp(s.w, ref.w, sizeof s.w), "%s: fc1's weights differ from none's", s.policy);
    }
}
END_TEST

/* ---- a recomputation that would run a swapped layer, found through the whole chain ---- */

typedef struct swapped {
    outcome o;
    int top, top_kept, first;
} swapped;

static void *find_swapped(void *arg)
{
    swapped *w = arg;
    char *text = deep_text("none");
    net *n = tn_parse(text, NULL);
    free(text);
    int L = n->nlayers;
    unsigned char *maps = calloc((size_t)L + 1, 1), *swap = calloc((size_t)L, 1);
    int *bad = malloc(((size_t)L + 1) * sizeof *bad);
    ck_assert(maps && swap && bad);
    for (int j = 1; j < L; j++) maps[j] = MAP_RECOMPUTE;
    swap[0] = SWAP_HOST;   /* fc1, which wrote x[1] */
    net_recompute_runs_swapped(n, maps, swap, bad);
    w->top = bad[L - 1];
    w->first = bad[1];
    maps[1] = MAP_KEEP;   /* x[1] kept: recomputing stops there */
    net_recompute_runs_swapped(n, maps, swap, bad);
    w->top_kept = bad[L - 1];
    free(maps);
    free(swap);
    free(bad);
    net_free(n);
    return note(&w->o, VDNN_OK);
}

START_TEST(deep_recompute_chain_reaches_a_swapped_layer)
{
    swapped w = {0};
    on_small_stack(find_swapped, &w);
    ck_assert_msg(w.o.st == VDNN_OK, "%s", w.o.msg);
    ck_assert_int_eq(w.first, 0);
    ck_assert_int_eq(w.top, 0);
    ck_assert_int_eq(w.top_kept, -1);
}
END_TEST

static Suite *deep_suite(void)
{
    Suite *s = suite_create("deep");
    TCase *t = tcase_create("chain");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, deep_chain_budgets);
    tcase_add_test(t, deep_chain_trains_under_every_policy);
    tcase_add_test(t, deep_recompute_chain_reaches_a_swapped_layer);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tn_run_suite(deep_suite()); }
