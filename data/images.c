/* Image folders (set = images): the file list of a split, never its pixels.
 *
 * A split is either a folder of class folders, dir/<class>/.../FILE, with classes the
 * visible sub-folders sorted by strcmp (label k is the k-th) and every JPEG or PNG file
 * (by extension: .jpg, .jpeg, .png in any case) at any depth below a class folder, in
 * sorted order; or a list file of "FILE LABEL" lines (Caffe's ImageData layer), FILE
 * relative to dir. Hidden files and folders (a leading '.') are left out. The loader
 * decodes each file when its batch is prepared (transform.c), so a split of any size
 * costs its list in memory: the paths and a label per file.
 *
 * Listing a folder of a million files takes seconds, so the list of class folders is
 * cached (vdnn_cache_dir()/lists/, one file per folder) with the modification time of
 * every folder it walked: adding, removing or renaming a file or folder changes its
 * parent's time, and a cache whose times all still match is the folder's list. A
 * folder changed in the last seconds is not cached, as git does not trust an index
 * entry as new as the index: on a file system whose times are coarse, a change in the
 * same second would leave the time as it was. */
#include "data/data_impl.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "vdnn/file.h"
#include "vdnn/hash.h"
#include "vdnn/rng.h"

#define IMAGES_PATH_MAX 4096
/* Class folders nested deeper than this are refused (a symbolic-link loop ends here). */
#define IMAGES_MAX_DEPTH 16
#define IMAGES_MAX_LABEL 1000000
/* A list file is refused beyond this size (ImageNet's is 44 MB). */
#define IMAGES_LIST_MAX ((size_t)1 << 30)
/* Folders changed less than this many seconds before a listing are not cached. */
#define CACHE_RACY_S 3

/* The folders a listing walked, with their times: the cache's check. */
typedef struct walked {
    char *text;              /* "DIR SEC NSEC PATH\n" lines */
    size_t used, size;
    int bad;                 /* out of memory, or a path no line can hold: no cache */
} walked;

static void walked_add(walked *w, const char *path, const struct stat *st)
{
    if (w->bad) return;
    /* a folder changed in the last seconds may change again within its file system's
     * time resolution (a second or two on some) without its time changing: no cache */
    if (strchr(path, '\n') || st->st_mtim.tv_sec >= time(NULL) - CACHE_RACY_S) {
        w->bad = 1;
        return;
    }
    size_t need = strlen(path) + 64;
    if (w->used + need > w->size) {
        size_t size = w->size ? 2 * w->size : 4096;
        while (size < w->used + need) size *= 2;
        char *t = realloc(w->text, size);
        if (!t) {
            w->bad = 1;
            return;
        }
        w->text = t;
        w->size = size;
    }
    w->used += (size_t)snprintf(w->text + w->used, w->size - w->used, "DIR %lld %ld %s\n", (long long)st->st_mtim.tv_sec,
                                (long)st->st_mtim.tv_nsec, path);
}

const char *images_path(const dataset *d, int i)
{
    if (!d || !d->files || i < 0 || i >= d->files->count) return "(no such item)";
    return d->files->arena + d->files->off[i];
}

/* Appends a path and its label (labels grow beside the list, in *labels). */
static vdnn_status list_add(image_list *l, int32_t **labels, const char *path, int label)
{
    size_t n = strlen(path) + 1;
    if (l->count == INT_MAX) return vdnn_fail(VDNN_EFORMAT, "%s: more than %d images", path, INT_MAX);
    if (l->count == l->cap) {
        int cap = l->cap ? (l->cap > INT_MAX / 2 ? INT_MAX : 2 * l->cap) : 1024;
        size_t *off = realloc(l->off, sizeof *off * (size_t)cap);
        if (off) l->off = off;
        int32_t *lab = off ? realloc(*labels, sizeof *lab * (size_t)cap) : NULL;
        if (lab) *labels = lab;
        if (!off || !lab) return vdnn_fail(VDNN_ENOMEM, "out of host memory listing images (at %s)", path);
        l->cap = cap;
    }
    if (l->used + n > l->size) {
        size_t size = l->size ? 2 * l->size : (size_t)1 << 16;
        while (size < l->used + n) size *= 2;
        char *a = realloc(l->arena, size);
        if (!a) return vdnn_fail(VDNN_ENOMEM, "out of host memory listing images (at %s)", path);
        l->arena = a;
        l->size = size;
    }
    memcpy(l->arena + l->used, path, n);
    l->off[l->count] = l->used;
    (*labels)[l->count] = label;
    l->used += n;
    l->count++;
    return VDNN_OK;
}

static int is_image_name(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot && (!strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".jpeg") || !strcasecmp(dot, ".png"));
}

