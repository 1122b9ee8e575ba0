/* Share schedules (`vdnn train --share-schedule FILE`, docs/manager.md): the weights a
 * data-parallel job's shares follow from given steps on, such as those a slow-down
 * manager gave a managed run (its log's {"manager": "dr"} records), so that the same
 * changes can be made by hand and the run repeated without a manager.
 *
 * The file: one line "STEP W0,W1,..." per change, one weight per device of the job,
 * STEP (from 1, increasing) the first step that uses them; '#' starts a comment. Before
 * that first STEP the job's --shares hold. */
#ifndef VDNN_SHARES_H
#define VDNN_SHARES_H

#include "nets/parallel/parallel.h"
#include "nets/trainer.h"

typedef struct shares_schedule shares_schedule;

/* Reads the schedule at `path` for group g (checked against its device count); free
 * with shares_free(). */
vdnn_status shares_load(const char *path, dp_group *g, shares_schedule **out);
void shares_free(shares_schedule *s);

/* The trainer's before_step hook (ctx: the schedule): the weights in force at step
 * t->next, when they are not those in force already (so a resumed run takes them too). */
vdnn_status shares_tick(void *ctx, const train_tick *t);

#endif
