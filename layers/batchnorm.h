/* Batch normalisation: the per-type state, the parameter slots and the CUDA half
 * (layers/batchnorm.cu), shared by the CPU half (layers/batchnorm.c). */
#ifndef VDNN_LAYERS_BATCHNORM_H
#define VDNN_LAYERS_BATCHNORM_H

#include "layers/layer.h"

typedef struct bn_priv {
    float momentum;   /* weight of the batch statistic in the running update, [0, 1] */
    float eps;        /* added to the variance, (0, 1] */
} bn_priv;

/* l->params slots, each (C, 1, 1, 1). */
enum { BN_GAMMA = 0, BN_BETA, BN_MEAN, BN_VAR, BN_NPARAMS };

#ifdef __cplusplus
extern "C" {
#endif

/* Keeps cuDNN tensor descriptors in l->gpu. */
vdnn_status bn_bind_cuda(layer *l, device *d);
void bn_unbind_cuda(layer *l);
vdnn_status bn_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y);
vdnn_status bn_backward_cuda(layer *l, const exec_ctx *c, const float *x, const float *y,
                             const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
