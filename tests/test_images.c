/* Tests of image folders (set = images): JPEG and PNG files of any size, decoded,
 * cropped and resized as training goes. Every file is written here (tests/imagefiles.c)
 * in a fresh temporary folder.
 *
 * What is checked: the file list (class folders at any depth, extensions in any case,
 * hidden entries and other files left out, a folder changed right after it was listed,
 * the list cache read only while every folder's time is as it recorded,
 * list files of "FILE LABEL" lines, refusals that name the folder or LIST:LINE, test
 * classes that differ from train's); the transform of cfg; one file into floats (flat
 * colours exact after normalisation, gray, alpha, CMYK, the eight EXIF orientations,
 * resize then centre crop, rotation before the crop, the random-resized crop's area,
 * ratio and placement, the format from the first bytes, determinism from the bits, the
 * flip); bad files (truncated, corrupt, not an image, empty) failing with the name and
 * never crashing; the loader over a folder (the same batches with 1 or 3 workers and
 * after a seek, the same floats as image_item, unreadable files replaced by readable
 * ones and reported, or fatal when strict, a folder of nothing readable an error); the
 * config keys; and the program: `vdnn train` on mixed JPEG and PNG files with exact
 * resume and `vdnn test`, ResNet-50 on a folder, `vdnn data`, and a run over a folder
 * whose decoded size is far above an address-space limit it runs under. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "data/data.h"
#include "tests/imagefiles.h"
#include "tests/jsoncheck.h"
#include "tests/testnet.h"
#include "tests/tsan.h"

/* ImageNet's normalisation: every check runs through a mean and std other than 0 / 1. */
static const float MEAN3[3] = {0.485f, 0.456f, 0.406f}, STD3[3] = {0.229f, 0.224f, 0.225f};

/* tn_dir/rel, with the folders on the way made. */
static const char *tpath(const char *rel)
{
    static char buf[16][1024];
    static int next;
    char *p = buf[next++ % 16];
    snprintf(p, 1024, "%s/%s", tn_dir, rel);
    ck_assert_msg(imgf_mkdirs_for(p) == 0, "%s", imgf_error());
    return p;
}

static void mkdir_rel(const char *rel)
{
    char r[512];
    snprintf(r, sizeof r, "%s/x", rel);
    tpath(r);
}

static void jpeg_file(const char *rel, int w, int h, int comps, const uint8_t *px, int quality, int orientation)
{
    ck_assert_msg(imgf_write_jpeg(tpath(rel), w, h, comps, px, quality, orientation) == 0, "%s: %s", rel,
                  imgf_error());
}

static void png_file(const char *rel, int w, int h, int comps, const uint8_t *px)
{
    ck_assert_msg(imgf_write_png(tpath(rel), w, h, comps, px) == 0, "%s: %s", rel, imgf_error());
}

/* A flat-coloured JPEG or PNG file at rel. */
static void solid_file(const char *rel, int png, int w, int h, int comps, const uint8_t *colour)
{
    uint8_t *px = malloc((size_t)w * h * comps);
    ck_assert_ptr_nonnull(px);
    imgf_fill_solid(px, w, h, comps, colour);
    if (png) png_file(rel, w, h, comps, px);
    else jpeg_file(rel, w, h, comps, px, 95, 0);
    free(px);
}

static uint8_t *jpeg_bytes(int w, int h, int comps, const uint8_t *px, const imgf_jpeg_opts *o, size_t *len)
{
    uint8_t *out;
    ck_assert_msg(imgf_jpeg_mem(w, h, comps, px, o, &out, len) == 0, "%s", imgf_error());
    return out;
}

static uint8_t *png_bytes(int w, int h, int comps, const uint8_t *px, size_t *len)
{
    uint8_t *out;
    ck_assert_msg(imgf_png_mem(w, h, comps, px, &out, len) == 0, "%s", imgf_error());
    return out;
}

static dataset *open_ok(const char *dir, const char *list, int c, int h, int w)
{
    dataset *d = NULL;
    vdnn_status s = images_open(dir, list, c, h, w, &d);
    ck_assert_msg(s == VDNN_OK, "images_open(%s, %s): %s", dir, list ? list : "-", vdnn_errmsg());
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_nonnull(d->files);
    ck_assert_ptr_null(d->images);
    ck_assert_int_eq(d->c, c);
    ck_assert_int_eq(d->h, h);
    ck_assert_int_eq(d->w, w);
    return d;
}

/* images_open must fail, its message naming `a` (and `b`). */
static void open_fails(const char *dir, const char *list, const char *a, const char *b)
{
    dataset *d = (dataset *)1;
    vdnn_status s = images_open(dir, list, 3, 16, 16, &d);
    ck_assert_msg(s != VDNN_OK, "images_open(%s, %s) accepted it", dir, list ? list : "-");
    ck_assert_ptr_null(d);
    tn_msg_has(a, b);
}

/* The transform for an output of c x h x w: crop `random` (1: random-resized over the
 * whole default range), resize, flip, ImageNet's normalisation (its first value for c = 1). */
static image_xform xform(int c, int h, int w, int random, int resize, int flip)
{
    image_xform x;
    memset(&x, 0, sizeof x);
    x.c = c;
    x.h = h;
    x.w = w;
    x.random = random;
    x.scale[0] = 0.08f;
    x.scale[1] = 1.0f;
    x.ratio[0] = 3.0f / 4.0f;
    x.ratio[1] = 4.0f / 3.0f;
    x.resize = resize;
    x.flip = flip;
    for (int k = 0; k < 3; k++) {
        x.mean[k] = MEAN3[k];
        x.std[k] = STD3[k];
    }
    return x;
}

static float *item_ok(const char *name, const uint8_t *file, size_t len, const image_xform *x, uint64_t bits)
{
    float *out = malloc(sizeof(float) * (size_t)x->c * x->h * x->w);
    ck_assert_ptr_nonnull(out);
    vdnn_status s = image_item(name, file, len, x, bits, out);
    ck_assert_msg(s == VDNN_OK, "image_item(%s, %zu bytes, %dx%dx%d, random %d): %s", name, len, x->c, x->h, x->w,
                  x->random, vdnn_errmsg());
    return out;
}

/* Output value (channel k, row y, column x) back in 0..255 levels. */
static double level(const float *out, const image_xform *x, int k, int y, int col)
{
    float v = out[((size_t)k * x->h + y) * x->w + col];
    return ((double)v * x->std[k] + x->mean[k]) * 255.0;
}

/* Every value of channel k is `want` levels within tol levels. */
static void expect_flat(const float *out, const image_xform *x, int k, double want, double tol, const char *what)
{
    for (int y = 0; y < x->h; y++)
        for (int c = 0; c < x->w; c++) {
            double v = level(out, x, k, y, c);
            ck_assert_msg(fabs(v - want) <= tol, "%s: channel %d at (%d, %d) is %.4f levels, expected %.4f +- %g", what,
                          k, y, c, v, want, tol);
        }
}

/* The mean level of channel k over rows [y0, y1) and columns [x0, x1). */
static double mean_level(const float *out, const image_xform *x, int k, int y0, int y1, int x0, int x1)
{
    double sum = 0;
    for (int y = y0; y < y1; y++)
        for (int c = x0; c < x1; c++) sum += level(out, x, k, y, c);
    return sum / ((double)(y1 - y0) * (x1 - x0));
}

static int gray_of(const uint8_t *rgb) { return (int)lround(0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2]); }

/* ---- the file list ---- */

/* A split in every shape images_open must handle: classes found at any depth, every
 * extension in any case, hidden files and folders and other files left out. */
START_TEST(test_open_class_folders)
{
    const uint8_t grey[3] = {90, 90, 90};
    static const char *const images[] = {
        "split/cat/a.jpg",       "split/cat/b.JPEG",     "split/cat/c.Png",     "split/cat/deep/er/d.jpeg",
        "split/cat/deep/e.JPG",  "split/dog/x.png",      "split/dog/y.PNG",     "split/zebra/sub/z.jpg",
        "split/Ant/q.jpg",
    };
    static const char *const ignored[] = {
        "split/cat/notes.txt",   "split/cat/.hidden.jpg", "split/cat/.cache/h.jpg", "split/cat/img.gif",
        "split/cat/jpg",         "split/cat/x.jpg.bak",   "split/dog/photo.bmp",    "split/.trash/t.jpg",
        "split/README.txt",
    };
    for (size_t i = 0; i < sizeof images / sizeof *images; i++) {
        const char *ext = strrchr(images[i], '.');
        solid_file(images[i], !strcasecmp(ext, ".png"), 8 + (int)i, 9, 3, grey);
    }
    for (size_t i = 0; i < sizeof ignored / sizeof *ignored; i++) solid_file(ignored[i], 0, 8, 8, 3, grey);
    dataset *d = open_ok(tpath("split"), NULL, 3, 24, 20);
    /* "Ant" < "cat" < "dog" < "zebra" by strcmp; the hidden ".trash" is no class */
    static const char *const classes[] = {"Ant", "cat", "dog", "zebra"};
    static const int per_class[] = {1, 5, 2, 1};
    ck_assert_int_eq(d->classes, 4);
    ck_assert_int_eq(d->count, 9);
    int seen[4] = {0}, last = 0;
    for (int i = 0; i < d->count; i++) {
        int k = d->labels[i];
        ck_assert_msg(k >= 0 && k < 4, "item %d: label %d", i, k);
        ck_assert_msg(k >= last, "item %d: label %d after %d (classes in order)", i, k, last);
        last = k;
        seen[k]++;
        const char *p = images_path(d, i);
        char want[64];
        snprintf(want, sizeof want, "/%s/", classes[k]);
        ck_assert_msg(strstr(p, want) != NULL, "item %d (label %d) is %s", i, k, p);
        ck_assert_msg(access(p, R_OK) == 0, "item %d: images_path %s is not a readable file", i, p);
        for (size_t j = 0; j < sizeof ignored / sizeof *ignored; j++)
            ck_assert_msg(!strstr(p, ignored[j] + 6), "item %d is %s, a file that must be left out", i, p);
    }
    for (int k = 0; k < 4; k++) ck_assert_msg(seen[k] == per_class[k], "class %s has %d items", classes[k], seen[k]);
    /* every image listed once */
    for (size_t j = 0; j < sizeof images / sizeof *images; j++) {
        int hits = 0;
        for (int i = 0; i < d->count; i++) {
            const char *p = images_path(d, i);
            size_t lp = strlen(p), lw = strlen(images[j] + 6);
            hits += lp >= lw && !strcmp(p + lp - lw, images[j] + 6) && p[lp - lw - 1] == '/';
        }
        ck_assert_msg(hits == 1, "%s listed %d times", images[j], hits);
    }
    /* files of one folder in strcmp order: cat's a.jpg, b.JPEG, c.Png in that order */
    int ia = -1, ib = -1, ic = -1;
    for (int i = 0; i < d->count; i++) {
        const char *p = images_path(d, i);
        if (strstr(p, "/cat/a.jpg")) ia = i;
        if (strstr(p, "/cat/b.JPEG")) ib = i;
        if (strstr(p, "/cat/c.Png")) ic = i;
    }
    ck_assert_msg(ia >= 0 && ia < ib && ib < ic, "cat's files at %d, %d, %d", ia, ib, ic);
    dataset_free(d);
}
END_TEST

