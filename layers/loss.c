/* The logistic and L2 loss layers (CPU half): losses for nets of one output (a binary
 * classifier, a regression onto 0 and 1) and for one-hot targets over several.
 *
 * The data readers give class labels only, so each item's target t over its D outputs
 * comes from its label: for D = 1 the label itself, 0 or 1; for D > 1 one-hot (1 at
 * the label, 0 elsewhere). [logistic] writes y = sigmoid(x) and its loss is the binary
 * cross-entropy summed over the outputs, softplus(x) - t x per output, computed as
 * max(x, 0) - t x + log1p(exp(-|x|)) in double, finite for any finite x. [l2] writes
 * y = x and its loss is 0.5 * sum (x - t)^2. Both gradients are (y - t) * grad_scale,
 * from y alone (needs_output = 1, needs_input = 0), and ignore dy as every loss does.
 *
 * An item counts as correct when the prediction rounds to its label: for D = 1,
 * x > 0 (logistic: p > 0.5) or |x - label| < 0.5 (l2); for D > 1, the first maximum
 * of x is at the label. Labels must lie in [0, 2) for D = 1 and in [0, D) otherwise.
 * Per-item losses are summed in item order, whatever the thread count. */
#include <math.h>
#include <stdlib.h>

#include "layers/loss.h"

/* Batches of fewer outputs than this run on one thread. */
#define LOSS_PAR_MIN ((size_t)1 << 14)

/* Labels range over the outputs, or over 0 and 1 for a single output. */
static int target_classes(const layer *l)
{
    const size_t d = shape_per_item(l->in);
    return d == 1 ? 2 : (int)d;
}

static vdnn_status loss_setup(layer *l, const cfg_file *f, const cfg_section *s)
{
    (void)f;
    (void)s;
    l->out = l->in;
    l->is_loss = 1;
    l->needs_input = 0;
    l->needs_output = 1;
    return VDNN_OK;
}

static vdnn_status check_labels(const layer *l, const exec_ctx *c)
{
    const int classes = target_classes(l);
    for (int i = 0; i < c->n; i++)
        if (c->labels[i] < 0 || c->labels[i] >= classes)
            return vdnn_fail(VDNN_EINVAL, "%s: label %d of item %d is outside [0, %d)", l->name,
                             (int)c->labels[i], c->item_offset + i, classes);
    return VDNN_OK;
}

/* Output j's target for an item of label `label` among d outputs. */
static float target_of(size_t d, size_t j, int label)
{
    if (d == 1) return (float)label;
    return j == (size_t)label ? 1.0f : 0.0f;
}

/* One item's loss over its d outputs x, and whether its prediction is the label. */
static double item_loss(int kind, const float *x, size_t d, int label, int *hit)
{
    double sum = 0.0;
    size_t best = 0;
    for (size_t j = 0; j < d; j++) {
        const double v = x[j], t = target_of(d, j, label);
        if (kind == LOSS_LOGISTIC) sum += fmax(v, 0.0) - t * v + log1p(exp(-fabs(v)));
        else sum += 0.5 * (v - t) * (v - t);
        if (x[j] > x[best]) best = j;
    }
    if (d > 1) *hit = best == (size_t)label;
    else if (kind == LOSS_LOGISTIC) *hit = (x[0] > 0.0f) == (label == 1);
    else *hit = fabs((double)x[0] - label) < 0.5;
    return sum;
}

/* Adds the summed loss and hits of the c->n items to the caller's counters. */
static vdnn_status add_losses(layer *l, const exec_ctx *c, int kind, const float *x)
{
    const size_t d = shape_per_item(l->in);
    const int n = c->n;
    double *loss = malloc((size_t)n * sizeof *loss);
    int *hit = malloc((size_t)n * sizeof *hit);
    if (!loss || !hit) {
        free(loss);
        free(hit);
        return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory for %d losses", l->name, n);
    }
#pragma omp parallel for if ((size_t)n * d >= LOSS_PAR_MIN) schedule(static)
    for (int i = 0; i < n; i++) loss[i] = item_loss(kind, x + (size_t)i * d, d, c->labels[i], &hit[i]);
    double total = 0.0;
    int correct = 0;
    for (int i = 0; i < n; i++) {
        total += loss[i];
        correct += hit[i];
    }
    if (c->loss_sum) *c->loss_sum += total;
    if (c->correct) *c->correct += correct;
    free(loss);
    free(hit);
    return VDNN_OK;
}

static vdnn_status loss_forward(layer *l, const exec_ctx *c, int kind, const float *x, float *y)
{
    vdnn_status st = c->labels ? check_labels(l, c) : VDNN_OK;
    if (st != VDNN_OK) return st;
    const ptrdiff_t count = (ptrdiff_t)((size_t)c->n * shape_per_item(l->in));
#pragma omp parallel for if ((size_t)count >= LOSS_PAR_MIN) schedule(static)
    for (ptrdiff_t e = 0; e < count; e++)
        y[e] = kind == LOSS_LOGISTIC ? 1.0f / (1.0f + expf(-x[e])) : x[e];
    if (c->labels && (c->loss_sum || c->correct)) st = add_losses(l, c, kind, x);
    return st;
}

static vdnn_status logistic_forward(layer *l, const exec_ctx *c, const float *x, float *y)
{
    return loss_forward(l, c, LOSS_LOGISTIC, x, y);
}

static vdnn_status l2_forward(layer *l, const exec_ctx *c, const float *x, float *y)
{
    return loss_forward(l, c, LOSS_L2, x, y);
}

/* dx = (y - t) * grad_scale, for both kinds. */
static vdnn_status target_backward(layer *l, const exec_ctx *c, const float *x, const float *y,
                                   const float *dy, float *dx)
{
    (void)x;
    (void)dy;
    if (!dx) return VDNN_OK;
    if (!c->labels) return vdnn_fail(VDNN_EINVAL, "%s: backward needs labels", l->name);
    vdnn_status st = check_labels(l, c);
    if (st != VDNN_OK) return st;
    const size_t d = shape_per_item(l->in);
    const float g = c->grad_scale;
    const int n = c->n;
#pragma omp parallel for if ((size_t)n * d >= LOSS_PAR_MIN) schedule(static)
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++) {
            const size_t e = (size_t)i * d + j;
            dx[e] = (y[e] - target_of(d, j, c->labels[i])) * g;
        }
    return VDNN_OK;
}

const layer_ops logistic_ops = {
    .type = "logistic",
    .prefix = "logistic",
    .setup = loss_setup,
    .forward_cpu = logistic_forward,
    .backward_cpu = target_backward,
    .forward_cuda = CUDA_HALF(logistic_forward_cuda),
    .backward_cuda = CUDA_HALF(target_backward_cuda),
    .bind_cuda = CUDA_HALF(logistic_bind_cuda),
    .loss_classes = target_classes,
};

const layer_ops l2_ops = {
    .type = "l2",
    .prefix = "l2loss",
    .setup = loss_setup,
    .forward_cpu = l2_forward,
    .backward_cpu = target_backward,
    .forward_cuda = CUDA_HALF(l2_forward_cuda),
    .backward_cuda = CUDA_HALF(target_backward_cuda),
    .bind_cuda = CUDA_HALF(l2_bind_cuda),
    .loss_classes = target_classes,
};
