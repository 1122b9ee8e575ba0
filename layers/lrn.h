/* Local response normalisation: the per-type state and the CUDA half (layers/lrn.cu),
 * shared by the CPU half (layers/lrn.c). */
#ifndef VDNN_LAYERS_LRN_H
#define VDNN_LAYERS_LRN_H

#include "layers/layer.h"

#define LRN_MAX_SIZE 15

typedef struct lrn_priv {
    int size;      /* channels in the window, odd, 1..LRN_MAX_SIZE */
    float alpha;   /* scale of the window's mean square */
    float beta;    /* exponent */
    float k;       /* additive constant, > 0 so that s never reaches 0 */
} lrn_priv;

#ifdef __cplusplus
extern "C" {
#endif

/* Keeps cuDNN's LRN descriptor in l->gpu when the parameters lie in cuDNN's ranges;
 * l->gpu stays NULL otherwise and the layer runs its own kernels. */
vdnn_status lrn_bind_cuda(layer *l, device *d);
void lrn_unbind_cuda(layer *l);
vdnn_status lrn_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y);
vdnn_status lrn_backward_cuda(layer *l, const exec_ctx *c, const float *x, const float *y,
                              const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
