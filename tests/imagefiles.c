/* Test images written with libjpeg and libpng (see imagefiles.h). Each library call
 * that can fail runs in a function of its own that sets the setjmp point, so that
 * nothing it changes after setjmp lives in a register across the longjmp. */
#include "tests/imagefiles.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jpeglib.h>

#define IMGF_PATH_MAX 4096

static _Thread_local char imgf_msg[512];

const char *imgf_error(void) { return imgf_msg; }

static int imgf_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(imgf_msg, sizeof imgf_msg, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- JPEG ---- */

typedef struct imgf_jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jmp;
    char msg[JMSG_LENGTH_MAX];
} imgf_jerr;

static void imgf_jpeg_error_exit(j_common_ptr c)
{
    imgf_jerr *e = (imgf_jerr *)c->err;
    (*c->err->format_message)(c, e->msg);
    longjmp(e->jmp, 1);
}

/* Warnings (corrupt data the library works round) are not printed. */
static void imgf_jpeg_quiet(j_common_ptr c) { (void)c; }

static void imgf_jerr_init(imgf_jerr *e)
{
    jpeg_std_error(&e->pub);
    e->pub.error_exit = imgf_jpeg_error_exit;
    e->pub.output_message = imgf_jpeg_quiet;
    e->msg[0] = 0;
}

static void put16(uint8_t *p, int big, unsigned v)
{
    p[big ? 0 : 1] = (uint8_t)(v >> 8);
    p[big ? 1 : 0] = (uint8_t)v;
}

static void put32(uint8_t *p, int big, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[big ? 3 - i : i] = (uint8_t)(v >> (8 * i));
}

/* An APP1 body: "Exif\0\0", a TIFF header, IFD0 with (Make and) Orientation, no next IFD.
 * Returns its length. */
static size_t imgf_exif(uint8_t *buf, int orientation, int big, int make_first)
{
    static const char make[] = "Canon";   /* 6 bytes with its NUL: past the 4 in an entry */
    memcpy(buf, "Exif\0\0", 6);
    uint8_t *t = buf + 6;
    t[0] = t[1] = big ? 'M' : 'I';
    put16(t + 2, big, 42);
    put32(t + 4, big, 8);
    int n = make_first ? 2 : 1;
    put16(t + 8, big, (unsigned)n);
    uint8_t *e = t + 10;
    size_t data_off = 10 + 12 * (size_t)n + 4;   /* the Make string, after the IFD */
    if (make_first) {
        put16(e, big, 0x010F);
        put16(e + 2, big, 2);                     /* ASCII */
        put32(e + 4, big, sizeof make);
        put32(e + 8, big, (uint32_t)data_off);
        e += 12;
    }
    put16(e, big, 0x0112);
    put16(e + 2, big, 3);                         /* SHORT */
    put32(e + 4, big, 1);
    put16(e + 8, big, (unsigned)orientation);     /* left-justified in the value field */
    put16(e + 10, big, 0);
    e += 12;
    put32(e, big, 0);                             /* no IFD1 */
    size_t len = 6 + data_off;
    if (make_first) {
        memcpy(t + data_off, make, sizeof make);
        len += sizeof make;
    }
    return len;
}

typedef struct imgf_jpeg_job {
    int w, h, comps;
    const uint8_t *pixels;
    imgf_jpeg_opts o;
    unsigned char *buf;   /* libjpeg's memory destination; malloc'd */
    unsigned long size;
} imgf_jpeg_job;

static void imgf_jpeg_rows(struct jpeg_compress_struct *c, const imgf_jpeg_job *j)
{
    size_t stride = (size_t)j->w * (size_t)j->comps;
    while (c->next_scanline < c->image_height) {
        JSAMPROW row = (JSAMPROW)(j->pixels + stride * c->next_scanline);
        jpeg_write_scanlines(c, &row, 1);
    }
}

static int imgf_jpeg_run(imgf_jpeg_job *j)
{
    struct jpeg_compress_struct c;
    imgf_jerr e;
    imgf_jerr_init(&e);
    c.err = &e.pub;
    if (setjmp(e.jmp)) {
        jpeg_destroy_compress(&c);
        return imgf_fail("libjpeg: %s", e.msg);
    }
    jpeg_create_compress(&c);
    jpeg_mem_dest(&c, &j->buf, &j->size);
    c.image_width = (JDIMENSION)j->w;
    c.image_height = (JDIMENSION)j->h;
    c.input_components = j->comps;
    c.in_color_space = j->comps == 1 ? JCS_GRAYSCALE : j->comps == 3 ? JCS_RGB : JCS_CMYK;
    jpeg_set_defaults(&c);
    if (j->comps == 4 && j->o.ycck) jpeg_set_colorspace(&c, JCS_YCCK);
    jpeg_set_quality(&c, j->o.quality ? j->o.quality : 95, TRUE);
    if (j->o.progressive) jpeg_simple_progression(&c);
    if (j->o.exif_orientation) c.write_JFIF_header = FALSE;   /* as a camera writes it */
    jpeg_start_compress(&c, TRUE);
    if (j->o.exif_orientation) {
        uint8_t app1[64];
        size_t n = imgf_exif(app1, j->o.exif_orientation, j->o.exif_big_endian, j->o.exif_make_first);
        jpeg_write_marker(&c, JPEG_APP0 + 1, app1, (unsigned)n);
    }
    imgf_jpeg_rows(&c, j);
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    return 0;
}

