/* ONNX import (onnx/import.h): the graph walked in its (topological) order, each node
 * turned into a vdnn layer, an alias of a map, a constant, or a refusal. */
#include "onnx/import.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdnn/hash.h"

/* The most nodes, values and layers one model may have here. */
#define IMPORT_MAX_NODES 1000000

enum { V_CONST = 1, V_MAP = 2 };

/* A graph value: a constant tensor or a vdnn map, with the shape ONNX gives it. The
 * table grows as nodes add values: a value's address holds only until the next one. */
typedef struct value {
    const char *name;
    int kind;
    int rank;
    int64_t dims[ONNX_MAX_RANK];
    const Onnx__TensorProto *t;   /* V_CONST */
    int map;                      /* V_MAP: -1 the net's input, else a layer's index */
    int uses;                     /* nodes that read it, and 1 more for the graph's output */
    int direct;                   /* V_MAP: the layer's own output, not a reshaped alias of it */
} value;

/* A layer being written. */
typedef struct lay {
    const char *type;             /* its section */
    char name[LAYER_NAME_MAX];
    const char *node, *op;        /* the ONNX node it came from */
    char keys[768];               /* its own "key = value" lines */
    int nin;
    int in[LAYER_MAX_INPUTS];     /* maps: -1 the input, else layers */
    int c, h, w;                  /* its output, per item */
    int biased;                   /* a convolution or connected layer: has a bias */
    int may_fold;                 /* a bias Add may still fold into it */
} lay;

/* A string -> index table (open addressing). */
typedef struct strmap {
    const char **key;
    int *val;
    size_t cap, count;
    int owns;                     /* the keys are copies, freed with the table */
} strmap;

typedef struct ctx {
    const Onnx__ModelProto *m;
    const Onnx__GraphProto *g;
    const onnx_import_opts *o;
    onnx_import *r;
    const char *src;
    int64_t opset;
    value *v;
    int nv, vcap;
    strmap vals, names;
    strmap suffix;                /* a name stem -> the next _N suffix to try */
    strmap uses;                  /* how many node inputs name each value */
    const char *output;           /* the graph's output */
    lay *L;
    int nl, lcap;
    int pcap;                     /* room in r->params */
    int N, in_c, in_h, in_w;
    const Onnx__NodeProto *node;
} ctx;

static uint64_t hash_str(const char *s)
{
    return vdnn_hash_str(VDNN_HASH_START, s);
}

static int *map_slot(const strmap *t, const char *k)
{
    if (!t->cap) return NULL;
    for (size_t i = hash_str(k) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        if (!t->key[i]) return NULL;
        if (!strcmp(t->key[i], k)) return &t->val[i];
    }
}

static int map_get(const strmap *t, const char *k)
{
    if (!t->cap) return -1;
    for (size_t i = hash_str(k) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        if (!t->key[i]) return -1;
        if (!strcmp(t->key[i], k)) return t->val[i];
    }
}

static vdnn_status map_put(strmap *t, const char *k, int val)
{
    if (2 * (t->count + 1) > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 64;
        const char **key = calloc(cap, sizeof *key);
        int *vals = calloc(cap, sizeof *vals);
        if (!key || !vals) {
            free(key);
            free(vals);
            return vdnn_fail(VDNN_ENOMEM, "out of memory for a table of %zu names", cap);
        }
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->key[i]) continue;
            size_t j = hash_str(t->key[i]) & (cap - 1);
            while (key[j]) j = (j + 1) & (cap - 1);
            key[j] = t->key[i];
            vals[j] = t->val[i];
        }
        free(t->key);
        free(t->val);
        t->key = key;
        t->val = vals;
        t->cap = cap;
    }
    if (t->owns && !(k = strdup(k))) return vdnn_fail(VDNN_ENOMEM, "out of memory for a name");
    size_t i = hash_str(k) & (t->cap - 1);
    while (t->key[i]) i = (i + 1) & (t->cap - 1);
    t->key[i] = k;
    t->val[i] = val;
    t->count++;
    return VDNN_OK;
}

static void map_free(strmap *t)
{
    for (size_t i = 0; t->owns && i < t->cap; i++) free((char *)t->key[i]);
    free(t->key);
    free(t->val);
}

/* An error about the current node: refused (valid ONNX that vdnn does not run) or broken. */
static vdnn_status node_error(ctx *x, int refused, const char *fmt, va_list ap)
{
    char why[512];
    vsnprintf(why, sizeof why, fmt, ap);
    x->r->refused = refused;
    if (!x->node) return vdnn_fail(refused ? VDNN_EINVAL : VDNN_EFORMAT, "%s: %s", x->src, why);
    return vdnn_fail(refused ? VDNN_EINVAL : VDNN_EFORMAT, "%s: node '%s' (%s): %s", x->src,
                     onnx_name(x->node->name), onnx_name(x->node->op_type), why);
}

__attribute__((format(printf, 2, 3))) static vdnn_status refuse(ctx *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vdnn_status st = node_error(x, 1, fmt, ap);
    va_end(ap);
    return st;
}

__attribute__((format(printf, 2, 3))) static vdnn_status broken(ctx *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vdnn_status st = node_error(x, 0, fmt, ap);
    va_end(ap);
    return st;
}

