/* Check suite for what goes beyond vDNN: recomputation, parameter swapping and
 * micro-batching, and the planner choosing them.
 *
 * Recomputation and swapping must leave training bit for bit as it is with
 * everything resident (same algorithms): every layer type that can be recomputed is,
 * dropout included (its mask comes back the same). A net whose parameters alone
 * exceed the budget trains with them swapped, and the pool never passes the budget.
 * Micro-batching matches the whole batch within MICRO_TOLERANCE (the sums of the
 * gradients are taken in another order); with batch norm the statistics are those of
 * each micro-batch, and the running estimates are updated once per micro-batch. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nets/planner/planner.h"
#include "tests/testnet.h"
#include "vdnn/rng.h"

#define MICRO_TOLERANCE 1e-4

#define HEAD                                                                                   \
    "[net]\nbatch = 8\nchannels = 2\nheight = 8\nwidth = 8\n"                                  \
    "[train]\nepochs = 1\nlearning_rate = 0.05\nmomentum = 0.9\nweight_decay = 0.001\nseed = 5\n" \
    "[data]\nset = synthetic\ntrain_size = 64\ntest_size = 16\nclasses = 4\n"

/* A convolution, then the layer under test, then a convolution that reads its output. */
static const char *const middles[] = {
    "[relu]\n", "[leaky]\n", "[tanh]\n", "[sigmoid]\n", "[maxpool]\nsize = 2\nstride = 1\n",
    "[avgpool]\nsize = 2\nstride = 1\n", "[batchnorm]\n", "[dropout]\nprobability = 0.3\n", "[lrn]\n",
    "[convolutional]\nfilters = 3\nsize = 3\npad = 1\n", "[connected]\noutput = 32\n",
};
#define NMIDDLES ((int)(sizeof middles / sizeof *middles))

static char *middle_net(int k)
{
    static char text[2048];
    snprintf(text, sizeof text,
             HEAD "[convolutional]\nfilters = 4\nsize = 3\npad = 1\n%s[convolutional]\nfilters = 4\nsize = 3\n"
                  "pad = 1\n[relu]\n[connected]\noutput = 4\n[softmax]\n",
             middles[k]);
    return text;
}

static device *cpu_device(size_t budget)
{
    device_options o = {.kind = DEVICE_CPU, .budget_bytes = budget, .threads = 1, .link_gbps = 0};
    device *d = NULL;
    ck_assert_msg(device_create(&o, &d) == VDNN_OK, "%s", vdnn_errmsg());
    return d;
}

/* Every parameter's value and momentum, from wherever it lives. */
static float *params_of(net *n, size_t *count)
{
    size_t total = 0;
    for (int i = 0; i < n->nlayers; i++)
        for (int p = 0; p < n->layers[i]->nparams; p++) total += 2 * shape_count(n->layers[i]->params[p].shape);
    float *out = calloc(total + 1, sizeof *out), *at = out;
    ck_assert_ptr_nonnull(out);
    for (int i = 0; i < n->nlayers; i++)
        for (int p = 0; p < n->layers[i]->nparams; p++) {
            param *q = &n->layers[i]->params[p];
            size_t c = shape_count(q->shape);
            const float *src[2] = {q->host_value ? q->host_value : q->value,
                                   q->host_momentum ? q->host_momentum : q->momentum};
            int host[2] = {q->host_value != NULL, q->host_momentum != NULL};
            for (int w = 0; w < 2; w++, at += c) {
                if (!src[w]) continue;
                if (host[w]) {
                    memcpy(at, src[w], c * sizeof *at);
                } else {
                    float *h = tn_download(n, src[w], c);
                    memcpy(at, h, c * sizeof *at);
                    free(h);
                }
            }
        }
    *count = total;
    return out;
}

/* Trains `steps` steps of `text` with the plan `edit` makes (NULL: everything
 * resident), in a device of `budget` bytes (0: roomy); returns the parameters. The
 * losses go to loss[]. */
typedef void (*plan_edit)(const net *n, plan *p, void *arg);

