/* Replays the fuzz targets' corpora (tests/fuzz/, docs/readers.md): every file of
 * tests/fuzz/seeds/TARGET and tests/fuzz/crashes/TARGET goes through the target's entry
 * point, built here with the normal compiler, so `make test` (and `make sanitize`
 * under ASan and UBSan) runs every input that once crashed a reader without needing
 * clang or libFuzzer. A crash, a hang (Check's timeout) or a sanitizer report fails
 * the check. */
#include <check.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testnet.h"

#define TARGETS(X) X(config) X(idx) X(idx_gz) X(cifar) X(png) X(image) X(image_list) X(checkpoint) X(plan) X(profile) \
    X(manager) X(onnx)

#define DECLARE(name) int fuzz_##name##_one(const uint8_t *data, size_t size);
TARGETS(DECLARE)

typedef struct target {
    const char *name;
    int (*one)(const uint8_t *, size_t);
} target;

#define ENTRY(name) {#name, fuzz_##name##_one},
static const target targets[] = {TARGETS(ENTRY)};
#define NTARGETS ((int)(sizeof targets / sizeof *targets))

/* Feeds every file of dir to t; returns how many there were (0 for no folder). */
static int replay_dir(const target *t, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int count = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len = 0;
        char *data = tn_read(path, &len);
        ck_assert_msg(data != NULL, "cannot read %s", path);
        /* with VDNN_FUZZ_VERBOSE set, the name goes to stderr first: a crash then shows
         * which file caused it */
        if (getenv("VDNN_FUZZ_VERBOSE")) fprintf(stderr, "replay %s: %s\n", t->name, path);
        t->one((const uint8_t *)data, len);
        free(data);
        count++;
    }
    closedir(d);
    return count;
}

START_TEST(replays_corpora)
{
    const target *t = &targets[_i];
#ifndef VDNN_ONNX
    if (!strcmp(t->name, "onnx")) {
        printf("SKIPPED: replays_corpora[onnx]: this build has no ONNX (ONNX=0)\n");
        return;
    }
#endif
    char seeds[256], crashes[256];
    snprintf(seeds, sizeof seeds, "tests/fuzz/seeds/%s", t->name);
    snprintf(crashes, sizeof crashes, "tests/fuzz/crashes/%s", t->name);
    int n = replay_dir(t, seeds);
    ck_assert_msg(n > 0, "%s has no seed files (run the suites from the repository root)", seeds);
    replay_dir(t, crashes);
}
END_TEST

/* A target added to tests/fuzz/ but not to TARGETS above would never be replayed. */
START_TEST(every_target_is_replayed)
{
    DIR *d = opendir("tests/fuzz");
    ck_assert_msg(d != NULL, "tests/fuzz not found (run the suites from the repository root)");
    int found = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "fuzz_", 5) || len < 8 || strcmp(e->d_name + len - 2, ".c")) continue;
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(len - 7), e->d_name + 5);
        int known = 0;
        for (int i = 0; i < NTARGETS; i++) known |= !strcmp(targets[i].name, name);
        ck_assert_msg(known, "tests/fuzz/%s is not in test_fuzz.c's TARGETS", e->d_name);
        found++;
    }
    closedir(d);
    ck_assert_int_eq(found, NTARGETS);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fuzz");
    TCase *tc = tcase_create("replay");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, replays_corpora, 0, NTARGETS);
    tcase_add_test(tc, every_target_is_replayed);
    suite_add_tcase(s, tc);
    return tn_run_suite(s);
}
