/* Check suite for vdnn/device through its public interface, on the CPU device: memory
 * from the budgeted pool, synchronous copies, the memory stream (a copy-engine thread,
 * FIFO, optionally throttled), events and their reference counts, and frees that wait
 * for an event.
 *
 * Timing: a throttled link makes a copy take *at least* bytes / bandwidth, so every
 * timing assertion here is a lower bound, or an implication of one ("if less than T has
 * passed, the event cannot be done"). Nothing asserts that something is fast: a loaded
 * CI machine may take any time. Run this suite under ASan (leaks, double frees of
 * events) and TSan (the copy engine against the issuing thread). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/testnet.h"
#include "vdnn/device.h"
#include "vdnn/mempool.h"
#include "vdnn/status.h"

/* 4 MB at 0.25 GB/s: 16 ms per copy. */
#define SLOW_GBPS 0.25
#define SLOW_BYTES ((size_t)4000000)
#define SLOW_S ((double)SLOW_BYTES / (SLOW_GBPS * 1e9))
/* Slack for rounding the throttle's deadline to nanoseconds. */
#define EPS_S 1e-6

static device *make_device(size_t budget, double link_gbps)
{
    device_options o = {.kind = DEVICE_CPU, .budget_bytes = budget, .threads = 1, .link_gbps = link_gbps};
    device *d = NULL;
    vdnn_status st = device_create(&o, &d);
    ck_assert_msg(st == VDNN_OK, "device_create failed: %s", vdnn_errmsg());
    ck_assert_ptr_nonnull(d);
    return d;
}

static void *dev_alloc_ok(device *d, size_t bytes, const char *tensor)
{
    void *p = NULL;
    vdnn_status st = device_alloc(d, bytes, "test", tensor, &p);
    ck_assert_msg(st == VDNN_OK, "device_alloc(%zu) failed: %s", bytes, vdnn_errmsg());
    ck_assert_ptr_nonnull(p);
    return p;
}

static unsigned char *host_alloc_ok(device *d, size_t bytes)
{
    unsigned char *p = device_host_alloc(d, bytes);
    ck_assert_ptr_nonnull(p);
    return p;
}

static pool_stats dev_stats(device *d)
{
    pool_stats s;
    pool_get_stats(device_pool(d), &s);
    return s;
}

/* A pattern that differs per seed and per position, written and checked a 64-bit word
 * at a time (buffers here are at least 8-byte aligned) so that it stays cheap under
 * ThreadSanitizer. */
static uint64_t pattern(size_t word, unsigned seed)
{
    return ((uint64_t)word + 1) * 0x9E3779B97F4A7C15ull ^ ((uint64_t)seed + 1) * 0xD1B54A32D192ED03ull;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    uint64_t *w = (uint64_t *)(void *)p;
    for (size_t i = 0; i < n / 8; i++) w[i] = pattern(i, seed);
    for (size_t i = n / 8 * 8; i < n; i++) p[i] = (unsigned char)pattern(n, seed + (unsigned)i);
}

/* Index of the first byte that differs from fill(.., seed) (to the word), or n. */
static size_t check_fill(const unsigned char *p, size_t n, unsigned seed)
{
    const uint64_t *w = (const uint64_t *)(const void *)p;
    for (size_t i = 0; i < n / 8; i++)
        if (w[i] != pattern(i, seed)) return 8 * i;
    for (size_t i = n / 8 * 8; i < n; i++)
        if (p[i] != (unsigned char)pattern(n, seed + (unsigned)i)) return i;
    return n;
}

#define ASSERT_FILLED(p, n, seed)                                                         \
    do {                                                                                  \
        size_t at_ = check_fill((p), (n), (seed));                                        \
        ck_assert_msg(at_ == (size_t)(n), "%s differs from pattern %u at byte %zu", #p,    \
                      (unsigned)(seed), at_);                                             \
    } while (0)

static void assert_msg_has(const char *part)
{
    const char *msg = vdnn_errmsg();
    ck_assert_msg(strstr(msg, part) != NULL, "message '%s' lacks '%s'", msg, part);
}

/* ---- creation and memory ---------------------------------------------------------- */

START_TEST(test_create_cpu)
{
    device *d = make_device((size_t)1 << 20, 0);
    ck_assert_int_eq(device_get_kind(d), DEVICE_CPU);
    ck_assert_ptr_nonnull(strstr(device_describe(d), "cpu"));
    ck_assert_ptr_nonnull(device_pool(d));
    pool_stats s = dev_stats(d);
    ck_assert_uint_eq(s.capacity_bytes, (size_t)1 << 20);
    ck_assert_uint_eq(s.used_bytes, 0);
    device_destroy(d);

    /* A budget that is not a multiple of the alignment is rounded down. */
    d = make_device(((size_t)1 << 20) + 100, 2.5);
    ck_assert_uint_eq(dev_stats(d).capacity_bytes, (size_t)1 << 20);
    ck_assert_ptr_nonnull(strstr(device_describe(d), "2.5"));
    device_destroy(d);
    device_destroy(NULL);
}
END_TEST

