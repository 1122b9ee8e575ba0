/* Check suite for memory budgets (nets/planner/budget.c, the pool, the CLI's budget messages),
 * against docs/design.md's "Budget" invariant and net_min_budget()'s promise:
 *
 *  - exact minimum: for several nets, each policy, algorithm mode and look-ahead, a CPU
 *    device with budget M = net_min_budget trains, its pool's high-water mark is at
 *    most M and equals the peak the simulated device replays; M - 256 fails with
 *    VDNN_EBUDGET and a message that names the layer and the tensor, and the net then
 *    detaches cleanly;
 *  - the CLI: a budget below the plan's minimum exits 1 with every policy's minimum and
 *    a suggestion; `info` prints the minimum budgets, as text and as JSON, equal to the
 *    library's;
 *  - randomized stress: random chains, policies, per-layer offload flags, algorithms and
 *    budgets between the minimum and twice it train with the peak under the budget and
 *    bit-identical to training with everything resident. */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "nets/net.h"
#include "tests/jsoncheck.h"
#include "tests/testnet.h"
#include "vdnn/rng.h"

#define BT_TRAIN "[train]\nepochs = 1\nlearning_rate = 0.05\nmomentum = 0.9\nweight_decay = 0.0005\nseed = 5\n"
#define BT_DATA(k) "[data]\nset = synthetic\ntrain_size = 64\ntest_size = 16\nclasses = " #k "\n"

/* Odd shapes, strided padded convolution, tn_batch norm, leaky, both poolings, dropout. */
#define NET_A                                                                              \
    "[net]\nbatch = 8\nchannels = 3\nheight = 13\nwidth = 11\n" BT_TRAIN BT_DATA(4)        \
    "[convolutional]\nfilters = 5\nsize = 3\nstride = 2\npad = 1\n"                        \
    "[batchnorm]\n[leaky]\nslope = 0.1\n[maxpool]\nsize = 2\nstride = 1\n"                 \
    "[convolutional]\nfilters = 4\nsize = 3\npad = 1\n[relu]\n[avgpool]\nsize = 2\n"       \
    "[dropout]\nprobability = 0.3\n[connected]\noutput = 10\n[leaky]\n[connected]\noutput = 4\n[softmax]\n"

/* LRN, tanh, sigmoid, a padded strided maxpool and a 1x1 convolution. */
#define NET_B                                                                              \
    "[net]\nbatch = 7\nchannels = 4\nheight = 9\nwidth = 10\n" BT_TRAIN BT_DATA(5)         \
    "[convolutional]\nfilters = 6\nsize = 3\npad = 1\n[lrn]\nsize = 3\n[tanh]\n"           \
    "[maxpool]\nsize = 3\nstride = 2\npad = 1\n[convolutional]\nfilters = 6\nsize = 1\n"   \
    "[sigmoid]\n[lrn]\nsize = 5\n[connected]\noutput = 5\n[softmax]\n"

/* Feature maps much larger than the parameters: offloading saves most of the budget. */
#define NET_WIDE                                                                           \
    "[net]\nbatch = 8\nchannels = 3\nheight = 20\nwidth = 20\n" BT_TRAIN BT_DATA(4)         \
    "[convolutional]\nfilters = 8\nsize = 3\npad = 1\n[relu]\n"                            \
    "[convolutional]\nfilters = 8\nsize = 3\npad = 1\n[relu]\n"                            \
    "[convolutional]\nfilters = 8\nsize = 3\npad = 1\n[relu]\n[maxpool]\nsize = 2\n"       \
    "[convolutional]\nfilters = 8\nsize = 3\npad = 1\n[relu]\n[maxpool]\nsize = 2\n"       \
    "[connected]\noutput = 4\n[softmax]\n"

/* NET_WIDE with every convolution on im2col. */
#define WIDE_CONV "[convolutional]\nfilters = 8\nsize = 3\npad = 1\nalgo = im2col\n[relu]\n"
#define NET_WIDE_IM2COL                                                                    \
    "[net]\nbatch = 8\nchannels = 3\nheight = 20\nwidth = 20\n" BT_TRAIN BT_DATA(4)         \
    WIDE_CONV WIDE_CONV WIDE_CONV "[maxpool]\nsize = 2\n" WIDE_CONV "[maxpool]\nsize = 2\n"     \
    "[connected]\noutput = 4\n[softmax]\n"

/* Per-layer overrides: offload flags against the policy, an algorithm per pass. */
#define NET_C                                                                              \
    "[net]\nbatch = 8\nchannels = 2\nheight = 12\nwidth = 12\n" BT_TRAIN BT_DATA(3)        \
    "[convolutional]\nfilters = 4\nsize = 3\npad = 1\noffload = 0\nalgo = im2col-batch\n"  \
    "[relu]\n[convolutional]\nfilters = 6\nsize = 3\nstride = 2\noffload = 1\n"            \
    "algo_fwd = direct\nalgo_bwd_data = im2col-chunk\nalgo_bwd_filter = im2col\n"          \
    "[batchnorm]\noffload = 1\n[relu]\n[maxpool]\nsize = 2\noffload = 0\n"                 \
    "[convolutional]\nfilters = 5\nsize = 2\nalgo = im2col\n[relu]\n"                      \
    "[connected]\noutput = 3\noffload = 1\n[softmax]\n"

/* A graph: a shortcut ([add]) around a branch, the input read twice ([concat] with a
 * pooling of the image), a map read by three layers, and offload flags. */
#define NET_D                                                                              \
    "[net]\nbatch = 6\nchannels = 3\nheight = 12\nwidth = 12\n" BT_TRAIN BT_DATA(4)         \
    "[convolutional]\nfilters = 4\nsize = 3\npad = 1\n[batchnorm]\n[relu]\nname = a\n"    \
    "[convolutional]\nfilters = 4\nsize = 3\npad = 1\noffload = 1\n[batchnorm]\n[dropout]\n"   \
    "probability = 0.2\n[relu]\n[add]\ninput = -1, a\n[relu]\nname = r\n"                    \
    "[convolutional]\ninput = a\nfilters = 3\nsize = 1\nname = c\n"                         \
    "[maxpool]\ninput = data\nsize = 3\nstride = 1\npad = 1\nname = dp\n"                   \
    "[concat]\ninput = r, c, dp\n[lrn]\nsize = 3\n[avgpool]\nsize = 2\n"                    \
    "[connected]\noutput = 4\n[softmax]\n"

static const char *const budget_nets[] = {NET_A, NET_B, NET_WIDE, NET_C, NET_D};
#define NBUDGET ((int)(sizeof budget_nets / sizeof *budget_nets))

/* ---- helpers ---- */

/* A value in [0, n). */
static int pick(uint64_t *s, int n)
{
    return (int)(rng_splitmix(s) % (uint64_t)n);
}

