/* A plan printed for people (plan_print: a table) and programs (plan_print_json). */
#include <stdio.h>
#include <string.h>

#include "nets/planner/plan_impl.h"
#include "vdnn/json.h"

/* ---- printing ------------------------------------------------------------------------------ */

/* Layer i's times for the plan's algorithms, or 0 when pr has none for it. */
static int layer_ms(const plan *p, const profile *pr, int i, double *fwd_ms, double *bwd_ms)
{
    if (!pr || pr->nlayers != p->nlayers || !pr->layers) return 0;
    const int *a = p->algo[i];
    for (int pass = 0; pass < PASS_COUNT; pass++)
        if (a[pass] < 0 || a[pass] >= PLAN_MAX_ALGOS) return 0;
    const layer_cost *c = &pr->layers[i];
    *fwd_ms = c->fwd_s[a[PASS_FWD]] * 1e3;
    *bwd_ms = (c->bwd_data_s[a[PASS_BWD_DATA]] + c->bwd_filter_s[a[PASS_BWD_FILTER]]) * 1e3;
    return 1;
}

/* Printing takes any plan, checked or not: an algorithm the layer lacks shows as "?". */
static const char *algo_name(const layer *l, int pass, int a)
{
    return a >= 0 && a < layer_algo_count(l, pass) ? layer_algo_name(l, pass, a) : "?";
}

static size_t fwd_workspace(const layer *l, int a)
{
    return a >= 0 && a < layer_algo_count(l, PASS_FWD) ? layer_workspace_bytes(l, PASS_FWD, a) : 0;
}

static int has_choice(const layer *l)
{
    for (int pass = 0; pass < PASS_COUNT; pass++)
        if (layer_algo_count(l, pass) > 1) return 1;
    return 0;
}

/* The decision of map x[j], with the swap of the layer that writes it. */
static const char *offload_word(const plan *p, const net *n, int j)
{
    int swap = j ? p->swap[j - 1] : 0;
    if (swap > SWAP_DEVICE) swap = 0;
    if (!plan_offloadable(n, j)) return swap == SWAP_HOST ? "swap" : swap == SWAP_DEVICE ? "swapD" : "-";
    if (p->offload[j] > MAP_RECOMPUTE) return "?";
    static const char *const words[3][3] = {{"keep", "offload", "recompute"},
                                            {"keep+swap", "offload+swap", "recomp+swap"},
                                            {"keep+swapD", "offload+swapD", "recomp+swapD"}};
    return words[swap][p->offload[j]];
}

static size_t map_size(const net *n, int j)
{
    return shape_bytes(j ? n->layers[j - 1]->out : n->input);
}

static void print_row(FILE *f, const plan *p, const net *n, const profile *pr, int i)
{
    const layer *l = n->layers[i];
    char out[32], ws[32];
    int choice = has_choice(l);
    const char *name[PASS_COUNT];
    for (int pass = 0; pass < PASS_COUNT; pass++)
        name[pass] = choice ? algo_name(l, pass, p->algo[i][pass]) : "-";
    size_t wsb = fwd_workspace(l, p->algo[i][PASS_FWD]);
    fprintf(f, "%4d  %-14s %-14s %11s  %-13s %-13s %-13s %-15s %11s", i, l->name, l->ops->type,
            vdnn_fmt_bytes(shape_bytes(l->out), out, sizeof out), offload_word(p, n, i + 1), name[0], name[1], name[2],
            wsb ? vdnn_fmt_bytes(wsb, ws, sizeof ws) : "-");
    double fms, bms;
    if (layer_ms(p, pr, i, &fms, &bms)) fprintf(f, " %9.3f %9.3f", fms, bms);
    fputc('\n', f);
}

