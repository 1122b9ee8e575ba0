/* The loss layer (softmax with cross-entropy): its CUDA half (layers/softmax.cu), named
 * by the CPU half's ops table (layers/softmax.c). It has no per-type state. */
#ifndef VDNN_LAYERS_SOFTMAX_H
#define VDNN_LAYERS_SOFTMAX_H

#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Keeps a cuDNN tensor descriptor in l->gpu and declares the workspace that the per-item
 * losses and the label check need (l->algos). */
vdnn_status softmax_bind_cuda(layer *l, device *d);
void softmax_unbind_cuda(layer *l);
vdnn_status softmax_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y);
vdnn_status softmax_backward_cuda(layer *l, const exec_ctx *c, const float *x, const float *y,
                                  const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
