/* Chrome trace-event JSON (opens in Perfetto or chrome://tracing): one track per
 * stream, a slice per layer pass and per copy, counters such as pool bytes in use.
 * Thread-safe: the copy engine thread writes its own slices. */
#ifndef VDNN_TRACE_H
#define VDNN_TRACE_H

#include "vdnn/status.h"

typedef struct trace trace;

enum { TRACE_TRACK_COMPUTE = 0, TRACE_TRACK_MEMORY = 1, TRACE_TRACK_HOST = 2 };

/* Opens `path` for writing; times are seconds from vdnn_now_s(), written relative to
 * the moment of opening. Free with trace_close(), which completes the JSON. */
vdnn_status trace_open(const char *path, trace **out);
vdnn_status trace_close(trace *t);

/* A slice [t0_s, t1_s] on a track; `cat` groups slices ("forward", "offload", ...). */
void trace_slice(trace *t, int track, const char *name, const char *cat, double t0_s, double t1_s);
/* A counter sample. */
void trace_counter(trace *t, const char *name, double t_s, double value);

#endif