START_TEST(test_create_bad)
{
    device *d = (device *)&d;
    device_options o = {.kind = DEVICE_CPU, .budget_bytes = 0, .threads = 1};
    ck_assert_int_eq(device_create(&o, &d), VDNN_EINVAL);
    ck_assert_ptr_null(d);
    d = (device *)&d;
    o.budget_bytes = POOL_ALIGN - 1;
    ck_assert_int_eq(device_create(&o, &d), VDNN_EINVAL);
    ck_assert_ptr_null(d);
    assert_msg_has("budget");

    /* A GPU index past the last one (with no GPU, or no CUDA in the build, any index):
     * a clean error, no crash, no device. */
    d = (device *)&d;
    o = (device_options){.kind = DEVICE_CUDA, .budget_bytes = (size_t)1 << 20, .cuda_index = device_cuda_count()};
    ck_assert_int_eq(device_create(&o, &d), VDNN_EDEVICE);
    ck_assert_ptr_null(d);
    assert_msg_has(device_cuda_count() ? "GPU" : "CUDA");
}
END_TEST

START_TEST(test_alloc_free)
{
    device *d = make_device((size_t)1 << 20, 0);
    unsigned char *a = dev_alloc_ok(d, 1000, "a");
    unsigned char *b = dev_alloc_ok(d, 5000, "b");
    ck_assert_uint_eq((uintptr_t)a % POOL_ALIGN, 0);
    ck_assert_uint_eq((uintptr_t)b % POOL_ALIGN, 0);
    ck_assert(b >= a + pool_round(1000) || a >= b + pool_round(5000));
    pool_stats s = dev_stats(d);
    ck_assert_uint_eq(s.used_bytes, pool_round(1000) + pool_round(5000));
    ck_assert_uint_eq(s.live_blocks, 2);
    ck_assert_uint_eq(s.allocs, 2);
    /* Device memory on the CPU device is ordinary memory: every byte is writable. */
    memset(a, 0xab, 1000);
    memset(b, 0xcd, 5000);
    ck_assert_uint_eq(a[999], 0xab);

    ck_assert_int_eq(device_free(d, a), VDNN_OK);
    ck_assert_uint_eq(dev_stats(d).used_bytes, pool_round(5000));
    ck_assert_int_eq(device_free(d, a), VDNN_EINVAL);          /* double free */
    ck_assert_int_eq(device_free(d, b + POOL_ALIGN), VDNN_EINVAL);   /* inside a block */
    ck_assert_int_eq(device_free(d, NULL), VDNN_EINVAL);
    unsigned char *h = host_alloc_ok(d, 64);
    ck_assert_int_eq(device_free(d, h), VDNN_EINVAL);          /* not device memory */
    assert_msg_has("outside");
    /* A refused free_after still drops the event reference (ASan: no leak). */
    dev_event *ev = device_event_record(d, STREAM_COMPUTE);
    ck_assert_int_eq(device_free_after(d, h, ev), VDNN_EINVAL);
    ev = device_event_record(d, STREAM_MEMORY);
    ck_assert_int_eq(device_free_after(d, a, ev), VDNN_EINVAL);
    device_host_free(d, h);
    device_host_free(d, NULL);

    ck_assert_int_eq(device_free(d, b), VDNN_OK);
    s = dev_stats(d);
    ck_assert_uint_eq(s.used_bytes, 0);
    ck_assert_uint_eq(s.free_blocks, 1);
    ck_assert_uint_eq(s.largest_free_bytes, (size_t)1 << 20);
    /* The whole budget is available as one block, and not a byte more. */
    void *all = dev_alloc_ok(d, (size_t)1 << 20, "all");
    void *none = (void *)&none;
    ck_assert_int_eq(device_alloc(d, 1, "l", "t", &none), VDNN_EBUDGET);
    ck_assert_ptr_null(none);
    ck_assert_int_eq(device_free(d, all), VDNN_OK);
    device_destroy(d);
}
END_TEST

/* The names of an iteration's blocks (in every budget refusal) are joined without
 * snprintf: "output x[12]", "conv1.weights.grad" and the like. */
START_TEST(test_block_names)
{
    char b[16], d[16];
    ck_assert_str_eq(vdnn_join(b, sizeof b, "x[", vdnn_itoa(12, d, sizeof d), "]"), "x[12]");
    ck_assert_str_eq(vdnn_join(b, sizeof b, "output ", "x[0]", NULL), "output x[0]");
    ck_assert_str_eq(vdnn_join(b, sizeof b, NULL, "w", ".grad"), "w.grad");
    ck_assert_str_eq(vdnn_join(b, 5, "abc", "def", "ghi"), "abcd");   /* cut to fit */
    ck_assert_str_eq(vdnn_itoa(0, d, sizeof d), "0");
    ck_assert_str_eq(vdnn_itoa(-2147483647 - 1, d, sizeof d), "-2147483648");
    ck_assert_str_eq(vdnn_itoa(2147483647, d, sizeof d), "2147483647");
}
END_TEST

