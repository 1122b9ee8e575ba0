/* The logistic (binary cross-entropy) and L2 loss layers: their CUDA halves
 * (layers/loss.cu), named by the CPU half's ops tables (layers/loss.c). Neither has
 * per-type state: the kind is the ops table's. */
#ifndef VDNN_LAYERS_LOSS_H
#define VDNN_LAYERS_LOSS_H

#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The targets both derive from an item's label, over its D outputs: with D = 1 the
 * label itself (0 or 1), with D > 1 one-hot (1 at the label, 0 elsewhere). */
enum { LOSS_LOGISTIC = 0, LOSS_L2 = 1 };

/* Declares the workspace the per-item losses and the label check need (l->algos). */
vdnn_status logistic_bind_cuda(layer *l, device *d);
vdnn_status l2_bind_cuda(layer *l, device *d);
vdnn_status logistic_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y);
vdnn_status l2_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y);
/* dx = (y - target) * grad_scale for both: y is the sigmoid's output or x itself. */
vdnn_status target_backward_cuda(layer *l, const exec_ctx *c, const float *x, const float *y,
                                 const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
