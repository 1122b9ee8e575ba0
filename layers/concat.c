/* [concat] (CPU half): y (N, C0 + C1 + ..., H, W) holds, per item, input 0's channels,
 * then input 1's, and so on. Backward hands each input its slice of dy: it reads
 * neither the inputs nor y. It adds into an input's gradient when asked
 * (c->accumulate_dx), as a dense block's maps are read by several joins. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "layers/concat.h"

static vdnn_status concat_setup(layer *l, const cfg_file *f, const cfg_section *s)
{
    long channels = 0;
    for (int k = 0; k < l->ninputs; k++) {
        shape4 a = l->ins[0], b = l->ins[k];
        channels += b.c;
        if (a.h == b.h && a.w == b.w) continue;
        char na[LAYER_NAME_MAX + 16], nb[LAYER_NAME_MAX + 16];
        layer_input_label(s, 0, na, sizeof na);
        layer_input_label(s, k, nb, sizeof nb);
        if (f && s)
            return cfg_error(f, s, "input", "the inputs must have one height and width, but %s is %dx%dx%d and %s "
                             "is %dx%dx%d", na, a.c, a.h, a.w, nb, b.c, b.h, b.w);
        return vdnn_fail(VDNN_EINVAL, "%s: the inputs must have one height and width, but %s is %dx%dx%d and %s "
                         "is %dx%dx%d", l->name, na, a.c, a.h, a.w, nb, b.c, b.h, b.w);
    }
    if (channels > 1 << 20) {
        if (f && s) return cfg_error(f, s, "input", "%ld channels in all; at most %d", channels, 1 << 20);
        return vdnn_fail(VDNN_EINVAL, "%s: %ld channels in all; at most %d", l->name, channels, 1 << 20);
    }
    l->out = shape_make(l->ins[0].n, (int)channels, l->ins[0].h, l->ins[0].w);
    l->needs_input = 0;
    l->needs_output = 0;
    return VDNN_OK;
}

/* Where input k's channels start in an item of y, in floats. */
static size_t slice_offset(const layer *l, int k)
{
    size_t offset = 0;
    for (int i = 0; i < k; i++) offset += shape_per_item(l->ins[i]);
    return offset;
}

/* Items worth a parallel region: a few blocks of 64 Ki floats. */
static int par_items(const layer *l, int k, int items)
{
    return (size_t)items * shape_per_item(l->ins[k]) >= ((size_t)1 << 16);
}

static vdnn_status concat_forward(layer *l, const exec_ctx *c, const float *const *x, float *y)
{
    const size_t per_item = shape_per_item(l->out);
    for (int k = 0; k < l->ninputs; k++) {
        const size_t block = shape_per_item(l->ins[k]), offset = slice_offset(l, k);
        const float *xk = x[k];
#pragma omp parallel for if (par_items(l, k, c->n)) schedule(static)
        for (int n = 0; n < c->n; n++) memcpy(y + (size_t)n * per_item + offset, xk + (size_t)n * block, block * sizeof *y);
    }
    return VDNN_OK;
}

static vdnn_status concat_backward(layer *l, const exec_ctx *c, const float *const *x, const float *y,
                                   const float *dy, float *const *dx)
{
    (void)x;
    (void)y;
    const size_t per_item = shape_per_item(l->out);
    for (int k = 0; k < l->ninputs; k++) {
        if (!dx[k]) continue;
        const size_t block = shape_per_item(l->ins[k]), offset = slice_offset(l, k);
        const int add = (int)(c->accumulate_dx >> k & 1);
        float *dk = dx[k];
#pragma omp parallel for if (par_items(l, k, c->n)) schedule(static)
        for (int n = 0; n < c->n; n++) {
            const float *src = dy + (size_t)n * per_item + offset;
            float *dst = dk + (size_t)n * block;
            if (!add) memcpy(dst, src, block * sizeof *dst);
            else
                for (size_t e = 0; e < block; e++) dst[e] += src[e];
        }
    }
    return VDNN_OK;
}

const layer_ops concat_ops = {
    .type = "concat",
    .prefix = "concat",
    .setup = concat_setup,
    .describe = layer_describe_inputs,
    .min_inputs = 2,
    .max_inputs = LAYER_MAX_INPUTS,
    .forward_multi_cpu = concat_forward,
    .backward_multi_cpu = concat_backward,
    .forward_multi_cuda = CUDA_HALF(concat_forward_cuda),
    .backward_multi_cuda = CUDA_HALF(concat_backward_cuda),
    .accumulates_dx = 1,
};
