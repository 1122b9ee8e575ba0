/* A training job's side of the slow-down manager (docs/manager.md): `vdnn train
 * --managed` registers with the manager, posts its slow-down (SD) and data ratio (DR)
 * every few steps, and applies the DR the manager sends at the next step boundary.
 *
 * SD = (T_now - T_start + steps_left * iter_time) / solo_time, where
 *  - T_start is when the job registered (its training began),
 *  - iter_time is the mean wall time of its steps since its DR last changed in this
 *    epoch (the last window's, just after a change),
 *  - solo_time is its steps times the time a step takes alone on one device, measured:
 *    the work of a step on its devices' own clocks (device_busy_clock: forward and
 *    backward of every device, and one update), the median over a window, the least
 *    over windows. On the CPU backend that clock is the computing thread's CPU time,
 *    which other jobs on the same cores do not stretch; on a GPU it is wall time, so the
 *    least contended window counts.
 * A manager that goes away leaves the job training with its last DR (with a warning). */
#ifndef VDNN_MGR_CLIENT_H
#define VDNN_MGR_CLIENT_H

#include "nets/parallel/parallel.h"
#include "nets/trainer.h"

typedef struct mgr_client mgr_client;

/* Registers a job named `name` (its config) whose devices and shares are the group's
 * (every device named: cpu:N or cuda:N) with the manager at `socket` (mgr_socket_path),
 * posting every `every` steps (<= 0: 5, as the paper). `quiet`: warnings only in the
 * log. Fails when no manager answers. Free with mgr_client_close(). */
vdnn_status mgr_client_open(const char *socket, const char *name, dp_group *g, int every, int quiet,
                            mgr_client **out);

/* The trainer's before_step hook (ctx: the client): measures the step just taken, posts
 * every `every` steps, and applies a DR the manager sent. */
vdnn_status mgr_client_tick(void *ctx, const train_tick *t);

/* Tells the manager the job ends ("finished", "stopped" or "failed") and frees. */
void mgr_client_close(mgr_client *c, const char *reason);

#endif
