/* `vdnn import`, `vdnn export` and `vdnn onnx-test`: ONNX in and out (docs/onnx.md).
 * The library halves are onnx/import.c, onnx/export.c and onnx/model.c. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nets/checkpoint.h"
#include "nets/planner/planner.h"
#include "tools/commands.h"
#include "vdnn/file.h"
#include "vdnn/rng.h"

#ifdef VDNN_ONNX
#include "onnx/export.h"
#include "onnx/import.h"

/* A net built from imported text, attached to a device of its own, its parameters loaded. */
static vdnn_status open_imported(const onnx_import *r, const char *name, const char *dev_name, long long threads,
                                 net **np, device **dp)
{
    net_overrides ov;
    vdnn_status st = cli_overrides(&ov);
    if (st == VDNN_OK && (st = net_parse(r->cfg, name, &ov, np)) != VDNN_OK)
        st = vdnn_wrap(st, "the config vdnn wrote for the model does not build (a fault of vdnn's import)");
    if (st == VDNN_OK) st = cli_device(dev_name, 0, threads, 0, *np, dp);
    if (st == VDNN_OK) st = plan_attach(*np, *dp);
    if (st == VDNN_OK) st = cli_plan_fixed(dev_name, threads, 0, 0, *np, dp);
    if (st == VDNN_OK) st = onnx_import_load(r, *np);
    return st;
}

static void close_net(net *n, device *d)
{
    net_free(n);
    if (d) device_destroy(d);
}

int cmd_import(int argc, char **argv)
{
    const char *model = NULL, *cfg = NULL, *weights = NULL, *dev_name = "cpu";
    long long batch = 0;
    arg_spec specs[] = {
        {"--cfg", ARG_STRING, &cfg, 0, 0, "the vdnn config to write", 0},
        {"--weights", ARG_STRING, &weights, 0, 0, "the checkpoint to write the initializers to (train --init)", 0},
        {"--batch", ARG_INT, &batch, 1, 65536, "the config's batch (default: the model's, 1 where it is symbolic)", 0},
        {"--device", ARG_STRING, &dev_name, 0, 0, "the device the net is built on to write its weights (default cpu)", 0},
        {NULL, 0, NULL, 0, 0, NULL, 0},
    };
    if (args_parse(argc, argv, 2, specs, &model, 1, "vdnn import MODEL.onnx --cfg NET.cfg --weights NET.ckpt [--batch N]") !=
        VDNN_OK)
        return cli_error();
    if (!cfg || !weights) {
        vdnn_fail(VDNN_EINVAL, "import needs --cfg FILE and --weights FILE (the config and the checkpoint it writes)");
        return cli_error();
    }
    Onnx__ModelProto *m = NULL;
    onnx_import r = {0};
    net *n = NULL;
    device *d = NULL;
    onnx_import_opts o = {.source = model, .batch = (int)batch};
    vdnn_status st = onnx_model_read(model, &m);
    if (st == VDNN_OK) st = onnx_import_model(m, &o, &r);
    if (st == VDNN_OK) st = open_imported(&r, cfg, dev_name, 0, &n, &d);
    if (st == VDNN_OK) st = vdnn_file_replace(cfg, "config", r.cfg, strlen(r.cfg));
    ckpt_state s = {.seed = st == VDNN_OK ? n->train.seed : 0};
    if (st == VDNN_OK) st = checkpoint_save(n, weights, &s);
    if (st == VDNN_OK) {
        size_t params = 0;
        for (int i = 0; i < r.nparams; i++) params += (size_t)r.params[i].count;
        printf("imported %s: %d ONNX nodes as %d layers, %zu parameters (opset %lld)\n", model, r.nodes, r.nlayers,
               params, (long long)onnx_opset(m));
        printf("  config  %s\n  weights %s\nfine-tune: vdnn train %s --init %s\n", cfg, weights, cfg, weights);
    }
    close_net(n, d);
    onnx_import_free(&r);
    onnx_model_free(m);
    return st == VDNN_OK ? 0 : cli_error();
}

