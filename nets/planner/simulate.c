/* The simulator: one training iteration of a plan replayed on the simulated device,
 * with the profile's costs on its clocks (planner.h); and the measurement of a plan
 * with real iterations, which the simulator's predictions are checked against. */
#include <stdlib.h>
#include <string.h>

#include "nets/planner/planner.h"
#include "vdnn/rng.h"

struct simulator {
    const profile *pr;
    net *m;                   /* a clone of the net, attached to `d` per run */
    device *d;
    long runs;
    size_t used_peak;         /* the last run's high-water mark of bytes in use */
};

vdnn_status sim_create(const net *n, const profile *pr, simulator **out)
{
    *out = NULL;
    if (pr && (pr->nlayers != n->nlayers || pr->batch != n->input.n))
        return vdnn_fail(VDNN_EINVAL, "the profile is of a net of %d layers at batch %d, not %d layers at batch %d",
                         pr->nlayers, pr->batch, n->nlayers, n->input.n);
    simulator *s = calloc(1, sizeof *s);
    if (!s) return vdnn_fail(VDNN_ENOMEM, "out of host memory for the simulator");
    s->pr = pr;
    vdnn_status st = net_clone(n, &s->m);
    if (st != VDNN_OK) {
        free(s);
        return st;
    }
    s->m->sync_layers = n->sync_layers;
    for (int i = 0; pr && i < s->m->nlayers; i++) s->m->layers[i]->cost = &pr->layers[i];
    *out = s;
    return VDNN_OK;
}

void sim_destroy(simulator *s)
{
    if (!s) return;
    net_free(s->m);
    device_destroy(s->d);
    free(s);
}

long sim_runs(const simulator *s) { return s->runs; }
size_t sim_used_peak(const simulator *s) { return s->used_peak; }

vdnn_status sim_run(simulator *s, const plan *p, double *time_s, size_t *peak_bytes)
{
    /* A fresh pool per run: the pool's state after an iteration is not its state before
     * the first (the parameters were allocated into an empty pool). */
    net_detach(s->m);
    device_destroy(s->d);
    s->d = NULL;
    device_options o = {.kind = DEVICE_SIM, .budget_bytes = (size_t)1 << 50};
    vdnn_status st = device_create(&o, &s->d);
    /* swapping decides where the parameters are placed: before attaching */
    for (int i = 0; st == VDNN_OK && i < s->m->nlayers && p->swap && i < p->nlayers; i++) s->m->layers[i]->swap = p->swap[i];
    s->m->policy = POLICY_NONE;   /* the plan's swaps, not a config's `policy = swap` */
    if (st == VDNN_OK) st = net_attach(s->m, s->d);
    if (st == VDNN_OK) st = plan_apply(s->m, p);
    if (st != VDNN_OK) return st;
    sim_model model = {0};
    if (s->pr) {
        model.h2d_bytes_per_s = s->pr->h2d_bytes_per_s;
        model.d2h_bytes_per_s = s->pr->d2h_bytes_per_s;
        model.copy_latency_s = s->pr->copy_latency_s;
    }
    device_sim_set_model(s->d, &model);
    st = net_replay(s->m, s->m->minibatch, time_s);
    s->runs++;
    *peak_bytes = pool_frontier_peak(device_pool(s->d));
    s->used_peak = pool_live_peak(device_pool(s->d));
    return st;
}

/* ---- real iterations ---- */

/* Value, gradient or momentum (which = 0, 1, 2): the device copy, or for a swapped
 * layer the host master copy (*swapped set). */
static float *param_field(param *pm, int which, int *swapped)
{
    float *host = which == 0 ? pm->host_value : which == 1 ? pm->host_grad : pm->host_momentum;
    *swapped = host != NULL;
    if (host) return host;
    return which == 0 ? pm->value : which == 1 ? pm->grad : pm->momentum;
}

/* Copies every parameter, gradient and momentum to host memory (take) or back (give). */
static vdnn_status move_params(net *n, float **host, int take)
{
    vdnn_status st = VDNN_OK;
    for (int i = 0; i < n->nlayers && st == VDNN_OK; i++)
        for (int p = 0; p < n->layers[i]->nparams && st == VDNN_OK; p++)
            for (int w = 0; w < 3 && st == VDNN_OK; w++) {
                param *pm = &n->layers[i]->params[p];
                int swapped = 0;
                float *at = param_field(pm, w, &swapped);
                float **h = &host[(i * LAYER_MAX_PARAMS + p) * 3 + w];
                size_t bytes = shape_count(pm->shape) * sizeof(float);
                if (!at) continue;
                if (take) {
                    *h = malloc(bytes);
                    if (!*h) st = vdnn_fail(VDNN_ENOMEM, "out of host memory saving the parameters");
                    else if (swapped) memcpy(*h, at, bytes);
                    else st = device_download(n->dev, *h, at, bytes);
                } else if (*h) {
                    if (swapped) memcpy(at, *h, bytes);
                    else st = device_upload(n->dev, at, *h, bytes);
                }
            }
    return st;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static vdnn_status timed_steps(net *n, int iters, double *median_s)
{
    size_t count = (size_t)n->minibatch * shape_per_item(n->input);
    float *x = malloc(count * sizeof *x);
    int32_t *y = malloc((size_t)n->minibatch * sizeof *y);
    double *t = malloc((size_t)(iters + 1) * sizeof *t);
    vdnn_status st = x && y && t ? VDNN_OK : vdnn_fail(VDNN_ENOMEM, "out of host memory for a measuring batch");
    rng r;
    rng_seed(&r, 12345);
    for (size_t k = 0; x && k < count; k++) x[k] = rng_normal(&r);
    for (int k = 0; y && k < n->minibatch; k++) y[k] = (int32_t)(rng_next(&r) % (uint64_t)n->classes);
    for (int k = 0; k <= iters && st == VDNN_OK; k++) {
        step_result res;
        double t0 = vdnn_now_s();
        st = net_train_step(n, x, y, n->minibatch, 0.0, &res);
        t[k] = vdnn_now_s() - t0;
    }
    if (st == VDNN_OK) {
        qsort(t + 1, (size_t)iters, sizeof *t, cmp_double);   /* the first is a warm-up */
        *median_s = t[1 + iters / 2];
    }
    free(x);
    free(y);
    free(t);
    return st;
}

vdnn_status plan_measure(net *n, plan *p, int iters)
{
    if (!n->dev) return vdnn_fail(VDNN_EINVAL, "measuring a plan needs the net on a device");
    if (iters < 1) iters = 1;
    plan saved;
    vdnn_status st = plan_from_net(n, &saved);
    if (st != VDNN_OK) return st;
    size_t slots = (size_t)n->nlayers * LAYER_MAX_PARAMS * 3;
    float **host = calloc(slots, sizeof *host);
    uint64_t step = n->step;
    mm_stats stats = n->stats;
    st = host ? move_params(n, host, 1) : vdnn_fail(VDNN_ENOMEM, "out of host memory saving the parameters");
    if (st == VDNN_OK) st = plan_apply(n, p);
    if (st == VDNN_OK) st = timed_steps(n, iters, &p->measured_s);
    vdnn_status back = plan_apply(n, &saved);
    if (host && back == VDNN_OK) back = move_params(n, host, 0);
    for (size_t k = 0; host && k < slots; k++) free(host[k]);
    free(host);
    plan_free(&saved);
    n->step = step;
    n->stats = stats;
    pool_reset_peak(device_pool(n->dev));
    return st != VDNN_OK ? st : back;
}
