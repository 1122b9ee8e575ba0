/* Check suite for nets/planner/planfile.c: plans as data (nets/planner/planner.h).
 *
 *  - making plans: plan_init's defaults, plan_copy is deep, plan_policy for every policy
 *    (conv offloads exactly the convolutions' inputs, all every map some backward reads,
 *    swap what all offloads and the parameters of exactly the swappable layers, recompute
 *    the outputs of the cheap layers, as net_policy_map says) with per-layer `offload=`
 *    and `algo=` overrides winning, the smallest-workspace algorithms for mem and the
 *    fastest measured ones for perf;
 *  - plan_from_net / plan_apply round trip, on an attached net and on a bare one, with
 *    recomputed maps and swapped layers; a plan of another net, one offloading or
 *    recomputing a map no backward reads, recomputing x[0] or through a swapped layer,
 *    swapping a layer that cannot be swapped, of another micro-batch, or swapping
 *    otherwise than the attached net placed its parameters, is rejected and leaves the
 *    net as it was;
 *  - the file: save/load round trip of every field (maps, swaps, micro-batch); each kind
 *    of bad file (layer count, layer name, algorithm name, map word, swap flag, batch,
 *    micro-batch, magic, version, trailing lines) is rejected with its status and a
 *    message naming plan.txt:LINE and the problem; so are plans the net cannot run
 *    (swapping batch norm, recomputing x[0], a recompute chain through a swapped layer)
 *    with plan.txt and the problem; every truncation and random byte edits never crash,
 *    and what loads can be applied;
 *  - printing: the table and the JSON name every layer and algorithm, every map
 *    decision and swap; the JSON parses (Jansson) and holds them.
 *
 * The net below: conv1 relu2 conv3 bn4 relu5 maxpool6 fc7 softmax8. Maps a
 * backward pass reads: x[0], x[2], x[3], x[5], x[6] (x[1], x[4] and x[7] feed layers
 * that read only their output, behind layers that do not read theirs). Its swappable
 * layers (every parameter trainable): conv1, conv3, fc7 (bn4's running statistics are
 * not trained). Policy recompute recomputes the output of a cheap layer (no trained
 * parameters) where backward reads it and the layer's input is kept for backward
 * anyway: only maxpool6's, x[6] (relu2's and relu5's inputs x[1] and x[4] are not
 * kept, so recomputing x[2] or x[5] would save nothing). Plans may still recompute
 * x[2] and x[5]. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nets/planner/planner.h"
#include "tests/jsoncheck.h"
#include "tests/testnet.h"
#include "vdnn/rng.h"

#define PF_CONV1 "[convolutional]\nfilters = 4\nsize = 3\npad = 1\n"
#define PF_CONV3 "[convolutional]\nfilters = 6\nsize = 3\npad = 1\n"
#define PF_REST "[batchnorm]\n[relu]\n[maxpool]\nsize = 2\n[connected]\noutput = 4\n"
#define PF_NET TN_HEAD PF_CONV1 "[relu]\n" PF_CONV3 PF_REST "[softmax]\n"
/* conv1 pinned to im2col-batch, conv3 kept on the device, fc7 always offloaded. */
#define PF_OVERRIDES TN_HEAD PF_CONV1 "algo = im2col-batch\n[relu]\n" PF_CONV3 "offload = 0\n" \
                     PF_REST "offload = 1\n[softmax]\n"
#define PF_LAYERS 8

/* The maps some backward pass reads, by index (PF_NET). */
static const int readable[PF_LAYERS + 1] = {1, 0, 1, 1, 0, 1, 1, 0, 0};
/* The layers whose parameters can be swapped (PF_NET). */
static const int swappable[PF_LAYERS] = {1, 0, 1, 0, 0, 0, 1, 0};
/* The maps policy recompute recomputes (PF_NET; see above). */
static const int recomputed[PF_LAYERS + 1] = {0, 0, 0, 0, 0, 0, 1, 0, 0};

/* ---- helpers ---- */

/* Every field of a and b equal. */
static void plans_equal(const plan *a, const plan *b)
{
    ck_assert_int_eq(a->nlayers, b->nlayers);
    ck_assert_int_eq(a->batch, b->batch);
    ck_assert_int_eq(a->micro, b->micro);
    for (int j = 0; j <= a->nlayers; j++) ck_assert_int_eq(a->offload[j], b->offload[j]);
    for (int i = 0; i < a->nlayers; i++) ck_assert_int_eq(a->swap[i], b->swap[i]);
    for (int i = 0; i < a->nlayers; i++)
        for (int p = 0; p < PASS_COUNT; p++) ck_assert_int_eq(a->algo[i][p], b->algo[i][p]);
    ck_assert_int_eq(a->prefetch_ahead, b->prefetch_ahead);
    ck_assert_int_eq(a->release_lag, b->release_lag);
    ck_assert_int_eq(a->in_place, b->in_place);
    ck_assert_str_eq(a->origin, b->origin);
    ck_assert(a->predicted_s == b->predicted_s);
    ck_assert_uint_eq(a->peak_bytes, b->peak_bytes);
    ck_assert(a->measured_s == b->measured_s);
}

/* A plan of PF_NET with every field away from its default: all offloaded, conv1 on a
 * different algorithm per pass, conv3 on im2col-par. */
static plan busy_plan(const net *n)
{
    plan p;
    ck_assert_int_eq(plan_policy(n, NULL, POLICY_ALL, ALGO_MEM, PREFETCH_NEXT, 0, &p), VDNN_OK);
    p.algo[0][PASS_FWD] = 1;
    p.algo[0][PASS_BWD_DATA] = 2;
    p.algo[0][PASS_BWD_FILTER] = 3;
    for (int k = 0; k < PASS_COUNT; k++) p.algo[2][k] = 4;
    snprintf(p.origin, sizeof p.origin, "dyn");
    p.predicted_s = 0.0125;
    p.peak_bytes = 1234567;
    p.measured_s = 0.015;
    return p;
}

/* busy_plan with recomputed maps and swapped layers: x[2], x[5] and x[6] recomputed,
 * x[0] and x[3] offloaded; conv1, conv3 and fc7 swapped. */
static plan mixed_plan(const net *n)
{
    plan p = busy_plan(n);
    p.offload[2] = p.offload[5] = p.offload[6] = MAP_RECOMPUTE;
    p.swap[0] = p.swap[2] = p.swap[6] = 1;
    return p;
}

/* A profile of n with every time 0 (fill in what a test needs). Free with profile_free-like free(). */
static profile zero_profile(const net *n)
{
    profile pr;
    memset(&pr, 0, sizeof pr);
    pr.nlayers = n->nlayers;
    pr.batch = n->input.n;
    pr.layers = calloc((size_t)n->nlayers, sizeof *pr.layers);
    ck_assert_ptr_nonnull(pr.layers);
    return pr;
}

/* The index of algorithm `name` of conv layer l in `pass`. */
static int algo_index(const layer *l, int pass, const char *name)
{
    for (int a = 0; a < layer_algo_count(l, pass); a++)
        if (!strcmp(layer_algo_name(l, pass, a), name)) return a;
    ck_abort_msg("no algorithm %s", name);
    return -1;
}

/* A scratch folder with the text of busy_plan(n) saved as plan.txt. */
typedef struct planfile {
    char dir[256];
    char path[300];
    char *text;
} planfile;

static planfile saved_plan_of(const net *n, plan p)
{
    planfile f;
    tn_tmpdir(f.dir, sizeof f.dir, "plan");
    tn_join(f.path, sizeof f.path, f.dir, "plan.txt");
    ck_assert_msg(plan_save(&p, n, f.path) == VDNN_OK, "plan_save: %s", vdnn_errmsg());
    plan_free(&p);
    size_t len;
    f.text = tn_read(f.path, &len);
    ck_assert_ptr_nonnull(f.text);
    return f;
}

static planfile saved_plan(const net *n)
{
    return saved_plan_of(n, busy_plan(n));
}

static void planfile_free(planfile *f)
{
    free(f->text);
    tn_rmtree(f->dir);
}

/* text with its first `from` replaced by `to`; free() it. */
static char *edited(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    ck_assert_msg(at != NULL, "'%s' not in the plan file:\n%s", from, text);
    size_t head = (size_t)(at - text), len = strlen(text) - strlen(from) + strlen(to);
    char *out = malloc(len + 1);
    ck_assert_ptr_nonnull(out);
    memcpy(out, text, head);
    strcpy(out + head, to);
    strcat(out, at + strlen(from));
    return out;
}

/* Writes `text` as the plan file and loads it into n: it must fail with `status`, and
 * the message must contain `a` and `b`. */
static void load_fails(const net *n, const planfile *f, const char *text, int status, const char *a, const char *b)
{
    tn_write_text(f->path, text);
    plan p;
    vdnn_status st = plan_load(n, f->path, &p);
    ck_assert_msg((int)st == status, "plan_load returned %d, expected %d (%s)\n%s", st, status, vdnn_errmsg(), text);
    tn_msg_has(a, b);
    ck_assert_ptr_null(p.offload);
    plan_free(&p);
}

/* As load_fails, with f's good text edited (from -> to). */
static void edit_fails(const net *n, const planfile *f, const char *from, const char *to, int status, const char *a,
                       const char *b)
{
    char *text = edited(f->text, from, to);
    load_fails(n, f, text, status, a, b);
    free(text);
}

