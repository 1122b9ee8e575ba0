/* The slow-down manager (see server.h). */
#include "manager/server.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "manager/nvml.h"
#include "manager/proto.h"
#include "nets/parallel.h"

#define MAX_CONN 256
#define HELLO_WAIT_S 10.0
/* a job whose posts still do not show the DR it was sent after this many gave up on it
 * (it could not apply it): decisions go on */
#define PENDING_POSTS 4

typedef struct sdev {
    char key[64];             /* device_identity() of the jobs' device */
    char name[32];            /* as the first job named it: cpu:0, cuda:1 */
    double util;              /* 0..1, as last computed */
} sdev;

typedef struct sjob {
    int fd;                   /* -1: the slot is free */
    int id;                   /* 0 until it says hello */
    long pid;
    char name[256];
    double t_conn, t_post;
    int ndev;
    int dev[MGR_MAX_DEVICES];       /* the machine's index of each of its devices */
    int dr[MGR_MAX_DEVICES];        /* units, by machine device */
    double rate[MGR_MAX_DEVICES];   /* busy seconds per second, by machine device */
    double sd, iter_ms, solo_ms;
    long long step, steps, done;
    int epoch, epochs, posts;
    int pending;                    /* a DR was sent and has not shown in a fresh post */
    int sent[MGR_MAX_DEVICES];
    int posts_since_sent;
    int last_move[MGR_MAX_DEVICES]; /* its last change (new DR - old), by machine device */
    double iter_before;             /* its iter_ms when that change was sent */
    int hold_logged;                /* a hold of that change is in the log */
    char bye[32];                   /* the reason it gave when leaving */
} sjob;

typedef struct server {
    const mgr_opts *o;
    int lfd;
    double t0, last_decision;
    int ndev, fixed;
    sdev dev[MGR_MAX_DEVICES];
    sjob job[MAX_CONN];
    int next_id, registered_ever;
    mgr_nvml *nvml;
} server;

static volatile sig_atomic_t stop_signal;
static void on_signal(int sig) { stop_signal = sig; }

static double now_s(const server *sv) { return vdnn_now_s() - sv->t0; }

/* ---- output ---- */

static void json_ints(FILE *f, const int *v, int n)
{
    fputc('[', f);
    for (int k = 0; k < n; k++) fprintf(f, "%s%d", k ? ", " : "", v[k]);
    fputc(']', f);
}

static void json_utils(FILE *f, const server *sv)
{
    fputc('[', f);
    for (int k = 0; k < sv->ndev; k++) fprintf(f, "%s%.4f", k ? ", " : "", sv->dev[k].util);
    fputc(']', f);
}

static void log_head(server *sv, const char *event)
{
    fprintf(sv->o->log, "{\"t\": %.4f, \"event\": \"%s\"", now_s(sv), event);
}

static void log_job(server *sv, const sjob *j)
{
    fprintf(sv->o->log, ", \"job\": %d, \"pid\": %ld, \"name\": ", j->id, j->pid);
    vdnn_json_str(sv->o->log, j->name);
}

static void log_end(server *sv)
{
    fprintf(sv->o->log, "}\n");
    fflush(sv->o->log);
}

