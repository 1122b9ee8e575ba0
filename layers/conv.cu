/* The convolutional layer (CUDA half): cuDNN's convolution, bias and gradient routines
 * on the device's compute stream, with the algorithm the plan chose for each pass.
 *
 * The CPU half (layers/conv.c) fixes the semantics this file must match: a
 * cross-correlation (no kernel flip) with zero padding, output side
 * (in + pad_before + pad_after - ((K - 1) * dilation + 1)) / stride + 1 per axis,
 * channel groups, weights (OC, IC / groups, KH, KW), an optional bias (OC); backward
 * overwrites dx and overwrites or adds to the parameter gradients (c->accumulate).
 * cuDNN's group count and dilation map one to one; its padding is symmetric, so a layer
 * whose pads differ above and below (or left and right) is refused when it is bound, with
 * a message, rather than computed differently.
 *
 * conv_bind_cuda asks cuDNN, without running anything, which forward, backward-data and
 * backward-filter algorithms support this shape at the layer's max batch, and with what
 * workspace; that table (l->algos) replaces the CPU's algorithms on this device. Each
 * call then runs the chosen algorithm on c->workspace, which the caller sized from that
 * table. Everything is asynchronous on the compute stream: no allocation, no sync.
 *
 * The bias gradient is the project's own kernel (vdnn_conv_bias_grad): cuDNN's
 * cudnnConvolutionBackwardBias took 2.5 ms of VGG-16's first layer at batch 64 on an H100
 * (bench/gpu.md, "where the time goes"), several times what reading dy costs.
 *
 * cuDNN 9 deprecates this (legacy) convolution API in favour of the graph API; every use
 * of it lives in this file, so that a move to the graph API stays local. */
#include "vdnn/cuda_util.h"

#include "layers/conv.h"

#include <stdio.h>
#include <stdlib.h>

/* cuDNN's own state for one layer: descriptors, the x/y pair set for `n` items, and the
 * workspace one pass needs at a batch other than the max (see need_workspace). */
typedef struct conv_gpu {
    cudnnTensorDescriptor_t x;        /* (n, IC, H, W); dx has the same shape */
    cudnnTensorDescriptor_t y;        /* (n, OC, OH, OW); dy has the same shape */
    cudnnTensorDescriptor_t bias;     /* (1, OC, 1, 1) */
    cudnnFilterDescriptor_t w;        /* (OC, IC / groups, KH, KW) */
    cudnnConvolutionDescriptor_t conv;
    int n;                            /* items x and y are set for; 0 before the first */
    int ws_n[PASS_COUNT], ws_id[PASS_COUNT];
    size_t ws_bytes[PASS_COUNT];      /* workspace of algorithm ws_id for ws_n items */
} conv_gpu;

/* Readable, stable names per cuDNN enum value: a plan file pins algorithms by name. */
static const char *const fwd_names[] = {"implicit-gemm", "implicit-precomp-gemm", "gemm", "direct",
                                        "fft",           "fft-tiling",            "winograd",
                                        "winograd-nonfused"};
static const char *const bwd_data_names[] = {"algo0",    "algo1",
                                             "fft",      "fft-tiling",
                                             "winograd", "winograd-nonfused"};
static const char *const bwd_filter_names[] = {"algo0",    "algo1",
                                               "fft",      "algo3",
                                               "winograd", "winograd-nonfused",
                                               "fft-tiling"};
static_assert(sizeof fwd_names / sizeof *fwd_names == CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
              "a name per cuDNN forward algorithm");
static_assert(sizeof bwd_data_names / sizeof *bwd_data_names == CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
              "a name per cuDNN backward-data algorithm");
static_assert(sizeof bwd_filter_names / sizeof *bwd_filter_names ==
                  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
              "a name per cuDNN backward-filter algorithm");

static const char *const pass_words[PASS_COUNT] = {"forward", "backward-data", "backward-filter"};

static int id_count(int pass)
{
    return pass == PASS_FWD        ? (int)CUDNN_CONVOLUTION_FWD_ALGO_COUNT
           : pass == PASS_BWD_DATA ? (int)CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT
                                   : (int)CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
}

static const char *id_name(int pass, int id)
{
    return pass == PASS_FWD ? fwd_names[id] : pass == PASS_BWD_DATA ? bwd_data_names[id] : bwd_filter_names[id];
}

/* The algorithms cuDNN documents as using atomics (enum comments in cudnn_ops.h): never
 * reported as deterministic, whatever a heuristic query says. */
static int known_nondeterministic(int pass, int id)
{
    if (pass == PASS_BWD_DATA) return id == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
    if (pass == PASS_BWD_FILTER)
        return id == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || id == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3;
    return 0;
}

