/* Tests of the data set readers and dataset_load: IDX (gzip and plain), CIFAR-10
 * binary, PNG folders written here with libpng, synthetic data, normalisation checks,
 * and the real Fashion-MNIST when it is installed. Every file is made in a fresh
 * temporary folder; every error test checks that the message names the file. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "data/data.h"
#include "tests/testnet.h"
#include "tests/tsan.h"

#define FMNIST_DIR "/usr/share/datasets/fashion-mnist"

/* tn_dir/rel, with the folders on the way made. */
static const char *tpath(const char *rel)
{
    static char buf[16][512];
    static int next;
    char *p = buf[next++ % 16];
    snprintf(p, 512, "%s/%s", tn_dir, rel);
    for (char *s = p + strlen(tn_dir) + 1; (s = strchr(s, '/')) != NULL; s++) {
        *s = 0;
        mkdir(p, 0755);
        *s = '/';
    }
    return p;
}

static void mkdirs(const char *rel)
{
    char r[512];
    snprintf(r, sizeof r, "%s/x", rel);
    tpath(r);
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

static void write_gz(const char *path, const void *data, size_t len)
{
    gzFile f = gzopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(gzwrite(f, data, (unsigned)len), (int)len);
    gzclose(f);
}

static int msg_has(const char *s)
{
    return strstr(vdnn_errmsg(), s) != NULL;
}

#define ck_assert_msg_names(s) ck_assert_msg(msg_has(s), "message '%s' does not name '%s'", vdnn_errmsg(), s)

/* ---- IDX ---- */

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

/* An idx3 file of n images of h x w, pixel (i, k) = 10 * i + k; returns its length. */
static size_t idx_images(uint8_t *buf, int n, int h, int w)
{
    put_be32(buf, 0x803); put_be32(buf + 4, (uint32_t)n); put_be32(buf + 8, (uint32_t)h); put_be32(buf + 12, (uint32_t)w);
    for (int i = 0; i < n * h * w; i++) buf[16 + i] = (uint8_t)(10 * (i / (h * w)) + i % (h * w));
    return 16 + (size_t)n * h * w;
}

static size_t idx_labels(uint8_t *buf, int n, const uint8_t *labels)
{
    put_be32(buf, 0x801); put_be32(buf + 4, (uint32_t)n);
    memcpy(buf + 8, labels, (size_t)n);
    return 8 + (size_t)n;
}

static const uint8_t good_labels[3] = { 7, 0, 9 };

static void write_idx_pair(const char *img, const char *lab, int gz)
{
    uint8_t ib[64], lb[16];
    size_t il = idx_images(ib, 3, 2, 3), ll = idx_labels(lb, 3, good_labels);
    if (gz) { write_gz(img, ib, il); write_gz(lab, lb, ll); }
    else { write_file(img, ib, il); write_file(lab, lb, ll); }
}

static void check_idx_good(const dataset *d)
{
    ck_assert_int_eq(d->count, 3);
    ck_assert_int_eq(d->c, 1); ck_assert_int_eq(d->h, 2); ck_assert_int_eq(d->w, 3);
    ck_assert_int_eq(d->classes, 10);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(d->labels[i], good_labels[i]);
        for (int k = 0; k < 6; k++) ck_assert_int_eq(d->images[i * 6 + k], 10 * i + k);
    }
}

START_TEST(idx_good_gz_and_plain)
{
    for (int gz = 0; gz < 2; gz++) {
        const char *img = tpath(gz ? "a/img.gz" : "a/img"), *lab = tpath(gz ? "a/lab.gz" : "a/lab");
        write_idx_pair(img, lab, gz);
        dataset *d = NULL;
        ck_assert_int_eq(idx_load(img, lab, &d), VDNN_OK);
        check_idx_good(d);
        ck_assert_ptr_nonnull(strstr(d->source, img));
        dataset_free(d);
    }
}
END_TEST

/* Writes images with `delta` bytes more (or fewer) than the header promises. */
static void check_idx_length(int delta, int gz)
{
    uint8_t ib[64] = { 0 }, lb[16];
    size_t il = idx_images(ib, 3, 2, 3), ll = idx_labels(lb, 3, good_labels);
    const char *img = tpath("b/img"), *lab = tpath("b/lab");
    if (gz) write_gz(img, ib, il + (size_t)delta); else write_file(img, ib, il + (size_t)delta);
    write_file(lab, lb, ll);
    dataset *d = NULL;
    ck_assert_int_eq(idx_load(img, lab, &d), VDNN_EFORMAT);
    ck_assert_ptr_null(d);
    ck_assert_msg_names(img);
    char want[64];
    snprintf(want, sizeof want, "expected %zu bytes, found %zu", il, il + (size_t)delta);
    ck_assert_msg_names(want);
}

START_TEST(idx_truncated)
{
    check_idx_length(-5, 0);
    check_idx_length(-1, 1);
}
END_TEST

START_TEST(idx_trailing_garbage)
{
    check_idx_length(2, 0);   /* the buffer holds spare bytes past the data */
    check_idx_length(1, 1);
}
END_TEST