static void say(server *sv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(server *sv, const char *fmt, ...)
{
    if (!sv->o->out) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(sv->o->out, "[%8.2f s] ", now_s(sv));
    vfprintf(sv->o->out, fmt, ap);
    fputc('\n', sv->o->out);
    fflush(sv->o->out);
    va_end(ap);
}

/* "a,b,c" of a job's DR in its own device order. */
static void dr_text(const sjob *j, const int *dr, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = 0;
    for (int d = 0; d < j->ndev && k < len; d++) k += (size_t)snprintf(buf + k, len - k, "%s%d", d ? "," : "", dr[j->dev[d]]);
}

static void dev_text(const server *sv, const sjob *j, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = 0;
    for (int d = 0; d < j->ndev && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, "%s%s", d ? "," : "", sv->dev[j->dev[d]].name);
}

/* ---- devices ---- */

/* The machine's index of a device by key or name; added when the list is not fixed.
 * -1 when it is not shared here. */
static int device_index(server *sv, const char *key, const char *name)
{
    for (int k = 0; k < sv->ndev; k++)
        if (!strcmp(sv->dev[k].key, key) || (!sv->dev[k].key[0] && !strcmp(sv->dev[k].name, name))) {
            if (!sv->dev[k].key[0]) snprintf(sv->dev[k].key, sizeof sv->dev[k].key, "%s", key);
            return k;
        }
    if (sv->fixed || sv->ndev == MGR_MAX_DEVICES) return -1;
    sdev *d = &sv->dev[sv->ndev];
    snprintf(d->key, sizeof d->key, "%s", key);
    snprintf(d->name, sizeof d->name, "%s", name);
    return sv->ndev++;
}

static int live(const server *sv, const sjob *j, double now)
{
    return j->fd >= 0 && j->id && j->posts > 0 && now - j->t_post < sv->o->stale_s;
}

/* A GPU's key is its PCI bus id ("00000000:3B:00.0"); an emulated device's is cpu:N. */
static int is_gpu(const sdev *d) { return d->key[0] && strncmp(d->key, "cpu", 3) != 0; }

/* Each device's utilization: NVML's for a GPU where it answers, else the busy time the
 * live jobs on it report, per second. */
static void update_util(server *sv)
{
    double now = now_s(sv);
    for (int k = 0; k < sv->ndev; k++) {
        double u = 0;
        if (is_gpu(&sv->dev[k]) && mgr_nvml_util(sv->nvml, sv->dev[k].key, &u)) {
            sv->dev[k].util = u;
            continue;
        }
        for (int i = 0; i < MAX_CONN; i++)
            if (live(sv, &sv->job[i], now)) u += sv->job[i].rate[k];
        sv->dev[k].util = u < 1 ? u : 1;
    }
}

/* ---- jobs ---- */

/* A job came or went: the situation the last changes answered has changed. */
static void forget_moves(server *sv)
{
    for (int i = 0; i < MAX_CONN; i++) {
        memset(sv->job[i].last_move, 0, sizeof sv->job[i].last_move);
        sv->job[i].hold_logged = 0;
    }
}

static void drop(server *sv, sjob *j, const char *reason)
{
    if (j->id) {
        say(sv, "job %d (pid %ld, %s) left: %s", j->id, j->pid, j->name, reason);
        if (sv->o->log) {
            log_head(sv, "leave");
            log_job(sv, j);
            fprintf(sv->o->log, ", \"reason\": \"%s\", \"step\": %lld, \"steps\": %lld, \"sd\": %.6g}\n", reason,
                    j->step, j->steps, j->sd);
            fflush(sv->o->log);
        }
    }
    int was_job = j->id != 0;
    close(j->fd);
    memset(j, 0, sizeof *j);
    j->fd = -1;
    if (was_job) forget_moves(sv);
}

static void refuse(server *sv, sjob *j, const char *why)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "refused reason=%s", why);
    for (char *p = msg + 15; *p; p++)
        if (*p == ' ') *p = '_';
    mgr_send(j->fd, msg);
    say(sv, "refused a job (pid %ld): %s", j->pid, why);
    close(j->fd);
    memset(j, 0, sizeof *j);
    j->fd = -1;
}

/* Splits "a,b,c" into at most `max` words of `len` characters: how many, -1 if more. */
static int split_words(const char *text, char (*out)[64], int max)
{
    int n = 0;
    for (const char *p = text; *p;) {
        size_t k = strcspn(p, ",");
        if (n == max || k >= 64 || k == 0) return -1;
        memcpy(out[n], p, k);
        out[n++][k] = 0;
        p += k + (p[k] == ',');
    }
    return n;
}

