/* PNG folders: dir/<class>/NAME.png, read with libpng.
 *
 * Classes are the visible sub-folders of dir sorted by strcmp, and label k is the k-th
 * of them; files within a class are sorted too, so the item order never depends on
 * the file system. Any PNG libpng can read is accepted (gray, gray+alpha, RGB, RGBA,
 * palette with or without tRNS, 1 to 16 bits, interlaced): it is expanded to 8-bit
 * gray or RGB, 16-bit samples are scaled to 8 bits with rounding (v * 255 / 65535),
 * and alpha is dropped, not composited. Then it is converted to the net's channels:
 * C=1 keeps gray or takes the luminance round(0.299 R + 0.587 G + 0.114 B), C=3 keeps
 * RGB or replicates gray. libpng's errors land in our own handler, which longjmps back
 * and turns the message into a status naming the file; its warnings are dropped, so
 * nothing reaches stderr. */
#include "data/data_impl.h"

#include <limits.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "vdnn/file.h"

#define PNG_PATH_MAX 4096

typedef struct png_reader {
    jmp_buf jmp;        /* where png_on_error returns to */
    char msg[256];      /* libpng's error message */
    const uint8_t *buf; /* the file, read from memory */
    size_t len, at;
    png_bytep pixels;   /* decoded rows (H, rowbytes); freed by png_decode */
    png_bytep *rows;
} png_reader;

/* The destination of one file of a folder: the expected size and where the bytes go:
 * image `index` of d, whose images buffer holds *cap images so far. */
typedef struct png_target {
    const char *path;
    int c, h, w;
    dataset *d;
    int index;
    int *cap;
} png_target;

/* A decoded image is refused beyond this many bytes (a header can declare 2^31 x 2^31). */
#define PNG_MAX_BYTES ((size_t)1 << 30)