static device *make_device(device_kind kind, size_t budget, double link_gbps)
{
    device_options o = {.kind = kind, .budget_bytes = budget, .threads = 1, .link_gbps = link_gbps};
    device *d = NULL;
    ck_assert_msg(device_create(&o, &d) == VDNN_OK, "device_create (%zu bytes): %s", budget, vdnn_errmsg());
    return d;
}

/* Room for any plan of n: four times the bound with the largest workspaces. */
static size_t roomy_budget(net *n)
{
    int saved[64][PASS_COUNT];
    mem_policy p = n->policy;
    algo_mode a = n->algo;
    ck_assert_int_le(n->nlayers, 64);
    for (int i = 0; i < n->nlayers; i++) memcpy(saved[i], n->layers[i]->algo, sizeof saved[i]);
    ck_assert_int_eq(net_plan(n, p, ALGO_PERF), VDNN_OK);   /* unattached: largest workspaces */
    size_t b = 4 * net_train_bytes_bound(n) + (1 << 16);
    for (int i = 0; i < n->nlayers; i++) memcpy(n->layers[i]->algo, saved[i], sizeof saved[i]);
    n->policy = p;
    n->algo = a;
    return b;
}

/* Pins every convolution's algorithms to the ones chosen now, so that planning the
 * same net again on another device (perf measures again) keeps them. */
static void pin_algos(net *n)
{
    for (int i = 0; i < n->nlayers; i++)
        if (n->layers[i]->ops->algo_count)
            memcpy(n->layers[i]->algo_pinned, n->layers[i]->algo, sizeof n->layers[i]->algo);
}

/* A plan: the policy, the mode, the look-ahead (PREFETCH_*), the release lag, the
 * barrier. */
typedef struct plan_cfg {
    mem_policy policy;
    algo_mode algo;
    int ahead;
    int lag;
    int sync;
    int ip;                   /* how in-place layers run, IN_PLACE_* + 1 (net_fit_budget may
                               * choose any); 0: the most in place the net allows */
} plan_cfg;

/* Plans n as pc says. Only min_budget_of() measures (net_plan); later plans of the same
 * net keep the algorithms it pinned without measuring again (net_plan_static). */
static void plan_as(net *n, const plan_cfg *pc, int measure)
{
    vdnn_status st = measure ? net_plan(n, pc->policy, pc->algo) : net_plan_static(n, pc->policy, pc->algo);
    ck_assert_msg(st == VDNN_OK, "net_plan: %s", vdnn_errmsg());
    n->prefetch_ahead = pc->ahead;
    n->release_lag = pc->lag;
    n->sync_layers = pc->sync;
    int most = n->may_in_place ? IN_PLACE_OVER_OUTPUT : IN_PLACE_OFF;
    n->in_place = pc->ip && pc->ip - 1 < most ? pc->ip - 1 : most;
}

/* Plans `n` (unattached on return) on a roomy device and returns its minimum budget;
 * the algorithms chosen are pinned. */
static size_t min_budget_of(net *n, const plan_cfg *pc)
{
    device *big = make_device(DEVICE_CPU, roomy_budget(n), 0);
    ck_assert_int_eq(net_attach(n, big), VDNN_OK);
    plan_as(n, pc, 1);
    size_t m = 0;
    ck_assert_msg(net_min_budget(n, &m) == VDNN_OK, "net_min_budget: %s", vdnn_errmsg());
    ck_assert_uint_gt(m, 0);
    ck_assert_uint_eq(m % POOL_ALIGN, 0);
    pin_algos(n);
    net_detach(n);
    device_destroy(big);
    return m;
}

/* Trains `steps` steps of n (attached, planned) on seeded batches; returns the status
 * of the first failure (its message in vdnn_errmsg()) or VDNN_OK. Losses go to loss[]
 * when non-NULL. */
static vdnn_status train_steps(net *n, int steps, double *loss)
{
    int sim = device_get_kind(n->dev) == DEVICE_SIM;
    for (int k = 0; k < steps; k++) {
        tn_batch b = {0};
        if (!sim) b = tn_batch_make(n, n->minibatch, 100 + (uint64_t)k);
        step_result r;
        vdnn_status st = net_train_step(n, b.x, b.y, n->minibatch, n->train.learning_rate, &r);
        if (!sim) tn_batch_free(&b);
        if (st != VDNN_OK) return st;
        if (loss) loss[k] = r.loss_sum;
    }
    return VDNN_OK;
}

/* The peak of the same steps replayed on a simulated device with `budget`: a clone of
 * n with n's algorithms and plan. The replay must succeed. */
static size_t sim_peak(const net *n, const plan_cfg *pc, size_t budget, int steps)
{
    net *m = NULL;
    ck_assert_msg(net_clone(n, &m) == VDNN_OK, "net_clone: %s", vdnn_errmsg());
    device *d = make_device(DEVICE_SIM, budget, 0);
    m->policy = n->policy;
    ck_assert_int_eq(net_attach(m, d), VDNN_OK);
    for (int i = 0; i < m->nlayers; i++) memcpy(m->layers[i]->algo_pinned, n->layers[i]->algo, sizeof m->layers[i]->algo);
    plan_as(m, pc, 0);
    for (int i = 0; i < m->nlayers; i++)
        ck_assert_msg(!memcmp(m->layers[i]->algo, n->layers[i]->algo, sizeof m->layers[i]->algo),
                      "the clone's %s has other algorithms", m->layers[i]->name);
    for (int j = 0; j <= m->nlayers; j++) ck_assert_int_eq(m->maps[j].offload, n->maps[j].offload);
    vdnn_status st = train_steps(m, steps, NULL);
    ck_assert_msg(st == VDNN_OK, "the simulated replay at %zu bytes fails: %s", budget, vdnn_errmsg());
    size_t peak = pool_peak_bytes(device_pool(d));
    net_free(m);
    device_destroy(d);
    return peak;
}

/* The message names one of n's layers (or the input) and a tensor. */
static void msg_names_layer_and_tensor(const net *n)
{
    const char *msg = vdnn_errmsg();
    ck_assert_msg(strstr(msg, "layer ") && strstr(msg, "tensor "), "message '%s' names no layer and tensor", msg);
    int named = strstr(msg, "layer input") != NULL;
    for (int i = 0; i < n->nlayers && !named; i++) {
        char want[64];
        snprintf(want, sizeof want, "layer %s,", n->layers[i]->name);
        named = strstr(msg, want) != NULL;
    }
    ck_assert_msg(named, "message '%s' names none of the net's layers", msg);
    ck_assert_msg(strstr(msg, "tensor -") == NULL && strstr(msg, "layer -") == NULL, "message '%s' has a blank name",
                  msg);
}

/* Whether one training step of n's plan `pc` fits in `budget` on the simulated device
 * (n's pinned algorithms included). */
