/* The device interface: the parts common to every implementation (pool-backed
 * allocation, event reference counts) and the dispatch to the implementation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "vdnn/device_impl.h"

/* The pool waits for a pending free's event before it hands the memory out again. On a
 * GPU, memory freed after a compute-stream event needs no wait on the host: work that
 * reuses it is ordered after that event already, on the compute stream itself or, for
 * a memory-stream write, by that copy's wait on the compute stream (device_cuda.c).
 * The pool makes the same choices either way; the host just does not stall. */
static int ordered_on_device(const device *d, const dev_event *ev)
{
    return d->impl->async && ev && ev->stream == STREAM_COMPUTE;
}

static int sync_done(void *ctx, void *ev) { return ordered_on_device(ctx, ev) || device_event_done(ctx, ev); }

static void sync_wait(void *ctx, void *ev)
{
    if (!ordered_on_device(ctx, ev)) device_event_wait(ctx, ev);
}
static void sync_release(void *ctx, void *ev) { device_event_release(ctx, ev); }

vdnn_status device_init_pool(device *d)
{
    pool_sync s = {d, sync_done, sync_wait, sync_release};
    d->pool = pool_create(d->budget_bytes, &s);
    if (!d->pool) return vdnn_fail(VDNN_ENOMEM, "out of host memory creating the device pool");
    return VDNN_OK;
}

const device_options *device_get_options(const device *d) { return &d->opt; }

void device_bind_thread(device *d)
{
    if (d->impl->bind_thread) d->impl->bind_thread(d);
}

void device_pin_thread(device *d)
{
    if (d->impl->pin_thread) d->impl->pin_thread(d);
    else device_bind_thread(d);
}

const char *device_identity(const device *d) { return d->key; }

void device_throttle(device *d, double started_cpu_s)
{
    if (d->kind != DEVICE_CPU || !(d->opt.slowdown > 1)) return;
    double s = (d->opt.slowdown - 1) * (vdnn_thread_cpu_s() - started_cpu_s);
    if (!(s > 0)) return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
    d->slept_s += s;
}

double device_busy_clock(device *d)
{
    return d->kind == DEVICE_CPU ? vdnn_thread_cpu_s() + d->slept_s : vdnn_now_s();
}

vdnn_status device_destroy(device *d)
{
    if (!d) return VDNN_OK;
    /* a new failure sets the message; one the device had already leaves the caller's,
     * which says where it was found */
    device_stream_sync(d, STREAM_MEMORY);
    device_stream_sync(d, STREAM_COMPUTE);
    if (d->failed == VDNN_OK && d->impl->poll) device_note_failure(d, d->impl->poll(d));
    vdnn_status st = d->failed;
    pool_destroy(d->pool);
    d->pool = NULL;
    while (d->spare_events) {
        dev_event *next = d->spare_events->handle;
        free(d->spare_events);
        d->spare_events = next;
    }
    free(d->faults);
    d->impl->destroy(d);
    return st;
}

device_kind device_get_kind(const device *d) { return d->kind; }
device_code device_get_code(const device *d) { return d->impl->code; }
int device_is_async(const device *d) { return d->impl->async; }
int device_memory_is_host(const device *d) { return d->impl->host_memory; }
int device_algos_by_batch(const device *d) { return d->impl->algos_by_batch; }

int device_host_threads(const device *d)
{
    if (d->opt.kind != DEVICE_CPU) return 1;
    return d->opt.threads > 0 ? d->opt.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
}

const char *device_code_name(device_code c)
{
    return c == DEVICE_CODE_HOST ? "host" : c == DEVICE_CODE_CUDA ? "cuda" : "none";
}
const char *device_describe(const device *d) { return d->desc; }
const char *device_model(const device *d) { return d->model[0] ? d->model : d->desc; }
pool *device_pool(device *d) { return d->pool; }

vdnn_status device_alloc(device *d, size_t bytes, const char *layer, const char *tensor, void **ptr)
{
    return device_alloc_as(d, bytes, layer, tensor, NULL, ptr);
}

vdnn_status device_alloc_as(device *d, size_t bytes, const char *layer, const char *tensor, const char *suffix,
                            void **ptr)
{
    size_t off = 0;
    vdnn_status st = pool_alloc_as(d->pool, bytes, layer, tensor, suffix, &off);
    /* integer arithmetic: the simulator's slab is a token, not memory */
    *ptr = st == VDNN_OK ? (void *)((uintptr_t)d->slab + off) : NULL;
    return st;
}

