/* Inverted dropout (CPU half): in training, each element is kept with probability 1 - p
 * and scaled by 1 / (1 - p); in evaluation the layer is the identity.
 *
 * The mask is never stored. Element e of item i is kept iff
 *     rng_u01(rng_hash(layer_seed, step, (item_offset + i) * per_item + e)) >= p
 * with layer_seed mixed from the net's seed and the layer index. Backward regenerates
 * the same mask, so it reads neither x nor y (needs_input = needs_output = 0); the mask
 * is the same however the work is split among threads or into micro-batches, and a
 * recomputed forward reproduces it exactly. Elementwise, it runs in place (y over x, dx
 * over dy). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "layers/dropout.h"
#include "vdnn/rng.h"

static const cfg_key dropout_keys[] = {
    /* The table is inclusive; setup rejects exactly 1 (nothing would pass). */
    {"probability", CFG_FLOAT, 0, 0.0, 1.0, NULL, 0, "probability of dropping, in [0, 1)"},
    {NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

static vdnn_status dropout_setup(layer *l, const cfg_file *f, const cfg_section *s)
{
    dropout_priv *p = l->priv;
    if (s) p->probability = (float)cfg_float(s, "probability", 0.5);
    if (!(p->probability >= 0.0f && p->probability < 1.0f)) {
        if (f && s)
            return cfg_error(f, s, "probability", "must lie in [0, 1), not %g", p->probability);
        return vdnn_fail(VDNN_EINVAL, "%s: probability must lie in [0, 1), not %g", l->name,
                         p->probability);
    }
    l->out = l->in;
    l->needs_input = 0;
    l->needs_output = 0;
    return VDNN_OK;
}

/* out = in * mask / (1 - p) over the c->n items of this call. */
static void apply_mask(const layer *l, const exec_ctx *c, const float *in, float *out)
{
    const float p = ((const dropout_priv *)l->priv)->probability;
    const float scale = 1.0f / (1.0f - p);
    const uint64_t seed = rng_hash(c->seed, DROPOUT_TAG, (uint64_t)l->index);
    const uint64_t step = c->step, first = (uint64_t)c->item_offset * shape_per_item(l->in);
    const ptrdiff_t count = (ptrdiff_t)((size_t)c->n * shape_per_item(l->in));
    /* a hash per element: worth a parallel region from a few thousand elements on */
#pragma omp parallel for if (count >= 8192) schedule(static)
    for (ptrdiff_t e = 0; e < count; e++) {
        int keep = rng_u01(rng_hash(seed, step, first + (uint64_t)e)) >= p;
        out[e] = keep ? in[e] * scale : 0.0f;
    }
}

static vdnn_status dropout_forward(layer *l, const exec_ctx *c, const float *x, float *y)
{
    if (c->train)
        apply_mask(l, c, x, y);
    else if (y != x)
        memmove(y, x, (size_t)c->n * shape_per_item(l->in) * sizeof *y);
    return VDNN_OK;
}

static vdnn_status dropout_backward(layer *l, const exec_ctx *c, const float *x, const float *y,
                                    const float *dy, float *dx)
{
    (void)x;
    (void)y;
    if (!dx) return VDNN_OK;
    return dropout_forward(l, c, dy, dx);
}

static void dropout_describe(const layer *l, char *buf, size_t len)
{
    const dropout_priv *p = l->priv;
    snprintf(buf, len, "p %g", p->probability);
}

const layer_ops dropout_ops = {
    .type = "dropout",
    .prefix = "dropout",
    .keys = dropout_keys,
    .priv_bytes = sizeof(dropout_priv),
    .setup = dropout_setup,
    .forward_cpu = dropout_forward,
    .backward_cpu = dropout_backward,
    .describe = dropout_describe,
    .forward_cuda = CUDA_HALF(dropout_forward_cuda),
    .backward_cuda = CUDA_HALF(dropout_backward_cuda),
    .in_place = 1,
};
