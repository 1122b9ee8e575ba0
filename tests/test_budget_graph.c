/* Check suite for the budget guarantee on graphs: a budget that `vdnn info` reports as
 * a policy's minimum (net_budget_table), or the planner's smallest plan (plan_least),
 * holds for everything a run asks of the pool, not only the training step the replay
 * was first written for:
 *
 *  - full batches, the smaller last batch of an epoch, and the evaluation of full and
 *    smaller batches all fit, and the pool's high-water mark stays within the budget;
 *  - two nets found by drawing random graphs, where the evaluation (an Inception-style
 *    concat) and a smaller batch (swapped parameters) used to run out mid-run;
 *  - random small graphs (Inception modules, residual blocks, dense blocks, poolings
 *    between them) under every policy at its minimum and dyn at its least plan;
 *  - the shipped graph configs the same way, at batch 2 (the ImageNet nets at 48x48,
 *    without dyn, whose search there takes minutes). */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nets/net.h"
#include "nets/planner/planner.h"
#include "tests/testnet.h"
#include "tests/tsan.h"
#include "vdnn/file.h"
#include "vdnn/rng.h"

#define BG_HEAD(batch, c, hw, classes)                                                      \
    "[net]\nbatch = " #batch "\nchannels = " #c "\nheight = " #hw "\nwidth = " #hw "\n"     \
    "[train]\nepochs = 1\nlearning_rate = 0.01\nmomentum = 0.9\nseed = 1\n"                \
    "[data]\nset = synthetic\ntrain_size = 20\ntest_size = 11\nclasses = " #classes "\n"

/* Four branches of an Inception module concatenated, then a dense block: `info`'s
 * minimum for all (and swap) held the training step but not the evaluation, whose maps
 * are freed after their last reader instead of after an offload, and so fragment the
 * pool differently. */
#define NET_EVAL                                                                          \
    BG_HEAD(8, 1, 12, 4)                                                                  \
    "[convolutional]\nfilters = 8\nsize = 3\npad = 1\n[relu]\nname = n1\n"                \
    "[maxpool]\ninput = n1\nsize = 3\nstride = 1\npad = 1\n"                              \
    "[convolutional]\nfilters = 4\nsize = 1\n[relu]\nname = n2\n"                         \
    "[maxpool]\ninput = n1\nsize = 3\nstride = 1\npad = 1\n"                              \
    "[convolutional]\nfilters = 8\nsize = 1\n[relu]\nname = n3\n"                         \
    "[maxpool]\ninput = n1\nsize = 3\nstride = 1\npad = 1\n"                              \
    "[convolutional]\nfilters = 4\nsize = 1\n[relu]\nname = n4\n"                         \
    "[concat]\ninput = n2, n3, n4\nname = n5\n"                                           \
    "[convolutional]\ninput = n5\nfilters = 4\nsize = 3\npad = 1\n[relu]\nname = n6a\n"   \
    "[concat]\ninput = n5, n6a\nname = n6\n"                                              \
    "[maxpool]\ninput = n6\nsize = 2\nstride = 2\n"                                       \
    "[avgpool]\nsize = 6\nstride = 6\n[connected]\noutput = 4\n[softmax]\n"

/* Two Inception modules around a pooling, under swap: a batch smaller than the net's
 * asked for smaller maps, which first fit placed so that a later gradient found no
 * hole at `info`'s minimum. */
#define NET_PARTIAL                                                                       \
    BG_HEAD(8, 1, 8, 4)                                                                   \
    "[convolutional]\nfilters = 4\nsize = 3\npad = 1\n[relu]\nname = n1\n"                \
    "[maxpool]\ninput = n1\nsize = 3\nstride = 1\npad = 1\n"                              \
    "[convolutional]\nfilters = 6\nsize = 1\n[relu]\nname = n2\n"                         \
    "[maxpool]\ninput = n1\nsize = 3\nstride = 1\npad = 1\n"                              \
    "[convolutional]\nfilters = 4\nsize = 1\n[relu]\nname = n3\n"                         \
    "[convolutional]\ninput = n1\nfilters = 2\nsize = 5\npad = 2\n[relu]\nname = n4\n"    \
    "[concat]\ninput = n2, n3, n4\nname = n5\n"                                           \
    "[maxpool]\ninput = n5\nsize = 2\nstride = 2\nname = n6\n"                            \
    "[convolutional]\ninput = n6\nfilters = 8\nsize = 3\npad = 1\n[relu]\nname = n7\n"    \
    "[convolutional]\ninput = n6\nfilters = 8\nsize = 3\npad = 1\n[relu]\nname = n8\n"    \
    "[convolutional]\ninput = n6\nfilters = 8\nsize = 1\n[relu]\nname = n9\n"             \
    "[concat]\ninput = n7, n8, n9\nname = n10\n"                                          \
    "[avgpool]\ninput = n10\nsize = 4\nstride = 4\n[connected]\noutput = 4\n[softmax]\n"

