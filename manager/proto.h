/* How jobs and the slow-down manager talk (docs/manager.md): a Unix socket of
 * SOCK_SEQPACKET (whole messages, and a peer's exit is seen at once) in a folder of
 * the user's own. A message is one line of words: a verb, then key=value pairs.
 *
 *   job -> manager   hello pid=P name=N devices=cpu:0,cpu:1 keys=K0,K1 dr=5,5 steps=S epochs=E
 *   manager -> job   welcome id=I units=U
 *   job -> manager   post step=S steps=S epoch=E epochs=E sd=X iter_ms=X solo_ms=X dr=..
 *                         applied=S fresh=0|1 busy=B0,B1 window_s=X
 *   manager -> job   dr 7,3                      (units per device, in the job's order)
 *   job -> manager   bye reason=finished|failed
 *   anyone -> mgr    status [json]               (answered with one message, then closed)
 *
 * A device's key is what makes it the same device for every job: a GPU's PCI bus id,
 * an emulated CPU device's name (cpu:N).
 *
 * Who is trusted: the user's own processes only. A socket is used (by a job, by
 * --status, by a manager replacing a stale one) only in a folder that the user owns,
 * that is not a symbolic link and that neither group nor others may write, and each end
 * checks that the other runs as the same user (SO_PEERCRED): another local user can
 * neither pose as a manager nor register a job. Within one user, every number a message
 * carries is still range-checked, and what is printed is escaped. */
#ifndef VDNN_MGR_PROTO_H
#define VDNN_MGR_PROTO_H

#include <stddef.h>
#include <sys/types.h>

#include "vdnn/status.h"

#define MGR_MSG_MAX 65536     /* the longest message (a status of many jobs) */

/* The manager's socket: `given` (--manager), else $VDNN_MANAGER, else
 * $XDG_RUNTIME_DIR/vdnn/manager.sock, else /tmp/vdnn-UID/manager.sock. With `make_dir`
 * the folder is made (mode 0700) when missing; a folder that another user owns or that
 * others may write is refused. */
vdnn_status mgr_socket_path(const char *given, int make_dir, char *out, size_t len);

/* The folder holding `path` is the user's own: a folder, not a symbolic link, owned by
 * the effective user, not writable by group or others. Fails naming it otherwise. */
vdnn_status mgr_check_dir(const char *path);

/* The process at the other end of a connected Unix socket runs as this user. */
vdnn_status mgr_check_peer(int fd, const char *path);

/* A manager's listening socket. The lock (an flock() on PATH.lock, held for the
 * manager's life) makes starting over a stale socket race-free: only the holder may
 * remove or bind PATH; dev/ino say which socket file is this manager's to remove. */
typedef struct mgr_listener {
    int fd, lock_fd;
    dev_t dev;
    ino_t ino;
} mgr_listener;

/* Listens at `path` (its folder checked as mgr_check_dir): a socket file left by a
 * manager that died is replaced, one that a live manager holds is refused. */
vdnn_status mgr_listen(const char *path, mgr_listener *l);
/* Closes the socket, removes its file if it is still the one mgr_listen made, and
 * releases the lock. */
void mgr_unlisten(const char *path, mgr_listener *l);

/* Connects to the manager at `path` (folder and peer checked); fails naming the path
 * when none listens or when it is not the user's own. */
vdnn_status mgr_dial(const char *path, int *fd);

/* Sends one message without blocking or raising SIGPIPE: 0, or -1 with errno. */
int mgr_send(int fd, const char *msg);

/* Receives one message into buf (NUL-terminated), waiting up to wait_ms (0: not at all,
 * < 0: for ever): > 0 its length, 0 the peer closed, -1 nothing yet (errno EAGAIN) or
 * an error (errno). */
int mgr_recv(int fd, char *buf, size_t len, int wait_ms);

/* Sends `msg` and receives the answer as mgr_recv. When the send fails (a manager that
 * refused the connection has already closed it) the refusal it left is still read. */
int mgr_request(int fd, const char *msg, char *buf, size_t len, int wait_ms);

/* A "refused reason=..." message: 1 and its reason, in words, in why. */
int mgr_refusal(const char *msg, char *why, size_t len);
/* "welcome id=I units=U": 1 with I >= 1 and U in 2..1000 (the manager's --units). */
int mgr_parse_welcome(const char *msg, int *id, int *units);
/* "dr U0,U1,...": 1 when it holds `ndev` whole numbers >= 0 that add up to `units`. */
int mgr_parse_dr(const char *msg, int ndev, int units, int *out);

/* The value of `key` in a message, copied into out; 0 when absent (or too long). */
int mgr_field(const char *msg, const char *key, char *out, size_t len);
/* 1 when the message has a field `key`=, whatever its value. */
int mgr_has_field(const char *msg, const char *key);
/* A number field; 0 when absent or not a number. */
int mgr_field_double(const char *msg, const char *key, double *out);
/* A comma-separated list of at most `max` numbers: how many, or -1 when malformed. */
int mgr_parse_list(const char *text, double *out, int max);
/* A number field within [lo, hi]: 1 and out; 0 when absent; -1 when it is there but
 * not a finite number in range (the message is then refused). */
int mgr_field_range(const char *msg, const char *key, double lo, double hi, double *out);

/* `text` for a terminal, in buf: control characters but the line end (and DEL) as
 * \xNN, so that names sent by a job cannot move the cursor or recolour the screen.
 * Cut short when buf is too small. Returns buf. */
const char *mgr_text_escape(const char *text, char *buf, size_t len);

#endif
