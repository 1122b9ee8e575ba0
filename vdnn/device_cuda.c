/* The CUDA device.
 *
 * Device memory is one cudaMalloc'd slab of exactly the budget, managed by the
 * project's pool: the project allocates nothing else on the GPU while it trains. Host
 * memory for offloaded maps and swapped parameters is pinned (cudaHostAlloc) so that
 * copies run on the copy engines, asynchronously; freed blocks are kept and reused,
 * because pinning is slow (it maps pages for the GPU). STREAM_COMPUTE is a CUDA stream
 * with the cuDNN and cuBLAS handles bound to it; STREAM_MEMORY is a second stream for
 * the memory manager's copies. An event is a cudaEvent_t from a small free list.
 *
 * The pool reuses a block as soon as the host has issued the last work that reads it.
 * Work on the compute stream is ordered after that work by the stream itself; a copy
 * into device memory on the memory stream is not, so it first waits for the compute
 * stream to reach the point where it was issued (prefetches and swapped parameters then
 * overlap the layer issued next, as in vDNN).
 *
 * What the CUDA runtime, cuDNN and cuBLAS take for themselves is measured with
 * cudaMemGetInfo against the free memory right after the context was made, and
 * reported apart from the pool (device_vendor_bytes).
 *
 * In a build without CUDA this file only says so (device_create_cuda fails cleanly). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdnn/device_impl.h"

#ifndef VDNN_CUDA

vdnn_status device_create_cuda(const device_options *opt, device **out)
{
    (void)opt;
    *out = NULL;
    return vdnn_fail(VDNN_EDEVICE, "--device cuda: this vdnn was built without CUDA support (nvcc, cuDNN or "
                                   "cuBLAS was not found at build time: see docs/building.md); use --device cpu");
}

int device_cuda_count(void) { return 0; }
int device_cuda_built(void) { return 0; }
void device_cuda_report(FILE *f) { fprintf(f, "cuda: not built (nvcc, cuDNN or cuBLAS was missing at build time)\n"); }
size_t device_cuda_free_bytes(int index)
{
    (void)index;
    return 0;
}
size_t device_vendor_bytes(device *d)
{
    (void)d;
    return 0;
}

#else

#include <pthread.h>

#include "vdnn/cuda_util.h"

/* A pinned host block, live or kept for reuse. */
typedef struct host_block {
    void *ptr;
    size_t bytes;
    struct host_block *next;
} host_block;

/* A timed stream wait whose events have not been read yet. */
typedef struct timed_wait {
    cudaEvent_t before, after;
    struct timed_wait *next;
} timed_wait;

/* A timed copy waiting for its events, to be written to the trace. */
typedef struct traced_copy {
    cudaEvent_t start, end;
    char tag[28];
    copy_kind kind;
    struct traced_copy *next;
} traced_copy;

typedef struct cuda_state {
    cuda_ctx ctx;
    size_t free_at_context;      /* cudaMemGetInfo's free bytes once the context existed */
    pthread_mutex_t mu;          /* guards the lists below */
    host_block *live, *spare;
    cudaEvent_t *events;         /* free list of untimed events */
    int nevents, cap_events;
    trace *trace;
    cudaEvent_t trace_ref;       /* recorded when tracing started, at host time trace_ref_s */
    double trace_ref_s;
    traced_copy *traced;         /* oldest first */
    cudaEvent_t order_ev;        /* the compute stream's position, for copies into device memory */
    timed_wait *waits;           /* timed stream waits not yet read, oldest first */
    cudaEvent_t *timers;         /* free list of timing events */
    int ntimers, cap_timers;
    char name[128];
} cuda_state;

static cuda_state *state(device *d) { return d->priv; }

cuda_ctx *device_cuda_ctx(device *d)
{
    return d && d->kind == DEVICE_CUDA ? &state(d)->ctx : NULL;
}

int device_cuda_built(void) { return 1; }

int device_cuda_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();   /* not sticky, but leave no error behind for later checks */
        return 0;
    }
    return n;
}