/* As edit_fails, with two edits. */
static void edit2_fails(const net *n, const planfile *f, const char *from1, const char *to1, const char *from2,
                        const char *to2, int status, const char *a, const char *b)
{
    char *once = edited(f->text, from1, to1), *text = edited(once, from2, to2);
    load_fails(n, f, text, status, a, b);
    free(text);
    free(once);
}

/* plan_apply(n, p) fails with EINVAL naming `a` and `b`, and leaves the net's algorithms,
 * maps and swap flags as they were. */
static void apply_fails(net *n, const plan *p, const char *a, const char *b)
{
    plan before, after;
    ck_assert_int_eq(plan_from_net(n, &before), VDNN_OK);
    ck_assert_int_eq(plan_apply(n, p), VDNN_EINVAL);
    tn_msg_has(a, b);
    ck_assert_int_eq(plan_from_net(n, &after), VDNN_OK);
    plans_equal(&before, &after);
    plan_free(&before);
    plan_free(&after);
}

/* What f prints, as a string; free() it. */
static char *printed(const plan *p, const net *n, const profile *pr, int json)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    if (json) plan_print_json(f, p, n, pr, NULL);
    else plan_print(f, p, n, pr);
    fclose(f);
    return buf;
}

/* ---- making plans ---- */

START_TEST(test_init_defaults_and_copy)
{
    net *n = tn_parse(PF_NET, NULL);
    plan p;
    ck_assert_int_eq(plan_init(&p, n), VDNN_OK);
    ck_assert_int_eq(p.nlayers, PF_LAYERS);
    ck_assert_int_eq(p.batch, 16);
    ck_assert_str_eq(p.origin, "");
    ck_assert(p.predicted_s < 0 && p.measured_s < 0);
    ck_assert_uint_eq(p.peak_bytes, 0);
    ck_assert_int_eq(p.prefetch_ahead, PREFETCH_FAR);
    ck_assert_int_eq(p.release_lag, 1);
    for (int j = 0; j <= PF_LAYERS; j++) ck_assert_int_eq(p.offload[j], MAP_KEEP);
    for (int i = 0; i < PF_LAYERS; i++) ck_assert_int_eq(p.swap[i], 0);
    ck_assert_int_eq(p.micro, 0);
    plan_free(&p);
    plan_free(&p);   /* a freed plan frees again harmlessly */

    plan a = mixed_plan(n), b;
    ck_assert_int_eq(plan_copy(&b, &a), VDNN_OK);
    plans_equal(&a, &b);
    ck_assert_ptr_ne(a.offload, b.offload);
    ck_assert_ptr_ne(a.algo, b.algo);
    ck_assert_ptr_ne(a.swap, b.swap);
    a.offload[0] = 0;
    a.offload[2] = 0;
    a.algo[0][0] = 0;
    a.swap[0] = 0;
    ck_assert_int_eq(b.offload[0], MAP_OFFLOAD);
    ck_assert_int_eq(b.offload[2], MAP_RECOMPUTE);
    ck_assert_int_eq(b.algo[0][0], 1);
    ck_assert_int_eq(b.swap[0], 1);
    plan_free(&a);
    plan c;
    ck_assert_int_eq(plan_copy(&c, &a), VDNN_OK);   /* a freed plan copies as empty */
    ck_assert_ptr_null(c.offload);
    ck_assert_ptr_null(c.swap);
    plan_free(&b);
    net_free(n);

    /* a net split into micro-batches: the plan keeps the optimizer's batch and the split */
    net_overrides ov = net_no_overrides();
    ov.micro_batch = 4;
    n = tn_parse(PF_NET, &ov);
    ck_assert_int_eq(plan_init(&p, n), VDNN_OK);
    ck_assert_int_eq(p.batch, 16);
    ck_assert_int_eq(p.micro, 4);
    plan_free(&p);
    net_free(n);
}
END_TEST

START_TEST(test_policy_offload)
{
    net *n = tn_parse(PF_NET, NULL);
    for (int pol = 0; pol < POLICY_COUNT; pol++) {
        plan p;
        ck_assert_int_eq(plan_policy(n, NULL, (mem_policy)pol, ALGO_MEM, PREFETCH_NEXT, 0, &p), VDNN_OK);
        ck_assert_str_eq(p.origin, policy_name((mem_policy)pol));
        ck_assert_int_eq(p.prefetch_ahead, PREFETCH_NEXT);
        ck_assert_int_eq(p.release_lag, 0);
        for (int j = 0; j <= PF_LAYERS; j++) {
            int conv_input = j < PF_LAYERS && n->layers[j]->ops->algo_count != NULL;
            int want = pol == POLICY_ALL || pol == POLICY_SWAP ? readable[j] * MAP_OFFLOAD
                       : pol == POLICY_CONV                    ? conv_input * MAP_OFFLOAD
                       : pol == POLICY_RECOMPUTE               ? recomputed[j] * MAP_RECOMPUTE
                                                               : MAP_KEEP;
            ck_assert_msg(p.offload[j] == want, "policy %s, x[%d]: %d", policy_name((mem_policy)pol), j,
                          p.offload[j]);
            ck_assert_int_eq(p.offload[j], net_policy_map(n, j, (mem_policy)pol));
        }
        for (int i = 0; i < PF_LAYERS; i++) {
            int want = pol == POLICY_SWAP && swappable[i];
            ck_assert_msg(p.swap[i] == want, "policy %s, %s: swap %d", policy_name((mem_policy)pol),
                          n->layers[i]->name, p.swap[i]);
            ck_assert_int_eq(swappable[i], layer_swappable(n->layers[i]));
        }
        ck_assert_int_eq(p.micro, 0);
        plan_free(&p);
    }
    /* conv is exactly the convolutions' inputs */
    plan p;
    ck_assert_int_eq(plan_policy(n, NULL, POLICY_CONV, ALGO_MEM, PREFETCH_FAR, 1, &p), VDNN_OK);
    ck_assert(p.offload[0] && p.offload[2]);
    int count = 0;
    for (int j = 0; j <= PF_LAYERS; j++) count += p.offload[j];
    ck_assert_int_eq(count, 2);
    plan_free(&p);
    /* bad arguments */
    ck_assert_int_eq(plan_policy(n, NULL, POLICY_COUNT, ALGO_MEM, PREFETCH_FAR, 1, &p), VDNN_EINVAL);
    ck_assert_int_eq(plan_policy(n, NULL, POLICY_ALL, ALGO_MEM, 7, 1, &p), VDNN_EINVAL);
    ck_assert_int_eq(plan_policy(n, NULL, POLICY_ALL, ALGO_MEM, PREFETCH_FAR, -1, &p), VDNN_EINVAL);
    ck_assert_ptr_null(p.offload);
    net_free(n);
}
END_TEST

START_TEST(test_policy_overrides_win)
{
    net *n = tn_parse(PF_OVERRIDES, NULL);
    const int all[PF_LAYERS + 1] = {1, 0, 0, 1, 0, 1, 1, 0, 0};
    const int conv[PF_LAYERS + 1] = {1, 0, 0, 0, 0, 0, 1, 0, 0};
    const int none[PF_LAYERS + 1] = {0, 0, 0, 0, 0, 0, 1, 0, 0};
    /* recompute: fc7's input offloaded as its override says, not recomputed */
    const int recompute[PF_LAYERS + 1] = {0, 0, 0, 0, 0, 0, 1, 0, 0};
    const int *want[POLICY_COUNT] = {[POLICY_NONE] = none, [POLICY_ALL] = all, [POLICY_CONV] = conv,
                                     [POLICY_SWAP] = all, [POLICY_RECOMPUTE] = recompute};
    for (int pol = 0; pol < POLICY_COUNT; pol++) ck_assert_msg(want[pol] != NULL, "policy %d untested", pol);
    int pinned = algo_index(n->layers[0], PASS_FWD, "im2col-batch");
    for (int pol = 0; pol < POLICY_COUNT; pol++)
        for (int a = 0; a < ALGO_MODE_COUNT; a++) {
            plan p;
            ck_assert_int_eq(plan_policy(n, NULL, (mem_policy)pol, (algo_mode)a, PREFETCH_FAR, 1, &p), VDNN_OK);
            for (int j = 0; j <= PF_LAYERS; j++)
                ck_assert_msg(p.offload[j] == want[pol][j], "policy %s, x[%d]", policy_name((mem_policy)pol), j);
            for (int k = 0; k < PASS_COUNT; k++) ck_assert_int_eq(p.algo[0][k], pinned);
            plan_free(&p);
        }
    net_free(n);
}
END_TEST

START_TEST(test_policy_mem_smallest_workspace)
{
    net *n = tn_parse(PF_NET, NULL);
    plan p;
    ck_assert_int_eq(plan_policy(n, NULL, POLICY_NONE, ALGO_MEM, PREFETCH_FAR, 1, &p), VDNN_OK);
    int convs = 0;
    for (int i = 0; i < PF_LAYERS; i++) {
        const layer *l = n->layers[i];
        convs += layer_algo_count(l, PASS_FWD) > 1;
        for (int k = 0; k < PASS_COUNT; k++) {
            int pick = p.algo[i][k];
            size_t ws = layer_workspace_bytes(l, k, pick);
            for (int a = 0; a < layer_algo_count(l, k); a++) {
                ck_assert_uint_le(ws, layer_workspace_bytes(l, k, a));
                if (a < pick) ck_assert_uint_lt(ws, layer_workspace_bytes(l, k, a));   /* ties: lowest */
            }
        }
    }
    ck_assert_int_eq(convs, 2);
    plan_free(&p);
    net_free(n);
}
END_TEST