static int sim_fits(const net *n, const plan_cfg *pc, size_t budget)
{
    net *m = NULL;
    ck_assert_msg(net_clone(n, &m) == VDNN_OK, "net_clone: %s", vdnn_errmsg());
    device *d = make_device(DEVICE_SIM, budget, 0);
    for (int i = 0; i < m->nlayers; i++) memcpy(m->layers[i]->algo_pinned, n->layers[i]->algo_pinned, sizeof m->layers[i]->algo_pinned);
    vdnn_status st = net_attach(m, d);
    if (st == VDNN_OK) {
        plan_as(m, pc, 0);
        st = train_steps(m, 1, NULL);
    }
    ck_assert_msg(st == VDNN_OK || st == VDNN_EBUDGET, "the replay at %zu bytes fails otherwise: %s", budget,
                  vdnn_errmsg());
    net_free(m);
    device_destroy(d);
    return st == VDNN_OK;
}

/* ---- the exact minimum ---- */

static const plan_cfg all_plans[] = {
    {POLICY_NONE, ALGO_MEM, PREFETCH_FAR, 1, 0, 0}, {POLICY_ALL, ALGO_MEM, PREFETCH_FAR, 1, 0, 0},  {POLICY_CONV, ALGO_MEM, PREFETCH_FAR, 1, 0, 0},
    {POLICY_NONE, ALGO_PERF, PREFETCH_FAR, 1, 0, 0}, {POLICY_ALL, ALGO_PERF, PREFETCH_FAR, 1, 0, 0}, {POLICY_CONV, ALGO_PERF, PREFETCH_FAR, 1, 0, 0},
    {POLICY_ALL, ALGO_MEM, PREFETCH_ON_DEMAND, 0, 0, 0},  {POLICY_CONV, ALGO_PERF, PREFETCH_ON_DEMAND, 0, 0, 0}, {POLICY_ALL, ALGO_MEM, PREFETCH_FAR, 1, 1, 0},
    {POLICY_ALL, ALGO_MEM, PREFETCH_FAR, 1, 0, IN_PLACE_OFF + 1}, {POLICY_CONV, ALGO_MEM, PREFETCH_NEXT, 1, 0, IN_PLACE_OVER_GRAD + 1},
};
#define NPLANS ((int)(sizeof all_plans / sizeof *all_plans))

/* One net under one plan at its minimum M: trains, peak <= M and equal to the replay's;
 * M - 256 fails cleanly (on the CPU device and in the replay). */
static void check_min_budget(const char *text, int which, const plan_cfg *pc)
{
    char what[128];
    snprintf(what, sizeof what, "net %d, policy %s, %s algorithms, %s prefetch%s", which, policy_name(pc->policy),
             algo_mode_name(pc->algo), pc->ahead == PREFETCH_FAR ? "far" : pc->ahead == PREFETCH_NEXT ? "next" : "on-demand",
             pc->sync ? ", barrier" : "");
    net *n = tn_parse(text, NULL);
    size_t m = min_budget_of(n, pc);
    /* the estimate holds with the smallest workspaces (net.h); the fastest, measured, can
     * be large and of mixed sizes, and need more */
    if (pc->algo == ALGO_MEM)
        ck_assert_msg(m <= net_train_bytes_bound(n) + POOL_ALIGN, "%s: minimum %zu above the estimate %zu", what, m,
                      net_train_bytes_bound(n));

    /* at M, with a slow link on one of them so that frees really are pending */
    device *d = make_device(DEVICE_CPU, m, which % 2 ? 0.5 : 0);
    ck_assert_int_eq(net_attach(n, d), VDNN_OK);
    plan_as(n, pc, 0);
    vdnn_status st = train_steps(n, 2, NULL);
    ck_assert_msg(st == VDNN_OK, "%s: training at the minimum budget %zu fails: %s", what, m, vdnn_errmsg());
    size_t peak = pool_peak_bytes(device_pool(d));
    ck_assert_msg(peak <= m, "%s: pool peak %zu above the budget %zu", what, peak, m);
    ck_assert_uint_eq(peak, n->peak_iter_bytes);
    size_t sim = sim_peak(n, pc, m, 2);
    ck_assert_msg(peak == sim, "%s: the CPU device peaks at %zu, the simulated replay at %zu (budget %zu)", what, peak,
                  sim, m);
    /* net.h: the iteration fits in exactly the budgets >= M, and a real device reaches
     * the same pool state: its frontier reaches M itself */
    ck_assert_msg(pool_frontier_peak(device_pool(d)) == m, "%s: the CPU device's frontier peaks at %zu, minimum %zu",
                  what, pool_frontier_peak(device_pool(d)), m);
    /* every budget above the minimum fits too: ~30 of them up to twice it, on the
     * simulated device (test_budget_monotonic scans densely) */
    size_t step = m / 30 / POOL_ALIGN * POOL_ALIGN;
    for (size_t b = m + POOL_ALIGN; b <= 2 * m; b += step > POOL_ALIGN ? step : POOL_ALIGN)
        ck_assert_msg(sim_fits(n, pc, b), "%s: the minimum is %zu but %zu bytes do not fit", what, m, b);
    net_detach(n);
    ck_assert_uint_eq(pool_used_bytes(device_pool(d)), 0);
    device_destroy(d);

    /* at M - 256 */
    d = make_device(DEVICE_CPU, m - POOL_ALIGN, 0);
    st = net_attach(n, d);
    if (st == VDNN_OK) {
        plan_as(n, pc, 0);
        st = train_steps(n, 2, NULL);
    }
    ck_assert_msg(st == VDNN_EBUDGET, "%s: at %zu bytes (the minimum less 256) the step returns %d, not VDNN_EBUDGET",
                  what, m - POOL_ALIGN, (int)st);
    msg_names_layer_and_tensor(n);
    ck_assert_msg(strstr(vdnn_errmsg(), "device budget exceeded") != NULL, "%s", vdnn_errmsg());
    pool_stats ps;
    pool_get_stats(device_pool(d), &ps);
    ck_assert_uint_ge(ps.failures, 1);
    ck_assert_uint_le(ps.peak_bytes, m - POOL_ALIGN);
    for (int j = 0; n->maps && j <= n->nlayers; j++) ck_assert_int_eq(n->maps[j].state, RES_NONE);
    net_detach(n);
    ck_assert_msg(pool_used_bytes(device_pool(d)) == 0, "%s: %zu bytes still allocated after detaching", what,
                  pool_used_bytes(device_pool(d)));
    /* the device is still usable: the same net fits again once it is smaller (with the
     * smallest workspaces: the largest at one item can be larger than at the whole batch,
     * as oneDNN's Winograd's are on CPUs that have it) */
    net_overrides ov = net_no_overrides();
    ov.batch = 1;
    net *small = tn_parse(text, &ov);
    ck_assert_int_eq(net_attach(small, d), VDNN_OK);
    plan_cfg small_pc = *pc;
    small_pc.algo = ALGO_MEM;
    plan_as(small, &small_pc, 0);
    ck_assert_msg(train_steps(small, 1, NULL) == VDNN_OK, "%s: batch 1 after the failure: %s", what, vdnn_errmsg());
    net_free(small);
    net_free(n);
    device_destroy(d);
}

