/* The training loop: batches from the background loader, one step each, evaluation on
 * the test split at every epoch end, progress on the terminal, JSON-lines logs, and
 * checkpoints (at every epoch end, at --steps, and at the end). */
#ifndef VDNN_TRAINER_H
#define VDNN_TRAINER_H

#include <signal.h>
#include <stdio.h>

#include "data/data.h"
#include "nets/net.h"
#include "nets/parallel/parallel.h"

/* What the trainer tells a before_step hook. */
typedef struct train_tick {
    uint64_t next;            /* the step about to run (the net's step count + 1) */
    long long done;           /* steps this run has taken */
    long long total;          /* steps this run takes in all (to its last epoch, or --steps) */
    int epoch, epochs;        /* the next step's epoch (from 1), of how many */
    double last_s;            /* wall seconds of the step just taken; 0 before the run's first */
    FILE *log;                /* the run's JSON-lines log, or NULL */
} train_tick;

typedef struct train_opts {
    long long max_steps;      /* stop after this many steps in this run; <= 0: no limit */
    const char *save_path;    /* checkpoint to write, or NULL */
    const char *resume_path;  /* checkpoint to start from, or NULL */
    const char *init_path;    /* fine-tuning: weights to start from (checkpoint_init), the
                               * optimizer and position fresh; NULL: none (not with resume) */
    FILE *log;                /* JSON lines, or NULL: one per step, one per epoch, and a
                               * final one however training stops (docs/cli.md) */
    int quiet;                /* nothing on stdout/stderr but errors */
    FILE *out;                /* progress and epoch lines (stderr when a terminal bar is drawn) */
    int tty;                  /* draw a live progress bar */
    /* Data-parallel training (nets/parallel/parallel.h): the net passed is the group's primary
     * replica, batches are the group's, and steps are the group's. Only the job's rank 0
     * (`rank`) prints, logs, reads and writes checkpoints; the others get the state it
     * read. NULL: one device. */
    dp_group *group;
    comm *comm;
    const char *log_path;     /* the log's name in messages (NULL: "the log") */
    volatile sig_atomic_t *interrupt;   /* set (by a signal handler) to stop after the current
                                         * step, as at --steps: checkpoint saved, log ended;
                                         * NULL: none */
    /* Called before every step; it may change the group's shares (dp_set_weights).
     * NULL: none. A failure stops training as a failed step does. */
    vdnn_status (*before_step)(void *ctx, const train_tick *t);
    void *hook_ctx;
    /* The planner's prediction of a step of the plan that runs (<= 0: none), and what it
     * came from ("the profile PATH, measured ..."): when the median of the run's full
     * steps 2 to 6 misses it by more than a quarter, a warning says so, names the likely
     * cause and the fix (--reprofile). Not for steps predicted under 2 ms, whose fixed
     * costs the profile does not see. */
    double predicted_step_s;
    const char *prediction_source;
} train_opts;

typedef struct train_summary {
    long long steps;          /* steps taken in this run */
    double train_loss;        /* mean loss of the last epoch (or partial epoch) */
    double test_acc;          /* of the last evaluation; < 0 if none ran */
    double test_loss;
    double images_per_s;
    size_t pool_peak_bytes;
    int interrupted;          /* stopped by o->interrupt */
} train_summary;

/* Trains an attached net. Checks that the data sets match the net's classes. A log that
 * cannot be written (a full disk) is an error, reported after the checkpoint is saved. */
vdnn_status train_run(net *n, const dataset *train, const dataset *test, const train_opts *o, train_summary *s);

/* Accuracy and mean loss of an attached net on a whole data set. */
vdnn_status evaluate(net *n, const dataset *d, double *acc, double *loss);

/* Errors unless the data set has the classes the net's last layer outputs. */
vdnn_status check_classes(const net *n, const dataset *d);

/* Errors unless the net's config has a [train] section: training needs its settings,
 * describing and planning a net (info, profile, sweep) and testing it do not. */
vdnn_status check_train_settings(const net *n);

#endif