START_TEST(test_policy_perf_from_profile)
{
    net *n = tn_parse(PF_NET, NULL);
    profile pr = zero_profile(n);
    for (int i = 0; i < PF_LAYERS; i++)
        for (int a = 0; a < PLAN_MAX_ALGOS; a++) {
            pr.layers[i].fwd_s[a] = 1 + (a == 3 ? -0.5 : 0);
            pr.layers[i].bwd_filter_s[a] = 1 + (a == 1 ? -0.5 : 0);
            pr.layers[i].bwd_data_s[a] = i == 0 ? 0 : 1 + (a == 4 ? -0.5 : 0);   /* the first: no dx */
        }
    plan p, mem;
    ck_assert_int_eq(plan_policy(n, &pr, POLICY_NONE, ALGO_PERF, PREFETCH_FAR, 1, &p), VDNN_OK);
    ck_assert_int_eq(plan_policy(n, NULL, POLICY_NONE, ALGO_MEM, PREFETCH_FAR, 1, &mem), VDNN_OK);
    for (int i = 0; i < 3; i += 2) {
        ck_assert_int_eq(p.algo[i][PASS_FWD], 3);
        ck_assert_int_eq(p.algo[i][PASS_BWD_FILTER], 1);
    }
    ck_assert_int_eq(p.algo[2][PASS_BWD_DATA], 4);
    /* all times equal: the smallest workspace, free speed-wise */
    ck_assert_int_eq(p.algo[0][PASS_BWD_DATA], mem.algo[0][PASS_BWD_DATA]);
    plan_free(&p);
    plan_free(&mem);

    /* no profile: the algorithms the net has now */
    n->layers[2]->algo[PASS_FWD] = 2;
    n->layers[2]->algo[PASS_BWD_FILTER] = 4;
    ck_assert_int_eq(plan_policy(n, NULL, POLICY_ALL, ALGO_PERF, PREFETCH_FAR, 1, &p), VDNN_OK);
    ck_assert_int_eq(p.algo[2][PASS_FWD], 2);
    ck_assert_int_eq(p.algo[2][PASS_BWD_FILTER], 4);
    plan_free(&p);

    pr.nlayers = 3;   /* a profile of another net */
    ck_assert_int_eq(plan_policy(n, &pr, POLICY_ALL, ALGO_PERF, PREFETCH_FAR, 1, &p), VDNN_EINVAL);
    tn_msg_has("profile", "3 layers");
    free(pr.layers);
    net_free(n);
}
END_TEST

/* ---- from the net, onto the net ---- */

START_TEST(test_from_net_apply_attached)
{
    device *d;
    net *n = tn_attached(PF_NET, NULL, &d);
    plan p = busy_plan(n), q;
    ck_assert_int_eq(plan_apply(n, &p), VDNN_OK);
    for (int j = 0; j <= PF_LAYERS; j++) ck_assert_int_eq(n->maps[j].offload, p.offload[j]);
    ck_assert_int_eq(n->layers[0]->algo[PASS_BWD_FILTER], 3);
    ck_assert_int_eq(n->prefetch_ahead, PREFETCH_NEXT);
    ck_assert_int_eq(n->release_lag, 0);
    ck_assert_int_eq(plan_from_net(n, &q), VDNN_OK);
    ck_assert_str_eq(q.origin, policy_name(n->policy));
    ck_assert(q.predicted_s < 0 && q.measured_s < 0);
    /* everything but the results and the origin comes back */
    q.predicted_s = p.predicted_s;
    q.measured_s = p.measured_s;
    q.peak_bytes = p.peak_bytes;
    memcpy(q.origin, p.origin, sizeof q.origin);
    plans_equal(&p, &q);
    plan_free(&q);

    /* a plan that offloads what no backward reads: rejected, the net untouched */
    p.offload[1] = 1;
    p.algo[0][PASS_FWD] = 0;
    ck_assert_int_eq(plan_apply(n, &p), VDNN_EINVAL);
    tn_msg_has("x[1]", "no backward pass reads it");
    ck_assert_int_eq(n->layers[0]->algo[PASS_FWD], 1);
    p.offload[1] = 0;
    p.offload[PF_LAYERS] = 1;
    ck_assert_int_eq(plan_apply(n, &p), VDNN_EINVAL);
    tn_msg_has("x[8]", "loss output");
    p.offload[PF_LAYERS] = 0;
    const int beyond = layer_algo_count(n->layers[2], PASS_BWD_DATA);
    char which[64];
    snprintf(which, sizeof which, "backward-data algorithm %d", beyond);
    p.algo[2][PASS_BWD_DATA] = beyond;
    ck_assert_int_eq(plan_apply(n, &p), VDNN_EINVAL);
    tn_msg_has("conv3", which);
    p.algo[2][PASS_BWD_DATA] = 4;

    /* recomputed maps reach the net's maps, and come back */
    p.offload[2] = p.offload[5] = MAP_RECOMPUTE;
    ck_assert_int_eq(plan_apply(n, &p), VDNN_OK);
    for (int j = 0; j <= PF_LAYERS; j++) {
        ck_assert_int_eq(n->maps[j].recompute, p.offload[j] == MAP_RECOMPUTE);
        ck_assert_int_eq(n->maps[j].offload, p.offload[j] == MAP_OFFLOAD);
    }
    ck_assert_int_eq(plan_from_net(n, &q), VDNN_OK);
    ck_assert_int_eq(q.offload[2], MAP_RECOMPUTE);
    ck_assert_int_eq(q.offload[5], MAP_RECOMPUTE);
    ck_assert_int_eq(q.offload[3], MAP_OFFLOAD);
    for (int i = 0; i < PF_LAYERS; i++) ck_assert_int_eq(q.swap[i], 0);
    plan_free(&q);
    plan_free(&p);
    tn_free(n, d);
}
END_TEST

/* Swapping is decided when the parameters are placed: a plan must swap exactly the
 * layers the attached net swaps, however they came to be swapped (the policy, or the
 * layers' flags set before net_attach). */
START_TEST(test_apply_swap_attached)
{
    device *d;
    net *n = tn_attached(PF_NET, NULL, &d);
    plan p = mixed_plan(n);
    apply_fails(n, &p, "swaps conv1's parameters", "net_attach");
    tn_msg_has("on the device", NULL);
    memset(p.swap, 0, PF_LAYERS);
    p.swap[6] = 1;
    apply_fails(n, &p, "swaps fc7's parameters", "net_attach");
    memset(p.swap, 0, PF_LAYERS);
    ck_assert_int_eq(plan_apply(n, &p), VDNN_OK);   /* the same plan, swapping nothing */
    plan_free(&p);
    tn_free(n, d);

    /* policy swap: every swappable layer is placed in host memory */
    n = tn_attached(PF_NET "[memory]\npolicy = swap\n", NULL, &d);
    for (int i = 0; i < PF_LAYERS; i++) ck_assert_int_eq(n->layers[i]->swap, swappable[i]);
    plan q;
    ck_assert_int_eq(plan_from_net(n, &q), VDNN_OK);
    ck_assert_str_eq(q.origin, "swap");
    for (int i = 0; i < PF_LAYERS; i++) ck_assert_int_eq(q.swap[i], swappable[i]);
    for (int j = 0; j <= PF_LAYERS; j++) ck_assert_int_eq(q.offload[j], readable[j] * MAP_OFFLOAD);
    plan_free(&q);
    p = busy_plan(n);
    apply_fails(n, &p, "keeps conv1's parameters", "in host memory");
    plan_free(&p);
    p = mixed_plan(n);
    ck_assert_msg(plan_apply(n, &p) == VDNN_OK, "plan_apply: %s", vdnn_errmsg());
    ck_assert(n->maps[6].recompute && !n->maps[6].offload && n->maps[0].offload);
    ck_assert_int_eq(plan_from_net(n, &q), VDNN_OK);
    q.predicted_s = p.predicted_s;
    q.measured_s = p.measured_s;
    q.peak_bytes = p.peak_bytes;
    memcpy(q.origin, p.origin, sizeof q.origin);
    plans_equal(&p, &q);
    plan_free(&q);
    plan_free(&p);
    tn_free(n, d);

    /* one layer's flag set before attaching */
    n = tn_parse(PF_NET, NULL);
    n->layers[2]->swap = 1;
    d = tn_device_for(n);
    ck_assert_msg(net_attach(n, d) == VDNN_OK, "net_attach: %s", vdnn_errmsg());
    p = busy_plan(n);
    apply_fails(n, &p, "keeps conv3's parameters", "in host memory");
    p.swap[2] = 1;
    ck_assert_msg(plan_apply(n, &p) == VDNN_OK, "plan_apply: %s", vdnn_errmsg());
    p.swap[0] = 1;
    apply_fails(n, &p, "swaps conv1's parameters", NULL);
    plan_free(&p);
    tn_free(n, d);
}
END_TEST

