/* Check suite for the CUDA backend (vdnn/device_cuda.c, the layers' .cu halves, nets/solver.cu),
 * tested against the CPU backend, which the other suites test against references:
 *
 *  - without a GPU (or without CUDA in the build): a CUDA device cannot be created, the
 *    error says why, `vdnn train --device cuda` exits 1 with that message and
 *    `--device auto` trains on the CPU; with a GPU, a GPU that does not exist is refused
 *    and `--device auto` trains on the GPU;
 *  - the device: pool memory, copies in every direction on both streams ordered by
 *    events, pinned host memory, frees after an event and the budget;
 *  - every layer type, built twice with the same parameters, once on the CPU and once on
 *    the GPU: forward, backward (with and without dx) and gradient accumulation agree
 *    within a tolerance stated per layer, for every convolution algorithm cuDNN offers
 *    (deterministic, nondeterministic and TF32), at the full batch and a short one;
 *  - on the GPU: policy invariance (bit-identical losses and parameters under none, all,
 *    conv, swap and recompute), the exact minimum budget, a loss that falls, and three
 *    steps that agree with the CPU.
 *
 * Every check that needs a GPU prints one line "SKIPPED: <check>: <reason>" when the
 * build has no CUDA or no GPU is visible, and asserts nothing (tests/run.sh counts it as
 * skipped). Checks run in forked children, and only they touch CUDA: a process that
 * has initialised CUDA cannot hand it to the children it forks. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data.h"
#include "layers/conv.h"
#include "layers/layer.h"
#include "nets/net.h"
#include "nets/planner/planner.h"
#include "nets/trainer.h"
#include "tests/gradcheck.h"
#include "tests/testnet.h"
#include "vdnn/config.h"
#include "vdnn/device.h"
#include "vdnn/mempool.h"
#include "vdnn/rng.h"

/* Room for the layer checks: the largest workspace cuDNN reports for these small
 * shapes (FFT included) is far below it. */
#define LAYER_GPU_BUDGET ((size_t)1 << 30)
#define LAYER_CPU_BUDGET ((size_t)64 << 20)
/* Room for the small nets under any policy and the largest-workspace algorithms. */
#define NET_GPU_BUDGET ((size_t)256 << 20)
/* Written into outputs and gradients before a pass, so that a pass that leaves part of
 * them unwritten, or adds to a gradient it should overwrite, shows. */
#define GARBAGE 1000.0f

/* ---- skipping ---- */

/* Why GPU checks cannot run here, or NULL when they can. */
static const char *no_gpu_reason(void)
{
    if (!device_cuda_built()) return "this build has no CUDA backend (nvcc, cuDNN or cuBLAS not found, or CUDA=0)";
    if (device_cuda_count() == 0) {
        /* A driver older than the CUDA runtime this was built with also shows as no GPU:
         * what `vdnn devices` says (driver present or missing, the CUDA it supports)
         * tells the two apart on a machine that does have one. */
        static char why[600];
        char *report = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&report, &len);
        if (f) {
            device_cuda_report(f);
            fclose(f);
        }
        int at = snprintf(why, sizeof why, "no CUDA GPU is visible (device_cuda_count() == 0");
        for (char *line = report ? strtok(report, "\n") : NULL; line && at < (int)sizeof why;
             line = strtok(NULL, "\n"))
            at += snprintf(why + at, sizeof why - (size_t)at, "; %s", line);
        if (at < (int)sizeof why) snprintf(why + at, sizeof why - (size_t)at, ")");
        free(report);
        return why;
    }
    return NULL;
}

/* Prints the SKIPPED line and returns 1 when `check` cannot run. */
static int skip_without_gpu(const char *check)
{
    const char *why = no_gpu_reason();
    if (!why) return 0;
    printf("SKIPPED: %s: %s\n", check, why);
    fflush(stdout);
    return 1;
}

/* ---- devices and memory ---- */

static device *make_gpu(size_t budget, int tf32, int nondeterministic)
{
    device_options o = {.kind = DEVICE_CUDA, .cuda_index = 0, .budget_bytes = budget, .tf32 = tf32,
                        .nondeterministic = nondeterministic};
    device *d = NULL;
    vdnn_status st = device_create(&o, &d);
    ck_assert_msg(st == VDNN_OK, "device_create(cuda, %zu bytes, tf32 %d, nondeterministic %d): %s", budget, tf32,
                  nondeterministic, vdnn_errmsg());
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(device_get_kind(d), DEVICE_CUDA);
    return d;
}

static device *make_cpu(size_t budget)
{
    device_options o = {.kind = DEVICE_CPU, .budget_bytes = budget, .threads = 1};
    device *d = NULL;
    ck_assert_msg(device_create(&o, &d) == VDNN_OK, "device_create(cpu): %s", vdnn_errmsg());
    return d;
}

static void *dev_alloc(device *d, size_t bytes, const char *what)
{
    void *p = NULL;
    vdnn_status st = device_alloc(d, bytes, "test", what, &p);
    ck_assert_msg(st == VDNN_OK, "device_alloc(%s, %zu bytes): %s", what, bytes, vdnn_errmsg());
    ck_assert_ptr_nonnull(p);
    return p;
}

static void put(device *d, void *dev, const void *host, size_t bytes)
{
    vdnn_status st = device_upload(d, dev, host, bytes);
    ck_assert_msg(st == VDNN_OK, "device_upload(%zu bytes): %s", bytes, vdnn_errmsg());
}

/* A host copy of `count` floats of device memory; free() it. */
static float *get(device *d, const float *dev, size_t count)
{
    float *h = malloc((count ? count : 1) * sizeof *h);
    ck_assert_ptr_nonnull(h);
    vdnn_status st = device_download(d, h, dev, count * sizeof *h);
    ck_assert_msg(st == VDNN_OK, "device_download(%zu floats): %s", count, vdnn_errmsg());
    return h;
}

static void fill_value(device *d, float *dev, size_t count, float v)
{
    float *h = malloc((count ? count : 1) * sizeof *h);
    ck_assert_ptr_nonnull(h);
    for (size_t i = 0; i < count; i++) h[i] = v;
    put(d, dev, h, count * sizeof *h);
    free(h);
}

static float *uniform(size_t count, float lo, float hi, uint64_t seed)
{
    float *h = malloc((count ? count : 1) * sizeof *h);
    ck_assert_ptr_nonnull(h);
    rng r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < count; i++) h[i] = lo + (hi - lo) * rng_uniform(&r);
    return h;
}

/* The comparison every check here makes: max |got - want| <= tol * (1 + max |want|), a
 * norm-wise error, since single entries of a sum may cancel to near zero. */
static void expect_close(const char *what, const float *got, const float *want, size_t count, double tol)
{
    double scale = 0, worst = -1;
    size_t at = 0;
    for (size_t i = 0; i < count; i++) scale = fmax(scale, fabs((double)want[i]));
    for (size_t i = 0; i < count; i++) {
        double e = fabs((double)got[i] - (double)want[i]);
        if (!(e <= worst)) {   /* a NaN is the worst of all */
            worst = isnan(e) ? INFINITY : e;
            at = i;
        }
    }
    ck_assert_msg(count == 0 || worst <= tol * (1 + scale),
                  "%s: [%zu] is %.9g on the GPU, %.9g on the CPU (error %.3g > %.3g = %g * (1 + max |cpu| %.4g))",
                  what, at, got[at], want[at], worst, tol * (1 + scale), tol, scale);
}

/* ---- (a) without a GPU ---- */

/* Whether a message says that there is no GPU or no CUDA support. */
static int says_no_gpu(const char *msg)
{
    static const char *const phrases[] = {"no cuda", "no gpu", "without cuda", "cuda-capable",
                                          "not part of this build", "no device"};
    if (!strcasestr(msg, "cuda") && !strcasestr(msg, "gpu")) return 0;
    for (size_t i = 0; i < sizeof phrases / sizeof *phrases; i++)
        if (strcasestr(msg, phrases[i])) return 1;
    return 0;
}

START_TEST(test_without_gpu)
{
    char dir[256], cfg[512], args[1024];
    tn_tmpdir(dir, sizeof dir, "test_cuda");
    tn_write_text(tn_join(cfg, sizeof cfg, dir, "t.cfg"), TN_SMALL);
    int count = device_cuda_count();
    ck_assert_int_ge(count, 0);
    if (!device_cuda_built()) ck_assert_int_eq(count, 0);
    device_options o = {.kind = DEVICE_CUDA, .cuda_index = count, .budget_bytes = (size_t)1 << 20};
    device *d = (device *)&d;
    vdnn_status st = device_create(&o, &d);
    if (count == 0) {
        /* No GPU: the CUDA device is refused, with a reason a user can act on. */
        ck_assert_msg(st == VDNN_EDEVICE, "device_create(cuda) without a GPU returned %d: %s", (int)st,
                      st == VDNN_OK ? "(no message)" : vdnn_errmsg());
        ck_assert_ptr_null(d);
        ck_assert_msg(says_no_gpu(vdnn_errmsg()), "message '%s' does not say there is no GPU or no CUDA support",
                      vdnn_errmsg());
        static const char *const devs[] = {"cuda", "cuda:0"};
        for (int i = 0; i < 2; i++) {
            snprintf(args, sizeof args, "train %s --device %s --steps 1", cfg, devs[i]);
            tn_run r = tn_vdnn(dir, "", args);
            ck_assert_msg(r.status == 1, "`vdnn %s` exited %d without a GPU; stderr:\n%s", args, r.status, r.err);
            ck_assert_msg(strstr(r.err, "vdnn: ") && says_no_gpu(r.err),
                          "`vdnn %s` does not say there is no GPU; stderr:\n%s", args, r.err);
            tn_run_free(&r);
        }
    } else {
        /* A GPU: one index past the last is refused. */
        ck_assert_msg(st != VDNN_OK, "device_create(cuda:%d) succeeded with %d GPUs", count, count);
        ck_assert_ptr_null(d);
        ck_assert_msg(strcasestr(vdnn_errmsg(), "cuda") != NULL, "message '%s' does not mention CUDA", vdnn_errmsg());
        snprintf(args, sizeof args, "train %s --device cuda:%d --steps 1", cfg, count);
        tn_run r = tn_vdnn(dir, "", args);
        ck_assert_msg(r.status == 1 && strstr(r.err, "vdnn: "), "`vdnn %s` exited %d; stderr:\n%s", args, r.status,
                      r.err);
        tn_run_free(&r);
    }
    /* auto: the GPU when there is one, else the CPU (tests/run.sh sets VDNN_DEVICE=cpu,
     * which `auto` obeys: cleared here). */
    snprintf(args, sizeof args, "train %s --device auto --steps 1", cfg);
    tn_run r = tn_vdnn(dir, "VDNN_DEVICE=", args);
    tn_run_ok(&r, args);
    const char *on = strstr(r.out, " on ");
    ck_assert_msg(on != NULL, "`vdnn %s` printed no 'training ... on DEVICE' line:\n%s", args, r.out);
    if (count == 0)
        ck_assert_msg(!strncmp(on, " on cpu", 7), "`vdnn %s` without a GPU did not train on the CPU:\n%s", args, r.out);
    else
        ck_assert_msg(strncmp(on, " on cpu", 7) != 0, "`vdnn %s` trained on the CPU with %d GPUs:\n%s", args, count,
                      r.out);
    tn_run_free(&r);
    tn_rmtree(dir);
}
END_TEST

