/* Check suite for data-parallel training (nets/parallel.c, vdnn/comm.c) on the CPU
 * backend, one thread per emulated device:
 *
 *  - the split of a batch by shares (proportional, capped, remainders to the largest);
 *  - a step split into net_backprop and net_update is net_train_step, bit for bit;
 *  - two devices in one process train as one device whose batch is split into
 *    micro-batches of the shares' sizes (equal and 3:1 shares; with swap, recompute and
 *    micro-batches inside a device too), up to the order of floating-point sums (each
 *    device sums its own items' parts of a gradient, then the devices' sums are added):
 *    within 2e-6 relative after one step and 1e-4 after 20 (the measured differences,
 *    printed, are about a third of these), and bit for bit the same from run to run;
 *  - adaptive shares move items to a device that is faster (a slow-down knob on the
 *    other) and stay put when the devices are equal;
 *  - the command line: --devices and --shares, their errors, resuming with another
 *    number of devices, and, where mpirun is installed, two ranks that train as two
 *    devices in one process (the same bits), a rank that dies or hangs, and ranks that
 *    disagree about their config. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nets/parallel.h"
#include "tests/testnet.h"

/* Batch norm, dropout and a graph: what a split treats with care. */
#define PAR_NET                                                                                         \
    "[net]\nbatch = 16\nchannels = 2\nheight = 8\nwidth = 8\n"                                          \
    "[train]\nepochs = 1\nlearning_rate = 0.05\nmomentum = 0.9\nweight_decay = 0.0005\nseed = 7\n"      \
    "[data]\nset = synthetic\ntrain_size = 256\ntest_size = 32\nclasses = 4\n"                          \
    "[convolutional]\nfilters = 6\nsize = 3\npad = 1\nalgo = im2col\n[batchnorm]\n[relu]\nname = a\n"   \
    "[convolutional]\nfilters = 6\nsize = 3\npad = 1\nalgo = im2col\n[dropout]\nprobability = 0.2\n"     \
    "[add]\ninput = -1, a\n[maxpool]\nsize = 2\n[connected]\noutput = 16\n[relu]\n"                    \
    "[connected]\noutput = 4\n[softmax]\n"

#define STEPS 20
/* The bounds, relative (docs/parallel.md): rounding after one step, and what twenty
 * steps of momentum SGD make of it. */
#define ONE_STEP_BOUND 2e-6
#define STEPS_BOUND 1e-4

/* Every trainable parameter of a net, downloaded (a swapped layer's from host memory). */
typedef struct params {
    float *v;
    size_t count;
} params;

static params params_of(net *n)
{
    params p = {0};
    for (int i = 0; i < n->nlayers; i++)
        for (int k = 0; k < n->layers[i]->nparams; k++) {
            param *q = &n->layers[i]->params[k];
            if (!q->trainable) continue;
            size_t c = shape_count(q->shape);
            p.v = realloc(p.v, (p.count + c) * sizeof *p.v);
            ck_assert_ptr_nonnull(p.v);
            if (q->host_value) memcpy(p.v + p.count, q->host_value, c * sizeof(float));
            else {
                float *h = tn_download(n, q->value, c);
                memcpy(p.v + p.count, h, c * sizeof(float));
                free(h);
            }
            p.count += c;
        }
    return p;
}

/* The largest |a - b| / (1e-3 + |b|) over the parameters. */
static double max_rel(const params *a, const params *b)
{
    ck_assert_uint_eq(a->count, b->count);
    double worst = 0;
    for (size_t i = 0; i < a->count; i++) {
        double d = fabs((double)a->v[i] - b->v[i]) / (1e-3 + fabs((double)b->v[i]));
        if (d > worst) worst = d;
    }
    return worst;
}

static int same_bits(const params *a, const params *b)
{
    return a->count == b->count && !memcmp(a->v, b->v, a->count * sizeof(float));
}

/* `steps` steps of `text` on one CPU device in micro-batches of `micro` (0: none). */
static params one_device_steps(const char *text, int micro, mem_policy pol, int steps)
{
    net_overrides ov = net_no_overrides();
    ov.micro_batch = micro;
    net *n = tn_parse(text, &ov);
    n->policy = pol;
    device *d = tn_device_for(n);
    ck_assert_int_eq(net_attach(n, d), VDNN_OK);
    ck_assert_int_eq(net_plan(n, pol, ALGO_MEM), VDNN_OK);
    for (int s = 0; s < steps; s++) {
        tn_batch b = tn_batch_make(n, n->minibatch, 300 + (uint64_t)s);
        step_result r;
        ck_assert_msg(net_train_step(n, b.x, b.y, b.items, 0.05, &r) == VDNN_OK, "%s", vdnn_errmsg());
        tn_batch_free(&b);
    }
    params p = params_of(n);
    tn_free(n, d);
    return p;
}

