/* Helpers shared by the data readers and the loader; not part of the public API. */
#ifndef VDNN_DATA_IMPL_H
#define VDNN_DATA_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "data/data.h"

/* Allocates a dataset of `count` items of (c, h, w) with uninitialised pixels and
 * labels, and records `source` for messages. Guards the byte count against overflow.
 * Free with dataset_free(). */
vdnn_status dataset_alloc(int count, int c, int h, int w, int classes, const char *source, dataset **out);
/* As dataset_alloc, around pixels the caller already holds: `images` (malloc'd, count *
 * c * h * w bytes, or NULL for a caller that fills d->images itself) is taken over,
 * also on failure. Readers use it to allocate no more than the data they have seen. */
vdnn_status dataset_wrap(int count, int c, int h, int w, int classes, const char *source, uint8_t *images,
                         dataset **out);

/* Checks cfg's normalisation for a C-channel set: 0, 1 or C values each, every mean
 * finite and every std finite and > 0. */
vdnn_status data_check_norm(const data_cfg *cfg, int c);

/* Per-channel mean and std after expanding cfg's 0, 1 or C values (NULL cfg = 0 / 1). */
void data_norm_values(const data_cfg *cfg, int c, float *mean, float *std);

/* Joins "dir/name" into buf; an error naming both when it does not fit (folders.c). */
vdnn_status data_join(char *buf, size_t len, const char *dir, const char *name);

/* synthetic_make() with the class patterns and the per-item noise drawn from separate
 * seeds, so that a test split can share the train split's patterns. */
vdnn_status synthetic_make_seeded(int count, int c, int h, int w, int classes,
                                  uint64_t pattern_seed, uint64_t noise_seed, dataset **out);

/* Folders (folders.c). The visible entries of dir (no leading '.'), sorted by strcmp:
 * every one (DATA_LIST_ANY), the folders or the regular files among them, each only
 * when `keep` (if given) accepts its name. Sets *names to a malloc'd array of malloc'd
 * strings; free with data_free_names(). An empty folder is not an error here. */
typedef enum { DATA_LIST_ANY, DATA_LIST_DIRS, DATA_LIST_FILES } data_list_kind;
vdnn_status data_list_dir(const char *dir, data_list_kind kind, int (*keep)(const char *name), char ***names,
                          int *count);
/* The class folders of a split folder: its visible sub-folders, sorted. */
vdnn_status data_list_classes(const char *dir, char ***names, int *count);
void data_free_names(char **names, int count);

/* An image folder's file list (images.c makes it). */
struct image_list {
    int count, cap;
    size_t *off;             /* (count) where each path starts in arena */
    char *arena;             /* NUL-terminated paths, one after another */
    size_t used, size;
};
/* Frees an image folder's file list (dataset_free does). */
void images_free(image_list *l);

/* A decoded image: 8-bit samples, interleaved. */
typedef struct img8 {
    int w, h, ch;            /* ch 1 (gray) or 3 (RGB) */
    int orientation;         /* EXIF orientation of the pixels as stored: 1 (none) to 8 */
    uint8_t *px;             /* (h, w, ch), malloc'd */
} img8;
void img8_free(img8 *im);

/* The DCT scaling of a JPEG decode, asked once its header is read: the numerator of
 * n / 8 (1 to 8) for an image of w x h as stored with that EXIF orientation. */
typedef int (*jpeg_scale_fn)(void *ctx, int w, int h, int orientation);

/* Decodes a JPEG held in memory into ch (1 or 3) channels, reduced by scale_of's
 * choice (NULL: full size); `name` is for messages. Free out with img8_free(). */
vdnn_status jpeg_decode(const char *name, const uint8_t *buf, size_t len, int ch, jpeg_scale_fn scale_of,
                        void *ctx, img8 *out);
/* Decodes a PNG held in memory into ch (1 or 3) channels (png_folder.c's rules). */
vdnn_status png_decode(const char *name, const uint8_t *buf, size_t len, int ch, img8 *out);
/* The orientation (1 to 8) in an EXIF APP1 payload ("Exif\0\0" then TIFF); 1 when it
 * has none or is malformed. */
int exif_orientation(const uint8_t *p, size_t len);

#endif
