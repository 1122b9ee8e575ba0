/* The planner: measured costs (the profile), plans, the simulator that predicts a
 * plan's iteration time and pool peak, and the searches that pick the fastest plan
 * that fits a budget.
 *
 * A profile holds what one training iteration of a net costs on one device at one
 * batch: every layer's forward and backward time per convolution algorithm, the
 * optimizer update, and the link's bandwidth in each direction. It is measured once
 * and cached in a file keyed by (device, net, batch).
 *
 * A plan says, per feature map x[j], whether it is kept, offloaded after forward, or
 * dropped and recomputed in backward; per layer, whether its parameters are swapped
 * and where they are updated; per convolution and pass, which algorithm runs; how
 * early backward prefetches (vDNN's far look-ahead, the next layer, or on demand, with
 * a release lag); and the micro-batch size. Applied to a net, it is exactly what the
 * iteration (nets/iteration.c) runs.
 *
 * The simulator replays one iteration of a plan on the simulated device: the same
 * iteration code, the same pool, on sizes only, with each layer pass and each copy
 * advancing a clock per stream by its measured cost. It returns the predicted time
 * and the pool's high-water mark; the peak is exact (the pool's choices depend only
 * on the sequence of calls), the time is a model (see docs/planner.md). */
#ifndef VDNN_PLANNER_H
#define VDNN_PLANNER_H

#include <stdio.h>

#include "nets/net.h"

#define PLAN_MAX_ALGOS LAYER_MAX_ALGOS

/* Seconds of one layer's passes, per algorithm (index < the layer's algo_count). */
/* Per-layer costs are layer_cost (layers/layer.h), per algorithm up to PLAN_MAX_ALGOS. */

typedef struct profile {
    char device[160];         /* device_describe() of the device measured, budget left out */
    uint64_t net_key;         /* net_fingerprint() */
    int batch;
    int nlayers;
    layer_cost *layers;       /* (nlayers); owned */
    double h2d_bytes_per_s;   /* link bandwidth host -> device */
    double d2h_bytes_per_s;   /* device -> host */
    double duplex_bytes_per_s;/* both directions at once, bytes moved per second in all */
    double copy_latency_s;    /* fixed cost of one copy on the memory stream */
    double measure_s;         /* how long measuring took (0 when read from the cache) */
    /* When and under what load it was measured: Unix seconds (0: unknown, a version 2
     * file), the machine's 1-minute load average then (< 0: unknown) and its online
     * cores. A load near the core count means other work shared the machine. */
    double measured_at;
    double load;
    int cores;
    char path[1200];          /* the cache file it was read from or written to ("" none) */
    int partial;              /* measured in a pool too small for some algorithms' workspaces or
                               * for the whole batch (a GPU's own pool): not cached */
} profile;

/* A fingerprint of what the costs depend on: every layer's type, shapes, algorithms
 * and description, and the batch. */
uint64_t net_fingerprint(const net *n);

/* Measures the net's costs at the net's batch: on the CPU in a scratch device of `d`'s
 * settings (d's pool untouched); on a GPU in d's own pool (a second slab may not fit
 * beside it), whose peak is then reset, a layer whose buffers do not fit there being
 * measured on fewer items and scaled up. `link_gbps` is the CPU device's emulated link
 * (0: none). Free with profile_free(). */
vdnn_status profile_measure(const net *n, device *d, double link_gbps, int threads, profile *out);
void profile_free(profile *p);

/* The profile cache file's format: 2 added each layer's gradient-sum time, 3 when and
 * under what load it was measured (version 2 files are read too). */
#define PROFILE_VERSION 3

/* The profile cache: a folder of text files, one per (device, net, batch). `dir` NULL
 * means $VDNN_CACHE, else $XDG_CACHE_HOME/vdnn, else ~/.cache/vdnn. profile_get()
 * reads the cached one when it matches, else measures and writes it (an unwritable
 * cache is not an error: the profile is just not kept); *cached says which. */
vdnn_status profile_get(const net *n, device *d, double link_gbps, int threads, const char *dir,
                        profile *out, int *cached);
/* The cached profile profile_get would read, into *out: 1 when there is one, 0 when
 * profile_get would measure (nothing measured here). */
int profile_find(const net *n, device *d, double link_gbps, int threads, const char *dir, profile *out);
/* `--profile-cache DIR`: the folder profile_get uses where its caller names none (NULL:
 * the default above), so that every profile of a run, --algo perf's too, is kept there.
 * The string is not copied. */