START_TEST(test_budget_exceeded)
{
    device *d = make_device((size_t)64 << 10, 0);
    void *a = dev_alloc_ok(d, (size_t)16 << 10, "w");
    void *p = (void *)&p;
    ck_assert_int_eq(device_alloc(d, (size_t)1 << 20, "conv4_1", "x[12]", &p), VDNN_EBUDGET);
    ck_assert_ptr_null(p);
    char buf[32];
    assert_msg_has("conv4_1");
    assert_msg_has("x[12]");
    assert_msg_has(vdnn_fmt_bytes((size_t)1 << 20, buf, sizeof buf));    /* asked */
    assert_msg_has(vdnn_fmt_bytes((size_t)48 << 10, buf, sizeof buf));   /* free and largest */
    ck_assert_uint_eq(dev_stats(d).failures, 1);
    ck_assert_uint_eq(dev_stats(d).used_bytes, (size_t)16 << 10);
    ck_assert_int_eq(device_free(d, a), VDNN_OK);
    device_destroy(d);
}
END_TEST

/* ---- synchronous copies -------------------------------------------------------------- */

START_TEST(test_upload_download_zero)
{
    const size_t n = (size_t)1 << 20;
    device *d = make_device(4 * n, 0);
    unsigned char *h = host_alloc_ok(d, n), *back = host_alloc_ok(d, n);
    unsigned char *x = dev_alloc_ok(d, n, "x"), *y = dev_alloc_ok(d, n, "y");
    fill(h, n, 1);
    memset(back, 0, n);
    ck_assert_int_eq(device_upload(d, x, h, n), VDNN_OK);
    ck_assert_int_eq(device_download(d, back, x, n), VDNN_OK);
    ASSERT_FILLED(back, n, 1);

    /* D2D on the compute stream is synchronous. */
    ck_assert_int_eq(device_copy(d, STREAM_COMPUTE, y, x, n, COPY_D2D), VDNN_OK);
    ASSERT_FILLED(y, n, 1);

    /* Zero a range in the middle; the rest is untouched. */
    const size_t lo = 1000, len = 70000;
    ck_assert_int_eq(device_zero(d, x + lo, len), VDNN_OK);
    ck_assert_int_eq(device_download(d, back, x, n), VDNN_OK);
    for (size_t i = 0; i < n; i++) {
        if (i >= lo && i < lo + len) {
            if (back[i]) ck_abort_msg("byte %zu not zeroed", i);
        } else if (back[i] != h[i]) {
            ck_abort_msg("byte %zu changed by device_zero", i);
        }
    }
    /* Zero-byte operations are no-ops, whatever the pointers. */
    ck_assert_int_eq(device_zero(d, NULL, 0), VDNN_OK);
    ck_assert_int_eq(device_copy(d, STREAM_MEMORY, NULL, NULL, 0, COPY_H2D), VDNN_OK);
    ck_assert_int_eq(device_upload(d, NULL, NULL, 0), VDNN_OK);
    device_host_free(d, h);
    device_host_free(d, back);
    device_destroy(d);
}
END_TEST

/* ---- the memory stream ------------------------------------------------------------------ */

