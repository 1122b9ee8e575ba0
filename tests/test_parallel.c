/* Check suite for data-parallel training (nets/parallel/parallel.c, vdnn/comm.c) on the CPU
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

#include "nets/checkpoint.h"
#include "nets/parallel/parallel.h"
#include "tests/testnet.h"
#include "tests/tsan.h"

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
static vdnn_status plan_split_replica(void *ctx, net **np, const int (*algos)[PASS_COUNT])
{
    (void)algos;   /* smallest workspaces: the same at every share */
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
    dp_opts o = {.devices = list, .shares = shares, .share_every = 5, .bucket_bytes = 1024, .plan = plan_split_replica,
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

/* For the adaptive shares: maps large enough that a step's time grows with its items
 * (on tiny maps a layer pass's fixed cost dominates, and the fastest split gives the
 * slow device nothing). */
#define WIDE_NET                                                                                        \
    "[net]\nbatch = 16\nchannels = 3\nheight = 24\nwidth = 24\n"                                        \
    "[train]\nepochs = 1\nlearning_rate = 0.02\nmomentum = 0.9\nseed = 7\n"                             \
    "[data]\nset = synthetic\ntrain_size = 256\ntest_size = 32\nclasses = 4\n"                          \
    "[convolutional]\nfilters = 16\nsize = 3\npad = 1\nalgo = im2col\n[relu]\n"                          \
    "[convolutional]\nfilters = 16\nsize = 3\npad = 1\nalgo = im2col\n[relu]\n[maxpool]\nsize = 4\n"     \
    "[connected]\noutput = 4\n[softmax]\n"

/* Adaptive shares: with one device slowed 2.5x (the VDNN_SLOWDOWN knob) items move to
 * the other until their step times even out (about 11.4:4.6, a little more to the fast
 * one for what does not slow down); with equal devices they stay where they are. */
START_TEST(test_adaptive_shares)
{
    if (UNDER_SANITIZER) {
        printf("SKIPPED: adaptive shares follow timings, which a sanitizer bends (make test runs it)\n");
        return;
    }
    int shares[2];
    setenv("VDNN_SLOWDOWN", "1,2.5", 1);
    params p = devices_steps(WIDE_NET, "cpu,cpu", "auto", POLICY_NONE, 0, shares, 30);
    free(p.v);
    unsetenv("VDNN_SLOWDOWN");
    printf("adaptive shares, device 1 slowed 2.5x: %d:%d after 30 steps\n", shares[0], shares[1]);
    fflush(stdout);
    /* 11:5 or 12:4 on a quiet machine; a busy one (the two devices' threads share two
     * cores with whatever else runs) has given 13:3, one item further: the check allows
     * that item and no more, and still fails if items do not move or all move */
    double ratio = shares[1] ? (double)shares[0] / shares[1] : 1e9;
    ck_assert_msg(shares[0] + shares[1] == 16 && ratio >= 1.9 && ratio <= 13.0 / 3 + 1e-9,
                  "shares %d:%d for a device 2.5x slower", shares[0], shares[1]);
    /* equal devices stay put; a machine busy with something else for two windows in a
     * row really does slow one device's thread, and may move one item */
    p = devices_steps(WIDE_NET, "cpu,cpu", "auto", POLICY_NONE, 0, shares, 30);
    free(p.v);
    ck_assert_msg(shares[0] + shares[1] == 16 && abs(shares[0] - shares[1]) <= 2, "equal devices moved to %d:%d",
                  shares[0], shares[1]);
}
END_TEST

START_TEST(test_launch_without_mpi)
{
    ck_assert_int_eq(comm_check_launch(1, 0), VDNN_OK);
    ck_assert_int_eq(comm_check_launch(4, 1), VDNN_OK);
    ck_assert_int_eq(comm_check_launch(2, 0), VDNN_EINVAL);
    tn_msg_has("launched as 2 ranks", "built without MPI");
}
END_TEST

/* ---- the command line ---- */

/* `vdnn ARGS` (with `env`), which must exit 0. */
static void vdnn_ok(const char *env, const char *args)
{
    tn_run r = tn_vdnn(tn_dir, env, args);
    tn_run_ok(&r, args);
    tn_run_free(&r);
}

/* `vdnn ARGS`, which must fail with a message holding a and b. */
static void vdnn_fails(const char *env, const char *args, const char *a, const char *b)
{
    tn_run r = tn_vdnn(tn_dir, env, args);
    ck_assert_msg(r.status != 0, "`%s` exited 0", args);
    ck_assert_msg(strstr(r.err, a) && (!b || strstr(r.err, b)), "`%s`: stderr lacks '%s'%s%s:\n%s", args, a,
                  b ? " or " : "", b ? b : "", r.err);
    tn_run_free(&r);
}

static const char *par_cfg(void)
{
    static char path[512];
    tn_path(path, sizeof path, "par.cfg");
    if (!tn_exists(path)) tn_write_text(path, PAR_NET);
    return path;
}

START_TEST(test_cli_devices)
{
    char args[2048], a[512], b[512], c[512], d[512];
    const char *cfg = par_cfg();
    tn_path(a, sizeof a, "a.ckpt");
    tn_path(b, sizeof b, "b.ckpt");
    tn_path(c, sizeof c, "c.ckpt");
    tn_path(d, sizeof d, "d.ckpt");
    /* the same job twice: the same bytes; 10 steps, or 6 and 4 resumed, too */
    snprintf(args, sizeof args, "train %s --devices cpu,cpu --shares 3,1 --threads 1 --steps 10 --save %s --quiet",
             cfg, a);
    vdnn_ok("", args);
    snprintf(args, sizeof args, "train %s --devices cpu,cpu --shares 3,1 --threads 1 --steps 10 --save %s --quiet",
             cfg, b);
    vdnn_ok("", args);
    ck_assert(tn_same_file(a, b));
    snprintf(args, sizeof args, "train %s --devices cpu,cpu --shares 3,1 --threads 1 --steps 6 --save %s --quiet",
             cfg, c);
    vdnn_ok("", args);
    snprintf(args, sizeof args, "train %s --devices cpu,cpu --shares 3,1 --threads 1 --steps 4 --resume %s --save %s "
             "--quiet", cfg, c, d);
    vdnn_ok("", args);
    ck_assert_msg(tn_same_file(a, d), "two devices, resumed: not the bytes of the run in one go");
    /* one device's checkpoint resumes on two, and two's on one */
    snprintf(args, sizeof args, "train %s --threads 1 --steps 6 --save %s --quiet --algo mem", cfg, c);
    vdnn_ok("", args);
    snprintf(args, sizeof args, "train %s --devices cpu,cpu --threads 1 --steps 4 --resume %s --save %s --quiet "
             "--algo mem", cfg, c, d);
    vdnn_ok("", args);
    net *n = tn_parse(PAR_NET, NULL);
    device *dev = tn_device_for(n);
    ck_assert_int_eq(net_attach(n, dev), VDNN_OK);
    ckpt_state st;
    ck_assert_msg(checkpoint_load(n, d, &st, 0) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_uint_eq(st.step, 10);
    snprintf(args, sizeof args, "train %s --devices cpu,cpu --threads 1 --steps 6 --save %s --quiet", cfg, c);
    vdnn_ok("", args);
    snprintf(args, sizeof args, "train %s --threads 1 --steps 4 --resume %s --save %s --quiet", cfg, c, d);
    vdnn_ok("", args);
    ck_assert_int_eq(checkpoint_load(n, d, &st, 0), VDNN_OK);
    ck_assert_uint_eq(st.step, 10);
    tn_free(n, dev);
    /* the log has each step's shares */
    char log[512];
    tn_path(log, sizeof log, "log.json");
    snprintf(args, sizeof args, "train %s --devices cpu,cpu --shares 3,1 --threads 1 --steps 2 --log %s --quiet", cfg,
             log);
    vdnn_ok("", args);
    char *text = tn_read(log, NULL);
    ck_assert_msg(text && strstr(text, "\"shares\": [12, 4]") && strstr(text, "\"reduce_exposed_ms\""), "%s",
                  text ? text : "(no log)");
    free(text);
}
END_TEST

START_TEST(test_cli_device_errors)
{
    char args[1024];
    const char *cfg = par_cfg();
    snprintf(args, sizeof args, "train %s --devices cpu,cpu --shares 1 --steps 1", cfg);
    vdnn_fails("", args, "--shares 1", "1 shares for the job's 2 devices");
    snprintf(args, sizeof args, "train %s --devices cpu,cpu --shares 1,2,3 --steps 1", cfg);
    vdnn_fails("", args, "more shares than the job's 2 devices", NULL);
    snprintf(args, sizeof args, "train %s --devices cpu,cpu --shares 0,0 --steps 1", cfg);
    vdnn_fails("", args, "every share is 0", NULL);
    snprintf(args, sizeof args, "train %s --devices cpu,cpu --shares x,1 --steps 1", cfg);
    vdnn_fails("", args, "'x,1' is not a share", NULL);
    snprintf(args, sizeof args, "train %s --devices cpu,tpu --steps 1", cfg);
    vdnn_fails("", args, "--devices: 'tpu'", NULL);
    snprintf(args, sizeof args, "train %s --shares 1,1 --steps 1", cfg);
    vdnn_fails("", args, "--shares", "data-parallel training");
    snprintf(args, sizeof args, "train %s --devices cpu,cpu --batch 1 --steps 1", cfg);
    vdnn_fails("", args, "2 devices for a batch of 1", NULL);
    snprintf(args, sizeof args, "train %s --devices cpu,cpu --budget 64K --steps 1", cfg);
    vdnn_fails("", args, "fit", "--budget");
    snprintf(args, sizeof args, "train %s --devices cpu,cpu --plan x.plan --steps 1", cfg);
    vdnn_fails("", args, "--plan", "each plans its own share");
}
END_TEST

/* ---- several processes (mpirun) ---- */

#define MPI_ENV "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ASAN_OPTIONS=\"$ASAN_OPTIONS:detect_leaks=0\""

/* Whether mpirun can be used here; prints the SKIPPED line when not. */
static int have_mpirun(const char *check)
{
    const char *why = NULL;
    if (UNDER_TSAN) why = "ThreadSanitizer reports Open MPI's own threads";
    else if (!comm_built()) why = "this build has no MPI (libopenmpi-dev)";
    else if (system("command -v mpirun > /dev/null 2>&1") != 0) why = "mpirun is not installed (openmpi-bin)";
    if (why) printf("SKIPPED: %s: %s\n", check, why);
    return why == NULL;
}

static const char *vdnn_bin(void)
{
    const char *bin = getenv("VDNN_BIN");
    return bin && *bin ? bin : "build/vdnn";
}

/* `mpirun -np N vdnn ARGS` (with `env`), its status. */
static tn_run mpirun(int ranks, const char *env, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s mpirun --oversubscribe -np %d %s %s", MPI_ENV, env, ranks, vdnn_bin(), args);
    return tn_shell(tn_dir, cmd);
}

START_TEST(test_mpi_same_as_devices)
{
    if (!have_mpirun("test_mpi_same_as_devices")) return;
    const char *cfg = par_cfg();
    static const char *const shares[] = {"equal", "3,1"};
    for (int k = 0; k < 2; k++) {
        char args[2048], a[512], b[512];
        tn_path(a, sizeof a, "in-process.ckpt");
        tn_path(b, sizeof b, "ranks.ckpt");
        snprintf(args, sizeof args, "train %s --devices cpu,cpu --shares %s --threads 1 --steps 8 --save %s --quiet",
                 cfg, shares[k], a);
        vdnn_ok("", args);
        snprintf(args, sizeof args, "train %s --devices cpu --shares %s --threads 1 --steps 8 --save %s --quiet", cfg,
                 shares[k], b);
        tn_run r = mpirun(2, "", args);
        ck_assert_msg(r.status == 0, "mpirun: exit %d\n%s", r.status, r.err);
        tn_run_free(&r);
        ck_assert_msg(tn_same_file(a, b), "shares %s: two ranks differ from two devices in one process", shares[k]);
    }
}
END_TEST

START_TEST(test_mpi_faults)
{
    if (!have_mpirun("test_mpi_faults")) return;
    const char *cfg = par_cfg();
    char args[2048], ck[512];
    tn_path(ck, sizeof ck, "k.ckpt");
    /* killed after its first epoch's checkpoint (16 steps an epoch): the job stops, the
     * checkpoint loads */
    snprintf(args, sizeof args, "train %s --devices cpu --threads 1 --epochs 3 --save %s --quiet --rank-timeout 20",
             cfg, ck);
    double t0 = vdnn_now_s();
    tn_run r = mpirun(2, "VDNN_TEST_RANK_FAULT=1:20:die", args);
    ck_assert_msg(r.status != 0, "a rank was killed, and mpirun exited 0");
    ck_assert_msg(vdnn_now_s() - t0 < 60, "the job took %.0f s to stop", vdnn_now_s() - t0);
    tn_run_free(&r);
    net *n = tn_parse(PAR_NET, NULL);
    device *d = tn_device_for(n);
    ck_assert_int_eq(net_attach(n, d), VDNN_OK);
    ckpt_state st;
    ck_assert_msg(checkpoint_load(n, ck, &st, 0) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_uint_eq(st.step, 16);
    /* a rank that hangs: the other gives up after --rank-timeout, naming it */
    snprintf(args, sizeof args, "train %s --devices cpu --threads 1 --epochs 3 --save %s --quiet --rank-timeout 3",
             cfg, ck);
    t0 = vdnn_now_s();
    r = mpirun(2, "VDNN_TEST_RANK_FAULT=1:20:hang", args);
    ck_assert_msg(r.status != 0, "a rank hung, and mpirun exited 0");
    ck_assert_msg(strstr(r.err, "rank 1") && strstr(r.err, "died or hangs"), "%s", r.err);
    ck_assert_msg(vdnn_now_s() - t0 < 60, "the job took %.0f s to stop", vdnn_now_s() - t0);
    tn_run_free(&r);
    ck_assert_msg(checkpoint_load(n, ck, &st, 0) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_uint_eq(st.step, 16);
    /* SIGTERM to rank 1 alone: both ranks stop after the same step, the checkpoint saved */
    snprintf(args, sizeof args, "train %s --devices cpu --threads 1 --epochs 3 --save %s --rank-timeout 20", cfg, ck);
    r = mpirun(2, "VDNN_TEST_RANK_FAULT=1:20:term", args);
    ck_assert_msg(r.status != 0, "a rank was interrupted, and mpirun exited 0");
    ck_assert_msg(strstr(r.err, "interrupted") && !strstr(r.err, "died or hangs"), "%s", r.err);
    tn_run_free(&r);
    ck_assert_msg(checkpoint_load(n, ck, &st, 0) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_uint_eq(st.step, 20);
    tn_free(n, d);
    /* ranks that disagree: refused before any step */
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s mpirun --oversubscribe -np 1 %s train %s --devices cpu --steps 2 --lr 0.1 : "
             "-np 1 %s train %s --devices cpu --steps 2 --lr 0.2", MPI_ENV, vdnn_bin(), cfg, vdnn_bin(), cfg);
    r = tn_shell(tn_dir, cmd);
    ck_assert_msg(r.status != 0, "ranks with other learning rates trained");
    ck_assert_msg(strstr(r.err, "learning_rate = 0.2") && strstr(r.err, "learning_rate = 0.1"), "%s", r.err);
    tn_run_free(&r);
}
END_TEST

static Suite *parallel_suite(void)
{
    Suite *s = suite_create("parallel");
    TCase *unit = tcase_create("unit");
    tcase_add_test(unit, test_split);
    tcase_add_test(unit, test_backprop_update);
    suite_add_tcase(s, unit);
    tcase_add_test(unit, test_launch_without_mpi);
    TCase *inproc = tcase_create("devices");
    tcase_set_timeout(inproc, 300);
    tcase_add_test(inproc, test_two_devices);
    tcase_add_test(inproc, test_adaptive_shares);
    suite_add_tcase(s, inproc);
    TCase *cli = tcase_create("cli");
    tcase_set_timeout(cli, 300);
    tcase_add_checked_fixture(cli, tn_dir_setup, tn_dir_teardown);
    tcase_add_test(cli, test_cli_devices);
    tcase_add_test(cli, test_cli_device_errors);
    tcase_add_test(cli, test_mpi_same_as_devices);
    tcase_add_test(cli, test_mpi_faults);
    suite_add_tcase(s, cli);
    return s;
}

int main(void) { return tn_run_suite(parallel_suite()); }