void profile_cache_default(const char *dir);
/* `--reprofile`: cached profiles measured before this call are measured again (and the
 * cache rewritten); by default every one that matches is read. One measured in this
 * process after the call is read back, so a run measures each profile once. */
void profile_refresh(void);
/* One line for people: when and under what load the profile was measured, e.g.
 * "measured 2026-11-26 01:52, load 1.9 on 2 cores" ("measured at an unknown time"). */
void profile_describe(const profile *p, char *buf, size_t len);
/* While a profile is measured, what is being measured, how far and about how long is
 * left go to `f` (NULL: nowhere, the default): on a terminal (`tty`) one line redrawn
 * every second, else a line every 10 s; a profile measured in under a second (or ten)
 * prints nothing. */
void profile_show_progress(FILE *f, int tty);
vdnn_status profile_save(const profile *p, const char *path);
/* Reads a profile; VDNN_ENOENT-like failure (VDNN_EIO) when missing, VDNN_EFORMAT when
 * malformed (the message names the file and line). */
vdnn_status profile_load(const char *path, profile *out);
/* The cache file name for a net measured on a device (path written into buf). */
vdnn_status profile_cache_path(const net *n, const char *device_desc, const char *dir, char *buf, size_t len);

typedef struct plan {
    int nlayers;
    int batch;
    unsigned char *offload;   /* (nlayers + 1): MAP_KEEP, MAP_OFFLOAD (after its last forward
                               * reader) or MAP_RECOMPUTE (dropped, recomputed in backward) */
    unsigned char *swap;      /* (nlayers): SWAP_NONE, SWAP_HOST or SWAP_DEVICE (layers/layer.h) */
    int micro;                /* micro-batch size (0: the batch is not split); must be the net's */
    int (*algo)[PASS_COUNT];  /* (nlayers): algorithm per pass */
    int prefetch_ahead;       /* PREFETCH_* */
    int release_lag;
    int in_place;             /* how in-place layers run: IN_PLACE_* (net.h, net_in_place) */
    char origin[24];          /* how it was made: "none", "all", "conv", "dyn", "vdnn", a file name */
    double predicted_s;       /* simulated iteration time; < 0: not simulated */
    size_t peak_bytes;        /* simulated pool peak (the least budget the plan fits) */
    double measured_s;        /* measured iteration time; < 0: not verified */
    size_t settled_at;        /* a budget at which a climb's full round found no change of
                               * this plan that gains, or (with a search gap) gains too
                               * small for another round, or was made in parts (search.c);
                               * 0: none known */
    uint64_t settled_costs;   /* and a hash of the costs, gap and parts it measured with */
} plan;

/* Functions that fill a plan treat it as empty (free what it held first): on success
 * the caller owns it and frees it with plan_free(), on failure it is left empty.
 * plan_free() of an empty (zeroed) plan does nothing. */
vdnn_status plan_init(plan *p, const net *n);
void plan_free(plan *p);
vdnn_status plan_copy(plan *dst, const plan *src);
/* The plan the net runs now / makes the net run `p` (p must match the net; a plan
 * that does not is rejected and the net left as it was). n->policy is not changed. */
vdnn_status plan_from_net(const net *n, plan *p);
vdnn_status plan_apply(net *n, const plan *p);
/* plan_apply to a net that runs `prev` (applied to it since it was attached, and nothing
 * else): only what p changes is checked and set (the simulator replays plan after plan
 * one decision apart). Without prev, plan_apply. */
vdnn_status plan_apply_from(net *n, const plan *p, const plan *prev);
/* The plan of a fixed policy (none/all/conv) with the fastest measured algorithms
 * (from the profile; NULL: the net's current algorithms) or the smallest-workspace
 * ones, and the given copy timing. Per-layer config overrides (offload=, algo=) win. */
vdnn_status plan_policy(const net *n, const profile *pr, mem_policy pol, algo_mode a, int prefetch_ahead,
                        int release_lag, plan *p);

/* The algorithm a fixed mode picks for a pass: pinned in the config, else the smallest
 * workspace (ALGO_MEM) or the fastest in `c` (ALGO_PERF; ties to the smaller
 * workspace; NULL: the layer's current one). */
int plan_choose_algo(const layer *l, int pass, algo_mode a, const layer_cost *c);

/* Text file: one line per layer with its name, its input map's offload flag and its
 * algorithms by name. Loading checks layer count, names, algorithm names, and that
 * only maps some backward pass reads are offloaded; errors name the file and line. */