/* ---- (b) the device ---- */

/* A byte pattern that differs per position and seed. */
static void pattern(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)((i * 2654435761u + seed * 40503u) >> 7);
}

/* Index of the first byte that differs from pattern(.., seed), or n. */
static size_t first_mismatch(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)((i * 2654435761u + seed * 40503u) >> 7)) return i;
    return n;
}

START_TEST(test_device)
{
    if (skip_without_gpu("test_device")) return;
    const size_t budget = (size_t)16 << 20, n = (size_t)3 << 20;
    device *d = make_gpu(budget, 0, 0);
    ck_assert_msg(strcasestr(device_model(d), "cuda") != NULL, "device_model '%s' does not say cuda", device_model(d));
    ck_assert_msg(device_describe(d)[0] != 0, "device_describe is empty");
    pool_stats ps;
    pool_get_stats(device_pool(d), &ps);
    ck_assert_uint_eq(ps.capacity_bytes, budget);
    ck_assert_uint_eq(ps.used_bytes, 0);

    /* host -> x on the memory stream; the compute stream waits for it and copies x -> y;
     * the memory stream waits for that and copies y -> host: each link is an event. */
    unsigned char *h = device_host_alloc(d, n), *back = device_host_alloc(d, n);
    ck_assert(h && back);
    pattern(h, n, 1);
    memset(back, 0, n);
    unsigned char *x = dev_alloc(d, n, "x"), *y = dev_alloc(d, n, "y");
    ck_assert(x + n <= y || y + n <= x);
    ck_assert_int_eq(device_copy(d, STREAM_MEMORY, x, h, n, COPY_H2D), VDNN_OK);
    dev_event *e1 = device_event_record(d, STREAM_MEMORY);
    ck_assert_ptr_nonnull(e1);
    device_stream_wait(d, STREAM_COMPUTE, e1);
    ck_assert_int_eq(device_copy(d, STREAM_COMPUTE, y, x, n, COPY_D2D), VDNN_OK);
    dev_event *e2 = device_event_record(d, STREAM_COMPUTE);
    ck_assert_ptr_nonnull(e2);
    device_stream_wait(d, STREAM_MEMORY, e2);
    ck_assert_int_eq(device_copy(d, STREAM_MEMORY, back, y, n, COPY_D2H), VDNN_OK);
    dev_event *e3 = device_event_record(d, STREAM_MEMORY);
    ck_assert_ptr_nonnull(e3);
    device_event_wait(d, e3);
    ck_assert_int_eq(device_event_done(d, e3), 1);
    ck_assert_int_eq(device_event_done(d, e2), 1);
    ck_assert_int_eq(device_event_done(d, e1), 1);
    size_t bad = first_mismatch(back, n, 1);
    ck_assert_msg(bad == n, "byte %zu of %zu wrong after host -> device -> device -> host", bad, n);
    device_event_release(d, e1);
    device_event_release(d, e2);
    device_event_release(d, e3);

    /* The synchronous helpers, and device_zero on a range in the middle. */
    pattern(h, n, 2);
    put(d, x, h, n);
    const size_t lo = 1000, len = 70000;
    ck_assert_int_eq(device_zero(d, x + lo, len), VDNN_OK);
    ck_assert_int_eq(device_download(d, back, x, n), VDNN_OK);
    for (size_t i = 0; i < n; i++) {
        unsigned char want = i >= lo && i < lo + len ? 0 : h[i];
        if (back[i] != want) ck_abort_msg("byte %zu is %u after device_zero [%zu, %zu), want %u", i, back[i], lo,
                                          lo + len, want);
    }

    /* A free after an event: x goes back once its copy to the host is done, so the whole
     * budget can be taken again. */
    pattern(h, n, 3);
    put(d, x, h, n);
    memset(back, 0, n);
    ck_assert_int_eq(device_free(d, y), VDNN_OK);
    ck_assert_int_eq(device_copy(d, STREAM_MEMORY, back, x, n, COPY_D2H), VDNN_OK);
    dev_event *ev = device_event_record(d, STREAM_MEMORY);
    dev_event *mine = device_event_retain(ev);
    ck_assert_int_eq(device_free_after(d, x, ev), VDNN_OK);
    void *all = dev_alloc(d, budget, "the whole budget");
    ck_assert_int_eq(device_event_done(d, mine), 1);
    device_event_release(d, mine);
    bad = first_mismatch(back, n, 3);
    ck_assert_msg(bad == n, "byte %zu of the offloaded copy wrong", bad);

    /* Over the budget: a clean error that names the request. */
    void *more = (void *)&more;
    ck_assert_int_eq(device_alloc(d, 1, "convX", "x[7]", &more), VDNN_EBUDGET);
    ck_assert_ptr_null(more);
    tn_msg_has("device budget exceeded", "convX");
    ck_assert_int_eq(device_free(d, all), VDNN_OK);
    ck_assert_int_eq(device_alloc(d, budget + 1, "convY", "w", &more), VDNN_EBUDGET);
    tn_msg_has("device budget exceeded", "convY");
    ck_assert_uint_le(pool_peak_bytes(device_pool(d)), budget);
    ck_assert_uint_eq(pool_used_bytes(device_pool(d)), 0);

    /* Pinned host memory: every byte usable, and freed and taken again. */
    device_host_free(d, h);
    device_host_free(d, back);
    for (int round = 0; round < 3; round++) {
        size_t bytes = ((size_t)8 << 20) << round;
        unsigned char *p = device_host_alloc(d, bytes);
        ck_assert_msg(p != NULL, "device_host_alloc(%zu) failed in round %d", bytes, round);
        pattern(p, bytes, 10 + (unsigned)round);
        ck_assert_uint_eq(first_mismatch(p, bytes, 10 + (unsigned)round), bytes);
        device_host_free(d, p);
    }
    device_host_free(d, NULL);
    device_destroy(d);
}
END_TEST

/* ---- (c) layers: the GPU against the CPU ---- */

/* One layer check: the section, the input shape, the mode, and the tolerance of the
 * comparison expect_close() makes (max |gpu - cpu| <= tol * (1 + max |cpu|)). */
typedef struct lcase {
    const char *what;
    const char *text;
    shape4 in;
    int train;
    int recompute;        /* forward as recomputation: running statistics stay as they are */
    double tol;
    float x_scale;        /* inputs uniform in [-x_scale, x_scale] */
} lcase;

/* FP32 sums in another order: cuDNN's and cuBLAS's convolutions and GEMMs against
 * OpenBLAS and the CPU's loops, strict FP32 (no TF32). A TF32 result misses this by
 * about ten times. */
#define TOL_GEMM 1e-4
/* Winograd and FFT transform the operands: errors of a few 1e-5 of the largest value
 * for 3x3 filters. */
#define TOL_TRANSFORM 1e-3
/* Winograd on larger filters takes larger tiles, whose interpolation points (+-2, +-1/2,
 * 4, ...) amplify rounding: cuDNN 9.14's winograd-nonfused backward filter on 5x5
 * filters missed the CPU by 1.44e-3 of the largest value on an H100 (2026-11-26). */
#define TOL_TRANSFORM_LARGE 4e-3
/* Elementwise layers, pooling, dropout and softmax: a few ulps of tanhf, expf and of
 * a division against a multiplication. */
#define TOL_ELEMENTWISE 1e-5
/* Batch statistics summed in float on the GPU and in double on the CPU, and LRN's
 * powf: a few 1e-6 of the largest value. */
#define TOL_STATS 1e-4
/* TF32 rounds every operand to 10 mantissa bits (2^-11 relative): sums of hundreds of
 * products stay within 1e-3 of the largest value; 1e-2 leaves room. */
#define TOL_TF32 1e-2

#define CONV(f, s, st, p, b) "[convolutional]\nfilters = " #f "\nsize = " #s "\nstride = " #st "\npad = " #p "\nbias = " #b "\n"
#define POOL(t, s, st, p) "[" t "]\nsize = " #s "\nstride = " #st "\npad = " #p "\n"

static const lcase conv_cases[] = {
    {"conv 3x3/2 p1, odd shape", CONV(4, 3, 2, 1, 1), {3, 3, 7, 5}, 1, 0, TOL_GEMM, 1},
    {"conv 1x1", CONV(3, 1, 1, 0, 1), {2, 5, 4, 6}, 1, 0, TOL_GEMM, 1},
    {"conv 3x3/1 p1", CONV(8, 3, 1, 1, 1), {2, 8, 9, 9}, 1, 0, TOL_GEMM, 1},
    {"conv 5x5 p2, no bias", CONV(6, 5, 1, 2, 0), {2, 4, 12, 12}, 1, 0, TOL_GEMM, 1},
    {"conv 3x3/1 p1, 16 -> 32 channels, 16x16", CONV(32, 3, 1, 1, 1), {4, 16, 16, 16}, 1, 0, TOL_GEMM, 1},
    /* cuDNN's group count, dilation, rectangular kernels and strides against conv.c's */
    {"conv 3x3 p1, 2 groups", CONV(6, 3, 1, 1, 1) "groups = 2\n", {2, 4, 6, 5}, 1, 0, TOL_GEMM, 1},
    {"conv 3x3/2 p1, depthwise", CONV(8, 3, 2, 1, 1) "groups = 8\n", {2, 8, 9, 9}, 1, 0, TOL_GEMM, 1},
    {"conv 3x3 p2, dilation 2", CONV(4, 3, 1, 2, 1) "dilation = 2\n", {2, 3, 9, 8}, 1, 0, TOL_GEMM, 1},
    {"conv 3x1, stride 2x1, pad 1", "[convolutional]\nfilters = 4\nsize_h = 3\nsize_w = 1\nstride_h = 2\n"
     "stride_w = 1\npad = 1\n", {2, 3, 7, 6}, 1, 0, TOL_GEMM, 1},
    {"conv 3x3 p1, 32 groups (ResNeXt)", CONV(64, 3, 1, 1, 0) "groups = 32\n", {2, 64, 8, 8}, 1, 0, TOL_GEMM, 1},
    /* the bias gradient's rounds of 8 items, its tail, and planes wider than its block */
    {"conv 3x3 p1, 11 items of 36x36", CONV(3, 3, 1, 1, 1), {11, 2, 36, 36}, 1, 0, TOL_GEMM, 1},
};
#define NCONV ((int)(sizeof conv_cases / sizeof *conv_cases))

