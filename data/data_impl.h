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

/* Joins "dir/name" into buf; an error naming both when it does not fit. */
vdnn_status data_join(char *buf, size_t len, const char *dir, const char *name);

/* synthetic_make() with the class patterns and the per-item noise drawn from separate
 * seeds, so that a test split can share the train split's patterns. */
vdnn_status synthetic_make_seeded(int count, int c, int h, int w, int classes,
                                  uint64_t pattern_seed, uint64_t noise_seed, dataset **out);

/* The class folders of a PNG split folder (visible sub-folders, sorted by strcmp).
 * Sets *names to a malloc'd array of malloc'd strings; free with data_free_names().
 * Zero classes is not an error here; callers decide. */
vdnn_status png_list_classes(const char *dir, char ***names, int *count);
void data_free_names(char **names, int count);

#endif
