/* A training job's side of the slow-down manager (see client.h). */
#include "manager/client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "manager/proto.h"
#include "manager/rules.h"
#include "vdnn/json.h"

#define DEFAULT_EVERY 5
#define WELCOME_WAIT_MS 10000
#define MAX_WINDOW 256

struct mgr_client {
    int fd;                   /* -1 once the manager is gone */
    char socket[256];
    dp_group *g;
    int every, quiet, ndev, units, id;
    int dr[MGR_MAX_DEVICES];  /* units per device of the job */
    uint64_t applied;         /* the step from which dr holds */
    double t_start, t_window; /* registration; the window's start */
    uint64_t window_first;    /* the first step of the window */
    int window_steps;
    double busy[MGR_MAX_DEVICES];   /* the window's work on each device */
    double work[MAX_WINDOW];        /* the window's steps' work on all devices */
    double iter_sum;          /* wall time of the steps since dr or the epoch changed */
    int iter_n, epoch;
    double last_iter_s;       /* the last window's mean step */
    double solo_step_s;       /* the least window median of a step's work; 0: none yet */
};

/* The job's DR in units: its weights, largest remainders. */
static void weights_to_units(const double *w, int n, int units, int *out)
{
    dp_split(units, w, NULL, n, out);
}

static void list_ints(char *buf, size_t len, const int *v, int n)
{
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < n && k < len; i++) k += (size_t)snprintf(buf + k, len - k, "%s%d", i ? "," : "", v[i]);
}

/* The manager stopped answering: the job goes on with its DR. */
static void lost(mgr_client *c, const train_tick *t, const char *why)
{
    if (c->fd < 0) return;
    close(c->fd);
    c->fd = -1;
    char dr[256];
    list_ints(dr, sizeof dr, c->dr, c->ndev);
    if (!c->quiet) {
        fprintf(stderr, "vdnn: warning: the manager at %s %s before step %llu; training goes on with DR %s\n",
                c->socket, why, (unsigned long long)t->next, dr);
        fflush(stderr);
    }
    if (t->log) {
        vdnn_json_line(t->log, json_pack("{s:s, s:I, s:o, s:o}", "manager", "lost", "step", (json_int_t)t->next, "why",
                                         vdnn_json_text(why), "dr", vdnn_json_ints(c->dr, c->ndev)));
        fflush(t->log);
    }
}

/* The job's devices as the manager names them: `names` (their descriptions' first
 * words) and `keys` (device_identity), comma-separated. */
static vdnn_status device_lists(dp_group *g, int n, char *names, size_t nlen, char *keys, size_t klen)
{
    size_t ln = 0, lk = 0;
    for (int k = 0; k < n; k++) {
        device *d = dp_device(g, k);
        const char *key = device_identity(d);
        if (!*key)
            return vdnn_fail(VDNN_EINVAL, "--managed: device %d (%s) has no name the manager can share: give "
                             "--devices as cpu:N (emulated devices, a core each) or cuda:N", k, device_describe(d));
        const char *desc = device_describe(d);
        ln += (size_t)snprintf(names + ln, nlen - ln, "%s%.*s", k ? "," : "", (int)strcspn(desc, " "), desc);
        lk += (size_t)snprintf(keys + lk, klen - lk, "%s%s", k ? "," : "", key);
    }
    return VDNN_OK;
}

/* Says hello on c->fd and reads the welcome (c->id, c->units), or the refusal. */
static vdnn_status greet(mgr_client *c, const char *socket, const char *name, const char *names, const char *keys)
{
    char msg[4096], weights[1024] = "";
    size_t lw = 0;
    for (int k = 0; k < c->ndev; k++)
        lw += (size_t)snprintf(weights + lw, sizeof weights - lw, "%s%.9g", k ? "," : "", dp_weights(c->g)[k]);
    char safe[512];
    snprintf(safe, sizeof safe, "%s", name);
    for (char *p = safe; *p; p++)
        if (*p == ' ' || *p == '\n' || *p == '=') *p = '_';
    snprintf(msg, sizeof msg, "hello pid=%ld name=%s devices=%s keys=%s dr=%s", (long)getpid(), safe, names, keys,
             weights);
    int got = mgr_request(c->fd, msg, msg, sizeof msg, WELCOME_WAIT_MS);
    char why[1024], shown[4096];
    if (got > 0 && mgr_refusal(msg, why, sizeof why))
        return vdnn_fail(VDNN_EINVAL, "--managed: the manager at %s refused this job: %s", socket,
                         mgr_text_escape(why, shown, sizeof shown));
    if (got <= 0 || !mgr_parse_welcome(msg, &c->id, &c->units))
        return vdnn_fail(VDNN_EIO, "--managed: the manager at %s did not welcome this job (%s)", socket,
                         got > 0 ? "an answer it does not understand" : got == 0 ? "it closed the connection"
                         : errno == EAGAIN ? "no answer in 10 s" : strerror(errno));
    return VDNN_OK;
}

