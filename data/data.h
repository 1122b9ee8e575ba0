/* Data sets and the background loader.
 *
 * A dataset is one split. Most sets are held whole in host memory as 8-bit images
 * (count, C, H, W) and int32 labels: IDX (MNIST / Fashion-MNIST, gzip or plain),
 * CIFAR-10 binary batches, PNG folders of the net's exact size (one sub-folder per
 * class, read with libpng), and synthetic data. An image folder (set = images) holds
 * only its file list: JPEG and PNG files of any size, decoded, cropped and resized by
 * the loader's workers as training goes, so its size is bounded by the disk, not by
 * memory. Every reader checks sizes against the file's real length and names the file
 * in any error.
 *
 * The loader turns a dataset into float batches: a seeded shuffle per epoch, optional
 * augmentation (random crop with zero padding or random-resized crop, horizontal flip),
 * scaling to [0,1] then per-channel normalisation (x - mean) / std. Worker threads
 * prepare the next batches while the current one trains. Everything is a pure function
 * of (seed, epoch, position), never of timing or the number of workers, so a loader
 * restarted at a saved position yields the same batches. */
#ifndef VDNN_DATA_H
#define VDNN_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "vdnn/status.h"

#define DATA_MAX_CHANNELS 4

/* How an image-folder set crops a training image (data_cfg.train_crop). */
typedef enum { DATA_CROP_RANDOM_RESIZED = 0, DATA_CROP_CENTRE = 1 } data_crop;

typedef struct data_cfg {
    char set[32];            /* fashion-mnist, mnist, cifar10, png, images, synthetic */
    char path[512];          /* folder holding the files (unused for synthetic) */
    char train_list[512];    /* images: "FILE LABEL" lines, FILE relative to path; "" = class folders */
    char test_list[512];
    int train_crop;          /* images: data_crop of a training image (default random-resized) */
    float scale[2];          /* images: random-resized crop's area range (0 = 0.08, 1) */
    float ratio[2];          /* images: its aspect-ratio range, width / height (0 = 3/4, 4/3) */
    int resize;              /* images: shorter side before the centre crop (0 = max(height, width) * 8 / 7) */
    int workers;             /* loader threads (0 = what the cores allow beside the compute) */
    int strict;              /* images: an unreadable file stops the run (0: skipped and counted) */
    int crop_pad;            /* random crop after zero padding by this many pixels; 0 = off */
    int flip;                /* random horizontal flip */
    int nmean, nstd;         /* 0, 1 or C values each; 0 = mean 0 / std 1 */
    float mean[DATA_MAX_CHANNELS], std[DATA_MAX_CHANNELS];
    int synthetic_train;     /* synthetic: number of train / test items and classes */
    int synthetic_test;
    int classes;
} data_cfg;

typedef enum { SPLIT_TRAIN = 0, SPLIT_TEST = 1 } data_split;

typedef struct image_list image_list;

typedef struct dataset {
    int count, c, h, w;      /* items and their shape (an image folder's: the net's input) */
    int classes;             /* labels lie in [0, classes) */
    uint8_t *images;         /* (count, C, H, W), owned; NULL for an image folder */
    int32_t *labels;         /* (count), owned */
    image_list *files;       /* an image folder's files, owned; NULL for the others */
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

/* An image folder's split: dir/<class>/.../FILE (JPEG or PNG, any depth below the class
 * folder; classes sorted by strcmp, files too) or, with `list`, the "FILE LABEL" lines of
 * that file (FILE relative to dir). Only the list is read; no image is decoded. */
vdnn_status images_open(const char *dir, const char *list, int c, int h, int w, dataset **out);
/* The path of an image folder's item i (for messages). */
const char *images_path(const dataset *d, int i);

/* What becomes of one image file: the output shape (the net's input), the crop and the
 * normalisation. */
typedef struct image_xform {
    int c, h, w;             /* output channels (1 or 3) and size */
    int random;              /* 1: random-resized crop (scale, ratio), 0: resize then centre crop */
    float scale[2], ratio[2];
    int resize;              /* shorter side before the centre crop */
    int flip;                /* random horizontal flip */
    float mean[DATA_MAX_CHANNELS], std[DATA_MAX_CHANNELS];
} image_xform;

/* The transform of cfg for a net input of (c, h, w); `train` picks the training crop
 * and flip, else resize and centre crop. */
void image_xform_of(const data_cfg *cfg, int train, int c, int h, int w, image_xform *x);

/* Decodes one JPEG or PNG file held in memory (format from its first bytes; `name` is
 * for messages), applies EXIF orientation, crops, resizes and normalises it into `out`
 * (C, H, W floats). Every random choice comes from `bits`; the same bits give the same
 * floats. */
vdnn_status image_item(const char *name, const uint8_t *file, size_t len, const image_xform *x, uint64_t bits,
                       float *out);

/* Host memory for the loader's batches: a device's pinned memory, so that a batch
 * reaches a GPU with no copy on the host (zero: malloc and free). */
typedef struct loader_mem {
    void *(*alloc)(void *ctx, size_t bytes);
    void (*release)(void *ctx, void *p);
    void *ctx;
} loader_mem;

typedef struct loader_opts {
    int batch;               /* items per batch */
    int shuffle;             /* seeded shuffle per epoch */
    int augment;             /* apply cfg's crop/flip (training only) */
    uint64_t seed;
    const data_cfg *cfg;     /* normalisation, augmentation, workers, strictness; copied */
    int compute_threads;     /* threads the training computes with, beside the workers (0: unknown) */
    loader_mem mem;          /* where the batches live */
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

/* As loader_next(), with no copy: the caller's buffers *x and *y (a whole batch each,
 * from the loader's `mem`) change places with the ready batch's, which the caller then
 * holds until its next call. */
vdnn_status loader_next_swap(loader *l, float **x, int32_t **y, int *n);

/* Where the next loader_next() will read from. */
void loader_position(const loader *l, int *epoch, int *index);

/* Files of an image folder that could not be read and were skipped in the batches
 * loader_next returned since the last call: their number, and in `msgs` (when not NULL)
 * one line per file, "PATH: reason\n", as many as fit in len. Without strictness an unreadable file is
 * replaced by another item drawn from (seed, epoch, position); with it, loader_next
 * fails with the file's message. */
int loader_take_skipped(loader *l, char *msgs, size_t len);

/* The loader's worker threads. */
int loader_workers(const loader *l);

#endif