/* Plans the net cannot run, whatever its state: rejected, the net as it was. */
START_TEST(test_apply_bad_maps_and_swaps)
{
    net *n = tn_parse(PF_NET, NULL);
    /* on a bare net the plan's swaps become the layers' flags (net_attach places them) */
    plan p = mixed_plan(n), q;
    ck_assert_msg(plan_apply(n, &p) == VDNN_OK, "plan_apply: %s", vdnn_errmsg());
    for (int i = 0; i < PF_LAYERS; i++) ck_assert_int_eq(n->layers[i]->swap, p.swap[i]);
    ck_assert_int_eq(plan_from_net(n, &q), VDNN_OK);
    for (int i = 0; i < PF_LAYERS; i++) ck_assert_int_eq(q.swap[i], p.swap[i]);
    plan_free(&q);

    p.offload[1] = MAP_RECOMPUTE;
    apply_fails(n, &p, "recomputes x[1]", "no backward pass reads it");
    p.offload[1] = MAP_KEEP;
    p.offload[0] = MAP_RECOMPUTE;
    apply_fails(n, &p, "x[0], the input, cannot be recomputed", NULL);
    p.offload[0] = MAP_KEEP;
    p.offload[PF_LAYERS] = MAP_RECOMPUTE;
    apply_fails(n, &p, "x[8]", "loss output");
    p.offload[PF_LAYERS] = MAP_KEEP;
    p.offload[3] = 3;
    apply_fails(n, &p, "x[3]", "map decision 3");
    /* recomputing x[3] runs conv3 (x[2] is recomputed too, so relu2 before it), whose
     * parameters are in host memory */
    p.offload[3] = MAP_RECOMPUTE;
    apply_fails(n, &p, "recomputing x[3]", "conv3 again, whose parameters are swapped");
    /* the chain stops at the kept x[1]: conv1, swapped, never runs again */
    p.swap[2] = 0;
    ck_assert_int_eq(p.swap[0], 1);
    ck_assert_msg(plan_apply(n, &p) == VDNN_OK, "plan_apply: %s", vdnn_errmsg());
    p.swap[3] = 1;
    apply_fails(n, &p, "bn4's parameters cannot be swapped", "its forward pass updates state in them");
    p.swap[3] = 0;
    p.swap[1] = 1;
    apply_fails(n, &p, "relu2's parameters cannot be swapped", "it has none");   /* before any chain check */
    p.offload[2] = MAP_KEEP;
    apply_fails(n, &p, "relu2's parameters cannot be swapped", "it has none");
    p.offload[2] = MAP_RECOMPUTE;
    p.swap[1] = 0;
    p.micro = 4;
    apply_fails(n, &p, "micro-batches are of 4 items", "the net's of 0");
    plan_free(&p);
    net_free(n);

    /* a plan of the whole batch on a net split into micro-batches, and the reverse */
    net_overrides ov = net_no_overrides();
    ov.micro_batch = 4;
    n = tn_parse(PF_NET, &ov);
    net *whole = tn_parse(PF_NET, NULL);
    p = busy_plan(whole);
    apply_fails(n, &p, "micro-batches are of 0 items", "the net's of 4");
    plan_free(&p);
    p = busy_plan(n);
    ck_assert_int_eq(p.micro, 4);
    ck_assert_msg(plan_apply(n, &p) == VDNN_OK, "plan_apply: %s", vdnn_errmsg());
    apply_fails(whole, &p, "micro-batches are of 4 items", "the net's of 0");
    plan_free(&p);
    net_free(whole);
    net_free(n);
}
END_TEST

/* plan_apply_from, which checks and sets only what a plan changes from the one the net
 * runs, against plan_apply on a twin net: a walk of single changes, some of them
 * plans neither accepts (a map decision out of range, an offload no backward pass
 * reads, a recomputation through a swapped layer, swapping batch norm, an algorithm
 * that does not exist, a placement other than attaching made), the same answer and,
 * after each, the same plan in both nets. The nets are attached with policy swap
 * (conv1, conv3 and fc7 in host memory: their swap mode may change, their placement
 * not); a bare net holds no maps, and plan_apply_from is plan_apply there. */
START_TEST(test_apply_from_last)
{
    device *d[2];
    net *n[2];
    for (int k = 0; k < 2; k++) n[k] = tn_attached(PF_NET "[memory]\npolicy = swap\n", NULL, &d[k]);
    plan last, p;
    ck_assert_int_eq(plan_from_net(n[0], &last), VDNN_OK);
    ck_assert_int_eq(plan_apply(n[0], &last), VDNN_OK);
    uint64_t x = 0x5eed;
    int taken = 0, refused = 0;
    for (int step = 0; step < 3000; step++) {
        ck_assert_int_eq(plan_copy(&p, &last), VDNN_OK);
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        unsigned r = (unsigned)(x >> 33);
        int i = (int)(r / 8 % PF_LAYERS);
        switch (r % 8) {
        case 0:
        case 1: p.algo[i][r / 64 % PASS_COUNT] = (int)(r / 256 % 7) - 1; break;
        case 2: p.swap[i] = (unsigned char)(r / 64 % 4); break;
        case 3: p.prefetch_ahead = (int)(r / 64 % 3); p.release_lag = (int)(r / 256 % 2); break;
        default: p.offload[r / 8 % (PF_LAYERS + 1)] = (unsigned char)(r / 128 % 4);
        }
        vdnn_status a = plan_apply_from(n[0], &p, &last), b = plan_apply(n[1], &p);
        ck_assert_msg(a == b, "step %d: plan_apply_from says %d, plan_apply %d", step, a, b);
        plan now[2];
        for (int k = 0; k < 2; k++) ck_assert_int_eq(plan_from_net(n[k], &now[k]), VDNN_OK);
        plans_equal(&now[0], &now[1]);
        if (a == VDNN_OK) {
            plans_equal(&now[0], &p);
            taken++;
            plan_free(&last);
            last = p;
        } else {
            plans_equal(&now[0], &last);
            refused++;
            plan_free(&p);
        }
        plan_free(&now[0]);
        plan_free(&now[1]);
    }
    ck_assert_int_gt(taken, 300);
    ck_assert_int_gt(refused, 300);
    plan_free(&last);
    for (int k = 0; k < 2; k++) tn_free(n[k], d[k]);
}
END_TEST

START_TEST(test_from_net_unattached)
{
    /* No maps yet: the flags are those net_attach will give them, from the policy. */
    net *n = tn_parse(PF_NET "[memory]\npolicy = conv\n", NULL);
    ck_assert_ptr_null(n->maps);
    plan p, q;
    ck_assert_int_eq(plan_from_net(n, &p), VDNN_OK);
    ck_assert_str_eq(p.origin, "conv");
    for (int j = 0; j <= PF_LAYERS; j++) ck_assert_int_eq(p.offload[j], j == 0 || j == 2);
    plan_free(&p);
    p = busy_plan(n);
    ck_assert_int_eq(plan_apply(n, &p), VDNN_OK);
    ck_assert_int_eq(plan_from_net(n, &q), VDNN_OK);
    for (int i = 0; i < PF_LAYERS; i++)
        for (int k = 0; k < PASS_COUNT; k++) ck_assert_int_eq(q.algo[i][k], p.algo[i][k]);
    ck_assert_int_eq(q.prefetch_ahead, PREFETCH_NEXT);
    plan_free(&p);
    plan_free(&q);
    net_free(n);
    n = tn_parse(PF_NET "[memory]\npolicy = dyn\n", NULL);
    ck_assert_int_eq(plan_from_net(n, &p), VDNN_OK);
    ck_assert_str_eq(p.origin, "dyn");
    plan_free(&p);
    net_free(n);
    /* swap and recompute: what net_attach will do */
    n = tn_parse(PF_NET "[memory]\npolicy = swap\n", NULL);
    ck_assert_int_eq(plan_from_net(n, &p), VDNN_OK);
    ck_assert_str_eq(p.origin, "swap");
    for (int i = 0; i < PF_LAYERS; i++) ck_assert_int_eq(p.swap[i], swappable[i]);
    for (int j = 0; j <= PF_LAYERS; j++) ck_assert_int_eq(p.offload[j], readable[j] * MAP_OFFLOAD);
    plan_free(&p);
    net_free(n);
    n = tn_parse(PF_NET "[memory]\npolicy = recompute\n", NULL);
    ck_assert_int_eq(plan_from_net(n, &p), VDNN_OK);
    ck_assert_str_eq(p.origin, "recompute");
    for (int i = 0; i < PF_LAYERS; i++) ck_assert_int_eq(p.swap[i], 0);
    for (int j = 0; j <= PF_LAYERS; j++) ck_assert_int_eq(p.offload[j], recomputed[j] * MAP_RECOMPUTE);
    plan_free(&p);
    net_free(n);
}
END_TEST

START_TEST(test_apply_other_net)
{
    net *n = tn_parse(PF_NET, NULL), *small = tn_parse(TN_SMALL, NULL);
    plan p = busy_plan(n);
    int algo = small->layers[0]->algo[PASS_FWD];
    ck_assert_int_eq(plan_apply(small, &p), VDNN_EINVAL);
    tn_msg_has("8 layers", "the net has 5");
    ck_assert_int_eq(small->layers[0]->algo[PASS_FWD], algo);
    plan_free(&p);
    net_free(small);
    net_free(n);
}
END_TEST

/* ---- the file ---- */