static params one_device(const char *text, int micro, mem_policy pol)
{
    return one_device_steps(text, micro, pol, STEPS);
}

typedef struct plan_with {
    mem_policy pol;
    int micro;
} plan_with;

/* dp_plan_fn: a fixed policy, smallest workspaces, and a split of the device's share. */
static vdnn_status plan_replica(void *ctx, net **np)
{
    const plan_with *p = ctx;
    net *n = *np;
    if (p->micro && p->micro < n->minibatch) {
        device *d = n->dev;
        net *m = NULL;
        net_detach(n);
        vdnn_status st = net_remake(n, p->micro, &m);
        if (st != VDNN_OK) return st;
        net_free(n);
        *np = n = m;
        for (int i = 0; i < n->nlayers; i++) n->layers[i]->swap = net_policy_swaps(n, i, p->pol);
        st = net_attach(n, d);
        if (st != VDNN_OK) return st;
    }
    return net_plan(n, p->pol, ALGO_MEM);
}

/* `steps` steps of `text` on the CPU devices `list` of this process with `shares`. */
static params devices_steps(const char *text, const char *list, const char *shares, mem_policy pol, int micro,
                            int *final_shares, int steps)
{
    net *model = tn_parse(text, NULL);
    model->policy = pol;
    comm *c = NULL;
    ck_assert_int_eq(comm_open(30, &c), VDNN_OK);
    plan_with pw = {pol, micro};
    dp_opts o = {.devices = list, .shares = shares, .share_every = 4, .bucket_bytes = 1024, .plan = plan_replica,
                 .plan_ctx = &pw};
    o.dev.threads = 1;
    o.dev.budget_bytes = 4 * net_train_bytes_bound(model) + (1 << 20);
    dp_group *g = NULL;
    ck_assert_msg(dp_create(model, c, &o, &g) == VDNN_OK, "dp_create: %s", vdnn_errmsg());
    for (int s = 0; s < steps; s++) {
        tn_batch b = tn_batch_make(model, model->minibatch, 300 + (uint64_t)s);
        step_result r;
        ck_assert_msg(dp_train_step(g, b.x, b.y, b.items, 0.05, &r) == VDNN_OK, "step %d: %s", s + 1, vdnn_errmsg());
        ck_assert(isfinite(r.loss_sum) && r.n == b.items);
        tn_batch_free(&b);
    }
    for (int k = 0; final_shares && k < dp_devices(g); k++) final_shares[k] = dp_shares(g)[k];
    params p = params_of(dp_primary(g));
    dp_free(g);
    comm_close(c);
    net_free(model);
    return p;
}

static params devices(const char *text, const char *list, const char *shares, mem_policy pol, int micro,
                      int *final_shares)
{
    return devices_steps(text, list, shares, pol, micro, final_shares, STEPS);
}

START_TEST(test_split)
{
    int out[4];
    double w[4] = {7, 3, 0, 0};
    dp_split(16, w, NULL, 2, out);
    ck_assert_int_eq(out[0], 11);   /* 11.2 and 4.8: the remainder goes to the larger fraction */
    ck_assert_int_eq(out[1], 5);
    double eq[3] = {1, 1, 1};
    dp_split(16, eq, NULL, 3, out);
    ck_assert(out[0] == 6 && out[1] == 5 && out[2] == 5);   /* ties to the lower index */
    int cap[3] = {2, 20, 20};
    dp_split(16, eq, cap, 3, out);
    ck_assert(out[0] == 2 && out[1] + out[2] == 14 && abs(out[1] - out[2]) <= 1);
    dp_split(16, w, NULL, 4, out);
    ck_assert(out[2] == 0 && out[3] == 0 && out[0] + out[1] == 16);
    int within[2] = {12, 4};
    double q[2] = {3, 1};
    dp_split(13, q, within, 2, out);   /* a short batch keeps within the replicas' sizes */
    ck_assert(out[0] <= 12 && out[1] <= 4 && out[0] + out[1] == 13);
}
END_TEST