START_TEST(test_memory_stream_fifo)
{
    device *d = make_device(2 * SLOW_BYTES, SLOW_GBPS);
    unsigned char *src1 = host_alloc_ok(d, SLOW_BYTES), *src2 = host_alloc_ok(d, SLOW_BYTES);
    unsigned char *dst1 = host_alloc_ok(d, SLOW_BYTES), *dst2 = host_alloc_ok(d, SLOW_BYTES);
    unsigned char *x = dev_alloc_ok(d, SLOW_BYTES, "x");
    fill(src1, SLOW_BYTES, 1);
    fill(src2, SLOW_BYTES, 2);
    memset(dst1, 0, SLOW_BYTES);
    memset(dst2, 0, SLOW_BYTES);

    /* Each copy reads what the one before wrote into x: only FIFO order gets pattern 1
     * into dst1 and pattern 2 into dst2. */
    struct { void *dst; const void *src; copy_kind k; } c[4] = {
        {x, src1, COPY_H2D}, {dst1, x, COPY_D2H}, {x, src2, COPY_H2D}, {dst2, x, COPY_D2H}};
    dev_event *ev[4];
    double t0 = vdnn_now_s();
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(device_copy(d, STREAM_MEMORY, c[i].dst, c[i].src, SLOW_BYTES, c[i].k), VDNN_OK);
        ev[i] = device_event_record(d, STREAM_MEMORY);
        ck_assert_ptr_nonnull(ev[i]);
    }
    /* Enqueueing returned before the copies ran: the last event cannot be done before
     * four throttled copies' time has passed. */
    int last_done = device_event_done(d, ev[3]);
    double t_issue = vdnn_now_s() - t0;
    ck_assert_msg(!last_done || t_issue >= 4 * SLOW_S - EPS_S,
                  "4 copies done after %.1f ms, faster than the link allows", t_issue * 1e3);
    /* A compute-stream event does not wait for the memory stream. */
    dev_event *ce = device_event_record(d, STREAM_COMPUTE);
    ck_assert_int_eq(device_event_done(d, ce), 1);
    device_event_wait(d, ce);
    device_event_release(d, ce);

    /* Poll: events complete in order, none before its copies could have finished. Read
     * from last to first, so that "a later event done, an earlier one not" would be
     * seen if it ever happened. */
    double seen[4] = {-1, -1, -1, -1};
    while (seen[3] < 0) {
        int done[4];
        for (int i = 3; i >= 0; i--) done[i] = device_event_done(d, ev[i]);
        double t = vdnn_now_s() - t0;
        for (int i = 3; i > 0; i--)
            if (done[i] && !done[i - 1]) ck_abort_msg("event %d done before event %d", i, i - 1);
        for (int i = 0; i < 4; i++)
            if (done[i] && seen[i] < 0) seen[i] = t;
        struct timespec ts = {0, 500000};
        nanosleep(&ts, NULL);
    }
    for (int i = 0; i < 4; i++)
        ck_assert_msg(seen[i] >= (i + 1) * SLOW_S - EPS_S, "copy %d done after %.2f ms < %.2f ms", i,
                      seen[i] * 1e3, (i + 1) * SLOW_S * 1e3);
    ASSERT_FILLED(dst1, SLOW_BYTES, 1);
    ASSERT_FILLED(dst2, SLOW_BYTES, 2);
    for (int i = 0; i < 4; i++) device_event_release(d, ev[i]);
    ck_assert_int_eq(device_free(d, x), VDNN_OK);
    device_host_free(d, src1);
    device_host_free(d, src2);
    device_host_free(d, dst1);
    device_host_free(d, dst2);
    device_destroy(d);
}
END_TEST

/* Copies src -> x -> dst on the memory stream and returns an event after them. */
static dev_event *slow_round_trip(device *d, unsigned char *x, unsigned char *src, unsigned char *dst)
{
    ck_assert_int_eq(device_copy(d, STREAM_MEMORY, x, src, SLOW_BYTES, COPY_H2D), VDNN_OK);
    ck_assert_int_eq(device_copy(d, STREAM_MEMORY, dst, x, SLOW_BYTES, COPY_D2H), VDNN_OK);
    dev_event *ev = device_event_record(d, STREAM_MEMORY);
    ck_assert_ptr_nonnull(ev);
    return ev;
}

START_TEST(test_event_wait_blocks)
{
    device *d = make_device(SLOW_BYTES + POOL_ALIGN, SLOW_GBPS);
    unsigned char *src = host_alloc_ok(d, SLOW_BYTES), *dst = host_alloc_ok(d, SLOW_BYTES);
    unsigned char *x = dev_alloc_ok(d, SLOW_BYTES, "x");
    fill(src, SLOW_BYTES, 3);
    memset(dst, 0, SLOW_BYTES);
    double t0 = vdnn_now_s();
    dev_event *ev = slow_round_trip(d, x, src, dst);
    device_event_wait(d, ev);
    double t = vdnn_now_s() - t0;
    ck_assert_int_eq(device_event_done(d, ev), 1);
    ck_assert_msg(t >= 2 * SLOW_S - EPS_S, "wait returned after %.2f ms", t * 1e3);
    ASSERT_FILLED(dst, SLOW_BYTES, 3);
    device_event_wait(d, ev);   /* waiting again on a done event returns */
    device_event_release(d, ev);
    device_host_free(d, src);
    device_host_free(d, dst);
    device_destroy(d);
}
END_TEST

START_TEST(test_stream_wait_compute)
{
    device *d = make_device(SLOW_BYTES + POOL_ALIGN, SLOW_GBPS);
    unsigned char *src = host_alloc_ok(d, SLOW_BYTES), *dst = host_alloc_ok(d, SLOW_BYTES);
    unsigned char *x = dev_alloc_ok(d, SLOW_BYTES, "x");
    fill(src, SLOW_BYTES, 4);
    memset(dst, 0, SLOW_BYTES);
    double t0 = vdnn_now_s();
    dev_event *ev = slow_round_trip(d, x, src, dst);
    /* Compute work runs on this thread, so the compute stream waiting is the host
     * waiting: afterwards the copies are done and their data is there to compute on. */
    device_stream_wait(d, STREAM_COMPUTE, ev);
    double t = vdnn_now_s() - t0;
    ck_assert_int_eq(device_event_done(d, ev), 1);
    ck_assert_msg(t >= 2 * SLOW_S - EPS_S, "stream wait returned after %.2f ms", t * 1e3);
    ASSERT_FILLED(dst, SLOW_BYTES, 4);
    device_stream_wait(d, STREAM_MEMORY, ev);
    device_stream_wait(d, STREAM_COMPUTE, NULL);
    device_event_release(d, ev);

    /* device_stream_sync on the memory stream waits for everything queued. */
    fill(src, SLOW_BYTES, 5);
    t0 = vdnn_now_s();
    ck_assert_int_eq(device_copy(d, STREAM_MEMORY, x, src, SLOW_BYTES, COPY_H2D), VDNN_OK);
    device_stream_sync(d, STREAM_MEMORY);
    t = vdnn_now_s() - t0;
    ck_assert_msg(t >= SLOW_S - EPS_S, "stream sync returned after %.2f ms", t * 1e3);
    ASSERT_FILLED(x, SLOW_BYTES, 5);
    device_stream_sync(d, STREAM_COMPUTE);
    device_host_free(d, src);
    device_host_free(d, dst);
    device_destroy(d);
}
END_TEST

