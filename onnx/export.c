/* ONNX export (onnx/export.h): one ONNX node per layer (two where a fully connected
 * layer, a softmax, or a sum over maps of different ranks needs a Flatten first), built
 * as protobuf-c messages in an arena freed once the file is written. */
#include "onnx/export.h"

#include <float.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layers/activation.h"
#include "layers/batchnorm.h"
#include "layers/connected.h"
#include "layers/conv.h"
#include "layers/lrn.h"
#include "layers/pooling.h"
#include "onnx/model.h"

/* Every allocation of one export, freed together. */
typedef struct arena {
    void **p;
    size_t n, cap;
    int failed;
} arena;

static void *grab(arena *a, size_t bytes)
{
    if (a->failed) return NULL;
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 256;
        void **p = realloc(a->p, cap * sizeof *p);
        if (!p) {
            a->failed = 1;
            return NULL;
        }
        a->p = p;
        a->cap = cap;
    }
    void *m = calloc(1, bytes ? bytes : 1);
    if (!m) {
        a->failed = 1;
        return NULL;
    }
    a->p[a->n++] = m;
    return m;
}

static char *str(arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *str(arena *a, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char *s = grab(a, strlen(buf) + 1);
    if (s) strcpy(s, buf);
    return s;
}

/* A growing array of pointers inside the arena's lifetime (realloc'd, freed at the end). */
typedef struct plist {
    void **p;
    size_t n, cap;
} plist;

static int push(arena *a, plist *l, void *item)
{
    if (!item) return a->failed = 1, 0;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        void **p = realloc(l->p, cap * sizeof *p);
        if (!p) return a->failed = 1, 0;
        l->p = p;
        l->cap = cap;
    }
    l->p[l->n++] = item;
    return 1;
}

typedef struct ex {
    arena a;
    net *n;
    plist nodes, inits;
    char **vname;     /* (nlayers + 1) the ONNX value that holds map j */
    int *rank;        /* (nlayers + 1) its rank: 4 (N, C, H, W) or 2 (N, features) */
} ex;

/* An attribute of `type`, its value left to the caller. */
static Onnx__AttributeProto *attr(ex *e, const char *name, Onnx__AttributeProto__AttributeType type)
{
    Onnx__AttributeProto *a = grab(&e->a, sizeof *a);
    if (!a) return NULL;
    onnx__attribute_proto__init(a);
    a->name = str(&e->a, "%s", name);
    a->has_type = 1;
    a->type = type;
    return a;
}

static Onnx__AttributeProto *attr_int(ex *e, const char *name, int64_t v)
{
    Onnx__AttributeProto *a = attr(e, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT);
    if (a) a->has_i = 1, a->i = v;
    return a;
}