vdnn_status plan_save(const plan *p, const net *n, const char *path);
vdnn_status plan_load(const net *n, const char *path, plan *out);
/* The batch and micro-batch size (0: none) a plan file was made for, read from its
 * header without a net (a regular file only); errors as plan_load's. */
vdnn_status plan_file_split(const char *path, int *batch, int *micro);
/* A table (or one JSON object) of the plan: per layer its input map and whether it is
 * offloaded, algorithms, workspace and measured times (when pr is non-NULL), then the
 * copy timing and the prediction. */
void plan_print(FILE *f, const plan *p, const net *n, const profile *pr);

/* How `vdnn profile` found its plan (plan_dyn), for people and programs: the times
 * spent, the search's stop, and the micro-batch sizes weighed in the order weighed, each
 * with its plan's time (PLAN_WEIGHED_PLAN), or none of its plans fitting, or none faster
 * than its floor, s (then not searched). */
enum { PLAN_WEIGHED_PLAN, PLAN_WEIGHED_NONE_FITS, PLAN_WEIGHED_FLOOR };
#define PLAN_WEIGHED_MAX 32
typedef struct plan_report {
    int profile_cached;
    double profile_s, micro_s, search_s, verify_s;
    long simulations;
    const char *stop;         /* "complete", "gap", "time", "stalled" or "nodes"; NULL: vDNN's ladder */
    int micro;                /* the split chosen (0: the whole batch) */
    double whole_floor_s;     /* > 0: the whole batch not searched, no plan of it faster than this */
    size_t whole_least;       /* > 0: the whole batch not searched, every plan of it holds this */
    int nweighed;
    struct {
        int items, kind;
        double s;
    } weighed[PLAN_WEIGHED_MAX];
} plan_report;

/* The plan as one JSON object; with r, also "planning": r's fields (plan_report_json,
 * which train's --log writes too: a new jansson object). */
void plan_print_json(FILE *f, const plan *p, const net *n, const profile *pr, const plan_report *r);
struct json_t *plan_report_json(const plan_report *r);

/* The simulator (see the top of this file). Reusable: create once per (net, profile),
 * run many plans; the net and the profile must outlive it (it clones the net again
 * when a plan first needs a second copy). */
typedef struct simulator simulator;
vdnn_status sim_create(const net *n, const profile *pr, simulator **out);
void sim_destroy(simulator *s);
/* Replays one training iteration of `p`; *time_s is the predicted iteration time and
 * *peak_bytes the pool's high-water mark, parameters included. */
vdnn_status sim_run(simulator *s, const plan *p, double *time_s, size_t *peak_bytes);
/* sim_run, told that only whether the plan fits `cap` bytes (and if so its time) is of
 * use: the replay stops once the pool's frontier passes the cap, and a plan that does
 * not fit gets *peak_bytes SIZE_MAX and *time_s, sim_busy_s and sim_used_peak unknown
 * (1e30, 0, SIZE_MAX). cap 0: sim_run. */
vdnn_status sim_run_within(simulator *s, const plan *p, size_t cap, double *time_s, size_t *peak_bytes);
/* How many iterations the simulator has replayed, and how many runs it answered
 * without a replay (a plan it had replayed before: the same results). */
long sim_runs(const simulator *s);
long sim_repeats(const simulator *s);
/* How many of the replays took their evaluation batch's marks from an earlier one that
 * ran the same forward pass from the same pool (simulate.c), and how many replays'
 * peaks the evaluation set (first fit packing its blocks higher than the step's). */
long sim_eval_repeats(const simulator *s);
long sim_eval_peaks(const simulator *s);
/* How many of the replays attached a clone of the net afresh: it keeps two attached,
 * each reused by a plan that places the parameters alike (swaps them alike). */
long sim_attaches(const simulator *s);
/* The last run's high-water mark of bytes in blocks not freed (<= its peak, which also
 * counts holes and blocks waiting on an event). Unlike the peak, it never grows when a
 * map is offloaded or a workspace shrinks: the search bounds with it. */
size_t sim_used_peak(const simulator *s);
/* The bytes the net attached for plan p holds on the device before its step and
 * throughout it (the parameters p does not swap, and the labels): no replay of p holds
 * less, and one under a smaller cap is not run. */
size_t sim_attached_bytes(const simulator *s, const plan *p);
/* The last run's compute-stream work (its predicted time less the waits for copies):
 * no plan that differs from it only in maps kept rather than offloaded is faster. */
double sim_busy_s(const simulator *s);
/* Replays `p` (whatever it replayed before) with the iteration recording into `probe`
 * (net_probe, its arrays the net's size) what the first micro-batch holds. */
