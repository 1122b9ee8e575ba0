/* oneDNN's convolutions on NCHW tensors (see onednn.h).
 *
 * One cache entry per (shape, pass, method, thread count) holds the convolution's
 * primitive made with every tensor's layout left to oneDNN ("any"), and for each tensor
 * whose chosen layout is not the plain one, the reorders between the two. A call places
 * the tensors oneDNN wants in its own layout in the workspace, one after the other, then
 * the scratchpad that every primitive of the call shares (they run one after another):
 *
 *   [ reordered tensors ... | scratchpad ]
 *
 * The filter pass always writes the weights' gradient into the workspace first, so that
 * it can be added into dw (a reorder with a sum post-op) as well as copied over it.
 * Both backward passes take dy first: when they want it in the same layout, the data
 * pass, which runs second, finds it already reordered at the start of the workspace. */
#include "vdnn/onednn.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef VDNN_ONEDNN

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>

/* Tensors of one primitive: two read, one written, and a bias. */
enum { ARG_MAX = 4 };
/* Alignment of every tensor placed in the workspace: one cache line. */
#define WS_ALIGN ((size_t)64)

typedef struct op_arg {
    int arg;                        /* DNNL_ARG_* */
    int out;                        /* the primitive writes it */
    int staged;                     /* it goes through the workspace (a layout of oneDNN's,
                                     * or the filter gradient, to be added) */
    dnnl_memory_desc_t user, mine;  /* the caller's NCHW layout and the primitive's */
    dnnl_primitive_t in, out_copy, out_add;   /* reorders user -> mine, mine -> user, mine += user */
    size_t off;                     /* where, in the workspace, when staged */
} op_arg;

typedef struct conv_entry {
    onednn_conv key;
    int pass, method, threads;
    int offered;
    dnnl_primitive_t prim;
    int nargs;
    op_arg args[ARG_MAX];
    dnnl_memory_desc_t scratch;     /* the largest scratchpad of the call's primitives */
    size_t scratch_bytes, scratch_off, bytes;
    struct conv_entry *next;
} conv_entry;

#define BUCKETS 64
static conv_entry *table[BUCKETS];
static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static dnnl_engine_t engine;
static dnnl_status_t engine_status = dnnl_success;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

static void make_engine(void) { engine_status = dnnl_engine_create(&engine, dnnl_cpu, 0); }

static vdnn_status dnnl_fail(dnnl_status_t s, const char *what)
{
    return vdnn_fail(s == dnnl_out_of_memory ? VDNN_ENOMEM : VDNN_EDEVICE, "oneDNN: %s failed: %s", what,
                     dnnl_status2str(s));
}

#define DNNL_TRY(call, what)                                                                          \
    do {                                                                                              \
        dnnl_status_t s_ = (call);                                                                    \
        if (s_ != dnnl_success) return dnnl_fail(s_, what);                                          \
    } while (0)

static size_t align_up(size_t b) { return (b + WS_ALIGN - 1) / WS_ALIGN * WS_ALIGN; }

static void md_init(dnnl_memory_desc_t *md, const onednn_conv *c, int which, int any)
{
    dnnl_dims_t d;
    int nd = 4;
    dnnl_format_tag_t tag = dnnl_nchw;
    if (which == 0) {   /* x, dx */
        d[0] = c->n, d[1] = c->c, d[2] = c->h, d[3] = c->w;
    } else if (which == 1) {   /* y, dy */
        d[0] = c->n, d[1] = c->oc, d[2] = c->oh, d[3] = c->ow;
    } else if (c->groups > 1) {   /* weights of a grouped convolution: (g, oc/g, c/g, kh, kw) */
        d[0] = c->groups, d[1] = c->oc / c->groups, d[2] = c->c / c->groups, d[3] = c->kh, d[4] = c->kw;
        nd = 5;
        tag = dnnl_goihw;
    } else {
        d[0] = c->oc, d[1] = c->c, d[2] = c->kh, d[3] = c->kw;
        tag = dnnl_oihw;
    }
    dnnl_memory_desc_init_by_tag(md, nd, d, dnnl_f32, any ? dnnl_format_tag_any : tag);
}