/* A folder changed right after it was listed (within one tick of the file system's
 * clock, which a cached list keyed on folder times cannot see) is listed as it is now:
 * an added file, an added class, a removed file, a renamed one. */
START_TEST(test_open_sees_changes)
{
    const uint8_t grey[3] = {90, 90, 90};
    solid_file("split/c0/a.jpg", 0, 8, 8, 3, grey);
    solid_file("split/c1/b.jpg", 0, 8, 8, 3, grey);
    const char *dir = tpath("split");
    for (int round = 0; round < 4; round++) {
        dataset *d = open_ok(dir, NULL, 3, 8, 8);
        int count = d->count;
        dataset_free(d);
        char rel[64];
        snprintf(rel, sizeof rel, "split/c%d/new%d.jpg", round % 2, round);
        solid_file(rel, 0, 8, 8, 3, grey);
        d = open_ok(dir, NULL, 3, 8, 8);
        ck_assert_msg(d->count == count + 1, "round %d: %d files after adding one to %d (a stale list?)", round,
                      d->count, count);
        dataset_free(d);
    }
    dataset *d = open_ok(dir, NULL, 3, 8, 8);
    int classes = d->classes, count = d->count;
    dataset_free(d);
    solid_file("split/c2/c.jpg", 0, 8, 8, 3, grey);
    d = open_ok(dir, NULL, 3, 8, 8);
    ck_assert_msg(d->classes == classes + 1 && d->count == count + 1, "%d classes, %d files after adding a class",
                  d->classes, d->count);
    dataset_free(d);
    ck_assert_int_eq(unlink(tpath("split/c0/a.jpg")), 0);
    d = open_ok(dir, NULL, 3, 8, 8);
    ck_assert_msg(d->count == count, "%d files after removing one of %d", d->count, count + 1);
    for (int i = 0; i < d->count; i++)
        ck_assert_msg(access(images_path(d, i), R_OK) == 0, "item %d: %s is gone", i, images_path(d, i));
    dataset_free(d);
    ck_assert_int_eq(rename(tpath("split/c1/b.jpg"), tpath("split/c1/b.txt")), 0);
    d = open_ok(dir, NULL, 3, 8, 8);
    ck_assert_msg(d->count == count - 1, "%d files after renaming one to .txt (%d before)", d->count, count);
    dataset_free(d);
}
END_TEST

/* Sets a folder's modification time `ago` seconds in the past. */
static void age_dir(const char *rel, int ago)
{
    struct timespec t[2];
    clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec -= ago;
    t[1] = t[0];
    ck_assert_msg(utimensat(AT_FDCWD, tpath(rel), t, 0) == 0, "%s: %s", rel, strerror(errno));
}

static int count_of(const char *dir)
{
    dataset *d = open_ok(dir, NULL, 3, 8, 8);
    int n = d->count;
    dataset_free(d);
    return n;
}

/* The list cache is read when every folder's time is exactly as it was: a file added
 * with its folder's time put back is not seen (the cache answered, not a walk); another
 * time, or a cache file that is not one, lists the folder again. A folder changed in
 * the last seconds is never cached. */
START_TEST(test_open_uses_cache)
{
    const uint8_t grey[3] = {90, 90, 90};
    char cache[1024], lists[1100];
    snprintf(cache, sizeof cache, "%s", tpath("cache"));
    snprintf(lists, sizeof lists, "%s/lists", cache);
    const char *was = getenv("VDNN_CACHE");
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", was ? was : "");
    setenv("VDNN_CACHE", cache, 1);
    solid_file("old/c0/a.jpg", 0, 8, 8, 3, grey);
    solid_file("old/c0/b.jpg", 0, 8, 8, 3, grey);
    solid_file("old/c1/c.jpg", 0, 8, 8, 3, grey);
    const char *dir = tpath("old");
    ck_assert_int_eq(count_of(dir), 3);
    ck_assert_msg(access(lists, F_OK) != 0, "a folder changed a moment ago was cached");
    age_dir("old/c0", 100);
    age_dir("old/c1", 100);
    age_dir("old", 100);
    struct stat c0;
    ck_assert_int_eq(stat(tpath("old/c0"), &c0), 0);
    ck_assert_int_eq(count_of(dir), 3);
    ck_assert_msg(access(lists, F_OK) == 0, "no cache in %s", lists);
    solid_file("old/c0/new.jpg", 0, 8, 8, 3, grey);
    struct timespec t[2] = {c0.st_mtim, c0.st_mtim};
    ck_assert_int_eq(utimensat(AT_FDCWD, tpath("old/c0"), t, 0), 0);
    int n = count_of(dir);
    ck_assert_msg(n == 3, "%d files: the folder was walked again although every time was as cached", n);
    age_dir("old/c0", 200);
    n = count_of(dir);
    ck_assert_msg(n == 4, "%d files after c0's time changed (a stale cache?)", n);
    /* every cache file turned into garbage: the folder is walked */
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "for f in '%s'/*; do echo 'vdnn image list 1' > \"$f\"; echo 'FILE 0 /nowhere' >> \"$f\"; done",
             lists);
    ck_assert_int_eq(system(cmd), 0);
    n = count_of(dir);
    ck_assert_msg(n == 4, "%d files from a cache file that holds no folder times", n);
    if (was) setenv("VDNN_CACHE", saved, 1);
    else unsetenv("VDNN_CACHE");
}
END_TEST

START_TEST(test_open_refusals)
{
    const uint8_t grey[3] = {90, 90, 90};
    /* no class folders: only files at the top, or nothing at all, or only hidden folders */
    solid_file("flat/a.jpg", 0, 8, 8, 3, grey);
    open_fails(tpath("flat"), NULL, tpath("flat"), NULL);
    mkdir_rel("empty");
    open_fails(tpath("empty"), NULL, tpath("empty"), NULL);
    solid_file("hidden/.c0/a.jpg", 0, 8, 8, 3, grey);
    open_fails(tpath("hidden"), NULL, tpath("hidden"), NULL);
    /* a class folder with no images (only other files, hidden images, an empty sub-folder) */
    solid_file("split/c0/a.jpg", 0, 8, 8, 3, grey);
    solid_file("split/c1/notes.txt", 0, 8, 8, 3, grey);
    solid_file("split/c1/.h.jpg", 0, 8, 8, 3, grey);
    mkdir_rel("split/c1/sub");
    open_fails(tpath("split"), NULL, tpath("split/c1"), NULL);
    /* a folder that is not there */
    open_fails(tpath("nowhere"), NULL, tpath("nowhere"), NULL);
}
END_TEST

START_TEST(test_open_list)
{
    const uint8_t grey[3] = {90, 90, 90};
    solid_file("root/a/one.jpg", 0, 10, 12, 3, grey);
    solid_file("root/two.png", 1, 13, 9, 3, grey);
    solid_file("root/b/three.JPEG", 0, 30, 20, 1, grey);
    solid_file("root/four.jpg", 0, 7, 7, 3, grey);
    const char *list = tpath("lists/train.txt");
    tn_write_text(list, "a/one.jpg 2\ntwo.png 0\nb/three.JPEG 5\nfour.jpg 2\n");
    dataset *d = open_ok(tpath("root"), list, 3, 16, 16);
    static const char *const files[] = {"/a/one.jpg", "/two.png", "/b/three.JPEG", "/four.jpg"};
    static const int labels[] = {2, 0, 5, 2};
    ck_assert_int_eq(d->count, 4);
    ck_assert_msg(d->classes > 5, "classes %d with a label 5", d->classes);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(d->labels[i], labels[i]);
        const char *p = images_path(d, i);
        size_t lp = strlen(p), lf = strlen(files[i]);
        ck_assert_msg(lp >= lf && !strcmp(p + lp - lf, files[i]), "item %d is %s, expected ...%s", i, p, files[i]);
        ck_assert_msg(access(p, R_OK) == 0, "item %d: %s is not a readable file (FILE is relative to the folder)", i,
                      p);
    }
    dataset_free(d);
}
END_TEST

