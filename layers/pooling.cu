/* Max and average pooling (CUDA half): own kernels, no cuDNN.
 *
 * Backward cannot be cuDNN's: cudnnPoolingBackward wants y (max) or x and y (its
 * signature), while our max pooling backward reads only x and recomputes each window's
 * argmax with the CPU's tie rule (the first maximum in row-major order), and average
 * pooling's backward reads neither. Forward uses the same window rules as backward and
 * the CPU (the output size pooling.c's setup chose, ceil mode and global windows included;
 * padded cells never win a max; the average divided by each window's count, padding
 * counted or not as the layer says): cuDNN documents no rule for padded cells in max
 * pooling, rounds output sizes down only, and these kernels give the CPU's bits,
 * summing in its order.
 *
 * Forward runs a thread per output cell; backward a thread per input cell that gathers
 * from the windows covering it in row-major window order, the order in which the CPU
 * adds into that cell, so overlapping windows need no atomics and the sums are the
 * CPU's. */
#include "vdnn/cuda_util.h"

#include "layers/pooling.h"

/* The geometry of one call: planes = items * channels of (h, w) in, (oh, ow) out. */
typedef struct pool_geom {
    int kh, kw, sh, sw, ph, pw;   /* window, strides, pads (pooling.c's resolved ones) */
    int exclude_pad;              /* average: divide by the real cells only */
    int h, w, oh, ow;
    size_t planes;
} pool_geom;

static pool_geom geom_of(const layer *l, const exec_ctx *c)
{
    const pool_params *p = (const pool_params *)l->priv;
    pool_geom g;
    g.kh = p->size_h, g.kw = p->size_w;
    g.sh = p->stride_h, g.sw = p->stride_w;
    g.ph = p->pad_h, g.pw = p->pad_w;
    g.exclude_pad = p->exclude_pad;
    g.h = l->in.h;
    g.w = l->in.w;
    g.oh = l->out.h;
    g.ow = l->out.w;
    g.planes = (size_t)c->n * l->in.c;
    return g;
}

/* The window of output (i, j), clipped to the real cells: rows [h0, h1), columns
 * [w0, w1), and n the cells an average divides by, as window_of in pooling.c. */
typedef struct pool_win { int h0, h1, w0, w1, n; } pool_win;

__device__ static pool_win window_of(const pool_geom &g, int i, int j)
{
    pool_win r;
    r.h0 = i * g.sh - g.ph;
    r.w0 = j * g.sw - g.pw;
    const int he = r.h0 + g.kh, we = r.w0 + g.kw;
    const int hp = (he < g.h + g.ph ? he : g.h + g.ph) - r.h0;
    const int wp = (we < g.w + g.pw ? we : g.w + g.pw) - r.w0;
    r.h1 = he < g.h ? he : g.h;
    r.w1 = we < g.w ? we : g.w;
    if (r.h0 < 0) r.h0 = 0;
    if (r.w0 < 0) r.w0 = 0;
    r.n = g.exclude_pad ? (r.h1 - r.h0) * (r.w1 - r.w0) : hp * wp;
    return r;
}

/* Index in the plane xp (h, w) of the first maximum of window r, as argmax_of. */
__device__ static int argmax_of(const float *xp, int w, pool_win r)
{
    int best = r.h0 * w + r.w0;
    float m = xp[best];
    for (int a = r.h0; a < r.h1; a++)
        for (int b = r.w0; b < r.w1; b++)
            if (xp[a * w + b] > m) {
                best = a * w + b;
                m = xp[best];
            }
    return best;
}

/* The outputs whose windows hold input row a: [*lo, *hi] (empty when lo > hi). Window i
 * spans rows [i*stride - pad, i*stride - pad + size) before clipping, and clipping only
 * removes rows outside the input. */
__device__ static void covering(int a, int size, int stride, int pad, int outs, int *lo, int *hi)
{
    const int first = a + pad - size + 1;
    *lo = first <= 0 ? 0 : (first + stride - 1) / stride;
    const int last = (a + pad) / stride;
    *hi = last < outs - 1 ? last : outs - 1;
}

static __global__ void vdnn_maxpool_forward_kernel(pool_geom g, const float *x, float *y)
{
    const size_t per_plane = (size_t)g.oh * g.ow, n = g.planes * per_plane;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        const size_t pl = e / per_plane;
        const int cell = (int)(e - pl * per_plane), i = cell / g.ow, j = cell - i * g.ow;
        const float *xp = x + pl * g.h * g.w;
        y[e] = xp[argmax_of(xp, g.w, window_of(g, i, j))];
    }
}