/* The convolution descriptor of one pass, every tensor in the layout oneDNN likes. */
static dnnl_status_t conv_desc(dnnl_convolution_desc_t *cd, const onednn_conv *c, int pass, int method)
{
    dnnl_memory_desc_t x, y, w, b;
    md_init(&x, c, 0, 1);
    md_init(&y, c, 1, 1);
    md_init(&w, c, 2, 1);
    dnnl_dims_t bdim = {c->oc};
    dnnl_memory_desc_init_by_tag(&b, 1, bdim, dnnl_f32, dnnl_a);
    dnnl_dims_t strides = {c->sh, c->sw}, dil = {c->dh - 1, c->dw - 1};
    dnnl_dims_t pl = {c->pt, c->pl}, pr = {c->pb, c->pr};
    dnnl_alg_kind_t alg = method == ONEDNN_WINOGRAD ? dnnl_convolution_winograd : dnnl_convolution_direct;
    if (pass == ONEDNN_FWD)
        return dnnl_dilated_convolution_forward_desc_init(cd, dnnl_forward_training, alg, &x, &w, c->bias ? &b : NULL,
                                                          &y, strides, dil, pl, pr);
    if (pass == ONEDNN_BWD_DATA)
        return dnnl_dilated_convolution_backward_data_desc_init(cd, alg, &x, &w, &y, strides, dil, pl, pr);
    return dnnl_dilated_convolution_backward_weights_desc_init(cd, alg, &x, &w, NULL, &y, strides, dil, pl, pr);
}

static dnnl_status_t user_scratch_attr(dnnl_primitive_attr_t *attr, int add)
{
    dnnl_status_t s = dnnl_primitive_attr_create(attr);
    if (s == dnnl_success) s = dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user);
    if (s == dnnl_success && add) {
        dnnl_post_ops_t po;
        s = dnnl_post_ops_create(&po);
        if (s == dnnl_success) s = dnnl_post_ops_append_sum(po, 1.0f);
        if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(*attr, po);
        dnnl_post_ops_destroy(po);
    }
    return s;
}

/* Makes the primitive of `pd` and widens e's scratchpad to the one it needs. */
static dnnl_status_t make_prim(conv_entry *e, const_dnnl_primitive_desc_t pd, dnnl_primitive_t *prim)
{
    const dnnl_memory_desc_t *sm = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t b = sm ? dnnl_memory_desc_get_size(sm) : 0;
    if (b > e->scratch_bytes) {
        e->scratch = *sm;
        e->scratch_bytes = b;
    }
    return dnnl_primitive_create(prim, pd);
}

static dnnl_status_t make_reorder(conv_entry *e, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to, int add,
                                  dnnl_primitive_t *prim)
{
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = user_scratch_attr(&attr, add);
    if (s == dnnl_success) s = dnnl_reorder_primitive_desc_create(&pd, from, engine, to, engine, attr);
    if (s == dnnl_success) s = make_prim(e, pd, prim);
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(attr);
    return s;
}

/* The primitives of e (its key set); returns dnnl_unimplemented when oneDNN has no such
 * convolution. */
