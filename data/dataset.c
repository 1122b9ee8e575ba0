/* The dataset and the small helpers the readers share: allocation with overflow guards,
 * normalisation checks (data_impl.h). dataset_load, which picks the reader, is load.c;
 * folders and paths are folders.c. */
#include "data/data_impl.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether count items of c x h x w make a shape whose bytes (and labels) fit size_t. */
static vdnn_status check_size(int count, int c, int h, int w, const char *source, size_t *item)
{
    if (count <= 0 || c <= 0 || h <= 0 || w <= 0)
        return vdnn_fail(VDNN_EINVAL, "%s: bad data set shape %d x %dx%dx%d", source, count, c, h, w);
    *item = (size_t)c * (size_t)h * (size_t)w;
    if (*item > SIZE_MAX / (size_t)count || (size_t)count > SIZE_MAX / sizeof(int32_t))
        return vdnn_fail(VDNN_EINVAL, "%s: data set of %d x %dx%dx%d is too large", source, count, c, h, w);
    return VDNN_OK;
}

vdnn_status dataset_wrap(int count, int c, int h, int w, int classes, const char *source, uint8_t *images,
                         dataset **out)
{
    *out = NULL;
    size_t item = 0;
    vdnn_status s = check_size(count, c, h, w, source, &item);
    dataset *d = s ? NULL : calloc(1, sizeof *d);
    if (!s && !d) s = vdnn_fail(VDNN_ENOMEM, "%s: out of host memory for the data set", source);
    if (s) {
        free(images);
        return s;
    }
    d->images = images;
    d->labels = malloc(sizeof(int32_t) * (size_t)count);
    if (!d->labels) {
        dataset_free(d);
        return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory for %d labels", source, count);
    }
    d->count = count; d->c = c; d->h = h; d->w = w; d->classes = classes;
    snprintf(d->source, sizeof d->source, "%s", source);
    *out = d;
    return VDNN_OK;
}

vdnn_status dataset_alloc(int count, int c, int h, int w, int classes, const char *source, dataset **out)
{
    *out = NULL;
    size_t item = 0;
    vdnn_status s = check_size(count, c, h, w, source, &item);
    if (s) return s;
    uint8_t *images = malloc(item * (size_t)count);
    if (!images)
        return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory for %d images of %dx%dx%d", source, count, c, h, w);
    return dataset_wrap(count, c, h, w, classes, source, images, out);
}

void images_free(image_list *l)
{
    if (!l) return;
    free(l->off);
    free(l->arena);
    free(l);
}

void dataset_free(dataset *d)
{
    if (!d) return;
    free(d->images);
    free(d->labels);
    images_free(d->files);
    free(d);
}

static vdnn_status check_norm_list(const char *what, int n, const float *v, int c, int positive)
{
    if (n != 0 && n != 1 && n != c)
        return vdnn_fail(VDNN_EINVAL, "data: %s has %d values; expected 0, 1 or %d (the channels)", what, n, c);
    for (int i = 0; i < n; i++) {
        if (!isfinite(v[i]) || (positive && !(v[i] > 0)))
            return vdnn_fail(VDNN_EINVAL, "data: %s value %d is %g; it must be %s", what, i + 1,
                             (double)v[i], positive ? "finite and > 0" : "finite");
    }
    return VDNN_OK;
}

vdnn_status data_check_norm(const data_cfg *cfg, int c)
{
    if (!cfg) return VDNN_OK;
    if (c < 1 || c > DATA_MAX_CHANNELS)
        return vdnn_fail(VDNN_EINVAL, "data: %d channels; at most %d are supported", c, DATA_MAX_CHANNELS);
    vdnn_status s = check_norm_list("mean", cfg->nmean, cfg->mean, c, 0);
    if (s) return s;
    return check_norm_list("std", cfg->nstd, cfg->std, c, 1);
}

void data_norm_values(const data_cfg *cfg, int c, float *mean, float *std)
{
    for (int i = 0; i < c; i++) {
        mean[i] = 0.0f;
        std[i] = 1.0f;
        if (cfg && cfg->nmean > 0) mean[i] = cfg->mean[cfg->nmean == 1 ? 0 : i];
        if (cfg && cfg->nstd > 0) std[i] = cfg->std[cfg->nstd == 1 ? 0 : i];
    }
}
