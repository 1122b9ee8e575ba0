/* The fully connected layer (CUDA half): y = x W^T + b with cuBLAS on the device's
 * compute stream, with the CPU half's layouts and semantics (layers/connected.c).
 *
 * Row-major data, column-major cuBLAS. A row-major (R, C) matrix with leading dimension
 * C is, read by cuBLAS, the column-major (C, R) matrix with the same leading dimension:
 * its transpose, at no cost. So, with x (N, IN), W (OUT, IN), y and dy (N, OUT) and dx
 * (N, IN) row-major, cuBLAS sees x^T (IN, N), W^T (IN, OUT), y^T and dy^T (OUT, N) and
 * dx^T (IN, N), and each product is written for the transposes:
 *
 *   forward   y = x W^T        <=>  y^T (OUT, N)  = (W^T)^T (OUT, IN) x^T (IN, N)
 *             gemm(T, N, m=OUT, n=N,   k=IN,  A=W lda=IN, B=x ldb=IN,  C=y ldc=OUT)
 *   weights   dW = dy^T x      <=>  dW^T (IN, OUT) = x^T (IN, N) (dy^T)^T (N, OUT)
 *             gemm(N, T, m=IN,  n=OUT, k=N,   A=x lda=IN, B=dy ldb=OUT, C=dW ldc=IN)
 *   data      dx = dy W        <=>  dx^T (IN, N)  = W^T (IN, OUT) dy^T (OUT, N)
 *             gemm(N, N, m=IN,  n=N,   k=OUT, A=W lda=IN, B=dy ldb=OUT, C=dx ldc=IN)
 *
 * As on the CPU, y starts as the bias in every row so that the forward GEMM adds to it
 * (beta = 1): no scratch memory is needed, and this layer has no workspace. The bias
 * gradient is a small kernel, one thread per output adding the items in order, so that
 * it is deterministic (no atomics); cuBLAS's GEMMs are deterministic on one stream with
 * its default (no atomics) mode. The device sets cuBLAS's math mode (strict FP32 or
 * TF32) and its host pointer mode, which alpha and beta below rely on. */
#include "vdnn/cuda_util.h"

#include "layers/connected.h"

/* y (n, out) = b (out) in every row. */
static __global__ void vdnn_fill_rows(float *y, const float *b, size_t count, int out)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x)
        y[i] = b[i % (size_t)out];
}

/* db (out) = (accumulate ? db : 0) + the sum over items of dy (n, out), in item order and
 * in double, as the CPU half sums it. Neighbouring threads read neighbouring floats. */
static __global__ void vdnn_bias_grad(const float *dy, int n, int out, int accumulate, float *db)
{
    for (int o = blockIdx.x * blockDim.x + threadIdx.x; o < out; o += gridDim.x * blockDim.x) {
        double s = accumulate ? (double)db[o] : 0.0;
        for (int i = 0; i < n; i++) s += (double)dy[(size_t)i * out + o];
        db[o] = (float)s;
    }
}

/* The device's context, or a failure for a call on another device or with a bad batch. */
static vdnn_status begin_call(const layer *l, const exec_ctx *c, cuda_ctx **ctx)
{
    *ctx = device_cuda_ctx(c->dev);
    if (!*ctx) return vdnn_fail(VDNN_EDEVICE, "%s: its CUDA half called on a device that is not CUDA", l->name);
    if (c->n < 1 || c->n > l->in.n)
        return vdnn_fail(VDNN_EINVAL, "%s: batch of %d items, expected 1..%d", l->name, c->n, l->in.n);
    return VDNN_OK;
}

extern "C" vdnn_status connected_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y)
{
    cuda_ctx *ctx = NULL;
    vdnn_status st = begin_call(l, c, &ctx);
    if (st != VDNN_OK) return st;
    const connected_priv *p = (const connected_priv *)l->priv;
    const int n = c->n, in = (int)shape_per_item(l->in), out = p->outputs;
    const float *w = l->params[FC_WEIGHTS].value;   /* (OUT, IN) */
    if (p->bias) {
        const size_t count = (size_t)n * out;
        vdnn_fill_rows<<<cuda_blocks(count), CUDA_THREADS, 0, ctx->compute>>>(y, l->params[FC_BIAS].value, count, out);
        CUDA_LAUNCH_CHECK();
    }
    const float one = 1.0f, beta = p->bias ? 1.0f : 0.0f;
    CUBLAS_TRY(cublasSgemm(ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &one, w, in, x, in, &beta, y, out));
    return VDNN_OK;
}

extern "C" vdnn_status connected_backward_cuda(layer *l, const exec_ctx *c, const float *x, const float *y,
                                               const float *dy, float *dx)
{
    (void)y;
    cuda_ctx *ctx = NULL;
    vdnn_status st = begin_call(l, c, &ctx);
    if (st != VDNN_OK) return st;
    const connected_priv *p = (const connected_priv *)l->priv;
    const int n = c->n, in = (int)shape_per_item(l->in), out = p->outputs;
    const param *w = &l->params[FC_WEIGHTS];
    const float one = 1.0f, zero = 0.0f, keep = c->accumulate ? 1.0f : 0.0f;
    CUBLAS_TRY(cublasSgemm(ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, &one, x, in, dy, out, &keep, w->grad,
                           in));
    if (p->bias) {
        vdnn_bias_grad<<<cuda_blocks((size_t)out), CUDA_THREADS, 0, ctx->compute>>>(dy, n, out, c->accumulate != 0,
                                                                               l->params[FC_BIAS].grad);
        CUDA_LAUNCH_CHECK();
    }
    if (dx)
        CUBLAS_TRY(cublasSgemm(ctx->cublas, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, &one, w->value, in, dy, out, &zero,
                               dx, in));
    return VDNN_OK;
}
