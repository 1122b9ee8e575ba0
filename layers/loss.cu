/* The logistic and L2 loss layers (CUDA half): small kernels, as cuDNN has neither loss.
 *
 * The semantics are the CPU half's (layers/loss.c): targets from the labels (the label
 * itself for one output, one-hot for several), y = sigmoid(x) or x, the per-item loss
 * in double in output order, the gradient (y - t) * grad_scale from y alone. Forward
 * writes y with one thread per output, then one thread per item computes its loss and
 * hit into the layer's workspace, and one block sums them in a fixed tree (no atomics)
 * and finds the first label outside [0, classes); the sums come back through the
 * device's pinned scratch, for which the layer waits for the GPU, as softmax.cu does.
 * Backward does not check the labels again: the iteration always runs this forward
 * first on the same labels. */
#include "vdnn/cuda_util.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "layers/loss.h"

#define SUM_THREADS 256   /* the summing block; a power of 2 */

/* What comes back to the host. */
typedef struct target_result {
    double loss;      /* summed over the items */
    int correct;      /* items whose prediction rounds to the label */
    int bad_item;     /* the first item with a label outside [0, classes), or -1 */
    int bad_label;    /* its label */
    int pad_;
} target_result;

/* Workspace layout: the result, then per-item losses (double) and hits (int). */
#define RESULT_BYTES ((size_t)32)
static_assert(sizeof(target_result) <= RESULT_BYTES && sizeof(target_result) <= CUDA_SCRATCH_BYTES,
              "the loss result fits its slot and the pinned scratch");

static size_t forward_ws_bytes(int n)
{
    return RESULT_BYTES + (size_t)n * (sizeof(double) + sizeof(int));
}

/* One algorithm per pass, "default" as the CPU's, the forward one with the workspace. */
static vdnn_status bind_table(layer *l)
{
    layer_algos *t = (layer_algos *)calloc(1, sizeof *t);
    if (!t) return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory for its algorithm table", l->name);
    for (int p = 0; p < PASS_COUNT; p++) {
        t->count[p] = 1;
        snprintf(t->a[p][0].name, sizeof t->a[p][0].name, "default");
        t->a[p][0].deterministic = 1;
    }
    t->a[PASS_FWD][0].workspace_bytes = forward_ws_bytes(l->in.n);
    l->algos = t;
    return VDNN_OK;
}

extern "C" vdnn_status logistic_bind_cuda(layer *l, device *d)
{
    (void)d;
    return bind_table(l);
}

extern "C" vdnn_status l2_bind_cuda(layer *l, device *d)
{
    (void)d;
    return bind_table(l);
}

/* Labels range over the outputs, or over 0 and 1 for a single output. */
__host__ __device__ static size_t classes_of(size_t d)
{
    return d == 1 ? 2 : d;
}

__device__ static float target_of(size_t d, size_t j, int32_t label)
{
    if (d == 1) return (float)label;
    return j == (size_t)label ? 1.0f : 0.0f;
}

template <int K>
static __global__ void vdnn_target_forward_kernel(size_t count, const float *x, float *y)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < count;
         e += (size_t)gridDim.x * blockDim.x)
        y[e] = K == LOSS_LOGISTIC ? 1.0f / (1.0f + expf(-x[e])) : x[e];
}

/* One thread per item: its loss over the d outputs in output order (as item_loss in
 * loss.c) and its hit; both 0 for a label out of range (the summing kernel reports it). */
template <int K>
static __global__ void vdnn_target_item_kernel(int n, size_t d, const float *x, const int32_t *labels,
                                               double *loss, int *hit)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        const float *xi = x + (size_t)i * d;
        const int32_t label = labels[i];
        if (label < 0 || (size_t)label >= classes_of(d)) {
            loss[i] = 0.0;
            hit[i] = 0;
            continue;
        }
        double sum = 0.0;
        size_t best = 0;
        for (size_t j = 0; j < d; j++) {
            const double v = xi[j], t = target_of(d, j, label);
            if (K == LOSS_LOGISTIC) sum += fmax(v, 0.0) - t * v + log1p(exp(-fabs(v)));
            else sum += 0.5 * (v - t) * (v - t);
            if (xi[j] > xi[best]) best = j;
        }
        loss[i] = sum;
        if (d > 1) hit[i] = best == (size_t)label;
        else if (K == LOSS_LOGISTIC) hit[i] = (xi[0] > 0.0f) == (label == 1);
        else hit[i] = fabs((double)xi[0] - label) < 0.5;
    }
}

/* One block: the sums of loss and hit (either may be NULL: 0) over n items in a fixed
 * tree, and the first label outside [0, classes). */
