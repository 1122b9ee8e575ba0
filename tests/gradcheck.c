/* The shared gradient checker (tests/gradcheck.h) and small test helpers.
 *
 * Everything goes through the device interface (device_alloc, upload, download), so the
 * same check runs on any device. Values are perturbed in float32, the layer's own
 * precision, and the objective is summed in double on the host so that the difference
 * of two nearby objectives is not lost to rounding in the sum itself. */
#include "tests/gradcheck.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdnn/config.h"
#include "vdnn/rng.h"

gradcheck_opts gradcheck_defaults(void)
{
    gradcheck_opts o;
    o.n = 0;            /* 0: the layer's max batch */
    o.train = 1;
    o.seed = 1;
    o.eps = 1e-2;
    o.rtol = 2e-2;
    o.atol = 1e-3;
    o.samples = 24;
    o.num_classes = 0;  /* 0: the loss layer's channel count */
    return o;
}

device *test_cpu_device(void)
{
    device_options opt;
    memset(&opt, 0, sizeof opt);
    opt.kind = DEVICE_CPU;
    opt.budget_bytes = (size_t)256 << 20;
    opt.threads = 0;
    device *d = NULL;
    vdnn_status st = device_create(&opt, &d);
    /* Only a failure talks to Check, so this also works outside a running test. */
    if (st != VDNN_OK) ck_abort_msg("test_cpu_device: %s", vdnn_errmsg());
    return d;
}

void test_fill_uniform(float *x, size_t n, float scale, uint64_t seed)
{
    rng r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = scale * (2.0f * rng_uniform(&r) - 1.0f);
}

