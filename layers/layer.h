/* The common layer interface.
 *
 * A layer type is one file pair (`conv.c` for shape inference and the CPU half,
 * `conv.cu` for the CUDA half) plus one entry in layers/registry.c. It exports a
 * `layer_ops` table: its config keys, a setup function that infers shapes and declares
 * its parameters, and the forward/backward halves per device.
 *
 * A layer reads x (its input, shape l->in) and writes y (shape l->out); [add] and
 * [concat] read several inputs (l->ninputs, shapes l->ins[k]) through the `_multi`
 * halves. Each layer declares what its backward pass reads: its inputs (needs_input,
 * one bit per input) and/or y (needs_output). These flags drive what the memory
 * manager must keep or offload. A layer whose ops set in_place may be run in place: y
 * is then the very buffer x was, and dx the very buffer dy was (nets/iteration.c decides
 * when, docs/memory.md). All tensor pointers passed to forward/backward are
 * device memory, NCHW, float32, and hold c->n items (c->n <= l->in.n, the max batch
 * the shapes were inferred for).
 *
 * Backward conventions:
 *  - dx may be NULL (the net's input needs no gradient): skip computing it.
 *  - dx is overwritten; a layer with accumulates_dx adds to dx[k] instead where bit k
 *    of c->accumulate_dx is set (a map read by several layers sums their gradients).
 *  - parameter gradients are overwritten, or added to when c->accumulate is set.
 *  - the loss layer ignores dy and writes d(loss * c->grad_scale)/dx.
 * Forward and backward must be deterministic for a given (x, params, c->seed, c->step,
 * c->item_offset): recomputation and policy invariance rely on it. */
#ifndef VDNN_LAYER_H
#define VDNN_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include "vdnn/config.h"
#include "vdnn/device.h"
#include "vdnn/shape.h"
#include "vdnn/status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LAYER_MAX_PARAMS 4
#define LAYER_NAME_MAX 32
#define LAYER_MAX_ALGOS 16   /* per pass, in a device's algorithm table */
#define LAYER_MAX_INPUTS 32  /* maps one [add] or [concat] reads */

/* Passes that may have several algorithms (convolution). */
enum { PASS_FWD = 0, PASS_BWD_DATA = 1, PASS_BWD_FILTER = 2, PASS_COUNT = 3 };

/* How a parameter starts. The weights' ones are a layer's `init` key: he, xavier,
 * pytorch (layer_weight_init). */
typedef enum {
    INIT_HE = 0,   /* normal(0, sqrt(2 / fan_in)): Kaiming He's, Caffe's msra; convolutions */
    INIT_LINEAR,   /* uniform(-1 / sqrt(fan_in), 1 / sqrt(fan_in)): PyTorch's default;
                    * fully connected layers */
    INIT_XAVIER,   /* uniform(-sqrt(3 / fan_in), sqrt(3 / fan_in)): Caffe's xavier */
    INIT_ZERO,
    INIT_ONE
} param_init;

/* The `init` key's words, in param_init's order (he, pytorch, xavier). */
#define LAYER_INIT_CHOICES "he|pytorch|xavier"


/* A parameter tensor with its gradient and optimizer state. */
typedef struct param {
    char name[16];        /* "weights", "bias", "gamma", "beta", "running_mean", ... */
    shape4 shape;         /* e.g. weights (OC, IC, KH, KW), bias (OC, 1, 1, 1) */
    param_init init;
    int fan_in;           /* for INIT_HE, INIT_LINEAR and INIT_XAVIER */
    int trainable;        /* has grad and momentum; updated by the solver */
    int decay;            /* weight decay applies (weights yes, biases and BN no) */
    float *value;         /* device memory, shape_count(shape) floats */
    float *grad;          /* device memory; NULL unless trainable */
    float *momentum;      /* device memory; NULL unless trainable */
    /* Parameter swapping (the layer's `swap`): the master copies live in host memory
     * and value/grad/momentum above point at device copies only while the layer runs. */
    float *host_value, *host_grad, *host_momentum;
} param;