static float *train(const char *text, const net_overrides *ov, plan_edit edit, void *arg, size_t budget, int steps,
                    double *loss, size_t *count, size_t *peak)
{
    net *n = tn_parse(text, ov);
    plan p;
    ck_assert(plan_from_net(n, &p) == VDNN_OK);
    for (int i = 0; i < n->nlayers; i++)
        for (int k = 0; k < PASS_COUNT; k++) p.algo[i][k] = plan_choose_algo(n->layers[i], k, ALGO_MEM, NULL);
    if (edit) edit(n, &p, arg);
    ck_assert_msg(plan_apply(n, &p) == VDNN_OK, "%s", vdnn_errmsg());   /* unattached: places the swaps */
    device *d = cpu_device(budget ? budget : (size_t)64 << 20);
    ck_assert_msg(net_attach(n, d) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_msg(plan_apply(n, &p) == VDNN_OK, "%s", vdnn_errmsg());
    for (int k = 0; k < steps; k++) {
        tn_batch b = tn_batch_make(n, n->minibatch, 100 + (uint64_t)k);
        step_result r;
        vdnn_status st = net_train_step(n, b.x, b.y, n->minibatch, n->train.learning_rate, &r);
        ck_assert_msg(st == VDNN_OK, "step %d: %s", k + 1, vdnn_errmsg());
        loss[k] = r.loss_sum;
        tn_batch_free(&b);
    }
    if (peak) *peak = n->peak_iter_bytes;
    float *out = params_of(n, count);
    plan_free(&p);
    net_free(n);
    device_destroy(d);
    return out;
}

static void recompute_all(const net *n, plan *p, void *arg)
{
    int *count = arg;
    for (int j = 0; j <= n->nlayers; j++)
        if (net_recomputable(n, j, p->swap)) {
            p->offload[j] = MAP_RECOMPUTE;
            ++*count;
        }
}

/* Every map recomputed (a chain from x[0] through every layer type) and, second,
 * only the output of the layer under test. */
static void recompute_middle(const net *n, plan *p, void *arg)
{
    (void)arg;
    ck_assert(net_recomputable(n, 2, p->swap));
    p->offload[2] = MAP_RECOMPUTE;
}

START_TEST(recompute_every_layer_type)
{
    const char *text = middle_net(_i);
    double base_loss[3], loss[3];
    size_t nb, nr;
    float *base = train(text, NULL, NULL, NULL, 0, 3, base_loss, &nb, NULL);
    int flagged = 0;
    float *got = train(text, NULL, recompute_all, &flagged, 0, 3, loss, &nr, NULL);
    ck_assert_msg(flagged >= 2, "%s: only %d maps recomputed", middles[_i], flagged);
    ck_assert_uint_eq(nb, nr);
    size_t first = 0;
    while (first < nb && !memcmp(&base[first], &got[first], sizeof *base)) first++;
    ck_assert_msg(first == nb, "%s: recomputing every map changed the weights (first at %zu of %zu: %g vs %g)",
                  middles[_i], first, nb, first < nb ? base[first] : 0, first < nb ? got[first] : 0);
    ck_assert_msg(!memcmp(base_loss, loss, sizeof loss), "%s: recomputing changed the losses", middles[_i]);
    free(got);
    got = train(text, NULL, recompute_middle, NULL, 0, 3, loss, &nr, NULL);
    ck_assert_msg(!memcmp(base, got, nb * sizeof *base), "%s: recomputing its output changed the weights", middles[_i]);
    free(got);
    free(base);
}
END_TEST

/* Swaps every swappable layer: updated on the host, or (*arg = SWAP_DEVICE on entry)
 * on the device right after its backward pass, alternating with the host. */
static void swap_all(const net *n, plan *p, void *arg)
{
    int *count = arg, device = *count == SWAP_DEVICE;
    *count = 0;
    for (int i = 0; i < n->nlayers; i++)
        if (layer_swappable(n->layers[i])) {
            p->swap[i] = device && *count % 2 == 0 ? SWAP_DEVICE : SWAP_HOST;
            ++*count;
        }
    for (int j = 0; j < n->nlayers; j++)
        if (net_first_reader(n, j) >= 0) p->offload[j] = MAP_OFFLOAD;
}

/* Conv, BN (stays resident), dropout, five 1024-wide connected layers: the parameters
 * alone (values, gradients, momenta) are over twice the budget. */
#define BIG_NET                                                                                    \
    HEAD "[convolutional]\nfilters = 8\nsize = 3\npad = 1\n[batchnorm]\n[relu]\n[dropout]\n"          \
         "probability = 0.2\n[connected]\noutput = 1024\n[relu]\n[connected]\noutput = 1024\n[relu]\n" \
         "[connected]\noutput = 1024\n[relu]\n[connected]\noutput = 1024\n[relu]\n"                  \
         "[connected]\noutput = 1024\n[relu]\n[connected]\noutput = 4\n[softmax]\n"

START_TEST(swap_trains_parameters_larger_than_the_budget)
{
    net *probe = tn_parse(BIG_NET, NULL);
    size_t params = net_param_bytes(probe);
    net_free(probe);
    double base_loss[3], loss[3];
    size_t nb, ns, peak = 0;
    float *base = train(BIG_NET, NULL, NULL, NULL, 0, 3, base_loss, &nb, NULL);
    /* the least budget of the swapped plan, from the simulator */
    net *n = tn_parse(BIG_NET, NULL);
    plan p;
    int swapped = 0;
    ck_assert(plan_from_net(n, &p) == VDNN_OK);
    for (int i = 0; i < n->nlayers; i++)
        for (int k = 0; k < PASS_COUNT; k++) p.algo[i][k] = plan_choose_algo(n->layers[i], k, ALGO_MEM, NULL);
    swap_all(n, &p, &swapped);
    simulator *s;
    double t;
    ck_assert(sim_create(n, NULL, &s) == VDNN_OK);
    ck_assert(sim_run(s, &p, &t, &p.peak_bytes) == VDNN_OK);
    size_t budget = p.peak_bytes;
    sim_destroy(s);
    plan_free(&p);
    net_free(n);
    printf("swap: parameters %zu bytes, budget %zu bytes (%.1fx smaller)\n", params, budget, (double)params / budget);
    ck_assert_msg(budget * 2 < params, "the swapped net needs %zu bytes, parameters are %zu", budget, params);
    for (int mode = SWAP_HOST; mode <= SWAP_DEVICE; mode++) {
        swapped = mode;
        float *got = train(BIG_NET, NULL, swap_all, &swapped, budget + (mode == SWAP_DEVICE ? budget / 4 : 0), 3, loss,
                           &ns, &peak);
        ck_assert_int_ge(swapped, 4);
        ck_assert_uint_le(peak, budget + (mode == SWAP_DEVICE ? budget / 4 : 0));
        ck_assert_uint_eq(nb, ns);
        ck_assert_msg(!memcmp(base, got, nb * sizeof *base), "swapping (update mode %d) changed the weights", mode);
        ck_assert_msg(!memcmp(base_loss, loss, sizeof loss), "swapping (update mode %d) changed the losses", mode);
        free(got);
    }
    free(base);
}
END_TEST

/* Swapped and recomputed together, with micro-batches: runs, and matches. */
static void swap_and_recompute(const net *n, plan *p, void *arg)
{
    int mode = SWAP_DEVICE;   /* half the layers updated on the device, half on the host */
    (void)arg;
    swap_all(n, p, &mode);
    for (int j = 0; j <= n->nlayers; j++)
        if (net_policy_map(n, j, POLICY_RECOMPUTE) == MAP_RECOMPUTE && net_recomputable(n, j, p->swap))
            p->offload[j] = MAP_RECOMPUTE;
}

#define PLAIN_NET                                                                                  \
    HEAD "[convolutional]\nfilters = 4\nsize = 3\npad = 1\n[relu]\n[maxpool]\nsize = 2\n"             \
         "[convolutional]\nfilters = 4\nsize = 3\npad = 1\n[relu]\n[dropout]\nprobability = 0.25\n"     \
         "[connected]\noutput = 4\n[softmax]\n"

static double max_rel_diff(const float *a, const float *b, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (fabs((double)a[i]) + 1e-3);
        if (d > worst) worst = d;
    }
    return worst;
}