static const lcase other_cases[] = {
    {"connected 3x5x5 -> 7", "[connected]\noutput = 7\n", {4, 3, 5, 5}, 1, 0, TOL_GEMM, 1},
    {"connected 20 -> 10, no bias", "[connected]\noutput = 10\nbias = 0\n", {3, 20, 1, 1}, 1, 0, TOL_GEMM, 1},
    {"maxpool 2x2/2", POOL("maxpool", 2, 2, 0), {2, 3, 8, 6}, 1, 0, TOL_ELEMENTWISE, 1},
    {"maxpool 3x3/2 p1", POOL("maxpool", 3, 2, 1), {2, 4, 9, 10}, 1, 0, TOL_ELEMENTWISE, 1},
    {"maxpool 2x2/1", POOL("maxpool", 2, 1, 0), {2, 3, 7, 7}, 1, 0, TOL_ELEMENTWISE, 1},
    {"avgpool 2x2/2", POOL("avgpool", 2, 2, 0), {2, 3, 8, 6}, 1, 0, TOL_ELEMENTWISE, 1},
    /* padding counts in the divisor (pooling.c: PyTorch's count_include_pad) */
    {"avgpool 3x3/2 p1", POOL("avgpool", 3, 2, 1), {2, 4, 9, 10}, 1, 0, TOL_ELEMENTWISE, 1},
    /* Caffe's round-up, rectangular windows, global windows, padding left out */
    {"maxpool 3x3/2 ceil", POOL("maxpool", 3, 2, 0) "ceil_mode = 1\n", {2, 3, 8, 6}, 1, 0, TOL_ELEMENTWISE, 1},
    {"avgpool 3x3/2 p1 ceil", POOL("avgpool", 3, 2, 1) "ceil_mode = 1\n", {2, 3, 8, 7}, 1, 0, TOL_ELEMENTWISE, 1},
    {"avgpool 3x3/2 p1 count_pad 0", POOL("avgpool", 3, 2, 1) "count_pad = 0\n", {2, 4, 9, 10}, 1, 0,
     TOL_ELEMENTWISE, 1},
    {"maxpool 3x2/1x2 p1,0", "[maxpool]\nsize_h = 3\nsize_w = 2\nstride_h = 1\nstride_w = 2\npad_h = 1\n",
     {2, 3, 7, 8}, 1, 0, TOL_ELEMENTWISE, 1},
    {"maxpool global 70x66", "[maxpool]\nglobal = 1\n", {2, 3, 70, 66}, 1, 0, TOL_ELEMENTWISE, 1},
    {"avgpool global 70x66", "[avgpool]\nglobal = 1\n", {2, 3, 70, 66}, 1, 0, TOL_ELEMENTWISE, 1},
    {"relu", "[relu]\n", {3, 4, 5, 7}, 1, 0, TOL_ELEMENTWISE, 1},
    {"leaky 0.1", "[leaky]\nslope = 0.1\n", {3, 4, 5, 7}, 1, 0, TOL_ELEMENTWISE, 1},
    {"tanh", "[tanh]\n", {3, 4, 5, 7}, 1, 0, TOL_ELEMENTWISE, 2},
    {"sigmoid", "[sigmoid]\n", {3, 4, 5, 7}, 1, 0, TOL_ELEMENTWISE, 3},
    {"clip (ReLU6)", "[clip]\n", {3, 4, 5, 7}, 1, 0, TOL_ELEMENTWISE, 8},
    {"clip [-1, 0.5]", "[clip]\nmin = -1\nmax = 0.5\n", {3, 4, 5, 7}, 1, 0, TOL_ELEMENTWISE, 2},
    {"batchnorm, train", "[batchnorm]\n", {4, 5, 3, 7}, 1, 0, TOL_STATS, 2},
    {"batchnorm, eval", "[batchnorm]\n", {4, 5, 3, 7}, 0, 0, TOL_STATS, 2},
    {"batchnorm, train, recomputed", "[batchnorm]\nmomentum = 0.3\n", {4, 5, 3, 7}, 1, 1, TOL_STATS, 2},
    {"lrn 3", "[lrn]\nsize = 3\nalpha = 0.3\nbeta = 0.75\nk = 1.5\n", {2, 6, 4, 5}, 1, 0, TOL_STATS, 2},
    {"lrn 5 over 4 channels", "[lrn]\nsize = 5\nalpha = 0.5\nbeta = 0.6\nk = 1\n", {2, 4, 3, 3}, 1, 0, TOL_STATS, 2},
    {"dropout 0.3, train", "[dropout]\nprobability = 0.3\n", {3, 4, 5, 7}, 1, 0, TOL_ELEMENTWISE, 1},
    {"dropout 0.3, eval", "[dropout]\nprobability = 0.3\n", {3, 4, 5, 7}, 0, 0, TOL_ELEMENTWISE, 1},
    {"softmax over 10", "[softmax]\n", {5, 10, 1, 1}, 1, 0, TOL_ELEMENTWISE, 3},
    {"softmax over 3x2x2", "[softmax]\n", {4, 3, 2, 2}, 1, 0, TOL_ELEMENTWISE, 3},
    {"logistic, one output", "[logistic]\n", {7, 1, 1, 1}, 1, 0, TOL_ELEMENTWISE, 3},
    {"logistic over 5 (one-hot)", "[logistic]\n", {4, 5, 1, 1}, 1, 0, TOL_ELEMENTWISE, 3},
    {"l2, one output", "[l2]\n", {7, 1, 1, 1}, 1, 0, TOL_ELEMENTWISE, 2},
    {"l2 over 3x2x2 (one-hot)", "[l2]\n", {4, 3, 2, 2}, 1, 0, TOL_ELEMENTWISE, 2},
};
#define NOTHER ((int)(sizeof other_cases / sizeof *other_cases))

/* The connected cases, for the TF32 check. */
#define FIRST_CONNECTED 0
#define NCONNECTED 2

/* One copy of the layer and its tensors on one device. Device tensors: x and dx
 * (N, C, H, W), y and dy (N, OC, OH, OW), the labels (N) of the loss layer, and a
 * workspace for any algorithm the check uses. */
typedef struct side {
    device *d;
    layer *l;
    float *x, *y, *dy, *dx;
    int32_t *labels;
    void *ws;
    size_t ws_bytes;
} side;

/* Both copies, and the host values both start from. */
typedef struct rig {
    const lcase *k;
    side cpu, gpu;
    size_t xcount, ycount;                 /* floats at the max batch */
    float *hx, *hdy;
    int32_t *hlab;
    float *hparam[LAYER_MAX_PARAMS];       /* every parameter's starting values */
} rig;

/* index 2: dropout's mask depends on the index, the same on both devices */
static layer *make_layer(const char *text, shape4 in) { return test_layer(NULL, 2, text, in); }

/* The largest workspace of the layer's current algorithms, or with `every`, of every
 * algorithm of every pass. */
static size_t workspace_for(const layer *l, int every)
{
    size_t ws = 0;
    for (int p = 0; p < PASS_COUNT; p++) {
        int first = every ? 0 : l->algo[p], last = every ? layer_algo_count(l, p) - 1 : l->algo[p];
        for (int a = first; a <= last; a++)
            if (layer_workspace_bytes(l, p, a) > ws) ws = layer_workspace_bytes(l, p, a);
    }
    return ws;
}

/* `every`: a workspace for any algorithm of the layer's table (the GPU copy cycles
 * through them), else for its current ones. */
static void side_init(side *s, device *d, const rig *r, int every)
{
    memset(s, 0, sizeof *s);
    s->d = d;
    s->l = make_layer(r->k->text, r->k->in);
    vdnn_status st = layer_bind(s->l, d);
    ck_assert_msg(st == VDNN_OK, "%s: layer_bind on %s: %s", r->k->what, device_describe(d), vdnn_errmsg());
    st = layer_alloc_params(s->l, d, 7);
    ck_assert_msg(st == VDNN_OK, "%s: layer_alloc_params: %s", r->k->what, vdnn_errmsg());
    size_t xc = shape_count(s->l->in), yc = shape_count(s->l->out);
    s->x = dev_alloc(d, xc * sizeof(float), "x");
    s->dx = dev_alloc(d, xc * sizeof(float), "dx");
    s->y = dev_alloc(d, yc * sizeof(float), "y");
    s->dy = dev_alloc(d, yc * sizeof(float), "dy");
    put(d, s->x, r->hx, xc * sizeof(float));
    put(d, s->dy, r->hdy, yc * sizeof(float));
    if (s->l->is_loss) {
        s->labels = dev_alloc(d, (size_t)s->l->in.n * sizeof(int32_t), "labels");
        put(d, s->labels, r->hlab, (size_t)s->l->in.n * sizeof(int32_t));
    }
    s->ws_bytes = workspace_for(s->l, every);
    if (s->ws_bytes) s->ws = dev_alloc(d, s->ws_bytes, "workspace");
}

static void side_free(side *s)
{
    void *bufs[] = {s->x, s->y, s->dy, s->dx, s->labels, s->ws};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++)
        if (bufs[i]) ck_assert_int_eq(device_free(s->d, bufs[i]), VDNN_OK);
    layer_destroy(s->l, s->d);
}

static void rig_init(rig *r, const lcase *k, device *cpu, device *gpu)
{
    memset(r, 0, sizeof *r);
    r->k = k;
    layer *probe = make_layer(k->text, k->in);
    r->xcount = shape_count(probe->in);
    r->ycount = shape_count(probe->out);
    r->hx = uniform(r->xcount, -k->x_scale, k->x_scale, 1);
    r->hdy = uniform(r->ycount, -1, 1, 2);
    r->hlab = malloc((size_t)k->in.n * sizeof *r->hlab);
    ck_assert_ptr_nonnull(r->hlab);
    rng g;
    rng_seed(&g, 3);
    /* a loss's labels range over its classes (two for a one-output logistic or l2) */
    const uint32_t classes = probe->ops->loss_classes ? (uint32_t)probe->ops->loss_classes(probe)
                                                      : (uint32_t)shape_per_item(probe->in);
    for (int i = 0; i < k->in.n; i++) r->hlab[i] = (int32_t)rng_below(&g, classes);
    /* He-initialised weights at a variance of 1/fan_in keep outputs near unit scale;
     * scales, shifts and running statistics in [0.5, 1.5] (a variance must be > 0) */
    for (int i = 0; i < probe->nparams; i++) {
        const param *p = &probe->params[i];
        float s = p->fan_in > 0 ? sqrtf(3.0f / (float)p->fan_in) : 0;
        r->hparam[i] = s > 0 ? uniform(shape_count(p->shape), -s, s, 10 + (uint64_t)i)
                             : uniform(shape_count(p->shape), 0.5f, 1.5f, 10 + (uint64_t)i);
    }
    layer_destroy(probe, NULL);
    side_init(&r->cpu, cpu, r, 0);
    side_init(&r->gpu, gpu, r, 1);
    ck_assert_int_eq(r->gpu.l->nparams, r->cpu.l->nparams);
}