vdnn_status mgr_client_open(const char *socket, const char *name, dp_group *g, int every, int quiet,
                            mgr_client **out)
{
    *out = NULL;
    int n = dp_local_devices(g);
    if (n != dp_devices(g))
        return vdnn_fail(VDNN_EINVAL, "--managed: a job of one process (a manager shares one machine's devices); "
                         "give its devices to --devices instead of starting ranks with mpirun");
    if (n > MGR_MAX_DEVICES) return vdnn_fail(VDNN_EINVAL, "--managed: at most %d devices", MGR_MAX_DEVICES);
    char names[1024] = "", keys[2048] = "";
    vdnn_status st = device_lists(g, n, names, sizeof names, keys, sizeof keys);
    if (st != VDNN_OK) return st;
    mgr_client *c = calloc(1, sizeof *c);
    if (!c) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    c->g = g;
    c->ndev = n;
    c->every = every > 0 ? every : DEFAULT_EVERY;
    c->quiet = quiet;
    c->fd = -1;
    snprintf(c->socket, sizeof c->socket, "%s", socket);
    st = mgr_dial(socket, &c->fd);
    if (st != VDNN_OK) {
        free(c);
        return vdnn_wrap(st, "--managed");
    }
    st = greet(c, socket, name, names, keys);
    if (st != VDNN_OK) {
        close(c->fd);
        free(c);
        return st;
    }
    weights_to_units(dp_weights(g), n, c->units, c->dr);
    if (!quiet) {
        char dr[256];
        list_ints(dr, sizeof dr, c->dr, n);
        fprintf(stderr, "vdnn: managed by the slow-down manager at %s as job %d: it sets this job's shares "
                "(DR %s now)\n", socket, c->id, dr);
    }
    c->t_start = c->t_window = vdnn_now_s();
    c->applied = 1;
    c->window_first = 1;
    *out = c;
    return VDNN_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void post(mgr_client *c, const train_tick *t)
{
    double now = vdnn_now_s();
    int n = c->window_steps < MAX_WINDOW ? c->window_steps : MAX_WINDOW;
    qsort(c->work, (size_t)n, sizeof *c->work, cmp_double);
    double median = n % 2 ? c->work[n / 2] : 0.5 * (c->work[n / 2 - 1] + c->work[n / 2]);
    if (median > 0 && (c->solo_step_s <= 0 || median < c->solo_step_s)) c->solo_step_s = median;
    double window_s = now - c->t_window;
    double window_iter = window_s / c->window_steps;
    double iter = c->iter_n ? c->iter_sum / c->iter_n : c->last_iter_s > 0 ? c->last_iter_s : window_iter;
    c->last_iter_s = window_iter;
    long long left = t->total - t->done;
    double solo = (double)t->total * c->solo_step_s;
    double sd = solo > 0 ? (now - c->t_start + (double)left * iter) / solo : 0;
    char dr[256], busy[512];
    list_ints(dr, sizeof dr, c->dr, c->ndev);
    size_t k = 0;
    for (int d = 0; d < c->ndev; d++) k += (size_t)snprintf(busy + k, sizeof busy - k, "%s%.6f", d ? "," : "", c->busy[d]);
    char msg[2048];
    snprintf(msg, sizeof msg, "post step=%llu steps=%lld done=%lld epoch=%d epochs=%d sd=%.6f iter_ms=%.4f "
             "solo_ms=%.4f dr=%s applied=%llu fresh=%d busy=%s window_s=%.6f",
             (unsigned long long)(t->next - 1), t->total, t->done, t->epoch, t->epochs, sd, 1e3 * iter,
             1e3 * c->solo_step_s, dr, (unsigned long long)c->applied, c->applied <= c->window_first, busy, window_s);
    if (mgr_send(c->fd, msg) != 0) lost(c, t, errno == EPIPE || errno == ECONNRESET ? "went away" : "stopped answering");
    c->t_window = now;
    c->window_first = t->next;
    c->window_steps = 0;
    memset(c->busy, 0, sizeof c->busy);
}

/* The last DR the manager sent, if any: 1 and out. A refusal (the manager drops the
 * job) is lost with its reason. */
static int take_dr(mgr_client *c, const train_tick *t, int *out)
{
    int got = 0;
    char msg[4096], why[1024], text[1200];
    for (;;) {
        int r = mgr_recv(c->fd, msg, sizeof msg, 0);
        if (r == 0) {
            lost(c, t, "went away");
            return got;
        }
        if (r < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK) lost(c, t, "stopped answering");
            return got;
        }
        if (mgr_refusal(msg, why, sizeof why)) {
            char shown[4096];
            snprintf(text, sizeof text, "dropped this job (%s)", mgr_text_escape(why, shown, sizeof shown));
            lost(c, t, text);
            return got;
        }
        got |= mgr_parse_dr(msg, c->ndev, c->units, out);
    }
}

