/* The GPU session's scripts, run here with stand-ins for the GPU machine's tools (make,
 * nvidia-smi, compute-sanitizer) on PATH, so that what only a GPU session would find
 * out is found out here:
 *  - bench/gpu_session.sh: a build that stops on -Werror (a newer compiler's warnings)
 *    is made again without it, and the summary says so; the build is for the GPU's own
 *    generation; the stage leaves exactly STAGE.tar.gz and STAGE.txt;
 *  - bench/gpu_sanitizer.sh: racecheck looks at the project's kernels only
 *    (--kernel-name kns=vdnn_), memcheck and synccheck at every kernel;
 *  - every CUDA kernel of the project is named vdnn_*, so that racecheck's filter covers
 *    each one. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "tests/testnet.h"
#include "vdnn/device.h"

/* tn_dir/bin/NAME, an executable shell script with `body`. */
static void fake(const char *name, const char *body)
{
    char path[1024], text[4096];
    snprintf(path, sizeof path, "%s/bin", tn_dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/bin/%s", tn_dir, name);
    snprintf(text, sizeof text, "#!/bin/sh\n%s\n", body);
    tn_write_text(path, text);
    ck_assert_int_eq(chmod(path, 0755), 0);
}

/* Runs `cmd` with tn_dir/bin first on PATH and TMPDIR in tn_dir; its exit status. */
static int run(const char *cmd)
{
    char full[4096];
    snprintf(full, sizeof full, "PATH='%s/bin':\"$PATH\" TMPDIR='%s' FAKE_LOG='%s/calls.txt' %s >'%s/out.txt' 2>&1",
             tn_dir, tn_dir, tn_dir, cmd, tn_dir);
    int rc = system(full);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static char *read_in_root(const char *rel)
{
    char path[1024];
    tn_join(path, sizeof path, tn_dir, rel);
    return tn_read(path, NULL);
}

/* The stand-ins: nvidia-smi of an sm 9.0 GPU; a make that records its arguments, one
 * per line, and fails while -Werror is on; a compute-sanitizer that records its
 * arguments and reports no error. */
static void fake_gpu_machine(void)
{
    fake("nvidia-smi", "case \"$*\" in *name,driver*) echo 'NVIDIA H100 80GB HBM3, 580.159.04, 81559 MiB, 9.0' ;;\n"
                       "*compute_cap*) echo '9.0' ;; *) echo 'NVIDIA H100 80GB HBM3' ;; esac");
    fake("make", "echo \"make $*\" >>\"$FAKE_LOG\"\nfor a in \"$@\"; do echo \"  arg: $a\" >>\"$FAKE_LOG\"; done\n"
                 "case \" $* \" in *' WERROR= '*) exit 0 ;; esac\n"
                 "echo 'layers/x.c:1:1: error: a gcc 13 warning [-Werror=extra]'\nexit 2");
    fake("compute-sanitizer", "echo \"sanitizer $*\" >>\"$FAKE_LOG\"\necho '========= ERROR SUMMARY: 0 errors'");
}

START_TEST(test_werror_retry_and_racecheck_filter)
{
    fake_gpu_machine();
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "SANITIZER='%s/bin/compute-sanitizer' sh bench/gpu_session.sh sanitize '%s/out'", tn_dir,
             tn_dir);
    int rc = run(cmd);
    char *out = read_in_root("out.txt"), *calls = read_in_root("calls.txt");
    ck_assert_msg(rc == 0, "gpu_session.sh sanitize exited %d:\n%s\ncalls:\n%s", rc, out, calls);
    /* the build: with -Werror first, then without, for sm 9.0 only, and said */
    char *first = strstr(calls, "make "), *second = first ? strstr(first + 1, "\nmake ") : NULL;
    ck_assert_msg(first && second, "make was not called twice:\n%s", calls);
    ck_assert_msg(!strstr(first, "arg: WERROR=") || strstr(first, "arg: WERROR=") > second,
                  "the first build already dropped -Werror:\n%s", calls);
    ck_assert_msg(strstr(second, "arg: WERROR=\n"), "the second build kept -Werror:\n%s", calls);
    ck_assert_msg(strstr(calls, "arg: CUDA_ARCH=-gencode arch=compute_90,code=sm_90\n"),
                  "not built for the GPU's generation alone (one make argument):\n%s", calls);
    ck_assert_msg(strstr(calls, "arg: CUDA=1\n"), "CUDA not required:\n%s", calls);
    char *summary = read_in_root("out/sanitize.txt");
    ck_assert_msg(strstr(summary, "gcc 13 warning") && strstr(summary, "(WERROR=)") &&
                      strstr(summary, "built WITHOUT -Werror"),
                  "the summary does not say the build dropped -Werror:\n%s", summary);
    ck_assert_msg(strstr(summary, "| racecheck | all | 0 |"), "no racecheck row in the summary:\n%s", summary);
    /* racecheck on the project's kernels; memcheck and synccheck on all */
    ck_assert_msg(strstr(calls, "sanitizer --tool racecheck --kernel-name kns=vdnn_ "),
                  "racecheck is not restricted to vdnn_ kernels:\n%s", calls);
    for (const char *p = strstr(calls, "sanitizer "); p; p = strstr(p + 1, "sanitizer ")) {
        const char *eol = strchr(p, '\n');
        int is_race = !strncmp(p, "sanitizer --tool racecheck", 26);
        int filtered = strstr(p, "--kernel-name") && strstr(p, "--kernel-name") < eol;
        ck_assert_msg(is_race == filtered, "a %s run %s filtered by kernel name:\n%.*s", is_race ? "racecheck" : "",
                      filtered ? "is" : "is not", (int)(eol - p), p);
    }
    /* what comes back: exactly the tarball and the summary */
    snprintf(cmd, sizeof cmd, "test \"$(ls '%s/out' | tr '\\n' ' ')\" = 'sanitize.tar.gz sanitize.txt '", tn_dir);
    ck_assert_msg(system(cmd) == 0, "OUTDIR does not hold exactly sanitize.tar.gz and sanitize.txt");
    snprintf(cmd, sizeof cmd, "tar tzf '%s/out/sanitize.tar.gz' | grep -q 'sanitizer.md'", tn_dir);
    ck_assert_msg(system(cmd) == 0, "the tarball lacks sanitizer.md");
    free(out);
    free(calls);
    free(summary);
}
END_TEST

/* A build that fails without -Werror too: exit 1, and the two files still come back. */
START_TEST(test_build_failure_still_packs)
{
    fake_gpu_machine();
    fake("make", "echo 'conv.cu(1): error: something' ; exit 2");
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "sh bench/gpu_session.sh policies '%s/out'", tn_dir);
    int rc = run(cmd);
    char *summary = read_in_root("out/policies.txt");
    ck_assert_msg(rc == 1, "gpu_session.sh exited %d after a failed build", rc);
    ck_assert_msg(strstr(summary, "FAILED without -Werror too"), "summary:\n%s", summary);
    snprintf(cmd, sizeof cmd, "tar tzf '%s/out/policies.tar.gz' | grep -q build.log", tn_dir);
    ck_assert_msg(system(cmd) == 0, "the tarball lacks build.log");
    free(summary);
}
END_TEST