static void rig_free(rig *r)
{
    side_free(&r->cpu);
    side_free(&r->gpu);
    free(r->hx);
    free(r->hdy);
    free(r->hlab);
    for (int i = 0; i < LAYER_MAX_PARAMS; i++) free(r->hparam[i]);
}

/* Both copies back at the starting values; outputs and gradients filled with garbage. */
static void rig_reset(rig *r)
{
    side *sides[2] = {&r->cpu, &r->gpu};
    for (int s = 0; s < 2; s++) {
        layer *l = sides[s]->l;
        for (int i = 0; i < l->nparams; i++) {
            param *p = &l->params[i];
            put(sides[s]->d, p->value, r->hparam[i], shape_count(p->shape) * sizeof(float));
            if (p->grad) fill_value(sides[s]->d, p->grad, shape_count(p->shape), GARBAGE);
        }
        fill_value(sides[s]->d, sides[s]->y, r->ycount, GARBAGE);
        fill_value(sides[s]->d, sides[s]->dx, r->xcount, GARBAGE);
    }
}

static exec_ctx ctx_for(const side *s, const lcase *k, int n, double *loss, int *correct)
{
    exec_ctx c;
    memset(&c, 0, sizeof c);
    c.dev = s->d;
    c.n = n;
    c.item_offset = 1;   /* dropout's mask depends on it */
    c.train = k->train;
    c.recompute = k->recompute;
    c.seed = 99;
    c.step = 3;
    c.workspace = s->ws;
    c.workspace_bytes = s->ws_bytes;
    c.labels = s->labels;
    c.grad_scale = s->l->is_loss ? 1.0f / (float)n : 1.0f;
    c.loss_sum = loss;
    c.correct = correct;
    return c;
}

/* The CPU's results of one forward and backward pass. */
typedef struct reference {
    float *y, *dx;
    float *value[LAYER_MAX_PARAMS];   /* after forward (running statistics) */
    float *grad[LAYER_MAX_PARAMS];
    double loss;
    int correct;
} reference;

static reference run_cpu(rig *r, int n)
{
    reference ref;
    memset(&ref, 0, sizeof ref);
    side *s = &r->cpu;
    exec_ctx c = ctx_for(s, r->k, n, &ref.loss, &ref.correct);
    vdnn_status st = layer_forward(s->l, &c, s->x, s->y);
    ck_assert_msg(st == VDNN_OK, "%s: CPU forward: %s", r->k->what, vdnn_errmsg());
    st = layer_backward(s->l, &c, s->x, s->y, s->dy, s->dx);
    ck_assert_msg(st == VDNN_OK, "%s: CPU backward: %s", r->k->what, vdnn_errmsg());
    ref.y = get(s->d, s->y, r->ycount);
    ref.dx = get(s->d, s->dx, r->xcount);
    for (int i = 0; i < s->l->nparams; i++) {
        param *p = &s->l->params[i];
        ref.value[i] = get(s->d, p->value, shape_count(p->shape));
        if (p->grad) ref.grad[i] = get(s->d, p->grad, shape_count(p->shape));
    }
    return ref;
}

static void reference_free(reference *ref)
{
    free(ref->y);
    free(ref->dx);
    for (int i = 0; i < LAYER_MAX_PARAMS; i++) {
        free(ref->value[i]);
        free(ref->grad[i]);
    }
}

/* The GPU's gradient of every trainable parameter against the CPU's times `times`. */
static void compare_grads(rig *r, const reference *ref, double times, double tol, const char *what)
{
    layer *l = r->gpu.l;
    for (int i = 0; i < l->nparams; i++) {
        param *p = &l->params[i];
        if (!p->trainable) continue;
        size_t count = shape_count(p->shape);
        float *want = malloc(count * sizeof *want);
        ck_assert_ptr_nonnull(want);
        for (size_t e = 0; e < count; e++) want[e] = (float)(times * ref->grad[i][e]);
        float *got = get(r->gpu.d, p->grad, count);
        char name[256];
        snprintf(name, sizeof name, "%s: %s.grad", what, p->name);
        expect_close(name, got, want, count, tol);
        free(got);
        free(want);
    }
}

/* Outputs that are exactly zero where the input is not: dropout's mask. The same
 * elements must be dropped on both devices. */
static void compare_mask(const float *x, const float *gpu, const float *cpu, size_t count, const char *what)
{
    size_t dropped = 0;
    for (size_t i = 0; i < count; i++) {
        if (x[i] == 0.0f) continue;
        ck_assert_msg((gpu[i] == 0.0f) == (cpu[i] == 0.0f), "%s: element %zu is %s on the GPU and %s on the CPU",
                      what, i, gpu[i] == 0.0f ? "dropped" : "kept", cpu[i] == 0.0f ? "dropped" : "kept");
        dropped += cpu[i] == 0.0f;
    }
    ck_assert_msg(dropped > 0 && dropped < count, "%s: %zu of %zu dropped", what, dropped, count);
}

static int is_dropout(const lcase *k) { return !strncmp(k->text, "[dropout]", 9); }

/* The GPU's forward against the CPU's: y, and what else a forward gives (the loss and
 * the hits, dropout's mask, batch norm's running statistics). */
static void check_forward(rig *r, const reference *ref, const exec_ctx *c, const double *loss, const int *correct,
                          double tol, const char *what)
{
    const lcase *k = r->k;
    side *g = &r->gpu;
    layer *l = g->l;
    const size_t yc = (size_t)c->n * shape_per_item(l->out);
    char name[300];
    vdnn_status st = layer_forward(l, c, g->x, g->y);
    ck_assert_msg(st == VDNN_OK, "%s: GPU forward: %s", what, vdnn_errmsg());
    device_stream_sync(g->d, STREAM_COMPUTE);
    float *y = get(g->d, g->y, r->ycount);
    snprintf(name, sizeof name, "%s: y", what);
    expect_close(name, y, ref->y, yc, tol);
    if (is_dropout(k) && k->train) compare_mask(r->hx, y, ref->y, yc, name);
    if (is_dropout(k) && !k->train)
        ck_assert_msg(!memcmp(y, r->hx, yc * sizeof *y), "%s: dropout in evaluation is not the identity", what);
    free(y);
    if (l->is_loss) {
        ck_assert_msg(fabs(*loss - ref->loss) <= tol * (1 + fabs(ref->loss)), "%s: loss sum %.9g on the GPU, %.9g on "
                      "the CPU", what, *loss, ref->loss);
        ck_assert_msg(*correct == ref->correct, "%s: %d correct on the GPU, %d on the CPU", what, *correct, ref->correct);
    }
    /* State a forward writes (batch norm's running statistics): updated as on the CPU
     * in training, and left bit for bit as they were in evaluation and recomputation. */
    for (int i = 0; i < l->nparams; i++) {
        param *p = &l->params[i];
        if (p->trainable) continue;
        size_t count = shape_count(p->shape);
        float *v = get(g->d, p->value, count);
        snprintf(name, sizeof name, "%s: %s after forward", what, p->name);
        if (!k->train || k->recompute)
            ck_assert_msg(!memcmp(v, r->hparam[i], count * sizeof *v), "%s changed", name);
        else
            expect_close(name, v, ref->value[i], count, tol);
        free(v);
    }
}

/* One GPU backward, into dx or (without_dx) with dx == NULL, against the CPU's: dx,
 * and the gradients against `times` the CPU's (2 when accumulating onto a first pass). */
static void check_backward(rig *r, const reference *ref, const exec_ctx *c, int without_dx, double times, double tol,
                           const char *what)
{
    side *g = &r->gpu;
    const size_t xc = (size_t)c->n * shape_per_item(g->l->in);
    char name[300];
    fill_value(g->d, g->dx, r->xcount, GARBAGE);
    vdnn_status st = layer_backward(g->l, c, g->x, g->y, g->dy, without_dx ? NULL : g->dx);
    ck_assert_msg(st == VDNN_OK, "%s: GPU backward: %s", what, vdnn_errmsg());
    device_stream_sync(g->d, STREAM_COMPUTE);
    if (!without_dx) {
        float *dx = get(g->d, g->dx, r->xcount);
        snprintf(name, sizeof name, "%s: dx", what);
        expect_close(name, dx, ref->dx, xc, tol);
        if (is_dropout(r->k) && r->k->train) compare_mask(r->hdy, dx, ref->dx, xc, name);
        free(dx);
    }
    compare_grads(r, ref, times, tol, what);
}

/* One forward and backward of n items with the GPU copy's current algorithms, against
 * the CPU: forward, then backward without dx, with dx (the gradients overwritten, not
 * added to), and with dx accumulating into the gradients. */
static void compare_pass(rig *r, int n, double tol, const char *what)
{
    rig_reset(r);
    reference ref = run_cpu(r, n);
    layer *l = r->gpu.l;
    double loss = 0;
    int correct = 0;
    exec_ctx c = ctx_for(&r->gpu, r->k, n, &loss, &correct);
    char name[300];
    check_forward(r, &ref, &c, &loss, &correct, tol, what);
    snprintf(name, sizeof name, "%s, backward without dx", what);
    check_backward(r, &ref, &c, 1, 1, tol, name);
    for (int i = 0; i < l->nparams; i++)
        if (l->params[i].grad) fill_value(r->gpu.d, l->params[i].grad, shape_count(l->params[i].shape), GARBAGE);
    snprintf(name, sizeof name, "%s, backward", what);
    check_backward(r, &ref, &c, 0, 1, tol, name);
    c.accumulate = 1;
    snprintf(name, sizeof name, "%s, backward accumulating onto the last (twice the CPU's gradients)", what);
    check_backward(r, &ref, &c, 0, 2, tol, name);
    reference_free(&ref);
}

/* Whether an algorithm's name says it transforms its operands (Winograd, FFT). */
static int transforms(const char *name)
{
    return strcasestr(name, "winograd") || strcasestr(name, "fft");
}

/* Every algorithm of every pass in the GPU copy's table (in max-count rounds, each
 * pass cycling through its own), at the batch sizes given, against the CPU.
 * `need_deterministic`: the table may list only deterministic algorithms. */
