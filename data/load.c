/* dataset_load: picks the reader for cfg->set, finds its files for the split, and checks
 * that the images have the shape the net expects (data.h). */
#include "data/data_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CIFAR_TRAIN_BATCHES 5
/* Fixed because data_cfg carries no seed: every run sees the same synthetic task. */
#define SYNTH_PATTERN_SEED 0x5EEDC1A55E5ull
#define SYNTH_TRAIN_NOISE_SEED 0x7A1Aull
#define SYNTH_TEST_NOISE_SEED 0x7E57ull

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int dir_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Takes ownership of d: frees it and fails when its shape is not what the net expects. */
static vdnn_status check_shape(dataset *d, int c, int h, int w, dataset **out)
{
    if (d->c != c || d->h != h || d->w != w) {
        vdnn_status s = vdnn_fail(VDNN_EINVAL, "%s: images are %dx%dx%d (CxHxW) but the net expects %dx%dx%d",
                                  d->source, d->c, d->h, d->w, c, h, w);
        dataset_free(d);
        return s;
    }
    *out = d;
    return VDNN_OK;
}

/* "dir/stem.gz" if present, else "dir/stem"; an error naming both when neither is. */
static vdnn_status find_idx_file(const char *dir, const char *stem, char *buf, size_t len)
{
    char gz[600];
    snprintf(gz, sizeof gz, "%s.gz", stem);
    vdnn_status s = data_join(buf, len, dir, gz);
    if (s || file_exists(buf)) return s;
    s = data_join(buf, len, dir, stem);
    if (s || file_exists(buf)) return s;
    return vdnn_fail(VDNN_EIO, "%s/%s.gz: not found (nor %s/%s)", dir, stem, dir, stem);
}

static vdnn_status load_idx_set(const data_cfg *cfg, data_split split, dataset **out)
{
    const char *pre = split == SPLIT_TEST ? "t10k" : "train";
    char stem[64], images[1024], labels[1024];
    snprintf(stem, sizeof stem, "%s-images-idx3-ubyte", pre);
    vdnn_status s = find_idx_file(cfg->path, stem, images, sizeof images);
    if (s) return s;
    snprintf(stem, sizeof stem, "%s-labels-idx1-ubyte", pre);
    s = find_idx_file(cfg->path, stem, labels, sizeof labels);
    if (s) return s;
    return idx_load(images, labels, out);
}

/* The folder that holds the batch files: path itself or path/cifar-10-batches-bin. */
static vdnn_status cifar_dir(const char *path, const char *probe, char *buf, size_t len)
{
    char file[1200];
    vdnn_status s = data_join(file, sizeof file, path, probe);
    if (s) return s;
    if (file_exists(file)) {
        snprintf(buf, len, "%s", path);
        return VDNN_OK;
    }
    s = data_join(buf, len, path, "cifar-10-batches-bin");
    if (s) return s;
    s = data_join(file, sizeof file, buf, probe);
    if (s) return s;
    if (file_exists(file)) return VDNN_OK;
    return vdnn_fail(VDNN_EIO, "%s/%s: not found (nor %s)", path, probe, file);
}

static vdnn_status load_cifar_set(const data_cfg *cfg, data_split split, dataset **out)
{
    char dir[1024], names[CIFAR_TRAIN_BATCHES][1200];
    const char *paths[CIFAR_TRAIN_BATCHES];
    int n = split == SPLIT_TEST ? 1 : CIFAR_TRAIN_BATCHES;
    vdnn_status s = cifar_dir(cfg->path, split == SPLIT_TEST ? "test_batch.bin" : "data_batch_1.bin",
                              dir, sizeof dir);
    for (int i = 0; !s && i < n; i++) {
        char base[32];
        if (split == SPLIT_TEST) snprintf(base, sizeof base, "test_batch.bin");
        else snprintf(base, sizeof base, "data_batch_%d.bin", i + 1);
        s = data_join(names[i], sizeof names[i], dir, base);
        paths[i] = names[i];
    }
    if (s) return s;
    return cifar10_load(paths, n, out);
}

/* The test split must use the train split's class names, or its labels would mean
 * something else. */
static vdnn_status check_png_classes(const char *train_dir, const char *test_dir)
{
    char **a = NULL, **b = NULL;
    int na = 0, nb = 0;
    vdnn_status s = data_list_classes(train_dir, &a, &na);
    if (!s) s = data_list_classes(test_dir, &b, &nb);
    for (int i = 0; !s && i < na && i < nb; i++) {
        if (strcmp(a[i], b[i]) != 0)
            s = vdnn_fail(VDNN_EFORMAT, "%s: class folder '%s' does not match '%s' in %s (class %d)",
                          test_dir, b[i], a[i], train_dir, i);
    }
    if (!s && na != nb)
        s = vdnn_fail(VDNN_EFORMAT, "%s: %d class folders, but %s has %d", test_dir, nb, train_dir, na);
    data_free_names(a, na);
    data_free_names(b, nb);
    return s;
}

