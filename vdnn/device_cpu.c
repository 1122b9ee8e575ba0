/* The CPU device: an emulated GPU.
 *
 * Device memory is one arena of exactly the budget, managed by the pool; host memory
 * is ordinary heap memory apart from it. Compute-stream work runs synchronously on the
 * calling thread. The memory stream is a copy-engine thread that runs copies in FIFO
 * order; with a link bandwidth set, each copy takes at least bytes / bandwidth, so
 * overlap of copies with compute can be studied and tested on a machine without a GPU. */
#include <cblas.h>
#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vdnn/device_impl.h"
#include "vdnn/rng.h"
#include "vdnn/trace.h"

typedef struct copy_req {
    void *dst;
    const void *src;
    size_t bytes;
    int over_link;            /* H2D or D2H: crosses the (throttled) link */
    char tag[28];             /* trace name; empty: untraced */
    copy_kind kind;
    double start_s, end_s;    /* on the link (vdnn_now_s): from its issue, or the copy before it, on */
} copy_req;

typedef struct cpu_state {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    copy_req *queue;          /* ring buffer of pending copies */
    size_t cap, head, len;
    uint64_t submitted, completed;
    int stop;
    double bytes_per_s;       /* 0: unthrottled */
    double link_free_s;       /* when the last queued copy over the link ends */
    trace *trace;             /* copies are traced here when set; not owned */
    int threads;              /* compute threads; 0: the libraries' default (all cores) */
    int pinned;               /* an emulated device (cpu:N): its computing thread runs on `cores` */
    cpu_set_t cores;
} cpu_state;

static cpu_state *state(device *d) { return d->priv; }

static void sleep_until(double t)
{
    struct timespec until = {.tv_sec = (time_t)t, .tv_nsec = (long)((t - (double)(time_t)t) * 1e9)};
    if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR) {}
}

/* A copy on the compute stream: over the link it then sleeps until it has taken at
 * least bytes / bandwidth. D2D and H2H copies never cross the link and are not throttled. */
static void throttled_copy(const cpu_state *s, void *dst, const void *src, size_t bytes, int over_link)
{
    double t0 = vdnn_now_s();
    memmove(dst, src, bytes);
    if (over_link && s->bytes_per_s > 0) sleep_until(t0 + (double)bytes / s->bytes_per_s);
}

static void *copy_engine(void *arg)
{
    cpu_state *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->len && !s->stop) pthread_cond_wait(&s->cv_work, &s->mu);
        if (!s->len) break;
        copy_req r = s->queue[s->head];
        trace *tr = s->trace;
        pthread_mutex_unlock(&s->mu);
        /* A throttled copy keeps the link's clock: it ends at the end the link gave it
         * when it was queued however late this thread woke (a woken thread can wait for
         * a core from 30 us to a scheduler tick), as a copy engine would. */
        double t0 = r.end_s > 0 ? r.start_s : vdnn_now_s();
        memmove(r.dst, r.src, r.bytes);
        if (r.end_s > 0) sleep_until(r.end_s);
        if (tr && r.tag[0])
            trace_slice(tr, TRACE_TRACK_MEMORY, r.tag, r.kind == COPY_D2H ? "offload" : "prefetch", t0, vdnn_now_s());
        pthread_mutex_lock(&s->mu);
        s->head = (s->head + 1) % s->cap;
        s->len--;
        s->completed++;
        pthread_cond_broadcast(&s->cv_done);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static vdnn_status enqueue(cpu_state *s, const copy_req *req)
{
    pthread_mutex_lock(&s->mu);
    if (s->len == s->cap) {
        size_t ncap = s->cap ? 2 * s->cap : 64;
        copy_req *q = malloc(ncap * sizeof *q);
        if (!q) {
            pthread_mutex_unlock(&s->mu);
            return vdnn_fail(VDNN_ENOMEM, "out of host memory queueing a copy");
        }
        for (size_t i = 0; i < s->len; i++) q[i] = s->queue[(s->head + i) % s->cap];
        free(s->queue);
        s->queue = q;
        s->cap = ncap;
        s->head = 0;
    }
    copy_req r = *req;
    r.start_s = r.end_s = 0;
    if (r.over_link && s->bytes_per_s > 0) {
        double now = vdnn_now_s();
        r.start_s = s->link_free_s > now ? s->link_free_s : now;
        r.end_s = s->link_free_s = r.start_s + (double)r.bytes / s->bytes_per_s;
    }
    s->queue[(s->head + s->len) % s->cap] = r;
    s->len++;
    s->submitted++;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    return VDNN_OK;
}

