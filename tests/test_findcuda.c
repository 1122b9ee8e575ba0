/* tools/find_cuda.sh, the Makefile's search for nvcc, cuDNN and cuBLAS, on fake
 * installations built in a temporary folder: the toolkit layout (everything under
 * CUDA_HOME), the Python-wheel layout of the lent GPU machines (cuDNN and cuBLAS only in
 * site-packages/nvidia/NAME, versioned library names only), CUDA 13's wheels (the
 * runtime and cuBLAS together in nvidia/cu13, NCCL in nvidia/nccl), CUDNN_HOME first,
 * CUDA=0, and the one-line reason when a part is missing. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/testnet.h"

/* Creates tn_dir/REL (and its folders) holding `text`. */
static void put(const char *rel, const char *text)
{
    char path[1024], cmd[1200];
    tn_join(path, sizeof path, tn_dir, rel);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
    ck_assert_int_eq(system(cmd), 0);
    tn_write_text(path, text);
}

static void put_exe(const char *rel)
{
    char path[1024];
    put(rel, "#!/bin/sh\nexit 0\n");
    tn_join(path, sizeof path, tn_dir, rel);
    ck_assert_int_eq(chmod(path, 0755), 0);
}

/* The toolkit's own parts: nvcc, the runtime's header and library, cuBLAS. */
static void toolkit(const char *home)
{
    char rel[256];
    snprintf(rel, sizeof rel, "%s/bin/nvcc", home);
    put_exe(rel);
    snprintf(rel, sizeof rel, "%s/include/cuda_runtime.h", home);
    put(rel, "");
    snprintf(rel, sizeof rel, "%s/include/cublas_v2.h", home);
    put(rel, "");
    snprintf(rel, sizeof rel, "%s/lib64/libcudart.so.13", home);
    put(rel, "");
    snprintf(rel, sizeof rel, "%s/lib64/libcublas.so.13", home);
    put(rel, "");
}

static void cudnn_at(const char *inc, const char *lib, const char *libname)
{
    char rel[256];
    snprintf(rel, sizeof rel, "%s/cudnn.h", inc);
    put(rel, "");
    snprintf(rel, sizeof rel, "%s/cudnn_version.h", inc);
    put(rel, "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 19\n");
    snprintf(rel, sizeof rel, "%s/%s", lib, libname);
    put(rel, "");
}

/* `sh tools/find_cuda.sh FIELD` with env; its stdout (malloc'd) and, in *err, stderr. */
static char *find(const char *env, const char *field, char **err)
{
    char out[1024], errf[1024], cmd[4096];
    tn_join(out, sizeof out, tn_dir, "out.txt");
    tn_join(errf, sizeof errf, tn_dir, "err.txt");
    /* PATH without nvcc, and no Python package but the fake ones */
    snprintf(cmd, sizeof cmd, "env -u CUDA_HOME -u CUDNN_HOME -u CUDA PATH=/usr/bin:/bin PYTHONPATH='%s/site' %s "
             "sh tools/find_cuda.sh %s >'%s' 2>'%s'", tn_dir, env, field, out, errf);
    ck_assert_int_eq(system(cmd), 0);
    char *s = tn_read(out, NULL);
    if (err) *err = tn_read(errf, NULL);
    return s;
}

/* text names tn_dir/rel */
static void has(const char *text, const char *rel, const char *what)
{
    char want[1200];
    snprintf(want, sizeof want, "%s/%s", tn_dir, rel);
    ck_assert_msg(strstr(text, want) != NULL, "%s: expected '%s' in:\n%s", what, want, text);
}

/* the binary finds tn_dir/rel's libraries at run time without LD_LIBRARY_PATH */
static void has_rpath(const char *libs, const char *rel)
{
    char want[1200];
    snprintf(want, sizeof want, "-Wl,-rpath,%s/%s", tn_dir, rel);
    ck_assert_msg(strstr(libs, want) != NULL, "expected '%s' in:\n%s", want, libs);
}

