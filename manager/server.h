/* The slow-down manager (`vdnn manager`, docs/manager.md): a long-running process that
 * jobs started with `vdnn train --managed` register with. Each job posts its slow-down
 * (SD) and data ratio (DR) every few steps (manager/client.h); the manager keeps every
 * device's utilization (NVML on GPUs; on emulated CPU devices the busy time the jobs
 * report), and, at most once a period and only once every job has posted since its last
 * decision (and the jobs it changed, a whole window with their new DR), applies the
 * rules (manager/rules.h) and sends the jobs it changes their new DR. Every event goes
 * to a JSON-lines log; `vdnn manager --status` asks it for a table. A job that exits or
 * dies is dropped at once (its socket closes); one that stops posting for --stale
 * seconds no longer counts in decisions. */
#ifndef VDNN_MGR_SERVER_H
#define VDNN_MGR_SERVER_H

#include <stdio.h>

#include "manager/rules.h"
#include "vdnn/status.h"

typedef struct mgr_opts {
    const char *socket;       /* where to listen (mgr_socket_path) */
    FILE *log;                /* JSON lines, or NULL */
    FILE *out;                /* a line per register, decision and leave; NULL: quiet */
    mgr_params rules;
    double period_s;          /* the least time between two decisions */
    double stale_s;           /* a job silent this long is left out of decisions */
    int observe;              /* record, never change a DR (a baseline to compare with) */
    int until_idle;           /* exit once the last job has left */
    const char *devices;      /* the devices shared, by name or key ("cpu:0,cpu:1"); NULL:
                               * those the jobs bring */
} mgr_opts;

/* Runs the manager until SIGINT or SIGTERM (or, with until_idle, the last job's exit);
 * removes its socket when it ends. */
vdnn_status mgr_serve(const mgr_opts *o);

/* The manager's state without its socket: mgr_serve's parts, which the protocol's fuzz
 * target (tests/fuzz/fuzz_manager.c) drives with connections of its own. */
typedef struct mgr_server mgr_server;
/* A manager for `o` (which must outlive it); free with mgr_server_free(). */
vdnn_status mgr_server_new(const mgr_opts *o, mgr_server **out);
/* Takes a connected socket (non-blocking) as a new connection: its slot, or -1 when
 * there is no room (the socket is then sent a refusal and closed). */
int mgr_server_add(mgr_server *sv, int fd);
/* Handles one message received on the connection in `slot` (ignored once it is closed). */
void mgr_server_message(mgr_server *sv, int slot, const char *msg);
/* Drops connections that said nothing, jobs that never posted within --stale, and
 * decides when it is time. */
void mgr_server_tick(mgr_server *sv);
/* Closes every connection (jobs go on with their DR) and frees. */
void mgr_server_free(mgr_server *sv);

/* Asks the manager at `socket` for its state and prints it to `out`: a table, or with
 * `json` one JSON object. */
vdnn_status mgr_query_status(const char *socket, int json, FILE *out);

#endif