static device *make_device(size_t budget)
{
    device_options o = {.kind = DEVICE_CPU, .budget_bytes = budget, .threads = 1};
    device *d = NULL;
    ck_assert_msg(device_create(&o, &d) == VDNN_OK, "device_create (%zu bytes): %s", budget, vdnn_errmsg());
    return d;
}

/* Asks of n's pool (attached, planned) what an epoch does: two full training steps,
 * the smaller last batches, then the evaluation of a full and of smaller batches. The
 * check fails, naming `what`, on any error or a peak above the budget. */
static void run_epoch(net *n, size_t budget, const char *what)
{
    int full = n->minibatch, sizes[] = {full, full, full - 1, 1};
    tn_batch b = tn_batch_make(n, full, 7);
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        if (sizes[k] < 1) continue;
        step_result r;
        vdnn_status st = net_train_step(n, b.x, b.y, sizes[k], n->train.learning_rate, &r);
        ck_assert_msg(st == VDNN_OK, "%s: training a batch of %d of %d at %zu bytes: %s", what, sizes[k], full,
                      budget, vdnn_errmsg());
    }
    int eval[] = {n->input.n, n->input.n - 1, 1};
    for (size_t k = 0; k < sizeof eval / sizeof *eval; k++) {
        if (eval[k] < 1) continue;
        step_result r = {0};
        vdnn_status st = net_eval_batch(n, b.x, b.y, eval[k], &r);
        ck_assert_msg(st == VDNN_OK, "%s: evaluating a batch of %d at %zu bytes: %s", what, eval[k], budget,
                      vdnn_errmsg());
    }
    size_t peak = pool_peak_bytes(device_pool(n->dev));
    ck_assert_msg(peak <= budget, "%s: pool peak %zu above the budget %zu", what, peak, budget);
    tn_batch_free(&b);
}

/* A fixed policy at `budget` as `vdnn train --policy P --algo mem --budget B` plans it,
 * then an epoch. */
static void policy_epoch(const char *text, const net_overrides *ov, mem_policy p, size_t budget, const char *what)
{
    net *n = tn_parse(text, ov);
    n->policy = p;   /* swap places the parameters when they are attached */
    n->algo = ALGO_MEM;
    device *d = make_device(budget);
    vdnn_status st = net_attach(n, d);
    size_t need = 0;
    if (st == VDNN_OK) st = net_plan(n, p, ALGO_MEM);
    if (st == VDNN_OK) st = net_fit_budget(n, budget, &need);
    ck_assert_msg(st == VDNN_OK, "%s, policy %s: planning at its minimum %zu: %s (needs %zu)", what, policy_name(p),
                  budget, vdnn_errmsg(), need);
    char label[160];
    snprintf(label, sizeof label, "%s, policy %s", what, policy_name(p));
    run_epoch(n, budget, label);
    tn_free(n, d);
}

/* Every fixed policy at the minimum `info` reports for it with memory-optimal
 * algorithms (the choice that does not depend on timing). */
static void every_policy(const char *text, const net_overrides *ov, const char *what)
{
    net *n = tn_parse(text, ov);
    size_t table[POLICY_COUNT][ALGO_MODE_COUNT];
    ck_assert_msg(net_plan(n, n->policy, ALGO_PERF) == VDNN_OK && net_budget_table(n, table) == VDNN_OK,
                  "%s: the budget table: %s", what, vdnn_errmsg());
    net_free(n);
    for (int p = 0; p < POLICY_COUNT; p++) policy_epoch(text, ov, (mem_policy)p, table[p][ALGO_MEM], what);
}

/* The planner's smallest plan, at exactly the budget `info` reports for dyn, placed as
 * the simulator places it (swaps before attaching), then an epoch. Costs are all zero:
 * the plan's memory does not depend on them. */
