/* The ranks of a job (see comm.h): MPI point-to-point messages in a chain, every wait
 * polled against a deadline. Only the calling thread (the one that opened the job)
 * talks MPI. */
#include "vdnn/comm.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vdnn/device.h"

#ifdef VDNN_MPI
#include <mpi.h>
#endif

/* Floats (or bytes / 4) per message: large buffers go in pieces, so that a chain
 * pipelines and no message exceeds what an int counts. */
#define COMM_CHUNK ((size_t)1 << 20)

struct comm {
    int rank, size;
    int mpi;                  /* MPI_Init was called (and MPI_Finalize is owed) */
    double timeout_s;
    unsigned seq;             /* operations so far: every rank makes the same ones */
};

int comm_built(void)
{
#ifdef VDNN_MPI
    return 1;
#else
    return 0;
#endif
}

int comm_launched_size(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"};
    for (size_t k = 0; k < sizeof vars / sizeof *vars; k++) {
        const char *v = getenv(vars[k]);
        if (v && atoi(v) > 0) return atoi(v);
    }
    return 1;
}

vdnn_status comm_check_launch(int launched, int built)
{
    if (!built && launched > 1)
        return vdnn_fail(VDNN_EINVAL, "launched as %d ranks, but this vdnn was built without MPI: each rank would "
                         "train alone (install libopenmpi-dev and openmpi-bin, then rebuild with make)", launched);
    return VDNN_OK;
}

vdnn_status comm_open(double timeout_s, comm **out)
{
    *out = NULL;
    int launched = comm_launched_size();
    vdnn_status launch = comm_check_launch(launched, comm_built());
    if (launch != VDNN_OK) return launch;
    comm *c = calloc(1, sizeof *c);
    if (!c) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    c->size = 1;
    c->timeout_s = timeout_s > 0 ? timeout_s : 1e9;
#ifdef VDNN_MPI
    if (launched > 1) {
        int provided = 0;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
            free(c);
            return vdnn_fail(VDNN_EDEVICE, "MPI_Init failed: is mpirun's environment complete?");
        }
        c->mpi = 1;
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
        MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    }
#endif
    *out = c;
    return VDNN_OK;
}

void comm_close(comm *c)
{
    if (!c) return;
#ifdef VDNN_MPI
    if (c->mpi) MPI_Finalize();
#endif
    free(c);
}

void comm_abort(comm *c, int code)
{
#ifdef VDNN_MPI
    if (c && c->mpi && c->size > 1) MPI_Abort(MPI_COMM_WORLD, code);
#else
    (void)c;
    (void)code;
#endif
}

int comm_rank(const comm *c) { return c ? c->rank : 0; }
int comm_size(const comm *c) { return c ? c->size : 1; }

#ifdef VDNN_MPI
/* Two tags per operation, the same on every rank. */
static int tag_of(comm *c, int k) { return (int)(c->seq % 8000u) * 4 + k; }

static void pause_s(double s)
{
    struct timespec ts = {0, (long)(s * 1e9)};
    nanosleep(&ts, NULL);
}

/* Waits for `req` until the job's timeout; `what` and `peer` name it in the error. */
static vdnn_status timed_wait(comm *c, MPI_Request *req, const char *what, int peer)
{
    double deadline = vdnn_now_s() + c->timeout_s, nap = 2e-5;
    for (;;) {
        int done = 0;
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return vdnn_fail(VDNN_EDEVICE, "rank %d: MPI failed while %s rank %d", c->rank, what, peer);
        if (done) return VDNN_OK;
        if (vdnn_now_s() > deadline) {
            char who[32] = "the other ranks";
            if (peer >= 0) snprintf(who, sizeof who, "rank %d", peer);
            return vdnn_fail(VDNN_EDEVICE, "no answer for %.0f s while %s %s: it died or hangs (--rank-timeout sets "
                             "how long to wait)", c->timeout_s, what, who);
        }
        pause_s(nap);
        if (nap < 1e-3) nap *= 2;
    }
}

