/* oneDNN (Intel's library of deep-learning primitives, Debian's libdnnl-dev) as CPU
 * algorithms: a convolution's three passes through oneDNN's primitives, called on NCHW
 * float32 tensors as every CPU algorithm is (layers/conv.c offers them beside its own).
 *
 * oneDNN computes in layouts of its own choosing (channels blocked by 8 or 16). The
 * reorders to and from them, and oneDNN's scratchpad, are paid inside each call in the
 * workspace the caller gives (onednn_conv_workspace says how much, at a 64-byte aligned
 * address, as the pool's blocks are): what the rest of vdnn sees stays NCHW, and no
 * memory is taken outside the budget. The workspace is not monotone in the batch:
 * Winograd's needs more at some batches below the largest.
 *
 * Primitives are made once per shape, method, pass and thread count and kept for the
 * life of the process (a net has a few shapes; micro-batches add a few batch sizes).
 * Calls from several threads (data-parallel CPU devices) are safe.
 *
 * Reproducibility: for the same shape and thread count oneDNN's CPU primitives give the
 * same bits run after run (they use no atomics); tests/test_conv.c checks it for every
 * method it offers.
 *
 * In a build without oneDNN (Makefile: ONEDNN=0) onednn_built() is 0 and no method is
 * offered. */
#ifndef VDNN_ONEDNN_H
#define VDNN_ONEDNN_H

#include <stddef.h>

#include "vdnn/status.h"

/* A convolution, whole (all groups): input (n, c, h, w), output (n, oc, oh, ow),
 * weights (oc, c / groups, kh, kw), bias (oc) when `bias`. */
typedef struct onednn_conv {
    int n, c, h, w;
    int oc, oh, ow;
    int kh, kw;
    int sh, sw;          /* strides */
    int dh, dw;          /* dilation as vdnn counts it: 1, taps side by side */
    int pt, pb, pl, pr;  /* zero padding: top, bottom, left, right */
    int groups;
    int bias;
} onednn_conv;

/* oneDNN's convolution methods, each a separate algorithm. */
typedef enum { ONEDNN_DIRECT = 0, ONEDNN_WINOGRAD = 1, ONEDNN_METHODS = 2 } onednn_method;

/* The passes, in the order of layers/layer.h's PASS_*. */
typedef enum { ONEDNN_FWD = 0, ONEDNN_BWD_DATA = 1, ONEDNN_BWD_FILTER = 2 } onednn_pass;

/* Whether this build has oneDNN. */
int onednn_built(void);

/* "oneDNN 2.6.3 (OpenMP)", or "" in a build without it. */
void onednn_describe(char *buf, size_t len);

/* The method's name as an algorithm: "onednn", "onednn-winograd". */
const char *onednn_method_name(onednn_method m);

/* Bytes of workspace `m` needs to run `pass` of the convolution with the calling
 * thread's OpenMP thread count, or SIZE_MAX when oneDNN does not offer that method for
 * it (Winograd takes 3x3 unit-stride convolutions only, and only on some CPUs). */
size_t onednn_conv_workspace(const onednn_conv *c, onednn_pass pass, onednn_method m);

/* y = conv(x, w) + b (b NULL without bias). */
vdnn_status onednn_conv_forward(const onednn_conv *c, onednn_method m, const float *x, const float *w,
                                const float *b, float *y, void *ws, size_t ws_bytes);
/* The backward passes with oneDNN's methods filter_m and data_m (an onednn_method, or -1:
 * that pass is not oneDNN's to run): dw = the weights' gradient from x and dy (added to
 * dw when `accumulate`), then dx = the input gradient from dy and w (overwritten). The
 * workspace is the larger of the two passes' (onednn_conv_workspace); the data pass
 * reuses dy as the filter pass reordered it when both want the same layout. */
vdnn_status onednn_conv_backward(const onednn_conv *c, int filter_m, int data_m, const float *x, const float *dy,
                                 const float *w, int accumulate, float *dw, float *dx, void *ws, size_t ws_bytes);

#endif
