/* A net: the config it came from, its layers and the maps between them, and the
 * iteration that runs it on a device under a memory policy.
 *
 * Maps: x[0] is the net's input and x[i + 1] layer i's output. Layer i reads the maps
 * l->input[0..ninputs): the previous layer's output unless its section says `input =`
 * (a shortcut, or the inputs of [add]/[concat]). File order is a topological order, so
 * a chain is the case where layer i reads x[i]. What follows says "layer i reads x[i]"
 * for a chain; on any net read "the maps layer i reads".
 *
 * net_load() reads a config file and infers every shape (no device needed: `vdnn info`
 * stops there). net_attach() puts the parameters on a device, from its pool. The
 * iteration (nets/iteration.c) takes every feature map, gradient map and workspace from
 * the pool when it is needed and returns it as soon as its last reader is done, and
 * offloads/prefetches feature maps as the policy says (docs/design.md, "The iteration"):
 *  forward, layer i:  x[i] is on the device; if the plan offloads x[i], its copy to host
 *                     starts on the memory stream and overlaps layer i's compute; x[i+1]
 *                     and the workspace come from the pool; after the layer, x[i] is
 *                     released (after its copy, if offloaded) unless backward reads it
 *                     from the device;
 *  backward, layer i: the next offloaded map an earlier layer needs is prefetched first;
 *                     layer i waits on events for its own inputs only; dx[i] and the
 *                     workspace come from the pool; dx[i+1] and x[i+1] are freed as soon
 *                     as layer i is done with them. */
#ifndef VDNN_NET_H
#define VDNN_NET_H

#include <stdint.h>
#include <stdio.h>

#include "data/data.h"
#include "layers/layer.h"
#include "vdnn/config.h"
#include "vdnn/device.h"
#include "vdnn/memory_manager.h"
#include "vdnn/trace.h"

/* Which feature maps leave the device between forward and backward, and where the
 * parameters live: none keeps everything; all offloads every map backward reads; conv
 * the inputs of convolutions; swap offloads every map and keeps every swappable layer's
 * parameters in host memory; recompute drops the outputs of the cheap layers (no
 * parameters, or batch norm) whose input backward keeps anyway, and computes them
 * again in backward. */
typedef enum { POLICY_NONE = 0, POLICY_ALL, POLICY_CONV, POLICY_SWAP, POLICY_RECOMPUTE, POLICY_COUNT } mem_policy;
/* What happens to a feature map between its forward and its backward readers. */
enum { MAP_KEEP = 0, MAP_OFFLOAD = 1, MAP_RECOMPUTE = 2 };
/* How far ahead backward prefetches: to the next layer that reads an offloaded map
 * however far (vDNN's rule), to the next layer only, or not at all (each layer fetches
 * its own inputs and waits). Farther overlaps more and holds maps longer. */
enum { PREFETCH_ON_DEMAND = 0, PREFETCH_NEXT = 1, PREFETCH_FAR = 2 };

/* How in-place layers (net_in_place) run: not at all; in place, an input's gradient
 * written over the output's gradient; or over the output itself where backward reads
 * the output last (relu, tanh, ...: its block is then free at once). All three compute
 * the same bits at the same speed; first fit packs each differently, so the budget
 * functions try each (most in place first) and keep the first that fits. */
enum { IN_PLACE_OFF = 0, IN_PLACE_OVER_GRAD = 1, IN_PLACE_OVER_OUTPUT = 2 };

/* Which convolution algorithm each pass uses: fastest measured, or smallest workspace. */
typedef enum { ALGO_PERF = 0, ALGO_MEM, ALGO_MODE_COUNT } algo_mode;

const char *policy_name(mem_policy p);
const char *algo_mode_name(algo_mode a);

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
    int given;                /* the config has a [train] section; without one the values
                               * above are defaults, enough to describe and plan the net */
} train_cfg;

/* The data path that stands for synthetic data of the net's own shape and classes
 * (--data synthetic): eight batches to train on, one to test, whatever [data] says. */
#define NET_DATA_SYNTHETIC "synthetic"

typedef struct net_overrides {
    int batch;
    int micro_batch;          /* items per forward/backward; the batch is split (0: no split) */
    int epochs;
    double lr;
    long long seed;
    const char *data_path;    /* NET_DATA_SYNTHETIC: synthetic data of the net's shape */
    int in_place;             /* 1 or 0: run in-place layers in place or not; < 0: the config's */
} net_overrides;

/* What the net's graph says of one map x[j]: who reads it in forward and in backward,
 * and whether backward computes its gradient. */