START_TEST(idx_truncated_gzip_stream)
{
    const char *img = tpath("c/img.gz"), *lab = tpath("c/lab.gz");
    write_idx_pair(img, lab, 1);
    struct stat st;
    ck_assert_int_eq(stat(img, &st), 0);
    ck_assert_int_eq(truncate(img, st.st_size - 10), 0);
    dataset *d = NULL;
    ck_assert_int_ne(idx_load(img, lab, &d), VDNN_OK);
    ck_assert_msg_names(img);
}
END_TEST

START_TEST(idx_wrong_magic)
{
    const char *img = tpath("d/img"), *lab = tpath("d/lab");
    write_idx_pair(img, lab, 0);
    dataset *d = NULL;
    ck_assert_int_eq(idx_load(lab, img, &d), VDNN_EFORMAT);   /* swapped */
    ck_assert_msg_names(lab);
    ck_assert_msg_names("magic 0x00000801");
}
END_TEST

START_TEST(idx_count_mismatch)
{
    uint8_t ib[64], lb[16];
    const uint8_t labels[4] = { 1, 2, 3, 4 };
    const char *img = tpath("e/img"), *lab = tpath("e/lab");
    write_file(img, ib, idx_images(ib, 3, 2, 3));
    write_file(lab, lb, idx_labels(lb, 4, labels));
    dataset *d = NULL;
    ck_assert_int_eq(idx_load(img, lab, &d), VDNN_EFORMAT);
    ck_assert_msg_names(lab);
    ck_assert_msg_names(img);
}
END_TEST

START_TEST(idx_label_out_of_range)
{
    uint8_t ib[64], lb[16];
    const uint8_t labels[3] = { 1, 10, 3 };
    const char *img = tpath("f/img"), *lab = tpath("f/lab");
    write_file(img, ib, idx_images(ib, 3, 2, 3));
    write_file(lab, lb, idx_labels(lb, 3, labels));
    dataset *d = NULL;
    ck_assert_int_eq(idx_load(img, lab, &d), VDNN_EFORMAT);
    ck_assert_msg_names(lab);
    ck_assert_msg_names("label 10 of item 1");
}
END_TEST

START_TEST(idx_missing_file)
{
    const char *img = tpath("g/none"), *lab = tpath("g/none2");
    dataset *d = NULL;
    ck_assert_int_eq(idx_load(img, lab, &d), VDNN_EIO);
    ck_assert_msg_names(img);
}
END_TEST

static data_cfg make_cfg(const char *set, const char *rel)
{
    data_cfg c;
    memset(&c, 0, sizeof c);
    snprintf(c.set, sizeof c.set, "%s", set);
    if (rel) snprintf(c.path, sizeof c.path, "%s/%s", tn_dir, rel);
    return c;
}

START_TEST(idx_dataset_load)
{
    write_idx_pair(tpath("fm/train-images-idx3-ubyte.gz"), tpath("fm/train-labels-idx1-ubyte"), 0);
    data_cfg cfg = make_cfg("fashion-mnist", "fm");
    dataset *d = NULL;
    ck_assert_int_eq(dataset_load(&cfg, SPLIT_TRAIN, 1, 2, 3, &d), VDNN_OK);
    check_idx_good(d);
    dataset_free(d);
    ck_assert_int_eq(dataset_load(&cfg, SPLIT_TRAIN, 1, 28, 28, &d), VDNN_EINVAL);
    ck_assert_msg_names(tpath("fm/train-images-idx3-ubyte.gz"));
    ck_assert_msg_names("1x2x3");
    ck_assert_msg_names("1x28x28");
    snprintf(cfg.set, sizeof cfg.set, "mnist");
    ck_assert_int_eq(dataset_load(&cfg, SPLIT_TEST, 1, 2, 3, &d), VDNN_EIO);
    ck_assert_msg_names("t10k-images-idx3-ubyte");
}
END_TEST

/* ---- CIFAR-10 ---- */

#define REC 3073

/* n records; record r has label labels[r] and pixel k = (r + k) & 255. */
static void write_cifar(const char *path, int n, const uint8_t *labels, long cut)
{
    uint8_t *buf = malloc((size_t)n * REC);
    for (int r = 0; r < n; r++) {
        buf[(size_t)r * REC] = labels[r];
        for (int k = 0; k < 3072; k++) buf[(size_t)r * REC + 1 + k] = (uint8_t)((r + k) & 255);
    }
    write_file(path, buf, (size_t)n * REC - (size_t)cut);
    free(buf);
}