typedef struct layer layer;

/* One algorithm of one pass on a device: its name, the workspace it needs at the max
 * batch, the device library's own id for it, and whether it is deterministic. */
typedef struct layer_algo {
    char name[40];
    size_t workspace_bytes;
    int id;
    int deterministic;
} layer_algo;

/* The algorithms a device offers a layer, per pass (count >= 1), in place of the ops'
 * own (the CPU's). A CUDA layer's table comes from cuDNN when it is bound to the device
 * (layer_bind); clones for the simulator copy it. */
typedef struct layer_algos {
    int count[PASS_COUNT];
    layer_algo a[PASS_COUNT][LAYER_MAX_ALGOS];
} layer_algos;

/* What a layer's work takes on a device, per algorithm where a pass has several (the
 * planner's profile measures it): the simulated device's clock advances by it. */
typedef struct layer_cost {
    double fwd_s[LAYER_MAX_ALGOS];
    /* Backward = bwd_data_s[data algo] + bwd_filter_s[filter algo]. For layers with one
     * algorithm, bwd_data_s[0] is the whole backward and bwd_filter_s[0] is 0. For the
     * first layer, bwd_data_s is 0: no input gradient is computed. */
    double bwd_data_s[LAYER_MAX_ALGOS];
    double bwd_filter_s[LAYER_MAX_ALGOS];
    double update_s;          /* the optimizer step on its parameters */
    double accum_s;           /* adding a second reader's part into its input's gradient (0
                               * where the layer adds into it itself, or never needs to) */
} layer_cost;

/* Which work of a layer a cost is asked for (layer_cost_s). */
enum { COST_FWD = 0, COST_BWD, COST_BWD_NO_DX, COST_UPDATE, COST_ACCUM };

/* What one forward or backward call runs with. */
typedef struct exec_ctx {
    device *dev;
    int n;                    /* items in this batch, 1 <= n <= l->in.n */
    int item_offset;          /* index of item 0 inside the mini-batch (micro-batching) */
    int train;                /* training mode: dropout active, batch norm uses batch stats */
    int recompute;            /* forward again in backward (recomputation): no side effects
                               * such as batch norm's running statistics */
    int accumulate;           /* add to parameter gradients instead of overwriting */
    unsigned accumulate_dx;   /* bit k: add input k's gradient to dx[k] instead of overwriting
                               * it (only for layers whose ops have accumulates_dx) */
    uint64_t seed;            /* the net's seed (dropout masks) */
    uint64_t step;            /* optimizer step (a fresh dropout mask per step) */
    void *workspace;          /* device memory for the chosen algorithm, or NULL */
    size_t workspace_bytes;
    const int32_t *labels;    /* device memory, n labels: for the loss layer */
    float grad_scale;         /* loss layer: gradient of (loss sum * grad_scale) */
    double *loss_sum;         /* host: the loss layer adds the summed loss of its n items */
    int *correct;             /* host: the loss layer adds the count of correct top-1 */
} exec_ctx;