/* Writes t (count floats, shaped by dims) as an ONNX TensorProto file. */
static vdnn_status write_tensor(const char *path, const char *name, const float *data, size_t count, int rank,
                                const int64_t *dims)
{
    Onnx__TensorProto t = ONNX__TENSOR_PROTO__INIT;
    t.name = (char *)name;
    t.has_data_type = 1;
    t.data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
    t.n_dims = (size_t)rank;
    t.dims = (int64_t *)dims;
    t.has_raw_data = 1;
    t.raw_data.len = count * sizeof(float);
    t.raw_data.data = (uint8_t *)data;
    size_t len = onnx__tensor_proto__get_packed_size(&t);
    uint8_t *buf = malloc(len + 1);
    if (!buf) return vdnn_fail(VDNN_ENOMEM, "out of memory writing %s", path);
    onnx__tensor_proto__pack(&t, buf);
    vdnn_status st = vdnn_file_replace(path, "ONNX tensor", buf, len);
    free(buf);
    return st;
}

/* DIR/test_data_set_0: a seeded normal input and the net's prediction for it, in the
 * layout ONNX's runners read (and `vdnn onnx-test`). */
static vdnn_status write_test_data(net *n, const char *dir, int out_rank)
{
    char sub[1024], path[1100];
    snprintf(sub, sizeof sub, "%s/test_data_set_0", dir);
    vdnn_make_dirs(sub);
    int items = n->input.n;
    size_t in_count = (size_t)items * shape_per_item(n->input);
    const layer *last = n->layers[n->nlayers - 1];
    size_t out_count = (size_t)items * shape_per_item(last->out);
    float *x = malloc(in_count * sizeof *x), *y = malloc(out_count * sizeof *y);
    vdnn_status st = x && y ? VDNN_OK : vdnn_fail(VDNN_ENOMEM, "out of memory for the test data");
    for (size_t i = 0; st == VDNN_OK && i < in_count; i++) x[i] = rng_normal_at(n->train.seed, i);
    if (st == VDNN_OK) st = net_predict(n, x, items, n->nlayers, y);
    int64_t din[4] = {items, n->input.c, n->input.h, n->input.w};
    int64_t dout[4] = {items, out_rank == 2 ? (int64_t)shape_per_item(last->out) : last->out.c, last->out.h,
                       last->out.w};
    snprintf(path, sizeof path, "%s/input_0.pb", sub);
    if (st == VDNN_OK) st = write_tensor(path, "data", x, in_count, 4, din);
    snprintf(path, sizeof path, "%s/output_0.pb", sub);
    if (st == VDNN_OK) st = write_tensor(path, last->name, y, out_count, out_rank, dout);
    free(x);
    free(y);
    return st;
}

int cmd_export(int argc, char **argv)
{
    const char *cfg = NULL, *weights = NULL, *out = NULL, *test_dir = NULL;
    long long batch = -1;
    arg_spec specs[] = {
        {"--weights", ARG_STRING, &weights, 0, 0, "the checkpoint to export (train's --save, or runs/CFG.ckpt)", 0},
        {"-o", ARG_STRING, &out, 0, 0, "the ONNX file to write", 0},
        {"--batch", ARG_INT, &batch, 1, 65536, "the exported graph's batch (default: the config's)", 0},
        {"--test-data", ARG_STRING, &test_dir, 0, 0,
         "also write DIR/model.onnx and DIR/test_data_set_0 (an input and vdnn's prediction), ONNX's test layout", 0},
        {NULL, 0, NULL, 0, 0, NULL, 0},
    };
    if (args_parse(argc, argv, 2, specs, &cfg, 1, "vdnn export CFG --weights CKPT -o MODEL.onnx [--test-data DIR]") !=
        VDNN_OK)
        return cli_error();
    if (!weights || (!out && !test_dir)) {
        vdnn_fail(VDNN_EINVAL, "export needs --weights CKPT and -o MODEL.onnx (or --test-data DIR)");
        return cli_error();
    }
    net_overrides ov;
    net *n = NULL;
    device *d = NULL;
    vdnn_status st = cli_overrides(&ov);
    ov.batch = (int)batch;
    if (st == VDNN_OK) st = net_load(cfg, &ov, &n);
    if (st == VDNN_OK) st = cli_device("cpu", 0, 0, 0, n, &d);
    if (st == VDNN_OK) st = plan_attach(n, d);
    if (st == VDNN_OK) st = cli_plan_fixed("cpu", 0, 0, 0, n, &d);
    if (st == VDNN_OK) st = checkpoint_load(n, weights, NULL, 1);
    int rank = 0;
    if (st == VDNN_OK && out) st = onnx_export_net(n, out, &rank);
    char path[1100];
    if (st == VDNN_OK && test_dir) {
        vdnn_make_dirs(test_dir);
        snprintf(path, sizeof path, "%s/model.onnx", test_dir);
        st = onnx_export_net(n, path, &rank);
        if (st == VDNN_OK) st = write_test_data(n, test_dir, rank);
    }
    if (st == VDNN_OK) {
        int dropped = 0;
        for (int i = 0; i < n->nlayers; i++) dropped += !strcmp(n->layers[i]->ops->type, "dropout");
        printf("exported %s (%d layers%s%.0d%s) as ONNX opset %d: %s%s%s\n", cfg, n->nlayers,
               dropped ? ", " : "", dropped, dropped ? " dropout left out" : "", ONNX_EXPORT_OPSET,
               out ? out : "", out && test_dir ? ", " : "", test_dir ? path : "");
    }
    close_net(n, d);
    return st == VDNN_OK ? 0 : cli_error();
}

