/* The budgeted asynchronous pool: first fit over an address-ordered block list.
 *
 * Nets of thousands of layers hold tens of thousands of blocks, and the planner replays
 * their iterations thousands of times, so no operation walks the list: the free blocks
 * are also a treap by offset whose nodes know the largest free block below them (the
 * lowest hole that fits is found in O(log n)), live blocks are found by offset in a
 * hash table, pending frees wait in a queue in the order they were made, and the pool
 * knows its last block. The choices are those of a walk of the list. */
#include "vdnn/mempool.h"

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
    struct block *prev, *next;          /* every block, by address */
    struct block *left, *right;         /* BLOCK_FREE: the treap of free blocks */
    uint32_t prio;                      /* treap priority (a heap on it keeps it balanced) */
    size_t max_free;                    /* the largest size in this node's subtree */
    struct block *hnext;                /* BLOCK_USED/PENDING: next in its hash bucket */
    struct block *qprev, *qnext;        /* BLOCK_PENDING: the queue of pending frees */
} block;

struct pool {
    size_t capacity;
    pool_sync sync;
    block *head, *last;
    block *free_root;          /* treap of free blocks by offset */
    block **bucket;            /* hash of live blocks by offset */
    size_t nbuckets, nlive;    /* nbuckets a power of two, 2^(64 - hshift) */
    unsigned hshift;
    block *qhead, *qtail;      /* pending frees, oldest first */
    block *spare;              /* block records unlinked, kept for the next split (by next) */
    int unsorted;              /* the queue's ripe ticks may not rise from head to tail (the lag
                                * fell while blocks waited): search it all */
    uint32_t rng;
    size_t used, peak, pending;
    size_t live_peak;          /* highest used - pending: bytes of blocks not yet freed */
    size_t frontier_peak;      /* highest end of any block ever allocated */
    size_t cap;                /* pool_set_cap: no block may end above it; 0: none */
    uint64_t tick;             /* advanced by the caller at each step of its schedule */
    unsigned lag;              /* ticks a pending free waits before it may be reclaimed */
    uint64_t seq, allocs, frees, failures;
    uint64_t key;              /* pool_state_key: the sum of the used and pending blocks'
                                * shares (share()) */
};

