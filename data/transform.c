/* One image file into one input item: decode, orient, crop, resize, flip, normalise.
 *
 * The crop is chosen on the image as it is displayed (after its EXIF orientation), in
 * its full-size pixels, as torchvision does:
 *  - random-resized crop (training): up to 10 draws of an area in [scale] of the image's
 *    and a log-uniform aspect ratio in [ratio]; the first that fits is placed uniformly;
 *    when none fits, the largest centred crop whose ratio lies in [ratio];
 *  - resize then centre crop (testing): the shorter side scaled to `resize`, then the
 *    net's height x width cut from the centre.
 * A JPEG is decoded at the smallest DCT scaling (n/8) that keeps the crop at least the
 * output's size, so a crop much smaller than a large photo costs a fraction of a full
 * decode. The crop is then resampled to the output with a triangle (bilinear) filter
 * widened by the reduction, as PIL's antialiased resize does, so that shrinking does
 * not alias. Every random choice comes from the item's bits (loader.c derives them
 * from seed, epoch and position). */
#include "data/data_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vdnn/rng.h"

#define CROP_ATTEMPTS 10

/* A crop of the displayed image, in its full-size pixels. */
typedef struct crop {
    double x, y, w, h;
    int flip;
} crop;

void image_xform_of(const data_cfg *cfg, int train, int c, int h, int w, image_xform *x)
{
    memset(x, 0, sizeof *x);
    x->c = c;
    x->h = h;
    x->w = w;
    x->random = train && cfg && cfg->train_crop == DATA_CROP_RANDOM_RESIZED;
    x->flip = train && cfg && cfg->flip;
    x->scale[0] = cfg && cfg->scale[1] > 0 ? cfg->scale[0] : 0.08f;
    x->scale[1] = cfg && cfg->scale[1] > 0 ? cfg->scale[1] : 1.0f;
    x->ratio[0] = cfg && cfg->ratio[1] > 0 ? cfg->ratio[0] : 3.0f / 4.0f;
    x->ratio[1] = cfg && cfg->ratio[1] > 0 ? cfg->ratio[1] : 4.0f / 3.0f;
    int side = h > w ? h : w;
    x->resize = cfg && cfg->resize > 0 ? cfg->resize : (side * 8 + 3) / 7;
    data_norm_values(cfg, c, x->mean, x->std);
}

static void choose_random(const image_xform *x, int W, int H, rng *r, crop *c)
{
    double area = (double)W * H, lr0 = log(x->ratio[0]), lr1 = log(x->ratio[1]);
    for (int t = 0; t < CROP_ATTEMPTS; t++) {
        double target = area * (x->scale[0] + (x->scale[1] - x->scale[0]) * rng_uniform(r));
        double ar = exp(lr0 + (lr1 - lr0) * rng_uniform(r));
        long w = lround(sqrt(target * ar)), h = lround(sqrt(target / ar));
        if (w > 0 && h > 0 && w <= W && h <= H) {
            c->y = rng_below(r, (uint32_t)(H - h + 1));
            c->x = rng_below(r, (uint32_t)(W - w + 1));
            c->w = (double)w;
            c->h = (double)h;
            return;
        }
    }
    double in = (double)W / H, w = W, h = H;
    if (in < x->ratio[0]) h = fmax(1.0, round(w / x->ratio[0]));
    else if (in > x->ratio[1]) w = fmax(1.0, round(h * x->ratio[1]));
    c->w = w;
    c->h = h;
    c->x = floor((W - w) / 2);
    c->y = floor((H - h) / 2);
}

/* The crop of a displayed image of W x H. */
static void choose_crop(const image_xform *x, int W, int H, uint64_t bits, crop *c)
{
    rng r;
    rng_seed(&r, bits);
    c->flip = x->flip && (rng_next(&r) >> 63);
    if (x->random) {
        choose_random(x, W, H, &r, c);
        return;
    }
    double k = (double)x->resize / (W < H ? W : H);
    c->w = fmin(x->w / k, W);
    c->h = fmin(x->h / k, H);
    c->x = (W - c->w) / 2;
    c->y = (H - c->h) / 2;
}

typedef struct jpeg_ctx {
    const image_xform *x;
    uint64_t bits;
    crop c;
    int W, H;                /* the displayed full-size image */
} jpeg_ctx;

