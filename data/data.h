/* Data sets and the background loader.
 *
 * A dataset holds a whole split in host memory as 8-bit images (count, C, H, W) and
 * int32 labels. Readers: IDX (MNIST / Fashion-MNIST, gzip or plain), CIFAR-10 binary
 * batches, PNG folders (one sub-folder per class, read with libpng), and synthetic
 * data. Every reader checks sizes against the file's real length and names the file in
 * any error.
 *
 * The loader turns a dataset into float batches: a seeded shuffle per epoch, optional
 * augmentation (random crop with zero padding, horizontal flip), scaling to [0,1] then
 * per-channel normalisation (x - mean) / std. A background thread prepares the next
 * batch while the current one trains. Everything is a pure function of (seed, epoch,
 * position), so a loader restarted at a saved position yields the same batches. */
#ifndef VDNN_DATA_H
#define VDNN_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "vdnn/status.h"

#define DATA_MAX_CHANNELS 4

typedef struct data_cfg {
    char set[32];            /* fashion-mnist, mnist, cifar10, png, synthetic */
    char path[512];          /* folder holding the files (unused for synthetic) */
    int crop_pad;            /* random crop after zero padding by this many pixels; 0 = off */
    int flip;                /* random horizontal flip */
    int nmean, nstd;         /* 0, 1 or C values each; 0 = mean 0 / std 1 */
    float mean[DATA_MAX_CHANNELS], std[DATA_MAX_CHANNELS];
    int synthetic_train;     /* synthetic: number of train / test items and classes */
    int synthetic_test;
    int classes;
} data_cfg;

typedef enum { SPLIT_TRAIN = 0, SPLIT_TEST = 1 } data_split;

typedef struct dataset {
    int count, c, h, w;      /* items and their shape */
    int classes;             /* labels lie in [0, classes) */
    uint8_t *images;         /* (count, C, H, W), owned */
    int32_t *labels;         /* (count), owned */
    char source[600];        /* file or folder it came from, for messages */
} dataset;

/* Loads one split. (c, h, w) is what the net expects: a set whose images have another
 * shape is an error naming the file and both shapes. Free with dataset_free(). */
vdnn_status dataset_load(const data_cfg *cfg, data_split split, int c, int h, int w, dataset **out);
void dataset_free(dataset *d);

/* Individual readers (used by dataset_load; exposed for tests). */
vdnn_status idx_load(const char *images_path, const char *labels_path, dataset **out);
vdnn_status cifar10_load(const char **paths, int npaths, dataset **out);
vdnn_status png_folder_load(const char *dir, int c, int h, int w, dataset **out);
vdnn_status synthetic_make(int count, int c, int h, int w, int classes, uint64_t seed, dataset **out);

typedef struct loader_opts {
    int batch;               /* items per batch */
    int shuffle;             /* seeded shuffle per epoch */
    int augment;             /* apply cfg's crop/flip (training only) */
    uint64_t seed;
    const data_cfg *cfg;     /* normalisation and augmentation; copied */
} loader_opts;

typedef struct loader loader;

/* Starts a loader over `d` (not owned; must outlive the loader) and its thread.
 * Free with loader_destroy(). */
vdnn_status loader_create(const dataset *d, const loader_opts *o, loader **out);
void loader_destroy(loader *l);

/* Positions the loader at item `index` (a multiple of the batch) of epoch `epoch`;
 * the next loader_next() returns that batch. Discards any batch prepared ahead. */
void loader_seek(loader *l, int epoch, int index);

/* Copies the next batch into x (batch*C*H*W floats) and y (batch labels), blocking until
 * it is ready, and starts preparing the one after. *n is the number of items (the last
 * batch of an epoch may be short); *n == 0 means the epoch is over and the loader has
 * moved to the start of the next epoch. */
vdnn_status loader_next(loader *l, float *x, int32_t *y, int *n);

/* Where the next loader_next() will read from. */
void loader_position(const loader *l, int *epoch, int *index);

#endif
