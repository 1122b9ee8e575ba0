/* A net: the config it came from, its chain of layers, and the iteration that runs it
 * on a device.
 *
 * net_load() reads a config file and infers every shape (no device needed: `vdnn info`
 * stops there). net_attach() puts the parameters on a device, from its pool. The
 * iteration allocates every feature map, gradient map and workspace from the pool when
 * it is needed and frees it as soon as its last reader is done:
 *  forward, layer i:  x[i+1] and the workspace come from the pool; in evaluation x[i]
 *                     is freed at once; in training x[i] is kept if a backward pass
 *                     reads it (layer i's needs_input, layer i-1's needs_output);
 *  backward, layer i: dx[i] and the workspace come from the pool; dx[i+1] is freed as
 *                     soon as layer i is done with it, and so is x[i+1]. */
#ifndef VDNN_NET_H
#define VDNN_NET_H

#include <stdint.h>
#include <stdio.h>

#include "data/data.h"
#include "layers/layer.h"
#include "nets/config.h"
#include "vdnn/device.h"

typedef enum { LR_CONST = 0, LR_STEP, LR_COSINE } lr_schedule;

typedef struct train_cfg {
    int epochs;
    double learning_rate;
    double momentum;
    double weight_decay;
    lr_schedule schedule;
    int step_epochs;          /* LR_STEP: multiply by gamma every step_epochs epochs */
    double gamma;
    double min_lr;            /* LR_COSINE: the floor reached at the last epoch */
    uint64_t seed;
} train_cfg;

typedef struct net {
    cfg_file *cfg;            /* owned */
    shape4 input;             /* (N, C, H, W): N is the batch */
    int classes;              /* outputs of the last layer before softmax */
    train_cfg train;
    data_cfg data;
    int nlayers;
    layer **layers;           /* owned */
    device *dev;              /* not owned; set by net_attach */
    uint64_t step;            /* optimizer steps taken */
    float **x;                /* (nlayers + 1) feature maps of the running iteration */
    float **dx;               /* (nlayers + 1) gradient maps */
    int32_t *labels;          /* device, (N) */
    size_t peak_iter_bytes;   /* pool peak over the last iteration */
} net;

/* Overrides from the command line; a field < 0 (or 0 for doubles, NULL for strings)
 * leaves the config's value. */
typedef struct net_overrides {
    int batch;
    int epochs;
    double lr;
    long long seed;
    const char *data_path;
} net_overrides;

net_overrides net_no_overrides(void);

/* Loads and checks a config, applies overrides, builds the layers (shapes only).
 * Every error names FILE:LINE and the key. Free with net_free(). */
vdnn_status net_load(const char *path, const net_overrides *ov, net **out);
/* As net_load, from a string (tests). */
vdnn_status net_parse(const char *text, const char *name, const net_overrides *ov, net **out);
void net_free(net *n);

/* Allocates and initialises every parameter on `d` (from the seed), and the label
 * buffer. The net keeps `d` until net_free(). */
vdnn_status net_attach(net *n, device *d);

/* Sizes, for `info` and the default budget. */
size_t net_param_bytes(const net *n);                 /* values, grads, momenta */
size_t net_max_workspace_bytes(const net *n);         /* over the chosen algorithms */
/* An upper bound of what one training iteration needs from the pool, params included. */
size_t net_train_bytes_bound(const net *n);

typedef struct step_result {
    double loss_sum;          /* summed over the batch */
    int correct;
    int n;
} step_result;

/* One training step on a batch already on the device at x0 (n items, labels in
 * n->labels): forward, backward, SGD update with `lr`. x0 stays owned by the caller. */
vdnn_status net_train_step(net *n, float *x0, int items, double lr, step_result *r);
/* Forward in evaluation mode; adds to r. */
vdnn_status net_eval_batch(net *n, float *x0, int items, step_result *r);

/* The learning rate for `epoch` (0-based) under the schedule. */
double net_lr_at(const train_cfg *t, int epoch);

#endif
