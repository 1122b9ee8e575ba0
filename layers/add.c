/* [add] (CPU half): y = x[0] + x[1] + ... + x[n-1], element by element, summed in that
 * order (so every device gives the same bits). Backward hands dy to every input: it
 * reads neither the inputs nor y, so the memory manager can free all of them after
 * forward. It adds into an input's gradient when asked (c->accumulate_dx), which spares
 * the iteration a buffer when a map is read by this layer and others; an input whose
 * gradient is dy's own block (passes_dy) is left as it is. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "layers/add.h"

/* Loops over fewer elements than this run on one thread. */
#define ADD_PAR_MIN ((ptrdiff_t)1 << 16)

static vdnn_status add_setup(layer *l, const cfg_file *f, const cfg_section *s)
{
    for (int k = 1; k < l->ninputs; k++) {
        shape4 a = l->ins[0], b = l->ins[k];
        if (a.c == b.c && a.h == b.h && a.w == b.w) continue;
        char na[LAYER_NAME_MAX + 16], nb[LAYER_NAME_MAX + 16];
        layer_input_label(s, 0, na, sizeof na);
        layer_input_label(s, k, nb, sizeof nb);
        if (f && s)
            return cfg_error(f, s, "input", "the inputs must have one shape, but %s is %dx%dx%d and %s is %dx%dx%d",
                             na, a.c, a.h, a.w, nb, b.c, b.h, b.w);
        return vdnn_fail(VDNN_EINVAL, "%s: the inputs must have one shape, but %s is %dx%dx%d and %s is %dx%dx%d",
                         l->name, na, a.c, a.h, a.w, nb, b.c, b.h, b.w);
    }
    l->out = l->ins[0];
    l->needs_input = 0;
    l->needs_output = 0;
    return VDNN_OK;
}

void add_accumulate_cpu(float *dst, const float *src, size_t count)
{
    const ptrdiff_t n = (ptrdiff_t)count;
#pragma omp parallel for if (n >= ADD_PAR_MIN) schedule(static)
    for (ptrdiff_t e = 0; e < n; e++) dst[e] += src[e];
}

/* layer_accumulate (layers/layer.h): the add layer's sum, for the iteration. */
vdnn_status layer_accumulate(const layer *l, device *d, float *dst, const float *src, size_t count)
{
    switch (device_get_code(d)) {
    case DEVICE_CODE_NONE: device_sim_advance(d, layer_cost_s(l, COST_ACCUM)); return VDNN_OK;
    case DEVICE_CODE_HOST: add_accumulate_cpu(dst, src, count); return VDNN_OK;
#ifdef VDNN_CUDA
    case DEVICE_CODE_CUDA: return add_accumulate_cuda(d, dst, src, count);
#endif
    default: return vdnn_fail(VDNN_EDEVICE, "%s: no gradient sum for this device", l->name);
    }
}

/* y = a + b; y may be a. */
static void add_two(float *y, const float *a, const float *b, ptrdiff_t n)
{
#pragma omp parallel for if (n >= ADD_PAR_MIN) schedule(static)
    for (ptrdiff_t e = 0; e < n; e++) y[e] = a[e] + b[e];
}

/* Input by input, in order: (x0 + x1) + x2 ..., the same sums as one element at a time,
 * each pass a loop the compiler runs in vector registers. */
static vdnn_status add_forward(layer *l, const exec_ctx *c, const float *const *x, float *y)
{
    const ptrdiff_t n = (ptrdiff_t)((size_t)c->n * shape_per_item(l->out));
    add_two(y, x[0], x[1], n);
    for (int i = 2; i < l->ninputs; i++) add_two(y, y, x[i], n);
    return VDNN_OK;
}

static vdnn_status add_backward(layer *l, const exec_ctx *c, const float *const *x, const float *y,
                                const float *dy, float *const *dx)
{
    (void)x;
    (void)y;
    const size_t count = (size_t)c->n * shape_per_item(l->out);
    for (int k = 0; k < l->ninputs; k++) {
        if (!dx[k] || (dx[k] == dy && !(c->accumulate_dx >> k & 1))) continue;
        if (c->accumulate_dx >> k & 1) add_accumulate_cpu(dx[k], dy, count);
        else memcpy(dx[k], dy, count * sizeof *dy);
    }
    return VDNN_OK;
}

const layer_ops add_ops = {
    .type = "add",
    .prefix = "add",
    .setup = add_setup,
    .describe = layer_describe_inputs,
    .min_inputs = 2,
    .max_inputs = LAYER_MAX_INPUTS,
    .forward_multi_cpu = add_forward,
    .backward_multi_cpu = add_backward,
    .forward_multi_cuda = CUDA_HALF(add_forward_cuda),
    .backward_multi_cuda = CUDA_HALF(add_backward_cuda),
    .accumulates_dx = 1,
    .passes_dy = 1,
};
