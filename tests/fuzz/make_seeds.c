/* Writes the generated part of the fuzz targets' seed corpora into tests/fuzz/seeds/
 * (`make fuzz-seeds`; the configs are copied by the Makefile from configs/). Small,
 * valid examples of every format, each a few hundred bytes to a few KiB, so that the
 * fuzzer starts from files the readers accept and mutates from there:
 *   idx, idx_gz   an images and a labels file in fuzz_idx.c's framing (2 and 3 items)
 *   cifar         one and two CIFAR-10 records
 *   png           8x8 images in every colour type libpng writes, interlaced, 16-bit
 *   image         JPEG files (gray, RGB, CMYK, YCCK, progressive, with EXIF orientations)
 *                 and a PNG, each followed by fuzz_image.c's transform byte
 *   image_list    list files of "FILE LABEL" lines
 *   checkpoint    the tiny net's checkpoint, fresh and after two steps
 *   plan          the tiny net's plan for every fixed policy and algorithm mode
 *   profile       a profile of the tiny net (made-up costs, the real layout)
 * Usage: make_seeds DIR */
#include <png.h>
#include <zlib.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nets/checkpoint.h"
#include "nets/planner/planner.h"
#include "tests/fuzz/fuzz.h"
#include "tests/imagefiles.h"

static char root[512];

static void die(const char *what)
{
    fprintf(stderr, "make_seeds: %s: %s\n", what, vdnn_errmsg());
    exit(1);
}

static const char *seed_path(char *buf, size_t len, const char *target, const char *name)
{
    snprintf(buf, len, "%s/%s", root, target);
    mkdir(buf, 0755);
    snprintf(buf, len, "%s/%s/%s", root, target, name);
    return buf;
}

