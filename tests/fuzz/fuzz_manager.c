/* Fuzz target: the slow-down manager's protocol (manager/proto.h). The input is
 * messages, one a line; a line's first byte picks which of four connections sends the
 * rest, and the input's first byte the manager's settings (units, a fixed device list
 * or the jobs' own). A manager without a socket (mgr_server_*) handles each message as
 * it would a job's or --status's, applies its rules, and answers; every answer is read
 * back as a job reads it (mgr_refusal, mgr_parse_welcome, mgr_parse_dr) and escaped as
 * --status prints it; a JSON status must parse (Jansson), whatever the jobs called
 * themselves. Its JSON-lines log goes to /dev/null, written all the same. */
#include "tests/fuzz/fuzz.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "manager/proto.h"
#include "manager/rules.h"
#include "manager/server.h"

#define CONNS 4

/* Reads every answer waiting on a connection's job end, as the job would. */
static void read_answers(int fd, int *units)
{
    static char msg[MGR_MSG_MAX], shown[4 * MGR_MSG_MAX];
    char why[1024];
    int dr[MGR_MAX_DEVICES], id = 0;
    while (mgr_recv(fd, msg, sizeof msg, 0) > 0) {
        mgr_text_escape(msg, shown, sizeof shown);
        if (msg[0] == '{') {
            json_t *status = json_loads(msg, 0, NULL);
            if (!status) abort();
            json_decref(status);
            continue;
        }
        if (mgr_refusal(msg, why, sizeof why)) continue;
        if (mgr_parse_welcome(msg, &id, units)) continue;
        for (int k = 1; k <= MGR_MAX_DEVICES; k++) mgr_parse_dr(msg, k, *units, dr);
    }
}

FUZZ_ENTRY(manager)
{
    static FILE *sink;
    if (!sink && !(sink = fopen("/dev/null", "w"))) abort();
    if (size < 1) return 0;
    mgr_opts o = {.socket = "fuzz.sock", .log = sink, .period_s = 0, .stale_s = 1e9};
    o.rules = (mgr_params){data[0] & 1 ? 4 : 10, 0.2, 0.2};
    o.devices = data[0] & 2 ? "cpu:0,cpu:1,cuda:0" : NULL;
    o.observe = (data[0] & 4) != 0;
    mgr_server *sv = NULL;
    if (mgr_server_new(&o, &sv) != VDNN_OK) abort();
    int peer[CONNS], slot[CONNS], units = o.rules.units;
    for (int k = 0; k < CONNS; k++) {
        int fds[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) abort();
        slot[k] = mgr_server_add(sv, fds[0]);
        peer[k] = fds[1];
    }
    char *text = malloc(size + 1);
    if (!text) abort();
    memcpy(text, data, size);
    text[size] = 0;
    for (size_t at = 1; at < size;) {
        char *line = text + at, *end = memchr(line, '\n', size - at);
        size_t len = end ? (size_t)(end - line) : size - at;
        line[len] = 0;
        at += len + 1;
        if (!len) continue;
        int c = (unsigned char)line[0] % CONNS;
        mgr_server_message(sv, slot[c], line + 1);
        mgr_server_tick(sv);
        read_answers(peer[c], &units);
    }
    for (int k = 0; k < CONNS; k++) read_answers(peer[k], &units);
    mgr_server_free(sv);
    for (int k = 0; k < CONNS; k++) close(peer[k]);
    free(text);
    return 0;
}
