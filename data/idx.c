/* IDX readers for MNIST and Fashion-MNIST: idx3 images (magic 0x00000803) and idx1
 * labels (magic 0x00000801), big-endian dimensions, gzip or plain (zlib's gzread reads
 * both). Every size in a header is checked against the real decompressed length: a
 * short file and trailing bytes are both errors that name the file and the byte
 * counts, and every label must lie in [0, 10).
 *
 * Nothing is allocated on a header's word alone: a plain file's header is checked
 * against the file's length before its data is read, and a gzip file's data is read
 * into a buffer that grows as bytes arrive, so a small file that declares huge
 * dimensions fails at its real end instead of allocating what it claims. */
#include "data/data_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "vdnn/file.h"

#define IDX_IMAGES_MAGIC 0x00000803u
#define IDX_LABELS_MAGIC 0x00000801u
#define IDX_CLASSES 10
#define IDX_GZ_BUFFER (256 * 1024)
#define IDX_MAX_READ (1u << 30)   /* gzread takes an unsigned and returns an int */
#define IDX_FIRST_CHUNK ((size_t)1 << 20)   /* a gzip file's data buffer starts here, then doubles */
#define IDX_TRAILING_MAX ((size_t)64 << 20)  /* trailing bytes counted before giving up */

typedef struct idx_file {
    gzFile f;
    const char *path;
    size_t offset;   /* decompressed bytes read so far */
    long long size;  /* the file's length on disk */
} idx_file;

static vdnn_status idx_open(const char *path, idx_file *x)
{
    x->path = path;
    x->offset = 0;
    FILE *fp = NULL;
    vdnn_status s = vdnn_file_open(path, "IDX file", 0, 0, &fp, &x->size);
    if (s) return s;
    int fd = dup(fileno(fp));
    fclose(fp);
    errno = 0;
    x->f = fd >= 0 ? gzdopen(fd, "rb") : NULL;
    if (!x->f) {
        if (fd >= 0) close(fd);
        return vdnn_fail(VDNN_EIO, "%s: cannot open (%s)", path, errno ? strerror(errno) : "out of memory");
    }
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

/* A plain file's length must be exactly what its header declares: checked before any
 * data is read or allocated. (A gzip file's is only known by decompressing it.) */
static vdnn_status idx_check_length(idx_file *x, size_t total)
{
    if (!gzdirect(x->f) || (unsigned long long)x->size == total) return VDNN_OK;
    return vdnn_fail(VDNN_EFORMAT, "%s: %s: expected %zu bytes, found %lld", x->path,
                     (unsigned long long)x->size < total ? "truncated" : "trailing data", total, x->size);
}

/* Reads the `want` data bytes that follow the header into a new buffer (*out, owned by
 * the caller), of a file expected to hold `total` bytes in all. The buffer grows as the
 * data arrives, so a header cannot make it larger than the data. */
static vdnn_status idx_read_data(idx_file *x, size_t want, size_t total, unsigned char **out)
{
    size_t cap = want < IDX_FIRST_CHUNK ? want : IDX_FIRST_CHUNK, have = 0;
    unsigned char *buf = malloc(cap ? cap : 1);
    vdnn_status s = buf ? VDNN_OK : vdnn_fail(VDNN_ENOMEM, "%s: out of host memory", x->path);
    while (!s && have < want) {
        if (have == cap) {
            cap = cap > want / 2 ? want : 2 * cap;
            unsigned char *bigger = realloc(buf, cap);
            if (!bigger) {
                s = vdnn_fail(VDNN_ENOMEM, "%s: out of host memory for %zu bytes of data", x->path, cap);
                break;
            }
            buf = bigger;
        }
        size_t got;
        s = idx_read(x, buf + have, cap - have, &got);
        if (!s && got == 0)
            s = vdnn_fail(VDNN_EFORMAT, "%s: truncated: expected %zu bytes, found %zu", x->path, total, x->offset);
        have += got;
    }
    if (s) {
        free(buf);
        return s;
    }
    *out = buf;
    return VDNN_OK;
}

/* Fails if anything follows the expected data, reporting the file's real length (up to
 * IDX_TRAILING_MAX more bytes: a gzip file's trailing data could decompress for ages). */
static vdnn_status idx_expect_end(idx_file *x)
{
    size_t expected = x->offset, got;
    unsigned char scratch[65536];
    do {
        vdnn_status s = idx_read(x, scratch, sizeof scratch, &got);
        if (s) return s;
    } while (got > 0 && x->offset - expected < IDX_TRAILING_MAX);
    if (x->offset != expected)
        return vdnn_fail(VDNN_EFORMAT, "%s: trailing data: expected %zu bytes, found %s%zu", x->path, expected,
                         got ? "more than " : "", x->offset);
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
    unsigned char *pixels = NULL;
    vdnn_status s = idx_header(x, IDX_IMAGES_MAGIC, 3, dims, &bytes);
    if (!s && bytes > SIZE_MAX - 16) s = vdnn_fail(VDNN_EFORMAT, "%s: dimensions overflow", x->path);
    if (!s) s = idx_check_length(x, 16 + bytes);
    if (!s) s = idx_read_data(x, bytes, 16 + bytes, &pixels);
    if (!s) s = idx_expect_end(x);
    if (!s) s = dataset_wrap((int)dims[0], 1, (int)dims[1], (int)dims[2], IDX_CLASSES, x->path, pixels, out);
    else free(pixels);
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
    unsigned char *raw = NULL;
    s = idx_check_length(x, 8 + bytes);
    if (!s) s = idx_read_data(x, bytes, 8 + bytes, &raw);
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
