/* Checkpoints: every parameter and optimizer tensor by name, with the training
 * position, in one little-endian file (format in docs/checkpoint.md).
 *
 * Saving writes an unnamed file, fsyncs it, names it PATH.tmp and renames it over PATH
 * (vdnn_file_replace), so a crash at any moment leaves the previous checkpoint intact
 * and no PATH.tmp behind. Loading reads the whole file (a regular file, of a size the
 * net's checkpoint can have), checks the magic, version, every length against the
 * file's real size, the CRC and that every tensor matches the net by name and shape,
 * before it changes anything. */
#ifndef VDNN_CHECKPOINT_H
#define VDNN_CHECKPOINT_H

#include <stdint.h>

#include "nets/net.h"

#define CKPT_MAGIC "VDNNCKPT"
#define CKPT_VERSION 1u

/* Where training stands. All randomness is counter-based on (seed, step, epoch, index),
 * so these four numbers are the whole RNG state. */
typedef struct ckpt_state {
    uint64_t step;       /* optimizer steps taken */
    uint64_t epoch;      /* current epoch, 0-based */
    uint64_t index;      /* next item of that epoch's shuffled order */
    uint64_t seed;
    uint32_t batch;      /* the run's batch (all devices' shares together); 0 when saving:
                          * the net's own */
} ckpt_state;

/* Saves the attached net's parameters, momenta and running statistics. */
vdnn_status checkpoint_save(net *n, const char *path, const ckpt_state *s);

/* Loads into an attached net. With weights_only, momenta are not required (a file
 * written by checkpoint_save always has them) and *s may be NULL. */
vdnn_status checkpoint_load(net *n, const char *path, ckpt_state *s, int weights_only);

/* What checkpoint_init loaded: of the net's `total` value tensors (weights, biases,
 * batch norm's), `kept` came from the file; `fresh` names the others and why (not in the
 * file, or its shape there), cut short if long. */
typedef struct ckpt_init_report {
    int kept, total;
    char fresh[1024];
} ckpt_init_report;

/* Fine-tuning (`train --init`): loads into an attached net every value tensor of the
 * file whose name ("LAYER.PARAM") and shape match one of the net's, leaving the others
 * as initialised; momenta, the training position and the algorithms are not read, so
 * the optimizer starts fresh. The file is checked as checkpoint_load checks it.
 * VDNN_EFORMAT when nothing matches. */
vdnn_status checkpoint_init(net *n, const char *path, ckpt_init_report *rep);

#endif