START_TEST(test_min_budget_exact)
{
    for (int p = 0; p < NPLANS; p++) check_min_budget(budget_nets[_i], _i, &all_plans[p]);
}
END_TEST

/* Offloading lowers the minimum where maps dominate (the table `vdnn info` prints: the
 * least of every copy timing, with in-place layers and without, never above on-demand
 * prefetch with memory reused at once). */
START_TEST(test_min_budget_order)
{
    net *n = tn_parse(NET_WIDE, NULL);
    size_t none, conv, all;
    plan_cfg pc = {POLICY_NONE, ALGO_MEM, PREFETCH_ON_DEMAND, 0, 0, 0};
    none = min_budget_of(n, &pc);
    pc.policy = POLICY_CONV;
    conv = min_budget_of(n, &pc);
    pc.policy = POLICY_ALL;
    all = min_budget_of(n, &pc);
    size_t t[POLICY_COUNT][ALGO_MODE_COUNT];
    ck_assert_int_eq(net_budget_table(n, t), VDNN_OK);
    ck_assert_uint_le(t[POLICY_NONE][ALGO_MEM], none);
    ck_assert_uint_le(t[POLICY_CONV][ALGO_MEM], conv);
    ck_assert_uint_le(t[POLICY_ALL][ALGO_MEM], all);
    none = t[POLICY_NONE][ALGO_MEM], conv = t[POLICY_CONV][ALGO_MEM], all = t[POLICY_ALL][ALGO_MEM];
    ck_assert_msg(all < none * 4 / 5 && conv < none * 4 / 5, "minimum budgets: none %zu, conv %zu, all %zu", none,
                  conv, all);
    net_free(n);
}
END_TEST

/* The copy timing is chosen per budget (net_fit_budget): the fastest setting whose
 * minimum fits. From the least minimum of all settings (the table's) up to twice the
 * fastest setting's, every budget gets a setting, and the replay of that setting fits
 * in it (on the simulated device: sizes only). Below the least, nothing fits. */
START_TEST(test_fit_budget)
{
    static const struct { const char *text; mem_policy p; } cases[] = {
        {NET_WIDE, POLICY_CONV}, {NET_WIDE, POLICY_ALL}, {NET_A, POLICY_ALL}, {NET_A, POLICY_CONV},
        {NET_B, POLICY_ALL},     {NET_B, POLICY_CONV},
    };
    for (int c = 0; c < (int)(sizeof cases / sizeof *cases); c++) {
        net *n = tn_parse(cases[c].text, NULL);
        plan_cfg frugal = {cases[c].p, ALGO_MEM, PREFETCH_ON_DEMAND, 0, 0, 0};
        plan_cfg fast = {cases[c].p, ALGO_MEM, PREFETCH_FAR, 1, 0, 0};
        size_t lo = min_budget_of(n, &frugal), hi = 2 * min_budget_of(n, &fast), least = 0;
        ck_assert_int_eq(net_least_budget(n, &least), VDNN_OK);
        ck_assert_uint_le(least, lo);
        lo = least;
        size_t step = (hi - lo) / 200 / POOL_ALIGN * POOL_ALIGN;
        if (step < POOL_ALIGN) step = POOL_ALIGN;
        for (size_t b = lo; b <= hi; b += step) {
            size_t need = 0;
            ck_assert_int_eq(net_plan_static(n, cases[c].p, ALGO_MEM), VDNN_OK);
            ck_assert_msg(net_fit_budget(n, b, &need) == VDNN_OK, "case %d: no setting for %zu bytes", c, b);
            ck_assert_uint_le(need, b);
            plan_cfg chosen = {cases[c].p, ALGO_MEM, n->prefetch_ahead, n->release_lag, 0, n->in_place + 1};
            ck_assert_msg(sim_fits(n, &chosen, b), "case %d: the setting chosen for %zu bytes does not fit", c, b);
        }
        size_t need = 0;
        ck_assert_int_eq(net_fit_budget(n, lo - POOL_ALIGN, &need), VDNN_EBUDGET);
        ck_assert_uint_eq(need, lo);
        net_free(n);
    }
}
END_TEST

/* Whether a step fits must grow with the budget (net.h: "the iteration fits in exactly
 * the budgets >= this one"), and a user who gives more than the minimum expects to
 * train. Up to 1000 budgets from the minimum to twice it (256 bytes apart on the
 * smaller nets), on the simulated device (sizes only). The plans are
 * the near look-ahead (the one the minimum table uses) and none. */
START_TEST(test_budget_monotonic)
{
    static const struct { const char *name, *text; mem_policy p; } cases[] = {
        {"NET_WIDE_IM2COL", NET_WIDE_IM2COL, POLICY_CONV}, {"NET_WIDE_IM2COL", NET_WIDE_IM2COL, POLICY_ALL},
        {"NET_WIDE_IM2COL", NET_WIDE_IM2COL, POLICY_NONE}, {"NET_WIDE", NET_WIDE, POLICY_CONV},
        {"NET_A", NET_A, POLICY_ALL}, {"NET_B", NET_B, POLICY_ALL}, {"NET_C", NET_C, POLICY_CONV},
    };
    const int ncases = (int)(sizeof cases / sizeof *cases);
    char report[2048] = "";
    for (int c = 0; c < ncases; c++) {
        net *n = tn_parse(cases[c].text, NULL);
        plan_cfg pc = {cases[c].p, ALGO_MEM, PREFETCH_ON_DEMAND, 0, 0, 0};
        size_t m = min_budget_of(n, &pc), first_fail = 0, last_fail = 0, fails = 0, tried = 0;
        size_t step = m / 1000 / POOL_ALIGN * POOL_ALIGN;
        if (step < POOL_ALIGN) step = POOL_ALIGN;
        for (size_t b = m; b <= 2 * m; b += step, tried++)
            if (!sim_fits(n, &pc, b)) {
                if (!first_fail) first_fail = b;
                last_fail = b;
                fails++;
            }
        if (fails) {
            size_t len = strlen(report);
            snprintf(report + len, sizeof report - len,
                     "\n  %s, policy %s, mem algorithms, near look-ahead: minimum %zu, but %zu of %zu budgets in "
                     "[%zu, %zu] fail, from %zu to %zu",
                     cases[c].name, policy_name(cases[c].p), m, fails, tried, m, 2 * m, first_fail, last_fail);
        }
        net_free(n);
    }
    ck_assert_msg(report[0] == 0, "a larger budget does not fit where a smaller one does:%s", report);
}
END_TEST