static void on_hello(server *sv, sjob *j, const char *msg)
{
    char names_text[2048] = "", keys_text[4096] = "", dr_text_[1024] = "", pid[32] = "";
    char names[MGR_MAX_DEVICES][64], keys[MGR_MAX_DEVICES][64];
    double w[MGR_MAX_DEVICES];
    mgr_field(msg, "pid", pid, sizeof pid);
    j->pid = atol(pid);
    if (!mgr_field(msg, "name", j->name, sizeof j->name)) snprintf(j->name, sizeof j->name, "?");
    int n = mgr_field(msg, "devices", names_text, sizeof names_text) ? split_words(names_text, names, MGR_MAX_DEVICES) : -1;
    int nk = mgr_field(msg, "keys", keys_text, sizeof keys_text) ? split_words(keys_text, keys, MGR_MAX_DEVICES) : -1;
    int nw = mgr_field(msg, "dr", dr_text_, sizeof dr_text_) ? mgr_parse_list(dr_text_, w, MGR_MAX_DEVICES) : -1;
    if (n < 1 || nk != n || nw != n) {
        refuse(sv, j, "its hello names no devices, or not one key and one share for each");
        return;
    }
    for (int d = 0; d < n; d++) {
        int k = device_index(sv, keys[d], names[d]);
        char why[512];
        if (k < 0) {
            snprintf(why, sizeof why, "%s is not one of the devices this manager shares", names[d]);
            refuse(sv, j, why);
            return;
        }
        for (int e = 0; e < d; e++)
            if (j->dev[e] == k) {
                snprintf(why, sizeof why, "%s is given twice", names[d]);
                refuse(sv, j, why);
                return;
            }
        j->dev[d] = k;
    }
    j->ndev = n;
    int units[MGR_MAX_DEVICES];
    double total = 0;
    for (int d = 0; d < n; d++) total += w[d] > 0 ? w[d] : 0;
    if (!(total > 0)) {
        refuse(sv, j, "every share is 0");
        return;
    }
    dp_split(sv->o->rules.units, w, NULL, n, units);
    for (int d = 0; d < n; d++) j->dr[j->dev[d]] = units[d];
    forget_moves(sv);
    j->id = ++sv->next_id;
    sv->registered_ever = 1;
    char reply[128];
    snprintf(reply, sizeof reply, "welcome id=%d units=%d", j->id, sv->o->rules.units);
    mgr_send(j->fd, reply);
    char devs[512], dr[256];
    dev_text(sv, j, devs, sizeof devs);
    dr_text(j, j->dr, dr, sizeof dr);
    say(sv, "job %d (pid %ld, %s) registered on %s with DR %s", j->id, j->pid, j->name, devs, dr);
    if (sv->o->log) {
        log_head(sv, "register");
        log_job(sv, j);
        fprintf(sv->o->log, ", \"devices\": [");
        for (int d = 0; d < n; d++) {
            fputs(d ? ", " : "", sv->o->log);
            vdnn_json_str(sv->o->log, sv->dev[j->dev[d]].name);
        }
        fprintf(sv->o->log, "], \"dr\": ");
        json_ints(sv->o->log, j->dr, sv->ndev);
        log_end(sv);
    }
}

