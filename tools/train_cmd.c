/* `vdnn train` and `vdnn test`: on one device or data-parallel, planned, logged,
 * checkpointed (docs/cli.md). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "manager/client.h"
#include "manager/proto.h"
#include "nets/checkpoint.h"
#include "nets/parallel/parallel.h"
#include "nets/parallel/shares.h"
#include "nets/planner/planner.h"
#include "nets/trainer.h"
#include "vdnn/comm.h"
#include "vdnn/json.h"
#include "tools/commands.h"

/* The largest --batch and --micro-batch. */
#define TRAIN_MAX_BATCH 65536

typedef struct run_flags {
    const char *device, *data, *save, *resume, *init, *log, *weights, *policy, *algo, *trace;
    const char *plan, *search, *cache;
    long long node_limit, micro;
    double search_seconds, search_gap;
    long long epochs, steps, batch, seed, threads, workers;
    double lr, link_gbps;
    double plan_s;            /* wall time of planning: measuring the profile, searching */
    double predicted_s;       /* the simulator's step time for the plan run; < 0: none */
    plan_report report;       /* how dyn's plan was found, where has_report */
    int has_report;
    char prediction_source[1400];   /* the profile it came from, for the trainer's check */
    int reprofile;            /* --reprofile */
    size_t budget;
    int quiet, sync_layers;
    int no_save;              /* --no-save: no checkpoint (else --save, or runs/CONFIG.ckpt) */
    int default_save;         /* save names the checkpoint chosen for the run, not --save */
    char save_buf[1024];
    /* data-parallel training (docs/parallel.md), and the slow-down manager (docs/manager.md) */
    const char *devices, *shares, *share_schedule, *manager;
    int managed;
    long long share_every;
    size_t bucket;
    double rank_timeout;
    comm *comm;               /* the job's ranks (one without mpirun) */
    dp_group *group;          /* NULL: one device */
    net *model;               /* the loaded config the group's replicas are built from */
    planner_opts planner;     /* how the group plans its replicas (plan_replica) */
} run_flags;

/* The planner's settings from train's flags (the budget is the device's). */
static planner_opts planner_of(const run_flags *f)
{
    planner_opts o = {.search = f->search, .cache = f->cache, .node_limit = f->node_limit,
                      .search_seconds = f->search_seconds, .search_gap = f->search_gap, .fixed_split = f->micro > 0, .verify = 3,
                      .link_gbps = f->link_gbps, .threads = f->threads};
    return o;
}

static vdnn_status apply_memory_flags(net *n, const run_flags *f)
{
    if (f->policy) {
        int p = 0;
        while (p < POLICY_COUNT && strcmp(f->policy, policy_name((mem_policy)p))) p++;
        n->dyn = !strcmp(f->policy, "dyn");
        if (p == POLICY_COUNT && !n->dyn)
            return vdnn_fail(VDNN_EINVAL, "--policy: '%s' is not one of none, all, conv, swap, recompute, dyn", f->policy);
        n->policy = n->dyn ? POLICY_NONE : (mem_policy)p;
    }
    if (f->algo) {
        if (strcmp(f->algo, "perf") && strcmp(f->algo, "mem"))
            return vdnn_fail(VDNN_EINVAL, "--algo: '%s' is not one of perf, mem", f->algo);
        n->algo = !strcmp(f->algo, "mem") ? ALGO_MEM : ALGO_PERF;
    }
    if (f->budget) n->budget_bytes = f->budget;
    if (f->sync_layers) n->sync_layers = 1;
    return VDNN_OK;
}

/* The simulator's iteration time for the plan the net runs, from the profile that
 * --algo perf measured (read back from the cache), so that a run's log holds the
 * prediction beside the measured steps; -1 in mem mode (nothing measured) or on failure. */
/* The simulator's step time for the plan the net runs, from the profile that perf's
 * algorithms or dyn's plan came from (read from the cache by now; none is measured for
 * a plan of memory-optimal algorithms only), and in *source where it came from. */
static double predicted_step_s(net *n, const char *cache, char *source, size_t len)
{
    if (n->algo != ALGO_PERF && !n->dyn) return -1;
    const device_options *o = device_get_options(n->dev);
    profile pr;
    plan p = {0};
    simulator *sim = NULL;
    int cached = 0;
    double t = -1;
    size_t peak = 0;
    if (profile_get(n, n->dev, o->link_gbps, o->threads, cache, &pr, &cached) != VDNN_OK) return -1;
    char when[128];
    profile_describe(&pr, when, sizeof when);
    snprintf(source, len, "the profile %s (%s)", pr.path[0] ? pr.path : "(not cached)", when);
    if (plan_from_net(n, &p) == VDNN_OK && sim_create(n, &pr, &sim) == VDNN_OK && sim_run(sim, &p, &t, &peak) != VDNN_OK)
        t = -1;
    sim_destroy(sim);
    plan_free(&p);
    profile_free(&pr);
    return t;
}