/* ---- descriptors ------------------------------------------------------------------- */

static vdnn_status set_batch(const layer *l, conv_gpu *s, int n)
{
    if (s->n == n) return VDNN_OK;
    CUDNN_TRY(cudnnSetTensor4dDescriptor(s->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, l->in.c, l->in.h, l->in.w));
    CUDNN_TRY(cudnnSetTensor4dDescriptor(s->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, l->out.c, l->out.h,
                                         l->out.w));
    s->n = n;
    return VDNN_OK;
}

/* Strict FP32 pins cuDNN to FMA kernels: on Ampere and newer its default math lets FP32
 * convolutions run on TF32 tensor cores, which would drift from the CPU reference. With
 * TF32 allowed, the default math is the one that permits it for FP32 data. */
static vdnn_status make_descriptors(const layer *l, conv_gpu *s, int tf32)
{
    const conv_params *p = (const conv_params *)l->priv;
    CUDNN_TRY(cudnnCreateTensorDescriptor(&s->x));
    CUDNN_TRY(cudnnCreateTensorDescriptor(&s->y));
    CUDNN_TRY(cudnnCreateTensorDescriptor(&s->bias));
    CUDNN_TRY(cudnnCreateFilterDescriptor(&s->w));
    CUDNN_TRY(cudnnCreateConvolutionDescriptor(&s->conv));
    CUDNN_TRY(cudnnSetTensor4dDescriptor(s->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, l->out.c, 1, 1));
    CUDNN_TRY(cudnnSetFilter4dDescriptor(s->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, l->out.c, l->in.c / p->groups,
                                         p->size_h, p->size_w));
    CUDNN_TRY(cudnnSetConvolution2dDescriptor(s->conv, p->pad_top, p->pad_left, p->stride_h, p->stride_w,
                                              p->dilation_h, p->dilation_w, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT));
    CUDNN_TRY(cudnnSetConvolutionGroupCount(s->conv, p->groups));
    CUDNN_TRY(cudnnSetConvolutionMathType(s->conv, tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH));
    return set_batch(l, s, l->in.n);
}

/* cuDNN's output shape must be the CPU half's, or the two halves compute different
 * layers. */
static vdnn_status check_output(const layer *l, const conv_gpu *s)
{
    int n = 0, c = 0, h = 0, w = 0;
    CUDNN_TRY(cudnnGetConvolution2dForwardOutputDim(s->conv, s->x, s->w, &n, &c, &h, &w));
    if (n != l->out.n || c != l->out.c || h != l->out.h || w != l->out.w)
        return vdnn_fail(VDNN_EDEVICE,
                         "%s: cuDNN computes an output of %dx%dx%dx%d where the layer has %dx%dx%dx%d "
                         "(input %dx%dx%dx%d)",
                         l->name, n, c, h, w, l->out.n, l->out.c, l->out.h, l->out.w, l->in.n, l->in.c, l->in.h,
                         l->in.w);
    return VDNN_OK;
}

/* Workspace of algorithm `id` of `pass` at the batch the descriptors are set for. A
 * cuDNN status, not a vdnn one: while the table is built an algorithm that cannot say
 * is left out rather than failing the layer. */
static cudnnStatus_t workspace_of(cudnnHandle_t h, const conv_gpu *s, int pass, int id, size_t *bytes)
{
    *bytes = 0;
    if (pass == PASS_FWD)
        return cudnnGetConvolutionForwardWorkspaceSize(h, s->x, s->w, s->conv, s->y, (cudnnConvolutionFwdAlgo_t)id,
                                                       bytes);
    if (pass == PASS_BWD_DATA)
        return cudnnGetConvolutionBackwardDataWorkspaceSize(h, s->w, s->y, s->conv, s->x,
                                                            (cudnnConvolutionBwdDataAlgo_t)id, bytes);
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, s->x, s->y, s->conv, s->w,
                                                          (cudnnConvolutionBwdFilterAlgo_t)id, bytes);
}

/* ---- the algorithm table ----------------------------------------------------------- */

/* Room for cuDNN's answers: at most one per algorithm and math type. */
#define CONV_PERF_MAX 64

/* One entry of a cuDNN heuristic answer, whatever the pass. */
typedef struct conv_candidate {
    int id;
    cudnnStatus_t status;
    int deterministic;
    cudnnMathType_t math;
} conv_candidate;

template <typename perf_t>
static int to_candidates(const perf_t *perf, int count, conv_candidate *out)
{
    for (int i = 0; i < count; i++) {
        out[i].id = (int)perf[i].algo;
        out[i].status = perf[i].status;
        out[i].deterministic = perf[i].determinism == CUDNN_DETERMINISTIC;
        out[i].math = perf[i].mathType;
    }
    return count;
}

