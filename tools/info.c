/* `vdnn info`: per layer shapes, parameter bytes, feature-map bytes and the workspace
 * of every convolution algorithm; totals. Text or JSON. */
#include "tools/commands.h"

#include "nets/planner/planner.h"
#include "vdnn/json.h"

#include <stdio.h>
#include <string.h>

/* Trainable parameter elements (weights, biases, batch norm's scale and shift), as
 * papers count them; running statistics are state, not parameters. */
static size_t trainable_count(const layer *l)
{
    size_t count = 0;
    for (int k = 0; k < l->nparams; k++)
        if (l->params[k].trainable) count += shape_count(l->params[k].shape);
    return count;
}

/* A layer of `info --json`: shapes, bytes, and each pass's workspace per algorithm. */
static json_t *json_layer(const net *n, const layer *l)
{
    json_t *inputs = json_array(), *ws = json_object();
    for (int k = 0; inputs && k < l->ninputs; k++)
        json_array_append_new(inputs, vdnn_json_text(net_map_name(n, l->input[k])));
    static const char *passes[] = {"forward", "backward_data", "backward_filter"};
    for (int p = 0; ws && p < PASS_COUNT && l->ops->algo_count; p++) {
        json_t *algos = json_object();
        for (int a = 0; algos && a < layer_algo_count(l, p); a++)
            json_object_set_new(algos, layer_algo_name(l, p, a),
                                json_integer((json_int_t)layer_workspace_bytes(l, p, a)));
        json_object_set_new(ws, passes[p], algos);
    }
    return json_pack("{s:i, s:o, s:o, s:o, s:[iiii], s:I, s:I, s:I, s:i, s:i, s:o}", "index", l->index, "name",
                     vdnn_json_text(l->name), "type", vdnn_json_text(l->ops->type), "inputs", inputs, "output",
                     l->out.n, l->out.c, l->out.h, l->out.w, "params", (json_int_t)trainable_count(l), "param_bytes",
                     (json_int_t)layer_param_bytes(l), "output_bytes", (json_int_t)shape_bytes(l->out), "needs_input",
                     l->needs_input, "needs_output", l->needs_output, "workspace_bytes", ws);
}

static void text_layer(FILE *f, const net *n, const layer *l)
{
    char desc[64] = "", pb[32], ob[32], shape[40];
    if (l->ops->describe) l->ops->describe(l, desc, sizeof desc);
    snprintf(shape, sizeof shape, "%dx%dx%dx%d", l->out.n, l->out.c, l->out.h, l->out.w);
    fprintf(f, "%3d  %-10s %-13s %-22s %-17s %12s %12s\n", l->index, l->name, l->ops->type, desc, shape,
            vdnn_fmt_bytes(layer_param_bytes(l), pb, sizeof pb), vdnn_fmt_bytes(shape_bytes(l->out), ob, sizeof ob));
    /* a graph: what each layer reads, where it is not simply the layer above */
    if (l->ninputs > 1 || l->input[0] != l->index) {
        fprintf(f, "       reads");
        for (int k = 0; k < l->ninputs; k++) fprintf(f, "%s %s", k ? "," : "", net_map_name(n, l->input[k]));
        fprintf(f, "\n");
    }
    static const char *passes[] = {"fwd", "bwd-data", "bwd-filter"};
    for (int p = 0; p < PASS_COUNT && l->ops->algo_count; p++) {
        fprintf(f, "       workspace %-10s", passes[p]);
        for (int a = 0; a < layer_algo_count(l, p); a++)
            fprintf(f, "  %s %s", layer_algo_name(l, p, a), vdnn_fmt_bytes(layer_workspace_bytes(l, p, a), pb, sizeof pb));
        fprintf(f, "\n");
    }
}

/* The largest, over convolution passes, of the smallest workspace an algorithm of that
 * pass needs: what memory-optimal algorithms need at most at once. */
static size_t min_workspace(const net *n)
{
    size_t m = 0;
    for (int i = 0; i < n->nlayers; i++)
        for (int p = 0; p < PASS_COUNT; p++) {
            const layer *l = n->layers[i];
            size_t best = layer_workspace_bytes(l, p, 0);
            for (int a = 1; a < layer_algo_count(l, p); a++)
                if (layer_workspace_bytes(l, p, a) < best) best = layer_workspace_bytes(l, p, a);
            if (best > m) m = best;
        }
    return m;
}

/* vDNN's baseline, the network-wide allocation (Caffe's): every feature map of the net
 * and the gradient of every map backward computes one for, allocated for the whole run;
 * an in-place layer's output is its input's storage, and its gradient its output's
 * (net_in_place), so the two count once. */
