/* The training loop (see trainer.h). */
#include "nets/trainer.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nets/checkpoint.h"
#include "nets/planner/planner.h"
#include "vdnn/json.h"

/* The line of key `key` in the section whose header is at `line`; 0 if it has none. */
static int key_line(const net *n, int line, const char *key)
{
    for (int i = 0; i < n->cfg->nsec; i++) {
        const cfg_kv *kv = n->cfg->sec[i].line == line ? cfg_find(&n->cfg->sec[i], key) : NULL;
        if (kv) return kv->line;
    }
    return 0;
}

/* The class count is what the loss reads per item: the output of the layer it reads (a
 * [connected]'s `output`), or the net's input itself for a [softmax] alone. The message
 * names that line and what to change there. */
vdnn_status check_classes(const net *n, const dataset *d)
{
    if (d->classes == n->classes) return VDNN_OK;
    const layer *loss = n->layers[n->nlayers - 1];
    int map = loss->input[0];
    char or_data[64] = "";   /* a synthetic set's classes are the config's to change too */
    if (!strcmp(n->data.set, "synthetic")) snprintf(or_data, sizeof or_data, "; or set [data] classes = %d", n->classes);
    if (map == 0)
        return vdnn_fail(VDNN_EINVAL, "%s:%d: the [%s] reads the net's input, %d values per item, as class scores, "
                         "but %s has %d classes: put a layer of %d outputs before it (e.g. [connected] with output "
                         "= %d)%s", n->cfg->path, loss->line, loss->ops->type, n->classes, d->source, d->classes,
                         d->classes, d->classes, or_data);
    const layer *last = n->layers[map - 1];
    int line = key_line(n, last->line, "output");
    if (line)
        return vdnn_fail(VDNN_EINVAL, "%s:%d: the net classifies into %d outputs but %s has %d classes "
                         "(set this [%s] layer's output = %d%s)", n->cfg->path, line, n->classes, d->source,
                         d->classes, last->ops->type, d->classes, or_data);
    return vdnn_fail(VDNN_EINVAL, "%s:%d: the loss reads this [%s] layer's %d outputs per item as class scores, but "
                     "%s has %d classes: end the net with a layer of %d outputs before the loss (e.g. [connected] "
                     "with output = %d)%s", n->cfg->path, last->line, last->ops->type, n->classes, d->source,
                     d->classes, d->classes, d->classes, or_data);
}

vdnn_status check_train_settings(const net *n)
{
    if (n->train.given) return VDNN_OK;
    return vdnn_fail(VDNN_EINVAL, "%s: no [train] section: training needs one (epochs, learning_rate; "
                     "docs/config.md); info, profile, sweep and test do not", n->cfg->path);
}

/* Host staging buffers (pinned on CUDA) for one batch; the iteration copies them into
 * x[0] and the labels, which come from the pool. */
typedef struct batch_io {
    float *host_x;      /* (N, C, H, W) */
    int32_t *host_y;    /* (N) */
} batch_io;

static vdnn_status io_open(net *n, int batch, batch_io *b)
{
    b->host_x = device_host_alloc(n->dev, (size_t)batch * shape_per_item(n->input) * sizeof(float));
    b->host_y = device_host_alloc(n->dev, (size_t)batch * sizeof(int32_t));
    if (!b->host_x || !b->host_y) return vdnn_fail(VDNN_ENOMEM, "out of host memory for the input batch");
    return VDNN_OK;
}

static void io_close(net *n, batch_io *b)
{
    device_host_free(n->dev, b->host_x);
    device_host_free(n->dev, b->host_y);
}

static void *host_alloc(void *dev, size_t bytes) { return device_host_alloc(dev, bytes); }
static void host_release(void *dev, void *p) { device_host_free(dev, p); }

/* The loader's batches in the device's host memory (pinned on a GPU), as the staging
 * buffers are: a ready batch changes places with them (loader_next_swap), no copy. */
static loader_mem host_memory(net *n)
{
    loader_mem m = {host_alloc, host_release, n->dev};
    return m;
}

/* The epoch's line says how long training waited for data when that was more than
 * this share of its steps' time. */
#define DATA_WAIT_SHOWN 0.05