vdnn_status sim_probe(simulator *s, const plan *p, net_probe *probe);

/* The maps and parameters whose copies lie on a longest path of a plan's training step
 * (device_sim_critical): a change that leaves out only copies of others, adding no
 * work, leaves the step no shorter. */
typedef struct critical_copies {
    int valid;                /* 0: not known (any change may shorten the step) */
    unsigned char *maps;      /* (nlayers + 1) map x[j] offloaded or fetched on it */
    unsigned char *params;    /* (nlayers) layer i's parameters or their gradients copied on it */
} critical_copies;
/* Replays `p` (whatever it replayed before) for its critical copies, into *c (freed
 * first: a struct of zeros, or one this filled). */
vdnn_status sim_critical(simulator *s, const plan *p, critical_copies *c);
void critical_copies_free(critical_copies *c);

/* Lower bounds on the bytes a plan holds at once (its blocks not yet freed: no more than
 * its peak) once one of its decisions changes, from one replay of it (bounds.c). A
 * change of one map, one layer's parameters or one pass's workspace leaves the pool's
 * requests before it as they were, and after it adds the map, the parameters or the
 * workspace's growth to what was held at points of the step: where that passes the
 * budget, no replay is needed to know the change does not fit. */
typedef struct live_bounds {
    int nlayers, valid;
    size_t *fwd_before, *fwd_after;   /* held at forward samples of layers < i, and >= i */
    size_t *bwd_before, *bwd_after;   /* held at backward samples of layers < i, and >= i */
    size_t *fwd_ws_at, *bwd_ws_at;    /* held before layer i's forward and backward workspace */
    size_t *fwd_ws_room, *bwd_ws_room;   /* the largest workspace the pool could then place (net_probe) */
    size_t *bwd_ws;                   /* (2 nlayers) the plan's backward-data and -filter workspaces */
    int *fetched_in;                  /* (nlayers + 1) net_probe's */
} live_bounds;
/* The bounds of plan p of net n under a budget of `cap` bytes (0: none), from a replay
 * on s (sim_probe); b->valid 0 where the replay failed (no bound then). Free with
 * live_bounds_free. */
vdnn_status live_bounds_make(simulator *s, const net *n, const plan *p, size_t cap, live_bounds *b);
void live_bounds_free(live_bounds *b);
/* The least p holds at once with map j, offloaded in p, kept instead; with layer i's
 * parameters, swapped in p, kept on the device; with layer i's `pass` run by an
 * algorithm of `ws` bytes of workspace. 0 where nothing is known. */
size_t live_bounds_keep(const live_bounds *b, const net *n, int j);
size_t live_bounds_resident(const live_bounds *b, const net *n, int i);
size_t live_bounds_workspace(const live_bounds *b, int i, int pass, size_t ws);
/* Whether, with layer i's `pass` run by an algorithm of `ws` bytes of workspace, the pool
 * could place that workspace below the cap: where not, p so changed does not fit the
 * cap (the pool is as the replay left it when the workspace is asked for). 1 where
 * nothing is known. */
int live_bounds_workspace_placed(const live_bounds *b, int i, int pass, size_t ws);
/* The least p holds at once with map j, offloaded in p, recomputed instead (0 where
 * nothing is known; p's own choice for x[j] is not read). */
size_t live_bounds_recompute(const live_bounds *b, const net *n, const plan *p, int j);
/* The bytes map x[j] of net n takes in the pool (the iteration's block for it). */
size_t plan_map_block(const net *n, int j);
/* The most any of those changes of a plan of net n adds to what it holds: where a plan
 * holds at most its budget less this, no bound can pass the budget. */
size_t live_bounds_most_added(const net *n);

typedef enum { SEARCH_VDNN = 0, SEARCH_BB } search_kind;

/* The command line's default cap on branch-and-bound nodes: a few seconds of search on
 * the nets in configs/, and complete on most budgets (docs/planner.md). */
#define PLAN_NODE_LIMIT 50000
/* The command line's default time for planning a run (the micro-batch choice and the
 * search; measuring profiles apart), or for one search (sweep rows): the seeds are
 * always tried; the climbs and the branch and bound stop when it is up and a plan that
 * fits has been found. */
