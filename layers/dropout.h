/* Inverted dropout: the per-type state, the mask's seed tag and the CUDA half
 * (layers/dropout.cu), shared by the CPU half (layers/dropout.c) so that both draw the
 * very same masks. */
#ifndef VDNN_LAYERS_DROPOUT_H
#define VDNN_LAYERS_DROPOUT_H

#include "layers/layer.h"

typedef struct dropout_priv {
    float probability;   /* of dropping an element, [0, 1) */
} dropout_priv;

/* Tags the layer seed so that dropout masks do not coincide with other uses of the
 * net's seed that hash the layer index. */
#define DROPOUT_TAG 0x64726f706f7574ull   /* "dropout" */

#ifdef __cplusplus
extern "C" {
#endif

vdnn_status dropout_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y);
vdnn_status dropout_backward_cuda(layer *l, const exec_ctx *c, const float *x, const float *y,
                                  const float *dy, float *dx);

#ifdef __cplusplus
}
#endif

#endif
