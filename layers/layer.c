/* Layer life cycle, parameter allocation and the device dispatch of forward/backward. */
#include "layers/layer.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdnn/rng.h"

static vdnn_status finish_create(layer *l, const cfg_file *f, const cfg_section *s)
{
    vdnn_status st = l->ops->setup(l, f, s);
    if (st != VDNN_OK) return st;
    if (l->out.n != l->in.n || l->out.c < 1 || l->out.h < 1 || l->out.w < 1) {
        if (f && s)
            return cfg_error(f, s, NULL, "output shape %dx%dx%d goes to zero (input %dx%dx%d)",
                             l->out.c, l->out.h, l->out.w, l->in.c, l->in.h, l->in.w);
        return vdnn_fail(VDNN_EINVAL, "%s: output shape %dx%dx%d goes to zero", l->name,
                         l->out.c, l->out.h, l->out.w);
    }
    return VDNN_OK;
}

static vdnn_status alloc_layer(const layer_ops *ops, int index, const shape4 *ins, int nin, layer **out)
{
    for (int k = 0; k < nin; k++) {
        shape4 in = ins[k];
        if (in.n < 1 || in.c < 1 || in.h < 1 || in.w < 1)
            return vdnn_fail(VDNN_EINVAL, "%s: input shape %dx%dx%dx%d is empty", ops->type, in.n,
                             in.c, in.h, in.w);
    }
    layer *l = calloc(1, sizeof *l);
    if (!l) return vdnn_fail(VDNN_ENOMEM, "out of host memory creating a %s layer", ops->type);
    l->ops = ops;
    l->index = index;
    l->ninputs = nin;
    for (int k = 0; k < nin; k++) {
        l->ins[k] = ins[k];
        l->input[k] = index;
    }
    l->in = ins[0];
    l->out = ins[0];
    l->offload = -1;
    for (int p = 0; p < PASS_COUNT; p++) l->algo_pinned[p] = -1;
    snprintf(l->name, sizeof l->name, "%s%d", ops->prefix, index + 1);
    if (ops->priv_bytes) {
        l->priv = calloc(1, ops->priv_bytes);
        if (!l->priv) {
            free(l);
            return vdnn_fail(VDNN_ENOMEM, "out of host memory creating a %s layer", ops->type);
        }
    }
    *out = l;
    return VDNN_OK;
}

/* The count of inputs a type takes: one, or min_inputs..max_inputs. */
static vdnn_status check_inputs(const layer_ops *ops, int nin, const cfg_file *f, const cfg_section *s)
{
    int lo = ops->max_inputs > 1 ? ops->min_inputs : 1, hi = ops->max_inputs > 1 ? ops->max_inputs : 1;
    if (nin >= lo && nin <= hi) return VDNN_OK;
    if (hi == 1) {
        if (f && s) return cfg_error(f, s, "input", "[%s] reads one input, not %d", ops->type, nin);
        return vdnn_fail(VDNN_EINVAL, "%s: reads one input, not %d", ops->type, nin);
    }
    if (f && s) return cfg_error(f, s, "input", "[%s] reads %d to %d inputs, not %d", ops->type, lo, hi, nin);
    return vdnn_fail(VDNN_EINVAL, "%s: reads %d to %d inputs, not %d", ops->type, lo, hi, nin);
}

vdnn_status layer_create(const layer_ops *ops, int index, shape4 in, const cfg_file *f,
                         const cfg_section *s, layer **out)
{
    return layer_create_multi(ops, index, &in, 1, f, s, out);
}

vdnn_status layer_create_multi(const layer_ops *ops, int index, const shape4 *ins, int nin, const cfg_file *f,
                               const cfg_section *s, layer **out)
{
    layer *l = NULL;
    vdnn_status st = check_inputs(ops, nin, f, s);
    if (st == VDNN_OK) st = alloc_layer(ops, index, ins, nin, &l);
    if (st != VDNN_OK) return st;
    if (s) l->line = s->line;
    st = finish_create(l, f, s);
    if (st != VDNN_OK) {
        layer_destroy(l, NULL);
        return st;
    }
    *out = l;
    return VDNN_OK;
}