/* cuDNN's heuristic answer for one pass at the current descriptors: every algorithm
 * with its support status and determinism, none of them run. */
static vdnn_status query_pass(cudnnHandle_t h, const conv_gpu *s, int pass, conv_candidate *out, int *count)
{
    int max = 0, got = 0;
    *count = 0;
    if (pass == PASS_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[CONV_PERF_MAX];
        CUDNN_TRY(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &max));
        max = max < CONV_PERF_MAX ? max : CONV_PERF_MAX;
        CUDNN_TRY(cudnnGetConvolutionForwardAlgorithm_v7(h, s->x, s->w, s->conv, s->y, max, &got, perf));
        *count = to_candidates(perf, got, out);
    } else if (pass == PASS_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CONV_PERF_MAX];
        CUDNN_TRY(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, &max));
        max = max < CONV_PERF_MAX ? max : CONV_PERF_MAX;
        CUDNN_TRY(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, s->w, s->y, s->conv, s->x, max, &got, perf));
        *count = to_candidates(perf, got, out);
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CONV_PERF_MAX];
        CUDNN_TRY(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, &max));
        max = max < CONV_PERF_MAX ? max : CONV_PERF_MAX;
        CUDNN_TRY(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, s->x, s->y, s->conv, s->w, max, &got, perf));
        *count = to_candidates(perf, got, out);
    }
    return VDNN_OK;
}

/* Whether an entry of math type `m` says anything about running with `ours`: a
 * tensor-core entry does not, under strict FP32, whose FMA kernels are other kernels. */