static void on_post(server *sv, sjob *j, const char *msg)
{
    double v = 0, busy[MGR_MAX_DEVICES], dr[MGR_MAX_DEVICES], window = 0;
    char text[1024];
    if (mgr_field_double(msg, "sd", &v) && v >= 0) j->sd = v;
    if (mgr_field_double(msg, "iter_ms", &v)) j->iter_ms = v;
    if (mgr_field_double(msg, "solo_ms", &v)) j->solo_ms = v;
    if (mgr_field_double(msg, "step", &v)) j->step = (long long)v;
    if (mgr_field_double(msg, "steps", &v)) j->steps = (long long)v;
    if (mgr_field_double(msg, "done", &v)) j->done = (long long)v;
    if (mgr_field_double(msg, "epoch", &v)) j->epoch = (int)v;
    if (mgr_field_double(msg, "epochs", &v)) j->epochs = (int)v;
    double fresh = 0;
    mgr_field_double(msg, "fresh", &fresh);
    mgr_field_double(msg, "window_s", &window);
    if (mgr_field(msg, "busy", text, sizeof text) && mgr_parse_list(text, busy, MGR_MAX_DEVICES) == j->ndev &&
        window > 0) {
        memset(j->rate, 0, sizeof j->rate);
        for (int d = 0; d < j->ndev; d++) j->rate[j->dev[d]] = busy[d] > 0 ? busy[d] / window : 0;
    }
    if (mgr_field(msg, "dr", text, sizeof text) && mgr_parse_list(text, dr, MGR_MAX_DEVICES) == j->ndev) {
        int total = 0;
        for (int d = 0; d < j->ndev; d++) total += (int)dr[d];
        if (total == sv->o->rules.units) {
            memset(j->dr, 0, sizeof j->dr);
            for (int d = 0; d < j->ndev; d++) j->dr[j->dev[d]] = (int)dr[d];
        }
    }
    j->posts++;
    j->t_post = now_s(sv);
    if (j->pending) {
        if (fresh > 0 && !memcmp(j->dr, j->sent, sizeof j->dr)) j->pending = 0;
        else if (++j->posts_since_sent >= PENDING_POSTS) {
            j->pending = 0;
            say(sv, "job %d has not applied the DR it was sent after %d posts; deciding without waiting for it", j->id,
                PENDING_POSTS);
        }
    }
    update_util(sv);
    if (!sv->o->log) return;
    log_head(sv, "post");
    log_job(sv, j);
    fprintf(sv->o->log, ", \"sd\": %.6g, \"dr\": ", j->sd);
    json_ints(sv->o->log, j->dr, sv->ndev);
    fprintf(sv->o->log, ", \"epoch\": %d, \"epochs\": %d, \"step\": %lld, \"steps\": %lld, \"iter_ms\": %.6g, "
            "\"solo_ms\": %.6g, \"fresh\": %d, \"util\": ", j->epoch, j->epochs, j->step, j->steps, j->iter_ms,
            j->solo_ms, fresh > 0);
    json_utils(sv->o->log, sv);
    log_end(sv);
}

/* ---- decisions ---- */

/* The largest-SD job's change was held (it would undo its last): said once per change. */
static void log_hold(server *sv, sjob *j, const mgr_decision *dec)
{
    if (j->hold_logged) return;
    j->hold_logged = 1;
    char dr[256];
    dr_text(j, j->dr, dr, sizeof dr);
    say(sv, "job %d (SD %.2f, largest gap %.2f) keeps DR %s: the rules would undo its last change", j->id, j->sd,
        dec->gap, dr);
    if (!sv->o->log) return;
    log_head(sv, "hold");
    log_job(sv, j);
    fprintf(sv->o->log, ", \"gap\": %.6g, \"sd\": %.6g, \"dr\": ", dec->gap, j->sd);
    json_ints(sv->o->log, j->dr, sv->ndev);
    log_end(sv);
}