START_TEST(micro_batches_match_the_batch)
{
    double base_loss[3], loss[3];
    size_t nb, nm;
    float *base = train(PLAIN_NET, NULL, NULL, NULL, 0, 3, base_loss, &nb, NULL);
    static const int micros[] = {4, 2, 3, 1};
    for (int k = 0; k < 4; k++) {
        net_overrides ov = net_no_overrides();
        ov.micro_batch = micros[k];
        float *got = train(PLAIN_NET, &ov, _i ? swap_and_recompute : NULL, NULL, 0, 3, loss, &nm, NULL);
        ck_assert_uint_eq(nb, nm);
        double d = max_rel_diff(base, got, nb);
        printf("micro-batch %d%s: largest relative difference %.2e\n", micros[k], _i ? " (swap + recompute)" : "", d);
        ck_assert_msg(d < MICRO_TOLERANCE, "micro-batches of %d: weights differ by %g", micros[k], d);
        for (int s = 0; s < 3; s++) ck_assert(fabs(loss[s] - base_loss[s]) <= 1e-5 * fabs(base_loss[s]));
        free(got);
    }
    free(base);
}
END_TEST

/* A graph with micro-batches: a shortcut around a branch with batch norm and dropout. */
#define GRAPH_NET                                                                                  \
    HEAD "[convolutional]\nfilters = 4\nsize = 3\npad = 1\n[batchnorm]\n[relu]\nname = a\n"      \
         "[convolutional]\nfilters = 4\nsize = 3\npad = 1\n[batchnorm]\n[dropout]\nprobability = 0.2\n" \
         "[relu]\n[add]\ninput = -1, a\n[relu]\n[maxpool]\nsize = 2\n[connected]\noutput = 4\n[softmax]\n"

