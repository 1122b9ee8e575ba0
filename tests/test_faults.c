/* The paths that only a GPU's failures would take, run on the CPU device with the
 * test-only failure injection VDNN_FAULTS (vdnn/device.h), and the device helpers a
 * GPU session depends on:
 *  - an algorithm that cannot run is dropped with one notice line, the pass runs with
 *    the next algorithm that fits (the same results as running that one), no plan picks
 *    it again, the profiler gives it no time, and with no algorithm left that fits the
 *    step fails with a message that says so;
 *  - an asynchronous failure (a kernel that fails after it was issued) fails the step
 *    with the layer and pass that was running, stays with the device, fails a
 *    measurement instead of timing it, and is returned by device_destroy;
 *  - timed stream waits are counted, once, by device_take_wait_s;
 *  - device_fill_normal fills on the device, the same numbers as rng_normal_at;
 *  - a first layer whose device offers no backward-data algorithm (a table with "none"
 *    for that pass) plans, profiles and trains. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nets/planner/planner.h"
#include "tests/testnet.h"
#include "tests/tsan.h"
#include "vdnn/rng.h"

/* conv1 and conv3 have several algorithms; relu2 one. */
#define NET                                                                                                 \
    TN_HEAD "[convolutional]\nfilters = 4\nsize = 3\npad = 1\n[relu]\n[convolutional]\nfilters = 4\nsize = 3\n" \
            "pad = 1\n[maxpool]\nsize = 2\n[connected]\noutput = 4\n[softmax]\n"

static void faults(const char *spec)
{
    if (spec) setenv("VDNN_FAULTS", spec, 1);
    else unsetenv("VDNN_FAULTS");
}

static layer *named(net *n, const char *name)
{
    for (int i = 0; i < n->nlayers; i++)
        if (!strcmp(n->layers[i]->name, name)) return n->layers[i];
    ck_abort_msg("no layer %s", name);
    return NULL;
}

/* NET attached to a fresh device (created after VDNN_FAULTS was set), planned with the
 * largest-workspace algorithms (mode perf, nothing measured) or the smallest (mem). */
static net *attached(device **d, algo_mode a)
{
    net *n = tn_parse(NET, NULL);
    /* room for the largest workspaces too */
    device_options o = {.kind = DEVICE_CPU, .budget_bytes = (size_t)16 << 20, .threads = 1};
    ck_assert_msg(device_create(&o, d) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_msg(net_attach(n, *d) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_int_eq(net_plan_static(n, POLICY_NONE, a), VDNN_OK);
    return n;
}

/* The algorithm mode `a` picks for `pass` of layer `name` without measuring: its index,
 * and its name in `algo` (VDNN_FAULTS names algorithms). */
static int picked(algo_mode a, const char *name, int pass, char *algo, size_t len)
{
    device *d = NULL;
    faults(NULL);
    net *n = attached(&d, a);
    const layer *l = named(n, name);
    int idx = l->algo[pass];
    snprintf(algo, len, "%s", layer_algo_name(l, pass, idx));
    tn_free(n, d);
    return idx;
}

/* `steps` steps on seeded batches; losses into loss[] (may be NULL); the first failure. */
static vdnn_status steps(net *n, int count, double *loss)
{
    for (int k = 0; k < count; k++) {
        tn_batch b = tn_batch_make(n, n->input.n, 100 + (uint64_t)k);
        step_result r;
        vdnn_status st = net_train_step(n, b.x, b.y, b.items, n->train.learning_rate, &r);
        tn_batch_free(&b);
        if (st != VDNN_OK) return st;
        if (loss) loss[k] = r.loss_sum;
    }
    return VDNN_OK;
}

static int count_lines(const char *text, const char *what)
{
    int c = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what)) c++;
    return c;
}

/* The notices written while `f` was the notice stream. */
static char *notices_of(FILE *f)
{
    long len = ftell(f);
    char *s = calloc(1, (size_t)len + 1);
    ck_assert_ptr_nonnull(s);
    rewind(f);
    ck_assert_int_eq(fread(s, 1, (size_t)len, f), (size_t)len);
    return s;
}