static void network_wide_maps(const net *n, size_t *maps, size_t *grads)
{
    *maps = shape_bytes(n->input);
    *grads = 0;
    for (int i = 0; i < n->nlayers; i++) {
        const layer *l = n->layers[i];
        int shared = n->may_in_place && l->ops->in_place && l->ninputs == 1 && l->input[0] > 0 &&
                     n->graph[l->input[0]].last_fwd == i;
        if (!net_in_place(n, i)) *maps += shape_bytes(l->out);
        if (n->graph[i + 1].grad && !l->is_loss && !shared) *grads += shape_bytes(l->out);
    }
}

/* The slab of a device that `info` binds layers to; it runs nothing. */
#define INFO_DEVICE_BYTES ((size_t)64 << 20)

static vdnn_status bind_all(net *n, device *d)
{
    vdnn_status st = VDNN_OK;
    for (int i = 0; i < n->nlayers && st == VDNN_OK; i++) st = layer_bind(n->layers[i], d);
    return st;
}

enum { MICROS = 4 };

/* What `vdnn info` shows of a net beside its layers. */
typedef struct info_figures {
    size_t mins[POLICY_COUNT][ALGO_MODE_COUNT];   /* every fixed policy's minimum budget */
    int micro[MICROS];                             /* batch/2, /4, ... (0: none) */
    size_t micro_least[MICROS];                    /* the least budget of any policy at each */
    size_t dyn_least;                              /* the planner's least plan */
    size_t maps, params, ws, bound, count;
    size_t network_wide, network_wide_mem;         /* vDNN's baseline, perf and mem algorithms */
    int measured;                                  /* a cached profile gave perf's algorithms */
    char when[128];                                /* when it was measured */
    double step_s[POLICY_COUNT][ALGO_MODE_COUNT];  /* its predicted step per policy (measured only) */
} info_figures;

/* The least budget of every policy when the batch is split in 2, 4, ... */
static vdnn_status micro_figures(net *n, device *d, info_figures *f)
{
    for (int k = 0, m = n->minibatch / 2; k < MICROS && m >= 1; k++, m /= 2) {
        net *c = NULL;
        size_t t[POLICY_COUNT][ALGO_MODE_COUNT];
        vdnn_status st = net_clone_micro(n, m, &c);
        if (st == VDNN_OK && d) st = bind_all(c, d);
        if (st == VDNN_OK) st = net_plan(c, c->policy, ALGO_PERF);
        if (st == VDNN_OK) st = net_budget_table(c, t);
        net_free(c);
        if (st != VDNN_OK) return st;
        f->micro[k] = m;
        f->micro_least[k] = t[0][0];
        for (int p = 0; p < POLICY_COUNT; p++)
            for (int a = 0; a < ALGO_MODE_COUNT; a++)
                if (t[p][a] < f->micro_least[k]) f->micro_least[k] = t[p][a];
    }
    return VDNN_OK;
}

/* With the profile a train run on d measured (when the cache holds it): perf's
 * algorithms are the measured fastest, as train --algo perf picks them, and every policy
 * gets its predicted step with unlimited memory. */
static vdnn_status use_profile(net *n, device *d, const char *cache, info_figures *f)
{
    const device_options *o = device_get_options(d);
    profile pr = {0};
    f->measured = profile_find(n, d, o->link_gbps, o->threads, cache, &pr);
    if (!f->measured) return VDNN_OK;
    profile_describe(&pr, f->when, sizeof f->when);
    net_take_profile_algos(n, &pr);
    vdnn_status st = VDNN_OK;
    for (int p = 0; p < POLICY_COUNT && st == VDNN_OK; p++)
        for (int a = 0; a < ALGO_MODE_COUNT && st == VDNN_OK; a++) {
            plan pl = {0};
            st = plan_fit_policy(n, &pr, 0, (mem_policy)p, (algo_mode)a, &pl);
            f->step_s[p][a] = pl.predicted_s;
            plan_free(&pl);
        }
    profile_free(&pr);
    return st;
}

static vdnn_status gather(net *n, device *d, const char *cache, info_figures *f)
{
    memset(f, 0, sizeof *f);
    vdnn_status st = net_plan(n, n->policy, ALGO_PERF);
    if (st == VDNN_OK && d) st = use_profile(n, d, cache, f);
    if (st == VDNN_OK) st = net_budget_table(n, f->mins);
    if (st == VDNN_OK) st = micro_figures(n, d, f);
    if (st == VDNN_OK) st = plan_least(n, &f->dyn_least);
    if (st != VDNN_OK) return st;
    size_t kept = 0, grads = 0;
    f->maps = shape_bytes(n->input);
    for (int i = 0; i < n->nlayers; i++) f->maps += shape_bytes(n->layers[i]->out);
    network_wide_maps(n, &kept, &grads);
    f->params = net_param_bytes(n);
    f->ws = net_max_workspace_bytes(n);
    f->bound = net_train_bytes_bound(n);
    for (int i = 0; i < n->nlayers; i++) f->count += trainable_count(n->layers[i]);
    f->network_wide = f->params + kept + grads + f->ws;
    f->network_wide_mem = f->params + kept + grads + min_workspace(n);
    return VDNN_OK;
}

