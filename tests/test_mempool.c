/* Check suite for vdnn/mempool: the budgeted asynchronous device pool, on its own.
 *
 * The pool deals in offsets and sizes only, so these tests hand it a fake event type
 * (a flag the test sets, plus counters of waits and releases) and never touch memory.
 * What matters most, and is checked everywhere: the pool never hands out bytes that
 * are live or still pending an event, it reuses a pending block only once its event is
 * done, and it releases every event it was given exactly once. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testnet.h"
#include "vdnn/mempool.h"
#include "vdnn/rng.h"
#include "vdnn/status.h"

#define U ((size_t)POOL_ALIGN) /* one allocation unit */

/* ---- a fake event type ------------------------------------------------------- */

typedef struct fake_ev {
    int id;
    int done;       /* set by the test, or by a wait */
    int waits;      /* times the pool waited on it */
    int releases;   /* times the pool released it; must end at exactly 1 */
    int done_at_release;
} fake_ev;

#define MAX_LOG 64

typedef struct fake_sync {
    int wait_log[MAX_LOG];  /* ids of the events waited on, in order */
    int nwaits;
    int nreleases;
} fake_sync;

static int fake_done(void *ctx, void *ev)
{
    (void)ctx;
    return ((fake_ev *)ev)->done;
}

static void fake_wait(void *ctx, void *ev)
{
    fake_sync *s = ctx;
    fake_ev *e = ev;
    e->waits++;
    e->done = 1;
    if (s->nwaits < MAX_LOG) s->wait_log[s->nwaits] = e->id;
    s->nwaits++;
}

static void fake_release(void *ctx, void *ev)
{
    fake_sync *s = ctx;
    fake_ev *e = ev;
    e->releases++;
    e->done_at_release = e->done;
    s->nreleases++;
}

static pool *make_pool(size_t capacity, fake_sync *fs)
{
    memset(fs, 0, sizeof *fs);
    pool_sync sync = {fs, fake_done, fake_wait, fake_release};
    pool *p = pool_create(capacity, &sync);
    ck_assert_ptr_nonnull(p);
    return p;
}

static size_t alloc_ok(pool *p, size_t bytes)
{
    size_t off = (size_t)-1;
    vdnn_status st = pool_alloc(p, bytes, "layer", "tensor", &off);
    ck_assert_msg(st == VDNN_OK, "pool_alloc(%zu) failed: %s", bytes, vdnn_errmsg());
    ck_assert_uint_eq(off % POOL_ALIGN, 0);
    return off;
}

static pool_stats stats_of(const pool *p)
{
    pool_stats s;
    pool_get_stats(p, &s);
    return s;
}

static void assert_one_free_block(const pool *p)
{
    pool_stats s = stats_of(p);
    ck_assert_uint_eq(s.free_blocks, 1);
    ck_assert_uint_eq(s.live_blocks, 0);
    ck_assert_uint_eq(s.largest_free_bytes, s.capacity_bytes);
    ck_assert_uint_eq(s.free_bytes, s.capacity_bytes);
    ck_assert_uint_eq(s.used_bytes, 0);
    ck_assert_uint_eq(s.pending_bytes, 0);
    ck_assert_double_eq(s.fragmentation, 0.0);
}

static void assert_msg_has(const char *part)
{
    const char *msg = vdnn_errmsg();
    ck_assert_msg(strstr(msg, part) != NULL, "message '%s' lacks '%s'", msg, part);
}

/* ---- alignment and capacity ------------------------------------------------- */

START_TEST(test_round)
{
    ck_assert_uint_eq(pool_round(0), 0);
    ck_assert_uint_eq(pool_round(1), U);
    ck_assert_uint_eq(pool_round(U - 1), U);
    ck_assert_uint_eq(pool_round(U), U);
    ck_assert_uint_eq(pool_round(U + 1), 2 * U);
    ck_assert_uint_eq(pool_round(1000 * U), 1000 * U);
    for (size_t b = 1; b < 5 * U; b += 37) {
        size_t r = pool_round(b);
        ck_assert_uint_eq(r % U, 0);
        ck_assert(r >= b && r - b < U);
    }
}
END_TEST

START_TEST(test_capacity_rounds_down)
{
    fake_sync fs;
    pool *p = make_pool(10 * U + 100, &fs);
    pool_stats s = stats_of(p);
    ck_assert_uint_eq(s.capacity_bytes, 10 * U);
    ck_assert_uint_eq(s.free_bytes, 10 * U);
    ck_assert_uint_eq(s.largest_free_bytes, 10 * U);
    ck_assert_uint_eq(s.free_blocks, 1);
    /* The rounded-off tail is not usable. */
    size_t off = (size_t)-1;
    ck_assert_int_eq(pool_alloc(p, 10 * U + 1, "l", "t", &off), VDNN_EBUDGET);
    ck_assert_uint_eq(alloc_ok(p, 10 * U), 0);
    pool_destroy(p);

    /* Less than one unit: a pool with nothing in it, which still fails cleanly. */
    p = make_pool(U - 1, &fs);
    s = stats_of(p);
    ck_assert_uint_eq(s.capacity_bytes, 0);
    ck_assert_uint_eq(s.free_blocks, 0);
    ck_assert_int_eq(pool_alloc(p, 1, "l", "t", &off), VDNN_EBUDGET);
    pool_destroy(p);
}
END_TEST

/* A cap fails exactly the requests that would raise the frontier past it, holes below
 * it still serve, and without the cap the same requests succeed as before. */
START_TEST(test_cap_stops_the_frontier)
{
    fake_sync fs;
    pool *p = make_pool(100 * U, &fs);
    size_t a = alloc_ok(p, 3 * U), b = alloc_ok(p, 2 * U);
    ck_assert_uint_eq(b, 3 * U);
    ck_assert_int_eq(pool_free(p, a), VDNN_OK);
    pool_set_cap(p, 6 * U);
    size_t off = (size_t)-1;
    ck_assert_int_eq(pool_alloc(p, 4 * U, "l", "t", &off), VDNN_EBUDGET);   /* 5..9: past the cap */
    ck_assert_msg(strstr(vdnn_errmsg(), "over its cap"), "%s", vdnn_errmsg());
    ck_assert_uint_eq(pool_frontier_peak(p), 5 * U);
    ck_assert_uint_eq(alloc_ok(p, 3 * U), 0);                                /* the hole below */
    ck_assert_uint_eq(alloc_ok(p, U), 5 * U);                                /* up to the cap exactly */
    ck_assert_int_eq(pool_alloc(p, 1, "l", "t", &off), VDNN_EBUDGET);
    pool_set_cap(p, 0);
    ck_assert_uint_eq(alloc_ok(p, 2 * U), 6 * U);
    ck_assert_uint_eq(pool_frontier_peak(p), 8 * U);
    pool_destroy(p);
}
END_TEST

