/* Data-parallel training (docs/design.md, "Data-parallel training and the manager";
 * docs/parallel.md).
 *
 * A job's devices are those of every rank (vdnn/comm.h) in rank order, each rank's in
 * the order of its --devices list: device 0 is rank 0's first. Each device holds a
 * replica of the net built for its share of the global batch, with its own budget and
 * plan. A step splits the global batch by the shares (device k takes the next s_k items,
 * in the order a single device would see them), runs forward and backward on every
 * device at once (one thread each), and reduces the gradients while backward goes on:
 * as layers finish, their gradients are summed in buckets, in device order (device 0's +
 * device 1's + ... on every rank, whatever the split into ranks), and every replica takes
 * the sum. Then every replica makes the same optimizer step, so the replicas stay equal
 * bit for bit. The loss is the mean over the global batch, so N devices train the same
 * model as one device whose batch is split into micro-batches of the shares' sizes, up
 * to the order of floating-point sums. Batch norm normalises each device's share by its
 * own statistics (as micro-batches do) and its running statistics are averaged over the
 * devices that had items.
 *
 * Shares are equal, fixed weights ("7,3"), or adaptive ("auto": every K steps items move
 * from slow devices to fast ones until their step times even out, with hysteresis; a
 * share may fall to 0 and its device then idles). A share is never more than its
 * device's plan fits in the budget. */
#ifndef VDNN_PARALLEL_H
#define VDNN_PARALLEL_H

#include "nets/net.h"
#include "vdnn/comm.h"
#include "vdnn/split.h"

typedef struct dp_group dp_group;

/* Makes the replica of a device ready to train: plans it (policy, algorithms, copy
 * timing, maybe a micro-batch split) for its budget. It may replace *np by the net
 * rebuilt for micro-batches (attached to the same device). `algos` (one row per layer)
 * are the algorithms of the replica it replaces when a share changed (NULL for the
 * first): measured at the old share, they spare measuring again at the new one. */
typedef vdnn_status (*dp_plan_fn)(void *ctx, net **np, const int (*algos)[PASS_COUNT]);

typedef struct dp_opts {
    const char *devices;      /* this rank's devices, e.g. "cpu,cpu", "cpu:0,cpu:1" (emulated devices,
                               * each its own cores) or "cuda:0,cuda:1" (device_parse_list);
                               * NULL: "cpu" */
    const char *shares;       /* "equal" (NULL), "auto", or one weight per device of the job */
    int share_every;          /* auto: steps between rebalancings (<= 0: 10) */
    size_t bucket_bytes;      /* gradients are reduced in buckets of about this size (0: 4 MiB) */
    device_options dev;       /* what every device is created with (its kind and index come
                               * from `devices`) */
    dp_plan_fn plan;          /* plans each replica; NULL: the net's policy and algorithms */
    void *plan_ctx;
} dp_opts;

/* This rank's replicas of `model` (a loaded net, not attached: its config, overrides
 * and memory settings; it must outlive the group) on its devices, for the shares of a
 * global batch of model->minibatch items. Free with dp_free(). */
vdnn_status dp_create(net *model, comm *c, const dp_opts *o, dp_group **out);
void dp_free(dp_group *g);

/* One optimizer step over `items` (<= the global batch) items in host memory. */
vdnn_status dp_train_step(dp_group *g, const float *x, const int32_t *y, int items, double lr, step_result *r);

/* The replica of this rank's first device: for evaluation and checkpoints (every
 * replica holds the same parameters). */
net *dp_primary(dp_group *g);
int dp_batch(const dp_group *g);
/* Seconds of the last step's gradient reduction that backward did not hide: from the
 * end of the last device's backward to the end of the reduction. */
double dp_exposed_s(const dp_group *g);
int dp_devices(const dp_group *g);    /* of the whole job */
/* The shares of the last step (or of the next, before the first), one per device of
 * the job; owned by the group. */
const int *dp_shares(const dp_group *g);

/* The weights the shares follow, one per device of the job; owned by the group. */
const double *dp_weights(const dp_group *g);
/* Shares in proportion to `weights` (one per device of the job, >= 0, not all 0) from
 * the next step on: a replica whose share of the batch changes is built and planned
 * again for it in its budget, keeping the state every replica shares. Every rank calls
 * it with the same weights before the same step. */
vdnn_status dp_set_weights(dp_group *g, const double *weights);

/* This rank's devices: how many, and the k-th (in its --devices order). */
int dp_local_devices(const dp_group *g);
device *dp_device(const dp_group *g, int k);
/* Seconds each of this rank's devices worked in the last step, on its own clock
 * (device_busy_clock): its forward and backward (0 when it had no items), and its
 * optimizer update. */
void dp_busy(const dp_group *g, double *backprop_s, double *update_s);

/* Copies the parameters, momenta and statistics of the job's device 0 to every replica
 * of every rank, and `step`: after a checkpoint is loaded into rank 0's primary. */
vdnn_status dp_sync(dp_group *g, uint64_t *step);

#endif
