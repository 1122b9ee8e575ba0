/* Chrome trace-event JSON writer (see trace.h). */
#include "vdnn/trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdnn/device.h"

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

static void sep(trace *t)
{
    fputs(t->first ? "\n" : ",\n", t->f);
    t->first = 0;
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
    for (int k = 0; k < 3; k++) {
        sep(t);
        fprintf(t->f, "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"args\": {\"name\": \"%s\"}}",
                k, track_name(k));
    }
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

void trace_slice(trace *t, int track, const char *name, const char *cat, double t0_s, double t1_s)
{
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    sep(t);
    fprintf(t->f, "{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": 1, \"tid\": %d, "
                  "\"ts\": %.3f, \"dur\": %.3f}",
            name, cat, track, 1e6 * (t0_s - t->t0), 1e6 * (t1_s - t0_s));
    pthread_mutex_unlock(&t->mu);
}

void trace_counter(trace *t, const char *name, double t_s, double value)
{
    if (!t) return;
    pthread_mutex_lock(&t->mu);
    sep(t);
    fprintf(t->f, "{\"name\": \"%s\", \"ph\": \"C\", \"pid\": 1, \"ts\": %.3f, \"args\": {\"bytes\": %.0f}}", name,
            1e6 * (t_s - t->t0), value);
    pthread_mutex_unlock(&t->mu);
}