START_TEST(test_alignment)
{
    fake_sync fs;
    pool *p = make_pool(64 * U, &fs);
    static const size_t sizes[] = {1, 7, U - 1, U, U + 1, 3 * U + 5, 100, 2 * U};
    size_t expect_used = 0, prev_end = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t off = alloc_ok(p, sizes[i]);
        /* A fresh pool fills from the bottom, each block right after the last. */
        ck_assert_uint_eq(off, prev_end);
        prev_end = off + pool_round(sizes[i]);
        expect_used += pool_round(sizes[i]);
        ck_assert_uint_eq(pool_used_bytes(p), expect_used);
    }
    pool_destroy(p);
}
END_TEST

START_TEST(test_zero_and_huge_requests)
{
    fake_sync fs;
    pool *p = make_pool(4 * U, &fs);
    /* Zero bytes still takes a unit (every tensor gets a distinct address). */
    size_t a = alloc_ok(p, 0);
    size_t b = alloc_ok(p, 0);
    ck_assert_uint_ne(a, b);
    ck_assert_uint_eq(pool_used_bytes(p), 2 * U);
    /* A size whose rounding overflows is refused, not wrapped round to a small block. */
    size_t off = 12345;
    ck_assert_int_eq(pool_alloc(p, SIZE_MAX, "l", "t", &off), VDNN_EINVAL);
    ck_assert_int_eq(pool_alloc(p, SIZE_MAX - U + 2, "l", "t", &off), VDNN_EINVAL);
    ck_assert_int_eq(pool_alloc(p, SIZE_MAX / 2, "l", "t", &off), VDNN_EBUDGET);
    ck_assert_uint_eq(pool_used_bytes(p), 2 * U);
    pool_destroy(p);
}
END_TEST

/* ---- placement and coalescing -------------------------------------------------- */

START_TEST(test_placement)
{
    fake_sync fs;
    pool *p = make_pool(12 * U, &fs);
    /* Layout: [h3:3][s][h1:1][s][h2:2][s][tail:3] with s = 1-unit separators. */
    size_t h3 = alloc_ok(p, 3 * U);
    alloc_ok(p, U);
    size_t h1 = alloc_ok(p, U);
    alloc_ok(p, U);
    size_t h2 = alloc_ok(p, 2 * U);
    alloc_ok(p, U);
    size_t tail = alloc_ok(p, 3 * U);
    ck_assert_uint_eq(pool_used_bytes(p), 12 * U);
    ck_assert_int_eq(pool_free(p, h3), VDNN_OK);
    ck_assert_int_eq(pool_free(p, h1), VDNN_OK);
    ck_assert_int_eq(pool_free(p, h2), VDNN_OK);
    ck_assert_int_eq(pool_free(p, tail), VDNN_OK);
    pool_stats s = stats_of(p);
    ck_assert_uint_eq(s.free_blocks, 4);
    ck_assert_uint_eq(s.largest_free_bytes, 3 * U);

    /* The lowest hole that fits, below the frontier... */
    ck_assert_uint_eq(alloc_ok(p, 2 * U), h3);
    ck_assert_uint_eq(alloc_ok(p, 2 * U - 10), h2);
    ck_assert_uint_eq(alloc_ok(p, U), h3 + 2 * U);
    ck_assert_uint_eq(alloc_ok(p, U), h1);
    /* ...and only then the space past it (the tail, 3 units). */
    ck_assert_uint_eq(alloc_ok(p, 2 * U), tail);
    ck_assert_uint_eq(pool_frontier_peak(p), 12 * U);
    ck_assert_uint_eq(alloc_ok(p, U), tail + 2 * U);
    s = stats_of(p);
    ck_assert_uint_eq(s.free_blocks, 0);
    ck_assert_uint_eq(s.free_bytes, 0);
    ck_assert_double_eq(s.fragmentation, 0.0);
    pool_destroy(p);
}
END_TEST

/* The choices do not depend on the capacity: the same calls give the same offsets in
 * a pool twice as large, and the frontier's high-water mark is the least capacity in
 * which they all succeed. */
START_TEST(test_capacity_independent)
{
    fake_sync fs;
    size_t offs[2][64];
    size_t frontier[2];
    for (int k = 0; k < 2; k++) {
        pool *p = make_pool((k + 1) * 256 * U, &fs);
        rng r;
        rng_seed(&r, 7);
        size_t live[64];
        int nlive = 0;
        for (int i = 0; i < 64; i++) {
            if (nlive && rng_below(&r, 3) == 0) {
                int j = (int)rng_below(&r, (uint32_t)nlive);
                ck_assert_int_eq(pool_free(p, live[j]), VDNN_OK);
                live[j] = live[--nlive];
            }
            offs[k][i] = alloc_ok(p, (1 + rng_below(&r, 3)) * U);
            live[nlive++] = offs[k][i];
        }
        frontier[k] = pool_frontier_peak(p);
        pool_destroy(p);
    }
    for (int i = 0; i < 64; i++) ck_assert_uint_eq(offs[0][i], offs[1][i]);
    ck_assert_uint_eq(frontier[0], frontier[1]);
}
END_TEST

/* Frees a, b, c (three neighbours filling the pool) in the given order. */
static void coalesce_order(int first, int second, int third)
{
    fake_sync fs;
    pool *p = make_pool(6 * U, &fs);
    size_t off[3] = {alloc_ok(p, U), alloc_ok(p, 2 * U), alloc_ok(p, 3 * U)};
    ck_assert_uint_eq(stats_of(p).free_blocks, 0);
    int order[3] = {first, second, third};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(pool_free(p, off[order[i]]), VDNN_OK);
        pool_stats s = stats_of(p);
        ck_assert_uint_eq(s.live_blocks, (size_t)(2 - i));
    }
    assert_one_free_block(p);
    /* The whole capacity is one block again. */
    ck_assert_uint_eq(alloc_ok(p, 6 * U), 0);
    pool_destroy(p);
}

START_TEST(test_coalesce_both_sides)
{
    coalesce_order(0, 2, 1);   /* the middle one last: merges with both neighbours */
    coalesce_order(0, 1, 2);   /* each merges with its left neighbour */
    coalesce_order(2, 1, 0);   /* each merges with its right neighbour */
    coalesce_order(1, 0, 2);
    coalesce_order(1, 2, 0);
    coalesce_order(2, 0, 1);
}
END_TEST

START_TEST(test_coalesce_counts)
{
    fake_sync fs;
    pool *p = make_pool(8 * U, &fs);
    size_t o[8];
    for (int i = 0; i < 8; i++) o[i] = alloc_ok(p, U);
    ck_assert_int_eq(pool_free(p, o[1]), VDNN_OK);
    ck_assert_int_eq(pool_free(p, o[3]), VDNN_OK);
    ck_assert_uint_eq(stats_of(p).free_blocks, 2);
    ck_assert_int_eq(pool_free(p, o[2]), VDNN_OK);   /* joins 1..3 */
    pool_stats s = stats_of(p);
    ck_assert_uint_eq(s.free_blocks, 1);
    ck_assert_uint_eq(s.largest_free_bytes, 3 * U);
    ck_assert_uint_eq(alloc_ok(p, 3 * U), o[1]);
    pool_destroy(p);
}
END_TEST

