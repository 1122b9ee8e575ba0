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
int cmd_data(int argc, char **argv);

/* Shared by the subcommands (tools/cli.c). */

/* Whether progress is drawn as on a terminal: stderr is one, or VDNN_PROGRESS_BAR=1
 * (tests) says to. */
int cli_progress_tty(void);
/* Prints "vdnn: <message>" to stderr; returns the exit code for errors (1). */
int cli_error(void);
/* SIGINT or SIGTERM ends the process at once (within the signal's delivery, whatever it
 * is measuring), saying that `vdnn CMD` stopped and, when given, `what` of it: for a
 * subcommand's work that leaves nothing half-written (its files are renamed into place).
 * Training replaces it with its own for its steps (stop after the step, then save). */
void cli_quit_on_signal(const char *cmd, const char *what);
/* With no budget given on the CPU: room for the net's plan with the largest-workspace
 * algorithms, and an eighth more. */
size_t cli_default_budget(const net *n);

/* The help (--help) of flags several subcommands take. */
#define HELP_DEVICE "auto (a GPU if there is one), cpu, cuda or cuda:N"
#define HELP_MATH "fp32 (default) or tf32 (GPU tensor cores)"
#define HELP_NONDETERMINISTIC "let cuDNN use its nondeterministic algorithms too"
#define HELP_IN_PLACE "on (default) or off: activations and dropout run in place"
#define HELP_THREADS "CPU compute threads (default: all cores)"
#define HELP_BATCH "override [net] batch"
#define HELP_LINK_GBPS "CPU device: throttle host-device copies to this many GB/s"
#define HELP_PROFILE_CACHE "where measured profiles are kept"
#define HELP_REPROFILE "measure the profile again instead of reading the cached one"
#define HELP_SEARCH "dyn's search: bb (branch and bound, default) or vdnn"
#define HELP_NODE_LIMIT "dyn: branch-and-bound nodes (0: no limit)"
#define HELP_SEARCH_SECONDS "dyn: seconds of planning, measuring apart (default 60; 0: no limit)"
#define HELP_SEARCH_GAP "dyn: stop within this fraction of the best possible (default 0.005; 0: exact)"
#define HELP_WORKERS "data loader threads (default: [data] workers, else automatic)"

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
/* The device of cli_device with no budget, for planning only (`vdnn profile` without
 * --verify, `vdnn sweep`'s profile and micro-batch splits): nothing of the net runs on
 * it, so on the CPU, whose profiles are measured in an arena of their own, its arena is
 * `hold` bytes (what the caller places on it: a net attached for planning holds its
 * parameters), not the net's training size (ResNet-1202 at its batch of 128: 43.4 GiB,
 * more than a 24 GiB machine could reserve); a GPU's is its own memory, where its
 * profiles are measured. */
vdnn_status cli_plan_device(const char *name, size_t hold, long long threads, double link_gbps, const net *n,
                            device **out);
/* Plans the net attached to *d (by cli_device with the same name, threads and link) by
 * its fixed policy within `budget` (plan_fixed). With none given (0) on the CPU, whose
 * default budget is sized before a profile says which algorithms are fastest, for the
 * largest-workspace ones (cli_default_budget), the measured ones can need more (another
 * mix of workspaces packs the pool differently: Fashion-MNIST's net under `all` at batch
 * 8 needed 30.3 MiB of a default 26.2): the device is then made again, as large as the
 * plan it runs needs and an eighth more, so that no budget means as much as the plan
 * needs. */
vdnn_status cli_plan_fixed(const char *name, long long threads, double link_gbps, size_t budget, net *n,
                           device **d);

int cmd_profile(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_manager(int argc, char **argv);
/* ONNX (tools/onnx_cmd.c; docs/onnx.md). */
int cmd_import(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_onnx_test(int argc, char **argv);

/* gnuplot (tools/plot.c): text as the body of a double-quoted gnuplot string; whether a
 * program is on PATH; `gnuplot SCRIPT` run in folder DIR, failing with a message that
 * ends "`data` in DIR" (where the numbers are). */
void cli_gp_quote(const char *text, char *buf, size_t len);
int cli_on_path(const char *prog);
vdnn_status cli_gnuplot(const char *dir, const char *script, const char *data);

#endif