/* Most unreadable files printed one by one in an epoch; the rest are counted. */
#define SKIPPED_SHOWN 20

/* Prints the files the loader skipped since the last call (up to SKIPPED_SHOWN of
 * `*shown`) and adds them to *count. */
static void report_skipped(loader *ld, FILE *out, int quiet, int tty, int *count, int *shown)
{
    char msgs[2048];
    int k = loader_take_skipped(ld, msgs, sizeof msgs);
    if (!k) return;
    *count += k;
    for (char *line = msgs; !quiet && *line && *shown < SKIPPED_SHOWN; (*shown)++) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (tty) fprintf(out, "\r\033[K");
        fprintf(out, "vdnn: warning: skipped an unreadable file (another takes its place): %s\n", line);
        if (!nl) break;
        line = nl + 1;
    }
    fflush(out);
}

vdnn_status evaluate(net *n, const dataset *d, double *acc, double *loss)
{
    loader_opts lo = {n->input.n, 0, 0, n->train.seed, &n->data, device_host_threads(n->dev), host_memory(n)};
    int skipped = 0, shown = 0;
    loader *ld = NULL;
    batch_io b = {0};
    step_result r = {0};
    vdnn_status st = check_classes(n, d);
    if (st == VDNN_OK) st = io_open(n, n->input.n, &b);
    if (st == VDNN_OK) st = loader_create(d, &lo, &ld);
    for (int items = 1; st == VDNN_OK;) {
        st = loader_next_swap(ld, &b.host_x, &b.host_y, &items);
        if (st == VDNN_OK) report_skipped(ld, stderr, 0, 0, &skipped, &shown);
        if (st != VDNN_OK || items == 0) break;
        st = net_eval_batch(n, b.host_x, b.host_y, items, &r);
    }
    if (skipped) fprintf(stderr, "vdnn: warning: %d unreadable files of %s skipped in the evaluation\n", skipped, d->source);
    loader_destroy(ld);
    io_close(n, &b);
    if (st != VDNN_OK) return st;
    *acc = r.n ? (double)r.correct / r.n : 0;
    *loss = r.n ? r.loss_sum / r.n : 0;
    return VDNN_OK;
}

/* ---- progress ---- */

/* The steps the speed and the time left are measured over: this process's own last
 * steps, so that neither a resumed position nor a slow first step skews them. */
#define PROGRESS_WINDOW 16

/* The prediction check: the median of this many full steps after the first, and the
 * miss past which it warns. */
#define PREDICT_STEPS 5
#define PREDICT_MISS 0.25
/* Below this a step's fixed costs (launches, the host's bookkeeping) outweigh what the
 * profile measures: no check. */
#define PREDICT_MIN_S 2e-3

typedef struct progress {
    const train_opts *o;
    const net *n;
    int epoch, epochs;
    long long epoch_items, epoch_total;
    double epoch_start, train_time, last_draw;
    double loss_sum;
    long long correct, seen;
    mm_stats stats0;          /* the net's copy statistics when the epoch began */
    long long run_steps;      /* steps this run takes in all */
    long long done_steps;     /* steps this run has taken */
    double last_step_s;       /* the last step's wall seconds; 0 before the first */
    double win_s[PROGRESS_WINDOW];   /* the last steps' wall seconds and items, a ring */
    int win_items[PROGRESS_WINDOW];
    int win_count, win_next;
    int batch;                /* a full step's items */
    double check_s[PREDICT_STEPS];   /* full steps 2.. of the run, for the prediction check */
    int nchecked;
    int skipped, skipped_shown;      /* unreadable files the loader replaced this epoch */
    double data_wait;                /* seconds this epoch waited for the loader's batches */
} progress;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The prediction check (train_opts.predicted_step_s), after each step. */
static void check_prediction(progress *p, int items, double secs)
{
    const train_opts *o = p->o;
    if (!(o->predicted_step_s >= PREDICT_MIN_S) || o->quiet || p->nchecked >= PREDICT_STEPS) return;
    if (p->done_steps <= 1 || items != p->batch) return;   /* the first warms up; a short last step differs */
    p->check_s[p->nchecked++] = secs;
    if (p->nchecked < PREDICT_STEPS) return;
    double s[PREDICT_STEPS];
    memcpy(s, p->check_s, sizeof s);
    qsort(s, PREDICT_STEPS, sizeof *s, cmp_double);
    double median = s[PREDICT_STEPS / 2], miss = median / o->predicted_step_s - 1;
    if (fabs(miss) <= PREDICT_MISS) return;
    if (o->tty) fprintf(o->out, "\r\033[K");
    fprintf(o->out,
            "vdnn: warning: steps take %.1f ms, %.0f%% %s than the plan's prediction of %.1f ms: %s was likely "
            "measured while the machine was %s than now; --reprofile measures it again\n",
            1e3 * median, 100 * fabs(miss), miss > 0 ? "slower" : "faster", 1e3 * o->predicted_step_s,
            o->prediction_source ? o->prediction_source : "the profile", miss > 0 ? "less busy" : "busier");
    fflush(o->out);
}