/* net_backprop + net_update is net_train_step, also with swapped layers (updated on the
 * host either way) and micro-batches. */
START_TEST(test_backprop_update)
{
    static const mem_policy pols[] = {POLICY_NONE, POLICY_SWAP, POLICY_RECOMPUTE};
    for (int p = 0; p < 3; p++)
        for (int micro = 0; micro <= 6; micro += 6) {
            params a = one_device(PAR_NET, micro, pols[p]);
            net_overrides ov = net_no_overrides();
            ov.micro_batch = micro;
            net *n = tn_parse(PAR_NET, &ov);
            n->policy = pols[p];
            device *d = tn_device_for(n);
            ck_assert_int_eq(net_attach(n, d), VDNN_OK);
            ck_assert_int_eq(net_plan(n, pols[p], ALGO_MEM), VDNN_OK);
            for (int s = 0; s < STEPS; s++) {
                tn_batch b = tn_batch_make(n, n->minibatch, 300 + (uint64_t)s);
                step_result r;
                ck_assert_int_eq(net_backprop(n, b.x, b.y, b.items, 0, b.items, &r), VDNN_OK);
                ck_assert_int_eq(net_update(n, 0.05), VDNN_OK);
                tn_batch_free(&b);
            }
            ck_assert_uint_eq(n->step, STEPS);
            params b = params_of(n);
            ck_assert_msg(same_bits(&a, &b), "policy %s, micro %d: backprop + update differs", policy_name(pols[p]),
                          micro);
            free(a.v);
            free(b.v);
            tn_free(n, d);
        }
}
END_TEST

/* Two devices with shares s0, s1 against one device in micro-batches of s0 (the rest,
 * s1, the second), for each policy. */
START_TEST(test_two_devices)
{
    static const struct { const char *shares; int micro; } cases[] = {{"equal", 8}, {"3,1", 12}};
    static const mem_policy pols[] = {POLICY_NONE, POLICY_ALL, POLICY_SWAP, POLICY_RECOMPUTE};
    for (int c = 0; c < 2; c++)
        for (int p = 0; p < 4; p++) {
            params first = one_device_steps(PAR_NET, cases[c].micro, pols[p], 1);
            params first2 = devices_steps(PAR_NET, "cpu,cpu", cases[c].shares, pols[p], 0, NULL, 1);
            double rel1 = max_rel(&first2, &first);
            params one = one_device(PAR_NET, cases[c].micro, pols[p]);
            params two = devices(PAR_NET, "cpu,cpu", cases[c].shares, pols[p], 0, NULL);
            params again = devices(PAR_NET, "cpu,cpu", cases[c].shares, pols[p], 0, NULL);
            double rel = max_rel(&two, &one);
            printf("two devices, shares %s, policy %s: largest relative difference %.3g after 1 step, %.3g after "
                   "%d\n", cases[c].shares, policy_name(pols[p]), rel1, rel, STEPS);
            ck_assert_msg(rel1 < ONE_STEP_BOUND && rel < STEPS_BOUND, "shares %s, policy %s: %.3g, %.3g relative from "
                          "one device", cases[c].shares, policy_name(pols[p]), rel1, rel);
            free(first.v);
            free(first2.v);
            ck_assert_msg(same_bits(&two, &again), "shares %s, policy %s: two runs differ", cases[c].shares,
                          policy_name(pols[p]));
            free(one.v);
            free(two.v);
            free(again.v);
        }
    /* micro-batches inside each device: 4 + 4 per device, against 4s on one */
    params one = one_device(PAR_NET, 4, POLICY_NONE);
    params two = devices(PAR_NET, "cpu,cpu", "equal", POLICY_NONE, 4, NULL);
    double rel = max_rel(&two, &one);
    ck_assert_msg(rel < STEPS_BOUND, "micro-batches of 4 on two devices: %.3g relative from one device", rel);
    free(one.v);
    free(two.v);
}
END_TEST

static Suite *parallel_suite(void)
{
    Suite *s = suite_create("parallel");
    TCase *unit = tcase_create("unit");
    tcase_add_test(unit, test_split);
    tcase_add_test(unit, test_backprop_update);
    suite_add_tcase(s, unit);
    TCase *inproc = tcase_create("devices");
    tcase_set_timeout(inproc, 300);
    tcase_add_test(inproc, test_two_devices);
    suite_add_tcase(s, inproc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(parallel_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
