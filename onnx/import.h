/* ONNX import: an ONNX CNN's graph as a vdnn config (text, readable, one section per
 * layer named after its ONNX node) and its initializers as the layers' parameters.
 *
 * Every graph value becomes either a constant (an initializer, a Constant node, or a
 * graph input fed by the caller) or one of vdnn's feature maps: the net's input, or a
 * layer's output. Flatten, Reshape, Identity and Dropout-free paths make no layer: vdnn's
 * maps are contiguous NCHW, so they only change the shape ONNX sees. Bias constants
 * added after a Conv or MatMul fold into its layer. What vdnn cannot run exactly (an
 * operator, an attribute value, a shape) is refused with the node's name, operator and
 * the reason, never imported approximately (docs/onnx.md lists what is taken). */
#ifndef VDNN_ONNX_IMPORT_H
#define VDNN_ONNX_IMPORT_H

#include <stdint.h>

#include "nets/net.h"
#include "onnx/model.h"

/* One parameter tensor of one layer, in vdnn's layout. */
typedef struct onnx_param {
    char layer[LAYER_NAME_MAX];
    char name[16];            /* the layer's parameter: weights, bias, gamma, beta, running_mean, ... */
    int64_t count;
    float *data;              /* owned */
} onnx_param;

typedef struct onnx_import_opts {
    const char *source;       /* the model's file, for the config's header */
    int batch;                /* > 0: the batch (for a symbolic first dimension, or to replace the
                               * model's); 0: the model's, 1 where it is symbolic */
    /* Graph inputs after the first that is not an initializer, given as constants in
     * their order (ONNX's test data sets feed weights so: input_1.pb, input_2.pb, ...). */
    int nfeeds;
    const Onnx__TensorProto *const *feeds;
} onnx_import_opts;

typedef struct onnx_import {
    char *cfg;                /* the config text; malloc'd */
    int nparams;
    onnx_param *params;       /* owned */
    int nlayers, nodes;       /* layers written, ONNX nodes read */
    /* Where the graph's output is, once the net runs: the map of the layer with this name
     * ("data": the input), and its ONNX shape. */
    char out_map[LAYER_NAME_MAX];
    int out_rank;
    int64_t out_dims[ONNX_MAX_RANK];
    int64_t in_count;         /* floats of the graph's input (the whole batch) */
    int refused;              /* after an error: 1 when the model is valid but uses what vdnn does not
                               * support (UNSUPPORTED), 0 when it is broken */
} onnx_import;

/* Imports `m`; on error *r says whether it was refused (r->refused) and holds nothing. */
vdnn_status onnx_import_model(const Onnx__ModelProto *m, const onnx_import_opts *o, onnx_import *r);
void onnx_import_free(onnx_import *r);

/* Copies the imported parameters into n (built from r->cfg and attached), checking
 * that every layer has the shape the import computed and every tensor its size. */
vdnn_status onnx_import_load(const onnx_import *r, net *n);

#endif