static vdnn_status offset_of(device *d, const void *ptr, size_t *off)
{
    uintptr_t p = (uintptr_t)ptr, base = (uintptr_t)d->slab;
    if (!ptr || p < base || p >= base + d->budget_bytes)
        return vdnn_fail(VDNN_EINVAL, "device free of a pointer outside the device pool");
    *off = (size_t)(p - base);
    return VDNN_OK;
}

vdnn_status device_free(device *d, void *ptr)
{
    size_t off = 0;
    vdnn_status st = offset_of(d, ptr, &off);
    return st == VDNN_OK ? pool_free(d->pool, off) : st;
}

vdnn_status device_free_after(device *d, void *ptr, dev_event *ev)
{
    size_t off = 0;
    vdnn_status st = offset_of(d, ptr, &off);
    if (st != VDNN_OK) {
        device_event_release(d, ev);
        return st;
    }
    return pool_free_after(d->pool, off, ev);
}

void *device_host_alloc(device *d, size_t bytes) { return d->impl->host_alloc(d, bytes); }
void device_host_free(device *d, void *ptr) { if (ptr) d->impl->host_free(d, ptr); }

vdnn_status device_copy(device *d, stream_id s, void *dst, const void *src, size_t bytes, copy_kind k)
{
    return device_copy_tagged(d, s, dst, src, bytes, k, NULL);
}

vdnn_status device_copy_tagged(device *d, stream_id s, void *dst, const void *src, size_t bytes, copy_kind k,
                               const char *tag)
{
    if (!bytes) return VDNN_OK;
    return d->impl->copy(d, s, dst, src, bytes, k, tag);
}

void device_set_trace(device *d, trace *t)
{
    if (d->impl->set_trace) d->impl->set_trace(d, t);
}

vdnn_status device_upload(device *d, void *dst_dev, const void *src_host, size_t bytes)
{
    vdnn_status st = device_copy(d, STREAM_COMPUTE, dst_dev, src_host, bytes, COPY_H2D);
    if (st == VDNN_OK) device_stream_sync(d, STREAM_COMPUTE);
    return st;
}

vdnn_status device_download(device *d, void *dst_host, const void *src_dev, size_t bytes)
{
    vdnn_status st = device_copy(d, STREAM_COMPUTE, dst_host, src_dev, bytes, COPY_D2H);
    if (st == VDNN_OK) device_stream_sync(d, STREAM_COMPUTE);
    return st;
}

vdnn_status device_zero(device *d, void *dst_dev, size_t bytes)
{
    return bytes ? d->impl->zero(d, dst_dev, bytes) : VDNN_OK;
}

vdnn_status device_fill_normal(device *d, float *dst_dev, size_t count, uint64_t seed)
{
    return count ? d->impl->fill_normal(d, dst_dev, count, seed) : VDNN_OK;
}

dev_event *device_event_record(device *d, stream_id s)
{
    dev_event *ev = d->spare_events;
    if (ev) {
        d->spare_events = ev->handle;
        memset(ev, 0, sizeof *ev);
    } else if (!(ev = calloc(1, sizeof *ev))) {
        return NULL;
    }
    atomic_init(&ev->refs, 1);
    ev->single = d->impl->one_thread;
    ev->stream = s;
    if (d->impl->record(d, s, ev) != VDNN_OK) {
        free(ev);
        return NULL;
    }
    return ev;
}

/* An event of a one_thread device (the simulator's, by the thousand a replay) is
 * counted without a locked instruction. */
static int add_ref(dev_event *ev, int by)
{
    if (!ev->single) return atomic_fetch_add(&ev->refs, by) + by;
    int r = atomic_load_explicit(&ev->refs, memory_order_relaxed) + by;
    atomic_store_explicit(&ev->refs, r, memory_order_relaxed);
    return r;
}

dev_event *device_event_retain(dev_event *ev)
{
    if (ev) add_ref(ev, 1);
    return ev;
}

void device_event_release(device *d, dev_event *ev)
{
    if (!ev || add_ref(ev, -1) != 0) return;
    if (d->impl->event_free) d->impl->event_free(d, ev);
    if (d->impl->one_thread) {   /* the simulator records and releases events by the thousand */
        ev->handle = d->spare_events;
        d->spare_events = ev;
        return;
    }
    free(ev);
}

