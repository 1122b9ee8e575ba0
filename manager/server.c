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
#include "vdnn/device.h"
#include "vdnn/json.h"
#include "vdnn/split.h"

#define MAX_CONN 256
#define HELLO_WAIT_S 10.0
/* the largest share a hello may give (shares are relative weights) */
#define SHARE_MAX 1e9
#define STR_(x) #x
#define STR(x) STR_(x)
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
    double t_conn, t_hello, t_post;
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

struct mgr_server {
    const mgr_opts *o;
    mgr_listener lis;         /* lis.fd -1: driven by mgr_server_add/_message only */
    double t0, last_decision;
    int ndev, fixed;
    sdev dev[MGR_MAX_DEVICES];
    sjob job[MAX_CONN];
    int next_id, registered_ever;
    mgr_nvml *nvml;
};
typedef mgr_server server;

static volatile sig_atomic_t stop_signal;
static void on_signal(int sig) { stop_signal = sig; }

static double now_s(const server *sv) { return vdnn_now_s() - sv->t0; }

/* ---- output ---- */

/* Every device's utilization, 0..1. */
static json_t *json_utils(const server *sv)
{
    json_t *a = json_array();
    for (int k = 0; a && k < sv->ndev; k++) json_array_append_new(a, vdnn_json_fixed(sv->dev[k].util, 4));
    return a;
}

/* A record of the log (JSON lines, docs/manager.md): {"t", "event"} and the fields that
 * log_job and log_add give it, written by log_end; NULL without a log. */
static json_t *log_head(server *sv, const char *event)
{
    if (!sv->o->log) return NULL;
    return json_pack("{s:o, s:s}", "t", vdnn_json_fixed(now_s(sv), 4), "event", event);
}

static void log_job(json_t *rec, const sjob *j)
{
    if (rec) json_object_update_new(rec, json_pack("{s:i, s:I, s:o}", "job", j->id, "pid", (json_int_t)j->pid, "name",
                                                   vdnn_json_text(j->name)));
}

/* Adds the fields of `fields` (taken) to rec. */
static void log_add(json_t *rec, json_t *fields)
{
    if (rec && fields) json_object_update(rec, fields);
    json_decref(fields);
}

