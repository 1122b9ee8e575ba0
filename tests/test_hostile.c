/* Check suite for what hostile use of the `vdnn` program found (issue 16): each check
 * runs the program as a user would and fails if the fix it stands for were undone.
 * Readers' own limits are tested in their suites (test_config, test_data,
 * test_checkpoint, test_planfile); fuzzing's crash inputs are replayed by test_fuzz. */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/testnet.h"

/* A small synthetic net, without and with training settings (64 items, batch 16). */
#define H_DATA "[data]\nset = synthetic\ntrain_size = 64\ntest_size = 32\nclasses = 4\n"
#define H_TRAIN "[train]\nepochs = 2\nlearning_rate = 0.05\nmomentum = 0.9\nseed = 3\n"
#define H_NO_TRAIN TN_NET H_DATA TN_LAYERS
#define H_NET TN_NET H_TRAIN H_DATA TN_LAYERS

static char tmp_dir[256];

static void tmp_setup(void)
{
    tn_tmpdir(tmp_dir, sizeof tmp_dir, "test_hostile");
}

static void tmp_teardown(void)
{
    tn_rmtree(tmp_dir);
}

static const char *tmp_path(char *buf, size_t len, const char *name)
{
    return tn_join(buf, len, tmp_dir, name);
}

static const char *write_cfg(char *buf, size_t len, const char *name, const char *text)
{
    tmp_path(buf, len, name);
    tn_write_text(buf, text);
    return buf;
}

/* Runs `vdnn ARGS` (printf-style); the check fails if it crashed. */
static tn_run run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static tn_run run(const char *fmt, ...)
{
    char args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return tn_vdnn(tmp_dir, "", args);
}

static void ok(const tn_run *r)
{
    ck_assert_msg(r->status == 0, "exited %d; stderr:\n%s", r->status, r->err);
}

/* Failed with one "vdnn: " message holding `a` and, if non-NULL, `b`. */
static void refused(const tn_run *r, const char *a, const char *b)
{
    ck_assert_msg(r->status != 0, "exited 0; stdout:\n%s", r->out);
    ck_assert_msg(!strncmp(r->err, "vdnn: ", 6), "stderr does not start with 'vdnn: ':\n%s", r->err);
    ck_assert_msg(strstr(r->err, a), "stderr lacks '%s':\n%s", a, r->err);
    if (b) ck_assert_msg(strstr(r->err, b), "stderr lacks '%s':\n%s", b, r->err);
}

/* ---- item 8: describing and planning a net need no [train] ---- */

START_TEST(info_profile_sweep_without_train)
{
    char cfg[512], out[512];
    write_cfg(cfg, sizeof cfg, "net.cfg", H_NO_TRAIN);
    tn_run r = run("info %s", cfg);
    ok(&r);
    ck_assert_msg(strstr(r.out, "conv1") && strstr(r.out, "minimum budget"), "%s", r.out);
    tn_run_free(&r);
    r = run("profile %s --budget 1M --threads 1", cfg);
    ok(&r);
    ck_assert_msg(strstr(r.out, "chosen plan:"), "%s", r.out);
    tn_run_free(&r);
    tmp_path(out, sizeof out, "sweep");
    r = run("sweep %s --budgets 1M,2M --policies none,all --simulate --threads 1 --out %s", cfg, out);
    ok(&r);
    tn_run_free(&r);
    /* train still needs it, and says so before loading any data */
    r = run("train %s --steps 1 --epochs 1 --lr 0.1", cfg);
    refused(&r, "net.cfg: no [train] section", "info, profile, sweep and test do not");
    tn_run_free(&r);
}
END_TEST

/* ---- item 3: endless and non-regular files ---- */

START_TEST(endless_and_odd_files_refused_at_once)
{
    char cfg[512];
    write_cfg(cfg, sizeof cfg, "net.cfg", H_NET);
    time_t t0 = time(NULL);
    tn_run r = run("train %s --steps 1 --plan /dev/zero", cfg);
    refused(&r, "/dev/zero: is a character device, not a plan", NULL);
    tn_run_free(&r);
    r = run("train %s --steps 1 --resume %s", cfg, tmp_dir);
    refused(&r, "is a folder, not a checkpoint", NULL);
    tn_run_free(&r);
    r = run("info /dev/zero");
    refused(&r, "/dev/zero: is a character device, not a config file", NULL);
    tn_run_free(&r);
    r = run("test %s --weights /dev/urandom", cfg);
    refused(&r, "/dev/urandom: is a character device, not a checkpoint", NULL);
    tn_run_free(&r);
    ck_assert_msg(time(NULL) - t0 < 30, "refusing took %ld s", (long)(time(NULL) - t0));
}
END_TEST

static Suite *hostile_suite(void)
{
    Suite *s = suite_create("hostile");
    TCase *tc = tcase_create("cli");
    tcase_add_checked_fixture(tc, tmp_setup, tmp_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, info_profile_sweep_without_train);
    tcase_add_test(tc, endless_and_odd_files_refused_at_once);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(hostile_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