#define PLAN_SEARCH_SECONDS 60
/* The command line's patience (search_limits), unless --search-gap 0 asks for the
 * exact optimum: the branch and bound stops once it has visited this over the square of
 * the net's layers nodes without improving the plan, and, once it has, as many as it
 * took to. A count of nodes, not of seconds, so that a plan is the same on any machine
 * and at any load. The seeds and the climbs find the plans; on a deep net the tree then
 * only proves them (bench/planner.md: after the climbs it improved none of 45 searches'
 * plans), while a small net's often completes, and may find a faster plan (LeNet at
 * batch 64 and dyn's least, one thread: 2.8% faster, after more than 15,000 nodes). A
 * node replays the net about once: LeNet gets 30,000 nodes (a tenth of a second),
 * ResNet-110 19 (a hundredth), ResNet-1202 one. */
#define PLAN_PATIENCE 3000000L
/* The command line's default gap: the search stops once its plan is predicted within
 * this fraction of the net's time with unlimited memory (no plan can be faster), and
 * the branch and bound cuts every node that cannot beat its plan by more (an
 * epsilon-optimal search: at most this much slower than the optimum of its space). */
#define PLAN_SEARCH_GAP 0.005
/* A change of a plan makes it faster when it saves more than this share of its step:
 * the simulator adds the same costs in another order under another plan, and plans of
 * the same speed then differ by rounding (on ResNet-110, 1e-13 s of 1.5 s). */
#define PLAN_GAIN_TOL 1e-9

/* How long a search may run: `nodes` > 0 caps the branch and bound's nodes, `seconds`
 * > 0 its wall time (0: no limit), `gap` > 0 lets it stop within that fraction of the
 * best it could find (0: exact). When none of the seed plans fits (the fixed policies,
 * the threshold plans, the smallest plan of every variant and copy timing: plan_least's
 * plans among them), the tree looks for a plan that fits: with `fit_nodes` > 0 for that
 * many nodes at most, the budget being else taken as out of reach, and at once where
 * even the smallest plans hold more bytes at a time than the budget. With `one_climb`
 * the search climbs from its best seed only, not also from the smallest plan of every
 * variant and timing, and no branch and bound follows (the micro-batch choice weighs
 * splits so; such a search is complete only within its gap). */
typedef struct search_limits {
    long nodes;
    double seconds;
    double gap;
    long fit_nodes;
    int one_climb;
    long patience;            /* > 0: the branch and bound (after the climbs) stops once
                               * it has visited this many nodes over the square of the
                               * net's layers (at least one), and as many as it took itself
                               * to improve the plan, without improving it */
    int threads;              /* the threads the climbs run on (0: OpenMP's count, the run's
                               * --threads); the plan found is the same on any number */
    int climb_chunk;          /* decisions a climb's round measures against one plan before
                               * it makes their changes (0: the default, search.c) */
    int climb_group;          /* the changes a climb's first group of moves makes at once
                               * (0: the default, search.c; 1: one at a time) */
    int own_rounds;           /* 1: every start's climb measures its own first round (by
                               * default a variant's starts share one: search.c) */
    int no_bounds;            /* 1: a climb's round replays every change it measures (by
                               * default not those its plan's live_bounds show cannot fit:
                               * search.c, best_choice) */
    int measure_all;          /* 1: a climb's round in parts measures every map and
                               * parameter change (by default one of each run of alike
                               * ones: search.c, ALIKE_LEAST), and the round a variant's
                               * starts share every algorithm change (by default
                               * estimated on large nets: HINT_ESTIMATE_LEAST) */
    double floor_s;           /* > 0: none's step with the fastest algorithms and unlimited
                               * memory (plan_fit_policy), known: the search replays none's
                               * plans only as far as the budget, for whether they fit */
    double last_round;        /* > 0: a climb's full round whose moves gain less than this
                               * share of the plan's time is its last (0: a tenth of the
                               * gap: search.c, CLIMB_LAST_ROUND) */
    void (*on_round)(void *ctx, double measured_s, double before_s, double after_s);
    void *round_ctx;          /* where set, called after each whole full round of a climb, on
                               * the thread that climbs: the gains its decisions' changes
                               * measured, summed, and the plan's time before and after its
                               * moves (the tests watch the climbs with it) */
} search_limits;

typedef struct search_stats {
    long simulations;         /* plans replayed */
    long nodes;               /* branch and bound: partial plans visited */
    int complete;             /* the search proved its plan optimal (B&B within its limits) */
    int timed_out;            /* it stopped at limits.seconds */
    int within_gap;           /* it stopped with a plan within limits.gap of unlimited memory */
    int stalled;              /* it stopped with no better plan for limits.patience */
    long lone_later;          /* changes a climb tried alone made past the first of a go
                               * of them (search.c, lone_moves: tried at once on the
                               * threads, one after another on one) */
    long lone_spared;         /* changes a climb in parts did not try alone: one of their
                               * run of alike ones had failed alone (search.c, runs) */
    double seconds;
} search_stats;