static void compare_all_algos(rig *r, const int *ns, int nn, double tol, int need_deterministic, const char *tag)
{
    layer *l = r->gpu.l;
    int rounds = 1;
    for (int p = 0; p < PASS_COUNT; p++) {
        int count = layer_algo_count(l, p);
        ck_assert_msg(count >= 1 && count <= LAYER_MAX_ALGOS, "%s: pass %d has %d algorithms", r->k->what, p, count);
        if (count > rounds) rounds = count;
        for (int a = 0; a < count; a++) {
            ck_assert_msg(layer_algo_name(l, p, a)[0] != 0, "%s: algorithm %d of pass %d has no name", r->k->what, a, p);
            if (need_deterministic)
                ck_assert_msg(layer_algo_deterministic(l, p, a), "%s: pass %d offers '%s', which is not deterministic, "
                              "on a device without nondeterministic = 1", r->k->what, p, layer_algo_name(l, p, a));
        }
    }
    for (int k = 0; k < rounds; k++) {
        double t = tol;
        for (int p = 0; p < PASS_COUNT; p++) {
            l->algo[p] = k % layer_algo_count(l, p);
            if (transforms(layer_algo_name(l, p, l->algo[p])))
                t = fmax(t, l->ops == &conv_ops && l->params[CONV_WEIGHTS].shape.h * l->params[CONV_WEIGHTS].shape.w > 9
                                ? TOL_TRANSFORM_LARGE
                                : TOL_TRANSFORM);
        }
        for (int i = 0; i < nn; i++) {
            char what[400];
            snprintf(what, sizeof what, "%s (%s, %d items, algorithms %s / %s / %s)", r->k->what, tag, ns[i],
                     layer_algo_name(l, PASS_FWD, l->algo[PASS_FWD]),
                     layer_algo_name(l, PASS_BWD_DATA, l->algo[PASS_BWD_DATA]),
                     layer_algo_name(l, PASS_BWD_FILTER, l->algo[PASS_BWD_FILTER]));
            compare_pass(r, ns[i], t, what);
        }
    }
}

/* The case at the full batch and one item short (descriptors set for the max batch
 * must not be assumed). */
static void check_layer_case(const lcase *k, const char *check)
{
    if (skip_without_gpu(check)) return;
    device *cpu = make_cpu(LAYER_CPU_BUDGET), *gpu = make_gpu(LAYER_GPU_BUDGET, 0, 0);
    rig r;
    rig_init(&r, k, cpu, gpu);
    int ns[2] = {k->in.n, k->in.n - 1};
    compare_all_algos(&r, ns, k->in.n > 1 ? 2 : 1, k->tol, 1, "fp32");
    rig_free(&r);
    device_destroy(gpu);
    device_destroy(cpu);
}

START_TEST(test_conv_layer)
{
    char check[160];
    snprintf(check, sizeof check, "test_conv_layer[%d] (%s)", _i, conv_cases[_i].what);
    check_layer_case(&conv_cases[_i], check);
}
END_TEST

/* Asymmetric padding has no cuDNN convolution: binding the layer to a GPU fails with a
 * message, not a crash and not another layer's result. */
START_TEST(test_conv_asymmetric_refused)
{
    if (skip_without_gpu("test_conv_asymmetric_refused")) return;
    device *gpu = make_gpu(LAYER_GPU_BUDGET, 0, 0);
    layer *l = test_layer(&conv_ops, 0, "[convolutional]\nfilters = 4\nsize = 2\npad_bottom = 1\npad_right = 1\n",
                          shape_make(2, 3, 5, 6));
    ck_assert_int_eq(layer_bind(l, gpu), VDNN_EDEVICE);
    ck_assert_ptr_nonnull(strstr(vdnn_errmsg(), "asymmetric padding"));
    layer_destroy(l, gpu);
    device_destroy(gpu);
}
END_TEST

START_TEST(test_other_layer)
{
    char check[160];
    snprintf(check, sizeof check, "test_other_layer[%d] (%s)", _i, other_cases[_i].what);
    check_layer_case(&other_cases[_i], check);
}
END_TEST

/* With nondeterministic = 1 the tables offer at least what they did, and every
 * algorithm (atomics in another order included) stays within the tolerance. */
START_TEST(test_conv_nondeterministic)
{
    if (skip_without_gpu("test_conv_nondeterministic")) return;
    /* det only binds layers to read their tables: it needs no memory */
    device *cpu = make_cpu(LAYER_CPU_BUDGET), *det = make_gpu((size_t)1 << 20, 0, 0);
    device *gpu = make_gpu(LAYER_GPU_BUDGET, 0, 1);
    for (int c = 0; c < NCONV; c++) {
        layer *probe = make_layer(conv_cases[c].text, conv_cases[c].in);
        ck_assert_msg(layer_bind(probe, det) == VDNN_OK, "%s", vdnn_errmsg());
        int counts[PASS_COUNT];
        for (int p = 0; p < PASS_COUNT; p++) counts[p] = layer_algo_count(probe, p);
        layer_destroy(probe, det);
        rig r;
        rig_init(&r, &conv_cases[c], cpu, gpu);
        for (int p = 0; p < PASS_COUNT; p++)
            ck_assert_msg(layer_algo_count(r.gpu.l, p) >= counts[p],
                          "%s: pass %d offers %d algorithms with nondeterministic ones allowed, %d without",
                          conv_cases[c].what, p, layer_algo_count(r.gpu.l, p), counts[p]);
        int n = conv_cases[c].in.n;
        compare_all_algos(&r, &n, 1, conv_cases[c].tol, 0, "nondeterministic allowed");
        rig_free(&r);
    }
    device_destroy(gpu);
    device_destroy(det);
    device_destroy(cpu);
}
END_TEST

/* TF32 tensor cores (device tf32 = 1): convolutions and GEMMs within TF32's precision. */
START_TEST(test_tf32)
{
    if (skip_without_gpu("test_tf32")) return;
    device *cpu = make_cpu(LAYER_CPU_BUDGET), *gpu = make_gpu(LAYER_GPU_BUDGET, 1, 0);
    for (int c = 0; c < NCONV + NCONNECTED; c++) {
        const lcase *k = c < NCONV ? &conv_cases[c] : &other_cases[FIRST_CONNECTED + c - NCONV];
        rig r;
        rig_init(&r, k, cpu, gpu);
        int n = k->in.n;
        compare_all_algos(&r, &n, 1, TOL_TF32, 1, "tf32");
        rig_free(&r);
    }
    device_destroy(gpu);
    device_destroy(cpu);
}
END_TEST

/* [add] and [concat] (several inputs) on both devices from the same inputs: forward,
 * backward overwriting one gradient and adding into another, the same bits (each sums
 * in the same order; the copies are copies). `gap` skips input 1's gradient. */
static void check_multi(device *cpu, device *gpu, const char *type, const shape4 *ins, int nin)
{
    const layer_ops *ops = layer_find_type(type);
    layer *lc = NULL, *lg = NULL;
    ck_assert_int_eq(layer_create_multi(ops, 2, ins, nin, NULL, NULL, &lc), VDNN_OK);
    ck_assert_int_eq(layer_create_multi(ops, 2, ins, nin, NULL, NULL, &lg), VDNN_OK);
    ck_assert_msg(layer_bind(lg, gpu) == VDNN_OK, "%s", vdnn_errmsg());
    device *dev[2] = {cpu, gpu};
    layer *ls[2] = {lc, lg};
    float *out[2][2 * LAYER_MAX_INPUTS + 1] = {{NULL}};
    size_t ycount = shape_count(lc->out);
    float *hdy = uniform(ycount, -1, 1, 77);
    for (int s = 0; s < 2; s++) {
        const float *x[LAYER_MAX_INPUTS];
        float *dx[LAYER_MAX_INPUTS];
        for (int k = 0; k < nin; k++) {
            size_t count = shape_count(ins[k]);
            float *h = uniform(count, -2, 2, 10 + (uint64_t)k);
            float *xd = dev_alloc(dev[s], count * sizeof *xd, "x");
            put(dev[s], xd, h, count * sizeof *h);
            x[k] = xd;
            dx[k] = k == 1 ? NULL : dev_alloc(dev[s], count * sizeof(float), "dx");
            if (dx[k]) put(dev[s], dx[k], h, count * sizeof *h);   /* input 2 adds into this */
            free(h);
        }
        float *y = dev_alloc(dev[s], ycount * sizeof *y, "y"), *dy = dev_alloc(dev[s], ycount * sizeof *dy, "dy");
        put(dev[s], dy, hdy, ycount * sizeof *hdy);
        exec_ctx c = {.dev = dev[s], .n = ins[0].n, .train = 1, .accumulate_dx = nin > 2 ? 1u << 2 : 0};
        ck_assert_msg(layer_forward_n(ls[s], &c, x, y) == VDNN_OK, "%s forward: %s", type, vdnn_errmsg());
        ck_assert_msg(layer_backward_n(ls[s], &c, x, y, dy, dx) == VDNN_OK, "%s backward: %s", type, vdnn_errmsg());
        device_stream_sync(dev[s], STREAM_COMPUTE);
        out[s][0] = get(dev[s], y, ycount);
        for (int k = 0; k < nin; k++)
            if (dx[k]) out[s][1 + k] = get(dev[s], dx[k], shape_count(ins[k]));
    }
    ck_assert_msg(!memcmp(out[0][0], out[1][0], ycount * sizeof(float)), "%s: the GPU's y differs from the CPU's", type);
    for (int k = 0; k < nin; k++)
        if (out[0][1 + k])
            ck_assert_msg(!memcmp(out[0][1 + k], out[1][1 + k], shape_count(ins[k]) * sizeof(float)),
                          "%s: the GPU's gradient of input %d differs from the CPU's", type, k);
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 2 * LAYER_MAX_INPUTS + 1; k++) free(out[s][k]);
    free(hdy);
    layer_destroy(lc, cpu);
    layer_destroy(lg, gpu);
}

START_TEST(test_multi_input_layers)
{
    if (skip_without_gpu("test_multi_input_layers")) return;
    device *cpu = make_cpu(LAYER_CPU_BUDGET), *gpu = make_gpu(LAYER_GPU_BUDGET, 0, 0);
    shape4 same[3] = {{3, 5, 7, 9}, {3, 5, 7, 9}, {3, 5, 7, 9}};
    shape4 chans[3] = {{3, 2, 7, 9}, {3, 5, 7, 9}, {3, 1, 7, 9}};
    check_multi(cpu, gpu, "add", same, 3);
    check_multi(cpu, gpu, "add", same, 2);
    check_multi(cpu, gpu, "concat", chans, 3);
    check_multi(cpu, gpu, "concat", chans, 2);
    device_destroy(gpu);
    device_destroy(cpu);
}
END_TEST

/* ---- nets on the GPU ---- */

/* The net of the policy, budget and agreement checks: every kind of map a policy
 * treats differently (convolution inputs, batch norm, dropout, a pooling). */
#define GPU_NET                                                                                          \
    "[net]\nbatch = 8\nchannels = 3\nheight = 12\nwidth = 12\n"                                          \
    "[train]\nepochs = 1\nlearning_rate = 0.05\nmomentum = 0.9\nweight_decay = 0.0005\nseed = 11\n"      \
    "[data]\nset = synthetic\ntrain_size = 64\ntest_size = 16\nclasses = 5\n"                            \
    "[convolutional]\nfilters = 8\nsize = 3\npad = 1\n[relu]\n[maxpool]\nsize = 2\n"                     \
    "[convolutional]\nfilters = 8\nsize = 3\npad = 1\n[batchnorm]\n[relu]\n"                             \
    "[dropout]\nprobability = 0.3\n[connected]\noutput = 5\n[softmax]\n"