static void progress_step(progress *p, int items, double secs)
{
    p->win_s[p->win_next] = secs;
    p->win_items[p->win_next] = items;
    p->win_next = (p->win_next + 1) % PROGRESS_WINDOW;
    if (p->win_count < PROGRESS_WINDOW) p->win_count++;
    p->done_steps++;
}

/* Images per second and seconds per step over the window (0 before the first step). */
static void progress_rate(const progress *p, double *ips, double *step_s)
{
    double s = 0;
    long long items = 0;
    for (int k = 0; k < p->win_count; k++) s += p->win_s[k], items += p->win_items[k];
    *ips = s > 0 ? (double)items / s : 0;
    *step_s = p->win_count ? s / p->win_count : 0;
}

static void fmt_time(double s, char *buf, size_t len)
{
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, len, "%ld:%02ld", t / 60, t % 60);
}

static void draw_bar(progress *p, int force)
{
    double now = vdnn_now_s();
    if (!p->o->tty || p->o->quiet || (!force && now - p->last_draw < 0.1)) return;
    p->last_draw = now;
    double frac = p->epoch_total ? (double)p->epoch_items / (double)p->epoch_total : 0, ips, step_s;
    progress_rate(p, &ips, &step_s);
    char bar[31], eta[16], peak[32];
    int fill = (int)(frac * 30);
    for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
    bar[30] = 0;
    /* the whole run's steps left (epochs to come included), at the recent pace */
    long long left = p->run_steps > p->done_steps ? p->run_steps - p->done_steps : 0;
    fmt_time((double)left * step_s, eta, sizeof eta);
    vdnn_fmt_bytes(p->n->peak_iter_bytes, peak, sizeof peak);
    fprintf(p->o->out, "\repoch %d/%d [%s] %3.0f%%  %.0f img/s  loss %.4f  acc %.1f%%  ETA %s  pool %s \033[K",
            p->epoch + 1, p->epochs, bar, 100 * frac, ips, p->seen ? p->loss_sum / p->seen : 0,
            p->seen ? 100.0 * p->correct / p->seen : 0, eta, peak);
    fflush(p->o->out);
}

/* A step's line of the log (docs/cli.md: --log). */
static void log_step(const train_opts *o, const net *n, int epoch, double loss, double lr, double secs, double wait)
{
    if (!o->log) return;
    json_t *line = json_pack("{s:I, s:i, s:o, s:o, s:o, s:o}", "step", (json_int_t)n->step, "epoch", epoch + 1, "loss",
                             vdnn_json_real(loss, 6), "lr", vdnn_json_real(lr, 6), "step_time_ms",
                             vdnn_json_fixed(1e3 * secs, 4), "data_wait_ms", vdnn_json_fixed(1e3 * wait, 4));
    if (line && o->group) {   /* the items each device of the job took, and the reduction not hidden */
        json_object_set_new(line, "shares", vdnn_json_ints(dp_shares(o->group), dp_devices(o->group)));
        json_object_set_new(line, "reduce_exposed_ms", vdnn_json_fixed(1e3 * dp_exposed_s(o->group), 4));
    }
    vdnn_json_line(o->log, line);
}