START_TEST(test_save_load_round_trip)
{
    net *n = tn_parse(PF_NET, NULL);
    planfile f = saved_plan(n);
    ck_assert_ptr_nonnull(strstr(f.text, "\ndata offload\n"));
    ck_assert_ptr_nonnull(strstr(f.text, "\nconv1 keep 0 im2col im2col-batch im2col-chunk\n"));
    ck_assert_ptr_nonnull(strstr(f.text, "\nrelu2 offload 0 default default default\n"));
    ck_assert_ptr_nonnull(strstr(f.text, "\nbn4 keep 0 default default default\n"));
    ck_assert_ptr_nonnull(strstr(f.text, "\nbatch 16\nmicro_batch 0\nprefetch next\n"));
    ck_assert_ptr_nonnull(strstr(f.text, "predicted_ms 12.5\n"));
    ck_assert_ptr_nonnull(strstr(f.text, "measured_ms 15\n"));
    ck_assert_ptr_null(strstr(f.text, ".tmp"));
    plan want = busy_plan(n), got;
    ck_assert_msg(plan_load(n, f.path, &got) == VDNN_OK, "plan_load: %s", vdnn_errmsg());
    plans_equal(&want, &got);
    plan_free(&got);
    /* unknown results and an empty origin survive too */
    want.predicted_s = want.measured_s = -1;
    want.origin[0] = 0;
    want.peak_bytes = 0;
    ck_assert_int_eq(plan_save(&want, n, f.path), VDNN_OK);
    ck_assert_int_eq(plan_load(n, f.path, &got), VDNN_OK);
    plans_equal(&want, &got);
    plan_free(&got);
    /* an odd time reads back to the same double */
    want.predicted_s = 1.0 / 3.0;
    want.measured_s = 0.1 + 0.2;
    ck_assert_int_eq(plan_save(&want, n, f.path), VDNN_OK);
    ck_assert_int_eq(plan_load(n, f.path, &got), VDNN_OK);
    plans_equal(&want, &got);
    plan_free(&got);
    /* a plan the net cannot run is not saved */
    want.offload[4] = 1;
    ck_assert_int_eq(plan_save(&want, n, f.path), VDNN_EINVAL);
    tn_msg_has("x[4]", NULL);
    want.offload[4] = 0;
    want.swap[3] = 1;
    ck_assert_int_eq(plan_save(&want, n, f.path), VDNN_EINVAL);
    tn_msg_has("bn4's parameters cannot be swapped", NULL);
    plan_free(&want);
    /* comments and blank lines anywhere are ignored */
    char *text = edited(f.text, "layers", "\n# a note\n\n  layers");
    tn_write_text(f.path, text);
    ck_assert_int_eq(plan_load(n, f.path, &got), VDNN_OK);
    plan_free(&got);
    free(text);
    planfile_free(&f);
    net_free(n);
}
END_TEST

/* Recomputed maps and swapped layers: the words and flags in the file, and back. */
START_TEST(test_save_load_recompute_swap)
{
    net *n = tn_parse(PF_NET, NULL);
    planfile f = saved_plan_of(n, mixed_plan(n));
    static const char *const lines[] = {
        "\ndata offload\n", "\nconv1 keep 1 im2col im2col-batch im2col-chunk\n",
        "\nrelu2 recompute 0 default default default\n", "\nconv3 offload 1 im2col-par im2col-par im2col-par\n",
        "\nbn4 keep 0 default default default\n", "\nrelu5 recompute 0 default default default\n",
        "\nmaxpool6 recompute 0 default default default\n", "\nfc7 keep 1 default default default\n",
        "\nsoftmax8 keep 0 default default default\n"};
    for (size_t k = 0; k < sizeof lines / sizeof *lines; k++)
        ck_assert_msg(strstr(f.text, lines[k]) != NULL, "'%s' missing in:\n%s", lines[k] + 1, f.text);
    plan want = mixed_plan(n), got;
    ck_assert_msg(plan_load(n, f.path, &got) == VDNN_OK, "plan_load: %s", vdnn_errmsg());
    plans_equal(&want, &got);
    ck_assert_msg(plan_apply(n, &got) == VDNN_OK, "plan_apply: %s", vdnn_errmsg());
    plan_free(&got);
    plan_free(&want);
    planfile_free(&f);
    net_free(n);

    /* a net split into micro-batches: the split is saved, and checked on loading */
    net_overrides ov = net_no_overrides();
    ov.micro_batch = 4;
    n = tn_parse(PF_NET, &ov);
    net *whole = tn_parse(PF_NET, NULL);
    f = saved_plan_of(n, mixed_plan(n));
    ck_assert_ptr_nonnull(strstr(f.text, "\nbatch 16\nmicro_batch 4\n"));
    want = mixed_plan(n);
    ck_assert_msg(plan_load(n, f.path, &got) == VDNN_OK, "plan_load: %s", vdnn_errmsg());
    ck_assert_int_eq(got.micro, 4);
    plans_equal(&want, &got);
    plan_free(&got);
    plan_free(&want);
    load_fails(whole, &f, f.text, VDNN_EINVAL, "plan.txt:5: ", "micro-batches of 4");
    edit_fails(n, &f, "micro_batch 4", "micro_batch 2", VDNN_EINVAL, "plan.txt:5: ", "micro-batches of 2");
    tn_msg_has("--micro-batch 2", NULL);
    planfile_free(&f);
    f = saved_plan_of(whole, mixed_plan(whole));
    load_fails(n, &f, f.text, VDNN_EINVAL, "plan.txt:5: ", "micro-batches of 0");
    edit_fails(whole, &f, "micro_batch 0", "micro_batch -1", VDNN_EFORMAT, "plan.txt:5: ",
               "micro_batch must be an integer");
    /* a file from before micro-batches, without the line */
    edit_fails(whole, &f, "micro_batch 0\n", "", VDNN_EFORMAT, "plan.txt:5: ",
               "expected 'micro_batch VALUE', found 'prefetch'");
    planfile_free(&f);
    net_free(whole);
    net_free(n);
}
END_TEST

START_TEST(test_load_wrong_layer_count)
{
    net *n = tn_parse(PF_NET, NULL), *small = tn_parse(TN_SMALL, NULL);
    planfile f = saved_plan(n);
    edit_fails(n, &f, "layers 8", "layers 12", VDNN_EINVAL, "plan.txt:3: ", "the plan has 12 layers, the net has 8");
    load_fails(small, &f, f.text, VDNN_EINVAL, "plan.txt:3: ", "the plan has 8 layers, the net has 5");
    edit_fails(n, &f, "layers 8", "layers eight", VDNN_EFORMAT, "plan.txt:3: ", "'eight'");
    planfile_free(&f);
    net_free(small);
    net_free(n);
}
END_TEST

START_TEST(test_load_wrong_layer_name)
{
    net *n = tn_parse(PF_NET, NULL);
    planfile f = saved_plan(n);
    edit_fails(n, &f, "conv3 ", "conv9 ", VDNN_EINVAL, "plan.txt:18: ", "conv3 in the net but 'conv9' in the plan");
    edit_fails(n, &f, "bn4 keep 0 default default default", "bn4 keep 0 default default", VDNN_EFORMAT,
               "plan.txt:19: ", "has 5 fields");
    /* a layer line from before swapping: no swap flag */
    edit_fails(n, &f, "bn4 keep 0 default", "bn4 keep default", VDNN_EFORMAT, "plan.txt:19: ",
               "'NAME MAP SWAP FWD BWD-DATA BWD-FILTER'");
    planfile_free(&f);
    net_free(n);
}
END_TEST

START_TEST(test_load_unknown_algorithm)
{
    net *n = tn_parse(PF_NET, NULL);
    planfile f = saved_plan(n);
    edit_fails(n, &f, "conv1 keep 0 im2col", "conv1 keep 0 fft", VDNN_EINVAL, "plan.txt:16: ",
               "conv1: unknown forward algorithm 'fft'");
    tn_msg_has("direct, im2col, im2col-batch, im2col-chunk, im2col-par", NULL);
    edit_fails(n, &f, "im2col-chunk\n", "winograd\n", VDNN_EINVAL, "plan.txt:16: ", "backward-filter algorithm");
    /* a name another layer type has is unknown here */
    edit_fails(n, &f, "relu2 offload 0 default default", "relu2 offload 0 default direct", VDNN_EINVAL,
               "plan.txt:17: ", "relu2: unknown backward-data algorithm 'direct' (it has: default)");
    planfile_free(&f);
    net_free(n);
}
END_TEST

START_TEST(test_load_bad_map)
{
    net *n = tn_parse(PF_NET, NULL);
    planfile f = saved_plan(n);
    edit_fails(n, &f, "conv1 keep", "conv1 offload", VDNN_EINVAL, "plan.txt:16: ",
               "conv1: the plan offloads x[1] (conv1's output), but no backward pass reads it");
    edit_fails(n, &f, "conv1 keep", "conv1 recompute", VDNN_EINVAL, "plan.txt:16: ",
               "conv1: the plan recomputes x[1] (conv1's output), but no backward pass reads it");
    edit_fails(n, &f, "fc7 keep", "fc7 offload", VDNN_EINVAL, "plan.txt:22: ", "x[7]");
    edit_fails(n, &f, "softmax8 keep", "softmax8 offload", VDNN_EINVAL, "plan.txt:23: ", "x[8] (the loss output)");
    edit_fails(n, &f, "softmax8 keep", "softmax8 recompute", VDNN_EINVAL, "plan.txt:23: ", "x[8]");
    /* the words, not the flags of the old format, nor anything else */
    edit_fails(n, &f, "conv3 offload", "conv3 1", VDNN_EFORMAT, "plan.txt:18: ",
               "conv3: the output map must be keep, offload or recompute, not '1'");
    edit_fails(n, &f, "conv3 offload", "conv3 offlode", VDNN_EFORMAT, "plan.txt:18: ", "not 'offlode'");
    edit_fails(n, &f, "conv3 offload", "conv3 Keep", VDNN_EFORMAT, "plan.txt:18: ", "not 'Keep'");
    edit_fails(n, &f, "data offload", "data Offload", VDNN_EFORMAT, "plan.txt:14: ", "data: the input map");
    edit_fails(n, &f, "data offload\n", "", VDNN_EFORMAT, "plan.txt:15: ", "expected 'data VALUE'");
    /* x[0], the input, is there from the start: nothing computes it again */
    edit_fails(n, &f, "data offload", "data recompute", VDNN_EINVAL, "plan.txt:14: ",
               "x[0], the input, cannot be recomputed");
    planfile_free(&f);
    net_free(n);
}
END_TEST