START_TEST(test_algo_fallback)
{
    /* which algorithms perf takes without measuring, and what replaces them */
    char fwd[40], filt[40], spec[200];
    int failed_fwd = picked(ALGO_PERF, "conv3", PASS_FWD, fwd, sizeof fwd);
    int failed_filt = picked(ALGO_PERF, "conv3", PASS_BWD_FILTER, filt, sizeof filt);
    device *d = NULL;
    snprintf(spec, sizeof spec, "conv3:forward:%s,conv3:backward-filter:%s", fwd, filt);
    faults(spec);
    FILE *log = tmpfile();
    ck_assert_ptr_nonnull(log);
    FILE *old = vdnn_set_notice_stream(log);
    net *n = attached(&d, ALGO_PERF);
    double loss[3];
    vdnn_status st = steps(n, 3, loss);
    vdnn_set_notice_stream(old);
    ck_assert_msg(st == VDNN_OK, "training with %s: %s", spec, vdnn_errmsg());
    char *said = notices_of(log);
    fclose(log);
    /* one line per algorithm dropped, however many steps ran */
    ck_assert_msg(count_lines(said, "vdnn: notice: conv3: the forward algorithm") == 1 &&
                      count_lines(said, "vdnn: notice: conv3: the backward-filter algorithm") == 1 &&
                      count_lines(said, "\n") == 2,
                  "notices:\n%s", said);
    ck_assert_msg(strstr(said, fwd) && strstr(said, "runs instead"), "notices:\n%s", said);
    free(said);
    layer *l = named(n, "conv3");
    ck_assert(!layer_algo_usable(l, PASS_FWD, failed_fwd));
    ck_assert(!layer_algo_usable(l, PASS_BWD_FILTER, failed_filt));
    ck_assert_int_ne(l->algo[PASS_FWD], failed_fwd);
    int took_fwd = l->algo[PASS_FWD], took_filt = l->algo[PASS_BWD_FILTER];
    /* no plan takes them again */
    ck_assert_int_eq(net_plan_static(n, POLICY_NONE, ALGO_PERF), VDNN_OK);
    ck_assert_int_ne(l->algo[PASS_FWD], failed_fwd);
    ck_assert_int_ne(l->algo[PASS_BWD_FILTER], failed_filt);
    tn_free(n, d);

    /* the fallback computes what its algorithm computes when chosen outright */
    faults(NULL);
    n = attached(&d, ALGO_PERF);
    l = named(n, "conv3");
    l->algo[PASS_FWD] = took_fwd;
    l->algo[PASS_BWD_FILTER] = took_filt;
    double want[3];
    ck_assert_int_eq(steps(n, 3, want), VDNN_OK);
    for (int k = 0; k < 3; k++)
        ck_assert_msg(!memcmp(&want[k], &loss[k], sizeof want[k]), "step %d: loss %.17g after the fallback, %.17g "
                      "with its algorithm chosen", k + 1, loss[k], want[k]);
    tn_free(n, d);
}
END_TEST

