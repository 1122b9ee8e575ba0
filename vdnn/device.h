/* The device: memory spaces, streams and events, behind one interface.
 *
 * Three implementations, chosen at run time: the CPU device (an emulated GPU: a device
 * arena capped at the budget, host memory apart from it, compute on the calling
 * thread, and a copy-engine thread as the memory-manager stream), CUDA, and the
 * simulated device the planner replays iterations on. Code above this interface never
 * asks which one it has: it asks the device what it is (device_get_code: which halves
 * of the layers run on it; device_is_async, device_memory_is_host, ...), so that a new
 * device kind is one file and one entry in device.c's table of kinds.
 *
 * Streams: STREAM_COMPUTE runs layers; STREAM_MEMORY runs copies asynchronously. On the
 * CPU device, compute-stream work runs synchronously on the caller's thread, so an
 * event recorded on the compute stream is complete when recorded.
 *
 * Device memory comes only from the device's pool (device_alloc); nothing bypasses it.
 * On the CPU device, device pointers are ordinary addresses (inside the arena). */
#ifndef VDNN_DEVICE_H
#define VDNN_DEVICE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "vdnn/mempool.h"
#include "vdnn/status.h"

/* DEVICE_SIM replays the iteration on sizes only: its pool is real, its memory is not
 * (pointers are tokens), copies and compute do nothing. The planner runs on it. */
typedef enum { DEVICE_CPU = 0, DEVICE_CUDA = 1, DEVICE_SIM = 2 } device_kind;
typedef enum { STREAM_COMPUTE = 0, STREAM_MEMORY = 1 } stream_id;
typedef enum { COPY_H2D = 0, COPY_D2H = 1, COPY_D2D = 2, COPY_H2H = 3 } copy_kind;

typedef struct device device;
typedef struct dev_event dev_event;   /* reference-counted; see device_event_record */

typedef struct device_options {
    device_kind kind;
    int cuda_index;        /* for DEVICE_CUDA */
    size_t budget_bytes;   /* capacity of the device pool (the slab) */
    int threads;           /* CPU compute threads (OpenMP/OpenBLAS); 0 = all cores */
    double link_gbps;      /* CPU device: copy-engine throttle in GB/s per direction; 0 = none */
    int tf32;              /* CUDA: let convolutions and GEMMs use TF32 tensor cores (default:
                            * strict FP32, FMA only) */
    int nondeterministic;  /* CUDA: offer cuDNN's nondeterministic algorithms too (default:
                            * deterministic ones only, so runs repeat bit for bit) */
    double slowdown;       /* CPU: every layer pass takes this many times as long (a test knob
                            * that stands in for a slower or shared device; <= 1: none) */
    int emulated;          /* CPU: an emulated device of its own, cpu:`cpu_index`, whose computing
                            * thread runs on cores cpu_index*T .. cpu_index*T+T-1 (T: threads,
                            * 1 when 0) of those the process may use, so that the processes
                            * that name the same cpu:N share its cores as jobs share a GPU */
    int cpu_index;
} device_options;

/* Device names, the one grammar of --device and of every device list (--devices of
 * train and of the manager): "cpu", "cpu:N" (an emulated device of its own cores, N <=
 * DEVICE_CPU_INDEX_MAX), "cuda" (= cuda:0) or "cuda:N" (N <= DEVICE_CUDA_INDEX_MAX); N is
 * decimal digits, nothing else around or inside a name. A list is names separated by
 * single commas, at most DEVICE_LIST_MAX of them; an empty entry (leading, trailing or
 * doubled comma) is an error naming its position. */
#define DEVICE_LIST_MAX 1024
#define DEVICE_CPU_INDEX_MAX 4096
#define DEVICE_CUDA_INDEX_MAX 1024

/* The budget a device takes when none is given: on a GPU what is free, less a reserve
 * for the vendor libraries' own memory; 0 where the device has no memory of its own to
 * size a budget by (the CPU device: the caller sizes one for the net). */
size_t device_default_budget(const device_options *o);

/* What names the device o names the same way in every process before it exists (as
 * device_identity does after): an emulated CPU device's "cpu:N"; "" where only the
 * device itself can tell (a GPU's PCI bus id) or none names it (plain cpu). */
const char *device_options_identity(const device_options *o, char *buf, size_t len);