static __global__ void vdnn_target_sum_kernel(int n, size_t classes, const int32_t *labels, const double *loss,
                                              const int *hit, target_result *res)
{
    __shared__ double s_loss[SUM_THREADS];
    __shared__ int s_hit[SUM_THREADS];
    __shared__ int s_bad[SUM_THREADS];
    const int t = threadIdx.x;
    double sl = 0.0;
    int sh = 0, bad = INT_MAX;
    for (int i = t; i < n; i += SUM_THREADS) {
        if (loss) sl += loss[i];
        if (hit) sh += hit[i];
        if ((labels[i] < 0 || (size_t)labels[i] >= classes) && i < bad) bad = i;
    }
    s_loss[t] = sl;
    s_hit[t] = sh;
    s_bad[t] = bad;
    __syncthreads();
    for (int s = SUM_THREADS / 2; s > 0; s >>= 1) {
        if (t < s) {
            s_loss[t] += s_loss[t + s];
            s_hit[t] += s_hit[t + s];
            s_bad[t] = s_bad[t + s] < s_bad[t] ? s_bad[t + s] : s_bad[t];
        }
        __syncthreads();
    }
    if (t == 0) {
        res->loss = s_loss[0];
        res->correct = s_hit[0];
        res->bad_item = s_bad[0] == INT_MAX ? -1 : s_bad[0];
        res->bad_label = s_bad[0] == INT_MAX ? 0 : (int)labels[s_bad[0]];
        res->pad_ = 0;
    }
}

/* Brings *res (device) to the host and fails on a bad label as check_labels does. */
static vdnn_status fetch_result(const layer *l, const exec_ctx *c, cuda_ctx *ctx, const target_result *res,
                                target_result *out)
{
    CUDA_TRY(cudaMemcpyAsync(ctx->pinned_scratch, res, sizeof *res, cudaMemcpyDeviceToHost, ctx->compute));
    CUDA_TRY(cudaStreamSynchronize(ctx->compute));
    *out = *(const target_result *)ctx->pinned_scratch;
    if (out->bad_item >= 0)
        return vdnn_fail(VDNN_EINVAL, "%s: label %d of item %d is outside [0, %zu)", l->name, out->bad_label,
                         c->item_offset + out->bad_item, classes_of(shape_per_item(l->in)));
    return VDNN_OK;
}

/* The per-item losses and the label check of forward, into c's counters. */
template <int K>
static vdnn_status add_losses(layer *l, const exec_ctx *c, cuda_ctx *ctx, const float *x)
{
    const size_t d = shape_per_item(l->in);
    const int n = c->n, want = c->loss_sum || c->correct;
    const size_t need = want ? forward_ws_bytes(n) : RESULT_BYTES;
    if (!c->workspace || c->workspace_bytes < need)
        return vdnn_fail(VDNN_EINVAL, "%s: the CUDA loss needs a workspace of %zu bytes for %d items, got %zu "
                         "(layer_workspace_bytes)", l->name, need, n, c->workspace ? c->workspace_bytes : (size_t)0);
    target_result *res = (target_result *)c->workspace;
    double *loss = NULL;
    int *hit = NULL;
    if (want) {
        loss = (double *)((char *)c->workspace + RESULT_BYTES);
        hit = (int *)(loss + n);
        vdnn_target_item_kernel<K><<<cuda_blocks((size_t)n), CUDA_THREADS, 0, ctx->compute>>>(n, d, x, c->labels,
                                                                                              loss, hit);
        CUDA_LAUNCH_CHECK();
    }
    vdnn_target_sum_kernel<<<1, SUM_THREADS, 0, ctx->compute>>>(n, classes_of(d), c->labels, loss, hit, res);
    CUDA_LAUNCH_CHECK();
    target_result r = {0.0, 0, -1, 0, 0};
    vdnn_status st = fetch_result(l, c, ctx, res, &r);
    if (st != VDNN_OK) return st;
    if (c->loss_sum) *c->loss_sum += r.loss;
    if (c->correct) *c->correct += r.correct;
    return VDNN_OK;
}

template <int K>
static vdnn_status target_forward(layer *l, const exec_ctx *c, const float *x, float *y)
{
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    const size_t count = (size_t)c->n * shape_per_item(l->in);
    vdnn_target_forward_kernel<K><<<cuda_blocks(count), CUDA_THREADS, 0, ctx->compute>>>(count, x, y);
    CUDA_LAUNCH_CHECK();
    return c->labels ? add_losses<K>(l, c, ctx, x) : VDNN_OK;
}

extern "C" vdnn_status logistic_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y)
{
    return target_forward<LOSS_LOGISTIC>(l, c, x, y);
}

extern "C" vdnn_status l2_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y)
{
    return target_forward<LOSS_L2>(l, c, x, y);
}

/* dx = (y - t) * g, products rounded as the CPU's (no FMA). */
static __global__ void vdnn_target_grad_kernel(size_t count, size_t d, float g, const int32_t *labels,
                                               const float *y, float *dx)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < count;
         e += (size_t)gridDim.x * blockDim.x) {
        const size_t item = e / d, j = e - item * d;
        dx[e] = __fmul_rn(y[e] - target_of(d, j, labels[item]), g);
    }
}

extern "C" vdnn_status target_backward_cuda(layer *l, const exec_ctx *c, const float *x, const float *y,
                                            const float *dy, float *dx)
{
    (void)x;
    (void)dy;
    if (!dx) return VDNN_OK;
    if (!c->labels) return vdnn_fail(VDNN_EINVAL, "%s: backward needs labels", l->name);
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    const size_t d = shape_per_item(l->in), count = (size_t)c->n * d;
    vdnn_target_grad_kernel<<<cuda_blocks(count), CUDA_THREADS, 0, ctx->compute>>>(count, d, c->grad_scale,
                                                                                  c->labels, y, dx);
    CUDA_LAUNCH_CHECK();
    return VDNN_OK;
}