START_TEST(test_open_list_refusals)
{
    static const struct { const char *text, *where; } bad[] = {
        {"a.jpg 1\nb.jpg\n", "bad.txt:2"},               /* no label */
        {"a.jpg 1\nb.jpg 0\nc.jpg -1\n", "bad.txt:3"},   /* negative */
        {"a.jpg x\n", "bad.txt:1"},                      /* not a number */
        {"a.jpg 1\nb.jpg 2x\n", "bad.txt:2"},            /* not a whole number */
        {"a.jpg 1\nb.jpg 1.5\n", "bad.txt:2"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *list = tpath("bad.txt");
        tn_write_text(list, bad[i].text);
        open_fails(tn_dir, list, bad[i].where, NULL);
    }
    open_fails(tn_dir, tpath("missing.txt"), "missing.txt", NULL);
}
END_TEST

static data_cfg images_cfg(const char *path)
{
    data_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    snprintf(cfg.set, sizeof cfg.set, "images");
    snprintf(cfg.path, sizeof cfg.path, "%s", path);
    cfg.nmean = 3;
    cfg.nstd = 3;
    for (int k = 0; k < 3; k++) {
        cfg.mean[k] = MEAN3[k];
        cfg.std[k] = STD3[k];
    }
    return cfg;
}

START_TEST(test_dataset_load_images)
{
    const uint8_t grey[3] = {90, 90, 90};
    for (int i = 0; i < 3; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "set/train/c0/%d.jpg", i);
        solid_file(rel, 0, 20 + i, 30, 3, grey);
        snprintf(rel, sizeof rel, "set/train/c1/%d.png", i);
        solid_file(rel, 1, 20, 30 + i, 3, grey);
    }
    solid_file("set/test/c0/t.jpg", 0, 40, 30, 3, grey);
    solid_file("set/test/c1/t.png", 1, 40, 30, 3, grey);
    data_cfg cfg = images_cfg(tpath("set"));
    dataset *tr = NULL, *te = NULL;
    ck_assert_msg(dataset_load(&cfg, SPLIT_TRAIN, 3, 24, 24, &tr) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_msg(dataset_load(&cfg, SPLIT_TEST, 3, 24, 24, &te) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert(tr->files && !tr->images && te->files && !te->images);
    ck_assert_int_eq(tr->count, 6);
    ck_assert_int_eq(te->count, 2);
    ck_assert_int_eq(tr->classes, 2);
    ck_assert_int_eq(te->classes, 2);
    ck_assert(tr->c == 3 && tr->h == 24 && tr->w == 24);
    ck_assert_ptr_nonnull(strstr(images_path(tr, 0), "/train/"));
    ck_assert_ptr_nonnull(strstr(images_path(te, 0), "/test/"));
    dataset_free(tr);
    dataset_free(te);

    /* the test split's classes must be train's: one more, or another name */
    solid_file("set/test/c2/t.jpg", 0, 40, 30, 3, grey);
    dataset *bad = (dataset *)1;
    ck_assert_int_ne(dataset_load(&cfg, SPLIT_TEST, 3, 24, 24, &bad), VDNN_OK);
    tn_msg_has(tpath("set/test"), NULL);
    ck_assert_ptr_null(bad);
    ck_assert_int_eq(rename(tpath("set/test/c2"), tpath("set/test/c1x")), 0);
    tn_rmtree(tpath("set/test/c1"));
    bad = (dataset *)1;
    ck_assert_int_ne(dataset_load(&cfg, SPLIT_TEST, 3, 24, 24, &bad), VDNN_OK);
    tn_msg_has(tpath("set/test"), NULL);
    ck_assert_ptr_null(bad);

    /* list files: train_list / test_list, FILE relative to path */
    tn_write_text(tpath("set/train.txt"), "train/c0/0.jpg 1\ntrain/c1/2.png 0\ntrain/c1/1.png 1\n");
    tn_write_text(tpath("set/test.txt"), "test/c0/t.jpg 0\n");
    snprintf(cfg.train_list, sizeof cfg.train_list, "%s", tpath("set/train.txt"));
    snprintf(cfg.test_list, sizeof cfg.test_list, "%s", tpath("set/test.txt"));
    ck_assert_msg(dataset_load(&cfg, SPLIT_TRAIN, 3, 24, 24, &tr) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_msg(dataset_load(&cfg, SPLIT_TEST, 3, 24, 24, &te) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_int_eq(tr->count, 3);
    ck_assert_int_eq(te->count, 1);
    ck_assert(tr->labels[0] == 1 && tr->labels[1] == 0 && tr->labels[2] == 1);
    ck_assert_ptr_nonnull(strstr(images_path(tr, 1), "train/c1/2.png"));
    ck_assert_msg(access(images_path(tr, 1), R_OK) == 0, "%s is not a readable file", images_path(tr, 1));
    dataset_free(tr);
    dataset_free(te);
}
END_TEST

START_TEST(test_xform_of)
{
    data_cfg cfg = images_cfg("x");
    image_xform x;
    image_xform_of(&cfg, 1, 3, 224, 224, &x);
    ck_assert(x.c == 3 && x.h == 224 && x.w == 224);
    ck_assert_int_eq(x.random, 1);   /* train_crop 0: random-resized */
    ck_assert_int_eq(x.flip, 0);
    ck_assert(fabsf(x.scale[0] - 0.08f) < 1e-6f && x.scale[1] == 1.0f);
    ck_assert(fabsf(x.ratio[0] - 0.75f) < 1e-6f && fabsf(x.ratio[1] - 4.0f / 3.0f) < 1e-6f);
    for (int k = 0; k < 3; k++) ck_assert(x.mean[k] == MEAN3[k] && x.std[k] == STD3[k]);
    image_xform_of(&cfg, 0, 3, 224, 224, &x);
    ck_assert_int_eq(x.random, 0);
    ck_assert_int_eq(x.resize, 256);   /* height * 8 / 7 */
    cfg.flip = 1;
    cfg.resize = 40;
    cfg.scale[0] = 0.25f;
    cfg.scale[1] = 0.5f;
    cfg.ratio[0] = 0.5f;
    cfg.ratio[1] = 2.0f;
    cfg.nmean = 1;
    cfg.mean[0] = 0.5f;
    cfg.nstd = 0;
    image_xform_of(&cfg, 1, 1, 32, 48, &x);
    ck_assert(x.c == 1 && x.h == 32 && x.w == 48 && x.random == 1 && x.flip == 1);
    ck_assert(x.scale[0] == 0.25f && x.scale[1] == 0.5f && x.ratio[0] == 0.5f && x.ratio[1] == 2.0f);
    ck_assert(x.mean[0] == 0.5f && x.std[0] == 1.0f);
    image_xform_of(&cfg, 0, 1, 32, 48, &x);
    ck_assert(x.random == 0 && x.flip == 0 && x.resize == 40);   /* evaluation: no flip */
    cfg.train_crop = DATA_CROP_CENTRE;
    image_xform_of(&cfg, 1, 3, 32, 48, &x);
    ck_assert(x.random == 0 && x.flip == 1 && x.resize == 40);
}
END_TEST

/* ---- one file into floats ---- */

/* A flat colour of any size gives that colour everywhere, JPEG within 2 levels (it is
 * lossy) and PNG exactly, with either crop, into 3 channels or 1 (the luminance, rounded). */
START_TEST(test_solid_colour)
{
    static const int sizes[][2] = {{37, 53}, {1, 1}, {200, 3}, {3, 120}, {640, 480}};
    const uint8_t rgb[3] = {200, 40, 90};
    const int gray = gray_of(rgb);   /* 94 */
    for (int png = 0; png < 2; png++)
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            int w = sizes[s][0], h = sizes[s][1];
            uint8_t *px = malloc((size_t)w * h * 3);
            imgf_fill_solid(px, w, h, 3, rgb);
            size_t len;
            uint8_t *file = png ? png_bytes(w, h, 3, px, &len) : jpeg_bytes(w, h, 3, px, NULL, &len);
            double tol = png ? 1e-5 * 255 * 0.229 : 2.0;
            for (int random = 0; random < 2; random++)
                for (uint64_t bits = 1; bits < 40; bits += 19) {
                    char what[128];
                    snprintf(what, sizeof what, "%s %dx%d random %d bits %llu", png ? "PNG" : "JPEG", w, h, random,
                             (unsigned long long)bits);
                    image_xform x = xform(3, 24, 20, random, 24, 1);
                    float *out = item_ok(png ? "solid.png" : "solid.jpg", file, len, &x, bits);
                    for (int k = 0; k < 3; k++) expect_flat(out, &x, k, rgb[k], tol, what);
                    free(out);
                    x = xform(1, 16, 16, random, 16, 1);
                    out = item_ok(png ? "solid.png" : "solid.jpg", file, len, &x, bits);
                    /* 1 level for the rounding of the luminance, and JPEG's own 2 */
                    expect_flat(out, &x, 0, gray, png ? 1.0 : 3.0, what);
                    free(out);
                }
            free(file);
            free(px);
        }
}
END_TEST

/* Gray files into 3 channels replicate; alpha is dropped, not composited; CMYK as
 * Photoshop writes it (Adobe marker, inverted) gives R = C * K / 255 and so on. */
START_TEST(test_gray_alpha_cmyk)
{
    uint8_t px[40 * 30 * 4];
    size_t len;
    const uint8_t g[1] = {77};
    imgf_fill_solid(px, 40, 30, 1, g);
    image_xform x = xform(3, 12, 12, 0, 12, 0);
    uint8_t *file = jpeg_bytes(40, 30, 1, px, NULL, &len);
    float *out = item_ok("gray.jpg", file, len, &x, 1);
    for (int k = 0; k < 3; k++) expect_flat(out, &x, k, 77, 2.0, "gray JPEG into RGB");
    for (int i = 0; i < 12 * 12; i++)
        ck_assert_msg(fabs(level(out, &x, 0, i / 12, i % 12) - level(out, &x, 2, i / 12, i % 12)) < 1e-3,
                      "gray JPEG: R and B differ at %d", i);
    free(out);
    free(file);
    file = png_bytes(40, 30, 1, px, &len);
    out = item_ok("gray.png", file, len, &x, 1);
    for (int k = 0; k < 3; k++) expect_flat(out, &x, k, 77, 1e-3, "gray PNG into RGB");
    free(out);
    free(file);

    const uint8_t rgba[4] = {10, 200, 30, 0}, rgba_half[4] = {10, 200, 30, 128}, ga[2] = {77, 3};
    const uint8_t *alphas[2] = {rgba, rgba_half};
    for (int a = 0; a < 2; a++) {
        imgf_fill_solid(px, 40, 30, 4, alphas[a]);
        file = png_bytes(40, 30, 4, px, &len);
        out = item_ok("rgba.png", file, len, &x, 1);
        for (int k = 0; k < 3; k++) expect_flat(out, &x, k, rgba[k], 1e-3, "RGBA PNG");
        free(out);
        free(file);
    }
    imgf_fill_solid(px, 40, 30, 2, ga);
    file = png_bytes(40, 30, 2, px, &len);
    out = item_ok("ga.png", file, len, &x, 1);
    for (int k = 0; k < 3; k++) expect_flat(out, &x, k, 77, 1e-3, "gray+alpha PNG");
    free(out);
    free(file);

    const uint8_t cmyk[4] = {200, 100, 50, 220};
    const double want[3] = {200.0 * 220 / 255, 100.0 * 220 / 255, 50.0 * 220 / 255};
    imgf_fill_solid(px, 40, 30, 4, cmyk);
    for (int ycck = 0; ycck < 2; ycck++) {
        imgf_jpeg_opts o = {.ycck = ycck};
        file = jpeg_bytes(40, 30, 4, px, &o, &len);
        out = item_ok("cmyk.jpg", file, len, &x, 1);
        for (int k = 0; k < 3; k++) expect_flat(out, &x, k, want[k], 3.0, ycck ? "YCCK JPEG" : "CMYK JPEG");
        free(out);
        free(file);
    }
}
END_TEST

/* Which stored pixel (x, y) of a w x h image shows at display position (X, Y) under
 * EXIF orientation o (the TIFF 6.0 definitions). */
static void stored_at(int o, int X, int Y, int w, int h, int *x, int *y)
{
    switch (o) {
    case 2: *x = w - 1 - X; *y = Y; break;
    case 3: *x = w - 1 - X; *y = h - 1 - Y; break;
    case 4: *x = X; *y = h - 1 - Y; break;
    case 5: *x = Y; *y = X; break;
    case 6: *x = Y; *y = h - 1 - X; break;
    case 7: *x = w - 1 - Y; *y = h - 1 - X; break;
    case 8: *x = w - 1 - Y; *y = X; break;
    default: *x = X; *y = Y; break;
    }
}

/* A square image of four flat quadrants (top-left 0, top-right 255, bottom-left 85,
 * bottom-right 170) under each EXIF orientation, resized to the output with no crop:
 * each output quadrant shows the stored quadrant the orientation puts there. Intel and
 * Motorola byte order, with and without an entry before the orientation's. */
START_TEST(test_exif_orientation)
{
    enum { S = 64, O = 32 };
    static const uint8_t quad[2][2] = {{0, 255}, {85, 170}};   /* [y][x] */
    uint8_t *px = malloc(S * S * 3);
    for (int y = 0; y < S; y++)
        for (int x = 0; x < S; x++) memset(px + (y * S + x) * 3, quad[y / (S / 2)][x / (S / 2)], 3);
    image_xform xf = xform(3, O, O, 0, O, 0);
    for (int variant = 0; variant < 3; variant++)
        for (int o = 1; o <= 8; o++) {
            imgf_jpeg_opts opt = {.quality = 100, .exif_orientation = o, .exif_big_endian = variant == 1,
                                  .exif_make_first = variant == 2};
            size_t len;
            uint8_t *file = jpeg_bytes(S, S, 3, px, &opt, &len);
            float *out = item_ok("exif.jpg", file, len, &xf, 1);
            for (int qy = 0; qy < 2; qy++)
                for (int qx = 0; qx < 2; qx++) {
                    int sx, sy;
                    stored_at(o, qx, qy, 2, 2, &sx, &sy);
                    /* away from the quadrants' edges, which resampling and JPEG blur */
                    int y0 = qy * O / 2 + 2, x0 = qx * O / 2 + 2;
                    for (int k = 0; k < 3; k++) {
                        double m = mean_level(out, &xf, k, y0, y0 + O / 2 - 4, x0, x0 + O / 2 - 4);
                        ck_assert_msg(fabs(m - quad[sy][sx]) <= 3.0,
                                      "orientation %d (%s%s): output quadrant (%d, %d) channel %d is %.1f, expected "
                                      "%d (stored quadrant (%d, %d))",
                                      o, variant == 1 ? "big-endian" : "little-endian",
                                      variant == 2 ? ", Make first" : "", qx, qy, k, m, quad[sy][sx], sx, sy);
                    }
                }
            free(out);
            free(file);
        }
    free(px);
}
END_TEST

static const uint8_t RGB_BANDS[9] = {255, 0, 0, 0, 255, 0, 0, 0, 255};

/* Output row or column `i` of a red | green | blue image is band `band`, all along it. */
static void expect_band(const float *out, const image_xform *x, int along_rows, int i, int band, double tol,
                        const char *what)
{
    int n = along_rows ? x->w : x->h;
    for (int j = 0; j < n; j++)
        for (int k = 0; k < 3; k++) {
            double v = along_rows ? level(out, x, k, i, j) : level(out, x, k, j, i);
            double want = RGB_BANDS[band * 3 + k];
            ck_assert_msg(fabs(v - want) <= tol, "%s: %s %d, %d: channel %d is %.2f, expected %.0f (band %d)", what,
                          along_rows ? "row" : "column", i, j, k, v, want, band);
        }
}

/* An image twice as wide as high, red | green | blue in thirds, into a square: resized
 * to the output's height, the centre crop keeps the middle half, so green fills the
 * middle and the red and blue thirds only the outer sixths. A squashed resize (no crop)
 * would show red at a quarter of the width, a crop from the left red at the middle. */
START_TEST(test_resize_centre_crop)
{
    enum { W = 192, H = 96, O = 32 };
    uint8_t *px = malloc(W * H * 3);
    imgf_fill_bands(px, W, H, 3, 3, RGB_BANDS);
    image_xform x = xform(3, O, O, 0, O, 0);
    size_t len;
    uint8_t *file = png_bytes(W, H, 3, px, &len);
    float *out = item_ok("bands.png", file, len, &x, 1);
    /* bands at output columns [0, 5.3), [5.3, 26.7), [26.7, 32) */
    for (int c = 9; c <= 22; c++) expect_band(out, &x, 0, c, 1, 1.0, "PNG centre crop");
    expect_band(out, &x, 0, 0, 0, 1.0, "PNG centre crop");
    expect_band(out, &x, 0, 31, 2, 1.0, "PNG centre crop");
    free(out);
    free(file);
    imgf_jpeg_opts q = {.quality = 100};
    file = jpeg_bytes(W, H, 3, px, &q, &len);
    out = item_ok("bands.jpg", file, len, &x, 1);
    for (int c = 9; c <= 22; c++) expect_band(out, &x, 0, c, 1, 6.0, "JPEG centre crop");
    expect_band(out, &x, 0, 0, 0, 6.0, "JPEG centre crop");
    expect_band(out, &x, 0, 31, 2, 6.0, "JPEG centre crop");
    free(out);
    free(file);

    /* A larger resize crops more tightly: at resize 64 the crop spans stored columns
     * 64..128 of 192, all green. */
    x = xform(3, O, O, 0, 64, 0);
    file = png_bytes(W, H, 3, px, &len);
    out = item_ok("bands.png", file, len, &x, 1);
    for (int c = 2; c < O - 2; c++) expect_band(out, &x, 0, c, 1, 1.0, "PNG centre crop at resize 64");
    free(out);
    free(file);

    /* The orientation is applied before the crop: stored 96 wide and 48 high, turned
     * by orientation 6 (or 8) the bands run top to bottom, red (or blue) on top. */
    imgf_fill_bands(px, 96, 48, 3, 3, RGB_BANDS);
    x = xform(3, O, O, 0, O, 0);
    for (int o = 6; o <= 8; o += 2) {
        imgf_jpeg_opts e = {.quality = 100, .exif_orientation = o};
        file = jpeg_bytes(96, 48, 3, px, &e, &len);
        out = item_ok("turned.jpg", file, len, &x, 1);
        char what[64];
        snprintf(what, sizeof what, "bands turned by orientation %d", o);
        for (int r = 9; r <= 22; r++) expect_band(out, &x, 1, r, 1, 6.0, what);
        expect_band(out, &x, 1, 0, o == 6 ? 0 : 2, 6.0, what);
        expect_band(out, &x, 1, O - 1, o == 6 ? 2 : 0, 6.0, what);
        free(out);
        free(file);
    }
    free(px);
}
END_TEST

/* The same bits give the same floats; with the random crop other bits give others;
 * without randomness the bits change nothing; the flip mirrors exactly. */
START_TEST(test_bits_and_flip)
{
    enum { W = 80, H = 60, O = 24, N = O * O * 3 };
    uint8_t px[W * H * 3];
    imgf_fill_texture(px, W, H, 3, 42);
    size_t len;
    uint8_t *file = jpeg_bytes(W, H, 3, px, NULL, &len);
    image_xform r = xform(3, O, O, 1, O, 1);
    float *a = item_ok("t.jpg", file, len, &r, 7), *b = item_ok("t.jpg", file, len, &r, 7);
    ck_assert_msg(!memcmp(a, b, sizeof(float) * N), "the same bits gave other floats");
    free(b);
    float *outs[8];
    int distinct = 0;
    for (int i = 0; i < 8; i++) {
        outs[i] = item_ok("t.jpg", file, len, &r, 1000 + (uint64_t)i * 7919);
        int same = 0;
        for (int j = 0; j < i && !same; j++) same = !memcmp(outs[i], outs[j], sizeof(float) * N);
        distinct += !same;
    }
    ck_assert_msg(distinct >= 7, "8 draws of the random-resized crop gave %d different outputs", distinct);
    ck_assert_msg(memcmp(a, outs[0], sizeof(float) * N) != 0, "bits 7 and 1000 gave the same crop");
    for (int i = 0; i < 8; i++) free(outs[i]);
    free(a);

    image_xform c = xform(3, O, O, 0, O, 0);
    float *base = item_ok("t.jpg", file, len, &c, 1), *other = item_ok("t.jpg", file, len, &c, 0xdeadbeef);
    ck_assert_msg(!memcmp(base, other, sizeof(float) * N), "with no random crop nor flip the bits changed the floats");
    free(other);
    c.flip = 1;
    int plain = 0, mirrored = 0;
    for (uint64_t bits = 0; bits < 64; bits++) {
        float *f = item_ok("t.jpg", file, len, &c, bits * 0x9E3779B97F4A7C15ull + 1);
        if (!memcmp(f, base, sizeof(float) * N)) {
            plain++;
        } else {
            for (int k = 0; k < 3; k++)
                for (int y = 0; y < O; y++)
                    for (int x = 0; x < O; x++) {
                        float got = f[(k * O + y) * O + x], want = base[(k * O + y) * O + (O - 1 - x)];
                        ck_assert_msg(fabsf(got - want) <= 1e-5f, "bits %llu: neither the image nor its mirror: "
                                      "(%d, %d, %d) is %g, mirrored %g", (unsigned long long)bits, k, y, x,
                                      (double)got, (double)want);
                    }
            mirrored++;
        }
        free(f);
    }
    ck_assert_msg(plain >= 12 && mirrored >= 12, "flip = 1 over 64 bits: %d plain, %d mirrored", plain, mirrored);
    free(base);
    free(file);
}
END_TEST

/* The crop a random-resized draw took, read back from an image whose red is its column
 * and green its row (scaled to 0..255): its left, top, width and height in the image's
 * pixels. An output pixel samples the crop at (i + 0.5) / O of its width, so the first
 * and last columns span (O - 1) / O of it. */
typedef struct seen_crop { double x, y, w, h; } seen_crop;

static seen_crop crop_of(const float *out, const image_xform *x, int side)
{
    double lo_r = 1e9, hi_r = -1e9, lo_g = 1e9, hi_g = -1e9;
    for (int y = 0; y < x->h; y++)
        for (int c = 0; c < x->w; c++) {
            double r = level(out, x, 0, y, c), g = level(out, x, 1, y, c);
            lo_r = fmin(lo_r, r); hi_r = fmax(hi_r, r);
            lo_g = fmin(lo_g, g); hi_g = fmax(hi_g, g);
        }
    double px = (side - 1) / 255.0;   /* image pixels per level */
    seen_crop c;
    c.w = (hi_r - lo_r) * px * x->w / (x->w - 1);
    c.h = (hi_g - lo_g) * px * x->h / (x->h - 1);
    c.x = lo_r * px - 0.5 * c.w / x->w;
    c.y = lo_g * px - 0.5 * c.h / x->h;
    return c;
}

/* The random-resized crop takes an area in [scale] of the image's with a width / height
 * in [ratio], placed anywhere inside it: seen on a PNG of 256 pixels a side and on a JPEG
 * of 1024 (decoded at a reduced DCT scale, the crop in full-size pixels all the same). */
START_TEST(test_random_resized_crop)
{
    static const int sides[2] = {256, 1024};
    for (int f = 0; f < 2; f++) {
        int S = sides[f];
        uint8_t *px = malloc((size_t)S * S * 3);
        for (int y = 0; y < S; y++)
            for (int c = 0; c < S; c++) {
                uint8_t *p = px + ((size_t)y * S + c) * 3;
                p[0] = (uint8_t)lround(c * 255.0 / (S - 1));
                p[1] = (uint8_t)lround(y * 255.0 / (S - 1));
                p[2] = 128;
            }
        size_t len;
        imgf_jpeg_opts q = {.quality = 100};
        uint8_t *file = f ? jpeg_bytes(S, S, 3, px, &q, &len) : png_bytes(S, S, 3, px, &len);
        const char *name = f ? "ramp.jpg" : "ramp.png";
        /* a tolerance of 2% of the side, and more for the JPEG's colour error */
        double tol = (f ? 0.03 : 0.02) * S;
        image_xform x = xform(3, 32, 32, 1, 32, 0);
        /* fixed area and ratio: a square of half the side; then twice as wide as high */
        static const float ratios[2] = {1.0f, 2.0f};
        for (int r = 0; r < 2; r++) {
            x.scale[0] = x.scale[1] = 0.25f;
            x.ratio[0] = x.ratio[1] = ratios[r];
            double want_w = S * sqrt(0.25 * ratios[r]), want_h = S * sqrt(0.25 / ratios[r]);
            double left_min = S, left_max = 0;
            for (uint64_t bits = 1; bits <= 12; bits++) {
                float *out = item_ok(name, file, len, &x, bits * 0x9E3779B97F4A7C15ull);
                seen_crop c = crop_of(out, &x, S);
                ck_assert_msg(fabs(c.w - want_w) <= tol && fabs(c.h - want_h) <= tol,
                              "%s, scale 0.25, ratio %g, bits %llu: a crop of %.1f x %.1f, expected %.1f x %.1f", name,
                              (double)ratios[r], (unsigned long long)bits, c.w, c.h, want_w, want_h);
                ck_assert_msg(c.x >= -tol && c.y >= -tol && c.x + c.w <= S + tol && c.y + c.h <= S + tol,
                              "%s: crop at (%.1f, %.1f) of %.1f x %.1f is not inside the image", name, c.x, c.y, c.w,
                              c.h);
                left_min = fmin(left_min, c.x);
                left_max = fmax(left_max, c.x);
                free(out);
            }
            ck_assert_msg(left_max - left_min > 0.1 * S, "%s: 12 crops all start within %.1f pixels", name,
                          left_max - left_min);
        }
        /* the default range: area fraction in [0.08, 1], ratio in [3/4, 4/3] */
        x.scale[0] = 0.08f;
        x.scale[1] = 1.0f;
        x.ratio[0] = 0.75f;
        x.ratio[1] = 4.0f / 3.0f;
        double area_min = 2, area_max = 0;
        for (uint64_t bits = 100; bits < 124; bits++) {
            float *out = item_ok(name, file, len, &x, bits);
            seen_crop c = crop_of(out, &x, S);
            double area = c.w * c.h / ((double)S * S), ratio = c.w / c.h;
            ck_assert_msg(area >= 0.08 * 0.85 && area <= 1.0 + 0.05 && ratio >= 0.75 * 0.93 && ratio <= 4.0 / 3 * 1.07,
                          "%s, bits %llu: a crop of %.1f x %.1f (area %.3f, ratio %.3f)", name,
                          (unsigned long long)bits, c.w, c.h, area, ratio);
            area_min = fmin(area_min, area);
            area_max = fmax(area_max, area);
            free(out);
        }
        ck_assert_msg(area_max - area_min > 0.3, "%s: 24 draws of the area all within [%.3f, %.3f]", name, area_min,
                      area_max);
        free(file);
        free(px);
    }
}
END_TEST

/* The format comes from the first bytes, not the name. */
START_TEST(test_format_from_bytes)
{
    const uint8_t rgb[3] = {20, 180, 60};
    uint8_t px[30 * 20 * 3];
    imgf_fill_solid(px, 30, 20, 3, rgb);
    image_xform x = xform(3, 8, 8, 0, 8, 0);
    size_t len;
    uint8_t *file = png_bytes(30, 20, 3, px, &len);
    float *out = item_ok("really-a-png.jpg", file, len, &x, 1);
    for (int k = 0; k < 3; k++) expect_flat(out, &x, k, rgb[k], 1e-3, "PNG named .jpg");
    free(out);
    free(file);
    file = jpeg_bytes(30, 20, 3, px, NULL, &len);
    out = item_ok("really-a-jpeg.png", file, len, &x, 1);
    for (int k = 0; k < 3; k++) expect_flat(out, &x, k, rgb[k], 2.0, "JPEG named .png");
    free(out);
    free(file);
    imgf_jpeg_opts p = {.progressive = 1};
    file = jpeg_bytes(30, 20, 3, px, &p, &len);
    out = item_ok("progressive.jpg", file, len, &x, 1);
    for (int k = 0; k < 3; k++) expect_flat(out, &x, k, rgb[k], 2.0, "progressive JPEG");
    free(out);
    free(file);
}
END_TEST

static void item_fails(const char *name, const uint8_t *file, size_t len)
{
    image_xform x = xform(3, 16, 16, 1, 16, 1);
    float out[3 * 16 * 16];
    vdnn_status s = image_item(name, file, len, &x, 5, out);
    ck_assert_msg(s != VDNN_OK, "image_item accepted %s (%zu bytes)", name, len);
    tn_msg_has(name, NULL);
}

/* Bad files fail with their name: cut short, corrupted, not an image at all, empty.
 * Random damage anywhere never crashes, and what decodes is finite. */
START_TEST(test_bad_files)
{
    enum { W = 96, H = 96 };
    uint8_t px[W * H * 3];
    imgf_fill_texture(px, W, H, 3, 9);
    size_t jlen, plen;
    uint8_t *jpg = jpeg_bytes(W, H, 3, px, NULL, &jlen), *png = png_bytes(W, H, 3, px, &plen);
    ck_assert_uint_gt(jlen, 2000);
    item_fails("cls/truncated.jpg", jpg, jlen / 2);
    item_fails("cls/truncated.png", png, plen / 2);
    item_fails("cls/soi-only.jpg", jpg, 2);
    item_fails("cls/signature-only.png", png, 8);
    uint8_t *bad = malloc(jlen > plen ? jlen : plen);
    memcpy(bad, jpg, jlen);
    /* stuffed 0xFF bytes: a run of 1-bits that is no Huffman code */
    for (size_t i = jlen / 2; i < jlen / 2 + 64; i += 2) {
        bad[i] = 0xFF;
        bad[i + 1] = 0x00;
    }
    item_fails("cls/garbage-inside.jpg", bad, jlen);
    const char *text = "this is a text file, not a picture\n";
    item_fails("cls/text.jpg", (const uint8_t *)text, strlen(text));
    item_fails("cls/text.png", (const uint8_t *)text, strlen(text));
    item_fails("cls/empty.jpg", (const uint8_t *)"", 0);

    image_xform x = xform(3, 16, 16, 1, 16, 1);
    float out[3 * 16 * 16];
    uint64_t s = 12345;
    for (int t = 0; t < 60; t++) {
        const uint8_t *src = t % 2 ? png : jpg;
        size_t len = t % 2 ? plen : jlen;
        memcpy(bad, src, len);
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        size_t at = (size_t)(s >> 33) % len, n = 1 + (size_t)(s >> 20) % 16;
        for (size_t i = at; i < at + n && i < len; i++) bad[i] = (uint8_t)(s >> (8 * (i % 8)));
        size_t cut = t % 3 == 0 ? (size_t)(s >> 40) % len : len;
        if (image_item("cls/damaged", bad, cut, &x, (uint64_t)t, out) == VDNN_OK) {
            for (int i = 0; i < 3 * 16 * 16; i++)
                ck_assert_msg(isfinite(out[i]), "damage %d: value %d not finite", t, i);
        } else {
            tn_msg_has("cls/damaged", NULL);
        }
    }
    free(bad);
    free(jpg);
    free(png);
}
END_TEST

/* ---- the loader over a folder ---- */

typedef struct batches {
    int nb, batch, n[32];
    size_t bx;
    float *x;
    int32_t *y;
} batches;

static batches read_batches(loader *l, int nb, int batch, size_t item)
{
    batches b = {.nb = nb, .batch = batch, .bx = item * (size_t)batch};
    ck_assert_int_le(nb, 32);
    b.x = calloc(b.bx * (size_t)nb, sizeof(float));
    b.y = calloc((size_t)batch * (size_t)nb, sizeof(int32_t));
    for (int i = 0; i < nb; i++) {
        vdnn_status s = loader_next(l, b.x + b.bx * (size_t)i, b.y + (size_t)batch * i, &b.n[i]);
        ck_assert_msg(s == VDNN_OK, "loader_next %d: %s", i, vdnn_errmsg());
    }
    return b;
}

static void batches_free(batches *b)
{
    free(b->x);
    free(b->y);
}

static void expect_same_batches(const batches *a, int from, const batches *b, const char *what)
{
    for (int i = 0; i < b->nb; i++) {
        ck_assert_msg(a->n[from + i] == b->n[i], "%s: batch %d has %d items, %d", what, i, a->n[from + i], b->n[i]);
        ck_assert_msg(!memcmp(a->x + a->bx * (size_t)(from + i), b->x + b->bx * (size_t)i, sizeof(float) * a->bx),
                      "%s: batch %d: other floats", what, i);
        ck_assert_msg(!memcmp(a->y + (size_t)a->batch * (from + i), b->y + (size_t)b->batch * i,
                              sizeof(int32_t) * (size_t)a->batch),
                      "%s: batch %d: other labels", what, i);
    }
}

static loader *start(const dataset *d, int batch, int shuffle, int augment, const data_cfg *cfg)
{
    loader_opts o = {.batch = batch, .shuffle = shuffle, .augment = augment, .seed = 99, .cfg = cfg};
    loader *l = NULL;
    vdnn_status s = loader_create(d, &o, &l);
    ck_assert_msg(s == VDNN_OK, "loader_create: %s", vdnn_errmsg());
    return l;
}

/* 24 files of mixed size and format in batches of 5: an epoch is 5, 5, 5, 5, 4, then
 * the n = 0 marker. With 1 or 3 workers the same floats and labels; a seek to the
 * middle of epoch 1 gives what reading through gave; epochs are shuffled differently;
 * without augmentation each item is image_item's centre crop of its file. */
START_TEST(test_loader_workers_and_seek)
{
    ck_assert_int_eq(imgf_make_tree(tn_dir, "train", 2, 12, 40, 120, 77), 24);
    dataset *d = open_ok(tpath("train"), NULL, 3, 32, 32);
    ck_assert_int_eq(d->count, 24);
    data_cfg cfg = images_cfg(tpath("."));
    cfg.flip = 1;
    cfg.workers = 1;
    size_t item = 3 * 32 * 32;
    loader *l = start(d, 5, 1, 1, &cfg);
    ck_assert_int_eq(loader_workers(l), 1);
    batches one = read_batches(l, 12, 5, item);
    loader_destroy(l);
    static const int want_n[6] = {5, 5, 5, 5, 4, 0};
    for (int i = 0; i < 12; i++) ck_assert_int_eq(one.n[i], want_n[i % 6]);
    for (int e = 0; e < 2; e++) {
        int per[2] = {0, 0};
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < one.n[e * 6 + i]; j++) {
                int32_t y = one.y[(e * 6 + i) * 5 + j];
                ck_assert(y == 0 || y == 1);
                per[y]++;
            }
        ck_assert_msg(per[0] == 12 && per[1] == 12, "epoch %d: %d and %d items per class", e, per[0], per[1]);
    }
    ck_assert_msg(memcmp(one.x, one.x + one.bx * 6, sizeof(float) * one.bx * 5) != 0, "epochs 0 and 1 are the same");
    ck_assert_msg(memcmp(one.y, one.y + 5 * 6, sizeof(int32_t) * 5 * 5) != 0, "epochs 0 and 1 in the same order");

    cfg.workers = 3;
    l = start(d, 5, 1, 1, &cfg);
    ck_assert_int_eq(loader_workers(l), 3);
    batches three = read_batches(l, 12, 5, item);
    expect_same_batches(&one, 0, &three, "3 workers against 1");
    loader_seek(l, 1, 10);   /* batch 2 of epoch 1: the 9th call */
    batches tail = read_batches(l, 4, 5, item);
    expect_same_batches(&one, 8, &tail, "seek to epoch 1, item 10");
    loader_seek(l, 0, 5);
    batches back = read_batches(l, 2, 5, item);
    expect_same_batches(&one, 1, &back, "seek back to epoch 0, item 5");
    loader_destroy(l);
    batches_free(&three);
    batches_free(&tail);
    batches_free(&back);
    batches_free(&one);

    /* no shuffle nor augmentation: item i is the centre crop of file i */
    l = start(d, 8, 0, 0, &cfg);
    batches plain = read_batches(l, 1, 8, item);
    loader_destroy(l);
    image_xform x;
    image_xform_of(&cfg, 0, 3, 32, 32, &x);
    for (int i = 0; i < 8; i++) {
        size_t len = 0;
        char *file = tn_read(images_path(d, i), &len);
        ck_assert_ptr_nonnull(file);
        float *want = item_ok(images_path(d, i), (const uint8_t *)file, len, &x, 1);
        ck_assert_msg(!memcmp(want, plain.x + item * (size_t)i, sizeof(float) * item),
                      "loader item %d differs from image_item of %s", i, images_path(d, i));
        ck_assert_int_eq(plain.y[i], d->labels[i]);
        free(want);
        free(file);
    }
    batches_free(&plain);
    dataset_free(d);
}
END_TEST

/* 14 files, two of them not images: c0/img002b.jpg (sorted 4th, among good files) and
 * c2/bad.jpg (last, alone in its class, so that whatever replaces it has another
 * label). Without strict, an epoch still gives full batches (4, 4, 4, 2), each bad
 * file's place taken by a readable file, image and label, and loader_take_skipped names
 * both, once; with strict, loader_next fails naming one. */
START_TEST(test_skipped_files)
{
    ck_assert_int_eq(imgf_make_tree(tn_dir, "train", 2, 6, 40, 80, 5), 12);
    tn_write_text(tpath("train/c0/img002b.jpg"), "not a JPEG at all\n");
    tn_write_text(tpath("train/c2/bad.jpg"), "\xff\xd8\xff\xe0 cut short");
    dataset *d = open_ok(tpath("train"), NULL, 3, 16, 16);
    ck_assert_int_eq(d->count, 14);
    ck_assert_int_eq(d->classes, 3);
    ck_assert_msg(strstr(images_path(d, 3), "img002b.jpg") != NULL, "item 3 is %s", images_path(d, 3));
    ck_assert_msg(strstr(images_path(d, 13), "c2/bad.jpg") != NULL, "item 13 is %s", images_path(d, 13));
    data_cfg cfg = images_cfg(tpath("."));
    cfg.workers = 2;
    size_t item = 3 * 16 * 16;
    loader *l = start(d, 4, 0, 0, &cfg);
    batches b = read_batches(l, 5, 4, item);
    static const int want_n[5] = {4, 4, 4, 2, 0};
    for (int i = 0; i < 5; i++) ck_assert_int_eq(b.n[i], want_n[i]);
    /* every item, the bad files' places too, is the centre crop of a readable file, with its label */
    image_xform x;
    image_xform_of(&cfg, 0, 3, 16, 16, &x);
    float *crops[14] = {NULL};
    for (int j = 0; j < 14; j++) {
        if (j == 3 || j == 13) continue;
        size_t len = 0;
        char *file = tn_read(images_path(d, j), &len);
        ck_assert_ptr_nonnull(file);
        crops[j] = item_ok(images_path(d, j), (const uint8_t *)file, len, &x, 1);
        free(file);
    }
    for (int i = 0; i < 14; i++) {
        int found = -1;
        for (int j = 0; j < 14 && found < 0; j++)
            if (crops[j] && !memcmp(crops[j], b.x + (size_t)i * item, sizeof(float) * item)) found = j;
        ck_assert_msg(found >= 0, "item %d is no readable file's image", i);
        ck_assert_msg(b.y[i] == d->labels[found], "item %d is file %d's image with label %d, not %d", i, found,
                      b.y[i], d->labels[found]);
        if (i != 3 && i != 13) ck_assert_msg(found == i, "item %d (no shuffle) is file %d", i, found);
    }
    for (int j = 0; j < 14; j++) free(crops[j]);
    char msgs[4096] = "";
    int skipped = loader_take_skipped(l, msgs, sizeof msgs);
    ck_assert_msg(skipped >= 2, "%d skipped", skipped);
    ck_assert_msg(strstr(msgs, images_path(d, 3)) && strstr(msgs, images_path(d, 13)),
                  "skipped messages do not name %s and %s:\n%s", images_path(d, 3), images_path(d, 13), msgs);
    ck_assert_int_eq(loader_take_skipped(l, NULL, 0), 0);
    loader_destroy(l);
    batches_free(&b);

    /* shuffled and augmented: still full batches */
    l = start(d, 4, 1, 1, &cfg);
    b = read_batches(l, 5, 4, item);
    for (int i = 0; i < 5; i++) ck_assert_int_eq(b.n[i], want_n[i]);
    ck_assert_int_ge(loader_take_skipped(l, NULL, 0), 2);
    loader_destroy(l);
    batches_free(&b);

    cfg.strict = 1;
    l = start(d, 4, 1, 1, &cfg);
    float bx[4 * 3 * 16 * 16];
    int32_t by[4];
    int n = 0, failed = 0;
    for (int i = 0; i < 5 && !failed; i++) failed = loader_next(l, bx, by, &n) != VDNN_OK;
    ck_assert_msg(failed, "strict: an epoch over a bad file did not fail");
    ck_assert_msg(strstr(vdnn_errmsg(), images_path(d, 3)) || strstr(vdnn_errmsg(), images_path(d, 13)),
                  "strict: the message names neither bad file: %s", vdnn_errmsg());
    loader_destroy(l);
    dataset_free(d);

    /* nothing readable at all: an error, not an endless search for a readable file */
    tn_write_text(tpath("junk/c0/a.jpg"), "not a JPEG\n");
    tn_write_text(tpath("junk/c0/b.png"), "");
    tn_write_text(tpath("junk/c1/c.jpeg"), "\xff\xd8\xff");
    d = open_ok(tpath("junk"), NULL, 3, 16, 16);
    cfg.strict = 0;
    l = start(d, 2, 1, 1, &cfg);
    failed = loader_next(l, bx, by, &n) != VDNN_OK;
    ck_assert_msg(failed, "a folder of unreadable files gave a batch of %d", n);
    tn_msg_has(tpath("junk"), NULL);
    loader_destroy(l);
    dataset_free(d);
}
END_TEST

/* ---- the config ---- */

#define IMG_NET "[net]\nbatch = 4\nchannels = 3\nheight = 32\nwidth = 32\n"
#define IMG_TRAIN "[train]\nepochs = 1\nlearning_rate = 0.01\nmomentum = 0.9\nseed = 5\n"
#define IMG_LAYERS "[convolutional]\nfilters = 4\nsize = 3\npad = 1\n[relu]\n[maxpool]\nsize = 2\n" \
                   "[connected]\noutput = 2\n[softmax]\n"

START_TEST(test_config_keys)
{
    /* [data] starts on line 11: a bad key on line 14 */
    net *n = tn_parse(IMG_NET IMG_TRAIN "[data]\nset = images\npath = /data/imagenet\ntrain_list = tr.txt\n"
                      "test_list = te.txt\ntrain_crop = random-resized\nscale = 0.25, 1\nratio = 0.5, 2\n"
                      "resize = 40\nworkers = 3\nstrict = 1\nflip = 1\nmean = 0.5\nstd = 0.25\n" IMG_LAYERS, NULL);
    const data_cfg *c = &n->data;
    ck_assert_str_eq(c->set, "images");
    ck_assert_str_eq(c->path, "/data/imagenet");
    ck_assert_str_eq(c->train_list, "tr.txt");
    ck_assert_str_eq(c->test_list, "te.txt");
    ck_assert_int_eq(c->train_crop, DATA_CROP_RANDOM_RESIZED);
    ck_assert(c->scale[0] == 0.25f && c->scale[1] == 1.0f && c->ratio[0] == 0.5f && c->ratio[1] == 2.0f);
    ck_assert(c->resize == 40 && c->workers == 3 && c->strict == 1 && c->flip == 1);
    net_free(n);
    n = tn_parse(IMG_NET IMG_TRAIN "[data]\nset = images\npath = x\ntrain_crop = centre\n" IMG_LAYERS, NULL);
    ck_assert_int_eq(n->data.train_crop, DATA_CROP_CENTRE);
    ck_assert(n->data.scale[0] == 0 && n->data.ratio[0] == 0 && n->data.resize == 0 && n->data.strict == 0 &&
              n->data.workers == 0 && n->data.train_list[0] == 0);
    net_free(n);
    tn_parse_fails(IMG_NET IMG_TRAIN "[data]\nset = images\npath = x\ntrain_crop = sideways\n" IMG_LAYERS,
                   VDNN_EINVAL, TN_NAME ":14:", "train_crop");
    tn_parse_fails(IMG_NET IMG_TRAIN "[data]\nset = images\npath = x\nscale = 0.5, 0.25\n" IMG_LAYERS, VDNN_EINVAL,
                   TN_NAME ":14:", "scale");
    tn_parse_fails(IMG_NET IMG_TRAIN "[data]\nset = images\npath = x\nworkers = -1\n" IMG_LAYERS, VDNN_EINVAL,
                   TN_NAME ":14:", "workers");
}
END_TEST

/* ---- the program ---- */

static const char *vdnn_bin(void)
{
    const char *b = getenv("VDNN_BIN");
    return b && *b ? b : "build/vdnn";
}

/* A config for a folder at dir, its [data] followed by `extra` lines. */
static const char *write_cfg(const char *name, const char *dir, const char *extra)
{
    char text[4096];
    snprintf(text, sizeof text,
             IMG_NET IMG_TRAIN "[data]\nset = images\npath = %s\nflip = 1\nscale = 0.25, 1\nratio = 0.75, 1.333\n"
                               "resize = 36\nworkers = 2\nmean = 0.485, 0.456, 0.406\nstd = 0.229, 0.224, 0.225\n%s"
                               IMG_LAYERS,
             dir, extra);
    const char *path = tpath(name);
    tn_write_text(path, text);
    return path;
}

static void run_ok(const char *args)
{
    tn_run r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    tn_run_free(&r);
}

/* 20 JPEG and PNG files of 40 to 120 pixels a side, into a 32x32 net: 4 steps, or 2
 * then 2 resumed, write the same checkpoint. */
START_TEST(test_cli_train_and_resume)
{
    ck_assert_int_eq(imgf_make_tree(tpath("set"), "train", 2, 10, 40, 120, 3), 20);
    ck_assert_int_eq(imgf_make_tree(tpath("set"), "test", 2, 3, 40, 120, 4), 6);
    const char *cfg = write_cfg("net.cfg", tpath("set"), "");
    char a[600], b[600], c[600], args[2048];
    snprintf(a, sizeof a, "%s", tpath("a.ckpt"));
    snprintf(b, sizeof b, "%s", tpath("b.ckpt"));
    snprintf(c, sizeof c, "%s", tpath("c.ckpt"));
    snprintf(args, sizeof args, "train %s --steps 4 --batch 4 --save %s --quiet --threads 1 --algo mem", cfg, a);
    run_ok(args);
    snprintf(args, sizeof args, "train %s --steps 2 --batch 4 --save %s --quiet --threads 1 --algo mem", cfg, b);
    run_ok(args);
    snprintf(args, sizeof args, "train %s --steps 2 --batch 4 --resume %s --save %s --quiet --threads 1 --algo mem",
             cfg, b, c);
    run_ok(args);
    ck_assert_msg(tn_same_file(a, c), "resumed checkpoint %s differs from %s", c, a);
    ck_assert_msg(!tn_same_file(a, b), "2 steps wrote what 4 did");
    /* evaluation over the test folder: resize and centre crop */
    snprintf(args, sizeof args, "test %s --weights %s --batch 4 --threads 1", cfg, a);
    run_ok(args);
}
END_TEST

/* The number of skipped files on the images/s line of `vdnn data`: the last number
 * before "skipped" ("1 skipped", "(6 batches, 1 unreadable files skipped)") or the first
 * after it ("skipped: 1"). The check fails without such a line. */
static long skipped_in(const char *out)
{
    const char *line = strstr(out, "images/s");
    ck_assert_msg(line != NULL, "no images/s in:\n%s", out);
    while (line > out && line[-1] != '\n') line--;
    size_t ll = strcspn(line, "\n");
    char one[512];
    snprintf(one, sizeof one, "%.*s", (int)(ll < 511 ? ll : 511), line);
    const char *sk = strstr(one, "skipped");
    ck_assert_msg(sk != NULL, "the images/s line does not say what was skipped: %s", one);
    long before = -1, after = -1;
    for (const char *p = strstr(one, "images/s"); p < sk; p++)
        if (*p >= '0' && *p <= '9' && (p[-1] == ' ' || p[-1] == '(')) before = strtol(p, NULL, 10);
    const char *q = sk + strlen("skipped");
    while (*q == ' ' || *q == ':' || *q == '=') q++;
    if (*q >= '0' && *q <= '9') after = strtol(q, NULL, 10);
    ck_assert_msg(before >= 0 || after >= 0, "no count of skipped files in: %s", one);
    return before >= 0 ? before : after;
}

/* `vdnn data` runs the loader alone: a rate and the number of files skipped. */
START_TEST(test_cli_data)
{
    ck_assert_int_eq(imgf_make_tree(tpath("set"), "train", 2, 6, 40, 100, 8), 12);
    ck_assert_int_eq(imgf_make_tree(tpath("set"), "test", 2, 2, 40, 100, 9), 4);
    tn_write_text(tpath("set/train/c1/broken.jpg"), "not a JPEG\n");
    /* the config names a folder that is not there: --data gives the real one */
    const char *cfg = write_cfg("net.cfg", tpath("nowhere"), "");
    char args[2048];
    /* 6 batches of 4 over 13 files: every file once, some twice */
    snprintf(args, sizeof args, "data %s --data %s --batches 6 --workers 2", cfg, tpath("set"));
    tn_run r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    long skipped = skipped_in(r.out);
    ck_assert_msg(skipped >= 1 && skipped <= 2, "one broken file, read once or twice, counted %ld times:\n%s",
                  skipped, r.out);
    tn_run_free(&r);
    /* the clean test folder: nothing skipped */
    snprintf(args, sizeof args, "data %s --data %s --split test --batches 2 --workers 1", cfg, tpath("set"));
    r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    ck_assert_msg(skipped_in(r.out) == 0, "files skipped in a clean folder:\n%s", r.out);
    tn_run_free(&r);
}
END_TEST

/* Training over a folder with an unreadable file: a warning naming it, the count on the
 * epoch's line and in the log's skipped_files, every step's data_wait_ms and the epoch's
 * data_wait_s; then with strict = 1 the run stops naming it. */
START_TEST(test_cli_train_reports_skipped)
{
    ck_assert_int_eq(imgf_make_tree(tpath("set"), "train", 2, 6, 40, 100, 8), 12);
    ck_assert_int_eq(imgf_make_tree(tpath("set"), "test", 2, 2, 40, 100, 9), 4);
    tn_write_text(tpath("set/train/c1/broken.jpg"), "not a JPEG\n");
    const char *cfg = write_cfg("net.cfg", tpath("set"), "");
    char log[600], args[2048];
    snprintf(log, sizeof log, "%s", tpath("log.json"));
    snprintf(args, sizeof args, "train %s --epochs 1 --batch 4 --no-save --threads 1 --algo mem --log %s", cfg, log);
    tn_run r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    ck_assert_msg(strstr(r.out, "skipped an unreadable file") && strstr(r.out, "broken.jpg"),
                  "no warning naming broken.jpg:\n%s", r.out);
    ck_assert_msg(strstr(r.out, "unreadable files skipped"), "the epoch's line does not count it:\n%s", r.out);
    ck_assert_msg(strstr(r.out, "2 loader workers"), "the config's workers = 2 not said:\n%s", r.out);
    tn_run_free(&r);
    json_t *lines = tj_lines(log);
    int steps = 0, epochs = 0;
    for (size_t i = 0; i < json_array_size(lines); i++) {
        json_t *l = json_array_get(lines, i);
        if (tj_has(l, "step_time_ms")) {
            steps++;
            ck_assert_msg(tj_num(l, "data_wait_ms") >= 0, "step line %zu has no data_wait_ms", i);
        } else if (tj_has(l, "train_loss")) {
            epochs++;
            ck_assert_msg(tj_int(l, "skipped_files") >= 1, "the epoch's skipped_files is %lld",
                          tj_int(l, "skipped_files"));
            ck_assert(tj_num(l, "data_wait_s") >= 0);
        }
    }
    ck_assert_int_eq(steps, 4);
    ck_assert_int_eq(epochs, 1);
    json_decref(lines);
    const char *strict = write_cfg("strict.cfg", tpath("set"), "strict = 1\n");
    snprintf(args, sizeof args, "train %s --epochs 1 --batch 4 --no-save --threads 1 --algo mem --workers 3", strict);
    r = tn_vdnn(tn_dir, "", args);
    ck_assert_msg(strstr(r.out, "3 loader workers"), "--workers 3 not applied:\n%s", r.out);
    ck_assert_msg(r.status != 0 && strstr(r.err, "broken.jpg"), "strict: status %d, no stop naming the file:\n%s",
                  r.status, r.err);
    tn_run_free(&r);
}
END_TEST

/* A shipped ImageNet config (ResNet-50, shrunk to 48x48 as other suites do) trains a step
 * on a folder of JPEG files of other sizes. */
START_TEST(test_cli_resnet50_on_a_folder)
{
    if (UNDER_SANITIZER) {
        printf("SKIPPED: test_cli_resnet50_on_a_folder (ResNet-50 is slow under a sanitizer; the small net's runs "
               "stand for it)\n");
        return;
    }
    ck_assert_int_eq(imgf_make_tree(tpath("set"), "train", 2, 4, 50, 90, 11), 8);
    ck_assert_int_eq(imgf_make_tree(tpath("set"), "test", 2, 1, 50, 90, 12), 2);
    char *text = tn_imagenet_48(tn_read("configs/resnet50.cfg", NULL));
    char *at = strstr(text, "[data]\n"), *end = at ? strstr(at + 1, "\n[") : NULL;
    char *out = strstr(text, "output = 1000\n");
    ck_assert(at && end && out && out > end);
    char data[1024];
    snprintf(data, sizeof data, "[data]\nset = images\npath = %s\nflip = 1\nmean = 0.485, 0.456, 0.406\n"
             "std = 0.229, 0.224, 0.225\n", tpath("set"));
    size_t cap = strlen(text) + sizeof data;
    char *cfg = malloc(cap);
    snprintf(cfg, cap, "%.*s%s%.*soutput = 2\n%s", (int)(at - text), text, data, (int)(out - (end + 1)), end + 1,
             out + strlen("output = 1000\n"));
    tn_write_text(tpath("r50.cfg"), cfg);
    free(cfg);
    free(text);
    char args[2048];
    snprintf(args, sizeof args, "train %s --steps 1 --batch 2 --no-save --quiet --threads 1 --algo mem",
             tpath("r50.cfg"));
    run_ok(args);
}
END_TEST

/* `vdnn train` under an address-space limit (RLIMIT_AS) with MALLOC_ARENA_MAX=2 and
 * one OpenMP thread: its status, 128 + signal if it died (SIGALRM after 60 s). */
static int run_limited(const char *cfg, rlim_t limit_bytes, const char *log)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        struct rlimit rl = {limit_bytes, limit_bytes};
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || setrlimit(RLIMIT_AS, &rl) != 0) _exit(126);
        alarm(60);   /* OpenBLAS spins, not fails, when its buffers do not fit: a hang ends here */
        dup2(fd, 1);
        dup2(fd, 2);
        setenv("MALLOC_ARENA_MAX", "2", 1);
        setenv("OMP_NUM_THREADS", "1", 1);
        execl(vdnn_bin(), vdnn_bin(), "train", cfg, "--steps", "2", "--batch", "2", "--threads", "1", "--no-save",
              "--quiet", "--algo", "mem", (char *)NULL);
        _exit(127);
    }
    int w = 0;
    ck_assert_int_eq(waitpid(pid, &w, 0), pid);
    return WIFEXITED(w) ? WEXITSTATUS(w) : 128 + WTERMSIG(w);
}