float *test_random_floats(size_t n, float scale, uint64_t seed)
{
    float *x = malloc(n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    test_fill_uniform(x, n, scale, seed);
    return x;
}

/* text parsed as test.cfg, which must hold one section */
static cfg_file *parse_one(const char *text)
{
    cfg_file *f = NULL;
    ck_assert_msg(cfg_parse(text, "test.cfg", &f) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_int_eq(f->nsec, 1);
    return f;
}

layer *test_layer(const layer_ops *ops, int index, const char *text, shape4 in)
{
    cfg_file *f = parse_one(text);
    if (!ops) ops = layer_find_type(f->sec[0].name);
    ck_assert_msg(ops != NULL, "no layer type '%s'", f->sec[0].name);
    ck_assert_msg(cfg_check(f, &f->sec[0], ops->keys) == VDNN_OK, "%s", vdnn_errmsg());
    layer *l = NULL;
    ck_assert_msg(layer_create(ops, index, in, f, &f->sec[0], &l) == VDNN_OK, "%s", vdnn_errmsg());
    cfg_free(f);
    return l;
}

vdnn_status test_layer_status(const layer_ops *ops, const char *text, shape4 in)
{
    cfg_file *f = parse_one(text);
    vdnn_status st = cfg_check(f, &f->sec[0], ops->keys);
    layer *l = NULL;
    if (st == VDNN_OK) st = layer_create(ops, 0, in, f, &f->sec[0], &l);
    layer_destroy(l, NULL);
    cfg_free(f);
    return st;
}

vdnn_status test_check_status(const layer_ops *ops, const char *text)
{
    cfg_file *f = parse_one(text);
    vdnn_status st = cfg_check(f, &f->sec[0], ops->keys);
    cfg_free(f);
    return st;
}

exec_ctx test_ctx(device *d, int n, int train)
{
    exec_ctx c;
    memset(&c, 0, sizeof c);
    c.dev = d;
    c.n = n;
    c.train = train;
    c.grad_scale = 1.0f;
    return c;
}

/* What one gradient check works with. Device buffers: per input k x[k] and dx[k]
 * (n, ins[k]), y/dy (n, out), labels (n), ws (the largest workspace of the chosen
 * algorithms). */
typedef struct gc_state {
    layer *l;
    device *d;
    const gradcheck_opts *o;
    exec_ctx c;
    double loss;              /* the loss layer's loss_sum target */
    int correct;
    float *x[LAYER_MAX_INPUTS], *dx[LAYER_MAX_INPUTS], *y, *dy, *ws;
    int32_t *labels;
    size_t xcount[LAYER_MAX_INPUTS], ycount;
    float *hy, *hr;           /* host: y and the random weights r of the objective */
    double obj0;              /* the objective at the unperturbed point */
    char *msg;
    size_t msglen;
} gc_state;

/* L = sum(y * r), or for the loss layer loss_sum * grad_scale; forward only. */
static int objective(gc_state *s, double *out)
{
    s->loss = 0.0;
    s->correct = 0;
    vdnn_status st = layer_forward_n(s->l, &s->c, (const float *const *)s->x, s->y);
    if (st == VDNN_OK && !s->l->is_loss)
        st = device_download(s->d, s->hy, s->y, s->ycount * sizeof(float));
    if (st != VDNN_OK) {
        snprintf(s->msg, s->msglen, "gradcheck %s: forward: %s", s->l->name, vdnn_errmsg());
        return 1;
    }
    if (s->l->is_loss) {
        *out = s->loss * s->c.grad_scale;
        return 0;
    }
    double sum = 0.0;
    for (size_t i = 0; i < s->ycount; i++) sum += (double)s->hy[i] * s->hr[i];
    *out = sum;
    return 0;
}

/* Random distinct indices in [0, count): all of them when count <= want. */
static size_t pick_indices(size_t count, int want, rng *r, size_t **out)
{
    size_t *idx = malloc((count ? count : 1) * sizeof *idx);
    if (!idx) return 0;
    for (size_t i = 0; i < count; i++) idx[i] = i;
    size_t k = want > 0 && (size_t)want < count ? (size_t)want : count;
    for (size_t i = 0; i < k; i++) {   /* a partial Fisher-Yates shuffle */
        size_t j = i + (size_t)(rng_next(r) % (count - i));
        size_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
    *out = idx;
    return k;
}

/* Sets entry i of the device tensor `dev` to v. */
static int poke(gc_state *s, float *dev, size_t i, float v)
{
    if (device_upload(s->d, dev + i, &v, sizeof v) == VDNN_OK) return 0;
    snprintf(s->msg, s->msglen, "gradcheck %s: upload: %s", s->l->name, vdnn_errmsg());
    return 1;
}

/* Central, forward and backward differences of the objective at entry i of `dev`,
 * whose current value is v. Steps are the float steps really taken. */
static int differences(gc_state *s, float *dev, size_t i, float v, double d[3])
{
    const float vp = (float)(v + s->o->eps), vm = (float)(v - s->o->eps);
    const double hp = (double)vp - v, hm = (double)v - vm;
    double lp, lm;
    if (poke(s, dev, i, vp) || objective(s, &lp)) return 1;
    if (poke(s, dev, i, vm) || objective(s, &lm)) return 1;
    if (poke(s, dev, i, v)) return 1;
    d[0] = (lp - lm) / (hp + hm);
    d[1] = (lp - s->obj0) / hp;
    d[2] = (s->obj0 - lm) / hm;
    return 0;
}

/* Compares the analytic gradient `ana` (count floats, host) of the device tensor `dev`
 * with central differences at o->samples random entries. */
static int check_tensor(gc_state *s, const char *name, float *dev, const float *ana,
                        size_t count, rng *r)
{
    const gradcheck_opts *o = s->o;
    size_t nonzero = 0;
    for (size_t i = 0; i < count; i++) nonzero += ana[i] != 0.0f;
    if (!nonzero) {
        snprintf(s->msg, s->msglen, "gradcheck %s.%s: every analytic gradient is zero",
                 s->l->name, name);
        return 1;
    }
    float *val = malloc(count * sizeof *val);
    size_t *idx = NULL, k = val ? pick_indices(count, o->samples, r, &idx) : 0;
    int bad = !val || !idx || device_download(s->d, val, dev, count * sizeof *val) != VDNN_OK;
    if (bad) snprintf(s->msg, s->msglen, "gradcheck %s.%s: cannot read values", s->l->name, name);
    size_t skipped = 0;
    for (size_t t = 0; t < k && !bad; t++) {
        size_t i = idx[t];
        double d[3];
        if (differences(s, dev, i, val[i], d)) { bad = 1; break; }
        /* A kink (relu at 0, a max that changes hands) inside [v - eps, v + eps] makes
         * the one-sided slopes disagree, and the central difference then sits between
         * the two slopes, off the analytic one by up to half their gap. Entries whose
         * gap exceeds the comparison's own tolerance are skipped: the ones kept can
         * owe at most half the tolerance to a kink. Smooth curvature also opens the
         * gap (by |f''| * eps), so a layer too curved for eps shows up as many skips. */
        double kink_tol = o->atol + o->rtol * fmax(fabs(d[1]), fabs(d[2]));
        if (fabs(d[1] - d[2]) > kink_tol) { skipped++; continue; }
        double a = ana[i], tol = o->atol + o->rtol * fmax(fabs(a), fabs(d[0]));
        if (fabs(a - d[0]) > tol) {
            snprintf(s->msg, s->msglen,
                     "gradcheck %s.%s[%zu]: analytic %.6g, numeric %.6g (tolerance %.3g)",
                     s->l->name, name, i, a, d[0], tol);
            bad = 1;
        }
    }
    /* Most entries skipped would make the check vacuous: say so rather than pass. */
    if (!bad && k > 0 && skipped * 2 > k) {
        snprintf(s->msg, s->msglen,
                 "gradcheck %s.%s: %zu of %zu entries skipped as kinks; lower eps", s->l->name,
                 name, skipped, k);
        bad = 1;
    }
    free(idx);
    free(val);
    return bad;
}

static int alloc_dev(gc_state *s, size_t bytes, const char *tensor, void **p)
{
    if (device_alloc(s->d, bytes, "gradcheck", tensor, p) == VDNN_OK) return 0;
    snprintf(s->msg, s->msglen, "gradcheck %s: %s", s->l->name, vdnn_errmsg());
    return 1;
}

static int alloc_state(gc_state *s)
{
    size_t ws = 0;
    for (int pass = 0; pass < PASS_COUNT; pass++) {
        size_t b = layer_workspace_bytes(s->l, pass, s->l->algo[pass]);
        if (b > ws) ws = b;
    }
    s->hy = malloc(s->ycount * sizeof *s->hy);
    s->hr = malloc(s->ycount * sizeof *s->hr);
    if (!s->hy || !s->hr) {
        snprintf(s->msg, s->msglen, "gradcheck %s: out of host memory", s->l->name);
        return 1;
    }
    for (int k = 0; k < s->l->ninputs; k++)
        if (alloc_dev(s, s->xcount[k] * sizeof(float), "x", (void **)&s->x[k]) ||
            alloc_dev(s, s->xcount[k] * sizeof(float), "dx", (void **)&s->dx[k]))
            return 1;
    if (alloc_dev(s, s->ycount * sizeof(float), "y", (void **)&s->y) ||
        alloc_dev(s, s->ycount * sizeof(float), "dy", (void **)&s->dy) ||
        (s->l->is_loss &&
         alloc_dev(s, (size_t)s->c.n * sizeof(int32_t), "labels", (void **)&s->labels)) ||
        (ws && alloc_dev(s, ws, "workspace", &s->c.workspace)))
        return 1;
    s->c.workspace_bytes = ws;
    s->c.labels = s->labels;
    return 0;
}

static void free_state(gc_state *s)
{
    void *dev[] = {s->y, s->dy, s->labels, s->c.workspace};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i]) device_free(s->d, dev[i]);
    for (int k = 0; k < s->l->ninputs; k++) {
        if (s->x[k]) device_free(s->d, s->x[k]);
        if (s->dx[k]) device_free(s->d, s->dx[k]);
    }
    free(s->hy);
    free(s->hr);
}

/* Uploads count random floats in [-scale, scale] to the device tensor dev. */
static int upload_random(gc_state *s, float *dev, size_t count, float scale, uint64_t seed)
{
    float *h = malloc(count * sizeof *h);
    int bad = !h;
    if (h) {
        test_fill_uniform(h, count, scale, seed);
        bad = device_upload(s->d, dev, h, count * sizeof *h) != VDNN_OK;
        free(h);
    }
    if (bad) snprintf(s->msg, s->msglen, "gradcheck %s: cannot set random values", s->l->name);
    return bad;
}

/* Random x, trainable parameters (He-initialised ones at a variance of 1/fan_in, to keep
 * outputs near unit scale), r (uploaded as dy) and labels. Non-trainable parameters
 * (running statistics) keep their values: they have constraints (a variance > 0). */
static int fill_random(gc_state *s)
{
    const uint64_t seed = s->o->seed;
    layer *l = s->l;
    for (int k = 0; k < l->ninputs; k++)
        if (upload_random(s, s->x[k], s->xcount[k], 1.0f, rng_hash(seed, 1, (uint64_t)k))) return 1;
    for (int i = 0; i < l->nparams; i++) {
        param *p = &l->params[i];
        if (!p->trainable) continue;
        float scale = p->fan_in > 0 ? sqrtf(3.0f / (float)p->fan_in)
                                         : 1.0f;
        uint64_t pseed = rng_hash(seed, 2, (uint64_t)i);
        if (upload_random(s, p->value, shape_count(p->shape), scale, pseed)) return 1;
    }
    test_fill_uniform(s->hr, s->ycount, 1.0f, rng_hash(seed, 3, 0));
    if (device_upload(s->d, s->dy, s->hr, s->ycount * sizeof(float)) != VDNN_OK) return 1;
    if (!l->is_loss) return 0;
    int classes = s->o->num_classes > 0 ? s->o->num_classes : l->in.c;
    int32_t *lab = malloc((size_t)s->c.n * sizeof *lab);
    if (!lab) return 1;
    rng r;
    rng_seed(&r, rng_hash(seed, 4, 0));
    for (int i = 0; i < s->c.n; i++) lab[i] = (int32_t)rng_below(&r, (uint32_t)classes);
    int bad = device_upload(s->d, s->labels, lab, (size_t)s->c.n * sizeof *lab) != VDNN_OK;
    free(lab);
    return bad;
}

/* Runs forward (the objective at the unperturbed point) and backward, then checks x
 * and every trainable parameter. */
static int check_all(gc_state *s)
{
    layer *l = s->l;
    if (objective(s, &s->obj0)) return 1;
    if (layer_backward_n(l, &s->c, (const float *const *)s->x, s->y, s->dy, s->dx) != VDNN_OK) {
        snprintf(s->msg, s->msglen, "gradcheck %s: backward: %s", l->name, vdnn_errmsg());
        return 1;
    }
    rng r;
    rng_seed(&r, rng_hash(s->o->seed, 5, 0));
    int bad = 0;
    float *ana = NULL;
    for (int k = 0; k < l->ninputs && !bad; k++) {
        char name[16];
        snprintf(name, sizeof name, l->ninputs > 1 ? "x%d" : "x", k);
        ana = malloc(s->xcount[k] * sizeof *ana);
        bad = !ana || device_download(s->d, ana, s->dx[k], s->xcount[k] * sizeof *ana) != VDNN_OK;
        if (bad) snprintf(s->msg, s->msglen, "gradcheck %s: cannot read dx", l->name);
        if (!bad) bad = check_tensor(s, name, s->x[k], ana, s->xcount[k], &r);
        free(ana);
    }
    for (int i = 0; i < l->nparams && !bad; i++) {
        param *p = &l->params[i];
        if (!p->trainable) continue;
        size_t count = shape_count(p->shape);
        ana = malloc(count * sizeof *ana);
        bad = !ana || device_download(s->d, ana, p->grad, count * sizeof *ana) != VDNN_OK;
        if (bad) snprintf(s->msg, s->msglen, "gradcheck %s: cannot read %s.grad", l->name, p->name);
        if (!bad) bad = check_tensor(s, p->name, p->value, ana, count, &r);
        free(ana);
    }
    return bad;
}

int gradcheck(layer *l, device *d, const gradcheck_opts *o, char *msg, size_t msglen)
{
    gc_state s;
    memset(&s, 0, sizeof s);
    s.l = l;
    s.d = d;
    s.o = o;
    s.msg = msg;
    s.msglen = msglen;
    if (msglen) msg[0] = '\0';
    int n = o->n > 0 ? o->n : l->in.n;
    if (n > l->in.n) {
        snprintf(msg, msglen, "gradcheck %s: n = %d exceeds the max batch %d", l->name, n, l->in.n);
        return 1;
    }
    s.c.dev = d;
    s.c.n = n;
    s.c.train = o->train;
    s.c.seed = o->seed;
    s.c.grad_scale = l->is_loss ? 1.0f / (float)n : 1.0f;
    s.c.loss_sum = &s.loss;
    s.c.correct = &s.correct;
    for (int k = 0; k < l->ninputs; k++) s.xcount[k] = (size_t)n * shape_per_item(l->ins[k]);
    s.ycount = (size_t)n * shape_per_item(l->out);
    int bad = alloc_state(&s) || fill_random(&s) || check_all(&s);
    if (bad && msglen && !msg[0]) snprintf(msg, msglen, "gradcheck %s: %s", l->name, vdnn_errmsg());
    free_state(&s);
    return bad;
}