/* Bytes that layer i of n holds at once while it runs `pass` with a workspace of ws
 * bytes, in every plan (its own blocks, parameters apart): a lower bound on the peak of
 * every plan that runs the pass with that workspace. */
size_t plan_pass_held(const net *n, int i, int pass, size_t ws);
/* The bytes of the parameters no plan moves off the device (those of layers that are not
 * swappable: layer_swappable), which every plan holds throughout its step. */
size_t plan_resident_bytes(const net *n);
/* No plan of n holds less at once: the parameters no plan moves, and the pass that holds
 * the most with its smallest workspace (plan_pass_held), the parameters of the layer and
 * of the neighbour that fetches its own ahead (swapped or not, they are on the device
 * then). A budget below it fits no plan. */
size_t plan_least_held(const net *n);
/* *floor_s: no plan of n that fits `budget` (0: no limit) takes less than this per step.
 * The compute of a step is its passes and the work every plan does alike (recomputation
 * only adds), and a pass runs while the parameters no plan can swap and its own maps and
 * workspace are held: the step of none with, for each pass, the fastest algorithm that
 * fits beside those, counted without the waits for copies. */
vdnn_status plan_floor_within(const net *n, const profile *pr, size_t budget, double *floor_s);
/* plan_floor_within from `ideal`, none's plan with the fastest algorithms and unlimited
 * memory (plan_fit_policy's), in hand. */
vdnn_status plan_floor_within_from(const net *n, const profile *pr, size_t budget, const plan *ideal, double *floor_s);

/* The fastest plan whose simulated pool peak fits `budget` bytes.
 * SEARCH_VDNN is vDNN's own ladder (the paper's vDNN_dyn): all + memory-optimal must
 * fit, else no plan; then none, conv, all with the fastest algorithms; then all with
 * convolutions moved to memory-optimal algorithms one layer at a time; then all +
 * memory-optimal. SEARCH_BB is a branch and bound over the variants of plan_enumerate,
 * the copy timing (how in-place layers run included), every map's keep/offload and
 * every convolution pass's algorithm,
 * seeded by the fixed policies, vDNN-style threshold plans (offload every map below a
 * layer) and hill climbs whose moves also recompute single maps (docs/planner.md).
 * `lim` caps the climbs and the B&B (then the best plan found so far is returned,
 * stats->complete 0). VDNN_EBUDGET when nothing fits, with a message naming the least
 * budget found. */
vdnn_status plan_search(const net *n, const profile *pr, size_t budget, search_kind k, search_limits lim,
                        plan *out, search_stats *stats);
/* plan_search with `seed` (NULL: none), a plan of this net found earlier, as its first
 * incumbent when it fits: the search returns nothing slower, and with a gap may stop
 * at once. */
vdnn_status plan_search_from(const net *n, const profile *pr, size_t budget, search_kind k, search_limits lim,
                             const plan *seed, plan *out, search_stats *stats);

/* The fastest copy timing of a fixed policy and algorithm mode whose simulated peak
 * fits `budget` (0: no limit); VDNN_EBUDGET (no message) when none does. */
vdnn_status plan_fit_policy(const net *n, const profile *pr, size_t budget, mem_policy pol, algo_mode a, plan *out);
/* As plan_fit_policy, replayed on sim, a simulator of (n, pr): a caller that asks of
 * several budgets and policies keeps one (it remembers the plans it replayed; `vdnn
 * sweep`'s range and fixed-policy rows). */
vdnn_status plan_fit_policy_on(simulator *sim, const net *n, const profile *pr, size_t budget, mem_policy pol,
                               algo_mode a, plan *out);

/* The planner's whole decision for an attached net: plan_search_from `seed`, then, with `verify`
 * > 0, real iterations of the plan found and of the fastest fixed policy that fits
 * (when its prediction is slower, but by less than half); the faster measured is returned in *out, the other
 * in *alt (alt->nlayers is 0 when there was none; alt may be NULL). So a misprediction
 * can never leave the planner's plan slower than a plain policy. The net's own plan
 * and weights are left as they were, except when the plan swaps parameters that the
 * net holds on the device (or the reverse): the net is then attached again, its
 * parameters re-initialised from the seed, so call it before training or resuming. */
vdnn_status plan_choose(net *n, const profile *pr, size_t budget, search_kind k, search_limits lim, const plan *seed,
                        int verify,
                        plan *out, plan *alt, search_stats *stats);