/* The memory and copy fields of an epoch's line and of the final one: exact bytes. */
static void log_memory(json_t *line, const net *n, const mm_stats *m, size_t vendor_bytes)
{
    if (!line) return;
    json_object_set_new(line, "pool_peak_bytes", json_integer((json_int_t)n->peak_iter_bytes));
    json_object_set_new(line, "offload_bytes", json_integer((json_int_t)m->offload_bytes));
    json_object_set_new(line, "prefetch_bytes", json_integer((json_int_t)m->prefetch_bytes));
    json_object_set_new(line, "copy_wait_s", vdnn_json_real(m->wait_s, 6));
    json_object_set_new(line, "vendor_bytes", json_integer((json_int_t)vendor_bytes));
}

static void report_epoch(progress *p, double test_acc, double test_loss, double lr)
{
    const train_opts *o = p->o;
    double ips = p->train_time > 0 ? p->seen / p->train_time : 0;
    double loss = p->seen ? p->loss_sum / p->seen : 0, acc = p->seen ? (double)p->correct / p->seen : 0;
    mm_stats m = p->n->stats;
    m.offload_bytes -= p->stats0.offload_bytes;
    m.prefetch_bytes -= p->stats0.prefetch_bytes;
    m.wait_s -= p->stats0.wait_s;
    char peak[32], off[32];
    vdnn_fmt_bytes(p->n->peak_iter_bytes, peak, sizeof peak);
    vdnn_fmt_bytes(m.offload_bytes, off, sizeof off);
    if (!o->quiet) {
        if (o->tty) fprintf(o->out, "\r\033[K");
        fprintf(o->out, "epoch %d/%d  train loss %.4f acc %.2f%%  test loss %.4f acc %.2f%%  %.0f img/s  %.1f s  "
                "pool peak %s", p->epoch + 1, p->epochs, loss, 100 * acc, test_loss, 100 * test_acc, ips,
                vdnn_now_s() - p->epoch_start, peak);
        if (m.offload_bytes) fprintf(o->out, "  offloaded %s, waited %.2f s", off, m.wait_s);
        if (p->skipped) fprintf(o->out, "  %d unreadable files skipped", p->skipped);
        if (p->data_wait > DATA_WAIT_SHOWN * p->train_time)
            fprintf(o->out, "  waited %.1f s for data (more loader workers?)", p->data_wait);
        fprintf(o->out, "\n");
        fflush(o->out);
    }
    if (o->log) {
        json_t *line = json_pack("{s:i, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "epoch", p->epoch + 1, "step",
                                 (json_int_t)p->n->step, "lr", vdnn_json_real(lr, 6), "train_loss",
                                 vdnn_json_real(loss, 6), "train_acc", vdnn_json_real(acc, 6), "test_loss",
                                 vdnn_json_real(test_loss, 6), "test_acc", vdnn_json_real(test_acc, 6),
                                 "images_per_s", vdnn_json_real(ips, 6), "epoch_time_s",
                                 vdnn_json_real(vdnn_now_s() - p->epoch_start, 6));
        log_memory(line, p->n, &m, device_vendor_bytes(p->n->dev));
        json_object_set_new(line, "skipped_files", json_integer(p->skipped));
        json_object_set_new(line, "data_wait_s", vdnn_json_real(p->data_wait, 6));
        vdnn_json_line(o->log, line);
        fflush(o->log);
    }
}

/* The record written however training stops: an epoch record's memory and copy fields,
 * over the whole run, exact bytes; `stopped` says why ("epochs", "steps", "interrupted"
 * or "error", with the message). It has no "train_loss", so that readers that take the lines with
 * one for epoch records (bench/accuracy.sh) still do. */
static void log_final(const train_opts *o, const net *n, const mm_stats *stats0, const train_summary *s,
                      int epoch, const char *stopped, const char *error)
{
    if (!o->log) return;
    mm_stats m = n->stats;
    m.offload_bytes -= stats0->offload_bytes;
    m.prefetch_bytes -= stats0->prefetch_bytes;
    m.wait_s -= stats0->wait_s;
    json_t *line = json_pack("{s:b, s:s, s:i, s:I, s:I, s:o}", "final", 1, "stopped", stopped, "epoch", epoch + 1,
                             "step", (json_int_t)n->step, "steps", (json_int_t)s->steps, "images_per_s",
                             vdnn_json_real(s->images_per_s, 6));
    log_memory(line, n, &m, n->dev ? device_vendor_bytes(n->dev) : 0);
    if (line && error) json_object_set_new(line, "error", vdnn_json_text(error));
    vdnn_json_line(o->log, line);
}