vdnn_status mgr_client_tick(void *ctx, const train_tick *t)
{
    mgr_client *c = ctx;
    if (t->last_s > 0) {
        double bp[MGR_MAX_DEVICES], up[MGR_MAX_DEVICES], work = 0, most_up = 0;
        dp_busy(c->g, bp, up);
        for (int k = 0; k < c->ndev; k++) {
            work += bp[k];
            if (up[k] > most_up) most_up = up[k];
            c->busy[k] += bp[k] + up[k];
        }
        if (c->window_steps < MAX_WINDOW) c->work[c->window_steps] = work + most_up;
        c->window_steps++;
        c->iter_sum += t->last_s;
        c->iter_n++;
    }
    if (t->epoch != c->epoch) {   /* iter_time is the current epoch's */
        c->epoch = t->epoch;
        c->iter_sum = 0;
        c->iter_n = 0;
    }
    if (c->fd < 0) return VDNN_OK;
    if (c->window_steps >= c->every) post(c, t);
    int dr[MGR_MAX_DEVICES];
    if (c->fd < 0 || !take_dr(c, t, dr) || !memcmp(dr, c->dr, (size_t)c->ndev * sizeof *dr)) return VDNN_OK;
    double w[MGR_MAX_DEVICES];
    for (int k = 0; k < c->ndev; k++) w[k] = dr[k];
    vdnn_status st = dp_set_weights(c->g, w);
    if (st != VDNN_OK) return vdnn_wrap(st, "applying the manager's DR before step %llu", (unsigned long long)t->next);
    if (!c->quiet) {
        char from[256], to[256];
        list_ints(from, sizeof from, c->dr, c->ndev);
        list_ints(to, sizeof to, dr, c->ndev);
        fprintf(stderr, "%svdnn: the manager moved this job's shares from step %llu: DR %s -> %s\n",
                isatty(fileno(stderr)) ? "\r\033[K" : "", (unsigned long long)t->next, from, to);
    }
    memcpy(c->dr, dr, (size_t)c->ndev * sizeof *dr);
    c->applied = t->next;
    c->iter_sum = 0;
    c->iter_n = 0;
    if (t->log) {
        vdnn_json_line(t->log, json_pack("{s:s, s:I, s:o}", "manager", "dr", "step", (json_int_t)t->next, "dr",
                                         vdnn_json_ints(dr, c->ndev)));
        fflush(t->log);
    }
    return VDNN_OK;
}

void mgr_client_close(mgr_client *c, const char *reason)
{
    if (!c) return;
    if (c->fd >= 0) {
        char msg[128];
        snprintf(msg, sizeof msg, "bye reason=%s", reason);
        mgr_send(c->fd, msg);
        close(c->fd);
    }
    free(c);
}