int imgf_jpeg_mem(int w, int h, int comps, const uint8_t *pixels, const imgf_jpeg_opts *o, uint8_t **out,
                  size_t *len)
{
    if (!out || !len) return imgf_fail("imgf_jpeg_mem: no output");
    *out = NULL;
    *len = 0;
    if (w < 1 || h < 1 || w > 65500 || h > 65500 || !pixels)
        return imgf_fail("imgf_jpeg_mem: bad size %dx%d", w, h);
    if (comps != 1 && comps != 3 && comps != 4) return imgf_fail("imgf_jpeg_mem: %d channels (1, 3 or 4)", comps);
    imgf_jpeg_job j = {.w = w, .h = h, .comps = comps, .pixels = pixels};
    if (o) j.o = *o;
    if (j.o.quality < 0 || j.o.quality > 100) return imgf_fail("imgf_jpeg_mem: quality %d", j.o.quality);
    if (j.o.exif_orientation < 0 || j.o.exif_orientation > 8)
        return imgf_fail("imgf_jpeg_mem: EXIF orientation %d (1..8)", j.o.exif_orientation);
    if (imgf_jpeg_run(&j) != 0) {
        free(j.buf);
        return -1;
    }
    *out = j.buf;
    *len = j.size;
    return 0;
}

static int imgf_write_file(const char *path, const uint8_t *data, size_t len)
{
    if (imgf_mkdirs_for(path) != 0) return -1;
    FILE *f = fopen(path, "wb");
    if (!f) return imgf_fail("%s: %s", path, strerror(errno));
    size_t put = fwrite(data, 1, len, f);
    int closed = fclose(f);
    if (put != len || closed != 0) return imgf_fail("%s: write failed", path);
    return 0;
}

int imgf_write_jpeg(const char *path, int w, int h, int comps, const uint8_t *pixels, int quality,
                    int exif_orientation)
{
    imgf_jpeg_opts o = {.quality = quality,
                        .exif_orientation = exif_orientation < 0 ? -exif_orientation : exif_orientation,
                        .exif_big_endian = exif_orientation < 0};
    uint8_t *buf;
    size_t len;
    if (imgf_jpeg_mem(w, h, comps, pixels, &o, &buf, &len) != 0) return -1;
    int r = imgf_write_file(path, buf, len);
    free(buf);
    return r;
}

typedef struct imgf_dec_job {
    const uint8_t *file;
    size_t len;
    int w, h, comps;
    uint8_t *px;   /* malloc'd once the header is read */
} imgf_dec_job;

static void imgf_dec_rows(struct jpeg_decompress_struct *c, imgf_dec_job *j)
{
    size_t stride = (size_t)j->w * (size_t)j->comps;
    while (c->output_scanline < c->output_height) {
        JSAMPROW row = j->px + stride * c->output_scanline;
        jpeg_read_scanlines(c, &row, 1);
    }
}

static int imgf_dec_run(imgf_dec_job *j)
{
    struct jpeg_decompress_struct c;
    imgf_jerr e;
    imgf_jerr_init(&e);
    c.err = &e.pub;
    if (setjmp(e.jmp)) {
        jpeg_destroy_decompress(&c);
        return imgf_fail("libjpeg: %s", e.msg);
    }
    jpeg_create_decompress(&c);
    jpeg_mem_src(&c, j->file, (unsigned long)j->len);
    jpeg_read_header(&c, TRUE);
    jpeg_start_decompress(&c);
    j->w = (int)c.output_width;
    j->h = (int)c.output_height;
    j->comps = c.output_components;
    j->px = malloc((size_t)j->w * (size_t)j->h * (size_t)j->comps);
    if (!j->px) {
        jpeg_destroy_decompress(&c);
        return imgf_fail("out of memory");
    }
    imgf_dec_rows(&c, j);
    jpeg_finish_decompress(&c);
    jpeg_destroy_decompress(&c);
    return 0;
}