static vdnn_status load_png_set(const data_cfg *cfg, data_split split, int c, int h, int w, dataset **out)
{
    char train[1024], test[1024];
    vdnn_status s = data_join(train, sizeof train, cfg->path, "train");
    if (!s) s = data_join(test, sizeof test, cfg->path, "test");
    if (s) return s;
    if (split == SPLIT_TRAIN) return png_folder_load(train, c, h, w, out);
    if (!dir_exists(test)) return vdnn_fail(VDNN_EIO, "%s: not found (the test split of a PNG set)", test);
    s = check_png_classes(train, test);
    if (s) return s;
    return png_folder_load(test, c, h, w, out);
}

/* An image list's test split keeps the training list's classes: its labels must lie
 * among them. */
static vdnn_status check_list_classes(const data_cfg *cfg, int c, int h, int w, dataset *test)
{
    dataset *train = NULL;
    vdnn_status s = images_open(cfg->path, cfg->train_list, c, h, w, &train);
    if (!s && test->classes > train->classes)
        s = vdnn_fail(VDNN_EFORMAT, "%s: labels reach %d but the training list %s has %d classes", cfg->test_list,
                      test->classes - 1, cfg->train_list, train->classes);
    if (!s) test->classes = train->classes;
    dataset_free(train);
    return s;
}

static vdnn_status load_images_set(const data_cfg *cfg, data_split split, int c, int h, int w, dataset **out)
{
    const char *list = split == SPLIT_TEST ? cfg->test_list : cfg->train_list;
    if (*cfg->train_list || *cfg->test_list) {
        if (!*list)
            return vdnn_fail(VDNN_EINVAL, "data: train_list is given but test_list is not (give both, or neither "
                             "for class folders)");
        vdnn_status s = images_open(cfg->path, list, c, h, w, out);
        if (!s && split == SPLIT_TEST) s = check_list_classes(cfg, c, h, w, *out);
        if (s) {
            dataset_free(*out);
            *out = NULL;
        }
        return s;
    }
    char train[1024], test[1024];
    vdnn_status s = data_join(train, sizeof train, cfg->path, "train");
    if (!s) s = data_join(test, sizeof test, cfg->path, "test");
    if (s) return s;
    if (!dir_exists(train)) return vdnn_fail(VDNN_EIO, "%s: not found (the training split of an image folder)", train);
    if (split == SPLIT_TRAIN) return images_open(train, NULL, c, h, w, out);
    if (!dir_exists(test)) return vdnn_fail(VDNN_EIO, "%s: not found (the test split of an image folder)", test);
    s = check_png_classes(train, test);
    if (s) return s;
    return images_open(test, NULL, c, h, w, out);
}

static vdnn_status load_synthetic_set(const data_cfg *cfg, data_split split, int c, int h, int w, dataset **out)
{
    int count = split == SPLIT_TEST ? cfg->synthetic_test : cfg->synthetic_train;
    if (count <= 0)
        return vdnn_fail(VDNN_EINVAL, "data: synthetic %s count is %d; it must be > 0",
                         split == SPLIT_TEST ? "test" : "train", count);
    if (cfg->classes < 1)
        return vdnn_fail(VDNN_EINVAL, "data: synthetic classes is %d; it must be >= 1", cfg->classes);
    uint64_t noise = split == SPLIT_TEST ? SYNTH_TEST_NOISE_SEED : SYNTH_TRAIN_NOISE_SEED;
    return synthetic_make_seeded(count, c, h, w, cfg->classes, SYNTH_PATTERN_SEED, noise, out);
}

vdnn_status dataset_load(const data_cfg *cfg, data_split split, int c, int h, int w, dataset **out)
{
    if (!cfg || !out) return vdnn_fail(VDNN_EINVAL, "dataset_load: no config or output given");
    *out = NULL;
    if (c < 1 || c > DATA_MAX_CHANNELS || h < 1 || w < 1)
        return vdnn_fail(VDNN_EINVAL, "data: the net's input %dx%dx%d is not a valid image shape", c, h, w);
    vdnn_status s = data_check_norm(cfg, c);
    if (s) return s;
    dataset *d = NULL;
    if (!strcmp(cfg->set, "fashion-mnist") || !strcmp(cfg->set, "mnist")) s = load_idx_set(cfg, split, &d);
    else if (!strcmp(cfg->set, "cifar10")) s = load_cifar_set(cfg, split, &d);
    else if (!strcmp(cfg->set, "png")) return load_png_set(cfg, split, c, h, w, out);
    else if (!strcmp(cfg->set, "images")) return load_images_set(cfg, split, c, h, w, out);
    else if (!strcmp(cfg->set, "synthetic")) return load_synthetic_set(cfg, split, c, h, w, out);
    else
        return vdnn_fail(VDNN_EINVAL, "data: set '%s' is unknown (expected fashion-mnist, mnist, cifar10, png, images or "
                         "synthetic)",
                         cfg->set);
    if (s) return s;
    return check_shape(d, c, h, w, out);
}
