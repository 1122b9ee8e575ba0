/* Fuzz target: the IDX reader (data/idx.c) on an images file and a labels file.
 * The input is a 4-byte little-endian length L, then L bytes of the images file, then
 * the labels file. fuzz_idx_gz.c includes this file with FUZZ_IDX_GZ set: both files
 * are then gzip-compressed before the reader sees them, so the fuzzer explores what
 * they hold while zlib's container stays valid. */
#include "tests/fuzz/fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

#include "data/data.h"

#ifndef FUZZ_IDX_GZ
#define FUZZ_IDX_GZ 0
#define FUZZ_IDX_NAME idx
#endif

static const char *put(char *buf, const char *name, const uint8_t *data, size_t size)
{
    if (!FUZZ_IDX_GZ) return fuzz_write(buf, name, data, size);
    fuzz_path(buf, name);
    gzFile f = gzopen(buf, "wb");
    if (!f || (size && gzwrite(f, data, (unsigned)size) != (int)size) || gzclose(f) != Z_OK) {
        fprintf(stderr, "fuzz: cannot write %s\n", buf);
        abort();
    }
    return buf;
}

FUZZ_ENTRY(FUZZ_IDX_NAME)
{
    if (size < 4) return 0;
    size_t len = (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24;
    if (len > size - 4) len = size - 4;
    char images[FUZZ_PATH_MAX], labels[FUZZ_PATH_MAX];
    put(images, "images-idx3", data + 4, len);
    put(labels, "labels-idx1", data + 4 + len, size - 4 - len);
    dataset *d = NULL;
    if (idx_load(images, labels, &d) == VDNN_OK) dataset_free(d);
    return 0;
}
