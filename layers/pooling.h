/* Max and average pooling: the per-type state and the CUDA halves (layers/pooling.cu),
 * shared by the CPU half's ops tables (layers/pooling.c). */
#ifndef VDNN_LAYERS_POOLING_H
#define VDNN_LAYERS_POOLING_H

#include "layers/layer.h"

/* The per-type state (l->priv). Code that builds a pooling fills size, stride and pad at
 * least; the fields after them left 0 take their defaults (size_h = size_w = size,
 * stride_h = stride_w = stride or else the window's side, pad_h = pad_w = pad), and
 * setup writes the window, strides and pads it uses back into them. */
typedef struct pool_params {
    int size;      /* square window side, 1..64 (0 with size_h and size_w, or global) */
    int stride;    /* 0..64; 0: the window's side */
    int pad;       /* zero padding on each side, 0..32, less than the window's side */
    int size_h, size_w;       /* window height, width; with global, the input's */
    int stride_h, stride_w;   /* vertical, horizontal step */
    int pad_h, pad_w;         /* padding above and below, left and right */
    int ceil_mode; /* 1: output sides round up (Caffe, PyTorch ceil_mode): a last partial
                    * window is kept when it starts inside the input or its top/left pad */
    int global;    /* 1: one window over the whole input map, whatever its size */
    int exclude_pad; /* average: 1 divides by the real cells of a window, 0 also counts the
                      * padded ones inside the padded input (PyTorch's count_include_pad) */
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