START_TEST(cifar_good)
{
    const uint8_t la[2] = { 3, 9 }, lb[3] = { 0, 1, 2 };
    const char *pa = tpath("c1/a.bin"), *pb = tpath("c1/b.bin");
    write_cifar(pa, 2, la, 0);
    write_cifar(pb, 3, lb, 0);
    const char *paths[2] = { pa, pb };
    dataset *d = NULL;
    ck_assert_int_eq(cifar10_load(paths, 2, &d), VDNN_OK);
    ck_assert_int_eq(d->count, 5);
    ck_assert_int_eq(d->c, 3); ck_assert_int_eq(d->h, 32); ck_assert_int_eq(d->w, 32);
    const int want_labels[5] = { 3, 9, 0, 1, 2 }, rec[5] = { 0, 1, 0, 1, 2 };
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(d->labels[i], want_labels[i]);
        for (int k = 0; k < 3072; k += 97) ck_assert_int_eq(d->images[(size_t)i * 3072 + k], (rec[i] + k) & 255);
    }
    dataset_free(d);
}
END_TEST

START_TEST(cifar_truncated)
{
    const uint8_t l[2] = { 1, 2 };
    const char *p = tpath("c2/a.bin");
    write_cifar(p, 2, l, 1);
    dataset *d = NULL;
    ck_assert_int_eq(cifar10_load(&p, 1, &d), VDNN_EFORMAT);
    ck_assert_ptr_null(d);
    ck_assert_msg_names(p);
    ck_assert_msg_names("6145 bytes");
}
END_TEST

START_TEST(cifar_bad_label)
{
    const uint8_t l[3] = { 1, 2, 10 };
    const char *p = tpath("c3/a.bin");
    write_cifar(p, 3, l, 0);
    dataset *d = NULL;
    ck_assert_int_eq(cifar10_load(&p, 1, &d), VDNN_EFORMAT);
    ck_assert_msg_names(p);
    ck_assert_msg_names("record 2 has label 10");
}
END_TEST

START_TEST(cifar_dataset_load)
{
    const uint8_t l[2] = { 4, 5 };
    char rel[128];
    for (int i = 1; i <= 5; i++) {
        snprintf(rel, sizeof rel, "c4/cifar-10-batches-bin/data_batch_%d.bin", i);
        write_cifar(tpath(rel), i == 5 ? 1 : 2, l, 0);
    }
    write_cifar(tpath("c4/cifar-10-batches-bin/test_batch.bin"), 2, l, 0);
    data_cfg cfg = make_cfg("cifar10", "c4");
    dataset *d = NULL;
    ck_assert_int_eq(dataset_load(&cfg, SPLIT_TRAIN, 3, 32, 32, &d), VDNN_OK);
    ck_assert_int_eq(d->count, 9);
    ck_assert_int_eq(d->labels[8], 4);
    dataset_free(d);
    ck_assert_int_eq(dataset_load(&cfg, SPLIT_TEST, 3, 32, 32, &d), VDNN_OK);
    ck_assert_int_eq(d->count, 2);
    dataset_free(d);
    ck_assert_int_eq(dataset_load(&cfg, SPLIT_TEST, 1, 32, 32, &d), VDNN_EINVAL);
    ck_assert_msg_names("test_batch.bin");
    ck_assert_msg_names("3x32x32");
    cfg = make_cfg("cifar10", "nowhere");
    ck_assert_int_eq(dataset_load(&cfg, SPLIT_TRAIN, 3, 32, 32, &d), VDNN_EIO);
    ck_assert_msg_names("data_batch_1.bin");
}
END_TEST

/* ---- PNG ---- */

typedef struct png_spec {
    int w, h, color, depth, interlace;
    const uint8_t *rows;        /* packed rows as PNG stores them, h * rowbytes */
    const png_color *palette;
    int npalette;
    const uint8_t *trns;
    int ntrns;
} png_spec;

static void write_png(const char *path, const png_spec *s)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    ck_assert_int_eq(setjmp(png_jmpbuf(png)), 0);
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)s->w, (png_uint_32)s->h, s->depth, s->color,
                 s->interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    if (s->palette) png_set_PLTE(png, info, s->palette, s->npalette);
    if (s->trns) png_set_tRNS(png, info, s->trns, s->ntrns, NULL);
    png_write_info(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    png_bytep rows[16];
    for (int y = 0; y < s->h; y++) rows[y] = (png_bytep)(s->rows + (size_t)y * rowbytes);
    png_write_image(png, rows);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    fclose(f);
}

/* Loads `rel` (a split folder holding one class "k" with one file) as C channels. */
static dataset *load_one(const char *rel, int c, int h, int w)
{
    dataset *d = NULL;
    vdnn_status s = png_folder_load(tpath(rel), c, h, w, &d);
    ck_assert_msg(s == VDNN_OK, "png_folder_load: %s", vdnn_errmsg());
    ck_assert_int_eq(d->count, 1);
    return d;
}

static void expect_pixels(const dataset *d, const uint8_t *want, int n)
{
    for (int i = 0; i < n; i++)
        ck_assert_msg(d->images[i] == want[i], "pixel %d is %d, expected %d", i, d->images[i], want[i]);
}

/* 2x3 RGB test colours and their rounded luminance 0.299R + 0.587G + 0.114B. */
static const uint8_t rgb6[18] = { 255, 0, 0,  0, 255, 0,  0, 0, 255,  10, 20, 30,  200, 100, 50,  255, 255, 255 };
static const uint8_t lum6[6] = { 76, 150, 29, 18, 124, 255 };