static __global__ void vdnn_maxpool_backward_kernel(pool_geom g, const float *x, const float *dy,
                                               float *dx)
{
    const size_t per_plane = (size_t)g.h * g.w, n = g.planes * per_plane;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        const size_t pl = e / per_plane;
        const int cell = (int)(e - pl * per_plane), a = cell / g.w, b = cell - a * g.w;
        const float *xp = x + pl * per_plane;
        const float *dyp = dy + pl * g.oh * g.ow;
        int i0, i1, j0, j1;
        covering(a, g.kh, g.sh, g.ph, g.oh, &i0, &i1);
        covering(b, g.kw, g.sw, g.pw, g.ow, &j0, &j1);
        float acc = 0.0f;
        for (int i = i0; i <= i1; i++)
            for (int j = j0; j <= j1; j++)
                if (argmax_of(xp, g.w, window_of(g, i, j)) == cell) acc += dyp[i * g.ow + j];
        dx[e] = acc;
    }
}

static __global__ void vdnn_avgpool_forward_kernel(pool_geom g, const float *x, float *y)
{
    const size_t per_plane = (size_t)g.oh * g.ow, n = g.planes * per_plane;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        const size_t pl = e / per_plane;
        const int cell = (int)(e - pl * per_plane), i = cell / g.ow, j = cell - i * g.ow;
        const float *xp = x + pl * g.h * g.w;
        const pool_win r = window_of(g, i, j);
        float s = 0.0f;
        for (int a = r.h0; a < r.h1; a++)
            for (int b = r.w0; b < r.w1; b++) s += xp[a * g.w + b];
        y[e] = s * (1.0f / (float)r.n);
    }
}

/* Each window adds dy / its count, rounded as the CPU rounds it before adding (no FMA). */
static __global__ void vdnn_avgpool_backward_kernel(pool_geom g, const float *dy, float *dx)
{
    const size_t per_plane = (size_t)g.h * g.w, n = g.planes * per_plane;
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < n;
         e += (size_t)gridDim.x * blockDim.x) {
        const size_t pl = e / per_plane;
        const int cell = (int)(e - pl * per_plane), a = cell / g.w, b = cell - a * g.w;
        const float *dyp = dy + pl * g.oh * g.ow;
        int i0, i1, j0, j1;
        covering(a, g.kh, g.sh, g.ph, g.oh, &i0, &i1);
        covering(b, g.kw, g.sw, g.pw, g.ow, &j0, &j1);
        float acc = 0.0f;
        for (int i = i0; i <= i1; i++)
            for (int j = j0; j <= j1; j++)
                acc += __fmul_rn(dyp[i * g.ow + j], 1.0f / (float)window_of(g, i, j).n);
        dx[e] = acc;
    }
}

extern "C" vdnn_status maxpool_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y)
{
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    const pool_geom g = geom_of(l, c);
    const size_t n = g.planes * g.oh * g.ow;
    vdnn_maxpool_forward_kernel<<<cuda_blocks(n), CUDA_THREADS, 0, ctx->compute>>>(g, x, y);
    CUDA_LAUNCH_CHECK();
    return VDNN_OK;
}

extern "C" vdnn_status maxpool_backward_cuda(layer *l, const exec_ctx *c, const float *x,
                                             const float *y, const float *dy, float *dx)
{
    (void)y;
    if (!dx) return VDNN_OK;
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    const pool_geom g = geom_of(l, c);
    const size_t n = g.planes * g.h * g.w;
    vdnn_maxpool_backward_kernel<<<cuda_blocks(n), CUDA_THREADS, 0, ctx->compute>>>(g, x, dy, dx);
    CUDA_LAUNCH_CHECK();
    return VDNN_OK;
}

extern "C" vdnn_status avgpool_forward_cuda(layer *l, const exec_ctx *c, const float *x, float *y)
{
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    const pool_geom g = geom_of(l, c);
    const size_t n = g.planes * g.oh * g.ow;
    vdnn_avgpool_forward_kernel<<<cuda_blocks(n), CUDA_THREADS, 0, ctx->compute>>>(g, x, y);
    CUDA_LAUNCH_CHECK();
    return VDNN_OK;
}

extern "C" vdnn_status avgpool_backward_cuda(layer *l, const exec_ctx *c, const float *x,
                                             const float *y, const float *dy, float *dx)
{
    (void)x;
    (void)y;
    if (!dx) return VDNN_OK;
    cuda_ctx *ctx = device_cuda_ctx(c->dev);
    const pool_geom g = geom_of(l, c);
    const size_t n = g.planes * g.h * g.w;
    vdnn_avgpool_backward_kernel<<<cuda_blocks(n), CUDA_THREADS, 0, ctx->compute>>>(g, dy, dx);
    CUDA_LAUNCH_CHECK();
    return VDNN_OK;
}