static void png_on_error(png_structp png, png_const_charp msg)
{
    png_reader *r = png_get_error_ptr(png);
    snprintf(r->msg, sizeof r->msg, "%s", msg);
    longjmp(r->jmp, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

static int is_png_name(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && strcasecmp(name + n - 4, ".png") == 0;
}

/* Asks libpng for 8-bit gray or RGB whatever the file holds. */
static void set_transforms(png_structp png)
{
    png_set_expand(png);
#ifdef PNG_READ_SCALE_16_TO_8_SUPPORTED
    png_set_scale_16(png);
#else
    png_set_strip_16(png);
#endif
    png_set_strip_alpha(png);
    png_set_interlace_handling(png);
}

/* Makes room in d->images for image `index`, once a file has shown it is a PNG of the
 * expected size: the buffer starts at 16 MiB (or one image) and doubles, so a folder of
 * files that are not PNGs fails at the first without allocating room for all of them. */
static vdnn_status reserve(const png_target *t)
{
    dataset *d = t->d;
    if (t->index < *t->cap) return VDNN_OK;
    size_t item = (size_t)d->c * d->h * d->w;
    size_t want = *t->cap ? 2 * (size_t)*t->cap : ((size_t)16 << 20) / item;
    if (want < (size_t)t->index + 1) want = (size_t)t->index + 1;
    if (want > (size_t)d->count) want = (size_t)d->count;
    uint8_t *p = realloc(d->images, want * item);
    if (!p)
        return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory for %zu images of %dx%dx%d", t->path, want, d->c,
                         d->h, d->w);
    d->images = p;
    *t->cap = (int)want;
    return VDNN_OK;
}

/* Converts decoded rows of `ch` 8-bit samples (gray or RGB first, alpha ignored) into
 * out_ch (1 or 3) interleaved channels. */
static void convert_rows(const png_reader *r, int ch, int w, int h, int out_ch, uint8_t *dst)
{
    for (int y = 0; y < h; y++) {
        const png_byte *row = r->rows[y];
        uint8_t *o = dst + (size_t)y * w * out_ch;
        for (int x = 0; x < w; x++) {
            const png_byte *p = row + (size_t)x * ch;
            int gray = ch < 3;
            if (out_ch == 1) {
                o[x] = gray ? p[0] : (uint8_t)((299 * p[0] + 587 * p[1] + 114 * p[2] + 500) / 1000);
            } else {
                for (int k = 0; k < 3; k++) o[3 * x + k] = gray ? p[0] : p[k];
            }
        }
    }
}

static void png_read_mem(png_structp png, png_bytep data, size_t len)
{
    png_reader *r = png_get_io_ptr(png);
    if (len > r->len - r->at) png_error(png, "file ends early");
    memcpy(data, r->buf + r->at, len);
    r->at += len;
}

/* The part that may longjmp: every libpng call lives here. */
static vdnn_status decode(png_structp png, png_infop info, png_reader *r, const char *name, int out_ch, img8 *out)
{
    png_set_read_fn(png, r, png_read_mem);
    png_read_info(png, info);
    png_uint_32 pw = png_get_image_width(png, info), ph = png_get_image_height(png, info);
    if (pw == 0 || ph == 0 || (size_t)pw > PNG_MAX_BYTES / 8 / ph)
        return vdnn_fail(VDNN_EFORMAT, "%s: PNG of %ux%u is too large to decode", name, (unsigned)pw, (unsigned)ph);
    set_transforms(png);
    png_read_update_info(png, info);
    int ch = png_get_channels(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    if (png_get_bit_depth(png, info) != 8 || ch < 1 || ch > 4 || rowbytes < (size_t)pw * ch)
        return vdnn_fail(VDNN_EFORMAT, "%s: unsupported PNG layout after expansion (%d channels)", name, ch);
    r->pixels = malloc(rowbytes * (size_t)ph);
    r->rows = malloc(sizeof *r->rows * (size_t)ph);
    out->px = malloc((size_t)pw * ph * (size_t)out_ch);
    if (!r->pixels || !r->rows || !out->px) return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory decoding", name);
    for (png_uint_32 y = 0; y < ph; y++) r->rows[y] = r->pixels + (size_t)y * rowbytes;
    png_read_image(png, r->rows);
    png_read_end(png, NULL);
    out->w = (int)pw;
    out->h = (int)ph;
    out->ch = out_ch;
    out->orientation = 1;
    convert_rows(r, ch, out->w, out->h, out_ch, out->px);
    return VDNN_OK;
}

/* setjmp lives in a function of its own whose locals never change after it, so a
 * longjmp cannot leave any of them stale. */
static vdnn_status decode_guarded(png_structp png, png_infop info, png_reader *r, const char *name, int out_ch,
                                  img8 *out)
{
    if (setjmp(r->jmp)) return vdnn_fail(VDNN_EFORMAT, "%s: corrupt or truncated PNG (%s)", name, r->msg);
    return decode(png, info, r, name, out_ch, out);
}

void img8_free(img8 *im)
{
    free(im->px);
    memset(im, 0, sizeof *im);
}

vdnn_status png_decode(const char *name, const uint8_t *buf, size_t len, int ch, img8 *out)
{
    memset(out, 0, sizeof *out);
    if (ch != 1 && ch != 3) return vdnn_fail(VDNN_EINVAL, "%s: PNG decoding gives 1 or 3 channels, not %d", name, ch);
    if (len < 8 || png_sig_cmp(buf, 0, 8) != 0) return vdnn_fail(VDNN_EFORMAT, "%s: not a PNG file (bad signature)", name);
    png_reader *r = calloc(1, sizeof *r);
    png_structp png = r ? png_create_read_struct(PNG_LIBPNG_VER_STRING, r, png_on_error, png_on_warning) : NULL;
    png_infop info = png ? png_create_info_struct(png) : NULL;
    vdnn_status s;
    if (info) {
        r->buf = buf;
        r->len = len;
        s = decode_guarded(png, info, r, name, ch, out);
    } else {
        s = vdnn_fail(VDNN_ENOMEM, "%s: out of host memory for libpng", name);
    }
    if (png) png_destroy_read_struct(&png, info ? &info : NULL, NULL);
    if (r) {
        free(r->pixels);
        free(r->rows);
        free(r);
    }
    if (s) img8_free(out);
    return s;
}

/* Reads one file of the folder into image t->index of the data set. */
static vdnn_status read_png(const png_target *t)
{
    char *buf = NULL;
    size_t len = 0;
    img8 im = {0};
    vdnn_status s = vdnn_file_read(t->path, "PNG file", PNG_MAX_BYTES, 0, &buf, &len);
    if (!s) s = png_decode(t->path, (const uint8_t *)buf, len, t->c, &im);
    free(buf);
    if (!s && (im.w != t->w || im.h != t->h))
        s = vdnn_fail(VDNN_EFORMAT, "%s: image is %dx%d (HxW) but the net expects %dx%d", t->path, im.h, im.w,
                      t->h, t->w);
    if (!s) s = reserve(t);
    if (!s) {
        size_t plane = (size_t)t->h * t->w;
        uint8_t *dst = t->d->images + (size_t)t->index * t->c * plane;   /* (C, H, W) */
        for (size_t o = 0; o < plane; o++)
            for (int k = 0; k < t->c; k++) dst[k * plane + o] = im.px[o * t->c + k];
    }
    img8_free(&im);
    return s;
}

/* Lists every class's files; counts[k] files for class k in files[k]. */
static vdnn_status list_all(const char *dir, char **classes, int nclasses, char ***files, int *counts, int *total)
{
    long sum = 0;
    for (int k = 0; k < nclasses; k++) {
        char cdir[PNG_PATH_MAX];
        vdnn_status s = data_join(cdir, sizeof cdir, dir, classes[k]);
        if (!s) s = data_list_dir(cdir, DATA_LIST_FILES, is_png_name, &files[k], &counts[k]);
        if (s) return s;
        if (counts[k] == 0) return vdnn_fail(VDNN_EFORMAT, "%s: empty class folder (no .png files)", cdir);
        sum += counts[k];
        if (sum > INT_MAX) return vdnn_fail(VDNN_EFORMAT, "%s: too many images", dir);
    }
    *total = (int)sum;
    return VDNN_OK;
}

static vdnn_status read_all(const char *dir, char **classes, int nclasses, char ***files, const int *counts, dataset *d)
{
    int i = 0, cap = 0;
    for (int k = 0; k < nclasses; k++) {
        for (int j = 0; j < counts[k]; j++, i++) {
            char path[PNG_PATH_MAX];
            int n = snprintf(path, sizeof path, "%s/%s/%s", dir, classes[k], files[k][j]);
            if (n < 0 || (size_t)n >= sizeof path)
                return vdnn_fail(VDNN_EINVAL, "%s/%s/%s: path is too long", dir, classes[k], files[k][j]);
            png_target t = { path, d->c, d->h, d->w, d, i, &cap };
            vdnn_status s = read_png(&t);
            if (s) return s;
            d->labels[i] = k;
        }
    }
    return VDNN_OK;
}

static vdnn_status load_classes(const char *dir, char **classes, int nclasses, int c, int h, int w, dataset **out)
{
    char ***files = calloc((size_t)nclasses, sizeof *files);
    int *counts = calloc((size_t)nclasses, sizeof *counts);
    int total = 0;
    vdnn_status s = files && counts ? list_all(dir, classes, nclasses, files, counts, &total)
                                    : vdnn_fail(VDNN_ENOMEM, "%s: out of host memory listing classes", dir);
    if (!s) s = dataset_wrap(total, c, h, w, nclasses, dir, NULL, out);
    if (!s) s = read_all(dir, classes, nclasses, files, counts, *out);
    if (s) {
        dataset_free(*out);
        *out = NULL;
    }
    for (int k = 0; files && counts && k < nclasses; k++) data_free_names(files[k], counts[k]);
    free(files);
    free(counts);
    return s;
}

vdnn_status png_folder_load(const char *dir, int c, int h, int w, dataset **out)
{
    *out = NULL;
    if ((c != 1 && c != 3) || h < 1 || w < 1)
        return vdnn_fail(VDNN_EINVAL, "%s: PNG folders give 1 or 3 channels; the net expects %dx%dx%d", dir, c, h, w);
    char **classes;
    int nclasses;
    vdnn_status s = data_list_classes(dir, &classes, &nclasses);
    if (s) return s;
    if (nclasses == 0) s = vdnn_fail(VDNN_EFORMAT, "%s: no class folders (expected %s/<class>/*.png)", dir, dir);
    else s = load_classes(dir, classes, nclasses, c, h, w, out);
    data_free_names(classes, nclasses);
    return s;
}