/* The profiler times no algorithm that failed: a plan from its profile never takes it. */
START_TEST(test_profile_drops_failed_algo)
{
    char algo[40], spec[200];
    int failed = picked(ALGO_PERF, "conv1", PASS_FWD, algo, sizeof algo);
    device *d = NULL;
    net *n = attached(&d, ALGO_PERF);
    const layer *l = named(n, "conv1");
    snprintf(spec, sizeof spec, "conv1:forward:%s", algo);
    faults(spec);   /* the profiler's own device sees it */
    FILE *old = vdnn_set_notice_stream(NULL);
    profile pr;
    vdnn_status st = profile_measure(n, d, 0, 1, &pr);
    vdnn_set_notice_stream(old);
    ck_assert_msg(st == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_msg(pr.layers[0].fwd_s[failed] >= LAYER_UNMEASURED, "the failed algorithm has a time: %g",
                  pr.layers[0].fwd_s[failed]);
    ck_assert_int_ne(plan_choose_algo(l, PASS_FWD, ALGO_PERF, &pr.layers[0]), failed);
    profile_free(&pr);
    faults(NULL);
    tn_free(n, d);
}
END_TEST

/* The smallest-workspace algorithm fails and nothing else fits its workspace. */
START_TEST(test_algo_no_fallback)
{
    char algo[40], spec[200];
    picked(ALGO_MEM, "conv1", PASS_FWD, algo, sizeof algo);
    snprintf(spec, sizeof spec, "conv1:forward:%s", algo);
    faults(spec);
    device *d = NULL;
    net *n = attached(&d, ALGO_MEM);
    ck_assert_uint_eq(layer_workspace_bytes(named(n, "conv1"), PASS_FWD, named(n, "conv1")->algo[PASS_FWD]), 0);
    FILE *old = vdnn_set_notice_stream(NULL);
    vdnn_status st = steps(n, 1, NULL);
    vdnn_set_notice_stream(old);
    ck_assert_int_eq(st, VDNN_EDEVICE);
    tn_msg_has("conv1: the forward algorithm", "no other fits");
    faults(NULL);
    tn_free(n, d);
}
END_TEST

/* An asynchronous failure names the layer and pass, and stays. */
START_TEST(test_async_failure)
{
    static const struct { const char *spec, *where; } cases[] = {
        {"conv3:forward:async", "conv3, forward pass"},
        {"relu2:backward:async", "relu2, backward pass"},
    };
    for (int k = 0; k < 2; k++) {
        faults(cases[k].spec);
        device *d = NULL;
        net *n = attached(&d, ALGO_MEM);
        vdnn_status st = steps(n, 2, NULL);
        ck_assert_msg(st == VDNN_EDEVICE, "%s: step returned %d", cases[k].spec, (int)st);
        tn_msg_has(cases[k].where, "injected by VDNN_FAULTS");
        /* a failed device stays failed: the next step and every poll say so */
        ck_assert_int_eq(steps(n, 1, NULL), VDNN_EDEVICE);
        ck_assert_int_eq(device_poll(d), VDNN_EDEVICE);
        tn_msg_has("injected by VDNN_FAULTS", NULL);
        net_free(n);
        ck_assert_int_eq(device_destroy(d), VDNN_EDEVICE);
    }
    faults(NULL);
    /* no fault: destroy reports none */
    device *d = NULL;
    net *n = attached(&d, ALGO_MEM);
    ck_assert_int_eq(steps(n, 1, NULL), VDNN_OK);
    ck_assert_int_eq(device_poll(d), VDNN_OK);
    net_free(n);
    ck_assert_int_eq(device_destroy(d), VDNN_OK);
}
END_TEST

/* A layer pass that fails after it was issued is not a time: measuring fails. */
START_TEST(test_async_failure_while_measuring)
{
    device *d = NULL;
    faults(NULL);
    net *n = attached(&d, ALGO_MEM);
    faults("conv3:forward:async");
    profile pr;
    vdnn_status st = profile_measure(n, d, 0, 1, &pr);
    ck_assert_msg(st == VDNN_EDEVICE, "profile_measure returned %d", (int)st);
    tn_msg_has("measuring conv3", "injected by VDNN_FAULTS");
    faults(NULL);
    tn_free(n, d);
}
END_TEST

/* The compute stream's timed wait for a copy on a 50 MB/s link: counted once. */
START_TEST(test_timed_wait)
{
    faults(NULL);
    device_options o = {.kind = DEVICE_CPU, .budget_bytes = (size_t)4 << 20, .threads = 1, .link_gbps = 0.05};
    device *d = NULL;
    ck_assert_int_eq(device_create(&o, &d), VDNN_OK);
    const size_t bytes = (size_t)1 << 20;   /* 21 ms on the link */
    void *dev = NULL, *host = device_host_alloc(d, bytes);
    ck_assert_ptr_nonnull(host);
    memset(host, 1, bytes);
    ck_assert_int_eq(device_alloc(d, bytes, "test", "x", &dev), VDNN_OK);
    ck_assert_int_eq(device_copy(d, STREAM_MEMORY, dev, host, bytes, COPY_H2D), VDNN_OK);
    dev_event *ev = device_event_record(d, STREAM_MEMORY);
    ck_assert_int_eq(device_stream_wait_timed(d, STREAM_COMPUTE, ev), VDNN_OK);
    double w = device_take_wait_s(d);
    ck_assert_msg(w > 0.01 && w < 5, "waited %g s for a 21 ms copy", w);
    ck_assert_msg(device_take_wait_s(d) == 0, "a wait counted twice");
    /* an untimed wait is not counted */
    ck_assert_int_eq(device_copy(d, STREAM_MEMORY, dev, host, bytes, COPY_H2D), VDNN_OK);
    dev_event *ev2 = device_event_record(d, STREAM_MEMORY);
    ck_assert_int_eq(device_stream_wait(d, STREAM_COMPUTE, ev2), VDNN_OK);
    ck_assert_msg(device_take_wait_s(d) == 0, "an untimed wait was counted");
    device_event_release(d, ev);
    device_event_release(d, ev2);
    device_free(d, dev);
    device_host_free(d, host);
    ck_assert_int_eq(device_destroy(d), VDNN_OK);
}
END_TEST

START_TEST(test_fill_normal)
{
    faults(NULL);
    const size_t count = (size_t)1 << 20;
    /* two threads fill halves each (one under ThreadSanitizer: libgomp's barriers) */
    device_options o = {.kind = DEVICE_CPU, .budget_bytes = 2 * count * sizeof(float) + 4096,
                        .threads = UNDER_TSAN ? 1 : 2};
    device *d = NULL;
    ck_assert_int_eq(device_create(&o, &d), VDNN_OK);
    float *a = NULL, *b = NULL;
    ck_assert_int_eq(device_alloc(d, count * sizeof(float), "test", "a", (void **)&a), VDNN_OK);
    ck_assert_int_eq(device_alloc(d, count * sizeof(float), "test", "b", (void **)&b), VDNN_OK);
    ck_assert_int_eq(device_fill_normal(d, a, count, 5), VDNN_OK);
    ck_assert_int_eq(device_fill_normal(d, b, count, 6), VDNN_OK);
    double sum = 0, sq = 0;
    size_t same = 0;
    for (size_t k = 0; k < count; k++) {
        ck_assert_msg(a[k] == rng_normal_at(5, k), "element %zu: %g, rng_normal_at gives %g", k, a[k],
                      rng_normal_at(5, k));
        sum += a[k];
        sq += (double)a[k] * a[k];
        same += a[k] == b[k];
    }
    double mean = sum / count, var = sq / count - mean * mean;
    ck_assert_msg(fabs(mean) < 0.01 && fabs(var - 1) < 0.02, "mean %g, variance %g", mean, var);
    ck_assert_msg(same < 16, "seeds 5 and 6 agree on %zu elements", same);
    device_free(d, a);
    device_free(d, b);
    device_destroy(d);
}
END_TEST

/* A first convolution whose device offers no backward-data algorithm: its table says
 * "none" for that pass, and the net plans, measures and trains. */
START_TEST(test_first_layer_without_bwd_data)
{
    faults(NULL);
    device *d = NULL;
    net *n = attached(&d, ALGO_MEM);
    layer *first = named(n, "conv1"), *later = named(n, "conv3");
    ck_assert(!layer_pass_runs(first, PASS_BWD_DATA));
    ck_assert(layer_pass_runs(first, PASS_FWD) && layer_pass_runs(first, PASS_BWD_FILTER));
    ck_assert(layer_pass_runs(later, PASS_BWD_DATA));
    layer_algos *t = calloc(1, sizeof *t);
    ck_assert_ptr_nonnull(t);
    for (int p = 0; p < PASS_COUNT; p++) {
        t->count[p] = layer_algo_count(first, p);
        for (int a = 0; a < t->count[p]; a++) {
            snprintf(t->a[p][a].name, sizeof t->a[p][a].name, "%s", layer_algo_name(first, p, a));
            t->a[p][a].workspace_bytes = layer_workspace_bytes(first, p, a);
            t->a[p][a].id = a;
            t->a[p][a].deterministic = 1;
        }
    }
    layer_table_none(t, PASS_BWD_DATA);
    first->algos = t;
    ck_assert_int_eq(layer_algo_count(first, PASS_BWD_DATA), 1);
    ck_assert_str_eq(layer_algo_name(first, PASS_BWD_DATA, 0), "none");
    ck_assert_uint_eq(layer_workspace_bytes(first, PASS_BWD_DATA, 0), 0);
    for (int a = 0; a < ALGO_MODE_COUNT; a++) {
        ck_assert_int_eq(net_plan_static(n, POLICY_ALL, (algo_mode)a), VDNN_OK);
        ck_assert_int_eq(first->algo[PASS_BWD_DATA], 0);
        ck_assert_msg(steps(n, 2, NULL) == VDNN_OK, "%s", vdnn_errmsg());
    }
    profile pr;
    ck_assert_msg(profile_measure(n, d, 0, 1, &pr) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert(pr.layers[0].bwd_data_s[0] == 0);
    ck_assert(pr.layers[0].fwd_s[0] > 0 && pr.layers[0].fwd_s[0] < 1);
    profile_free(&pr);
    size_t need = 0;
    ck_assert_int_eq(net_min_budget(n, &need), VDNN_OK);
    ck_assert_uint_gt(need, 0);
    tn_free(n, d);
}
END_TEST

/* `vdnn train` says it dropped an algorithm, on stderr, and trains on; its log says how
 * long planning took. */
START_TEST(test_cli_notice)
{
    faults(NULL);
    char dir[256], cfg[512], args[1024];
    tn_tmpdir(dir, sizeof dir, "faults");
    tn_write_text(tn_join(cfg, sizeof cfg, dir, "t.cfg"), NET);
    char env[300], algo[40];
    picked(ALGO_PERF, "conv1", PASS_FWD, algo, sizeof algo);
    /* a cache of its own: the profile is measured, and the algorithm fails there */
    snprintf(env, sizeof env, "VDNN_CACHE='%s/cache' VDNN_FAULTS='*:forward:%s'", dir, algo);
    char log[600];
    tn_join(log, sizeof log, dir, "log.jsonl");
    snprintf(args, sizeof args, "train %s --device cpu --steps 2 --algo perf --log %s", cfg, log);
    tn_run r = tn_vdnn(dir, env, args);
    tn_run_ok(&r, args);
    /* the log's first line: how long planning (here: measuring the profile) took */
    char *text = tn_read(log, NULL);
    ck_assert_msg(text && !strncmp(text, "{\"plan_s\": ", 11) && strtod(text + 11, NULL) > 0, "log:\n%s", text);
    free(text);
    ck_assert_msg(strstr(r.err, "vdnn: notice: conv1: the forward algorithm") &&
                      strstr(r.err, "vdnn: notice: conv3: the forward algorithm"),
                  "stderr:\n%s", r.err);
    tn_run_free(&r);
    tn_rmtree(dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("faults");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_algo_fallback);
    tcase_add_test(tc, test_profile_drops_failed_algo);
    tcase_add_test(tc, test_algo_no_fallback);
    tcase_add_test(tc, test_async_failure);
    tcase_add_test(tc, test_async_failure_while_measuring);
    tcase_add_test(tc, test_timed_wait);
    tcase_add_test(tc, test_fill_normal);
    tcase_add_test(tc, test_first_layer_without_bwd_data);
    tcase_add_test(tc, test_cli_notice);
    suite_add_tcase(s, tc);
    return tn_run_suite(s);
}