/* The state key names the blocks (offset, size, state), whatever the way there: the
 * same layout reached by other requests or frees in another order has the same key,
 * another layout (a block freed, pending, or placed elsewhere) another. */
START_TEST(test_state_key_follows_the_blocks)
{
    fake_sync fs, gs;
    pool *p = make_pool(16 * U, &fs), *q = make_pool(16 * U, &gs);
    const uint64_t empty = pool_state_key(p);
    ck_assert(pool_state_key(q) == empty);
    size_t a = alloc_ok(p, U), b = alloc_ok(p, 2 * U), c = alloc_ok(p, 3 * U);
    const uint64_t abc = pool_state_key(p);
    ck_assert(abc != empty);
    ck_assert_int_eq(pool_free(p, b), VDNN_OK);
    const uint64_t hole = pool_state_key(p);
    ck_assert(hole != abc && hole != empty);
    ck_assert_int_eq(pool_free(p, c), VDNN_OK);   /* merges with the hole and the tail */
    ck_assert_int_eq(pool_free(p, a), VDNN_OK);
    ck_assert(pool_state_key(p) == empty);
    /* the same blocks by another way: q takes a 3U block where b's hole is to be */
    size_t qa = alloc_ok(q, U), qx = alloc_ok(q, 3 * U);
    ck_assert(pool_state_key(q) != abc);
    ck_assert_int_eq(pool_free(q, qx), VDNN_OK);
    size_t qb = alloc_ok(q, 2 * U), qc = alloc_ok(q, 3 * U);
    ck_assert(qa == a && qb == b && qc == c);
    ck_assert(pool_state_key(q) == abc);
    /* pending is a state of its own; reclaimed, the block is free as if freed at once */
    fake_ev ev = {.id = 1};
    ck_assert_int_eq(pool_free_after(q, qb, &ev), VDNN_OK);
    ck_assert(pool_state_key(q) != abc && pool_state_key(q) != hole);
    ev.done = 1;
    pool_reclaim(q, 0);
    ck_assert(pool_state_key(q) == hole);
    /* freed in every order, the pool is one free block again */
    ck_assert_int_eq(pool_free(q, qa), VDNN_OK);
    ck_assert_int_eq(pool_free(q, qc), VDNN_OK);
    ck_assert(pool_state_key(q) == empty);
    pool_destroy(p);
    pool_destroy(q);
}
END_TEST

/* ---- bad frees ------------------------------------------------------------------ */

START_TEST(test_bad_free)
{
    fake_sync fs;
    pool *p = make_pool(8 * U, &fs);
    size_t a = alloc_ok(p, 2 * U);
    size_t b = alloc_ok(p, U);
    ck_assert_int_eq(pool_free(p, a + U), VDNN_EINVAL);      /* inside a block */
    ck_assert_msg(strstr(vdnn_errmsg(), "not allocated") != NULL, "%s", vdnn_errmsg());
    ck_assert_int_eq(pool_free(p, a + 1), VDNN_EINVAL);      /* unaligned */
    ck_assert_int_eq(pool_free(p, 3 * U), VDNN_EINVAL);      /* the free tail */
    ck_assert_int_eq(pool_free(p, 100 * U), VDNN_EINVAL);    /* past the end */
    ck_assert_int_eq(pool_free(p, SIZE_MAX), VDNN_EINVAL);
    ck_assert_uint_eq(pool_used_bytes(p), 3 * U);
    ck_assert_int_eq(pool_free(p, b), VDNN_OK);
    ck_assert_int_eq(pool_free(p, b), VDNN_EINVAL);          /* double free */
    ck_assert_int_eq(pool_free(p, a), VDNN_OK);
    ck_assert_int_eq(pool_free(p, a), VDNN_EINVAL);
    assert_one_free_block(p);

    /* A block pending an event is not live: freeing it again is an error too. */
    fake_ev e = {.id = 1};
    size_t c = alloc_ok(p, U);
    ck_assert_int_eq(pool_free_after(p, c, &e), VDNN_OK);
    ck_assert_int_eq(pool_free(p, c), VDNN_EINVAL);
    fake_ev e2 = {.id = 2};
    /* A rejected free_after still takes (and so drops) the event reference. */
    ck_assert_int_eq(pool_free_after(p, c, &e2), VDNN_EINVAL);
    ck_assert_int_eq(e2.releases, 1);
    ck_assert_int_eq(e.releases, 0);
    pool_stats s = stats_of(p);
    ck_assert_uint_eq(s.pending_bytes, U);
    ck_assert_uint_eq(s.frees, 3);
    pool_destroy(p);
    ck_assert_int_eq(e.releases, 1);

    /* An empty pool. */
    p = make_pool(0, &fs);
    ck_assert_int_eq(pool_free(p, 0), VDNN_EINVAL);
    pool_destroy(p);
    pool_destroy(NULL);
}
END_TEST

/* ---- asynchronous frees ------------------------------------------------------ */

/* The release lag: a pending free is reused only once its lag has passed, oldest first;
 * when the lag falls while blocks wait, a younger block may ripen before the queue's
 * head, and is still found behind it. */
START_TEST(test_release_lag)
{
    fake_sync fs;
    pool *p = make_pool(8 * U, &fs);
    fake_ev e[3] = {{.id = 1}, {.id = 2}, {.id = 3}};
    pool_set_lag(p, 2);
    size_t a = alloc_ok(p, U);
    ck_assert_int_eq(pool_free_after(p, a, &e[0]), VDNN_OK);
    size_t b = alloc_ok(p, U);   /* a is not ripe yet: the pool grows */
    ck_assert_uint_ne(b, a);
    pool_tick(p);
    pool_tick(p);
    ck_assert_uint_eq(alloc_ok(p, U), a);   /* ripe now: reused */
    /* lag 3 for b, then lag 0 for c: c ripens first, behind b at the head */
    pool_set_lag(p, 3);
    ck_assert_int_eq(pool_free_after(p, b, &e[1]), VDNN_OK);
    pool_set_lag(p, 0);
    size_t c = alloc_ok(p, U);
    ck_assert_int_eq(pool_free_after(p, c, &e[2]), VDNN_OK);
    ck_assert_uint_eq(alloc_ok(p, U), c);
    ck_assert_int_eq(e[1].waits, 0);
    pool_destroy(p);
    for (int k = 0; k < 3; k++) ck_assert_int_eq(e[k].releases, 1);
}
END_TEST