static vdnn_status send_bytes(comm *c, const void *buf, size_t bytes, int peer, int tag, MPI_Request *reqs, int *nreq)
{
    for (size_t off = 0; off < bytes || (!bytes && off == 0); off += COMM_CHUNK * 4) {
        size_t n = bytes - off < COMM_CHUNK * 4 ? bytes - off : COMM_CHUNK * 4;
        if (MPI_Isend((const char *)buf + off, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &reqs[(*nreq)++]) !=
            MPI_SUCCESS)
            return vdnn_fail(VDNN_EDEVICE, "rank %d: MPI_Isend to rank %d failed", c->rank, peer);
        if (!bytes) break;
    }
    return VDNN_OK;
}

static vdnn_status recv_bytes(comm *c, void *buf, size_t bytes, int peer, int tag, const char *what)
{
    for (size_t off = 0; off < bytes || (!bytes && off == 0); off += COMM_CHUNK * 4) {
        size_t n = bytes - off < COMM_CHUNK * 4 ? bytes - off : COMM_CHUNK * 4;
        MPI_Request req;
        if (MPI_Irecv((char *)buf + off, (int)n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &req) != MPI_SUCCESS)
            return vdnn_fail(VDNN_EDEVICE, "rank %d: MPI_Irecv from rank %d failed", c->rank, peer);
        vdnn_status st = timed_wait(c, &req, what, peer);
        if (st != VDNN_OK) return st;
        if (!bytes) break;
    }
    return VDNN_OK;
}

static vdnn_status wait_all(comm *c, MPI_Request *reqs, int n, const char *what, int peer)
{
    vdnn_status st = VDNN_OK;
    for (int k = 0; k < n && st == VDNN_OK; k++) st = timed_wait(c, &reqs[k], what, peer);
    return st;
}

/* Requests for sending `bytes` to every other rank in pieces. */
static MPI_Request *requests(size_t bytes, int peers)
{
    size_t per = bytes / (COMM_CHUNK * 4) + 1;
    return malloc(per * (size_t)(peers > 1 ? peers : 1) * sizeof(MPI_Request));
}
#endif

vdnn_status comm_bcast(comm *c, void *buf, size_t bytes, int root)
{
    if (comm_size(c) == 1) return VDNN_OK;
#ifdef VDNN_MPI
    int tag = tag_of(c, 0);
    c->seq++;
    if (c->rank != root) return recv_bytes(c, buf, bytes, root, tag, "receiving a broadcast from");
    MPI_Request *reqs = requests(bytes, c->size);
    if (!reqs) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    int nreq = 0;
    vdnn_status st = VDNN_OK;
    for (int r = 0; r < c->size && st == VDNN_OK; r++)
        if (r != root) st = send_bytes(c, buf, bytes, r, tag, reqs, &nreq);
    if (st == VDNN_OK) st = wait_all(c, reqs, nreq, "broadcasting to", -1);
    free(reqs);
    return st;
#else
    (void)buf, (void)bytes, (void)root;
    return VDNN_OK;
#endif
}

#ifdef VDNN_MPI
/* The rest of a chain sum, once this rank has folded its part into `acc` (status st):
 * the partial sum goes on to the next rank, and the last rank sends the total (tag + 1)
 * to every other. */
static vdnn_status chain_pass(comm *c, void *acc, size_t bytes, int tag, vdnn_status st)
{
    if (st != VDNN_OK) return st;
    MPI_Request *reqs = requests(bytes, c->size);
    if (!reqs) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    int nreq = 0, last = c->size - 1;
    if (c->rank < last) {
        st = send_bytes(c, acc, bytes, c->rank + 1, tag, reqs, &nreq);
        if (st == VDNN_OK) st = wait_all(c, reqs, nreq, "passing the partial sum to", c->rank + 1);
        if (st == VDNN_OK) st = recv_bytes(c, acc, bytes, last, tag + 1, "waiting for the total from");
    } else {
        for (int r = 0; r < last && st == VDNN_OK; r++) st = send_bytes(c, acc, bytes, r, tag + 1, reqs, &nreq);
        if (st == VDNN_OK) st = wait_all(c, reqs, nreq, "sending the total to", -1);
    }
    free(reqs);
    return st;
}
#endif