static void dyn_least(const char *text, const net_overrides *ov, const char *what)
{
    net *n = tn_parse(text, ov);
    size_t least = 0;
    ck_assert_msg(plan_least(n, &least) == VDNN_OK, "%s: plan_least: %s", what, vdnn_errmsg());
    profile pr = {.nlayers = n->nlayers, .batch = n->input.n, .h2d_bytes_per_s = 1e9, .d2h_bytes_per_s = 1e9};
    pr.layers = calloc((size_t)n->nlayers, sizeof *pr.layers);
    ck_assert_ptr_nonnull(pr.layers);
    plan p;
    ck_assert_msg(plan_search(n, &pr, least, SEARCH_BB, (search_limits){.nodes = 2000, .seconds = 5}, &p, NULL) == VDNN_OK,
                  "%s: no plan in dyn's least budget %zu: %s", what, least, vdnn_errmsg());
    free(pr.layers);
    for (int i = 0; i < n->nlayers; i++) n->layers[i]->swap = p.swap[i];
    n->policy = POLICY_NONE;
    device *d = make_device(least);
    vdnn_status st = net_attach(n, d);
    if (st == VDNN_OK) st = plan_apply(n, &p);
    ck_assert_msg(st == VDNN_OK, "%s: dyn's plan at %zu bytes: %s", what, least, vdnn_errmsg());
    char label[160];
    snprintf(label, sizeof label, "%s, dyn's least plan", what);
    run_epoch(n, least, label);
    plan_free(&p);
    tn_free(n, d);
}

START_TEST(test_evaluation_fits)
{
    net_overrides ov = net_no_overrides();
    net *n = tn_parse(NET_EVAL, &ov);
    size_t table[POLICY_COUNT][ALGO_MODE_COUNT];
    ck_assert_int_eq(net_budget_table(n, table), VDNN_OK);
    net_free(n);
    policy_epoch(NET_EVAL, &ov, POLICY_ALL, table[POLICY_ALL][ALGO_MEM], "the Inception-style net");
    policy_epoch(NET_EVAL, &ov, POLICY_SWAP, table[POLICY_SWAP][ALGO_MEM], "the Inception-style net");
}
END_TEST

START_TEST(test_smaller_batch_fits)
{
    net_overrides ov = net_no_overrides();
    every_policy(NET_PARTIAL, &ov, "the two-Inception net");
}
END_TEST

/* ---- random graphs ---- */

static int pick(uint64_t *s, int n)
{
    return (int)(rng_splitmix(s) % (uint64_t)n);
}

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

/* An Inception module: 2-4 branches off map `from` (a 1x1, 3x3 or 5x5 convolution, or
 * a 3x3 max pool then a 1x1), concatenated into map n<id>. */
static void inception(uint64_t *s, char *buf, size_t cap, int from, int *id)
{
    int first = *id, branches = 2 + pick(s, 3);
    for (int b = 0; b < branches; b++, (*id)++) {
        int filters = 2 + 2 * pick(s, 4), k = 1 + 2 * pick(s, 3);
        if (pick(s, 10) < 3)
            put(buf, cap, "[maxpool]\ninput = n%d\nsize = 3\nstride = 1\npad = 1\n"
                "[convolutional]\nfilters = %d\nsize = 1\n[relu]\nname = n%d\n", from, filters, *id);
        else
            put(buf, cap, "[convolutional]\ninput = n%d\nfilters = %d\nsize = %d\npad = %d\n[relu]\nname = n%d\n",
                from, filters, k, k / 2, *id);
    }
    put(buf, cap, "[concat]\nname = n%d\ninput = n%d", *id, first);
    for (int b = first + 1; b < *id; b++) put(buf, cap, ", n%d", b);
    put(buf, cap, "\n");
}

/* A random graph: a stem, 1-3 blocks (Inception module, residual block with a 1x1
 * projection, or a dense block's concat of its input and a new map), some followed by
 * a 2x2 max pool, then a global average pool, a connected layer and softmax. */