int device_event_done(device *d, dev_event *ev) { return !ev || d->impl->done(d, ev); }

vdnn_status device_note_failure(device *d, vdnn_status st)
{
    if (st != VDNN_OK && d->failed == VDNN_OK) {
        d->failed = st;
        snprintf(d->failed_msg, sizeof d->failed_msg, "%s", vdnn_errmsg());
    }
    return st;
}

vdnn_status device_event_wait(device *d, dev_event *ev)
{
    return ev ? device_note_failure(d, d->impl->wait(d, ev)) : VDNN_OK;
}

vdnn_status device_stream_wait(device *d, stream_id s, dev_event *ev)
{
    return ev ? device_note_failure(d, d->impl->stream_wait(d, s, ev)) : VDNN_OK;
}

vdnn_status device_stream_sync(device *d, stream_id s) { return device_note_failure(d, d->impl->stream_sync(d, s)); }

vdnn_status device_stream_wait_timed(device *d, stream_id s, dev_event *ev)
{
    if (!ev) return VDNN_OK;
    if (d->impl->stream_wait_timed) return device_note_failure(d, d->impl->stream_wait_timed(d, s, ev));
    double t0 = vdnn_now_s();
    vdnn_status st = device_stream_wait(d, s, ev);
    d->waited_s += vdnn_now_s() - t0;
    return st;
}

double device_take_wait_s(device *d)
{
    if (d->impl->settle_waits) d->waited_s += d->impl->settle_waits(d);
    double s = d->waited_s;
    d->waited_s = 0;
    return s;
}

vdnn_status device_poll(device *d)
{
    if (d->failed == VDNN_OK && d->impl->poll) device_note_failure(d, d->impl->poll(d));
    return d->failed == VDNN_OK ? VDNN_OK : vdnn_fail(d->failed, "%s", d->failed_msg);
}

vdnn_status device_sync(device *d)
{
    device_stream_sync(d, STREAM_MEMORY);
    device_stream_sync(d, STREAM_COMPUTE);
    return device_poll(d);
}

/* ---- failure injection (tests) ---- */

/* The VDNN_FAULTS entry LAYER:PASS:WHAT, with `*` for any layer. */
static int fault_matches(const device *d, const char *layer, const char *pass, const char *what)
{
    if (!d->faults) return 0;
    char want[3][64];
    snprintf(want[0], sizeof want[0], "%s", layer);
    snprintf(want[1], sizeof want[1], "%s", pass);
    snprintf(want[2], sizeof want[2], "%s", what);
    for (const char *e = d->faults; *e;) {
        size_t len = strcspn(e, ",");
        char entry[200];
        snprintf(entry, sizeof entry, "%.*s", (int)(len < sizeof entry ? len : sizeof entry - 1), e);
        char *parts[3] = {entry, NULL, NULL};
        for (int k = 1; k < 3 && parts[k - 1]; k++) {
            char *colon = strchr(parts[k - 1], ':');
            if (colon) *colon = 0, parts[k] = colon + 1;
        }
        if (parts[2] && (!strcmp(parts[0], "*") || !strcmp(parts[0], want[0])) && !strcmp(parts[1], want[1]) &&
            !strcmp(parts[2], want[2]))
            return 1;
        e += len;
        if (*e == ',') e++;
    }
    return 0;
}

int device_fault_algo(const device *d, const char *layer, const char *pass, const char *algo)
{
    return fault_matches(d, layer, pass, algo);
}

void device_fault_after(device *d, const char *layer, const char *pass)
{
    if (fault_matches(d, layer, pass, "async"))
        device_note_failure(d, vdnn_fail(VDNN_EDEVICE, "the device failed running %s's %s pass (injected by "
                                         "VDNN_FAULTS, a test-only setting)", layer, pass));
}

double vdnn_thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double vdnn_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- device names ---- */

/* The decimal number of `len` digits at p, at most `max`; -1 if it is not one. */
static long parse_index(const char *p, size_t len, long max)
{
    if (!len || len > 9) return -1;
    long v = 0;
    for (size_t k = 0; k < len; k++) {
        if (p[k] < '0' || p[k] > '9') return -1;
        v = v * 10 + (p[k] - '0');
    }
    return v <= max ? v : -1;
}