vdnn_status layer_create_with(const layer_ops *ops, int index, shape4 in,
                              void (*init_priv)(void *priv, const void *arg), const void *arg,
                              layer **out)
{
    layer *l = NULL;
    vdnn_status st = check_inputs(ops, 1, NULL, NULL);
    if (st == VDNN_OK) st = alloc_layer(ops, index, &in, 1, &l);
    if (st != VDNN_OK) return st;
    if (init_priv) init_priv(l->priv, arg);
    st = finish_create(l, NULL, NULL);
    if (st != VDNN_OK) {
        layer_destroy(l, NULL);
        return st;
    }
    *out = l;
    return VDNN_OK;
}

void layer_free_params(layer *l, device *d)
{
    for (int i = 0; i < l->nparams && d; i++) {
        param *p = &l->params[i];
        if (p->value) device_free(d, p->value);
        if (p->grad) device_free(d, p->grad);
        if (p->momentum) device_free(d, p->momentum);
        device_host_free(d, p->host_value);
        device_host_free(d, p->host_grad);
        device_host_free(d, p->host_momentum);
        p->value = p->grad = p->momentum = NULL;
        p->host_value = p->host_grad = p->host_momentum = NULL;
    }
}

int layer_swappable(const layer *l)
{
    for (int i = 0; i < l->nparams; i++)
        if (!l->params[i].trainable) return 0;
    return l->nparams > 0;
}

static void unbind(layer *l)
{
    if (l->gpu && l->ops->unbind_cuda) l->ops->unbind_cuda(l);
    l->gpu = NULL;
    free(l->algos);
    l->algos = NULL;
}

void layer_destroy(layer *l, device *d)
{
    if (!l) return;
    layer_free_params(l, d);
    unbind(l);
    free(l->priv);
    free(l);
}

static void fill_init(const param *p, float *h, size_t count, rng *r)
{
    switch (p->init) {
    case INIT_HE: {
        float sd = sqrtf(2.0f / (float)(p->fan_in > 0 ? p->fan_in : 1));
        for (size_t i = 0; i < count; i++) h[i] = sd * rng_normal(r);
        break;
    }
    case INIT_LINEAR:
    case INIT_XAVIER: {
        float bound = sqrtf((p->init == INIT_XAVIER ? 3.0f : 1.0f) / (float)(p->fan_in > 0 ? p->fan_in : 1));
        for (size_t i = 0; i < count; i++) h[i] = bound * (2.0f * rng_uniform(r) - 1.0f);
        break;
    }
    case INIT_ZERO: memset(h, 0, count * sizeof *h); break;
    case INIT_ONE:
        for (size_t i = 0; i < count; i++) h[i] = 1.0f;
        break;
    }
}

/* Every param's memory, not yet filled: value, and grad and momentum if trainable, from
 * the device pool, or for a swapped layer (host) in host memory (device_host_alloc). */
static vdnn_status place(layer *l, device *d, int host)
{
    for (int i = 0; i < l->nparams; i++) {
        param *p = &l->params[i];
        size_t bytes = shape_count(p->shape) * sizeof(float);
        if (host) {
            p->host_value = device_host_alloc(d, bytes);
            p->host_grad = device_host_alloc(d, bytes);
            p->host_momentum = device_host_alloc(d, bytes);
            if (!p->host_value || !p->host_grad || !p->host_momentum)
                return vdnn_fail(VDNN_ENOMEM, "out of host memory for the swapped %s.%s", l->name, p->name);
            continue;
        }
        char tname[64];
        vdnn_join(tname, sizeof tname, p->name, NULL, NULL);
        vdnn_status st = device_alloc(d, bytes, l->name, tname, (void **)&p->value);
        if (st == VDNN_OK && p->trainable) {
            vdnn_join(tname, sizeof tname, p->name, ".grad", NULL);
            st = device_alloc(d, bytes, l->name, tname, (void **)&p->grad);
            if (st == VDNN_OK) {
                vdnn_join(tname, sizeof tname, p->name, ".momentum", NULL);
                st = device_alloc(d, bytes, l->name, tname, (void **)&p->momentum);
            }
        }
        if (st != VDNN_OK) return st;
    }
    return VDNN_OK;
}

/* Fills the placed params: values per their init from `seed`, gradients and momenta
 * zeroed (nothing to fill on a device that holds no memory). */