static void put(const char *target, const char *name, const void *data, size_t size)
{
    char path[1024];
    FILE *f = fopen(seed_path(path, sizeof path, target, name), "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static void be32(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* data gzip-compressed (zlib's gzip wrapper) into out; returns its length. */
static size_t gzip(const unsigned char *data, size_t size, unsigned char *out, size_t cap)
{
    z_stream z = {0};
    if (deflateInit2(&z, 9, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY) != Z_OK) exit(1);
    z.next_in = (unsigned char *)data;
    z.avail_in = (unsigned)size;
    z.next_out = out;
    z.avail_out = (unsigned)cap;
    if (deflate(&z, Z_FINISH) != Z_STREAM_END) exit(1);
    deflateEnd(&z);
    return cap - z.avail_out;
}

/* The idx target's framing around two gzip files: the plain target reads them through
 * zlib too (gzread takes both), so its mutations reach the gzip container itself. */
static void idx_gz_seed(const char *name, const unsigned char *b, size_t images, size_t total)
{
    unsigned char out[4096];
    size_t a = gzip(b + 4, images, out + 4, sizeof out - 4);
    size_t l = gzip(b + 4 + images, total - 4 - images, out + 4 + a, sizeof out - 4 - a);
    out[0] = (unsigned char)a;
    out[1] = (unsigned char)(a >> 8);
    out[2] = out[3] = 0;
    put("idx", name, out, 4 + a + l);
}

/* fuzz_idx.c's framing: u32 LE images length, the images file, the labels file. */
static void idx_seed(const char *name, const char *gz_name, unsigned count, unsigned h, unsigned w)
{
    size_t images = 16 + (size_t)count * h * w, total = 4 + images + 8 + count;
    unsigned char *b = calloc(1, total);
    b[0] = (unsigned char)images;
    b[1] = (unsigned char)(images >> 8);
    unsigned char *im = b + 4, *lb = im + images;
    be32(im, 0x803);
    be32(im + 4, count);
    be32(im + 8, h);
    be32(im + 12, w);
    for (size_t i = 16; i < images; i++) im[i] = (unsigned char)(i * 37);
    be32(lb, 0x801);
    be32(lb + 4, count);
    for (unsigned i = 0; i < count; i++) lb[8 + i] = (unsigned char)(i % 10);
    put("idx", name, b, total);
    put("idx_gz", name, b, total);
    idx_gz_seed(gz_name, b, images, total);
    free(b);
}

static void cifar_seed(const char *name, int records)
{
    unsigned char b[2 * 3073];
    for (int i = 0; i < records * 3073; i++) b[i] = (unsigned char)(i * 13);
    for (int r = 0; r < records; r++) b[r * 3073] = (unsigned char)(r % 10);
    put("cifar", name, b, (size_t)records * 3073);
}

static void png_seed(const char *name, int color, int depth, int interlace)
{
    char path[1024];
    FILE *f = fopen(seed_path(path, sizeof path, "png", name), "wb");
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    if (!f || !png || !info || setjmp(png_jmpbuf(png))) {
        fprintf(stderr, "make_seeds: %s: libpng failed\n", path);
        exit(1);
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, 8, 8, depth, color, interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_color palette[4] = {{0, 0, 0}, {255, 0, 0}, {0, 255, 0}, {0, 0, 255}};
    png_byte trns[4] = {255, 128, 0, 255};
    if (color == PNG_COLOR_TYPE_PALETTE) {
        png_set_PLTE(png, info, palette, 4);
        png_set_tRNS(png, info, trns, 4, NULL);
    }
    png_write_info(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    png_byte pixels[8 * 64];
    png_bytep rows[8];
    for (size_t i = 0; i < sizeof pixels; i++)
        pixels[i] = (png_byte)(color == PNG_COLOR_TYPE_PALETTE ? (i % 4) * (depth == 8) + (depth < 8) * 0x1b : i * 7);
    for (int y = 0; y < 8; y++) rows[y] = pixels + (size_t)y * rowbytes;
    png_write_image(png, rows);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    fclose(f);
}

static void checkpoint_seeds(net *n)
{
    char path[1024];
    ckpt_state s = {0, 0, 0, 3, 0};
    if (checkpoint_save(n, seed_path(path, sizeof path, "checkpoint", "fresh"), &s) != VDNN_OK) die(path);
    float x[4 * 64];
    int32_t y[4] = {0, 1, 2, 3};
    for (int i = 0; i < 4 * 64; i++) x[i] = (float)(i % 17) / 17.0f;
    step_result r;
    for (int k = 0; k < 2; k++)
        if (net_train_step(n, x, y, 4, 0.05, &r) != VDNN_OK) die("a training step");
    s = (ckpt_state){2, 1, 4, 3, 0};
    if (checkpoint_save(n, seed_path(path, sizeof path, "checkpoint", "two-steps"), &s) != VDNN_OK) die(path);
}

static void plan_seeds(const net *n)
{
    for (int pol = 0; pol < POLICY_COUNT; pol++)
        for (int a = 0; a < ALGO_MODE_COUNT; a++) {
            plan p = {0};
            char name[64], path[1024];
            if (plan_policy(n, NULL, (mem_policy)pol, (algo_mode)a, PREFETCH_FAR, 1, &p) != VDNN_OK) die("plan_policy");
            snprintf(name, sizeof name, "%s-%s.plan", policy_name((mem_policy)pol), algo_mode_name((algo_mode)a));
            if (plan_save(&p, n, seed_path(path, sizeof path, "plan", name)) != VDNN_OK) die(path);
            plan_free(&p);
        }
}

static void profile_seed(const net *n)
{
    profile p = {.net_key = net_fingerprint(n), .batch = n->input.n, .nlayers = n->nlayers,
                 .h2d_bytes_per_s = 12e9, .d2h_bytes_per_s = 11e9, .duplex_bytes_per_s = 20e9,
                 .copy_latency_s = 1e-5, .measure_s = 0.5};
    snprintf(p.device, sizeof p.device, "cpu (1 thread)");
    p.layers = calloc((size_t)n->nlayers, sizeof *p.layers);
    for (int i = 0; i < n->nlayers; i++) {
        layer_cost *c = &p.layers[i];
        for (int a = 0; a < PLAN_MAX_ALGOS; a++) c->fwd_s[a] = c->bwd_data_s[a] = c->bwd_filter_s[a] = 1e30;
        for (int a = 0; a < layer_algo_count(n->layers[i], PASS_FWD) && a < PLAN_MAX_ALGOS; a++) {
            c->fwd_s[a] = 1e-4 * (a + 1);
            c->bwd_data_s[a] = 2e-4 * (a + 1);
            c->bwd_filter_s[a] = i ? 1.5e-4 * (a + 1) : 0;
        }
        c->update_s = 1e-5;
    }
    char path[1024];
    if (profile_save(&p, seed_path(path, sizeof path, "profile", "tiny.txt")) != VDNN_OK) die(path);
    profile_free(&p);
}

/* An image of w x h and `comps` channels as fuzz_image.c reads it: the file, then the
 * byte that picks the transform. */
static void image_seed(const char *name, int w, int h, int comps, const imgf_jpeg_opts *o, unsigned pick)
{
    uint8_t px[32 * 32 * 4];
    uint8_t *file = NULL;
    size_t len = 0;
    imgf_fill_texture(px, w, h, comps, (uint64_t)w * 31 + (uint64_t)h);
    int bad = o ? imgf_jpeg_mem(w, h, comps, px, o, &file, &len) : imgf_png_mem(w, h, comps, px, &file, &len);
    uint8_t *seed = bad ? NULL : realloc(file, len + 1);
    if (!seed) {
        fprintf(stderr, "make_seeds: %s: %s\n", name, imgf_error());
        exit(1);
    }
    seed[len] = (uint8_t)pick;
    put("image", name, seed, len + 1);
    free(seed);
}

static void image_seeds(void)
{
    imgf_jpeg_opts plain = {.quality = 90}, prog = {.quality = 80, .progressive = 1};
    imgf_jpeg_opts exif6 = {.quality = 90, .exif_orientation = 6}, exif8 = {.exif_orientation = 8, .exif_big_endian = 1};
    imgf_jpeg_opts ycck = {.ycck = 1};
    image_seed("rgb-16x12.jpg", 16, 12, 3, &plain, 0x02);
    image_seed("gray-8x8.jpg", 8, 8, 1, &plain, 0x09);
    image_seed("cmyk-8x8.jpg", 8, 8, 4, &plain, 0x12);
    image_seed("ycck-8x8.jpg", 8, 8, 4, &ycck, 0x07);
    image_seed("progressive-24x20.jpg", 24, 20, 3, &prog, 0x1a);
    image_seed("exif6-16x8.jpg", 16, 8, 3, &exif6, 0x03);
    image_seed("exif8-big-endian-8x16.jpg", 8, 16, 3, &exif8, 0x16);
    image_seed("rgb-12x9.png", 12, 9, 3, NULL, 0x0e);
    static const char *lists[][2] = {
        {"two.txt", "a/b.jpg 0\nc.png 1\n"},
        {"spaces-comments.txt", "# a comment\n\n  some folder/with space.jpg\t3\r\n/abs/path.JPEG 0\n"},
        {"bad-label.txt", "x.jpg 0\ny.jpg -1\n"},
    };
    for (size_t i = 0; i < sizeof lists / sizeof *lists; i++) put("image_list", lists[i][0], lists[i][1], strlen(lists[i][1]));
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds DIR\n");
        return 2;
    }
    snprintf(root, sizeof root, "%s", argv[1]);
    mkdir(root, 0755);
    idx_seed("two-2x3.idx", "two-2x3.idx.gz", 2, 2, 3);
    idx_seed("three-4x4.idx", "three-4x4.idx.gz", 3, 4, 4);
    cifar_seed("one.bin", 1);
    cifar_seed("two.bin", 2);
    png_seed("gray8.png", PNG_COLOR_TYPE_GRAY, 8, 0);
    png_seed("gray1.png", PNG_COLOR_TYPE_GRAY, 1, 0);
    png_seed("gray16-interlaced.png", PNG_COLOR_TYPE_GRAY, 16, 1);
    png_seed("gray-alpha.png", PNG_COLOR_TYPE_GRAY_ALPHA, 8, 0);
    png_seed("rgb8.png", PNG_COLOR_TYPE_RGB, 8, 0);
    png_seed("rgba16.png", PNG_COLOR_TYPE_RGB_ALPHA, 16, 0);
    png_seed("palette8-trns.png", PNG_COLOR_TYPE_PALETTE, 8, 0);
    png_seed("palette2-interlaced.png", PNG_COLOR_TYPE_PALETTE, 2, 1);
    image_seeds();
    net *n = fuzz_tiny_net();
    plan_seeds(n);
    profile_seed(n);
    checkpoint_seeds(n);
    put("config", "tiny.cfg", FUZZ_TINY_CFG, strlen(FUZZ_TINY_CFG));
    return 0;
}