/* ---- onnx-test ---- */

enum { T_PASS, T_FAIL, T_UNSUPPORTED };

static int is_set(const struct dirent *e) { return !strncmp(e->d_name, "test_data_set_", 14); }

/* Reads DIR/PREFIX_k.pb for k = 0, 1, ... while they exist (at most max). */
static vdnn_status read_tensors(const char *set, const char *prefix, Onnx__TensorProto **t, int max, int *count)
{
    *count = 0;
    for (int k = 0; k < max; k++) {
        char path[1200];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s_%d.pb", set, prefix, k);
        if (stat(path, &sb)) break;
        vdnn_status st = onnx_tensor_read(path, &t[k]);
        if (st != VDNN_OK) return st;
        (*count)++;
    }
    return VDNN_OK;
}

/* One data set of one model: the verdict and its line's reason. */
static int run_set(const Onnx__ModelProto *m, const char *dir, const char *set, const char *dev_name,
                   long long threads, char *why, size_t len)
{
    Onnx__TensorProto *in[64] = {NULL}, *out[64] = {NULL};
    int nin = 0, nout = 0, verdict = T_FAIL;
    onnx_import r = {0};
    net *n = NULL;
    device *d = NULL;
    float *x = NULL, *got = NULL, *want = NULL;
    vdnn_status st = read_tensors(set, "input", in, 64, &nin);
    if (st == VDNN_OK) st = read_tensors(set, "output", out, 64, &nout);
    if (st == VDNN_OK && !nout) st = vdnn_fail(VDNN_EFORMAT, "%s: no output_0.pb", set);
    onnx_import_opts o = {.source = "model.onnx", .batch = nin && in[0]->n_dims ? (int)in[0]->dims[0] : 0,
                          .nfeeds = nin - 1, .feeds = (const Onnx__TensorProto *const *)in + 1};
    if (st == VDNN_OK) {
        st = onnx_import_model(m, &o, &r);
        if (st != VDNN_OK && r.refused) {
            snprintf(why, len, "%s", vdnn_errmsg() + strlen("model.onnx: "));
            verdict = T_UNSUPPORTED;
            goto done;
        }
    }
    if (st == VDNN_OK && !nin) st = vdnn_fail(VDNN_EFORMAT, "%s: no input_0.pb", set);
    if (st == VDNN_OK && nout != 1) {
        snprintf(why, len, "%d outputs: a vdnn net has one", nout);
        verdict = T_UNSUPPORTED;
        goto done;
    }
    int64_t xc = 0, yc = 0;
    char what[1200];
    snprintf(what, sizeof what, "%s/input_0.pb", set);
    if (st == VDNN_OK) st = onnx_tensor_floats(in[0], what, &x, &xc);
    snprintf(what, sizeof what, "%s/output_0.pb", set);
    if (st == VDNN_OK) st = onnx_tensor_floats(out[0], what, &want, &yc);
    if (st == VDNN_OK && xc != r.in_count)
        st = vdnn_fail(VDNN_EFORMAT, "input_0.pb holds %lld values, the graph's input %lld", (long long)xc,
                       (long long)r.in_count);
    if (st == VDNN_OK) {
        char name[1200];
        snprintf(name, sizeof name, "%s/model.onnx (imported)", dir);
        st = open_imported(&r, name, dev_name, threads, &n, &d);
    }
    int map = st == VDNN_OK ? net_find_map(n, r.out_map) : -1;
    if (st == VDNN_OK && map < 0) st = vdnn_fail(VDNN_EINVAL, "the output map %s is not in the net", r.out_map);
    size_t per = st == VDNN_OK ? (map ? shape_per_item(n->layers[map - 1]->out) : shape_per_item(n->input)) : 0;
    int same_shape = st != VDNN_OK || !out[0]->n_dims || (size_t)r.out_rank == out[0]->n_dims;
    for (size_t i = 0; same_shape && st == VDNN_OK && i < out[0]->n_dims; i++) same_shape = out[0]->dims[i] == r.out_dims[i];
    if (!same_shape) {
        char have[160] = "", want[160] = "";
        for (int i = 0; i < r.out_rank; i++) snprintf(have + strlen(have), 20, "%s%lld", i ? "x" : "", (long long)r.out_dims[i]);
        for (size_t i = 0; i < out[0]->n_dims && i < 8; i++)
            snprintf(want + strlen(want), 20, "%s%lld", i ? "x" : "", (long long)out[0]->dims[i]);
        st = vdnn_fail(VDNN_EINVAL, "the output's shape is %s, output_0.pb's %s", have, want);
    }
    if (st == VDNN_OK && (int64_t)(per * (size_t)n->input.n) != yc)
        st = vdnn_fail(VDNN_EINVAL, "vdnn's output holds %zu values, output_0.pb %lld", per * (size_t)n->input.n,
                       (long long)yc);
    if (st == VDNN_OK && !(got = malloc((size_t)yc * sizeof *got + 1))) st = vdnn_fail(VDNN_ENOMEM, "out of memory");
    if (st == VDNN_OK) st = net_predict(n, x, n->input.n, map, got);
    if (st != VDNN_OK) {
        snprintf(why, len, "%s", vdnn_errmsg());
        goto done;
    }
    /* ONNX's runners: |got - want| <= 1e-5 + 1e-3 |want| */
    double worst = 0, excess = -1;
    int64_t at = -1;
    for (int64_t i = 0; i < yc; i++) {
        double g = got[i], w = want[i], err = fabs(g - w);
        if (isnan(w) && isnan(g)) continue;
        if (isnan(err)) err = INFINITY;
        double over = err - (1e-5 + 1e-3 * fabs(w));
        if (err > worst) worst = err;
        if (over > 0 && over > excess) excess = over, at = i;
    }
    if (at < 0) {
        verdict = T_PASS;
        snprintf(why, len, "largest error %.3g", worst);
    } else {
        snprintf(why, len, "output '%s': largest error %.3g; element %lld is %.9g, %.9g expected", r.out_map, worst,
                 (long long)at, got[at], want[at]);
    }
done:
    free(x);
    free(got);
    free(want);
    close_net(n, d);
    onnx_import_free(&r);
    for (int k = 0; k < nin; k++) onnx_tensor_free(in[k]);
    for (int k = 0; k < nout; k++) onnx_tensor_free(out[k]);
    return verdict;
}