static void print_footer(FILE *f, const plan *p, const net *n)
{
    size_t bytes[3] = {0, 0, 0}, swapped = 0;
    int maps[3] = {0, 0, 0}, layers = 0;
    for (int j = 0; j <= n->nlayers; j++)
        if (p->offload[j] <= MAP_RECOMPUTE) bytes[p->offload[j]] += map_size(n, j), maps[p->offload[j]]++;
    for (int i = 0; i < n->nlayers; i++)
        if (p->swap[i]) swapped += layer_param_bytes(n->layers[i]), layers++;
    char b1[32], b2[32], b3[32];
    fprintf(f, "offloaded: %d maps, %s; recomputed: %d maps, %s; swapped: %d layers, %s of parameters\n",
            maps[MAP_OFFLOAD], vdnn_fmt_bytes(bytes[MAP_OFFLOAD], b1, sizeof b1), maps[MAP_RECOMPUTE],
            vdnn_fmt_bytes(bytes[MAP_RECOMPUTE], b2, sizeof b2), layers, vdnn_fmt_bytes(swapped, b3, sizeof b3));
    if (p->micro) fprintf(f, "micro-batches: %d items each, %d per batch of %d\n", p->micro,
                          (p->batch + p->micro - 1) / p->micro, p->batch);
    fprintf(f, "copy timing: prefetch %s, release lag %d; in-place layers %s\n", plan_prefetch_name(p->prefetch_ahead),
            p->release_lag, plan_in_place_name(p->in_place));
    if (p->predicted_s >= 0)
        fprintf(f, "predicted: %.3f ms per iteration, peak %s (%zu bytes)\n", p->predicted_s * 1e3,
                vdnn_fmt_bytes(p->peak_bytes, b2, sizeof b2), p->peak_bytes);
    else
        fprintf(f, "predicted: not simulated\n");
    if (p->measured_s >= 0) {
        fprintf(f, "measured: %.3f ms per iteration", p->measured_s * 1e3);
        if (p->predicted_s > 0) fprintf(f, " (%.2fx the prediction)", p->measured_s / p->predicted_s);
        fputc('\n', f);
    }
}

void plan_print(FILE *f, const plan *p, const net *n, const profile *pr)
{
    if (p->nlayers != n->nlayers || !p->offload || !p->algo) {
        fprintf(f, "plan: %d layers, the net has %d: not this net's plan\n", p->nlayers, n->nlayers);
        return;
    }
    fprintf(f, "plan (origin %s, batch %d, %d layers)\n", p->origin[0] ? p->origin : "-", p->batch, p->nlayers);
    fprintf(f, "%4s  %-14s %-14s %11s  %-13s %-13s %-13s %-15s %11s", "#", "layer", "type", "output map",
            "map", "fwd", "bwd-data", "bwd-filter", "workspace");
    if (pr && pr->nlayers == p->nlayers) fprintf(f, " %9s %9s", "fwd ms", "bwd ms");
    fputc('\n', f);
    char in[32];
    fprintf(f, "%4s  %-14s %-14s %11s  %-13s\n", "-", "data", "(input)", vdnn_fmt_bytes(map_size(n, 0), in, sizeof in),
            offload_word(p, n, 0));
    for (int i = 0; i < n->nlayers; i++) print_row(f, p, n, pr, i);
    print_footer(f, p, n);
}

/* A time in ms to the nanosecond; null when unknown (negative) or not finite. */
static json_t *json_ms(double ms)
{
    return ms < 0 ? json_null() : vdnn_json_fixed(ms, 6);
}

/* "offload": true|false|null and "map": "keep|offload|recompute|-" of map x[j], into o. */
static void json_map(json_t *o, const plan *p, const net *n, int j)
{
    if (!o) return;
    int can = plan_offloadable(n, j);
    json_object_set_new(o, "offload", !can ? json_null() : json_boolean(p->offload[j] == MAP_OFFLOAD));
    const char *word = !can || p->offload[j] > MAP_RECOMPUTE ? "-" : plan_map_words[p->offload[j]];
    json_object_set_new(o, "map", json_string(word));
}