/* The net of `text` in micro-batches of `micro` items (0: none) of batches of `batch`
 * (0: the text's), and a profile of it with a link of 2 and 3 MB/s and no layer costs
 * yet. */
static net *micro_net_of(const char *text, int batch, int micro, profile *pr)
{
    net_overrides ov = net_no_overrides();
    ov.micro_batch = micro;
    if (batch) ov.batch = batch;
    net *n = tn_parse(text, &ov);
    *pr = (profile){.nlayers = n->nlayers, .batch = n->input.n, .h2d_bytes_per_s = 2e6, .d2h_bytes_per_s = 3e6,
                    .copy_latency_s = 1e-5};
    pr->layers = calloc((size_t)n->nlayers, sizeof *pr->layers);
    ck_assert_ptr_nonnull(pr->layers);
    return n;
}

static net *micro_net(const char *text, int micro, profile *pr)
{
    return micro_net_of(text, 0, micro, pr);
}

/* Made-up layer costs: every algorithm and pass its own time. */
static void made_up_costs(const net *n, profile *pr)
{
    for (int i = 0; i < n->nlayers; i++) {
        for (int a = 0; a < LAYER_MAX_ALGOS; a++) {
            pr->layers[i].fwd_s[a] = 1e-4 * (1 + (i * 7 + a * 3) % 5);
            pr->layers[i].bwd_data_s[a] = i ? 2e-4 * (1 + (i * 5 + a) % 3) : 0;
            pr->layers[i].bwd_filter_s[a] = 1e-4 * (1 + (i + a) % 4);
        }
        pr->layers[i].update_s = n->layers[i]->nparams ? 5e-5 : 0;
        pr->layers[i].accum_s = 3e-5;
    }
}

/* One replay of plan p on a fresh simulated device, every micro-batch replayed or
 * repeats skipped: the predicted step, the pool's peaks and its allocation count. */
static vdnn_status replay_busy(net *n, const profile *pr, const plan *p, int repeats, double *t, double *busy,
                               size_t *peak, size_t *live, uint64_t *allocs)
{
    device_options o = {.kind = DEVICE_SIM, .budget_bytes = (size_t)1 << 40};
    device *d = NULL;
    ck_assert(device_create(&o, &d) == VDNN_OK);
    for (int i = 0; i < n->nlayers; i++) {
        n->layers[i]->swap = p->swap[i];
        n->layers[i]->cost = &pr->layers[i];
    }
    n->policy = POLICY_NONE;
    ck_assert_msg(net_attach(n, d) == VDNN_OK, "%s", vdnn_errmsg());
    vdnn_status st = plan_apply(n, p);
    sim_model m = {.h2d_bytes_per_s = pr->h2d_bytes_per_s, .d2h_bytes_per_s = pr->d2h_bytes_per_s,
                   .copy_latency_s = pr->copy_latency_s, .replay_repeats = repeats};
    device_sim_set_model(d, &m);
    if (st == VDNN_OK) st = net_replay(n, n->minibatch, t, busy);
    pool_stats ps;
    pool_get_stats(device_pool(d), &ps);
    if (peak) *peak = ps.frontier_peak_bytes;
    if (live) *live = pool_live_peak(device_pool(d));
    if (allocs) *allocs = ps.allocs;
    net_detach(n);
    device_destroy(d);
    return st;
}

static void replay(net *n, const profile *pr, const plan *p, int repeats, double *t, size_t *peak, size_t *live,
                   uint64_t *allocs)
{
    ck_assert_msg(replay_busy(n, pr, p, repeats, t, NULL, peak, live, allocs) == VDNN_OK, "%s", vdnn_errmsg());
}

