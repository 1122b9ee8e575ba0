/* One training iteration and one evaluation batch, with every feature map, gradient
 * map and workspace taken from the device pool when needed and returned as soon as its
 * last reader is done (see net.h). */
#include <math.h>
#include <stdio.h>

#include "nets/net.h"
#include "nets/solver.h"

static exec_ctx make_ctx(net *n, int items, int train, step_result *r, double *loss_sum)
{
    exec_ctx c = {0};
    c.dev = n->dev;
    c.n = items;
    c.train = train;
    c.seed = n->train.seed;
    c.step = n->step;
    c.labels = n->labels;
    c.grad_scale = 1.0f / (float)items;
    c.loss_sum = loss_sum;
    c.correct = &r->correct;
    return c;
}

static vdnn_status with_workspace(net *n, layer *l, int pass, exec_ctx *c)
{
    size_t ws = layer_workspace_bytes(l, pass, l->algo[pass]);
    c->workspace = NULL;
    c->workspace_bytes = ws;
    if (!ws) return VDNN_OK;
    return device_alloc(n->dev, ws, l->name, pass == PASS_FWD ? "workspace (forward)" :
                        pass == PASS_BWD_DATA ? "workspace (backward data)" : "workspace (backward filter)",
                        &c->workspace);
}

static void drop(net *n, float **p)
{
    if (*p) device_free(n->dev, *p);
    *p = NULL;
}

/* Does a backward pass read x[j]? Layer j reads its input, layer j-1 its output. */
static int kept_for_backward(const net *n, int j)
{
    return (j < n->nlayers && n->layers[j]->needs_input) || (j > 0 && n->layers[j - 1]->needs_output);
}

static vdnn_status forward(net *n, exec_ctx *c, int train)
{
    for (int i = 0; i < n->nlayers; i++) {
        layer *l = n->layers[i];
        char what[48];
        snprintf(what, sizeof what, "output x[%d]", i + 1);
        vdnn_status st = device_alloc(n->dev, (size_t)c->n * shape_per_item(l->out) * sizeof(float), l->name,
                                      what, (void **)&n->x[i + 1]);
        if (st == VDNN_OK) st = with_workspace(n, l, PASS_FWD, c);
        if (st == VDNN_OK) st = layer_forward(l, c, n->x[i], n->x[i + 1]);
        if (c->workspace) device_free(n->dev, c->workspace);
        if (st != VDNN_OK) return st;
        if (i > 0 && (!train || !kept_for_backward(n, i))) drop(n, &n->x[i]);
    }
    return VDNN_OK;
}

static vdnn_status backward(net *n, exec_ctx *c)
{
    for (int i = n->nlayers - 1; i >= 0; i--) {
        layer *l = n->layers[i];
        vdnn_status st = VDNN_OK;
        if (i > 0) {
            char what[48];
            snprintf(what, sizeof what, "gradient dx[%d]", i);
            st = device_alloc(n->dev, (size_t)c->n * shape_per_item(l->in) * sizeof(float), l->name, what,
                              (void **)&n->dx[i]);
        }
        size_t ws = 0;
        for (int p = PASS_BWD_DATA; p <= PASS_BWD_FILTER && st == VDNN_OK; p++) {
            size_t w = layer_workspace_bytes(l, p, l->algo[p]);
            if (w > ws) ws = w;
        }
        c->workspace = NULL;
        c->workspace_bytes = ws;
        if (st == VDNN_OK && ws) st = device_alloc(n->dev, ws, l->name, "workspace (backward)", &c->workspace);
        if (st == VDNN_OK)
            st = layer_backward(l, c, n->x[i], n->x[i + 1], l->is_loss ? NULL : n->dx[i + 1], n->dx[i]);
        if (c->workspace) device_free(n->dev, c->workspace);
        if (st != VDNN_OK) return st;
        drop(n, &n->dx[i + 1]);
        drop(n, &n->x[i + 1]);
        if (i > 0 && !(n->layers[i - 1]->needs_output)) drop(n, &n->x[i]);
    }
    return VDNN_OK;
}

static void release_all(net *n)
{
    for (int i = 1; i <= n->nlayers; i++) {
        drop(n, &n->x[i]);
        drop(n, &n->dx[i]);
    }
    n->x[0] = NULL;
}

vdnn_status net_train_step(net *n, float *x0, int items, double lr, step_result *r)
{
    double loss = 0;
    r->loss_sum = 0;
    r->correct = 0;
    r->n = items;
    if (items < 1 || items > n->input.n)
        return vdnn_fail(VDNN_EINVAL, "a batch of %d items for a net built for %d", items, n->input.n);
    exec_ctx c = make_ctx(n, items, 1, r, &loss);
    n->x[0] = x0;
    vdnn_status st = forward(n, &c, 1);
    if (st == VDNN_OK && !isfinite(loss))
        st = vdnn_fail(VDNN_ENUMERIC, "the loss is %g at step %llu: training diverged (lower the learning rate?)",
                       loss / items, (unsigned long long)n->step + 1);
    if (st == VDNN_OK) st = backward(n, &c);
    for (int i = 0; i < n->nlayers && st == VDNN_OK; i++)
        for (int p = 0; p < n->layers[i]->nparams && st == VDNN_OK; p++)
            st = solver_update(n->dev, &n->layers[i]->params[p], lr, n->train.momentum, n->train.weight_decay);
    release_all(n);
    n->peak_iter_bytes = pool_peak_bytes(device_pool(n->dev));
    if (st != VDNN_OK) return st;
    r->loss_sum = loss;
    n->step++;
    return VDNN_OK;
}

vdnn_status net_eval_batch(net *n, float *x0, int items, step_result *r)
{
    step_result one = {0};
    double loss = 0;
    if (items < 1 || items > n->input.n)
        return vdnn_fail(VDNN_EINVAL, "a batch of %d items for a net built for %d", items, n->input.n);
    exec_ctx c = make_ctx(n, items, 0, &one, &loss);
    n->x[0] = x0;
    vdnn_status st = forward(n, &c, 0);
    release_all(n);
    if (st != VDNN_OK) return st;
    r->loss_sum += loss;
    r->correct += one.correct;
    r->n += items;
    return VDNN_OK;
}
