/* The activation layers (relu, leaky, tanh, sigmoid, clip): leaky relu's and clip's
 * per-type state and
 * the CUDA halves (layers/activation.cu), shared by the CPU half's ops tables. */
#ifndef VDNN_LAYERS_ACTIVATION_H
#define VDNN_LAYERS_ACTIVATION_H

#include "layers/layer.h"

typedef struct leaky_priv {
    float slope;   /* y = slope * x for x <= 0, in [0, 1) */
} leaky_priv;

typedef struct clip_priv {
    float lo, hi;  /* y = min(max(x, lo), hi), lo < hi; ReLU6 is lo 0, hi 6 */
} clip_priv;

#ifdef __cplusplus
extern "C" {
#endif

/* relu, tanh and sigmoid keep a cuDNN activation descriptor in l->gpu. */
vdnn_status relu_bind_cuda(layer *l, device *d);
vdnn_status tanh_bind_cuda(layer *l, device *d);
vdnn_status sigmoid_bind_cuda(layer *l, device *d);
void act_unbind_cuda(layer *l);

vdnn_status relu_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y);
vdnn_status relu_backward_cuda(layer *l, const exec_ctx *c, const float *x, const float *y,
                               const float *dy, float *dx);
vdnn_status leaky_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y);
vdnn_status leaky_backward_cuda(layer *l, const exec_ctx *c, const float *x, const float *y,
                                const float *dy, float *dx);
vdnn_status tanh_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y);
vdnn_status tanh_backward_cuda(layer *l, const exec_ctx *c, const float *x, const float *y,
                               const float *dy, float *dx);
vdnn_status clip_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y);
vdnn_status clip_backward_cuda(layer *l, const exec_ctx *c, const float *x, const float *y,
                               const float *dy, float *dx);
vdnn_status sigmoid_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y);
vdnn_status sigmoid_backward_cuda(layer *l, const exec_ctx *c, const float *x, const float *y,
                                  const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
