/* What the fuzz targets in tests/fuzz/ share (docs/readers.md, "Fuzzing").
 *
 * Each target feeds one reader the bytes libFuzzer gives it and checks nothing but
 * that the reader returns: a status, never a crash, a hang, a leak or an allocation
 * of what the input merely claims (AddressSanitizer and UndefinedBehaviorSanitizer
 * catch those). A target is built twice from the same source: by `make fuzz` with
 * clang and libFuzzer (FUZZ_ENTRY is LLVMFuzzerTestOneInput), and by `make test` into
 * tests/test_fuzz.c, which replays every file of tests/fuzz/seeds/TARGET and
 * tests/fuzz/crashes/TARGET with any compiler (-DFUZZ_REPLAY: the entry is
 * fuzz_TARGET_one). */
#ifndef VDNN_FUZZ_H
#define VDNN_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "nets/net.h"
#include "nets/planner/planner.h"
#include "vdnn/device.h"

#ifdef FUZZ_REPLAY
#define FUZZ_ENTRY_NAMED(name) int fuzz_##name##_one(const uint8_t *data, size_t size)
#else
#define FUZZ_ENTRY_NAMED(name) int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
#endif
/* FUZZ_ENTRY(config) { ... }: the entry point of target "config" (the name may be a
 * macro: it is expanded first). */
#define FUZZ_ENTRY(name) FUZZ_ENTRY_NAMED(name)

/* The small net the checkpoint and plan targets read into: 1x8x8 inputs, a
 * convolution with several algorithms, a layer without parameters, a connected layer
 * and the loss; synthetic data, so nothing outside the process is needed. */
#define FUZZ_TINY_CFG                                                                              \
    "[net]\nbatch = 4\nchannels = 1\nheight = 8\nwidth = 8\n"                                      \
    "[train]\nepochs = 2\nlearning_rate = 0.05\nmomentum = 0.9\nseed = 3\n"                        \
    "[data]\nset = synthetic\ntrain_size = 8\ntest_size = 4\nclasses = 4\n"                        \
    "[convolutional]\nfilters = 2\nsize = 3\npad = 1\n[relu]\n[maxpool]\nsize = 2\n"               \
    "[connected]\noutput = 4\n[softmax]\n"

/* A folder of this process's own under $TMPDIR (or /tmp), removed at exit; the path of
 * `name` inside it is written to buf (at least FUZZ_PATH_MAX bytes). */
#define FUZZ_PATH_MAX 1024
const char *fuzz_path(char *buf, const char *name);
/* Writes `size` bytes to `name` in that folder (creating sub-folders of name); returns
 * its path in buf. Aborts when the file cannot be written: that is the harness's
 * failure, not the reader's. */
const char *fuzz_write(char *buf, const char *name, const void *data, size_t size);

/* FUZZ_TINY_CFG parsed and attached to a one-thread CPU device, planned with the
 * smallest-workspace algorithms (made once per process; never freed). */
net *fuzz_tiny_net(void);

#endif