typedef struct net_map {
    int first_fwd, last_fwd;  /* the first and last layer whose forward reads it; -1: none
                               * (only the loss output) */
    int readers;              /* layers whose forward reads it */
    int first_bwd, last_bwd;  /* the first and last layer, counting backward, whose backward
                               * reads it (a reader needing its input, or the layer that
                               * wrote it needing its output); -1: none */
    int grad;                 /* backward computes its gradient: a layer up to it has
                               * trainable parameters (never x[0]) */
} net_map;

/* What the first micro-batch of a training step holds at points of its work: the bytes
 * of the pool's blocks not yet freed (freed blocks waiting for a copy not counted) once
 * each layer's forward and backward took their buffers (the maps fetched ahead too), and
 * before each one's workspace, with the largest workspace the pool could then give
 * below `cap` (pool_room); and the backward layer during whose step each offloaded map
 * came back. The planner's simulator asks for it (net.probe) to bound what changes of a
 * plan hold (nets/planner/bounds.c). */
typedef struct net_probe {
    size_t *fwd_held;         /* (nlayers) */
    size_t *bwd_held;         /* (nlayers) */
    size_t *fwd_ws_at;        /* (nlayers) */
    size_t *bwd_ws_at;        /* (nlayers) */
    size_t *fwd_ws_room;      /* (nlayers) */
    size_t *bwd_ws_room;      /* (nlayers) */
    size_t cap;               /* 0: the pool's capacity */
    int *fetched_in;          /* (nlayers + 1) -1: not brought back */
    int on;                   /* the iteration records (its first micro-batch) */
    int layer;                /* the backward layer under way */
} net_probe;

typedef struct net {
    cfg_file *cfg;            /* owned unless cfg_borrowed (a clone) */
    int cfg_borrowed;
    net_overrides ov;         /* as given to net_load (data_path is not kept) */
    shape4 input;             /* (N, C, H, W): N is the items of one forward/backward (the
                               * micro-batch when split, else the batch) */
    int minibatch;            /* items per optimizer step (the config's batch) */
    int micro;                /* micro-batch size when the batch is split, else 0 */
    int classes;              /* outputs of the last layer before softmax */
    train_cfg train;
    data_cfg data;
    int nlayers;
    layer **layers;           /* owned */
    net_map *graph;           /* (nlayers + 1), per map; owned */
    int chain;                /* every layer reads the previous one's output only */
    mem_policy policy;        /* [memory] policy or --policy */
    int dyn;                  /* policy dyn: the planner (nets/planner/planner.h) chooses the plan */
    algo_mode algo;           /* [memory] algo or --algo */
    size_t budget_bytes;      /* [memory] budget or --budget; 0: enough for the net */
    int may_in_place;         /* [memory] in_place or --in-place (default 1): layers whose ops
                               * allow it may run in place where nothing else reads the map
                               * they overwrite (net_in_place) */
    int in_place;             /* how they run in the iteration now (IN_PLACE_*): the first
                               * whose minimum fits the budget (net_fit_budget), or a plan's */
    int sync_layers;          /* vDNN's original per-layer barrier on both streams */
    int plan_only;            /* attach places the parameters without drawing them
                               * (layer_place_params): the net is only planned, and it
                               * refuses to run or be saved (net_check_drawn) */
    int prefetch_ahead;       /* PREFETCH_FAR (vDNN), PREFETCH_NEXT or PREFETCH_ON_DEMAND */
    int release_lag;          /* layers an offloaded map's memory waits for its copy before reuse */
    device *dev;              /* not owned; set by net_attach */
    uint64_t step;            /* optimizer steps taken */
    fmap *maps;               /* (nlayers + 1) feature maps x[i] with residency and plan */
    float **dx;               /* (nlayers + 1) gradient maps (the sum of every reader's part) */
    int *release_head;        /* (nlayers) the first map dropped after layer i's backward, -1 none */
    int *release_next;        /* (nlayers + 1) the next map dropped after the same layer */
    int *fetch_order;         /* (nlayers + 1) offloaded maps by first_bwd, last reader first */
    unsigned char *fwd_in_place; /* (nlayers) layer i's output takes its input's block under the
                               * plan the net runs now (net_in_place, and nothing recomputes or
                               * offloads the input) */
    int nfetch;
    dev_event **wev;          /* (nlayers) swapped layers: their parameters' copy to the device */
    dev_event **gev;          /* (nlayers) swapped layers: their gradients' copy to the host */
    double update_lr;         /* during the last micro-batch of a step: its learning rate, for the
                               * SWAP_DEVICE layers updated right after their backward; else < 0 */
    int grads_final;          /* during the last micro-batch of a step */
    /* Called in backward once layer i's parameter gradients are final (data-parallel
     * training reduces them while backward goes on), with an event that completes when
     * they are written; the callee owns the event. NULL: nobody asks. */
    vdnn_status (*grads_ready)(void *ctx, int layer, dev_event *ev);
    void *grads_ctx;
    int32_t *labels;          /* device, (N) */
    size_t peak_iter_bytes;   /* pool high-water mark so far */
    mm_stats stats;           /* offloaded/prefetched bytes and copy waits, cumulative */
    trace *trace;             /* not owned; NULL: no trace */
    int tap_map;              /* net_predict: the map forward copies to tap_out (host), when set */
    float *tap_out;
    net_probe *probe;         /* not owned; NULL (but for one of the simulator's replays) */
} net;

