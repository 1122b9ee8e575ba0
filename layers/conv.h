/* The convolutional layer's public ids: its CPU algorithms, its hyper-parameters, its
 * parameter slots, and the entry points of its CUDA half (layers/conv.cu).
 *
 * Code that builds a convolution without a config file (tests, benchmarks) fills a
 * conv_params through layer_create_with(); code that picks algorithms (the profiler,
 * tests) uses the CONV_ALGO_* ids, which are the same for all three passes. On a CUDA
 * device the algorithms are cuDNN's instead (l->algos, built by conv_bind_cuda). */
#ifndef VDNN_LAYERS_CONV_H
#define VDNN_LAYERS_CONV_H

#include "layers/layer.h"
#include "vdnn/onednn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CPU algorithms, per pass (PASS_FWD, PASS_BWD_DATA, PASS_BWD_FILTER): the project's own
 * (0 .. CONV_ALGO_OWN - 1), then, in a build with oneDNN, the methods oneDNN offers for
 * the layer's shape in that pass, in this order: "onednn" (its direct convolution) and
 * "onednn-winograd" (3x3 unit-stride convolutions, on CPUs it has Winograd kernels for).
 * layer_algo_count() says how many a layer has in each pass, and layer_algo_name()
 * which each is. */
enum {
    CONV_ALGO_DIRECT = 0,        /* plain loops, no workspace */
    CONV_ALGO_IM2COL = 1,        /* im2col of one image + GEMM, per image */
    CONV_ALGO_IM2COL_BATCH = 2,  /* im2col of the whole batch + one GEMM */
    CONV_ALGO_IM2COL_CHUNK = 3,  /* as batch, in chunks of images sized to stay in cache */
    CONV_ALGO_IM2COL_PAR = 4,    /* per image, the images split among the OpenMP threads */
    CONV_ALGO_OWN = 5            /* the project's own; oneDNN's follow */
};

/* The layer's per-type state (l->priv). Code that builds a convolution fills at least
 * filters, size, stride, pad and bias; the fields after them left 0 take their defaults
 * (setup resolves them: size_h = size_w = size, stride_h = stride_w = stride, every pad
 * = pad unless `sides`, dilation 1, groups 1), so after setup every field is explicit. */
typedef struct conv_params {
    int filters;   /* OC, 1..65536, a multiple of groups */
    int size;      /* square kernel side, 1..64; 0 when size_h and size_w are given */
    int stride;    /* 1..64 */
    int pad;       /* zero padding on each side, 0..64 (unless `sides`) */
    int bias;      /* 1: a learned bias per filter */
    int init;      /* the weights' param_init (0: INIT_HE) */
    int size_h, size_w;        /* KH, KW: 1..64 (0: size) */
    int stride_h, stride_w;    /* SH, SW: 1..64 (0: stride) */
    int sides;                 /* 1: the four pads below are given; 0: each is pad */
    int pad_top, pad_bottom, pad_left, pad_right;   /* 0..64 each */
    int dilation_h, dilation_w;   /* spacing of the kernel taps, 1..64 (0: 1) */
    int groups;    /* 1..65536 (0: 1): input and output channels split into this many
                    * groups, filter group g reading only input group g; groups = IC is a
                    * depthwise convolution */
    /* Kept by the layer itself (left 0 by whoever builds it): oneDNN's methods for its
     * shape, found the first time its algorithms are asked for, for the OpenMP thread
     * count onednn_threads (found again when that changes): per pass, how many it
     * offers, which (onednn_method), and the workspace of each at the max batch; and
     * the workspace of each of the project's own algorithms at the max batch. */
    int onednn_threads;
    int onednn_count[PASS_COUNT];
    int onednn_method[PASS_COUNT][ONEDNN_METHODS];
    size_t onednn_bytes[PASS_COUNT][ONEDNN_METHODS];
    size_t own_bytes[PASS_COUNT][CONV_ALGO_OWN];
} conv_params;

/* l->params slots: weights (OC, IC / groups, KH, KW), then bias (OC) when
 * conv_params.bias. */
enum { CONV_WEIGHTS = 0, CONV_BIAS = 1 };

extern const layer_ops conv_ops;

/* The CUDA half (layers/conv.cu), defined only in a build with CUDA; the ops table names
 * them through CUDA_HALF. bind builds l->gpu (cuDNN descriptors) and l->algos (cuDNN's
 * algorithms for this shape); unbind frees l->gpu. */
vdnn_status conv_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y);
vdnn_status conv_backward_cuda(layer *l, const exec_ctx *c, const float *x, const float *y,
                               const float *dy, float *dx);
vdnn_status conv_bind_cuda(layer *l, device *d);
void conv_unbind_cuda(layer *l);
vdnn_status conv_find_cuda(layer *l, const exec_ctx *c, const float *x, float *y, const float *dy, float *dx,
                           double secs[PASS_COUNT][LAYER_MAX_ALGOS]);

#ifdef __cplusplus
}
#endif

#endif