START_TEST(test_events_done_at_once)
{
    device *d = make_device((size_t)1 << 20, SLOW_GBPS);
    /* Nothing queued: a memory-stream event is complete. */
    dev_event *m = device_event_record(d, STREAM_MEMORY);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(device_event_done(d, m), 1);
    device_event_wait(d, m);
    device_event_release(d, m);
    /* Compute-stream events are complete when recorded. */
    dev_event *c = device_event_record(d, STREAM_COMPUTE);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(device_event_done(d, c), 1);
    device_event_release(d, c);
    /* No event: treated as done; wait and release are no-ops. */
    ck_assert_int_eq(device_event_done(d, NULL), 1);
    device_event_wait(d, NULL);
    device_event_release(d, NULL);
    ck_assert_ptr_null(device_event_retain(NULL));
    device_destroy(d);
}
END_TEST

/* ---- throttling -------------------------------------------------------------------------- */

START_TEST(test_throttle_lower_bound)
{
    const size_t n = (size_t)16 << 20;
    device *d = make_device(n, 1.0);
    unsigned char *h = host_alloc_ok(d, n);
    unsigned char *x = dev_alloc_ok(d, n, "x");
    fill(h, n, 6);
    double t0 = vdnn_now_s();
    ck_assert_int_eq(device_copy(d, STREAM_MEMORY, x, h, n, COPY_H2D), VDNN_OK);
    dev_event *ev = device_event_record(d, STREAM_MEMORY);
    device_event_wait(d, ev);
    double t = vdnn_now_s() - t0;
    /* 16 MiB at 1 GB/s is 16.78 ms. */
    ck_assert_msg(t >= 16.7e-3, "16 MiB at 1 GB/s took only %.2f ms", t * 1e3);
    ASSERT_FILLED(x, n, 6);
    device_event_release(d, ev);
    device_host_free(d, h);
    device_destroy(d);
}
END_TEST

START_TEST(test_unthrottled_copies)
{
    const size_t n = (size_t)4 << 20;
    device *d = make_device(2 * n, 0);
    unsigned char *h = host_alloc_ok(d, n), *back = host_alloc_ok(d, n), *h2 = host_alloc_ok(d, n);
    unsigned char *x = dev_alloc_ok(d, n, "x"), *y = dev_alloc_ok(d, n, "y");
    fill(h, n, 7);
    memset(back, 0, n);
    memset(h2, 0, n);
    ck_assert_int_eq(device_copy(d, STREAM_MEMORY, x, h, n, COPY_H2D), VDNN_OK);
    ck_assert_int_eq(device_copy(d, STREAM_MEMORY, y, x, n, COPY_D2D), VDNN_OK);
    ck_assert_int_eq(device_copy(d, STREAM_MEMORY, back, y, n, COPY_D2H), VDNN_OK);
    ck_assert_int_eq(device_copy(d, STREAM_MEMORY, h2, back, n, COPY_H2H), VDNN_OK);
    dev_event *ev = device_event_record(d, STREAM_MEMORY);
    device_event_wait(d, ev);
    ASSERT_FILLED(x, n, 7);
    ASSERT_FILLED(y, n, 7);
    ASSERT_FILLED(back, n, 7);
    ASSERT_FILLED(h2, n, 7);
    device_event_release(d, ev);
    device_host_free(d, h);
    device_host_free(d, back);
    device_host_free(d, h2);
    device_destroy(d);
}
END_TEST

/* A long chain of small dependent copies, host -> device -> host -> ..., issued faster
 * than the copy engine drains them: the queue grows (and wraps) while the engine works,
 * and the result is right only if every copy ran in order. */