void device_cuda_report(FILE *f)
{
    int rt = 0, drv = 0, n = device_cuda_count();
    cudaRuntimeGetVersion(&rt);
    cudaDriverGetVersion(&drv);
    cudaGetLastError();
    size_t v = cudnnGetVersion();
    fprintf(f, "cuda: built with CUDA %d.%d and cuDNN %d.%d.%d; runtime %d.%d, driver %s, cuDNN %zu.%zu.%zu, cuBLAS for "
            "CUDA %zu.%zu\n", CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10, CUDNN_MAJOR, CUDNN_MINOR,
            CUDNN_PATCHLEVEL, rt / 1000, rt % 1000 / 10, drv ? "present" : "missing", v / 10000, v / 100 % 100, v % 100,
            cublasGetCudartVersion() / 1000, cublasGetCudartVersion() % 1000 / 10);
    if (drv) fprintf(f, "cuda: driver supports CUDA %d.%d\n", drv / 1000, drv % 1000 / 10);
    for (int i = 0; i < n; i++) {
        struct cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
        char t[32], fr[32];
        fprintf(f, "cuda:%d %s, sm %d.%d, %d SMs, %s, %s free\n", i, p.name, p.major, p.minor, p.multiProcessorCount,
                vdnn_fmt_bytes(p.totalGlobalMem, t, sizeof t), vdnn_fmt_bytes(device_cuda_free_bytes(i), fr, sizeof fr));
    }
    if (!n) fprintf(f, "cuda: no GPU visible\n");
    cudaGetLastError();
}

