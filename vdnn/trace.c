/* Chrome trace-event JSON writer (see trace.h): the object and its array are written by
 * hand, each event as it comes, by Jansson (json_dumpf): a trace of many steps is never
 * held in memory. */
#include "vdnn/trace.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdnn/device.h"
#include "vdnn/json.h"

struct trace {
    FILE *f;
    pthread_mutex_t mu;
    double t0;
    int first;
    char path[512];
};

static const char *track_name(int track)
{
    switch (track) {
    case TRACE_TRACK_COMPUTE: return "compute stream";
    case TRACE_TRACK_MEMORY: return "memory stream";
    default: return "host";
    }
}

/* Writes one event (taking ev) after the ones before it; the caller holds t->mu. */
static void put_event(trace *t, json_t *ev)
{
    if (!ev) return;
    fputs(t->first ? "\n" : ",\n", t->f);
    t->first = 0;
    json_dumpf(ev, t->f, VDNN_JSON_LINE_FLAGS);
    json_decref(ev);
}

vdnn_status trace_open(const char *path, trace **out)
{
    *out = NULL;
    trace *t = calloc(1, sizeof *t);
    if (!t) return vdnn_fail(VDNN_ENOMEM, "out of host memory opening the trace");
    t->f = fopen(path, "w");
    if (!t->f) {
        int err = errno;
        free(t);
        return vdnn_fail(VDNN_EIO, "--trace: cannot write %s: %s", path, strerror(err));
    }
    snprintf(t->path, sizeof t->path, "%s", path);
    pthread_mutex_init(&t->mu, NULL);
    t->t0 = vdnn_now_s();
    t->first = 1;
    fputs("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [", t->f);
    for (int k = 0; k < 3; k++)
        put_event(t, json_pack("{s:s, s:s, s:i, s:i, s:{s:s}}", "name", "thread_name", "ph", "M", "pid", 1, "tid", k,
                               "args", "name", track_name(k)));
    *out = t;
    return VDNN_OK;
}

vdnn_status trace_close(trace *t)
{
    if (!t) return VDNN_OK;
    fputs("\n]}\n", t->f);
    int bad = ferror(t->f);
    bad |= fclose(t->f) != 0;
    pthread_mutex_destroy(&t->mu);
    vdnn_status st = bad ? vdnn_fail(VDNN_EIO, "--trace: writing %s failed", t->path) : VDNN_OK;
    free(t);
    return st;
}

/* Times are microseconds from the trace's start, to the nanosecond. */
void trace_slice(trace *t, int track, const char *name, const char *cat, double t0_s, double t1_s)
{
    if (!t) return;
    json_t *ev = json_pack("{s:o, s:o, s:s, s:i, s:i, s:o, s:o}", "name", vdnn_json_text(name), "cat",
                           vdnn_json_text(cat), "ph", "X", "pid", 1, "tid", track, "ts",
                           vdnn_json_fixed(1e6 * (t0_s - t->t0), 3), "dur", vdnn_json_fixed(1e6 * (t1_s - t0_s), 3));
    pthread_mutex_lock(&t->mu);
    put_event(t, ev);
    pthread_mutex_unlock(&t->mu);
}

void trace_counter(trace *t, const char *name, double t_s, double value)
{
    if (!t) return;
    json_t *bytes = isfinite(value) && fabs(value) < 9e18 ? json_integer((json_int_t)llround(value)) : json_null();
    json_t *ev = json_pack("{s:o, s:s, s:i, s:o, s:{s:o}}", "name", vdnn_json_text(name), "ph", "C", "pid", 1, "ts",
                           vdnn_json_fixed(1e6 * (t_s - t->t0), 3), "args", "bytes", bytes);
    pthread_mutex_lock(&t->mu);
    put_event(t, ev);
    pthread_mutex_unlock(&t->mu);
}
