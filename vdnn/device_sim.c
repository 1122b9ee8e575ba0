/* The simulated device: the real pool over a slab that does not exist, and a clock
 * per stream.
 *
 * Used to replay an iteration on sizes only: the planner finds minimum budgets and
 * predicts iteration times with it. Device pointers are the slab token plus an offset
 * and are never dereferenced: layers, copies and the solver compute nothing here.
 * Host buffers are 1-byte stand-ins. Events are complete when recorded (the pool's
 * choices never depend on it); what they order is modelled by the clocks (device.h). */
#include <stdio.h>
#include <stdlib.h>

#include "vdnn/device_impl.h"

/* A memory-stream copy replayed: its tag, and the copy at the end of the longest path
 * to its start (-1: none, the path starts at 0). */
typedef struct sim_copy_note {
    const char *tag;
    int pred;
} sim_copy_note;

typedef struct sim_state {
    sim_model model;
    double t[2];              /* clock per stream: STREAM_COMPUTE, STREAM_MEMORY */
    double busy;              /* the compute stream's own work so far (its clock less its waits) */
    int src[2];               /* per stream, the last copy on the longest path to its clock */
    sim_copy_note *notes;     /* the memory-stream copies since the model was set */
    int nnotes, cap_notes;
    int unknown;              /* the paths are not known (device_sim_critical) */
    const char **path;        /* device_sim_critical's answer */
} sim_state;

static sim_state *state(const device *d) { return d->priv; }

static double later(double a, double b) { return a > b ? a : b; }

static void sim_destroy(device *d)
{
    sim_state *st = state(d);
    if (st) free(st->notes), free(st->path);
    free(d->priv);
    free(d);
}

static void *sim_host_alloc(device *d, size_t bytes) { (void)d; (void)bytes; return malloc(1); }
static void sim_host_free(device *d, void *p) { (void)d; free(p); }

static double copy_s(const sim_model *m, size_t bytes, copy_kind k)
{
    double rate = k == COPY_H2D ? m->h2d_bytes_per_s : k == COPY_D2H ? m->d2h_bytes_per_s : 0;
    return rate > 0 ? (double)bytes / rate : 0;
}

/* Compute-stream copies (the input upload) hold the compute stream; memory-stream
 * copies start once the host has issued them and the memory stream is free. */
static vdnn_status sim_copy(device *d, stream_id s, void *dst, const void *src, size_t bytes, copy_kind k,
                            const char *tag)
{
    (void)dst, (void)src, (void)tag;
    sim_state *st = state(d);
    if (s == STREAM_COMPUTE) {
        st->t[STREAM_COMPUTE] += copy_s(&st->model, bytes, k);
        st->busy += copy_s(&st->model, bytes, k);
        return VDNN_OK;
    }
    const int from_memory = st->t[STREAM_MEMORY] > st->t[STREAM_COMPUTE];
    double start = from_memory ? st->t[STREAM_MEMORY] : st->t[STREAM_COMPUTE];
    st->t[STREAM_MEMORY] = start + st->model.copy_latency_s + copy_s(&st->model, bytes, k);
    if (st->unknown) return VDNN_OK;
    if (st->nnotes == st->cap_notes) {
        int cap = st->cap_notes ? 2 * st->cap_notes : 1024;
        sim_copy_note *more = realloc(st->notes, (size_t)cap * sizeof *more);
        if (more) st->notes = more, st->cap_notes = cap;
        else st->unknown = 1;   /* the replay goes on; its paths are not known */
    }
    if (!st->unknown) {
        st->notes[st->nnotes] = (sim_copy_note){tag, st->src[from_memory ? STREAM_MEMORY : STREAM_COMPUTE]};
        st->src[STREAM_MEMORY] = st->nnotes++;
    }
    return VDNN_OK;
}

static vdnn_status sim_zero(device *d, void *dst, size_t bytes)
{
    (void)d, (void)dst, (void)bytes;
    return VDNN_OK;
}

static vdnn_status sim_fill_normal(device *d, float *dst, size_t count, uint64_t seed)
{
    (void)d, (void)dst, (void)count, (void)seed;
    return VDNN_OK;
}

static vdnn_status sim_record(device *d, stream_id s, dev_event *ev)
{
    ev->at_s = state(d)->t[s];
    ev->src = state(d)->src[s];
    return VDNN_OK;
}

static int sim_done(device *d, dev_event *ev) { (void)d, (void)ev; return 1; }

/* Stream s's clock moved on to the event's where that is later (its path with it). */
static void wait_for(sim_state *st, stream_id s, const dev_event *ev)
{
    if (ev->at_s > st->t[s]) {
        st->t[s] = ev->at_s;
        st->src[s] = ev->src;
    }
}

/* The host waits: it issues the next compute work no earlier than the event. */
static vdnn_status sim_wait(device *d, dev_event *ev)
{
    wait_for(state(d), STREAM_COMPUTE, ev);
    return VDNN_OK;
}

static vdnn_status sim_stream_wait(device *d, stream_id s, dev_event *ev)
{
    wait_for(state(d), s, ev);
    return VDNN_OK;
}