/* Sets o's kind, cuda_index, emulated and cpu_index from the `len` bytes of `name`, the
 * rest of *o untouched. `what` (e.g. "--device") begins the error message. */
vdnn_status device_parse_name(const char *what, const char *name, size_t len, device_options *o);

/* Parses a device list into *out, a new array of *count options (free() it), each a copy
 * of *base (zeros where base is NULL) with its device set. With `unique`, a device named
 * twice is an error (cuda and cuda:0 are one device; so are two cpu:N of the same N;
 * plain cpu, no one device, is refused there). `what` begins the error messages. */
vdnn_status device_parse_list(const char *what, const char *text, const device_options *base, int unique,
                              device_options **out, int *count);

/* The name of the device that o names, as device_parse_name reads it back: "cpu",
 * "cpu:N" or "cuda:N". Returns buf. */
const char *device_options_name(const device_options *o, char *buf, size_t len);

/* Creates a device; on failure returns a status and a message ("no CUDA device", "budget
 * of X could not be reserved", ...). Free with device_destroy(). */
vdnn_status device_create(const device_options *opt, device **out);
/* Waits for both streams and frees the device; returns the first failure it has seen
 * (device_poll), VDNN_OK if none. The message is set only for a failure found here. */
vdnn_status device_destroy(device *d);

device_kind device_get_kind(const device *d);

/* What computes on a device, which picks the halves of the layers and of the solver
 * that run on it (layers/layer.c, nets/solver.c): nothing (sizes and modelled time
 * only: the simulated device), host code on host addresses (the CPU devices), or CUDA
 * kernels and libraries on the device's streams. */
typedef enum { DEVICE_CODE_NONE = 0, DEVICE_CODE_HOST = 1, DEVICE_CODE_CUDA = 2 } device_code;
device_code device_get_code(const device *d);
/* "none", "host" or "cuda". */
const char *device_code_name(device_code c);
/* Whether compute-stream work returns before it is done (a GPU's), so that timing a
 * layer on the host needs a stream sync. */
int device_is_async(const device *d);
/* Whether the device's memory is the host's (the CPU device's arena), so that a second
 * device beside it takes none of its budget; a GPU's slab might leave no room for one. */
int device_memory_is_host(const device *d);
/* Whether the algorithm tables the device gives a layer (layer_bind) depend on the
 * batch, as a GPU library's workspaces do: a clone at another batch binds anew. */
int device_algos_by_batch(const device *d);
/* The host threads the device computes with: the CPU device's (its option, else every
 * core), one for a GPU's, whose host thread only launches work. The data loader leaves
 * its workers the other cores. */
int device_host_threads(const device *d);
/* The options the device was created with. */
const device_options *device_get_options(const device *d);
const char *device_describe(const device *d);   /* e.g. "cpu (2 threads, link 12 GB/s)" */
/* What makes measurements on this device differ from another's, the budget left out:
 * e.g. "cuda NVIDIA H100 80GB HBM3 sm90 cudnn 91900 fp32" (profile cache key). */
const char *device_model(const device *d);
pool *device_pool(device *d);

/* Device memory from the pool. `layer` and `tensor` name the request in a budget error. */
vdnn_status device_alloc(device *d, size_t bytes, const char *layer, const char *tensor, void **ptr);
/* device_alloc of `tensor` then `suffix` ("x[3]", " (prefetch)"): joined only for an
 * error (the planner's simulator makes hundreds of thousands of requests). */
vdnn_status device_alloc_as(device *d, size_t bytes, const char *layer, const char *tensor, const char *suffix,
                            void **ptr);
vdnn_status device_free(device *d, void *ptr);
/* Frees once `ev` completes; takes ownership of the caller's reference to `ev`. */
vdnn_status device_free_after(device *d, void *ptr, dev_event *ev);

/* Host memory (pinned on CUDA). Returns NULL on failure. */
void *device_host_alloc(device *d, size_t bytes);
void device_host_free(device *d, void *ptr);

/* Enqueues a copy on `stream`. On STREAM_MEMORY it returns at once; the caller keeps
 * src and dst alive and unmodified until an event recorded after it completes. */
vdnn_status device_copy(device *d, stream_id stream, void *dst, const void *src, size_t bytes, copy_kind kind);

/* As device_copy; a memory-stream copy with a tag appears in the trace under that name. */
vdnn_status device_copy_tagged(device *d, stream_id stream, void *dst, const void *src, size_t bytes,
                               copy_kind kind, const char *tag);

