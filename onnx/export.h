/* ONNX export: an attached net's layers and parameters as an ONNX inference graph
 * (opset 13): batch norm with its running statistics, dropout left out, the loss as what
 * the net predicts (softmax probabilities; a logistic loss's sigmoid; an L2 loss's
 * output as it is), initializers named LAYER.PARAM. Importing the file gives back the
 * same layers and the same parameters, bit for bit (docs/onnx.md). */
#ifndef VDNN_ONNX_EXPORT_H
#define VDNN_ONNX_EXPORT_H

#include "nets/net.h"

#define ONNX_EXPORT_OPSET 13

/* Writes n (attached: its parameters are read from its device) to `path`; *out_rank
 * (when not NULL): the rank of the graph's output, 2 (N, features) or 4 (N, C, H, W). */
vdnn_status onnx_export_net(net *n, const char *path, int *out_rank);

#endif