/* The simulator replays a middle micro-batch that leaves the device as it found it once,
 * and counts its time for every repeat (nets/iteration.c): the prediction and both peaks
 * are those of replaying every one, for every policy and copy timing, swapped and
 * recomputed, on a chain and a graph, in micro-batches of 1, 2 and 3 of 8. */
START_TEST(simulator_skips_repeated_micro_batches_exactly)
{
    static const char *const texts[] = {PLAIN_NET, GRAPH_NET};
    static const int micros[] = {1, 2, 3};
    static const int timings[][2] = {{PREFETCH_FAR, 1}, {PREFETCH_NEXT, 0}, {PREFETCH_ON_DEMAND, 0}};
    int plans = 0, skipped = 0;
    for (int k = 0; k < 3; k++) {
        profile pr;
        net *n = micro_net(texts[_i], micros[k], &pr);
        made_up_costs(n, &pr);
        for (int pol = 0; pol < POLICY_COUNT; pol++)
            for (int m = 0; m < 3; m++)
                for (int v = 0; v < 2; v++) {
                    plan p = {0};
                    ck_assert(plan_policy(n, &pr, (mem_policy)pol, ALGO_PERF, timings[m][0], timings[m][1], &p) == VDNN_OK);
                    if (v) swap_and_recompute(n, &p, NULL);
                    double t[2];
                    size_t peak[2], live[2];
                    uint64_t allocs[2];
                    for (int r = 0; r < 2; r++) replay(n, &pr, &p, r, &t[r], &peak[r], &live[r], &allocs[r]);
                    ck_assert_msg(fabs(t[0] - t[1]) <= 1e-9 * t[1],
                                  "micro-batches of %d, policy %s, timing %d%s: predicted %.12g s skipping repeats, %.12g s "
                                  "replaying them", micros[k], policy_name((mem_policy)pol), m, v ? ", swapped" : "",
                                  t[0], t[1]);
                    ck_assert_uint_eq(peak[0], peak[1]);
                    ck_assert_uint_eq(live[0], live[1]);
                    ck_assert_uint_le(allocs[0], allocs[1]);
                    plans++;
                    skipped += allocs[0] < allocs[1];
                    plan_free(&p);
                }
        free(pr.layers);
        net_free(n);
    }
    printf("%s: %d plans, %d of them skipped repeated micro-batches\n", _i ? "graph" : "chain", plans, skipped);
    /* micro-batches of 1 (eight, six in the middle) repeat under most plans */
    ck_assert_int_ge(skipped, plans / 6);
}
END_TEST

/* A step's last micro-batch runs a middle one's work unless SWAP_DEVICE layers update
 * in it, and is then not replayed either where the middle ones repeat: a step of four
 * micro-batches replays the blocks of a step of two (the first and one middle; what it
 * predicts is that of replaying all four: the test above). With layers updated on the
 * device, the last one is replayed. */
START_TEST(simulator_skips_a_last_micro_batch_like_a_middle_one)
{
    static const char *const texts[] = {PLAIN_NET, GRAPH_NET};
    static const int timings[][2] = {{PREFETCH_FAR, 1}, {PREFETCH_NEXT, 0}, {PREFETCH_ON_DEMAND, 0}};
    int like = 0, unlike = 0;
    for (int pol = 0; pol < POLICY_COUNT; pol++)
        for (int m = 0; m < 3; m++)
            for (int v = 0; v < 2; v++) {
                profile pr4, pr2;
                net *n4 = micro_net_of(texts[_i], 8, 2, &pr4), *n2 = micro_net_of(texts[_i], 4, 2, &pr2);
                made_up_costs(n4, &pr4);
                made_up_costs(n2, &pr2);
                plan p4 = {0}, p2 = {0};
                ck_assert(plan_policy(n4, &pr4, (mem_policy)pol, ALGO_PERF, timings[m][0], timings[m][1], &p4) == VDNN_OK);
                ck_assert(plan_policy(n2, &pr2, (mem_policy)pol, ALGO_PERF, timings[m][0], timings[m][1], &p2) == VDNN_OK);
                if (v) swap_and_recompute(n4, &p4, NULL), swap_and_recompute(n2, &p2, NULL);
                double t;
                size_t peak, live;
                uint64_t all4, skip4, two;
                replay(n4, &pr4, &p4, 1, &t, &peak, &live, &all4);
                replay(n4, &pr4, &p4, 0, &t, &peak, &live, &skip4);
                replay(n2, &pr2, &p2, 1, &t, &peak, &live, &two);
                if (skip4 < all4) {   /* the middle micro-batches repeat under this plan */
                    if (v) {
                        ck_assert_uint_gt(skip4, two);
                        unlike++;
                    } else {
                        ck_assert_uint_eq(skip4, two);
                        like++;
                    }
                }
                plan_free(&p4);
                plan_free(&p2);
                free(pr4.layers);
                free(pr2.layers);
                net_free(n4);
                net_free(n2);
            }
    printf("%s: the last micro-batch skipped under %d plans, replayed under %d with device updates\n",
           _i ? "graph" : "chain", like, unlike);
    ck_assert_int_ge(like, 3);
    ck_assert_int_ge(unlike, 3);
}
END_TEST