static int math_fits(cudnnMathType_t m, cudnnMathType_t ours)
{
    return ours != CUDNN_FMA_MATH || (m != CUDNN_TENSOR_OP_MATH && m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
}

/* The supported entry for algorithm `id`, or NULL. cuDNN may list an algorithm once per
 * math type; the one of the descriptor's math type is the one that will run. Another
 * fitting entry still stands for the algorithm, as the descriptor's math type rules at
 * run time and the workspace query (made with the descriptor) confirms support. */
static const conv_candidate *pick(const conv_candidate *cand, int count, int id, cudnnMathType_t math)
{
    const conv_candidate *best = NULL;
    for (int i = 0; i < count; i++) {
        if (cand[i].id != id || cand[i].status != CUDNN_STATUS_SUCCESS || !math_fits(cand[i].math, math)) continue;
        if (!best || (best->math != math && cand[i].math == math)) best = &cand[i];
    }
    return best;
}

/* The algorithms of one pass at the max batch, in cuDNN id order (so that a pinned name
 * keeps meaning one algorithm), nondeterministic ones only when `allow_nondet`. */
static vdnn_status list_pass(const layer *l, cudnnHandle_t h, const conv_gpu *s, int pass, int allow_nondet,
                             layer_algos *t)
{
    conv_candidate cand[CONV_PERF_MAX];
    int count = 0;
    vdnn_status st = query_pass(h, s, pass, cand, &count);
    if (st != VDNN_OK) return st;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
    CUDNN_TRY(cudnnGetConvolutionMathType(s->conv, &math));
    int kept = 0;
    for (int id = 0; id < id_count(pass) && kept < LAYER_MAX_ALGOS; id++) {
        const conv_candidate *c = pick(cand, count, id, math);
        if (!c) continue;
        int det = c->deterministic && !known_nondeterministic(pass, id);
        if (!det && !allow_nondet) continue;
        size_t bytes = 0;
        if (workspace_of(h, s, pass, id, &bytes) != CUDNN_STATUS_SUCCESS) continue;
        layer_algo *a = &t->a[pass][kept++];
        snprintf(a->name, sizeof a->name, "%s", id_name(pass, id));
        a->workspace_bytes = bytes;
        a->id = id;
        a->deterministic = det;
    }
    t->count[pass] = kept;
    /* a first layer never computes its input gradient: whatever cuDNN offers for that
     * pass, binding does not depend on it */
    if (kept == 0 && !layer_pass_runs(l, pass)) {
        layer_table_none(t, pass);
        return VDNN_OK;
    }
    if (kept == 0) {
        const conv_params *p = (const conv_params *)l->priv;
        return vdnn_fail(VDNN_EDEVICE,
                         "%s: cuDNN offers no %s%s algorithm for this convolution (%dx%d/%dx%d p%d,%d "
                         "d%dx%d g%d, input %dx%dx%dx%d)%s",
                         l->name, allow_nondet ? "" : "deterministic ", pass_words[pass], p->size_h, p->size_w,
                         p->stride_h, p->stride_w, p->pad_top, p->pad_left, p->dilation_h, p->dilation_w,
                         p->groups, l->in.n, l->in.c, l->in.h, l->in.w,
                         allow_nondet ? "" : "; --nondeterministic lets it use the others");
    }
    return VDNN_OK;
}

extern "C" void conv_unbind_cuda(layer *l)
{
    conv_gpu *s = (conv_gpu *)l->gpu;
    if (!s) return;
    if (s->conv) cudnnDestroyConvolutionDescriptor(s->conv);
    if (s->w) cudnnDestroyFilterDescriptor(s->w);
    if (s->bias) cudnnDestroyTensorDescriptor(s->bias);
    if (s->y) cudnnDestroyTensorDescriptor(s->y);
    if (s->x) cudnnDestroyTensorDescriptor(s->x);
    free(s);
    l->gpu = NULL;
}

/* cuDNN pads each axis by one amount on both sides. */
static vdnn_status check_symmetric(const layer *l)
{
    const conv_params *p = (const conv_params *)l->priv;
    if (p->pad_top == p->pad_bottom && p->pad_left == p->pad_right) return VDNN_OK;
    return vdnn_fail(VDNN_EDEVICE,
                     "%s: asymmetric padding (top %d, bottom %d, left %d, right %d) has no cuDNN "
                     "convolution; pad symmetrically or run it on the CPU device",
                     l->name, p->pad_top, p->pad_bottom, p->pad_left, p->pad_right);
}

extern "C" vdnn_status conv_bind_cuda(layer *l, device *d)
{
    cuda_ctx *ctx = device_cuda_ctx(d);
    if (!ctx) return vdnn_fail(VDNN_EDEVICE, "%s: binding the CUDA half to a device that is not CUDA", l->name);
    vdnn_status sym = check_symmetric(l);
    if (sym != VDNN_OK) return sym;
    conv_unbind_cuda(l);
    conv_gpu *s = (conv_gpu *)calloc(1, sizeof *s);
    layer_algos *t = (layer_algos *)calloc(1, sizeof *t);
    if (!s || !t) {
        free(s);
        free(t);
        return vdnn_fail(VDNN_ENOMEM, "out of host memory for %s's cuDNN state", l->name);
    }
    l->gpu = s;
    const int allow_nondet = device_get_options(d)->nondeterministic != 0;
    vdnn_status st = make_descriptors(l, s, ctx->tf32);
    if (st == VDNN_OK) st = check_output(l, s);
    for (int pass = 0; pass < PASS_COUNT && st == VDNN_OK; pass++)
        st = list_pass(l, ctx->cudnn, s, pass, allow_nondet, t);
    if (st != VDNN_OK) {
        conv_unbind_cuda(l);
        free(t);
        return st;
    }
    free(l->algos);
    l->algos = t;
    return VDNN_OK;
}

/* ---- forward and backward ---------------------------------------------------------- */

/* The layer's cuDNN state and the device's context, or a failure for a layer that was
 * not bound to this CUDA device. */
static vdnn_status begin_call(layer *l, const exec_ctx *c, cuda_ctx **ctx, conv_gpu **s)
{
    *ctx = device_cuda_ctx(c->dev);
    *s = (conv_gpu *)l->gpu;
    if (!*ctx || !*s || !l->algos)
        return vdnn_fail(VDNN_EDEVICE, "%s: its CUDA half is not bound to this device (layer_bind)", l->name);
    if (c->n < 1 || c->n > l->in.n)
        return vdnn_fail(VDNN_EINVAL, "%s: batch of %d items, expected 1..%d", l->name, c->n, l->in.n);
    return set_batch(l, *s, c->n);
}

/* The cuDNN id of the algorithm chosen for `pass`. */
static vdnn_status chosen_id(const layer *l, int pass, int *id)
{
    int a = l->algo[pass];
    if (a < 0 || a >= l->algos->count[pass])
        return vdnn_fail(VDNN_EINVAL, "%s: no %s algorithm %d on this device (it has %d)", l->name,
                         pass_words[pass], a, l->algos->count[pass]);
    *id = l->algos->a[pass][a].id;
    if (*id < 0)
        return vdnn_fail(VDNN_EINVAL, "%s: the %s pass has no algorithm on this device (a first layer's, which never "
                         "runs)", l->name, pass_words[pass]);
    return VDNN_OK;
}

/* The table index of cuDNN's algorithm `id` in `pass`, or -1. */
static int index_of(const layer *l, int pass, int id)
{
    for (int a = 0; a < l->algos->count[pass]; a++)
        if (l->algos->a[pass][a].id == id) return a;
    return -1;
}

/* Bytes of c->workspace that cuDNN may use (none without a buffer). */
static size_t given_bytes(const exec_ctx *c)
{
    return c->workspace ? c->workspace_bytes : 0;
}

/* Checks that c->workspace holds what algorithm `id` of `pass` needs for c->n items.
 * At the max batch that is the table's figure; at another batch cuDNN is asked (the
 * answer is kept for the next call). Some algorithms need more at a smaller batch (a
 * last, partial batch): then the table's algorithm that needs least at this batch runs
 * instead, the same one under every policy, so runs stay comparable. */
static vdnn_status need_workspace(layer *l, const exec_ctx *c, cudnnHandle_t h, conv_gpu *s, int pass, int *id)
{
    size_t need = l->algos->a[pass][l->algo[pass]].workspace_bytes, given = given_bytes(c);
    if (c->n != l->in.n) {
        if (s->ws_n[pass] != c->n || s->ws_id[pass] != *id) {
            if (workspace_of(h, s, pass, *id, &need) != CUDNN_STATUS_SUCCESS) need = SIZE_MAX;
            s->ws_n[pass] = c->n;
            s->ws_id[pass] = *id;
            s->ws_bytes[pass] = need;
        }
        need = s->ws_bytes[pass];
    }
    if (need <= given) return VDNN_OK;
    int best = -1;
    size_t best_need = SIZE_MAX;
    for (int a = 0; a < l->algos->count[pass]; a++) {
        size_t b = 0;
        int aid = l->algos->a[pass][a].id;
        if (!layer_algo_usable(l, pass, a)) continue;
        if (workspace_of(h, s, pass, aid, &b) == CUDNN_STATUS_SUCCESS && b <= given && b < best_need) {
            best = aid;
            best_need = b;
        }
    }
    if (best < 0)
        return vdnn_fail(VDNN_EINVAL, "%s: the %s algorithm %s needs %zu bytes of workspace for %d items, %zu given, "
                         "and no other algorithm fits",
                         l->name, pass_words[pass], id_name(pass, *id), need, c->n, given);
    *id = best;
    return VDNN_OK;
}

/* layer_need_fn: cuDNN's workspace for table entry `algo` at the batch the descriptors
 * are set for (c->n, by begin_call). */
static size_t need_bytes(layer *l, const exec_ctx *c, int pass, int algo, void *arg)
{
    size_t bytes = 0;
    cudnnHandle_t h = (cudnnHandle_t)arg;
    (void)c;
    return workspace_of(h, (const conv_gpu *)l->gpu, pass, l->algos->a[pass][algo].id, &bytes) ==
                   CUDNN_STATUS_SUCCESS
               ? bytes
               : SIZE_MAX;
}

/* The cuDNN id that runs `pass` now: the chosen algorithm, or another when it failed
 * before or needs more workspace at this batch than was given. */
static vdnn_status pass_id(layer *l, const exec_ctx *c, cuda_ctx *ctx, conv_gpu *s, int pass, int *id)
{
    vdnn_status st = layer_algo_check(l, c, pass, need_bytes, ctx->cudnn);
    if (st == VDNN_OK) st = chosen_id(l, pass, id);
    if (st == VDNN_OK) st = need_workspace(l, c, ctx->cudnn, s, pass, id);
    return st;
}

/* cuDNN approves algorithms (heuristics, workspace query) that then say NOT_SUPPORTED or
 * fail to launch: such a status marks the algorithm failed, and the pass runs again
 * with another (layer_algo_failed); *retry says whether to. Other failures are errors. */
static vdnn_status after_call(layer *l, const exec_ctx *c, cuda_ctx *ctx, conv_gpu *s, int pass, cudnnStatus_t e,
                              const char *call, int *id, int *retry)
{
    *retry = 0;
    if (e == CUDNN_STATUS_SUCCESS) return VDNN_OK;
    if (e != CUDNN_STATUS_NOT_SUPPORTED && e != CUDNN_STATUS_EXECUTION_FAILED)
        return cuda_fail_dnn((int)e, call, __FILE__, __LINE__);
    cudaGetLastError();   /* a launch that failed leaves its error behind */
    const int failed = index_of(l, pass, *id);
    if (failed < 0) return cuda_fail_dnn((int)e, call, __FILE__, __LINE__);
    vdnn_status st = layer_algo_failed(l, c, pass, failed, cudnnGetErrorString(e), need_bytes, ctx->cudnn);
    if (st == VDNN_OK) st = pass_id(l, c, ctx, s, pass, id);
    *retry = st == VDNN_OK;
    return st;
}

extern "C" vdnn_status conv_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y)
{
    cuda_ctx *ctx = NULL;
    conv_gpu *s = NULL;
    int id = 0, retry = 1;
    vdnn_status st = begin_call(l, c, &ctx, &s);
    if (st == VDNN_OK) st = pass_id(l, c, ctx, s, PASS_FWD, &id);
    if (st != VDNN_OK) return st;
    const conv_params *p = (const conv_params *)l->priv;
    const float one = 1.0f, zero = 0.0f;
    while (retry && st == VDNN_OK) {
        cudnnStatus_t e = cudnnConvolutionForward(ctx->cudnn, &one, s->x, x, s->w, l->params[CONV_WEIGHTS].value,
                                                  s->conv, (cudnnConvolutionFwdAlgo_t)id, c->workspace,
                                                  given_bytes(c), &zero, s->y, y);
        st = after_call(l, c, ctx, s, PASS_FWD, e, "cudnnConvolutionForward", &id, &retry);
    }
    if (st != VDNN_OK) return st;
    if (p->bias)
        CUDNN_TRY(cudnnAddTensor(ctx->cudnn, &one, s->bias, l->params[CONV_BIAS].value, &one, s->y, y));
    return VDNN_OK;
}