START_TEST(test_many_queued_copies)
{
    enum { LINKS = 600, CHUNK = 4096 };
    device *d = make_device((size_t)LINKS / 2 * CHUNK + POOL_ALIGN, 2.0);
    unsigned char *hbuf = host_alloc_ok(d, (size_t)(LINKS / 2 + 1) * CHUNK);
    unsigned char *dbuf = dev_alloc_ok(d, (size_t)LINKS / 2 * CHUNK, "chain");
    memset(hbuf, 0, (size_t)(LINKS / 2 + 1) * CHUNK);
    fill(hbuf, CHUNK, 8);
    dev_event *mid = NULL;
    for (int i = 0; i < LINKS; i++) {
        int k = i / 2;
        unsigned char *h = hbuf + (size_t)k * CHUNK, *hn = hbuf + (size_t)(k + 1) * CHUNK;
        unsigned char *dv = dbuf + (size_t)k * CHUNK;
        if (i % 2 == 0)
            ck_assert_int_eq(device_copy(d, STREAM_MEMORY, dv, h, CHUNK, COPY_H2D), VDNN_OK);
        else
            ck_assert_int_eq(device_copy(d, STREAM_MEMORY, hn, dv, CHUNK, COPY_D2H), VDNN_OK);
        if (i == LINKS / 2) mid = device_event_record(d, STREAM_MEMORY);
    }
    dev_event *end = device_event_record(d, STREAM_MEMORY);
    device_event_wait(d, end);
    ck_assert_int_eq(device_event_done(d, mid), 1);
    for (int k = 0; k <= LINKS / 2; k++)
        if (check_fill(hbuf + (size_t)k * CHUNK, CHUNK, 8) != CHUNK) ck_abort_msg("link %d is wrong", k);
    device_event_release(d, mid);
    device_event_release(d, end);
    device_host_free(d, hbuf);
    device_destroy(d);
}
END_TEST

/* ---- frees after events ------------------------------------------------------------------- */

START_TEST(test_free_after_reuse)
{
    const size_t rs = pool_round(SLOW_BYTES);
    device *d = make_device(2 * rs, SLOW_GBPS);
    unsigned char *h = host_alloc_ok(d, SLOW_BYTES);
    unsigned char *x = dev_alloc_ok(d, SLOW_BYTES, "x");
    fill(x, SLOW_BYTES, 9);
    memset(h, 0, SLOW_BYTES);

    /* Offload x, then free it once the copy is done, keeping a reference to look at. */
    ck_assert_int_eq(device_copy(d, STREAM_MEMORY, h, x, SLOW_BYTES, COPY_D2H), VDNN_OK);
    dev_event *ev = device_event_record(d, STREAM_MEMORY);
    dev_event *mine = device_event_retain(ev);
    ck_assert_ptr_eq(mine, ev);
    ck_assert_int_eq(device_free_after(d, x, ev), VDNN_OK);
    ck_assert_uint_eq(dev_stats(d).pending_bytes, rs);
    ck_assert_uint_eq(dev_stats(d).used_bytes, rs);

    /* Room elsewhere: the new block goes elsewhere unless the copy has finished. */
    unsigned char *y = dev_alloc_ok(d, SLOW_BYTES, "y");
    ck_assert_msg(y != x || device_event_done(d, mine), "x was reused before its copy completed");
    if (y == x) {
        /* The copy had finished already (a very slow machine): the rest is moot. */
        ASSERT_FILLED(h, SLOW_BYTES, 9);
        ck_assert_int_eq(device_free(d, y), VDNN_OK);
        device_event_release(d, mine);
        device_host_free(d, h);
        device_destroy(d);
        return;
    }
    device_event_wait(d, mine);
    /* Done, but nothing reclaims it until the pool is next asked. */
    ck_assert_uint_eq(dev_stats(d).pending_bytes, rs);
    ck_assert_int_eq(device_free(d, y), VDNN_OK);
    unsigned char *z = dev_alloc_ok(d, 2 * SLOW_BYTES, "z");   /* needs x's bytes back */
    ck_assert_ptr_eq(z, x);
    ck_assert_uint_eq(dev_stats(d).pending_bytes, 0);
    ASSERT_FILLED(h, SLOW_BYTES, 9);
    ck_assert_int_eq(device_event_done(d, mine), 1);   /* our reference outlives the pool's */
    device_event_release(d, mine);
    ck_assert_int_eq(device_free(d, z), VDNN_OK);
    device_host_free(d, h);
    device_destroy(d);
}
END_TEST

/* When memory is short, the allocation itself waits for the copy, and the reused bytes
 * are written only after the copy has read them. */
START_TEST(test_free_after_alloc_waits)
{
    const size_t rs = pool_round(SLOW_BYTES);
    device *d = make_device(rs, SLOW_GBPS);
    unsigned char *h = host_alloc_ok(d, SLOW_BYTES);
    unsigned char *x = dev_alloc_ok(d, SLOW_BYTES, "x");
    fill(x, SLOW_BYTES, 10);
    memset(h, 0, SLOW_BYTES);
    double t0 = vdnn_now_s();
    ck_assert_int_eq(device_copy(d, STREAM_MEMORY, h, x, SLOW_BYTES, COPY_D2H), VDNN_OK);
    ck_assert_int_eq(device_free_after(d, x, device_event_record(d, STREAM_MEMORY)), VDNN_OK);
    unsigned char *y = dev_alloc_ok(d, SLOW_BYTES, "y");
    double t = vdnn_now_s() - t0;
    ck_assert_ptr_eq(y, x);
    ck_assert_msg(t >= SLOW_S - EPS_S, "the allocation returned after %.2f ms, before the copy", t * 1e3);
    memset(y, 0, SLOW_BYTES);   /* TSan: ordered after the copy engine's read */
    ASSERT_FILLED(h, SLOW_BYTES, 10);
    pool_stats s = dev_stats(d);
    ck_assert_uint_eq(s.pending_bytes, 0);
    ck_assert_uint_eq(s.used_bytes, rs);
    ck_assert_int_eq(device_free(d, y), VDNN_OK);
    device_host_free(d, h);
    device_destroy(d);
}
END_TEST