/* The net's data set (the training split only when training), or an error that says
 * where the path came from and what to do. */
static vdnn_status load_data(const char *cfg, const char *flag, const net *n, int need_train, dataset **train,
                             dataset **test)
{
    const data_cfg *dc = &n->data;
    shape4 in = n->input;
    vdnn_status st = need_train ? dataset_load(dc, SPLIT_TRAIN, in.c, in.h, in.w, train) : VDNN_OK;
    if (st == VDNN_OK) st = dataset_load(dc, SPLIT_TEST, in.c, in.h, in.w, test);
    if (st == VDNN_OK || !strcmp(dc->set, "synthetic")) return st;
    char where[700], cwd[512];
    if (flag) snprintf(where, sizeof where, "--data %s", flag);
    else snprintf(where, sizeof where, "[data] path = %s in %s", dc->path, cfg);
    if (!getcwd(cwd, sizeof cwd)) snprintf(cwd, sizeof cwd, "the current folder");
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", vdnn_errmsg());
    return vdnn_fail(st, "%s (the %s set's path comes from %s%s%s; give --data PATH, or --data synthetic to train "
                     "on synthetic data of the net's shape)", msg, dc->set, where,
                     dc->path[0] == '/' ? "" : ", relative to ", dc->path[0] == '/' ? "" : cwd);
}

static vdnn_status open_all(const char *cfg, run_flags *f, int need_train, net **n, device **d,
                            dataset **train, dataset **test)
{
    net_overrides ov;
    vdnn_status st = cli_overrides(&ov);
    ov.batch = (int)f->batch;
    ov.micro_batch = (int)f->micro;
    /* a plan is for one batch and split: the net is built for them unless the flags say
     * otherwise, within the flags' own ranges (a file that does not read, or holds sizes
     * no flag takes, is reported with file:line when loaded, as a mismatch) */
    int plan_batch = 0, plan_micro = 0;
    if (f->plan && plan_file_split(f->plan, &plan_batch, &plan_micro) == VDNN_OK && plan_batch <= TRAIN_MAX_BATCH &&
        plan_micro <= plan_batch) {
        if (f->batch < 0) ov.batch = plan_batch;
        if (!f->micro) ov.micro_batch = plan_micro;
    }
    ov.epochs = (int)f->epochs;
    ov.lr = f->lr;
    ov.seed = f->seed;
    ov.data_path = f->data;
    if (st == VDNN_OK) st = net_load(cfg, &ov, n);
    if (st == VDNN_OK && f->workers > 0) (*n)->data.workers = (int)f->workers;
    if (st == VDNN_OK && need_train) st = check_train_settings(*n);
    /* the data first: a wrong path is found before minutes of profiling and planning */
    if (st == VDNN_OK) st = load_data(cfg, f->data, *n, need_train, train, test);
    if (st == VDNN_OK) st = apply_memory_flags(*n, f);
    if (st == VDNN_OK) st = cli_device(f->device, (*n)->budget_bytes, f->threads, f->link_gbps, *n, d);
    double t_plan = vdnn_now_s();
    if (st == VDNN_OK && f->plan) {
        /* a plan file places the parameters itself (it may swap some) */
        st = plan_attach_file(*n, *d, f->plan, (*n)->budget_bytes);
    } else if (st == VDNN_OK) {
        st = plan_attach(*n, *d);
        if (st == VDNN_EBUDGET) st = plan_budget_error(*n, (*n)->budget_bytes, 0);
        t_plan = vdnn_now_s();
        if (st == VDNN_OK && (*n)->dyn) {
            pool_stats ps;
            pool_get_stats(device_pool(*d), &ps);
            planner_opts pf = planner_of(f);
            pf.budget = (*n)->budget_bytes ? (*n)->budget_bytes : ps.capacity_bytes;
            st = plan_dyn(n, &pf, f->quiet ? NULL : stdout, NULL, &f->report);
            f->has_report = st == VDNN_OK;
        } else if (st == VDNN_OK) {
            st = cli_plan_fixed(f->device, f->threads, f->link_gbps, (*n)->budget_bytes, *n, d);
        }
    }
    f->plan_s = vdnn_now_s() - t_plan;
    if (st != VDNN_OK) return st;
    f->predicted_s = f->plan ? -1 : predicted_step_s(*n, f->cache, f->prediction_source, sizeof f->prediction_source);
    return st;
}

static void close_all(net *n, device *d, dataset *train, dataset *test)
{
    dataset_free(train);
    dataset_free(test);
    net_free(n);
    device_destroy(d);
}

/* ---- data-parallel training (nets/parallel/parallel.h) ---- */