static vdnn_status draw(layer *l, device *d, uint64_t seed, int host)
{
    if (device_get_code(d) == DEVICE_CODE_NONE) return VDNN_OK;
    for (int i = 0; i < l->nparams; i++) {
        param *p = &l->params[i];
        size_t count = shape_count(p->shape), bytes = count * sizeof(float);
        rng r;
        rng_seed(&r, rng_hash(seed, (uint64_t)l->index, (uint64_t)i));
        if (host) {
            fill_init(p, p->host_value, count, &r);
            memset(p->host_grad, 0, bytes);
            memset(p->host_momentum, 0, bytes);
            continue;
        }
        float *h = malloc(bytes);
        if (!h) return vdnn_fail(VDNN_ENOMEM, "out of host memory initialising %s.%s", l->name, p->name);
        fill_init(p, h, count, &r);
        vdnn_status st = device_upload(d, p->value, h, bytes);
        free(h);
        if (st == VDNN_OK && p->trainable) st = device_zero(d, p->grad, bytes);
        if (st == VDNN_OK && p->trainable) st = device_zero(d, p->momentum, bytes);
        if (st != VDNN_OK) return st;
    }
    return VDNN_OK;
}

static vdnn_status check_swappable(const layer *l)
{
    if (layer_swappable(l)) return VDNN_OK;
    return vdnn_fail(VDNN_EINVAL, "%s: its parameters cannot be swapped (%s)", l->name,
                     l->nparams ? "its forward pass updates state in them" : "it has none");
}

vdnn_status layer_alloc_params(layer *l, device *d, uint64_t seed)
{
    vdnn_status st = place(l, d, 0);
    return st == VDNN_OK ? draw(l, d, seed, 0) : st;
}

vdnn_status layer_alloc_params_host(layer *l, device *d, uint64_t seed)
{
    vdnn_status st = check_swappable(l);
    if (st == VDNN_OK) st = place(l, d, 1);
    return st == VDNN_OK ? draw(l, d, seed, 1) : st;
}

vdnn_status layer_place_params(layer *l, device *d)
{
    vdnn_status st = l->swap ? check_swappable(l) : VDNN_OK;
    return st == VDNN_OK ? place(l, d, l->swap != SWAP_NONE) : st;
}

size_t layer_param_bytes(const layer *l)
{
    size_t total = 0;
    for (int i = 0; i < l->nparams; i++) {
        const param *p = &l->params[i];
        size_t b = pool_round(shape_count(p->shape) * sizeof(float));
        total += p->trainable ? 3 * b : b;
    }
    return total;
}

/* Pinned algorithms are pinned by name: when the table changes, each pin moves to the
 * algorithm of the same name, and a name the new table lacks is an error. */
static vdnn_status repin(layer *l, char names[PASS_COUNT][40], const char *where)
{
    for (int p = 0; p < PASS_COUNT; p++) {
        l->algo[p] = 0;
        if (l->algo_pinned[p] < 0) continue;
        int found = -1;
        char list[512] = "";
        for (int a = 0; a < layer_algo_count(l, p); a++) {
            if (!strcmp(layer_algo_name(l, p, a), names[p])) found = a;
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", a ? ", " : "", layer_algo_name(l, p, a));
        }
        if (found < 0)
            return vdnn_fail(VDNN_EINVAL, "%s (line %d): the pinned algorithm '%s' is not available on %s; it has: %s",
                             l->name, l->line, names[p], where, list);
        l->algo_pinned[p] = l->algo[p] = found;
    }
    return VDNN_OK;
}

vdnn_status layer_bind(layer *l, device *d)
{
    device_code k = device_get_code(d);
    if (k == DEVICE_CODE_NONE) return VDNN_OK;
    char names[PASS_COUNT][40];
    for (int p = 0; p < PASS_COUNT; p++)
        snprintf(names[p], sizeof names[p], "%s", l->algo_pinned[p] >= 0 ? layer_algo_name(l, p, l->algo_pinned[p]) : "");
    int had_table = l->algos != NULL;
    unbind(l);
    if (k == DEVICE_CODE_CUDA) {
        int multi = l->ops->max_inputs > 1;
        if (multi ? !l->ops->forward_multi_cuda || !l->ops->backward_multi_cuda
                  : !l->ops->forward_cuda || !l->ops->backward_cuda)
            return vdnn_fail(VDNN_EDEVICE, "%s: the %s layer has no CUDA implementation in this build", l->name,
                             l->ops->type);
        vdnn_status st = l->ops->bind_cuda ? l->ops->bind_cuda(l, d) : VDNN_OK;
        if (st != VDNN_OK) {
            unbind(l);
            return vdnn_wrap(st, "%s: setting up its CUDA half", l->name);
        }
    }
    memset(l->algo_failed, 0, sizeof l->algo_failed);   /* a new table, or a new device */
    if (!had_table && !l->algos) return VDNN_OK;
    return repin(l, names, device_describe(d));
}

