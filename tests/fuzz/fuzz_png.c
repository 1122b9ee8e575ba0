/* Fuzz target: the PNG folder reader (data/png_folder.c and libpng behind it), one
 * image in one class folder. The net's shape is the image's own when its header
 * declares at most 64x64 (so decoding goes past the size check), else 8x8; 3 channels
 * when the input's length is a multiple of 3, else 1, so both conversions run. An
 * input whose length is a multiple of 4 gets every chunk's CRC recomputed first, so
 * that mutations reach the decoder instead of stopping at libpng's checksum. */
#include "tests/fuzz/fuzz.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data/data.h"

#define SIDE_MAX 64u

static unsigned be32(const uint8_t *p)
{
    return (unsigned)p[0] << 24 | (unsigned)p[1] << 16 | (unsigned)p[2] << 8 | p[3];
}

/* Recomputes the CRC of every whole chunk after the 8-byte signature. */
static void fix_crcs(uint8_t *p, size_t size)
{
    for (size_t at = 8; size - at >= 12;) {
        size_t len = be32(p + at);
        if (len > size - at - 12) break;
        unsigned crc = (unsigned)crc32(0L, p + at + 4, (uInt)(len + 4));
        for (int i = 0; i < 4; i++) p[at + 8 + len + i] = (uint8_t)(crc >> (24 - 8 * i));
        at += 12 + len;
    }
}

FUZZ_ENTRY(png)
{
    unsigned w = 8, h = 8;
    if (size >= 24 && !memcmp(data + 12, "IHDR", 4) && be32(data + 16) - 1 < SIDE_MAX &&
        be32(data + 20) - 1 < SIDE_MAX) {
        w = be32(data + 16);
        h = be32(data + 20);
    }
    char file[FUZZ_PATH_MAX], dir[FUZZ_PATH_MAX];
    uint8_t *fixed = NULL;
    if (size % 4 == 0 && size >= 8 && (fixed = malloc(size)) != NULL) {
        memcpy(fixed, data, size);
        fix_crcs(fixed, size);
    }
    fuzz_write(file, "png/class/0.png", fixed ? fixed : data, size);
    free(fixed);
    dataset *d = NULL;
    if (png_folder_load(fuzz_path(dir, "png"), size % 3 ? 1 : 3, (int)h, (int)w, &d) == VDNN_OK) dataset_free(d);
    return 0;
}
