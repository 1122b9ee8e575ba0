/* SGD with momentum and weight decay (see solver.h). */
#include "nets/solver.h"

/* Parameters with fewer elements than this (biases, small layers) update on one thread:
 * starting a parallel region would cost more than the loop. */
#define SGD_PAR_MIN ((size_t)1 << 16)

static void sgd_cpu(float *w, const float *g, float *v, size_t count, float lr, float mom, float wd)
{
#pragma omp parallel for if (count >= SGD_PAR_MIN) schedule(static)
    for (size_t i = 0; i < count; i++) {
        float gi = g[i] + wd * w[i];
        v[i] = mom * v[i] + gi;
        w[i] -= lr * v[i];
    }
}

vdnn_status solver_update(device *d, param *p, double lr, double momentum, double weight_decay)
{
    if (!p->trainable) return VDNN_OK;
    float wd = p->decay ? (float)weight_decay : 0.0f;
    switch (device_get_code(d)) {
    case DEVICE_CODE_NONE: return VDNN_OK;
    case DEVICE_CODE_HOST:
        sgd_cpu(p->value, p->grad, p->momentum, shape_count(p->shape), (float)lr, (float)momentum, wd);
        return VDNN_OK;
#ifdef VDNN_CUDA
    case DEVICE_CODE_CUDA: return solver_update_cuda(d, p, (float)lr, (float)momentum, wd);
#endif
    default: return vdnn_fail(VDNN_EDEVICE, "solver: no implementation for this device");
    }
}

vdnn_status solver_update_layer(device *d, layer *l, double lr, double momentum, double weight_decay)
{
    if (device_get_code(d) == DEVICE_CODE_NONE) {
        device_sim_advance(d, layer_cost_s(l, COST_UPDATE));
        return VDNN_OK;
    }
    vdnn_status st = VDNN_OK;
    for (int p = 0; p < l->nparams && st == VDNN_OK; p++)
        st = solver_update(d, &l->params[p], lr, momentum, weight_decay);
    return st;
}

vdnn_status solver_update_host(device *d, layer *l, double lr, double momentum, double weight_decay)
{
    if (device_get_code(d) == DEVICE_CODE_NONE) {
        device_sim_advance(d, layer_cost_s(l, COST_UPDATE));
        return VDNN_OK;
    }
    for (int k = 0; k < l->nparams; k++) {
        param *p = &l->params[k];
        if (!p->trainable) continue;
        float wd = p->decay ? (float)weight_decay : 0.0f;
        sgd_cpu(p->host_value, p->host_grad, p->host_momentum, shape_count(p->shape), (float)lr, (float)momentum, wd);
    }
    return VDNN_OK;
}