START_TEST(test_async_not_reused_before_done)
{
    fake_sync fs;
    pool *p = make_pool(4 * U, &fs);
    fake_ev e = {.id = 1};
    size_t a = alloc_ok(p, U);
    ck_assert_int_eq(pool_free_after(p, a, &e), VDNN_OK);
    pool_stats s = stats_of(p);
    ck_assert_uint_eq(s.pending_bytes, U);
    ck_assert_uint_eq(s.used_bytes, U);          /* pending counts as used */
    ck_assert_uint_eq(s.free_bytes, 3 * U);
    ck_assert_uint_eq(s.live_blocks, 1);

    /* No hole below the frontier: before it grows, the pool reuses a's memory, and it
     * waits for a's event first, so a block is never reused before its event is done. */
    size_t b = alloc_ok(p, U);
    ck_assert_uint_eq(b, a);
    ck_assert_int_eq(e.waits, 1);
    ck_assert_int_eq(e.releases, 1);
    ck_assert(e.done_at_release);
    s = stats_of(p);
    ck_assert_uint_eq(s.pending_bytes, 0);
    ck_assert_uint_eq(s.used_bytes, U);
    pool_destroy(p);
    ck_assert_int_eq(e.releases, 1);
    ck_assert_int_eq(fs.nreleases, 1);
}
END_TEST

/* The pool's choices never depend on whether an event happens to be complete: with the
 * newer event done and the older not, it still reclaims the oldest free first. This is
 * what makes the high-water mark and the offsets a function of the calls alone. */
START_TEST(test_async_reclaim_when_done)
{
    fake_sync fs;
    pool *p = make_pool(4 * U, &fs);
    fake_ev e1 = {.id = 1}, e2 = {.id = 2};
    size_t a = alloc_ok(p, 2 * U);
    size_t b = alloc_ok(p, 2 * U);
    ck_assert_int_eq(pool_free_after(p, a, &e1), VDNN_OK);
    ck_assert_int_eq(pool_free_after(p, b, &e2), VDNN_OK);
    e2.done = 1;
    ck_assert_uint_eq(alloc_ok(p, 2 * U), a);
    ck_assert_int_eq(fs.nwaits, 1);
    ck_assert_int_eq(fs.wait_log[0], e1.id);
    ck_assert_int_eq(e1.releases, 1);
    ck_assert_int_eq(e2.releases, 0);
    /* pool_reclaim without wait takes only what is done. */
    pool_reclaim(p, 0);
    pool_stats s = stats_of(p);
    ck_assert_uint_eq(s.pending_bytes, 0);
    ck_assert_uint_eq(s.used_bytes, 2 * U);
    ck_assert_uint_eq(s.largest_free_bytes, 2 * U);
    ck_assert_int_eq(e2.releases, 1);
    ck_assert_int_eq(fs.nwaits, 1);
    pool_destroy(p);
    ck_assert_int_eq(e1.releases, 1);
    ck_assert_int_eq(e2.releases, 1);
}
END_TEST

START_TEST(test_async_waits_oldest_first)
{
    fake_sync fs;
    pool *p = make_pool(4 * U, &fs);
    fake_ev older = {.id = 1}, newer = {.id = 2};
    size_t a = alloc_ok(p, U);
    size_t b = alloc_ok(p, U);
    alloc_ok(p, U);
    size_t d = alloc_ok(p, U);
    ck_assert_int_eq(pool_free(p, b), VDNN_OK);
    /* The older event guards the higher address: the order must come from the order of
     * the frees, not from the address order of the blocks. */
    ck_assert_int_eq(pool_free_after(p, d, &older), VDNN_OK);
    ck_assert_int_eq(pool_free_after(p, a, &newer), VDNN_OK);

    /* 2 units: d alone (1 unit) is not enough, so the pool waits for both, oldest first,
     * and a coalesces with b. */
    ck_assert_uint_eq(alloc_ok(p, 2 * U), a);
    ck_assert_int_eq(fs.nwaits, 2);
    ck_assert_int_eq(fs.wait_log[0], older.id);
    ck_assert_int_eq(fs.wait_log[1], newer.id);
    ck_assert_int_eq(older.waits, 1);
    ck_assert_int_eq(newer.waits, 1);
    ck_assert_int_eq(older.releases, 1);
    ck_assert_int_eq(newer.releases, 1);
    pool_stats s = stats_of(p);
    ck_assert_uint_eq(s.pending_bytes, 0);
    ck_assert_uint_eq(s.free_bytes, U);
    pool_destroy(p);
    ck_assert_int_eq(fs.nreleases, 2);
}
END_TEST

START_TEST(test_async_waits_only_as_needed)
{
    fake_sync fs;
    pool *p = make_pool(3 * U, &fs);
    fake_ev e[3] = {{.id = 1}, {.id = 2}, {.id = 3}};
    size_t o[3];
    for (int i = 0; i < 3; i++) o[i] = alloc_ok(p, U);
    /* Freed in the order 2, 0, 1: that is the order of age. */
    ck_assert_int_eq(pool_free_after(p, o[2], &e[0]), VDNN_OK);
    ck_assert_int_eq(pool_free_after(p, o[0], &e[1]), VDNN_OK);
    ck_assert_int_eq(pool_free_after(p, o[1], &e[2]), VDNN_OK);
    /* Reclaiming o[2] (the oldest) frees the top of the pool, which is growth, not a
     * hole: the pool reclaims the next oldest (o[0]) too and reuses that hole. */
    ck_assert_uint_eq(alloc_ok(p, U), o[0]);
    ck_assert_int_eq(fs.nwaits, 2);
    ck_assert_int_eq(fs.wait_log[0], 1);
    ck_assert_int_eq(fs.wait_log[1], 2);
    ck_assert_int_eq(e[2].waits, 0);
    ck_assert_int_eq(e[2].releases, 0);
    /* Destroy releases the one still pending, without waiting for it. */
    pool_destroy(p);
    ck_assert_int_eq(e[2].waits, 0);
    ck_assert_int_eq(e[0].releases + e[1].releases, 2);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(e[i].releases, 1);
}
END_TEST

START_TEST(test_async_wait_all)
{
    fake_sync fs;
    pool *p = make_pool(8 * U, &fs);
    fake_ev e[4] = {{.id = 1}, {.id = 2}, {.id = 3}, {.id = 4}};
    size_t o[4];
    for (int i = 0; i < 4; i++) o[i] = alloc_ok(p, 2 * U);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(pool_free_after(p, o[i], &e[i]), VDNN_OK);
    ck_assert_uint_eq(stats_of(p).pending_bytes, 8 * U);
    pool_reclaim(p, 1);
    assert_one_free_block(p);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(e[i].waits, 1);
        ck_assert_int_eq(e[i].releases, 1);
    }
    pool_destroy(p);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(e[i].releases, 1);
}
END_TEST

START_TEST(test_async_release_at_destroy)
{
    fake_sync fs;
    pool *p = make_pool(16 * U, &fs);
    fake_ev e[5] = {{.id = 1}, {.id = 2, .done = 1}, {.id = 3}, {.id = 4, .done = 1}, {.id = 5}};
    alloc_ok(p, U);   /* a live block too; destroy must not care */
    size_t o[5];
    for (int i = 0; i < 5; i++) o[i] = alloc_ok(p, U * (size_t)(i + 1) / 2 + 1);
    for (int i = 0; i < 5; i++) ck_assert_int_eq(pool_free_after(p, o[i], &e[i]), VDNN_OK);
    pool_destroy(p);
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(e[i].releases, 1);
        ck_assert_int_eq(e[i].waits, 0);
    }
    ck_assert_int_eq(fs.nreleases, 5);
}
END_TEST