static vdnn_status cpu_copy(device *d, stream_id sid, void *dst, const void *src, size_t bytes, copy_kind k,
                            const char *tag)
{
    cpu_state *s = state(d);
    int over_link = k == COPY_H2D || k == COPY_D2H;
    if (sid == STREAM_MEMORY) {
        copy_req r = {dst, src, bytes, over_link, "", k, 0, 0};
        if (tag) snprintf(r.tag, sizeof r.tag, "%s %s", k == COPY_D2H ? "offload" : "prefetch", tag);
        return enqueue(s, &r);
    }
    throttled_copy(s, dst, src, bytes, over_link);
    return VDNN_OK;
}

static vdnn_status cpu_zero(device *d, void *dst, size_t bytes)
{
    (void)d;
    memset(dst, 0, bytes);
    return VDNN_OK;
}

static vdnn_status cpu_fill_normal(device *d, float *dst, size_t count, uint64_t seed)
{
    (void)d;
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < count; k++) dst[k] = rng_normal_at(seed, k);
    return VDNN_OK;
}

static vdnn_status cpu_record(device *d, stream_id sid, dev_event *ev)
{
    cpu_state *s = state(d);
    if (sid == STREAM_COMPUTE) {
        ev->ticket = 0;
        return VDNN_OK;
    }
    pthread_mutex_lock(&s->mu);
    ev->ticket = s->submitted;
    pthread_mutex_unlock(&s->mu);
    return VDNN_OK;
}

static int cpu_done(device *d, dev_event *ev)
{
    cpu_state *s = state(d);
    if (ev->stream == STREAM_COMPUTE) return 1;
    pthread_mutex_lock(&s->mu);
    int done = s->completed >= ev->ticket;
    pthread_mutex_unlock(&s->mu);
    return done;
}

static vdnn_status cpu_wait(device *d, dev_event *ev)
{
    cpu_state *s = state(d);
    if (ev->stream == STREAM_COMPUTE) return VDNN_OK;
    pthread_mutex_lock(&s->mu);
    while (s->completed < ev->ticket) pthread_cond_wait(&s->cv_done, &s->mu);
    pthread_mutex_unlock(&s->mu);
    return VDNN_OK;
}

/* Compute work is synchronous, so the compute stream waiting on an event means the
 * host waiting; the memory stream is FIFO and compute events are complete at record. */
static vdnn_status cpu_stream_wait(device *d, stream_id sid, dev_event *ev)
{
    return sid == STREAM_COMPUTE ? cpu_wait(d, ev) : VDNN_OK;
}

static vdnn_status cpu_stream_sync(device *d, stream_id sid)
{
    cpu_state *s = state(d);
    if (sid == STREAM_COMPUTE) return VDNN_OK;
    pthread_mutex_lock(&s->mu);
    while (s->completed < s->submitted) pthread_cond_wait(&s->cv_done, &s->mu);
    pthread_mutex_unlock(&s->mu);
    return VDNN_OK;
}

static void *cpu_host_alloc(device *d, size_t bytes)
{
    (void)d;
    void *p = NULL;
    return posix_memalign(&p, 64, bytes ? bytes : 1) == 0 ? p : NULL;
}

static void cpu_host_free(device *d, void *ptr)
{
    (void)d;
    free(ptr);
}

static void cpu_destroy(device *d)
{
    cpu_state *s = state(d);
    pthread_mutex_lock(&s->mu);
    s->stop = 1;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv_work);
    pthread_cond_destroy(&s->cv_done);
    free(s->queue);
    free(s);
    free(d->slab);
    free(d);
}

static void cpu_set_trace(device *d, trace *t)
{
    cpu_state *s = state(d);
    pthread_mutex_lock(&s->mu);
    s->trace = t;
    pthread_mutex_unlock(&s->mu);
}

static void set_threads(int threads);
static void cpu_bind_thread(device *d) { set_threads(state(d)->threads); }

static void cpu_pin_thread(device *d)
{
    cpu_state *s = state(d);
    if (s->pinned) pthread_setaffinity_np(pthread_self(), sizeof s->cores, &s->cores);
    set_threads(s->threads);
}

/* The cores the process may use, as it started (before any thread was pinned). */
static cpu_set_t start_cores;
static pthread_once_t start_once = PTHREAD_ONCE_INIT;