static json_t *json_layer(const plan *p, const net *n, const profile *pr, int i)
{
    const layer *l = n->layers[i];
    json_t *inputs = json_array(), *algo = json_object();
    for (int k = 0; inputs && k < l->ninputs; k++)
        json_array_append_new(inputs, vdnn_json_text(net_map_name(n, l->input[k])));
    static const char *const keys[PASS_COUNT] = {"fwd", "bwd_data", "bwd_filter"};
    for (int pass = 0; algo && pass < PASS_COUNT; pass++)
        json_object_set_new(algo, keys[pass], vdnn_json_text(algo_name(l, pass, p->algo[i][pass])));
    double fms = -1, bms = -1;
    layer_ms(p, pr, i, &fms, &bms);
    json_t *o = json_pack("{s:i, s:o, s:o, s:o, s:I}", "index", i, "name", vdnn_json_text(l->name), "type",
                          vdnn_json_text(l->ops->type), "inputs", inputs, "output_bytes",
                          (json_int_t)shape_bytes(l->out));
    json_map(o, p, n, i + 1);
    json_t *rest = json_pack("{s:b, s:s, s:o, s:I, s:o, s:o}", "swap", p->swap[i] != 0, "update",
                             p->swap[i] == SWAP_HOST ? "host" : "device", "algo", algo, "workspace_bytes",
                             (json_int_t)fwd_workspace(l, p->algo[i][PASS_FWD]), "fwd_ms", json_ms(fms), "bwd_ms",
                             json_ms(bms));
    if (o) json_object_update(o, rest);
    json_decref(rest);
    return o;
}

json_t *plan_report_json(const plan_report *r)
{
    static const char *const kinds[] = {"plan", "none fits", "none faster"};
    json_t *sizes = json_array();
    for (int e = 0; sizes && e < r->nweighed; e++) {
        const int kind = r->weighed[e].kind;
        json_array_append_new(sizes, json_pack("{s:i, s:s, s:o}", "items", r->weighed[e].items, "outcome", kinds[kind],
                                               "ms", kind == PLAN_WEIGHED_NONE_FITS ? json_null()
                                                                                     : json_ms(r->weighed[e].s * 1e3)));
    }
    return json_pack("{s:b, s:o, s:o, s:o, s:o, s:I, s:o, s:o, s:o, s:o}", "profile_cached", r->profile_cached,
                     "profile_s", vdnn_json_real(r->profile_s, 4), "micro_batch_choice_s", vdnn_json_real(r->micro_s, 4),
                     "search_s", vdnn_json_real(r->search_s, 4), "verification_s", vdnn_json_real(r->verify_s, 4),
                     "simulations", (json_int_t)r->simulations, "stop", r->stop ? json_string(r->stop) : json_null(),
                     "sizes_weighed", sizes ? sizes : json_array(),
                     "whole_batch_floor_ms", r->whole_floor_s > 0 ? json_ms(r->whole_floor_s * 1e3) : json_null(),
                     "whole_batch_least_bytes", r->whole_least > 0 ? json_integer((json_int_t)r->whole_least) : json_null());
}

void plan_print_json(FILE *f, const plan *p, const net *n, const profile *pr, const plan_report *r)
{
    if (p->nlayers != n->nlayers || !p->offload || !p->algo) {
        char error[96];
        snprintf(error, sizeof error, "the plan has %d layers, the net has %d", p->nlayers, n->nlayers);
        vdnn_json_doc(f, json_pack("{s:s}", "error", error));
        return;
    }
    json_t *data = json_pack("{s:I}", "bytes", (json_int_t)map_size(n, 0)), *layers = json_array();
    json_map(data, p, n, 0);
    for (int i = 0; layers && i < n->nlayers; i++) json_array_append_new(layers, json_layer(p, n, pr, i));
    json_t *doc = json_pack("{s:o, s:i, s:i, s:s, s:i, s:i, s:o, s:I, s:o, s:o, s:o}", "origin",
                            vdnn_json_text(p->origin), "batch", p->batch, "micro_batch", p->micro, "prefetch",
                            plan_prefetch_name(p->prefetch_ahead), "release_lag", p->release_lag, "in_place", p->in_place,
                            "predicted_ms", json_ms(p->predicted_s * 1e3), "peak_bytes", (json_int_t)p->peak_bytes,
                            "measured_ms", json_ms(p->measured_s * 1e3), "data", data, "layers", layers);
    if (doc && r) json_object_set_new(doc, "planning", plan_report_json(r));
    vdnn_json_doc(f, doc);
}
