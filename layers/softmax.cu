/* The loss layer (CUDA half): softmax over C*H*W per item with cross-entropy loss.
 *
 * The probabilities are cuDNN's (cudnnSoftmaxForward, accurate, instance mode: the
 * CPU's softmax over C*H*W per item, max subtracted). The loss and the top-1 hits are
 * own kernels, as cuDNN has no cross-entropy: per item, in double from x as on the CPU
 * (logsumexp(x) - x[label], the first maximum as the prediction), into the layer's
 * workspace; then one block sums them in a fixed order (no atomics), so the total is the
 * same on every run. The sums come back through the device's pinned scratch, for which
 * the layer waits for the GPU.
 *
 * Labels live in device memory: the same summing kernel finds the first label outside
 * [0, classes), which comes back with the sums and fails the call as check_labels does
 * on the CPU. Backward (dx = (p - onehot(label)) * grad_scale, from y alone) does not
 * check them again, unlike the CPU half: the iteration always runs this forward first
 * on the same labels, and a second check would stall the host on the GPU once more per
 * step. */
#include "vdnn/cuda_util.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "layers/softmax.h"

#define LOSS_THREADS 256   /* per block of the per-item and the summing kernels; a power of 2 */

/* What comes back to the host. */
typedef struct loss_result {
    double loss;      /* summed over the items */
    int correct;      /* items whose first maximum is the label */
    int bad_item;     /* the first item with a label outside [0, classes), or -1 */
    int bad_label;    /* its label */
    int pad_;
} loss_result;

/* Workspace layout: the result, then per-item losses (double) and hits (int). */
#define LOSS_RESULT_BYTES ((size_t)32)
static_assert(sizeof(loss_result) <= LOSS_RESULT_BYTES && sizeof(loss_result) <= CUDA_SCRATCH_BYTES,
              "the loss result fits its slot and the pinned scratch");

static size_t forward_ws_bytes(int n)
{
    return LOSS_RESULT_BYTES + (size_t)n * (sizeof(double) + sizeof(int));
}

/* l->gpu */
typedef struct softmax_gpu {
    cudnnTensorDescriptor_t t;   /* (n, C, H, W), set per call */
} softmax_gpu;

extern "C" vdnn_status softmax_bind_cuda(layer *l, device *d)
{
    (void)d;
    softmax_gpu *g = (softmax_gpu *)calloc(1, sizeof *g);
    if (!g) return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory for its CUDA state", l->name);
    l->gpu = g;   /* the caller unbinds it on failure */
    CUDNN_TRY(cudnnCreateTensorDescriptor(&g->t));
    layer_algos *t = (layer_algos *)calloc(1, sizeof *t);
    if (!t)
        return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory for its algorithm table", l->name);
    /* One algorithm per pass, named as the CPU's, so that plans name it the same way. */
    for (int p = 0; p < PASS_COUNT; p++) {
        t->count[p] = 1;
        snprintf(t->a[p][0].name, sizeof t->a[p][0].name, "default");
        t->a[p][0].deterministic = 1;
    }
    t->a[PASS_FWD][0].workspace_bytes = forward_ws_bytes(l->in.n);
    l->algos = t;
    return VDNN_OK;
}

extern "C" void softmax_unbind_cuda(layer *l)
{
    softmax_gpu *g = (softmax_gpu *)l->gpu;
    if (!g) return;
    if (g->t) cudnnDestroyTensorDescriptor(g->t);
    free(g);
    l->gpu = NULL;
}

/* Whether (v, i) comes before (bv, bi) as the first maximum: larger, or as large and
 * earlier. An index of SIZE_MAX is no candidate. */
__device__ static bool beats(float v, size_t i, float bv, size_t bi)
{
    if (i == SIZE_MAX) return false;
    if (bi == SIZE_MAX) return true;
    return v > bv || (v == bv && i < bi);
}

/* One block per item (grid-stride over items): loss[i] = logsumexp(x_i) - x_i[label] in
 * double and hit[i] = (label == first argmax), both 0 for a label out of range (the
 * summing kernel reports it). */