vdnn_status layer_copy_algos(layer *dst, const layer *src)
{
    free(dst->algos);
    dst->algos = NULL;
    if (!src->algos) return VDNN_OK;
    dst->algos = malloc(sizeof *dst->algos);
    if (!dst->algos) return vdnn_fail(VDNN_ENOMEM, "out of host memory for %s's algorithm table", src->name);
    *dst->algos = *src->algos;
    memcpy(dst->algo_pinned, src->algo_pinned, sizeof dst->algo_pinned);
    memcpy(dst->algo, src->algo, sizeof dst->algo);
    memcpy(dst->algo_failed, src->algo_failed, sizeof dst->algo_failed);
    return VDNN_OK;
}

vdnn_status layer_forward(layer *l, const exec_ctx *c, const float *x, float *y)
{
    if (l->ops->max_inputs > 1)
        return vdnn_fail(VDNN_EINVAL, "%s: a layer of %d inputs called with one", l->name, l->ninputs);
    return layer_forward_n(l, c, &x, y);
}

vdnn_status layer_backward(layer *l, const exec_ctx *c, const float *x, const float *y,
                           const float *dy, float *dx)
{
    if (l->ops->max_inputs > 1)
        return vdnn_fail(VDNN_EINVAL, "%s: a layer of %d inputs called with one", l->name, l->ninputs);
    return layer_backward_n(l, c, &x, y, dy, &dx);
}

static vdnn_status no_half(const layer *l, const device *d)
{
    return vdnn_fail(VDNN_EDEVICE, "%s: the %s layer has no %s implementation in this build", l->name, l->ops->type,
                     device_code_name(device_get_code(d)));
}

vdnn_status layer_forward_n(layer *l, const exec_ctx *c, const float *const *x, float *y)
{
    const layer_ops *o = l->ops;
    int multi = o->max_inputs > 1;
    vdnn_status st;
    switch (device_get_code(c->dev)) {
    case DEVICE_CODE_NONE:
        device_sim_advance(c->dev, layer_cost_s(l, COST_FWD));
        return VDNN_OK;
    case DEVICE_CODE_HOST: {
        double t0 = vdnn_thread_cpu_s();
        st = multi ? o->forward_multi_cpu(l, c, x, y) : o->forward_cpu(l, c, x[0], y);
        device_throttle(c->dev, t0);
        break;
    }
    case DEVICE_CODE_CUDA:
        if (multi ? !o->forward_multi_cuda : !o->forward_cuda) return no_half(l, c->dev);
        st = multi ? o->forward_multi_cuda(l, c, x, y) : o->forward_cuda(l, c, x[0], y);
        break;
    default: return no_half(l, c->dev);
    }
    if (st == VDNN_OK) device_fault_after(c->dev, l->name, "forward");
    return st;
}

vdnn_status layer_backward_n(layer *l, const exec_ctx *c, const float *const *x, const float *y,
                             const float *dy, float *const *dx)
{
    const layer_ops *o = l->ops;
    int multi = o->max_inputs > 1;
    vdnn_status st;
    switch (device_get_code(c->dev)) {
    case DEVICE_CODE_NONE: {
        int any = 0;
        for (int i = 0; i < l->ninputs; i++) any |= dx[i] != NULL;
        device_sim_advance(c->dev, layer_cost_s(l, any ? COST_BWD : COST_BWD_NO_DX));
        return VDNN_OK;
    }
    case DEVICE_CODE_HOST: {
        double t0 = vdnn_thread_cpu_s();
        st = multi ? o->backward_multi_cpu(l, c, x, y, dy, dx) : o->backward_cpu(l, c, x[0], y, dy, dx[0]);
        device_throttle(c->dev, t0);
        break;
    }
    case DEVICE_CODE_CUDA:
        if (multi ? !o->backward_multi_cuda : !o->backward_cuda) return no_half(l, c->dev);
        st = multi ? o->backward_multi_cuda(l, c, x, y, dy, dx) : o->backward_cuda(l, c, x[0], y, dy, dx[0]);
        break;
    default: return no_half(l, c->dev);
    }
    if (st == VDNN_OK) device_fault_after(c->dev, l->name, "backward");
    return st;
}