/* What every rank must agree on, as "key=value" lines (comm_check_same). */
static void settings_text(const net *n, const run_flags *f, char *buf, size_t len)
{
    snprintf(buf, len,
             "net=%016llx\nbatch=%d\nmicro_batch=%d\nepochs=%d\nlearning_rate=%.15g\nmomentum=%.15g\n"
             "weight_decay=%.15g\nlr_schedule=%d\nseed=%llu\ndata=%s\npolicy=%s\nalgo=%s\nbudget=%zu\n"
             "shares=%s\nshare_every=%lld\nbucket=%zu\nsteps=%lld\nlink_gbps=%.15g\nresume=%s\n",
             (unsigned long long)net_fingerprint(n), n->minibatch, n->micro, n->train.epochs, n->train.learning_rate,
             n->train.momentum, n->train.weight_decay, (int)n->train.schedule, (unsigned long long)n->train.seed,
             n->data.set, n->dyn ? "dyn" : policy_name(n->policy), algo_mode_name(n->algo), f->budget,
             f->shares ? f->shares : "equal", f->share_every, f->bucket, f->steps, f->link_gbps,
             f->resume ? "yes" : "no");
}

/* --devices with no --budget: when every device is a GPU, what the one with the least
 * free memory can take (device_default_budget); else, and when a GPU is not there (which
 * device_create then says, as for --device), the net's own default. A list that does
 * not parse gets the default too: dp_create reports it. */
static size_t parallel_default_budget(const char *devices, const net *n)
{
    device_options *list = NULL;
    int count = 0;
    size_t least = 0;
    if (device_parse_list("--devices", devices ? devices : "cpu", NULL, 0, &list, &count) != VDNN_OK) count = 0;
    for (int k = 0; k < count; k++) {
        size_t b = device_default_budget(&list[k]);
        if (!b) {
            least = 0;
            break;
        }
        least = k == 0 || b < least ? b : least;
    }
    free(list);
    return least ? least : cli_default_budget(n);
}

static vdnn_status open_parallel(const char *cfg, run_flags *f, net **n, device **d, dataset **train,
                                 dataset **test)
{
    if (f->plan)
        return vdnn_fail(VDNN_EINVAL, "--plan is one device's plan; with several devices each plans its own share "
                         "(use --policy, or dyn)");
    if (f->trace && comm_size(f->comm) > 1)
        return vdnn_fail(VDNN_EINVAL, "--trace traces one process; under mpirun give it to a run of one rank");
    net_overrides ov;
    vdnn_status st = cli_overrides(&ov);
    ov.batch = (int)f->batch;
    ov.epochs = (int)f->epochs;
    ov.lr = f->lr;
    ov.seed = f->seed;
    ov.data_path = f->data;
    if (st == VDNN_OK) st = net_load(cfg, &ov, &f->model);
    /* the data first, from the model's settings (--data included; the replicas are
     * built from the config alone) */
    if (st == VDNN_OK) st = load_data(cfg, f->data, f->model, 1, train, test);
    if (st == VDNN_OK) st = apply_memory_flags(f->model, f);
    char text[4096];
    if (st == VDNN_OK) {
        f->model->micro = (int)f->micro;
        settings_text(f->model, f, text, sizeof text);
        f->model->micro = 0;
        st = comm_check_same(f->comm, text);
    }
    f->planner = planner_of(f);
    dp_opts o = {.devices = f->devices, .shares = f->shares, .share_every = (int)f->share_every,
                 .bucket_bytes = f->bucket, .plan = plan_replica, .plan_ctx = &f->planner};
    o.dev.threads = (int)f->threads;
    o.dev.link_gbps = f->link_gbps;
    o.dev.tf32 = !strcmp(cli_math, "tf32");
    o.dev.nondeterministic = cli_nondeterministic;
    o.dev.budget_bytes = f->budget;
    if (st == VDNN_OK && !o.dev.budget_bytes) o.dev.budget_bytes = parallel_default_budget(f->devices, f->model);
    double t_plan = vdnn_now_s();
    if (st == VDNN_OK) st = dp_create(f->model, f->comm, &o, &f->group);
    f->plan_s = vdnn_now_s() - t_plan;
    f->predicted_s = -1;
    if (st != VDNN_OK) return st;
    *n = dp_primary(f->group);
    *d = (*n)->dev;
    if (f->workers > 0) (*n)->data.workers = (int)f->workers;
    return VDNN_OK;
}

static void close_parallel(run_flags *f, dataset *train, dataset *test)
{
    dataset_free(train);
    dataset_free(test);
    dp_free(f->group);
    net_free(f->model);
    f->group = NULL;
    f->model = NULL;
}

/* --managed and --share-schedule: what they go with (docs/manager.md). */
static vdnn_status check_managed(const run_flags *f)
{
    if (f->manager && !f->managed) return vdnn_fail(VDNN_EINVAL, "--manager PATH goes with --managed");
    if (!f->managed) return VDNN_OK;
    if (comm_size(f->comm) > 1)
        return vdnn_fail(VDNN_EINVAL, "--managed: a job of one process (a manager shares one machine's devices); give "
                         "its devices to --devices instead of starting ranks with mpirun");
    if (f->shares && !strcmp(f->shares, "auto"))
        return vdnn_fail(VDNN_EINVAL, "--managed: the manager sets the shares; --shares auto would move them too "
                         "(give --shares a list to start from, or leave it out)");
    if (f->share_schedule) return vdnn_fail(VDNN_EINVAL, "--managed and --share-schedule both set the shares: one of them");
    return VDNN_OK;
}