/* Room for what a small net's run adds to its libraries: OpenBLAS's buffers, the
 * threads' stacks, the loader's batches and decode buffers, the pool (measured: a run
 * on the CPU build needs about 416 MiB in all, 384 MiB is too little). */
#define RUN_ROOM ((rlim_t)768 << 20)

/* 2,400 links to one 1024x1024 JPEG: 7.5 GB decoded, trained on under an address-space
 * limit of what the libraries map plus RUN_ROOM (measured: 1067 MiB on the CPU build,
 * 1742 MiB with CUDA's libraries), so a loader that held the decoded set, or any large
 * part of it, would fail here. Under 32 MiB the program cannot even start: the limit
 * does bite. */
START_TEST(test_bounded_memory)
{
    if (UNDER_SANITIZER) {
        printf("SKIPPED: test_bounded_memory under a sanitizer (its shadow memory reserves terabytes of address "
               "space)\n");
        return;
    }
    enum { S = 1024, FILES = 2400 };
    uint8_t *px = malloc((size_t)S * S * 3);
    imgf_fill_texture(px, S, S, 3, 1);
    jpeg_file("big.jpg", S, S, 3, px, 85, 0);
    free(px);
    for (int i = 0; i < FILES; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "set/train/c%d/%03d.jpg", i % 2, i / 2);
        ck_assert_msg(link(tpath("big.jpg"), tpath(rel)) == 0, "link %s: %s", rel, strerror(errno));
    }
    for (int k = 0; k < 2; k++) {
        char rel[64];
        snprintf(rel, sizeof rel, "set/test/c%d/t.jpg", k);
        ck_assert_int_eq(link(tpath("big.jpg"), tpath(rel)), 0);
    }
    double decoded = (double)FILES * S * S * 3;
    rlim_t limit = (rlim_t)tn_mapped_bytes() + RUN_ROOM;
    ck_assert_msg(decoded > 2.0 * (double)limit, "decoded %.0f bytes is not far above the limit of %llu", decoded,
                  (unsigned long long)limit);
    const char *cfg = write_cfg("net.cfg", tpath("set"), "");
    const char *log = tpath("run.log");
    printf("test_bounded_memory: %.0f MiB of images decoded under a %llu MiB address-space limit\n", decoded / 1048576,
           (unsigned long long)(limit >> 20));
    int st = run_limited(cfg, limit, log);
    char *text = tn_read(log, NULL);
    ck_assert_msg(st == 0, "vdnn train under a %llu MiB address-space limit exited %d:\n%s",
                  (unsigned long long)(limit >> 20), st, tn_tail(text, 2000));
    free(text);
    st = run_limited(cfg, (rlim_t)32 << 20, log);
    ck_assert_msg(st != 0, "vdnn train ran under a 32 MiB limit: the limit does not bite");
}
END_TEST

