/* Folders and paths for the readers that take folders (PNG folders, image folders):
 * sorted listings of a folder's visible entries, and joined paths (data_impl.h). A
 * listing never depends on the order the file system returns entries in. */
#include "data/data_impl.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define FOLDER_PATH_MAX 4096

vdnn_status data_join(char *buf, size_t len, const char *dir, const char *name)
{
    int n = snprintf(buf, len, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= len)
        return vdnn_fail(VDNN_EINVAL, "%s/%s: path is too long", dir, name);
    return VDNN_OK;
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

/* Whether dir/name is of the kind asked for (stat follows links). */
static int is_kind(const char *dir, const char *name, data_list_kind kind)
{
    if (kind == DATA_LIST_ANY) return 1;
    char path[FOLDER_PATH_MAX];
    struct stat st;
    if (data_join(path, sizeof path, dir, name) || stat(path, &st) != 0) return 0;
    return kind == DATA_LIST_DIRS ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode);
}

vdnn_status data_list_dir(const char *dir, data_list_kind kind, int (*keep)(const char *name), char ***names,
                          int *count)
{
    *names = NULL;
    *count = 0;
    DIR *dp = opendir(dir);
    if (!dp) return vdnn_fail(VDNN_EIO, "%s: cannot open folder (%s)", dir, strerror(errno));
    vdnn_status s = VDNN_OK;
    int cap = 0;
    struct dirent *e;
    while (!s && (e = readdir(dp)) != NULL) {
        if (e->d_name[0] == '.' || (keep && !keep(e->d_name)) || !is_kind(dir, e->d_name, kind)) continue;
        s = push_name(names, count, &cap, e->d_name, dir);
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

vdnn_status data_list_classes(const char *dir, char ***names, int *count)
{
    return data_list_dir(dir, DATA_LIST_DIRS, NULL, names, count);
}
