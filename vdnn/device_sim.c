/* The simulated device: the real pool over a slab that does not exist.
 *
 * Used to replay an iteration on sizes only (the planner and `vdnn info` find minimum
 * budgets with it). Device pointers are the slab token plus an offset and are never
 * dereferenced: layers, copies and the solver do nothing on this device. Host buffers
 * are 1-byte stand-ins. Events are complete when recorded. */
#include <stdio.h>
#include <stdlib.h>

#include "vdnn/device_impl.h"

static void sim_destroy(device *d) { free(d); }
static void *sim_host_alloc(device *d, size_t bytes) { (void)d; (void)bytes; return malloc(1); }
static void sim_host_free(device *d, void *p) { (void)d; free(p); }

static vdnn_status sim_copy(device *d, stream_id s, void *dst, const void *src, size_t bytes, copy_kind k,
                            const char *tag)
{
    (void)d, (void)s, (void)dst, (void)src, (void)bytes, (void)k, (void)tag;
    return VDNN_OK;
}

static vdnn_status sim_zero(device *d, void *dst, size_t bytes)
{
    (void)d, (void)dst, (void)bytes;
    return VDNN_OK;
}

static vdnn_status sim_record(device *d, stream_id s, dev_event *ev)
{
    (void)d, (void)s, (void)ev;
    return VDNN_OK;
}

static int sim_done(device *d, dev_event *ev) { (void)d, (void)ev; return 1; }
static void sim_wait(device *d, dev_event *ev) { (void)d, (void)ev; }
static void sim_stream_wait(device *d, stream_id s, dev_event *ev) { (void)d, (void)s, (void)ev; }
static void sim_stream_sync(device *d, stream_id s) { (void)d, (void)s; }

static const device_impl sim_impl = {
    .destroy = sim_destroy,
    .host_alloc = sim_host_alloc,
    .host_free = sim_host_free,
    .copy = sim_copy,
    .zero = sim_zero,
    .record = sim_record,
    .done = sim_done,
    .wait = sim_wait,
    .stream_wait = sim_stream_wait,
    .stream_sync = sim_stream_sync,
};

vdnn_status device_create_sim(const device_options *opt, device **out)
{
    device *d = calloc(1, sizeof *d);
    if (!d) return vdnn_fail(VDNN_ENOMEM, "out of host memory creating the simulated device");
    d->kind = DEVICE_SIM;
    d->impl = &sim_impl;
    d->budget_bytes = opt->budget_bytes / POOL_ALIGN * POOL_ALIGN;
    d->slab = (char *)(uintptr_t)POOL_ALIGN;
    snprintf(d->desc, sizeof d->desc, "simulated (sizes only)");
    vdnn_status st = device_init_pool(d);
    if (st != VDNN_OK) {
        free(d);
        return st;
    }
    *out = d;
    return VDNN_OK;
}
