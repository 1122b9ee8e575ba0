/* IDX readers for MNIST and Fashion-MNIST: idx3 images (magic 0x00000803) and idx1
 * labels (magic 0x00000801), big-endian dimensions, gzip or plain (zlib's gzread reads
 * both). Every size in a header is checked against the real decompressed length: a
 * short file and trailing bytes are both errors that name the file and the byte
 * counts, and every label must lie in [0, 10). */
#include "data/data_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define IDX_IMAGES_MAGIC 0x00000803u
#define IDX_LABELS_MAGIC 0x00000801u
#define IDX_CLASSES 10
#define IDX_GZ_BUFFER (256 * 1024)
#define IDX_MAX_READ (1u << 30)   /* gzread takes an unsigned and returns an int */

typedef struct idx_file {
    gzFile f;
    const char *path;
    size_t offset;   /* decompressed bytes read so far */
} idx_file;

static vdnn_status idx_open(const char *path, idx_file *x)
{
    x->path = path;
    x->offset = 0;
    errno = 0;
    x->f = gzopen(path, "rb");
    if (!x->f)
        return vdnn_fail(VDNN_EIO, "%s: cannot open (%s)", path, errno ? strerror(errno) : "out of memory");
    gzbuffer(x->f, IDX_GZ_BUFFER);
    return VDNN_OK;
}

/* Reads up to `want` bytes; *got is how many arrived before the end of the data. */
static vdnn_status idx_read(idx_file *x, void *buf, size_t want, size_t *got)
{
    *got = 0;
    while (*got < want) {
        size_t left = want - *got;
        unsigned chunk = left > IDX_MAX_READ ? IDX_MAX_READ : (unsigned)left;
        int r = gzread(x->f, (unsigned char *)buf + *got, chunk);
        if (r < 0) {
            int err;
            const char *msg = gzerror(x->f, &err);
            return vdnn_fail(err == Z_ERRNO ? VDNN_EIO : VDNN_EFORMAT, "%s: read failed after %zu bytes (%s)",
                             x->path, x->offset + *got, err == Z_ERRNO ? strerror(errno) : msg);
        }
        if (r == 0) break;
        *got += (size_t)r;
    }
    x->offset += *got;
    return VDNN_OK;
}

/* Reads exactly `want` bytes of a file expected to hold `total` bytes in all. */
static vdnn_status idx_read_exact(idx_file *x, void *buf, size_t want, size_t total)
{
    size_t got;
    vdnn_status s = idx_read(x, buf, want, &got);
    if (s) return s;
    if (got < want)
        return vdnn_fail(VDNN_EFORMAT, "%s: truncated: expected %zu bytes, found %zu", x->path, total, x->offset);
    return VDNN_OK;
}

/* Fails if anything follows the expected data, reporting the file's real length. */
static vdnn_status idx_expect_end(idx_file *x)
{
    size_t expected = x->offset, got;
    unsigned char scratch[65536];
    do {
        vdnn_status s = idx_read(x, scratch, sizeof scratch, &got);
        if (s) return s;
    } while (got > 0);
    if (x->offset != expected)
        return vdnn_fail(VDNN_EFORMAT, "%s: trailing data: expected %zu bytes, found %zu", x->path, expected, x->offset);
    return VDNN_OK;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads the magic and `ndims` dimensions; the header is 4 * (1 + ndims) bytes.
 * `data_bytes` returns the product of the dimensions (the item bytes that follow). */
static vdnn_status idx_header(idx_file *x, uint32_t magic, int ndims, uint32_t *dims, size_t *data_bytes)
{
    unsigned char h[16];
    size_t hbytes = 4u * (size_t)(1 + ndims), got;
    vdnn_status s = idx_read(x, h, 4, &got);
    if (s) return s;
    if (got < 4) return vdnn_fail(VDNN_EFORMAT, "%s: truncated: %zu bytes, not even an IDX header", x->path, got);
    if (be32(h) != magic)
        return vdnn_fail(VDNN_EFORMAT, "%s: not an IDX %s file (magic 0x%08x, expected 0x%08x)", x->path,
                         ndims == 3 ? "image" : "label", (unsigned)be32(h), (unsigned)magic);
    s = idx_read(x, h + 4, hbytes - 4, &got);
    if (s) return s;
    if (got < hbytes - 4)
        return vdnn_fail(VDNN_EFORMAT, "%s: truncated header: expected %zu bytes, found %zu", x->path, hbytes, x->offset);
    size_t bytes = 1;
    for (int i = 0; i < ndims; i++) {
        dims[i] = be32(h + 4 + 4 * i);
        if (dims[i] == 0 || dims[i] > INT_MAX)
            return vdnn_fail(VDNN_EFORMAT, "%s: dimension %d is %u", x->path, i, (unsigned)dims[i]);
        if (bytes > SIZE_MAX / dims[i])
            return vdnn_fail(VDNN_EFORMAT, "%s: dimensions overflow", x->path);
        bytes *= dims[i];
    }
    *data_bytes = bytes;
    return VDNN_OK;
}

static vdnn_status read_images(idx_file *x, dataset **out)
{
    uint32_t dims[3] = { 0, 0, 0 };
    size_t bytes = 0;
    vdnn_status s = idx_header(x, IDX_IMAGES_MAGIC, 3, dims, &bytes);
    if (s) return s;
    s = dataset_alloc((int)dims[0], 1, (int)dims[1], (int)dims[2], IDX_CLASSES, x->path, out);
    if (s) return s;
    s = idx_read_exact(x, (*out)->images, bytes, 16 + bytes);
    if (!s) s = idx_expect_end(x);
    return s;
}

static vdnn_status read_labels(idx_file *x, dataset *d, const char *images_path)
{
    uint32_t count = 0;
    size_t bytes = 0;
    vdnn_status s = idx_header(x, IDX_LABELS_MAGIC, 1, &count, &bytes);
    if (s) return s;
    if ((int)count != d->count)
        return vdnn_fail(VDNN_EFORMAT, "%s: %u labels, but %s has %d images", x->path, (unsigned)count,
                         images_path, d->count);
    unsigned char *raw = malloc(bytes);
    if (!raw) return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory for %zu labels", x->path, bytes);
    s = idx_read_exact(x, raw, bytes, 8 + bytes);
    if (!s) s = idx_expect_end(x);
    for (size_t i = 0; !s && i < bytes; i++) {
        if (raw[i] >= IDX_CLASSES)
            s = vdnn_fail(VDNN_EFORMAT, "%s: label %d of item %zu is outside [0, %d)", x->path, raw[i], i, IDX_CLASSES);
        d->labels[i] = raw[i];
    }
    free(raw);
    return s;
}

vdnn_status idx_load(const char *images_path, const char *labels_path, dataset **out)
{
    *out = NULL;
    idx_file x;
    dataset *d = NULL;
    vdnn_status s = idx_open(images_path, &x);
    if (s) return s;
    s = read_images(&x, &d);
    gzclose(x.f);
    if (!s) s = idx_open(labels_path, &x);
    if (!s) {
        s = read_labels(&x, d, images_path);
        gzclose(x.f);
    }
    if (s) {
        dataset_free(d);
        return s;
    }
    snprintf(d->source, sizeof d->source, "%s", images_path);
    *out = d;
    return VDNN_OK;
}