/* The bias gradient: db[ch] = (accumulate ? db[ch] : 0) + the sum of dy over items and
 * positions of channel ch. One block per channel; thread t sums positions t, t + T, ...
 * of BIAS_ITEMS items at once (independent loads in flight), in float per item, then
 * in double, and the block adds its threads' sums in a fixed tree: the same bits every
 * run. */
#define BIAS_THREADS 1024
#define BIAS_ITEMS 8
static __global__ void __launch_bounds__(BIAS_THREADS)
    vdnn_conv_bias_grad(const float *dy, int n, int c, size_t hw, int accumulate, float *db)
{
    __shared__ double part[BIAS_THREADS];
    for (int ch = blockIdx.x; ch < c; ch += gridDim.x) {
        double acc = 0.0;
        int i = 0;
        for (; i + BIAS_ITEMS <= n; i += BIAS_ITEMS) {
            const float *p = dy + ((size_t)i * c + ch) * hw;
            const size_t step = (size_t)c * hw;
            float a[BIAS_ITEMS] = {0};
            for (size_t e = threadIdx.x; e < hw; e += BIAS_THREADS) {
#pragma unroll
                for (int k = 0; k < BIAS_ITEMS; k++) a[k] += p[k * step + e];
            }
#pragma unroll
            for (int k = 0; k < BIAS_ITEMS; k++) acc += (double)a[k];
        }
        for (; i < n; i++) {
            const float *p = dy + ((size_t)i * c + ch) * hw;
            float a = 0.0f;
            for (size_t e = threadIdx.x; e < hw; e += BIAS_THREADS) a += p[e];
            acc += (double)a;
        }
        part[threadIdx.x] = acc;
        __syncthreads();
        for (int half = BIAS_THREADS / 2; half > 0; half /= 2) {
            if ((int)threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
            __syncthreads();
        }
        if (threadIdx.x == 0) db[ch] = (float)(accumulate ? (double)db[ch] + part[0] : part[0]);
        __syncthreads();
    }
}

static vdnn_status bias_grad(const layer *l, const exec_ctx *c, cuda_ctx *ctx, const float *dy, int accumulate)
{
    const int oc = l->out.c;
    const unsigned blocks = oc < 65535 ? (unsigned)oc : 65535u;
    vdnn_conv_bias_grad<<<blocks, BIAS_THREADS, 0, ctx->compute>>>(dy, c->n, oc, (size_t)l->out.h * l->out.w,
                                                                   accumulate, l->params[CONV_BIAS].grad);
    CUDA_LAUNCH_CHECK();
    return VDNN_OK;
}

/* The filter, bias and (when dx is not NULL) data gradients. The filter and data passes
 * take c->workspace in turn: both are on the compute stream, so the second starts after
 * the first is done with it. */
extern "C" vdnn_status conv_backward_cuda(layer *l, const exec_ctx *c, const float *x, const float *y,
                                          const float *dy, float *dx)
{
    (void)y;
    cuda_ctx *ctx = NULL;
    conv_gpu *s = NULL;
    int fid = 0, did = 0, retry = 1;
    vdnn_status st = begin_call(l, c, &ctx, &s);
    if (st == VDNN_OK) st = pass_id(l, c, ctx, s, PASS_BWD_FILTER, &fid);
    if (st == VDNN_OK && dx) st = pass_id(l, c, ctx, s, PASS_BWD_DATA, &did);
    if (st != VDNN_OK) return st;
    const conv_params *p = (const conv_params *)l->priv;
    const param *w = &l->params[CONV_WEIGHTS];
    const float one = 1.0f, zero = 0.0f;
    const float *keep = c->accumulate ? &one : &zero;
    /* each pass retried alone: the filter pass is not run twice onto accumulating gradients */
    while (retry && st == VDNN_OK) {
        cudnnStatus_t e = cudnnConvolutionBackwardFilter(ctx->cudnn, &one, s->x, x, s->y, dy, s->conv,
                                                         (cudnnConvolutionBwdFilterAlgo_t)fid, c->workspace,
                                                         given_bytes(c), keep, s->w, w->grad);
        st = after_call(l, c, ctx, s, PASS_BWD_FILTER, e, "cudnnConvolutionBackwardFilter", &fid, &retry);
    }
    if (st != VDNN_OK) return st;
    if (p->bias && (st = bias_grad(l, c, ctx, dy, c->accumulate)) != VDNN_OK) return st;
    for (retry = dx != NULL; retry && st == VDNN_OK;) {
        cudnnStatus_t e = cudnnConvolutionBackwardData(ctx->cudnn, &one, s->w, w->value, s->y, dy, s->conv,
                                                       (cudnnConvolutionBwdDataAlgo_t)did, c->workspace,
                                                       given_bytes(c), &zero, s->x, dx);
        st = after_call(l, c, ctx, s, PASS_BWD_DATA, e, "cudnnConvolutionBackwardData", &did, &retry);
    }
    return st;
}

/* ---- cuDNN's own search ------------------------------------------------------------ */

/* The time cuDNN measured for each algorithm of the table in its answer to a Find call
 * (milliseconds), into secs (seconds) at the table's index; others stay unmeasured. */
template <typename perf_t>
static void take_times(const layer *l, int pass, const perf_t *perf, int got, cudnnMathType_t math,
                       double secs[PASS_COUNT][LAYER_MAX_ALGOS])
{
    conv_candidate cand[CONV_PERF_MAX];
    to_candidates(perf, got, cand);
    for (int a = 0; a < l->algos->count[pass]; a++) {
        const conv_candidate *c = pick(cand, got, l->algos->a[pass][a].id, math);
        if (!c) continue;
        const perf_t *p = &perf[c - cand];
        if (p->time >= 0) secs[pass][a] = (double)p->time * 1e-3;
    }
}

/* GPU clock cycles (about half a millisecond) the compute stream is held busy before a
 * timed bias call: longer than the host takes to issue the call and its events. */
#define HOLD_CYCLES 1000000LL

/* Spins one thread for `cycles` GPU clock cycles. */
static __global__ void vdnn_conv_hold(long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

/* The seconds the bias takes in the forward pass (added to y) and in the filter pass
 * (its gradient, overwritten), the least of three runs of each timed with CUDA events
 * on the compute stream after one untimed run. Each run is queued behind a kernel that
 * holds the stream busy, so that the events time the GPU's work alone: on an idle GPU
 * the first event would run at once and the second only after the host had issued the
 * call (a few tens of microseconds, as long as the whole bias of a small layer). */
static vdnn_status time_bias(const layer *l, const exec_ctx *c, cuda_ctx *ctx, conv_gpu *s, float *y,
                             const float *dy, double *fwd_s, double *bwd_s)
{
    cudaEvent_t ev[2];
    CUDA_TRY(cudaEventCreate(&ev[0]));
    if (cudaEventCreate(&ev[1]) != cudaSuccess) {
        cudaEventDestroy(ev[0]);
        return vdnn_fail(VDNN_EDEVICE, "%s: no CUDA event to time the bias with", l->name);
    }
    const float one = 1.0f;
    vdnn_status st = VDNN_OK;
    for (int pass = 0; pass < 2 && st == VDNN_OK; pass++) {
        double best = 1e30;
        for (int r = 0; r < 4 && st == VDNN_OK; r++) {
            vdnn_conv_hold<<<1, 1, 0, ctx->compute>>>(HOLD_CYCLES);
            cudaError_t e = cudaGetLastError();
            if (e != cudaSuccess) st = cuda_fail_rt((int)e, "vdnn_conv_hold", __FILE__, __LINE__);
            if (st == VDNN_OK && (e = cudaEventRecord(ev[0], ctx->compute)) != cudaSuccess)
                st = cuda_fail_rt((int)e, "cudaEventRecord", __FILE__, __LINE__);
            cudnnStatus_t d = CUDNN_STATUS_SUCCESS;
            if (st == VDNN_OK && pass == 0)
                d = cudnnAddTensor(ctx->cudnn, &one, s->bias, l->params[CONV_BIAS].value, &one, s->y, y);
            if (d != CUDNN_STATUS_SUCCESS) st = cuda_fail_dnn((int)d, "cudnnAddTensor", __FILE__, __LINE__);
            if (st == VDNN_OK && pass == 1) st = bias_grad(l, c, ctx, dy, 0);
            float ms = 0.0f;
            if (st == VDNN_OK && (e = cudaEventRecord(ev[1], ctx->compute)) == cudaSuccess &&
                (e = cudaEventSynchronize(ev[1])) == cudaSuccess)
                e = cudaEventElapsedTime(&ms, ev[0], ev[1]);
            if (st == VDNN_OK && e != cudaSuccess) st = cuda_fail_rt((int)e, "timing the bias", __FILE__, __LINE__);
            if (st == VDNN_OK && r > 0 && ms * 1e-3 < best) best = ms * 1e-3;
        }
        *(pass == 0 ? fwd_s : bwd_s) = best;
    }
    cudaEventDestroy(ev[0]);
    cudaEventDestroy(ev[1]);
    return st;
}

/* Adds `extra` seconds to every measured time of one pass. */
static void add_to_pass(double *secs, double extra)
{
    for (int a = 0; a < LAYER_MAX_ALGOS; a++)
        if (secs[a] < LAYER_UNMEASURED) secs[a] += extra;
}

/* cudnnFind...AlgorithmEx on the caller's buffers: cuDNN runs every algorithm whose
 * workspace fits c->workspace and times it with CUDA events. The forward pass writes y,
 * the filter pass the weights' gradient and the data pass dx, all scratch here. The
 * bias, the same for every algorithm, is timed apart (time_bias) and added to each
 * forward and filter-pass time, as the layer runs it. */
extern "C" vdnn_status conv_find_cuda(layer *l, const exec_ctx *c, const float *x, float *y, const float *dy,
                                      float *dx, double secs[PASS_COUNT][LAYER_MAX_ALGOS])
{
    cuda_ctx *ctx = NULL;
    conv_gpu *s = NULL;
    vdnn_status st = begin_call(l, c, &ctx, &s);
    if (st != VDNN_OK) return st;
    for (int p = 0; p < PASS_COUNT; p++)
        for (int a = 0; a < LAYER_MAX_ALGOS; a++) secs[p][a] = LAYER_UNMEASURED;
    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
    CUDNN_TRY(cudnnGetConvolutionMathType(s->conv, &math));
    const param *w = &l->params[CONV_WEIGHTS];
    const size_t ws = given_bytes(c);
    int got = 0, max = 0;
    {
        cudnnConvolutionFwdAlgoPerf_t perf[CONV_PERF_MAX];
        CUDNN_TRY(cudnnGetConvolutionForwardAlgorithmMaxCount(ctx->cudnn, &max));
        CUDNN_TRY(cudnnFindConvolutionForwardAlgorithmEx(ctx->cudnn, s->x, x, s->w, w->value, s->conv, s->y, y,
                                                         max < CONV_PERF_MAX ? max : CONV_PERF_MAX, &got, perf,
                                                         c->workspace, ws));
        take_times(l, PASS_FWD, perf, got, math, secs);
    }
    {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CONV_PERF_MAX];
        CUDNN_TRY(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(ctx->cudnn, &max));
        CUDNN_TRY(cudnnFindConvolutionBackwardFilterAlgorithmEx(ctx->cudnn, s->x, x, s->y, dy, s->conv, s->w, w->grad,
                                                                max < CONV_PERF_MAX ? max : CONV_PERF_MAX, &got,
                                                                perf, c->workspace, ws));
        take_times(l, PASS_BWD_FILTER, perf, got, math, secs);
    }
    if (dx) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CONV_PERF_MAX];
        CUDNN_TRY(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(ctx->cudnn, &max));
        CUDNN_TRY(cudnnFindConvolutionBackwardDataAlgorithmEx(ctx->cudnn, s->w, w->value, s->y, dy, s->conv, s->x, dx,
                                                              max < CONV_PERF_MAX ? max : CONV_PERF_MAX, &got, perf,
                                                              c->workspace, ws));
        take_times(l, PASS_BWD_DATA, perf, got, math, secs);
    }
    const conv_params *p = (const conv_params *)l->priv;
    if (p->bias) {
        double fb = 0, bb = 0;
        st = time_bias(l, c, ctx, s, y, dy, &fb, &bb);
        if (st != VDNN_OK) return st;
        add_to_pass(secs[PASS_FWD], fb);
        add_to_pass(secs[PASS_BWD_FILTER], bb);
    }
    return VDNN_OK;
}
