/* Elementwise activations (CUDA half): relu, leaky relu, tanh, sigmoid and clip.
 *
 * Forward of relu, tanh and sigmoid is cuDNN's cudnnActivationForward, whose contract is
 * ours (relu with NaN not propagated gives 0, as the CPU's x > 0 ? x : 0 does). Leaky
 * relu has no cuDNN mode and gets a kernel; so does clip (cuDNN's clipped relu has no
 * lower bound). Every backward is a kernel: cuDNN's
 * activation backward takes x, but ours reads only y and dy (needs_input = 0, so x may
 * already be offloaded or freed), with each derivative written in y as on the CPU. */
#include "vdnn/cuda_util.h"

#include <limits.h>
#include <stdlib.h>

#include "layers/activation.h"

enum { ACT_RELU = 0, ACT_LEAKY, ACT_TANH, ACT_SIGMOID };

/* l->gpu of relu, tanh and sigmoid. */
typedef struct act_gpu {
    cudnnActivationDescriptor_t act;
    cudnnTensorDescriptor_t t;   /* (n, C, H, W), set per call */
} act_gpu;

static vdnn_status act_bind(layer *l, cudnnActivationMode_t mode)
{
    act_gpu *g = (act_gpu *)calloc(1, sizeof *g);
    if (!g) return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory for its CUDA state", l->name);
    l->gpu = g;   /* the caller unbinds it on failure */
    CUDNN_TRY(cudnnCreateActivationDescriptor(&g->act));
    CUDNN_TRY(cudnnSetActivationDescriptor(g->act, mode, CUDNN_NOT_PROPAGATE_NAN, 0.0));
    CUDNN_TRY(cudnnCreateTensorDescriptor(&g->t));
    return VDNN_OK;
}

extern "C" vdnn_status relu_bind_cuda(layer *l, device *d)
{
    (void)d;
    return act_bind(l, CUDNN_ACTIVATION_RELU);
}

extern "C" vdnn_status tanh_bind_cuda(layer *l, device *d)
{
    (void)d;
    return act_bind(l, CUDNN_ACTIVATION_TANH);
}

extern "C" vdnn_status sigmoid_bind_cuda(layer *l, device *d)
{
    (void)d;
    return act_bind(l, CUDNN_ACTIVATION_SIGMOID);
}

extern "C" void act_unbind_cuda(layer *l)
{
    act_gpu *g = (act_gpu *)l->gpu;
    if (!g) return;
    if (g->t) cudnnDestroyTensorDescriptor(g->t);
    if (g->act) cudnnDestroyActivationDescriptor(g->act);
    free(g);
    l->gpu = NULL;
}

static size_t act_count(const layer *l, const exec_ctx *c)
{
    return (size_t)c->n * shape_per_item(l->in);
}

static vdnn_status cudnn_forward(layer *l, const exec_ctx *c, const float *x, float *y)
{
    act_gpu *g = (act_gpu *)l->gpu;
    if (!g)
        return vdnn_fail(VDNN_EDEVICE, "%s: not bound to the CUDA device (layer_bind)", l->name);
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    const float one = 1.0f, zero = 0.0f;
    const size_t per_item = shape_per_item(l->in), n = (size_t)c->n, chunk = cuda_cudnn_chunk(l->in);
    for (size_t i0 = 0; i0 < n; i0 += chunk) {
        const int items = (int)(n - i0 < chunk ? n - i0 : chunk);
        const size_t off = i0 * per_item;
        CUDNN_TRY(cudnnSetTensor4dDescriptor(g->t, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, items,
                                             l->in.c, l->in.h, l->in.w));
        CUDNN_TRY(cudnnActivationForward(ctx->cudnn, g->act, &one, g->t, x + off, &zero, g->t,
                                         y + off));
    }
    return VDNN_OK;
}

static __global__ void vdnn_leaky_forward_kernel(size_t n, float slope, const float *x, float *y)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = x[i] > 0.0f ? x[i] : slope * x[i];
}

static __global__ void vdnn_clip_forward_kernel(size_t n, float lo, float hi, const float *x, float *y)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
}

static __global__ void vdnn_clip_backward_kernel(size_t n, float lo, float hi, const float *y, const float *dy,
                                                 float *dx)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dx[i] = y[i] > lo && y[i] < hi ? dy[i] : 0.0f;
}