/* Whether everything logged so far reached the file: a full disk is an error, not an
 * empty log. */
static vdnn_status log_status(const train_opts *o)
{
    if (!o->log) return VDNN_OK;
    int bad = fflush(o->log) != 0 || ferror(o->log);
    if (!bad) return VDNN_OK;
    return vdnn_fail(VDNN_EIO, "%s: writing the log failed: %s", o->log_path ? o->log_path : "the log",
                     strerror(errno ? errno : EIO));
}

/* ---- the loop ---- */

/* The batch a step of this run takes: a data-parallel group's whole batch, not its
 * primary replica's share. */
static int run_batch(const net *n, const train_opts *o) { return o->group ? dp_batch(o->group) : n->minibatch; }

/* Saves the position the loader will read next; at the end of an epoch that is the
 * start of the next one, so a resumed run does not end (and evaluate) that epoch twice. */
static vdnn_status save(net *n, const train_opts *o, loader *ld, int count)
{
    if (!o->save_path) return VDNN_OK;
    int epoch, index;
    loader_position(ld, &epoch, &index);
    if (index >= count) {
        epoch++;
        index = 0;
    }
    ckpt_state s = {n->step, (uint64_t)epoch, (uint64_t)index, n->train.seed, (uint32_t)run_batch(n, o)};
    return checkpoint_save(n, o->save_path, &s);
}

static int epoch_done(loader *ld, int count)
{
    int epoch, index;
    loader_position(ld, &epoch, &index);
    return index >= count;
}

/* The checkpoint's convolution algorithms (checkpoint_load applied them) run only when
 * the net's plan with them fits the device's budget: a plan fitted to other algorithms
 * (--algo mem, a smaller --budget) would fail at its first step. Else the run keeps its
 * own algorithms, `saved`, and says so: training continues from the checkpoint, but not
 * bit for bit as the run that saved it. */
static vdnn_status fit_resumed_algos(net *n, const train_opts *o, int (*saved)[PASS_COUNT])
{
    int same = 1;
    for (int i = 0; i < n->nlayers; i++) same &= !memcmp(saved[i], n->layers[i]->algo, sizeof saved[i]);
    if (same) return VDNN_OK;
    plan p = {0};
    simulator *sim = NULL;
    double t = 0;
    size_t peak = 0;
    pool_stats ps;
    pool_get_stats(device_pool(n->dev), &ps);
    vdnn_status st = plan_from_net(n, &p);
    if (st == VDNN_OK) st = sim_create(n, NULL, &sim);
    if (st == VDNN_OK) st = sim_run(sim, &p, &t, &peak);
    sim_destroy(sim);
    plan_free(&p);
    if (st != VDNN_OK || peak <= ps.capacity_bytes) return st;
    for (int i = 0; i < n->nlayers; i++) memcpy(n->layers[i]->algo, saved[i], sizeof saved[i]);
    if (!o->quiet) {
        char need[48], have[48];
        fprintf(o->out, "vdnn: %s: its convolution algorithms need %s with this plan, more than the budget of %s: "
                "keeping this run's; training continues from the checkpoint, but not bit for bit as the run that "
                "saved it\n", o->resume_path, vdnn_fmt_bytes_exact(peak, need, sizeof need),
                vdnn_fmt_bytes_exact(ps.capacity_bytes, have, sizeof have));
        fflush(o->out);
    }
    return VDNN_OK;
}

/* Loads the checkpoint and checks where it resumes: the seed, and a position inside the
 * training set of `count` items. */