static Onnx__AttributeProto *attr_float(ex *e, const char *name, float v)
{
    Onnx__AttributeProto *a = attr(e, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    if (a) a->has_f = 1, a->f = v;
    return a;
}

static Onnx__AttributeProto *attr_ints(ex *e, const char *name, int n, const int64_t *v)
{
    Onnx__AttributeProto *a = attr(e, name, ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS);
    int64_t *d = grab(&e->a, (size_t)n * sizeof *d);
    if (!a || !d) return NULL;
    memcpy(d, v, (size_t)n * sizeof *d);
    a->n_ints = (size_t)n;
    a->ints = d;
    return a;
}

/* A node: its op, name, inputs, one output, and up to 8 attributes (NULL-ended). */
static Onnx__NodeProto *node(ex *e, const char *op, const char *name, int nin, char **in, const char *out,
                             Onnx__AttributeProto *const *attrs)
{
    Onnx__NodeProto *p = grab(&e->a, sizeof *p);
    char **ins = grab(&e->a, (size_t)(nin ? nin : 1) * sizeof *ins);
    char **outs = grab(&e->a, sizeof *outs);
    Onnx__AttributeProto **as = grab(&e->a, 8 * sizeof *as);
    if (!p || !ins || !outs || !as) return NULL;
    onnx__node_proto__init(p);
    p->op_type = str(&e->a, "%s", op);
    p->name = str(&e->a, "%s", name);
    for (int k = 0; k < nin; k++) ins[k] = in[k];
    p->n_input = (size_t)nin;
    p->input = ins;
    outs[0] = str(&e->a, "%s", out);
    p->n_output = 1;
    p->output = outs;
    size_t na = 0;
    for (; attrs && attrs[na] && na < 8; na++) as[na] = attrs[na];
    for (size_t k = 0; attrs && attrs[k]; k++)
        if (k >= 8) e->a.failed = 1;
    p->n_attribute = na;
    p->attribute = as;
    push(&e->a, &e->nodes, p);
    return p;
}

/* An initializer of `count` floats (copied), shaped by dims. */
static char *init_floats(ex *e, const char *name, int rank, const int64_t *dims, const float *data, size_t count)
{
    Onnx__TensorProto *t = grab(&e->a, sizeof *t);
    int64_t *d = grab(&e->a, (size_t)(rank ? rank : 1) * sizeof *d);
    uint8_t *raw = grab(&e->a, count * sizeof(float));
    if (!t || !d || !raw) return NULL;
    onnx__tensor_proto__init(t);
    t->name = str(&e->a, "%s", name);
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    if (rank) memcpy(d, dims, (size_t)rank * sizeof *d);
    t->n_dims = (size_t)rank;
    t->dims = d;
    memcpy(raw, data, count * sizeof(float));
    t->has_raw_data = 1;
    t->raw_data.len = count * sizeof(float);
    t->raw_data.data = raw;
    push(&e->a, &e->inits, t);
    return t->name;
}

/* A parameter of layer l as an initializer named LAYER.PARAM, shaped by dims. */
static vdnn_status init_param(ex *e, const layer *l, int slot, int rank, const int64_t *dims, char **out)
{
    const param *p = &l->params[slot];
    size_t count = shape_count(p->shape);
    float *host = malloc(count * sizeof *host + 1);
    if (!host) return vdnn_fail(VDNN_ENOMEM, "out of memory reading %s.%s", l->name, p->name);
    vdnn_status st = VDNN_OK;
    if (p->host_value) memcpy(host, p->host_value, count * sizeof *host);
    else st = device_download(e->n->dev, host, p->value, count * sizeof *host);
    if (st == VDNN_OK) st = device_sync(e->n->dev);
    if (st == VDNN_OK) {
        *out = init_floats(e, str(&e->a, "%s.%s", l->name, p->name), rank, dims, host, count);
        if (!*out) st = vdnn_fail(VDNN_ENOMEM, "out of memory exporting %s.%s", l->name, p->name);
    }
    free(host);
    return st == VDNN_OK ? st : vdnn_wrap(st, "exporting %s.%s", l->name, p->name);
}

/* An int64 initializer of `count` values. */
static char *init_ints(ex *e, const char *name, const int64_t *data, int count)
{
    Onnx__TensorProto *t = grab(&e->a, sizeof *t);
    int64_t *dims = grab(&e->a, sizeof *dims), *d = grab(&e->a, (size_t)count * sizeof *d);
    if (!t || !dims || !d) return NULL;
    onnx__tensor_proto__init(t);
    t->name = str(&e->a, "%s", name);
    t->has_data_type = 1;
    t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    dims[0] = count;
    t->n_dims = 1;
    t->dims = dims;
    memcpy(d, data, (size_t)count * sizeof *d);
    t->n_int64_data = (size_t)count;
    t->int64_data = d;
    push(&e->a, &e->inits, t);
    return t->name;
}

/* Input k of layer l as a value of rank 4, (N, C, H, W): a Reshape first where it has
 * rank 2 (a fully connected layer's output read by a convolution, a pooling, an LRN). */
static char *nchw_input(ex *e, const layer *l, int k)
{
    int j = l->input[k];
    if (e->rank[j] == 4) return e->vname[j];
    const shape4 s = l->ins[k];
    int64_t shape[4] = {e->n->input.n, s.c, s.h, s.w};
    char *to[2] = {e->vname[j], init_ints(e, str(&e->a, "%s/shape%d", l->name, k), shape, 4)};
    char *out = str(&e->a, "%s/reshape%d", l->name, k);
    node(e, "Reshape", out, 2, to, out, NULL);
    return out;
}

/* Input k of layer l as a value of rank 2: a Flatten first where it has rank 4. */
static char *flat_input(ex *e, const layer *l, int k)
{
    int j = l->input[k];
    if (e->rank[j] == 2) return e->vname[j];
    Onnx__AttributeProto *attrs[] = {attr_int(e, "axis", 1), NULL};
    char *out = str(&e->a, "%s/flatten%d", l->name, k);
    node(e, "Flatten", out, 1, &e->vname[j], out, attrs);
    return out;
}

static vdnn_status export_layer(ex *e, int i)
{
    net *n = e->n;
    layer *l = n->layers[i];
    const char *type = l->ops->type;
    char *in[LAYER_MAX_INPUTS + 4];
    for (int k = 0; k < l->ninputs; k++) in[k] = e->vname[l->input[k]];
    char *out = str(&e->a, "%s", l->name);
    int rank = e->rank[l->input[0]];
    vdnn_status st = VDNN_OK;
    if (!strcmp(type, "convolutional")) {
        const conv_params *p = l->priv;
        int64_t wd[4] = {p->filters, l->in.c / p->groups, p->size_h, p->size_w}, bd[1] = {p->filters};
        int64_t ks[2] = {p->size_h, p->size_w}, ss[2] = {p->stride_h, p->stride_w};
        int64_t pads[4] = {p->pad_top, p->pad_left, p->pad_bottom, p->pad_right};
        int64_t dil[2] = {p->dilation_h, p->dilation_w};
        int nin = 2;
        in[0] = nchw_input(e, l, 0);
        st = init_param(e, l, CONV_WEIGHTS, 4, wd, &in[1]);
        if (st == VDNN_OK && p->bias) st = init_param(e, l, CONV_BIAS, 1, bd, &in[nin++]);
        Onnx__AttributeProto *attrs[] = {attr_ints(e, "kernel_shape", 2, ks), attr_ints(e, "strides", 2, ss),
                                         attr_ints(e, "pads", 4, pads), attr_ints(e, "dilations", 2, dil),
                                         attr_int(e, "group", p->groups), NULL};
        if (st == VDNN_OK) node(e, "Conv", l->name, nin, in, out, attrs);
        rank = 4;
    } else if (!strcmp(type, "maxpool") || !strcmp(type, "avgpool")) {
        const pool_params *p = l->priv;
        int avg = !strcmp(type, "avgpool");
        in[0] = nchw_input(e, l, 0);
        rank = 4;
        if (p->global) {
            node(e, avg ? "GlobalAveragePool" : "GlobalMaxPool", l->name, 1, in, out, NULL);
        } else {
            int64_t ks[2] = {p->size_h, p->size_w}, ss[2] = {p->stride_h, p->stride_w};
            int64_t pads[4] = {p->pad_h, p->pad_w, p->pad_h, p->pad_w};
            /* ONNX keeps a ceil-mode window that starts in the padding below; vdnn drops it */
            int H[2] = {l->in.h, l->in.w}, O[2] = {l->out.h, l->out.w};
            for (int a = 0; a < 2 && p->ceil_mode; a++) {
                int span = H[a] + 2 * (int)pads[a] - (int)ks[a];
                if ((span + (int)ss[a] - 1) / (int)ss[a] + 1 != O[a])
                    return vdnn_fail(VDNN_EINVAL, "layer %s: ceil_mode drops a last window that starts in the "
                                     "padding, which ONNX's pooling keeps: no ONNX node computes it", l->name);
            }
            Onnx__AttributeProto *attrs[] = {attr_ints(e, "kernel_shape", 2, ks), attr_ints(e, "strides", 2, ss),
                                             attr_ints(e, "pads", 4, pads), attr_int(e, "ceil_mode", p->ceil_mode),
                                             avg ? attr_int(e, "count_include_pad", !p->exclude_pad) : NULL, NULL};
            node(e, avg ? "AveragePool" : "MaxPool", l->name, 1, in, out, attrs);
        }
    } else if (!strcmp(type, "relu") || !strcmp(type, "tanh") || !strcmp(type, "sigmoid")) {
        node(e, !strcmp(type, "relu") ? "Relu" : !strcmp(type, "tanh") ? "Tanh" : "Sigmoid", l->name, 1, in, out,
             NULL);
    } else if (!strcmp(type, "leaky")) {
        const leaky_priv *p = l->priv;
        Onnx__AttributeProto *attrs[] = {attr_float(e, "alpha", p->slope), NULL};
        node(e, "LeakyRelu", l->name, 1, in, out, attrs);
    } else if (!strcmp(type, "clip")) {
        const clip_priv *p = l->priv;
        in[1] = init_floats(e, str(&e->a, "%s.min", l->name), 0, NULL, &p->lo, 1);
        in[2] = init_floats(e, str(&e->a, "%s.max", l->name), 0, NULL, &p->hi, 1);
        node(e, "Clip", l->name, 3, in, out, NULL);
    } else if (!strcmp(type, "batchnorm")) {
        const bn_priv *p = l->priv;
        int64_t cd[1] = {l->in.c};
        for (int k = 0; k < 4 && st == VDNN_OK; k++) st = init_param(e, l, BN_GAMMA + k, 1, cd, &in[1 + k]);
        /* ONNX's momentum weighs the running value, vdnn's the batch */
        Onnx__AttributeProto *attrs[] = {attr_float(e, "epsilon", p->eps), attr_float(e, "momentum", 1.0f - p->momentum),
                                         NULL};
        if (st == VDNN_OK) node(e, "BatchNormalization", l->name, 5, in, out, attrs);
    } else if (!strcmp(type, "dropout")) {
        /* an inference graph passes its input: the map keeps its value */
        e->vname[i + 1] = e->vname[l->input[0]];
        e->rank[i + 1] = rank;
        return VDNN_OK;
    } else if (!strcmp(type, "lrn")) {
        const lrn_priv *p = l->priv;
        in[0] = nchw_input(e, l, 0);
        rank = 4;
        Onnx__AttributeProto *attrs[] = {attr_int(e, "size", p->size), attr_float(e, "alpha", p->alpha),
                                         attr_float(e, "beta", p->beta), attr_float(e, "bias", p->k), NULL};
        node(e, "LRN", l->name, 1, in, out, attrs);
    } else if (!strcmp(type, "connected")) {
        const connected_priv *p = l->priv;
        int64_t wd[2] = {p->outputs, (int64_t)shape_per_item(l->in)}, bd[1] = {p->outputs};
        in[0] = flat_input(e, l, 0);
        int nin = 2;
        st = init_param(e, l, FC_WEIGHTS, 2, wd, &in[1]);
        if (st == VDNN_OK && p->bias) st = init_param(e, l, FC_BIAS, 1, bd, &in[nin++]);
        Onnx__AttributeProto *attrs[] = {attr_int(e, "transB", 1), NULL};
        if (st == VDNN_OK) node(e, "Gemm", l->name, nin, in, out, attrs);
        rank = 2;
    } else if (!strcmp(type, "add") || !strcmp(type, "concat")) {
        int any2 = 0;
        for (int k = 0; k < l->ninputs; k++) any2 |= e->rank[l->input[k]] == 2;
        for (int k = 0; k < l->ninputs && any2; k++) in[k] = flat_input(e, l, k);
        rank = any2 ? 2 : 4;
        if (!strcmp(type, "concat")) {
            Onnx__AttributeProto *attrs[] = {attr_int(e, "axis", 1), NULL};
            node(e, "Concat", l->name, l->ninputs, in, out, attrs);
        } else {
            node(e, l->ninputs == 2 ? "Add" : "Sum", l->name, l->ninputs, in, out, NULL);
        }
    } else if (!strcmp(type, "softmax")) {
        in[0] = flat_input(e, l, 0);
        Onnx__AttributeProto *attrs[] = {attr_int(e, "axis", 1), NULL};
        node(e, "Softmax", l->name, 1, in, out, attrs);
        rank = 2;
    } else if (!strcmp(type, "logistic")) {
        node(e, "Sigmoid", l->name, 1, in, out, NULL);
    } else if (!strcmp(type, "l2")) {
        node(e, "Identity", l->name, 1, in, out, NULL);
    } else {
        return vdnn_fail(VDNN_EINVAL, "layer %s: ONNX export does not know layers of type [%s]", l->name, type);
    }
    if (st != VDNN_OK) return st;
    e->vname[i + 1] = out;
    e->rank[i + 1] = rank;
    return e->a.failed ? vdnn_fail(VDNN_ENOMEM, "out of memory exporting layer %s", l->name) : VDNN_OK;
}

static Onnx__ValueInfoProto *value_info(ex *e, const char *name, int rank, const int64_t *dims)
{
    Onnx__ValueInfoProto *v = grab(&e->a, sizeof *v);
    Onnx__TypeProto *tp = grab(&e->a, sizeof *tp);
    Onnx__TypeProto__Tensor *tt = grab(&e->a, sizeof *tt);
    Onnx__TensorShapeProto *sp = grab(&e->a, sizeof *sp);
    Onnx__TensorShapeProto__Dimension **dv = grab(&e->a, 4 * sizeof *dv);
    if (!v || !tp || !tt || !sp || !dv) return NULL;
    onnx__value_info_proto__init(v);
    onnx__type_proto__init(tp);
    onnx__type_proto__tensor__init(tt);
    onnx__tensor_shape_proto__init(sp);
    for (int i = 0; i < rank; i++) {
        dv[i] = grab(&e->a, sizeof *dv[i]);
        if (!dv[i]) return NULL;
        onnx__tensor_shape_proto__dimension__init(dv[i]);
        dv[i]->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
        dv[i]->dim_value = dims[i];
    }
    sp->n_dim = (size_t)rank;
    sp->dim = dv;
    tt->has_elem_type = 1;
    tt->elem_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    tt->shape = sp;
    tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
    tp->tensor_type = tt;
    v->name = str(&e->a, "%s", name);
    v->type = tp;
    return v;
}

vdnn_status onnx_export_net(net *n, const char *path, int *out_rank)
{
    ex e = {.n = n};
    vdnn_status st = net_check_drawn(n, path);
    e.vname = grab(&e.a, (size_t)(n->nlayers + 1) * sizeof *e.vname);
    e.rank = grab(&e.a, (size_t)(n->nlayers + 1) * sizeof *e.rank);
    if (!e.vname || !e.rank) st = vdnn_fail(VDNN_ENOMEM, "out of memory exporting %d layers", n->nlayers);
    if (st == VDNN_OK) {
        e.vname[0] = str(&e.a, "data");
        e.rank[0] = 4;
    }
    for (int i = 0; i < n->nlayers && st == VDNN_OK; i++) st = export_layer(&e, i);
    Onnx__ModelProto m = ONNX__MODEL_PROTO__INIT;
    Onnx__GraphProto g = ONNX__GRAPH_PROTO__INIT;
    Onnx__OperatorSetIdProto opset = ONNX__OPERATOR_SET_ID_PROTO__INIT, *opsets[1] = {&opset};
    Onnx__StringStringEntryProto loss = ONNX__STRING_STRING_ENTRY_PROTO__INIT, *props[1] = {&loss};
    Onnx__ValueInfoProto *ins[1] = {NULL}, *outs[1] = {NULL};
    if (st == VDNN_OK) {
        const layer *last = n->layers[n->nlayers - 1];
        int64_t din[4] = {n->input.n, n->input.c, n->input.h, n->input.w};
        int orank = e.rank[n->nlayers];
        int64_t dout[4] = {n->input.n, orank == 2 ? (int64_t)shape_per_item(last->out) : last->out.c, last->out.h,
                           last->out.w};
        ins[0] = value_info(&e, "data", 4, din);
        outs[0] = value_info(&e, e.vname[n->nlayers], orank, dout);
        g.name = str(&e.a, "%s", n->cfg && n->cfg->path[0] ? n->cfg->path : "vdnn");
        g.n_node = e.nodes.n;
        g.node = (Onnx__NodeProto **)e.nodes.p;
        g.n_initializer = e.inits.n;
        g.initializer = (Onnx__TensorProto **)e.inits.p;
        g.n_input = 1;
        g.input = ins;
        g.n_output = 1;
        g.output = outs;
        m.has_ir_version = 1;
        m.ir_version = 7;
        m.producer_name = str(&e.a, "vdnn");
        m.producer_version = str(&e.a, "1");
        opset.domain = str(&e.a, "%s", "");
        opset.has_version = 1;
        opset.version = ONNX_EXPORT_OPSET;
        m.n_opset_import = 1;
        m.opset_import = opsets;
        m.graph = &g;
        if (strcmp(last->ops->type, "softmax")) {
            /* the loss, for import to give it back: the graph computes only its prediction */
            loss.key = str(&e.a, "vdnn.loss");
            loss.value = str(&e.a, "%s %s", last->ops->type, last->name);
            m.n_metadata_props = 1;
            m.metadata_props = props;
        }
        if (e.a.failed) st = vdnn_fail(VDNN_ENOMEM, "out of memory exporting the net");
        else st = onnx_model_write(&m, path);
        if (out_rank) *out_rank = orank;
    }
    for (size_t i = 0; i < e.a.n; i++) free(e.a.p[i]);
    free(e.a.p);
    free(e.nodes.p);
    free(e.inits.p);
    return st;
}