/* A random plan of n: copy timing, swaps, the maps backward reads (kept, offloaded or,
 * where it may be, recomputed) and every pass's algorithm. */
static void random_plan(const net *n, const profile *pr, rng *r, plan *p)
{
    static const int timings[][2] = {{PREFETCH_FAR, 1}, {PREFETCH_NEXT, 0}, {PREFETCH_ON_DEMAND, 0}};
    int m = (int)rng_below(r, 3);
    ck_assert(plan_policy(n, pr, POLICY_NONE, ALGO_PERF, timings[m][0], timings[m][1], p) == VDNN_OK);
    p->in_place = (int)rng_below(r, 3);
    for (int i = 0; i < n->nlayers; i++) {
        if (layer_swappable(n->layers[i])) p->swap[i] = (unsigned char)rng_below(r, 3);
        for (int k = 0; k < PASS_COUNT; k++) p->algo[i][k] = (int)rng_below(r, (uint32_t)layer_algo_count(n->layers[i], k));
    }
    for (int j = 0; j <= n->nlayers; j++) {
        if (j == n->nlayers || net_first_reader(n, j) < 0) continue;
        p->offload[j] = (unsigned char)rng_below(r, 3);
        if (p->offload[j] == MAP_RECOMPUTE && !net_recomputable(n, j, p->swap)) p->offload[j] = MAP_OFFLOAD;
    }
}

/* The planner's climbs leave out the moves that add work (may_gain,
 * nets/planner/search.c): a slower algorithm for a pass, a kept map offloaded or
 * recomputed. The simulated step is a max-plus system, so such a change makes a step
 * faster only by shortening its waits (a freed block reused once its copy is done lands
 * elsewhere); the compute-stream work never falls, and so no plan whose offloaded map
 * is kept or recomputed instead is faster than that work of the plan it came from (the
 * climbs' other bound). Every single such change of random plans of a chain and a
 * graph, whole and in micro-batches, with repeated micro-batches replayed and skipped. */
