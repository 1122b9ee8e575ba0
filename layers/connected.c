/* The fully connected layer (CPU half): y = x W^T + b with OpenBLAS.
 *
 * The input (N, C, H, W) is read as a matrix (N, IN) with IN = C*H*W (NCHW is already
 * row-major per item, so no copy is needed); the output is (N, OUT, 1, 1). Backward
 * reads x for the weight gradient (needs_input = 1) and never y.
 *
 * cblas calls are made from the calling thread only, never inside an OpenMP region:
 * OpenBLAS threads itself, and nesting the two oversubscribes or deadlocks. */
#include "layers/connected.h"

#include <cblas.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#define FC_MAX_OUTPUTS (1 << 20)

static const cfg_key connected_keys[] = {
    {"output", CFG_INT, 1, 1, FC_MAX_OUTPUTS, NULL, 0, "number of outputs"},
    {"bias", CFG_BOOL, 0, 0, 1, NULL, 0, "add a learned bias (default 1)"},
    {"init", CFG_ENUM, 0, 0, 0, LAYER_INIT_CHOICES, 0, "the weights' start: pytorch (default), he or xavier"},
    {NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

static vdnn_status connected_setup(layer *l, const cfg_file *f, const cfg_section *s)
{
    connected_priv *p = l->priv;
    if (s) {
        p->outputs = cfg_int(s, "output", 0);
        p->bias = cfg_int(s, "bias", 1);
    }
    const param_init init = layer_weight_init(s, INIT_LINEAR);
    if (p->outputs < 1 || p->outputs > FC_MAX_OUTPUTS)
        return vdnn_fail(VDNN_EINVAL, "%s: output must lie in [1, %d], not %d", l->name,
                         FC_MAX_OUTPUTS, p->outputs);
    /* cblas takes int dimensions. */
    size_t in = shape_per_item(l->in);
    if (in > INT_MAX) {
        if (f && s)
            return cfg_error(f, s, NULL, "%zu inputs per item is too many for one matrix", in);
        return vdnn_fail(VDNN_EINVAL, "%s: %zu inputs per item is too many for one matrix",
                         l->name, in);
    }
    l->out = shape_make(l->in.n, p->outputs, 1, 1);
    l->needs_input = 1;
    l->needs_output = 0;
    l->nparams = p->bias ? 2 : 1;
    layer_declare_param(&l->params[FC_WEIGHTS], "weights", shape_make(p->outputs, (int)in, 1, 1), init,
                        (int)in, 1, 1);
    if (p->bias)
        layer_declare_param(&l->params[FC_BIAS], "bias", shape_make(p->outputs, 1, 1, 1), INIT_ZERO, 0, 1, 0);
    return VDNN_OK;
}

static vdnn_status connected_forward(layer *l, const exec_ctx *c, const float *x, float *y)
{
    const connected_priv *p = l->priv;
    const int n = c->n, in = (int)shape_per_item(l->in), out = p->outputs;
    const float *w = l->params[FC_WEIGHTS].value;   /* (OUT, IN) */
    /* Start y from the bias so that one GEMM with beta = 1 finishes the job. */
    if (p->bias) {
        const float *b = l->params[FC_BIAS].value;
        for (int i = 0; i < n; i++) memcpy(y + (size_t)i * out, b, (size_t)out * sizeof *y);
    }
    /* y (N, OUT) = x (N, IN) W^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, x, in, w, in,
                p->bias ? 1.0f : 0.0f, y, out);
    return VDNN_OK;
}

/* db (OUT) = sum over items of dy (N, OUT); each output is owned by one thread and its
 * items are added in order, so the result does not depend on the thread count. */
static void bias_grad(const float *dy, int n, int out, int accumulate, float *db)
{
#pragma omp parallel for if ((size_t)out * n >= ((size_t)1 << 15)) schedule(static)
    for (int o = 0; o < out; o++) {
        double s = accumulate ? db[o] : 0.0;
        for (int i = 0; i < n; i++) s += dy[(size_t)i * out + o];
        db[o] = (float)s;
    }
}

static vdnn_status connected_backward(layer *l, const exec_ctx *c, const float *x,
                                      const float *y, const float *dy, float *dx)
{
    (void)y;
    const connected_priv *p = l->priv;
    const int n = c->n, in = (int)shape_per_item(l->in), out = p->outputs;
    const param *w = &l->params[FC_WEIGHTS];
    /* dW (OUT, IN) = dy^T (OUT, N) x (N, IN) */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, n, 1.0f, dy, out, x, in,
                c->accumulate ? 1.0f : 0.0f, w->grad, in);
    if (p->bias) bias_grad(dy, n, out, c->accumulate, l->params[FC_BIAS].grad);
    /* dx (N, IN) = dy (N, OUT) W (OUT, IN) */
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, in, out, 1.0f, dy, out,
                    w->value, in, 0.0f, dx, in);
    return VDNN_OK;
}

static void connected_describe(const layer *l, char *buf, size_t len)
{
    const connected_priv *p = l->priv;
    snprintf(buf, len, "%zu -> %d%s", shape_per_item(l->in), p->outputs,
             p->bias ? "" : " nobias");
}

const layer_ops connected_ops = {
    .type = "connected",
    .prefix = "fc",
    .keys = connected_keys,
    .priv_bytes = sizeof(connected_priv),
    .setup = connected_setup,
    .forward_cpu = connected_forward,
    .backward_cpu = connected_backward,
    .describe = connected_describe,
    .forward_cuda = CUDA_HALF(connected_forward_cuda),
    .backward_cuda = CUDA_HALF(connected_backward_cuda),
};