/* dx from y and dy. Products that the CPU rounds before using go through __fmul_rn, so
 * that nvcc does not fuse them into an FMA and the bits stay the CPU's. */
template <int K>
static __global__ void vdnn_act_backward_kernel(size_t n, float slope, const float *y, const float *dy,
                                           float *dx)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float yi = y[i], g = dy[i];
        if (K == ACT_RELU) dx[i] = yi > 0.0f ? g : 0.0f;
        if (K == ACT_LEAKY) dx[i] = yi > 0.0f ? g : slope * g;
        if (K == ACT_TANH) dx[i] = g * (1.0f - __fmul_rn(yi, yi));
        if (K == ACT_SIGMOID) dx[i] = g * yi * (1.0f - yi);
    }
}

template <int K>
static vdnn_status act_backward(layer *l, const exec_ctx *c, const float *y, const float *dy,
                                float *dx, float slope)
{
    if (!dx) return VDNN_OK;
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    const size_t n = act_count(l, c);
    vdnn_act_backward_kernel<K><<<cuda_blocks(n), CUDA_THREADS, 0, ctx->compute>>>(n, slope, y, dy, dx);
    CUDA_LAUNCH_CHECK();
    return VDNN_OK;
}

extern "C" vdnn_status relu_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y)
{
    return cudnn_forward(l, c, x, y);
}

extern "C" vdnn_status relu_backward_cuda(layer *l, const exec_ctx *c, const float *x,
                                          const float *y, const float *dy, float *dx)
{
    (void)x;
    return act_backward<ACT_RELU>(l, c, y, dy, dx, 0.0f);
}

extern "C" vdnn_status leaky_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y)
{
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    const float slope = ((const leaky_priv *)l->priv)->slope;
    const size_t n = act_count(l, c);
    vdnn_leaky_forward_kernel<<<cuda_blocks(n), CUDA_THREADS, 0, ctx->compute>>>(n, slope, x, y);
    CUDA_LAUNCH_CHECK();
    return VDNN_OK;
}

extern "C" vdnn_status leaky_backward_cuda(layer *l, const exec_ctx *c, const float *x,
                                           const float *y, const float *dy, float *dx)
{
    (void)x;
    const float slope = ((const leaky_priv *)l->priv)->slope;
    return act_backward<ACT_LEAKY>(l, c, y, dy, dx, slope);
}

extern "C" vdnn_status tanh_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y)
{
    return cudnn_forward(l, c, x, y);
}

extern "C" vdnn_status tanh_backward_cuda(layer *l, const exec_ctx *c, const float *x,
                                          const float *y, const float *dy, float *dx)
{
    (void)x;
    return act_backward<ACT_TANH>(l, c, y, dy, dx, 0.0f);
}

extern "C" vdnn_status sigmoid_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y)
{
    return cudnn_forward(l, c, x, y);
}

extern "C" vdnn_status sigmoid_backward_cuda(layer *l, const exec_ctx *c, const float *x,
                                             const float *y, const float *dy, float *dx)
{
    (void)x;
    return act_backward<ACT_SIGMOID>(l, c, y, dy, dx, 0.0f);
}

extern "C" vdnn_status clip_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y)
{
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    const clip_priv *p = (const clip_priv *)l->priv;
    const size_t n = act_count(l, c);
    vdnn_clip_forward_kernel<<<cuda_blocks(n), CUDA_THREADS, 0, ctx->compute>>>(n, p->lo, p->hi, x, y);
    CUDA_LAUNCH_CHECK();
    return VDNN_OK;
}

extern "C" vdnn_status clip_backward_cuda(layer *l, const exec_ctx *c, const float *x,
                                          const float *y, const float *dy, float *dx)
{
    (void)x;
    if (!dx) return VDNN_OK;
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    const clip_priv *p = (const clip_priv *)l->priv;
    const size_t n = act_count(l, c);
    vdnn_clip_backward_kernel<<<cuda_blocks(n), CUDA_THREADS, 0, ctx->compute>>>(n, p->lo, p->hi, y, dy, dx);
    CUDA_LAUNCH_CHECK();
    return VDNN_OK;
}