/* The folder train keeps checkpoints in by default: $VDNN_RUNS, else runs/ in the
 * current folder. */
static const char *runs_dir(void)
{
    const char *runs = getenv("VDNN_RUNS");
    return runs && *runs ? runs : "runs";
}

/* The k-th default checkpoint of config cfg: RUNS/STEM.ckpt for k = 1, RUNS/STEM-k.ckpt
 * after (STEM: the config's file name without .cfg). */
static void run_ckpt(const char *cfg, int k, char *buf, size_t len)
{
    const char *base = strrchr(cfg, '/');
    base = base ? base + 1 : cfg;
    size_t stem = strlen(base);
    if (stem > 4 && !strcmp(base + stem - 4, ".cfg")) stem -= 4;
    char suffix[16] = "";
    if (k > 1) snprintf(suffix, sizeof suffix, "-%d", k);
    snprintf(buf, len, "%s/%.*s%s.ckpt", runs_dir(), (int)stem, base, suffix);
}

/* Where train keeps its weights when neither --save nor --no-save is given: the
 * checkpoint it resumes from, else the first default checkpoint (run_ckpt) that does
 * not exist yet: a new run never overwrites an earlier one's. */
static vdnn_status default_save(const char *cfg, run_flags *f)
{
    if (f->save || f->no_save) return VDNN_OK;
    f->default_save = 1;
    struct stat st;
    if (f->resume) {   /* one that is not a file is refused as the run resumes */
        if (stat(f->resume, &st) == 0 && S_ISREG(st.st_mode)) f->save = f->resume;
        return VDNN_OK;
    }
    if (mkdir(runs_dir(), 0777) != 0 && errno != EEXIST)
        return vdnn_fail(VDNN_EIO, "cannot make %s for the run's checkpoint: %s (give --save FILE, or --no-save)",
                         runs_dir(), strerror(errno));
    for (int k = 1; k < 10000; k++) {
        run_ckpt(cfg, k, f->save_buf, sizeof f->save_buf);
        if (access(f->save_buf, F_OK) != 0) {
            f->save = f->save_buf;
            return VDNN_OK;
        }
    }
    return vdnn_fail(VDNN_EIO, "%s holds 9999 checkpoints of %s: give --save FILE", runs_dir(), cfg);
}

/* The newest default checkpoint train kept for this config, into buf; 0 when there is
 * none. */
static int newest_run(const char *cfg, char *buf, size_t len)
{
    double newest = -1;
    for (int k = 1; k < 10000; k++) {
        char path[1024];
        run_ckpt(cfg, k, path, sizeof path);
        struct stat st;
        if (stat(path, &st) != 0) break;
        double t = (double)st.st_mtim.tv_sec + 1e-9 * (double)st.st_mtim.tv_nsec;
        if (S_ISREG(st.st_mode) && t >= newest) {
            newest = t;
            snprintf(buf, len, "%s", path);
        }
    }
    return newest >= 0;
}

/* Fails now, not after hours of training, when the checkpoint cannot be written. */
static vdnn_status check_writable(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return vdnn_fail(VDNN_EIO, "--save: %s is not a regular file (a checkpoint replaces a file)", path);
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return vdnn_fail(VDNN_EIO, "--save: cannot write %s: %s", tmp, strerror(errno));
    fclose(f);
    remove(tmp);
    return VDNN_OK;
}

static FILE *open_log(const char *path)
{
    if (!path) return NULL;
    FILE *f = fopen(path, "w");
    if (!f) vdnn_fail(VDNN_EIO, "--log: cannot write %s: %s", path, strerror(errno));
    return f;
}

/* Closes the log; a write that failed (a full disk) turns a success into an error. */
static vdnn_status close_log(FILE *log, const char *path, vdnn_status st)
{
    if (!log) return st;
    int bad = ferror(log);
    bad = fclose(log) != 0 || bad;
    if (bad && st == VDNN_OK)
        return vdnn_fail(VDNN_EIO, "%s: writing the log failed: %s", path, strerror(errno ? errno : EIO));
    return st;
}

/* SIGINT or SIGTERM during training: stop after the current step, save, end the log
 * (train_opts.interrupt); a second one ends the process at once. */
static volatile sig_atomic_t interrupted;
static int interrupt_tty;   /* stderr is a terminal */

static void on_interrupt(int sig)
{
    static const char ack[2][160] = {
        "\nvdnn: SIGINT: stopping after this step to save (again: stop at once, the last checkpoint kept as it is)\n",
        "\nvdnn: SIGTERM: stopping after this step to save (again: stop at once, the last checkpoint kept as it is)\n"};
    /* the new line first only where a progress bar may be half drawn */
    const char *m = ack[sig == SIGTERM] + !interrupt_tty;
    size_t len = 0;
    while (m[len]) len++;
    ssize_t w = write(STDERR_FILENO, m, len);
    (void)w;
    interrupted = sig;
    signal(sig, SIG_DFL);
}

