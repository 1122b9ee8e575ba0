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

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "vdnn/file.h"

#define PNG_PATH_MAX 4096

typedef struct png_reader {
    jmp_buf jmp;        /* where png_on_error returns to */
    char msg[256];      /* libpng's error message */
    png_bytep pixels;   /* decoded rows (H, rowbytes); freed by read_png */
    png_bytep *rows;
} png_reader;

/* The destination of one decode: the expected size and where the bytes go: image
 * `index` of d, whose images buffer holds *cap images so far. */
typedef struct png_target {
    const char *path;
    int c, h, w;
    dataset *d;
    int index;
    int *cap;
} png_target;

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

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void data_free_names(char **names, int count)
{
    for (int i = 0; i < count; i++) free(names[i]);
    free(names);
}

static vdnn_status push_name(char ***names, int *count, int *cap, const char *name, const char *dir)
{
    if (*count == *cap) {
        int ncap = *cap ? 2 * *cap : 64;
        char **n = realloc(*names, sizeof *n * (size_t)ncap);
        if (!n) return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory listing the folder", dir);
        *names = n;
        *cap = ncap;
    }
    (*names)[*count] = strdup(name);
    if (!(*names)[*count]) return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory listing the folder", dir);
    (*count)++;
    return VDNN_OK;
}

static int is_png_name(const char *name)
{
    size_t n = strlen(name);
    return n > 4 && strcasecmp(name + n - 4, ".png") == 0;
}

/* Lists dir's visible entries that are folders (want_dirs) or regular .png files,
 * sorted by strcmp. */
static vdnn_status list_entries(const char *dir, int want_dirs, char ***names, int *count)
{
    *names = NULL;
    *count = 0;
    DIR *dp = opendir(dir);
    if (!dp) return vdnn_fail(VDNN_EIO, "%s: cannot open folder (%s)", dir, strerror(errno));
    vdnn_status s = VDNN_OK;
    int cap = 0;
    struct dirent *e;
    while (!s && (e = readdir(dp)) != NULL) {
        if (e->d_name[0] == '.' || (!want_dirs && !is_png_name(e->d_name))) continue;
        char path[PNG_PATH_MAX];
        struct stat st;
        s = data_join(path, sizeof path, dir, e->d_name);
        if (s || stat(path, &st) != 0) continue;
        if (want_dirs ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode)) s = push_name(names, count, &cap, e->d_name, dir);
    }
    closedir(dp);
    if (s) {
        data_free_names(*names, *count);
        *names = NULL;
        *count = 0;
        return s;
    }
    if (*count > 1) qsort(*names, (size_t)*count, sizeof **names, cmp_names);
    return VDNN_OK;
}