vdnn_status comm_fold_floats(comm *c, float *acc, size_t count,
                             vdnn_status (*fold)(void *ctx, float *acc, int first), void *ctx)
{
    if (comm_size(c) == 1) return fold(ctx, acc, 1);
#ifdef VDNN_MPI
    int tag = tag_of(c, 1);
    c->seq++;
    size_t bytes = count * sizeof *acc;
    vdnn_status st = VDNN_OK;
    if (c->rank > 0) st = recv_bytes(c, acc, bytes, c->rank - 1, tag, "waiting for the partial sum of");
    if (st == VDNN_OK) st = fold(ctx, acc, c->rank == 0);
    return chain_pass(c, acc, bytes, tag, st);
#else
    (void)count;
    return fold(ctx, acc, 1);
#endif
}

vdnn_status comm_sum_doubles(comm *c, double *acc, size_t count)
{
    if (comm_size(c) == 1) return VDNN_OK;
#ifdef VDNN_MPI
    int tag = tag_of(c, 2);
    c->seq++;
    double *mine = malloc((count ? count : 1) * sizeof *mine);
    if (!mine) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    memcpy(mine, acc, count * sizeof *acc);
    size_t bytes = count * sizeof *acc;
    vdnn_status st = VDNN_OK;
    if (c->rank > 0) {
        st = recv_bytes(c, acc, bytes, c->rank - 1, tag, "waiting for the partial sum of");
        for (size_t k = 0; k < count && st == VDNN_OK; k++) acc[k] += mine[k];
    }
    st = chain_pass(c, acc, bytes, tag, st);
    free(mine);
    return st;
#else
    (void)acc, (void)count;
    return VDNN_OK;
#endif
}

#ifdef VDNN_MPI
/* The value of `key` in "key=value" lines, into buf ("(none)" when absent). */
static void value_of(const char *text, const char *key, char *buf, size_t len)
{
    size_t k = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (!strncmp(p, key, k) && p[k] == '=') {
            size_t n = strcspn(p + k + 1, "\n");
            snprintf(buf, len, "%.*s", (int)n, p + k + 1);
            return;
        }
    }
    snprintf(buf, len, "(none)");
}

/* The first key of a or b whose values differ (its name into key), or 0. */
static int first_difference(const char *a, const char *b, char *key, size_t len)
{
    const char *texts[2] = {a, b};
    for (int t = 0; t < 2; t++)
        for (const char *p = texts[t]; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
            size_t n = strcspn(p, "=\n");
            snprintf(key, len, "%.*s", (int)n, p);
            char va[256], vb[256];
            value_of(a, key, va, sizeof va);
            value_of(b, key, vb, sizeof vb);
            if (strcmp(va, vb)) return 1;
        }
    return 0;
}
#endif

vdnn_status comm_check_same(comm *c, const char *text)
{
    if (comm_size(c) == 1) return VDNN_OK;
#ifdef VDNN_MPI
    enum { TEXT_MAX = 16384, VERDICT_MAX = 1024 };
    char mine[TEXT_MAX], verdict[VERDICT_MAX] = "";
    snprintf(mine, sizeof mine, "%s", text);
    int tag = tag_of(c, 3);
    c->seq++;
    vdnn_status st = VDNN_OK;
    if (c->rank == 0) {
        char *other = malloc(TEXT_MAX);
        if (!other) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
        for (int r = 1; r < c->size && st == VDNN_OK && !verdict[0]; r++) {
            st = recv_bytes(c, other, TEXT_MAX, r, tag, "waiting for the settings of");
            char key[128], va[256], vb[256];
            if (st == VDNN_OK && first_difference(mine, other, key, sizeof key)) {
                value_of(mine, key, va, sizeof va);
                value_of(other, key, vb, sizeof vb);
                snprintf(verdict, sizeof verdict, "rank %d runs with %s = %s, rank 0 with %s = %s: every rank must "
                         "run the same config and flags", r, key, vb, key, va);
            }
        }
        free(other);
    } else {
        MPI_Request req;
        int n = 0;
        st = send_bytes(c, mine, TEXT_MAX, 0, tag, &req, &n);
        if (st == VDNN_OK) st = timed_wait(c, &req, "sending its settings to", 0);
    }
    if (st == VDNN_OK) st = comm_bcast(c, verdict, sizeof verdict, 0);
    if (st == VDNN_OK && verdict[0]) st = vdnn_fail(VDNN_EINVAL, "%s", verdict);
    return st;
#else
    (void)text;
    return VDNN_OK;
#endif
}