/* train's flags into *f and the config's path into *cfg. */
static vdnn_status parse_train(int argc, char **argv, run_flags *f, const char **cfg)
{
    arg_spec specs[] = {
        {"--device", ARG_STRING, &f->device, 0, 0, HELP_DEVICE, 0},
        {"--math", ARG_STRING, &cli_math, 0, 0, HELP_MATH, 0},
        {"--nondeterministic", ARG_FLAG, &cli_nondeterministic, 0, 0, HELP_NONDETERMINISTIC, 0},
        {"--budget", ARG_BYTES, &f->budget, 0, 0, "device memory the run must fit in", 0},
        {"--data", ARG_STRING, &f->data, 0, 0, "the data set's folder or file, or synthetic (data of the config's shape)", 0},
        {"--epochs", ARG_INT, &f->epochs, 1, 1e6, "override [train] epochs", 0},
        {"--steps", ARG_INT, &f->steps, 1, 1e12, "stop after this many optimizer steps", 0},
        {"--batch", ARG_INT, &f->batch, 1, TRAIN_MAX_BATCH, HELP_BATCH, 0},
        {"--lr", ARG_FLOAT, &f->lr, 1e-12, 100, "override [train] learning_rate", 0},
        {"--seed", ARG_INT, &f->seed, 0, 2147483647, "override [train] seed", 0},
        {"--threads", ARG_INT, &f->threads, 1, 1024, HELP_THREADS, 0},
        {"--workers", ARG_INT, &f->workers, 1, 64, HELP_WORKERS, 0},
        {"--save", ARG_STRING, &f->save, 0, 0, "the checkpoint to keep (default runs/CONFIG.ckpt)", 0},
        {"--resume", ARG_STRING, &f->resume, 0, 0, "continue from this checkpoint, bit for bit", 0},
        {"--init", ARG_STRING, &f->init, 0, 0, "start from these weights (layers matched by name and shape), optimizer fresh", 0},
        {"--log", ARG_STRING, &f->log, 0, 0, "one JSON line per step and epoch", 0},
        {"--quiet", ARG_FLAG, &f->quiet, 0, 0, "print nothing but errors", 0},
        {"--policy", ARG_STRING, &f->policy, 0, 0, "none, all, conv, swap, recompute or dyn (the planner)", 0},
        {"--algo", ARG_STRING, &f->algo, 0, 0, "perf (fastest, measured) or mem (least workspace) convolutions", 0},
        {"--link-gbps", ARG_FLOAT, &f->link_gbps, 0.001, 1e4, HELP_LINK_GBPS, 0},
        {"--sync-layers", ARG_FLAG, &f->sync_layers, 0, 0, "wait for each layer (timing, debugging)", 0},
        {"--trace", ARG_STRING, &f->trace, 0, 0, "a Chrome/Perfetto trace of compute and copies", 0},
        {"--in-place", ARG_STRING, &cli_in_place, 0, 0, HELP_IN_PLACE, 0},
        {"--plan", ARG_STRING, &f->plan, 0, 0, "run a plan file (vdnn profile --save-plan)", 0},
        {"--search", ARG_STRING, &f->search, 0, 0, HELP_SEARCH, 0},
        {"--profile-cache", ARG_STRING, &f->cache, 0, 0, HELP_PROFILE_CACHE, 0},
        {"--node-limit", ARG_INT, &f->node_limit, 0, 1e12, HELP_NODE_LIMIT, 0},
        {"--micro-batch", ARG_INT, &f->micro, 1, TRAIN_MAX_BATCH, "split each batch into micro-batches of N items", 0},
        {"--search-seconds", ARG_FLOAT, &f->search_seconds, 0, 1e9, HELP_SEARCH_SECONDS, 0},
        {"--search-gap", ARG_FLOAT, &f->search_gap, 0, 1, HELP_SEARCH_GAP, 0},
        {"--devices", ARG_STRING, &f->devices, 0, 0, "data-parallel over these devices, e.g. cpu:0,cpu:1 or cuda:0,cuda:1", 0},
        {"--shares", ARG_STRING, &f->shares, 0, 0, "equal, auto, or one weight per device", 0},
        {"--share-every", ARG_INT, &f->share_every, 1, 1e9, "auto shares: steps between rebalancings", 0},
        {"--bucket", ARG_BYTES, &f->bucket, 0, 0, "gradients reduced in buckets of about this size", 0},
        {"--rank-timeout", ARG_FLOAT, &f->rank_timeout, 1, 1e9, "seconds a rank waits for the others before the job ends", 0},
        {"--share-schedule", ARG_STRING, &f->share_schedule, 0, 0, "a file of steps and shares to switch to", 0},
        {"--managed", ARG_FLAG, &f->managed, 0, 0, "let the slow-down manager set the shares", 0},
        {"--manager", ARG_STRING, &f->manager, 0, 0, "the manager's socket (default: the user's)", 0},
        {"--no-save", ARG_FLAG, &f->no_save, 0, 0, "keep no checkpoint", 0},
        {"--reprofile", ARG_FLAG, &f->reprofile, 0, 0, HELP_REPROFILE, 0},
        {NULL, 0, NULL, 0, 0, NULL, 0},
    };
    return args_parse(argc, argv, 2, specs, cfg, 1, "vdnn train CFG [flags]");
}