/* ---- the CLI ---- */

static const char *vdnn_bin(void)
{
    const char *b = getenv("VDNN_BIN");
    return b && *b ? b : "build/vdnn";
}

typedef struct cli_run {
    int status;
    char *out, *err;
} cli_run;

/* Runs `vdnn ARGS` (shell text); stdout and stderr are kept. */
static cli_run run_cli(const char *args)
{
    char outf[512], errf[512], cmd[4096];
    tn_join(outf, sizeof outf, tn_dir, "stdout.txt");
    tn_join(errf, sizeof errf, tn_dir, "stderr.txt");
    snprintf(cmd, sizeof cmd, "%s %s >%s 2>%s", vdnn_bin(), args, outf, errf);
    int w = system(cmd);
    cli_run r = {WIFEXITED(w) ? WEXITSTATUS(w) : 255, tn_read(outf, NULL), tn_read(errf, NULL)};
    ck_assert_msg(r.out && r.err, "`%s` left no output files", cmd);
    ck_assert_msg(r.status < 128 && WIFEXITED(w), "`vdnn %s` died (status %d); stderr:\n%s", args, r.status, r.err);
    return r;
}

static void run_free(cli_run *r)
{
    free(r->out);
    free(r->err);
}

/* The table `vdnn info` and the budget error show, computed as they compute it (perf
 * with the largest workspaces, before any measurement). */
static void budget_table(const char *cfg, size_t t[POLICY_COUNT][ALGO_MODE_COUNT])
{
    net_overrides ov = net_no_overrides();
    net *n = NULL;
    ck_assert_msg(net_load(cfg, &ov, &n) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_int_eq(net_plan(n, n->policy, ALGO_PERF), VDNN_OK);
    ck_assert_msg(net_budget_table(n, t) == VDNN_OK, "%s", vdnn_errmsg());
    net_free(n);
}

START_TEST(test_cli_budget_below_minimum)
{
    char cfg[512], args[1200];
    tn_join(cfg, sizeof cfg, tn_dir, "wide.cfg");
    tn_write_text(cfg, NET_WIDE);
    size_t t[POLICY_COUNT][ALGO_MODE_COUNT];
    budget_table(cfg, t);
    /* enough for all/mem, below what none needs with any algorithms */
    size_t budget = t[POLICY_ALL][ALGO_MEM];
    ck_assert_msg(budget < t[POLICY_NONE][ALGO_MEM], "all/mem %zu, none/mem %zu", budget, t[POLICY_NONE][ALGO_MEM]);
    snprintf(args, sizeof args, "train %s --budget %zu --policy none --steps 1 --quiet --threads 1", cfg, budget);
    cli_run r = run_cli(args);
    ck_assert_msg(r.status == 1, "`vdnn %s` exited %d; stderr:\n%s", args, r.status, r.err);
    ck_assert_msg(!strncmp(r.err, "vdnn: budget", 12), "stderr does not start with 'vdnn: budget':\n%s", r.err);
    static const char *want[] = {"none/perf", "conv/perf", "all/perf", "none/mem", "conv/mem", "all/mem", "--policy"};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++)
        ck_assert_msg(strstr(r.err, want[k]) != NULL, "stderr lacks '%s':\n%s", want[k], r.err);
    ck_assert_msg(strchr(r.err, '\n') == r.err + strlen(r.err) - 1, "stderr is not one line:\n%s", r.err);
    ck_assert_msg(r.out[0] == 0, "stdout is not empty:\n%s", r.out);
    run_free(&r);

    /* the suggestion is taken: all/mem at exactly its minimum trains */
    snprintf(args, sizeof args, "train %s --budget %zu --policy all --algo mem --steps 2 --quiet --threads 1", cfg,
             budget);
    r = run_cli(args);
    ck_assert_msg(r.status == 0, "`vdnn %s` exited %d; stderr:\n%s", args, r.status, r.err);
    run_free(&r);
}
END_TEST

/* The refusal's advice comes from the planner and its minimums are info's: after a
 * refusal has measured the net's profile, `info` (same device, threads) labels perf as
 * measured, predicts a step per policy, and prints exactly the refusal's figures; the
 * refusal names the faster of its two candidates with its predicted step. */
START_TEST(test_cli_refusal_matches_info)
{
    char cfg[512], args[1200], cache[600];
    tn_join(cfg, sizeof cfg, tn_dir, "wide.cfg");
    tn_write_text(cfg, NET_WIDE);
    tn_join(cache, sizeof cache, tn_dir, "cache");
    setenv("VDNN_CACHE", cache, 1);
    size_t t[POLICY_COUNT][ALGO_MODE_COUNT];
    budget_table(cfg, t);
    snprintf(args, sizeof args, "train %s --budget %zu --policy none --steps 1 --quiet --threads 1", cfg,
             t[POLICY_ALL][ALGO_MEM]);
    cli_run r = run_cli(args);
    ck_assert_msg(r.status == 1, "`vdnn %s` exited %d; stderr:\n%s", args, r.status, r.err);
    static const char *const want[] = {"perf: the fastest algorithms measured on this device",
                                       "the fastest that fits: --policy ", " ms a step", "from the profile measured"};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++)
        ck_assert_msg(strstr(r.err, want[k]) != NULL, "the refusal lacks '%s':\n%s", want[k], r.err);
    /* the named plan's prediction is the lesser of the two (dyn only when 5% faster) */
    const char *at = strstr(r.err, "the fastest that fits: --policy ");
    int dyn = !strncmp(at + strlen("the fastest that fits: --policy "), "dyn", 3);
    const char *pred = strstr(at, "predicted "), *other = strstr(at, dyn ? "fixed policy, --policy " : "--policy dyn: ");
    ck_assert_msg(pred != NULL, "%s", r.err);
    double a = strtod(pred + strlen("predicted "), NULL);
    if (other) {
        double b = strtod(strchr(other, ':') + 1, NULL);
        ck_assert_msg(dyn ? a < 0.95 * b : a <= b / 0.95 + 0.05, "advised %s at %.1f ms against %.1f ms:\n%s",
                      dyn ? "dyn" : "a fixed policy", a, b, r.err);
    }
    snprintf(args, sizeof args, "info %s --threads 1", cfg);
    cli_run i = run_cli(args);
    ck_assert_msg(i.status == 0, "`vdnn %s` exited %d; stderr:\n%s", args, i.status, i.err);
    ck_assert_msg(strstr(i.out, "from the profile") && strstr(i.out, "step perf / mem"),
                  "info does not use the measured profile:\n%s", i.out);
    for (int p = 0; p < POLICY_COUNT; p++) {
        char row[32], v[2][32], u[2][8], pair[96];
        snprintf(row, sizeof row, "\n  %s ", policy_name((mem_policy)p));
        const char *line = strstr(i.out, row);
        ck_assert_msg(line != NULL, "no row for %s in:\n%s", policy_name((mem_policy)p), i.out);
        ck_assert_int_eq(sscanf(line + strlen(row), "%31s %7s %31s %7s", v[0], u[0], v[1], u[1]), 4);
        for (int m = 0; m < 2; m++) {
            snprintf(pair, sizeof pair, " %s/%s %s %s", policy_name((mem_policy)p), m ? "mem" : "perf", v[m], u[m]);
            ck_assert_msg(strstr(r.err, pair) != NULL, "info's%s is not in the refusal:\n%s\ninfo:\n%s", pair, r.err,
                          i.out);
        }
    }
    run_free(&i);
    snprintf(args, sizeof args, "info %s --threads 1 --json", cfg);
    i = run_cli(args);
    ck_assert_msg(i.status == 0, "`vdnn %s` exited %d; stderr:\n%s", args, i.status, i.err);
    json_t *info = tj_parse(i.out, args);
    ck_assert_msg(json_is_true(tj_get(info, "perf_measured")), "perf_measured is not true:\n%s", i.out);
    for (int p = 0; p < POLICY_COUNT; p++) {
        char key[64];
        snprintf(key, sizeof key, "predicted_step_ms.%s.perf", policy_name((mem_policy)p));
        ck_assert_msg(tj_num(info, key) > 0, "%s is not a time:\n%s", key, i.out);
    }
    json_decref(info);
    run_free(&i);
    run_free(&r);
}
END_TEST