size_t pool_round(size_t bytes)
{
    return (bytes + POOL_ALIGN - 1) / POOL_ALIGN * POOL_ALIGN;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

/* A block's share of the pool's state key: a hash of its offset, size and state. The
 * blocks tile the pool and free ones are always merged with free neighbours, so the
 * used and pending blocks decide the free ones, and the set of them is the pool's
 * state: the key, the sum of their shares (mod 2^64), is kept as they change (a block
 * taken puts its share in, one freed takes it out, a pending one changes it); free
 * blocks split and merged leave it as it is. */
static uint64_t share(const block *b)
{
    return mix(mix(mix(0xcbf29ce484222325ull, b->off), b->size), (uint64_t)b->state);
}

/* ---- the treap of free blocks ---- */

static size_t max_of(const block *b) { return b ? b->max_free : 0; }

static void t_fix(block *b)
{
    size_t m = b->size;
    if (max_of(b->left) > m) m = max_of(b->left);
    if (max_of(b->right) > m) m = max_of(b->right);
    b->max_free = m;
}

/* Splits t into the nodes below offset `key` (*l) and the rest (*r). */
static void t_split(block *t, size_t key, block **l, block **r)
{
    if (!t) {
        *l = *r = NULL;
    } else if (t->off < key) {
        t_split(t->right, key, &t->right, r);
        t_fix(t);
        *l = t;
    } else {
        t_split(t->left, key, l, &t->left);
        t_fix(t);
        *r = t;
    }
}

/* Joins two treaps, every node of a below every node of b. */
static block *t_merge(block *a, block *b)
{
    if (!a) return b;
    if (!b) return a;
    if (a->prio > b->prio) {
        a->right = t_merge(a->right, b);
        t_fix(a);
        return a;
    }
    b->left = t_merge(a, b->left);
    t_fix(b);
    return b;
}

/* Puts b into treap t: down the path its offset takes to the first node of lower
 * priority, whose subtree b splits between its children. */
static block *t_put(block *t, block *b)
{
    if (!t) return b;
    if (b->prio > t->prio) {
        t_split(t, b->off, &b->left, &b->right);
        t_fix(b);
        return b;
    }
    if (b->off < t->off) t->left = t_put(t->left, b);
    else t->right = t_put(t->right, b);
    t_fix(t);
    return t;
}

static void t_insert(pool *p, block *b)
{
    p->rng ^= p->rng << 13;
    p->rng ^= p->rng >> 17;
    p->rng ^= p->rng << 5;
    b->prio = p->rng;
    b->left = b->right = NULL;
    b->max_free = b->size;
    p->free_root = t_put(p->free_root, b);
}

/* Takes b out of treap t: its children, merged, take its place. */
static block *t_take(block *t, const block *b)
{
    if (t == b) return t_merge(b->left, b->right);
    if (b->off < t->off) t->left = t_take(t->left, b);
    else t->right = t_take(t->right, b);
    t_fix(t);
    return t;
}

static void t_remove(pool *p, block *b)
{
    p->free_root = t_take(p->free_root, b);
    b->left = b->right = NULL;
}

/* Puts block `to` where block `from` is in the treap t: to takes from's priority and
 * children. No other free block may lie between their offsets (to is from split or
 * merged), so the order holds. The largest sizes are fixed on the way back up. */
static block *t_replace(block *t, const block *from, block *to)
{
    if (t == from) {
        to->left = from->left;
        to->right = from->right;
        to->prio = from->prio;
        t_fix(to);
        return to;
    }
    if (from->off < t->off) t->left = t_replace(t->left, from, to);
    else t->right = t_replace(t->right, from, to);
    t_fix(t);
    return t;
}

/* Block b in the treap t changed size: the largest sizes fixed from it up. */
static void t_resized(block *t, const block *b)
{
    if (t != b) t_resized(b->off < t->off ? t->left : t->right, b);
    t_fix(t);
}

/* The lowest free block of at least `size` bytes, or NULL. */
static block *t_first_fit(block *t, size_t size)
{
    while (t && t->max_free >= size) {
        if (max_of(t->left) >= size) t = t->left;
        else if (t->size >= size) return t;
        else t = t->right;
    }
    return NULL;
}

/* ---- live blocks by offset ---- */

/* Fibonacci hashing: the top bits of the offset's multiple (a modulo would cost a
 * division at every allocation and free of a replay). */
static size_t h_slot(const pool *p, size_t off)
{
    return (size_t)(((uint64_t)(off / POOL_ALIGN) * 0x9e3779b97f4a7c15ull) >> p->hshift);
}

static vdnn_status h_insert(pool *p, block *b)
{
    if (p->nlive + 1 > p->nbuckets) {
        size_t n = p->nbuckets ? 2 * p->nbuckets : 64;
        block **fresh = calloc(n, sizeof *fresh);
        if (!fresh) return vdnn_fail(VDNN_ENOMEM, "out of host memory in the device pool");
        block **old = p->bucket;
        size_t oldn = p->nbuckets;
        p->bucket = fresh;
        p->nbuckets = n;
        p->hshift = 64;
        for (size_t m = n; m > 1; m >>= 1) p->hshift--;
        for (size_t k = 0; k < oldn; k++)
            for (block *x = old[k], *nx; x; x = nx) {
                nx = x->hnext;
                size_t s = h_slot(p, x->off);
                x->hnext = p->bucket[s];
                p->bucket[s] = x;
            }
        free(old);
    }
    size_t s = h_slot(p, b->off);
    b->hnext = p->bucket[s];
    p->bucket[s] = b;
    p->nlive++;
    return VDNN_OK;
}

static void h_remove(pool *p, block *b)
{
    for (block **at = &p->bucket[h_slot(p, b->off)]; *at; at = &(*at)->hnext)
        if (*at == b) {
            *at = b->hnext;
            p->nlive--;
            return;
        }
}

static block *find_used(pool *p, size_t offset)
{
    if (!p->nbuckets) return NULL;
    for (block *b = p->bucket[h_slot(p, offset)]; b; b = b->hnext)
        if (b->off == offset) return b->state == BLOCK_USED ? b : NULL;
    return NULL;
}

/* ---- the pool ---- */

pool *pool_create(size_t capacity_bytes, const pool_sync *sync)
{
    pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->capacity = capacity_bytes / POOL_ALIGN * POOL_ALIGN;
    p->rng = 2463534242u;
    if (sync) p->sync = *sync;
    if (p->capacity) {
        p->head = p->last = calloc(1, sizeof *p->head);
        if (!p->head) { free(p); return NULL; }
        p->head->size = p->capacity;
        t_insert(p, p->head);
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
    for (block *b = p->spare, *n; b; b = n) {
        n = b->next;
        free(b);
    }
    free(p->bucket);
    free(p);
}

/* A zeroed block record: a spare one, else a new one. A simulated iteration splits and
 * merges blocks thousands of times. */
static block *new_block(pool *p)
{
    block *b = p->spare;
    if (!b) return calloc(1, sizeof *b);
    p->spare = b->next;
    *b = (block){0};
    return b;
}

static void unlink_block(pool *p, block *n)
{
    if (n->prev) n->prev->next = n->next;
    if (n->next) n->next->prev = n->prev;
    if (p->last == n) p->last = n->prev;
    n->next = p->spare;
    p->spare = n;
}

/* b is free now: merges it with free neighbours into one free block in the treap. A
 * free block before it grows in place; else b takes the place of a free block after
 * it, or is inserted. */
static void coalesce(pool *p, block *b)
{
    block *n = b->next && b->next->state == BLOCK_FREE ? b->next : NULL;
    block *q = b->prev && b->prev->state == BLOCK_FREE ? b->prev : NULL;
    if (q) {
        if (n) {
            t_remove(p, n);
            q->size += n->size;
            unlink_block(p, n);
        }
        q->size += b->size;
        unlink_block(p, b);
        t_resized(p->free_root, q);
    } else if (n) {
        b->size += n->size;
        p->free_root = t_replace(p->free_root, n, b);
        unlink_block(p, n);
    } else {
        t_insert(p, b);
    }
}

/* b (used or pending) is free now: its share leaves the key. */
static void release_block(pool *p, block *b)
{
    p->key -= share(b);
    if (b->state == BLOCK_PENDING) {
        p->pending -= b->size;
        if (p->sync.release) p->sync.release(p->sync.ctx, b->ev);
        b->ev = NULL;
        if (b->qprev) b->qprev->qnext = b->qnext;
        else p->qhead = b->qnext;
        if (b->qnext) b->qnext->qprev = b->qprev;
        else p->qtail = b->qprev;
        b->qprev = b->qnext = NULL;
    }
    h_remove(p, b);
    p->used -= b->size;
    b->state = BLOCK_FREE;
    coalesce(p, b);
}

void pool_reclaim(pool *p, int wait)
{
    /* Which order they go in does not matter: coalescing ends in the same blocks. */
    for (block *b = p->qhead, *n; b; b = n) {
        n = b->qnext;
        if (wait && p->sync.wait) p->sync.wait(p->sync.ctx, b->ev);
        if (!p->sync.done || p->sync.done(p->sync.ctx, b->ev)) release_block(p, b);
    }
}

/* The oldest pending block whose release lag has passed, or NULL. While the ripe ticks
 * rise along the queue, only its head can be the one. */
static block *oldest_pending(pool *p)
{
    if (!p->unsorted) return p->qhead && p->qhead->ripe <= p->tick ? p->qhead : NULL;
    for (block *b = p->qhead; b; b = b->qnext)
        if (b->ripe <= p->tick) return b;
    return NULL;
}

/* The free block past the last allocated one, if any: growing into it raises the
 * pool's frontier. */
static block *tail_block(const pool *p)
{
    return p->last && p->last->state == BLOCK_FREE ? p->last : NULL;
}

/* The lowest free hole below the frontier that fits (first fit). */
static block *find_hole(pool *p, size_t size)
{
    block *b = t_first_fit(p->free_root, size);
    return b && b != tail_block(p) ? b : NULL;
}

static size_t largest_free(const pool *p)
{
    return max_of(p->free_root);
}

/* Splits free block b so that its first `size` bytes are used. */
static vdnn_status take(pool *p, block *b, size_t size, size_t *offset)
{
    block *rest = NULL;
    if (b->size > size) {
        rest = new_block(p);
        if (!rest) return vdnn_fail(VDNN_ENOMEM, "out of host memory in the device pool");
    }
    vdnn_status st = h_insert(p, b);
    if (st != VDNN_OK) {
        free(rest);
        return st;
    }
    if (rest) {
        /* the rest keeps b's place among the free blocks */
        rest->off = b->off + size;
        rest->size = b->size - size;
        p->free_root = t_replace(p->free_root, b, rest);
        b->left = b->right = NULL;
        rest->prev = b;
        rest->next = b->next;
        if (b->next) b->next->prev = rest;
        b->next = rest;
        b->size = size;
        if (p->last == b) p->last = rest;
    } else {
        t_remove(p, b);
    }
    b->state = BLOCK_USED;
    p->key += share(b);
    p->used += size;
    if (p->used > p->peak) p->peak = p->used;
    if (p->used - p->pending > p->live_peak) p->live_peak = p->used - p->pending;
    p->allocs++;
    *offset = b->off;
    return VDNN_OK;
}

vdnn_status pool_alloc(pool *p, size_t bytes, const char *layer, const char *tensor, size_t *offset)
{
    return pool_alloc_as(p, bytes, layer, tensor, NULL, offset);
}

vdnn_status pool_alloc_as(pool *p, size_t bytes, const char *layer, const char *tensor, const char *suffix,
                          size_t *offset)
{
    size_t size = pool_round(bytes ? bytes : 1);
    if (!suffix) suffix = "";
    if (size < bytes)
        return vdnn_fail(VDNN_EINVAL, "%s %s%s: %zu bytes is too large", layer ? layer : "?",
                         tensor ? tensor : "?", suffix, bytes);
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
                         "device budget exceeded: layer %s, tensor %s%s asks %s (%zu bytes); "
                         "%s free of %s, largest free block %s",
                         layer ? layer : "-", tensor ? tensor : "-", suffix, vdnn_fmt_bytes(size, a, sizeof a),
                         size, vdnn_fmt_bytes(p->capacity - p->used, f, sizeof f),
                         vdnn_fmt_bytes(p->capacity, c, sizeof c),
                         vdnn_fmt_bytes(largest_free(p), l, sizeof l));
    }
    if (p->cap && b->off + size > p->cap) {
        p->failures++;
        return vdnn_fail(VDNN_EBUDGET, "layer %s, tensor %s%s would end the pool's highest block at %zu bytes, over "
                         "its cap of %zu", layer ? layer : "-", tensor ? tensor : "-", suffix, b->off + size, p->cap);
    }
    vdnn_status st = take(p, b, size, offset);
    if (st == VDNN_OK && *offset + size > p->frontier_peak) p->frontier_peak = *offset + size;
    return st;
}