static __global__ void vdnn_loss_item_kernel(int n, size_t d, const float *x, const int32_t *labels,
                                        double *loss, int *hit)
{
    __shared__ float s_v[LOSS_THREADS];
    __shared__ size_t s_i[LOSS_THREADS];
    __shared__ double s_sum[LOSS_THREADS];
    const int t = threadIdx.x;
    for (int item = blockIdx.x; item < n; item += gridDim.x) {
        const float *xi = x + (size_t)item * d;
        float bv = 0.0f;
        size_t bi = SIZE_MAX;
        for (size_t j = t; j < d; j += LOSS_THREADS)
            if (bi == SIZE_MAX || xi[j] > bv) {
                bv = xi[j];
                bi = j;
            }
        s_v[t] = bv;
        s_i[t] = bi;
        __syncthreads();
        for (int s = LOSS_THREADS / 2; s > 0; s >>= 1) {
            if (t < s && beats(s_v[t + s], s_i[t + s], s_v[t], s_i[t])) {
                s_v[t] = s_v[t + s];
                s_i[t] = s_i[t + s];
            }
            __syncthreads();
        }
        const size_t best = s_i[0];
        const double m = xi[best];
        double sum = 0.0;
        for (size_t j = t; j < d; j += LOSS_THREADS) sum += exp((double)xi[j] - m);
        s_sum[t] = sum;
        __syncthreads();
        for (int s = LOSS_THREADS / 2; s > 0; s >>= 1) {
            if (t < s) s_sum[t] += s_sum[t + s];
            __syncthreads();
        }
        if (t == 0) {
            const int32_t label = labels[item];
            const bool ok = label >= 0 && (size_t)label < d;
            loss[item] = ok ? m + log(s_sum[0]) - (double)xi[label] : 0.0;
            hit[item] = ok && (size_t)label == best;
        }
        __syncthreads();   /* the shared arrays are reused by the next item */
    }
}

/* One block: the sums of loss and hit (either may be NULL: 0) over n items, each thread
 * taking items t, t + LOSS_THREADS, ... and the block adding the threads' sums in a
 * fixed tree; and the first label outside [0, d). */