/* Without a sync interface, a block freed after an event is treated as free at once
 * (there is nothing to ask); the pool must still not crash or lose bytes. */
START_TEST(test_async_without_sync)
{
    pool *p = pool_create(4 * U, NULL);
    ck_assert_ptr_nonnull(p);
    size_t off = 0;
    ck_assert_int_eq(pool_alloc(p, 4 * U, NULL, NULL, &off), VDNN_OK);
    int token = 0;
    ck_assert_int_eq(pool_free_after(p, off, &token), VDNN_OK);
    ck_assert_int_eq(pool_alloc(p, 4 * U, NULL, NULL, &off), VDNN_OK);
    ck_assert_uint_eq(off, 0);
    ck_assert_int_eq(pool_free(p, off), VDNN_OK);
    assert_one_free_block(p);
    pool_destroy(p);
}
END_TEST

/* ---- exhaustion and its message --------------------------------------------------- */

START_TEST(test_exhaustion_message)
{
    fake_sync fs;
    pool *p = make_pool(64 * U, &fs);
    /* Used: 10 + 4 units at the bottom (the 4 freed), 40 units above: free = 4 + 10 = 14
     * units in two holes, the largest 10 units. */
    size_t a = alloc_ok(p, 10 * U);
    size_t b = alloc_ok(p, 4 * U);
    alloc_ok(p, 40 * U);
    ck_assert_int_eq(pool_free(p, b), VDNN_OK);
    (void)a;
    pool_stats before = stats_of(p);
    ck_assert_uint_eq(before.free_bytes, 14 * U);
    ck_assert_uint_eq(before.largest_free_bytes, 10 * U);

    const size_t ask = 12 * U;
    size_t off = 4242;
    ck_assert_int_eq(pool_alloc(p, ask, "conv3_2", "x[7]", &off), VDNN_EBUDGET);
    ck_assert_uint_eq(off, 4242);   /* untouched on failure */
    char buf[32];
    assert_msg_has("conv3_2");
    assert_msg_has("x[7]");
    assert_msg_has(vdnn_fmt_bytes(ask, buf, sizeof buf));                /* asked */
    assert_msg_has(vdnn_fmt_bytes(14 * U, buf, sizeof buf));             /* free */
    assert_msg_has(vdnn_fmt_bytes(10 * U, buf, sizeof buf));             /* largest */
    assert_msg_has(vdnn_fmt_bytes(64 * U, buf, sizeof buf));             /* capacity */
    snprintf(buf, sizeof buf, "%zu bytes", ask);
    assert_msg_has(buf);

    /* A failure changes nothing but the failure count. */
    pool_stats after = stats_of(p);
    ck_assert_uint_eq(after.used_bytes, before.used_bytes);
    ck_assert_uint_eq(after.free_blocks, before.free_blocks);
    ck_assert_uint_eq(after.allocs, before.allocs);
    ck_assert_uint_eq(after.failures, before.failures + 1);

    /* Unnamed requests still produce a message, not a crash. */
    ck_assert_int_eq(pool_alloc(p, 100 * U, NULL, NULL, &off), VDNN_EBUDGET);
    assert_msg_has(vdnn_fmt_bytes(100 * U, buf, sizeof buf));
    ck_assert_uint_eq(stats_of(p).failures, 2);
    pool_destroy(p);
}
END_TEST

/* A failure must be reported only after every pending free has been waited for, and
 * the message must count the bytes those frees gave back. */
START_TEST(test_exhaustion_after_draining_pending)
{
    fake_sync fs;
    pool *p = make_pool(1024 * U, &fs);
    fake_ev e = {.id = 1};
    size_t a = alloc_ok(p, 512 * U);
    alloc_ok(p, 1 * U);
    ck_assert_int_eq(pool_free_after(p, a, &e), VDNN_OK);
    size_t off;
    ck_assert_int_eq(pool_alloc(p, 600 * U, "fc6", "W", &off), VDNN_EBUDGET);
    ck_assert_int_eq(e.waits, 1);
    ck_assert_int_eq(e.releases, 1);
    char buf[32];
    assert_msg_has("fc6");
    assert_msg_has(vdnn_fmt_bytes(1023 * U, buf, sizeof buf));   /* free, pending included */
    assert_msg_has(vdnn_fmt_bytes(512 * U, buf, sizeof buf));    /* largest: the old block */
    pool_stats s = stats_of(p);
    ck_assert_uint_eq(s.pending_bytes, 0);
    ck_assert_uint_eq(s.largest_free_bytes, 512 * U);
    pool_destroy(p);
    ck_assert_int_eq(e.releases, 1);
}
END_TEST

/* ---- fragmentation and peak -------------------------------------------------------- */

START_TEST(test_fragmentation_checkerboard)
{
    fake_sync fs;
    pool *p = make_pool(32 * U, &fs);
    size_t o[16];
    /* Holes of 1 unit at the even slots, 2 units at slot 6, 3 units at slot 10. */
    for (int i = 0; i < 16; i++) o[i] = alloc_ok(p, i == 6 ? 2 * U : i == 10 ? 3 * U : U);
    size_t used = pool_used_bytes(p);
    ck_assert_uint_eq(used, 19 * U);
    size_t freed = 0;
    for (int i = 0; i < 16; i += 2) {
        ck_assert_int_eq(pool_free(p, o[i]), VDNN_OK);
        freed += i == 6 ? 2 * U : i == 10 ? 3 * U : U;
    }
    pool_stats s = stats_of(p);
    /* 8 holes below plus the untouched tail (32 - 19 units) above the last block. */
    size_t tail = 32 * U - used;
    ck_assert_uint_eq(s.free_blocks, 9);
    ck_assert_uint_eq(s.free_bytes, freed + tail);
    ck_assert_uint_eq(s.largest_free_bytes, tail);   /* 13 units */
    ck_assert_double_eq(s.fragmentation, 1.0 - (double)tail / (double)(freed + tail));

    /* Fill the tail so that only the checkerboard is left. */
    size_t t = alloc_ok(p, tail);
    s = stats_of(p);
    ck_assert_uint_eq(s.free_blocks, 8);
    ck_assert_uint_eq(s.free_bytes, freed);
    ck_assert_uint_eq(s.largest_free_bytes, 3 * U);
    ck_assert_double_eq(s.fragmentation, 1.0 - (double)(3 * U) / (double)freed);
    ck_assert(s.fragmentation > 0.7);

    /* Larger than the largest hole, smaller than the free total: fails. */
    size_t off;
    ck_assert(4 * U < s.free_bytes);
    ck_assert_int_eq(pool_alloc(p, 4 * U, "l", "t", &off), VDNN_EBUDGET);
    /* Exactly the largest hole: fits, in that hole. */
    ck_assert_uint_eq(alloc_ok(p, 3 * U), o[10]);
    s = stats_of(p);
    ck_assert_uint_eq(s.largest_free_bytes, 2 * U);
    ck_assert_double_eq(s.fragmentation, 1.0 - (double)(2 * U) / (double)(freed - 3 * U));

    /* Free everything: one block, no fragmentation. */
    ck_assert_int_eq(pool_free(p, t), VDNN_OK);
    ck_assert_int_eq(pool_free(p, o[10]), VDNN_OK);
    for (int i = 1; i < 16; i += 2) ck_assert_int_eq(pool_free(p, o[i]), VDNN_OK);
    assert_one_free_block(p);
    pool_destroy(p);
}
END_TEST

