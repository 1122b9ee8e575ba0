/* Synthetic data: a learnable task that needs no files.
 *
 * Each class has a fixed random pattern, coarse blocks of constant intensity per
 * channel (so the signal survives pooling), and an item is its class pattern plus
 * per-pixel noise, clamped to 0..255. A small net separates the classes within an
 * epoch. Everything is a pure function of the seeds: the pattern of class k comes from
 * rng_hash(pattern_seed, k, 0), the label and noise of item i from noise_seed and i, so
 * the same call always yields the same bytes. */
#include "data/data_impl.h"

#include <stdint.h>
#include <stdlib.h>

#include "vdnn/rng.h"

#define SYNTH_GRID 4          /* pattern blocks per side */
#define SYNTH_NOISE 70.0f     /* noise std is about 0.577 * this, ~40 grey levels */

static int synth_clamp(float v)
{
    if (v < 0.0f) return 0;
    if (v > 255.0f) return 255;
    return (int)(v + 0.5f);
}

/* Fills `pattern` (classes, C, H, W) with per-class block patterns. */
static void make_patterns(uint8_t *pattern, int classes, int c, int h, int w, uint64_t seed)
{
    int bh = (h + SYNTH_GRID - 1) / SYNTH_GRID, bw = (w + SYNTH_GRID - 1) / SYNTH_GRID;
    size_t item = (size_t)c * h * w;
    for (int k = 0; k < classes; k++) {
        rng r;
        rng_seed(&r, rng_hash(seed, (uint64_t)k, 0));
        uint8_t cell[DATA_MAX_CHANNELS][SYNTH_GRID][SYNTH_GRID];
        for (int ch = 0; ch < c; ch++)
            for (int gy = 0; gy < SYNTH_GRID; gy++)
                for (int gx = 0; gx < SYNTH_GRID; gx++) cell[ch][gy][gx] = (uint8_t)rng_below(&r, 256);
        uint8_t *p = pattern + (size_t)k * item;
        for (int ch = 0; ch < c; ch++)
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++) *p++ = cell[ch][y / bh][x / bw];
    }
}

/* Roughly normal noise from one 64-bit draw: the sum of four 16-bit uniforms. */
static float synth_noise(rng *r)
{
    uint64_t b = rng_next(r);
    float sum = (float)(b & 0xFFFF) + (float)((b >> 16) & 0xFFFF) + (float)((b >> 32) & 0xFFFF) + (float)(b >> 48);
    return (sum / 65536.0f - 2.0f) * SYNTH_NOISE;
}

static void make_items(dataset *d, const uint8_t *pattern, uint64_t seed)
{
    size_t item = (size_t)d->c * d->h * d->w;
    for (int i = 0; i < d->count; i++) {
        int label = (int)(rng_hash(seed, (uint64_t)i, 0) % (uint64_t)d->classes);
        rng r;
        rng_seed(&r, rng_hash(seed, (uint64_t)i, 1));
        const uint8_t *p = pattern + (size_t)label * item;
        uint8_t *dst = d->images + (size_t)i * item;
        for (size_t j = 0; j < item; j++) dst[j] = (uint8_t)synth_clamp((float)p[j] + synth_noise(&r));
        d->labels[i] = label;
    }
}

vdnn_status synthetic_make_seeded(int count, int c, int h, int w, int classes,
                                  uint64_t pattern_seed, uint64_t noise_seed, dataset **out)
{
    *out = NULL;
    if (c < 1 || c > DATA_MAX_CHANNELS || h < 1 || w < 1 || count < 1 || classes < 1)
        return vdnn_fail(VDNN_EINVAL, "synthetic: bad size: %d items of %dx%dx%d in %d classes "
                         "(need items >= 1, 1..%d channels, classes >= 1)", count, c, h, w, classes, DATA_MAX_CHANNELS);
    dataset *d;
    vdnn_status s = dataset_alloc(count, c, h, w, classes, "synthetic", &d);
    if (s) return s;
    size_t item = (size_t)c * (size_t)h * (size_t)w;
    uint8_t *pattern = (size_t)classes <= SIZE_MAX / item ? malloc((size_t)classes * item) : NULL;
    if (!pattern) {
        dataset_free(d);
        return vdnn_fail(VDNN_ENOMEM, "synthetic: out of host memory for %d class patterns", classes);
    }
    make_patterns(pattern, classes, c, h, w, pattern_seed);
    make_items(d, pattern, noise_seed);
    free(pattern);
    *out = d;
    return VDNN_OK;
}

vdnn_status synthetic_make(int count, int c, int h, int w, int classes, uint64_t seed, dataset **out)
{
    return synthetic_make_seeded(count, c, h, w, classes, seed, seed, out);
}
