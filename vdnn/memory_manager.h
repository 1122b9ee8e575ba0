/* The memory manager: residency of feature maps, offload to host memory after the
 * forward pass, prefetch back before the backward pass, on the memory stream.
 *
 * A feature map is on the device, offloading (its copy to host is in flight; the device
 * copy is still valid and may still be read), on the host (the device copy is released),
 * prefetching (a device copy is being filled from the host), or dropped. Every copy runs
 * on STREAM_MEMORY and is ordered against compute with events; no call here synchronises
 * the whole device.
 *
 * Host buffers are allocated once per map (pinned on CUDA, through device_host_alloc)
 * and reused by every iteration. */
#ifndef VDNN_MEMORY_MANAGER_H
#define VDNN_MEMORY_MANAGER_H

#include <stdint.h>

#include "vdnn/device.h"

typedef enum {
    RES_NONE = 0,        /* not allocated (not computed yet, or freed) */
    RES_DEVICE,          /* on the device */
    RES_OFFLOADING,      /* on the device, its copy to host in flight */
    RES_HOST,            /* on the host only */
    RES_PREFETCHING      /* on the host, its copy to the device in flight */
} residency;

typedef struct fmap {
    float *dev;          /* device copy (NULL unless DEVICE/OFFLOADING/PREFETCHING) */
    float *host;         /* host buffer, allocated on first offload, reused; owned */
    size_t host_bytes;
    residency state;
    dev_event *ev;       /* the in-flight copy's completion (OFFLOADING/PREFETCHING) */
    int offload;         /* the plan: offload after its last forward reader */
    int recompute;       /* the plan: drop after its last forward reader, recompute in backward */
    int first_reader;    /* the first layer (counting backward) whose backward reads it; -1: none */
    int release;         /* the layer after whose backward pass it is dropped: its last use in
                          * backward, recomputations included; -1: dropped after forward */
    char name[24];       /* "x[3]", for traces and errors */
} fmap;

typedef struct mm_stats {
    uint64_t offload_bytes;
    uint64_t prefetch_bytes;
    double wait_s;       /* time compute waited for copies (on a GPU measured with events and
                          * counted once read: a training step's are all in by its end) */
} mm_stats;

/* Starts copying m's device copy (bytes long) to its host buffer on the memory stream,
 * after the work enqueued so far on the compute stream. DEVICE -> OFFLOADING. */
vdnn_status mm_offload(device *d, fmap *m, size_t bytes, mm_stats *s);

/* The last forward reader is done: the device copy is released once the copy to host
 * has completed (an asynchronous free). OFFLOADING -> HOST. */
vdnn_status mm_release(device *d, fmap *m);

/* Allocates a device copy of `room` bytes and starts filling its first `bytes` (at most
 * `room`) from the host on the memory stream. HOST -> PREFETCHING. `layer` names the
 * request in a budget error. */
vdnn_status mm_prefetch(device *d, fmap *m, size_t room, size_t bytes, const char *layer, mm_stats *s);

/* Makes the compute stream wait for m's prefetch (not for anything else).
 * PREFETCHING -> DEVICE; DEVICE stays. Any other state is an error. */
vdnn_status mm_ready(device *d, fmap *m, mm_stats *s);

/* Frees the device copy (if any) and forgets in-flight events; keeps the host buffer. */
void mm_drop(device *d, fmap *m);

/* Releases the host buffer too. */
void mm_destroy(device *d, fmap *m);

#endif