/* ---- event reference counts --------------------------------------------------------------- */

START_TEST(test_event_refcount)
{
    device *d = make_device((size_t)1 << 20, 0);
    for (int s = 0; s < 2; s++) {
        dev_event *ev = device_event_record(d, s ? STREAM_MEMORY : STREAM_COMPUTE);
        ck_assert_ptr_nonnull(ev);
        ck_assert_ptr_eq(device_event_retain(ev), ev);
        ck_assert_ptr_eq(device_event_retain(ev), ev);
        device_event_release(d, ev);
        device_event_release(d, ev);
        ck_assert_int_eq(device_event_done(d, ev), 1);   /* one reference left: still valid */
        device_event_release(d, ev);                     /* freed here (ASan checks) */
    }
    /* Handing the only reference to the pool: the pool releases it. */
    void *x = dev_alloc_ok(d, 4096, "x");
    ck_assert_int_eq(device_free_after(d, x, device_event_record(d, STREAM_COMPUTE)), VDNN_OK);
    void *y = dev_alloc_ok(d, (size_t)1 << 20, "y");   /* reclaims x, releasing the event */
    ck_assert_ptr_eq(y, x);
    ck_assert_int_eq(device_free(d, y), VDNN_OK);
    /* One event guarding several blocks: each free_after takes its own reference. */
    void *a = dev_alloc_ok(d, 4096, "a"), *b = dev_alloc_ok(d, 4096, "b");
    dev_event *ev = device_event_record(d, STREAM_MEMORY);
    ck_assert_int_eq(device_free_after(d, a, device_event_retain(ev)), VDNN_OK);
    ck_assert_int_eq(device_free_after(d, b, ev), VDNN_OK);
    pool_reclaim(device_pool(d), 1);
    ck_assert_uint_eq(dev_stats(d).used_bytes, 0);
    device_destroy(d);
}
END_TEST

/* ---- destroy with work in flight ------------------------------------------------------------ */

START_TEST(test_destroy_completes_queued_copies)
{
    /* Host buffers from malloc, so that they outlive the device. */
    unsigned char *src = malloc(SLOW_BYTES), *dst = malloc(SLOW_BYTES);
    ck_assert_ptr_nonnull(src);
    ck_assert_ptr_nonnull(dst);
    fill(src, SLOW_BYTES, 11);
    memset(dst, 0, SLOW_BYTES);
    device *d = make_device(2 * SLOW_BYTES, SLOW_GBPS);
    unsigned char *x = dev_alloc_ok(d, SLOW_BYTES, "x");
    unsigned char *y = dev_alloc_ok(d, SLOW_BYTES / 2, "y");
    double t0 = vdnn_now_s();
    ck_assert_int_eq(device_copy(d, STREAM_MEMORY, x, src, SLOW_BYTES, COPY_H2D), VDNN_OK);
    ck_assert_int_eq(device_copy(d, STREAM_MEMORY, dst, x, SLOW_BYTES, COPY_D2H), VDNN_OK);
    /* Blocks pending an event at destroy, and a block still live: no leak, no crash. */
    ck_assert_int_eq(device_free_after(d, x, device_event_record(d, STREAM_MEMORY)), VDNN_OK);
    (void)y;
    device_destroy(d);
    double t = vdnn_now_s() - t0;
    /* Destroy drained the memory stream: both copies ran, in order. */
    ASSERT_FILLED(dst, SLOW_BYTES, 11);
    ck_assert_msg(t >= 2 * SLOW_S - EPS_S, "destroy returned after %.2f ms", t * 1e3);
    free(src);
    free(dst);
}
END_TEST

START_TEST(test_create_destroy_many)
{
    /* Threads are started and joined cleanly, every time. */
    for (int i = 0; i < 20; i++) {
        device *d = make_device((size_t)64 << 10, i % 2 ? 1.0 : 0);
        unsigned char h[512] = {0};
        void *x = dev_alloc_ok(d, sizeof h, "x");
        ck_assert_int_eq(device_copy(d, STREAM_MEMORY, x, h, sizeof h, COPY_H2D), VDNN_OK);
        ck_assert_int_eq(device_copy(d, STREAM_MEMORY, h, x, sizeof h, COPY_D2H), VDNN_OK);
        device_destroy(d);
    }
}
END_TEST

/* ---- device names ---- */