static void random_graph(uint64_t *s, char *buf, size_t cap)
{
    static const int sides[] = {8, 12, 16};
    int hw = sides[pick(s, 3)], id = 1;
    buf[0] = 0;
    put(buf, cap, "[net]\nbatch = %d\nchannels = %d\nheight = %d\nwidth = %d\n", 4 + 2 * pick(s, 3),
        pick(s, 2) ? 3 : 1, hw, hw);
    put(buf, cap, "[train]\nepochs = 1\nlearning_rate = 0.01\nmomentum = 0.9\nseed = %d\n", 1 + pick(s, 100));
    put(buf, cap, "[data]\nset = synthetic\ntrain_size = 20\ntest_size = 11\nclasses = 4\n");
    put(buf, cap, "[convolutional]\nfilters = %d\nsize = 3\npad = 1\n[relu]\nname = n1\n", 4 + 4 * pick(s, 3));
    int cur = id++;
    for (int blocks = 1 + pick(s, 3); blocks > 0; blocks--) {
        int kind = pick(s, 3);
        if (kind == 0) {
            inception(s, buf, cap, cur, &id);
        } else if (kind == 1) {
            put(buf, cap, "[convolutional]\ninput = n%d\nfilters = 8\nsize = 3\npad = 1\n[relu]\n"
                "[convolutional]\nfilters = 8\nsize = 3\npad = 1\nname = n%da\n"
                "[convolutional]\ninput = n%d\nfilters = 8\nsize = 1\nname = n%db\n"
                "[add]\ninput = n%da, n%db\n[relu]\nname = n%d\n", cur, id, cur, id, id, id, id);
        } else {
            put(buf, cap, "[convolutional]\ninput = n%d\nfilters = 4\nsize = 3\npad = 1\n[relu]\nname = n%da\n"
                "[concat]\ninput = n%d, n%da\nname = n%d\n", cur, id, cur, id, id);
        }
        cur = id++;
        if (hw >= 8 && pick(s, 10) < 4) {
            put(buf, cap, "[maxpool]\ninput = n%d\nsize = 2\nstride = 2\nname = n%d\n", cur, id);
            cur = id++;
            hw /= 2;
        }
    }
    put(buf, cap, "[avgpool]\ninput = n%d\nsize = %d\nstride = %d\n[connected]\noutput = 4\n[softmax]\n", cur, hw, hw);
}

/* Under the sanitizers, where a step runs 10 to 50 times slower, fewer graphs. */
#define NGRAPHS (UNDER_SANITIZER ? 6 : 24)

START_TEST(test_random_graphs)
{
    uint64_t s = 20261125 + (uint64_t)_i;
    char text[16384], what[64];
    random_graph(&s, text, sizeof text);
    snprintf(what, sizeof what, "random graph %d", _i);
    net_overrides ov = net_no_overrides();
    every_policy(text, &ov, what);
    dyn_least(text, &ov, what);
}
END_TEST

/* ---- the shipped graphs ---- */

/* heavy: tens of seconds here (the budget table replays the net 40 times), ten times
 * that under a sanitizer, where the light ones check the same code. */
static const struct {
    const char *cfg;
    int imagenet, heavy;
} shipped[] = {
    {"configs/resnet20.cfg", 0, 0}, {"configs/resnet-fmnist.cfg", 0, 0}, {"configs/densenet40.cfg", 0, 1},
    {"configs/googlenet.cfg", 1, 1}, {"configs/resnet50.cfg", 1, 1},
};

START_TEST(test_shipped_graphs)
{
    if (UNDER_SANITIZER && shipped[_i].heavy) {
        printf("SKIPPED: test_shipped_graphs %s under a sanitizer (minutes there; make test runs it)\n",
               shipped[_i].cfg);
        return;
    }
    size_t len = 0;
    char *text = tn_read(shipped[_i].cfg, &len);
    ck_assert_msg(text != NULL, "%s cannot be read", shipped[_i].cfg);
    if (shipped[_i].imagenet) text = tn_imagenet_48(text);
    net_overrides ov = net_no_overrides();
    ov.batch = 2;
    every_policy(text, &ov, shipped[_i].cfg);
    if (!shipped[_i].imagenet) dyn_least(text, &ov, shipped[_i].cfg);
    free(text);
}
END_TEST

static Suite *budget_graph_suite(void)
{
    Suite *s = suite_create("budget_graph");
    TCase *fixed = tcase_create("regressions");
    tcase_set_timeout(fixed, 120);
    tcase_add_test(fixed, test_evaluation_fits);
    tcase_add_test(fixed, test_smaller_batch_fits);
    suite_add_tcase(s, fixed);

    TCase *random = tcase_create("random");
    tcase_set_timeout(random, 300);
    tcase_add_loop_test(random, test_random_graphs, 0, NGRAPHS);
    suite_add_tcase(s, random);

    TCase *ship = tcase_create("shipped");
    tcase_set_timeout(ship, 900);
    tcase_add_loop_test(ship, test_shipped_graphs, 0, (int)(sizeof shipped / sizeof *shipped));
    suite_add_tcase(s, ship);
    return s;
}

int main(void)
{
    return tn_run_suite(budget_graph_suite());
}
