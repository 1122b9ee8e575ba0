/* The Makefile's record of its configuration ($(BUILD)/build-config): objects built
 * before an optional part was found are rebuilt once it is, and nothing is rebuilt
 * when nothing changed. Each check builds one or two objects at -O0 into a scratch
 * BUILD folder, with the make that runs the suites kept out of it (MAKEFLAGS).
 * And the floors of the source tree: no include points up (tools/check_floors.sh). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/testnet.h"
#include "tests/tsan.h"

/* `make VARS TARGETS` in the source tree, with BUILD under tn_dir; ENV: shell
 * assignments before it, or "". */
static tn_run make_in(const char *env, const char *vars, const char *targets)
{
    char build[600], cmd[4096];
    tn_path(build, sizeof build, "b");
    snprintf(cmd, sizeof cmd, "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL %s make --no-print-directory BUILD='%s' "
             "CUDA=0 OPT=-O0 SAN= SYSROOT= EXTRA_CFLAGS= %s %s", env, build, vars, targets);
    tn_run r = tn_shell(tn_dir, cmd);
    ck_assert_msg(r.status == 0, "%s failed (%d):\n%s\n%s", cmd, r.status, tn_tail(r.out, 2000), tn_tail(r.err, 2000));
    return r;
}

/* A file's modification time under tn_dir; 0 if it is missing. */
static double mtime_of(const char *name)
{
    char path[600];
    struct stat st;
    if (stat(tn_path(path, sizeof path, name), &st) != 0) return 0;
    return (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
}

/* An Open MPI installed after a build (here an mpicc on PATH that only answers
 * --showme) rebuilds the objects, and a second make with the same setup rebuilds none. */
START_TEST(test_found_part_rebuilds)
{
    if (UNDER_SANITIZER) {
        printf("SKIPPED: test_found_part_rebuilds: it builds with the plain compiler, not under a sanitizer\n");
        return;
    }
    char bin[600], mpicc[700];
    tn_path(bin, sizeof bin, "bin");
    ck_assert_int_eq(mkdir(bin, 0755), 0);
    tn_join(mpicc, sizeof mpicc, bin, "mpicc");
    tn_write_text(mpicc, "#!/bin/sh\ncase \"$1\" in\n--showme:compile) echo -DVDNN_FAKE_MPI_INCLUDE ;;\n"
                         "--showme:link) echo -lm ;;\nesac\n");
    ck_assert_int_eq(chmod(mpicc, 0755), 0);
    char env[800];
    snprintf(env, sizeof env, "PATH='%s':\"$PATH\"", bin);
    char obj[600];
    tn_path(obj, sizeof obj, "b/obj/vdnn/status.o");
    tn_run r = make_in("", "MPI=0", obj);
    tn_run_free(&r);
    double built = mtime_of("b/obj/vdnn/status.o"), config = mtime_of("b/build-config");
    ck_assert(built > 0);
    r = make_in("", "MPI=0", obj);
    ck_assert_msg(!strstr(r.out, "vdnn/status.c"), "an unchanged setup rebuilt:\n%s", r.out);
    ck_assert_msg(mtime_of("b/build-config") == config, "an unchanged setup rewrote build-config");
    tn_run_free(&r);
    r = make_in(env, "MPI=auto", obj);
    ck_assert_msg(strstr(r.out, "vdnn/status.c") && strstr(r.out, "-DVDNN_MPI"),
                  "an mpicc found after the build did not rebuild:\n%s", r.out);
    ck_assert_msg(mtime_of("b/obj/vdnn/status.o") > built, "status.o was not rebuilt");
    tn_run_free(&r);
    char *record = tn_read(tn_path(obj, sizeof obj, "b/build-config"), NULL);
    ck_assert_msg(record && strstr(record, "-DVDNN_FAKE_MPI_INCLUDE"), "build-config:\n%s", record);
    free(record);
}
END_TEST

/* With Open MPI installed: the same object built with MPI=0 and then with MPI found
 * has no MPI calls, then has them. */
START_TEST(test_mpi_toggle)
{
    if (UNDER_SANITIZER) {
        printf("SKIPPED: test_mpi_toggle: it builds with the plain compiler, not under a sanitizer\n");
        return;
    }
    if (system("command -v mpicc >/dev/null 2>&1") != 0) {
        printf("SKIPPED: test_mpi_toggle: no mpicc (install libopenmpi-dev)\n");
        return;
    }
    char obj[600], cmd[800];
    tn_path(obj, sizeof obj, "b/obj/vdnn/comm.o");
    snprintf(cmd, sizeof cmd, "nm -u '%s' | grep -c MPI_", obj);
    tn_run r = make_in("", "MPI=0", obj);
    tn_run_free(&r);
    r = tn_shell(tn_dir, cmd);
    ck_assert_msg(atoi(r.out) == 0, "MPI=0 built comm.o with MPI calls (%s)", r.out);
    tn_run_free(&r);
    r = make_in("", "MPI=auto", obj);
    ck_assert_msg(strstr(r.out, "vdnn/comm.c"), "finding MPI did not rebuild comm.o:\n%s", r.out);
    tn_run_free(&r);
    r = tn_shell(tn_dir, cmd);
    ck_assert_msg(atoi(r.out) > 0, "comm.o built with MPI found makes no MPI calls");
    tn_run_free(&r);
}
END_TEST

/* `make` with no goal builds the program (the README's quick start runs it so): a dry
 * run in a scratch folder links BUILD/vdnn. */
START_TEST(test_default_goal)
{
    char vdnn[600], link[700];
    tn_path(vdnn, sizeof vdnn, "b/vdnn");
    snprintf(link, sizeof link, "-o %s ", vdnn);
    tn_run r = make_in("", "-n", "");
    ck_assert_msg(strstr(r.out, link), "make with no goal does not link %s:\n%s", vdnn, tn_tail(r.out, 2000));
    tn_run_free(&r);
}
END_TEST

/* No include points up a floor (docs/design.md, "Floors"): tools/check_floors.sh passes
 * on the tree, and refuses a scratch tree whose vdnn/ includes a layer or names one, or
 * whose nets/ asks a device its kind (but not one that creates a simulated device). */
START_TEST(test_floors)
{
    tn_run r = tn_shell(tn_dir, "sh tools/check_floors.sh");
    ck_assert_msg(r.status == 0 && strstr(r.out, "every include points down"), "%s%s", r.out, r.err);
    tn_run_free(&r);
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s/t/vdnn' '%s/t/layers' '%s/t/tools' && cp tools/check_floors.sh '%s/t/tools/' && "
             "printf '#include \"vdnn/status.h\"\\n' > '%s/t/layers/ok.h' && "
             "printf '#include <stdio.h>\\n#include \"layers/layer.h\"\\n' > '%s/t/vdnn/x.h' && cd '%s/t' && "
             "sh tools/check_floors.sh",
             tn_dir, tn_dir, tn_dir, tn_dir, tn_dir, tn_dir, tn_dir);
    r = tn_shell(tn_dir, cmd);
    ck_assert_msg(r.status == 1, "an include of layers/ from vdnn/ was not refused (%d):\n%s", r.status, r.out);
    ck_assert_msg(strstr(r.out, "vdnn/x.h:2: includes layers/layer.h") && !strstr(r.out, "ok.h"), "%s", r.out);
    tn_run_free(&r);
    snprintf(cmd, sizeof cmd,
             "rm -rf '%s/t' && mkdir -p '%s/t/vdnn' '%s/t/nets' '%s/t/tools' && cp tools/check_floors.sh '%s/t/tools/' && "
             "printf 'struct layer;\n' > '%s/t/vdnn/y.h' && "
             "printf 'int a(device *d) {\n  return device_get_kind(d) == DEVICE_CUDA;\n}\n' > '%s/t/nets/k.c' && "
             "printf 'device_options o = {.kind = DEVICE_SIM};\n' > '%s/t/nets/sim.c' && cd '%s/t' && "
             "sh tools/check_floors.sh",
             tn_dir, tn_dir, tn_dir, tn_dir, tn_dir, tn_dir, tn_dir, tn_dir, tn_dir);
    r = tn_shell(tn_dir, cmd);
    ck_assert_msg(r.status == 1, "a device kind asked above vdnn/ was not refused (%d):\n%s", r.status, r.out);
    ck_assert_msg(strstr(r.out, "vdnn/y.h:1: names struct layer"), "%s", r.out);
    ck_assert_msg(strstr(r.out, "nets/k.c:2: asks a device its kind") && !strstr(r.out, "sim.c"), "%s", r.out);
    tn_run_free(&r);
}
END_TEST

