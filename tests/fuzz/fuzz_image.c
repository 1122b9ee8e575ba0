/* Fuzz target: one image file into one input item (data/transform.c, with libjpeg-turbo
 * and libpng behind it): the format sniffed from the first bytes, the EXIF orientation,
 * the DCT-scaled decode, the crop and the resampling. The last input byte, when there
 * are more than 16, picks the transform (it is cut off first): bit 0 a random-resized
 * or a centre crop, bit 1 one or three channels, bit 2 flip, bits 3-4 the output size
 * (1x1 to 24x16, so that both enlarging and shrinking run), and the bits of the crop
 * come from the input's length. */
#include "tests/fuzz/fuzz.h"

#include <stdlib.h>

#include "data/data.h"

FUZZ_ENTRY(image)
{
    unsigned pick = 0;
    if (size > 16) pick = data[--size];
    static const int sizes[4][2] = {{8, 8}, {1, 1}, {24, 16}, {5, 11}};
    data_cfg cfg = {0};
    cfg.flip = (pick >> 2) & 1;
    cfg.train_crop = pick & 1 ? DATA_CROP_CENTRE : DATA_CROP_RANDOM_RESIZED;
    image_xform x;
    int c = pick & 2 ? 3 : 1, h = sizes[(pick >> 3) & 3][0], w = sizes[(pick >> 3) & 3][1];
    image_xform_of(&cfg, 1, c, h, w, &x);
    float *out = malloc(sizeof(float) * (size_t)c * h * w);
    if (out) image_item("fuzz-image", data, size, &x, (uint64_t)size * 0x9E3779B97F4A7C15ull, out);
    free(out);
    return 0;
}