vdnn_status png_list_classes(const char *dir, char ***names, int *count)
{
    return list_entries(dir, 1, names, count);
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

/* Converts decoded rows of `ch` 8-bit samples (gray or RGB first, alpha ignored). */
static void convert_rows(const png_reader *r, int ch, const png_target *t)
{
    size_t plane = (size_t)t->h * t->w;
    uint8_t *dst = t->d->images + (size_t)t->index * t->c * plane;   /* (C, H, W) */
    for (int y = 0; y < t->h; y++) {
        const png_byte *row = r->rows[y];
        for (int x = 0; x < t->w; x++) {
            const png_byte *p = row + (size_t)x * ch;
            size_t o = (size_t)y * t->w + x;
            int gray = ch < 3;
            if (t->c == 1) {
                dst[o] = gray ? p[0] : (uint8_t)((299 * p[0] + 587 * p[1] + 114 * p[2] + 500) / 1000);
            } else {
                for (int k = 0; k < 3; k++) dst[k * plane + o] = gray ? p[0] : p[k];
            }
        }
    }
}

/* The part that may longjmp: every libpng call lives here. */
static vdnn_status decode(png_structp png, png_infop info, FILE *f, png_reader *r, const png_target *t)
{
    png_init_io(png, f);
    png_set_sig_bytes(png, 8);
    png_read_info(png, info);
    png_uint_32 pw = png_get_image_width(png, info), ph = png_get_image_height(png, info);
    if (pw != (png_uint_32)t->w || ph != (png_uint_32)t->h)
        return vdnn_fail(VDNN_EFORMAT, "%s: image is %ux%u (HxW) but the net expects %dx%d",
                         t->path, (unsigned)ph, (unsigned)pw, t->h, t->w);
    vdnn_status s = reserve(t);
    if (s) return s;
    set_transforms(png);
    png_read_update_info(png, info);
    int ch = png_get_channels(png, info);
    size_t rowbytes = png_get_rowbytes(png, info);
    if (png_get_bit_depth(png, info) != 8 || ch < 1 || ch > 4 || rowbytes < (size_t)t->w * ch)
        return vdnn_fail(VDNN_EFORMAT, "%s: unsupported PNG layout after expansion (%d channels)", t->path, ch);
    r->pixels = malloc(rowbytes * (size_t)t->h);
    r->rows = malloc(sizeof *r->rows * (size_t)t->h);
    if (!r->pixels || !r->rows) return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory decoding", t->path);
    for (int y = 0; y < t->h; y++) r->rows[y] = r->pixels + (size_t)y * rowbytes;
    png_read_image(png, r->rows);
    png_read_end(png, NULL);
    convert_rows(r, ch, t);
    return VDNN_OK;
}

/* setjmp lives in a function of its own whose locals never change after it, so a
 * longjmp cannot leave any of them stale. */
static vdnn_status decode_guarded(png_structp png, png_infop info, FILE *f, png_reader *r, const png_target *t)
{
    if (setjmp(r->jmp)) return vdnn_fail(VDNN_EFORMAT, "%s: corrupt or truncated PNG (%s)", t->path, r->msg);
    return decode(png, info, f, r, t);
}

static vdnn_status read_png(const png_target *t)
{
    FILE *f = NULL;
    long long size = 0;
    vdnn_status opened = vdnn_file_open(t->path, "PNG file", 0, 0, &f, &size);
    if (opened) return opened;
    png_byte sig[8];
    if (fread(sig, 1, sizeof sig, f) != sizeof sig || png_sig_cmp(sig, 0, sizeof sig) != 0) {
        fclose(f);
        return vdnn_fail(VDNN_EFORMAT, "%s: not a PNG file (bad signature)", t->path);
    }
    png_reader *r = calloc(1, sizeof *r);
    png_structp png = r ? png_create_read_struct(PNG_LIBPNG_VER_STRING, r, png_on_error, png_on_warning) : NULL;
    png_infop info = png ? png_create_info_struct(png) : NULL;
    vdnn_status s = info ? decode_guarded(png, info, f, r, t)
                         : vdnn_fail(VDNN_ENOMEM, "%s: out of host memory for libpng", t->path);
    if (png) png_destroy_read_struct(&png, info ? &info : NULL, NULL);
    if (r) {
        free(r->pixels);
        free(r->rows);
        free(r);
    }
    fclose(f);
    return s;
}

/* Lists every class's files; counts[k] files for class k in files[k]. */
static vdnn_status list_all(const char *dir, char **classes, int nclasses, char ***files, int *counts, int *total)
{
    long sum = 0;
    for (int k = 0; k < nclasses; k++) {
        char cdir[PNG_PATH_MAX];
        vdnn_status s = data_join(cdir, sizeof cdir, dir, classes[k]);
        if (!s) s = list_entries(cdir, 0, &files[k], &counts[k]);
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
    vdnn_status s = png_list_classes(dir, &classes, &nclasses);
    if (s) return s;
    if (nclasses == 0) s = vdnn_fail(VDNN_EFORMAT, "%s: no class folders (expected %s/<class>/*.png)", dir, dir);
    else s = load_classes(dir, classes, nclasses, c, h, w, out);
    data_free_names(classes, nclasses);
    return s;
}