START_TEST(test_fragmentation_full_pool)
{
    fake_sync fs;
    pool *p = make_pool(4 * U, &fs);
    alloc_ok(p, 4 * U);
    pool_stats s = stats_of(p);
    ck_assert_uint_eq(s.free_bytes, 0);
    ck_assert_uint_eq(s.largest_free_bytes, 0);
    ck_assert_double_eq(s.fragmentation, 0.0);   /* defined as 0, not NaN */
    pool_destroy(p);
}
END_TEST

START_TEST(test_peak)
{
    fake_sync fs;
    pool *p = make_pool(100 * U, &fs);
    ck_assert_uint_eq(pool_peak_bytes(p), 0);
    size_t a = alloc_ok(p, 10 * U);
    size_t b = alloc_ok(p, 30 * U);
    ck_assert_uint_eq(pool_peak_bytes(p), 40 * U);
    ck_assert_int_eq(pool_free(p, b), VDNN_OK);
    ck_assert_uint_eq(pool_peak_bytes(p), 40 * U);   /* a high-water mark stays */
    ck_assert_uint_eq(pool_used_bytes(p), 10 * U);
    size_t c = alloc_ok(p, 20 * U);
    ck_assert_uint_eq(pool_peak_bytes(p), 40 * U);
    ck_assert_uint_eq(stats_of(p).peak_bytes, 40 * U);

    /* Reset: the peak restarts from what is in use now. */
    pool_reset_peak(p);
    ck_assert_uint_eq(pool_peak_bytes(p), 30 * U);
    ck_assert_int_eq(pool_free(p, c), VDNN_OK);
    ck_assert_uint_eq(pool_peak_bytes(p), 30 * U);
    alloc_ok(p, 5 * U);
    ck_assert_uint_eq(pool_peak_bytes(p), 30 * U);
    alloc_ok(p, 25 * U);
    ck_assert_uint_eq(pool_peak_bytes(p), 40 * U);

    /* Pending bytes count toward the peak until reclaimed; a request with no hole below
     * the frontier reclaims them (here: waits for a) before it grows the frontier. */
    fake_ev e = {.id = 1};
    ck_assert_int_eq(pool_free_after(p, a, &e), VDNN_OK);
    pool_reset_peak(p);
    ck_assert_uint_eq(pool_peak_bytes(p), 40 * U);
    ck_assert_uint_eq(alloc_ok(p, 5 * U), a);
    ck_assert_int_eq(e.waits, 1);
    ck_assert_uint_eq(pool_peak_bytes(p), 40 * U);

    /* A failed request does not move the peak. */
    size_t off;
    ck_assert_int_eq(pool_alloc(p, 90 * U, "l", "t", &off), VDNN_EBUDGET);
    ck_assert_uint_eq(pool_peak_bytes(p), 40 * U);
    ck_assert_int_eq(e.releases, 1);   /* drained while trying */
    pool_destroy(p);
    ck_assert_int_eq(e.releases, 1);
}
END_TEST

START_TEST(test_stats_counters)
{
    fake_sync fs;
    pool *p = make_pool(8 * U, &fs);
    fake_ev e = {.id = 1, .done = 1};
    size_t a = alloc_ok(p, U);
    size_t b = alloc_ok(p, U);
    ck_assert_int_eq(pool_free(p, a), VDNN_OK);
    ck_assert_int_eq(pool_free_after(p, b, &e), VDNN_OK);
    ck_assert_int_eq(pool_free(p, a), VDNN_EINVAL);
    size_t off;
    ck_assert_int_eq(pool_alloc(p, 9 * U, "l", "t", &off), VDNN_EBUDGET);
    pool_stats s = stats_of(p);
    ck_assert_uint_eq(s.allocs, 2);
    ck_assert_uint_eq(s.frees, 2);
    ck_assert_uint_eq(s.failures, 1);
    ck_assert_uint_eq(s.capacity_bytes, 8 * U);
    pool_destroy(p);
}
END_TEST

/* ---- randomized stress against a reference model ---------------------------------- */

/* Check's ck_assert records every passing assertion through a pipe, which would make
 * thousands of operations checked after each step take seconds; these only call into
 * Check when they fail. */
#define REQUIRE_MSG(cond, ...)                      \
    do {                                            \
        if (!(cond)) ck_abort_msg(__VA_ARGS__);     \
    } while (0)
#define REQUIRE(cond) REQUIRE_MSG(cond, "assertion '%s' failed", #cond)
#define REQUIRE_EQ(a, b)                                                                   \
    do {                                                                                   \
        unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b);     \
        if (a_ != b_) ck_abort_msg("%s == %s failed: %llu != %llu", #a, #b, a_, b_);        \
    } while (0)

#define STRESS_OPS 4000
#define STRESS_MAX_LIVE 256

typedef struct ref_block {
    size_t off, size;
    fake_ev *ev;   /* NULL: live; else pending until the pool releases ev */
} ref_block;

typedef struct ref_model {
    ref_block b[STRESS_MAX_LIVE];
    int n;
} ref_model;

static int cmp_off(const void *x, const void *y)
{
    const ref_block *a = x, *b = y;
    return a->off < b->off ? -1 : a->off > b->off;
}

/* Drops pending blocks whose events the pool has released: it may only have done so
 * once the event was done. */
static void model_sync_releases(ref_model *m)
{
    for (int i = 0; i < m->n;) {
        fake_ev *e = m->b[i].ev;
        if (e && e->releases) {
            REQUIRE_EQ(e->releases, 1);
            REQUIRE_MSG(e->done_at_release, "event %d released before it was done", e->id);
            m->b[i] = m->b[--m->n];
        } else {
            i++;
        }
    }
}

/* Every block the model knows is in use (live or pending) is disjoint from every other
 * and inside the pool; the pool's accounting matches; the free space between them is
 * fully coalesced (one free block per gap), so largest_free and free_blocks follow. */