/* Overrides from the command line (net_overrides above); a field < 0 (or 0 for doubles,
 * NULL for strings) leaves the config's value. */
net_overrides net_no_overrides(void);

/* Loads and checks a config, applies overrides (ov NULL: none), builds the layers
 * (shapes only). Every error names FILE:LINE and the key. Free with net_free(). */
vdnn_status net_load(const char *path, const net_overrides *ov, net **out);
/* As net_load, from a string (tests). */
vdnn_status net_parse(const char *text, const char *name, const net_overrides *ov, net **out);
void net_free(net *n);
/* A second net of the same config and overrides, sharing n's config (n must outlive
 * it), with no device: for replaying n's iteration on a simulated device. */
vdnn_status net_clone(const net *n, net **out);
/* As net_clone, built for micro-batches of `micro` items (0: the whole batch). */
vdnn_status net_clone_micro(const net *n, int micro, net **out);

/* A net of n's config, overrides and memory settings (policy, algorithm mode, budget)
 * built for a batch of `batch` items in micro-batches of `micro` (0: no split), sharing
 * n's config (n must outlive it), with no device: a data-parallel replica. */
vdnn_status net_clone_batch(const net *n, int batch, int micro, net **out);

/* The same net (config, overrides, command-line settings) built for micro-batches of
 * `micro` items (0: no split). n must be detached. The new net takes over n's config
 * and n keeps a borrowed reference: free n, and use the new net in its place. */
vdnn_status net_remake(net *n, int micro, net **out);

/* Allocates and initialises every parameter on `d` (from the seed), and the label
 * buffer, and plans with the config's policy and mode (net_plan_static). The net keeps
 * `d` until net_detach() or net_free(). */
vdnn_status net_attach(net *n, device *d);
/* net_attach() without the plan: for a caller that applies one of its own at once
 * (plan_apply; the simulator attaches for thousands of plans). */
vdnn_status net_attach_unplanned(net *n, device *d);
/* Places the parameters of layers from.. (and the label buffer) again, as their swap
 * flags now say, on a net attached with nothing else on its device (between steps):
 * the device's pool is then as attaching the net with these flags leaves a fresh one,
 * its high-water marks included (the simulator tries many placements of one net). On
 * failure (the device held more) the net is to be detached. */
vdnn_status net_replace_params(net *n, int from);
/* Returns everything the net holds on its device (parameters, host buffers). */
void net_detach(net *n);
/* VDNN_EINVAL, naming `what`, when the net's parameters hold no values (plan_only). */
vdnn_status net_check_drawn(const net *n, const char *what);

/* Sets the policy and plans which maps to offload (per-layer `offload=` overrides win)
 * and each convolution's algorithm per pass for the mode (per-layer `algo` overrides
 * win) without measuring: perf takes the largest-workspace algorithms, mem the
 * smallest. net_attach() applies it with the config's policy and mode; the planner's
 * net_plan (nets/planner/planner.h) measures perf's algorithms on the device. */
vdnn_status net_plan_static(net *n, mem_policy p, algo_mode a);
/* Each convolution pass's algorithm for the mode without measuring (per-layer pins
 * win): mem the smallest workspace, perf the largest. */
void net_pick_algos(net *n, algo_mode a);
/* Sets a map's offload and recompute flags from a MAP_* (net_policy_map). */
void net_set_map(fmap *m, int what);

/* The `offload =` of x[j]'s readers: -1 none, 0 keep, 1 offload. */
int net_map_override(const net *n, int j);
/* What policy p does with x[j] (MAP_*); a layer's `offload =` override wins. */
int net_policy_map(const net *n, int j, mem_policy p);
/* Whether policy p swaps layer i's parameters. */
int net_policy_swaps(const net *n, int i, mem_policy p);
/* Whether x[j] may be dropped and recomputed: a backward pass reads it, it is not the
 * input or the loss output, and the layer that computes it is not swapped (`swap`: per
 * layer swap flags, NULL: the layers' own). Recomputation runs the layer that wrote
 * x[j] again, after recomputing those of its inputs that are dropped too, back to the
 * nearest kept maps; none of those layers may be swapped either (net_recompute_runs_swapped). */
