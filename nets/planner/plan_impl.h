/* What the planner's plan files share (plan.c, planfile.c, plan_print.c); private to
 * nets/planner/. */
#ifndef VDNN_PLAN_IMPL_H
#define VDNN_PLAN_IMPL_H

#include "nets/planner/planner.h"

/* Far beyond any useful lag: a bound so that a corrupt file cannot ask for nonsense. */
#define PLAN_MAX_LAG 1000

/* The map decisions', the passes' and the prefetch settings' names in plan files and
 * tables. */
extern const char *const plan_map_words[3];        /* by MAP_* */
extern const char *const plan_pass_names[PASS_COUNT];
extern const char *const plan_prefetch_names[3];   /* by PREFETCH_* */
/* PREFETCH_* by name ("?" for none of them). */
const char *plan_prefetch_name(int ahead);
/* How in-place layers run (IN_PLACE_*), in words. */
const char *plan_in_place_name(int in_place);
/* Whether x[j] may leave the device: some backward pass reads it, and it is not the
 * loss output x[nlayers] (nothing to save there: backward starts right after it). */
int plan_offloadable(const net *n, int j);
/* Whether `p` can run on `n`: same layer count, known algorithms, offloads only maps
 * that backward reads, a valid copy timing. `who` prefixes the message. */
vdnn_status plan_check(const plan *p, const net *n, const char *who);

#endif