START_TEST(test_load_bad_swap)
{
    net *n = tn_parse(PF_NET, NULL);
    planfile f = saved_plan(n);
    edit_fails(n, &f, "conv3 offload 0", "conv3 offload 3", VDNN_EFORMAT, "plan.txt:18: ",
               "conv3: the swap flag must be 0 (resident), 1 (swapped, updated on the host) or 2");
    edit_fails(n, &f, "conv3 offload 0", "conv3 offload yes", VDNN_EFORMAT, "plan.txt:18: ", "not 'yes'");
    edit_fails(n, &f, "conv3 offload 0", "conv3 offload 01", VDNN_EFORMAT, "plan.txt:18: ", "not '01'");
    /* batch norm's running statistics change in forward: its parameters stay */
    edit_fails(n, &f, "bn4 keep 0", "bn4 keep 1", VDNN_EINVAL, "plan.txt",
               "bn4's parameters cannot be swapped (its forward pass updates state in them)");
    edit_fails(n, &f, "relu5 offload 0", "relu5 offload 1", VDNN_EINVAL, "plan.txt",
               "relu5's parameters cannot be swapped (it has none)");
    /* recomputing x[3] runs conv3, swapped */
    edit_fails(n, &f, "conv3 offload 0", "conv3 recompute 1", VDNN_EINVAL, "plan.txt",
               "recomputing x[3] (conv3's output) would run conv3 again, whose parameters are swapped");
    /* the same swap and a recompute whose chain stops at the kept x[1] load */
    char *once = edited(f.text, "conv1 keep 0", "conv1 keep 1"), *text = edited(once, "relu2 offload", "relu2 recompute");
    tn_write_text(f.path, text);
    plan p;
    ck_assert_msg(plan_load(n, f.path, &p) == VDNN_OK, "plan_load: %s", vdnn_errmsg());
    ck_assert(p.swap[0] && p.offload[2] == MAP_RECOMPUTE);
    plan_free(&p);
    free(text);
    free(once);
    planfile_free(&f);
    net_free(n);
}
END_TEST

/* A version 1 file (before graphs: each layer line holds its input map's decision, and
 * there is no data line) still loads, into the same plan. */
START_TEST(test_load_version1)
{
    net *n = tn_parse(PF_NET, NULL);
    planfile f = saved_plan(n);
    static const char v1[] =
        "vdnn-plan 1\nlayers 8\nbatch 16\nmicro_batch 0\nprefetch next\nrelease_lag 0\norigin dyn\n"
        "predicted_ms 12.5\npeak_bytes 1234567\nmeasured_ms 15\n# layer  input-map  swap  fwd  bwd-data  bwd-filter\n"
        "conv1 offload 0 im2col im2col-batch im2col-chunk\nrelu2 keep 0 default default default\n"
        "conv3 offload 0 im2col-par im2col-par im2col-par\nbn4 offload 0 default default default\n"
        "relu5 keep 0 default default default\nmaxpool6 offload 0 default default default\n"
        "fc7 offload 0 default default default\nsoftmax8 keep 0 default default default\n";
    tn_write_text(f.path, v1);
    plan want = busy_plan(n), got;
    want.in_place = 0;   /* a plan made before in-place layers runs without them */
    ck_assert_msg(plan_load(n, f.path, &got) == VDNN_OK, "plan_load: %s", vdnn_errmsg());
    plans_equal(&want, &got);
    plan_free(&got);
    plan_free(&want);
    free(f.text);
    f.text = tn_read(f.path, NULL);
    edit_fails(n, &f, "relu2 keep", "relu2 offload", VDNN_EINVAL, "plan.txt:13: ",
               "relu2: the plan offloads x[1] (conv1's output), but no backward pass reads it");
    edit_fails(n, &f, "conv1 offload", "conv1 recompute", VDNN_EINVAL, "plan.txt:12: ", "x[0], the input, cannot be recomputed");
    /* recomputing x[3] runs conv3, swapped */
    edit2_fails(n, &f, "conv3 offload 0", "conv3 offload 1", "bn4 offload", "bn4 recompute", VDNN_EINVAL, "plan.txt",
                "recomputing x[3] (conv3's output) would run conv3 again, whose parameters are swapped");
    planfile_free(&f);
    net_free(n);
}
END_TEST

/* Version 2 (no in_place line) reads as a plan without in-place layers; a plan that
 * runs them is refused by a net that forbids them. */
START_TEST(test_load_in_place)
{
    net *n = tn_parse(PF_NET, NULL);
    planfile f = saved_plan(n);
    ck_assert_ptr_nonnull(strstr(f.text, "\nin_place 2\n"));
    char *v2 = edited(f.text, "vdnn-plan 3", "vdnn-plan 2"), *v2b = edited(v2, "in_place 2\n", "");
    tn_write_text(f.path, v2b);
    plan want = busy_plan(n), got;
    ck_assert_msg(plan_load(n, f.path, &got) == VDNN_OK, "plan_load: %s", vdnn_errmsg());
    want.in_place = 0;
    plans_equal(&want, &got);
    plan_free(&got);
    plan_free(&want);
    free(v2);
    free(v2b);
    net *apart = tn_parse(PF_NET "[memory]\nin_place = 0\n", NULL);
    load_fails(apart, &f, f.text, VDNN_EINVAL, "plan.txt", "runs layers in place, and the net forbids it");
    char *off = edited(f.text, "in_place 2", "in_place 0");
    tn_write_text(f.path, off);
    ck_assert_msg(plan_load(apart, f.path, &got) == VDNN_OK, "plan_load: %s", vdnn_errmsg());
    ck_assert_int_eq(got.in_place, 0);
    plan_free(&got);
    free(off);
    planfile_free(&f);
    net_free(apart);
    net_free(n);
}
END_TEST

START_TEST(test_load_wrong_batch)
{
    net *n = tn_parse(PF_NET, NULL);
    net_overrides ov = net_no_overrides();
    ov.batch = 32;
    net *big = tn_parse(PF_NET, &ov);
    planfile f = saved_plan(n);
    load_fails(big, &f, f.text, VDNN_EINVAL, "plan.txt:4: ", "made for batch 16, the net has batch 32");
    /* the batch is the optimizer's, whatever the micro-batch */
    ck_assert_ptr_nonnull(strstr(f.text, "\nbatch 16\n"));
    edit_fails(n, &f, "batch 16", "batch -16", VDNN_EFORMAT, "plan.txt:4: ", "batch must be an integer");
    planfile_free(&f);
    net_free(big);
    net_free(n);
}
END_TEST

START_TEST(test_load_bad_header)
{
    net *n = tn_parse(PF_NET, NULL);
    planfile f = saved_plan(n);
    edit_fails(n, &f, "vdnn-plan 3", "vdnn-plot 3", VDNN_EFORMAT, "plan.txt:2: ", "not a vdnn plan");
    edit_fails(n, &f, "vdnn-plan 3", "vdnn-plan 4", VDNN_EFORMAT, "plan.txt:2: ", "version '4'");
    load_fails(n, &f, "", VDNN_EFORMAT, "plan.txt:1: ", "the file ends");
    load_fails(n, &f, "[net]\nbatch = 16\n", VDNN_EFORMAT, "plan.txt:1: ", "not a vdnn plan");
    edit_fails(n, &f, "micro_batch 0", "micro_batch zero", VDNN_EFORMAT, "plan.txt:5: ", "'zero'");
    edit_fails(n, &f, "prefetch next", "prefetch soon", VDNN_EFORMAT, "plan.txt:6: ", "far, next or on-demand");
    edit_fails(n, &f, "release_lag 0", "release_lag -1", VDNN_EFORMAT, "plan.txt:7: ", "release_lag");
    edit_fails(n, &f, "release_lag 0\n", "", VDNN_EFORMAT, "plan.txt:7: ", "expected 'release_lag VALUE'");
    edit_fails(n, &f, "in_place 2", "in_place 3", VDNN_EFORMAT, "plan.txt:8: ", "in_place must be an integer in 0..2");
    edit_fails(n, &f, "in_place 2\n", "", VDNN_EFORMAT, "plan.txt:8: ", "expected 'in_place VALUE'");
    edit_fails(n, &f, "origin dyn", "origin dyn vdnn", VDNN_EFORMAT, "plan.txt:9: ", "'origin' takes one value");
    edit_fails(n, &f, "predicted_ms 12.5", "predicted_ms nan", VDNN_EFORMAT, "plan.txt:10: ", "'nan'");
    edit_fails(n, &f, "peak_bytes 1234567", "peak_bytes -5", VDNN_EFORMAT, "plan.txt:11: ", "byte count");
    edit_fails(n, &f, "measured_ms 15", "measured_ms -3", VDNN_EFORMAT, "plan.txt:12: ", "measured_ms");
    char *more = malloc(strlen(f.text) + 32);
    strcpy(more, f.text);
    strcat(more, "\n# fine\nconv9 keep 0 a b c\n");
    load_fails(n, &f, more, VDNN_EFORMAT, "plan.txt:26: ", "unexpected 'conv9' after the last layer");
    free(more);
    char missing[300];
    tn_join(missing, sizeof missing, f.dir, "none.txt");
    plan p;
    ck_assert_int_eq(plan_load(n, missing, &p), VDNN_EIO);
    tn_msg_has("none.txt", "cannot open");
    planfile_free(&f);
    net_free(n);
}
END_TEST

