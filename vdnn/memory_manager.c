/* The memory manager (see memory_manager.h). */
#include "vdnn/memory_manager.h"

#include <stdio.h>

static vdnn_status host_buffer(device *d, fmap *m, size_t bytes)
{
    if (m->host && m->host_bytes >= bytes) return VDNN_OK;
    device_host_free(d, m->host);
    m->host = device_host_alloc(d, bytes);
    m->host_bytes = m->host ? bytes : 0;
    if (!m->host) return vdnn_fail(VDNN_ENOMEM, "out of host memory for offloading %s (%zu bytes)", m->name, bytes);
    return VDNN_OK;
}

vdnn_status mm_offload(device *d, fmap *m, size_t bytes, mm_stats *s)
{
    if (m->state != RES_DEVICE) return vdnn_fail(VDNN_EINVAL, "offload of %s, which is not on the device", m->name);
    vdnn_status st = host_buffer(d, m, bytes);
    if (st != VDNN_OK) return st;
    dev_event *done = device_event_record(d, STREAM_COMPUTE);
    if (!done) return vdnn_fail(VDNN_ENOMEM, "out of host memory for an event");
    device_stream_wait(d, STREAM_MEMORY, done);
    device_event_release(d, done);
    st = device_copy_tagged(d, STREAM_MEMORY, m->host, m->dev, bytes, COPY_D2H, m->name);
    if (st != VDNN_OK) return st;
    m->ev = device_event_record(d, STREAM_MEMORY);
    if (!m->ev) return vdnn_fail(VDNN_ENOMEM, "out of host memory for an event");
    m->state = RES_OFFLOADING;
    s->offload_bytes += bytes;
    return VDNN_OK;
}

vdnn_status mm_release(device *d, fmap *m)
{
    if (m->state != RES_OFFLOADING) return vdnn_fail(VDNN_EINVAL, "release of %s, which is not offloading", m->name);
    vdnn_status st = device_free_after(d, m->dev, m->ev);   /* takes the event reference */
    m->dev = NULL;
    m->ev = NULL;
    m->state = RES_HOST;
    return st;
}

vdnn_status mm_prefetch(device *d, fmap *m, size_t room, size_t bytes, const char *layer, mm_stats *s)
{
    if (m->state != RES_HOST) return vdnn_fail(VDNN_EINVAL, "prefetch of %s, which is not on the host", m->name);
    vdnn_status st = device_alloc_as(d, room, layer, m->name, " (prefetch)", (void **)&m->dev);
    if (st != VDNN_OK) return st;
    st = device_copy_tagged(d, STREAM_MEMORY, m->dev, m->host, bytes, COPY_H2D, m->name);
    if (st != VDNN_OK) return st;
    m->ev = device_event_record(d, STREAM_MEMORY);
    if (!m->ev) return vdnn_fail(VDNN_ENOMEM, "out of host memory for an event");
    m->state = RES_PREFETCHING;
    s->prefetch_bytes += bytes;
    return VDNN_OK;
}

vdnn_status mm_ready(device *d, fmap *m, mm_stats *s)
{
    if (m->state == RES_DEVICE || m->state == RES_OFFLOADING) return VDNN_OK;
    if (m->state != RES_PREFETCHING)
        return vdnn_fail(VDNN_EINVAL, "%s is needed on the device but is %s", m->name,
                         m->state == RES_HOST ? "on the host" : "not allocated");
    /* timed by the device: on a GPU the host does not wait here, the compute stream does */
    vdnn_status st = device_stream_wait_timed(d, STREAM_COMPUTE, m->ev);
    s->wait_s += device_take_wait_s(d);
    device_event_release(d, m->ev);
    m->ev = NULL;
    m->state = RES_DEVICE;
    return st;
}

void mm_drop(device *d, fmap *m)
{
    if (m->ev) {
        device_event_wait(d, m->ev);
        device_event_release(d, m->ev);
    }
    if (m->dev) device_free(d, m->dev);
    m->ev = NULL;
    m->dev = NULL;
    m->state = RES_NONE;
}

void mm_destroy(device *d, fmap *m)
{
    mm_drop(d, m);
    device_host_free(d, m->host);
    m->host = NULL;
    m->host_bytes = 0;
}