START_TEST(test_toolkit_layout)
{
    toolkit("cuda");
    cudnn_at("cuda/include", "cuda/lib64", "libcudnn.so");
    char env[700];
    snprintf(env, sizeof env, "CUDA_HOME='%s/cuda'", tn_dir);
    char *nvcc = find(env, "nvcc", NULL), *inc = find(env, "inc", NULL), *libs = find(env, "libs", NULL);
    has(nvcc, "cuda/bin/nvcc", "nvcc");
    has(inc, "cuda/include", "inc");
    has(libs, "cuda/lib64/libcudart.so.13", "libs");
    has(libs, "cuda/lib64/libcudnn.so", "libs");
    has(libs, "cuda/lib64/libcublas.so.13", "libs");
    has_rpath(libs, "cuda/lib64");
    free(nvcc);
    free(inc);
    free(libs);
}
END_TEST

/* PyTorch's layout: cuDNN only in the nvidia-cudnn wheel, with a versioned name. */
START_TEST(test_wheel_layout)
{
    /* the wheels are found through Python's `nvidia` package */
    if (system("PATH=/usr/bin:/bin command -v python3 >/dev/null 2>&1") != 0) {
        printf("SKIPPED: test_wheel_layout: no python3 in /usr/bin or /bin to find the wheels with\n");
        return;
    }
    toolkit("cuda");
    cudnn_at("site/nvidia/cudnn/include", "site/nvidia/cudnn/lib", "libcudnn.so.9");
    char env[700];
    snprintf(env, sizeof env, "CUDA_HOME='%s/cuda'", tn_dir);
    char *inc = find(env, "inc", NULL), *libs = find(env, "libs", NULL);
    has(inc, "site/nvidia/cudnn/include", "inc");
    has(libs, "site/nvidia/cudnn/lib/libcudnn.so.9", "libs");
    has_rpath(libs, "site/nvidia/cudnn/lib");
    free(inc);
    free(libs);
}
END_TEST

/* CUDA 13's wheels, as the RECORD files of nvidia-cuda-runtime, nvidia-cublas,
 * nvidia-cudnn-cu13 and nvidia-nccl-cu13 lay them out: the runtime and cuBLAS share
 * nvidia/cu13/{include,lib}; cuDNN and NCCL have folders of their own. The toolkit
 * gives nvcc alone. NCCL is optional: found, it is reported by the `nccl` query only. */
START_TEST(test_cu13_wheel_layout)
{
    if (system("PATH=/usr/bin:/bin command -v python3 >/dev/null 2>&1") != 0) {
        printf("SKIPPED: test_cu13_wheel_layout: no python3 in /usr/bin or /bin to find the wheels with\n");
        return;
    }
    put_exe("cuda/bin/nvcc");
    put("site/nvidia/cu13/include/cuda_runtime.h", "");
    put("site/nvidia/cu13/include/cublas_v2.h", "");
    put("site/nvidia/cu13/lib/libcudart.so.13", "");
    put("site/nvidia/cu13/lib/libcublas.so.13", "");
    cudnn_at("site/nvidia/cudnn/include", "site/nvidia/cudnn/lib", "libcudnn.so.9");
    char env[700];
    snprintf(env, sizeof env, "CUDA_HOME='%s/cuda'", tn_dir);
    char *nvcc = find(env, "nvcc", NULL), *inc = find(env, "inc", NULL), *libs = find(env, "libs", NULL);
    has(nvcc, "cuda/bin/nvcc", "nvcc");
    has(inc, "site/nvidia/cu13/include", "inc");
    has(inc, "site/nvidia/cudnn/include", "inc");
    has(libs, "site/nvidia/cu13/lib/libcudart.so.13", "libs");
    has(libs, "site/nvidia/cu13/lib/libcublas.so.13", "libs");
    has(libs, "site/nvidia/cudnn/lib/libcudnn.so.9", "libs");
    has_rpath(libs, "site/nvidia/cu13/lib");
    has_rpath(libs, "site/nvidia/cudnn/lib");
    ck_assert_msg(!strstr(libs, "nccl"), "NCCL is not linked into vdnn, yet libs names it:\n%s", libs);
    free(nvcc);
    free(inc);
    free(libs);

    /* without NCCL the query prints nothing (unless the machine has its own) */
    char *nccl = find(env, "nccl", NULL);
    if (access("/usr/include/nccl.h", F_OK) != 0 && access("/usr/include/x86_64-linux-gnu/nccl.h", F_OK) != 0)
        ck_assert_msg(!strcmp(nccl, "") || !strcmp(nccl, "\n"), "NCCL found where there is none: %s", nccl);
    free(nccl);
    put("site/nvidia/nccl/include/nccl.h", "");
    put("site/nvidia/nccl/lib/libnccl.so.2", "");
    nccl = find(env, "nccl", NULL);
    has(nccl, "site/nvidia/nccl/include", "nccl");
    has(nccl, "site/nvidia/nccl/lib/libnccl.so.2", "nccl");
    has_rpath(nccl, "site/nvidia/nccl/lib");
    free(nccl);
}
END_TEST