/* A stage that would outrun the device command's 10 minutes is stopped in time to pack
 * what it finished (here: a 3-second session and a sanitizer that hangs). */
START_TEST(test_stage_time_limit)
{
    fake_gpu_machine();
    fake("compute-sanitizer", "sleep 60");
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "SESSION_S=3 SANITIZER='%s/bin/compute-sanitizer' sh bench/gpu_session.sh sanitize '%s/out'",
             tn_dir, tn_dir);
    double t0 = vdnn_now_s();
    int rc = run(cmd);
    double secs = vdnn_now_s() - t0;
    char *summary = read_in_root("out/sanitize.txt");
    ck_assert_msg(rc == 124 && secs < 30, "exit %d after %.0f s:\n%s", rc, secs, summary);
    ck_assert_msg(strstr(summary, "stopped at its time limit"), "summary:\n%s", summary);
    snprintf(cmd, sizeof cmd, "test -s '%s/out/sanitize.tar.gz'", tn_dir);
    ck_assert_msg(system(cmd) == 0, "no tarball after the time limit");
    free(summary);
}
END_TEST

/* A later stage runs the vdnn an earlier one handed back (.deps/vdnn) instead of
 * building, though it came back read-only. Run in a copy of the scripts, so that the
 * repository's own .deps is left alone. */
START_TEST(test_carried_binary)
{
    fake_gpu_machine();
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/repo/.deps' && cp -r bench tools tests '%s/repo/' && "
             "printf '#!/bin/sh\\necho vdnn: backends cpu, cuda\\n' >'%s/repo/.deps/vdnn' && "
             "chmod 444 '%s/repo/.deps/vdnn'", tn_dir, tn_dir, tn_dir, tn_dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "cd '%s/repo' && SANITIZER='%s/bin/compute-sanitizer' sh bench/gpu_session.sh sanitize "
             "'%s/out'", tn_dir, tn_dir, tn_dir);
    int rc = run(cmd);
    char *summary = read_in_root("out/sanitize.txt"), *calls = read_in_root("calls.txt");
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, summary);
    ck_assert_msg(strstr(summary, "build: none: the vdnn carried in .deps/vdnn"), "summary:\n%s", summary);
    ck_assert_msg(!calls || !strstr(calls, "make "), "make ran though a vdnn was carried:\n%s", calls);
    free(summary);
    free(calls);
}
END_TEST

/* Every __global__ function in the sources is named vdnn_*: racecheck's filter
 * (__launch_bounds__, which may stand before the name, is none). */
START_TEST(test_kernel_names)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "grep -h -A1 '__global__' layers/*.cu nets/*.cu vdnn/*.cu 2>/dev/null | grep -o '[A-Za-z_0-9]*(' "
             "| grep -v -e '^vdnn_' -e '^__launch_bounds__(' >'%s/bad.txt'; grep -c '__global__' layers/*.cu nets/*.cu vdnn/*.cu 2>/dev/null "
             "| awk -F: '{ s += $2 } END { print s }' >'%s/count.txt'",
             tn_dir, tn_dir);
    ck_assert_int_eq(system(cmd), 0);
    char *bad = read_in_root("bad.txt"), *count = read_in_root("count.txt");
    ck_assert_msg(atoi(count) >= 10, "only %s kernels found: the search is broken", count);
    ck_assert_msg(bad[0] == 0, "kernels not named vdnn_* (racecheck would skip them): %s", bad);
    free(bad);
    free(count);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpu_scripts");
    TCase *tc = tcase_create("scripts");
    tcase_add_checked_fixture(tc, tn_dir_setup, tn_dir_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_werror_retry_and_racecheck_filter);
    tcase_add_test(tc, test_build_failure_still_packs);
    tcase_add_test(tc, test_carried_binary);
    tcase_add_test(tc, test_stage_time_limit);
    tcase_add_test(tc, test_kernel_names);
    suite_add_tcase(s, tc);
    return tn_run_suite(s);
}