static void take_start_cores(void)
{
    CPU_ZERO(&start_cores);
    if (sched_getaffinity(0, sizeof start_cores, &start_cores) != 0) CPU_SET(0, &start_cores);
}

/* The cores of emulated device cpu:index with `threads` threads. */
static vdnn_status emulated_cores(int index, int threads, cpu_set_t *out)
{
    pthread_once(&start_once, take_start_cores);
    int count = CPU_COUNT(&start_cores), first = index * threads;
    if (index < 0 || first + threads > count)
        return vdnn_fail(VDNN_EINVAL, "cpu:%d: an emulated device is %d core%s, and this process may use %d: "
                         "cpu:0 to cpu:%d%s", index, threads, threads == 1 ? "" : "s", count,
                         count / threads - 1, threads > 1 ? " with this --threads" : "");
    CPU_ZERO(out);
    for (int c = 0, seen = 0; c < CPU_SETSIZE && seen < first + threads; c++) {
        if (!CPU_ISSET(c, &start_cores)) continue;
        if (seen >= first) CPU_SET(c, out);
        seen++;
    }
    return VDNN_OK;
}

static const device_impl cpu_impl = {
    .code = DEVICE_CODE_HOST,
    .host_memory = 1,
    .set_trace = cpu_set_trace,
    .destroy = cpu_destroy,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .fill_normal = cpu_fill_normal,
    .record = cpu_record,
    .done = cpu_done,
    .wait = cpu_wait,
    .stream_wait = cpu_stream_wait,
    .stream_sync = cpu_stream_sync,
    .event_free = NULL,
    .bind_thread = cpu_bind_thread,
    .pin_thread = cpu_pin_thread,
};

static void set_threads(int threads)
{
    if (threads <= 0) return;
    omp_set_num_threads(threads);
    openblas_set_num_threads(threads);
}

vdnn_status device_create_cpu(const device_options *opt, device **out)
{
    device *d = calloc(1, sizeof *d);
    cpu_state *s = calloc(1, sizeof *s);
    size_t budget = opt->budget_bytes / POOL_ALIGN * POOL_ALIGN;
    char b[32];
    if (!d || !s) goto nomem;
    d->kind = DEVICE_CPU;
    d->impl = &cpu_impl;
    d->priv = s;
    d->budget_bytes = budget;
    if (posix_memalign((void **)&d->slab, 4096, budget) != 0) {
        d->slab = NULL;
        free(s);
        free(d);
        return vdnn_fail(VDNN_ENOMEM, "the CPU device arena of %s could not be reserved",
                         vdnn_fmt_bytes(budget, b, sizeof b));
    }
    s->bytes_per_s = opt->link_gbps > 0 ? opt->link_gbps * 1e9 : 0;
    s->threads = opt->threads > 0 ? opt->threads : opt->emulated ? 1 : 0;
    if (opt->emulated) {
        vdnn_status st = emulated_cores(opt->cpu_index, s->threads, &s->cores);
        if (st != VDNN_OK) {
            free(d->slab);
            free(s);
            free(d);
            return st;
        }
        s->pinned = 1;
        snprintf(d->key, sizeof d->key, "cpu:%d", opt->cpu_index);
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv_work, NULL);
    pthread_cond_init(&s->cv_done, NULL);
    if (pthread_create(&s->thread, NULL, copy_engine, s) != 0) {
        free(d->slab);
        free(s);
        free(d);
        return vdnn_fail(VDNN_EDEVICE, "could not start the CPU device's copy engine thread");
    }
    set_threads(s->threads);
    int nthreads = s->threads > 0 ? s->threads : omp_get_max_threads();
    char name[32] = "cpu", link[48] = "";
    if (opt->emulated) snprintf(name, sizeof name, "cpu:%d", opt->cpu_index);
    if (s->bytes_per_s > 0) snprintf(link, sizeof link, ", link %.3g GB/s", opt->link_gbps);
    snprintf(d->desc, sizeof d->desc, "%s (%d thread%s%s, budget %s)", name, nthreads, nthreads == 1 ? "" : "s", link,
             vdnn_fmt_bytes(budget, b, sizeof b));
    snprintf(d->model, sizeof d->model, "cpu (%d thread%s)", nthreads, nthreads == 1 ? "" : "s");
    vdnn_status st = device_init_pool(d);
    if (st != VDNN_OK) {
        cpu_destroy(d);
        return st;
    }
    *out = d;
    return VDNN_OK;
nomem:
    free(s);
    free(d);
    return vdnn_fail(VDNN_ENOMEM, "out of host memory creating the CPU device");
}
