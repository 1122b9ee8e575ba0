/* The subcommands of the `vdnn` program, and what they share. */
#ifndef VDNN_COMMANDS_H
#define VDNN_COMMANDS_H

#include <stdio.h>

#include "data/data.h"
#include "nets/net.h"
#include "tools/args.h"
#include "vdnn/device.h"

int cmd_train(int argc, char **argv);
int cmd_test(int argc, char **argv);
int cmd_info(int argc, char **argv);

/* Prints "vdnn: <message>" to stderr; returns the exit code for errors (1). */
int cli_error(void);

/* Creates the device named by --device ("auto", "cpu", "cuda", "cuda:N"; auto is the
 * GPU when there is one and no --link-gbps, else the CPU; the VDNN_DEVICE variable
 * stands in for auto) with a budget (0: on the CPU large enough for the net's training,
 * on a GPU its free memory less a reserve for the libraries), the math mode cli_math
 * (--math fp32|tf32) and cli_nondeterministic (--nondeterministic). */
extern const char *cli_math;
extern int cli_nondeterministic;
/* --in-place on|off (NULL: the config's [memory] in_place): the overrides with no other
 * field set but that one; an error names a value that is neither. */
extern const char *cli_in_place;
vdnn_status cli_overrides(net_overrides *ov);
vdnn_status cli_device(const char *name, size_t budget, long long threads, double link_gbps, const net *n,
                       device **out);

/* Attaches n to d (net_attach); with `--policy dyn`, when the parameters do not fit,
 * with every swappable layer's parameters in host memory: the planner then decides
 * which to bring back. */
vdnn_status cli_attach(net *n, device *d);

/* Plans the attached net (policy, algorithms) and checks that the budget (0: none
 * given) holds its iteration; if not, the error lists every policy's minimum. */
vdnn_status cli_plan(net *n, size_t budget);

/* How `--policy dyn` and `vdnn profile` plan (tools/plan_cmd.c). */
typedef struct planner_flags {
    size_t budget;            /* bytes the plan must fit; 0: no limit */
    const char *search;       /* "bb" (default) or "vdnn" */
    const char *cache;        /* --profile-cache DIR; NULL: the default cache */
    long long node_limit;     /* branch and bound nodes; 0: no limit */
    double search_seconds;    /* wall time of one search; 0: no limit */
    int fixed_split;          /* --micro-batch was given: plan that split only (the batch: none) */
    long long verify;         /* real iterations to verify with; 0: none */
    double link_gbps;         /* the device's settings, for the profile's key */
    long long threads;
    int json;                 /* print the plan as JSON on stdout */
} planner_flags;

int cmd_profile(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_manager(int argc, char **argv);

/* gnuplot (tools/plot.c): text as the body of a double-quoted gnuplot string; whether a
 * program is on PATH; `gnuplot SCRIPT` run in folder DIR, failing with a message that
 * ends "`data` in DIR" (where the numbers are). */
void cli_gp_quote(const char *text, char *buf, size_t len);
int cli_on_path(const char *prog);
vdnn_status cli_gnuplot(const char *dir, const char *script, const char *data);

struct plan;
/* Profiles the attached net (cached), searches for the fastest plan under f->budget
 * (when none fits the batch, in micro-batches: *np is then replaced by the net rebuilt
 * for them), verifies it with real iterations, applies it, and prints what it did to
 * `out` (NULL: quiet). *chosen (may be NULL) receives the plan; free with plan_free(). */
vdnn_status cli_dyn_plan(net **np, const planner_flags *f, FILE *out, struct plan *chosen);
/* Loads a plan file for the attached net and applies it; fails when its simulated
 * peak exceeds `budget` (0: no limit). */
vdnn_status cli_load_plan(net *n, const char *path, size_t budget);

#endif