/* plan_choose's verification of a plan already searched for: takes *found (left
 * empty), and returns the faster measured in *out, the other in *alt. */
vdnn_status plan_verify(net *n, const profile *pr, size_t budget, int verify, plan *found, plan *out, plan *alt);

/* The least budget the planner can plan the net in at its batch (no further split):
 * the least peak of its smallest plans (every map it may move offloaded or recomputed,
 * parameters swapped, smallest workspaces). `vdnn info` shows it as dyn's minimum.
 * Replayed on OpenMP's thread count (the run's --threads), a simulator each. */
vdnn_status plan_least(const net *n, size_t *bytes);

/* Every plan of the branch and bound's space, enumerated (tests: small nets only):
 * variants (recompute the cheap layers' outputs or not, swap every swappable layer or
 * not) x copy timings (each with the ways of running in-place layers the net allows)
 * x keep/offload per map x every algorithm per pass. Calls `visit`
 * with each complete plan; stops early when it returns non-zero. Returns the count. */
long plan_enumerate(const net *n, const profile *pr, int (*visit)(void *ctx, const plan *p), void *ctx);

/* Runs `iters` real training iterations of the attached net with plan `p` on random
 * data (after one warm-up) and stores the median time in p->measured_s. The net's
 * parameters, momenta, step and plan are restored afterwards, and the pool's peak is
 * reset (the measurement is not part of training). */
vdnn_status plan_measure(net *n, plan *p, int iters);

/* ---- the fixed policies' plans and their minimum budgets (budget.c) ---- */

/* net_plan_static (nets/net.h), but ALGO_PERF measures on the attached device (the
 * profile: the fastest algorithm per pass); unattached, or on the simulated device,
 * it assumes the largest-workspace algorithm is the fastest, an upper bound for memory. */
vdnn_status net_plan(net *n, mem_policy p, algo_mode a);
/* Puts the net in perf mode with the profile's fastest algorithm for every pass (what
 * net_plan's ALGO_PERF measures). */
void net_take_profile_algos(net *n, const profile *pr);
/* Replays on m's simulated device what a run of the plan asks of the pool: a training
 * step of `items` items (*step_s, if non-NULL, gets the simulated clock after it, and
 * *busy_s the compute stream's own work in it: device_sim_busy), then
 * the evaluation of a batch, whose calls differ (nothing offloaded, maps freed after
 * their last reader), so a budget that holds the step may not hold it. A smaller batch
 * makes the same calls as a full one (maps take the room of a full batch), so these two
 * are every pattern a run has. */
vdnn_status net_replay(net *m, int items, double *step_s, double *busy_s);
/* Its two parts: the training step (with its times), and the evaluation batch. */
vdnn_status net_replay_step(net *m, int items, double *step_s, double *busy_s);
vdnn_status net_replay_eval(net *m);

/* The smallest budget (bytes, a multiple of POOL_ALIGN) in which the net, planned as it
 * is now (plan_from_net), trains and evaluates: found by the simulator's replay. The pool's
 * choices depend neither on timing nor on its capacity, so a run fits in exactly the
 * budgets >= this one, and a real device reaches the same pool state. */
vdnn_status net_min_budget(net *n, size_t *bytes);

/* Chooses how early copies run (prefetch_ahead, release_lag) for `budget` (0: no
 * limit): the fastest setting whose minimum fits (net_min_budget's, the settings
 * replayed on one simulator); *need is that minimum. Each setting is
 * tried with every way of running in-place layers (IN_PLACE_OVER_OUTPUT, OVER_GRAD, OFF;
 * only OFF unless may_in_place): they compute the same bits at the same speed, and
 * where the pool's placement fragments more with one, another may fit. VDNN_EBUDGET,
 * with *need the least of them and no message, when none fits. */
vdnn_status net_fit_budget(net *n, size_t budget, size_t *need);

/* The least budget any copy timing of the net's plan needs (the net keeps its own). */
vdnn_status net_least_budget(net *n, size_t *bytes);

/* The least budget of every policy and algorithm mode (net_least_budget): perf with the algorithms the
 * net has now (measured once attached; before that the largest-workspace ones, an upper
 * bound), mem with the smallest-workspace ones. The net's own plan is left as it was. */
vdnn_status net_budget_table(net *n, size_t table[POLICY_COUNT][ALGO_MODE_COUNT]);

/* ---- the driver: planning a run (driver.c, advice.c) ---- */