typedef struct layer_ops {
    const char *type;         /* config section name, e.g. "convolutional" */
    const char *prefix;       /* short name stem, e.g. "conv" (conv1, conv2, ...) */
    const cfg_key *keys;      /* its own config keys (NULL-terminated), may be NULL */
    size_t priv_bytes;        /* per-layer state, zero-filled by layer_create */
    /* Reads its section (already checked against `keys`; s is NULL when built in code
     * with no config, and then uses l->priv as filled by the caller), sets l->out,
     * declares params (shape, init, fan_in, trainable, decay), needs_input/needs_output.
     * Reports bad values with cfg_error (f and s non-NULL) or vdnn_fail. */
    vdnn_status (*setup)(layer *l, const cfg_file *f, const cfg_section *s);
    vdnn_status (*forward_cpu)(layer *l, const exec_ctx *c, const float *x, float *y);
    vdnn_status (*backward_cpu)(layer *l, const exec_ctx *c, const float *x, const float *y,
                                const float *dy, float *dx);
    /* Optional: several algorithms per pass. NULL means one algorithm, no workspace. */
    int (*algo_count)(const layer *l, int pass);
    const char *(*algo_name)(const layer *l, int pass, int algo);
    /* for n items (at most the max batch); SIZE_MAX for an algorithm it does not have */
    size_t (*workspace_bytes)(const layer *l, int n, int pass, int algo);
    /* Optional: one line of hyper-parameters for `vdnn info`, e.g. "3x3/1 p1 32". */
    void (*describe)(const layer *l, char *buf, size_t len);
    /* The CUDA half (layers/TYPE.cu), NULL in a build without CUDA. Same contract as the
     * CPU half; pointers are device memory and work goes on the device's compute stream
     * (vdnn/cuda_util.h), asynchronously unless a result must reach the host. */
    vdnn_status (*forward_cuda)(layer *l, const exec_ctx *c, const float *x, float *y);
    vdnn_status (*backward_cuda)(layer *l, const exec_ctx *c, const float *x, const float *y,
                                 const float *dy, float *dx);
    /* Optional: builds the layer's CUDA state (l->gpu: descriptors) and, when its
     * algorithms or workspaces differ from the CPU's, its table (l->algos), for device
     * `d`; allocates no device memory. unbind_cuda frees l->gpu (l->algos is freed by
     * the caller). */
    vdnn_status (*bind_cuda)(layer *l, device *d);
    void (*unbind_cuda)(layer *l);
    /* Optional: times every algorithm of its table on the device in one go, by the
     * vendor library's own search (cuDNN's cudnnFind...Ex on these buffers: c->n items,
     * c->workspace), in seconds per pass and table index; an algorithm left unmeasured
     * (its workspace does not fit) gets LAYER_UNMEASURED. dx NULL: no data pass. */
    vdnn_status (*find_cuda)(layer *l, const exec_ctx *c, const float *x, float *y, const float *dy, float *dx,
                             double secs[PASS_COUNT][LAYER_MAX_ALGOS]);
    /* Layers of several inputs ([add], [concat]): max_inputs > 1, and these halves, which
     * take one pointer per input (dx[k] NULL: no gradient wanted for input k), stand in
     * for the one-input halves above (left NULL). min_inputs is at least 2. */
    int min_inputs, max_inputs;
    vdnn_status (*forward_multi_cpu)(layer *l, const exec_ctx *c, const float *const *x, float *y);
    vdnn_status (*backward_multi_cpu)(layer *l, const exec_ctx *c, const float *const *x, const float *y,
                                      const float *dy, float *const *dx);
    vdnn_status (*forward_multi_cuda)(layer *l, const exec_ctx *c, const float *const *x, float *y);
    vdnn_status (*backward_multi_cuda)(layer *l, const exec_ctx *c, const float *const *x, const float *y,
                                       const float *dy, float *const *dx);
    /* Backward honours c->accumulate_dx (adds into dx[k]); for the other layers the
     * iteration sums a map's gradients itself (layer_accumulate). */
    int accumulates_dx;
    /* One-input layers whose forward may write y over x and whose backward may write dx
     * over dy (each element read before it is written, as elementwise maps do) and
     * reads neither x nor any other input: relu, leaky, tanh, sigmoid, clip, dropout.
     * The iteration runs them in place (Caffe's top = bottom) where nothing else reads
     * the map they overwrite. */
    int in_place;
    /* Layers whose backward hands dy to every input unchanged ([add]): the iteration may
     * hand dy's own block to one input as its gradient (net_passes_dy), and the layer
     * leaves a dx[k] that is dy alone unless bit k of c->accumulate_dx asks it to add. */
    int passes_dy;
    /* Loss layers only (NULL elsewhere): the net's last layer, whose labels lie in
     * [0, loss_classes(l)); a value below 2 means the layer cannot be a loss on this
     * input (softmax over one output). */
    int (*loss_classes)(const layer *l);
} layer_ops;