static void decide(server *sv)
{
    double now = now_s(sv);
    if (sv->o->observe || now - sv->last_decision < sv->o->period_s) return;
    int idx[MAX_CONN], n = 0;
    for (int i = 0; i < MAX_CONN; i++) {
        sjob *j = &sv->job[i];
        /* a job still starting (its first window holds the start-up) counts in every rule
         * (rule 1 counts jobs): wait for its second post, unless it has gone quiet */
        double seen = j->t_post > j->t_conn ? j->t_post : j->t_conn;
        if (j->fd >= 0 && j->id && j->posts < 2 && now - seen < sv->o->stale_s) return;
        if (!live(sv, j, now) || j->posts < 2) continue;
        if (j->pending || j->t_post <= sv->last_decision) return;   /* not settled since the last decision */
        idx[n++] = i;
    }
    if (!n) return;
    mgr_view *views = calloc((size_t)n, sizeof *views);
    if (!views) return;
    for (int a = 0; a < n; a++) {
        const sjob *j = &sv->job[idx[a]];
        views[a].sd = j->sd;
        memcpy(views[a].dr, j->dr, sizeof views[a].dr);
        memcpy(views[a].last_move, j->last_move, sizeof views[a].last_move);
        views[a].last_slower = j->iter_ms > j->iter_before;   /* iter_ms is the new DR's by now */
        for (int k = 0; k < sv->ndev; k++) views[a].own[k] = j->rate[k];
        for (int d = 0; d < j->ndev; d++) views[a].allowed[j->dev[d]] = 1;
    }
    double util[MGR_MAX_DEVICES];
    update_util(sv);
    for (int k = 0; k < sv->ndev; k++) util[k] = sv->dev[k].util;
    mgr_decision dec;
    mgr_decide(views, n, util, sv->ndev, &sv->o->rules, &dec);
    if (dec.held >= 0) log_hold(sv, &sv->job[idx[dec.held]], &dec);
    for (int c = 0; c < dec.nchanges; c++) {
        const mgr_change *ch = &dec.change[c];
        sjob *j = &sv->job[idx[ch->job]];
        char to[256], from[256], msg[300];
        dr_text(j, ch->dr, to, sizeof to);
        dr_text(j, j->dr, from, sizeof from);
        snprintf(msg, sizeof msg, "dr %s", to);
        if (mgr_send(j->fd, msg) != 0) continue;   /* gone: its close drops it */
        j->pending = 1;
        j->posts_since_sent = 0;
        memcpy(j->sent, ch->dr, sizeof j->sent);
        for (int k = 0; k < MGR_MAX_DEVICES; k++) j->last_move[k] = ch->dr[k] - j->dr[k];
        j->iter_before = j->iter_ms;
        j->hold_logged = 0;
        say(sv, "job %d (SD %.2f, largest gap %.2f): DR %s -> %s by the %s rule", j->id, j->sd, dec.gap, from, to,
            mgr_rule_name(dec.rule));
        if (!sv->o->log) continue;
        log_head(sv, "decision");
        log_job(sv, j);
        fprintf(sv->o->log, ", \"rule\": \"%s\", \"gap\": %.6g, \"sd\": %.6g, \"from\": ", mgr_rule_name(dec.rule),
                dec.gap, j->sd);
        json_ints(sv->o->log, j->dr, sv->ndev);
        fprintf(sv->o->log, ", \"to\": ");
        json_ints(sv->o->log, ch->dr, sv->ndev);
        if (ch->moved)
            fprintf(sv->o->log, ", \"moved\": %d, \"from_device\": \"%s\", \"to_device\": \"%s\"", ch->moved,
                    sv->dev[ch->from].name, sv->dev[ch->to].name);
        fprintf(sv->o->log, ", \"sds\": {");
        for (int a = 0; a < n; a++) fprintf(sv->o->log, "%s\"%d\": %.6g", a ? ", " : "", sv->job[idx[a]].id, views[a].sd);
        fprintf(sv->o->log, "}, \"util\": ");
        json_utils(sv->o->log, sv);
        log_end(sv);
    }
    if (dec.nchanges) sv->last_decision = now;
    free(views);
}

/* ---- status ---- */