size_t device_cuda_free_bytes(int index)
{
    size_t free_bytes = 0, total = 0;
    if (index < 0 || index >= device_cuda_count() || cudaSetDevice(index) != cudaSuccess ||
        cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return free_bytes;
}

size_t device_vendor_bytes(device *d)
{
    if (!d || d->kind != DEVICE_CUDA) return 0;
    size_t free_now = 0, total = 0;
    if (cudaSetDevice(state(d)->ctx.index) != cudaSuccess || cudaMemGetInfo(&free_now, &total) != cudaSuccess) return 0;
    size_t taken = state(d)->free_at_context > free_now ? state(d)->free_at_context - free_now : 0;
    return taken > d->budget_bytes ? taken - d->budget_bytes : 0;
}

/* ---- pinned host memory ---- */

static void *cuda_host_alloc(device *d, size_t bytes)
{
    cuda_state *s = state(d);
    if (!bytes) bytes = 1;
    pthread_mutex_lock(&s->mu);
    /* best fit among the kept blocks, no more than twice the request */
    host_block **best = NULL;
    for (host_block **b = &s->spare; *b; b = &(*b)->next)
        if ((*b)->bytes >= bytes && (*b)->bytes <= 2 * bytes && (!best || (*b)->bytes < (*best)->bytes)) best = b;
    host_block *blk = NULL;
    if (best) {
        blk = *best;
        *best = blk->next;
    }
    pthread_mutex_unlock(&s->mu);
    if (!blk) {
        blk = calloc(1, sizeof *blk);
        if (!blk) return NULL;
        if (cudaHostAlloc(&blk->ptr, bytes, cudaHostAllocPortable) != cudaSuccess) {
            cudaGetLastError();
            free(blk);
            return NULL;
        }
        blk->bytes = bytes;
    }
    pthread_mutex_lock(&s->mu);
    blk->next = s->live;
    s->live = blk;
    pthread_mutex_unlock(&s->mu);
    return blk->ptr;
}

static void cuda_host_free(device *d, void *ptr)
{
    cuda_state *s = state(d);
    pthread_mutex_lock(&s->mu);
    for (host_block **b = &s->live; *b; b = &(*b)->next)
        if ((*b)->ptr == ptr) {
            host_block *blk = *b;
            *b = blk->next;
            blk->next = s->spare;
            s->spare = blk;
            break;
        }
    pthread_mutex_unlock(&s->mu);
}

static void free_blocks(host_block *b)
{
    while (b) {
        host_block *next = b->next;
        cudaFreeHost(b->ptr);
        free(b);
        b = next;
    }
}

/* ---- streams, copies, events ---- */

static cudaStream_t stream_of(device *d, stream_id s)
{
    return s == STREAM_MEMORY ? state(d)->ctx.memory : state(d)->ctx.compute;
}

static const enum cudaMemcpyKind copy_kinds[] = {
    [COPY_H2D] = cudaMemcpyHostToDevice, [COPY_D2H] = cudaMemcpyDeviceToHost,
    [COPY_D2D] = cudaMemcpyDeviceToDevice, [COPY_H2H] = cudaMemcpyHostToHost,
};

/* Writes the traced copies whose events have completed, oldest first. */
static void flush_traced(cuda_state *s, int wait)
{
    while (s->traced) {
        traced_copy *t = s->traced;
        if (wait) cudaEventSynchronize(t->end);
        else if (cudaEventQuery(t->end) != cudaSuccess) {
            cudaGetLastError();
            break;
        }
        float a_ms = 0, b_ms = 0;
        if (s->trace && cudaEventElapsedTime(&a_ms, s->trace_ref, t->start) == cudaSuccess &&
            cudaEventElapsedTime(&b_ms, s->trace_ref, t->end) == cudaSuccess)
            trace_slice(s->trace, TRACE_TRACK_MEMORY, t->tag, t->kind == COPY_D2H ? "offload" : "prefetch",
                        s->trace_ref_s + a_ms * 1e-3, s->trace_ref_s + b_ms * 1e-3);
        cudaGetLastError();
        cudaEventDestroy(t->start);
        cudaEventDestroy(t->end);
        s->traced = t->next;
        free(t);
    }
}

static void drop_traced(traced_copy *t)
{
    if (!t) return;
    if (t->start) cudaEventDestroy(t->start);
    if (t->end) cudaEventDestroy(t->end);
    cudaGetLastError();
    free(t);
}

static vdnn_status cuda_copy(device *d, stream_id sid, void *dst, const void *src, size_t bytes, copy_kind k,
                             const char *tag)
{
    cuda_state *s = state(d);
    cudaStream_t st = stream_of(d, sid);
    /* The pool hands out a block as soon as the host has issued the last compute work
     * that reads it; compute-stream work is ordered after that work, but a memory-stream
     * write is not: it waits for the compute stream to reach this point first. */
    if (sid == STREAM_MEMORY && (k == COPY_H2D || k == COPY_D2D)) {
        CUDA_TRY(cudaEventRecord(s->order_ev, s->ctx.compute));
        CUDA_TRY(cudaStreamWaitEvent(st, s->order_ev, 0));
    }
    /* Timed from after that wait, so that a slice in the trace is the copy itself, not
     * the compute it waited for. Tracing that cannot get its events leaves the copy
     * untraced. */
    traced_copy *t = NULL;
    if (s->trace && tag && tag[0] && sid == STREAM_MEMORY && (t = calloc(1, sizeof *t))) {
        snprintf(t->tag, sizeof t->tag, "%s", tag);
        t->kind = k;
        if (cudaEventCreate(&t->start) != cudaSuccess || cudaEventCreate(&t->end) != cudaSuccess ||
            cudaEventRecord(t->start, st) != cudaSuccess) {
            drop_traced(t);
            t = NULL;
        }
    }
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, copy_kinds[k], st);
    if (e != cudaSuccess) {
        drop_traced(t);
        return cuda_fail_rt((int)e, "cudaMemcpyAsync(dst, src, bytes, copy_kinds[k], st)", __FILE__, __LINE__);
    }
    if (t && cudaEventRecord(t->end, st) != cudaSuccess) {
        drop_traced(t);
        t = NULL;
    }
    if (t) {
        traced_copy **tail = &s->traced;
        while (*tail) tail = &(*tail)->next;
        *tail = t;
        flush_traced(s, 0);
    }
    return VDNN_OK;
}