/* How a run is planned with `--policy dyn` (and `vdnn profile`). */
typedef struct planner_opts {
    size_t budget;            /* bytes the plan must fit; 0: no limit */
    const char *search;       /* "bb" (default) or "vdnn" */
    const char *cache;        /* profile cache folder; NULL: the default cache */
    long long node_limit;     /* branch and bound nodes; 0: no limit */
    double search_seconds;    /* wall time of the planning, measurements apart; 0: no limit */
    double search_gap;        /* search_limits.gap */
    int fixed_split;          /* the micro-batch split was given: plan that split only (the batch: none) */
    long long verify;         /* real iterations to verify with; 0: none */
    double link_gbps;         /* the device's settings, for the profile's key */
    long long threads;
    int json;                 /* print the plan as JSON on stdout */
    int whole_first;          /* the micro-batch choice searches the whole batch first and every
                               * split down to one item (until one is as good as unlimited
                               * memory), leaving none out by a bound (pick_micro; tests
                               * compare) */
} planner_opts;

/* "bb" (or NULL) and "vdnn"; an error names any other. */
vdnn_status plan_search_kind(const char *name, search_kind *k);

/* Attaches n to d (net_attach); with `--policy dyn`, when the parameters do not fit,
 * with every swappable layer's parameters in host memory: the planner then decides
 * which to bring back. */
vdnn_status plan_attach(net *n, device *d);

/* Plans the attached net by its fixed policy and algorithm mode and checks that the
 * budget (0: none given) holds its iteration; if not, plan_budget_error's refusal.
 * *need (NULL: not wanted): the least budget of the plan taken. */
vdnn_status plan_fixed(net *n, size_t budget, size_t *need);

/* The refusal of a budget below what the net's plan needs (need 0: below the
 * parameters), as VDNN_EBUDGET with a message: every fixed policy's minimum, and the
 * fastest that fits, or how to split the batch so that one does, or the least budget
 * that works. A suggestion is always one the same command accepts at this budget. */
vdnn_status plan_budget_error(net *n, size_t budget, size_t need);

/* `--policy dyn`: profiles the attached net (cached), searches for the fastest plan
 * under o->budget (when none fits the batch, in micro-batches: *np is then replaced by
 * the net rebuilt for them), verifies it with real iterations, applies it, and prints
 * what it did to `out` (NULL: quiet). *chosen (may be NULL) receives the plan; free
 * with plan_free(); *report (may be NULL) how it was found. */
vdnn_status plan_dyn(net **np, const planner_opts *o, FILE *out, plan *chosen, plan_report *report);

/* What plan_dyn plans, without verifying or applying it, for a net n that need not be
 * attached (pr: its profile; the micro-batches' profiles are measured on dev, or taken
 * from the cache): the items per micro-batch into *micro (0: the batch as n runs it),
 * and into *out the plan of n split so (net_clone_micro), which *stats (may be NULL)
 * describes. VDNN_EBUDGET where nothing fits, not even in micro-batches of one item. */
vdnn_status plan_dyn_split(const net *n, device *dev, const profile *pr, const planner_opts *o, int *micro, plan *out,
                           search_stats *stats);

/* net_clone_micro of n, its layers bound to dev's algorithms at the clone's batch where n
 * is not attached and dev's tables depend on the batch (a GPU's library sizes its
 * workspaces for it); an attached net's clone has its own device's (dev may be NULL). */
vdnn_status plan_clone_split(const net *n, device *dev, int micro, net **out);

/* Attaches n (not yet attached) to d with each layer's parameters placed as p swaps
 * them (a config's `policy = swap` set aside); p is not applied. */
vdnn_status plan_attach_as(net *n, device *d, const plan *p);
/* Attaches n (not yet attached) to d as a plan file says and applies the plan: its
 * swapped layers' parameters placed in host memory from the start (a config's `policy
 * = swap` does not override it); fails, before anything is placed, when the plan is not
 * of this net or its simulated peak exceeds `budget` (0: no limit). */
vdnn_status plan_attach_file(net *n, device *d, const char *path, size_t budget);

/* A data-parallel replica, planned as one device would be for its device's budget: by
 * plan_dyn (quietly, with the settings of the planner_opts `opts`) for dyn, else by
 * plan_fixed. It may replace *np by the net rebuilt for micro-batches. `algos` (one row
 * per layer, or NULL) are the algorithms of the replica it replaces when a share
 * changed: measured at the old share, they are kept where the budget holds them. A
 * dp_plan_fn (nets/parallel/parallel.h): dp_opts.plan = plan_replica, .plan_ctx = the opts. */
vdnn_status plan_replica(void *opts, net **np, const int (*algos)[PASS_COUNT]);

#endif
