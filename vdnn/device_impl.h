/* What a device implementation provides; private to vdnn/device*.c. */
#ifndef VDNN_DEVICE_IMPL_H
#define VDNN_DEVICE_IMPL_H

#include <stdatomic.h>

#include "vdnn/device.h"
#include "vdnn/trace.h"

struct dev_event {
    atomic_int refs;       /* counted with plain loads and stores where `single` */
    int single;            /* recorded on a one_thread device: no other thread holds it */
    stream_id stream;
    uint64_t ticket;       /* CPU: completed once the stream's done count reaches it */
    void *handle;          /* CUDA: the cudaEvent_t */
    double at_s;           /* simulated device: its stream's clock when recorded, */
    int src;               /* and the copy that clock's longest path last went through */
};

typedef struct device_impl {
    /* What the device is (device.h's questions). */
    device_code code;
    int async;             /* compute-stream work returns before it is done */
    int host_memory;       /* its memory is the host's */
    int algos_by_batch;    /* the tables it gives a layer depend on the batch */
    int one_thread;        /* only the creating thread calls it (no copy engine, no callbacks):
                            * released events are kept for reuse without a lock */
    void (*destroy)(device *d);
    void *(*host_alloc)(device *d, size_t bytes);
    void (*host_free)(device *d, void *ptr);
    vdnn_status (*copy)(device *d, stream_id s, void *dst, const void *src, size_t bytes, copy_kind k,
                        const char *tag);
    void (*set_trace)(device *d, trace *t);
    vdnn_status (*zero)(device *d, void *dst, size_t bytes);
    vdnn_status (*fill_normal)(device *d, float *dst, size_t count, uint64_t seed);
    vdnn_status (*record)(device *d, stream_id s, dev_event *ev);
    int (*done)(device *d, dev_event *ev);
    vdnn_status (*wait)(device *d, dev_event *ev);
    vdnn_status (*stream_wait)(device *d, stream_id s, dev_event *ev);
    vdnn_status (*stream_sync)(device *d, stream_id s);
    void (*event_free)(device *d, dev_event *ev);
    void (*bind_thread)(device *d);   /* optional */
    void (*pin_thread)(device *d);    /* optional; bind_thread where absent */
    /* Optional: a non-blocking query of both streams for a failure. */
    vdnn_status (*poll)(device *d);
    /* Optional: a timed stream wait measured on the device, and the seconds of those
     * whose measurements have completed since the last call. Without them the host's
     * time around stream_wait is counted. */
    vdnn_status (*stream_wait_timed)(device *d, stream_id s, dev_event *ev);
    double (*settle_waits)(device *d);
} device_impl;

struct device {
    device_kind kind;
    const device_impl *impl;
    pool *pool;
    char *slab;            /* base of the budgeted device memory */
    size_t budget_bytes;
    char desc[160];
    char model[160];       /* device_model(); empty: desc */
    char key[64];          /* device_identity() */
    device_options opt;    /* as created */
    double slept_s;        /* CPU device: slow-down sleeps so far (by its computing thread) */
    void *priv;            /* the implementation's state */
    vdnn_status failed;    /* the first asynchronous failure (device_poll), or VDNN_OK */
    char failed_msg[600];
    char *faults;          /* VDNN_FAULTS (device_fault_algo), or NULL; owned */
    double waited_s;       /* timed waits counted since device_take_wait_s */
    dev_event *spare_events;   /* impl->one_thread: released events for the next record */
};

/* Keeps `st` (with the calling thread's message) as the device's first asynchronous
 * failure unless it has one already; returns st. */
vdnn_status device_note_failure(device *d, vdnn_status st);

/* Sets up the pool over d->slab / d->budget_bytes (called by implementations). */
vdnn_status device_init_pool(device *d);

vdnn_status device_create_cpu(const device_options *opt, device **out);
vdnn_status device_create_cuda(const device_options *opt, device **out);
vdnn_status device_create_sim(const device_options *opt, device **out);

#endif