static vdnn_status resume(net *n, const train_opts *o, int count, int *epoch, int *index)
{
    *epoch = 0;
    *index = 0;
    if (!o->resume_path) return VDNN_OK;
    int (*saved)[PASS_COUNT] = malloc((size_t)n->nlayers * sizeof *saved);
    if (!saved) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    for (int i = 0; i < n->nlayers; i++) memcpy(saved[i], n->layers[i]->algo, sizeof saved[i]);
    ckpt_state s = {0};
    /* data-parallel: rank 0 reads it, and every replica of every rank takes its state */
    vdnn_status st = comm_rank(o->comm) == 0 ? checkpoint_load(n, o->resume_path, &s, 0) : VDNN_OK;
    if (st == VDNN_OK && o->group) st = comm_bcast(o->comm, &s, sizeof s, 0);
    if (st == VDNN_OK && o->group) st = dp_sync(o->group, &s.step);
    if (st == VDNN_OK && s.seed != n->train.seed)
        st = vdnn_fail(VDNN_EINVAL, "%s: saved with seed %llu but the run uses seed %llu (resume with --seed %llu)",
                       o->resume_path, (unsigned long long)s.seed, (unsigned long long)n->train.seed,
                       (unsigned long long)s.seed);
    /* a step is a batch: at another size the steps, the data position's batches and the
     * exact resume would all be another run's */
    if (st == VDNN_OK && s.batch != (uint32_t)run_batch(n, o))
        st = vdnn_fail(VDNN_EINVAL, "%s: saved at batch %u but the run's batch is %d (resume with --batch %u, the "
                       "batch it was saved at: a checkpoint continues its run only at that batch)", o->resume_path,
                       s.batch, run_batch(n, o), s.batch);
    if (st == VDNN_OK && s.epoch > INT_MAX)
        st = vdnn_fail(VDNN_EFORMAT, "%s: the checkpoint resumes at epoch %llu, beyond any run (at most %d)",
                       o->resume_path, (unsigned long long)s.epoch + 1, INT_MAX);
    if (st == VDNN_OK && s.index > (uint64_t)count)
        st = vdnn_fail(VDNN_EFORMAT, "%s: the checkpoint resumes at item %llu of an epoch, but the training set "
                       "has %d items (a checkpoint of another data set?)", o->resume_path,
                       (unsigned long long)s.index, count);
    if (st == VDNN_OK) st = fit_resumed_algos(n, o, saved);
    if (st != VDNN_OK) {
        for (int i = 0; i < n->nlayers; i++) memcpy(n->layers[i]->algo, saved[i], sizeof saved[i]);
    } else {
        n->step = s.step;
        *epoch = (int)s.epoch;
        *index = (int)s.index;
    }
    free(saved);
    return st;
}

/* Fine-tuning: the weights of o->init_path that match the net by name and shape, on
 * rank 0's primary and then on every replica; says what it kept and left fresh. */
static vdnn_status init_weights(net *n, const train_opts *o)
{
    if (!o->init_path) return VDNN_OK;
    if (o->resume_path)
        return vdnn_fail(VDNN_EINVAL, "--init %s and --resume %s: a run resumes its own checkpoint or starts from "
                         "another's weights, not both", o->init_path, o->resume_path);
    ckpt_init_report rep;
    vdnn_status st = comm_rank(o->comm) == 0 ? checkpoint_init(n, o->init_path, &rep) : VDNN_OK;
    uint64_t step = n->step;
    if (st == VDNN_OK && o->group) st = dp_sync(o->group, &step);
    if (st != VDNN_OK) return vdnn_wrap(st, "--init");
    if (!o->quiet && comm_rank(o->comm) == 0) {
        fprintf(o->out, "vdnn: weights from %s: %d of %d tensors kept%s%s\n", o->init_path, rep.kept, rep.total,
                rep.kept < rep.total ? "; fresh: " : " (all)", rep.fresh);
        fflush(o->out);
    }
    return VDNN_OK;
}

/* Whether a signal asked the run to stop. The ranks of a job stop together: a signal
 * that reached some of them only (mpirun forwards it to all, at slightly different
 * moments) stops every rank before the same step, or one would wait for the others. */
static int interrupted(const train_opts *o)
{
    int mine = o->interrupt && *o->interrupt;
    if (!o->group || comm_size(o->comm) <= 1) return mine;
    double any = mine;
    return comm_sum_doubles(o->comm, &any, 1) == VDNN_OK ? any > 0 : mine;
}