static int run_dir(const char *dir, const char *dev_name, long long threads, char *why, size_t len)
{
    char path[1100];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    Onnx__ModelProto *m = NULL;
    if (onnx_model_read(path, &m) != VDNN_OK) {
        snprintf(why, len, "%s", vdnn_errmsg());
        return T_FAIL;
    }
    struct dirent **sets = NULL;
    int nsets = scandir(dir, &sets, is_set, alphasort), verdict = T_FAIL;
    if (nsets <= 0) snprintf(why, len, "no test_data_set_* folder");
    for (int i = 0; i < nsets; i++) {
        char set[1100];
        snprintf(set, sizeof set, "%s/%s", dir, sets[i]->d_name);
        if (i == 0 || verdict == T_PASS) {
            char one[900];
            verdict = run_set(m, dir, set, dev_name, threads, one, sizeof one);
            if (verdict == T_FAIL) snprintf(why, len, "%s: %s", sets[i]->d_name, one);
            else snprintf(why, len, "%s", one);
        }
        free(sets[i]);
    }
    free(sets);
    onnx_model_free(m);
    return verdict;
}

int cmd_onnx_test(int argc, char **argv)
{
    const char *dev_name = "cpu";
    long long threads = 0;
    int verbose = 0;
    arg_spec specs[] = {
        {"--device", ARG_STRING, &dev_name, 0, 0, HELP_DEVICE, 0},
        {"--threads", ARG_INT, &threads, 1, 1024, HELP_THREADS, 0},
        {"--verbose", ARG_FLAG, &verbose, 0, 0, "say the largest error of each PASS too", 0},
        {NULL, 0, NULL, 0, 0, NULL, 0},
    };
    /* every positional argument is a folder: parse the flags around them */
    const char *dirs[4096];
    int ndirs = 0;
    char *flags[64];
    int nflags = 0;
    for (int i = 2; i < argc; i++) {
        if (argv[i][0] == '-' && nflags < 62) {
            flags[nflags++] = argv[i];
            if (strcmp(argv[i], "--verbose") && strcmp(argv[i], "--help") && strcmp(argv[i], "-h") && i + 1 < argc)
                flags[nflags++] = argv[++i];
        } else if (ndirs < 4096) {
            dirs[ndirs++] = argv[i];
        } else {
            vdnn_fail(VDNN_EINVAL, "onnx-test takes at most 4096 folders");
            return cli_error();
        }
    }
    char *fargv[66] = {argv[0], argv[1]};
    for (int i = 0; i < nflags; i++) fargv[2 + i] = flags[i];
    if (args_parse(2 + nflags, fargv, 2, specs, NULL, 0, "vdnn onnx-test DIR... [--device D] [--threads N]") != VDNN_OK)
        return cli_error();
    if (!ndirs) {
        vdnn_fail(VDNN_EINVAL, "onnx-test needs one or more folders of ONNX's test layout (DIR/model.onnx, "
                  "DIR/test_data_set_*/input_*.pb and output_*.pb)");
        return cli_error();
    }
    FILE *quiet = vdnn_set_notice_stream(NULL);
    int count[3] = {0, 0, 0};
    static const char *const word[3] = {"PASS", "FAIL", "UNSUPPORTED"};
    for (int i = 0; i < ndirs; i++) {
        char why[1024] = "";
        int v = run_dir(dirs[i], dev_name, threads, why, sizeof why);
        count[v]++;
        if (v == T_PASS && !verbose) printf("PASS %s\n", dirs[i]);
        else printf("%s %s: %s\n", word[v], dirs[i], why);
        fflush(stdout);
    }
    vdnn_set_notice_stream(quiet);
    printf("%d passed, %d failed, %d unsupported\n", count[T_PASS], count[T_FAIL], count[T_UNSUPPORTED]);
    return count[T_FAIL] ? 1 : 0;
}

#else

static int without(const char *cmd)
{
    vdnn_fail(VDNN_EINVAL, "%s: this vdnn was built without ONNX (ONNX=0); install protobuf-c-compiler, "
              "libprotobuf-c-dev and libonnx-dev (sh tools/setup.sh) and build again", cmd);
    return cli_error();
}

int cmd_import(int argc, char **argv)
{
    (void)argc, (void)argv;
    return without("import");
}

int cmd_export(int argc, char **argv)
{
    (void)argc, (void)argv;
    return without("export");
}

int cmd_onnx_test(int argc, char **argv)
{
    (void)argc, (void)argv;
    return without("onnx-test");
}

#endif