/* The list parses to `count` devices whose names, joined by commas, are `names`. */
static void list_is(const char *text, int unique, const char *names)
{
    device_options base = {.budget_bytes = 12345}, *o = NULL;
    int count = 0;
    ck_assert_msg(device_parse_list("--devices", text, &base, unique, &o, &count) == VDNN_OK, "%s: %s", text,
                  vdnn_errmsg());
    char got[256] = "", one[32];
    for (int k = 0; k < count; k++) {
        ck_assert_uint_eq(o[k].budget_bytes, 12345);
        snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", k ? "," : "",
                 device_options_name(&o[k], one, sizeof one));
    }
    ck_assert_str_eq(got, names);
    free(o);
}

static void list_fails(const char *text, int unique, const char *a, const char *b)
{
    device_options *o = (device_options *)&o;
    int count = -1;
    ck_assert_int_eq(device_parse_list("--devices", text, NULL, unique, &o, &count), VDNN_EINVAL);
    ck_assert_ptr_null(o);
    ck_assert_int_eq(count, 0);
    tn_msg_has(a, b);
}

START_TEST(test_parse_devices)
{
    list_is("cpu", 0, "cpu");
    list_is("cpu,cpu,cpu:3,cuda,cuda:2", 0, "cpu,cpu,cpu:3,cuda:0,cuda:2");
    list_is("cpu:0,cpu:0", 0, "cpu:0,cpu:0");
    list_is("cpu:0,cpu:1,cuda:0,cuda:1", 1, "cpu:0,cpu:1,cuda:0,cuda:1");
    list_is("cpu:4096,cuda:1024", 1, "cpu:4096,cuda:1024");
    list_fails("", 0, "entry 1 of 1 is empty", NULL);
    list_fails("cpu,,cpu", 0, "entry 2 of 3 is empty", NULL);
    list_fails(",cpu", 0, "entry 1 of 2", NULL);
    list_fails("cpu,", 0, "entry 2 of 2", NULL);
    list_fails("cpu, cpu", 0, "' cpu' (entry 2 of 2)", NULL);
    const char *bad[] = {"cpu:", "cpu:x", "cpu:-1", "cpu:+1", "cpu: 1", "cpu:4097", "cuda:1025", "cuda0", "cpus",
                         "gpu", "CPU", "cuda:1:2", "cpu:99999999999"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) list_fails(bad[k], 0, "--devices", bad[k]);
    list_fails("cpu:1,cpu:0,cpu:1", 1, "cpu:1 is given twice", "entries 1 and 3");
    list_fails("cuda:0,cuda", 1, "cuda:0 is given twice", NULL);
    list_fails("cpu:0,cpu", 1, "entry 2 is cpu", "cpu:N");
    /* the most entries a list may have, and one more */
    char *many = malloc(4 * (DEVICE_LIST_MAX + 1));
    ck_assert_ptr_nonnull(many);
    for (int k = 0; k <= DEVICE_LIST_MAX; k++) memcpy(many + 4 * k, "cpu,", 4);
    many[4 * DEVICE_LIST_MAX - 1] = 0;
    device_options *o = NULL;
    int count = 0;
    ck_assert_int_eq(device_parse_list("--devices", many, NULL, 0, &o, &count), VDNN_OK);
    ck_assert_int_eq(count, DEVICE_LIST_MAX);
    free(o);
    many[4 * DEVICE_LIST_MAX - 1] = ',';
    many[4 * DEVICE_LIST_MAX + 3] = 0;
    list_fails(many, 0, "more than 1024 devices", NULL);
    free(many);
}
END_TEST

static Suite *device_suite(void)
{
    Suite *s = suite_create("device");

    TCase *mem = tcase_create("memory");
    tcase_add_test(mem, test_create_cpu);
    tcase_add_test(mem, test_block_names);
    tcase_add_test(mem, test_create_bad);
    tcase_add_test(mem, test_alloc_free);
    tcase_add_test(mem, test_budget_exceeded);
    tcase_add_test(mem, test_upload_download_zero);
    tcase_add_test(mem, test_parse_devices);
    suite_add_tcase(s, mem);

    TCase *streams = tcase_create("streams");
    tcase_add_test(streams, test_memory_stream_fifo);
    tcase_add_test(streams, test_event_wait_blocks);
    tcase_add_test(streams, test_stream_wait_compute);
    tcase_add_test(streams, test_events_done_at_once);
    tcase_add_test(streams, test_throttle_lower_bound);
    tcase_add_test(streams, test_unthrottled_copies);
    tcase_add_test(streams, test_many_queued_copies);
    suite_add_tcase(s, streams);

    TCase *events = tcase_create("events");
    tcase_add_test(events, test_free_after_reuse);
    tcase_add_test(events, test_free_after_alloc_waits);
    tcase_add_test(events, test_event_refcount);
    tcase_add_test(events, test_destroy_completes_queued_copies);
    tcase_add_test(events, test_create_destroy_many);
    suite_add_tcase(s, events);
    return s;
}

int main(void) { return tn_run_suite(device_suite()); }