static void rgb_planes(const uint8_t *rgb, uint8_t *planes)
{
    for (int i = 0; i < 6; i++)
        for (int k = 0; k < 3; k++) planes[k * 6 + i] = rgb[i * 3 + k];
}

START_TEST(png_gray8)
{
    const uint8_t px[6] = { 0, 1, 127, 128, 254, 255 };
    png_spec s = { 3, 2, PNG_COLOR_TYPE_GRAY, 8, 0, px, NULL, 0, NULL, 0 };
    write_png(tpath("p1/k/a.png"), &s);
    dataset *d = load_one("p1", 1, 2, 3);
    expect_pixels(d, px, 6);
    dataset_free(d);
    d = load_one("p1", 3, 2, 3);
    uint8_t rep[18];
    for (int k = 0; k < 3; k++) memcpy(rep + 6 * k, px, 6);
    expect_pixels(d, rep, 18);
    dataset_free(d);
}
END_TEST

START_TEST(png_rgb_and_interlaced)
{
    uint8_t planes[18];
    rgb_planes(rgb6, planes);
    for (int il = 0; il < 2; il++) {
        png_spec s = { 3, 2, PNG_COLOR_TYPE_RGB, 8, il, rgb6, NULL, 0, NULL, 0 };
        write_png(tpath("p2/k/a.png"), &s);
        dataset *d = load_one("p2", 3, 2, 3);
        expect_pixels(d, planes, 18);
        dataset_free(d);
        d = load_one("p2", 1, 2, 3);
        expect_pixels(d, lum6, 6);
        dataset_free(d);
    }
}
END_TEST

START_TEST(png_rgba_and_gray_alpha)
{
    uint8_t rgba[24], planes[18], ga[12];
    const uint8_t gray[6] = { 3, 60, 90, 120, 200, 250 };
    for (int i = 0; i < 6; i++) {
        memcpy(rgba + 4 * i, rgb6 + 3 * i, 3);
        rgba[4 * i + 3] = (uint8_t)(i * 50);   /* alpha is dropped, never composited */
        ga[2 * i] = gray[i];
        ga[2 * i + 1] = (uint8_t)(i * 40);
    }
    rgb_planes(rgb6, planes);
    png_spec s = { 3, 2, PNG_COLOR_TYPE_RGBA, 8, 0, rgba, NULL, 0, NULL, 0 };
    write_png(tpath("p3/k/a.png"), &s);
    dataset *d = load_one("p3", 3, 2, 3);
    expect_pixels(d, planes, 18);
    dataset_free(d);
    png_spec g = { 3, 2, PNG_COLOR_TYPE_GRAY_ALPHA, 8, 0, ga, NULL, 0, NULL, 0 };
    write_png(tpath("p4/k/a.png"), &g);
    d = load_one("p4", 1, 2, 3);
    expect_pixels(d, gray, 6);
    dataset_free(d);
}
END_TEST

START_TEST(png_palette)
{
    const png_color pal[4] = { { 255, 0, 0 }, { 0, 255, 0 }, { 0, 0, 255 }, { 200, 100, 50 } };
    const uint8_t idx8[6] = { 0, 1, 2, 3, 3, 0 };
    const uint8_t trns[2] = { 0, 128 };
    const uint8_t lum[6] = { 76, 150, 29, 124, 124, 76 };
    /* 4-bit: two indices per byte, each row padded to a whole byte. */
    const uint8_t idx4[4] = { 0x01, 0x20, 0x33, 0x00 };
    for (int v = 0; v < 3; v++) {
        png_spec s = { 3, 2, PNG_COLOR_TYPE_PALETTE, v == 2 ? 4 : 8, 0, v == 2 ? idx4 : idx8, pal, 4,
                       v == 1 ? trns : NULL, v == 1 ? 2 : 0 };
        write_png(tpath("p5/k/a.png"), &s);
        dataset *d = load_one("p5", 3, 2, 3);
        for (int i = 0; i < 6; i++) {
            ck_assert_int_eq(d->images[i], pal[idx8[i]].red);
            ck_assert_int_eq(d->images[6 + i], pal[idx8[i]].green);
            ck_assert_int_eq(d->images[12 + i], pal[idx8[i]].blue);
        }
        dataset_free(d);
        d = load_one("p5", 1, 2, 3);
        expect_pixels(d, lum, 6);
        dataset_free(d);
    }
}
END_TEST

