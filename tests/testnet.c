/* Helpers shared by the suites (see testnet.h). */
#include "tests/testnet.h"
#include "vdnn/rng.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

net *tn_parse(const char *text, const net_overrides *ov)
{
    net_overrides none = net_no_overrides();
    net *n = NULL;
    vdnn_status st = net_parse(text, TN_NAME, ov ? ov : &none, &n);
    ck_assert_msg(st == VDNN_OK, "net_parse failed: %s", vdnn_errmsg());
    ck_assert_ptr_nonnull(n);
    return n;
}

void tn_msg_has(const char *a, const char *b)
{
    const char *msg = vdnn_errmsg();
    ck_assert_msg(strstr(msg, a) != NULL, "message '%s' lacks '%s'", msg, a);
    if (b) ck_assert_msg(strstr(msg, b) != NULL, "message '%s' lacks '%s'", msg, b);
}

void tn_parse_fails(const char *text, int status, const char *a, const char *b)
{
    net_overrides none = net_no_overrides();
    net *n = (net *)&n;
    vdnn_status st = net_parse(text, TN_NAME, &none, &n);
    ck_assert_msg((int)st == status, "net_parse returned %d (want %d): %s", (int)st, status,
                  st == VDNN_OK ? "(no message)" : vdnn_errmsg());
    ck_assert_ptr_null(n);
    tn_msg_has(a, b);
}

device *tn_device_for(const net *n)
{
    device_options o = {0};
    o.kind = DEVICE_CPU;
    /* One thread: these nets are tiny, and OpenMP teams spin badly when the machine is
     * shared with other jobs (make -j, other suites). */
    o.threads = 1;
    o.budget_bytes = net_train_bytes_bound(n) + 2 * pool_round(shape_bytes(n->input)) + (1 << 16);
    device *d = NULL;
    vdnn_status st = device_create(&o, &d);
    ck_assert_msg(st == VDNN_OK, "device_create failed: %s", vdnn_errmsg());
    return d;
}

net *tn_attached(const char *text, const net_overrides *ov, device **d)
{
    net *n = tn_parse(text, ov);
    /* Algorithms first, so that the budget has room for their workspaces. */
    vdnn_status st = net_plan(n, n->policy, ALGO_MEM);
    ck_assert_msg(st == VDNN_OK, "net_plan failed: %s", vdnn_errmsg());
    *d = tn_device_for(n);
    st = net_attach(n, *d);
    ck_assert_msg(st == VDNN_OK, "net_attach failed: %s", vdnn_errmsg());
    st = net_plan(n, n->policy, ALGO_MEM);
    ck_assert_msg(st == VDNN_OK, "net_plan failed: %s", vdnn_errmsg());
    return n;
}

void tn_free(net *n, device *d)
{
    net_free(n);
    device_destroy(d);
}

float *tn_download(net *n, const float *dev, size_t count)
{
    float *h = malloc((count ? count : 1) * sizeof *h);
    ck_assert_ptr_nonnull(h);
    vdnn_status st = device_download(n->dev, h, dev, count * sizeof *h);
    ck_assert_msg(st == VDNN_OK, "device_download failed: %s", vdnn_errmsg());
    return h;
}

void tn_fill(net *n, float *dev, size_t count, float v)
{
    float *h = malloc((count ? count : 1) * sizeof *h);
    ck_assert_ptr_nonnull(h);
    for (size_t i = 0; i < count; i++) h[i] = v;
    vdnn_status st = device_upload(n->dev, dev, h, count * sizeof *h);
    free(h);
    ck_assert_msg(st == VDNN_OK, "device_upload failed: %s", vdnn_errmsg());
}

param *tn_param(net *n, const char *name)
{
    for (int i = 0; i < n->nlayers; i++) {
        layer *l = n->layers[i];
        for (int j = 0; j < l->nparams; j++) {
            char full[96];
            snprintf(full, sizeof full, "%s.%s", l->name, l->params[j].name);
            if (!strcmp(full, name)) return &l->params[j];
        }
    }
    return NULL;
}