/* No circle of calls between source files (docs/design.md, "Floors"):
 * tools/check_cycles.sh passes on this build, and finds the circle in a scratch tree
 * whose two files call each other (and not the file beside them that only calls). */
START_TEST(test_no_cycles)
{
    const char *bin = getenv("VDNN_BIN");
    char build[512] = "build";
    if (bin && strrchr(bin, '/')) snprintf(build, sizeof build, "%.*s", (int)(strrchr(bin, '/') - bin), bin);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "sh tools/check_cycles.sh '%s'", build);
    tn_run r = tn_shell(tn_dir, cmd);
    ck_assert_msg(r.status == 0 && strstr(r.out, "no circle of calls"), "%s%s", r.out, r.err);
    tn_run_free(&r);
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s/t/vdnn' '%s/t/tools' '%s/t/b/obj/vdnn' && cp tools/check_cycles.sh '%s/t/tools/' && cd '%s/t' && "
             "printf 'int b(int);\nint a(int x) { return x ? b(x - 1) : 0; }\n' > vdnn/a.c && "
             "printf 'int a(int);\nint b(int x) { return a(x); }\n' > vdnn/b.c && "
             "printf 'int a(int);\nint c(void) { return a(3); }\n' > vdnn/c.c && "
             "for f in a b c; do cc -c vdnn/$f.c -o b/obj/vdnn/$f.o || exit 3; done && sh tools/check_cycles.sh b",
             tn_dir, tn_dir, tn_dir, tn_dir, tn_dir);
    r = tn_shell(tn_dir, cmd);
    ck_assert_msg(r.status == 1, "a circle of calls was not refused (%d):\n%s%s", r.status, r.out, r.err);
    ck_assert_msg((strstr(r.out, "circle: vdnn/a.c vdnn/b.c") || strstr(r.out, "circle: vdnn/b.c vdnn/a.c")) &&
                  !strstr(r.out, "c.c"), "%s", r.out);
    tn_run_free(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("build");
    TCase *tc = tcase_create("build");
    tcase_add_checked_fixture(tc, tn_dir_setup, tn_dir_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_found_part_rebuilds);
    tcase_add_test(tc, test_mpi_toggle);
    tcase_add_test(tc, test_default_goal);
    tcase_add_test(tc, test_floors);
    tcase_add_test(tc, test_no_cycles);
    suite_add_tcase(s, tc);
    return tn_run_suite(s);
}