/* text as the inside of a JSON string */
static const char *json_inner(const char *text, char *buf, size_t len)
{
    size_t k = 0;
    for (; *text && k + 7 < len; text++) {
        unsigned char c = (unsigned char)*text;
        if (c == '"' || c == '\\') buf[k++] = '\\', buf[k++] = (char)c;
        else if (c < 0x20) k += (size_t)snprintf(buf + k, len - k, "\\u%04x", c);
        else buf[k++] = (char)c;
    }
    buf[k] = 0;
    return buf;
}

static int count_jobs(const server *sv)
{
    int n = 0;
    for (int i = 0; i < MAX_CONN; i++) n += sv->job[i].fd >= 0 && sv->job[i].id;
    return n;
}

static void status_text(server *sv, char *buf, size_t len, int json)
{
    size_t k = 0;
    double now = now_s(sv);
#define PUT(...) (k += k < len ? (size_t)snprintf(buf + k, len - k, __VA_ARGS__) : 0)
    update_util(sv);
    if (json) {
        char sock[600];
        PUT("{\"pid\": %ld, \"socket\": \"%s\", \"uptime_s\": %.3f, \"observe\": %s, \"devices\": [", (long)getpid(),
            json_inner(sv->o->socket, sock, sizeof sock), now, sv->o->observe ? "true" : "false");
        for (int d = 0; d < sv->ndev; d++)
            PUT("%s{\"name\": \"%s\", \"key\": \"%s\", \"util\": %.4f}", d ? ", " : "", sv->dev[d].name, sv->dev[d].key,
                sv->dev[d].util);
        PUT("], \"jobs\": [");
    } else {
        PUT("vdnn manager (pid %ld) at %s: up %.0f s, %d job%s, %d device%s%s\n", (long)getpid(), sv->o->socket, now,
            count_jobs(sv), count_jobs(sv) == 1 ? "" : "s", sv->ndev, sv->ndev == 1 ? "" : "s",
            sv->o->observe ? ", observing (no DR changes)" : "");
        PUT("%-8s %6s\n", "device", "util");
        for (int d = 0; d < sv->ndev; d++) PUT("%-8s %5.0f%%\n", sv->dev[d].name, 100 * sv->dev[d].util);
        PUT("%-4s %-8s %6s %-10s %-14s %9s %7s %-13s %s\n", "job", "pid", "SD", "DR", "devices", "iter ms", "epoch",
            "step", "name");
    }
    int first = 1;
    for (int i = 0; i < MAX_CONN; i++) {
        const sjob *j = &sv->job[i];
        if (j->fd < 0 || !j->id) continue;
        char dr[256], devs[512], ep[32], st[48];
        dr_text(j, j->dr, dr, sizeof dr);
        dev_text(sv, j, devs, sizeof devs);
        const char *state = !j->posts ? "starting" : live(sv, j, now) ? "" : "stale";
        if (json) {
            char name[600];
            PUT("%s{\"id\": %d, \"pid\": %ld, \"name\": \"%s\", \"sd\": %.6g, \"dr\": [%s], \"devices\": [", first ? "" : ", ",
                j->id, j->pid, json_inner(j->name, name, sizeof name), j->sd, dr);
            for (int d = 0; d < j->ndev; d++) PUT("%s\"%s\"", d ? ", " : "", sv->dev[j->dev[d]].name);
            PUT("], \"iter_ms\": %.6g, \"solo_ms\": %.6g, \"epoch\": %d, \"epochs\": %d, \"step\": %lld, \"steps\": %lld, "
                "\"state\": \"%s\"}", j->iter_ms, j->solo_ms, j->epoch, j->epochs, j->step, j->steps,
                *state ? state : "running");
        } else {
            snprintf(ep, sizeof ep, "%d/%d", j->epoch, j->epochs);
            snprintf(st, sizeof st, "%lld/%lld", j->done, j->steps);
            PUT("%-4d %-8ld %6.2f %-10s %-14s %9.1f %7s %-13s %s%s%s\n", j->id, j->pid, j->sd, dr, devs, j->iter_ms, ep,
                st, j->name, *state ? " " : "", state);
        }
        first = 0;
    }
    if (json) PUT("]}\n");
#undef PUT
    if (k >= len) snprintf(buf + len - 16, 16, "\n(truncated)\n");
}

