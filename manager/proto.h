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
 * an emulated CPU device's name (cpu:N). */
#ifndef VDNN_MGR_PROTO_H
#define VDNN_MGR_PROTO_H

#include <stddef.h>

#include "vdnn/status.h"

#define MGR_MSG_MAX 65536     /* the longest message (a status of many jobs) */

/* The manager's socket: `given` (--manager), else $VDNN_MANAGER, else
 * $XDG_RUNTIME_DIR/vdnn/manager.sock, else /tmp/vdnn-UID/manager.sock. With `make_dir`
 * the folder is made (mode 0700) when missing; a folder that another user owns or that
 * others may write is refused. */
vdnn_status mgr_socket_path(const char *given, int make_dir, char *out, size_t len);

/* Listens at `path`; a socket file left by a manager that died is replaced, one that a
 * live manager answers on is refused. */
vdnn_status mgr_listen(const char *path, int *fd);

/* Connects to the manager at `path`; fails naming the path when none listens. */
vdnn_status mgr_dial(const char *path, int *fd);

/* Sends one message without blocking or raising SIGPIPE: 0, or -1 with errno. */
int mgr_send(int fd, const char *msg);

/* Receives one message into buf (NUL-terminated), waiting up to wait_ms (0: not at all,
 * < 0: for ever): > 0 its length, 0 the peer closed, -1 nothing yet (errno EAGAIN) or
 * an error (errno). */
int mgr_recv(int fd, char *buf, size_t len, int wait_ms);

/* The value of `key` in a message, copied into out; 0 when absent (or too long). */
int mgr_field(const char *msg, const char *key, char *out, size_t len);
/* A number field; 0 when absent or not a number. */
int mgr_field_double(const char *msg, const char *key, double *out);
/* A comma-separated list of at most `max` numbers: how many, or -1 when malformed. */
int mgr_parse_list(const char *text, double *out, int max);

#endif