static void log_end(server *sv, json_t *rec)
{
    if (!rec) return;
    vdnn_json_line(sv->o->log, rec);
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

static int dev_free(const sdev *d) { return !d->name[0]; }

/* The machine's index of a device by key or name; added when the list is not fixed
 * (in the first free entry: those of devices no job uses any more are freed). -1 when
 * it is not shared here, -2 when the table is full. */
static int device_index(server *sv, const char *key, const char *name)
{
    int free_k = -1;
    for (int k = 0; k < sv->ndev; k++) {
        if (dev_free(&sv->dev[k])) {
            if (free_k < 0) free_k = k;
            continue;
        }
        if (!strcmp(sv->dev[k].key, key) || (!sv->dev[k].key[0] && !strcmp(sv->dev[k].name, name))) {
            if (!sv->dev[k].key[0]) snprintf(sv->dev[k].key, sizeof sv->dev[k].key, "%s", key);
            return k;
        }
    }
    if (sv->fixed) return -1;
    if (free_k < 0 && sv->ndev == MGR_MAX_DEVICES) return -2;
    int k = free_k >= 0 ? free_k : sv->ndev++;
    sdev *d = &sv->dev[k];
    memset(d, 0, sizeof *d);
    snprintf(d->key, sizeof d->key, "%s", key);
    snprintf(d->name, sizeof d->name, "%s", name);
    return k;
}

/* Frees the devices no registered job uses, unless --devices fixed the list: else a
 * job could fill the table with invented devices, and every later job be refused. */
static void release_devices(server *sv)
{
    if (sv->fixed) return;
    unsigned char used[MGR_MAX_DEVICES] = {0};
    for (int i = 0; i < MAX_CONN; i++)
        if (sv->job[i].fd >= 0 && sv->job[i].id)
            for (int d = 0; d < sv->job[i].ndev; d++) used[sv->job[i].dev[d]] = 1;
    for (int k = 0; k < sv->ndev; k++)
        if (!used[k]) memset(&sv->dev[k], 0, sizeof sv->dev[k]);
    while (sv->ndev > 0 && dev_free(&sv->dev[sv->ndev - 1])) sv->ndev--;
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

/* A job's words (its name, its devices' names) with control characters made '?': they
 * go to terminals (the manager's output, --status). */
static void clean_word(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

static void drop(server *sv, sjob *j, const char *reason)
{
    if (j->id) {
        char text[300];
        say(sv, "job %d (pid %ld, %s) left: %s", j->id, j->pid, j->name, mgr_text_escape(reason, text, sizeof text));
        json_t *rec = log_head(sv, "leave");
        log_job(rec, j);
        if (rec)
            log_add(rec, json_pack("{s:o, s:I, s:I, s:o}", "reason", vdnn_json_text(reason), "step",
                                   (json_int_t)j->step, "steps", (json_int_t)j->steps, "sd", vdnn_json_real(j->sd, 6)));
        log_end(sv, rec);
    }
    int was_job = j->id != 0;
    close(j->fd);
    memset(j, 0, sizeof *j);
    j->fd = -1;
    release_devices(sv);
    if (was_job) forget_moves(sv);
}

/* Sends "refused reason=WHY" (spaces as '_': a field is one word), so that the job or
 * --status prints why, and closes the connection. */
static void send_refusal(int fd, const char *why)
{
    char msg[1024];
    snprintf(msg, sizeof msg, "refused reason=%s", why);
    for (char *p = msg + 15; *p; p++)
        if (*p == ' ' || *p == '\n') *p = '_';
    mgr_send(fd, msg);
}

static void refuse(server *sv, sjob *j, const char *why)
{
    send_refusal(j->fd, why);
    if (!j->id) say(sv, "refused a job (pid %ld): %s", j->pid, why);
    char reason[1100];
    snprintf(reason, sizeof reason, "refused: %s", why);
    drop(sv, j, reason);
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

/* The hello's devices into j->dev (the machine's indices): 0, or -1 once refused. */
static int hello_devices(server *sv, sjob *j, char (*names)[64], char (*keys)[64], int n)
{
    char why[512];
    for (int d = 0; d < n; d++) {
        clean_word(names[d]);
        int k = device_index(sv, keys[d], names[d]);
        if (k == -2)
            snprintf(why, sizeof why, "the manager already shares %d devices, its most: %s is one too many",
                     MGR_MAX_DEVICES, names[d]);
        else if (k < 0)
            snprintf(why, sizeof why, "%s is not one of the devices this manager shares", names[d]);
        for (int e = 0; e < d && k >= 0; e++)
            if (j->dev[e] == k) {
                snprintf(why, sizeof why, "%s is given twice", names[d]);
                k = -1;
            }
        if (k < 0) {
            refuse(sv, j, why);
            return -1;
        }
        j->dev[d] = k;
    }
    j->ndev = n;
    return 0;
}

/* The hello's shares into DR units: 0, or -1 once refused. */
static int hello_shares(server *sv, sjob *j, const double *w, int n)
{
    double total = 0;
    char why[256];
    for (int d = 0; d < n; d++) {
        if (!(w[d] >= 0 && w[d] <= SHARE_MAX)) {
            snprintf(why, sizeof why, "share %d (%g) is not a number from 0 to %g", d + 1, w[d], SHARE_MAX);
            refuse(sv, j, why);
            return -1;
        }
        total += w[d];
    }
    if (!(total > 0)) {
        refuse(sv, j, "every share is 0");
        return -1;
    }
    int units[MGR_MAX_DEVICES];
    dp_split(sv->o->rules.units, w, NULL, n, units);
    for (int d = 0; d < n; d++) j->dr[j->dev[d]] = units[d];
    return 0;
}

static void log_register(server *sv, const sjob *j)
{
    char devs[512], dr[256];
    dev_text(sv, j, devs, sizeof devs);
    dr_text(j, j->dr, dr, sizeof dr);
    say(sv, "job %d (pid %ld, %s) registered on %s with DR %s", j->id, j->pid, j->name, devs, dr);
    json_t *rec = log_head(sv, "register");
    if (!rec) return;
    log_job(rec, j);
    json_t *names = json_array();
    for (int d = 0; names && d < j->ndev; d++) json_array_append_new(names, vdnn_json_text(sv->dev[j->dev[d]].name));
    log_add(rec, json_pack("{s:o, s:o}", "devices", names, "dr", vdnn_json_ints(j->dr, sv->ndev)));
    log_end(sv, rec);
}

static void on_hello(server *sv, sjob *j, const char *msg)
{
    char names_text[2048] = "", keys_text[4096] = "", dr_text_[1024] = "";
    char names[MGR_MAX_DEVICES][64], keys[MGR_MAX_DEVICES][64];
    double w[MGR_MAX_DEVICES], pid = 0;
    if (mgr_field_range(msg, "pid", 1, 4194304, &pid) != 1) {
        refuse(sv, j, "its hello has no pid=P (a process id)");
        return;
    }
    j->pid = (long)pid;
    if (!mgr_field(msg, "name", j->name, sizeof j->name)) snprintf(j->name, sizeof j->name, "?");
    clean_word(j->name);
    int n = mgr_field(msg, "devices", names_text, sizeof names_text) ? split_words(names_text, names, MGR_MAX_DEVICES) : -1;
    int nk = mgr_field(msg, "keys", keys_text, sizeof keys_text) ? split_words(keys_text, keys, MGR_MAX_DEVICES) : -1;
    int nw = mgr_field(msg, "dr", dr_text_, sizeof dr_text_) ? mgr_parse_list(dr_text_, w, MGR_MAX_DEVICES) : -1;
    if (n < 1 || nk != n || nw != n) {
        refuse(sv, j, "its hello names no devices, or not one key and one share for each");
        return;
    }
    if (hello_devices(sv, j, names, keys, n) != 0 || hello_shares(sv, j, w, n) != 0) return;
    forget_moves(sv);
    j->id = ++sv->next_id;
    j->t_hello = now_s(sv);
    sv->registered_ever = 1;
    char reply[128];
    snprintf(reply, sizeof reply, "welcome id=%d units=%d", j->id, sv->o->rules.units);
    mgr_send(j->fd, reply);
    log_register(sv, j);
}

/* A post's numbers, each range-checked: a message that cannot come from a job is
 * refused rather than fed to the rules (or cast past what an int holds). */
static const struct post_number {
    const char *key;
    double hi;
} post_numbers[] = {
    {"sd", 1e9}, {"iter_ms", 1e12}, {"solo_ms", 1e12}, {"step", 1e15}, {"steps", 1e15}, {"done", 1e15},
    {"epoch", 1e9}, {"epochs", 1e9}, {"fresh", 1}, {"window_s", 1e9},
};
enum { P_SD, P_ITER, P_SOLO, P_STEP, P_STEPS, P_DONE, P_EPOCH, P_EPOCHS, P_FRESH, P_WINDOW, P_COUNT };

/* A list field of the job's ndev numbers, each within [0, hi]: 1 read, 0 absent, -1 bad. */
static int post_list(const sjob *j, const char *msg, const char *key, double hi, double *out)
{
    char text[1024];
    if (!mgr_has_field(msg, key)) return 0;
    if (!mgr_field(msg, key, text, sizeof text)) return -1;
    if (mgr_parse_list(text, out, MGR_MAX_DEVICES) != j->ndev) return -1;
    for (int d = 0; d < j->ndev; d++)
        if (!(out[d] >= 0 && out[d] <= hi)) return -1;
    return 1;
}

/* Reads the post's fields into v (set[] says which were there): 0, or -1 once refused. */
static int post_read(server *sv, sjob *j, const char *msg, double *v, int *set, double *busy, double *dr)
{
    char why[256];
    for (int p = 0; p < P_COUNT; p++) {
        set[p] = mgr_field_range(msg, post_numbers[p].key, 0, post_numbers[p].hi, &v[p]);
        if (set[p] < 0) {
            snprintf(why, sizeof why, "its post's %s is not a number from 0 to %g", post_numbers[p].key,
                     post_numbers[p].hi);
            refuse(sv, j, why);
            return -1;
        }
    }
    set[P_COUNT] = post_list(j, msg, "busy", 1e9, busy);
    set[P_COUNT + 1] = post_list(j, msg, "dr", sv->o->rules.units, dr);
    int total = 0;
    for (int d = 0; set[P_COUNT + 1] > 0 && d < j->ndev; d++) {
        if (dr[d] != floor(dr[d])) set[P_COUNT + 1] = -1;
        total += (int)dr[d];
    }
    if (set[P_COUNT + 1] > 0 && total != sv->o->rules.units) set[P_COUNT + 1] = -1;
    if (set[P_COUNT] < 0 || set[P_COUNT + 1] < 0) {
        snprintf(why, sizeof why, set[P_COUNT] < 0 ? "its post's busy is not %d numbers from 0 to 1e9"
                                                   : "its post's dr is not %d whole numbers adding up to %d units",
                 j->ndev, sv->o->rules.units);
        refuse(sv, j, why);
        return -1;
    }
    return 0;
}

static void on_post(server *sv, sjob *j, const char *msg)
{
    double v[P_COUNT] = {0}, busy[MGR_MAX_DEVICES], dr[MGR_MAX_DEVICES];
    int set[P_COUNT + 2];
    if (post_read(sv, j, msg, v, set, busy, dr) != 0) return;
    if (set[P_SD]) j->sd = v[P_SD];
    if (set[P_ITER]) j->iter_ms = v[P_ITER];
    if (set[P_SOLO]) j->solo_ms = v[P_SOLO];
    if (set[P_STEP]) j->step = (long long)v[P_STEP];
    if (set[P_STEPS]) j->steps = (long long)v[P_STEPS];
    if (set[P_DONE]) j->done = (long long)v[P_DONE];
    if (set[P_EPOCH]) j->epoch = (int)v[P_EPOCH];
    if (set[P_EPOCHS]) j->epochs = (int)v[P_EPOCHS];
    double fresh = v[P_FRESH], window = v[P_WINDOW];
    if (set[P_COUNT] > 0 && window > 0) {
        memset(j->rate, 0, sizeof j->rate);
        for (int d = 0; d < j->ndev; d++) j->rate[j->dev[d]] = busy[d] / window;
    }
    if (set[P_COUNT + 1] > 0) {
        memset(j->dr, 0, sizeof j->dr);
        for (int d = 0; d < j->ndev; d++) j->dr[j->dev[d]] = (int)dr[d];
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
    json_t *rec = log_head(sv, "post");
    if (!rec) return;
    log_job(rec, j);
    log_add(rec, json_pack("{s:o, s:o, s:i, s:i, s:I, s:I, s:o, s:o, s:i, s:o}", "sd", vdnn_json_real(j->sd, 6), "dr",
                           vdnn_json_ints(j->dr, sv->ndev), "epoch", j->epoch, "epochs", j->epochs, "step",
                           (json_int_t)j->step, "steps", (json_int_t)j->steps, "iter_ms", vdnn_json_real(j->iter_ms, 6),
                           "solo_ms", vdnn_json_real(j->solo_ms, 6), "fresh", fresh > 0, "util", json_utils(sv)));
    log_end(sv, rec);
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
    json_t *rec = log_head(sv, "hold");
    if (!rec) return;
    log_job(rec, j);
    log_add(rec, json_pack("{s:o, s:o, s:o}", "gap", vdnn_json_real(dec->gap, 6), "sd", vdnn_json_real(j->sd, 6), "dr",
                           vdnn_json_ints(j->dr, sv->ndev)));
    log_end(sv, rec);
}

/* The jobs settled since the last decision, into idx (their slots); -1 when a job is
 * still starting or has not posted since: no decision yet. */
static int settled_jobs(server *sv, double now, int idx[MAX_CONN])
{
    int n = 0;
    for (int i = 0; i < MAX_CONN; i++) {
        sjob *j = &sv->job[i];
        /* a job still starting (its first window holds the start-up) counts in every rule
         * (rule 1 counts jobs): wait for its second post, unless it has gone quiet */
        double seen = j->t_post > j->t_conn ? j->t_post : j->t_conn;
        if (j->fd >= 0 && j->id && j->posts < 2 && now - seen < sv->o->stale_s) return -1;
        if (!live(sv, j, now) || j->posts < 2) continue;
        if (j->pending || j->t_post <= sv->last_decision) return -1;   /* not settled since the last decision */
        idx[n++] = i;
    }
    return n;
}

/* What the rules see of job j. */
static void view_of(const server *sv, const sjob *j, mgr_view *v)
{
    v->sd = j->sd;
    memcpy(v->dr, j->dr, sizeof v->dr);
    memcpy(v->last_move, j->last_move, sizeof v->last_move);
    v->last_slower = j->iter_ms > j->iter_before;   /* iter_ms is the new DR's by now */
    for (int k = 0; k < sv->ndev; k++) v->own[k] = j->rate[k];
    for (int d = 0; d < j->ndev; d++) v->allowed[j->dev[d]] = 1;
}

static void log_change(server *sv, const sjob *j, const mgr_decision *dec, const mgr_change *ch, const int *idx,
                       const mgr_view *views, int n)
{
    json_t *rec = log_head(sv, "decision");
    if (!rec) return;
    log_job(rec, j);
    log_add(rec, json_pack("{s:s, s:o, s:o, s:o, s:o}", "rule", mgr_rule_name(dec->rule), "gap",
                           vdnn_json_real(dec->gap, 6), "sd", vdnn_json_real(j->sd, 6), "from",
                           vdnn_json_ints(j->dr, sv->ndev), "to", vdnn_json_ints(ch->dr, sv->ndev)));
    if (ch->moved)
        log_add(rec, json_pack("{s:i, s:o, s:o}", "moved", ch->moved, "from_device",
                               vdnn_json_text(sv->dev[ch->from].name), "to_device",
                               vdnn_json_text(sv->dev[ch->to].name)));
    json_t *sds = json_object();
    for (int a = 0; sds && a < n; a++) {
        char id[16];
        snprintf(id, sizeof id, "%d", sv->job[idx[a]].id);
        json_object_set_new(sds, id, vdnn_json_real(views[a].sd, 6));
    }
    log_add(rec, json_pack("{s:o, s:o}", "sds", sds, "util", json_utils(sv)));
    log_end(sv, rec);
}

/* Sends job j its new DR; 0 when it is gone (its close drops it). */
static int send_change(server *sv, sjob *j, const mgr_decision *dec, const mgr_change *ch)
{
    char to[256], from[256], msg[300];
    dr_text(j, ch->dr, to, sizeof to);
    dr_text(j, j->dr, from, sizeof from);
    snprintf(msg, sizeof msg, "dr %s", to);
    if (mgr_send(j->fd, msg) != 0) return 0;
    j->pending = 1;
    j->posts_since_sent = 0;
    memcpy(j->sent, ch->dr, sizeof j->sent);
    for (int k = 0; k < MGR_MAX_DEVICES; k++) j->last_move[k] = ch->dr[k] - j->dr[k];
    j->iter_before = j->iter_ms;
    j->hold_logged = 0;
    say(sv, "job %d (SD %.2f, largest gap %.2f): DR %s -> %s by the %s rule", j->id, j->sd, dec->gap, from, to,
        mgr_rule_name(dec->rule));
    return 1;
}

static void decide(server *sv)
{
    double now = now_s(sv);
    if (sv->o->observe || now - sv->last_decision < sv->o->period_s) return;
    int idx[MAX_CONN];
    int n = settled_jobs(sv, now, idx);
    if (n <= 0) return;
    mgr_view *views = calloc((size_t)n, sizeof *views);
    if (!views) return;
    for (int a = 0; a < n; a++) view_of(sv, &sv->job[idx[a]], &views[a]);
    double util[MGR_MAX_DEVICES];
    update_util(sv);
    for (int k = 0; k < sv->ndev; k++) util[k] = sv->dev[k].util;
    mgr_decision dec;
    mgr_decide(views, n, util, sv->ndev, &sv->o->rules, &dec);
    if (dec.held >= 0) log_hold(sv, &sv->job[idx[dec.held]], &dec);
    for (int c = 0; c < dec.nchanges; c++) {
        const mgr_change *ch = &dec.change[c];
        sjob *j = &sv->job[idx[ch->job]];
        if (!send_change(sv, j, &dec, ch)) continue;
        if (sv->o->log) log_change(sv, j, &dec, ch, idx, views, n);
    }
    if (dec.nchanges) sv->last_decision = now;
    free(views);
}

/* ---- status ---- */

static int count_jobs(const server *sv)
{
    int n = 0;
    for (int i = 0; i < MAX_CONN; i++) n += sv->job[i].fd >= 0 && sv->job[i].id;
    return n;
}

#define PUT(...) (*k += *k < len ? (size_t)snprintf(buf + *k, len - *k, __VA_ARGS__) : 0)

static void status_head(server *sv, char *buf, size_t len, size_t *k)
{
    char sock[1600], name[200];
    double now = now_s(sv);
    int jobs = count_jobs(sv), devs = 0;
    for (int d = 0; d < sv->ndev; d++) devs += !dev_free(&sv->dev[d]);
    PUT("vdnn manager (pid %ld) at %s: up %.0f s, %d job%s, %d device%s%s\n", (long)getpid(),
        mgr_text_escape(sv->o->socket, sock, sizeof sock), now, jobs, jobs == 1 ? "" : "s", devs, devs == 1 ? "" : "s",
        sv->o->observe ? ", observing (no DR changes)" : "");
    PUT("%-8s %6s\n", "device", "util");
    for (int d = 0; d < sv->ndev; d++)
        if (!dev_free(&sv->dev[d]))
            PUT("%-8s %5.0f%%\n", mgr_text_escape(sv->dev[d].name, name, sizeof name), 100 * sv->dev[d].util);
    PUT("%-4s %-8s %6s %-10s %-14s %9s %7s %-13s %s\n", "job", "pid", "SD", "DR", "devices", "iter ms", "epoch", "step",
        "name");
}

static void status_job(server *sv, const sjob *j, char *buf, size_t len, size_t *k)
{
    char dr[256], devs[512], ep[32], st[48], name[1600], dev[200];
    dr_text(j, j->dr, dr, sizeof dr);
    const char *state = !j->posts ? "starting" : live(sv, j, now_s(sv)) ? "" : "stale";
    dev_text(sv, j, devs, sizeof devs);
    snprintf(ep, sizeof ep, "%d/%d", j->epoch, j->epochs);
    snprintf(st, sizeof st, "%lld/%lld", j->done, j->steps);
    PUT("%-4d %-8ld %6.2f %-10s %-14s %9.1f %7s %-13s %s%s%s\n", j->id, j->pid, j->sd, dr,
        mgr_text_escape(devs, dev, sizeof dev), j->iter_ms, ep, st, mgr_text_escape(j->name, name, sizeof name),
        *state ? " " : "", state);
}

#undef PUT

/* The status as a table; a status too long for buf is cut short and says so. */
static void status_text(server *sv, char *buf, size_t len)
{
    size_t k = 0;
    update_util(sv);
    status_head(sv, buf, len, &k);
    for (int i = 0; i < MAX_CONN; i++) {
        const sjob *j = &sv->job[i];
        if (j->fd < 0 || !j->id) continue;
        status_job(sv, j, buf, len, &k);
    }
    if (k >= len) snprintf(buf + len - 16, 16, "\n(truncated)\n");
}

/* A job as the status's JSON shows it: its DR and devices in its own order. */
static json_t *status_json_job(server *sv, const sjob *j)
{
    const char *state = !j->posts ? "starting" : live(sv, j, now_s(sv)) ? "running" : "stale";
    int dr[MGR_MAX_DEVICES];
    json_t *devs = json_array();
    for (int d = 0; d < j->ndev; d++) {
        dr[d] = j->dr[j->dev[d]];
        if (devs) json_array_append_new(devs, vdnn_json_text(sv->dev[j->dev[d]].name));
    }
    return json_pack("{s:i, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:i, s:i, s:I, s:I, s:s}", "id", j->id, "pid",
                     (json_int_t)j->pid, "name", vdnn_json_text(j->name), "sd", vdnn_json_real(j->sd, 6), "dr",
                     vdnn_json_ints(dr, j->ndev), "devices", devs, "iter_ms", vdnn_json_real(j->iter_ms, 6),
                     "solo_ms", vdnn_json_real(j->solo_ms, 6), "epoch", j->epoch, "epochs", j->epochs, "step",
                     (json_int_t)j->step, "steps", (json_int_t)j->steps, "state", state);
}

/* The status as one JSON object and a new line in buf (len bytes). The jobs that do
 * not fit are left out, and it says so: "truncated": true, and "jobs_total", how many
 * jobs there are. */
static void status_json_text(server *sv, char *buf, size_t len)
{
    update_util(sv);
    json_t *devs = json_array(), *jobs = json_array();
    for (int d = 0; devs && d < sv->ndev; d++)
        if (!dev_free(&sv->dev[d]))
            json_array_append_new(devs, json_pack("{s:o, s:o, s:o}", "name", vdnn_json_text(sv->dev[d].name), "key",
                                                  vdnn_json_text(sv->dev[d].key), "util",
                                                  vdnn_json_fixed(sv->dev[d].util, 4)));
    json_t *root = json_pack("{s:I, s:o, s:o, s:b, s:o, s:O}", "pid", (json_int_t)getpid(), "socket",
                             vdnn_json_text(sv->o->socket), "uptime_s", vdnn_json_fixed(now_s(sv), 3), "observe",
                             sv->o->observe != 0, "devices", devs, "jobs", jobs);
    /* room for the new line, the NUL and the truncation's fields */
    size_t used = json_dumpb(root, NULL, 0, VDNN_JSON_LINE_FLAGS) + 64, total = 0;
    int full = !root;
    for (int i = 0; i < MAX_CONN; i++) {
        if (sv->job[i].fd < 0 || !sv->job[i].id) continue;
        total++;
        json_t *job = full ? NULL : status_json_job(sv, &sv->job[i]);
        size_t bytes = json_dumpb(job, NULL, 0, VDNN_JSON_LINE_FLAGS) + 2;   /* and ", " */
        full = full || !job || used + bytes > len;
        if (!full && json_array_append(jobs, job) == 0) used += bytes;
        json_decref(job);
    }
    if (root && total > json_array_size(jobs))
        json_object_update_new(root, json_pack("{s:b, s:I}", "truncated", 1, "jobs_total", (json_int_t)total));
    size_t n = json_dumpb(root, buf, len - 2, VDNN_JSON_LINE_FLAGS);
    json_decref(root);
    json_decref(jobs);
    if (n && n <= len - 2) memcpy(buf + n, "\n", 2);
    else snprintf(buf, len, "{\"truncated\": true, \"error\": \"the status could not be written\"}\n");
}

/* ---- the loop ---- */

void mgr_server_message(mgr_server *sv, int slot, const char *msg)
{
    if (slot < 0 || slot >= MAX_CONN || sv->job[slot].fd < 0) return;
    sjob *j = &sv->job[slot];
    if (!strncmp(msg, "status", 6)) {
        char *buf = malloc(MGR_MSG_MAX);
        if (buf) {
            if (strstr(msg, "json")) status_json_text(sv, buf, MGR_MSG_MAX);
            else status_text(sv, buf, MGR_MSG_MAX);
            mgr_send(j->fd, buf);
            free(buf);
        }
        drop(sv, j, "asked for the status");
    } else if (!strncmp(msg, "hello ", 6) && !j->id) {
        on_hello(sv, j, msg);
    } else if (!strncmp(msg, "post ", 5) && j->id) {
        on_post(sv, j, msg);
    } else if (!strncmp(msg, "bye", 3) && j->id) {
        char why[32] = "finished";
        mgr_field(msg, "reason", why, sizeof why);
        clean_word(why);
        drop(sv, j, why);
    }
}

static void on_readable(server *sv, int slot)
{
    char msg[8192];
    sjob *j = &sv->job[slot];
    for (int i = 0; i < 64 && j->fd >= 0; i++) {
        int r = mgr_recv(j->fd, msg, sizeof msg, 0);
        if (r > 0) {
            mgr_server_message(sv, slot, msg);
            continue;
        }
        if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
            drop(sv, j, "died (its connection closed without a goodbye)");
        return;
    }
}

int mgr_server_add(mgr_server *sv, int fd)
{
    int slot = -1;
    for (int i = 0; i < MAX_CONN && slot < 0; i++)
        if (sv->job[i].fd < 0) slot = i;
    if (slot < 0) {
        send_refusal(fd, "the manager has no room for more connections (it serves " STR(MAX_CONN) " at once)");
        close(fd);
        return -1;
    }
    memset(&sv->job[slot], 0, sizeof sv->job[slot]);
    sv->job[slot].fd = fd;
    sv->job[slot].t_conn = now_s(sv);
    return slot;
}

/* Connections from processes of other users are refused at once (SO_PEERCRED): the
 * folder's mode should keep them out, and this holds even where it does not. */
static void accept_all(server *sv)
{
    for (;;) {
        int fd = accept4(sv->lis.fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        if (mgr_check_peer(fd, sv->o->socket) != VDNN_OK) {
            say(sv, "refused a connection: %s", vdnn_errmsg());
            send_refusal(fd, "this manager serves its own user's jobs only");
            close(fd);
            continue;
        }
        mgr_server_add(sv, fd);
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
        device_options_identity(&list[k], sv->dev[k].key, sizeof sv->dev[k].key);
    }
    free(list);
    if (st != VDNN_OK) return st;
    sv->ndev = n;
    sv->fixed = 1;
    return VDNN_OK;
}

void mgr_server_tick(mgr_server *sv)
{
    double now = now_s(sv);
    char why[128];
    for (int i = 0; i < MAX_CONN; i++) {
        sjob *j = &sv->job[i];
        if (j->fd < 0) continue;
        if (!j->id && now - j->t_conn > HELLO_WAIT_S) drop(sv, j, "");
        else if (j->id && !j->posts && now - j->t_hello > sv->o->stale_s) {
            snprintf(why, sizeof why, "it has not posted in the %.3g s (--stale) since its hello", sv->o->stale_s);
            refuse(sv, j, why);
        }
    }
    decide(sv);
}

vdnn_status mgr_server_new(const mgr_opts *o, mgr_server **out)
{
    *out = NULL;
    server *sv = calloc(1, sizeof *sv);
    if (!sv) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    sv->o = o;
    sv->t0 = vdnn_now_s();
    sv->last_decision = -1e9;
    sv->lis.fd = sv->lis.lock_fd = -1;
    for (int i = 0; i < MAX_CONN; i++) sv->job[i].fd = -1;
    vdnn_status st = o->devices && *o->devices ? fix_devices(sv, o->devices) : VDNN_OK;
    if (st != VDNN_OK) {
        free(sv);
        return st;
    }
    *out = sv;
    return VDNN_OK;
}

void mgr_server_free(mgr_server *sv)
{
    if (!sv) return;
    for (int i = 0; i < MAX_CONN; i++)
        if (sv->job[i].fd >= 0) close(sv->job[i].fd);   /* the jobs go on with their DR */
    mgr_nvml_close(sv->nvml);
    free(sv);
}

static void log_start(server *sv)
{
    const mgr_opts *o = sv->o;
    say(sv, "vdnn manager (pid %ld) listening at %s: SD gap %.3g, utilization gap %.3g, %d units, a decision at most "
        "every %.3g s%s%s", (long)getpid(), o->socket, o->rules.sd_gap, o->rules.util_gap, o->rules.units, o->period_s,
        o->observe ? ", observing only" : "", sv->nvml ? ", NVML for GPUs" : "");
    json_t *rec = log_head(sv, "start");
    log_add(rec, json_pack("{s:I, s:o, s:o, s:i, s:o, s:o, s:o, s:b, s:b}", "pid", (json_int_t)getpid(), "unix_time",
                           vdnn_json_fixed((double)time(NULL), 3), "socket", vdnn_json_text(o->socket), "units",
                           o->rules.units, "sd_gap", vdnn_json_real(o->rules.sd_gap, 6), "util_gap",
                           vdnn_json_real(o->rules.util_gap, 6), "period_s", vdnn_json_real(o->period_s, 6), "observe",
                           o->observe != 0, "nvml", sv->nvml != NULL));
    log_end(sv, rec);
}

static vdnn_status serve_loop(server *sv)
{
    struct pollfd pf[MAX_CONN + 1];
    int slot[MAX_CONN + 1];
    vdnn_status st = VDNN_OK;
    while (st == VDNN_OK && !stop_signal) {
        int n = 0;
        pf[n++] = (struct pollfd){sv->lis.fd, POLLIN, 0};
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
                if (pf[p].revents) on_readable(sv, slot[p]);
        }
        mgr_server_tick(sv);
        if (sv->o->until_idle && sv->registered_ever && !count_jobs(sv)) break;
    }
    return st;
}

vdnn_status mgr_serve(const mgr_opts *o)
{
    server *sv = NULL;
    vdnn_status st = mgr_server_new(o, &sv);
    if (st != VDNN_OK) return st;
    if ((st = mgr_listen(o->socket, &sv->lis)) != VDNN_OK) {
        mgr_server_free(sv);
        return st;
    }
    sv->nvml = mgr_nvml_open();
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term;
    sigemptyset(&sa.sa_mask);
    stop_signal = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    log_start(sv);
    st = serve_loop(sv);
    if (stop_signal) say(sv, "stopping (%s)", stop_signal == SIGTERM ? "SIGTERM" : "SIGINT");
    json_t *rec = log_head(sv, "stop");
    log_add(rec, json_pack("{s:s}", "why", stop_signal ? "signal" : st == VDNN_OK ? "idle" : "error"));
    log_end(sv, rec);
    mgr_unlisten(o->socket, &sv->lis);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    mgr_server_free(sv);
    return st;
}

vdnn_status mgr_query_status(const char *socket, int json, FILE *out)
{
    int fd = -1;
    vdnn_status st = mgr_dial(socket, &fd);
    if (st != VDNN_OK) return st;
    /* what it prints is escaped (4 bytes at most for 1): it cannot drive the terminal */
    char *buf = malloc(MGR_MSG_MAX), *text = malloc(4 * MGR_MSG_MAX), why[1024];
    if (!buf || !text) {
        free(buf);
        free(text);
        close(fd);
        return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    }
    int r = mgr_request(fd, json ? "status json" : "status", buf, MGR_MSG_MAX, 5000);
    close(fd);
    if (r <= 0) st = vdnn_fail(VDNN_EIO, "the manager at %s did not answer", socket);
    else if (mgr_refusal(buf, why, sizeof why))
        st = vdnn_fail(VDNN_EIO, "the manager at %s refused to answer: %s", socket,
                       mgr_text_escape(why, text, 4 * MGR_MSG_MAX));
    else fputs(mgr_text_escape(buf, text, 4 * MGR_MSG_MAX), out);
    free(buf);
    free(text);
    return st;
}