/* A time no algorithm takes: one that was not measured. */
#define LAYER_UNMEASURED 1e30

struct layer {
    /* the fields every pass reads first, together (the planner's replays of a large net
     * run through thousands of layers) */
    const layer_ops *ops;
    int index;                /* position in the net (file order), 0-based */
    int ninputs;              /* maps it reads: 1, or min_inputs..max_inputs of its ops */
    int nparams;
    int needs_input;          /* backward reads input k where bit k is set (one input: 1) */
    int needs_output;         /* backward reads y */
    int is_loss;              /* the last layer: a loss (softmax, logistic, l2) */
    int swap;                 /* SWAP_*: parameters live in host memory (set before net_attach) */
    int offload;              /* config override for its inputs: -1 the policy decides, 0 keep, 1 offload */
    int algo[PASS_COUNT];     /* chosen algorithm per pass */
    unsigned algo_failed[PASS_COUNT]; /* bit a: algorithm a could not run on this device
                                       * (layer_algo_failed); no plan picks it again */
    void *priv;               /* priv_bytes of per-type state; owned by the layer */
    layer_algos *algos;       /* the device's algorithm table, or NULL: the ops' own; owned */
    const layer_cost *cost;   /* what its work takes, for the simulated device (the
                               * planner's profile sets it); NULL: no time; not owned */
    void *gpu;                /* the CUDA half's state (bind_cuda); owned; NULL elsewhere */
    shape4 in, out;           /* (N, C, H, W) at the max batch; in is ins[0] */
    int input[LAYER_MAX_INPUTS]; /* which: map 0 is the net's input, map j + 1 layer j's
                               * output (a chain's layer i reads map i, the default) */
    char name[LAYER_NAME_MAX];/* unique: conv1, relu2, ... or the config's `name =` */
    int line;                 /* config line of its section header (0 if none) */
    shape4 ins[LAYER_MAX_INPUTS]; /* their shapes, (N, C, H, W) */
    param params[LAYER_MAX_PARAMS];
    int algo_pinned[PASS_COUNT]; /* config override per pass: -1 the algo mode decides */
};

/* An ops table names its CUDA half as CUDA_HALF(conv_forward_cuda): the function in a
 * build with CUDA, NULL in a CPU-only build (where the .cu files are not compiled). */
#ifdef VDNN_CUDA
#define CUDA_HALF(f) f
#else
#define CUDA_HALF(f) NULL
#endif

/* Where a layer's parameters live and where its update runs: on the device; in host
 * memory, updated on the host; in host memory, updated on the device right after its
 * backward pass (its momenta come in with the weights, values and momenta go back). */
enum { SWAP_NONE = 0, SWAP_HOST = 1, SWAP_DEVICE = 2 };

/* The registry: the ops for a config section name, or NULL. */
const layer_ops *layer_find_type(const char *type);
/* All registered types, NULL-terminated (for docs and help). */
const layer_ops *const *layer_types(void);

/* Allocates a layer of type `ops` with input shape `in`, runs setup. The layer owns
 * nothing on the device until layer_alloc_params(). Free with layer_destroy(). */
vdnn_status layer_create(const layer_ops *ops, int index, shape4 in, const cfg_file *f,
                         const cfg_section *s, layer **out);
/* As layer_create, for `nin` inputs of shapes ins[] (a one-input type takes only 1, a
 * multi-input type min_inputs..max_inputs; the error names the section and key
 * `input`). The caller sets l->input[] (the maps). */
vdnn_status layer_create_multi(const layer_ops *ops, int index, const shape4 *ins, int nin, const cfg_file *f,
                               const cfg_section *s, layer **out);