static void model_check(const pool *p, ref_model *m, size_t capacity)
{
    ref_block sorted[STRESS_MAX_LIVE];
    memcpy(sorted, m->b, (size_t)m->n * sizeof sorted[0]);
    qsort(sorted, (size_t)m->n, sizeof sorted[0], cmp_off);
    size_t used = 0, pending = 0, end = 0, largest = 0, gaps = 0;
    for (int i = 0; i < m->n; i++) {
        REQUIRE_EQ(sorted[i].off % POOL_ALIGN, 0);
        REQUIRE_MSG(sorted[i].off >= end, "blocks overlap at offset %zu", sorted[i].off);
        if (sorted[i].off > end) {
            gaps++;
            if (sorted[i].off - end > largest) largest = sorted[i].off - end;
        }
        end = sorted[i].off + sorted[i].size;
        used += sorted[i].size;
        if (sorted[i].ev) pending += sorted[i].size;
    }
    REQUIRE(end <= capacity);
    if (end < capacity) {
        gaps++;
        if (capacity - end > largest) largest = capacity - end;
    }
    pool_stats s = stats_of(p);
    REQUIRE_EQ(s.used_bytes, used);
    REQUIRE_EQ(s.pending_bytes, pending);
    REQUIRE_EQ(s.free_bytes, capacity - used);
    REQUIRE_EQ(s.live_blocks, (size_t)m->n);
    REQUIRE_EQ(s.free_blocks, gaps);
    REQUIRE_EQ(s.largest_free_bytes, largest);
    REQUIRE(s.peak_bytes >= s.used_bytes);
    REQUIRE(s.peak_bytes <= capacity);
}

/* The offset first fit must give a request of `size` bytes: the lowest gap between the
 * model's blocks (live or pending) that holds it, below the highest block; 0 and
 * *found unset when there is none (the pool then reclaims or grows). */
static size_t model_first_fit(const ref_model *m, size_t size, int *found)
{
    ref_block sorted[STRESS_MAX_LIVE];
    memcpy(sorted, m->b, (size_t)m->n * sizeof sorted[0]);
    qsort(sorted, (size_t)m->n, sizeof sorted[0], cmp_off);
    size_t end = 0;
    *found = 0;
    for (int i = 0; i < m->n; i++) {
        if (sorted[i].off - end >= size) {
            *found = 1;
            return end;
        }
        end = sorted[i].off + sorted[i].size;
    }
    return 0;
}

static void stress(uint64_t seed)
{
    const size_t capacity = 4096 * U;   /* 1 MiB */
    static fake_ev events[STRESS_OPS];
    memset(events, 0, sizeof events);
    int nev = 0;
    fake_sync fs;
    pool *p = make_pool(capacity, &fs);
    ref_model m = {.n = 0};
    rng r;
    rng_seed(&r, seed);
    size_t last_peak = 0;
    int fails = 0, waited_allocs = 0, first_fits = 0;

    for (int op = 0; op < STRESS_OPS; op++) {
        uint32_t what = rng_below(&r, 100);
        if (what < 50 && m.n < STRESS_MAX_LIVE) {
            /* Sizes from a few bytes to an eighth of the pool, most of them small. */
            size_t bytes = rng_below(&r, 4) == 0 ? 1 + rng_below(&r, (uint32_t)(capacity / 8))
                                                 : 1 + rng_below(&r, (uint32_t)(16 * U));
            size_t off = 0;
            int waits_before = fs.nwaits, hole = 0;
            size_t expect = model_first_fit(&m, pool_round(bytes), &hole);
            vdnn_status st = pool_alloc(p, bytes, "stress", "t", &off);
            /* a hole below the frontier is taken first: the lowest that fits */
            if (hole) {
                REQUIRE_EQ(st, VDNN_OK);
                REQUIRE_EQ(off, expect);
                REQUIRE_EQ(fs.nwaits, waits_before);
                first_fits++;
            }
            model_sync_releases(&m);
            if (st == VDNN_OK) {
                REQUIRE(m.n < STRESS_MAX_LIVE);
                m.b[m.n++] = (ref_block){off, pool_round(bytes), NULL};
                if (fs.nwaits > waits_before) waited_allocs++;
            } else {
                REQUIRE_EQ(st, VDNN_EBUDGET);
                fails++;
                /* The pool gave up only after draining every pending free, and really has
                 * no hole large enough. */
                pool_stats s = stats_of(p);
                REQUIRE_EQ(s.pending_bytes, 0);
                REQUIRE(s.largest_free_bytes < pool_round(bytes));
            }
        } else if (what < 85) {
            /* Free a random live block, synchronously or after a fresh event. */
            int live[STRESS_MAX_LIVE], nlive = 0;
            for (int i = 0; i < m.n; i++)
                if (!m.b[i].ev) live[nlive++] = i;
            if (nlive) {
                int i = live[rng_below(&r, (uint32_t)nlive)];
                if (rng_below(&r, 2)) {
                    REQUIRE_EQ(pool_free(p, m.b[i].off), VDNN_OK);
                    m.b[i] = m.b[--m.n];
                } else {
                    fake_ev *e = &events[nev];
                    e->id = nev++;
                    e->done = rng_below(&r, 4) == 0;
                    REQUIRE_EQ(pool_free_after(p, m.b[i].off, e), VDNN_OK);
                    m.b[i].ev = e;
                }
            }
        } else if (what < 97) {
            /* Some pending event completes. */
            int pend[STRESS_MAX_LIVE], np = 0;
            for (int i = 0; i < m.n; i++)
                if (m.b[i].ev && !m.b[i].ev->done) pend[np++] = i;
            if (np) m.b[pend[rng_below(&r, (uint32_t)np)]].ev->done = 1;
        } else if (what < 98) {
            pool_reclaim(p, 0);
            model_sync_releases(&m);
        } else if (what < 99) {
            /* A double free of something pending, or of a random offset, is refused. */
            size_t off = (size_t)rng_below(&r, (uint32_t)(capacity / U)) * U;
            int live = 0;
            for (int i = 0; i < m.n; i++)
                if (m.b[i].off == off && !m.b[i].ev) live = 1;
            if (!live) REQUIRE_EQ(pool_free(p, off), VDNN_EINVAL);
        } else {
            pool_reset_peak(p);
            last_peak = pool_used_bytes(p);
        }
        model_check(p, &m, capacity);
        size_t peak = pool_peak_bytes(p);
        REQUIRE(peak >= last_peak);   /* monotonic between resets */
        last_peak = peak;
    }
    /* The mix must have exercised the interesting paths. */
    ck_assert_int_gt(nev, 100);
    ck_assert_int_gt(fails, 0);
    ck_assert_int_gt(waited_allocs, 0);
    ck_assert_int_gt(first_fits, 100);

    /* Free everything that is live, then wait for the pending: one free block. */
    for (int i = 0; i < m.n; i++)
        if (!m.b[i].ev) REQUIRE_EQ(pool_free(p, m.b[i].off), VDNN_OK);
    pool_reclaim(p, 1);
    assert_one_free_block(p);
    pool_destroy(p);
    for (int i = 0; i < nev; i++)
        REQUIRE_MSG(events[i].releases == 1, "event %d released %d times", i, events[i].releases);
    REQUIRE_EQ(fs.nreleases, nev);
}

START_TEST(test_stress)
{
    static const uint64_t seeds[] = {1, 42, 20160801, 0xdeadbeef};
    stress(seeds[_i]);
}
END_TEST