/* Traces memory-stream copies into `t` (NULL: stop); the trace is not owned. */
struct trace;
void device_set_trace(device *d, struct trace *t);

/* Makes the calling thread one that computes on `d` (the CPU device's thread count, a
 * GPU's current device): every thread that runs layers on a device calls it first. */
void device_bind_thread(device *d);

/* Makes the calling thread the one that computes for `d`, as device_bind_thread does,
 * and on an emulated CPU device (cpu:N) pins it to the device's cores. Only the thread
 * that runs the device's layers calls it. */
void device_pin_thread(device *d);

/* What names the device the same way in every process on the machine: a GPU's PCI bus
 * id ("00000000:3B:00.0"), an emulated CPU device's "cpu:N"; "" for the CPU device as
 * a whole. */
const char *device_identity(const device *d);

/* The CPU device's slow-down (device_options.slowdown): sleeps (slowdown - 1) times the
 * calling thread's CPU seconds since `started_cpu_s` (vdnn_thread_cpu_s), when a layer
 * pass that began then is done. */
void device_throttle(device *d, double started_cpu_s);

/* A clock of the device's own work, to compare devices' speeds by: on the CPU device the
 * calling thread's CPU time plus its slow-down sleeps, so that other processes on the
 * machine do not stretch it; elsewhere wall time (a GPU's work is its own). */
double device_busy_clock(device *d);

/* Synchronous helpers, for set-up, checkpoints and tests. */
vdnn_status device_upload(device *d, void *dst_dev, const void *src_host, size_t bytes);
vdnn_status device_download(device *d, void *dst_host, const void *src_dev, size_t bytes);
vdnn_status device_zero(device *d, void *dst_dev, size_t bytes);
/* Fills `count` floats of device memory with standard normal numbers (rng_normal_at of
 * `seed`), on the device itself: on a GPU a kernel on the compute stream, no host
 * buffer and no copy (the profiler fills every layer's x and dy, gigabytes of them). */
vdnn_status device_fill_normal(device *d, float *dst_dev, size_t count, uint64_t seed);

/* Records an event after all work enqueued so far on `stream`; returns a new reference
 * (never NULL unless out of host memory). Release with device_event_release(). */
dev_event *device_event_record(device *d, stream_id stream);
dev_event *device_event_retain(dev_event *ev);
void device_event_release(device *d, dev_event *ev);
/* An event whose work failed counts as done; the failure is kept (device_poll). */
int device_event_done(device *d, dev_event *ev);
/* The calls below return a failure of the work they waited for (a GPU kernel or copy
 * that failed after it was issued), which the device also keeps (device_poll). */
vdnn_status device_event_wait(device *d, dev_event *ev);         /* blocks the calling thread */
vdnn_status device_stream_wait(device *d, stream_id stream, dev_event *ev);  /* stream waits, host does not (CUDA) */
vdnn_status device_stream_sync(device *d, stream_id stream);
/* As device_stream_wait, and the time the stream stands waiting is counted: on the CPU
 * device the host's wait; on a GPU, where cudaStreamWaitEvent returns at once, the time
 * between events recorded on the stream just before and just after the wait, counted
 * once both have completed. device_take_wait_s returns the seconds counted since its
 * last call (after device_sync, every timed wait issued before it). */
vdnn_status device_stream_wait_timed(device *d, stream_id stream, dev_event *ev);
double device_take_wait_s(device *d);

/* Asynchronous failures. Work on a GPU fails after the host issued it, and shows at
 * the next wait, sync or query; the device keeps the first such failure (a CUDA context
 * is unusable after a kernel fault) and every later device_poll returns it, with its
 * message. device_poll does not block (on a GPU it queries both streams);
 * device_sync waits for both streams first. */
vdnn_status device_poll(device *d);
vdnn_status device_sync(device *d);

/* Test-only failure injection, so that the paths only a GPU's failures would take run on
 * any device: the environment variable VDNN_FAULTS, read when a device is created, holds
 * comma-separated LAYER:PASS:WHAT entries (LAYER may be `*`):
 *   conv2:forward:im2col          that algorithm of that pass reports it cannot run, as
 *                                 cuDNN's NOT_SUPPORTED (PASS: forward, backward-data,
 *                                 backward-filter)
 *   relu3:backward:async          that layer's pass fails after it was issued, as a GPU
 *                                 kernel fault (PASS: forward, backward)
 * device_fault_algo says whether an algorithm is to fail; device_fault_after records the
 * asynchronous failure of a pass that has just been issued, when one is asked for. */