/* As layer_create, for code (tests) that fills priv itself: `init_priv` is called with
 * the zeroed priv before setup, with `arg`. */
vdnn_status layer_create_with(const layer_ops *ops, int index, shape4 in,
                              void (*init_priv)(void *priv, const void *arg), const void *arg,
                              layer **out);
void layer_destroy(layer *l, device *d);

/* Allocates every param's value (and grad and momentum if trainable) from the device
 * pool and fills values per their init, from `seed` (deterministic). Momenta are zeroed. */
vdnn_status layer_alloc_params(layer *l, device *d, uint64_t seed);
size_t layer_param_bytes(const layer *l);   /* values + grads + momenta */
/* As layer_alloc_params for a swapped layer: value, grad and momentum in host memory
 * (device_host_alloc), values from the same seed, so a swapped net starts bit for bit
 * where a resident one does. The device pointers stay NULL. */
vdnn_status layer_alloc_params_host(layer *l, device *d, uint64_t seed);
/* As layer_alloc_params, or layer_alloc_params_host where l->swap is set, without
 * filling anything: for a net that is only planned, whose values nobody reads (untouched
 * host memory costs nothing; drawing a large net's parameters takes seconds). */
vdnn_status layer_place_params(layer *l, device *d);
/* Whether the layer's parameters can be swapped: all of them trainable (a layer with
 * state its forward writes, such as batch norm's running statistics, stays resident). */
int layer_swappable(const layer *l);
/* Returns the params' device and host memory (layer_alloc_params undone). */
void layer_free_params(layer *l, device *d);

/* Forward/backward on whatever device c->dev is; the training loop never branches.
 * The one-input forms are for one-input layers; the _n forms take l->ninputs inputs
 * (x[k], dx[k]) for any layer. */
vdnn_status layer_forward(layer *l, const exec_ctx *c, const float *x, float *y);
vdnn_status layer_backward(layer *l, const exec_ctx *c, const float *x, const float *y,
                           const float *dy, float *dx);
vdnn_status layer_forward_n(layer *l, const exec_ctx *c, const float *const *x, float *y);
vdnn_status layer_backward_n(layer *l, const exec_ctx *c, const float *const *x, const float *y,
                             const float *dy, float *const *dx);
/* How a multi-input layer's setup names input k in a message: the k-th entry of its
 * section's `input` list (s may be NULL: then "input K"). */
void layer_input_label(const cfg_section *s, int k, char *buf, size_t len);

/* Declares a parameter in a layer's setup: its name, shape, initialisation (fan_in for
 * INIT_HE, INIT_LINEAR and INIT_XAVIER), whether the solver trains it and whether weight decay applies. */
void layer_declare_param(param *p, const char *name, shape4 shape, param_init init, int fan_in, int trainable,
                         int decay);
/* The weights' initialisation a section's `init` key names (LAYER_INIT_CHOICES), or
 * dflt where s is NULL or has no `init`. */
param_init layer_weight_init(const cfg_section *s, param_init dflt);
/* A multi-input layer's line for `vdnn info` (layer_ops.describe): "N inputs". */
void layer_describe_inputs(const layer *l, char *buf, size_t len);

/* Whether backward reads input k. */
static inline int layer_reads_input(const layer *l, int k) { return (l->needs_input >> k) & 1; }

/* dst += src over `count` floats of device memory, on the compute stream, in a fixed
 * order (the same bits on every device): the sum of a map's gradients when several
 * layers read it. `l` is the layer whose gradient is added (the simulated device
 * charges the time its profile gives). Defined with the add layer (layers/add.c), whose
 * sum it is. */
vdnn_status layer_accumulate(const layer *l, device *d, float *dst, const float *src, size_t count);

/* Seconds the layer's work `what` (COST_*) takes with its current algorithms, by
 * l->cost (0 without one). */
double layer_cost_s(const layer *l, int what);