START_TEST(png_16bit)
{
    /* 16-bit samples become round(v / 257): 4863 -> 19 (truncation would give 18). */
    const uint16_t v[6] = { 0, 65535, 32896, 4660, 4863, 257 };
    const uint8_t want[6] = { 0, 255, 128, 18, 19, 1 };
    uint8_t gray16[12], rgb16[36], planes[18];
    for (int i = 0; i < 6; i++) {
        gray16[2 * i] = (uint8_t)(v[i] >> 8);
        gray16[2 * i + 1] = (uint8_t)v[i];
        for (int k = 0; k < 3; k++) {
            uint16_t x = v[(i + k) % 6];
            rgb16[6 * i + 2 * k] = (uint8_t)(x >> 8);
            rgb16[6 * i + 2 * k + 1] = (uint8_t)x;
            planes[k * 6 + i] = want[(i + k) % 6];
        }
    }
    png_spec g = { 3, 2, PNG_COLOR_TYPE_GRAY, 16, 0, gray16, NULL, 0, NULL, 0 };
    write_png(tpath("p6/k/a.png"), &g);
    dataset *d = load_one("p6", 1, 2, 3);
    expect_pixels(d, want, 6);
    dataset_free(d);
    png_spec c = { 3, 2, PNG_COLOR_TYPE_RGB, 16, 0, rgb16, NULL, 0, NULL, 0 };
    write_png(tpath("p7/k/a.png"), &c);
    d = load_one("p7", 3, 2, 3);
    expect_pixels(d, planes, 18);
    dataset_free(d);
}
END_TEST

START_TEST(png_low_bit_gray)
{
    /* 1-bit: 101 / 010 per row, MSB first; expanded to 0 / 255. */
    const uint8_t bits1[2] = { 0xA0, 0x40 };
    const uint8_t want1[6] = { 255, 0, 255, 0, 255, 0 };
    png_spec s = { 3, 2, PNG_COLOR_TYPE_GRAY, 1, 0, bits1, NULL, 0, NULL, 0 };
    write_png(tpath("p8/k/a.png"), &s);
    dataset *d = load_one("p8", 1, 2, 3);
    expect_pixels(d, want1, 6);
    dataset_free(d);
    /* 2-bit: 0 1 2 / 3 0 1, each level scaled by 85. */
    const uint8_t bits2[2] = { 0x18, 0xC4 };
    const uint8_t want2[6] = { 0, 85, 170, 255, 0, 85 };
    png_spec t = { 3, 2, PNG_COLOR_TYPE_GRAY, 2, 0, bits2, NULL, 0, NULL, 0 };
    write_png(tpath("p8/k/a.png"), &t);
    d = load_one("p8", 1, 2, 3);
    expect_pixels(d, want2, 6);
    dataset_free(d);
}
END_TEST

static const uint8_t px6[6] = { 1, 2, 3, 4, 5, 6 };

static void write_gray(const char *rel, int w, int h)
{
    uint8_t px[64] = { 0 };
    memcpy(px, px6, 6);
    png_spec s = { w, h, PNG_COLOR_TYPE_GRAY, 8, 0, px, NULL, 0, NULL, 0 };
    write_png(tpath(rel), &s);
}

START_TEST(png_classes_sorted)
{
    write_gray("p9/train/dog/b.png", 3, 2);
    write_gray("p9/train/dog/a.png", 3, 2);
    write_gray("p9/train/cat/z.png", 3, 2);
    write_file(tpath("p9/train/cat/notes.txt"), "x", 1);   /* not a PNG: skipped */
    write_file(tpath("p9/train/README"), "x", 1);
    mkdirs("p9/train/.hidden");
    write_gray("p9/test/cat/q.png", 3, 2);
    write_gray("p9/test/dog/r.png", 3, 2);
    data_cfg cfg = make_cfg("png", "p9");
    dataset *d = NULL;
    ck_assert_int_eq(dataset_load(&cfg, SPLIT_TRAIN, 1, 2, 3, &d), VDNN_OK);
    ck_assert_int_eq(d->count, 3);
    ck_assert_int_eq(d->classes, 2);
    ck_assert_int_eq(d->labels[0], 0);   /* cat/z */
    ck_assert_int_eq(d->labels[1], 1);   /* dog/a */
    ck_assert_int_eq(d->labels[2], 1);   /* dog/b */
    expect_pixels(d, px6, 6);
    dataset_free(d);
    ck_assert_int_eq(dataset_load(&cfg, SPLIT_TEST, 1, 2, 3, &d), VDNN_OK);
    ck_assert_int_eq(d->count, 2);
    dataset_free(d);
    write_gray("p9/test/emu/s.png", 3, 2);
    ck_assert_int_eq(dataset_load(&cfg, SPLIT_TEST, 1, 2, 3, &d), VDNN_EFORMAT);
    ck_assert_msg_names(tpath("p9/test"));
}
END_TEST

START_TEST(png_wrong_size)
{
    write_gray("pa/k/a.png", 3, 3);
    dataset *d = NULL;
    ck_assert_int_eq(png_folder_load(tpath("pa"), 1, 2, 3, &d), VDNN_EFORMAT);
    ck_assert_ptr_null(d);
    ck_assert_msg_names(tpath("pa/k/a.png"));
    ck_assert_msg_names("3x3");
    ck_assert_msg_names("2x3");
}
END_TEST