/* The largest free block below `key` (every node of t's left subtree is below t). */
static size_t t_max_below(const block *t, size_t key)
{
    size_t m = 0;
    while (t) {
        if (t->off < key) {
            if (t->size > m) m = t->size;
            if (max_of(t->left) > m) m = max_of(t->left);
            t = t->right;
        } else {
            t = t->left;
        }
    }
    return m;
}

static int reclaimable(const pool *p, const block *b)
{
    return b->state == BLOCK_FREE || (b->state == BLOCK_PENDING && b->ripe <= p->tick);
}

size_t pool_room(const pool *p, size_t cap)
{
    /* pool_alloc takes the lowest hole that fits, reclaiming the pending frees whose lag
     * has passed while none does, and else the free block past the last one: what it
     * could place is the largest hole with all of those reclaimed, or what is past the
     * last block up to the cap. A reclaimed block merges with its free and reclaimable
     * neighbours; a run of them that reaches the end lowers the start of the tail. */
    const block *tail = tail_block(p);
    size_t hole = t_max_below(p->free_root, tail ? tail->off : SIZE_MAX);
    size_t tail_off = tail ? tail->off : p->last ? p->last->off + p->last->size : 0;
    for (const block *b = p->qhead; b; b = b->qnext) {
        if (b->ripe > p->tick) {
            if (!p->unsorted) break;   /* the ripe ones are the queue's head */
            continue;
        }
        /* each run once, from its first reclaimable pending block: free blocks are
         * merged, so at most one lies between two that are not */
        const block *first = b, *last = b;
        if (b->prev && b->prev->state == BLOCK_PENDING && reclaimable(p, b->prev)) continue;
        if (b->prev && b->prev->state == BLOCK_FREE) {
            first = b->prev;
            if (first->prev && reclaimable(p, first->prev)) continue;
        }
        while (last->next && reclaimable(p, last->next)) last = last->next;
        if (last == p->last) {
            if (first->off < tail_off) tail_off = first->off;
        } else if (last->off + last->size - first->off > hole) {
            hole = last->off + last->size - first->off;
        }
    }
    size_t end = p->capacity;
    if (cap && cap < end) end = cap;
    size_t past = end > tail_off ? end - tail_off : 0;
    return past > hole ? past : hole;
}