int net_recomputable(const net *n, int j, const unsigned char *swap);
/* For every map x[j], in bad[j] (nlayers + 1 entries): the index of a swapped layer
 * (`swap` per layer) that recomputing x[j] would run again under the map decisions
 * `maps` (MAP_*, per map), or -1 when there is none. Where several would, the one a
 * depth-first walk meets first: x[j]'s own layer, then its inputs in order. One pass
 * over the net, whatever its depth. */
void net_recompute_runs_swapped(const net *n, const unsigned char *maps, const unsigned char *swap, int *bad);

/* Whether layer i may write its output over its input x[j] in forward: n->in_place is on,
 * its ops allow it (layers/layer.h), x[j] is a layer's output (not the net's input),
 * layer i is the last layer whose forward reads it, and no backward pass reads it. A
 * plan that offloads or recomputes x[j], or recomputes a map from it, keeps x[j] apart
 * (fwd_in_place). In backward the layer writes its input's gradient over its output's
 * gradient (IN_PLACE_OVER_GRAD), or over its output when it reads it and that is the
 * output's last use (IN_PLACE_OVER_OUTPUT), whenever its input's gradient is new there
 * (it is the first of that map's readers in backward), in place or not in forward. */
int net_in_place(const net *n, int i);

/* The input of layer i whose gradient takes over the block of the layer's output
 * gradient, or -1: with n->in_place on, a layer whose backward hands dy to its inputs
 * unchanged (passes_dy, layers/layer.h) gives dy's block to the first input whose
 * gradient is new there (layer i is that map's last reader in forward), instead of a
 * copy; the other inputs get copies, or sums into gradients begun elsewhere. */
int net_passes_dy(const net *n, int i);

/* The first layer, counting backward, whose backward pass reads x[j] (the graph's
 * first_bwd; in a chain: j if layer j reads its input, else j-1 if layer j-1 reads its
 * output), or -1. */
int net_first_reader(const net *n, int j);
/* The name of x[j] in messages, plans and traces: "data" for x[0], else the name of the
 * layer that writes it. */
const char *net_map_name(const net *n, int j);
/* The map named `name` (as net_map_name), or -1. */
int net_find_map(const net *n, const char *name);

/* Sizes, for `info` and the default budget. */
size_t net_param_bytes(const net *n);                 /* values, grads, momenta */
size_t net_max_workspace_bytes(const net *n);         /* over the chosen algorithms */
/* An estimate of what one training iteration needs from the pool, params included: every
 * parameter and map, the gradient maps a chain (or graph) holds at once, one workspace.
 * Not a bound: freed blocks wait out the release lag and first fit leaves holes, so a
 * plan with large workspaces of mixed sizes can need more (a measured mix with oneDNN's
 * Winograd: half as much again); net_min_budget replays the iteration for the exact
 * figure. With the smallest workspaces it has held on every net tested (test_budget). */
size_t net_train_bytes_bound(const net *n);

typedef struct step_result {
    double loss_sum;          /* summed over the batch */
    int correct;
    int n;
} step_result;

/* One training step on a batch in host memory (items x C x H x W floats, items labels,
 * items <= n->minibatch): in micro-batches of n->input.n items when split, each copied
 * into x[0] from the pool, forward and backward with gradients accumulated; then the
 * SGD update with lr. */
vdnn_status net_train_step(net *n, const float *x, const int32_t *y, int items, double lr, step_result *r);
/* The gradient half of a step, for data-parallel training: forward and backward of
 * `items` items (in micro-batches when split) that are items base.. of a whole batch of
 * `total` (the loss is its mean, and dropout masks are those items'), leaving every
 * parameter's gradient (a swapped layer's in host memory) for net_update. No update;
 * SWAP_DEVICE layers then update on the host, with the same arithmetic. */
vdnn_status net_backprop(net *n, const float *x, const int32_t *y, int items, int base, int total, step_result *r);
/* The optimizer step with the gradients the net holds (after net_backprop and their
 * reduction); counts the step. */
vdnn_status net_update(net *n, double lr);
/* Forward in evaluation mode; adds to r. */
vdnn_status net_eval_batch(net *n, const float *x, const int32_t *y, int items, step_result *r);
/* Forward in evaluation mode on `items` items of x, copying map `map` (0: the input, j:
 * layer j - 1's output) of every item to host memory `out` as it is written (before any
 * in-place layer reuses it): the net's predictions, or any layer's. */
vdnn_status net_predict(net *n, const float *x, int items, int map, float *out);

/* The learning rate for `epoch` (0-based) under the schedule. */
double net_lr_at(const train_cfg *t, int epoch);

#endif
