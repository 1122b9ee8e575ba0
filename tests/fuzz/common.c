/* The helpers of tests/fuzz/fuzz.h. */
#include "tests/fuzz/fuzz.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[FUZZ_PATH_MAX - 200];

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void remove_dir(void)
{
    if (dir[0]) nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *fuzz_path(char *buf, const char *name)
{
    if (!dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/vdnn-fuzz.XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(dir)) {
            perror("fuzz: mkdtemp");
            abort();
        }
        atexit(remove_dir);
    }
    snprintf(buf, FUZZ_PATH_MAX, "%s/%s", dir, name);
    return buf;
}

const char *fuzz_write(char *buf, const char *name, const void *data, size_t size)
{
    fuzz_path(buf, name);
    for (char *s = strchr(buf + strlen(dir) + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        mkdir(buf, 0700);
        *s = '/';
    }
    FILE *f = fopen(buf, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        perror(buf);
        abort();
    }
    return buf;
}

net *fuzz_tiny_net(void)
{
    static net *n;
    if (n) return n;
    net_overrides ov = net_no_overrides();
    device_options o = {.kind = DEVICE_CPU, .threads = 1, .budget_bytes = 4u << 20};
    device *d = NULL;
    vdnn_status st = net_parse(FUZZ_TINY_CFG, "tiny.cfg", &ov, &n);
    if (st == VDNN_OK) st = device_create(&o, &d);
    if (st == VDNN_OK) st = net_attach(n, d);
    if (st == VDNN_OK) st = net_plan(n, POLICY_NONE, ALGO_MEM);
    if (st != VDNN_OK) {
        fprintf(stderr, "fuzz: the tiny net: %s\n", vdnn_errmsg());
        abort();
    }
    return n;
}
