/* The budgeted, asynchronous device memory pool.
 *
 * The pool manages offsets inside one slab of `capacity` bytes; it never touches the
 * memory itself, so the same code serves the real device (offset + slab base) and the
 * planner's simulator (sizes only). An address-ordered block list with coalescing;
 * every block is aligned to POOL_ALIGN bytes. A request takes the lowest hole that fits
 * below the frontier (the end of the highest allocated block), else the memory of
 * pending frees, else grows the frontier: decisions never depend on the capacity.
 *
 * Asynchronous frees: pool_free_after() hands back a block that becomes reusable only
 * once an event has completed. The issuing thread never waits. Pending blocks are
 * reclaimed only when an allocation does not fit otherwise: oldest free first, waiting
 * for its event (which has usually completed long before). Whether an event happens to
 * be complete therefore never changes what the pool does: the sequence of offsets, the
 * high-water mark and the fragmentation depend only on the sequence of calls, which is
 * what lets the planner predict them exactly by replaying the calls on sizes only.
 *
 * A failed request returns VDNN_EBUDGET with a message naming the layer, the tensor,
 * the bytes asked, the bytes free and the largest free block. Not thread-safe: one
 * thread (the one issuing work) owns a pool. */
#ifndef VDNN_MEMPOOL_H
#define VDNN_MEMPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "vdnn/status.h"

#define POOL_ALIGN 256

/* How the pool asks about events it was handed; `ev` is opaque to the pool. */
typedef struct pool_sync {
    void *ctx;
    int (*done)(void *ctx, void *ev);     /* non-zero once the event has completed */
    void (*wait)(void *ctx, void *ev);    /* blocks until it has */
    void (*release)(void *ctx, void *ev); /* drops the pool's reference */
} pool_sync;

typedef struct pool pool;

typedef struct pool_stats {
    size_t capacity_bytes;
    size_t used_bytes;        /* allocated, including blocks pending an async free */
    size_t peak_bytes;        /* high-water mark of used_bytes since create/reset */
    size_t frontier_peak_bytes; /* highest end of any block allocated: the least capacity that works */
    size_t free_bytes;        /* capacity - used */
    size_t largest_free_bytes;
    size_t pending_bytes;     /* freed-after-event, not yet reclaimed */
    size_t live_blocks;
    size_t free_blocks;
    double fragmentation;     /* 1 - largest_free / free (0 when free is 0) */
    uint64_t allocs, frees, failures;
} pool_stats;

/* Creates a pool of `capacity_bytes`. `sync` may be NULL when no async frees are used;
 * it is copied. Returns NULL on a host allocation failure. Free with pool_destroy(). */
pool *pool_create(size_t capacity_bytes, const pool_sync *sync);
void pool_destroy(pool *p);

/* Bytes a request of `bytes` really takes (rounded up to the alignment). */
size_t pool_round(size_t bytes);

/* Allocates `bytes` (> 0); *offset receives the block's offset in the slab.
 * `layer` and `tensor` only name the request in an error message (may be NULL). */
vdnn_status pool_alloc(pool *p, size_t bytes, const char *layer, const char *tensor, size_t *offset);
/* pool_alloc of a tensor named `tensor` then `suffix` (NULL: none): the two are joined
 * only for an error message. */
vdnn_status pool_alloc_as(pool *p, size_t bytes, const char *layer, const char *tensor, const char *suffix,
                          size_t *offset);

/* Returns a block at once. Freeing an offset that is not live is a programming error
 * reported as VDNN_EINVAL. */
vdnn_status pool_free(pool *p, size_t offset);

/* Returns a block once `ev` has completed; the pool takes ownership of the event
 * reference and releases it through the sync interface. */
vdnn_status pool_free_after(pool *p, size_t offset, void *ev);

/* The release lag: a block freed after an event at tick t may be reclaimed by an
 * allocation only from tick t + ticks on (default 0). The caller advances the tick at
 * fixed points of its schedule (the iteration: at every layer), so a copy that started
 * with layer i can run through the next `ticks` layers before anything waits for it;
 * the pool grows instead, and the budget pays for the overlap. */
void pool_set_lag(pool *p, unsigned ticks);
void pool_tick(pool *p);

/* Reclaims every pending block whose event has completed; with `wait`, waits for all.
 * Without `wait` the outcome depends on timing: the iteration never calls it so. */
void pool_reclaim(pool *p, int wait);

void pool_get_stats(const pool *p, pool_stats *out);
size_t pool_peak_bytes(const pool *p);
size_t pool_used_bytes(const pool *p);
/* Bytes in blocks freed after an event and not yet reclaimed. */
size_t pool_pending_bytes(const pool *p);
/* The highest end of any block ever allocated. The pool's choices do not depend on its
 * capacity (see pool_alloc), so the same calls succeed in any capacity at least this. */
size_t pool_frontier_peak(const pool *p);
void pool_reset_peak(pool *p);
/* Makes every request that would end a block above `bytes` fail (VDNN_EBUDGET) as if the
 * capacity were that, with the pool as it is (0: no cap). The choices up to then are
 * those of any capacity, so a sequence of calls fails under the cap exactly when its
 * frontier peak would exceed it: the planner's simulator stops a replay there. */
void pool_set_cap(pool *p, size_t bytes);
/* The largest block a request now would be given whose end is at most `cap` (0: the
 * capacity): a request of more bytes fails under that cap, whatever came before it. */
size_t pool_room(const pool *p, size_t cap);
/* The high-water marks (peak, live peak, frontier peak): taken, and put back once a
 * replay has returned every block it took, the pool is as it was for a next replay
 * (the planner's simulator replays plan after plan on one pool). */
typedef struct pool_marks {
    size_t peak, live_peak, frontier_peak;
} pool_marks;
pool_marks pool_get_marks(const pool *p);
void pool_set_marks(pool *p, pool_marks m);
/* The highest count of bytes in blocks not freed (pending frees excluded). The least
 * any placement needs; unlike the peak, it never grows when a block is freed earlier. */
size_t pool_live_peak(const pool *p);
/* A key of the pool's blocks: every block's offset, size and state (free, used or
 * pending), kept as they change (O(1)). Two pools with the same key and no pending
 * blocks make the same choices for the same requests from here on (the treap's shape
 * and the counters enter no choice). */
uint64_t pool_state_key(const pool *p);

#endif