void tn_tmpdir(char *buf, size_t len, const char *tag)
{
    const char *root = getenv("TMPDIR");
    snprintf(buf, len, "%s/vdnn_%s_XXXXXX", root && *root ? root : "/tmp", tag);
    ck_assert_msg(mkdtemp(buf) != NULL, "mkdtemp(%s) failed", buf);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void tn_rmtree(const char *dir)
{
    if (dir && *dir) nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

char tn_dir[512];

/* named after the suite, so that a folder left behind says whose it is */
void tn_dir_setup(void) { tn_tmpdir(tn_dir, sizeof tn_dir, program_invocation_short_name); }

void tn_dir_teardown(void) { tn_rmtree(tn_dir); }

const char *tn_path(char *buf, size_t len, const char *name) { return tn_join(buf, len, tn_dir, name); }

const char *tn_join(char *buf, size_t len, const char *dir, const char *name)
{
    int k = snprintf(buf, len, "%s/%s", dir, name);
    ck_assert_msg(k > 0 && (size_t)k < len, "path %s/%s is too long", dir, name);
    return buf;
}

char *tn_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *p = malloc(cap);
    while (p) {
        n += fread(p + n, 1, cap - 1 - n, f);
        if (n < cap - 1) break;
        char *q = realloc(p, cap * 2);
        if (!q) free(p);
        p = q;
        cap *= 2;
    }
    fclose(f);
    ck_assert_ptr_nonnull(p);
    p[n] = 0;
    if (len) *len = n;
    return p;
}

void tn_write(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
}

void tn_write_text(const char *path, const char *text)
{
    tn_write(path, text, strlen(text));
}

int tn_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

int tn_same_file(const char *a, const char *b)
{
    size_t la = 0, lb = 0;
    char *pa = tn_read(a, &la), *pb = tn_read(b, &lb);
    int same = pa && pb && la == lb && memcmp(pa, pb, la) == 0;
    free(pa);
    free(pb);
    return same;
}

tn_batch tn_batch_make(const net *n, int items, uint64_t seed)
{
    size_t count = (size_t)items * shape_per_item(n->input);
    tn_batch b = {malloc(count * sizeof(float)), malloc((size_t)items * sizeof(int32_t)), items};
    ck_assert(b.x && b.y);
    uint64_t s = seed;
    for (size_t i = 0; i < count; i++) b.x[i] = (float)((double)(rng_splitmix(&s) >> 11) / 9007199254740992.0 * 2 - 1);
    for (int i = 0; i < items; i++) b.y[i] = (int32_t)(rng_splitmix(&s) % (uint64_t)n->classes);
    return b;
}

void tn_batch_free(tn_batch *b)
{
    free(b->x);
    free(b->y);
}

tn_run tn_shell(const char *dir, const char *cmd)
{
    char outf[512], errf[512], line[8192];
    tn_join(outf, sizeof outf, dir, "stdout.txt");
    tn_join(errf, sizeof errf, dir, "stderr.txt");
    snprintf(line, sizeof line, "%s >%s 2>%s", cmd, outf, errf);
    int w = system(line);
    tn_run r = {0, tn_read(outf, NULL), tn_read(errf, NULL)};
    if (!r.out) r.out = strdup("");
    if (!r.err) r.err = strdup("");
    r.status = WIFEXITED(w) ? WEXITSTATUS(w) : 255;
    return r;
}

tn_run tn_vdnn(const char *dir, const char *env, const char *args)
{
    char outf[512], errf[512], cmd[4096];
    const char *bin = getenv("VDNN_BIN");
    tn_join(outf, sizeof outf, dir, "stdout.txt");
    tn_join(errf, sizeof errf, dir, "stderr.txt");
    snprintf(cmd, sizeof cmd, "%s %s %s >%s 2>%s", env, bin && *bin ? bin : "build/vdnn", args, outf, errf);
    int w = system(cmd);
    tn_run r = {0, tn_read(outf, NULL), tn_read(errf, NULL)};
    if (!r.out) r.out = strdup("");
    if (!r.err) r.err = strdup("");
    r.status = WIFEXITED(w) ? WEXITSTATUS(w) : 255;
    /* the shell reports a signal as 128 + signal: a crash is never an ordinary exit */
    ck_assert_msg(r.status < 128, "`vdnn %s` died (status %d); stderr:\n%s", args, r.status, r.err);
    return r;
}

unsigned long long tn_mapped_bytes(void)
{
    char *text = tn_read("/proc/self/status", NULL);
    const char *v = text ? strstr(text, "VmSize:") : NULL;
    long long kb = v ? strtoll(v + 7, NULL, 10) : 0;
    free(text);
    ck_assert_msg(kb > 0, "no VmSize in /proc/self/status");
    return (unsigned long long)kb << 10;
}

void tn_run_free(tn_run *r)
{
    free(r->out);
    free(r->err);
}

void tn_run_ok(const tn_run *r, const char *args)
{
    ck_assert_msg(r->status == 0, "`vdnn %s` exited %d; stderr:\n%s", args, r->status, r->err);
}

const char *tn_tail(const char *text, size_t max)
{
    if (!text) return "(none)";
    size_t len = strlen(text);
    return len > max ? text + len - max : text;
}

int tn_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

char *tn_imagenet_48(char *text)
{
    static const char hw_from[] = "height = 224\nwidth = 224\n", hw_to[] = "height = 48\nwidth = 48\n";
    static const char pool_from[] = "[avgpool]\nsize = 7\n", pool_to[] = "[avgpool]\nglobal = 1\n";
    char *hw = strstr(text, hw_from), *pool = NULL;
    ck_assert_ptr_nonnull(hw);
    for (char *p = text; (p = strstr(p, pool_from)) != NULL; p++) pool = p;
    ck_assert_ptr_nonnull(pool);
    ck_assert(hw < pool);
    const char *mid = hw + strlen(hw_from), *tail = pool + strlen(pool_from);
    size_t len = strlen(text) + sizeof pool_to;
    char *out = malloc(len);
    ck_assert_ptr_nonnull(out);
    snprintf(out, len, "%.*s%s%.*s%s%s", (int)(hw - text), text, hw_to, (int)(pool - mid), mid, pool_to, tail);
    free(text);
    return out;
}

char *tn_synthetic_config(const char *path, int classes)
{
    size_t len = 0;
    char *text = tn_read(path, &len);
    ck_assert_msg(text != NULL, "cannot read %s", path);
    char *at = strstr(text, "[data]\n");
    ck_assert_ptr_nonnull(at);
    char *end = strstr(at + 1, "\n[");
    ck_assert_ptr_nonnull(end);
    char data[160];
    snprintf(data, sizeof data, "[data]\nset = synthetic\ntrain_size = 8\ntest_size = 4\nclasses = %d\n", classes);
    char *out = malloc(len + sizeof data);
    ck_assert_ptr_nonnull(out);
    snprintf(out, len + sizeof data, "%.*s%s%s", (int)(at - text), text, data, end + 1);
    free(text);
    return out;
}

/* Each profile in `dir` loaded, changed by edit(profile, arg) and saved again; returns
 * how many. */
int tn_rewrite_profiles(const char *dir, void (*edit)(profile *, const void *), const void *arg)
{
    DIR *dp = opendir(dir);
    int count = 0;
    for (struct dirent *e; dp && (e = readdir(dp)) != NULL;) {
        if (strncmp(e->d_name, "profile-", 8)) continue;
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        profile p;
        ck_assert_msg(profile_load(path, &p) == VDNN_OK, "%s", vdnn_errmsg());
        edit(&p, arg);
        ck_assert(profile_save(&p, path) == VDNN_OK);
        profile_free(&p);
        count++;
    }
    if (dp) closedir(dp);
    return count;
}