/* ---- the loop ---- */

static void on_message(server *sv, sjob *j, const char *msg)
{
    if (!strncmp(msg, "status", 6)) {
        char *buf = malloc(MGR_MSG_MAX);
        if (buf) {
            status_text(sv, buf, MGR_MSG_MAX, strstr(msg, "json") != NULL);
            mgr_send(j->fd, buf);
            free(buf);
        }
        close(j->fd);
        memset(j, 0, sizeof *j);
        j->fd = -1;
    } else if (!strncmp(msg, "hello ", 6) && !j->id) {
        on_hello(sv, j, msg);
    } else if (!strncmp(msg, "post ", 5) && j->id) {
        on_post(sv, j, msg);
    } else if (!strncmp(msg, "bye", 3) && j->id) {
        char why[32] = "finished";
        mgr_field(msg, "reason", why, sizeof why);
        drop(sv, j, why);
    }
}

static void on_readable(server *sv, sjob *j)
{
    char msg[8192];
    for (int i = 0; i < 64 && j->fd >= 0; i++) {
        int r = mgr_recv(j->fd, msg, sizeof msg, 0);
        if (r > 0) {
            on_message(sv, j, msg);
            continue;
        }
        if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            drop(sv, j, "died (its connection closed without a goodbye)");
        return;
    }
}