/* `--plan /dev/zero` hung: devices and folders are refused at once; a pipe is read up
 * to the size limit; a file over it is refused unread (issue 16). */
START_TEST(test_load_not_a_file)
{
    net *n = tn_parse(PF_NET, NULL);
    plan p;
    ck_assert_int_eq(plan_load(n, "/dev/zero", &p), VDNN_EIO);
    tn_msg_has("/dev/zero: is a character device, not a plan", NULL);
    ck_assert_int_eq(plan_load(n, "/tmp", &p), VDNN_EIO);
    tn_msg_has("/tmp: is a folder, not a plan", NULL);
    planfile f = saved_plan(n);
    FILE *w = fopen(f.path, "w");
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(ftruncate(fileno(w), (off_t)1 << 30), 0);   /* sparse, 1 GiB of NULs */
    fclose(w);
    ck_assert_int_eq(plan_load(n, f.path, &p), VDNN_EFORMAT);
    tn_msg_has("(1073741824 bytes) is over the 64.00 MiB (67108864 bytes) limit for a plan", NULL);
    /* an endless pipe stops at the limit */
    char fifo[600];
    tn_join(fifo, sizeof fifo, f.dir, "endless");
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    pid_t pid = fork();
    if (pid == 0) {
        /* a reader that saw the pipe empty and closed it leaves this writer without one:
         * it opens the pipe again rather than dying of SIGPIPE */
        signal(SIGPIPE, SIG_IGN);
        static char line[4096];
        memset(line, '#', sizeof line - 1);
        line[sizeof line - 2] = '\n';
        for (;;) {
            FILE *o = fopen(fifo, "w");
            while (o && fputs(line, o) >= 0) {}
            if (o) fclose(o);
        }
    }
    /* before the writer opens it, the pipe reads as an empty file */
    for (int tries = 0; tries < 500; tries++) {
        ck_assert_int_eq(plan_load(n, fifo, &p), VDNN_EFORMAT);
        if (strstr(vdnn_errmsg(), "limit for a plan")) break;
        usleep(10000);
    }
    tn_msg_has("at least 64.00 MiB", "limit for a plan");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    planfile_free(&f);
    net_free(n);
}
END_TEST

/* The profile cache file: devices are refused, and a layer count the file is too short
 * to hold is refused before room for it is allocated. */
START_TEST(test_profile_load_limits)
{
    profile pr;
    ck_assert_int_eq(profile_load("/dev/zero", &pr), VDNN_EIO);
    tn_msg_has("/dev/zero: is a character device, not a profile", NULL);
    char dir[256], path[300];
    tn_tmpdir(dir, sizeof dir, "profile");
    tn_join(path, sizeof path, dir, "p.txt");
    char text[300];
    snprintf(text, sizeof text,
             "vdnn-profile %d\ndevice cpu\nnet 0123456789abcdef\nbatch 4\nlayers 100000\n"
             "link 1e9 1e9 2e9 1e-5\nmeasure_s 0.5\nlayer 0 0\n0\n0\n0\n",
             PROFILE_VERSION);
    tn_write_text(path, text);
    ck_assert_int_eq(profile_load(path, &pr), VDNN_EFORMAT);
    tn_msg_has(path, ":5: malformed profile (layers)");
    tn_rmtree(dir);
}
END_TEST

/* Every prefix of a good file is rejected, or is the whole plan (the last newline
 * dropped). Never a crash, never a half-read plan. */
START_TEST(test_load_truncated)
{
    net *n = tn_parse(PF_NET, NULL);
    planfile f = saved_plan_of(n, mixed_plan(n));
    plan want = mixed_plan(n);
    size_t full = strlen(f.text);
    for (size_t len = 0; len < full; len++) {
        tn_write(f.path, f.text, len);
        plan p;
        vdnn_status st = plan_load(n, f.path, &p);
        if (st == VDNN_OK) {
            ck_assert_msg(len + 1 >= full, "a prefix of %zu of %zu bytes loaded", len, full);
            plans_equal(&want, &p);
            plan_free(&p);
            continue;
        }
        ck_assert_msg(st == VDNN_EFORMAT || st == VDNN_EINVAL, "prefix %zu: status %d", len, st);
        ck_assert_msg(strstr(vdnn_errmsg(), "plan.txt:") != NULL, "prefix %zu: %s", len, vdnn_errmsg());
    }
    plan_free(&want);
    planfile_free(&f);
    net_free(n);
}
END_TEST

/* Random byte edits: whatever loads is a plan the net can run. */
START_TEST(test_load_fuzz)
{
    net *n = tn_parse(PF_NET, NULL);
    planfile f = saved_plan_of(n, mixed_plan(n));
    size_t full = strlen(f.text);
    char *text = malloc(full);
    uint64_t seed = 42;
    static const char bytes[] = {'\0', '\n', ' ', '#', '0', '1', '-', 'x', '\xff', '\r'};
    int loaded = 0;
    for (int it = 0; it < 3000; it++) {
        memcpy(text, f.text, full);
        int edits = 1 + (int)(rng_splitmix(&seed) % 3);
        for (int e = 0; e < edits; e++) {
            size_t at = rng_splitmix(&seed) % full;
            uint64_t r = rng_splitmix(&seed);
            text[at] = r & 1 ? bytes[(r >> 1) % sizeof bytes] : (char)(r >> 8);
        }
        tn_write(f.path, text, full);
        plan p;
        vdnn_status st = plan_load(n, f.path, &p);
        if (st != VDNN_OK) {
            ck_assert_msg(strstr(vdnn_errmsg(), "plan.txt:") != NULL, "%s", vdnn_errmsg());
            continue;
        }
        loaded++;
        ck_assert_msg(plan_apply(n, &p) == VDNN_OK, "a loaded plan does not apply: %s", vdnn_errmsg());
        plan_free(&p);
    }
    ck_assert_int_gt(loaded, 0);   /* edits inside comments, numbers, flags */
    free(text);
    planfile_free(&f);
    net_free(n);
}
END_TEST

/* ---- printing ---- */

START_TEST(test_print_table)
{
    net *n = tn_parse(PF_NET, NULL);
    plan p = busy_plan(n);
    profile pr = zero_profile(n);
    pr.layers[2].fwd_s[4] = 0.0025;
    pr.layers[2].bwd_data_s[4] = 0.001;
    pr.layers[2].bwd_filter_s[4] = 0.002;
    p.offload[3] = 0;
    char *out = printed(&p, n, &pr, 0);
    for (int i = 0; i < PF_LAYERS; i++) ck_assert_msg(strstr(out, n->layers[i]->name) != NULL, "%s", out);
    const char *words[] = {"im2col-batch", "im2col-chunk", "im2col-par", "convolutional", "offload", "keep",
                           "prefetch next", "release lag 0", "12.500 ms", "1.18 MiB", "15.000 ms", "1.20x",
                           "2.500", "3.000", "output map", "origin dyn", " map ", "(input)", "offloaded: 4 maps, 50.00 KiB",
                           "recomputed: 0 maps, 0 B", "swapped: 0 layers, 0 B of parameters"};
    for (size_t k = 0; k < sizeof words / sizeof *words; k++)
        ck_assert_msg(strstr(out, words[k]) != NULL, "'%s' missing in:\n%s", words[k], out);
    ck_assert_ptr_null(strstr(out, "default"));   /* one-algorithm layers show "-" */
    free(out);
    p.predicted_s = p.measured_s = -1;
    out = printed(&p, n, NULL, 0);
    ck_assert_ptr_nonnull(strstr(out, "not simulated"));
    ck_assert_ptr_null(strstr(out, "measured"));
    ck_assert_ptr_null(strstr(out, "fwd ms"));
    ck_assert_ptr_null(strstr(out, "+swap"));
    ck_assert_ptr_null(strstr(out, "micro-batches"));
    free(out);
    free(pr.layers);
    plan_free(&p);
    net_free(n);
}
END_TEST

/* The table's line that starts with layer `name`, into buf. Not inlined: GCC then
 * takes `out` for printed()'s local and warns of a dangling pointer. */
__attribute__((noinline)) static const char *row_of(const char *out, const char *name, char *buf, size_t len)
{
    const char *at = strstr(out, name);
    ck_assert_msg(at != NULL, "%s missing in:\n%s", name, out);
    size_t n = strcspn(at, "\n");
    ck_assert(n < len);
    memcpy(buf, at, n);
    buf[n] = 0;
    return buf;
}