int device_fault_algo(const device *d, const char *layer, const char *pass, const char *algo);
void device_fault_after(device *d, const char *layer, const char *pass);

/* The simulated device's clocks, for the planner's simulator. Each stream has a clock;
 * work on the compute stream advances its clock by the cost its caller looked up
 * (device_sim_advance: a layer's pass by its profiled time, layers/layer.h), a
 * memory-stream copy starts when both the memory stream and the issuing host (at the
 * compute clock) are free and takes latency + bytes / bandwidth, events carry the clock
 * of their stream, and every wait moves the waiting clock forward to the event's. On
 * other devices these calls do nothing. */
typedef struct sim_model {
    double h2d_bytes_per_s, d2h_bytes_per_s;   /* 0: copies take no time */
    double copy_latency_s;                     /* per memory-stream copy */
    int replay_repeats;                        /* 1: device_sim_mark refuses, so that work that
                                                * repeats is replayed (to check the skip) */
    int critical;                              /* 1: the copies' paths noted (device_sim_critical) */
} sim_model;
/* Sets the model (copied) and resets both clocks to 0. */
void device_sim_set_model(device *d, const sim_model *m);
/* The compute stream works `seconds` more. */
void device_sim_advance(device *d, double seconds);
/* When the last work on either stream ends. */
double device_sim_elapsed(const device *d);
/* The compute stream's own work since the model was set: its clock less the time it
 * waited (for events, the host, or copies on the memory stream). */
double device_sim_busy(const device *d);
/* The simulated device's state at a point of the replay, for skipping work that repeats:
 * its pool's key (pool_state_key), the compute clock, how far the memory stream runs
 * ahead of it (0 when idle), the timed waits and the compute stream's work so far.
 * device_sim_mark fills it and returns 1 on the simulated device with no pending frees
 * (and no replay_repeats in its model); else 0. */
typedef struct sim_mark {
    uint64_t pool_key;
    double now_s, lead_s, waited_s, busy_s;
} sim_mark;
int device_sim_mark(const device *d, sim_mark *m);
/* Whether work replayed from state a would repeat from state b: the same pool and the
 * same lead of the memory stream (to rounding of the clocks' sums). */
int device_sim_same(const sim_mark *a, const sim_mark *b);
/* The work done between marks `from` and `to` done `times` more: both clocks, the
 * timed waits and the compute stream's work move on by as much again (the pool, where
 * the work ends as it began, stays). */
void device_sim_repeat(device *d, const sim_mark *from, const sim_mark *to, int times);
/* The memory-stream copies on a longest path of the work since a model with `critical`
 * was set (through copies, the host's issue of them and the waits for them, and the
 * compute stream's work between): the tags they were issued with (device_copy_tagged),
 * last first, in *tags (the device's, valid until the model is set again), and their
 * count; -1 where not known (no such model, work repeated by device_sim_repeat, no host
 * memory to note the copies, or another device). A copy not on it, left out with nothing
 * else changed, would not make the work end sooner. */
int device_sim_critical(device *d, const char *const **tags);

/* The number of CUDA GPUs this process sees: 0 when there is no driver or no GPU, and
 * in a build without CUDA. */
int device_cuda_count(void);
/* Whether this build has the CUDA backend. */
int device_cuda_built(void);
/* Prints what the CUDA backend was built with, the driver and runtime found, and each
 * GPU (name, compute capability, memory), one line each. */
void device_cuda_report(FILE *f);
/* Free memory on GPU `index` now (0 when there is none). */
size_t device_cuda_free_bytes(int index);

/* Bytes of device memory that the CUDA runtime, cuDNN and cuBLAS hold for themselves
 * beside the pool (handles, library code, cuBLAS's workspace), measured with
 * cudaMemGetInfo from the moment the device's context existed; 0 on other devices. */
size_t device_vendor_bytes(device *d);

/* Monotonic time in seconds, for progress, logs and traces. */
double vdnn_now_s(void);
/* CPU seconds the calling thread has used. */
double vdnn_thread_cpu_s(void);

#endif