static int displayed_swaps(int orientation) { return orientation >= 5; }

/* jpeg_scale_fn: picks the crop on the full-size image, then the smallest n/8 that
 * keeps it at least the output's size. */
static int jpeg_scale(void *ctx, int w, int h, int orientation)
{
    jpeg_ctx *j = ctx;
    j->W = displayed_swaps(orientation) ? h : w;
    j->H = displayed_swaps(orientation) ? w : h;
    choose_crop(j->x, j->W, j->H, j->bits, &j->c);
    double need = fmax(j->x->w / j->c.w, j->x->h / j->c.h);
    int n = (int)ceil(8 * need - 1e-9);
    return n < 1 ? 1 : n > 8 ? 8 : n;
}

/* Turns the stored pixels upright: display (dx, dy) takes stored (sx, sy). */
static vdnn_status orient(img8 *im, const char *name)
{
    int o = im->orientation, W = im->w, H = im->h, ch = im->ch;
    if (o <= 1 || o > 8) return VDNN_OK;
    int dw = displayed_swaps(o) ? H : W, dh = displayed_swaps(o) ? W : H;
    uint8_t *out = malloc((size_t)W * H * ch);
    if (!out) return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory turning the image upright", name);
    for (int dy = 0; dy < dh; dy++) {
        for (int dx = 0; dx < dw; dx++) {
            int sx = dx, sy = dy;
            switch (o) {
            case 2: sx = W - 1 - dx; break;
            case 3: sx = W - 1 - dx; sy = H - 1 - dy; break;
            case 4: sy = H - 1 - dy; break;
            case 5: sx = dy; sy = dx; break;
            case 6: sx = dy; sy = H - 1 - dx; break;
            case 7: sx = W - 1 - dy; sy = H - 1 - dx; break;
            case 8: sx = W - 1 - dy; sy = dx; break;
            default: break;
            }
            memcpy(out + ((size_t)dy * dw + dx) * ch, im->px + ((size_t)sy * W + sx) * ch, (size_t)ch);
        }
    }
    free(im->px);
    im->px = out;
    im->w = dw;
    im->h = dh;
    im->orientation = 1;
    return VDNN_OK;
}

/* One axis of the resampling: for each of `out` outputs, the first input pixel, how
 * many it reads and their weights (max per output), over the crop [x0, x0 + len) of
 * an axis of `in` pixels. */
typedef struct taps {
    int max;
    int *first, *count;      /* (out) */
    float *w;                /* (out, max) */
} taps;

static void taps_free(taps *t)
{
    free(t->first);
    free(t->count);
    free(t->w);
}

static vdnn_status make_taps(double x0, double len, int in, int out, taps *t)
{
    double scale = len / out, fs = scale > 1 ? scale : 1, support = fs;
    int lo = (int)floor(x0), hi = (int)ceil(x0 + len);
    if (lo < 0) lo = 0;
    if (hi > in) hi = in;
    if (hi <= lo) {
        if (lo >= in) lo = in - 1;
        hi = lo + 1;
    }
    t->max = (int)ceil(2 * support) + 2;
    t->first = malloc(sizeof(int) * (size_t)out);
    t->count = malloc(sizeof(int) * (size_t)out);
    t->w = malloc(sizeof(float) * (size_t)out * t->max);
    if (!t->first || !t->count || !t->w) return VDNN_ENOMEM;
    for (int i = 0; i < out; i++) {
        double centre = x0 + (i + 0.5) * scale;
        int a = (int)floor(centre - support + 0.5), b = (int)floor(centre + support + 0.5);
        if (a < lo) a = lo;
        if (b > hi) b = hi;
        if (b - a > t->max) b = a + t->max;
        float *w = t->w + (size_t)i * t->max;
        double sum = 0;
        for (int j = a; j < b; j++) {
            double v = 1 - fabs((j + 0.5 - centre) / fs);
            w[j - a] = (float)(v > 0 ? v : 0);
            sum += w[j - a];
        }
        if (b <= a || sum <= 0) {   /* a crop thinner than a pixel: the nearest one */
            a = (int)floor(centre);
            a = a < lo ? lo : a >= hi ? hi - 1 : a;
            b = a + 1;
            w[0] = 1;
            sum = 1;
        }
        for (int j = 0; j < b - a; j++) w[j] = (float)(w[j] / sum);
        t->first[i] = a;
        t->count[i] = b - a;
    }
    return VDNN_OK;
}