static dnnl_status_t build(conv_entry *e)
{
    const onednn_conv *c = &e->key;
    dnnl_convolution_desc_t cd, fd;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL, hint = NULL;
    dnnl_status_t s = conv_desc(&cd, c, e->pass, e->method);
    if (s == dnnl_success) s = user_scratch_attr(&attr, 0);
    if (s == dnnl_success && e->pass != ONEDNN_FWD) {
        s = conv_desc(&fd, c, ONEDNN_FWD, e->method);
        if (s == dnnl_success) s = dnnl_primitive_desc_create(&hint, &fd, NULL, engine, NULL);
    }
    if (s == dnnl_success) s = dnnl_primitive_desc_create(&pd, &cd, attr, engine, hint);
    /* the tensors of the pass: (argument, 0 x / 1 y / 2 w, written) */
    static const int roles[3][3][3] = {
        {{DNNL_ARG_SRC, 0, 0}, {DNNL_ARG_WEIGHTS, 2, 0}, {DNNL_ARG_DST, 1, 1}},
        {{DNNL_ARG_DIFF_DST, 1, 0}, {DNNL_ARG_WEIGHTS, 2, 0}, {DNNL_ARG_DIFF_SRC, 0, 1}},
        {{DNNL_ARG_DIFF_DST, 1, 0}, {DNNL_ARG_SRC, 0, 0}, {DNNL_ARG_DIFF_WEIGHTS, 2, 1}},
    };
    size_t off = 0;
    for (int k = 0; k < 3 && s == dnnl_success; k++) {
        op_arg *a = &e->args[e->nargs++];
        a->arg = roles[e->pass][k][0];
        a->out = roles[e->pass][k][2];
        md_init(&a->user, c, roles[e->pass][k][1], 0);
        a->mine = *dnnl_primitive_desc_query_md(pd, dnnl_query_exec_arg_md, a->arg);
        int differs = !dnnl_memory_desc_equal(&a->user, &a->mine);
        a->staged = differs || a->arg == DNNL_ARG_DIFF_WEIGHTS;
        if (!a->staged) continue;
        a->off = off;
        off += align_up(dnnl_memory_desc_get_size(&a->mine));
        if (!a->out) s = make_reorder(e, &a->user, &a->mine, 0, &a->in);
        if (s == dnnl_success && a->out) s = make_reorder(e, &a->mine, &a->user, 0, &a->out_copy);
        if (s == dnnl_success && a->arg == DNNL_ARG_DIFF_WEIGHTS) s = make_reorder(e, &a->mine, &a->user, 1, &a->out_add);
    }
    if (s == dnnl_success && c->bias && e->pass == ONEDNN_FWD) {
        op_arg *a = &e->args[e->nargs++];
        a->arg = DNNL_ARG_BIAS;
        dnnl_dims_t bdim = {c->oc};
        dnnl_memory_desc_init_by_tag(&a->user, 1, bdim, dnnl_f32, dnnl_a);
        a->mine = a->user;
    }
    if (s == dnnl_success) s = make_prim(e, pd, &e->prim);
    e->scratch_off = off;
    e->bytes = off + align_up(e->scratch_bytes);
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_desc_destroy(hint);
    dnnl_primitive_attr_destroy(attr);
    return s;
}

/* Destroys e's primitives and forgets its tensors: e then runs nothing. */
static void entry_clear(conv_entry *e)
{
    for (int k = 0; k < e->nargs; k++) {
        dnnl_primitive_destroy(e->args[k].in);
        dnnl_primitive_destroy(e->args[k].out_copy);
        dnnl_primitive_destroy(e->args[k].out_add);
    }
    dnnl_primitive_destroy(e->prim);
    memset(e->args, 0, sizeof e->args);
    e->nargs = 0;
    e->prim = NULL;
    e->bytes = 0;
}

static unsigned hash_key(const onednn_conv *c, int pass, int method, int threads)
{
    const unsigned char *p = (const unsigned char *)c;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < sizeof *c; i++) h = (h ^ p[i]) * 16777619u;
    h = (h ^ (uint32_t)pass) * 16777619u;
    h = (h ^ (uint32_t)method) * 16777619u;
    h = (h ^ (uint32_t)threads) * 16777619u;
    return h % BUCKETS;
}

/* The entry of (c, pass, method) for the calling thread's thread count, made the first
 * time it is asked for; NULL (with *st set) when oneDNN could not be set up. An entry
 * whose convolution oneDNN does not offer is kept too, as not offered. */
static conv_entry *entry_of(const onednn_conv *c, int pass, int method, vdnn_status *st)
{
    *st = VDNN_OK;
    pthread_once(&engine_once, make_engine);
    if (engine_status != dnnl_success) {
        *st = dnnl_fail(engine_status, "creating the CPU engine");
        return NULL;
    }
    const int threads = omp_get_max_threads();
    unsigned b = hash_key(c, pass, method, threads);
    pthread_mutex_lock(&table_mu);
    conv_entry *e = table[b];
    while (e && (memcmp(&e->key, c, sizeof *c) || e->pass != pass || e->method != method || e->threads != threads))
        e = e->next;
    if (!e) {
        e = calloc(1, sizeof *e);
        if (e) {
            e->key = *c;
            e->pass = pass;
            e->method = method;
            e->threads = threads;
            dnnl_status_t s = build(e);
            if (s == dnnl_success) {
                e->offered = 1;
            } else if (s != dnnl_unimplemented) {
                *st = dnnl_fail(s, "making a convolution primitive");
                entry_clear(e);
                free(e);
                e = NULL;
            } else {
                entry_clear(e);   /* kept as not offered */
            }
            if (e) {
                e->next = table[b];
                table[b] = e;
            }
        } else {
            *st = vdnn_fail(VDNN_ENOMEM, "oneDNN: out of host memory for a convolution primitive");
        }
    }
    pthread_mutex_unlock(&table_mu);
    return e;
}