/* Each row's map decision and swap; the footer counts them; the split is said. */
START_TEST(test_print_table_recompute_swap)
{
    net_overrides ov = net_no_overrides();
    ov.micro_batch = 4;
    net *n = tn_parse(PF_NET, &ov);
    plan p = mixed_plan(n);
    p.offload[5] = MAP_KEEP;
    char *out = printed(&p, n, NULL, 0), row[256];
    static const char *const rows[][2] = {{"(input)", " offload "},    {"conv1 ", " swap "},
                                          {"relu2 ", " recompute "},   {"conv3 ", "offload+swap"},
                                          {"bn4 ", " - "},             {"relu5 ", " keep "},
                                          {"maxpool6 ", " recompute "}, {"fc7 ", " swap "},
                                          {"softmax8 ", " - "}};
    for (size_t k = 0; k < sizeof rows / sizeof *rows; k++)
        ck_assert_msg(strstr(row_of(out, rows[k][0], row, sizeof row), rows[k][1]) != NULL, "'%s' lacks '%s':\n%s",
                      row, rows[k][1], out);
    const char *words[] = {"offloaded: 2 maps", "recomputed: 2 maps", "swapped: 3 layers",
                           "micro-batches: 4 items each, 4 per batch of 16", "batch 16"};
    for (size_t k = 0; k < sizeof words / sizeof *words; k++)
        ck_assert_msg(strstr(out, words[k]) != NULL, "'%s' missing in:\n%s", words[k], out);
    free(out);
    /* a swapped layer whose output map is kept */
    p.offload[3] = MAP_KEEP;
    out = printed(&p, n, NULL, 0);
    ck_assert_msg(strstr(row_of(out, "conv3 ", row, sizeof row), "keep+swap") != NULL, "%s", out);
    free(out);
    plan_free(&p);
    net_free(n);
}
END_TEST

START_TEST(test_print_json)
{
    net *n = tn_parse(PF_NET, NULL);
    plan p = busy_plan(n);
    profile pr = zero_profile(n);
    pr.layers[2].fwd_s[4] = 0.0025;
    char *out = printed(&p, n, &pr, 1);
    json_t *j = tj_parse(out, "plan_print_json");
    ck_assert_int_eq(json_array_size(tj_get(j, "layers")), PF_LAYERS);
    for (int i = 0; i < PF_LAYERS; i++) {
        char key[64];
        snprintf(key, sizeof key, "layers.%d.name", i);
        ck_assert_str_eq(tj_str(j, key), n->layers[i]->name);
    }
    ck_assert_str_eq(tj_str(j, "origin"), "dyn");
    ck_assert_int_eq(tj_int(j, "batch"), 16);
    ck_assert_int_eq(tj_int(j, "micro_batch"), 0);
    ck_assert_str_eq(tj_str(j, "prefetch"), "next");
    ck_assert_int_eq(tj_int(j, "release_lag"), 0);
    ck_assert(tj_num(j, "predicted_ms") == 12.5 && tj_num(j, "measured_ms") == 15);
    ck_assert_int_eq(tj_int(j, "peak_bytes"), 1234567);
    ck_assert_str_eq(tj_str(j, "layers.0.algo.fwd"), "im2col");
    ck_assert_str_eq(tj_str(j, "layers.0.algo.bwd_data"), "im2col-batch");
    ck_assert_str_eq(tj_str(j, "layers.0.algo.bwd_filter"), "im2col-chunk");
    /* relu2's output is read by a backward and offloaded; conv1's is read by none */
    ck_assert(json_is_true(tj_get(j, "layers.1.offload")) && json_is_null(tj_get(j, "layers.0.offload")));
    ck_assert_str_eq(tj_str(j, "layers.1.map"), "offload");
    ck_assert_str_eq(tj_str(j, "layers.0.map"), "-");
    ck_assert(json_is_false(tj_get(j, "layers.0.swap")));
    ck_assert(tj_num(j, "layers.2.fwd_ms") == 2.5);
    ck_assert_int_ge(tj_int(j, "layers.2.workspace_bytes"), 0);
    json_decref(j);
    free(out);
    /* unknown numbers are null; odd characters in the origin are escaped */
    p.predicted_s = p.measured_s = -1;
    p.offload[0] = 0;
    snprintf(p.origin, sizeof p.origin, "a\"b\\c\td\xff");
    out = printed(&p, n, NULL, 1);
    j = tj_parse(out, "plan_print_json");
    static const char *const nulls[] = {"predicted_ms", "measured_ms", "layers.0.fwd_ms", "layers.0.bwd_ms"};
    for (size_t k = 0; k < sizeof nulls / sizeof *nulls; k++)
        ck_assert_msg(json_is_null(tj_get(j, nulls[k])), "%s is not null:\n%s", nulls[k], out);
    ck_assert(json_is_false(tj_get(j, "data.offload")));
    ck_assert_str_eq(tj_str(j, "data.map"), "keep");
    ck_assert_str_eq(tj_str(j, "origin"), "a\"b\\c\td\xef\xbf\xbd");
    for (int i = 0; i < PF_LAYERS; i++) {
        char key[64];
        snprintf(key, sizeof key, "layers.%d.swap", i);
        ck_assert(json_is_false(tj_get(j, key)));
    }
    json_decref(j);
    free(out);
    plan_free(&p);
    /* recomputed maps are not offloaded; swapped layers say so; the split is given */
    net_overrides ov = net_no_overrides();
    ov.micro_batch = 4;
    net *m = tn_parse(PF_NET, &ov);
    p = mixed_plan(m);
    out = printed(&p, m, NULL, 1);
    j = tj_parse(out, "plan_print_json");
    ck_assert_int_eq(tj_int(j, "batch"), 16);
    ck_assert_int_eq(tj_int(j, "micro_batch"), 4);
    /* per layer: offload (the map leaves by copy: null where it cannot), map, swap */
    static const struct { const char *offload, *map; int swap; } want[PF_LAYERS] = {
        {"null", "-", 1},         {"false", "recompute", 0}, {"true", "offload", 1}, {"null", "-", 0},
        {"false", "recompute", 0}, {"false", "recompute", 0}, {"null", "-", 1},      {"null", "-", 0}};
    for (int i = 0; i < PF_LAYERS; i++) {
        json_t *l = json_array_get(tj_get(j, "layers"), (size_t)i);
        char *offload = json_dumps(tj_get(l, "offload"), JSON_ENCODE_ANY);
        ck_assert_msg(!strcmp(offload, want[i].offload), "layer %d: offload %s", i, offload);
        free(offload);
        ck_assert_str_eq(tj_str(l, "name"), m->layers[i]->name);
        ck_assert_str_eq(tj_str(l, "type"), m->layers[i]->ops->type);
        ck_assert_str_eq(tj_str(l, "inputs.0"), net_map_name(m, i));
        ck_assert_int_eq(tj_int(l, "output_bytes"), (long long)shape_bytes(m->layers[i]->out));
        ck_assert_str_eq(tj_str(l, "map"), want[i].map);
        ck_assert_int_eq(json_is_true(tj_get(l, "swap")), want[i].swap);
        ck_assert_str_eq(tj_str(l, "update"), want[i].swap ? "host" : "device");
    }
    ck_assert_int_eq(tj_int(j, "data.bytes"), (long long)shape_bytes(m->input));
    ck_assert(json_is_true(tj_get(j, "data.offload")));
    ck_assert_str_eq(tj_str(j, "data.map"), "offload");
    json_decref(j);
    free(out);
    net_free(m);
    free(pr.layers);
    plan_free(&p);
    net_free(n);
}
END_TEST

static Suite *planfile_suite(void)
{
    Suite *s = suite_create("planfile");
    TCase *make = tcase_create("making");
    tcase_add_test(make, test_init_defaults_and_copy);
    tcase_add_test(make, test_policy_offload);
    tcase_add_test(make, test_policy_overrides_win);
    tcase_add_test(make, test_policy_mem_smallest_workspace);
    tcase_add_test(make, test_policy_perf_from_profile);
    suite_add_tcase(s, make);

    TCase *apply = tcase_create("apply");
    tcase_add_test(apply, test_from_net_apply_attached);
    tcase_add_test(apply, test_from_net_unattached);
    tcase_add_test(apply, test_apply_other_net);
    tcase_add_test(apply, test_apply_swap_attached);
    tcase_add_test(apply, test_apply_bad_maps_and_swaps);
    tcase_add_test(apply, test_apply_from_last);
    suite_add_tcase(s, apply);

    TCase *file = tcase_create("file");
    tcase_set_timeout(file, 60);
    tcase_add_test(file, test_save_load_round_trip);
    tcase_add_test(file, test_save_load_recompute_swap);
    tcase_add_test(file, test_load_wrong_layer_count);
    tcase_add_test(file, test_load_wrong_layer_name);
    tcase_add_test(file, test_load_unknown_algorithm);
    tcase_add_test(file, test_load_bad_map);
    tcase_add_test(file, test_load_bad_swap);
    tcase_add_test(file, test_load_in_place);
    tcase_add_test(file, test_load_wrong_batch);
    tcase_add_test(file, test_load_version1);
    tcase_add_test(file, test_load_bad_header);
    tcase_add_test(file, test_load_not_a_file);
    tcase_add_test(file, test_profile_load_limits);
    tcase_add_test(file, test_load_truncated);
    tcase_add_test(file, test_load_fuzz);
    suite_add_tcase(s, file);

    TCase *print = tcase_create("print");
    tcase_add_test(print, test_print_table);
    tcase_add_test(print, test_print_table_recompute_swap);
    tcase_add_test(print, test_print_json);
    suite_add_tcase(s, print);
    return s;
}

int main(void) { return tn_run_suite(planfile_suite()); }