START_TEST(test_cudnn_home_first)
{
    toolkit("cuda");
    cudnn_at("cuda/include", "cuda/lib64", "libcudnn.so");
    cudnn_at("mycudnn/include", "mycudnn/lib64", "libcudnn.so.9");
    char env[1200];
    snprintf(env, sizeof env, "CUDA_HOME='%s/cuda' CUDNN_HOME='%s/mycudnn'", tn_dir, tn_dir);
    char *libs = find(env, "libs", NULL);
    has(libs, "mycudnn/lib64/libcudnn.so.9", "libs");
    free(libs);
}
END_TEST

START_TEST(test_off_and_missing)
{
    toolkit("cuda");
    char env[700], *err = NULL;
    snprintf(env, sizeof env, "CUDA_HOME='%s/cuda' CUDA=0", tn_dir);
    char *nvcc = find(env, "nvcc", &err);
    ck_assert_str_eq(nvcc, "");
    free(nvcc);
    free(err);
    /* no cuDNN anywhere: nothing found, and one line saying what is missing */
    snprintf(env, sizeof env, "CUDA_HOME='%s/cuda'", tn_dir);
    nvcc = find(env, "nvcc", &err);
    if (access("/usr/include/cudnn.h", F_OK) != 0 && access("/usr/include/x86_64-linux-gnu/cudnn.h", F_OK) != 0) {
        ck_assert_msg(!strcmp(nvcc, ""), "found without cuDNN: %s", nvcc);
        ck_assert_msg(strstr(err, "cuda: no cudnn.h") && strstr(err, "CPU backend only"), "stderr: %s", err);
    }
    free(nvcc);
    free(err);
    snprintf(env, sizeof env, "CUDA_HOME='%s/nowhere'", tn_dir);
    nvcc = find(env, "nvcc", &err);
    ck_assert_str_eq(nvcc, "");
    ck_assert_msg(strstr(err, "no nvcc"), "stderr: %s", err);
    free(nvcc);
    free(err);
}
END_TEST

static Suite *findcuda_suite(void)
{
    Suite *s = suite_create("findcuda");
    TCase *tc = tcase_create("layouts");
    tcase_add_checked_fixture(tc, tn_dir_setup, tn_dir_teardown);
    tcase_add_test(tc, test_toolkit_layout);
    tcase_add_test(tc, test_wheel_layout);
    tcase_add_test(tc, test_cu13_wheel_layout);
    tcase_add_test(tc, test_cudnn_home_first);
    tcase_add_test(tc, test_off_and_missing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tn_run_suite(findcuda_suite()); }