uint8_t *imgf_jpeg_decode(const uint8_t *file, size_t len, int *w, int *h, int *comps)
{
    imgf_dec_job j = {.file = file, .len = len};
    if (!file || !len) {
        imgf_fail("imgf_jpeg_decode: no data");
        return NULL;
    }
    if (imgf_dec_run(&j) != 0) {
        free(j.px);
        return NULL;
    }
    *w = j.w;
    *h = j.h;
    *comps = j.comps;
    return j.px;
}

/* ---- PNG ---- */

typedef struct imgf_png_job {
    int w, h, comps;
    const uint8_t *pixels;
    uint8_t *buf;   /* the file so far; malloc'd */
    size_t len, cap;
    int oom;
    char msg[256];
    jmp_buf jmp;
} imgf_png_job;

static void imgf_png_error(png_structp png, png_const_charp msg)
{
    imgf_png_job *j = png_get_error_ptr(png);
    snprintf(j->msg, sizeof j->msg, "%s", msg);
    longjmp(j->jmp, 1);
}

static void imgf_png_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

static void imgf_png_put(png_structp png, png_bytep data, png_size_t n)
{
    imgf_png_job *j = png_get_io_ptr(png);
    if (j->len + n > j->cap) {
        size_t cap = j->cap ? j->cap : 4096;
        while (cap < j->len + n) cap *= 2;
        uint8_t *p = realloc(j->buf, cap);
        if (!p) {
            j->oom = 1;
            png_error(png, "out of memory");
        }
        j->buf = p;
        j->cap = cap;
    }
    memcpy(j->buf + j->len, data, n);
    j->len += n;
}

static void imgf_png_flush(png_structp png) { (void)png; }

static void imgf_png_rows(png_structp png, const imgf_png_job *j)
{
    size_t stride = (size_t)j->w * (size_t)j->comps;
    for (int y = 0; y < j->h; y++) png_write_row(png, (png_const_bytep)(j->pixels + stride * (size_t)y));
}

static int imgf_png_run(imgf_png_job *j)
{
    static const int types[5] = {0, PNG_COLOR_TYPE_GRAY, PNG_COLOR_TYPE_GRAY_ALPHA, PNG_COLOR_TYPE_RGB,
                                 PNG_COLOR_TYPE_RGB_ALPHA};
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, j, imgf_png_error, imgf_png_warning);
    if (!png) return imgf_fail("libpng: cannot create a writer");
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_write_struct(&png, NULL);
        return imgf_fail("libpng: cannot create a writer");
    }
    if (setjmp(j->jmp)) {
        png_destroy_write_struct(&png, &info);
        return imgf_fail("libpng: %s", j->msg);
    }
    png_set_write_fn(png, j, imgf_png_put, imgf_png_flush);
    png_set_IHDR(png, info, (png_uint_32)j->w, (png_uint_32)j->h, 8, types[j->comps], PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    imgf_png_rows(png, j);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    return 0;
}

int imgf_png_mem(int w, int h, int comps, const uint8_t *pixels, uint8_t **out, size_t *len)
{
    if (!out || !len) return imgf_fail("imgf_png_mem: no output");
    *out = NULL;
    *len = 0;
    if (w < 1 || h < 1 || w > 1000000 || h > 1000000 || !pixels)
        return imgf_fail("imgf_png_mem: bad size %dx%d", w, h);
    if (comps < 1 || comps > 4) return imgf_fail("imgf_png_mem: %d channels (1 to 4)", comps);
    imgf_png_job *j = calloc(1, sizeof *j);   /* holds a jmp_buf: off the stack frame that longjmps */
    if (!j) return imgf_fail("out of memory");
    j->w = w;
    j->h = h;
    j->comps = comps;
    j->pixels = pixels;
    int r = imgf_png_run(j);
    if (r == 0) {
        *out = j->buf;
        *len = j->len;
    } else {
        free(j->buf);
    }
    free(j);
    return r;
}

int imgf_write_png(const char *path, int w, int h, int comps, const uint8_t *pixels)
{
    uint8_t *buf;
    size_t len;
    if (imgf_png_mem(w, h, comps, pixels, &buf, &len) != 0) return -1;
    int r = imgf_write_file(path, buf, len);
    free(buf);
    return r;
}

/* ---- pixel patterns ---- */

void imgf_fill_solid(uint8_t *px, int w, int h, int comps, const uint8_t *colour)
{
    size_t n = (size_t)w * (size_t)h;
    for (size_t i = 0; i < n; i++) memcpy(px + i * (size_t)comps, colour, (size_t)comps);
}

void imgf_fill_bands(uint8_t *px, int w, int h, int comps, int n, const uint8_t *colours)
{
    int band = w / n > 0 ? w / n : 1;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            int k = x / band < n ? x / band : n - 1;
            memcpy(px + ((size_t)y * (size_t)w + (size_t)x) * (size_t)comps, colours + (size_t)k * (size_t)comps,
                   (size_t)comps);
        }
}