/* `info --json`: one JSON object, indented (docs/cli.md). */
static void print_json(const char *cfg, const net *n, device *d, const info_figures *f)
{
    json_t *layers = json_array(), *mins = json_object(), *micro = json_object();
    for (int i = 0; layers && i < n->nlayers; i++) json_array_append_new(layers, json_layer(n, n->layers[i]));
    for (int p = 0; mins && p < POLICY_COUNT; p++) {
        json_t *modes = json_pack("{s:I, s:I}", "perf", (json_int_t)f->mins[p][ALGO_PERF], "mem",
                                  (json_int_t)f->mins[p][ALGO_MEM]);
        json_object_set_new(mins, policy_name((mem_policy)p), modes);
    }
    for (int k = 0; micro && k < MICROS && f->micro[k]; k++) {
        char key[16];
        snprintf(key, sizeof key, "%d", f->micro[k]);
        json_object_set_new(micro, key, json_integer((json_int_t)f->micro_least[k]));
    }
    json_t *steps = f->measured ? json_object() : json_null();
    for (int p = 0; f->measured && steps && p < POLICY_COUNT; p++)
        json_object_set_new(steps, policy_name((mem_policy)p),
                            json_pack("{s:o, s:o}", "perf", vdnn_json_fixed(1e3 * f->step_s[p][ALGO_PERF], 3), "mem",
                                      vdnn_json_fixed(1e3 * f->step_s[p][ALGO_MEM], 3)));
    vdnn_json_doc(stdout, json_pack("{s:o, s:o, s:[iiii], s:i, s:b, s:o, s:I, s:I, s:I, s:I, s:I, s:{s:I, s:I}, "
                                    "s:o, s:b, s:o, s:I, s:o}", "config", vdnn_json_text(cfg), "device",
                                    vdnn_json_text(d ? device_model(d) : "cpu"), "input", n->input.n, n->input.c,
                                    n->input.h, n->input.w, "classes", n->classes, "in_place", n->may_in_place != 0,
                                    "layers", layers, "params", (json_int_t)f->count, "param_bytes",
                                    (json_int_t)f->params, "feature_map_bytes", (json_int_t)f->maps,
                                    "max_workspace_bytes", (json_int_t)f->ws, "train_bytes_bound",
                                    (json_int_t)f->bound, "network_wide_bytes", "perf", (json_int_t)f->network_wide,
                                    "mem", (json_int_t)f->network_wide_mem, "min_budget_bytes", mins,
                                    "perf_measured", f->measured != 0, "predicted_step_ms", steps,
                                    "dyn_min_budget_bytes", (json_int_t)f->dyn_least, "micro_batch_min_budget_bytes",
                                    micro));
}