/* A graph: a shortcut around a branch ([add]), a join with a pooling of the image
 * ([concat]), a map read by three layers. */
#define GPU_GRAPH_NET                                                                                    \
    "[net]\nbatch = 8\nchannels = 3\nheight = 12\nwidth = 12\n"                                          \
    "[train]\nepochs = 1\nlearning_rate = 0.05\nmomentum = 0.9\nweight_decay = 0.0005\nseed = 11\n"      \
    "[data]\nset = synthetic\ntrain_size = 64\ntest_size = 16\nclasses = 5\n"                            \
    "[convolutional]\nfilters = 8\nsize = 3\npad = 1\n[batchnorm]\n[relu]\nname = a\n"                  \
    "[convolutional]\nfilters = 8\nsize = 3\npad = 1\n[batchnorm]\n[dropout]\nprobability = 0.2\n"        \
    "[add]\ninput = -1, a\n[relu]\nname = r\n[convolutional]\ninput = a\nfilters = 3\nsize = 1\nname = c\n" \
    "[maxpool]\ninput = data\nsize = 3\nstride = 1\npad = 1\nname = dp\n[concat]\ninput = r, c, dp\n"   \
    "[maxpool]\nsize = 2\n[connected]\noutput = 5\n[softmax]\n"

#define MAX_STEPS 4
#define MAX_TENSORS 64

/* What a run leaves to compare: its losses and every parameter tensor. */
typedef struct snapshot {
    int steps;
    double loss[MAX_STEPS];
    int correct[MAX_STEPS];
    int ntensors;
    char names[MAX_TENSORS][48];
    float *data[MAX_TENSORS];
    size_t count[MAX_TENSORS];
} snapshot;

static void snapshot_add(snapshot *s, device *d, const char *name, const float *dev, const float *host, size_t count)
{
    ck_assert_int_lt(s->ntensors, MAX_TENSORS);
    float *h = NULL;
    if (host) {
        h = malloc(count * sizeof *h);
        ck_assert_ptr_nonnull(h);
        memcpy(h, host, count * sizeof *h);
    } else {
        h = get(d, dev, count);
    }
    snprintf(s->names[s->ntensors], sizeof s->names[0], "%s", name);
    s->data[s->ntensors] = h;
    s->count[s->ntensors++] = count;
}

/* Every parameter's value, and the gradient and momentum of trainable ones, from
 * wherever they live (a swapped layer's in host memory). */
static void snapshot_params(snapshot *s, net *n)
{
    for (int i = 0; i < n->nlayers; i++) {
        layer *l = n->layers[i];
        for (int p = 0; p < l->nparams; p++) {
            param *q = &l->params[p];
            size_t count = shape_count(q->shape);
            char name[48];
            snprintf(name, sizeof name, "%s.%s", l->name, q->name);
            snapshot_add(s, n->dev, name, q->value, q->host_value, count);
            if (!q->trainable) continue;
            snprintf(name, sizeof name, "%s.%s.grad", l->name, q->name);
            snapshot_add(s, n->dev, name, q->grad, q->host_grad, count);
            snprintf(name, sizeof name, "%s.%s.momentum", l->name, q->name);
            snapshot_add(s, n->dev, name, q->momentum, q->host_momentum, count);
        }
    }
}

static void snapshot_free(snapshot *s)
{
    for (int t = 0; t < s->ntensors; t++) free(s->data[t]);
    memset(s, 0, sizeof *s);
}

static void snapshot_same(const snapshot *a, const snapshot *b, const char *what)
{
    ck_assert_int_eq(a->steps, b->steps);
    for (int i = 0; i < a->steps; i++) {
        ck_assert_msg(!memcmp(&a->loss[i], &b->loss[i], sizeof a->loss[i]), "%s: step %d loss %.17g, baseline %.17g",
                      what, i + 1, b->loss[i], a->loss[i]);
        ck_assert_msg(a->correct[i] == b->correct[i], "%s: step %d correct %d, baseline %d", what, i + 1,
                      b->correct[i], a->correct[i]);
    }
    ck_assert_int_eq(a->ntensors, b->ntensors);
    for (int t = 0; t < a->ntensors; t++) {
        ck_assert_str_eq(a->names[t], b->names[t]);
        ck_assert_uint_eq(a->count[t], b->count[t]);
        size_t first = a->count[t];
        for (size_t e = 0; e < a->count[t] && first == a->count[t]; e++)
            if (memcmp(&a->data[t][e], &b->data[t][e], sizeof(float))) first = e;
        ck_assert_msg(first == a->count[t], "%s: %s[%zu] is %.9g, baseline %.9g, after %d steps", what, a->names[t],
                      first, b->data[t][first], a->data[t][first], a->steps);
    }
}

/* Trains `steps` steps of an attached, planned net on seeded batches (the same for
 * every run); returns the first failure's status or VDNN_OK. */
static vdnn_status train_steps(net *n, int steps, snapshot *s)
{
    for (int k = 0; k < steps; k++) {
        tn_batch b = tn_batch_make(n, n->input.n, 1000 + (uint64_t)k);
        step_result r;
        vdnn_status st = net_train_step(n, b.x, b.y, b.items, n->train.learning_rate, &r);
        tn_batch_free(&b);
        if (st != VDNN_OK) return st;
        if (s) {
            s->loss[k] = r.loss_sum;
            s->correct[k] = r.correct;
        }
    }
    if (s) s->steps = steps;
    return VDNN_OK;
}

/* GPU_NET on device d under policy p with algorithms chosen without measuring (mem:
 * the smallest workspaces; perf: the largest), trained MAX_STEPS steps and
 * snapshotted. *offloaded gets the bytes offloaded, *peak the pool's peak. */
static void run_policy(device *d, const char *text, mem_policy p, algo_mode a, snapshot *s, uint64_t *offloaded,
                       size_t *peak)
{
    net *n = tn_parse(text, NULL);
    n->policy = p;   /* swap places the parameters when they are attached */
    pool_reset_peak(device_pool(d));
    vdnn_status st = net_attach(n, d);
    ck_assert_msg(st == VDNN_OK, "net_attach (policy %s): %s", policy_name(p), vdnn_errmsg());
    ck_assert_int_eq(net_plan_static(n, p, a), VDNN_OK);
    memset(s, 0, sizeof *s);
    st = train_steps(n, MAX_STEPS, s);
    ck_assert_msg(st == VDNN_OK, "policy %s, %s algorithms: %s", policy_name(p), algo_mode_name(a), vdnn_errmsg());
    snapshot_params(s, n);
    *offloaded = n->stats.offload_bytes;
    *peak = pool_peak_bytes(device_pool(d));
    net_free(n);
    ck_assert_uint_eq(pool_used_bytes(device_pool(d)), 0);
}

/* (d) Offloading is a copy and recomputation repeats itself bit for bit, so every policy
 * trains exactly as none does, with the same deterministic algorithms. */
START_TEST(test_policy_invariance)
{
    static const algo_mode modes[] = {ALGO_MEM, ALGO_PERF};
    const char *text = _i < 2 ? GPU_NET : GPU_GRAPH_NET;
    algo_mode mode = modes[_i % 2];
    char check[96];
    snprintf(check, sizeof check, "test_policy_invariance[%d] (%s, %s algorithms)", _i, _i < 2 ? "chain" : "graph",
             algo_mode_name(mode));
    if (skip_without_gpu(check)) return;
    device *d = make_gpu(NET_GPU_BUDGET, 0, 0);
    snapshot base, s;
    uint64_t off = 0;
    size_t peak = 0;
    run_policy(d, text, POLICY_NONE, mode, &base, &off, &peak);
    ck_assert_uint_eq(off, 0);
    for (int p = POLICY_NONE; p < POLICY_COUNT; p++) {
        char what[128];
        snprintf(what, sizeof what, "GPU, %s, policy %s, %s algorithms", _i < 2 ? "chain" : "graph",
                 policy_name((mem_policy)p), algo_mode_name(mode));
        run_policy(d, text, (mem_policy)p, mode, &s, &off, &peak);
        snapshot_same(&base, &s, what);
        snapshot_free(&s);
        ck_assert_msg(peak <= NET_GPU_BUDGET, "%s: pool peak %zu above the budget", what, peak);
        if (p == POLICY_ALL || p == POLICY_CONV || p == POLICY_SWAP)
            ck_assert_msg(off > 0, "%s: nothing was offloaded", what);
    }
    snapshot_free(&base);
    device_destroy(d);
}
END_TEST

/* (e) The minimum budget the simulator finds is exact on the GPU too: training fits in
 * it, and 256 bytes less fails cleanly with VDNN_EBUDGET. */
START_TEST(test_budget)
{
    static const struct { mem_policy p; algo_mode a; } plans[] = {
        {POLICY_NONE, ALGO_MEM}, {POLICY_ALL, ALGO_MEM}, {POLICY_CONV, ALGO_PERF}, {POLICY_RECOMPUTE, ALGO_MEM},
    };
    if (skip_without_gpu("test_budget")) return;
    for (size_t k = 0; k < sizeof plans / sizeof *plans; k++) {
        char what[96];
        snprintf(what, sizeof what, "GPU, policy %s, %s algorithms", policy_name(plans[k].p), algo_mode_name(plans[k].a));
        net *n = tn_parse(GPU_NET, NULL);
        n->policy = plans[k].p;
        device *big = make_gpu(NET_GPU_BUDGET, 0, 0);
        ck_assert_msg(net_attach(n, big) == VDNN_OK, "%s: %s", what, vdnn_errmsg());
        ck_assert_int_eq(net_plan_static(n, plans[k].p, plans[k].a), VDNN_OK);
        size_t m = 0;
        ck_assert_msg(net_min_budget(n, &m) == VDNN_OK, "%s: net_min_budget: %s", what, vdnn_errmsg());
        ck_assert_uint_gt(m, POOL_ALIGN);
        ck_assert_uint_eq(m % POOL_ALIGN, 0);
        /* the same algorithms again on the next devices */
        for (int i = 0; i < n->nlayers; i++)
            memcpy(n->layers[i]->algo_pinned, n->layers[i]->algo, sizeof n->layers[i]->algo);
        net_detach(n);
        device_destroy(big);

        device *d = make_gpu(m, 0, 0);
        ck_assert_msg(net_attach(n, d) == VDNN_OK, "%s: attaching in the minimum %zu: %s", what, m, vdnn_errmsg());
        ck_assert_int_eq(net_plan_static(n, plans[k].p, plans[k].a), VDNN_OK);
        vdnn_status st = train_steps(n, 2, NULL);
        ck_assert_msg(st == VDNN_OK, "%s: training in the minimum budget %zu: %s", what, m, vdnn_errmsg());
        size_t peak = pool_peak_bytes(device_pool(d));
        ck_assert_msg(peak <= m, "%s: pool peak %zu above the budget %zu", what, peak, m);
        net_detach(n);
        ck_assert_uint_eq(pool_used_bytes(device_pool(d)), 0);
        device_destroy(d);

        d = make_gpu(m - POOL_ALIGN, 0, 0);
        st = net_attach(n, d);
        if (st == VDNN_OK) {
            ck_assert_int_eq(net_plan_static(n, plans[k].p, plans[k].a), VDNN_OK);
            st = train_steps(n, 2, NULL);
        }
        ck_assert_msg(st == VDNN_EBUDGET, "%s: at %zu bytes (the minimum less 256) the step returns %d (%s), not "
                      "VDNN_EBUDGET", what, m - POOL_ALIGN, (int)st, st == VDNN_OK ? "-" : vdnn_errmsg());
        tn_msg_has("device budget exceeded", NULL);
        ck_assert_uint_le(pool_peak_bytes(device_pool(d)), m - POOL_ALIGN);
        net_detach(n);
        ck_assert_msg(pool_used_bytes(device_pool(d)) == 0, "%s: %zu bytes still allocated after detaching", what,
                      pool_used_bytes(device_pool(d)));
        net_free(n);
        device_destroy(d);
    }
}
END_TEST