/* Runs the rest of one epoch; *stop is set when max_steps is reached (1) or the run is
 * interrupted (2). A data-parallel group may rebuild its primary replica for a new
 * share: *np follows it. */
static vdnn_status run_epoch(net **np, loader *ld, batch_io *b, progress *p, double lr, long long *steps, int *stop)
{
    net *n = *np;
    const train_opts *o = p->o;
    for (;;) {
        int items = 0;
        double w0 = vdnn_now_s();
        vdnn_status st = loader_next_swap(ld, &b->host_x, &b->host_y, &items);
        double wait = vdnn_now_s() - w0;
        p->data_wait += wait;
        if (st == VDNN_OK) report_skipped(ld, o->out, o->quiet, o->tty, &p->skipped, &p->skipped_shown);
        if (st != VDNN_OK || items == 0) return st;
        if (o->before_step) {
            train_tick t = {n->step + 1, *steps, p->run_steps, p->epoch + 1, p->epochs, p->last_step_s, o->log};
            st = o->before_step(o->hook_ctx, &t);
            if (o->group) *np = n = dp_primary(o->group);
            p->n = n;
            if (st != VDNN_OK) return st;
        }
        double t0 = vdnn_now_s();
        step_result r;
        st = o->group ? dp_train_step(o->group, b->host_x, b->host_y, items, lr, &r)
                      : net_train_step(n, b->host_x, b->host_y, items, lr, &r);
        if (o->group) {
            *np = n = dp_primary(o->group);
            p->n = n;
        }
        if (st != VDNN_OK) return st;
        double secs = vdnn_now_s() - t0;
        p->last_step_s = secs;
        progress_step(p, items, secs);
        check_prediction(p, items, secs);
        p->train_time += secs;
        p->loss_sum += r.loss_sum;
        p->correct += r.correct;
        p->seen += items;
        p->epoch_items += items;
        (*steps)++;
        log_step(o, n, p->epoch, r.loss_sum / items, lr, secs, wait);
        draw_bar(p, 0);
        int done = o->max_steps > 0 && *steps >= o->max_steps;
        if (interrupted(o) || done) {
            *stop = done ? 1 : 2;
            return VDNN_OK;
        }
    }
}

/* The checks before a run and the resumption: on failure the log's final record says
 * so. */
static vdnn_status begin_run(net *n, const dataset *train, const dataset *test, const train_opts *o,
                             train_summary *s, int *epoch, int *index)
{
    vdnn_status st = check_train_settings(n);
    if (st == VDNN_OK) st = check_classes(n, train);
    if (st == VDNN_OK && test) st = check_classes(n, test);
    mm_stats stats0 = n->stats;
    if (st == VDNN_OK) st = resume(n, o, train->count, epoch, index);
    if (st == VDNN_OK) st = init_weights(n, o);
    if (st != VDNN_OK) {
        char error[1024];
        snprintf(error, sizeof error, "%s", vdnn_errmsg());
        log_final(o, n, &stats0, s, *epoch, "error", error);
        log_status(o);
        return vdnn_fail(st, "%s", error);
    }
    if (o->resume_path && !o->quiet) {
        fprintf(o->out, "vdnn: resumed from %s at epoch %d, step %llu (item %d of %d in the epoch)\n", o->resume_path,
                *epoch + 1, (unsigned long long)n->step, *index, train->count);
        fflush(o->out);
    }
    return VDNN_OK;
}

/* The steps this run takes from item `index` of epoch `epoch` (the progress bar's end). */
static long long steps_ahead(const net *n, const train_opts *o, int count, int batch, int epoch, int index)
{
    if (epoch >= n->train.epochs || batch <= 0) return 0;
    long long per_epoch = (count + batch - 1) / batch;
    long long steps = (count - index + batch - 1) / batch + (long long)(n->train.epochs - epoch - 1) * per_epoch;
    return o->max_steps > 0 && o->max_steps < steps ? o->max_steps : steps;
}

/* The epochs from `epoch` on, each ended by its evaluation, report and checkpoint;
 * *stop as run_epoch sets it (or 2 for an interrupt during an evaluation), *seen and
 * *train_time summed over the run. */