static __global__ void vdnn_loss_sum_kernel(int n, size_t d, const int32_t *labels, const double *loss,
                                       const int *hit, loss_result *res)
{
    __shared__ double s_loss[LOSS_THREADS];
    __shared__ int s_hit[LOSS_THREADS];
    __shared__ int s_bad[LOSS_THREADS];
    const int t = threadIdx.x;
    double sl = 0.0;
    int sh = 0, bad = INT_MAX;
    for (int i = t; i < n; i += LOSS_THREADS) {
        if (loss) sl += loss[i];
        if (hit) sh += hit[i];
        const int32_t label = labels[i];
        if ((label < 0 || (size_t)label >= d) && i < bad) bad = i;
    }
    s_loss[t] = sl;
    s_hit[t] = sh;
    s_bad[t] = bad;
    __syncthreads();
    for (int s = LOSS_THREADS / 2; s > 0; s >>= 1) {
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
static vdnn_status fetch_result(const layer *l, const exec_ctx *c, cuda_ctx *ctx,
                                const loss_result *res, loss_result *out)
{
    CUDA_TRY(cudaMemcpyAsync(ctx->pinned_scratch, res, sizeof *res, cudaMemcpyDeviceToHost,
                             ctx->compute));
    CUDA_TRY(cudaStreamSynchronize(ctx->compute));
    *out = *(const loss_result *)ctx->pinned_scratch;
    if (out->bad_item >= 0)
        return vdnn_fail(VDNN_EINVAL, "%s: label %d of item %d is outside [0, %zu)", l->name,
                         out->bad_label, c->item_offset + out->bad_item, shape_per_item(l->in));
    return VDNN_OK;
}

static vdnn_status check_workspace(const layer *l, const exec_ctx *c, size_t need)
{
    if (c->workspace && c->workspace_bytes >= need) return VDNN_OK;
    return vdnn_fail(VDNN_EINVAL,
                     "%s: the CUDA loss needs a workspace of %zu bytes for %d items, got %zu "
                     "(layer_workspace_bytes)",
                     l->name, need, c->n, c->workspace ? c->workspace_bytes : (size_t)0);
}

extern "C" vdnn_status softmax_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y)
{
    softmax_gpu *g = (softmax_gpu *)l->gpu;
    if (!g)
        return vdnn_fail(VDNN_EDEVICE, "%s: not bound to the CUDA device (layer_bind)", l->name);
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    const size_t d = shape_per_item(l->in);
    const int n = c->n, want = c->labels && (c->loss_sum || c->correct);
    const float one = 1.0f, zero = 0.0f;
    const size_t chunk = cuda_cudnn_chunk(l->in);
    for (size_t i0 = 0; i0 < (size_t)n; i0 += chunk) {
        const int items = (int)((size_t)n - i0 < chunk ? (size_t)n - i0 : chunk);
        CUDNN_TRY(cudnnSetTensor4dDescriptor(g->t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, items,
                                             l->in.c, l->in.h, l->in.w));
        CUDNN_TRY(cudnnSoftmaxForward(ctx->cudnn, CUDNN_SOFTMAX_ACCURATE,
                                      CUDNN_SOFTMAX_MODE_INSTANCE, &one, g->t, x + i0 * d, &zero,
                                      g->t, y + i0 * d));
    }
    if (!c->labels) return VDNN_OK;
    vdnn_status st = check_workspace(l, c, want ? forward_ws_bytes(n) : LOSS_RESULT_BYTES);
    if (st != VDNN_OK) return st;
    loss_result *res = (loss_result *)c->workspace;
    double *loss = NULL;
    int *hit = NULL;
    if (want) {
        loss = (double *)((char *)c->workspace + LOSS_RESULT_BYTES);
        hit = (int *)(loss + n);
        const unsigned blocks = n < 65535 ? (unsigned)n : 65535u;
        vdnn_loss_item_kernel<<<blocks, LOSS_THREADS, 0, ctx->compute>>>(n, d, x, c->labels, loss, hit);
        CUDA_LAUNCH_CHECK();
    }
    vdnn_loss_sum_kernel<<<1, LOSS_THREADS, 0, ctx->compute>>>(n, d, c->labels, loss, hit, res);
    CUDA_LAUNCH_CHECK();
    loss_result r = {0.0, 0, -1, 0, 0};
    st = fetch_result(l, c, ctx, res, &r);
    if (st != VDNN_OK) return st;
    if (c->loss_sum) *c->loss_sum += r.loss;
    if (c->correct) *c->correct += r.correct;
    return VDNN_OK;
}

/* dx = p * g, and (p - 1) * g at the label (left as p * g for a label out of range,
 * which the caller then reports). */
static __global__ void vdnn_loss_grad_kernel(size_t count, size_t d, float g, const int32_t *labels,
                                        const float *y, float *dx)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < count;
         e += (size_t)gridDim.x * blockDim.x) {
        const size_t item = e / d, j = e - item * d;
        const int32_t label = labels[item];
        const float p = y[e];
        dx[e] = label >= 0 && (size_t)label == j ? (p - 1.0f) * g : p * g;
    }
}

extern "C" vdnn_status softmax_backward_cuda(layer *l, const exec_ctx *c, const float *x,
                                             const float *y, const float *dy, float *dx)
{
    (void)x;
    (void)dy;
    if (!dx) return VDNN_OK;
    if (!c->labels) return vdnn_fail(VDNN_EINVAL, "%s: backward needs labels", l->name);
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    const size_t d = shape_per_item(l->in), count = (size_t)c->n * d;
    vdnn_loss_grad_kernel<<<cuda_blocks(count), CUDA_THREADS, 0, ctx->compute>>>(count, d, c->grad_scale,
                                                                            c->labels, y, dx);
    CUDA_LAUNCH_CHECK();
    return VDNN_OK;
}