/* ---- (f) training ---- */

/* 200 synthetic items at batch 16: 13 steps an epoch. */
#define LEARN_NET                                                                                        \
    "[net]\nbatch = 16\nchannels = 1\nheight = 8\nwidth = 8\n"                                           \
    "[train]\nepochs = 4\nlearning_rate = 0.05\nmomentum = 0.9\nweight_decay = 0.0005\nseed = 3\n"       \
    "[data]\nset = synthetic\ntrain_size = 200\ntest_size = 48\nclasses = 4\n"                           \
    "[convolutional]\nfilters = 4\nsize = 3\npad = 1\n[batchnorm]\n[relu]\n[maxpool]\nsize = 2\n"        \
    "[dropout]\nprobability = 0.3\n[connected]\noutput = 4\n[softmax]\n"

/* The values of `key` on the lines of a JSON-lines log that hold it, in order. */
static int log_values(FILE *log, const char *key, double *out, int max)
{
    char line[1024];
    int n = 0;
    rewind(log);
    while (fgets(line, sizeof line, log) && n < max) {
        const char *p = strstr(line, key);
        if (p) out[n++] = strtod(p + strlen(key), NULL);
    }
    return n;
}

/* The trainer on the GPU, four epochs of synthetic data: the loss halves and the test
 * accuracy is far above chance (0.25), as on the CPU (test_train). */
