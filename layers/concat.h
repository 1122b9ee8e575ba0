/* [concat]: inputs of equal height and width joined along the channels, in the order
 * listed (an Inception module's or a dense block's join). The CUDA halves live in
 * layers/concat.cu. */
#ifndef VDNN_LAYERS_CONCAT_H
#define VDNN_LAYERS_CONCAT_H

#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

vdnn_status concat_forward_cuda(layer *l, const exec_ctx *c, const float *const *x, float *y);
vdnn_status concat_backward_cuda(layer *l, const exec_ctx *c, const float *const *x, const float *y,
                                 const float *dy, float *const *dx);

#ifdef __cplusplus
}
#endif

#endif
