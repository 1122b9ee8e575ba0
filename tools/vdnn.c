/* The vdnn command-line program: parse, build, run. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nets/checkpoint.h"
#include "nets/trainer.h"
#include "tools/commands.h"

static const char usage[] =
    "usage: vdnn COMMAND ...\n"
    "  train CFG [--device auto|cpu] [--budget SIZE] [--data PATH] [--epochs N] [--steps N]\n"
    "            [--batch N] [--lr X] [--seed N] [--threads N] [--save FILE] [--resume FILE]\n"
    "            [--log FILE] [--quiet]\n"
    "  test CFG --weights FILE [--data PATH] [--batch N] [--device D] [--threads N] [--log FILE]\n"
    "  info CFG [--batch N] [--json]\n"
    "See docs/cli.md.\n";

int cli_error(void)
{
    fprintf(stderr, "vdnn: %s\n", vdnn_errmsg());
    return 1;
}

vdnn_status cli_device(const char *name, size_t budget, long long threads, const net *n, device **out)
{
    device_options o = {0};
    if (!strcmp(name, "cpu") || !strcmp(name, "auto")) o.kind = DEVICE_CPU;
    else if (!strncmp(name, "cuda", 4) && (name[4] == 0 || name[4] == ':')) o.kind = DEVICE_CUDA;
    else return vdnn_fail(VDNN_EINVAL, "--device: '%s' is not one of auto, cpu, cuda, cuda:N", name);
    o.budget_bytes = budget ? budget : net_train_bytes_bound(n) + pool_round(shape_bytes(n->input));
    o.threads = (int)threads;
    return device_create(&o, out);
}

typedef struct run_flags {
    const char *device, *data, *save, *resume, *log, *weights;
    long long epochs, steps, batch, seed, threads;
    double lr;
    size_t budget;
    int quiet;
} run_flags;

static vdnn_status open_all(const char *cfg, run_flags *f, int need_train, net **n, device **d,
                            dataset **train, dataset **test)
{
    net_overrides ov = net_no_overrides();
    ov.batch = (int)f->batch;
    ov.epochs = (int)f->epochs;
    ov.lr = f->lr;
    ov.seed = f->seed;
    ov.data_path = f->data;
    vdnn_status st = net_load(cfg, &ov, n);
    if (st == VDNN_OK) st = cli_device(f->device, f->budget, f->threads, *n, d);
    if (st == VDNN_OK) st = net_attach(*n, *d);
    const data_cfg *dc = &(*n)->data;
    shape4 in = st == VDNN_OK ? (*n)->input : shape_make(0, 0, 0, 0);
    if (st == VDNN_OK && need_train) st = dataset_load(dc, SPLIT_TRAIN, in.c, in.h, in.w, train);
    if (st == VDNN_OK) st = dataset_load(dc, SPLIT_TEST, in.c, in.h, in.w, test);
    return st;
}

static void close_all(net *n, device *d, dataset *train, dataset *test)
{
    dataset_free(train);
    dataset_free(test);
    net_free(n);
    device_destroy(d);
}

static FILE *open_log(const char *path)
{
    if (!path) return NULL;
    FILE *f = fopen(path, "w");
    if (!f) vdnn_fail(VDNN_EIO, "--log: cannot write %s", path);
    return f;
}

int cmd_train(int argc, char **argv)
{
    run_flags f = {.device = "auto", .epochs = -1, .steps = -1, .batch = -1, .seed = -1};
    const char *cfg = NULL;
    arg_spec specs[] = {
        {"--device", ARG_STRING, &f.device, 0, 0, "", 0}, {"--budget", ARG_BYTES, &f.budget, 0, 0, "", 0},
        {"--data", ARG_STRING, &f.data, 0, 0, "", 0}, {"--epochs", ARG_INT, &f.epochs, 1, 1e6, "", 0},
        {"--steps", ARG_INT, &f.steps, 1, 1e12, "", 0}, {"--batch", ARG_INT, &f.batch, 1, 65536, "", 0},
        {"--lr", ARG_FLOAT, &f.lr, 1e-12, 100, "", 0}, {"--seed", ARG_INT, &f.seed, 0, 2147483647, "", 0},
        {"--threads", ARG_INT, &f.threads, 1, 1024, "", 0}, {"--save", ARG_STRING, &f.save, 0, 0, "", 0},
        {"--resume", ARG_STRING, &f.resume, 0, 0, "", 0}, {"--log", ARG_STRING, &f.log, 0, 0, "", 0},
        {"--quiet", ARG_FLAG, &f.quiet, 0, 0, "", 0}, {NULL, 0, NULL, 0, 0, NULL, 0},
    };
    if (args_parse(argc, argv, 2, specs, &cfg, 1, "vdnn train CFG [flags] (see vdnn --help)") != VDNN_OK)
        return cli_error();
    net *n = NULL;
    device *d = NULL;
    dataset *train = NULL, *test = NULL;
    FILE *log = NULL;
    vdnn_status st = open_all(cfg, &f, 1, &n, &d, &train, &test);
    if (st == VDNN_OK && f.log && !(log = open_log(f.log))) st = VDNN_EIO;
    train_opts o = {f.steps, f.save, f.resume, log, f.quiet, stdout, 0};
    if (st == VDNN_OK && isatty(fileno(stderr)) && !f.quiet) {
        o.tty = 1;
        o.out = stderr;
    }
    if (st == VDNN_OK && !f.quiet)
        fprintf(o.out, "vdnn: training %s on %s: %d train / %d test images, batch %d, %d epochs\n", cfg,
                device_describe(d), train->count, test->count, n->input.n, n->train.epochs);
    train_summary s;
    if (st == VDNN_OK) st = train_run(n, train, test, &o, &s);
    if (st == VDNN_OK && !f.quiet) {
        char peak[32];
        fprintf(o.out, "done: %lld steps, %.0f img/s, pool peak %s", s.steps, s.images_per_s,
                vdnn_fmt_bytes(s.pool_peak_bytes, peak, sizeof peak));
        if (s.test_acc >= 0) fprintf(o.out, ", test accuracy %.2f%%", 100 * s.test_acc);
        fprintf(o.out, "%s%s\n", f.save ? ", saved " : "", f.save ? f.save : "");
    }
    int rc = st == VDNN_OK ? 0 : cli_error();
    if (log) fclose(log);
    close_all(n, d, train, test);
    return rc;
}

int cmd_test(int argc, char **argv)
{
    run_flags f = {.device = "auto", .epochs = -1, .steps = -1, .batch = -1, .seed = -1};
    const char *cfg = NULL;
    arg_spec specs[] = {
        {"--weights", ARG_STRING, &f.weights, 0, 0, "", 0}, {"--data", ARG_STRING, &f.data, 0, 0, "", 0},
        {"--batch", ARG_INT, &f.batch, 1, 65536, "", 0}, {"--device", ARG_STRING, &f.device, 0, 0, "", 0},
        {"--budget", ARG_BYTES, &f.budget, 0, 0, "", 0}, {"--threads", ARG_INT, &f.threads, 1, 1024, "", 0},
        {"--log", ARG_STRING, &f.log, 0, 0, "", 0}, {NULL, 0, NULL, 0, 0, NULL, 0},
    };
    if (args_parse(argc, argv, 2, specs, &cfg, 1, "vdnn test CFG --weights FILE [--data PATH] [--log FILE]") != VDNN_OK)
        return cli_error();
    if (!f.weights) {
        vdnn_fail(VDNN_EINVAL, "test needs --weights FILE (a checkpoint written by train --save)");
        return cli_error();
    }
    net *n = NULL;
    device *d = NULL;
    dataset *test = NULL;
    FILE *log = NULL;
    double acc = 0, loss = 0;
    vdnn_status st = open_all(cfg, &f, 0, &n, &d, NULL, &test);
    if (st == VDNN_OK) st = checkpoint_load(n, f.weights, NULL, 1);
    if (st == VDNN_OK && f.log && !(log = open_log(f.log))) st = VDNN_EIO;
    if (st == VDNN_OK) st = evaluate(n, test, &acc, &loss);
    if (st == VDNN_OK) {
        printf("test accuracy %.2f%% (%d images), loss %.4f\n", 100 * acc, test->count, loss);
        if (log) fprintf(log, "{\"test_acc\": %.6g, \"test_loss\": %.6g, \"images\": %d}\n", acc, loss, test->count);
    }
    int rc = st == VDNN_OK ? 0 : cli_error();
    if (log) fclose(log);
    close_all(n, d, NULL, test);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "train")) return cmd_train(argc, argv);
    if (!strcmp(argv[1], "test")) return cmd_test(argc, argv);
    if (!strcmp(argv[1], "info")) return cmd_info(argc, argv);
    fprintf(stderr, "vdnn: unknown command '%s'\n%s", argv[1], usage);
    return 2;
}
