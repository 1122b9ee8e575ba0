/* Building a net from a config file: the [net], [train], [data] sections and the
 * layer chain, with every shape inferred and every value checked. */
#include "nets/net.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdnn/hash.h"

static const cfg_key net_keys[] = {
    {"batch", CFG_INT, 1, 1, 65536, NULL, 0, "items per mini-batch"},
    {"channels", CFG_INT, 1, 1, 4096, NULL, 0, "input channels"},
    {"height", CFG_INT, 1, 1, 16384, NULL, 0, "input height"},
    {"width", CFG_INT, 1, 1, 16384, NULL, 0, "input width"},
    {NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

static const cfg_key train_keys[] = {
    {"epochs", CFG_INT, 1, 1, 1000000, NULL, 0, "passes over the training set"},
    {"learning_rate", CFG_FLOAT, 1, 1e-12, 100, NULL, 0, "base learning rate"},
    {"momentum", CFG_FLOAT, 0, 0, 0.999999, NULL, 0, "SGD momentum (default 0)"},
    {"weight_decay", CFG_FLOAT, 0, 0, 1, NULL, 0, "L2 weight decay on weights (default 0)"},
    {"lr_schedule", CFG_ENUM, 0, 0, 0, "const|step|cosine", 0, "learning-rate schedule (default const)"},
    {"step_epochs", CFG_INT, 0, 1, 1000000, NULL, 0, "step: epochs between decays"},
    {"gamma", CFG_FLOAT, 0, 1e-9, 1, NULL, 0, "step: decay factor (default 0.1)"},
    {"min_lr", CFG_FLOAT, 0, 0, 100, NULL, 0, "cosine: final learning rate (default 0)"},
    {"seed", CFG_INT, 0, 0, 2147483647, NULL, 0, "seed of init, shuffle, dropout (default 1)"},
    {NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

static const cfg_key data_keys[] = {
    {"set", CFG_ENUM, 1, 0, 0, "fashion-mnist|mnist|cifar10|png|images|synthetic", 0, "data set kind"},
    {"path", CFG_STRING, 0, 0, 0, NULL, 0, "folder with the files (all but synthetic)"},
    {"train_list", CFG_STRING, 0, 0, 0, NULL, 0, "images: file of \"FILE LABEL\" lines, FILE relative to path (default: class folders path/train/<class>/)"},
    {"test_list", CFG_STRING, 0, 0, 0, NULL, 0, "images: the test split's list (with train_list)"},
    {"train_crop", CFG_ENUM, 0, 0, 0, "random-resized|centre", 0, "images: a training image's crop (default random-resized)"},
    {"scale", CFG_FLOATS, 0, 1e-6, 1, NULL, 2, "images: random-resized crop's area range, of the image's (default 0.08, 1)"},
    {"ratio", CFG_FLOATS, 0, 1e-3, 1e3, NULL, 2, "images: its aspect-ratio range, width / height (default 0.75, 1.333)"},
    {"resize", CFG_INT, 0, 1, 65535, NULL, 0, "images: shorter side before the centre crop (default max(height, width) * 8 / 7)"},
    {"workers", CFG_INT, 0, 1, 64, NULL, 0, "loader threads (default: 1 for sets in memory; images: the cores the compute leaves)"},
    {"strict", CFG_BOOL, 0, 0, 1, NULL, 0, "images: an unreadable file stops the run (default 0: skipped, counted, replaced)"},
    {"crop_pad", CFG_INT, 0, 0, 64, NULL, 0, "random crop after zero padding (default 0: off; not with images)"},
    {"flip", CFG_BOOL, 0, 0, 1, NULL, 0, "random horizontal flip (default 0)"},
    {"mean", CFG_FLOATS, 0, -1e6, 1e6, NULL, DATA_MAX_CHANNELS, "per-channel mean of [0,1] pixels"},
    {"std", CFG_FLOATS, 0, 1e-9, 1e6, NULL, DATA_MAX_CHANNELS, "per-channel std"},
    {"train_size", CFG_INT, 0, 1, 100000000, NULL, 0, "synthetic: training items"},
    {"test_size", CFG_INT, 0, 1, 100000000, NULL, 0, "synthetic: test items"},
    {"classes", CFG_INT, 0, 2, 1000000, NULL, 0, "synthetic: classes"},
    {NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

static const cfg_key no_keys[] = {{NULL, 0, 0, 0, 0, NULL, 0, NULL}};

net_overrides net_no_overrides(void)
{
    net_overrides o = {-1, 0, -1, 0, -1, NULL, -1};
    return o;
}

static const cfg_key memory_keys[] = {
    {"budget", CFG_BYTES, 0, 4096, 1e15, NULL, 0, "device-memory budget (K/M/G suffixes)"},
    {"policy", CFG_ENUM, 0, 0, 0, "none|all|conv|swap|recompute|dyn", 0, "which feature maps are offloaded (swap: and parameters; recompute: cheap maps recomputed); dyn: the planner chooses (default none)"},
    {"algo", CFG_ENUM, 0, 0, 0, "perf|mem", 0, "convolution algorithms: fastest or smallest workspace (default perf)"},
    {"sync", CFG_BOOL, 0, 0, 1, NULL, 0, "vDNN's per-layer barrier on both streams (default 0)"},
    {"micro_batch", CFG_INT, 0, 1, 65536, NULL, 0, "split each batch into micro-batches of this many items (default: no split)"},
    {"in_place", CFG_BOOL, 0, 0, 1, NULL, 0, "run relu, leaky, tanh, sigmoid, clip and dropout in place where nothing else reads their input (default 1)"},
    {NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

static int is_meta(const char *name)
{
    return !strcmp(name, "net") || !strcmp(name, "train") || !strcmp(name, "data") || !strcmp(name, "memory");
}

const char *policy_name(mem_policy p)
{
    static const char *names[] = {"none", "all", "conv", "swap", "recompute"};
    return p < POLICY_COUNT ? names[p] : "?";
}

const char *algo_mode_name(algo_mode a)
{
    return a == ALGO_MEM ? "mem" : "perf";
}

static const cfg_section *find_section(const cfg_file *f, const char *name)
{
    for (int i = 0; i < f->nsec; i++)
        if (!strcmp(f->sec[i].name, name)) return &f->sec[i];
    return NULL;
}

/* Each of [net] and [data] exactly once, [train] and [memory] at most once (describing
 * and planning a net need no training settings); no unknown section. */
static vdnn_status check_sections(const cfg_file *f)
{
    if (f->nsec == 0 || strcmp(f->sec[0].name, "net") != 0)
        return vdnn_fail(VDNN_EINVAL, "%s:%d: the first section must be [net] (batch, channels, height, width)",
                         f->path, f->nsec ? f->sec[0].line : 1);
    const char *meta[] = {"net", "train", "data", "memory"};
    for (int m = 0; m < 4; m++) {
        const cfg_section *first = NULL;
        for (int i = 0; i < f->nsec; i++) {
            if (strcmp(f->sec[i].name, meta[m])) continue;
            if (first) return cfg_error(f, &f->sec[i], NULL, "section given twice (first at line %d)", first->line);
            first = &f->sec[i];
        }
        if (!first && (m == 0 || m == 2)) return vdnn_fail(VDNN_EINVAL, "%s: missing section [%s]", f->path, meta[m]);
    }
    for (int i = 0; i < f->nsec; i++) {
        const cfg_section *s = &f->sec[i];
        if (!is_meta(s->name) && !layer_find_type(s->name)) {
            char known[512] = "";
            for (const layer_ops *const *t = layer_types(); *t; t++) {
                strncat(known, (*t)->type, sizeof known - strlen(known) - 3);
                strncat(known, ", ", sizeof known - strlen(known) - 1);
            }
            known[strlen(known) - 2] = 0;
            return vdnn_fail(VDNN_EINVAL, "%s:%d: unknown section [%s] (known: net, train, data, memory, %s)",
                             f->path, s->line, s->name, known);
        }
    }
    return VDNN_OK;
}

static vdnn_status read_train(const cfg_file *f, train_cfg *t)
{
    const cfg_section *s = find_section(f, "train");
    t->given = s != NULL;
    vdnn_status st = s ? cfg_check(f, s, train_keys) : VDNN_OK;
    if (st != VDNN_OK) return st;
    t->epochs = cfg_int(s, "epochs", 1);
    t->learning_rate = cfg_float(s, "learning_rate", 0.01);
    t->momentum = cfg_float(s, "momentum", 0);
    t->weight_decay = cfg_float(s, "weight_decay", 0);
    const char *sched = cfg_str(s, "lr_schedule", "const");
    t->schedule = !strcmp(sched, "step") ? LR_STEP : !strcmp(sched, "cosine") ? LR_COSINE : LR_CONST;
    t->step_epochs = cfg_int(s, "step_epochs", 0);
    t->gamma = cfg_float(s, "gamma", 0.1);
    t->min_lr = cfg_float(s, "min_lr", 0);
    t->seed = (uint64_t)cfg_int(s, "seed", 1);
    if (t->schedule == LR_STEP && !cfg_find(s, "step_epochs"))
        return cfg_error(f, s, "lr_schedule", "'step' needs step_epochs (and optionally gamma)");
    if (t->schedule != LR_STEP && (cfg_find(s, "step_epochs") || cfg_find(s, "gamma")))
        return cfg_error(f, s, cfg_find(s, "gamma") ? "gamma" : "step_epochs",
                         "only used with lr_schedule = step");
    if (t->schedule != LR_COSINE && cfg_find(s, "min_lr"))
        return cfg_error(f, s, "min_lr", "only used with lr_schedule = cosine");
    if (t->schedule == LR_COSINE && t->min_lr > t->learning_rate)
        return cfg_error(f, s, "min_lr", "%g is above learning_rate %g", t->min_lr, t->learning_rate);
    return VDNN_OK;
}

/* The keys of an image folder (set = images), refused on the other sets. */
static vdnn_status read_image_keys(const cfg_file *f, const cfg_section *s, int channels, data_cfg *d)
{
    int images = !strcmp(d->set, "images");
    const char *only[] = {"train_list", "test_list", "train_crop", "scale", "ratio", "resize", "strict"};
    for (size_t i = 0; i < sizeof only / sizeof *only; i++)
        if (!images && cfg_find(s, only[i])) return cfg_error(f, s, only[i], "only used with set = images");
    if (images && cfg_find(s, "crop_pad"))
        return cfg_error(f, s, "crop_pad", "not used with set = images (its crops are train_crop, scale and ratio)");
    if (!images) return VDNN_OK;
    if (channels != 1 && channels != 3)
        return cfg_error(f, s, "set", "image folders give 1 or 3 channels; the net's input has %d", channels);
    snprintf(d->train_list, sizeof d->train_list, "%s", cfg_str(s, "train_list", ""));
    snprintf(d->test_list, sizeof d->test_list, "%s", cfg_str(s, "test_list", ""));
    if (!*d->train_list != !*d->test_list)
        return cfg_error(f, s, *d->train_list ? "train_list" : "test_list", "give train_list and test_list together");
    d->train_crop = !strcmp(cfg_str(s, "train_crop", "random-resized"), "centre") ? DATA_CROP_CENTRE
                                                                                 : DATA_CROP_RANDOM_RESIZED;
    const char *pairs[] = {"scale", "ratio"};
    float *vals[] = {d->scale, d->ratio};
    for (int i = 0; i < 2; i++) {
        int n = cfg_floats(s, pairs[i], vals[i], 2);
        if (n == 1) return cfg_error(f, s, pairs[i], "give two values, LOW, HIGH");
        if (n == 2 && vals[i][0] > vals[i][1])
            return cfg_error(f, s, pairs[i], "%g is above %g: give LOW, HIGH", vals[i][0], vals[i][1]);
        if (n && d->train_crop == DATA_CROP_CENTRE)
            return cfg_error(f, s, pairs[i], "only used with train_crop = random-resized");
    }
    d->resize = cfg_int(s, "resize", 0);
    d->strict = cfg_int(s, "strict", 0);
    return VDNN_OK;
}

static vdnn_status read_data(const cfg_file *f, int channels, data_cfg *d)
{
    const cfg_section *s = find_section(f, "data");
    vdnn_status st = cfg_check(f, s, data_keys);
    if (st != VDNN_OK) return st;
    memset(d, 0, sizeof *d);
    snprintf(d->set, sizeof d->set, "%s", cfg_str(s, "set", ""));
    snprintf(d->path, sizeof d->path, "%s", cfg_str(s, "path", ""));
    int synthetic = !strcmp(d->set, "synthetic");
    if (!synthetic && !cfg_find(s, "path")) return cfg_error(f, s, "path", "required for set = %s", d->set);
    const char *synth_only[] = {"train_size", "test_size", "classes"};
    for (int i = 0; i < 3; i++) {
        if (synthetic && !cfg_find(s, synth_only[i]))
            return cfg_error(f, s, synth_only[i], "required for set = synthetic");
        if (!synthetic && cfg_find(s, synth_only[i]))
            return cfg_error(f, s, synth_only[i], "only used with set = synthetic");
    }
    st = read_image_keys(f, s, channels, d);
    if (st != VDNN_OK) return st;
    d->crop_pad = cfg_int(s, "crop_pad", 0);
    d->flip = cfg_int(s, "flip", 0);
    d->workers = cfg_int(s, "workers", 0);
    d->nmean = cfg_floats(s, "mean", d->mean, DATA_MAX_CHANNELS);
    d->nstd = cfg_floats(s, "std", d->std, DATA_MAX_CHANNELS);
    if (d->nmean > 1 && d->nmean != channels)
        return cfg_error(f, s, "mean", "%d values for %d channels (give 1 or %d)", d->nmean, channels, channels);
    if (d->nstd > 1 && d->nstd != channels)
        return cfg_error(f, s, "std", "%d values for %d channels (give 1 or %d)", d->nstd, channels, channels);
    d->synthetic_train = cfg_int(s, "train_size", 0);
    d->synthetic_test = cfg_int(s, "test_size", 0);
    d->classes = cfg_int(s, "classes", 0);
    return VDNN_OK;
}

/* Keys every layer section accepts besides its own: the memory plan's overrides. */
static const cfg_key common_layer_keys[] = {
    {"name", CFG_STRING, 0, 0, 0, NULL, 0, "the layer's name (default: its type stem and position, conv1)"},
    {"input", CFG_STRING, 0, 0, 0, NULL, 0, "what it reads: earlier layers' names, -k (k layers up) or data, "
     "comma-separated (default: the previous layer)"},
    {"offload", CFG_BOOL, 0, 0, 1, NULL, 0, "offload this layer's input (1) or keep it (0), whatever the policy"},
    {"algo", CFG_STRING, 0, 0, 0, NULL, 0, "convolution algorithm for every pass"},
    {"algo_fwd", CFG_STRING, 0, 0, 0, NULL, 0, "convolution algorithm, forward"},
    {"algo_bwd_data", CFG_STRING, 0, 0, 0, NULL, 0, "convolution algorithm, backward data"},
    {"algo_bwd_filter", CFG_STRING, 0, 0, 0, NULL, 0, "convolution algorithm, backward filter"},
    {NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

static vdnn_status layer_keys(const layer_ops *ops, cfg_key *out, int max)
{
    int k = 0;
    for (const cfg_key *c = ops->keys; c && c->name && k < max - 1; c++) out[k++] = *c;
    for (const cfg_key *c = common_layer_keys; c->name && k < max - 1; c++) out[k++] = *c;
    out[k] = no_keys[0];
    return VDNN_OK;
}

static vdnn_status pin_algo(const cfg_file *f, const cfg_section *s, layer *l, const char *key, int pass)
{
    const char *v = cfg_str(s, key, NULL);
    if (!v) return VDNN_OK;
    if (!l->ops->algo_count)
        return cfg_error(f, s, key, "[%s] has no algorithms to choose from", s->name);
    char names[256] = "";
    for (int a = 0; a < layer_algo_count(l, pass); a++) {
        if (!strcmp(v, layer_algo_name(l, pass, a))) {
            l->algo_pinned[pass] = a;
            return VDNN_OK;
        }
        strncat(names, a ? ", " : "", sizeof names - strlen(names) - 1);
        strncat(names, layer_algo_name(l, pass, a), sizeof names - strlen(names) - 1);
    }
    return cfg_error(f, s, key, "'%s' is not one of: %s", v, names);
}

static vdnn_status read_layer_memory_keys(const cfg_file *f, const cfg_section *s, layer *l)
{
    static const char *pass_keys[PASS_COUNT] = {"algo_fwd", "algo_bwd_data", "algo_bwd_filter"};
    if (cfg_find(s, "offload")) l->offload = cfg_int(s, "offload", 0);
    vdnn_status st = VDNN_OK;
    for (int p = 0; p < PASS_COUNT && st == VDNN_OK; p++) st = pin_algo(f, s, l, "algo", p);
    for (int p = 0; p < PASS_COUNT && st == VDNN_OK; p++) st = pin_algo(f, s, l, pass_keys[p], p);
    return st;
}

/* Cheap to compute again: no parameters (activations, pooling, dropout, LRN) or batch
 * norm's few. */
static int cheap(const layer *l)
{
    return !l->ops->algo_count && (l->nparams == 0 || !layer_swappable(l));
}

int net_recomputable(const net *n, int j, const unsigned char *swap)
{
    if (j < 1 || j >= n->nlayers || net_first_reader(n, j) < 0) return 0;
    return !(swap ? swap[j - 1] : n->layers[j - 1]->swap);
}

/* Whether every map layer i reads is kept for a backward pass anyway. */
static int inputs_kept(const net *n, int i)
{
    const layer *l = n->layers[i];
    for (int k = 0; k < l->ninputs; k++)
        if (net_first_reader(n, l->input[k]) < 0) return 0;
    return 1;
}

/* Whether a convolution reads x[j]. */
static int read_by_conv(const net *n, int j)
{
    for (int i = n->graph[j].first_fwd; i >= 0 && i <= n->graph[j].last_fwd; i++) {
        const layer *l = n->layers[i];
        for (int k = 0; k < l->ninputs; k++)
            if (l->input[k] == j && l->ops->algo_count) return 1;
    }
    return 0;
}

int net_map_override(const net *n, int j)
{
    for (int i = n->graph[j].first_fwd; i >= 0 && i <= n->graph[j].last_fwd; i++) {
        const layer *l = n->layers[i];
        for (int k = 0; k < l->ninputs; k++)
            if (l->input[k] == j && l->offload >= 0) return l->offload;
    }
    return -1;
}

int net_policy_map(const net *n, int j, mem_policy p)
{
    if (j >= n->nlayers || net_first_reader(n, j) < 0) return MAP_KEEP;
    int pinned = net_map_override(n, j);
    if (pinned >= 0) return pinned ? MAP_OFFLOAD : MAP_KEEP;
    switch (p) {
    case POLICY_ALL:
    case POLICY_SWAP: return MAP_OFFLOAD;
    case POLICY_CONV: return read_by_conv(n, j) ? MAP_OFFLOAD : MAP_KEEP;
    case POLICY_RECOMPUTE:
        /* only where the maps it comes from are kept for backward anyway: recomputing
         * from a map that would otherwise be freed saves nothing */
        return net_recomputable(n, j, NULL) && cheap(n->layers[j - 1]) && inputs_kept(n, j - 1) ? MAP_RECOMPUTE
                                                                                                  : MAP_KEEP;
    default: return MAP_KEEP;
    }
}

int net_policy_swaps(const net *n, int i, mem_policy p)
{
    return p == POLICY_SWAP && layer_swappable(n->layers[i]);
}

int net_in_place(const net *n, int i)
{
    if (!n->in_place || i < 0 || i >= n->nlayers) return 0;
    const layer *l = n->layers[i];
    int j = l->input[0];
    return l->ops->in_place && l->ninputs == 1 && j > 0 && n->graph[j].last_fwd == i && n->graph[j].first_bwd < 0 &&
           shape_per_item(n->layers[j - 1]->out) == shape_per_item(l->out);
}

int net_passes_dy(const net *n, int i)
{
    if (!n->in_place || i < 0 || i >= n->nlayers || !n->layers[i]->ops->passes_dy) return -1;
    const layer *l = n->layers[i];
    for (int k = 0; k < l->ninputs; k++) {
        int j = l->input[k];
        if (n->graph[j].grad && n->graph[j].last_fwd == i && shape_per_item(l->ins[k]) == shape_per_item(l->out))
            return k;
    }
    return -1;
}

int net_first_reader(const net *n, int j)
{
    return j >= 0 && j <= n->nlayers ? n->graph[j].first_bwd : -1;
}

const char *net_map_name(const net *n, int j)
{
    return j <= 0 || j > n->nlayers ? "data" : n->layers[j - 1]->name;
}

int net_find_map(const net *n, const char *name)
{
    if (!strcmp(name, "data")) return 0;
    for (int i = 0; i < n->nlayers; i++)
        if (!strcmp(n->layers[i]->name, name)) return i + 1;
    return -1;
}

void net_recompute_runs_swapped(const net *n, const unsigned char *maps, const unsigned char *swap, int *bad)
{
    /* a map's inputs lie below it, so each answer is ready before its readers ask */
    bad[0] = -1;
    for (int j = 1; j <= n->nlayers; j++) {
        const layer *l = n->layers[j - 1];
        bad[j] = swap[j - 1] ? j - 1 : -1;
        for (int k = 0; k < l->ninputs && bad[j] < 0; k++)
            if (maps[l->input[k]] == MAP_RECOMPUTE) bad[j] = bad[l->input[k]];
    }
}

/* ---- names and inputs ---- */

/* Layer names by hash, for resolving `input =` in nets of thousands of layers. */
typedef struct name_table {
    int cap;                  /* a power of two */
    int *slot;                /* (cap) a layer index, or -1 */
    char (*names)[LAYER_NAME_MAX];
} name_table;

static uint64_t name_hash(const char *s)
{
    return vdnn_hash_str(VDNN_HASH_START, s);
}

/* The layer called `name`, or -1. */
static int name_find(const name_table *t, const char *name)
{
    for (uint64_t h = name_hash(name);; h++) {
        int i = t->slot[h & (uint64_t)(t->cap - 1)];
        if (i < 0 || !strcmp(t->names[i], name)) return i;
    }
}

static void name_add(name_table *t, int i)
{
    uint64_t h = name_hash(t->names[i]);
    while (t->slot[h & (uint64_t)(t->cap - 1)] >= 0) h++;
    t->slot[h & (uint64_t)(t->cap - 1)] = i;
}

/* A name given in a config: letters, digits, '_' and '-' (not first), shorter than
 * LAYER_NAME_MAX, and not "data" (the net's input). */
static vdnn_status check_name(const cfg_file *f, const cfg_section *s, const char *v)
{
    size_t len = strlen(v);
    if (len >= LAYER_NAME_MAX)
        return cfg_error(f, s, "name", "'%s' is longer than %d characters", v, LAYER_NAME_MAX - 1);
    if (!strcmp(v, "data")) return cfg_error(f, s, "name", "'data' names the net's input; choose another name");
    for (size_t k = 0; k < len; k++) {
        unsigned char c = (unsigned char)v[k];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              (c == '-' && k > 0)))
            return cfg_error(f, s, "name", "'%s': a name is letters, digits, '_' and '-' (not first)", v);
    }
    return VDNN_OK;
}

/* Every layer's name (its `name =`, else its type stem and position), all different. */
static vdnn_status layer_names(const cfg_file *f, const cfg_section *const *secs, int count, name_table *t)
{
    t->cap = 16;
    while (t->cap < 2 * count) t->cap *= 2;
    t->slot = malloc((size_t)t->cap * sizeof *t->slot);
    t->names = calloc((size_t)count, sizeof *t->names);
    if (!t->slot || !t->names) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    for (int k = 0; k < t->cap; k++) t->slot[k] = -1;
    for (int i = 0; i < count; i++) {
        const cfg_section *s = secs[i];
        const char *given = cfg_str(s, "name", NULL);
        vdnn_status st = given ? check_name(f, s, given) : VDNN_OK;
        if (st != VDNN_OK) return st;
        if (given) snprintf(t->names[i], sizeof t->names[i], "%s", given);
        else snprintf(t->names[i], sizeof t->names[i], "%s%d", layer_find_type(s->name)->prefix, i + 1);
        int other = name_find(t, t->names[i]);
        if (other < 0) {
            name_add(t, i);
            continue;
        }
        /* the explicit one of the two is at fault: a default name cannot be chosen */
        const cfg_section *at = given ? s : secs[other];
        const cfg_section *by = given ? secs[other] : s;
        return cfg_error(f, at, "name", "'%s' is %s name of the [%s] at line %d", t->names[i],
                         cfg_find(by, "name") ? "also the" : "the default", by->name, by->line);
    }
    return VDNN_OK;
}

/* -k's k: "-" then decimal digits, nothing else (no space, no second sign); 0 if not. */
static long relative_index(const char *tok)
{
    if (tok[0] != '-' || !tok[1]) return 0;
    long k = 0;
    for (const char *c = tok + 1; *c; c++) {
        if (*c < '0' || *c > '9') return 0;
        k = k < 100000000 ? k * 10 + (*c - '0') : k;   /* far beyond any net, and no overflow */
    }
    return k;
}

/* One `input =` item (trimmed, not empty) as a map of layer i. */
static vdnn_status input_map(const cfg_file *f, const cfg_section *const *secs, const name_table *t, int i,
                             const char *tok, int *map)
{
    const cfg_section *s = secs[i];
    if (!strcmp(tok, "data")) {
        *map = 0;
        return VDNN_OK;
    }
    if (tok[0] == '-') {
        long k = relative_index(tok);
        if (k < 1) return cfg_error(f, s, "input", "'%s' is not -k for a layer k sections up (k >= 1)", tok);
        if (k > i)
            return cfg_error(f, s, "input", "'%s' reaches above the first layer (this is layer %d; "
                             "the net's input is 'data')", tok, i + 1);
        *map = i - (int)k + 1;
        return VDNN_OK;
    }
    int j = name_find(t, tok);
    if (j < 0) return cfg_error(f, s, "input", "no layer is named '%s'", tok);
    if (j == i) return cfg_error(f, s, "input", "'%s' is this layer; a layer reads layers above it", tok);
    if (j > i)
        return cfg_error(f, s, "input", "'%s' is a later layer (line %d); a layer reads layers above it", tok,
                         secs[j]->line);
    *map = j + 1;
    return VDNN_OK;
}

/* Layer i's inputs as maps (x[0] the input, x[j + 1] layer j's output): its `input =`
 * list of earlier layers' names, `data` or `-k` (the layer k sections up), separated by
 * commas with optional blanks around each item, else the previous layer. Every comma
 * separates two items: an empty one, anywhere, is an error. */
static vdnn_status layer_inputs(const cfg_file *f, const cfg_section *const *secs, const name_table *t, int i,
                                int *maps, int *count)
{
    const cfg_section *s = secs[i];
    const cfg_kv *kv = cfg_find(s, "input");
    *count = 0;
    if (!kv) {
        maps[(*count)++] = i;
        return VDNN_OK;
    }
    int item = 0;
    for (const char *p = kv->value;; p++) {
        size_t len = strcspn(p, ",");
        item++;
        while (len && (*p == ' ' || *p == '\t')) p++, len--;
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
        if (!len)
            return cfg_error(f, s, "input", "an empty entry, item %d of '%s' (each comma separates two inputs)", item,
                             kv->value);
        if (*count == LAYER_MAX_INPUTS) return cfg_error(f, s, "input", "more than %d inputs", LAYER_MAX_INPUTS);
        char tok[CFG_VALUE_MAX];
        snprintf(tok, sizeof tok, "%.*s", (int)len, p);
        int map = 0;
        vdnn_status st = input_map(f, secs, t, i, tok, &map);
        if (st != VDNN_OK) return st;
        for (int k = 0; k < *count; k++)
            if (maps[k] == map) return cfg_error(f, s, "input", "'%s' is listed twice", tok);
        maps[(*count)++] = map;
        p += strcspn(p, ",");
        if (!*p) return VDNN_OK;
    }
}

static int has_trainable(const layer *l)
{
    for (int k = 0; k < l->nparams; k++)
        if (l->params[k].trainable) return 1;
    return 0;
}

/* The graph of maps (net_map), and the checks that need all of it: a map's readers
 * agree on `offload =`, an offloaded map is read by some backward pass, and every
 * layer but the loss feeds another. */
static vdnn_status build_graph(net *n, const cfg_section *const *secs)
{
    const cfg_file *f = n->cfg;
    int L = n->nlayers;
    n->graph = calloc((size_t)L + 1, sizeof *n->graph);
    int *pinned_by = malloc(((size_t)L + 1) * sizeof *pinned_by);
    if (!n->graph || !pinned_by) {
        free(pinned_by);
        return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    }
    for (int j = 0; j <= L; j++) {
        net_map *m = &n->graph[j];
        m->first_fwd = m->last_fwd = m->first_bwd = m->last_bwd = -1;
        pinned_by[j] = -1;
    }
    vdnn_status st = VDNN_OK;
    n->chain = 1;
    for (int i = 0; i < L && st == VDNN_OK; i++) {
        const layer *l = n->layers[i];
        n->chain &= l->ninputs == 1 && l->input[0] == i;
        int grad = has_trainable(l);
        for (int k = 0; k < l->ninputs && st == VDNN_OK; k++) {
            int j = l->input[k];
            net_map *m = &n->graph[j];
            if (m->first_fwd < 0) m->first_fwd = i;
            m->last_fwd = i;
            m->readers++;
            grad |= m->grad;
            if (layer_reads_input(l, k)) {
                if (m->first_bwd < i) m->first_bwd = i;
                if (m->last_bwd < 0 || m->last_bwd > i) m->last_bwd = i;
            }
            int other = pinned_by[j];
            if (l->offload >= 0 && other >= 0 && n->layers[other]->offload != l->offload)
                st = cfg_error(f, secs[i], "offload", "%d, but the [%s] at line %d, which reads %s too, says %d",
                               l->offload, secs[other]->name, secs[other]->line, net_map_name(n, j),
                               n->layers[other]->offload);
            if (l->offload >= 0) pinned_by[j] = i;
        }
        n->graph[i + 1].grad = grad;
        if (l->needs_output) {
            net_map *m = &n->graph[i + 1];
            if (m->first_bwd < i) m->first_bwd = i;
            m->last_bwd = i;
        }
    }
    free(pinned_by);
    for (int i = 0; i < L && st == VDNN_OK; i++) {
        const layer *l = n->layers[i];
        for (int k = 0; k < l->ninputs && l->offload == 1; k++)
            if (l->is_loss || n->graph[l->input[k]].first_bwd < 0)
                return vdnn_fail(VDNN_EINVAL, "%s:%d: [%s] offload: no backward pass reads %s, this layer's input, "
                                 "so there is nothing to offload", f->path, l->line, l->ops->type,
                                 net_map_name(n, l->input[k]));
        if (!l->is_loss && !n->graph[i + 1].readers)
            return cfg_error(f, secs[i], NULL, "nothing reads the output of %s (a dead branch): every layer but "
                             "the loss must feed another", l->name);
    }
    return st;
}

static vdnn_status build_layers(net *n)
{
    const cfg_file *f = n->cfg;
    int count = 0;
    for (int i = 0; i < f->nsec; i++) count += !is_meta(f->sec[i].name);
    if (!count) return vdnn_fail(VDNN_EINVAL, "%s: no layers (add sections such as [convolutional] ... [softmax])", f->path);
    n->layers = calloc((size_t)count, sizeof *n->layers);
    const cfg_section **secs = calloc((size_t)count, sizeof *secs);
    name_table names = {0};
    vdnn_status st = n->layers && secs ? VDNN_OK : vdnn_fail(VDNN_ENOMEM, "out of host memory");
    for (int i = 0, k = 0; i < f->nsec && st == VDNN_OK; i++) {
        const cfg_section *s = &f->sec[i];
        if (is_meta(s->name)) continue;
        if (k && layer_find_type(secs[k - 1]->name)->loss_classes)
            st = cfg_error(f, secs[k - 1], NULL, "[%s] must be the last layer (it is the loss), but [%s] follows at "
                           "line %d", secs[k - 1]->name, s->name, s->line);
        cfg_key keys[64];
        if (st == VDNN_OK) st = layer_keys(layer_find_type(s->name), keys, 64);
        if (st == VDNN_OK) st = cfg_check(f, s, keys);
        secs[k++] = s;
    }
    if (st == VDNN_OK) st = layer_names(f, secs, count, &names);
    for (int i = 0; i < count && st == VDNN_OK; i++) {
        const cfg_section *s = secs[i];
        int maps[LAYER_MAX_INPUTS], nin = 0;
        shape4 ins[LAYER_MAX_INPUTS];
        st = layer_inputs(f, secs, &names, i, maps, &nin);
        for (int k = 0; k < nin; k++) ins[k] = maps[k] ? n->layers[maps[k] - 1]->out : n->input;
        if (st == VDNN_OK) st = layer_create_multi(layer_find_type(s->name), i, ins, nin, f, s, &n->layers[i]);
        if (st != VDNN_OK) break;
        layer *l = n->layers[n->nlayers++];
        for (int k = 0; k < nin; k++) l->input[k] = maps[k];
        snprintf(l->name, sizeof l->name, "%s", names.names[i]);
        st = read_layer_memory_keys(f, s, l);
    }
    if (st == VDNN_OK) {
        const cfg_section *last_sec = secs[count - 1];
        layer *last = n->layers[n->nlayers - 1];
        if (!last->is_loss)
            st = cfg_error(f, last_sec, NULL, "the last layer must be a loss ([softmax], [logistic] or [l2]), not [%s]",
                           last_sec->name);
        else if ((n->classes = last->ops->loss_classes(last)) < 2)
            st = cfg_error(f, last_sec, NULL, "[%s] sees %zu output(s) and needs at least 2 (a net of one output ends "
                           "in [logistic] or [l2])", last_sec->name, shape_per_item(last->in));
    }
    if (st == VDNN_OK) st = build_graph(n, secs);
    free(names.slot);
    free(names.names);
    free(secs);
    return st;
}

static vdnn_status read_memory(const cfg_file *f, net *n)
{
    const cfg_section *s = find_section(f, "memory");
    n->policy = POLICY_NONE;
    n->algo = ALGO_PERF;
    n->may_in_place = 1;
    if (!s) return VDNN_OK;
    vdnn_status st = cfg_check(f, s, memory_keys);
    if (st != VDNN_OK) return st;
    n->budget_bytes = cfg_bytes(s, "budget", 0);
    const char *p = cfg_str(s, "policy", "none");
    n->policy = POLICY_NONE;
    for (int k = 0; k < POLICY_COUNT; k++)
        if (!strcmp(p, policy_name((mem_policy)k))) n->policy = (mem_policy)k;
    n->dyn = !strcmp(p, "dyn");
    n->algo = !strcmp(cfg_str(s, "algo", "perf"), "mem") ? ALGO_MEM : ALGO_PERF;
    n->sync_layers = cfg_int(s, "sync", 0);
    n->micro = cfg_int(s, "micro_batch", 0);
    n->may_in_place = cfg_int(s, "in_place", 1);
    return VDNN_OK;
}

static vdnn_status apply_net(net *n, const net_overrides *ov)
{
    const cfg_file *f = n->cfg;
    const cfg_section *s = &f->sec[0];
    vdnn_status st = cfg_check(f, s, net_keys);
    if (st != VDNN_OK) return st;
    n->input = shape_make(cfg_int(s, "batch", 1), cfg_int(s, "channels", 1), cfg_int(s, "height", 1),
                          cfg_int(s, "width", 1));
    if (ov->batch > 0) n->input.n = ov->batch;
    if ((size_t)n->input.n * shape_per_item(n->input) > (size_t)1 << 40)
        return cfg_error(f, s, "batch", "the input batch is too large");
    st = read_train(f, &n->train);
    if (st == VDNN_OK) st = read_data(f, n->input.c, &n->data);
    if (st == VDNN_OK) st = read_memory(f, n);
    if (st != VDNN_OK) return st;
    /* the layers are built for the micro-batch; the optimizer steps per batch */
    n->minibatch = n->input.n;
    if (ov->micro_batch > 0) n->micro = ov->micro_batch;
    if (ov->in_place >= 0) n->may_in_place = ov->in_place != 0;
    n->in_place = n->may_in_place ? IN_PLACE_OVER_OUTPUT : IN_PLACE_OFF;
    if (n->micro > n->minibatch)
        return vdnn_fail(VDNN_EINVAL, "%s: micro_batch %d is larger than the batch %d", f->path, n->micro, n->minibatch);
    if (n->micro == n->minibatch) n->micro = 0;
    if (n->micro) n->input.n = n->micro;
    if (ov->epochs > 0) n->train.epochs = ov->epochs;
    if (ov->lr > 0) n->train.learning_rate = ov->lr;
    if (ov->seed >= 0) n->train.seed = (uint64_t)ov->seed;
    if (ov->data_path && strcmp(ov->data_path, NET_DATA_SYNTHETIC))
        snprintf(n->data.path, sizeof n->data.path, "%s", ov->data_path);
    return VDNN_OK;
}

/* --data synthetic: seeded class patterns of the net's input shape and classes, eight
 * batches to train on and one to test, in place of the config's set (its augmentation
 * and normalisation stay). */
static void use_synthetic_data(net *n)
{
    data_cfg *d = &n->data;
    snprintf(d->set, sizeof d->set, "synthetic");
    d->path[0] = 0;
    d->synthetic_train = 8 * n->minibatch;
    d->synthetic_test = n->minibatch;
    d->classes = n->classes;
}

static vdnn_status net_from_cfg(cfg_file *f, int borrowed, const net_overrides *ov, net **out)
{
    *out = NULL;
    net *n = calloc(1, sizeof *n);
    if (!n) {
        if (!borrowed) cfg_free(f);
        return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    }
    n->cfg = f;
    n->cfg_borrowed = borrowed;
    n->prefetch_ahead = PREFETCH_FAR;
    n->release_lag = 1;
    n->update_lr = -1;
    const net_overrides none = net_no_overrides();
    if (!ov) ov = &none;
    n->ov = *ov;
    n->ov.data_path = NULL;   /* not kept: the caller owns the string */
    vdnn_status st = check_sections(f);
    if (st == VDNN_OK) st = apply_net(n, ov);
    if (st == VDNN_OK) st = build_layers(n);
    if (st == VDNN_OK && ov->data_path && !strcmp(ov->data_path, NET_DATA_SYNTHETIC)) use_synthetic_data(n);
    if (st != VDNN_OK) {
        net_free(n);
        return st;
    }
    *out = n;
    return VDNN_OK;
}

vdnn_status net_load(const char *path, const net_overrides *ov, net **out)
{
    *out = NULL;
    cfg_file *f;
    vdnn_status st = cfg_load(path, &f);
    if (st != VDNN_OK) return st;
    return net_from_cfg(f, 0, ov, out);
}

/* A clone sees the algorithms of n's device: the same table at the same batch, or,
 * when the device's tables depend on the batch (a GPU's library sizes workspaces for
 * it) and the clone's batch differs, the table that device gives at the clone's. */
static vdnn_status clone_algos(const net *n, net **out)
{
    net *m = *out;
    int rebind = n->dev && device_algos_by_batch(n->dev) && m->input.n != n->input.n;
    vdnn_status st = VDNN_OK;
    for (int i = 0; i < n->nlayers && st == VDNN_OK; i++)
        st = rebind ? layer_bind(m->layers[i], n->dev) : layer_copy_algos(m->layers[i], n->layers[i]);
    if (st != VDNN_OK) {
        net_free(m);
        *out = NULL;
    }
    return st;
}

vdnn_status net_clone(const net *n, net **out)
{
    vdnn_status st = net_from_cfg(n->cfg, 1, &n->ov, out);
    return st == VDNN_OK ? clone_algos(n, out) : st;
}

vdnn_status net_clone_micro(const net *n, int micro, net **out)
{
    net_overrides ov = n->ov;
    ov.batch = n->minibatch;
    ov.micro_batch = micro;
    vdnn_status st = net_from_cfg(n->cfg, 1, &ov, out);
    return st == VDNN_OK ? clone_algos(n, out) : st;
}

vdnn_status net_clone_batch(const net *n, int batch, int micro, net **out)
{
    net_overrides ov = n->ov;
    ov.batch = batch;
    ov.micro_batch = micro;
    vdnn_status st = net_from_cfg(n->cfg, 1, &ov, out);
    if (st != VDNN_OK) return st;
    net *m = *out;
    m->policy = n->policy;
    m->dyn = n->dyn;
    m->algo = n->algo;
    m->budget_bytes = n->budget_bytes;
    m->sync_layers = n->sync_layers;
    return VDNN_OK;
}

vdnn_status net_remake(net *n, int micro, net **out)
{
    if (n->dev) return vdnn_fail(VDNN_EINVAL, "net_remake: detach the net first");
    net_overrides ov = n->ov;
    ov.micro_batch = micro;
    ov.batch = n->minibatch;
    vdnn_status st = net_from_cfg(n->cfg, n->cfg_borrowed, &ov, out);
    if (st != VDNN_OK) return st;
    n->cfg_borrowed = 1;   /* the new net owns the config now (if n did) */
    net *m = *out;
    m->data = n->data;   /* --data is not among the overrides kept */
    m->policy = n->policy;
    m->dyn = n->dyn;
    m->algo = n->algo;
    m->budget_bytes = n->budget_bytes;
    m->sync_layers = n->sync_layers;
    m->plan_only = n->plan_only;
    m->trace = n->trace;
    return VDNN_OK;
}

vdnn_status net_parse(const char *text, const char *name, const net_overrides *ov, net **out)
{
    *out = NULL;
    cfg_file *f;
    vdnn_status st = cfg_parse(text, name, &f);
    if (st != VDNN_OK) return st;
    return net_from_cfg(f, 0, ov, out);
}

void net_free(net *n)
{
    if (!n) return;
    net_detach(n);
    for (int i = 0; i < n->nlayers; i++) layer_destroy(n->layers[i], NULL);
    free(n->layers);
    free(n->graph);
    if (!n->cfg_borrowed) cfg_free(n->cfg);
    free(n);
}

void net_detach(net *n)
{
    if (!n->dev) return;
    for (int i = 0; n->maps && i <= n->nlayers; i++) mm_destroy(n->dev, &n->maps[i]);
    for (int i = 0; n->dx && i <= n->nlayers; i++)
        if (n->dx[i]) device_free(n->dev, n->dx[i]);
    for (int i = 0; i < n->nlayers; i++) layer_free_params(n->layers[i], n->dev);
    if (n->labels) device_free(n->dev, n->labels);
    pool_reclaim(device_pool(n->dev), 1);
    free(n->maps);
    free(n->dx);
    free(n->wev);
    free(n->gev);
    free(n->release_head);
    free(n->release_next);
    free(n->fetch_order);
    free(n->fwd_in_place);
    n->release_head = n->release_next = n->fetch_order = NULL;
    n->fwd_in_place = NULL;
    n->maps = NULL;
    n->dx = NULL;
    n->wev = n->gev = NULL;
    n->labels = NULL;
    n->dev = NULL;
}

vdnn_status net_attach(net *n, device *d)
{
    vdnn_status st = net_attach_unplanned(n, d);
    return st == VDNN_OK ? net_plan_static(n, n->policy, n->algo) : st;
}

static vdnn_status place_params(net *n, int from);

vdnn_status net_attach_unplanned(net *n, device *d)
{
    if (n->dev) return vdnn_fail(VDNN_EINVAL, "the net is already on a device");
    n->dev = d;
    n->maps = calloc((size_t)n->nlayers + 1, sizeof *n->maps);
    n->dx = calloc((size_t)n->nlayers + 1, sizeof *n->dx);
    n->wev = calloc((size_t)n->nlayers, sizeof *n->wev);
    n->gev = calloc((size_t)n->nlayers, sizeof *n->gev);
    n->release_head = calloc((size_t)n->nlayers, sizeof *n->release_head);
    n->release_next = calloc((size_t)n->nlayers + 1, sizeof *n->release_next);
    n->fetch_order = calloc((size_t)n->nlayers + 1, sizeof *n->fetch_order);
    n->fwd_in_place = calloc((size_t)n->nlayers, sizeof *n->fwd_in_place);
    if (!n->maps || !n->dx || !n->wev || !n->gev || !n->release_head || !n->release_next || !n->fetch_order ||
        !n->fwd_in_place)
        return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    for (int j = 0; j <= n->nlayers; j++) {
        char digits[16];
        vdnn_join(n->maps[j].name, sizeof n->maps[j].name, "x[", vdnn_itoa(j, digits, sizeof digits), "]");
        n->maps[j].first_reader = net_first_reader(n, j);
    }
    for (int i = 0; i < n->nlayers; i++) {
        vdnn_status st = layer_bind(n->layers[i], d);
        if (st != VDNN_OK) return st;
        if (net_policy_swaps(n, i, n->policy)) n->layers[i]->swap = 1;
    }
    return place_params(n, 0);
}

/* The parameters of layers from.. placed as their swap flags say (on the device, or in
 * host memory for a swapped layer), in layer order, then the label buffer: attaching
 * places nothing else, so a fresh pool holds these blocks end to end. */
static vdnn_status place_params(net *n, int from)
{
    for (int i = from; i < n->nlayers; i++) {
        layer *l = n->layers[i];
        vdnn_status st = n->plan_only ? layer_place_params(l, n->dev)
                         : l->swap    ? layer_alloc_params_host(l, n->dev, n->train.seed)
                                      : layer_alloc_params(l, n->dev, n->train.seed);
        if (st != VDNN_OK) return st;
    }
    return device_alloc(n->dev, (size_t)n->input.n * sizeof(int32_t), "input", "labels", (void **)&n->labels);
}

vdnn_status net_replace_params(net *n, int from)
{
    if (!n->dev || from < 0 || from > n->nlayers)
        return vdnn_fail(VDNN_EINVAL, "net_replace_params: layer %d of a net of %d layers%s", from, n->nlayers,
                         n->dev ? "" : ", not attached");
    pool *pl = device_pool(n->dev);
    size_t kept = 0;   /* the bytes the layers before `from` hold on the device */
    for (int i = 0; i < from; i++)
        if (!n->layers[i]->swap) kept += layer_param_bytes(n->layers[i]);
    if (n->labels) device_free(n->dev, n->labels);
    n->labels = NULL;
    for (int i = from; i < n->nlayers; i++) layer_free_params(n->layers[i], n->dev);
    pool_reclaim(pl, 1);
    if (pool_used_bytes(pl) != kept)
        return vdnn_fail(VDNN_EINVAL, "net_replace_params: the device holds %zu bytes, the parameters kept %zu",
                         pool_used_bytes(pl), kept);
    pool_set_marks(pl, (pool_marks){kept, kept, kept});
    return place_params(n, from);
}

vdnn_status net_check_drawn(const net *n, const char *what)
{
    if (!n->plan_only) return VDNN_OK;
    return vdnn_fail(VDNN_EINVAL, "%s: the net was attached for planning only and its parameters hold no values", what);
}

size_t net_param_bytes(const net *n)
{
    size_t total = 0;
    for (int i = 0; i < n->nlayers; i++) total += layer_param_bytes(n->layers[i]);
    return total;
}

size_t net_max_workspace_bytes(const net *n)
{
    size_t m = 0;
    for (int i = 0; i < n->nlayers; i++)
        for (int p = 0; p < PASS_COUNT; p++) {
            size_t w = layer_workspace_bytes(n->layers[i], p, n->layers[i]->algo[p]);
            if (w > m) m = w;
        }
    return m;
}

size_t net_train_bytes_bound(const net *n)
{
    size_t maps = pool_round(shape_bytes(n->input)), max_map = maps;
    for (int i = 0; i < n->nlayers; i++) {
        size_t b = pool_round(shape_bytes(n->layers[i]->out));
        maps += b;
        if (b > max_map) max_map = b;
    }
    /* a chain holds two gradient maps at once; a graph may hold every map's, and one
     * more while a second reader's part is added */
    size_t grads = n->chain ? 2 * max_map : maps + max_map;
    return net_param_bytes(n) + maps + grads + pool_round(net_max_workspace_bytes(n)) +
           pool_round((size_t)n->input.n * sizeof(int32_t)) + 16 * POOL_ALIGN;
}

double net_lr_at(const train_cfg *t, int epoch)
{
    switch (t->schedule) {
    case LR_STEP: return t->learning_rate * pow(t->gamma, epoch / t->step_epochs);
    case LR_COSINE: {
        /* a --lr below the config's min_lr makes the schedule flat at --lr */
        double lo = t->min_lr < t->learning_rate ? t->min_lr : t->learning_rate;
        if (t->epochs <= 1) return t->learning_rate;
        return lo + (t->learning_rate - lo) * 0.5 * (1 + cos(3.14159265358979323846 * epoch / (t->epochs - 1)));
    }
    case LR_CONST: break;
    }
    return t->learning_rate;
}

/* ---- the fixed policies' plans, without measuring ---- */

/* Algorithms that failed to run on the device (layer_algo_failed) are passed over. */
static int smallest_workspace(const layer *l, int pass)
{
    int best = 0;
    for (int a = 1; a < layer_algo_count(l, pass); a++)
        if (layer_algo_usable(l, pass, a) &&
            (!layer_algo_usable(l, pass, best) || layer_workspace_bytes(l, pass, a) < layer_workspace_bytes(l, pass, best)))
            best = a;
    return best;
}

static int largest_workspace(const layer *l, int pass)
{
    int best = 0;
    for (int a = 1; a < layer_algo_count(l, pass); a++)
        if (layer_algo_usable(l, pass, a) &&
            (!layer_algo_usable(l, pass, best) || layer_workspace_bytes(l, pass, a) > layer_workspace_bytes(l, pass, best)))
            best = a;
    return best;
}

void net_set_map(fmap *m, int what)
{
    m->offload = what == MAP_OFFLOAD;
    m->recompute = what == MAP_RECOMPUTE;
}

void net_pick_algos(net *n, algo_mode a)
{
    for (int i = 0; i < n->nlayers; i++) {
        layer *l = n->layers[i];
        for (int p = 0; p < PASS_COUNT; p++) {
            int pick = a == ALGO_MEM ? smallest_workspace(l, p) : largest_workspace(l, p);
            l->algo[p] = l->algo_pinned[p] >= 0 ? l->algo_pinned[p] : pick;
        }
    }
}

vdnn_status net_plan_static(net *n, mem_policy p, algo_mode a)
{
    n->policy = p;
    n->algo = a;
    for (int j = 0; n->maps && j <= n->nlayers; j++) net_set_map(&n->maps[j], net_policy_map(n, j, p));
    net_pick_algos(n, a);
    return VDNN_OK;
}