/* Loading `path` fails with a message naming it and nothing written to stderr. */
static void expect_corrupt(const char *dir, const char *path)
{
    int saved = dup(2), fd = open(tpath("stderr.txt"), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    dup2(fd, 2);
    dataset *d = NULL;
    vdnn_status s = png_folder_load(dir, 3, 4, 5, &d);
    dup2(saved, 2);
    close(saved);
    close(fd);
    ck_assert_int_eq(s, VDNN_EFORMAT);
    ck_assert_ptr_null(d);
    ck_assert_msg_names(path);
    struct stat st;
    ck_assert_int_eq(stat(tpath("stderr.txt"), &st), 0);
    ck_assert_int_eq((int)st.st_size, 0);
}

START_TEST(png_corrupt)
{
    char p[512];
    snprintf(p, sizeof p, "%s", tpath("pb/k/a.png"));
    write_file(p, "this is not a png file at all", 29);
    expect_corrupt(tpath("pb"), p);
    uint8_t rgb[60];
    for (int i = 0; i < 60; i++) rgb[i] = (uint8_t)(i * 37);
    png_spec s = { 5, 4, PNG_COLOR_TYPE_RGB, 8, 0, rgb, NULL, 0, NULL, 0 };
    write_png(p, &s);
    FILE *f = fopen(p, "rb");
    uint8_t buf[4096];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    write_file(p, buf, len / 2);                   /* truncated */
    expect_corrupt(tpath("pb"), p);
    buf[len - 20] ^= 0x55;                          /* a flipped byte in IDAT */
    write_file(p, buf, len);
    expect_corrupt(tpath("pb"), p);
    write_file(p, buf, 8 + 10);                     /* signature and half a header */
    expect_corrupt(tpath("pb"), p);
}
END_TEST

START_TEST(png_empty_class_and_no_classes)
{
    write_gray("pc/a/x.png", 3, 2);
    mkdirs("pc/b");
    dataset *d = NULL;
    ck_assert_int_eq(png_folder_load(tpath("pc"), 1, 2, 3, &d), VDNN_EFORMAT);
    ck_assert_msg_names(tpath("pc/b"));
    mkdirs("pd");
    ck_assert_int_eq(png_folder_load(tpath("pd"), 1, 2, 3, &d), VDNN_EFORMAT);
    ck_assert_msg_names(tpath("pd"));
    ck_assert_int_eq(png_folder_load(tpath("pe"), 1, 2, 3, &d), VDNN_EIO);
    ck_assert_msg_names(tpath("pe"));
}
END_TEST

/* ---- sizes claimed but not there (issue 16) ---- */

/* Caps this (forked) check's address space at what it uses now plus `extra` bytes, so
 * that a reader allocating what a header merely claims fails with ENOMEM whatever the
 * machine's memory and overcommit. Not under the sanitizers, which map huge shadow
 * regions of their own. */
static void limit_address_space(size_t extra)
{
#if !UNDER_SANITIZER
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(fscanf(f, "%lu", &pages), 1);
    fclose(f);
    struct rlimit r = {(rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + extra, RLIM_INFINITY};
    ck_assert_int_eq(setrlimit(RLIMIT_AS, &r), 0);
#else
    (void)extra;
#endif
}

/* An images file of a 16-byte header declaring count x h x w and 10 bytes of data
 * (gzip-compressed with `gz`), and a labels file of `count` labels: idx_load must
 * refuse it as truncated, with `want` in the message, before anything the size of the
 * claim is allocated (the address space is capped well below it). */
static void expect_claim_refused(int gz, uint32_t count, uint32_t h, uint32_t w, const char *want)
{
    limit_address_space((size_t)256 << 20);
    uint8_t ib[26] = {0}, lb[16];
    put_be32(ib, 0x803); put_be32(ib + 4, count); put_be32(ib + 8, h); put_be32(ib + 12, w);
    const char *img = tpath(gz ? "g/img.gz" : "h/img"), *lab = tpath(gz ? "g/lab.gz" : "h/lab");
    size_t ll = idx_labels(lb, 1, good_labels);
    put_be32(lb + 4, count);
    if (gz) { write_gz(img, ib, sizeof ib); write_gz(lab, lb, ll); }
    else { write_file(img, ib, sizeof ib); write_file(lab, lb, ll); }
    dataset *d = NULL;
    ck_assert_int_eq(idx_load(img, lab, &d), VDNN_EFORMAT);
    ck_assert_ptr_null(d);
    ck_assert_msg_names(img);
    ck_assert_msg_names(want);
}

/* A 26-byte file whose header declares 65535^3 pixels: refused by the file's length. */
START_TEST(idx_header_claims_huge_plain)
{
    expect_claim_refused(0, 65535, 65535, 65535, "truncated: expected 281462092005391 bytes, found 26");
}
END_TEST

/* The same in a gzip file (1 x 30000 x 30000, 900 MB): its length is only known by
 * decompressing, so the buffer grows with the data instead. */
START_TEST(idx_header_claims_huge_gzip)
{
    expect_claim_refused(1, 1, 30000, 30000, "truncated: expected 900000016 bytes, found 26");
}
END_TEST

/* Devices and folders are refused at once, never read (/dev/zero would not end). */
START_TEST(data_files_must_be_regular)
{
    uint8_t lb[16];
    const char *lab = tpath("r/lab");
    write_file(lab, lb, idx_labels(lb, 3, good_labels));
    dataset *d = NULL;
    ck_assert_int_eq(idx_load("/dev/zero", lab, &d), VDNN_EIO);
    ck_assert_msg_names("/dev/zero: is a character device, not an IDX file");
    ck_assert_int_eq(idx_load(tpath("r"), lab, &d), VDNN_EIO);
    ck_assert_msg_names("is a folder, not an IDX file");
    const char *paths[1] = {"/dev/zero"};
    ck_assert_int_eq(cifar10_load(paths, 1, &d), VDNN_EIO);
    ck_assert_msg_names("/dev/zero: is a character device, not a CIFAR-10 batch file");
}
END_TEST

/* A folder of files that are not PNGs, for a net of 3x16384x16384 images (768 MiB
 * each): the first file fails, and room for the 40 images is never allocated. */
START_TEST(png_folder_allocates_as_it_decodes)
{
    char p[64];
    for (int i = 0; i < 40; i++) {
        snprintf(p, sizeof p, "pz/k/%02d.png", i);
        write_file(tpath(p), "not a png, just a name", 22);
    }
    limit_address_space((size_t)256 << 20);
    dataset *d = NULL;
    ck_assert_int_eq(png_folder_load(tpath("pz"), 3, 16384, 16384, &d), VDNN_EFORMAT);
    ck_assert_ptr_null(d);
    ck_assert_msg_names("00.png: not a PNG file");
}
END_TEST

/* ---- synthetic, normalisation, dispatch ---- */

START_TEST(synthetic_deterministic)
{
    dataset *a, *b, *c;
    ck_assert_int_eq(synthetic_make(200, 3, 8, 8, 5, 42, &a), VDNN_OK);
    ck_assert_int_eq(synthetic_make(200, 3, 8, 8, 5, 42, &b), VDNN_OK);
    ck_assert_int_eq(synthetic_make(200, 3, 8, 8, 5, 43, &c), VDNN_OK);
    ck_assert_int_eq(memcmp(a->images, b->images, 200 * 192), 0);
    ck_assert_int_eq(memcmp(a->labels, b->labels, 200 * sizeof(int32_t)), 0);
    ck_assert_int_ne(memcmp(a->images, c->images, 200 * 192), 0);
    int seen[5] = { 0 };
    for (int i = 0; i < 200; i++) {
        ck_assert(a->labels[i] >= 0 && a->labels[i] < 5);
        seen[a->labels[i]]++;
    }
    for (int k = 0; k < 5; k++) ck_assert_int_gt(seen[k], 10);
    dataset_free(a); dataset_free(b); dataset_free(c);
    ck_assert_int_eq(synthetic_make(0, 3, 8, 8, 5, 42, &a), VDNN_EINVAL);
}
END_TEST

/* Nearest class mean from the train split must classify the test split: the splits
 * share class patterns and the task is learnable. */
START_TEST(synthetic_splits_learnable)
{
    data_cfg cfg = make_cfg("synthetic", NULL);
    cfg.synthetic_train = 500; cfg.synthetic_test = 200; cfg.classes = 10;
    dataset *tr, *te;
    ck_assert_int_eq(dataset_load(&cfg, SPLIT_TRAIN, 1, 12, 12, &tr), VDNN_OK);
    ck_assert_int_eq(dataset_load(&cfg, SPLIT_TEST, 1, 12, 12, &te), VDNN_OK);
    ck_assert_int_ne(memcmp(tr->images, te->images, 200 * 144), 0);
    static double mean[10][144];
    int n[10] = { 0 };
    for (int i = 0; i < tr->count; i++) {
        n[tr->labels[i]]++;
        for (int k = 0; k < 144; k++) mean[tr->labels[i]][k] += tr->images[i * 144 + k];
    }
    int right = 0;
    for (int i = 0; i < te->count; i++) {
        int best = 0;
        double bestd = 1e300;
        for (int c = 0; c < 10; c++) {
            double dist = 0;
            for (int k = 0; k < 144; k++) {
                double e = te->images[i * 144 + k] - mean[c][k] / (n[c] ? n[c] : 1);
                dist += e * e;
            }
            if (dist < bestd) { bestd = dist; best = c; }
        }
        right += best == te->labels[i];
    }
    ck_assert_int_gt(right, 190);
    dataset_free(tr);
    dataset_free(te);
}
END_TEST

START_TEST(norm_validation)
{
    data_cfg cfg = make_cfg("synthetic", NULL);
    cfg.synthetic_train = 10; cfg.synthetic_test = 10; cfg.classes = 2;
    dataset *d = NULL;
    cfg.nmean = 3; cfg.nstd = 1; cfg.std[0] = 0.5f;
    ck_assert_int_eq(dataset_load(&cfg, SPLIT_TRAIN, 3, 4, 4, &d), VDNN_OK);
    dataset_free(d);
    cfg.nmean = 2;
    ck_assert_int_eq(dataset_load(&cfg, SPLIT_TRAIN, 3, 4, 4, &d), VDNN_EINVAL);
    ck_assert_msg_names("mean");
    cfg.nmean = 1; cfg.std[0] = 0.0f;
    ck_assert_int_eq(dataset_load(&cfg, SPLIT_TRAIN, 3, 4, 4, &d), VDNN_EINVAL);
    ck_assert_msg_names("std");
    cfg.std[0] = 1.0f; cfg.mean[0] = NAN;
    ck_assert_int_eq(dataset_load(&cfg, SPLIT_TRAIN, 3, 4, 4, &d), VDNN_EINVAL);
    cfg.mean[0] = 0.0f; cfg.nstd = 3; cfg.std[1] = -1.0f;
    ck_assert_int_eq(dataset_load(&cfg, SPLIT_TRAIN, 3, 4, 4, &d), VDNN_EINVAL);
    cfg = make_cfg("imagenet", "x");
    ck_assert_int_eq(dataset_load(&cfg, SPLIT_TRAIN, 3, 4, 4, &d), VDNN_EINVAL);
    ck_assert_msg_names("imagenet");
}
END_TEST

START_TEST(fashion_mnist_real)
{
    struct stat st;
    if (stat(FMNIST_DIR, &st) != 0) {
        printf("SKIPPED: Fashion-MNIST not installed at %s\n", FMNIST_DIR);
        return;
    }
    data_cfg cfg = make_cfg("fashion-mnist", NULL);
    snprintf(cfg.path, sizeof cfg.path, "%s", FMNIST_DIR);
    dataset *tr = NULL, *te = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    vdnn_status s = dataset_load(&cfg, SPLIT_TRAIN, 1, 28, 28, &tr);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ck_assert_msg(s == VDNN_OK, "%s", vdnn_errmsg());
    printf("fashion-mnist train: %d items loaded in %.3f s\n", tr->count,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    ck_assert_int_eq(dataset_load(&cfg, SPLIT_TEST, 1, 28, 28, &te), VDNN_OK);
    ck_assert_int_eq(tr->count, 60000);
    ck_assert_int_eq(te->count, 10000);
    int seen[10] = { 0 };
    for (int i = 0; i < tr->count; i++) {
        ck_assert(tr->labels[i] >= 0 && tr->labels[i] < 10);
        seen[tr->labels[i]]++;
    }
    for (int k = 0; k < 10; k++) ck_assert_int_eq(seen[k], 6000);   /* the set is balanced */
    dataset_free(tr);
    dataset_free(te);
}
END_TEST

static TCase *tcase(const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, tn_dir_setup, tn_dir_teardown);
    tcase_set_timeout(tc, 60);
    return tc;
}

static Suite *data_suite(void)
{
    Suite *s = suite_create("data");
    TCase *idx = tcase("idx");
    tcase_add_test(idx, idx_good_gz_and_plain);
    tcase_add_test(idx, idx_truncated);
    tcase_add_test(idx, idx_trailing_garbage);
    tcase_add_test(idx, idx_truncated_gzip_stream);
    tcase_add_test(idx, idx_wrong_magic);
    tcase_add_test(idx, idx_count_mismatch);
    tcase_add_test(idx, idx_label_out_of_range);
    tcase_add_test(idx, idx_missing_file);
    tcase_add_test(idx, idx_dataset_load);
    tcase_add_test(idx, idx_header_claims_huge_plain);
    tcase_add_test(idx, idx_header_claims_huge_gzip);
    tcase_add_test(idx, data_files_must_be_regular);
    suite_add_tcase(s, idx);
    TCase *cifar = tcase("cifar");
    tcase_add_test(cifar, cifar_good);
    tcase_add_test(cifar, cifar_truncated);
    tcase_add_test(cifar, cifar_bad_label);
    tcase_add_test(cifar, cifar_dataset_load);
    suite_add_tcase(s, cifar);
    TCase *png = tcase("png");
    tcase_add_test(png, png_gray8);
    tcase_add_test(png, png_rgb_and_interlaced);
    tcase_add_test(png, png_rgba_and_gray_alpha);
    tcase_add_test(png, png_palette);
    tcase_add_test(png, png_16bit);
    tcase_add_test(png, png_low_bit_gray);
    tcase_add_test(png, png_classes_sorted);
    tcase_add_test(png, png_wrong_size);
    tcase_add_test(png, png_corrupt);
    tcase_add_test(png, png_empty_class_and_no_classes);
    tcase_add_test(png, png_folder_allocates_as_it_decodes);
    suite_add_tcase(s, png);
    TCase *other = tcase("other");
    tcase_add_test(other, synthetic_deterministic);
    tcase_add_test(other, synthetic_splits_learnable);
    tcase_add_test(other, norm_validation);
    tcase_add_test(other, fashion_mnist_real);
    suite_add_tcase(s, other);
    return s;
}

int main(void) { return tn_run_suite(data_suite()); }