static vdnn_status run_epochs(net **np, const dataset *train, const dataset *test, const train_opts *o, loader *ld,
                              batch_io *b, progress *p, int epoch, int index, train_summary *s, int *stop,
                              long long *seen, double *train_time)
{
    vdnn_status st = VDNN_OK;
    for (; st == VDNN_OK && !*stop && epoch < (*np)->train.epochs; epoch++) {
        net *n = *np;
        double lr = net_lr_at(&n->train, epoch);
        p->epoch = epoch;
        p->epoch_items = index;
        p->epoch_total = train->count;
        p->epoch_start = p->last_draw = vdnn_now_s();
        p->train_time = p->loss_sum = 0;
        p->correct = p->seen = 0;
        p->skipped = p->skipped_shown = 0;
        p->data_wait = 0;
        p->stats0 = n->stats;
        index = 0;
        st = run_epoch(np, ld, b, p, lr, &s->steps, stop);
        n = *np;
        *train_time += p->train_time;
        *seen += p->seen;
        s->train_loss = p->seen ? p->loss_sum / p->seen : 0;
        if (st != VDNN_OK || (*stop && !epoch_done(ld, train->count))) break;
        if (test) st = evaluate(n, test, &s->test_acc, &s->test_loss);
        if (st == VDNN_OK) report_epoch(p, s->test_acc, s->test_loss, lr);
        if (st == VDNN_OK) st = save(n, o, ld, train->count);
        /* the checkpoint first: a log that cannot be written stops training after it */
        if (st == VDNN_OK) st = log_status(o);
        if (*stop) break;
        if (interrupted(o)) *stop = 2;   /* during the evaluation */
    }
    return st;
}

vdnn_status train_run(net *n, const dataset *train, const dataset *test, const train_opts *o, train_summary *s)
{
    memset(s, 0, sizeof *s);
    s->test_acc = -1;
    int epoch = 0, index = 0;
    mm_stats stats0 = n->stats;
    vdnn_status st = begin_run(n, train, test, o, s, &epoch, &index);
    if (st != VDNN_OK) return st;
    int batch = run_batch(n, o);
    loader_opts lo = {batch, 1, 1, n->train.seed, &n->data, device_host_threads(n->dev), host_memory(n)};
    loader *ld = NULL;
    batch_io b = {0};
    st = io_open(n, batch, &b);
    if (st == VDNN_OK) st = loader_create(train, &lo, &ld);
    if (st == VDNN_OK) loader_seek(ld, epoch, index);
    if (st == VDNN_OK && train->files && !o->quiet) {
        int k = loader_workers(ld);
        fprintf(o->out, "vdnn: decoding %s as training goes, %d loader worker%s (--workers N)\n", train->source, k,
                k == 1 ? "" : "s");
        fflush(o->out);
    }
    progress p = {.o = o, .n = n, .epochs = n->train.epochs, .batch = batch};
    p.run_steps = steps_ahead(n, o, train->count, batch, epoch, index);
    double train_time = 0;
    long long seen = 0;
    int stop = 0;
    if (st == VDNN_OK) st = run_epochs(&n, train, test, o, ld, &b, &p, epoch, index, s, &stop, &seen, &train_time);
    if (st == VDNN_OK && stop && !epoch_done(ld, train->count)) {
        if (o->tty && !o->quiet) fprintf(o->out, "\r\033[K");
        st = save(n, o, ld, train->count);
    }
    s->images_per_s = train_time > 0 ? seen / train_time : 0;
    s->pool_peak_bytes = pool_peak_bytes(device_pool(n->dev));
    char error[1024];
    snprintf(error, sizeof error, "%s", st == VDNN_OK ? "" : vdnn_errmsg());
    s->interrupted = stop == 2;
    log_final(o, n, &stats0, s, p.epoch,
              st != VDNN_OK ? "error" : stop == 2 ? "interrupted" : stop ? "steps" : "epochs",
              st != VDNN_OK ? error : NULL);
    vdnn_status lst = log_status(o);
    if (st == VDNN_OK) st = lst;
    else vdnn_fail(st, "%s", error);   /* the training error, not the log's, is the one to report */
    loader_destroy(ld);
    io_close(n, &b);
    return st;
}