/* What a run holds from its start to its end. */
typedef struct train_run_state {
    net *n;
    device *d;
    dataset *train, *test;
    FILE *log;
    trace *tr;
    mgr_client *client;
    shares_schedule *schedule;
    int parallel, rank;
} train_run_state;

/* The ranks, the checkpoint's name, the net, device and data, the log's first record
 * (the planning time) and the trace. */
static vdnn_status open_run(const char *cfg, run_flags *f, train_run_state *r)
{
    vdnn_status st = VDNN_OK;
    if (f->save && f->no_save) st = vdnn_fail(VDNN_EINVAL, "--save and --no-save: one of them");
    if (st == VDNN_OK && f->init && f->resume)
        st = vdnn_fail(VDNN_EINVAL, "--init and --resume: a run resumes its own checkpoint (--resume) or starts from "
                       "another's weights (--init), not both");
    if (st == VDNN_OK && r->rank == 0) st = default_save(cfg, f);
    if (r->rank > 0) {   /* rank 0 speaks, logs and saves for the job */
        f->quiet = 1;
        f->log = f->save = NULL;
    }
    if (!r->parallel && (f->shares || f->share_every || f->bucket || f->share_schedule || f->managed))
        st = vdnn_fail(VDNN_EINVAL, "--shares, --share-every, --share-schedule, --bucket and --managed are for "
                       "data-parallel training (--devices, or mpirun)");
    if (st == VDNN_OK) st = check_managed(f);
    if (!f->quiet) profile_show_progress(stderr, cli_progress_tty());
    if (st == VDNN_OK)
        st = r->parallel ? open_parallel(cfg, f, &r->n, &r->d, &r->train, &r->test)
                         : open_all(cfg, f, 1, &r->n, &r->d, &r->train, &r->test);
    if (st == VDNN_OK && f->log && !(r->log = open_log(f->log))) st = VDNN_EIO;
    /* planning (a profile measured or read from the cache, a search) before any step */
    if (st == VDNN_OK && r->log) {
        json_t *line = json_pack("{s:o}", "plan_s", vdnn_json_real(f->plan_s, 6));
        if (line && f->predicted_s >= 0)
            json_object_set_new(line, "predicted_step_ms", vdnn_json_real(1e3 * f->predicted_s, 6));
        if (line && f->has_report) json_object_set_new(line, "planning", plan_report_json(&f->report));
        vdnn_json_line(r->log, line);
    }
    if (st == VDNN_OK && f->save) st = check_writable(f->save);
    if (st == VDNN_OK && f->trace) st = trace_open(f->trace, &r->tr);
    if (st == VDNN_OK && r->tr) {
        r->n->trace = r->tr;
        device_set_trace(r->d, r->tr);
    }
    return st;
}

/* The shares changed by the manager, or by hand at given steps. */
static vdnn_status open_share_hooks(const char *cfg, const run_flags *f, train_run_state *r, train_opts *o)
{
    vdnn_status st = VDNN_OK;
    if (f->share_schedule && (st = shares_load(f->share_schedule, f->group, &r->schedule)) == VDNN_OK) {
        o->before_step = shares_tick;
        o->hook_ctx = r->schedule;
    }
    if (st == VDNN_OK && f->managed) {
        char path[256];
        st = mgr_socket_path(f->manager, 0, path, sizeof path);
        if (st == VDNN_OK) st = mgr_client_open(path, cfg, f->group, (int)f->share_every, f->quiet, &r->client);
        o->before_step = mgr_client_tick;
        o->hook_ctx = r->client;
    }
    return st;
}