START_TEST(test_loss_falls)
{
    if (skip_without_gpu("test_loss_falls")) return;
    net *n = tn_parse(LEARN_NET, NULL);
    device *d = make_gpu(NET_GPU_BUDGET, 0, 0);
    ck_assert_msg(net_attach(n, d) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_int_eq(net_plan_static(n, POLICY_NONE, ALGO_MEM), VDNN_OK);
    dataset *train = NULL, *test = NULL;
    ck_assert_msg(dataset_load(&n->data, SPLIT_TRAIN, 1, 8, 8, &train) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_msg(dataset_load(&n->data, SPLIT_TEST, 1, 8, 8, &test) == VDNN_OK, "%s", vdnn_errmsg());
    FILE *log = tmpfile();
    ck_assert_ptr_nonnull(log);
    train_opts o = {.max_steps = 0, .log = log, .quiet = 1, .out = stdout};
    train_summary s;
    vdnn_status st = train_run(n, train, test, &o, &s);
    ck_assert_msg(st == VDNN_OK, "train_run on the GPU: %s", vdnn_errmsg());
    double loss[8];
    ck_assert_int_eq(log_values(log, "\"train_loss\": ", loss, 8), 4);
    for (int e = 0; e < 4; e++) ck_assert_msg(isfinite(loss[e]) && loss[e] > 0, "epoch %d loss %g", e + 1, loss[e]);
    ck_assert_msg(loss[3] < 0.5 * loss[0], "epoch losses %g .. %g on the GPU", loss[0], loss[3]);
    ck_assert_msg(s.test_acc > 0.8, "test accuracy %g after 4 epochs on the GPU", s.test_acc);
    ck_assert_uint_gt(s.pool_peak_bytes, 0);
    ck_assert_uint_le(s.pool_peak_bytes, NET_GPU_BUDGET);
    /* Checked here rather than right after device_create: with lazy module loading, cuDNN
     * and cuBLAS take their device memory when their kernels first run. */
    ck_assert_msg(device_vendor_bytes(d) > 0, "device_vendor_bytes is 0 after training: cuDNN's and cuBLAS's kernels "
                  "and workspaces take device memory beside the pool");
    fclose(log);
    dataset_free(train);
    dataset_free(test);
    net_free(n);
    device_destroy(d);
}
END_TEST

/* Three steps of GPU_NET from the same seed on the CPU and on the GPU: the same
 * dropout masks and the same data, so only rounding differs: losses within 1e-3
 * relative, parameters within 1e-3 of their largest value. */
START_TEST(test_cpu_gpu_agree)
{
    if (skip_without_gpu("test_cpu_gpu_agree")) return;
    snapshot s[2];
    for (int k = 0; k < 2; k++) {
        net *n = tn_parse(GPU_NET, NULL);
        device *d = k ? make_gpu(NET_GPU_BUDGET, 0, 0) : make_cpu(NET_GPU_BUDGET);
        ck_assert_msg(net_attach(n, d) == VDNN_OK, "%s", vdnn_errmsg());
        ck_assert_int_eq(net_plan_static(n, POLICY_NONE, ALGO_MEM), VDNN_OK);
        memset(&s[k], 0, sizeof s[k]);
        vdnn_status st = train_steps(n, 3, &s[k]);
        ck_assert_msg(st == VDNN_OK, "%s: %s", k ? "GPU" : "CPU", vdnn_errmsg());
        snapshot_params(&s[k], n);
        net_free(n);
        device_destroy(d);
    }
    for (int i = 0; i < 3; i++)
        ck_assert_msg(fabs(s[1].loss[i] - s[0].loss[i]) <= 1e-3 * fabs(s[0].loss[i]),
                      "step %d: loss %.9g on the GPU, %.9g on the CPU", i + 1, s[1].loss[i], s[0].loss[i]);
    ck_assert_int_eq(s[0].ntensors, s[1].ntensors);
    for (int t = 0; t < s[0].ntensors; t++) {
        ck_assert_str_eq(s[0].names[t], s[1].names[t]);
        char what[96];
        snprintf(what, sizeof what, "%s after 3 steps", s[0].names[t]);
        expect_close(what, s[1].data[t], s[0].data[t], s[0].count[t], 1e-3);
    }
    snapshot_free(&s[0]);
    snapshot_free(&s[1]);
}
END_TEST

/* A label outside [0, classes) fails the loss layer's forward with the CPU's message,
 * as a status, not a crash; the labels come from device memory, checked on the GPU. */
START_TEST(test_bad_label)
{
    if (skip_without_gpu("test_bad_label")) return;
    device *d = make_gpu((size_t)16 << 20, 0, 0);
    layer *l = make_layer("[softmax]\n", (shape4){4, 10, 1, 1});
    ck_assert_msg(layer_bind(l, d) == VDNN_OK, "layer_bind: %s", vdnn_errmsg());
    float hx[40];
    for (int i = 0; i < 40; i++) hx[i] = (float)(i % 7) * 0.25f;
    int32_t lab[4] = {1, 9, 10, 0};
    size_t ws_bytes = layer_workspace_bytes(l, PASS_FWD, 0);
    float *x = dev_alloc(d, sizeof hx, "x"), *y = dev_alloc(d, sizeof hx, "y");
    int32_t *labels = dev_alloc(d, sizeof lab, "labels");
    void *ws = dev_alloc(d, ws_bytes, "workspace");
    put(d, x, hx, sizeof hx);
    put(d, labels, lab, sizeof lab);
    double loss = 0;
    int correct = 0;
    exec_ctx c = {.dev = d, .n = 4, .train = 1, .labels = labels, .grad_scale = 0.25f, .loss_sum = &loss,
                  .correct = &correct, .workspace = ws, .workspace_bytes = ws_bytes};
    ck_assert_int_eq(layer_forward(l, &c, x, y), VDNN_EINVAL);
    tn_msg_has("label 10 of item 2", "outside [0, 10)");
    lab[2] = 3;
    put(d, labels, lab, sizeof lab);
    ck_assert_msg(layer_forward(l, &c, x, y) == VDNN_OK, "good labels: %s", vdnn_errmsg());
    ck_assert_msg(loss > 0 && isfinite(loss), "loss %g", loss);
    void *bufs[] = {x, y, labels, ws};
    for (int i = 0; i < 4; i++) ck_assert_int_eq(device_free(d, bufs[i]), VDNN_OK);
    layer_destroy(l, d);
    device_destroy(d);
}
END_TEST

/* The profile on a GPU: convolutions timed by cuDNN's own search (every pass has a
 * measured algorithm, the time of an algorithm its table lists), the others call by
 * call; measuring happens in the device's pool and leaves it empty and its peak reset;
 * perf then picks measured algorithms. */
START_TEST(test_profile)
{
    if (skip_without_gpu("test_profile")) return;
    device *d = make_gpu(NET_GPU_BUDGET, 0, 0);
    net *n = tn_parse(GPU_NET, NULL);
    ck_assert_msg(net_attach(n, d) == VDNN_OK, "net_attach: %s", vdnn_errmsg());
    size_t used = pool_used_bytes(device_pool(d));
    pool_reset_peak(device_pool(d));
    profile pr;
    ck_assert_msg(profile_measure(n, d, 0, 0, &pr) == VDNN_OK, "profile_measure: %s", vdnn_errmsg());
    ck_assert_uint_eq(pool_used_bytes(device_pool(d)), used);
    ck_assert_uint_le(pool_peak_bytes(device_pool(d)), used);
    ck_assert_int_eq(pr.nlayers, n->nlayers);
    ck_assert_msg(pr.h2d_bytes_per_s > 1e8 && pr.d2h_bytes_per_s > 1e8, "link %g / %g B/s", pr.h2d_bytes_per_s,
                  pr.d2h_bytes_per_s);
    int convs = 0;
    for (int i = 0; i < n->nlayers; i++) {
        const layer *l = n->layers[i];
        const layer_cost *c = &pr.layers[i];
        if (strcmp(l->ops->type, "convolutional")) {
            ck_assert_msg(c->fwd_s[0] > 0 && c->fwd_s[0] < 1, "%s: forward %g s", l->name, c->fwd_s[0]);
            continue;
        }
        convs++;
        const double *t[PASS_COUNT] = {c->fwd_s, c->bwd_data_s, c->bwd_filter_s};
        for (int p = 0; p < PASS_COUNT; p++) {
            double best = 1e30;
            for (int a = 0; a < layer_algo_count(l, p); a++) best = t[p][a] < best ? t[p][a] : best;
            if (p == PASS_BWD_DATA && i == 0) ck_assert_msg(best == 0, "%s: no dx, yet %g s", l->name, best);
            else ck_assert_msg(best > 0 && best < 1, "%s pass %d: fastest measured %g s", l->name, p, best);
            for (int a = layer_algo_count(l, p); a < PLAN_MAX_ALGOS; a++)
                ck_assert_msg(t[p][a] >= 1e30, "%s pass %d: algorithm %d is not in the table, yet timed", l->name, p, a);
            int pick = plan_choose_algo(l, p, ALGO_PERF, c);
            ck_assert_msg(t[p][pick] <= best, "%s pass %d: perf picks %d (%g s), the fastest takes %g s", l->name, p,
                          pick, t[p][pick], best);
        }
    }
    ck_assert_int_ge(convs, 2);
    profile_free(&pr);
    net_free(n);
    device_destroy(d);
}
END_TEST

/* Item by item, what a GPU session must confirm of the first-run fixes (issue 11). */

/* The profiler's fills run on the GPU: the numbers rng_normal_at gives on the host, and
 * a billion of them in well under the minutes a host fill and copy would take. */
START_TEST(test_fill_normal)
{
    if (skip_without_gpu("test_fill_normal")) return;
    const size_t count = (size_t)1 << 28;   /* 1 GiB */
    device *d = make_gpu(count * sizeof(float) + ((size_t)1 << 20), 0, 0);
    float *x = dev_alloc(d, count * sizeof(float), "x");
    double t0 = vdnn_now_s();
    ck_assert_int_eq(device_fill_normal(d, x, count, 9), VDNN_OK);
    ck_assert_int_eq(device_sync(d), VDNN_OK);
    double secs = vdnn_now_s() - t0;
    ck_assert_msg(secs < 2, "filling %zu floats took %.2f s on the GPU", count, secs);
    float *head = get(d, x, 1 << 16);
    for (size_t k = 0; k < 1 << 16; k++)
        ck_assert_msg(fabsf(head[k] - rng_normal_at(9, k)) <= 1e-5f * (1 + fabsf(head[k])),
                      "element %zu: %.9g on the GPU, %.9g on the host", k, head[k], rng_normal_at(9, k));
    free(head);
    ck_assert_int_eq(device_free(d, x), VDNN_OK);
    device_destroy(d);
}
END_TEST

/* The compute stream's wait for a copy is measured with events: the host returns at
 * once, the wait counts what the stream stood still. */
START_TEST(test_timed_wait)
{
    if (skip_without_gpu("test_timed_wait")) return;
    const size_t bytes = (size_t)512 << 20;   /* tens of ms over PCIe or C2C */
    device *d = make_gpu(bytes + ((size_t)1 << 20), 0, 0);
    void *x = dev_alloc(d, bytes, "x"), *h = device_host_alloc(d, bytes);
    ck_assert_ptr_nonnull(h);
    memset(h, 1, bytes);
    ck_assert_int_eq(device_sync(d), VDNN_OK);
    device_take_wait_s(d);
    ck_assert_int_eq(device_copy(d, STREAM_MEMORY, x, h, bytes, COPY_H2D), VDNN_OK);
    dev_event *ev = device_event_record(d, STREAM_MEMORY);
    double t0 = vdnn_now_s();
    ck_assert_int_eq(device_stream_wait_timed(d, STREAM_COMPUTE, ev), VDNN_OK);
    double host_s = vdnn_now_s() - t0;
    ck_assert_int_eq(device_sync(d), VDNN_OK);
    double waited = device_take_wait_s(d);
    ck_assert_msg(waited > 2e-3 && waited > 5 * host_s, "the compute stream waited %.3f ms (the host %.3f ms) for a "
                  "%zu MiB copy", 1e3 * waited, 1e3 * host_s, bytes >> 20);
    device_event_release(d, ev);
    device_host_free(d, h);
    ck_assert_int_eq(device_free(d, x), VDNN_OK);
    device_destroy(d);
}
END_TEST

/* Batch norm at an N*H*W large enough for a reduction to be split (half a million
 * values per channel): on a deterministic device (the project's fixed-order kernels)
 * three runs give the same bits, and agree with the CPU; cuDNN's (nondeterministic
 * devices) agrees with the CPU, and whether its bits repeat is reported. */
START_TEST(test_batchnorm_determinism)
{
    if (skip_without_gpu("test_batchnorm_determinism")) return;
    static const lcase big = {"batchnorm, train, 32x8x128x128", "[batchnorm]\n", {32, 8, 128, 128}, 1, 0, TOL_STATS, 2};
    device *cpu = make_cpu((size_t)1 << 30);
    for (int nondet = 0; nondet < 2; nondet++) {
        device *gpu = make_gpu(LAYER_GPU_BUDGET, 0, nondet);
        rig r;
        rig_init(&r, &big, cpu, gpu);
        rig_reset(&r);   /* the CPU's reference from the same scales and shifts the GPU gets */
        reference ref = run_cpu(&r, big.in.n);
        float *first[3] = {NULL, NULL, NULL};
        int repeats = 1;
        for (int run = 0; run < 3; run++) {
            rig_reset(&r);
            double loss = 0;
            int correct = 0;
            exec_ctx c = ctx_for(&r.gpu, &big, big.in.n, &loss, &correct);
            ck_assert_msg(layer_forward(r.gpu.l, &c, r.gpu.x, r.gpu.y) == VDNN_OK, "%s", vdnn_errmsg());
            ck_assert_msg(layer_backward(r.gpu.l, &c, r.gpu.x, r.gpu.y, r.gpu.dy, r.gpu.dx) == VDNN_OK, "%s",
                          vdnn_errmsg());
            float *now[3] = {get(gpu, r.gpu.y, r.ycount), get(gpu, r.gpu.dx, r.xcount),
                             get(gpu, r.gpu.l->params[0].grad, (size_t)big.in.c)};
            size_t counts[3] = {r.ycount, r.xcount, (size_t)big.in.c};
            if (run == 0) {
                expect_close("batch norm y", now[0], ref.y, r.ycount, TOL_STATS);
                expect_close("batch norm dx", now[1], ref.dx, r.xcount, TOL_STATS);
                for (int t = 0; t < 3; t++) first[t] = now[t];
                continue;
            }
            for (int t = 0; t < 3; t++) {
                int same = !memcmp(first[t], now[t], counts[t] * sizeof(float));
                repeats &= same;
                if (!nondet)
                    ck_assert_msg(same, "deterministic batch norm: run %d's %s differs from run 1's", run + 1,
                                  t == 0 ? "y" : t == 1 ? "dx" : "dgamma");
                free(now[t]);
            }
        }
        if (nondet)
            printf("note: test_batchnorm_determinism: cuDNN's batch norm at N*H*W = %d %s bit for bit over 3 runs\n",
                   big.in.n * big.in.h * big.in.w, repeats ? "repeated" : "did NOT repeat");
        for (int t = 0; t < 3; t++) free(first[t]);
        reference_free(&ref);
        rig_free(&r);
        device_destroy(gpu);
    }
    device_destroy(cpu);
}
END_TEST

/* A convolution algorithm that fails (injected with VDNN_FAULTS) is dropped on the GPU
 * too: training goes on with another, and the plan no longer takes it. */
START_TEST(test_algo_fallback)
{
    if (skip_without_gpu("test_algo_fallback")) return;
    device *d = make_gpu(NET_GPU_BUDGET, 0, 0);
    net *n = tn_parse(GPU_NET, NULL);
    ck_assert_msg(net_attach(n, d) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_int_eq(net_plan_static(n, POLICY_NONE, ALGO_PERF), VDNN_OK);
    char spec[200];
    int failed = n->layers[0]->algo[PASS_FWD];
    snprintf(spec, sizeof spec, "conv1:forward:%s", layer_algo_name(n->layers[0], PASS_FWD, failed));
    net_free(n);
    device_destroy(d);
    setenv("VDNN_FAULTS", spec, 1);
    d = make_gpu(NET_GPU_BUDGET, 0, 0);
    unsetenv("VDNN_FAULTS");
    n = tn_parse(GPU_NET, NULL);
    ck_assert_msg(net_attach(n, d) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_int_eq(net_plan_static(n, POLICY_NONE, ALGO_PERF), VDNN_OK);
    vdnn_status st = train_steps(n, 2, NULL);
    ck_assert_msg(st == VDNN_OK || layer_algo_count(n->layers[0], PASS_FWD) == 1, "with %s: %s", spec, vdnn_errmsg());
    if (st == VDNN_OK) {
        ck_assert(!layer_algo_usable(n->layers[0], PASS_FWD, failed));
        ck_assert_int_ne(n->layers[0]->algo[PASS_FWD], failed);
    }
    net_free(n);
    device_destroy(d);
}
END_TEST

static Suite *cuda_suite(void)
{
    Suite *s = suite_create("cuda");
    /* Each check creates its own CUDA context (in its forked child): a second or so. */
    TCase *cli = tcase_create("without a GPU");
    tcase_set_timeout(cli, 60);
    tcase_add_test(cli, test_without_gpu);
    suite_add_tcase(s, cli);

    TCase *dev = tcase_create("device");
    tcase_set_timeout(dev, 60);
    tcase_add_test(dev, test_device);
    suite_add_tcase(s, dev);

    TCase *lay = tcase_create("layers");
    tcase_set_timeout(lay, 120);
    tcase_add_loop_test(lay, test_conv_layer, 0, NCONV);
    tcase_add_test(lay, test_conv_asymmetric_refused);
    tcase_add_loop_test(lay, test_other_layer, 0, NOTHER);
    tcase_add_test(lay, test_multi_input_layers);
    tcase_add_test(lay, test_conv_nondeterministic);
    tcase_add_test(lay, test_tf32);
    tcase_add_test(lay, test_bad_label);
    suite_add_tcase(s, lay);

    TCase *nets = tcase_create("nets");
    tcase_set_timeout(nets, 120);
    tcase_add_loop_test(nets, test_policy_invariance, 0, 4);
    tcase_add_test(nets, test_budget);
    tcase_add_test(nets, test_loss_falls);
    tcase_add_test(nets, test_cpu_gpu_agree);
    tcase_add_test(nets, test_profile);
    tcase_add_test(nets, test_algo_fallback);
    suite_add_tcase(s, nets);

    TCase *first = tcase_create("first run");
    tcase_set_timeout(first, 180);
    tcase_add_test(first, test_fill_normal);
    tcase_add_test(first, test_timed_wait);
    tcase_add_test(first, test_batchnorm_determinism);
    suite_add_tcase(s, first);
    return s;
}

int main(void) { return tn_run_suite(cuda_suite()); }