START_TEST(compute_work_never_falls_with_more_work)
{
    static const char *const texts[] = {PLAIN_NET, GRAPH_NET};
    static const int micros[] = {0, 1, 3};
    static const char *const words[] = {"kept", "offloaded", "recomputed"};
    static const char *const passes[] = {"forward", "backward-data", "backward-filter"};
    rng r;
    rng_seed(&r, 2026);
    long checked = 0, slower = 0, faster = 0;
    for (int k = 0; k < 3; k++) {
        profile pr;
        net *n = micro_net(texts[_i], micros[k], &pr);
        for (int i = 0; i < n->nlayers; i++) {
            for (int a = 0; a < LAYER_MAX_ALGOS; a++) {
                pr.layers[i].fwd_s[a] = 1e-5 * (double)(1 + rng_below(&r, 40));
                pr.layers[i].bwd_data_s[a] = i ? 1e-5 * (double)(1 + rng_below(&r, 40)) : 0;
                pr.layers[i].bwd_filter_s[a] = 1e-5 * (double)(1 + rng_below(&r, 40));
            }
            pr.layers[i].update_s = n->layers[i]->nparams ? 5e-5 : 0;
            pr.layers[i].accum_s = 3e-5;
        }
        for (int trial = 0; trial < 12; trial++)
            for (int rep = 0; rep < 2; rep++) {
                plan p = {0};
                random_plan(n, &pr, &r, &p);
                double t0, busy0, t, busy;
                if (replay_busy(n, &pr, &p, rep, &t0, &busy0, NULL, NULL, NULL) != VDNN_OK) {
                    plan_free(&p);
                    continue;
                }
                ck_assert_msg(busy0 > 0 && busy0 <= t0 * (1 + 1e-9), "compute work %.9g s of a %.9g s step", busy0, t0);
                double tol = 1e-9 * t0;   /* skipped repeats are equal to this (device_sim_same) */
                for (int j = 0; j < n->nlayers; j++) {
                    if (net_first_reader(n, j) < 0) continue;
                    const int was = p.offload[j];
                    for (int to = MAP_KEEP; to <= MAP_RECOMPUTE; to++) {
                        if (to == was || was == MAP_RECOMPUTE) continue;
                        p.offload[j] = (unsigned char)to;
                        if (replay_busy(n, &pr, &p, rep, &t, &busy, NULL, NULL, NULL) == VDNN_OK) {
                            ck_assert_msg(busy >= busy0 - tol && t >= busy0 - tol,
                                          "micro-batch %d: map %d %s, not %s: a step of %.12g s with %.12g s of compute "
                                          "work, below the %.12g s of compute work before", micros[k], j, words[to],
                                          words[was], t, busy, busy0);
                            checked++;
                            slower += t > t0 + tol;
                            faster += was == MAP_KEEP && t < t0 - tol;
                        }
                        p.offload[j] = (unsigned char)was;
                    }
                }
                for (int i = 0; i < n->nlayers; i++)
                    for (int pass = 0; pass < PASS_COUNT; pass++) {
                        const int was = p.algo[i][pass];
                        const double *cost = pass == PASS_FWD ? pr.layers[i].fwd_s
                                           : pass == PASS_BWD_DATA ? pr.layers[i].bwd_data_s
                                                                   : pr.layers[i].bwd_filter_s;
                        for (int a = 0; a < layer_algo_count(n->layers[i], pass); a++) {
                            if (a == was || cost[a] < cost[was]) continue;
                            p.algo[i][pass] = a;
                            ck_assert_msg(replay_busy(n, &pr, &p, rep, &t, &busy, NULL, NULL, NULL) == VDNN_OK, "%s",
                                          vdnn_errmsg());
                            ck_assert_msg(busy >= busy0 - tol, "micro-batch %d: %s's %s algorithm %d, not %d: %.12g s of "
                                          "compute work, was %.12g s", micros[k], n->layers[i]->name, passes[pass], a, was,
                                          busy, busy0);
                            checked++;
                            slower += t > t0 + tol;
                            faster += t < t0 - tol;
                            p.algo[i][pass] = was;
                        }
                    }
                plan_free(&p);
            }
        free(pr.layers);
        net_free(n);
    }
    printf("%s: %ld single changes, %ld of them slower; %ld of those that add work faster, by shorter "
           "waits\n", _i ? "graph" : "chain", checked, slower, faster);
    ck_assert_int_ge(checked, 300);
    ck_assert_int_ge(slower, checked / 4);
}
END_TEST

/* Batch norm first, so its input is the data: after one step in two micro-batches
 * the running mean is (1 - m) m mean(first half) + m mean(second half) per channel. */
START_TEST(micro_batches_with_batch_norm)
{
    const char *text = HEAD "[batchnorm]\nmomentum = 0.1\n[connected]\noutput = 4\n[softmax]\n";
    net_overrides ov = net_no_overrides();
    ov.micro_batch = 4;
    device *d = NULL;
    net *n = tn_attached(text, &ov, &d);
    ck_assert_int_eq(n->input.n, 4);
    ck_assert_int_eq(n->minibatch, 8);
    tn_batch b = tn_batch_make(n, 8, 7);
    step_result r;
    ck_assert(net_train_step(n, b.x, b.y, 8, 0.0, &r) == VDNN_OK);
    param *mean = tn_param(n, "bn1.running_mean");
    ck_assert_ptr_nonnull(mean);
    float *got = tn_download(n, mean->value, 2);
    const size_t hw = 64;
    for (int c = 0; c < 2; c++) {
        double m[2] = {0, 0};
        for (int half = 0; half < 2; half++)
            for (int item = 0; item < 4; item++)
                for (size_t k = 0; k < hw; k++) m[half] += b.x[((size_t)(half * 4 + item) * 2 + c) * hw + k];
        double want = (1 - 0.1) * 0.1 * m[0] / (4 * hw) + 0.1 * m[1] / (4 * hw);
        ck_assert_msg(fabs(got[c] - want) < 1e-5, "channel %d: running mean %g, want %g", c, got[c], want);
    }
    free(got);
    tn_batch_free(&b);
    tn_free(n, d);
}
END_TEST