void pool_set_cap(pool *p, size_t bytes)
{
    p->cap = bytes;
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
    p->key -= share(b);
    b->state = BLOCK_PENDING;
    p->key += share(b);
    b->ev = ev;
    b->seq = p->seq++;
    b->ripe = p->tick + p->lag;
    if (!p->qhead) p->unsorted = 0;
    else if (b->ripe < p->qtail->ripe) p->unsorted = 1;
    p->pending += b->size;
    b->qprev = p->qtail;
    b->qnext = NULL;
    if (p->qtail) p->qtail->qnext = b;
    else p->qhead = b;
    p->qtail = b;
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
size_t pool_pending_bytes(const pool *p) { return p->pending; }
void pool_reset_peak(pool *p) { p->peak = p->used; }
pool_marks pool_get_marks(const pool *p) { return (pool_marks){p->peak, p->live_peak, p->frontier_peak}; }

void pool_set_marks(pool *p, pool_marks m)
{
    p->peak = m.peak;
    p->live_peak = m.live_peak;
    p->frontier_peak = m.frontier_peak;
}
size_t pool_frontier_peak(const pool *p) { return p->frontier_peak; }
size_t pool_live_peak(const pool *p) { return p->live_peak; }
uint64_t pool_state_key(const pool *p)
{
    return p->key;
}

void pool_set_lag(pool *p, unsigned ticks) { p->lag = ticks; }
void pool_tick(pool *p) { p->tick++; }
