/* The loss layer (CPU half): softmax over C*H*W per item with cross-entropy loss.
 *
 * Forward writes the probabilities to y and, given labels, adds the summed loss and
 * the count of correct top-1 predictions to the caller's host counters. The loss is
 * computed from x as logsumexp(x) - x[label], which is finite for any finite input,
 * rather than as -log(p), which underflows to -log(0) for confident wrong answers.
 * Backward ignores dy and writes dx = (p - onehot(label)) * grad_scale from y alone
 * (needs_output = 1, needs_input = 0). */
#include <math.h>
#include <stdlib.h>

#include "layers/softmax.h"

/* Batches of fewer scores than this run on one thread: a parallel region would cost
 * more than the loop. */
#define SOFTMAX_PAR_MIN ((size_t)1 << 14)

static vdnn_status softmax_setup(layer *l, const cfg_file *f, const cfg_section *s)
{
    (void)f;
    (void)s;
    l->out = l->in;
    l->is_loss = 1;
    l->needs_input = 0;
    l->needs_output = 1;
    return VDNN_OK;
}

static vdnn_status check_labels(const layer *l, const exec_ctx *c, size_t classes)
{
    for (int i = 0; i < c->n; i++)
        if (c->labels[i] < 0 || (size_t)c->labels[i] >= classes)
            return vdnn_fail(VDNN_EINVAL, "%s: label %d of item %d is outside [0, %zu)", l->name,
                             (int)c->labels[i], c->item_offset + i, classes);
    return VDNN_OK;
}

/* One item: p (D) = softmax(x (D)); returns logsumexp(x) and the first argmax. */
static double softmax_item(const float *x, float *p, size_t d, size_t *argmax)
{
    size_t best = 0;
    for (size_t j = 1; j < d; j++)
        if (x[j] > x[best]) best = j;
    const double m = x[best];
    double sum = 0.0;
    for (size_t j = 0; j < d; j++) sum += exp((double)x[j] - m);
    const double inv = 1.0 / sum;   /* sum >= 1: the max term is exp(0) */
    for (size_t j = 0; j < d; j++) p[j] = (float)(exp((double)x[j] - m) * inv);
    *argmax = best;
    return m + log(sum);
}

static vdnn_status softmax_forward(layer *l, const exec_ctx *c, const float *x, float *y)
{
    const size_t d = shape_per_item(l->in);
    const int n = c->n, want = c->labels && (c->loss_sum || c->correct);
    vdnn_status st = c->labels ? check_labels(l, c, d) : VDNN_OK;
    if (st != VDNN_OK) return st;
    /* Per-item results, summed afterwards in item order so that the total does not
     * depend on how the items were split among threads. */
    double *loss = want ? malloc((size_t)n * sizeof *loss) : NULL;
    int *hit = want ? malloc((size_t)n * sizeof *hit) : NULL;
    if (want && (!loss || !hit)) {
        free(loss);
        free(hit);
        return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory for %d losses", l->name, n);
    }
#pragma omp parallel for if ((size_t)n * d >= SOFTMAX_PAR_MIN) schedule(static)
    for (int i = 0; i < n; i++) {
        size_t best;
        const float *xi = x + (size_t)i * d;
        double lse = softmax_item(xi, y + (size_t)i * d, d, &best);
        if (want) {
            loss[i] = lse - xi[c->labels[i]];
            hit[i] = (size_t)c->labels[i] == best;
        }
    }
    if (want) {
        double total = 0.0;
        int correct = 0;
        for (int i = 0; i < n; i++) {
            total += loss[i];
            correct += hit[i];
        }
        if (c->loss_sum) *c->loss_sum += total;
        if (c->correct) *c->correct += correct;
    }
    free(loss);
    free(hit);
    return VDNN_OK;
}

static vdnn_status softmax_backward(layer *l, const exec_ctx *c, const float *x, const float *y,
                                    const float *dy, float *dx)
{
    (void)x;
    (void)dy;
    if (!dx) return VDNN_OK;
    if (!c->labels) return vdnn_fail(VDNN_EINVAL, "%s: backward needs labels", l->name);
    const size_t d = shape_per_item(l->in);
    vdnn_status st = check_labels(l, c, d);
    if (st != VDNN_OK) return st;
    const float g = c->grad_scale;
    const int n = c->n;
#pragma omp parallel for if ((size_t)n * d >= SOFTMAX_PAR_MIN) schedule(static)
    for (int i = 0; i < n; i++) {
        const float *p = y + (size_t)i * d;
        float *g_i = dx + (size_t)i * d;
        for (size_t j = 0; j < d; j++) g_i[j] = p[j] * g;
        g_i[c->labels[i]] = (p[c->labels[i]] - 1.0f) * g;
    }
    return VDNN_OK;
}

/* Labels index the outputs; one output is no classifier. */
static int softmax_classes(const layer *l) { return (int)shape_per_item(l->in); }

const layer_ops softmax_ops = {
    .type = "softmax",
    .prefix = "softmax",
    .setup = softmax_setup,
    .forward_cpu = softmax_forward,
    .backward_cpu = softmax_backward,
    .forward_cuda = CUDA_HALF(softmax_forward_cuda),
    .backward_cuda = CUDA_HALF(softmax_backward_cuda),
    .bind_cuda = CUDA_HALF(softmax_bind_cuda),
    .unbind_cuda = CUDA_HALF(softmax_unbind_cuda),
    .loss_classes = softmax_classes,
};