double layer_cost_s(const layer *l, int what)
{
    const layer_cost *c = l->cost;
    if (!c) return 0;
    const int *a = l->algo;
    switch (what) {
    case COST_FWD: return c->fwd_s[a[PASS_FWD]];
    case COST_BWD: return c->bwd_data_s[a[PASS_BWD_DATA]] + c->bwd_filter_s[a[PASS_BWD_FILTER]];
    case COST_BWD_NO_DX: return l->ops->algo_count ? c->bwd_filter_s[a[PASS_BWD_FILTER]] : c->bwd_data_s[0];
    case COST_UPDATE: return c->update_s;
    case COST_ACCUM: return c->accum_s;
    }
    return 0;
}

int layer_has_search(const layer *l, const device *d)
{
    return device_get_code(d) == DEVICE_CODE_CUDA && l->ops->find_cuda;
}

vdnn_status layer_search(layer *l, const exec_ctx *c, const float *x, float *y, const float *dy, float *dx,
                         double secs[PASS_COUNT][LAYER_MAX_ALGOS])
{
    if (!layer_has_search(l, c->dev)) return vdnn_fail(VDNN_EDEVICE, "%s: no algorithm search on this device", l->name);
    return l->ops->find_cuda(l, c, x, y, dy, dx, secs);
}

param_init layer_weight_init(const cfg_section *s, param_init dflt)
{
    const char *w = s ? cfg_str(s, "init", NULL) : NULL;
    if (!w) return dflt;
    if (!strcmp(w, "pytorch")) return INIT_LINEAR;
    if (!strcmp(w, "xavier")) return INIT_XAVIER;
    return INIT_HE;
}

void layer_declare_param(param *p, const char *name, shape4 shape, param_init init, int fan_in, int trainable,
                         int decay)
{
    snprintf(p->name, sizeof p->name, "%s", name);
    p->shape = shape;
    p->init = init;
    p->fan_in = fan_in;
    p->trainable = trainable;
    p->decay = decay;
}

void layer_describe_inputs(const layer *l, char *buf, size_t len) { snprintf(buf, len, "%d inputs", l->ninputs); }

void layer_input_label(const cfg_section *s, int k, char *buf, size_t len)
{
    snprintf(buf, len, "input %d", k + 1);
    const cfg_kv *kv = s ? cfg_find(s, "input") : NULL;
    const char *p = kv ? kv->value : NULL;
    for (int i = 0; p && i < k; i++) {
        p = strchr(p, ',');
        if (p) p++;
    }
    if (!p) return;
    while (*p == ' ' || *p == '\t') p++;
    size_t n = strcspn(p, ", \t");
    if (n) snprintf(buf, len, "%.*s", (int)n, p);
}

int layer_algo_count(const layer *l, int pass)
{
    if (l->algos) return l->algos->count[pass];
    return l->ops->algo_count ? l->ops->algo_count(l, pass) : 1;
}

static const layer_algo *table_entry(const layer *l, int pass, int algo)
{
    if (!l->algos || pass < 0 || pass >= PASS_COUNT || algo < 0 || algo >= l->algos->count[pass]) return NULL;
    return &l->algos->a[pass][algo];
}

const char *layer_algo_name(const layer *l, int pass, int algo)
{
    if (l->algos) return table_entry(l, pass, algo) ? table_entry(l, pass, algo)->name : "unknown";
    return l->ops->algo_name ? l->ops->algo_name(l, pass, algo) : "default";
}

size_t layer_workspace_bytes(const layer *l, int pass, int algo)
{
    if (l->algos) return table_entry(l, pass, algo) ? table_entry(l, pass, algo)->workspace_bytes : 0;
    return l->ops->workspace_bytes ? l->ops->workspace_bytes(l, l->in.n, pass, algo) : 0;
}