static void cuda_set_trace(device *d, trace *t)
{
    cuda_state *s = state(d);
    flush_traced(s, 1);
    s->trace = t;
    if (!t) return;
    /* copy times are read as event times after this event, recorded on an idle stream */
    cudaStreamSynchronize(s->ctx.memory);
    if (!s->trace_ref && cudaEventCreate(&s->trace_ref) != cudaSuccess) {
        cudaGetLastError();
        s->trace = NULL;
        return;
    }
    /* without its reference event no copy can be placed in time: trace none */
    if (cudaEventRecord(s->trace_ref, s->ctx.memory) != cudaSuccess ||
        cudaEventSynchronize(s->trace_ref) != cudaSuccess) {
        cudaGetLastError();
        s->trace = NULL;
        return;
    }
    s->trace_ref_s = vdnn_now_s();
}

static vdnn_status cuda_zero(device *d, void *dst, size_t bytes)
{
    CUDA_TRY(cudaMemsetAsync(dst, 0, bytes, state(d)->ctx.compute));
    return VDNN_OK;
}

static vdnn_status cuda_fill_normal_on(device *d, float *dst, size_t count, uint64_t seed)
{
    return cuda_fill_normal(state(d)->ctx.compute, dst, count, seed);
}

static vdnn_status cuda_record(device *d, stream_id sid, dev_event *ev)
{
    cuda_state *s = state(d);
    cudaEvent_t e = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->nevents) e = s->events[--s->nevents];
    pthread_mutex_unlock(&s->mu);
    if (!e) CUDA_TRY(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    cudaError_t err = cudaEventRecord(e, stream_of(d, sid));
    if (err != cudaSuccess) {
        cudaEventDestroy(e);
        return cuda_fail_rt((int)err, "cudaEventRecord", __FILE__, __LINE__);
    }
    ev->handle = e;
    return VDNN_OK;
}

/* An event whose work failed is done: nobody waits for it forever, and the failure
 * is kept for the next check (device_poll). */
static int cuda_done(device *d, dev_event *ev)
{
    cudaError_t e = cudaEventQuery((cudaEvent_t)ev->handle);
    if (e == cudaErrorNotReady) {
        cudaGetLastError();
        return 0;
    }
    if (e != cudaSuccess) device_note_failure(d, cuda_fail_rt((int)e, "cudaEventQuery", __FILE__, __LINE__));
    return 1;
}

static vdnn_status cuda_wait(device *d, dev_event *ev)
{
    (void)d;
    CUDA_TRY(cudaEventSynchronize((cudaEvent_t)ev->handle));
    return VDNN_OK;
}

static vdnn_status cuda_stream_wait(device *d, stream_id sid, dev_event *ev)
{
    CUDA_TRY(cudaStreamWaitEvent(stream_of(d, sid), (cudaEvent_t)ev->handle, 0));
    return VDNN_OK;
}

static vdnn_status cuda_stream_sync(device *d, stream_id sid)
{
    CUDA_TRY(cudaStreamSynchronize(stream_of(d, sid)));
    if (sid == STREAM_MEMORY) flush_traced(state(d), 0);
    return VDNN_OK;
}

/* A failure of either stream's work, without waiting: cudaStreamQuery says "not ready"
 * for work in flight and returns a kernel's fault once it has happened. */
static vdnn_status cuda_poll(device *d)
{
    cuda_state *s = state(d);
    cudaStream_t streams[2] = {s->ctx.compute, s->ctx.memory};
    for (int i = 0; i < 2; i++) {
        cudaError_t e = cudaStreamQuery(streams[i]);
        if (e == cudaErrorNotReady) cudaGetLastError();
        else if (e != cudaSuccess) return cuda_fail_rt((int)e, "cudaStreamQuery", __FILE__, __LINE__);
    }
    return VDNN_OK;
}