/* Whether the layer can time every algorithm of its table on device `d` in one go, by
 * the vendor library's own search (cuDNN's cudnnFind...Ex), and that search on these
 * buffers (c->n items, c->workspace), in seconds per pass and table index; an algorithm
 * left unmeasured (its workspace does not fit) gets LAYER_UNMEASURED. dx NULL: no data
 * pass. */
int layer_has_search(const layer *l, const device *d);
vdnn_status layer_search(layer *l, const exec_ctx *c, const float *x, float *y, const float *dy, float *dx,
                         double secs[PASS_COUNT][LAYER_MAX_ALGOS]);

/* Prepares the layer for device `d`: on a CUDA device its CUDA state and algorithm
 * table (chosen algorithms are reset to 0 when the table changes); on the CPU device
 * the ops' own algorithms; on the simulated device whatever table it has (a clone's
 * copy of the real device's). Idempotent. net_attach() binds every layer. */
vdnn_status layer_bind(layer *l, device *d);
/* Copies src's algorithm table (or its absence) to dst, a layer of the same shape. */
vdnn_status layer_copy_algos(layer *dst, const layer *src);

int layer_algo_count(const layer *l, int pass);
const char *layer_algo_name(const layer *l, int pass, int algo);
size_t layer_workspace_bytes(const layer *l, int pass, int algo);   /* at the max batch */
/* The workspace for n items. Most algorithms need less for fewer items, but not all
 * (oneDNN's Winograd needs more at some smaller batches). SIZE_MAX where the layer cannot
 * say: a device's table (cuDNN's) knows the max batch only. */
size_t layer_workspace_bytes_at(const layer *l, int n, int pass, int algo);
/* Whether the algorithm gives the same bits on every run (every CPU algorithm does). */
int layer_algo_deterministic(const layer *l, int pass, int algo);

/* Whether the layer runs `pass` at all: the first layer computes no input gradient. */
int layer_pass_runs(const layer *l, int pass);
/* A device's table for a pass the layer never runs, when the device offers no algorithm
 * for it (cuDNN may have no deterministic backward-data algorithm for a first layer's
 * shape): one entry, "none", with no workspace, so that every pass has one. */
void layer_table_none(layer_algos *t, int pass);

/* Algorithms that cuDNN approves but that fail when run (NOT_SUPPORTED, EXECUTION_FAILED)
 * are dropped as they fail, and the pass runs again with another. */
/* Whether algorithm `algo` of `pass` has not failed to run on the layer's device. */
int layer_algo_usable(const layer *l, int pass, int algo);
/* Bytes of workspace algorithm `algo` of `pass` needs for c->n items, as the device half
 * knows it (SIZE_MAX: it cannot say). */
typedef size_t (*layer_need_fn)(layer *l, const exec_ctx *c, int pass, int algo, void *arg);
/* The usable algorithm of `pass` with the largest workspace that fits c->workspace at
 * c->n items (`need`): the likely fastest that can run; -1 when none fits. */
int layer_algo_fitting(layer *l, const exec_ctx *c, int pass, layer_need_fn need, void *arg);
/* Algorithm `algo` of `pass` could not run (`why`: the library's words): marks it failed,
 * says so in one notice line (vdnn_notice), and when it was l->algo[pass], moves
 * l->algo[pass] to the usable algorithm with the largest workspace that fits
 * c->workspace for c->n items (`need`), for the caller to run the pass again with.
 * VDNN_EDEVICE, with a message, when none is left. */
vdnn_status layer_algo_failed(layer *l, const exec_ctx *c, int pass, int algo, const char *why, layer_need_fn need,
                              void *arg);
/* Called by a device half before it runs `pass`: when l->algo[pass] has failed before,
 * or VDNN_FAULTS (device.h, tests) says it fails, moves to another as above. */
vdnn_status layer_algo_check(layer *l, const exec_ctx *c, int pass, layer_need_fn need, void *arg);

#ifdef __cplusplus
}
#endif

#endif