/* A plan whose layers update in both places survives its file. */
START_TEST(swap_modes_round_trip)
{
    net *n = tn_parse(PLAIN_NET, NULL);
    plan p, q;
    int mode = SWAP_DEVICE;
    ck_assert(plan_from_net(n, &p) == VDNN_OK);
    swap_all(n, &p, &mode);
    char dir[256], path[512];
    tn_tmpdir(dir, sizeof dir, "test_beyond");
    tn_join(path, sizeof path, dir, "plan.txt");
    ck_assert_msg(plan_save(&p, n, path) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_msg(plan_load(n, path, &q) == VDNN_OK, "%s", vdnn_errmsg());
    int device = 0, host = 0;
    for (int i = 0; i < n->nlayers; i++) {
        ck_assert_int_eq(q.swap[i], p.swap[i]);
        device += q.swap[i] == SWAP_DEVICE;
        host += q.swap[i] == SWAP_HOST;
    }
    ck_assert(device > 0 && host > 0);
    plan_free(&p);
    plan_free(&q);
    tn_rmtree(dir);
    net_free(n);
}
END_TEST

/* ---- the planner ---- */

/* Below what offloading and algorithms alone can reach, the planner recomputes or swaps;
 * a budget no whole-batch plan fits is then met by micro-batches (the CLI's fallback,
 * checked in test_cli). */
START_TEST(planner_swaps_and_recomputes_when_needed)
{
    net *n = tn_parse(BIG_NET, NULL);
    profile pr = {0};
    pr.nlayers = n->nlayers;
    pr.batch = n->input.n;
    pr.layers = calloc((size_t)n->nlayers, sizeof *pr.layers);
    for (int i = 0; i < n->nlayers; i++)
        for (int a = 0; a < PLAN_MAX_ALGOS; a++) {
            pr.layers[i].fwd_s[a] = 1e-3 * (1 + a);
            pr.layers[i].bwd_data_s[a] = i ? 1e-3 * (1 + a) : 0;
            pr.layers[i].bwd_filter_s[a] = n->layers[i]->ops->algo_count ? 1e-3 * (1 + a) : 0;
        }
    pr.h2d_bytes_per_s = pr.d2h_bytes_per_s = pr.duplex_bytes_per_s = 1e9;
    size_t least_offload = 0;
    for (int pol = POLICY_NONE; pol <= POLICY_CONV; pol++)
        for (int a = 0; a < ALGO_MODE_COUNT; a++) {
            plan p;
            if (plan_fit_policy(n, &pr, 0, (mem_policy)pol, (algo_mode)a, &p) != VDNN_OK) continue;
            if (!least_offload || p.peak_bytes < least_offload) least_offload = p.peak_bytes;
            plan_free(&p);
        }
    plan p;
    search_stats ss;
    size_t budget = least_offload / 2;
    ck_assert_msg(plan_search(n, &pr, budget, SEARCH_BB, (search_limits){0}, &p, &ss) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_uint_le(p.peak_bytes, budget);
    int swapped = 0;
    for (int i = 0; i < n->nlayers; i++) swapped += p.swap[i];
    ck_assert_msg(swapped > 0, "half of the least offloading budget is met without swapping");
    plan_free(&p);
    /* vDNN's ladder knows neither, and gives up */
    ck_assert(plan_search(n, &pr, budget, SEARCH_VDNN, (search_limits){0}, &p, NULL) == VDNN_EBUDGET);
    free(pr.layers);
    net_free(n);
}
END_TEST

static Suite *beyond_suite(void)
{
    Suite *s = suite_create("beyond");
    TCase *t = tcase_create("recompute");
    tcase_set_timeout(t, 120);
    tcase_add_loop_test(t, recompute_every_layer_type, 0, NMIDDLES);
    suite_add_tcase(s, t);
    t = tcase_create("swap");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, swap_trains_parameters_larger_than_the_budget);
    tcase_add_test(t, swap_modes_round_trip);
    suite_add_tcase(s, t);
    t = tcase_create("micro");
    tcase_set_timeout(t, 120);
    tcase_add_loop_test(t, micro_batches_match_the_batch, 0, 2);
    tcase_add_test(t, micro_batches_with_batch_norm);
    tcase_add_loop_test(t, simulator_skips_repeated_micro_batches_exactly, 0, 2);
    tcase_add_loop_test(t, simulator_skips_a_last_micro_batch_like_a_middle_one, 0, 2);
    tcase_add_loop_test(t, compute_work_never_falls_with_more_work, 0, 2);
    suite_add_tcase(s, t);
    t = tcase_create("planner");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, planner_swaps_and_recomputes_when_needed);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tn_run_suite(beyond_suite()); }