START_TEST(test_cli_info_budgets)
{
    char cfg[512], args[1200];
    tn_join(cfg, sizeof cfg, tn_dir, "b.cfg");
    tn_write_text(cfg, NET_B);
    size_t t[POLICY_COUNT][ALGO_MODE_COUNT];
    budget_table(cfg, t);

    snprintf(args, sizeof args, "info %s", cfg);
    cli_run r = run_cli(args);
    ck_assert_msg(r.status == 0, "`vdnn %s` exited %d; stderr:\n%s", args, r.status, r.err);
    const char *table = strstr(r.out, "minimum budget");
    ck_assert_msg(table != NULL, "no 'minimum budget' in:\n%s", r.out);
    for (int p = 0; p < POLICY_COUNT; p++) {
        char row[32];
        snprintf(row, sizeof row, "\n  %s ", policy_name((mem_policy)p));
        ck_assert_msg(strstr(table, row) != NULL, "no row for policy %s in:\n%s", policy_name((mem_policy)p), table);
    }
    run_free(&r);

    snprintf(args, sizeof args, "info %s --json", cfg);
    r = run_cli(args);
    ck_assert_msg(r.status == 0, "`vdnn %s` exited %d; stderr:\n%s", args, r.status, r.err);
    json_t *info = tj_parse(r.out, args);
    for (int p = 0; p < POLICY_COUNT; p++) {
        char perf[64], mem[64];
        snprintf(perf, sizeof perf, "min_budget_bytes.%s.perf", policy_name((mem_policy)p));
        snprintf(mem, sizeof mem, "min_budget_bytes.%s.mem", policy_name((mem_policy)p));
        ck_assert_uint_eq((size_t)tj_int(info, perf), t[p][ALGO_PERF]);
        ck_assert_uint_eq((size_t)tj_int(info, mem), t[p][ALGO_MEM]);
    }
    json_decref(info);
    if (system("command -v python3 >/dev/null 2>&1") == 0) {
        char out[600], cmd[800];
        tn_join(out, sizeof out, tn_dir, "info.json");
        tn_write_text(out, r.out);
        snprintf(cmd, sizeof cmd, "python3 -c 'import json,sys; json.load(open(sys.argv[1]))[\"min_budget_bytes\"]' '%s'",
                 out);
        ck_assert_msg(system(cmd) == 0, "python3 cannot read the JSON:\n%s", r.out);
    }
    run_free(&r);
}
END_TEST

/* ---- randomized stress ---- */

#define NCHAINS 60

