/* Checkpoint writing and reading (see checkpoint.h and docs/checkpoint.md). */
#include "nets/checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "vdnn/file.h"

#define CKPT_HEADER_BYTES 40u   /* step, epoch, index, seed (u64), batch, ntensors (u32) */
#define CKPT_DTYPE_F32 0u
#define CKPT_DTYPE_I32 1u
/* (layers, 3) int32: each pass's convolution algorithm, as an index into the algorithm
 * table of the code the run computed with: "plan.algorithms" for the host's (the name since
 * version 1), CKPT_ALGOS ".cuda" for cuDNN's. A table of another kind is skipped on
 * loading: its indices name another device's algorithms. */
#define CKPT_ALGOS "plan.algorithms"

/* A growing byte buffer that the whole file is assembled in. */
typedef struct buf {
    unsigned char *p;
    size_t len, cap;
    int oom;
} buf;

static void put(buf *b, const void *src, size_t n)
{
    if (b->oom) return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void put_u32(buf *b, uint32_t v)
{
    unsigned char c[4] = {v, v >> 8, v >> 16, v >> 24};
    put(b, c, 4);
}

static void put_u64(buf *b, uint64_t v)
{
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}

typedef struct tensor_ref {
    char name[80];
    const param *p;
    float *dev;          /* value or momentum on the device, or NULL when swapped */
    float *host;         /* the host master copy of a swapped layer's tensor, or NULL */
} tensor_ref;

/* Every tensor of the net in file order: layer by layer, each param then its momentum. */
static int list_tensors(const net *n, tensor_ref *out, int max)
{
    int k = 0;
    for (int i = 0; i < n->nlayers; i++) {
        const layer *l = n->layers[i];
        for (int j = 0; j < l->nparams; j++) {
            const param *p = &l->params[j];
            if (k < max) out[k] = (tensor_ref){"", p, p->value, p->host_value};
            if (k < max) snprintf(out[k].name, sizeof out[k].name, "%s.%s", l->name, p->name);
            k++;
            if (!p->trainable) continue;
            if (k < max) out[k] = (tensor_ref){"", p, p->momentum, p->host_momentum};
            if (k < max) snprintf(out[k].name, sizeof out[k].name, "%s.%s.momentum", l->name, p->name);
            k++;
        }
    }
    return k;
}

static vdnn_status list_all(const net *n, tensor_ref **out, int *count)
{
    int k = list_tensors(n, NULL, 0);
    *out = calloc((size_t)k + 1, sizeof **out);
    if (!*out) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    *count = list_tensors(n, *out, k);
    return VDNN_OK;
}

static vdnn_status put_tensor(net *n, buf *b, const tensor_ref *t, float *host)
{
    shape4 s = t->p->shape;
    size_t bytes = shape_count(s) * sizeof(float);
    put_u32(b, (uint32_t)strlen(t->name));
    put(b, t->name, strlen(t->name));
    put_u32(b, CKPT_DTYPE_F32);
    put_u32(b, 4);
    put_u32(b, (uint32_t)s.n);
    put_u32(b, (uint32_t)s.c);
    put_u32(b, (uint32_t)s.h);
    put_u32(b, (uint32_t)s.w);
    put_u64(b, bytes);
    vdnn_status st = VDNN_OK;
    if (t->host) memcpy(host, t->host, bytes);
    else st = device_download(n->dev, host, t->dev, bytes);
    if (st != VDNN_OK) return st;
    size_t count = shape_count(s);
    for (size_t i = 0; i < count; i++) {
        uint32_t v;
        memcpy(&v, &host[i], 4);
        put_u32(b, v);
    }
    return VDNN_OK;
}

static const char *algos_record(const net *n)
{
    return n->dev && device_get_code(n->dev) == DEVICE_CODE_CUDA ? CKPT_ALGOS ".cuda" : CKPT_ALGOS;
}

/* The algorithms in use: with --algo perf they come from timing, so a resumed run must
 * take them from here to continue bit for bit. */
static void put_algos(const net *n, buf *b)
{
    const char *name = algos_record(n);
    put_u32(b, (uint32_t)strlen(name));
    put(b, name, strlen(name));
    put_u32(b, CKPT_DTYPE_I32);
    put_u32(b, 2);
    put_u32(b, (uint32_t)n->nlayers);
    put_u32(b, PASS_COUNT);
    put_u64(b, (uint64_t)n->nlayers * PASS_COUNT * 4);
    for (int i = 0; i < n->nlayers; i++)
        for (int p = 0; p < PASS_COUNT; p++) put_u32(b, (uint32_t)n->layers[i]->algo[p]);
}

vdnn_status checkpoint_save(net *n, const char *path, const ckpt_state *s)
{
    tensor_ref *t = NULL;
    int count = 0;
    vdnn_status st = net_check_drawn(n, path);
    if (st == VDNN_OK) st = list_all(n, &t, &count);
    if (st != VDNN_OK) return st;
    size_t max_count = 0;
    for (int i = 0; i < count; i++)
        if (shape_count(t[i].p->shape) > max_count) max_count = shape_count(t[i].p->shape);
    float *host = malloc((max_count ? max_count : 1) * sizeof *host);
    buf b = {0};
    if (!host) st = vdnn_fail(VDNN_ENOMEM, "out of host memory saving %s", path);
    put(&b, CKPT_MAGIC, 8);
    put_u32(&b, CKPT_VERSION);
    put_u32(&b, CKPT_HEADER_BYTES);
    put_u64(&b, s->step);
    put_u64(&b, s->epoch);
    put_u64(&b, s->index);
    put_u64(&b, s->seed);
    put_u32(&b, s->batch ? s->batch : (uint32_t)n->minibatch);
    put_u32(&b, (uint32_t)count + 1);
    for (int i = 0; i < count && st == VDNN_OK; i++) st = put_tensor(n, &b, &t[i], host);
    put_algos(n, &b);
    if (st == VDNN_OK) put_u32(&b, (uint32_t)crc32_z(0L, b.p, b.len));
    if (st == VDNN_OK && b.oom) st = vdnn_fail(VDNN_ENOMEM, "out of host memory saving %s", path);
    if (st == VDNN_OK) st = vdnn_file_replace(path, "checkpoint", b.p, b.len);
    free(b.p);
    free(host);
    free(t);
    return st;
}

/* ---- reading ---- */

typedef struct reader {
    const unsigned char *p;
    size_t len, pos;
    const char *path;
    int lenient;              /* --init: tensors of other names or shapes are skipped */
    uint32_t (*file_dims)[4]; /* lenient: per net tensor, the file's shape where it differs */
} reader;

static vdnn_status need(reader *r, size_t n, const char *what)
{
    if (n > r->len - r->pos)
        return vdnn_fail(VDNN_EFORMAT, "%s: truncated checkpoint: %s needs %zu bytes at offset %zu, the file has %zu",
                         r->path, what, n, r->pos, r->len);
    return VDNN_OK;
}

static uint32_t get_u32(reader *r)
{
    const unsigned char *c = r->p + r->pos;
    r->pos += 4;
    return (uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 | (uint32_t)c[3] << 24;
}

static uint64_t get_u64(reader *r)
{
    uint64_t lo = get_u32(r);
    return lo | (uint64_t)get_u32(r) << 32;
}

/* The most bytes a file is read: twice what a checkpoint of this net can hold (the
 * header, every tensor record, an algorithm table of each kind of device and the CRC),
 * and 1 MiB more, so that the checkpoint of a somewhat larger net is still read and
 * the message names the tensor that differs. A larger file is refused unread. */
static size_t max_file_bytes(const net *n, const tensor_ref *t, int count)
{
    size_t bytes = 16 + CKPT_HEADER_BYTES + 4;
    for (int i = 0; i < count; i++)
        bytes += 4 + strlen(t[i].name) + 4 + 4 + 4 * 4 + 8 + shape_count(t[i].p->shape) * sizeof(float);
    size_t table = 4 + sizeof CKPT_ALGOS ".cuda" + 4 + 4 + 2 * 4 + 8 + (size_t)n->nlayers * PASS_COUNT * 4;
    return 2 * (bytes + 2 * table) + ((size_t)1 << 20);
}

static vdnn_status read_header(reader *r, const net *n, ckpt_state *s, uint32_t *ntensors)
{
    vdnn_status st = need(r, 16, "the header");
    if (st != VDNN_OK) return st;
    if (memcmp(r->p, CKPT_MAGIC, 8) != 0)
        return vdnn_fail(VDNN_EFORMAT, "%s: not a vdnn checkpoint (bad magic)", r->path);
    r->pos = 8;
    uint32_t version = get_u32(r), hbytes = get_u32(r);
    if (version != CKPT_VERSION)
        return vdnn_fail(VDNN_EFORMAT, "%s: checkpoint version %u, this vdnn reads version %u", r->path, version,
                         CKPT_VERSION);
    if (hbytes != CKPT_HEADER_BYTES)
        return vdnn_fail(VDNN_EFORMAT, "%s: header of %u bytes, expected %u", r->path, hbytes, CKPT_HEADER_BYTES);
    if ((st = need(r, hbytes + 4, "the header")) != VDNN_OK) return st;
    uint32_t crc_stored = (uint32_t)r->p[r->len - 4] | (uint32_t)r->p[r->len - 3] << 8 |
                 (uint32_t)r->p[r->len - 2] << 16 | (uint32_t)r->p[r->len - 1] << 24;
    if ((uint32_t)crc32_z(0L, r->p, r->len - 4) != crc_stored)
        return vdnn_fail(VDNN_EFORMAT, "%s: checksum mismatch: the checkpoint is corrupt or truncated", r->path);
    s->step = get_u64(r);
    s->epoch = get_u64(r);
    s->index = get_u64(r);
    s->seed = get_u64(r);
    s->batch = get_u32(r);
    *ntensors = get_u32(r);
    (void)n;
    r->len -= 4;   /* the CRC is not part of the tensor table */
    return VDNN_OK;
}

static const tensor_ref *find_ref(const tensor_ref *t, int count, const char *name)
{
    for (int i = 0; i < count; i++)
        if (!strcmp(t[i].name, name)) return &t[i];
    return NULL;
}

/* Parses one record; on success *ref is the matching tensor (or NULL to skip) and
 * *data points at its little-endian floats. */
static vdnn_status read_algos(reader *r, const net *n, const char *name, uint32_t dtype, uint32_t ndim,
                              const uint32_t *dims, uint64_t bytes, const unsigned char **algos)
{
    if (dtype != CKPT_DTYPE_I32 || ndim != 2 || dims[0] != (uint32_t)n->nlayers || dims[1] != PASS_COUNT ||
        bytes != (uint64_t)n->nlayers * PASS_COUNT * 4)
        return vdnn_fail(VDNN_EFORMAT, "%s: %s is not a (%d, %d) int32 table (a checkpoint of another config?)",
                         r->path, name, n->nlayers, PASS_COUNT);
    if (strcmp(name, algos_record(n))) {   /* another kind of device's algorithms */
        r->pos += bytes;
        return VDNN_OK;
    }
    *algos = r->p + r->pos;
    for (int i = 0; i < n->nlayers; i++)
        for (int p = 0; p < PASS_COUNT; p++) {
            const unsigned char *c = *algos + 4 * (i * PASS_COUNT + p);
            uint32_t a = (uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 | (uint32_t)c[3] << 24;
            if (a >= (uint32_t)layer_algo_count(n->layers[i], p))
                return vdnn_fail(VDNN_EFORMAT, "%s: %s names algorithm %u for %s, which has %d", r->path, name, a,
                                 n->layers[i]->name, layer_algo_count(n->layers[i], p));
        }
    r->pos += bytes;
    return VDNN_OK;
}

static vdnn_status read_record(reader *r, const net *n, const tensor_ref *t, int count, const tensor_ref **ref,
                               const unsigned char **data, const unsigned char **algos)
{
    vdnn_status st = need(r, 4, "a tensor name length");
    if (st != VDNN_OK) return st;
    uint32_t nlen = get_u32(r);
    if (nlen == 0 || nlen >= 80) return vdnn_fail(VDNN_EFORMAT, "%s: bad tensor name length %u at offset %zu", r->path, nlen, r->pos - 4);
    if ((st = need(r, nlen + 8, "a tensor name")) != VDNN_OK) return st;
    char name[80];
    memcpy(name, r->p + r->pos, nlen);
    name[nlen] = 0;
    r->pos += nlen;
    uint32_t dtype = get_u32(r), ndim = get_u32(r);
    if (ndim > 8) return vdnn_fail(VDNN_EFORMAT, "%s: tensor %s has %u dimensions", r->path, name, ndim);
    if ((st = need(r, 4 * ndim + 8, "a tensor shape")) != VDNN_OK) return st;
    uint32_t dims[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    for (uint32_t d = 0; d < ndim; d++) dims[d] = get_u32(r);
    uint64_t bytes = get_u64(r);
    if ((st = need(r, bytes, name)) != VDNN_OK) return st;
    *ref = NULL;
    int is_algos = !strcmp(name, CKPT_ALGOS) || !strcmp(name, CKPT_ALGOS ".cuda");
    if (is_algos && r->lenient) {   /* another net's algorithms, or not wanted */
        r->pos += bytes;
        return VDNN_OK;
    }
    if (is_algos) return read_algos(r, n, name, dtype, ndim, dims, bytes, algos);
    if (dtype != CKPT_DTYPE_F32) return vdnn_fail(VDNN_EFORMAT, "%s: tensor %s has dtype %u (only 0 = float32)", r->path, name, dtype);
    *ref = find_ref(t, count, name);
    if (!*ref && r->lenient) {
        r->pos += bytes;
        return VDNN_OK;
    }
    if (!*ref) return vdnn_fail(VDNN_EFORMAT, "%s: tensor %s is not in this net (a checkpoint of another config?)", r->path, name);
    shape4 s = (*ref)->p->shape;
    if (ndim != 4 || dims[0] != (uint32_t)s.n || dims[1] != (uint32_t)s.c || dims[2] != (uint32_t)s.h ||
        dims[3] != (uint32_t)s.w || bytes != shape_count(s) * sizeof(float)) {
        if (r->lenient) {
            memcpy(r->file_dims[*ref - t], dims, sizeof r->file_dims[0]);
            *ref = NULL;
            r->pos += bytes;
            return VDNN_OK;
        }
        return vdnn_fail(VDNN_EFORMAT, "%s: tensor %s has shape %ux%ux%ux%u in the file, %dx%dx%dx%d in the net",
                         r->path, name, dims[0], dims[1], dims[2], dims[3], s.n, s.c, s.h, s.w);
    }
    *data = r->p + r->pos;
    r->pos += bytes;
    return VDNN_OK;
}

/* A checkpoint file read and matched against the net: per net tensor (file order of
 * list_all), its floats in the file or NULL. */
typedef struct loaded {
    tensor_ref *t;
    int count;
    unsigned char *data;
    const unsigned char **found;
    uint32_t (*file_dims)[4];   /* lenient: the file's shape of a tensor whose shape differs */
    const unsigned char *algos;
    ckpt_state state;
} loaded;

static void loaded_free(loaded *ld)
{
    free(ld->found);
    free(ld->file_dims);
    free(ld->t);
    free(ld->data);
}

/* Reads and checks the whole file; with `lenient`, tensors the net lacks or has in
 * another shape are skipped (their shapes noted) instead of refused. */
static vdnn_status read_file(net *n, const char *path, int lenient, loaded *ld)
{
    memset(ld, 0, sizeof *ld);
    size_t len = 0;
    vdnn_status st = list_all(n, &ld->t, &ld->count);
    if (st == VDNN_OK)
        st = vdnn_file_read(path, "checkpoint", max_file_bytes(n, ld->t, ld->count), 0, (char **)&ld->data, &len);
    if (st == VDNN_EFORMAT) {   /* over the size limit */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", vdnn_errmsg());
        st = vdnn_fail(st, "%s of this net (a checkpoint of a larger net?)", msg);
    }
    reader r = {ld->data, len, 0, path, lenient, NULL};
    uint32_t ntensors = 0;
    if (st == VDNN_OK) st = read_header(&r, n, &ld->state, &ntensors);
    if (st == VDNN_OK && (!(ld->found = calloc((size_t)ld->count + 1, sizeof *ld->found)) ||
                          !(ld->file_dims = calloc((size_t)ld->count + 1, sizeof *ld->file_dims))))
        st = vdnn_fail(VDNN_ENOMEM, "out of host memory");
    r.file_dims = ld->file_dims;
    for (uint32_t i = 0; i < ntensors && st == VDNN_OK; i++) {
        const tensor_ref *ref = NULL;
        const unsigned char *p = NULL;
        st = read_record(&r, n, ld->t, ld->count, &ref, &p, &ld->algos);
        if (st == VDNN_OK && ref) ld->found[ref - ld->t] = p;
    }
    if (st == VDNN_OK && r.pos != r.len)
        st = vdnn_fail(VDNN_EFORMAT, "%s: %zu unexpected bytes after the last tensor", path, r.len - r.pos);
    return st;
}

/* Uploads every tensor found (momenta too, unless values_only). */
static vdnn_status upload_found(net *n, const loaded *ld, int values_only)
{
    vdnn_status st = VDNN_OK;
    for (int i = 0; i < ld->count && st == VDNN_OK; i++) {
        if (!ld->found[i] || (values_only && strstr(ld->t[i].name, ".momentum"))) continue;
        size_t cnt = shape_count(ld->t[i].p->shape);
        float *h = malloc(cnt * sizeof *h);
        if (!h) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
        for (size_t k = 0; k < cnt; k++) {
            const unsigned char *c = ld->found[i] + 4 * k;
            uint32_t v = (uint32_t)c[0] | (uint32_t)c[1] << 8 | (uint32_t)c[2] << 16 | (uint32_t)c[3] << 24;
            memcpy(&h[k], &v, 4);
        }
        if (ld->t[i].host) memcpy(ld->t[i].host, h, cnt * sizeof *h);
        else st = device_upload(n->dev, ld->t[i].dev, h, cnt * sizeof *h);
        free(h);
    }
    return st;
}

vdnn_status checkpoint_load(net *n, const char *path, ckpt_state *s, int weights_only)
{
    loaded ld;
    vdnn_status st = read_file(n, path, 0, &ld);
    for (int i = 0; i < ld.count && st == VDNN_OK; i++) {
        int is_momentum = strstr(ld.t[i].name, ".momentum") != NULL;
        if (!ld.found[i] && !(weights_only && is_momentum))
            st = vdnn_fail(VDNN_EFORMAT, "%s: tensor %s is missing", path, ld.t[i].name);
    }
    if (st == VDNN_OK) st = upload_found(n, &ld, 0);
    for (int i = 0; i < n->nlayers && st == VDNN_OK && ld.algos && !weights_only; i++)
        for (int p = 0; p < PASS_COUNT; p++)
            n->layers[i]->algo[p] = (int)((uint32_t)ld.algos[4 * (i * PASS_COUNT + p)] |
                                          (uint32_t)ld.algos[4 * (i * PASS_COUNT + p) + 1] << 8);
    if (st == VDNN_OK && s) *s = ld.state;
    loaded_free(&ld);
    return st;
}

/* Appends "name (why)" to the report of fresh tensors. */
static void note_fresh(char *buf, size_t len, size_t *k, const tensor_ref *t, const uint32_t *dims)
{
    shape4 s = t->p->shape;
    int w;
    if (dims[0])
        w = snprintf(buf + *k, len - *k, "%s%s (%dx%dx%dx%d here, %ux%ux%ux%u in the file)", *k ? ", " : "", t->name,
                     s.n, s.c, s.h, s.w, dims[0], dims[1], dims[2], dims[3]);
    else
        w = snprintf(buf + *k, len - *k, "%s%s (not in the file)", *k ? ", " : "", t->name);
    if (w > 0) *k = *k + (size_t)w < len ? *k + (size_t)w : len - 1;
}

vdnn_status checkpoint_init(net *n, const char *path, ckpt_init_report *rep)
{
    loaded ld;
    memset(rep, 0, sizeof *rep);
    vdnn_status st = read_file(n, path, 1, &ld);
    size_t k = 0;
    for (int i = 0; i < ld.count && st == VDNN_OK; i++) {
        if (strstr(ld.t[i].name, ".momentum")) continue;
        rep->total++;
        if (ld.found[i]) rep->kept++;
        else note_fresh(rep->fresh, sizeof rep->fresh, &k, &ld.t[i], ld.file_dims[i]);
    }
    if (st == VDNN_OK && !rep->kept)
        st = vdnn_fail(VDNN_EFORMAT, "%s: no tensor of this net is in the checkpoint by name and shape "
                       "(a checkpoint of another net?): %s", path, rep->fresh);
    if (st == VDNN_OK) st = upload_found(n, &ld, 1);
    loaded_free(&ld);
    return st;
}