/* The lines before the first step: what trains where, and where its weights go. */
static void announce(const char *cfg, const run_flags *f, const train_run_state *r, FILE *out)
{
    const net *n = r->n;
    if (f->group) {
        fprintf(out, "vdnn: training %s on %d devices (%d rank%s; this rank's first: %s): %d train / %d test images, "
                "batch %d, shares", cfg, dp_devices(f->group), comm_size(f->comm), comm_size(f->comm) == 1 ? "" : "s",
                device_describe(r->d), r->train->count, r->test->count, dp_batch(f->group));
        for (int k = 0; k < dp_devices(f->group); k++) fprintf(out, "%s%d", k ? ":" : " ", dp_shares(f->group)[k]);
        fprintf(out, "%s, %d epochs, policy %s, %s algorithms\n",
                f->managed ? " (the manager's to set)" : f->shares && !strcmp(f->shares, "auto") ? " (auto)" : "",
                n->train.epochs, n->dyn ? "dyn" : policy_name(n->policy), algo_mode_name(n->algo));
    } else {
        fprintf(out, "vdnn: training %s on %s: %d train / %d test images, batch %d%s%.0d, %d epochs, policy %s, "
                "%s algorithms\n", cfg, device_describe(r->d), r->train->count, r->test->count, n->minibatch,
                n->micro ? " in micro-batches of " : "", n->micro, n->train.epochs,
                n->dyn ? "dyn" : f->plan ? f->plan : policy_name(n->policy), algo_mode_name(n->algo));
    }
    if (f->save)
        fprintf(out, "vdnn: %s the weights in %s at every epoch's end and when stopped%s\n",
                f->resume && !strcmp(f->save, f->resume) ? "resumed; keeping" : "keeping", f->save,
                f->default_save ? " (--save FILE to choose, --no-save for none)" : "");
    else
        fprintf(out, "vdnn: keeping no weights (--no-save)\n");
    fflush(out);
}

/* train_run with SIGINT and SIGTERM asking it to stop at the next step. */
static vdnn_status run_until_signal(train_run_state *r, const train_opts *o, train_summary *s)
{
    struct sigaction sa = {.sa_handler = on_interrupt}, old_int, old_term;
    interrupt_tty = isatty(STDERR_FILENO);
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    vdnn_status st = train_run(r->n, r->train, r->test, o, s);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return st;
}

static void report_done(const run_flags *f, device *d, const train_summary *s, FILE *out)
{
    char peak[32];
    fprintf(out, "done: %lld step%s, %.0f img/s, pool peak %s", s->steps, s->steps == 1 ? "" : "s", s->images_per_s,
            vdnn_fmt_bytes(s->pool_peak_bytes, peak, sizeof peak));
    if (device_vendor_bytes(d))
        fprintf(out, " (+ %s held by the CUDA runtime, cuDNN and cuBLAS)",
                vdnn_fmt_bytes(device_vendor_bytes(d), peak, sizeof peak));
    if (s->test_acc >= 0) fprintf(out, ", test accuracy %.2f%%", 100 * s->test_acc);
    fprintf(out, "%s%s\n", f->save ? ", saved " : "", f->save ? f->save : "");
}

/* Closes what the run opened but the net, device and data; returns st or the first
 * failure closing them. A failing rank of several ends the job. */
static vdnn_status close_run(run_flags *f, train_run_state *r, vdnn_status st, const train_summary *s)
{
    if (r->tr) {
        device_stream_sync(r->d, STREAM_MEMORY);
        device_set_trace(r->d, NULL);
        vdnn_status tst = trace_close(r->tr);
        if (st == VDNN_OK) st = tst;
    }
    mgr_client_close(r->client, st != VDNN_OK ? "failed" : s->interrupted ? "stopped" : "finished");
    shares_free(r->schedule);
    st = close_log(r->log, f->log, st);
    if (st != VDNN_OK && comm_size(f->comm) > 1) {
        /* the other ranks would wait for this one: end the job */
        fprintf(stderr, "vdnn: rank %d: %s\n", r->rank, vdnn_errmsg());
        fflush(stderr);
        comm_abort(f->comm, 1);
    }
    return st;
}

/* The exit code of an interrupted run, after saying what was kept and how to go on. */
static int interrupted_exit(const char *cfg, const run_flags *f, int rank, const train_summary *s)
{
    /* a rank stopped by another rank's signal exits as that one does */
    fprintf(stderr, "vdnn: interrupted (%s) after %lld steps; ",
            !interrupted ? "a signal to another rank" : interrupted == SIGTERM ? "SIGTERM" : "SIGINT", s->steps);
    if (f->save)
        fprintf(stderr, "weights saved to %s (continue: vdnn train %s --resume %s)\n", f->save, cfg, f->save);
    else
        fprintf(stderr, "%s\n", rank > 0 ? "rank 0 saves the job's weights" : "no weights kept (--no-save)");
    return 128 + (interrupted ? interrupted : SIGTERM);
}