/* Adds every image file at any depth below dir with this label. */
static vdnn_status walk(const char *dir, int label, int depth, image_list *l, int32_t **labels, walked *wk)
{
    if (depth > IMAGES_MAX_DEPTH)
        return vdnn_fail(VDNN_EFORMAT, "%s: folders nested more than %d deep (a link loop?)", dir, IMAGES_MAX_DEPTH);
    struct stat dst;
    if (stat(dir, &dst) == 0) walked_add(wk, dir, &dst);
    else wk->bad = 1;
    char **names;
    int n;
    vdnn_status s = data_list_dir(dir, DATA_LIST_ANY, NULL, &names, &n);
    for (int i = 0; !s && i < n; i++) {
        char path[IMAGES_PATH_MAX];
        struct stat st;
        s = data_join(path, sizeof path, dir, names[i]);
        if (s || stat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) s = walk(path, label, depth + 1, l, labels, wk);
        else if (S_ISREG(st.st_mode) && is_image_name(names[i])) s = list_add(l, labels, path, label);
    }
    data_free_names(names, n);
    return s;
}

/* The cache file of folder dir. */
static vdnn_status cache_path(const char *dir, char *buf, size_t len)
{
    char home[1024], abs[IMAGES_PATH_MAX];
    const char *folder = vdnn_cache_dir(home, sizeof home);
    if (!realpath(dir, abs)) snprintf(abs, sizeof abs, "%s", dir);
    uint64_t h = vdnn_hash_str(VDNN_HASH_START, abs);
    int w = snprintf(buf, len, "%s/lists/images-%016llx.txt", folder, (unsigned long long)h);
    if (w < 0 || (size_t)w >= len) return vdnn_fail(VDNN_EINVAL, "image list cache path too long: %s", folder);
    return VDNN_OK;
}

/* Parses a cache line "FILE LABEL PATH" or "CLASS NAME" into the list; "DIR" lines are
 * checked against the folder's times. Returns 0 when the cache does not hold dir's
 * list as it is now. */
static int cache_line(char *line, const char *dir, int *root_seen, image_list *l, int32_t **labels, int *classes)
{
    if (!strncmp(line, "DIR ", 4)) {
        long long sec;
        long nsec;
        int at = 0;
        if (sscanf(line + 4, "%lld %ld %n", &sec, &nsec, &at) != 2 || !at) return 0;
        const char *path = line + 4 + at;
        struct stat st;
        if (!*root_seen && strcmp(path, dir)) return 0;
        *root_seen = 1;
        return stat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_mtim.tv_sec == sec && st.st_mtim.tv_nsec == nsec;
    }
    if (!strncmp(line, "CLASS ", 6)) {
        (*classes)++;
        return 1;
    }
    if (!strncmp(line, "FILE ", 5)) {
        char *end;
        long label = strtol(line + 5, &end, 10);
        if (end == line + 5 || *end != ' ' || label < 0 || label >= *classes) return 0;
        return list_add(l, labels, end + 1, (int)label) == VDNN_OK;
    }
    return 0;
}

/* The cached list of dir, when it is still the folder's: 1 and the list filled. */
static int cache_load(const char *dir, image_list *l, int32_t **labels, int *classes)
{
    char path[1200], *text = NULL;
    size_t len = 0;
    if (cache_path(dir, path, sizeof path) || vdnn_file_read(path, "image list cache", IMAGES_LIST_MAX * 2,
                                                            VDNN_FILE_TEXT, &text, &len))
        return 0;
    int ok = !strncmp(text, "vdnn image list 1\n", 18), root = 0;
    *classes = 0;
    for (char *p = text + (ok ? 18 : 0); ok && *p;) {
        char *nl = strchr(p, '\n');
        if (!nl) ok = 0;
        else {
            *nl = 0;
            ok = cache_line(p, dir, &root, l, labels, classes);
            p = nl + 1;
        }
    }
    free(text);
    if (ok && root && l->count > 0) return 1;
    l->count = 0;
    l->used = 0;
    return 0;
}

/* Writes the cache of dir's list; a cache that cannot be written is no error. */
static void cache_save(const char *dir, const walked *wk, char **names, int nclasses, const image_list *l,
                       const int32_t *labels)
{
    char path[1200];
    if (wk->bad || cache_path(dir, path, sizeof path)) return;
    size_t size = 32 + wk->used + l->used + (size_t)l->count * 24;
    for (int k = 0; k < nclasses; k++) size += strlen(names[k]) + 8;
    char *text = malloc(size);
    if (!text) return;
    size_t at = (size_t)snprintf(text, size, "vdnn image list 1\n");
    memcpy(text + at, wk->text, wk->used);
    at += wk->used;
    for (int k = 0; k < nclasses; k++) at += (size_t)snprintf(text + at, size - at, "CLASS %s\n", names[k]);
    for (int i = 0; i < l->count; i++)
        at += (size_t)snprintf(text + at, size - at, "FILE %d %s\n", labels[i], l->arena + l->off[i]);
    char folder[1200];
    snprintf(folder, sizeof folder, "%s", path);
    char *slash = strrchr(folder, '/');
    if (slash) *slash = 0;
    vdnn_make_dirs(folder);
    vdnn_file_replace(path, "image list cache", text, at);
    free(text);
}

