/* The budgeted asynchronous pool: best fit over an address-ordered block list. */
#include "vdnn/pool.h"

#include <stdlib.h>
#include <string.h>

#include "vdnn/status.h"

typedef enum { BLOCK_FREE = 0, BLOCK_USED, BLOCK_PENDING } block_state;

typedef struct block {
    size_t off, size;
    block_state state;
    void *ev;              /* BLOCK_PENDING: the event it waits for */
    uint64_t seq;          /* BLOCK_PENDING: order of the free, oldest first */
    uint64_t ripe;         /* BLOCK_PENDING: the tick from which it may be reclaimed */
    struct block *prev, *next;
} block;

struct pool {
    size_t capacity;
    pool_sync sync;
    block *head;
    size_t used, peak, pending;
    size_t live_peak;          /* highest used - pending: bytes of blocks not yet freed */
    size_t frontier_peak;      /* highest end of any block ever allocated */
    uint64_t tick;             /* advanced by the caller at each step of its schedule */
    unsigned lag;              /* ticks a pending free waits before it may be reclaimed */
    uint64_t seq, allocs, frees, failures;
};

size_t pool_round(size_t bytes)
{
    return (bytes + POOL_ALIGN - 1) / POOL_ALIGN * POOL_ALIGN;
}

pool *pool_create(size_t capacity_bytes, const pool_sync *sync)
{
    pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->capacity = capacity_bytes / POOL_ALIGN * POOL_ALIGN;
    if (sync) p->sync = *sync;
    if (p->capacity) {
        p->head = calloc(1, sizeof *p->head);
        if (!p->head) { free(p); return NULL; }
        p->head->size = p->capacity;
    }
    return p;
}

void pool_destroy(pool *p)
{
    if (!p) return;
    for (block *b = p->head, *n; b; b = n) {
        n = b->next;
        if (b->state == BLOCK_PENDING && p->sync.release) p->sync.release(p->sync.ctx, b->ev);
        free(b);
    }
    free(p);
}

/* Merges b with free neighbours; returns the surviving block. */
static block *coalesce(block *b)
{
    if (b->next && b->next->state == BLOCK_FREE) {
        block *n = b->next;
        b->size += n->size;
        b->next = n->next;
        if (n->next) n->next->prev = b;
        free(n);
    }
    if (b->prev && b->prev->state == BLOCK_FREE) {
        block *q = b->prev;
        q->size += b->size;
        q->next = b->next;
        if (b->next) b->next->prev = q;
        free(b);
        b = q;
    }
    return b;
}

static void release_block(pool *p, block *b)
{
    if (b->state == BLOCK_PENDING) {
        p->pending -= b->size;
        if (p->sync.release) p->sync.release(p->sync.ctx, b->ev);
        b->ev = NULL;
    }
    p->used -= b->size;
    b->state = BLOCK_FREE;
    coalesce(b);
}

void pool_reclaim(pool *p, int wait)
{
    /* Releasing coalesces neighbours, which frees list nodes: rescan after each. */
    for (block *b = p->head; b;) {
        if (b->state == BLOCK_PENDING) {
            if (wait && p->sync.wait) p->sync.wait(p->sync.ctx, b->ev);
            if (!p->sync.done || p->sync.done(p->sync.ctx, b->ev)) {
                release_block(p, b);
                b = p->head;
                continue;
            }
        }
        b = b->next;
    }
}

/* The oldest pending block whose release lag has passed, or NULL. */
static block *oldest_pending(pool *p)
{
    block *best = NULL;
    for (block *b = p->head; b; b = b->next)
        if (b->state == BLOCK_PENDING && b->ripe <= p->tick && (!best || b->seq < best->seq)) best = b;
    return best;
}

/* The free block past the last allocated one, if any: growing into it raises the
 * pool's frontier. */
static block *tail_block(pool *p)
{
    block *b = p->head;
    while (b && b->next) b = b->next;
    return b && b->state == BLOCK_FREE ? b : NULL;
}

/* The lowest free hole below the frontier that fits (first fit). */
static block *find_hole(pool *p, size_t size)
{
    block *tail = tail_block(p);
    for (block *b = p->head; b; b = b->next)
        if (b->state == BLOCK_FREE && b != tail && b->size >= size) return b;
    return NULL;
}

static size_t largest_free(const pool *p)
{
    size_t m = 0;
    for (const block *b = p->head; b; b = b->next)
        if (b->state == BLOCK_FREE && b->size > m) m = b->size;
    return m;
}