/* The stream waits, timed on the simulated clock (the host's would time nothing). */
static vdnn_status sim_stream_wait_timed(device *d, stream_id s, dev_event *ev)
{
    sim_state *st = state(d);
    if (ev->at_s > st->t[s]) d->waited_s += ev->at_s - st->t[s];
    wait_for(st, s, ev);
    return VDNN_OK;
}

static vdnn_status sim_stream_sync(device *d, stream_id s)
{
    sim_state *st = state(d);
    if (st->t[s] > st->t[STREAM_COMPUTE]) {
        st->t[STREAM_COMPUTE] = st->t[s];
        st->src[STREAM_COMPUTE] = st->src[s];
    }
    return VDNN_OK;
}

static const device_impl sim_impl = {
    .code = DEVICE_CODE_NONE,
    .host_memory = 1,
    .one_thread = 1,
    .destroy = sim_destroy,
    .host_alloc = sim_host_alloc,
    .host_free = sim_host_free,
    .copy = sim_copy,
    .zero = sim_zero,
    .fill_normal = sim_fill_normal,
    .record = sim_record,
    .done = sim_done,
    .wait = sim_wait,
    .stream_wait = sim_stream_wait,
    .stream_wait_timed = sim_stream_wait_timed,
    .stream_sync = sim_stream_sync,
};

void device_sim_set_model(device *d, const sim_model *m)
{
    if (d->kind != DEVICE_SIM) return;
    sim_state *st = state(d);
    st->model = *m;
    st->t[0] = st->t[1] = st->busy = 0;
    st->src[0] = st->src[1] = -1;
    st->nnotes = 0;
    st->unknown = !m->critical;
}

void device_sim_advance(device *d, double seconds)
{
    if (d->kind != DEVICE_SIM) return;
    state(d)->t[STREAM_COMPUTE] += seconds;
    state(d)->busy += seconds;
}

double device_sim_busy(const device *d)
{
    return d->kind == DEVICE_SIM ? state(d)->busy : 0;
}

double device_sim_elapsed(const device *d)
{
    if (d->kind != DEVICE_SIM) return 0;
    const sim_state *st = state(d);
    return later(st->t[STREAM_COMPUTE], st->t[STREAM_MEMORY]);
}

int device_sim_mark(const device *d, sim_mark *m)
{
    if (d->kind != DEVICE_SIM || state(d)->model.replay_repeats) return 0;
    if (pool_pending_bytes(d->pool)) return 0;
    const sim_state *st = state(d);
    m->pool_key = pool_state_key(d->pool);
    m->now_s = st->t[STREAM_COMPUTE];
    m->lead_s = later(st->t[STREAM_MEMORY] - st->t[STREAM_COMPUTE], 0);
    m->waited_s = d->waited_s;
    m->busy_s = st->busy;
    return 1;
}

int device_sim_same(const sim_mark *a, const sim_mark *b)
{
    double tol = 1e-9 * later(later(a->now_s, b->now_s), 1e-6);
    return a->pool_key == b->pool_key && a->lead_s - b->lead_s <= tol && b->lead_s - a->lead_s <= tol;
}

void device_sim_repeat(device *d, const sim_mark *from, const sim_mark *to, int times)
{
    if (d->kind != DEVICE_SIM || times < 1) return;
    sim_state *st = state(d);
    double dt = (to->now_s - from->now_s) * times;
    st->t[STREAM_COMPUTE] += dt;
    st->t[STREAM_MEMORY] += dt;
    st->busy += (to->busy_s - from->busy_s) * times;
    d->waited_s += (to->waited_s - from->waited_s) * times;
    st->unknown = 1;
}

int device_sim_critical(device *d, const char *const **tags)
{
    if (d->kind != DEVICE_SIM || state(d)->unknown) return -1;
    sim_state *st = state(d);
    free(st->path);
    st->path = malloc(((size_t)st->nnotes + 1) * sizeof *st->path);
    if (!st->path) return -1;
    int count = 0;
    /* each copy's path comes from a copy noted before it: an index out of that order is
     * of an event recorded before the model was set, and the path is not known */
    for (int k = st->src[st->t[STREAM_MEMORY] > st->t[STREAM_COMPUTE] ? STREAM_MEMORY : STREAM_COMPUTE], last = st->nnotes;
         k >= 0; last = k, k = st->notes[k].pred) {
        if (k >= last) return -1;
        st->path[count++] = st->notes[k].tag;
    }
    *tags = st->path;
    return count;
}

vdnn_status device_create_sim(const device_options *opt, device **out)
{
    device *d = calloc(1, sizeof *d);
    sim_state *st = calloc(1, sizeof *st);
    if (!d || !st) {
        free(d);
        free(st);
        return vdnn_fail(VDNN_ENOMEM, "out of host memory creating the simulated device");
    }
    d->kind = DEVICE_SIM;
    d->impl = &sim_impl;
    d->priv = st;
    st->src[0] = st->src[1] = -1;
    d->budget_bytes = opt->budget_bytes / POOL_ALIGN * POOL_ALIGN;
    d->slab = (char *)(uintptr_t)POOL_ALIGN;
    snprintf(d->desc, sizeof d->desc, "simulated (sizes only)");
    vdnn_status s = device_init_pool(d);
    if (s != VDNN_OK) {
        sim_destroy(d);
        return s;
    }
    *out = d;
    return VDNN_OK;
}
