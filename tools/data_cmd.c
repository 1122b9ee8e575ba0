/* vdnn data: the data loader alone. Reads a config's data set as training would (the
 * same shuffle, augmentation, workers) without a net to train, and says how fast it
 * delivers and which files it could not read: how to tell whether the loader can keep
 * up with a device, and to find the unreadable files of a folder before a long run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nets/net.h"
#include "tools/commands.h"
#include "vdnn/status.h"
#include "vdnn/device.h"

typedef struct data_flags {
    const char *data, *split;
    long long batches, batch, workers, seed;
    int strict;
} data_flags;

/* Runs the loader over `batches` batches (0: one epoch) and reports. */
static vdnn_status run_loader(const net *n, const dataset *d, const data_flags *f, int train)
{
    data_cfg cfg = n->data;
    if (f->workers > 0) cfg.workers = (int)f->workers;
    if (f->strict) cfg.strict = 1;
    int batch = n->minibatch;
    loader_opts lo = {batch, train, train, n->train.seed, &cfg, 0, {NULL, NULL, NULL}};
    loader *ld = NULL;
    size_t floats = (size_t)batch * d->c * d->h * d->w;
    float *x = malloc(sizeof(float) * floats);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)batch);
    long long want = f->batches > 0 ? f->batches : (d->count + batch - 1) / batch, got = 0, items = 0;
    long long first_items = 0;
    int skipped = 0;
    double t0 = vdnn_now_s(), t_first = t0;
    vdnn_status st = x && y ? loader_create(d, &lo, &ld) : vdnn_fail(VDNN_ENOMEM, "out of host memory for a batch");
    if (st == VDNN_OK)
        printf("data: %s split of %s: %d items, %d classes; batch %d, %d loader worker%s\n", train ? "train" : "test",
               d->source, d->count, d->classes, batch, loader_workers(ld), loader_workers(ld) == 1 ? "" : "s");
    while (st == VDNN_OK && got < want) {
        int k = 0;
        st = loader_next(ld, x, y, &k);
        char msgs[2048];
        int s = ld ? loader_take_skipped(ld, msgs, sizeof msgs) : 0;
        if (s) {
            skipped += s;
            for (char *line = strtok(msgs, "\n"); line; line = strtok(NULL, "\n"))
                printf("vdnn: warning: skipped an unreadable file: %s\n", line);
        }
        if (k > 0) {
            got++;
            items += k;
        }
        if (got == 1 && k > 0) {
            t_first = vdnn_now_s();
            first_items = items;
        }
    }
    double end = vdnn_now_s(), secs = end - t0;
    /* the rate leaves out the first batch, which waits for the workers to start */
    double rate = got > 1 && end > t_first ? (items - first_items) / (end - t_first) : secs > 0 ? items / secs : 0;
    if (st == VDNN_OK)
        printf("data: %lld images in %.2f s: %.1f images/s after the first batch (%lld batches, %d unreadable files "
               "skipped)\n", items, secs, rate, got, skipped);
    loader_destroy(ld);
    free(x);
    free(y);
    return st;
}

int cmd_data(int argc, char **argv)
{
    data_flags f = {.split = "train", .batch = -1, .seed = -1};
    const char *cfg = NULL;
    arg_spec specs[] = {
        {"--data", ARG_STRING, &f.data, 0, 0, "the data set's folder (default: the config's [data] path)", 0},
        {"--split", ARG_STRING, &f.split, 0, 0, "train (shuffled and augmented, as training reads it) or test", 0},
        {"--batches", ARG_INT, &f.batches, 1, 1e12, "batches to read (default: one epoch)", 0},
        {"--batch", ARG_INT, &f.batch, 1, 65536, "items per batch (default: the config's)", 0},
        {"--workers", ARG_INT, &f.workers, 1, 64, "loader threads (default: the config's [data] workers)", 0},
        {"--seed", ARG_INT, &f.seed, 0, 2147483647, "seed of the shuffle and augmentation (default: the config's)", 0},
        {"--strict", ARG_FLAG, &f.strict, 0, 0, "stop at the first unreadable file (default: skip it and go on)", 0},
        {NULL, 0, NULL, 0, 0, NULL, 0},
    };
    if (args_parse(argc, argv, 2, specs, &cfg, 1,
                   "vdnn data CFG [--data PATH] [--split train|test] [--batches N] [--batch N] [--workers N] "
                   "[--seed N] [--strict]") != VDNN_OK)
        return cli_error();
    int train = !strcmp(f.split, "train");
    if (!train && strcmp(f.split, "test")) {
        vdnn_fail(VDNN_EINVAL, "--split: '%s' is neither train nor test", f.split);
        return cli_error();
    }
    cli_quit_on_signal("data", NULL);
    net_overrides ov = net_no_overrides();
    ov.batch = (int)f.batch;
    ov.seed = f.seed;
    ov.data_path = f.data;
    net *n = NULL;
    dataset *d = NULL;
    vdnn_status st = net_load(cfg, &ov, &n);
    if (st == VDNN_OK) st = dataset_load(&n->data, train ? SPLIT_TRAIN : SPLIT_TEST, n->input.c, n->input.h, n->input.w, &d);
    if (st == VDNN_OK) st = run_loader(n, d, &f, train);
    int rc = st == VDNN_OK ? 0 : cli_error();
    dataset_free(d);
    net_free(n);
    return rc;
}