static Suite *images_suite(void)
{
    Suite *s = suite_create("images");
    TCase *list = tcase_create("list");
    tcase_add_checked_fixture(list, tn_dir_setup, tn_dir_teardown);
    tcase_set_timeout(list, 60);
    tcase_add_test(list, test_open_class_folders);
    tcase_add_test(list, test_open_sees_changes);
    tcase_add_test(list, test_open_uses_cache);
    tcase_add_test(list, test_open_refusals);
    tcase_add_test(list, test_open_list);
    tcase_add_test(list, test_open_list_refusals);
    tcase_add_test(list, test_dataset_load_images);
    tcase_add_test(list, test_xform_of);
    tcase_add_test(list, test_config_keys);
    suite_add_tcase(s, list);

    TCase *decode = tcase_create("decode");
    tcase_set_timeout(decode, 60);
    tcase_add_test(decode, test_solid_colour);
    tcase_add_test(decode, test_gray_alpha_cmyk);
    tcase_add_test(decode, test_exif_orientation);
    tcase_add_test(decode, test_resize_centre_crop);
    tcase_add_test(decode, test_bits_and_flip);
    tcase_add_test(decode, test_random_resized_crop);
    tcase_add_test(decode, test_format_from_bytes);
    tcase_add_test(decode, test_bad_files);
    suite_add_tcase(s, decode);

    TCase *load = tcase_create("loader");
    tcase_add_checked_fixture(load, tn_dir_setup, tn_dir_teardown);
    tcase_set_timeout(load, 60);
    tcase_add_test(load, test_loader_workers_and_seek);
    tcase_add_test(load, test_skipped_files);
    suite_add_tcase(s, load);

    TCase *cli = tcase_create("cli");
    tcase_add_checked_fixture(cli, tn_dir_setup, tn_dir_teardown);
    tcase_set_timeout(cli, 120);
    tcase_add_test(cli, test_cli_train_and_resume);
    tcase_add_test(cli, test_cli_data);
    tcase_add_test(cli, test_cli_train_reports_skipped);
    tcase_add_test(cli, test_cli_resnet50_on_a_folder);
    tcase_add_test(cli, test_bounded_memory);
    suite_add_tcase(s, cli);
    return s;
}

int main(void) { return tn_run_suite(images_suite()); }