/* Resamples crop c of im (displayed, full-size coordinates scaled by sx, sy to im's)
 * into out (C, H, W), flipped and normalised. */
static vdnn_status resample(const img8 *im, const crop *c, double sx, double sy, const image_xform *x,
                            const char *name, float *out)
{
    taps th = {0}, tv = {0};
    float *tmp = NULL;
    vdnn_status s = make_taps(c->x * sx, c->w * sx, im->w, x->w, &th);
    if (!s) s = make_taps(c->y * sy, c->h * sy, im->h, x->h, &tv);
    int ylo = 0, yhi = 0, C = x->c;
    if (!s) {
        ylo = tv.first[0];
        yhi = tv.first[x->h - 1] + tv.count[x->h - 1];
        tmp = malloc(sizeof(float) * (size_t)(yhi - ylo) * x->w * C);
        if (!tmp) s = VDNN_ENOMEM;
    }
    if (s) {
        taps_free(&th);
        taps_free(&tv);
        return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory resizing", name);
    }
    for (int y = ylo; y < yhi; y++) {
        const uint8_t *row = im->px + (size_t)y * im->w * C;
        float *t = tmp + (size_t)(y - ylo) * x->w * C;
        for (int ox = 0; ox < x->w; ox++) {
            const float *w = th.w + (size_t)ox * th.max;
            const uint8_t *p = row + (size_t)th.first[ox] * C;
            for (int k = 0; k < C; k++) {
                float v = 0;
                for (int j = 0; j < th.count[ox]; j++) v += w[j] * p[j * C + k];
                t[ox * C + k] = v;
            }
        }
    }
    size_t plane = (size_t)x->h * x->w;
    for (int k = 0; k < C; k++) {
        float a = 1.0f / (255.0f * x->std[k]), b = -x->mean[k] / x->std[k];
        for (int oy = 0; oy < x->h; oy++) {
            const float *w = tv.w + (size_t)oy * tv.max;
            const float *t0 = tmp + (size_t)(tv.first[oy] - ylo) * x->w * C + k;
            float *o = out + k * plane + (size_t)oy * x->w;
            for (int ox = 0; ox < x->w; ox++) {
                float v = 0;
                for (int j = 0; j < tv.count[oy]; j++) v += w[j] * t0[((size_t)j * x->w + ox) * C];
                o[c->flip ? x->w - 1 - ox : ox] = v * a + b;
            }
        }
    }
    free(tmp);
    taps_free(&th);
    taps_free(&tv);
    return VDNN_OK;
}

static int is_jpeg(const uint8_t *p, size_t len) { return len >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF; }
static int is_png(const uint8_t *p, size_t len) { return len >= 8 && !memcmp(p, "\x89PNG\r\n\x1a\n", 8); }

vdnn_status image_item(const char *name, const uint8_t *file, size_t len, const image_xform *x, uint64_t bits,
                       float *out)
{
    if ((x->c != 1 && x->c != 3) || x->h < 1 || x->w < 1)
        return vdnn_fail(VDNN_EINVAL, "%s: image files give 1 or 3 channels; the net expects %dx%dx%d", name, x->c,
                         x->h, x->w);
    jpeg_ctx j = {x, bits, {0, 0, 0, 0, 0}, 0, 0};
    img8 im = {0};
    vdnn_status s;
    if (is_jpeg(file, len)) {
        s = jpeg_decode(name, file, len, x->c, jpeg_scale, &j, &im);
    } else if (is_png(file, len)) {
        s = png_decode(name, file, len, x->c, &im);
        if (!s) {
            j.W = im.w;
            j.H = im.h;
            choose_crop(x, im.w, im.h, bits, &j.c);
        }
    } else {
        return vdnn_fail(VDNN_EFORMAT, "%s: not a JPEG or PNG file (%s)", name, len ? "unknown first bytes" : "empty");
    }
    if (!s) s = orient(&im, name);
    if (!s) s = resample(&im, &j.c, (double)im.w / j.W, (double)im.h / j.H, x, name, out);
    img8_free(&im);
    return s;
}
