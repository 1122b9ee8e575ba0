/* Fuzz target: the PNG folder reader (data/png_folder.c and libpng behind it), one
 * image in one class folder. The net's shape is the image's own when its header
 * declares at most 64x64 (so decoding goes past the size check), else 8x8; 1 or 3
 * channels by the input's length, so both conversions run. */
#include "tests/fuzz/fuzz.h"

#include <string.h>

#include "data/data.h"

#define SIDE_MAX 64u

static unsigned be32(const uint8_t *p)
{
    return (unsigned)p[0] << 24 | (unsigned)p[1] << 16 | (unsigned)p[2] << 8 | p[3];
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
    fuzz_write(file, "png/class/0.png", data, size);
    dataset *d = NULL;
    if (png_folder_load(fuzz_path(dir, "png"), size % 2 ? 3 : 1, (int)h, (int)w, &d) == VDNN_OK) dataset_free(d);
    return 0;
}