static vdnn_status open_folders(const char *dir, image_list *l, int32_t **labels, int *classes)
{
    if (cache_load(dir, l, labels, classes)) return VDNN_OK;
    char **names;
    int n;
    walked wk = {0};
    struct stat st;
    if (stat(dir, &st) == 0) walked_add(&wk, dir, &st);
    else wk.bad = 1;
    vdnn_status s = data_list_classes(dir, &names, &n);
    if (s) {
        free(wk.text);
        return s;
    }
    if (n == 0) s = vdnn_fail(VDNN_EFORMAT, "%s: no class folders (expected %s/<class>/*.jpg or *.png)", dir, dir);
    for (int k = 0; !s && k < n; k++) {
        if (strchr(names[k], '\n')) wk.bad = 1;
        char cdir[IMAGES_PATH_MAX];
        int before = l->count;
        s = data_join(cdir, sizeof cdir, dir, names[k]);
        if (!s) s = walk(cdir, k, 1, l, labels, &wk);
        if (!s && l->count == before)
            s = vdnn_fail(VDNN_EFORMAT, "%s: class folder with no JPEG or PNG files (.jpg, .jpeg, .png)", cdir);
    }
    for (int i = 0; !s && !wk.bad && i < l->count; i++)
        if (strchr(l->arena + l->off[i], '\n')) wk.bad = 1;
    if (!s) cache_save(dir, &wk, names, n, l, *labels);
    free(wk.text);
    data_free_names(names, n);
    *classes = n;
    return s;
}

/* One "FILE LABEL" line (the label after the last blank, so FILE may hold spaces). */
static vdnn_status list_line(const char *list, int line, char *text, const char *dir, image_list *l,
                             int32_t **labels, int *classes)
{
    size_t n = strlen(text);
    while (n && (text[n - 1] == ' ' || text[n - 1] == '\t' || text[n - 1] == '\r')) text[--n] = 0;
    while (*text == ' ' || *text == '\t') text++;
    if (!*text || *text == '#') return VDNN_OK;
    char *sp = strrchr(text, ' '), *tab = strrchr(text, '\t');
    if (!sp || (tab && tab > sp)) sp = tab;
    if (!sp) return vdnn_fail(VDNN_EFORMAT, "%s:%d: expected \"FILE LABEL\", found no label", list, line);
    *sp = 0;
    char *end;
    errno = 0;
    long v = strtol(sp + 1, &end, 10);
    if (end == sp + 1 || *end || errno || v < 0 || v >= IMAGES_MAX_LABEL)
        return vdnn_fail(VDNN_EFORMAT, "%s:%d: label '%s' is not a whole number in [0, %d)", list, line, sp + 1,
                         IMAGES_MAX_LABEL);
    size_t m = strlen(text);
    while (m && (text[m - 1] == ' ' || text[m - 1] == '\t')) text[--m] = 0;
    char path[IMAGES_PATH_MAX];
    vdnn_status s = text[0] == '/' ? (snprintf(path, sizeof path, "%s", text) < (int)sizeof path
                                          ? VDNN_OK
                                          : vdnn_fail(VDNN_EINVAL, "%s:%d: path is too long", list, line))
                                   : data_join(path, sizeof path, dir, text);
    if (s) return s;
    if (v + 1 > *classes) *classes = (int)v + 1;
    return list_add(l, labels, path, (int)v);
}

static vdnn_status open_list(const char *list, const char *dir, image_list *l, int32_t **labels, int *classes)
{
    char *text = NULL;
    size_t len = 0;
    vdnn_status s = vdnn_file_read(list, "image list", IMAGES_LIST_MAX, VDNN_FILE_PIPE | VDNN_FILE_TEXT, &text, &len);
    if (s) return s;
    *classes = 0;
    int line = 1;
    for (char *p = text; !s && p && *p; line++) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        s = list_line(list, line, p, dir, l, labels, classes);
        p = nl ? nl + 1 : NULL;
    }
    free(text);
    if (!s && l->count == 0) s = vdnn_fail(VDNN_EFORMAT, "%s: no \"FILE LABEL\" lines: an empty image list", list);
    return s;
}

vdnn_status images_open(const char *dir, const char *list, int c, int h, int w, dataset **out)
{
    *out = NULL;
    if ((c != 1 && c != 3) || h < 1 || w < 1)
        return vdnn_fail(VDNN_EINVAL, "%s: image folders give 1 or 3 channels; the net expects %dx%dx%d",
                         list && *list ? list : dir, c, h, w);
    image_list *l = calloc(1, sizeof *l);
    int32_t *labels = NULL;
    int classes = 0;
    vdnn_status s = l ? VDNN_OK : vdnn_fail(VDNN_ENOMEM, "%s: out of host memory", dir);
    if (!s) s = list && *list ? open_list(list, dir, l, &labels, &classes) : open_folders(dir, l, &labels, &classes);
    dataset *d = NULL;
    if (!s) {
        d = calloc(1, sizeof *d);
        if (!d) s = vdnn_fail(VDNN_ENOMEM, "%s: out of host memory", dir);
    }
    if (s) {
        images_free(l);
        free(labels);
        return s;
    }
    d->count = l->count;
    d->c = c;
    d->h = h;
    d->w = w;
    d->classes = classes;
    d->labels = labels;
    d->files = l;
    snprintf(d->source, sizeof d->source, "%s", list && *list ? list : dir);
    *out = d;
    return VDNN_OK;
}