static void accept_all(server *sv)
{
    for (;;) {
        int fd = accept4(sv->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        int slot = -1;
        for (int i = 0; i < MAX_CONN && slot < 0; i++)
            if (sv->job[i].fd < 0) slot = i;
        if (slot < 0) {
            mgr_send(fd, "refused reason=the_manager_has_no_room_for_more_connections");
            close(fd);
            continue;
        }
        memset(&sv->job[slot], 0, sizeof sv->job[slot]);
        sv->job[slot].fd = fd;
        sv->job[slot].t_conn = now_s(sv);
    }
}

/* --devices: the only devices shared, each once, by its name as jobs give it (cuda:N)
 * or its key (cpu:N). */
static vdnn_status fix_devices(server *sv, const char *text)
{
    device_options *list = NULL;
    int n = 0;
    vdnn_status st = device_parse_list("--devices", text, NULL, 1, &list, &n);
    if (st == VDNN_OK && n > MGR_MAX_DEVICES)
        st = vdnn_fail(VDNN_EINVAL, "--devices: %d devices; a manager shares at most %d", n, MGR_MAX_DEVICES);
    for (int k = 0; k < n && st == VDNN_OK; k++) {
        char name[32];
        device_options_name(&list[k], name, sizeof name);
        snprintf(sv->dev[k].name, sizeof sv->dev[k].name, "%s", name);
        if (list[k].kind == DEVICE_CPU) snprintf(sv->dev[k].key, sizeof sv->dev[k].key, "%s", name);
    }
    free(list);
    if (st != VDNN_OK) return st;
    sv->ndev = n;
    sv->fixed = 1;
    return VDNN_OK;
}

vdnn_status mgr_serve(const mgr_opts *o)
{
    server *sv = calloc(1, sizeof *sv);
    if (!sv) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    sv->o = o;
    sv->t0 = vdnn_now_s();
    sv->last_decision = -1e9;
    for (int i = 0; i < MAX_CONN; i++) sv->job[i].fd = -1;
    if (o->devices) {
        vdnn_status st = fix_devices(sv, o->devices);
        if (st != VDNN_OK) {
            free(sv);
            return st;
        }
    }
    vdnn_status st = mgr_listen(o->socket, &sv->lfd);
    if (st != VDNN_OK) {
        free(sv);
        return st;
    }
    sv->nvml = mgr_nvml_open();
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    stop_signal = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    say(sv, "vdnn manager (pid %ld) listening at %s: SD gap %.3g, utilization gap %.3g, %d units, a decision at most "
        "every %.3g s%s%s", (long)getpid(), o->socket, o->rules.sd_gap, o->rules.util_gap, o->rules.units, o->period_s,
        o->observe ? ", observing only" : "", sv->nvml ? ", NVML for GPUs" : "");
    if (o->log) {
        log_head(sv, "start");
        fprintf(o->log, ", \"pid\": %ld, \"unix_time\": %.3f, \"socket\": ", (long)getpid(), (double)time(NULL));
        vdnn_json_str(o->log, o->socket);
        fprintf(o->log, ", \"units\": %d, \"sd_gap\": %.6g, \"util_gap\": %.6g, \"period_s\": %.6g, \"observe\": %s, "
                "\"nvml\": %s", o->rules.units, o->rules.sd_gap, o->rules.util_gap, o->period_s,
                o->observe ? "true" : "false", sv->nvml ? "true" : "false");
        log_end(sv);
    }
    struct pollfd *pf = calloc(MAX_CONN + 1, sizeof *pf);
    int *slot = calloc(MAX_CONN + 1, sizeof *slot);
    if (!pf || !slot) st = vdnn_fail(VDNN_ENOMEM, "out of host memory");
    while (st == VDNN_OK && !stop_signal) {
        int n = 0;
        pf[n++] = (struct pollfd){sv->lfd, POLLIN, 0};
        for (int i = 0; i < MAX_CONN; i++)
            if (sv->job[i].fd >= 0) {
                slot[n] = i;
                pf[n++] = (struct pollfd){sv->job[i].fd, POLLIN, 0};
            }
        int r = poll(pf, (nfds_t)n, 250);
        if (r < 0 && errno != EINTR) st = vdnn_fail(VDNN_EIO, "the manager's poll failed: %s", strerror(errno));
        if (r > 0) {
            if (pf[0].revents) accept_all(sv);
            for (int p = 1; p < n; p++)
                if (pf[p].revents) on_readable(sv, &sv->job[slot[p]]);
        }
        double now = now_s(sv);
        for (int i = 0; i < MAX_CONN; i++)
            if (sv->job[i].fd >= 0 && !sv->job[i].id && now - sv->job[i].t_conn > HELLO_WAIT_S) drop(sv, &sv->job[i], "");
        decide(sv);
        if (o->until_idle && sv->registered_ever && !count_jobs(sv)) break;
    }
    if (stop_signal) say(sv, "stopping (%s)", stop_signal == SIGTERM ? "SIGTERM" : "SIGINT");
    for (int i = 0; i < MAX_CONN; i++)
        if (sv->job[i].fd >= 0) close(sv->job[i].fd);   /* the jobs go on with their DR */
    if (o->log) {
        log_head(sv, "stop");
        fprintf(o->log, ", \"why\": \"%s\"", stop_signal ? "signal" : st == VDNN_OK ? "idle" : "error");
        log_end(sv);
    }
    close(sv->lfd);
    unlink(o->socket);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    mgr_nvml_close(sv->nvml);
    free(pf);
    free(slot);
    free(sv);
    return st;
}

vdnn_status mgr_query_status(const char *socket, int json, FILE *out)
{
    int fd = -1;
    vdnn_status st = mgr_dial(socket, &fd);
    if (st != VDNN_OK) return st;
    char *buf = malloc(MGR_MSG_MAX);
    if (!buf) {
        close(fd);
        return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    }
    int r = mgr_send(fd, json ? "status json" : "status") == 0 ? mgr_recv(fd, buf, MGR_MSG_MAX, 5000) : -1;
    close(fd);
    if (r <= 0) st = vdnn_fail(VDNN_EIO, "the manager at %s did not answer", socket);
    else fputs(buf, out);
    free(buf);
    return st;
}