int onednn_built(void) { return 1; }

void onednn_describe(char *buf, size_t len)
{
    const dnnl_version_t *v = dnnl_version();
    const char *rt = v->cpu_runtime == DNNL_RUNTIME_OMP ? " (OpenMP)"
                     : v->cpu_runtime == DNNL_RUNTIME_SEQ ? " (sequential)"
                                                           : "";
    snprintf(buf, len, "oneDNN %d.%d.%d%s", v->major, v->minor, v->patch, rt);
}

size_t onednn_conv_workspace(const onednn_conv *c, onednn_pass pass, onednn_method m)
{
    vdnn_status st;
    conv_entry *e = entry_of(c, (int)pass, (int)m, &st);
    return e && e->offered ? e->bytes : SIZE_MAX;
}

static vdnn_status exec(dnnl_primitive_t prim, dnnl_stream_t s, int nargs, const dnnl_exec_arg_t *args)
{
    DNNL_TRY(dnnl_primitive_execute(prim, s, nargs, args), "running a primitive");
    return VDNN_OK;
}

/* Runs e on the caller's tensors (ptr[k] for e->args[k]); `reordered`: its first
 * argument is already in its layout in the workspace. */
static vdnn_status run(const conv_entry *e, void *const ptr[ARG_MAX], int accumulate, int reordered, void *ws,
                       size_t ws_bytes)
{
    if (e->bytes > 0 && (!ws || ws_bytes < e->bytes))
        return vdnn_fail(VDNN_EINVAL, "oneDNN: workspace of %zu bytes given, %zu needed", ws ? ws_bytes : 0, e->bytes);
    /* oneDNN's kernels load its layouts in the workspace with aligned vector loads (an
     * AVX-512 Winograd kernel faults on a workspace aligned to 16 bytes only); the pool
     * aligns every block to POOL_ALIGN */
    if (e->bytes > 0 && (uintptr_t)ws % WS_ALIGN)
        return vdnn_fail(VDNN_EINVAL, "oneDNN: a workspace at %p, not aligned to %zu bytes", ws, WS_ALIGN);
    dnnl_memory_t user[ARG_MAX] = {0}, mine[ARG_MAX] = {0}, scratch = NULL;
    dnnl_stream_t s = NULL;
    vdnn_status st = VDNN_OK;
    dnnl_status_t ds = dnnl_stream_create(&s, engine, dnnl_stream_default_flags);
    if (ds == dnnl_success && e->scratch_bytes)
        ds = dnnl_memory_create(&scratch, &e->scratch, engine, (char *)ws + e->scratch_off);
    for (int k = 0; k < e->nargs && ds == dnnl_success; k++) {
        const op_arg *a = &e->args[k];
        ds = dnnl_memory_create(&user[k], &a->user, engine, ptr[k]);
        if (ds == dnnl_success && a->staged) ds = dnnl_memory_create(&mine[k], &a->mine, engine, (char *)ws + a->off);
    }
    if (ds != dnnl_success) st = dnnl_fail(ds, "describing a tensor");
    /* inputs into oneDNN's layouts */
    for (int k = reordered ? 1 : 0; k < e->nargs && st == VDNN_OK; k++) {
        if (!e->args[k].in) continue;
        dnnl_exec_arg_t ra[] = {{DNNL_ARG_FROM, user[k]}, {DNNL_ARG_TO, mine[k]}, {DNNL_ARG_SCRATCHPAD, scratch}};
        st = exec(e->args[k].in, s, scratch ? 3 : 2, ra);
    }
    dnnl_exec_arg_t args[ARG_MAX + 1];
    int n = 0;
    for (int k = 0; k < e->nargs; k++) args[n++] = (dnnl_exec_arg_t){e->args[k].arg, mine[k] ? mine[k] : user[k]};
    if (scratch) args[n++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, scratch};
    if (st == VDNN_OK) st = exec(e->prim, s, n, args);
    /* outputs back to NCHW, copied over or added */
    for (int k = 0; k < e->nargs && st == VDNN_OK; k++) {
        const op_arg *a = &e->args[k];
        if (!a->out || !a->staged) continue;
        dnnl_exec_arg_t ra[] = {{DNNL_ARG_FROM, mine[k]}, {DNNL_ARG_TO, user[k]}, {DNNL_ARG_SCRATCHPAD, scratch}};
        st = exec(accumulate && a->out_add ? a->out_add : a->out_copy, s, scratch ? 3 : 2, ra);
    }
    if (st == VDNN_OK && (ds = dnnl_stream_wait(s)) != dnnl_success) st = dnnl_fail(ds, "waiting for the CPU stream");
    for (int k = 0; k < e->nargs; k++) {
        dnnl_memory_destroy(user[k]);
        dnnl_memory_destroy(mine[k]);
    }
    dnnl_memory_destroy(scratch);
    dnnl_stream_destroy(s);
    return st;
}