static void print_text(const char *cfg, const net *n, device *d, const info_figures *f)
{
    char a[32], b[32], c[32];
    size_t none = f->mins[POLICY_NONE][ALGO_PERF];
    printf("%s: input %dx%dx%dx%d, %d classes, %d layers; algorithms of %s; in-place layers %s\n", cfg,
           n->input.n, n->input.c, n->input.h, n->input.w, n->classes, n->nlayers,
           d ? device_model(d) : "the cpu", n->may_in_place ? "on" : "off");
    printf("%3s  %-10s %-13s %-22s %-17s %12s %12s\n", "#", "name", "type", "", "output", "params", "output map");
    for (int i = 0; i < n->nlayers; i++) text_layer(stdout, n, n->layers[i]);
    printf("totals: %.3f M parameters (%zu), params+grads+momenta %s, feature maps %s, largest workspace %s\n",
           (double)f->count / 1e6, f->count, vdnn_fmt_bytes(f->params, a, sizeof a),
           vdnn_fmt_bytes(f->maps, b, sizeof b), vdnn_fmt_bytes(f->ws, c, sizeof c));
    printf("minimum budget of one training iteration (exact, fragmentation included)%s:\n",
           f->measured ? " and the predicted step with that much" : "");
    printf("  %-9s %14s %14s   %s%s\n", "policy", "perf algos", "mem algos", "mem saved vs none/perf",
           f->measured ? "   step perf / mem" : "");
    for (int p = 0; p < POLICY_COUNT; p++) {
        printf("  %-9s %14s %14s   %5.1f%% %5.1f%%", policy_name((mem_policy)p),
               vdnn_fmt_bytes(f->mins[p][ALGO_PERF], a, sizeof a), vdnn_fmt_bytes(f->mins[p][ALGO_MEM], b, sizeof b),
               100.0 * (1 - (double)f->mins[p][ALGO_PERF] / none), 100.0 * (1 - (double)f->mins[p][ALGO_MEM] / none));
        if (f->measured) printf("   %8.1f / %.1f ms", 1e3 * f->step_s[p][ALGO_PERF], 1e3 * f->step_s[p][ALGO_MEM]);
        printf("\n");
    }
    printf("  %-9s %14s %14s          %5.1f%%   (the planner's smallest plan at this batch)\n", "dyn", "-",
           vdnn_fmt_bytes(f->dyn_least, b, sizeof b), 100.0 * (1 - (double)f->dyn_least / none));
    if (f->measured)
        printf("  (perf: the fastest algorithms, as train --algo perf picks them, from the profile\n"
               "   %s; mem: the smallest workspaces; train's refusals list the same)\n", f->when);
    else
        printf("  (perf: the largest-workspace algorithms, usually the most a plan needs: this net has no profile on %s yet;\n"
               "   a train run or `vdnn profile` measures one, then perf is what training picks, with predicted steps)\n",
               d ? device_model(d) : "this device");
    printf("least budget of any policy in micro-batches (--micro-batch N):");
    for (int k = 0; k < MICROS && f->micro[k]; k++)
        printf("%s %d: %s", k ? "," : "", f->micro[k], vdnn_fmt_bytes(f->micro_least[k], a, sizeof a));
    printf("\n");
    printf("network-wide allocation (vDNN's baseline: every map and gradient kept, in-place layers sharing theirs): "
           "perf %s, mem %s\n",
           vdnn_fmt_bytes(f->network_wide, a, sizeof a), vdnn_fmt_bytes(f->network_wide_mem, b, sizeof b));
}

int cmd_info(int argc, char **argv)
{
    long long batch = -1, threads = 0;
    double link_gbps = 0;
    int json = 0;
    const char *cfg = NULL, *dev_name = "auto", *cache = NULL;
    arg_spec specs[] = {
        {"--batch", ARG_INT, &batch, 1, 65536, "override [net] batch", 0},
        {"--json", ARG_FLAG, &json, 0, 0, "JSON output", 0},
        {"--device", ARG_STRING, &dev_name, 0, 0, "the device whose algorithms to show (default: train's, auto)", 0},
        {"--threads", ARG_INT, &threads, 1, 1024, "as train's: the profile measured with them", 0},
        {"--link-gbps", ARG_FLOAT, &link_gbps, 0.001, 1e4, "as train's: the profile measured with it", 0},
        {"--profile-cache", ARG_STRING, &cache, 0, 0, "where measured profiles are kept", 0},
        {"--math", ARG_STRING, &cli_math, 0, 0, HELP_MATH, 0},
        {"--nondeterministic", ARG_FLAG, &cli_nondeterministic, 0, 0, HELP_NONDETERMINISTIC, 0},
        {"--in-place", ARG_STRING, &cli_in_place, 0, 0, "on: layers run in place where they may (default); off: never", 0},
        {NULL, 0, NULL, 0, 0, NULL, 0},
    };
    if (args_parse(argc, argv, 2, specs, &cfg, 1, "vdnn info CFG [--batch N] [--json] [--device D] [--in-place on|off]") != VDNN_OK)
        return cli_error();
    net_overrides ov;
    if (cli_overrides(&ov) != VDNN_OK) return cli_error();
    ov.batch = (int)batch;
    net *n;
    if (net_load(cfg, &ov, &n) != VDNN_OK) return cli_error();
    /* The device train would run on, with its algorithms and workspaces (cuDNN's on a
     * GPU): the layers are bound to it, which allocates nothing; the figures then are that
     * device's, and its cached profile, if any, gives the measured ones. */
    device *d = NULL;
    vdnn_status st = cli_device(dev_name, INFO_DEVICE_BYTES, threads, link_gbps, n, &d);
    if (st == VDNN_OK) st = bind_all(n, d);
    info_figures f;
    if (st == VDNN_OK) st = gather(n, d, cache, &f);
    if (st == VDNN_OK && json) print_json(cfg, n, d, &f);
    else if (st == VDNN_OK) print_text(cfg, n, d, &f);
    net_free(n);
    device_destroy(d);
    return st == VDNN_OK ? 0 : cli_error();
}
