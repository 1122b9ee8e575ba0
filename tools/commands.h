/* The subcommands of the `vdnn` program, and what they share. */
#ifndef VDNN_COMMANDS_H
#define VDNN_COMMANDS_H

#include "data/data.h"
#include "nets/net.h"
#include "tools/args.h"
#include "vdnn/device.h"

int cmd_train(int argc, char **argv);
int cmd_test(int argc, char **argv);
int cmd_info(int argc, char **argv);

/* Prints "vdnn: <message>" to stderr; returns the exit code for errors (1). */
int cli_error(void);

/* Creates the device named by --device ("auto", "cpu", "cuda", "cuda:N") with a budget
 * (0: large enough for the net's training). */
vdnn_status cli_device(const char *name, size_t budget, long long threads, double link_gbps, const net *n,
                       device **out);

/* Plans the attached net (policy, algorithms) and checks that the budget (0: none
 * given) holds its iteration; if not, the error lists every policy's minimum. */
vdnn_status cli_plan(net *n, size_t budget);

#endif