/* device_parse_name, with `at` (" (entry K of N)" or "") after the name in messages. */
static vdnn_status parse_name_at(const char *what, const char *name, size_t len, const char *at, device_options *o)
{
    int shown = len > 40 ? 40 : (int)len;
    const char *more = len > 40 ? "..." : "";
    int cpu = len >= 3 && !memcmp(name, "cpu", 3), cuda = len >= 4 && !memcmp(name, "cuda", 4);
    size_t stem = cpu ? 3 : cuda ? 4 : 0;
    if (!stem || (len > stem && name[stem] != ':'))
        return vdnn_fail(VDNN_EINVAL, "%s: '%.*s%s'%s is not a device (cpu, cpu:N, cuda or cuda:N)", what, shown,
                         name, more, at);
    long index = 0;
    if (len > stem) {
        long max = cpu ? DEVICE_CPU_INDEX_MAX : DEVICE_CUDA_INDEX_MAX;
        index = parse_index(name + stem + 1, len - stem - 1, max);
        if (index < 0)
            return vdnn_fail(VDNN_EINVAL, "%s: '%.*s%s'%s is not %s:N with N a number from 0 to %ld", what, shown,
                             name, more, at, cpu ? "cpu" : "cuda", max);
    }
    o->kind = cpu ? DEVICE_CPU : DEVICE_CUDA;
    o->emulated = cpu && len > stem;
    o->cpu_index = cpu ? (int)index : 0;
    o->cuda_index = cuda ? (int)index : 0;
    return VDNN_OK;
}

vdnn_status device_parse_name(const char *what, const char *name, size_t len, device_options *o)
{
    return parse_name_at(what, name, len, "", o);
}

const char *device_options_name(const device_options *o, char *buf, size_t len)
{
    if (o->kind == DEVICE_CUDA) snprintf(buf, len, "cuda:%d", o->cuda_index);
    else if (o->emulated) snprintf(buf, len, "cpu:%d", o->cpu_index);
    else snprintf(buf, len, "cpu");
    return buf;
}

/* Entry k (0-based) of a unique list must not be one of the k before it. */
static vdnn_status check_unique(const char *what, const device_options *o, int k)
{
    char name[32];
    device_options_name(&o[k], name, sizeof name);
    if (o[k].kind == DEVICE_CPU && !o[k].emulated)
        return vdnn_fail(VDNN_EINVAL, "%s: entry %d is cpu, which names no one device here: give cpu:N (an "
                         "emulated device of its own cores) or cuda:N", what, k + 1);
    for (int j = 0; j < k; j++)
        if (o[j].kind == o[k].kind && o[j].emulated == o[k].emulated && o[j].cpu_index == o[k].cpu_index &&
            o[j].cuda_index == o[k].cuda_index)
            return vdnn_fail(VDNN_EINVAL, "%s: %s is given twice (entries %d and %d)", what, name, j + 1, k + 1);
    return VDNN_OK;
}

vdnn_status device_parse_list(const char *what, const char *text, const device_options *base, int unique,
                              device_options **out, int *count)
{
    *out = NULL;
    *count = 0;
    int n = 1;
    for (const char *c = text; *c; c++)
        if (*c == ',' && ++n > DEVICE_LIST_MAX)
            return vdnn_fail(VDNN_EINVAL, "%s: more than %d devices", what, DEVICE_LIST_MAX);
    device_options *o = calloc((size_t)n, sizeof *o);
    if (!o) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    vdnn_status st = VDNN_OK;
    const char *p = text;
    for (int k = 0; k < n && st == VDNN_OK; k++) {
        size_t len = strcspn(p, ",");
        if (base) o[k] = *base;
        if (!len)
            st = vdnn_fail(VDNN_EINVAL, "%s: entry %d of %d is empty (a list is names separated by single commas)",
                           what, k + 1, n);
        char at[48] = "";
        if (n > 1) snprintf(at, sizeof at, " (entry %d of %d)", k + 1, n);
        if (st == VDNN_OK) st = parse_name_at(what, p, len, at, &o[k]);
        if (st == VDNN_OK && unique) st = check_unique(what, o, k);
        p += len + 1;
    }
    if (st != VDNN_OK) {
        free(o);
        return st;
    }
    *out = o;
    *count = n;
    return VDNN_OK;
}
