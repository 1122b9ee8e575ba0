/* CIFAR-10 binary batches: each file is a run of 3073-byte records, one label byte
 * (0..9) followed by a 3x32x32 image already in CHW order. A file whose length is not a
 * whole number of records, or a label above 9, is an error naming the file. */
#include "data/data_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdnn/file.h"

#define CIFAR_C 3
#define CIFAR_HW 32
#define CIFAR_IMAGE (CIFAR_C * CIFAR_HW * CIFAR_HW)
#define CIFAR_RECORD (1 + CIFAR_IMAGE)
#define CIFAR_CLASSES 10
#define CIFAR_CHUNK 1024   /* records read per fread */

/* The record count comes from the file's length: nothing in the file can claim more. */
static vdnn_status open_batch(const char *path, FILE **f, long *records)
{
    *records = 0;
    long long size = 0;
    vdnn_status s = vdnn_file_open(path, "CIFAR-10 batch file", 0, 0, f, &size);
    if (s) return s;
    if (size == 0 || size % CIFAR_RECORD != 0 || size / CIFAR_RECORD > INT_MAX) {
        fclose(*f);
        *f = NULL;
        return vdnn_fail(VDNN_EFORMAT, "%s: %lld bytes is not a positive multiple of the %d-byte CIFAR-10 record",
                         path, size, CIFAR_RECORD);
    }
    *records = (long)(size / CIFAR_RECORD);
    return VDNN_OK;
}

static vdnn_status count_records(const char **paths, int npaths, int *count)
{
    long total = 0;
    for (int i = 0; i < npaths; i++) {
        FILE *f;
        long n;
        vdnn_status s = open_batch(paths[i], &f, &n);
        if (s) return s;
        fclose(f);
        total += n;
        if (total > INT_MAX) return vdnn_fail(VDNN_EFORMAT, "%s: too many CIFAR-10 records in all", paths[i]);
    }
    *count = (int)total;
    return VDNN_OK;
}

/* Copies `n` records from buf into d starting at item `first`. */
static vdnn_status unpack(const char *path, const unsigned char *buf, long n, long file_first, int first, dataset *d)
{
    for (long r = 0; r < n; r++) {
        const unsigned char *rec = buf + r * CIFAR_RECORD;
        if (rec[0] >= CIFAR_CLASSES)
            return vdnn_fail(VDNN_EFORMAT, "%s: record %ld has label %d (CIFAR-10 labels are 0..9)",
                             path, file_first + r, rec[0]);
        d->labels[first + r] = rec[0];
        memcpy(d->images + (size_t)(first + r) * CIFAR_IMAGE, rec + 1, CIFAR_IMAGE);
    }
    return VDNN_OK;
}

/* Reads one batch file into d at item *next, advancing *next. */
static vdnn_status read_batch(const char *path, unsigned char *buf, dataset *d, int *next)
{
    FILE *f;
    long records;
    vdnn_status s = open_batch(path, &f, &records);
    if (s) return s;
    if (*next + records > d->count) s = vdnn_fail(VDNN_EFORMAT, "%s: grew while being read", path);
    for (long done = 0; !s && done < records;) {
        long n = records - done < CIFAR_CHUNK ? records - done : CIFAR_CHUNK;
        if (fread(buf, CIFAR_RECORD, (size_t)n, f) != (size_t)n) {
            s = vdnn_fail(VDNN_EIO, "%s: read failed at record %ld (%s)", path, done,
                          ferror(f) ? strerror(errno) : "file shrank while being read");
            break;
        }
        s = unpack(path, buf, n, done, *next, d);
        *next += (int)n;
        done += n;
    }
    fclose(f);
    return s;
}

vdnn_status cifar10_load(const char **paths, int npaths, dataset **out)
{
    *out = NULL;
    if (npaths < 1) return vdnn_fail(VDNN_EINVAL, "cifar10: no batch files given");
    int count = 0;
    vdnn_status s = count_records(paths, npaths, &count);
    if (s) return s;
    dataset *d;
    s = dataset_alloc(count, CIFAR_C, CIFAR_HW, CIFAR_HW, CIFAR_CLASSES, paths[0], &d);
    if (s) return s;
    unsigned char *buf = malloc((size_t)CIFAR_CHUNK * CIFAR_RECORD);
    if (!buf) s = vdnn_fail(VDNN_ENOMEM, "%s: out of host memory for a read buffer", paths[0]);
    int next = 0;
    for (int i = 0; !s && i < npaths; i++) s = read_batch(paths[i], buf, d, &next);
    if (!s && next != count) s = vdnn_fail(VDNN_EFORMAT, "%s: changed while being read", paths[npaths - 1]);
    free(buf);
    if (s) {
        dataset_free(d);
        return s;
    }
    *out = d;
    return VDNN_OK;
}
