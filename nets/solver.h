/* The optimizer: SGD with momentum and L2 weight decay, PyTorch's formulation
 *   g' = g + weight_decay * w   (weights only: biases and batch-norm params have no decay)
 *   v  = momentum * v + g'
 *   w  = w - lr * v
 * run on the device that holds the parameters. */
#ifndef VDNN_SOLVER_H
#define VDNN_SOLVER_H

#include "layers/layer.h"

#ifdef __cplusplus
extern "C" {
#endif

vdnn_status solver_update(device *d, param *p, double lr, double momentum, double weight_decay);
/* Every trainable parameter of a layer (on the simulated device: its modelled time). */
vdnn_status solver_update_layer(device *d, layer *l, double lr, double momentum, double weight_decay);
/* A swapped layer's update, on the host copies (host_value/grad/momentum), by CPU
 * threads: the same arithmetic as the CPU device's, so swapping changes no bit. */
vdnn_status solver_update_host(device *d, layer *l, double lr, double momentum, double weight_decay);

/* The device half of solver_update on a CUDA device (nets/solver.cu). */
vdnn_status solver_update_cuda(device *d, param *p, float lr, float momentum, float weight_decay);

#ifdef __cplusplus
}
#endif

#endif
