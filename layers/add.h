/* [add]: the element-wise sum of two or more inputs of equal shape (a residual
 * shortcut), and the gradient sum the iteration uses when several layers read one map.
 * The CUDA halves live in layers/add.cu. */
#ifndef VDNN_LAYERS_ADD_H
#define VDNN_LAYERS_ADD_H

#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dst[e] += src[e] for e < count, host memory (the CPU device). */
void add_accumulate_cpu(float *dst, const float *src, size_t count);

vdnn_status add_accumulate_cuda(device *d, float *dst, const float *src, size_t count);
vdnn_status add_forward_cuda(layer *l, const exec_ctx *c, const float *const *x, float *y);
vdnn_status add_backward_cuda(layer *l, const exec_ctx *c, const float *const *x, const float *y,
                              const float *dy, float *const *dx);

#ifdef __cplusplus
}
#endif

#endif