/* The entry of a pass that is to run: NULL, with the failure set, when oneDNN could not
 * make it or does not offer it. */
static const conv_entry *runnable(const onednn_conv *c, int pass, onednn_method m, vdnn_status *st)
{
    const conv_entry *e = entry_of(c, pass, (int)m, st);
    if (e && !e->offered) {
        *st = vdnn_fail(VDNN_EDEVICE, "oneDNN offers no %s convolution of this shape", onednn_method_name(m));
        return NULL;
    }
    return e;
}

vdnn_status onednn_conv_forward(const onednn_conv *c, onednn_method m, const float *x, const float *w,
                                const float *b, float *y, void *ws, size_t ws_bytes)
{
    void *ptr[ARG_MAX] = {(void *)x, (void *)w, y, (void *)b};
    vdnn_status st;
    const conv_entry *e = runnable(c, ONEDNN_FWD, m, &st);
    return e ? run(e, ptr, 0, 0, ws, ws_bytes) : st;
}

vdnn_status onednn_conv_backward(const onednn_conv *c, int filter_m, int data_m, const float *x, const float *dy,
                                 const float *w, int accumulate, float *dw, float *dx, void *ws, size_t ws_bytes)
{
    vdnn_status st = VDNN_OK;
    const conv_entry *f = NULL, *d = NULL;
    if (filter_m >= 0 && !(f = runnable(c, ONEDNN_BWD_FILTER, (onednn_method)filter_m, &st))) return st;
    if (data_m >= 0 && !(d = runnable(c, ONEDNN_BWD_DATA, (onednn_method)data_m, &st))) return st;
    if (f) {
        void *ptr[ARG_MAX] = {(void *)dy, (void *)x, dw, NULL};
        st = run(f, ptr, accumulate, 0, ws, ws_bytes);
    }
    if (st == VDNN_OK && d) {
        void *ptr[ARG_MAX] = {(void *)dy, (void *)w, dx, NULL};
        int reordered = f && f->args[0].staged && d->args[0].staged &&
                        dnnl_memory_desc_equal(&f->args[0].mine, &d->args[0].mine);
        st = run(d, ptr, 0, reordered, ws, ws_bytes);
    }
    return st;
}

#else

int onednn_built(void) { return 0; }

void onednn_describe(char *buf, size_t len)
{
    if (len) buf[0] = '\0';
}

size_t onednn_conv_workspace(const onednn_conv *c, onednn_pass pass, onednn_method m)
{
    (void)c, (void)pass, (void)m;
    return SIZE_MAX;
}

static vdnn_status absent(void) { return vdnn_fail(VDNN_EINVAL, "this build has no oneDNN (make ONEDNN=1)"); }

vdnn_status onednn_conv_forward(const onednn_conv *c, onednn_method m, const float *x, const float *w,
                                const float *b, float *y, void *ws, size_t ws_bytes)
{
    (void)c, (void)m, (void)x, (void)w, (void)b, (void)y, (void)ws, (void)ws_bytes;
    return absent();
}

vdnn_status onednn_conv_backward(const onednn_conv *c, int filter_m, int data_m, const float *x, const float *dy,
                                 const float *w, int accumulate, float *dw, float *dx, void *ws, size_t ws_bytes)
{
    (void)c, (void)filter_m, (void)data_m, (void)x, (void)dy, (void)w, (void)accumulate, (void)dw, (void)dx, (void)ws,
        (void)ws_bytes;
    return absent();
}

#endif

const char *onednn_method_name(onednn_method m) { return m == ONEDNN_WINOGRAD ? "onednn-winograd" : "onednn"; }
