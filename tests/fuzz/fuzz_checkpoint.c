/* Fuzz target: a checkpoint (nets/checkpoint.c) read into the tiny net, first for
 * weights only (as `vdnn test` does), then resumed by the trainer (nets/trainer.c:
 * the saved position, seed and algorithms) for one step. An input of odd length gets
 * its trailing CRC-32 recomputed first, so that mutations reach the records behind the
 * checksum; even lengths exercise the checksum itself. */
#include "tests/fuzz/fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "nets/checkpoint.h"
#include "nets/trainer.h"

FUZZ_ENTRY(checkpoint)
{
    static dataset *train;
    net *n = fuzz_tiny_net();
    if (!train && synthetic_make(8, 1, 8, 8, 4, 1, &train) != VDNN_OK) return 0;
    char path[FUZZ_PATH_MAX];
    if (size % 2 && size >= 8) {
        unsigned char *fixed = malloc(size);
        if (!fixed) abort();
        memcpy(fixed, data, size);
        uint32_t crc = (uint32_t)crc32(0L, fixed, (uInt)(size - 4));
        for (int i = 0; i < 4; i++) fixed[size - 4 + i] = (unsigned char)(crc >> (8 * i));
        fuzz_write(path, "fuzz.ckpt", fixed, size);
        free(fixed);
    } else {
        fuzz_write(path, "fuzz.ckpt", data, size);
    }
    /* the same algorithms before every input: a checkpoint may have changed them */
    net_plan(n, POLICY_NONE, ALGO_MEM);
    n->step = 0;
    checkpoint_load(n, path, NULL, 1);
    train_opts o = {.max_steps = 1, .resume_path = path, .quiet = 1, .out = stderr};
    train_summary s;
    train_run(n, train, NULL, &o, &s);
    return 0;
}
