/* The fully connected layer's shared state: its hyper-parameters, its parameter slots,
 * and the entry points of its CUDA half (layers/connected.cu), which reads both. */
#ifndef VDNN_LAYERS_CONNECTED_H
#define VDNN_LAYERS_CONNECTED_H

#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The layer's per-type state (l->priv). */
typedef struct connected_priv {
    int outputs;   /* OUT */
    int bias;      /* has a bias vector */
} connected_priv;

/* l->params slots: weights (OUT, IN), then bias (OUT) when connected_priv.bias. */
enum { FC_WEIGHTS = 0, FC_BIAS = 1 };

extern const layer_ops connected_ops;

/* The CUDA half (layers/connected.cu), defined only in a build with CUDA; the ops table
 * names them through CUDA_HALF. */
vdnn_status connected_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y);
vdnn_status connected_backward_cuda(layer *l, const exec_ctx *c, const float *x, const float *y,
                                    const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
