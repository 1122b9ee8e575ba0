/* Max and average pooling: the per-type state and the CUDA halves (layers/pool.cu),
 * shared by the CPU half's ops tables (layers/pool.c). */
#ifndef VDNN_LAYERS_POOL_H
#define VDNN_LAYERS_POOL_H

#include "layers/layer.h"

typedef struct pool_params {
    int size;     /* window side, 1..64 */
    int stride;   /* 1..64 */
    int pad;      /* 0..32, < size */
} pool_params;

#ifdef __cplusplus
extern "C" {
#endif

vdnn_status maxpool_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y);
vdnn_status maxpool_backward_cuda(layer *l, const exec_ctx *c, const float *x, const float *y,
                                  const float *dy, float *dx);
vdnn_status avgpool_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y);
vdnn_status avgpool_backward_cuda(layer *l, const exec_ctx *c, const float *x, const float *y,
                                  const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