/* Appends printf-style text to a buffer of `cap` bytes. */
static void put(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void put(char *buf, size_t cap, const char *fmt, ...)
{
    size_t len = strlen(buf);
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
    ck_assert_msg(k >= 0 && (size_t)k < cap - len, "config text too long");
}

/* Whether a layer type's backward reads its input / output (docs/config.md). */
static int reads_input(const char *type)
{
    return !strcmp(type, "convolutional") || !strcmp(type, "maxpool") || !strcmp(type, "connected") ||
           !strcmp(type, "batchnorm") || !strcmp(type, "lrn");
}

static int reads_output(const char *type)
{
    return !strcmp(type, "relu") || !strcmp(type, "leaky") || !strcmp(type, "tanh") || !strcmp(type, "sigmoid") ||
           !strcmp(type, "lrn") || !strcmp(type, "softmax");
}

/* A map a random net has made so far: its layer's name and its shape. */
typedef struct rmap {
    char name[16];
    int c, h, w;
} rmap;

/* A branch off an earlier map of the current height and width, rejoined by [add] (when
 * the shapes allow) or [concat]: 1-2 layers that keep the height and width, the first
 * reading the earlier map by name, then the join reading the current map by -k. Every
 * map it makes is read, so the net has no dead end; no layer of it pins an offload, so
 * no two readers of a map disagree. Returns the layers written; *cur is the join. */
static int random_branch(uint64_t *s, char *buf, size_t cap, rmap *maps, int *nmaps, int *cur, int index)
{
    static const char *types[] = {"convolutional", "convolutional", "relu", "tanh", "batchnorm", "dropout",
                                  "maxpool", "lrn", "leaky"};
    int cand[64], ncand = 0;
    for (int m = 0; m < *nmaps && ncand < 64; m++)
        if (maps[m].h == maps[*cur].h && maps[m].w == maps[*cur].w) cand[ncand++] = m;
    rmap b = maps[cand[pick(s, ncand)]];
    int len = 1 + pick(s, 2), written = 0;
    for (int k = 0; k < len; k++, written++) {
        const char *type = types[pick(s, (int)(sizeof types / sizeof *types))];
        put(buf, cap, "[%s]\nname = n%d\n", type, index + written);
        if (k == 0) put(buf, cap, "input = %s\n", b.name);
        if (!strcmp(type, "convolutional")) {
            int size = pick(s, 2) ? 3 : 1;
            b.c = 1 + pick(s, 5);
            put(buf, cap, "filters = %d\nsize = %d\npad = %d\n", b.c, size, size / 2);
        } else if (!strcmp(type, "maxpool")) {
            put(buf, cap, "size = 3\nstride = 1\npad = 1\n");
        } else if (!strcmp(type, "dropout")) {
            put(buf, cap, "probability = 0.%d\n", pick(s, 6));
        } else if (!strcmp(type, "lrn")) {
            put(buf, cap, "size = %d\n", 1 + 2 * pick(s, 3));
        }
        snprintf(b.name, sizeof b.name, "n%d", index + written);
        maps[(*nmaps)++] = b;
    }
    const rmap *c = &maps[*cur];
    int add = b.c == c->c && pick(s, 2);
    put(buf, cap, "[%s]\nname = n%d\ninput = -%d, %s\n", add ? "add" : "concat", index + written, written + 1, b.name);
    rmap j = {"", add ? b.c : b.c + c->c, b.h, b.w};
    snprintf(j.name, sizeof j.name, "n%d", index + written);
    maps[(*nmaps)++] = j;
    *cur = *nmaps - 1;
    return written + 1;
}

/* A random valid net: small input, 2-8 layers of random types with shapes that stay
 * positive, some of them branches that rejoin (random_branch), then connected +
 * softmax. Each layer of the main line may carry an offload flag (1 only where a
 * backward pass reads its input) and each convolution an algorithm. */
static void random_chain(uint64_t *s, char *buf, size_t cap)
{
    static const char *types[] = {"convolutional", "convolutional", "convolutional", "maxpool", "avgpool",
                                  "relu", "leaky", "tanh", "sigmoid", "batchnorm", "dropout", "lrn", "connected"};
    static const char *algos[] = {"direct", "im2col", "im2col-batch", "im2col-chunk"};
    int c = 1 + pick(s, 4), h = 3 + pick(s, 12), w = 3 + pick(s, 12), classes = 2 + pick(s, 4);
    rmap maps[128] = {{"data", c, h, w}};
    int nmaps = 1, cur = 0, index = 0;
    buf[0] = 0;
    put(buf, cap, "[net]\nbatch = %d\nchannels = %d\nheight = %d\nwidth = %d\n", 2 + pick(s, 8), c, h, w);
    put(buf, cap, "[train]\nepochs = 1\nlearning_rate = 0.02\nmomentum = 0.9\nseed = %d\n", pick(s, 1000));
    put(buf, cap, "[data]\nset = synthetic\ntrain_size = 32\ntest_size = 8\nclasses = %d\n", classes);
    int body = 2 + pick(s, 7);
    const char *prev = NULL;
    for (int i = 0; i <= body; i++) {
        if (i && i < body && pick(s, 4) == 0) {
            index += random_branch(s, buf, cap, maps, &nmaps, &cur, index);
            c = maps[cur].c;
            prev = "add";
            continue;
        }
        const char *type = i == body ? "connected" : types[pick(s, (int)(sizeof types / sizeof *types))];
        int k = 1 + pick(s, 3), stride = 1 + pick(s, 2), pad = pick(s, k);
        if (!strcmp(type, "maxpool") || !strcmp(type, "avgpool") || !strcmp(type, "convolutional")) {
            if (h + 2 * pad < k || w + 2 * pad < k) k = 1, pad = 0;   /* keep the shape positive */
        }
        put(buf, cap, "[%s]\nname = n%d\n", type, index);
        if (pick(s, 4) == 0) put(buf, cap, "input = %s\n", index && pick(s, 2) ? "-1" : maps[cur].name);
        if (!strcmp(type, "convolutional")) {
            c = 1 + pick(s, 6);
            put(buf, cap, "filters = %d\nsize = %d\nstride = %d\npad = %d\n", c, k, stride, pad);
            if (pick(s, 4)) put(buf, cap, "algo = %s\n", algos[pick(s, 4)]);
            else if (pick(s, 2)) put(buf, cap, "algo_fwd = %s\nalgo_bwd_data = %s\nalgo_bwd_filter = %s\n",
                                     algos[pick(s, 4)], algos[pick(s, 4)], algos[pick(s, 4)]);
        } else if (!strcmp(type, "maxpool") || !strcmp(type, "avgpool")) {
            stride = 1 + pick(s, k);
            put(buf, cap, "size = %d\nstride = %d\npad = %d\n", k, stride, pad);
        } else if (!strcmp(type, "leaky")) {
            put(buf, cap, "slope = 0.%d\n", 1 + pick(s, 5));
        } else if (!strcmp(type, "dropout")) {
            put(buf, cap, "probability = 0.%d\n", pick(s, 6));
        } else if (!strcmp(type, "lrn")) {
            put(buf, cap, "size = %d\n", 1 + 2 * pick(s, 3));
        } else if (!strcmp(type, "connected")) {
            c = i == body ? classes : 2 + pick(s, 10);
            put(buf, cap, "output = %d\n", c);
        }
        if (!strcmp(type, "convolutional") || !strcmp(type, "maxpool") || !strcmp(type, "avgpool")) {
            h = (h + 2 * pad - k) / stride + 1;
            w = (w + 2 * pad - k) / stride + 1;
        } else if (!strcmp(type, "connected")) {
            h = w = 1;
        }
        int can = reads_input(type) || (prev && reads_output(prev));
        int flag = pick(s, 3);   /* 0: none, 1: offload = 0, 2: offload = 1 */
        if (flag == 1 || (flag == 2 && !can)) put(buf, cap, "offload = 0\n");
        else if (flag == 2) put(buf, cap, "offload = 1\n");
        prev = type;
        rmap m = {"", c, h, w};
        snprintf(m.name, sizeof m.name, "n%d", index++);
        maps[nmaps++] = m;
        cur = nmaps - 1;
    }
    put(buf, cap, "[softmax]\n");
}

static int planned_maps(const net *n)
{
    int count = 0;
    for (int j = 0; j <= n->nlayers; j++) count += n->maps[j].offload != 0;
    return count;
}

/* Losses and every parameter tensor (values, gradients, momenta), in order. */
typedef struct result {
    double loss[2];
    unsigned char *bytes;
    size_t nbytes;
} result;

static void result_params(result *r, net *n)
{
    for (int i = 0; i < n->nlayers; i++)
        for (int p = 0; p < n->layers[i]->nparams; p++) {
            param *q = &n->layers[i]->params[p];
            const float *t[3] = {q->value, q->grad, q->momentum};
            const float *host[3] = {q->host_value, q->host_grad, q->host_momentum};   /* swapped */
            for (int k = 0; k < (q->trainable ? 3 : 1); k++) {
                size_t count = shape_count(q->shape);
                float *h = host[k] ? malloc(count * sizeof *h) : tn_download(n, t[k], count);
                ck_assert_ptr_nonnull(h);
                if (host[k]) memcpy(h, host[k], count * sizeof *h);
                r->bytes = realloc(r->bytes, r->nbytes + count * sizeof(float) + 1);
                ck_assert_ptr_nonnull(r->bytes);
                memcpy(r->bytes + r->nbytes, h, count * sizeof(float));
                r->nbytes += count * sizeof(float);
                free(h);
            }
        }
}

/* One random chain: random plan and budget in [M, 2M]; 2 steps; peak <= budget and
 * equal to the replay's; bit-identical to everything resident on a roomy device.
 * Returns the bytes it offloaded. */
static uint64_t stress_one(int k, uint64_t *s, int *graph)
{
    char text[16384];
    random_chain(s, text, sizeof text);
    plan_cfg pc = {(mem_policy)pick(s, POLICY_COUNT), ALGO_MEM, pick(s, 3), pick(s, 2), pick(s, 5) == 0, 0};
    pc.ip = (int)pick(s, 4);
    double gbps = pick(s, 3) == 0 ? 1.0 : 0;

    net *n = NULL;
    net_overrides ov = net_no_overrides();
    vdnn_status st = net_parse(text, TN_NAME, &ov, &n);
    ck_assert_msg(st == VDNN_OK, "chain %d does not parse: %s\n%s", k, vdnn_errmsg(), text);
    *graph = !n->chain;
    /* a quarter of the nets in micro-batches, the baseline too: the same sums */
    if (pick(s, 4) == 0 && n->minibatch > 1) {
        ov.micro_batch = 1 + pick(s, n->minibatch - 1);
        net_free(n);
        n = tn_parse(text, &ov);
    }
    n->policy = pc.policy;   /* swap places the parameters when they are attached */
    size_t m = min_budget_of(n, &pc);
    size_t budget = pick(s, 3) == 0 ? m : (m + (size_t)(rng_splitmix(s) % (m + 1))) / POOL_ALIGN * POOL_ALIGN;
    ck_assert_uint_ge(budget, m);
    /* M fits (below), M - 256 fails cleanly, naming a layer and a tensor */
    if (budget == m) {
        ck_assert_msg(!sim_fits(n, &pc, m - 256), "chain %d: fits in %zu, 256 bytes below its minimum\n%s", k, m - 256,
                      text);
        msg_names_layer_and_tensor(n);
    }

    result a = {0}, b = {0};
    device *d = make_device(DEVICE_CPU, budget, gbps);
    ck_assert_int_eq(net_attach(n, d), VDNN_OK);
    plan_as(n, &pc, 0);
    st = train_steps(n, 2, a.loss);
    ck_assert_msg(st == VDNN_OK, "chain %d (policy %s, %s prefetch%s, budget %zu, minimum %zu) fails: %s\n%s", k,
                  policy_name(pc.policy), pc.ahead == PREFETCH_FAR ? "far" : pc.ahead == PREFETCH_NEXT ? "next" : "on-demand", pc.sync ? ", barrier" : "", budget, m,
                  vdnn_errmsg(), text);
    size_t peak = pool_peak_bytes(device_pool(d));
    ck_assert_msg(peak <= budget, "chain %d: peak %zu above the budget %zu\n%s", k, peak, budget, text);
    size_t sim = sim_peak(n, &pc, budget, 2);
    ck_assert_msg(peak == sim, "chain %d: peak %zu, the simulated replay %zu (budget %zu)\n%s", k, peak, sim, budget,
                  text);
    result_params(&a, n);
    uint64_t offloaded = n->stats.offload_bytes;
    ck_assert_uint_eq(n->stats.prefetch_bytes, offloaded);
    net_free(n);
    device_destroy(d);

    /* the baseline: everything resident, the same algorithms (pinned or smallest) */
    n = tn_parse(text, &ov);
    plan_cfg none = {POLICY_NONE, ALGO_MEM, PREFETCH_FAR, 1, 0, 0};
    for (int i = 0; i < n->nlayers; i++) n->layers[i]->offload = -1;
    d = make_device(DEVICE_CPU, roomy_budget(n), 0);
    ck_assert_int_eq(net_attach(n, d), VDNN_OK);
    plan_as(n, &none, 0);
    ck_assert_uint_eq(planned_maps(n), 0);
    st = train_steps(n, 2, b.loss);
    ck_assert_msg(st == VDNN_OK, "chain %d, everything resident: %s\n%s", k, vdnn_errmsg(), text);
    result_params(&b, n);
    net_free(n);
    device_destroy(d);

    for (int i = 0; i < 2; i++)
        ck_assert_msg(!memcmp(&a.loss[i], &b.loss[i], sizeof a.loss[i]),
                      "chain %d (policy %s): step %d loss %.17g, everything resident %.17g\n%s", k,
                      policy_name(pc.policy), i + 1, a.loss[i], b.loss[i], text);
    ck_assert_uint_eq(a.nbytes, b.nbytes);
    ck_assert_msg(!memcmp(a.bytes, b.bytes, a.nbytes), "chain %d (policy %s): the parameters differ\n%s", k,
                  policy_name(pc.policy), text);
    free(a.bytes);
    free(b.bytes);
    return offloaded;
}

START_TEST(test_random_chains)
{
    uint64_t s = 20261121;
    int offloading = 0, graphs = 0;
    for (int k = 0; k < NCHAINS; k++) {
        int graph = 0;
        offloading += stress_one(k, &s, &graph) > 0;
        graphs += graph;
    }
    /* the draw exercises offloading, not just resident training, and graphs */
    ck_assert_msg(offloading >= NCHAINS / 3, "only %d of %d chains offloaded anything", offloading, NCHAINS);
    ck_assert_msg(graphs >= NCHAINS / 4, "only %d of %d nets are graphs", graphs, NCHAINS);
}
END_TEST

static Suite *budget_suite(void)
{
    Suite *s = suite_create("budget");
    TCase *exact = tcase_create("minimum");
    tcase_set_timeout(exact, 120);
    tcase_add_loop_test(exact, test_min_budget_exact, 0, NBUDGET);
    tcase_add_test(exact, test_min_budget_order);
    suite_add_tcase(s, exact);

    TCase *mono = tcase_create("monotonic");
    tcase_set_timeout(mono, 120);
    tcase_add_test(mono, test_fit_budget);
    tcase_add_test(mono, test_budget_monotonic);
    suite_add_tcase(s, mono);

    TCase *cli = tcase_create("cli");
    tcase_add_checked_fixture(cli, tn_dir_setup, tn_dir_teardown);
    tcase_set_timeout(cli, 60);
    tcase_add_test(cli, test_cli_budget_below_minimum);
    tcase_add_test(cli, test_cli_info_budgets);
    tcase_add_test(cli, test_cli_refusal_matches_info);
    suite_add_tcase(s, cli);

    TCase *stress = tcase_create("stress");
    tcase_set_timeout(stress, 120);
    tcase_add_test(stress, test_random_chains);
    suite_add_tcase(s, stress);
    return s;
}

int main(void) { return tn_run_suite(budget_suite()); }
