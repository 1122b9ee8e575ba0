/* Helpers shared by the suites: small nets from config text on a CPU device, temporary
 * folders, whole-file reads and writes, message checks, and the suites' main(). Every
 * helper fails the running check (ck_assert) instead of returning an error, so a test
 * reads as the steps it takes. */
#ifndef VDNN_TESTNET_H
#define VDNN_TESTNET_H

#include <check.h>
#include <stddef.h>

#include "nets/net.h"
#include "nets/planner/planner.h"
#include "vdnn/device.h"

/* The name net_parse() gets, so messages read "t.cfg:LINE: ...". */
#define TN_NAME "t.cfg"

/* A 1x8x8 synthetic net: [net] is lines 1-5, [train] 6-10, [data] 11-15, and the
 * layers start at line 16. TN_HEAD is everything before the layers. */
#define TN_NET "[net]\nbatch = 16\nchannels = 1\nheight = 8\nwidth = 8\n"
#define TN_TRAIN "[train]\nepochs = 2\nlearning_rate = 0.05\nmomentum = 0.9\nseed = 3\n"
#define TN_DATA "[data]\nset = synthetic\ntrain_size = 256\ntest_size = 64\nclasses = 4\n"
#define TN_HEAD TN_NET TN_TRAIN TN_DATA
#define TN_LAYERS "[convolutional]\nfilters = 4\nsize = 3\npad = 1\n[relu]\n[maxpool]\nsize = 2\n" \
                  "[connected]\noutput = 4\n[softmax]\n"
#define TN_SMALL TN_HEAD TN_LAYERS

/* net_parse(text) under TN_NAME with `ov` (NULL: none); the check fails unless it
 * succeeds. Free with net_free(). */
net *tn_parse(const char *text, const net_overrides *ov);

/* A batch for n: `items` inputs in [-1, 1) and labels below n->classes, from `seed`.
 * Free with tn_batch_free(). */
typedef struct tn_batch {
    float *x;
    int32_t *y;
    int items;
} tn_batch;
tn_batch tn_batch_make(const net *n, int items, uint64_t seed);
void tn_batch_free(tn_batch *b);

/* net_parse must fail with `status`; the message must contain `a` and, if non-NULL, `b`. */
void tn_parse_fails(const char *text, int status, const char *a, const char *b);

/* The current vdnn_errmsg() contains `a` and, if non-NULL, `b`. */
void tn_msg_has(const char *a, const char *b);

/* A one-thread CPU device with room for training `n` (parameters, one iteration, the
 * input batch of the trainer and of evaluate()). Free with device_destroy() after
 * net_free(). */
device *tn_device_for(const net *n);

/* tn_parse + tn_device_for + net_attach, planned with the config's policy and the
 * smallest-workspace algorithms (or those the config pins): a choice that does not
 * depend on timing, so that runs repeat bit for bit. Free with tn_free(). */
net *tn_attached(const char *text, const net_overrides *ov, device **d);
void tn_free(net *n, device *d);

/* The host copy of a device tensor of `count` floats; free() it. */
float *tn_download(net *n, const float *dev, size_t count);
/* Uploads `count` copies of `v` into a device tensor. */
void tn_fill(net *n, float *dev, size_t count, float v);

/* The param named "LAYER.PARAM" (e.g. "conv1.weights"), or NULL. */
param *tn_param(net *n, const char *name);

/* A new empty folder under $TMPDIR or /tmp, its path in buf. */
void tn_tmpdir(char *buf, size_t len, const char *tag);
/* Removes a folder and everything in it. */
void tn_rmtree(const char *dir);
/* dir/name into buf. */
const char *tn_join(char *buf, size_t len, const char *dir, const char *name);

/* A fixture (tcase_add_checked_fixture(tc, tn_dir_setup, tn_dir_teardown)): every test
 * of the case gets a new empty folder, tn_dir, removed after it; tn_path() names a file
 * in it. */
extern char tn_dir[512];
void tn_dir_setup(void);
void tn_dir_teardown(void);
const char *tn_path(char *buf, size_t len, const char *name);

/* One run of the `vdnn` program: its exit status (128 + signal for a crash) and all
 * it wrote, NUL-terminated. */
typedef struct tn_run {
    int status;
    char *out, *err;
} tn_run;
/* Runs `ENV $VDNN_BIN ARGS` through the shell (ENV: shell assignments such as
 * PATH=..., or ""; VDNN_BIN defaults to build/vdnn), its output captured in files in
 * `dir`. The check fails if the program crashed. Free with tn_run_free(). */
tn_run tn_vdnn(const char *dir, const char *env, const char *args);
void tn_run_free(tn_run *r);
/* Any shell command (a launcher such as mpirun), its output captured as tn_vdnn's; its
 * status as the shell gives it (128 + signal for one killed), with no check. */
tn_run tn_shell(const char *dir, const char *cmd);
/* The run exited 0 (else the check fails, showing its stderr). */
void tn_run_ok(const tn_run *r, const char *args);

/* The whole file, NUL-terminated (len excludes the NUL), or NULL if it cannot be read. */
char *tn_read(const char *path, size_t *len);
/* The address space this test process has mapped (VmSize in /proc/self/status): its
 * libraries are vdnn's (OpenBLAS, libjpeg, and with CUDA built in cuBLAS and cuDNN,
 * which alone map over a gigabyte), so a limit on a run's address space built on it
 * follows the build. */
unsigned long long tn_mapped_bytes(void);
void tn_write(const char *path, const void *data, size_t len);
void tn_write_text(const char *path, const char *text);
int tn_exists(const char *path);
/* Whether two files exist and hold the same bytes. */
int tn_same_file(const char *a, const char *b);

/* The last `max` bytes of text (all of it if shorter): a long log in a check's message,
 * which Check cuts off whole past its size limit. */
const char *tn_tail(const char *text, size_t max);

/* The whole config file `path` with its [data] section swapped for a small synthetic
 * set of `classes` classes, so that a net meant for ImageNet or CIFAR-10 runs here.
 * free() the text returned. */
char *tn_synthetic_config(const char *path, int classes);

/* An ImageNet config's text (224x224, a final 7x7 average pool) shrunk to 48x48 with
 * that pool global: the same layers and pattern of pool calls with 5% of the work. 48 is
 * the least side at which GoogLeNet, whose pooling rounds up as Caffe's does, still has
 * a 3x3 map at its last 3x3 pool. Frees `text`; free() the text returned. */
char *tn_imagenet_48(char *text);

/* Runs a suite with Check's normal output: a suite's whole main(). EXIT_SUCCESS when
 * every check passed. */
int tn_run_suite(Suite *s);

/* Each profile in `dir` loaded, changed by edit(profile, arg) and saved again; returns
 * how many. */
int tn_rewrite_profiles(const char *dir, void (*edit)(profile *, const void *), const void *arg);

#endif
