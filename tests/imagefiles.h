/* Test images made here, for the image-folder reader's tests (tests/test_images.c):
 * JPEG files written with libjpeg (gray, RGB, Adobe CMYK, baseline or progressive, with
 * an optional EXIF orientation), PNG files written with libpng, pixel patterns to fill
 * them with, and class-folder trees (ROOT/SPLIT/<class>/NAME.jpg|png) of mixed sizes.
 *
 * Pixels are 8-bit, (H, W, comps) row by row. Every function returns 0 (or a count) on
 * success and -1 on failure with the reason in imgf_error(); none exits, aborts or
 * fails a check, so a suite decides what a failure means. libjpeg's and libpng's
 * errors land in handlers that longjmp back; nothing is printed. */
#ifndef VDNN_TEST_IMAGEFILES_H
#define VDNN_TEST_IMAGEFILES_H

#include <stddef.h>
#include <stdint.h>

/* How a JPEG is written (imgf_jpeg_mem). Zero is the default of each field. */
typedef struct imgf_jpeg_opts {
    int quality;           /* 1..100; 0 = 95 */
    int exif_orientation;  /* 0: no EXIF; 1..8: an APP1 "Exif\0\0" marker with tag 0x0112 */
    int exif_big_endian;   /* the TIFF block in Motorola ("MM") order rather than Intel ("II") */
    int exif_make_first;   /* a Make (0x010F) entry before the orientation, as cameras write */
    int progressive;       /* a progressive JPEG rather than a baseline one */
    int ycck;              /* comps 4: stored as Adobe YCCK (transform 2) rather than CMYK */
} imgf_jpeg_opts;

/* A JPEG of w x h pixels of `comps` channels: 1 gray, 3 RGB, 4 CMYK. CMYK values are
 * the stored ones, inverted as Photoshop writes them (255 = no ink), with an Adobe APP14
 * marker; a decoder that honours it gives R = C * K / 255 (G from M, B from Y).
 * *out is malloc'd (the caller frees it), *len its bytes. */
int imgf_jpeg_mem(int w, int h, int comps, const uint8_t *pixels, const imgf_jpeg_opts *o, uint8_t **out,
                  size_t *len);
/* The same written to `path` (its folders made on the way), with quality (0 = 95) and
 * exif_orientation (0 = none, 1..8 little-endian, -1..-8 the same orientation
 * big-endian). */
int imgf_write_jpeg(const char *path, int w, int h, int comps, const uint8_t *pixels, int quality,
                    int exif_orientation);

/* A PNG of w x h pixels of `comps` channels: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA, 8 bits.
 * *out is malloc'd (the caller frees it). */
int imgf_png_mem(int w, int h, int comps, const uint8_t *pixels, uint8_t **out, size_t *len);
/* The same written to `path`, its folders made on the way. */
int imgf_write_png(const char *path, int w, int h, int comps, const uint8_t *pixels);

/* Decodes a JPEG held in memory with libjpeg as it is stored (no EXIF rotation; CMYK and
 * YCCK give the 4 stored channels): the pixels, malloc'd (the caller frees them), and
 * their shape. NULL on failure. For checking the writers themselves. */
uint8_t *imgf_jpeg_decode(const uint8_t *file, size_t len, int *w, int *h, int *comps);

/* Fills: every pixel `colour` (comps values); the left w/2 columns `left` and the rest
 * `right`; n vertical bands of equal width (band k = colours + k * comps, the last one
 * taking what is left); a smooth texture from `seed` that no crop, flip or rotation
 * leaves unchanged (gradients in both directions plus seeded blobs). */
void imgf_fill_solid(uint8_t *px, int w, int h, int comps, const uint8_t *colour);
void imgf_fill_halves(uint8_t *px, int w, int h, int comps, const uint8_t *left, const uint8_t *right);
void imgf_fill_bands(uint8_t *px, int w, int h, int comps, int n, const uint8_t *colours);
void imgf_fill_texture(uint8_t *px, int w, int h, int comps, uint64_t seed);

/* The folders on the way to `path` (not path itself), like mkdir -p of its parent. */
int imgf_mkdirs_for(const char *path);

/* A class-folder split: ROOT/SPLIT/c0 .. c<classes-1>, each holding per_class images
 * named img<NNN>.jpg and .png alternately (every third one a gray JPEG or a gray PNG),
 * of sizes drawn from `seed` in [min_side, max_side] each way, class k's texture tinted
 * by its own colour. Returns the number of files written, or -1. */
int imgf_make_tree(const char *root, const char *split, int classes, int per_class, int min_side, int max_side,
                   uint64_t seed);

/* Why the last call failed. */
const char *imgf_error(void);

#endif