void imgf_fill_halves(uint8_t *px, int w, int h, int comps, const uint8_t *left, const uint8_t *right)
{
    int half = w / 2;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            memcpy(px + ((size_t)y * (size_t)w + (size_t)x) * (size_t)comps, x < half ? left : right, (size_t)comps);
}

static uint64_t imgf_mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double imgf_unit(uint64_t *s) { return (double)(imgf_mix(s) >> 11) / 9007199254740992.0; }

void imgf_fill_texture(uint8_t *px, int w, int h, int comps, uint64_t seed)
{
    uint64_t s = seed;
    double fx[4], fy[4], ph[4], bx[3], by[3], br[3];
    for (int c = 0; c < 4; c++) {
        fx[c] = 0.05 + 0.25 * imgf_unit(&s);
        fy[c] = 0.05 + 0.25 * imgf_unit(&s);
        ph[c] = 6.283 * imgf_unit(&s);
    }
    for (int b = 0; b < 3; b++) {
        bx[b] = w * imgf_unit(&s);
        by[b] = h * imgf_unit(&s);
        br[b] = 2.0 + 0.25 * (w < h ? w : h) * imgf_unit(&s);
    }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < comps; c++) {
                /* a ramp left to right and top to bottom: no flip or rotation maps it to itself */
                double v = 40.0 + 100.0 * x / w + 50.0 * y / h + 30.0 * sin(fx[c % 4] * x + ph[c % 4]) *
                                                                     cos(fy[c % 4] * y);
                for (int b = 0; b < 3; b++) {
                    double dx = x - bx[b], dy = y - by[b];
                    v += 40.0 * exp(-(dx * dx + dy * dy) / (br[b] * br[b]));
                }
                px[((size_t)y * (size_t)w + (size_t)x) * (size_t)comps + (size_t)c] =
                    (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : lrint(v));
            }
}

/* ---- folders ---- */

int imgf_mkdirs_for(const char *path)
{
    char p[IMGF_PATH_MAX];
    if (snprintf(p, sizeof p, "%s", path) >= (int)sizeof p) return imgf_fail("%s: path too long", path);
    for (char *s = p + 1; (s = strchr(s, '/')) != NULL; s++) {
        *s = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST) return imgf_fail("mkdir %s: %s", p, strerror(errno));
        *s = '/';
    }
    return 0;
}

int imgf_make_tree(const char *root, const char *split, int classes, int per_class, int min_side, int max_side,
                   uint64_t seed)
{
    if (classes < 1 || per_class < 1 || min_side < 1 || max_side < min_side)
        return imgf_fail("imgf_make_tree: bad arguments");
    uint64_t s = seed;
    uint8_t *px = malloc((size_t)max_side * (size_t)max_side * 3), *gray = malloc((size_t)max_side * max_side);
    if (!px || !gray) {
        free(px);
        free(gray);
        return imgf_fail("out of memory");
    }
    int written = 0;
    for (int k = 0; k < classes && written >= 0; k++)
        for (int i = 0; i < per_class && written >= 0; i++) {
            int span = max_side - min_side + 1;
            int w = min_side + (int)(imgf_mix(&s) % (uint64_t)span);
            int h = min_side + (int)(imgf_mix(&s) % (uint64_t)span);
            const uint8_t tint[3] = {(uint8_t)(k * 97 % 256), (uint8_t)(255 - k * 61 % 256), (uint8_t)(k * 151 % 256)};
            imgf_fill_texture(px, w, h, 3, imgf_mix(&s));
            for (size_t p = 0; p < (size_t)w * (size_t)h; p++)
                for (int c = 0; c < 3; c++) px[3 * p + c] = (uint8_t)((px[3 * p + c] + tint[c]) / 2);
            int is_gray = i % 3 == 2, is_png = i % 2 == 1;
            if (is_gray)
                for (size_t p = 0; p < (size_t)w * (size_t)h; p++)
                    gray[p] = (uint8_t)((299 * px[3 * p] + 587 * px[3 * p + 1] + 114 * px[3 * p + 2] + 500) / 1000);
            char path[IMGF_PATH_MAX];
            snprintf(path, sizeof path, "%s/%s/c%d/img%03d.%s", root, split, k, i, is_png ? "png" : "jpg");
            const uint8_t *src = is_gray ? gray : px;
            int comps = is_gray ? 1 : 3;
            int r = is_png ? imgf_write_png(path, w, h, comps, src) : imgf_write_jpeg(path, w, h, comps, src, 90, 0);
            written = r == 0 ? written + 1 : -1;
        }
    free(px);
    free(gray);
    return written;
}
