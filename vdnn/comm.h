/* The processes of one training job (MPI ranks, launched by mpirun) and what they say
 * to each other: a check that they run the same thing, fixed-order sums, broadcasts.
 *
 * Built with MPI (the Makefile finds Open MPI; VDNN_MPI) and launched by mpirun, a job
 * has comm_size() ranks; otherwise it has one, and every call below is local. A build
 * without MPI launched by mpirun with several ranks is refused by comm_open, so that N
 * copies never train N models each believing itself alone.
 *
 * Every wait has a deadline (the job's timeout): a rank that dies or hangs makes the
 * others fail with a message naming it, never wait forever. On such an error the
 * caller ends the job with comm_abort(), which stops every rank. */
#ifndef VDNN_COMM_H
#define VDNN_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "vdnn/status.h"

typedef struct comm comm;

/* Joins the job (MPI_Init under mpirun); `timeout_s` bounds every wait. Free with
 * comm_close(). */
vdnn_status comm_open(double timeout_s, comm **out);
void comm_close(comm *c);
/* Ends every rank of the job now (after an error this rank has printed). */
void comm_abort(comm *c, int code);

int comm_rank(const comm *c);
int comm_size(const comm *c);
/* Whether this build has MPI. */
int comm_built(void);
/* How many ranks mpirun (or a compatible launcher) started, from its environment; 1
 * when not launched by one. */
int comm_launched_size(void);
/* comm_open's refusal of a launch of `launched` ranks by a build with(out) MPI. */
vdnn_status comm_check_launch(int launched, int built);

/* Every rank gives `text` (its settings as "key=value" lines); rank 0 compares them and
 * every rank fails, naming the first key whose value differs and both values, unless
 * all are the same. */
vdnn_status comm_check_same(comm *c, const char *text);

/* Sums over ranks in rank order: `fold(ctx, acc, first)` adds this rank's part into acc
 * (count floats; with `first` it writes it, acc holding nothing yet). Rank 0 folds,
 * passes the partial sum to rank 1, which folds and passes it on, ...; the last rank
 * sends the total back to all, so every rank ends with the same bits in acc, those of
 * ((part 0 + part 1) + part 2) ... in whatever way the job is split into ranks. */
vdnn_status comm_fold_floats(comm *c, float *acc, size_t count,
                             vdnn_status (*fold)(void *ctx, float *acc, int first), void *ctx);
/* As comm_fold_floats, for doubles that each rank adds to: acc = sum over ranks of
 * every rank's acc, in rank order. */
vdnn_status comm_sum_doubles(comm *c, double *acc, size_t count);

/* Copies `bytes` of rank `root`'s buf to every rank's. */
vdnn_status comm_bcast(comm *c, void *buf, size_t bytes, int root);

#endif