/* Destroy with blocks still pending: each event released exactly once, none waited. */
START_TEST(test_stress_destroy_pending)
{
    fake_sync fs;
    pool *p = make_pool(256 * U, &fs);
    static fake_ev events[200];
    memset(events, 0, sizeof events);
    rng r;
    rng_seed(&r, 7);
    for (int i = 0; i < 200; i++) {
        size_t off;
        events[i].id = i;
        events[i].done = rng_below(&r, 3) == 0;
        ck_assert_int_eq(pool_alloc(p, 1 + rng_below(&r, (uint32_t)U), "l", "t", &off), VDNN_OK);
        ck_assert_int_eq(pool_free_after(p, off, &events[i]), VDNN_OK);
    }
    pool_destroy(p);
    for (int i = 0; i < 200; i++) ck_assert_int_eq(events[i].releases, 1);
    ck_assert_int_eq(fs.nreleases, 200);
}
END_TEST

/* ---- pool_room ---------------------------------------------------------------- */

#define ROOM_CAPACITY (512 * U)
#define ROOM_OPS 300

/* The first `ops` steps of a random run from `seed` on a fresh pool (allocations, frees at
 * once and after events, events done, pending frees reclaimed, ticks, the release lag
 * changed, so that the queue's ripe ticks need not rise), its events in ev. */
static pool *room_run(uint64_t seed, int ops, fake_ev *ev, fake_sync *fs)
{
    pool *p = make_pool(ROOM_CAPACITY, fs);
    rng r;
    rng_seed(&r, seed);
    size_t live[128];
    int nlive = 0, nev = 0;
    for (int op = 0; op < ops; op++) {
        uint32_t what = rng_below(&r, 100);
        size_t off;
        if (what < 45 && nlive < 128) {
            size_t bytes = (1 + rng_below(&r, 12)) * U - rng_below(&r, (uint32_t)U);
            if (pool_alloc(p, bytes, "room", "t", &off) == VDNN_OK) live[nlive++] = off;
        } else if (what < 80 && nlive) {
            int j = (int)rng_below(&r, (uint32_t)nlive);
            if (rng_below(&r, 3)) {
                ev[nev] = (fake_ev){.id = nev};
                REQUIRE_EQ(pool_free_after(p, live[j], &ev[nev++]), VDNN_OK);
            } else {
                REQUIRE_EQ(pool_free(p, live[j]), VDNN_OK);
            }
            live[j] = live[--nlive];
        } else if (what < 90) {
            pool_tick(p);
        } else if (what < 94) {
            pool_set_lag(p, rng_below(&r, 4));
        } else if (what < 98 && nev) {
            ev[rng_below(&r, (uint32_t)nev)].done = 1;
        } else {
            pool_reclaim(p, 0);
        }
    }
    return p;
}

/* pool_room says exactly what a request gets: at points of random runs, under no cap and
 * caps at and above the highest block so far, a request of that many bytes is placed
 * below the cap, and one of POOL_ALIGN more is not. Among them: rooms in holes, rooms
 * that reclaiming pending frees made (the request waited), and rooms the cap set. */
START_TEST(test_room_is_what_a_request_gets)
{
    static fake_ev ev[2][ROOM_OPS];
    int holes = 0, reclaimed = 0, capped = 0, points = 0;
    for (uint64_t seed = 1; seed <= 6; seed++)
        for (int k = 5; k <= ROOM_OPS; k += 5) {
            fake_sync fs;
            pool *p = room_run(seed, k, ev[0], &fs);
            const size_t highest = pool_frontier_peak(p), cap = k % 15 == 0 ? 0 : highest + (size_t)(k % 4) * U;
            const size_t room = pool_room(p, cap), end = cap ? cap : ROOM_CAPACITY;
            pool_destroy(p);
            for (int more = 0; more < 2; more++) {
                if (!more && !room) continue;
                pool *q = room_run(seed, k, ev[1], &fs);
                const int waits = fs.nwaits;
                size_t off = 0, bytes = room + (size_t)more * U;
                pool_set_cap(q, cap);
                vdnn_status st = pool_alloc(q, bytes, "room", "request", &off);
                if (more) {
                    REQUIRE_MSG(st == VDNN_EBUDGET, "seed %llu, step %d, cap %zu: room %zu, but %zu bytes were placed at %zu",
                                (unsigned long long)seed, k, cap, room, bytes, off);
                } else {
                    REQUIRE_MSG(st == VDNN_OK && off + bytes <= end, "seed %llu, step %d, cap %zu: room %zu not placed",
                                (unsigned long long)seed, k, cap, room);
                    holes += off + bytes <= highest && off + bytes < end;
                    reclaimed += fs.nwaits > waits;
                    capped += cap && off + bytes == cap;
                    points++;
                }
                pool_destroy(q);
            }
        }
    printf("pool_room: %d points, %d rooms in holes, %d made by reclaiming, %d set by the cap\n", points, holes,
           reclaimed, capped);
    ck_assert_int_gt(holes, 20);
    ck_assert_int_gt(reclaimed, 20);
    ck_assert_int_gt(capped, 20);
}
END_TEST

static Suite *mempool_suite(void)
{
    Suite *s = suite_create("mempool");

    TCase *basic = tcase_create("basic");
    tcase_add_test(basic, test_round);
    tcase_add_test(basic, test_capacity_rounds_down);
    tcase_add_test(basic, test_alignment);
    tcase_add_test(basic, test_cap_stops_the_frontier);
    tcase_add_test(basic, test_zero_and_huge_requests);
    tcase_add_test(basic, test_placement);
    tcase_add_test(basic, test_capacity_independent);
    tcase_add_test(basic, test_coalesce_both_sides);
    tcase_add_test(basic, test_coalesce_counts);
    tcase_add_test(basic, test_state_key_follows_the_blocks);
    tcase_add_test(basic, test_bad_free);
    tcase_add_test(basic, test_stats_counters);
    suite_add_tcase(s, basic);

    TCase *async = tcase_create("async");
    tcase_add_test(async, test_async_not_reused_before_done);
    tcase_add_test(async, test_release_lag);
    tcase_add_test(async, test_async_reclaim_when_done);
    tcase_add_test(async, test_async_waits_oldest_first);
    tcase_add_test(async, test_async_waits_only_as_needed);
    tcase_add_test(async, test_async_wait_all);
    tcase_add_test(async, test_async_release_at_destroy);
    tcase_add_test(async, test_async_without_sync);
    suite_add_tcase(s, async);

    TCase *limits = tcase_create("limits");
    tcase_add_test(limits, test_exhaustion_message);
    tcase_add_test(limits, test_exhaustion_after_draining_pending);
    tcase_add_test(limits, test_fragmentation_checkerboard);
    tcase_add_test(limits, test_fragmentation_full_pool);
    tcase_add_test(limits, test_peak);
    suite_add_tcase(s, limits);

    TCase *stress_tc = tcase_create("stress");
    tcase_add_loop_test(stress_tc, test_stress, 0, 4);
    tcase_add_test(stress_tc, test_stress_destroy_pending);
    tcase_add_test(stress_tc, test_room_is_what_a_request_gets);
    suite_add_tcase(s, stress_tc);
    return s;
}

int main(void) { return tn_run_suite(mempool_suite()); }