size_t layer_workspace_bytes_at(const layer *l, int n, int pass, int algo)
{
    if (n == l->in.n) return layer_workspace_bytes(l, pass, algo);
    if (l->algos) return SIZE_MAX;
    return l->ops->workspace_bytes ? l->ops->workspace_bytes(l, n, pass, algo) : 0;
}

int layer_algo_deterministic(const layer *l, int pass, int algo)
{
    if (l->algos) return table_entry(l, pass, algo) ? table_entry(l, pass, algo)->deterministic : 0;
    return 1;
}

int layer_pass_runs(const layer *l, int pass) { return !(pass == PASS_BWD_DATA && l->index == 0); }

void layer_table_none(layer_algos *t, int pass)
{
    memset(&t->a[pass][0], 0, sizeof t->a[pass][0]);
    snprintf(t->a[pass][0].name, sizeof t->a[pass][0].name, "none");
    t->a[pass][0].id = -1;
    t->a[pass][0].deterministic = 1;
    t->count[pass] = 1;
}

static const char *const pass_names[PASS_COUNT] = {"forward", "backward-data", "backward-filter"};

/* Algorithms a layer's failure bits cover (LAYER_MAX_ALGOS fit). */
#define ALGO_BITS ((int)(8 * sizeof(unsigned)))

int layer_algo_usable(const layer *l, int pass, int algo)
{
    return algo < 0 || algo >= ALGO_BITS || !(l->algo_failed[pass] >> algo & 1u);
}

int layer_algo_fitting(layer *l, const exec_ctx *c, int pass, layer_need_fn need, void *arg)
{
    size_t given = c->workspace ? c->workspace_bytes : 0, best_bytes = 0;
    int best = -1;
    for (int a = 0; a < layer_algo_count(l, pass); a++) {
        if (!layer_algo_usable(l, pass, a)) continue;
        size_t b = need(l, c, pass, a, arg);
        if (b <= given && (best < 0 || b > best_bytes)) best = a, best_bytes = b;
    }
    return best;
}

vdnn_status layer_algo_failed(layer *l, const exec_ctx *c, int pass, int algo, const char *why, layer_need_fn need,
                              void *arg)
{
    if (algo >= 0 && algo < ALGO_BITS) l->algo_failed[pass] |= 1u << algo;
    int next = layer_algo_usable(l, pass, l->algo[pass]) ? l->algo[pass] : layer_algo_fitting(l, c, pass, need, arg);
    if (next < 0)
        return vdnn_fail(VDNN_EDEVICE, "%s: the %s algorithm '%s' cannot run on this device (%s), and no other fits the "
                         "%zu bytes of workspace given for %d items (--algo mem takes the smallest)", l->name,
                         pass_names[pass], layer_algo_name(l, pass, algo), why, c->workspace ? c->workspace_bytes : 0,
                         c->n);
    vdnn_notice("%s: the %s algorithm '%s' cannot run on this device (%s); '%s' runs instead from now on", l->name,
                pass_names[pass], layer_algo_name(l, pass, algo), why, layer_algo_name(l, pass, next));
    l->algo[pass] = next;
    return VDNN_OK;
}

vdnn_status layer_algo_check(layer *l, const exec_ctx *c, int pass, layer_need_fn need, void *arg)
{
    int a = l->algo[pass];
    if (device_fault_algo(c->dev, l->name, pass_names[pass], layer_algo_name(l, pass, a)) && layer_algo_usable(l, pass, a))
        return layer_algo_failed(l, c, pass, a, "VDNN_FAULTS, a test-only setting", need, arg);
    if (layer_algo_usable(l, pass, a)) return VDNN_OK;
    int next = layer_algo_fitting(l, c, pass, need, arg);
    if (next < 0)
        return vdnn_fail(VDNN_EDEVICE, "%s: the %s algorithm '%s' failed earlier on this device, and no other fits the "
                         "%zu bytes of workspace given", l->name, pass_names[pass], layer_algo_name(l, pass, a),
                         c->workspace ? c->workspace_bytes : 0);
    l->algo[pass] = next;
    return VDNN_OK;
}