int cmd_train(int argc, char **argv)
{
    run_flags f = {.device = "auto", .epochs = -1, .steps = -1, .batch = -1, .seed = -1,
                   .node_limit = PLAN_NODE_LIMIT, .search_seconds = PLAN_SEARCH_SECONDS, .search_gap = PLAN_SEARCH_GAP, .rank_timeout = 300};
    const char *cfg = NULL;
    if (parse_train(argc, argv, &f, &cfg) != VDNN_OK) return cli_error();
    cli_quit_on_signal("train", f.resume ? "before its first step (the checkpoint it resumes is as it was)"
                                         : "before its first step (no weights written)");
    if (f.reprofile) profile_refresh();
    profile_cache_default(f.cache);
    if (comm_open(f.rank_timeout, &f.comm) != VDNN_OK) return cli_error();
    train_run_state r = {.parallel = f.devices || comm_size(f.comm) > 1, .rank = comm_rank(f.comm)};
    vdnn_status st = open_run(cfg, &f, &r);
    train_opts o = {.max_steps = f.steps, .save_path = f.save, .resume_path = f.resume, .init_path = f.init,
                    .log = r.log, .quiet = f.quiet, .out = stdout, .group = f.group, .comm = f.comm, .log_path = f.log,
                    .interrupt = &interrupted, .predicted_step_s = f.predicted_s, .prediction_source = f.prediction_source};
    if (st == VDNN_OK) st = open_share_hooks(cfg, &f, &r, &o);
    if (st == VDNN_OK && cli_progress_tty() && !f.quiet) {
        o.tty = 1;
        o.out = stderr;
    }
    if (st == VDNN_OK && !f.quiet) announce(cfg, &f, &r, o.out);
    train_summary s = {0};
    if (st == VDNN_OK) st = run_until_signal(&r, &o, &s);
    if (st == VDNN_OK && !f.quiet) report_done(&f, r.d, &s, o.out);
    st = close_run(&f, &r, st, &s);
    int rc = st == VDNN_OK ? 0 : cli_error();
    if (st == VDNN_OK && s.interrupted) rc = interrupted_exit(cfg, &f, r.rank, &s);
    if (r.parallel) close_parallel(&f, r.train, r.test);
    else close_all(r.n, r.d, r.train, r.test);
    comm_close(f.comm);
    return rc;
}

int cmd_test(int argc, char **argv)
{
    run_flags f = {.device = "auto", .epochs = -1, .steps = -1, .batch = -1, .seed = -1};
    const char *cfg = NULL;
    arg_spec specs[] = {
        {"--weights", ARG_STRING, &f.weights, 0, 0, "the checkpoint to test (default: the newest train kept for CFG)", 0},
        {"--data", ARG_STRING, &f.data, 0, 0, "the data set's folder or file (default: [data] path)", 0},
        {"--batch", ARG_INT, &f.batch, 1, TRAIN_MAX_BATCH, HELP_BATCH, 0},
        {"--device", ARG_STRING, &f.device, 0, 0, HELP_DEVICE, 0},
        {"--math", ARG_STRING, &cli_math, 0, 0, HELP_MATH, 0},
        {"--nondeterministic", ARG_FLAG, &cli_nondeterministic, 0, 0, HELP_NONDETERMINISTIC, 0},
        {"--budget", ARG_BYTES, &f.budget, 0, 0, "device memory the run must fit in", 0},
        {"--threads", ARG_INT, &f.threads, 1, 1024, HELP_THREADS, 0},
        {"--workers", ARG_INT, &f.workers, 1, 64, HELP_WORKERS, 0},
        {"--log", ARG_STRING, &f.log, 0, 0, "one JSON line: test_acc, test_loss and the images tested", 0},
        {NULL, 0, NULL, 0, 0, NULL, 0},
    };
    if (args_parse(argc, argv, 2, specs, &cfg, 1, "vdnn test CFG --weights FILE [--data PATH] [--log FILE]") != VDNN_OK)
        return cli_error();
    char newest[1024];
    if (!f.weights && newest_run(cfg, newest, sizeof newest)) {
        f.weights = newest;
        printf("vdnn: testing %s, the newest of the weights train kept for %s (--weights FILE to choose)\n", newest,
               cfg);
    }
    if (!f.weights) {
        vdnn_fail(VDNN_EINVAL, "test needs --weights FILE: train has kept no weights for %s in %s (it keeps them in "
                  "RUNS/CONFIG.ckpt unless --no-save; RUNS is $VDNN_RUNS, else runs/ in the current folder)", cfg,
                  runs_dir());
        return cli_error();
    }
    net *n = NULL;
    device *d = NULL;
    dataset *test = NULL;
    FILE *log = NULL;
    double acc = 0, loss = 0;
    vdnn_status st = open_all(cfg, &f, 0, &n, &d, NULL, &test);
    if (st == VDNN_OK) st = checkpoint_load(n, f.weights, NULL, 1);
    if (st == VDNN_OK && f.log && !(log = open_log(f.log))) st = VDNN_EIO;
    if (st == VDNN_OK) st = evaluate(n, test, &acc, &loss);
    if (st == VDNN_OK) {
        printf("test accuracy %.2f%% (%d images), loss %.4f\n", 100 * acc, test->count, loss);
        if (log)
            vdnn_json_line(log, json_pack("{s:o, s:o, s:i}", "test_acc", vdnn_json_real(acc, 6), "test_loss",
                                          vdnn_json_real(loss, 6), "images", test->count));
    }
    st = close_log(log, f.log, st);
    int rc = st == VDNN_OK ? 0 : cli_error();
    close_all(n, d, NULL, test);
    return rc;
}