static vdnn_status keyf(lay *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static vdnn_status keyf(lay *l, const char *fmt, ...)
{
    size_t at = strlen(l->keys);
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(l->keys + at, sizeof l->keys - at, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof l->keys - at)
        return vdnn_fail(VDNN_EINVAL, "layer %s: its keys take more than %zu characters", l->name, sizeof l->keys);
    return VDNN_OK;
}

/* ---- values ---- */

static value *val(ctx *x, const char *name)
{
    int i = map_get(&x->vals, name);
    return i < 0 ? NULL : &x->v[i];
}

static vdnn_status add_value(ctx *x, const char *name, value **out)
{
    if (!name || !*name) return broken(x, "a value without a name");
    if (map_get(&x->vals, name) >= 0)
        return broken(x, "value '%s' is given twice (two nodes, inputs or initializers of one name)", name);
    if (x->nv == x->vcap) {
        int cap = x->vcap ? 2 * x->vcap : 64;
        value *v = realloc(x->v, (size_t)cap * sizeof *v);
        if (!v) return vdnn_fail(VDNN_ENOMEM, "out of memory for %d values", cap);
        x->v = v;
        x->vcap = cap;
    }
    value *v = &x->v[x->nv];
    memset(v, 0, sizeof *v);
    v->name = name;
    int uses = map_get(&x->uses, name);
    v->uses = (uses > 0 ? uses : 0) + (x->output && !strcmp(name, x->output));
    vdnn_status st = map_put(&x->vals, name, x->nv);
    if (st != VDNN_OK) return st;
    x->nv++;
    *out = v;
    return VDNN_OK;
}

/* Input k of the current node: NULL when absent or empty (an optional input left out). */
static const char *in_name(const ctx *x, size_t k)
{
    return k < x->node->n_input && x->node->input[k] && *x->node->input[k] ? x->node->input[k] : NULL;
}

static vdnn_status input(ctx *x, size_t k, value **out)
{
    const char *name = in_name(x, k);
    *out = NULL;
    if (!name) return broken(x, "input %zu is missing", k);
    value *v = val(x, name);
    if (!v)
        return broken(x, "reads '%s', which no earlier node, graph input or initializer gives (the nodes are not "
                      "in topological order, or the graph has a cycle)", name);
    *out = v;
    return VDNN_OK;
}

static vdnn_status input_map(ctx *x, size_t k, value **out)
{
    vdnn_status st = input(x, k, out);
    if (st == VDNN_OK && (*out)->kind != V_MAP)
        return refuse(x, "input %zu ('%s') is a constant: vdnn's layers read feature maps computed from the net's "
                      "input", k, (*out)->name);
    return st;
}

static vdnn_status input_const(ctx *x, size_t k, value **out)
{
    vdnn_status st = input(x, k, out);
    if (st == VDNN_OK && (*out)->kind != V_CONST)
        return refuse(x, "input %zu ('%s') is computed in the graph: vdnn takes it only as a constant "
                      "(an initializer)", k, (*out)->name);
    return st;
}

/* A constant's floats, exactly `want` of them (want < 0: any count). */
static vdnn_status const_floats(ctx *x, const value *v, int64_t want, float **data, int64_t *count)
{
    char what[160];
    snprintf(what, sizeof what, "%s: node '%s': tensor '%s'", x->src, onnx_name(x->node->name), v->name);
    int64_t c = 0;
    vdnn_status st = onnx_tensor_floats(v->t, what, data, &c);
    if (st != VDNN_OK) {
        x->r->refused = st == VDNN_EINVAL;
        return st;
    }
    if (want >= 0 && c != want) {
        free(*data);
        *data = NULL;
        return broken(x, "'%s' holds %" PRId64 " values, %" PRId64 " expected", v->name, c, want);
    }
    if (count) *count = c;
    return VDNN_OK;
}

/* One float of an optional constant scalar input k (dflt when absent). */
static vdnn_status const_scalar(ctx *x, size_t k, float dflt, float *out)
{
    *out = dflt;
    if (!in_name(x, k)) return VDNN_OK;
    value *v;
    float *d = NULL;
    vdnn_status st = input_const(x, k, &v);
    if (st == VDNN_OK) st = const_floats(x, v, 1, &d, NULL);
    if (st == VDNN_OK) *out = d[0];
    free(d);
    return st;
}

static void map_chw(const ctx *x, int map, int *c, int *h, int *w)
{
    if (map < 0) {
        *c = x->in_c, *h = x->in_h, *w = x->in_w;
    } else {
        *c = x->L[map].c, *h = x->L[map].h, *w = x->L[map].w;
    }
}

/* The value is the (N, C, H, W) map vdnn holds, unreshaped. */
static vdnn_status need_nchw(ctx *x, const value *v)
{
    int c, h, w;
    map_chw(x, v->map, &c, &h, &w);
    if (v->rank != 4)
        return refuse(x, "'%s' has %d dimensions: this operator is taken in 2-D only (N, C, H, W)", v->name, v->rank);
    if (v->dims[0] != x->N || v->dims[1] != c || v->dims[2] != h || v->dims[3] != w)
        return refuse(x, "'%s' is a reshaped map (%" PRId64 "x%" PRId64 "x%" PRId64 "x%" PRId64 " of a %dx%dx%dx%d "
                      "one): vdnn reads maps in their own layout", v->name, v->dims[0], v->dims[1], v->dims[2],
                      v->dims[3], x->N, c, h, w);
    return VDNN_OK;
}

static vdnn_status need_batch(ctx *x, const value *v)
{
    if (v->rank < 1 || v->dims[0] != x->N)
        return refuse(x, "'%s' does not keep the batch in its first dimension (%" PRId64 ", batch %d)", v->name,
                      v->rank ? v->dims[0] : 0, x->N);
    return VDNN_OK;
}

/* ---- layers and parameters ---- */

static int name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* A vdnn name for the node: its name (or output's) with other characters made _, leading
 * ones dropped, at most LAYER_NAME_MAX - 1 characters, made unique with _2, _3, ... */
static vdnn_status layer_name(ctx *x, const char *stem, char *out)
{
    char base[LAYER_NAME_MAX];
    size_t k = 0;
    int under = 0;
    for (const char *s = stem ? stem : ""; *s && k < sizeof base - 1; s++) {
        char c = name_char(*s) ? *s : '_';
        if (k == 0 && !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) continue;
        if (c == '_' && under) continue;
        under = c == '_';
        base[k++] = c;
    }
    while (k && base[k - 1] == '_') k--;
    base[k] = 0;
    if (!k) snprintf(base, sizeof base, "%s", "layer");
    snprintf(out, LAYER_NAME_MAX, "%s", base);
    /* the next suffix to try is kept per stem: many nodes of one name cost one try each */
    int next = map_get(&x->suffix, base);
    for (int i = next > 2 ? next : 2; map_get(&x->names, out) >= 0 || !strcmp(out, "data"); i++) {
        char suffix[16];
        int n = snprintf(suffix, sizeof suffix, "_%d", i);
        int keep = (int)strlen(base);
        if (keep > LAYER_NAME_MAX - 1 - n) keep = LAYER_NAME_MAX - 1 - n;
        snprintf(out, LAYER_NAME_MAX, "%.*s%s", keep, base, suffix);
        next = i + 1;
    }
    if (next > 2) {
        int *slot = map_slot(&x->suffix, base);
        if (slot) *slot = next;
        else return map_put(&x->suffix, base, next);
    }
    return VDNN_OK;
}

static vdnn_status add_layer(ctx *x, const char *type, int nin, const int *in, lay **out)
{
    if (x->nl == x->lcap) {
        int cap = x->lcap ? 2 * x->lcap : 64;
        lay *L = realloc(x->L, (size_t)cap * sizeof *L);
        if (!L) return vdnn_fail(VDNN_ENOMEM, "out of memory for %d layers", cap);
        x->L = L;
        x->lcap = cap;
    }
    lay *l = &x->L[x->nl];
    memset(l, 0, sizeof *l);
    l->type = type;
    l->node = onnx_name(x->node->name);
    l->op = onnx_name(x->node->op_type);
    const char *stem = x->node->name && *x->node->name ? x->node->name
                       : x->node->n_output && x->node->output[0] ? x->node->output[0]
                                                                 : x->node->op_type;
    vdnn_status st = layer_name(x, stem, l->name);
    if (st == VDNN_OK) st = map_put(&x->names, l->name, x->nl);
    if (st != VDNN_OK) return st;
    l->nin = nin;
    for (int k = 0; k < nin; k++) l->in[k] = in[k];
    x->nl++;
    *out = l;
    return VDNN_OK;
}

static vdnn_status add_param(ctx *x, const lay *l, const char *name, float *data, int64_t count)
{
    onnx_import *r = x->r;
    onnx_param *p = r->params;
    if (r->nparams == x->pcap) {
        int cap = x->pcap ? 2 * x->pcap : 16;
        p = realloc(r->params, (size_t)cap * sizeof *p);
        if (!p) {
            free(data);
            return vdnn_fail(VDNN_ENOMEM, "out of memory for %d parameter tensors", cap);
        }
        x->pcap = cap;
    }
    r->params = p;
    p = &r->params[r->nparams++];
    memset(p, 0, sizeof *p);
    snprintf(p->layer, sizeof p->layer, "%s", l->name);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->data = data;
    p->count = count;
    return VDNN_OK;
}

/* The node's output k becomes a value; NULL when the node leaves it out. */
static vdnn_status output(ctx *x, size_t k, value **out)
{
    *out = NULL;
    if (k >= x->node->n_output || !x->node->output[k] || !*x->node->output[k]) return VDNN_OK;
    return add_value(x, x->node->output[k], out);
}

/* Outputs beyond the first must go unread. */
static vdnn_status only_first_output(ctx *x)
{
    for (size_t k = 1; k < x->node->n_output; k++) {
        const char *name = x->node->output[k];
        if (!name || !*name) continue;
        if (map_get(&x->uses, name) > 0)
            return refuse(x, "its output %zu ('%s') is read: vdnn computes only the first", k, name);
        if (x->output && !strcmp(name, x->output))
            return refuse(x, "its output %zu ('%s') is the graph's output: vdnn computes only the first", k, name);
    }
    return VDNN_OK;
}

/* The first output as a map of layer `l`, shaped `rank` x `dims`. */
static vdnn_status out_map(ctx *x, int layer, int rank, const int64_t *dims_in)
{
    /* dims may point into the value table, which a new value moves */
    int64_t dims[ONNX_MAX_RANK];
    memcpy(dims, dims_in, (size_t)rank * sizeof *dims);
    value *v;
    vdnn_status st = only_first_output(x);
    if (st == VDNN_OK) st = output(x, 0, &v);
    if (st != VDNN_OK) return st;
    if (!v) return broken(x, "has no output");
    v->kind = V_MAP;
    v->map = layer;
    v->direct = 1;
    v->rank = rank;
    memcpy(v->dims, dims, (size_t)rank * sizeof *dims);
    return VDNN_OK;
}

/* The first output as an alias of map value `in`, reshaped. */
static vdnn_status out_alias(ctx *x, const value *in, int rank, const int64_t *dims)
{
    vdnn_status st = out_map(x, in->map, rank, dims);
    if (st == VDNN_OK) x->v[x->nv - 1].direct = 0;
    return st;
}

static vdnn_status bad_attr(ctx *x, const char *name)
{
    return broken(x, "attribute '%s' has the wrong type or too many values", name);
}

/* Every attribute of the node is one of `known` (NULL-terminated). */
static vdnn_status known_attrs(ctx *x, const char *const *known)
{
    for (size_t i = 0; i < x->node->n_attribute; i++) {
        const char *a = x->node->attribute[i] ? x->node->attribute[i]->name : NULL;
        int ok = 0;
        for (int k = 0; a && known[k]; k++) ok |= !strcmp(a, known[k]);
        if (!ok) return refuse(x, "attribute '%s' is not supported", onnx_name(a));
    }
    return VDNN_OK;
}

/* auto_pad for one axis: the padding before and after. */
static vdnn_status auto_pads(ctx *x, const char *mode, int64_t in, int64_t k, int64_t s, int64_t d, int64_t *lo,
                             int64_t *hi)
{
    if (!strcmp(mode, "VALID")) {
        *lo = *hi = 0;
        return VDNN_OK;
    }
    int64_t out = (in + s - 1) / s;
    int64_t total = (out - 1) * s + (k - 1) * d + 1 - in;
    if (total < 0) total = 0;
    if (!strcmp(mode, "SAME_UPPER")) *lo = total / 2;
    else if (!strcmp(mode, "SAME_LOWER")) *lo = total - total / 2;
    else return broken(x, "auto_pad '%s' is none of NOTSET, VALID, SAME_UPPER, SAME_LOWER", mode);
    *hi = total - *lo;
    return VDNN_OK;
}

/* Kernel, strides, pads (top, left, bottom, right) and dilations of a 2-D window. */
typedef struct window {
    int64_t k[2], s[2], p[4], d[2];
} window;

static vdnn_status window_limits(ctx *x, const window *w, int max_pad);

static vdnn_status read_window(ctx *x, const int64_t *in_hw, const int64_t *kernel, window *w)
{
    int bad = 0;
    int64_t v[8];
    for (int a = 0; a < 2; a++) w->k[a] = kernel[a], w->s[a] = 1, w->d[a] = 1, w->p[a] = w->p[a + 2] = 0;
    int n = onnx_attr_ints(x->node, "kernel_shape", v, 8, &bad);
    if (bad) return bad_attr(x, "kernel_shape");
    if (n >= 0 && (n != 2 || (kernel[0] && (v[0] != kernel[0] || v[1] != kernel[1]))))
        return n != 2 ? refuse(x, "a %d-D window: vdnn's are 2-D", n)
                      : broken(x, "kernel_shape %" PRId64 "x%" PRId64 " is not the weights' %" PRId64 "x%" PRId64,
                               v[0], v[1], kernel[0], kernel[1]);
    if (n == 2) w->k[0] = v[0], w->k[1] = v[1];
    if (w->k[0] < 1 || w->k[1] < 1) return broken(x, "no kernel_shape");
    if ((n = onnx_attr_ints(x->node, "strides", v, 8, &bad)) >= 0) {
        if (n != 2) return refuse(x, "%d strides: vdnn's windows are 2-D", n);
        w->s[0] = v[0], w->s[1] = v[1];
    }
    if ((n = onnx_attr_ints(x->node, "dilations", v, 8, &bad)) >= 0) {
        if (n != 2) return refuse(x, "%d dilations: vdnn's windows are 2-D", n);
        w->d[0] = v[0], w->d[1] = v[1];
    }
    int pads = onnx_attr_ints(x->node, "pads", v, 8, &bad);
    if (bad) return bad_attr(x, "strides, dilations or pads");
    if (pads >= 0) {
        if (pads != 4) return refuse(x, "%d pads: vdnn's windows are 2-D", pads);
        for (int i = 0; i < 4; i++) w->p[i] = v[i];
    }
    char mode[32];
    onnx_attr_string(x->node, "auto_pad", "NOTSET", mode, sizeof mode, &bad);
    if (bad) return bad_attr(x, "auto_pad");
    for (int a = 0; a < 2; a++)
        if (w->s[a] < 1 || w->d[a] < 1) return broken(x, "a stride or dilation below 1");
    /* vdnn's reach first: the padding auto_pad asks for is computed from them */
    vdnn_status lim = window_limits(x, w, INT32_MAX);
    if (lim != VDNN_OK) return lim;
    if (strcmp(mode, "NOTSET")) {
        if (pads >= 0 && strcmp(mode, "VALID")) return broken(x, "both pads and auto_pad %s", mode);
        for (int a = 0; a < 2; a++) {
            vdnn_status st = auto_pads(x, mode, in_hw[a], w->k[a], w->s[a], w->d[a], &w->p[a], &w->p[a + 2]);
            if (st != VDNN_OK) return st;
        }
    }
    for (int i = 0; i < 4; i++)
        if (w->p[i] < 0) return broken(x, "a negative pad");
    return VDNN_OK;
}

static vdnn_status window_limits(ctx *x, const window *w, int max_pad)
{
    for (int a = 0; a < 2; a++) {
        if (w->k[a] > 64) return refuse(x, "a window of %" PRId64 " (vdnn's reach 64)", w->k[a]);
        if (w->s[a] > 64) return refuse(x, "a stride of %" PRId64 " (vdnn's reach 64)", w->s[a]);
        if (w->d[a] > 64) return refuse(x, "a dilation of %" PRId64 " (vdnn's reach 64)", w->d[a]);
    }
    for (int i = 0; i < 4; i++)
        if (w->p[i] > max_pad) return refuse(x, "a pad of %" PRId64 " (vdnn's reach %d)", w->p[i], max_pad);
    return VDNN_OK;
}

/* "key = a" when both axes agree, else "key_h = a" and "key_w = b"; nothing when both are dflt. */
static vdnn_status pair_keys(lay *l, const char *key, int64_t a, int64_t b, int64_t dflt)
{
    if (a == b) return a == dflt ? VDNN_OK : keyf(l, "%s = %" PRId64 "\n", key, a);
    return keyf(l, "%s_h = %" PRId64 "\n%s_w = %" PRId64 "\n", key, a, key, b);
}

/* ---- operators ---- */

static vdnn_status op_conv(ctx *x)
{
    static const char *const known[] = {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides", NULL};
    value *in, *wv, *bv = NULL;
    vdnn_status st = known_attrs(x, known);
    if (st == VDNN_OK) st = input_map(x, 0, &in);
    if (st == VDNN_OK) st = input_const(x, 1, &wv);
    if (st == VDNN_OK && in_name(x, 2)) st = input_const(x, 2, &bv);
    if (st != VDNN_OK) return st;
    if (wv->t->n_dims != 4) return refuse(x, "weights of %zu dimensions: vdnn's convolutions are 2-D", wv->t->n_dims);
    if (in->rank != 4) return refuse(x, "an input of %d dimensions: vdnn's convolutions are 2-D", in->rank);
    if ((st = need_nchw(x, in)) != VDNN_OK) return st;
    const int64_t *wd = wv->t->dims;
    int bad = 0;
    int64_t group = onnx_attr_int(x->node, "group", 1, &bad);
    if (bad) return bad_attr(x, "group");
    int64_t ic = in->dims[1];
    if (group < 1 || group > 65536 || ic % group || wd[0] % group || wd[1] != ic / group || wd[0] < 1)
        return broken(x, "weights %" PRId64 "x%" PRId64 "x%" PRId64 "x%" PRId64 " and group %" PRId64
                      " do not fit %" PRId64 " input channels", wd[0], wd[1], wd[2], wd[3], group, ic);
    if (wd[0] > 65536) return refuse(x, "%" PRId64 " filters (vdnn's reach 65536)", wd[0]);
    window w;
    if ((st = read_window(x, in->dims + 2, wd + 2, &w)) != VDNN_OK) return st;
    if ((st = window_limits(x, &w, 64)) != VDNN_OK) return st;
    int64_t oh = 0, ow = 0;
    for (int a = 0; a < 2; a++) {
        int64_t span = in->dims[2 + a] + w.p[a] + w.p[a + 2] - ((w.k[a] - 1) * w.d[a] + 1);
        if (span < 0) return broken(x, "the window is larger than its padded input");
        *(a ? &ow : &oh) = span / w.s[a] + 1;
    }
    float *wdata = NULL, *bdata = NULL;
    int64_t wcount = wd[0] * wd[1] * wd[2] * wd[3];
    if ((st = const_floats(x, wv, wcount, &wdata, NULL)) != VDNN_OK) return st;
    if (bv && (st = const_floats(x, bv, wd[0], &bdata, NULL)) != VDNN_OK) {
        free(wdata);
        return st;
    }
    lay *l;
    int src = in->map;
    if ((st = add_layer(x, "convolutional", 1, &src, &l)) != VDNN_OK) {
        free(wdata);
        free(bdata);
        return st;
    }
    l->c = (int)wd[0], l->h = (int)oh, l->w = (int)ow;
    l->biased = bv != NULL;
    l->may_fold = !bv;
    st = keyf(l, "filters = %" PRId64 "\n", wd[0]);
    if (st == VDNN_OK) st = w.k[0] == w.k[1] ? keyf(l, "size = %" PRId64 "\n", w.k[0])
                                             : keyf(l, "size_h = %" PRId64 "\nsize_w = %" PRId64 "\n", w.k[0], w.k[1]);
    if (st == VDNN_OK) st = pair_keys(l, "stride", w.s[0], w.s[1], 1);
    if (st == VDNN_OK) {
        if (w.p[0] == w.p[1] && w.p[1] == w.p[2] && w.p[2] == w.p[3]) {
            if (w.p[0]) st = keyf(l, "pad = %" PRId64 "\n", w.p[0]);
        } else {
            st = keyf(l, "pad_top = %" PRId64 "\npad_bottom = %" PRId64 "\npad_left = %" PRId64 "\npad_right = %" PRId64
                      "\n", w.p[0], w.p[2], w.p[1], w.p[3]);
        }
    }
    if (st == VDNN_OK) st = pair_keys(l, "dilation", w.d[0], w.d[1], 1);
    if (st == VDNN_OK && group != 1) st = keyf(l, "groups = %" PRId64 "\n", group);
    if (st == VDNN_OK) st = add_param(x, l, "weights", wdata, wcount);
    else free(wdata);
    if (st == VDNN_OK && bdata) st = add_param(x, l, "bias", bdata, wd[0]);
    else if (bdata) free(bdata);
    int64_t dims[4] = {x->N, wd[0], oh, ow};
    return st == VDNN_OK ? out_map(x, x->nl - 1, 4, dims) : st;
}

static vdnn_status op_pool(ctx *x, int avg, int global)
{
    static const char *const known_max[] = {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads",
                                            "storage_order", "strides", NULL};
    static const char *const known_avg[] = {"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads",
                                            "strides", NULL};
    static const char *const none[] = {NULL};
    value *in;
    vdnn_status st = known_attrs(x, global ? none : avg ? known_avg : known_max);
    if (st == VDNN_OK) st = input_map(x, 0, &in);
    if (st == VDNN_OK && in->rank != 4) return refuse(x, "an input of %d dimensions: vdnn pools in 2-D", in->rank);
    if (st == VDNN_OK) st = need_nchw(x, in);
    if (st != VDNN_OK) return st;
    lay *l;
    int src = in->map;
    if (global) {
        if ((st = add_layer(x, avg ? "avgpool" : "maxpool", 1, &src, &l)) != VDNN_OK) return st;
        l->c = (int)in->dims[1], l->h = l->w = 1;
        int64_t dims[4] = {x->N, in->dims[1], 1, 1};
        st = keyf(l, "global = 1\n");
        return st == VDNN_OK ? out_map(x, x->nl - 1, 4, dims) : st;
    }
    int64_t none_k[2] = {0, 0};
    window w;
    if ((st = read_window(x, in->dims + 2, none_k, &w)) != VDNN_OK) return st;
    int bad = 0;
    int ceil_mode = (int)onnx_attr_int(x->node, "ceil_mode", 0, &bad);
    int count_pad = avg ? (int)onnx_attr_int(x->node, "count_include_pad", 0, &bad) : 0;
    if (bad) return bad_attr(x, "ceil_mode or count_include_pad");
    if (w.d[0] != 1 || w.d[1] != 1) return refuse(x, "dilated pooling is not supported");
    if (w.p[0] != w.p[2] || w.p[1] != w.p[3])
        return refuse(x, "uneven padding (%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "): vdnn pools with the "
                      "same padding on both sides of an axis", w.p[0], w.p[1], w.p[2], w.p[3]);
    if ((st = window_limits(x, &w, 32)) != VDNN_OK) return st;
    for (int a = 0; a < 2; a++)
        if (w.p[a] >= w.k[a])
            return refuse(x, "a pad of %" PRId64 " in a window of %" PRId64 " (vdnn pads less than the window)",
                          w.p[a], w.k[a]);
    int64_t o[2];
    for (int a = 0; a < 2; a++) {
        int64_t span = in->dims[2 + a] + 2 * w.p[a] - w.k[a];
        if (span < 0) return broken(x, "the window is larger than its padded input");
        int64_t floor_o = span / w.s[a] + 1, ceil_o = (span + w.s[a] - 1) / w.s[a] + 1;
        o[a] = ceil_mode ? ceil_o : floor_o;
        /* vdnn (as PyTorch and Caffe) drops a last window that starts in the padding
         * below; ONNX's formula keeps it: such a model is refused, not run differently */
        if (ceil_mode && (ceil_o - 1) * w.s[a] >= in->dims[2 + a] + w.p[a])
            return refuse(x, "ceil_mode's last window would start inside the padding, which ONNX keeps and vdnn "
                          "(as PyTorch) drops");
    }
    if ((st = add_layer(x, avg ? "avgpool" : "maxpool", 1, &src, &l)) != VDNN_OK) return st;
    l->c = (int)in->dims[1], l->h = (int)o[0], l->w = (int)o[1];
    st = w.k[0] == w.k[1] ? keyf(l, "size = %" PRId64 "\n", w.k[0])
                          : keyf(l, "size_h = %" PRId64 "\nsize_w = %" PRId64 "\n", w.k[0], w.k[1]);
    if (st == VDNN_OK && !(w.s[0] == w.k[0] && w.s[1] == w.k[1])) {
        st = w.s[0] == w.s[1] ? keyf(l, "stride = %" PRId64 "\n", w.s[0])
                              : keyf(l, "stride_h = %" PRId64 "\nstride_w = %" PRId64 "\n", w.s[0], w.s[1]);
    }
    if (st == VDNN_OK) st = pair_keys(l, "pad", w.p[0], w.p[1], 0);
    if (st == VDNN_OK && ceil_mode) st = keyf(l, "ceil_mode = 1\n");
    if (st == VDNN_OK && avg && !count_pad) st = keyf(l, "count_pad = 0\n");
    int64_t dims[4] = {x->N, in->dims[1], o[0], o[1]};
    return st == VDNN_OK ? out_map(x, x->nl - 1, 4, dims) : st;
}

/* Relu, LeakyRelu, Sigmoid, Tanh, Clip, Dropout: one layer over any map, same shape. */
static vdnn_status op_elementwise(ctx *x, const char *type)
{
    value *in;
    vdnn_status st = input_map(x, 0, &in);
    if (st != VDNN_OK) return st;
    int bad = 0;
    char keys[160] = "";
    const char *op = x->node->op_type;
    if (!strcmp(op, "LeakyRelu")) {
        static const char *const known[] = {"alpha", NULL};
        if ((st = known_attrs(x, known)) != VDNN_OK) return st;
        float a = onnx_attr_float(x->node, "alpha", 0.01f, &bad);
        if (bad) return bad_attr(x, "alpha");
        if (!(a >= 0 && a < 1)) return refuse(x, "alpha %g: vdnn's leaky slope lies in [0, 1)", a);
        if (a != 0.01f) snprintf(keys, sizeof keys, "slope = %.9g\n", a);
    } else if (!strcmp(op, "Clip")) {
        static const char *const known[] = {"min", "max", NULL};
        if ((st = known_attrs(x, known)) != VDNN_OK) return st;
        float lo = -FLT_MAX, hi = FLT_MAX;
        if (x->opset < 11) {
            lo = onnx_attr_float(x->node, "min", -FLT_MAX, &bad);
            hi = onnx_attr_float(x->node, "max", FLT_MAX, &bad);
            if (bad) return bad_attr(x, "min or max");
        } else {
            if ((st = const_scalar(x, 1, -FLT_MAX, &lo)) != VDNN_OK) return st;
            if ((st = const_scalar(x, 2, FLT_MAX, &hi)) != VDNN_OK) return st;
        }
        if (isnan(lo) || isnan(hi)) return refuse(x, "a bound is NaN");
        if (lo < -FLT_MAX) lo = -FLT_MAX;   /* an infinite bound is no bound */
        if (hi > FLT_MAX) hi = FLT_MAX;
        if (!(lo < hi)) return refuse(x, "min %g is not below max %g (vdnn's clip needs min < max)", lo, hi);
        if (lo == -FLT_MAX && hi == FLT_MAX) {
            int64_t dims[ONNX_MAX_RANK];
            memcpy(dims, in->dims, sizeof dims);
            return out_alias(x, in, in->rank, dims);
        }
        /* the bounds that are not [clip]'s defaults (0 and 6) */
        int k = lo != 0 ? snprintf(keys, sizeof keys, "min = %.9g\n", lo) : 0;
        if (hi != 6) snprintf(keys + k, sizeof keys - (size_t)k, "max = %.9g\n", hi);
    } else if (!strcmp(op, "Dropout")) {
        static const char *const known[] = {"ratio", "seed", NULL};
        if ((st = known_attrs(x, known)) != VDNN_OK) return st;
        float ratio = 0.5f;
        if (x->opset < 12) {
            ratio = onnx_attr_float(x->node, "ratio", 0.5f, &bad);
            if (bad) return bad_attr(x, "ratio");
        } else {
            if ((st = const_scalar(x, 1, 0.5f, &ratio)) != VDNN_OK) return st;
            if (in_name(x, 2)) {
                value *tm;
                if ((st = input_const(x, 2, &tm)) != VDNN_OK) return st;
                int64_t *b = NULL, c = 0;
                char what[160];
                snprintf(what, sizeof what, "%s: node '%s': training_mode", x->src, onnx_name(x->node->name));
                int on = 0;
                if (tm->t->has_data_type && tm->t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__BOOL) {
                    on = tm->t->has_raw_data ? tm->t->raw_data.len && tm->t->raw_data.data[0]
                                             : tm->t->n_int32_data && tm->t->int32_data[0];
                } else if (onnx_tensor_ints(tm->t, what, &b, &c) == VDNN_OK) {
                    on = c && b[0];
                } else {
                    x->r->refused = 1;
                    return vdnn_wrap(VDNN_EINVAL, "training_mode");
                }
                free(b);
                if (on) return refuse(x, "training_mode is on: an inference graph's dropout passes its input");
            }
        }
        if (!(ratio >= 0 && ratio < 1)) return refuse(x, "ratio %g: vdnn drops with a probability in [0, 1)", ratio);
        if (ratio != 0.5f) snprintf(keys, sizeof keys, "probability = %.9g\n", ratio);
    } else if (x->node->n_attribute) {
        static const char *const none[] = {NULL};
        if ((st = known_attrs(x, none)) != VDNN_OK) return st;
    }
    lay *l;
    int src = in->map;
    if ((st = add_layer(x, type, 1, &src, &l)) != VDNN_OK) return st;
    map_chw(x, in->map, &l->c, &l->h, &l->w);
    if ((st = keyf(l, "%s", keys)) != VDNN_OK) return st;
    return out_map(x, x->nl - 1, in->rank, in->dims);
}

static vdnn_status op_batchnorm(ctx *x)
{
    static const char *const known[] = {"epsilon", "momentum", "spatial", "training_mode", NULL};
    value *in, *pv[4];
    vdnn_status st = known_attrs(x, known);
    if (st == VDNN_OK) st = input_map(x, 0, &in);
    for (int k = 0; k < 4 && st == VDNN_OK; k++) st = input_const(x, 1 + (size_t)k, &pv[k]);
    if (st != VDNN_OK) return st;
    int bad = 0;
    float eps = onnx_attr_float(x->node, "epsilon", 1e-5f, &bad);
    float mom = onnx_attr_float(x->node, "momentum", 0.9f, &bad);
    int64_t train = onnx_attr_int(x->node, "training_mode", 0, &bad);
    int64_t spatial = onnx_attr_int(x->node, "spatial", 1, &bad);
    if (bad) return bad_attr(x, "epsilon, momentum, spatial or training_mode");
    if (train) return refuse(x, "training_mode is on: an inference graph's batch norm uses its running statistics");
    if (!spatial) return refuse(x, "spatial = 0 (statistics per element) is not supported");
    if (!(eps > 0 && eps <= 1)) return refuse(x, "epsilon %g: vdnn's lies in (0, 1]", eps);
    if (!(mom >= 0 && mom <= 1)) return refuse(x, "momentum %g is not in [0, 1]", mom);
    int c, h, w;
    map_chw(x, in->map, &c, &h, &w);
    int64_t rest = 1;
    for (int i = 2; i < in->rank; i++) rest *= in->dims[i];
    if (in->rank < 2 || in->dims[0] != x->N || in->dims[1] != c || rest != (int64_t)h * w)
        return refuse(x, "'%s' is not a map of %d channels per item as vdnn holds it: batch norm's channels "
                      "would differ", in->name, c);
    if ((st = only_first_output(x)) != VDNN_OK) return st;
    float *d[4] = {NULL, NULL, NULL, NULL};
    for (int k = 0; k < 4 && st == VDNN_OK; k++) st = const_floats(x, pv[k], c, &d[k], NULL);
    lay *l;
    int src = in->map;
    if (st == VDNN_OK) st = add_layer(x, "batchnorm", 1, &src, &l);
    if (st != VDNN_OK) {
        for (int k = 0; k < 4; k++) free(d[k]);
        return st;
    }
    l->c = c, l->h = h, l->w = w;
    /* vdnn's momentum weighs the batch, ONNX's the running value; six digits keep a
     * round trip exact */
    char m[32];
    snprintf(m, sizeof m, "%.6g", 1.0 - (double)mom);
    if (strcmp(m, "0.1")) st = keyf(l, "momentum = %s\n", m);
    if (st == VDNN_OK && eps != 1e-5f) st = keyf(l, "eps = %.9g\n", eps);
    static const char *const names[4] = {"gamma", "beta", "running_mean", "running_var"};
    for (int k = 0; k < 4; k++) {
        if (st == VDNN_OK) st = add_param(x, l, names[k], d[k], c);
        else free(d[k]);
    }
    return st == VDNN_OK ? out_map(x, x->nl - 1, in->rank, in->dims) : st;
}

static vdnn_status op_lrn(ctx *x)
{
    static const char *const known[] = {"alpha", "beta", "bias", "size", NULL};
    value *in;
    vdnn_status st = known_attrs(x, known);
    if (st == VDNN_OK) st = input_map(x, 0, &in);
    if (st == VDNN_OK) st = need_nchw(x, in);
    if (st != VDNN_OK) return st;
    int bad = 0;
    int64_t size = onnx_attr_int(x->node, "size", 0, &bad);
    float alpha = onnx_attr_float(x->node, "alpha", 1e-4f, &bad);
    float beta = onnx_attr_float(x->node, "beta", 0.75f, &bad);
    float bias = onnx_attr_float(x->node, "bias", 1.0f, &bad);
    if (bad) return bad_attr(x, "size, alpha, beta or bias");
    if (size < 1) return broken(x, "size %" PRId64 " (required, at least 1)", size);
    if (size % 2 == 0 || size > 31) return refuse(x, "size %" PRId64 ": vdnn's windows are odd, at most 31", size);
    if (!(alpha >= 0 && alpha <= 1e3) || !(beta >= 0 && beta <= 10) || !(bias > 0 && bias <= 1e3))
        return refuse(x, "alpha %g, beta %g, bias %g outside vdnn's ranges ([0, 1000], [0, 10], (0, 1000])", alpha,
                      beta, bias);
    lay *l;
    int src = in->map;
    if ((st = add_layer(x, "lrn", 1, &src, &l)) != VDNN_OK) return st;
    map_chw(x, in->map, &l->c, &l->h, &l->w);
    st = keyf(l, "size = %" PRId64 "\nalpha = %.9g\nbeta = %.9g\nk = %.9g\n", size, alpha, beta, bias);
    return st == VDNN_OK ? out_map(x, x->nl - 1, 4, in->dims) : st;
}

/* Gemm (transB either way) and MatMul: a fully connected layer over (N, K). */
static vdnn_status op_fc(ctx *x, int gemm)
{
    static const char *const known[] = {"alpha", "beta", "transA", "transB", NULL};
    static const char *const none[] = {NULL};
    value *in, *wv, *cv = NULL;
    vdnn_status st = known_attrs(x, gemm ? known : none);
    if (st == VDNN_OK) st = input_map(x, 0, &in);
    if (st == VDNN_OK) st = input_const(x, 1, &wv);
    if (st == VDNN_OK && gemm && in_name(x, 2)) st = input_const(x, 2, &cv);
    if (st != VDNN_OK) return st;
    int bad = 0;
    float alpha = gemm ? onnx_attr_float(x->node, "alpha", 1, &bad) : 1;
    float beta = gemm ? onnx_attr_float(x->node, "beta", 1, &bad) : 1;
    int64_t ta = gemm ? onnx_attr_int(x->node, "transA", 0, &bad) : 0;
    int64_t tb = gemm ? onnx_attr_int(x->node, "transB", 0, &bad) : 0;
    if (bad) return bad_attr(x, "alpha, beta, transA or transB");
    if (ta) return refuse(x, "transA = 1: vdnn's fully connected layers take items as rows");
    if (in->rank != 2) return refuse(x, "an input of %d dimensions: taken as (items, features) only", in->rank);
    if ((st = need_batch(x, in)) != VDNN_OK) return st;
    if (wv->t->n_dims != 2) return refuse(x, "weights of %zu dimensions", wv->t->n_dims);
    int64_t K = in->dims[1];
    int64_t M = tb ? wv->t->dims[0] : wv->t->dims[1];
    if ((tb ? wv->t->dims[1] : wv->t->dims[0]) != K || M < 1)
        return broken(x, "weights %" PRId64 "x%" PRId64 " do not fit %" PRId64 " inputs", wv->t->dims[0],
                      wv->t->dims[1], K);
    if (M > 1000000) return refuse(x, "%" PRId64 " outputs (vdnn's reach 1000000)", M);
    float *wd = NULL, *bias = NULL;
    if ((st = const_floats(x, wv, K * M, &wd, NULL)) != VDNN_OK) return st;
    float *wt = malloc((size_t)(K * M) * sizeof *wt);
    if (!wt) {
        free(wd);
        return vdnn_fail(VDNN_ENOMEM, "out of memory for %" PRId64 " weights", K * M);
    }
    for (int64_t o = 0; o < M; o++)
        for (int64_t i = 0; i < K; i++) wt[o * K + i] = alpha * (tb ? wd[o * K + i] : wd[i * M + o]);
    free(wd);
    if (cv) {
        int64_t cc = 0;
        float *cd = NULL;
        if ((st = const_floats(x, cv, -1, &cd, &cc)) != VDNN_OK) {
            free(wt);
            return st;
        }
        int per_row = cv->t->n_dims == 0 || (cv->t->n_dims == 1 && (cc == M || cc == 1)) ||
                      (cv->t->n_dims == 2 && cv->t->dims[0] == 1 && (cc == M || cc == 1));
        if (!per_row) {
            free(cd);
            free(wt);
            return refuse(x, "C of %" PRId64 " values is not one bias per output (vdnn adds the same bias to every "
                          "item)", cc);
        }
        bias = malloc((size_t)M * sizeof *bias);
        if (!bias) {
            free(cd);
            free(wt);
            return vdnn_fail(VDNN_ENOMEM, "out of memory");
        }
        for (int64_t o = 0; o < M; o++) bias[o] = beta * cd[cc == 1 ? 0 : o];
        free(cd);
    }
    lay *l;
    int src = in->map;
    if ((st = add_layer(x, "connected", 1, &src, &l)) != VDNN_OK) {
        free(wt);
        free(bias);
        return st;
    }
    l->c = (int)M, l->h = l->w = 1;
    l->biased = bias != NULL;
    l->may_fold = !bias;
    st = keyf(l, "output = %" PRId64 "\n", M);
    if (st == VDNN_OK) st = add_param(x, l, "weights", wt, K * M);
    else free(wt);
    if (st == VDNN_OK && bias) st = add_param(x, l, "bias", bias, M);
    else if (bias) free(bias);
    int64_t dims[2] = {x->N, M};
    return st == VDNN_OK ? out_map(x, x->nl - 1, 2, dims) : st;
}

/* Add of a map and a per-channel constant right after a layer without a bias: the bias. */
static vdnn_status fold_bias(ctx *x, value *m, value *cv)
{
    if (m->map < 0 || !x->L[m->map].may_fold || m->uses != 1 || !m->direct)
        return refuse(x, "adds a constant to '%s': vdnn adds constants only as the bias of the convolution or fully "
                      "connected layer right before (its output, read by nothing else)", m->name);
    lay *l = &x->L[m->map];
    int64_t C = l->c, cc = 0;
    vdnn_status st = strcmp(l->type, "connected") ? need_nchw(x, m) : VDNN_OK;
    if (st != VDNN_OK) return st;
    const Onnx__TensorProto *t = cv->t;
    /* broadcast as ONNX aligns trailing dimensions: one value per channel only */
    int ok = 0;
    if (!strcmp(l->type, "connected")) {
        ok = (t->n_dims == 1 && t->dims[0] == C) || (t->n_dims == 2 && t->dims[0] == 1 && t->dims[1] == C);
    } else if (m->rank == 4) {
        ok = (t->n_dims == 3 && t->dims[0] == C && t->dims[1] == 1 && t->dims[2] == 1) ||
             (t->n_dims == 4 && t->dims[0] == 1 && t->dims[1] == C && t->dims[2] == 1 && t->dims[3] == 1);
    }
    if (!ok) return refuse(x, "adds a constant of another shape than one value per channel of '%s'", m->name);
    float *d = NULL;
    if ((st = const_floats(x, cv, -1, &d, &cc)) != VDNN_OK) return st;
    if ((st = add_param(x, l, "bias", d, cc)) != VDNN_OK) return st;
    l->biased = 1;
    l->may_fold = 0;
    return out_alias(x, m, m->rank, m->dims);
}

static vdnn_status op_sum(ctx *x)
{
    static const char *const none[] = {NULL};
    vdnn_status st = known_attrs(x, none);
    if (st != VDNN_OK) return st;
    size_t n = x->node->n_input;
    if (n < 1) return broken(x, "no inputs");
    if (n > LAYER_MAX_INPUTS) return refuse(x, "%zu inputs (vdnn's [add] takes at most %d)", n, LAYER_MAX_INPUTS);
    value *v[LAYER_MAX_INPUTS];
    int nconst = 0;
    for (size_t k = 0; k < n; k++) {
        if ((st = input(x, k, &v[k])) != VDNN_OK) return st;
        nconst += v[k]->kind == V_CONST;
    }
    if (n == 2 && nconst == 1 && !strcmp(x->node->op_type, "Add"))
        return v[0]->kind == V_MAP ? fold_bias(x, v[0], v[1]) : fold_bias(x, v[1], v[0]);
    if (nconst) return refuse(x, "adds a constant tensor: vdnn's [add] sums feature maps");
    if (n == 1) return out_alias(x, v[0], v[0]->rank, v[0]->dims);
    int in[LAYER_MAX_INPUTS];
    int c, h, w;
    map_chw(x, v[0]->map, &c, &h, &w);
    for (size_t k = 0; k < n; k++) {
        int ck, hk, wk;
        map_chw(x, v[k]->map, &ck, &hk, &wk);
        if (v[k]->rank != v[0]->rank || memcmp(v[k]->dims, v[0]->dims, (size_t)v[0]->rank * sizeof v[0]->dims[0]) ||
            ck != c || hk != h || wk != w)
            return refuse(x, "'%s' and '%s' differ in shape: vdnn's [add] takes maps of one shape, no broadcasting",
                          v[0]->name, v[k]->name);
        for (size_t j = 0; j < k; j++)
            if (v[j]->map == v[k]->map) return refuse(x, "adds a map to itself ('%s')", v[k]->name);
        in[k] = v[k]->map;
    }
    if ((st = need_batch(x, v[0])) != VDNN_OK) return st;
    lay *l;
    if ((st = add_layer(x, "add", (int)n, in, &l)) != VDNN_OK) return st;
    l->c = c, l->h = h, l->w = w;
    return out_map(x, x->nl - 1, v[0]->rank, v[0]->dims);
}

static vdnn_status op_concat(ctx *x)
{
    static const char *const known[] = {"axis", NULL};
    vdnn_status st = known_attrs(x, known);
    if (st != VDNN_OK) return st;
    size_t n = x->node->n_input;
    if (n < 1) return broken(x, "no inputs");
    if (n > LAYER_MAX_INPUTS) return refuse(x, "%zu inputs (vdnn's [concat] takes at most %d)", n, LAYER_MAX_INPUTS);
    value *v[LAYER_MAX_INPUTS];
    for (size_t k = 0; k < n; k++)
        if ((st = input_map(x, k, &v[k])) != VDNN_OK) return st;
    int bad = 0;
    int64_t axis = onnx_attr_int(x->node, "axis", 1, &bad);
    if (bad) return bad_attr(x, "axis");
    if (!onnx_attr(x->node, "axis") && x->opset >= 4) return broken(x, "no axis attribute (required from opset 4)");
    int rank = v[0]->rank;
    if (axis < 0) axis += rank;
    if (axis != 1) return refuse(x, "joins along axis %" PRId64 ": vdnn's [concat] joins channels (axis 1)", axis);
    if ((st = need_batch(x, v[0])) != VDNN_OK) return st;
    int in[LAYER_MAX_INPUTS];
    int c0, h, w;
    map_chw(x, v[0]->map, &c0, &h, &w);
    int64_t dims[ONNX_MAX_RANK];
    memcpy(dims, v[0]->dims, sizeof dims);
    dims[1] = 0;
    int ctot = 0;
    for (size_t k = 0; k < n; k++) {
        int ck, hk, wk;
        map_chw(x, v[k]->map, &ck, &hk, &wk);
        int same = v[k]->rank == rank;
        for (int i = 0; same && i < rank; i++) same = i == 1 || v[k]->dims[i] == v[0]->dims[i];
        if (!same || hk != h || wk != w)
            return refuse(x, "'%s' and '%s' differ in more than their channels", v[0]->name, v[k]->name);
        for (size_t j = 0; j < k; j++)
            if (v[j]->map == v[k]->map) return refuse(x, "joins a map to itself ('%s')", v[k]->name);
        in[k] = v[k]->map;
        dims[1] += v[k]->dims[1];
        ctot += ck;
        if (ctot > (1 << 24)) return refuse(x, "joins more than 2^24 channels");
    }
    if (n == 1) return out_alias(x, v[0], rank, v[0]->dims);
    lay *l;
    if ((st = add_layer(x, "concat", (int)n, in, &l)) != VDNN_OK) return st;
    l->c = ctot, l->h = h, l->w = w;
    return out_map(x, x->nl - 1, rank, dims);
}

static vdnn_status op_flatten(ctx *x)
{
    static const char *const known[] = {"axis", NULL};
    value *in;
    vdnn_status st = known_attrs(x, known);
    if (st == VDNN_OK) st = input(x, 0, &in);
    if (st != VDNN_OK) return st;
    if (in->kind != V_MAP) return refuse(x, "flattens a constant");
    int bad = 0;
    int64_t axis = onnx_attr_int(x->node, "axis", 1, &bad);
    if (bad) return bad_attr(x, "axis");
    if (axis < 0) axis += in->rank;
    if (axis < 0 || axis > in->rank) return broken(x, "axis %" PRId64 " of a %d-dimensional input", axis, in->rank);
    int64_t dims[2] = {1, 1};
    for (int i = 0; i < in->rank; i++) dims[i >= axis] *= in->dims[i];
    return out_alias(x, in, 2, dims);
}

static vdnn_status op_reshape(ctx *x)
{
    static const char *const known[] = {"allowzero", NULL};
    value *in, *sv;
    vdnn_status st = known_attrs(x, known);
    if (x->opset < 5) return refuse(x, "Reshape of opset %" PRId64 " (its shape an attribute) is not supported", x->opset);
    if (st == VDNN_OK) st = input_map(x, 0, &in);
    if (st == VDNN_OK) st = input_const(x, 1, &sv);
    if (st != VDNN_OK) return st;
    int bad = 0;
    int64_t allowzero = onnx_attr_int(x->node, "allowzero", 0, &bad);
    if (bad) return bad_attr(x, "allowzero");
    int64_t *s = NULL, n = 0;
    char what[160];
    snprintf(what, sizeof what, "%s: node '%s': shape", x->src, onnx_name(x->node->name));
    if ((st = onnx_tensor_ints(sv->t, what, &s, &n)) != VDNN_OK) {
        x->r->refused = st == VDNN_EINVAL;
        return st;
    }
    if (n < 1 || n > 4) {
        free(s);
        return refuse(x, "a shape of %" PRId64 " dimensions (vdnn's maps have 1 to 4)", n);
    }
    int64_t total = 1, known_p = 1, dims[4];
    int infer = -1;
    for (int i = 0; i < in->rank; i++) total *= in->dims[i];
    for (int i = 0; i < n; i++) {
        dims[i] = s[i];
        if (s[i] == 0 && !allowzero) {
            if (i >= in->rank) {
                free(s);
                return broken(x, "shape copies dimension %d of a %d-dimensional input", i, in->rank);
            }
            dims[i] = in->dims[i];
        }
        if (dims[i] == -1) {
            if (infer >= 0) {
                free(s);
                return broken(x, "two -1 in the shape");
            }
            infer = i;
            continue;
        }
        if (dims[i] < 1) {
            free(s);
            return broken(x, "dimension %d of the shape is %" PRId64, i, dims[i]);
        }
        if (dims[i] > total / known_p) {
            known_p = 0;   /* more than the input holds: never equal to it */
            break;
        }
        known_p *= dims[i];
    }
    free(s);
    if (infer >= 0 && known_p && total % known_p == 0) dims[infer] = total / known_p, known_p = total;
    if (known_p != total)
        return broken(x, "the shape does not hold the input's %" PRId64 " elements%s", total,
                      x->o && x->o->batch > 0 ? " (--batch changed the batch: a shape that names the model's own "
                                                "batch no longer fits)" : "");
    return out_alias(x, in, (int)n, dims);
}

static vdnn_status op_constant(ctx *x)
{
    const Onnx__AttributeProto *a = onnx_attr(x->node, "value");
    if (!a || !a->t || x->node->n_attribute != 1)
        return refuse(x, "a constant given other than as a 'value' tensor (value_float, value_ints, ...)");
    value *v;
    vdnn_status st = output(x, 0, &v);
    if (st != VDNN_OK || !v) return st != VDNN_OK ? st : broken(x, "has no output");
    v->kind = V_CONST;
    v->t = a->t;
    v->rank = (int)(a->t->n_dims < ONNX_MAX_RANK ? a->t->n_dims : ONNX_MAX_RANK);
    return VDNN_OK;
}

/* Pad: taken where it pads nothing (PyTorch exports one before some average pools). */
static vdnn_status op_pad(ctx *x)
{
    static const char *const known[] = {"mode", "pads", "value", NULL};
    value *in;
    vdnn_status st = known_attrs(x, known);
    if (st == VDNN_OK) st = input_map(x, 0, &in);
    if (st != VDNN_OK) return st;
    int bad = 0;
    char mode[16];
    onnx_attr_string(x->node, "mode", "constant", mode, sizeof mode, &bad);
    int64_t pads[2 * ONNX_MAX_RANK], count = 0, *p = NULL;
    if (x->opset < 11) {
        int k = onnx_attr_ints(x->node, "pads", pads, 2 * ONNX_MAX_RANK, &bad);
        count = k < 0 ? 0 : k;
        p = pads;
    } else {
        value *pv;
        char what[160];
        snprintf(what, sizeof what, "%s: node '%s': pads", x->src, onnx_name(x->node->name));
        if ((st = input_const(x, 1, &pv)) != VDNN_OK) return st;
        if ((st = onnx_tensor_ints(pv->t, what, &p, &count)) != VDNN_OK) {
            x->r->refused = st == VDNN_EINVAL;
            return st;
        }
    }
    int zero = !bad;
    for (int64_t i = 0; i < count; i++) zero &= p[i] == 0;
    if (p != pads) free(p);
    if (bad) return bad_attr(x, "mode or pads");
    if (!zero) return refuse(x, "pads a map: vdnn pads only inside a convolution or pooling");
    return out_alias(x, in, in->rank, in->dims);
}

static vdnn_status op_identity(ctx *x)
{
    value *in, *v;
    vdnn_status st = input(x, 0, &in);
    if (st != VDNN_OK) return st;
    if (in->kind == V_MAP) return out_alias(x, in, in->rank, in->dims);
    const Onnx__TensorProto *t = in->t;   /* `in` moves with the value table */
    int rank = in->rank;
    if ((st = output(x, 0, &v)) != VDNN_OK || !v) return st != VDNN_OK ? st : broken(x, "has no output");
    v->kind = V_CONST;
    v->t = t;
    v->rank = rank;
    return VDNN_OK;
}

/* Softmax: vdnn's is its loss, the last layer; taken where it normalises every item's
 * whole map, as vdnn's does. */
static vdnn_status op_softmax(ctx *x, int is_output)
{
    static const char *const known[] = {"axis", NULL};
    value *in;
    vdnn_status st = known_attrs(x, known);
    if (st == VDNN_OK) st = input_map(x, 0, &in);
    if (st != VDNN_OK) return st;
    if (!is_output)
        return refuse(x, "a softmax inside the graph: vdnn's softmax is its loss, the net's last layer (the graph's "
                      "output)");
    int bad = 0;
    int64_t axis = onnx_attr_int(x->node, "axis", x->opset < 13 ? 1 : -1, &bad);
    if (bad) return bad_attr(x, "axis");
    if (axis < 0) axis += in->rank;
    int whole = 0;
    if (x->opset < 13) whole = axis == 1;
    else {
        int64_t between = 1;
        for (int i = 1; i < axis && i < in->rank; i++) between *= in->dims[i];
        whole = axis >= 1 && axis == in->rank - 1 && between == 1;
    }
    if (!whole || in->rank < 2)
        return refuse(x, "normalises along axis %" PRId64 " of %d dimensions: vdnn's softmax normalises each item's "
                      "whole output", axis, in->rank);
    if ((st = need_batch(x, in)) != VDNN_OK) return st;
    int c, h, w;
    map_chw(x, in->map, &c, &h, &w);
    if ((int64_t)c * h * w < 2) return refuse(x, "a softmax over one value");
    lay *l;
    int src = in->map;
    if ((st = add_layer(x, "softmax", 1, &src, &l)) != VDNN_OK) return st;
    l->c = c, l->h = h, l->w = w;
    return out_map(x, x->nl - 1, in->rank, in->dims);
}

static vdnn_status run_node(ctx *x, int is_output)
{
    const char *op = x->node->op_type ? x->node->op_type : "";
    const char *dom = x->node->domain;
    if (dom && *dom && strcmp(dom, "ai.onnx"))
        return refuse(x, "operator of domain '%s': vdnn takes ONNX's default domain only", dom);
    if (!strcmp(op, "Conv")) return op_conv(x);
    if (!strcmp(op, "MaxPool")) return op_pool(x, 0, 0);
    if (!strcmp(op, "AveragePool")) return op_pool(x, 1, 0);
    if (!strcmp(op, "GlobalMaxPool")) return op_pool(x, 0, 1);
    if (!strcmp(op, "GlobalAveragePool")) return op_pool(x, 1, 1);
    if (!strcmp(op, "Relu")) return op_elementwise(x, "relu");
    if (!strcmp(op, "LeakyRelu")) return op_elementwise(x, "leaky");
    if (!strcmp(op, "Sigmoid")) return op_elementwise(x, "sigmoid");
    if (!strcmp(op, "Tanh")) return op_elementwise(x, "tanh");
    if (!strcmp(op, "Clip")) return op_elementwise(x, "clip");
    if (!strcmp(op, "Dropout")) {
        vdnn_status st = only_first_output(x);
        return st == VDNN_OK ? op_elementwise(x, "dropout") : st;
    }
    if (!strcmp(op, "BatchNormalization")) return op_batchnorm(x);
    if (!strcmp(op, "LRN")) return op_lrn(x);
    if (!strcmp(op, "Gemm")) return op_fc(x, 1);
    if (!strcmp(op, "MatMul")) return op_fc(x, 0);
    if (!strcmp(op, "Add") || !strcmp(op, "Sum")) return op_sum(x);
    if (!strcmp(op, "Concat")) return op_concat(x);
    if (!strcmp(op, "Flatten")) return op_flatten(x);
    if (!strcmp(op, "Reshape")) return op_reshape(x);
    if (!strcmp(op, "Identity")) return op_identity(x);
    if (!strcmp(op, "Constant")) return op_constant(x);
    if (!strcmp(op, "Softmax")) return op_softmax(x, is_output);
    if (!strcmp(op, "Pad")) return op_pad(x);
    return refuse(x, "operator %s is not supported", *op ? op : "(none)");
}

/* ---- the graph ---- */

static int is_initializer(const ctx *x, const char *name)
{
    const value *v = val((ctx *)x, name);
    return v && v->kind == V_CONST;
}

static vdnn_status read_input(ctx *x, const Onnx__ValueInfoProto *vi)
{
    const Onnx__TypeProto *tp = vi->type;
    if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !tp->tensor_type)
        return refuse(x, "graph input '%s' is not a tensor", onnx_name(vi->name));
    const Onnx__TypeProto__Tensor *tt = tp->tensor_type;
    if (!tt->has_elem_type || tt->elem_type != ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
        return refuse(x, "graph input '%s' is not of float elements (type %d)", onnx_name(vi->name),
                      tt->has_elem_type ? tt->elem_type : 0);
    if (!tt->shape) return refuse(x, "graph input '%s' has no shape", onnx_name(vi->name));
    size_t rank = tt->shape->n_dim;
    if (rank < 1 || rank > 4)
        return refuse(x, "graph input '%s' has %zu dimensions (vdnn's input has 1 to 4: N, C, H, W)",
                      onnx_name(vi->name), rank);
    int64_t d[4] = {1, 1, 1, 1};
    for (size_t i = 0; i < rank; i++) {
        const Onnx__TensorShapeProto__Dimension *dim = tt->shape->dim[i];
        int fixed = dim && dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        if (i == 0) {
            d[0] = x->o && x->o->batch > 0 ? x->o->batch : fixed ? dim->dim_value : 1;
            continue;
        }
        if (!fixed)
            return refuse(x, "graph input '%s' has a dynamic dimension %zu: vdnn's shapes are fixed but for the "
                          "batch", onnx_name(vi->name), i);
        d[i] = dim->dim_value;
    }
    int64_t onnx_dims[4];
    memcpy(onnx_dims, d, sizeof d);
    /* a wide feature vector (N, K) past vdnn's channels is held as (N, 1, 1, K) */
    if (rank == 2 && d[1] > 4096 && d[1] <= 16384) d[3] = d[1], d[1] = 1;
    static const int64_t maxes[4] = {65536, 4096, 16384, 16384};
    static const char *const what[4] = {"batch", "channels", "height", "width"};
    for (int i = 0; i < 4; i++)
        if (d[i] < 1 || d[i] > maxes[i])
            return refuse(x, "graph input '%s': %s %" PRId64 " outside vdnn's 1..%" PRId64, onnx_name(vi->name),
                          what[i], d[i], maxes[i]);
    x->N = (int)d[0], x->in_c = (int)d[1], x->in_h = (int)d[2], x->in_w = (int)d[3];
    value *v;
    vdnn_status st = add_value(x, vi->name, &v);
    if (st != VDNN_OK) return st;
    v->kind = V_MAP;
    v->map = -1;
    v->rank = (int)rank;
    for (size_t i = 0; i < rank; i++) v->dims[i] = onnx_dims[i];
    x->r->in_count = d[0] * d[1] * d[2] * d[3];
    return VDNN_OK;
}

static vdnn_status read_constants(ctx *x)
{
    const Onnx__GraphProto *g = x->g;
    for (size_t i = 0; i < g->n_initializer; i++) {
        const Onnx__TensorProto *t = g->initializer[i];
        value *v;
        if (!t) return broken(x, "an empty initializer");
        vdnn_status st = add_value(x, t->name, &v);
        if (st != VDNN_OK) return st;
        v->kind = V_CONST;
        v->t = t;
        v->rank = (int)(t->n_dims < ONNX_MAX_RANK ? t->n_dims : ONNX_MAX_RANK);
    }
    if (g->n_sparse_initializer) return refuse(x, "sparse initializers are not supported");
    /* graph inputs: constants fed by the caller, initializers listed again (IR < 4), and
     * the one vdnn feeds */
    int fed_net = 0;
    for (size_t i = 0; i < g->n_input; i++) {
        const Onnx__ValueInfoProto *vi = g->input[i];
        if (!vi || !vi->name || !*vi->name) return broken(x, "a graph input without a name");
        if (is_initializer(x, vi->name)) continue;
        if (!fed_net) {
            vdnn_status st = read_input(x, vi);
            if (st != VDNN_OK) return st;
            fed_net = 1;
            continue;
        }
        const Onnx__TensorProto *t = x->o && fed_net <= x->o->nfeeds ? x->o->feeds[fed_net - 1] : NULL;
        fed_net++;
        if (!t)
            return refuse(x, "graph input '%s' is a second input: vdnn nets read one (give the others as "
                          "initializers)", vi->name);
        value *v;
        vdnn_status st = add_value(x, vi->name, &v);
        if (st != VDNN_OK) return st;
        v->kind = V_CONST;
        v->t = t;
        v->rank = (int)(t->n_dims < ONNX_MAX_RANK ? t->n_dims : ONNX_MAX_RANK);
    }
    if (!fed_net) return refuse(x, "the graph has no input that is not an initializer");
    return VDNN_OK;
}

/* How many node inputs name each value (x->uses), before any value is made. */
static vdnn_status count_uses(ctx *x)
{
    int *count = NULL;
    size_t ncount = 0, cap = 0;
    vdnn_status st = VDNN_OK;
    for (size_t i = 0; i < x->g->n_node && st == VDNN_OK; i++) {
        const Onnx__NodeProto *n = x->g->node[i];
        for (size_t k = 0; n && k < n->n_input && st == VDNN_OK; k++) {
            const char *name = n->input[k];
            if (!name || !*name) continue;
            int at = map_get(&x->uses, name);
            if (at >= 0) {
                count[at]++;
                continue;
            }
            if (ncount == cap) {
                cap = cap ? 2 * cap : 256;
                int *c = realloc(count, cap * sizeof *c);
                if (!c) {
                    st = vdnn_fail(VDNN_ENOMEM, "out of memory counting the uses of values");
                    break;
                }
                count = c;
            }
            count[ncount] = 1;
            st = map_put(&x->uses, name, (int)ncount++);
        }
    }
    /* the table's values become the counts */
    for (size_t i = 0; st == VDNN_OK && i < x->uses.cap; i++)
        if (x->uses.key[i]) x->uses.val[i] = count[x->uses.val[i]];
    free(count);
    return st;
}

static const char *meta(const Onnx__ModelProto *m, const char *key)
{
    for (size_t i = 0; i < m->n_metadata_props; i++)
        if (m->metadata_props[i] && m->metadata_props[i]->key && !strcmp(m->metadata_props[i]->key, key))
            return m->metadata_props[i]->value ? m->metadata_props[i]->value : "";
    return NULL;
}

/* Appends text to a growing string. */
typedef struct sbuf {
    char *s;
    size_t len, cap;
    int failed;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->failed) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->failed = 1;
            return;
        }
        if (b->s && b->len + (size_t)k < b->cap) {
            b->len += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + (size_t)k + 1) cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->failed = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

/* Text from the model for a comment of the config: control characters (a newline would
 * end the comment and let the model write sections of its own) made '?', at most 160
 * characters. */
static const char *plain(const char *s, char *buf, size_t len)
{
    size_t k = 0;
    for (; s && s[k] && k < len - 1 && k < 160; k++) buf[k] = (unsigned char)s[k] < 0x20 || s[k] == 0x7f ? '?' : s[k];
    buf[k] = 0;
    return buf;
}

static const char *map_label(const ctx *x, int map) { return map < 0 ? "data" : x->L[map].name; }

/* The loss vdnn trains with after the graph's output: the exported one (metadata), the
 * graph's own softmax, or a softmax (a logistic for one output) appended. */
static vdnn_status finish(ctx *x, const value *outv)
{
    onnx_import *r = x->r;
    snprintf(r->out_map, sizeof r->out_map, "%s", map_label(x, outv->map));
    r->out_rank = outv->rank;
    memcpy(r->out_dims, outv->dims, sizeof r->out_dims);
    if (outv->map >= 0 && !strcmp(x->L[outv->map].type, "softmax")) return VDNN_OK;
    const char *loss = meta(x->m, "vdnn.loss");
    char type[16] = "", name[LAYER_NAME_MAX] = "loss";
    if (loss && sscanf(loss, "%15s %31s", type, name) < 1) type[0] = 0;
    int c, h, w;
    map_chw(x, outv->map, &c, &h, &w);
    int64_t per_item = (int64_t)c * h * w;
    if (!strcmp(type, "logistic") && outv->map >= 0 && !strcmp(x->L[outv->map].type, "sigmoid") &&
        outv->map == x->nl - 1 && !strcmp(x->L[outv->map].name, name)) {
        x->L[outv->map].type = "logistic";
        return VDNN_OK;
    }
    const char *append = !strcmp(type, "l2") ? "l2" : per_item >= 2 ? "softmax" : "logistic";
    Onnx__NodeProto fake = ONNX__NODE_PROTO__INIT;
    fake.name = name;
    fake.op_type = (char *)"(loss)";
    x->node = &fake;
    lay *l;
    int src = outv->map;
    vdnn_status st = add_layer(x, append, 1, &src, &l);
    x->node = NULL;
    if (st != VDNN_OK) return st;
    l->node = NULL;
    l->c = c, l->h = h, l->w = w;
    return VDNN_OK;
}

/* The layers the graph's output depends on: live[i], and pos[i] its place among them.
 * Nodes whose results nothing reads are left out, their parameters too (a vdnn net has
 * no dead branches). Returns how many live. */
static int live_layers(ctx *x, unsigned char *live, int *pos)
{
    memset(live, 0, (size_t)x->nl);
    live[x->nl - 1] = 1;
    for (int i = x->nl - 1; i >= 0; i--)
        for (int k = 0; live[i] && k < x->L[i].nin; k++)
            if (x->L[i].in[k] >= 0) live[x->L[i].in[k]] = 1;
    int n = 0;
    for (int i = 0; i < x->nl; i++) pos[i] = live[i] ? n++ : -1;
    onnx_import *r = x->r;
    int kept = 0;
    for (int i = 0; i < r->nparams; i++) {
        int at = map_get(&x->names, r->params[i].layer);
        if (at >= 0 && !live[at]) free(r->params[i].data);
        else r->params[kept++] = r->params[i];
    }
    r->nparams = kept;
    return n;
}

static vdnn_status write_config(ctx *x)
{
    sbuf b = {0};
    const Onnx__ModelProto *m = x->m;
    unsigned char *live = malloc((size_t)x->nl);
    int *pos = malloc((size_t)x->nl * sizeof *pos);
    if (!live || !pos) {
        free(live);
        free(pos);
        return vdnn_fail(VDNN_ENOMEM, "out of memory writing the config");
    }
    int nlive = live_layers(x, live, pos);
    const lay *last = &x->L[x->nl - 1];
    int64_t classes = (int64_t)last->c * last->h * last->w;
    if (classes < 2) classes = 2;
    if (classes > 1000000) classes = 1000000;
    char t1[200], t2[200], t3[200];
    sb_printf(&b, "# Imported from %s by `vdnn import`: %s%s%s, ONNX opset %" PRId64 ", %d nodes as %d layers.\n",
              plain(x->src, t1, sizeof t1),
              m->producer_name && *m->producer_name ? plain(m->producer_name, t2, sizeof t2) : "an unnamed producer",
              m->producer_version && *m->producer_version ? " " : "",
              m->producer_version ? plain(m->producer_version, t3, sizeof t3) : "", x->opset, x->r->nodes, nlive);
    sb_printf(&b, "# Each layer is named after its ONNX node (characters other than letters, digits, _ and - made _);\n"
                  "# its weights are in the checkpoint written beside it (train --init). See docs/onnx.md.\n\n");
    sb_printf(&b, "[net]\nbatch = %d\nchannels = %d\nheight = %d\nwidth = %d\n\n", x->N, x->in_c, x->in_h, x->in_w);
    sb_printf(&b, "# Fine-tuning settings to start from: set them for your data.\n"
                  "[train]\nepochs = 1\nlearning_rate = 0.01\nmomentum = 0.9\nseed = 1\n\n");
    sb_printf(&b, "# Synthetic data of the net's shape and classes, to try it: point [data] at your data.\n"
                  "[data]\nset = synthetic\ntrain_size = 256\ntest_size = 64\nclasses = %" PRId64 "\n",
              classes);
    for (int i = 0; i < x->nl; i++) {
        const lay *l = &x->L[i];
        if (!live[i]) continue;
        if (l->node) sb_printf(&b, "\n# ONNX node \"%s\" (%s)\n", plain(l->node, t1, sizeof t1), plain(l->op, t2, sizeof t2));
        else sb_printf(&b, "\n# the loss vdnn trains with (not in the ONNX graph)\n");
        sb_printf(&b, "[%s]\nname = %s\n", l->type, l->name);
        int chain = l->nin == 1 && (l->in[0] < 0 ? pos[i] == 0 : pos[l->in[0]] == pos[i] - 1);
        if (!chain) {
            /* by name; where the names do not fit a config value (a dense block's
             * concat of many long names), by position: -k, k sections up */
            size_t len = 0;
            for (int k = 0; k < l->nin; k++) len += strlen(map_label(x, l->in[k])) + 2;
            sb_printf(&b, "input = ");
            for (int k = 0; k < l->nin; k++) {
                if (len < CFG_VALUE_MAX - 1 || l->in[k] < 0) sb_printf(&b, "%s%s", k ? ", " : "", map_label(x, l->in[k]));
                else sb_printf(&b, "%s-%d", k ? ", " : "", pos[i] - pos[l->in[k]]);
            }
            sb_printf(&b, "\n");
        }
        sb_printf(&b, "%s", l->keys);
        if ((!strcmp(l->type, "convolutional") || !strcmp(l->type, "connected")) && !l->biased)
            sb_printf(&b, "bias = 0\n");
    }
    free(live);
    free(pos);
    x->r->nlayers = nlive;
    if (b.failed) {
        free(b.s);
        return vdnn_fail(VDNN_ENOMEM, "out of memory writing the config");
    }
    x->r->cfg = b.s;
    return VDNN_OK;
}

vdnn_status onnx_import_model(const Onnx__ModelProto *m, const onnx_import_opts *o, onnx_import *r)
{
    memset(r, 0, sizeof *r);
    ctx x = {.m = m, .g = m->graph, .o = o, .r = r, .src = o && o->source ? o->source : "model"};
    x.names.owns = 1;   /* the layers' names move when the layer table grows */
    x.suffix.owns = 1;
    x.opset = onnx_opset(m);
    vdnn_status st = VDNN_OK;
    if (!x.g) st = broken(&x, "the model has no graph");
    else if (x.opset < 1 || x.opset > 17)
        st = x.opset ? refuse(&x, "ONNX opset %" PRId64 " (vdnn imports opsets 1 to 17)", x.opset)
                     : m->n_opset_import ? refuse(&x, "the model imports operators of other domains than ONNX's "
                                                      "default one only (%s)",
                                                  m->opset_import[0] && m->opset_import[0]->domain
                                                      ? m->opset_import[0]->domain : "?")
                                         : broken(&x, "the model imports no opset");
    else if (x.g->n_node > IMPORT_MAX_NODES)
        st = refuse(&x, "%zu nodes (vdnn imports at most %d)", x.g->n_node, IMPORT_MAX_NODES);
    else if (x.g->n_output != 1 || !x.g->output[0] || !x.g->output[0]->name)
        st = refuse(&x, "the graph has %zu outputs: a vdnn net has one", x.g->n_output);
    const char *outname = st == VDNN_OK ? x.g->output[0]->name : NULL;
    x.output = outname;
    for (size_t i = 0; st == VDNN_OK && i < x.g->n_node; i++)
        if (!x.g->node[i]) st = broken(&x, "an empty node");
    if (st == VDNN_OK) st = count_uses(&x);
    if (st == VDNN_OK) st = read_constants(&x);
    for (size_t i = 0; st == VDNN_OK && i < x.g->n_node; i++) {
        x.node = x.g->node[i];
        int is_output = 0;
        for (size_t k = 0; k < x.node->n_output; k++)
            if (x.node->output[k] && !strcmp(x.node->output[k], outname)) is_output = 1;
        st = run_node(&x, is_output);
        r->nodes++;
    }
    x.node = NULL;
    value *outv = st == VDNN_OK ? val(&x, outname) : NULL;
    if (st == VDNN_OK && !outv) st = broken(&x, "the graph's output '%s' is computed by no node", outname);
    if (st == VDNN_OK && outv->kind != V_MAP)
        st = refuse(&x, "the graph's output '%s' is a constant, not computed from the input", outname);
    if (st == VDNN_OK && (outv->map >= 0 && !strcmp(x.L[outv->map].type, "softmax")) && outv->map != x.nl - 1)
        st = refuse(&x, "the softmax is not the last layer");
    if (st == VDNN_OK) {
        for (int i = 0; i < x.nl && st == VDNN_OK; i++)
            if (!strcmp(x.L[i].type, "softmax") && i != x.nl - 1)
                st = refuse(&x, "softmax '%s' is not the graph's output: vdnn's softmax is its loss, the last layer",
                            x.L[i].name);
    }
    if (st == VDNN_OK) st = finish(&x, outv);
    if (st == VDNN_OK) st = write_config(&x);
    int refused = r->refused;
    map_free(&x.vals);
    map_free(&x.names);
    map_free(&x.uses);
    map_free(&x.suffix);
    free(x.v);
    free(x.L);
    if (st != VDNN_OK) {
        onnx_import_free(r);
        r->refused = refused;
    }
    return st;
}

void onnx_import_free(onnx_import *r)
{
    free(r->cfg);
    for (int i = 0; i < r->nparams; i++) free(r->params[i].data);
    free(r->params);
    memset(r, 0, sizeof *r);
}

vdnn_status onnx_import_load(const onnx_import *r, net *n)
{
    for (int i = 0; i < r->nparams; i++) {
        const onnx_param *p = &r->params[i];
        layer *l = NULL;
        for (int k = 0; k < n->nlayers && !l; k++)
            if (!strcmp(n->layers[k]->name, p->layer)) l = n->layers[k];
        param *q = NULL;
        for (int k = 0; l && k < l->nparams && !q; k++)
            if (!strcmp(l->params[k].name, p->name)) q = &l->params[k];
        if (!q)
            return vdnn_fail(VDNN_EINVAL, "imported tensor %s.%s has no place in the net", p->layer, p->name);
        if ((int64_t)shape_count(q->shape) != p->count)
            return vdnn_fail(VDNN_EINVAL, "imported tensor %s.%s holds %" PRId64 " values, the layer's %zu", p->layer,
                             p->name, p->count, (size_t)shape_count(q->shape));
        float *dst = q->host_value ? q->host_value : q->value;
        vdnn_status st = q->host_value ? VDNN_OK
                                       : device_upload(n->dev, dst, p->data, (size_t)p->count * sizeof(float));
        if (q->host_value) memcpy(dst, p->data, (size_t)p->count * sizeof(float));
        if (st != VDNN_OK) return vdnn_wrap(st, "loading %s.%s", p->layer, p->name);
    }
    return VDNN_OK;
}