/* Splits free block b so that its first `size` bytes are used. */
static vdnn_status take(pool *p, block *b, size_t size, size_t *offset)
{
    if (b->size > size) {
        block *rest = calloc(1, sizeof *rest);
        if (!rest) return vdnn_fail(VDNN_ENOMEM, "out of host memory in the device pool");
        rest->off = b->off + size;
        rest->size = b->size - size;
        rest->prev = b;
        rest->next = b->next;
        if (b->next) b->next->prev = rest;
        b->next = rest;
        b->size = size;
    }
    b->state = BLOCK_USED;
    p->used += size;
    if (p->used > p->peak) p->peak = p->used;
    if (p->used - p->pending > p->live_peak) p->live_peak = p->used - p->pending;
    p->allocs++;
    *offset = b->off;
    return VDNN_OK;
}

vdnn_status pool_alloc(pool *p, size_t bytes, const char *layer, const char *tensor, size_t *offset)
{
    size_t size = pool_round(bytes ? bytes : 1);
    if (size < bytes)
        return vdnn_fail(VDNN_EINVAL, "%s %s: %zu bytes is too large", layer ? layer : "?",
                         tensor ? tensor : "?", bytes);
    /* Reuse before growth: a hole below the frontier, else the memory of pending frees
     * whose lag has passed (oldest first, waiting for their events), and only then the
     * space past the frontier. No step looks at the capacity, so a larger pool makes
     * exactly the same choices: whatever fits in C fits in every larger budget, and the
     * frontier's high-water mark is the minimum. */
    block *b = find_hole(p, size);
    while (!b) {
        block *old = oldest_pending(p);
        if (!old) break;
        if (p->sync.wait) p->sync.wait(p->sync.ctx, old->ev);
        release_block(p, old);
        b = find_hole(p, size);
    }
    if (!b) {
        block *tail = tail_block(p);
        if (tail && tail->size >= size) b = tail;
    }
    if (!b) {
        char a[32], f[32], l[32], c[32];
        p->failures++;
        return vdnn_fail(VDNN_EBUDGET,
                         "device budget exceeded: layer %s, tensor %s asks %s (%zu bytes); "
                         "%s free of %s, largest free block %s",
                         layer ? layer : "-", tensor ? tensor : "-", vdnn_fmt_bytes(size, a, sizeof a),
                         size, vdnn_fmt_bytes(p->capacity - p->used, f, sizeof f),
                         vdnn_fmt_bytes(p->capacity, c, sizeof c),
                         vdnn_fmt_bytes(largest_free(p), l, sizeof l));
    }
    vdnn_status st = take(p, b, size, offset);
    if (st == VDNN_OK && b->off + size > p->frontier_peak) p->frontier_peak = b->off + size;
    return st;
}

static block *find_used(pool *p, size_t offset)
{
    for (block *b = p->head; b; b = b->next)
        if (b->off == offset) return b->state == BLOCK_USED ? b : NULL;
    return NULL;
}

vdnn_status pool_free(pool *p, size_t offset)
{
    block *b = find_used(p, offset);
    if (!b) return vdnn_fail(VDNN_EINVAL, "pool: free of offset %zu, which is not allocated", offset);
    p->frees++;
    release_block(p, b);
    return VDNN_OK;
}

vdnn_status pool_free_after(pool *p, size_t offset, void *ev)
{
    block *b = find_used(p, offset);
    if (!b) {
        if (p->sync.release) p->sync.release(p->sync.ctx, ev);
        return vdnn_fail(VDNN_EINVAL, "pool: free of offset %zu, which is not allocated", offset);
    }
    p->frees++;
    b->state = BLOCK_PENDING;
    b->ev = ev;
    b->seq = p->seq++;
    b->ripe = p->tick + p->lag;
    p->pending += b->size;
    return VDNN_OK;
}

void pool_get_stats(const pool *p, pool_stats *o)
{
    memset(o, 0, sizeof *o);
    o->capacity_bytes = p->capacity;
    o->used_bytes = p->used;
    o->peak_bytes = p->peak;
    o->frontier_peak_bytes = p->frontier_peak;
    o->free_bytes = p->capacity - p->used;
    o->largest_free_bytes = largest_free(p);
    o->pending_bytes = p->pending;
    for (const block *b = p->head; b; b = b->next) {
        if (b->state == BLOCK_FREE) o->free_blocks++;
        else o->live_blocks++;
    }
    o->fragmentation = o->free_bytes ? 1.0 - (double)o->largest_free_bytes / (double)o->free_bytes : 0.0;
    o->allocs = p->allocs;
    o->frees = p->frees;
    o->failures = p->failures;
}

size_t pool_peak_bytes(const pool *p) { return p->peak; }
size_t pool_used_bytes(const pool *p) { return p->used; }
void pool_reset_peak(pool *p) { p->peak = p->used; }
size_t pool_frontier_peak(const pool *p) { return p->frontier_peak; }
size_t pool_live_peak(const pool *p) { return p->live_peak; }
void pool_set_lag(pool *p, unsigned ticks) { p->lag = ticks; }
void pool_tick(pool *p) { p->tick++; }
