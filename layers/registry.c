/* The table of layer types. Adding a layer: one file pair in layers/ and one line here. */
#include <string.h>

#include "layers/layer.h"

extern const layer_ops conv_ops, maxpool_ops, avgpool_ops, relu_ops, leaky_ops, tanh_ops,
    sigmoid_ops, clip_ops, connected_ops, batchnorm_ops, dropout_ops, lrn_ops, add_ops, concat_ops, softmax_ops,
    logistic_ops, l2_ops;

static const layer_ops *const table[] = {
    &conv_ops, &maxpool_ops, &avgpool_ops, &relu_ops, &leaky_ops, &tanh_ops, &sigmoid_ops,
    &clip_ops, &connected_ops, &batchnorm_ops, &dropout_ops, &lrn_ops, &add_ops, &concat_ops, &softmax_ops,
    &logistic_ops, &l2_ops, NULL,
};

const layer_ops *layer_find_type(const char *type)
{
    for (int i = 0; table[i]; i++)
        if (strcmp(table[i]->type, type) == 0) return table[i];
    return NULL;
}

const layer_ops *const *layer_types(void) { return table; }