/* ---- timed stream waits ---- */

/* cudaStreamWaitEvent returns at once: what a stream stood waiting is the time between
 * an event recorded just before the wait and one just after it, read once the second
 * has completed (settle_waits), oldest first. */
static cudaEvent_t timer_get(cuda_state *s)
{
    cudaEvent_t e = NULL;
    if (s->ntimers) return s->timers[--s->ntimers];
    if (cudaEventCreate(&e) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return e;
}

static void timer_put(cuda_state *s, cudaEvent_t e)
{
    if (!e) return;
    if (s->ntimers == s->cap_timers) {
        int cap = s->cap_timers ? 2 * s->cap_timers : 32;
        cudaEvent_t *grown = realloc(s->timers, (size_t)cap * sizeof *grown);
        if (grown) s->timers = grown, s->cap_timers = cap;
    }
    if (s->ntimers < s->cap_timers) s->timers[s->ntimers++] = e;
    else cudaEventDestroy(e);
}

/* Gives a timed wait's events back (NULL ones skipped) and frees it. */
static void drop_wait(cuda_state *s, timed_wait *w)
{
    if (!w) return;
    timer_put(s, w->before);
    timer_put(s, w->after);
    free(w);
}

static vdnn_status cuda_stream_wait_timed(device *d, stream_id sid, dev_event *ev)
{
    cuda_state *s = state(d);
    cudaStream_t st = stream_of(d, sid);
    timed_wait *w = calloc(1, sizeof *w);
    if (w) {
        w->before = timer_get(s);
        w->after = timer_get(s);
    }
    /* without its events the wait still happens, untimed */
    if (w && (!w->before || !w->after || cudaEventRecord(w->before, st) != cudaSuccess)) {
        cudaGetLastError();
        drop_wait(s, w);
        w = NULL;
    }
    vdnn_status rc = cuda_stream_wait(d, sid, ev);
    if (w && (rc != VDNN_OK || cudaEventRecord(w->after, st) != cudaSuccess)) {
        cudaGetLastError();
        drop_wait(s, w);
        w = NULL;
    }
    if (w) {
        timed_wait **tail = &s->waits;
        while (*tail) tail = &(*tail)->next;
        *tail = w;
    }
    return rc;
}

static double cuda_settle_waits(device *d)
{
    cuda_state *s = state(d);
    double secs = 0;
    while (s->waits) {
        timed_wait *w = s->waits;
        cudaError_t e = cudaEventQuery(w->after);
        if (e == cudaErrorNotReady) {
            cudaGetLastError();
            break;
        }
        float ms = 0;
        if (e != cudaSuccess) device_note_failure(d, cuda_fail_rt((int)e, "cudaEventQuery", __FILE__, __LINE__));
        else if (cudaEventElapsedTime(&ms, w->before, w->after) == cudaSuccess) secs += ms * 1e-3;
        cudaGetLastError();
        s->waits = w->next;
        drop_wait(s, w);
    }
    return secs;
}

static void cuda_event_free(device *d, dev_event *ev)
{
    cuda_state *s = state(d);
    cudaEvent_t e = (cudaEvent_t)ev->handle;
    if (!e) return;
    pthread_mutex_lock(&s->mu);
    if (s->nevents == s->cap_events) {
        int cap = s->cap_events ? 2 * s->cap_events : 64;
        cudaEvent_t *grown = realloc(s->events, (size_t)cap * sizeof *grown);
        if (grown) s->events = grown, s->cap_events = cap;
    }
    if (s->nevents < s->cap_events) {
        s->events[s->nevents++] = e;
        e = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    if (e) cudaEventDestroy(e);
}

static void cuda_bind_thread(device *d) { cudaSetDevice(state(d)->ctx.index); }

static void cuda_destroy(device *d)
{
    cuda_state *s = state(d);
    if (s) {
        cudaSetDevice(s->ctx.index);
        if (s->ctx.compute) cudaStreamSynchronize(s->ctx.compute);
        if (s->ctx.memory) cudaStreamSynchronize(s->ctx.memory);
        flush_traced(s, 1);
        if (s->trace_ref) cudaEventDestroy(s->trace_ref);
        if (s->order_ev) cudaEventDestroy(s->order_ev);
        cuda_settle_waits(d);
        for (timed_wait *w = s->waits, *next = NULL; w; w = next) {   /* left by a failure */
            next = w->next;
            drop_wait(s, w);
        }
        for (int i = 0; i < s->ntimers; i++) cudaEventDestroy(s->timers[i]);
        free(s->timers);
        for (int i = 0; i < s->nevents; i++) cudaEventDestroy(s->events[i]);
        free(s->events);
        if (s->ctx.cudnn) cudnnDestroy(s->ctx.cudnn);
        if (s->ctx.cublas) cublasDestroy(s->ctx.cublas);
        if (s->ctx.compute) cudaStreamDestroy(s->ctx.compute);
        if (s->ctx.memory) cudaStreamDestroy(s->ctx.memory);
        if (s->ctx.pinned_scratch) cudaFreeHost(s->ctx.pinned_scratch);
        free_blocks(s->live);
        free_blocks(s->spare);
        pthread_mutex_destroy(&s->mu);
        free(s);
    }
    if (d->slab) cudaFree(d->slab);
    cudaGetLastError();
    free(d);
}

static const device_impl cuda_impl = {
    .code = DEVICE_CODE_CUDA,
    .async = 1,
    .algos_by_batch = 1,
    .destroy = cuda_destroy,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .copy = cuda_copy,
    .set_trace = cuda_set_trace,
    .zero = cuda_zero,
    .fill_normal = cuda_fill_normal_on,
    .record = cuda_record,
    .done = cuda_done,
    .wait = cuda_wait,
    .stream_wait = cuda_stream_wait,
    .stream_sync = cuda_stream_sync,
    .event_free = cuda_event_free,
    .bind_thread = cuda_bind_thread,
    .poll = cuda_poll,
    .stream_wait_timed = cuda_stream_wait_timed,
    .settle_waits = cuda_settle_waits,
};

/* Streams, handles, scratch and the slab; the device is destroyed by the caller on
 * failure. */
static vdnn_status cuda_setup(device *d, const device_options *opt)
{
    cuda_state *s = state(d);
    cuda_ctx *c = &s->ctx;
    char b[32], f[32];
    CUDA_TRY(cudaSetDevice(c->index));
    CUDA_TRY(cudaFree(NULL));   /* makes the context now, so that what follows is measured apart */
    size_t total = 0;
    CUDA_TRY(cudaMemGetInfo(&s->free_at_context, &total));
    if (d->budget_bytes > s->free_at_context)
        return vdnn_fail(VDNN_EBUDGET, "budget %s is more than the %s free on GPU %d (%s of %s): lower --budget",
                         vdnn_fmt_bytes(d->budget_bytes, b, sizeof b), vdnn_fmt_bytes(s->free_at_context, f, sizeof f),
                         c->index, s->name, vdnn_fmt_bytes(total, f, sizeof f));
    CUDA_TRY(cudaStreamCreateWithFlags(&c->compute, cudaStreamNonBlocking));
    CUDA_TRY(cudaStreamCreateWithFlags(&c->memory, cudaStreamNonBlocking));
    CUDA_TRY(cudaEventCreateWithFlags(&s->order_ev, cudaEventDisableTiming));
    CUDNN_TRY(cudnnCreate(&c->cudnn));
    CUDNN_TRY(cudnnSetStream(c->cudnn, c->compute));
    CUBLAS_TRY(cublasCreate(&c->cublas));
    CUBLAS_TRY(cublasSetStream(c->cublas, c->compute));
    CUBLAS_TRY(cublasSetPointerMode(c->cublas, CUBLAS_POINTER_MODE_HOST));
    CUBLAS_TRY(cublasSetMathMode(c->cublas, opt->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    CUDA_TRY(cudaHostAlloc(&c->pinned_scratch, CUDA_SCRATCH_BYTES, cudaHostAllocPortable));
    cudaError_t e = cudaMalloc((void **)&d->slab, d->budget_bytes);
    if (e != cudaSuccess) {
        d->slab = NULL;
        cudaGetLastError();
        size_t free_now = 0;
        cudaMemGetInfo(&free_now, &total);
        return vdnn_fail(VDNN_EBUDGET, "the budget's slab of %s could not be allocated on GPU %d (%s free after "
                         "cuDNN and cuBLAS started): lower --budget",
                         vdnn_fmt_bytes(d->budget_bytes, b, sizeof b), c->index, vdnn_fmt_bytes(free_now, f, sizeof f));
    }
    return VDNN_OK;
}

vdnn_status device_create_cuda(const device_options *opt, device **out)
{
    *out = NULL;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        cudaGetLastError();
        return vdnn_fail(VDNN_EDEVICE, "--device cuda: no CUDA GPU is available (%s); check nvidia-smi and "
                         "CUDA_VISIBLE_DEVICES, or use --device cpu",
                         e != cudaSuccess ? cudaGetErrorString(e) : "the driver reports 0 GPUs");
    }
    if (opt->cuda_index < 0 || opt->cuda_index >= count)
        return vdnn_fail(VDNN_EDEVICE, "--device cuda:%d: this machine has %d GPU%s (cuda:0 to cuda:%d)", opt->cuda_index,
                         count, count == 1 ? "" : "s", count - 1);
    struct cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, opt->cuda_index);
    if (e != cudaSuccess) return cuda_fail_rt((int)e, "cudaGetDeviceProperties", __FILE__, __LINE__);
    device *d = calloc(1, sizeof *d);
    cuda_state *s = calloc(1, sizeof *s);
    if (!d || !s) {
        free(d);
        free(s);
        return vdnn_fail(VDNN_ENOMEM, "out of host memory creating the CUDA device");
    }
    d->kind = DEVICE_CUDA;
    d->impl = &cuda_impl;
    d->priv = s;
    d->budget_bytes = opt->budget_bytes / POOL_ALIGN * POOL_ALIGN;
    pthread_mutex_init(&s->mu, NULL);
    s->ctx.index = opt->cuda_index;
    s->ctx.tf32 = opt->tf32 != 0;
    s->ctx.sm_count = prop.multiProcessorCount;
    snprintf(s->name, sizeof s->name, "%s", prop.name);
    vdnn_status st = cuda_setup(d, opt);
    if (st == VDNN_OK) st = device_init_pool(d);
    if (st != VDNN_OK) {
        cuda_destroy(d);
        return st;
    }
    size_t v = cudnnGetVersion();
    char b[32];
    const char *math = opt->tf32 ? "tf32" : "fp32";
    snprintf(d->desc, sizeof d->desc, "cuda:%d %s (sm %d.%d, cuDNN %zu.%zu.%zu, %s%s, budget %s)", s->ctx.index, s->name,
             prop.major, prop.minor, v / 10000, v / 100 % 100, v % 100, math,
             opt->nondeterministic ? ", nondeterministic algorithms" : "", vdnn_fmt_bytes(d->budget_bytes, b, sizeof b));
    snprintf(d->model, sizeof d->model, "cuda %s sm%d%d cudnn %zu cublas %d %s%s", s->name, prop.major, prop.minor, v,
             (int)cublasGetCudartVersion(), math, opt->nondeterministic ? " nondet" : "");
    /* as NVML writes it (nvmlDeviceGetHandleByPciBusId_v2 reads it back) */
    snprintf(d->key, sizeof d->key, "%08X:%02X:%02X.0", (unsigned)prop.pciDomainID, (unsigned)prop.pciBusID,
             (unsigned)prop.pciDeviceID);
    *out = d;
    return VDNN_OK;
}

#endif
