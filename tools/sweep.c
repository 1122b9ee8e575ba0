/* `vdnn sweep`: the memory/speed trade-off of a net, drawn by planning (and, unless
 * --simulate, running) every policy asked for at every budget asked for. The profile is
 * measured once; each budget x policy row is planned from it, and in real mode run on a
 * fresh device of exactly that budget. Rows go to DIR/sweep.csv as they finish, so an
 * interrupted sweep keeps what it did; DIR/sweep.gp and DIR/sweep.png follow when
 * gnuplot is installed (docs/sweep.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "nets/planner/planner.h"
#include "tools/commands.h"

/* A policy as sweep names it: a fixed policy with one algorithm mode, or a search. Its
 * colour and point type stay the same from plot to plot, so sweeps compare at a glance
 * (colour-blind-safe colours, Okabe and Ito). */
typedef struct sweep_policy {
    const char *name;
    int search;               /* plan_search(kind) instead of plan_fit_policy(pol, algo) */
    search_kind kind;
    mem_policy pol;
    algo_mode algo;
    const char *color;
    int point;                /* gnuplot point type */
} sweep_policy;

static const sweep_policy sweep_policies[] = {
    {"none", 0, SEARCH_BB, POLICY_NONE, ALGO_PERF, "#000000", 7},
    {"conv", 0, SEARCH_BB, POLICY_CONV, ALGO_PERF, "#009e73", 5},
    {"all", 0, SEARCH_BB, POLICY_ALL, ALGO_PERF, "#0072b2", 9},
    {"swap", 0, SEARCH_BB, POLICY_SWAP, ALGO_PERF, "#882255", 15},
    {"recompute", 0, SEARCH_BB, POLICY_RECOMPUTE, ALGO_PERF, "#117733", 12},
    {"none-mem", 0, SEARCH_BB, POLICY_NONE, ALGO_MEM, "#999999", 6},
    {"conv-mem", 0, SEARCH_BB, POLICY_CONV, ALGO_MEM, "#56b4e9", 4},
    {"all-mem", 0, SEARCH_BB, POLICY_ALL, ALGO_MEM, "#cc79a7", 8},
    {"swap-mem", 0, SEARCH_BB, POLICY_SWAP, ALGO_MEM, "#aa4499", 14},
    {"recompute-mem", 0, SEARCH_BB, POLICY_RECOMPUTE, ALGO_MEM, "#44aa99", 10},
    {"dyn", 1, SEARCH_BB, POLICY_NONE, ALGO_PERF, "#d55e00", 13},
    {"vdnn", 1, SEARCH_VDNN, POLICY_NONE, ALGO_PERF, "#e69f00", 11},
};
#define SWEEP_NPOLICIES ((int)(sizeof sweep_policies / sizeof *sweep_policies))
#define SWEEP_VALID "none, conv, all, swap, recompute, none-mem, conv-mem, all-mem, swap-mem, recompute-mem, dyn, vdnn"
#define SWEEP_MAX_ITEMS 1000

typedef struct sweep_opts {
    const char *cfg, *budgets, *policies, *out, *device, *cache;
    long long iters;          /* real iterations per row; 0: not given (5) */
    long long threads, batch, node_limit;
    double link_gbps, search_seconds, search_gap;
    int simulate;
    int reprofile;            /* --reprofile: measure the profile again */
} sweep_opts;

typedef struct sweep_row {
    size_t budget;
    const sweep_policy *pol;
    int fits;
    int micro;                                /* dyn: the items per micro-batch its plan runs in; 0:
                                               * the batch as the config runs it */
    double predicted_s, measured_s, plan_s;   /* measured_s < 0: not run */
    size_t peak_bytes, measured_peak_bytes;
    char note[200];                           /* why a row does not fit, when known */
} sweep_row;

typedef struct sweep {
    sweep_opts o;
    size_t *budgets;          /* (nbudgets); owned */
    int nbudgets;
    int auto_count;           /* auto:K: K, the budgets come from the profile; 0: a list */
    const sweep_policy *pols[SWEEP_NPOLICIES];
    int npols;
    int name_width;           /* the longest name in pols, for the progress lines */
    int fit_any[SWEEP_NPOLICIES];   /* per pols[k]: some row fits (the plot draws it) */
    int any_micro;            /* some row's plan runs in micro-batches (the plot labels them) */
    net *n;                   /* owned */
    device *plan_dev;         /* with --simulate, the profile's device, kept for planning dyn's
                               * rows (plan_device); owned */
    profile pr;
    int have_profile;
    simulator *sim;           /* of (n, pr): the range's and the fixed policies' plans */
    char dir[1024];
    FILE *csv;
} sweep;

/* "512 MiB", "1.5 GiB", "96.25 KiB": short enough for a progress line. */
static const char *fmt_size(size_t bytes, char *buf, size_t len)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, "%.4g %s", v, units[u]);
    return buf;
}

/* ---- the lists ---------------------------------------------------------------------- */

/* The next comma-separated item of *list (a tail of `whole`) into buf; 0 at the end.
 * An empty item is an error, so that "1G,,2G" and a trailing comma are caught, not
 * skipped. */
static int next_item(const char **list, const char *whole, char *buf, size_t len, const char *flag,
                     vdnn_status *st)
{
    if (!*list) return 0;
    const char *comma = strchr(*list, ',');
    size_t n = comma ? (size_t)(comma - *list) : strlen(*list);
    if (n == 0 || n >= len) {
        *st = vdnn_fail(VDNN_EINVAL, "%s: %s item in '%s'", flag, n ? "an overlong" : "an empty", whole);
        return 0;
    }
    memcpy(buf, *list, n);
    buf[n] = 0;
    *list = comma ? comma + 1 : NULL;
    return 1;
}

static vdnn_status parse_auto(sweep *s, const char *text)
{
    char *end;
    errno = 0;
    long k = strtol(text, &end, 10);
    if (!*text || *end || errno || k < 2 || k > SWEEP_MAX_ITEMS)
        return vdnn_fail(VDNN_EINVAL, "--budgets: 'auto:%s': K must be a whole number from 2 to %d", text,
                         SWEEP_MAX_ITEMS);
    s->auto_count = (int)k;
    return VDNN_OK;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* The budgets are swept smallest first and each once, whatever order they came in: the
 * plot joins the rows in file order. */
static vdnn_status parse_budgets(sweep *s, const char *text)
{
    if (!strncmp(text, "auto:", 5)) return parse_auto(s, text + 5);
    s->budgets = calloc(SWEEP_MAX_ITEMS, sizeof *s->budgets);
    if (!s->budgets) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    char item[64];
    const char *list = text;
    vdnn_status st = VDNN_OK;
    while (st == VDNN_OK && next_item(&list, text, item, sizeof item, "--budgets", &st)) {
        if (s->nbudgets == SWEEP_MAX_ITEMS)
            return vdnn_fail(VDNN_EINVAL, "--budgets: more than %d budgets", SWEEP_MAX_ITEMS);
        st = vdnn_parse_bytes(item, "--budgets", &s->budgets[s->nbudgets++]);
    }
    if (st != VDNN_OK) return st;
    qsort(s->budgets, (size_t)s->nbudgets, sizeof *s->budgets, cmp_size);
    int kept = 0;
    for (int k = 0; k < s->nbudgets; k++)
        if (!kept || s->budgets[k] != s->budgets[kept - 1]) s->budgets[kept++] = s->budgets[k];
    s->nbudgets = kept;
    return VDNN_OK;
}

static vdnn_status parse_policies(sweep *s, const char *text)
{
    char item[64];
    const char *list = text;
    vdnn_status st = VDNN_OK;
    while (st == VDNN_OK && next_item(&list, text, item, sizeof item, "--policies", &st)) {
        int k = 0;
        while (k < SWEEP_NPOLICIES && strcmp(item, sweep_policies[k].name)) k++;
        if (k == SWEEP_NPOLICIES)
            return vdnn_fail(VDNN_EINVAL, "--policies: '%s' is not one of " SWEEP_VALID, item);
        for (int j = 0; j < s->npols; j++)
            if (s->pols[j] == &sweep_policies[k])
                return vdnn_fail(VDNN_EINVAL, "--policies: '%s' is given twice", item);
        s->pols[s->npols++] = &sweep_policies[k];
        int len = (int)strlen(item);
        if (len > s->name_width) s->name_width = len;
    }
    return st;
}

/* ---- the output folder -------------------------------------------------------------- */

/* mkdir -p: every missing parent too. */
static vdnn_status make_dirs(const char *dir)
{
    char path[1024];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return vdnn_fail(VDNN_EINVAL, "--out: the path is too long");
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return vdnn_fail(VDNN_EIO, "--out: cannot create %s: %s", path, strerror(errno));
        *p = '/';
    }
    if (mkdir(path, 0777) != 0 && errno != EEXIST)
        return vdnn_fail(VDNN_EIO, "--out: cannot create %s: %s", path, strerror(errno));
    return VDNN_OK;
}

static vdnn_status open_csv(sweep *s)
{
    char path[1200];
    snprintf(s->dir, sizeof s->dir, "%s", s->o.out);
    vdnn_status st = make_dirs(s->dir);
    if (st != VDNN_OK) return st;
    snprintf(path, sizeof path, "%s/sweep.csv", s->dir);
    s->csv = fopen(path, "w");
    if (!s->csv) return vdnn_fail(VDNN_EIO, "--out: cannot write %s: %s", path, strerror(errno));
    fputs("budget_bytes,policy,fits,predicted_ms,measured_ms,peak_bytes,measured_peak_bytes,plan_s,micro\n", s->csv);
    return VDNN_OK;
}

static vdnn_status write_row(sweep *s, const sweep_row *r)
{
    fprintf(s->csv, "%zu,%s,%d,", r->budget, r->pol->name, r->fits);
    if (r->fits) fprintf(s->csv, "%.6f", 1e3 * r->predicted_s);
    fputc(',', s->csv);
    if (r->fits && r->measured_s >= 0) fprintf(s->csv, "%.6f", 1e3 * r->measured_s);
    fputc(',', s->csv);
    if (r->fits) fprintf(s->csv, "%zu", r->peak_bytes);
    fputc(',', s->csv);
    if (r->fits && r->measured_s >= 0) fprintf(s->csv, "%zu", r->measured_peak_bytes);
    fprintf(s->csv, ",%.6f,", r->plan_s);
    if (r->fits && r->micro) fprintf(s->csv, "%d", r->micro);
    fputc('\n', s->csv);
    /* flushed per row: a sweep stopped half way keeps the rows it finished */
    if (fflush(s->csv) != 0 || ferror(s->csv))
        return vdnn_fail(VDNN_EIO, "--out: writing %s/sweep.csv failed: %s", s->dir, strerror(errno));
    return VDNN_OK;
}

static void print_row(const sweep_row *r, int name_width)
{
    char b[32], p[32];
    printf("budget %-10s  policy %-*s", fmt_size(r->budget, b, sizeof b), name_width < 8 ? 8 : name_width,
           r->pol->name);
    if (!r->fits) {
        printf("  does not fit%s%s%s\n", r->note[0] ? " (" : "", r->note, r->note[0] ? ")" : "");
    } else {
        printf("  predicted %9.3f ms", 1e3 * r->predicted_s);
        if (r->measured_s >= 0) printf("  measured %9.3f ms", 1e3 * r->measured_s);
        printf("  peak %s", fmt_size(r->measured_s >= 0 ? r->measured_peak_bytes : r->peak_bytes, p, sizeof p));
        if (r->micro) printf("  in micro-batches of %d", r->micro);
        putchar('\n');
    }
    fflush(stdout);
}

/* ---- the profile and the budgets ---------------------------------------------------- */

/* The device's description without its budget, which in a sweep is each row's own. */
static const char *describe(const device *d, char *buf, size_t len)
{
    snprintf(buf, len, "%s", device_describe(d));
    char *b = strstr(buf, ", budget ");
    if (b && len - (size_t)(b - buf) >= 2) strcpy(b, ")");
    return buf;
}

/* The profile is measured on a device of the kind and settings asked for, which holds
 * nothing of the net (cli_plan_device); that device goes before any row's is made, but
 * with --simulate, where no row makes one, it stays to plan dyn's rows on. */
static vdnn_status get_profile(sweep *s)
{
    device *d = NULL;
    int cached = 0;
    char desc[200];
    vdnn_status st = cli_plan_device(s->o.device, 0, s->o.threads, s->o.link_gbps, s->n, &d);
    /* the device's own algorithms (cuDNN's on a GPU) are the ones measured and planned */
    for (int i = 0; st == VDNN_OK && i < s->n->nlayers; i++) st = layer_bind(s->n->layers[i], d);
    if (st == VDNN_OK) st = profile_get(s->n, d, s->o.link_gbps, (int)s->o.threads, s->o.cache, &s->pr, &cached);
    if (st == VDNN_OK) {
        s->have_profile = 1;
        printf("vdnn: sweep of %s (batch %d) on %s: profile %s (%.2f s); %s\n", s->o.cfg, s->n->minibatch,
               describe(d, desc, sizeof desc), cached ? "cached" : "measured", s->pr.measure_s,
               s->o.simulate ? "predictions only (--simulate)" : "each plan runs for real in its budget");
    } else {
        st = vdnn_wrap(st, "profiling the net");
    }
    if (st == VDNN_OK && s->o.simulate) s->plan_dev = d;
    else device_destroy(d);
    return st;
}

/* The device dyn's micro-batch choice profiles its splits on (and binds their
 * algorithms with): the sweep's own with --simulate, else one made now, of the kind
 * and settings asked for and holding nothing, for release_plan_device to destroy
 * before any row's device is made. A device that cannot be made is an error, not a row
 * that does not fit. */
static vdnn_status plan_device(sweep *s, device **d)
{
    *d = s->plan_dev;
    if (*d) return VDNN_OK;
    vdnn_status st = cli_plan_device(s->o.device, 0, s->o.threads, s->o.link_gbps, s->n, d);
    if (st != VDNN_OK) {
        vdnn_wrap(st, "a device to plan dyn's micro-batches on");
        return st == VDNN_EBUDGET ? VDNN_EDEVICE : st;
    }
    return VDNN_OK;
}

static void release_plan_device(sweep *s, device *d)
{
    if (d != s->plan_dev) device_destroy(d);
}

/* The peak of a fixed policy's plan under `budget` (0: no limit) into *peak. */
static vdnn_status policy_peak(sweep *s, size_t budget, mem_policy pol, algo_mode a, size_t *peak)
{
    plan p = {0};
    vdnn_status st = plan_fit_policy_on(s->sim, s->n, &s->pr, budget, pol, a, &p);
    if (st == VDNN_OK) *peak = p.peak_bytes;
    plan_free(&p);
    return st;
}

/* The least budget a fixed policy's plan needs, where it is below `below` ((size_t)-1:
 * no bound; else *least is left at `below`). With no limit the fastest copy timing is
 * returned, which may hold maps longer than a slower one; asking again below each peak
 * found walks down to the least of them. Below a least already known, one question
 * says whether the policy goes lower at all (on ResNet-1202 at batch 2, under dyn's, no
 * fixed policy does: 10 questions instead of 10 walks of 3-6, 0.3 s of the sweep's). */
static vdnn_status least_of(sweep *s, mem_policy pol, algo_mode a, size_t below, size_t *least)
{
    *least = below;
    vdnn_status st = policy_peak(s, below == (size_t)-1 ? 0 : below - 1, pol, a, least);
    while (st == VDNN_OK && *least > 1) {
        size_t lower = 0;
        st = policy_peak(s, *least - 1, pol, a, &lower);
        if (st == VDNN_OK) *least = lower;
    }
    return st == VDNN_EBUDGET ? VDNN_OK : st;
}

/* Whether sweep policy sp has a plan in every budget where fixed policy pol with
 * algorithm mode a has one: a fixed policy covers itself; dyn covers every one (its
 * branch and bound starts from each of them, swap and recompute included); vdnn's
 * ladder has a plan exactly when all with the smallest workspaces fits. */
static int covers(const sweep_policy *sp, mem_policy pol, algo_mode a)
{
    if (!sp->search) return sp->pol == pol && sp->algo == a;
    if (sp->kind == SEARCH_BB) return 1;
    return pol == POLICY_ALL && a == ALGO_MEM;
}

/* The least budget in which some policy of the sweep has a plan: the least of the fixed
 * policies they cover, and with dyn the planner's least plan (plan_least, as `vdnn
 * info` reports it), which can go below them. Which fixed policy needs least depends
 * on the net (all with the smallest workspaces usually; swap when the parameters
 * dominate; none when the maps are small next to what offloading holds back for its
 * copies), so each is asked. */
static vdnn_status least_budget(sweep *s, size_t *least)
{
    vdnn_status st = VDNN_OK;
    *least = (size_t)-1;
    for (int k = 0; k < s->npols && st == VDNN_OK; k++)
        if (s->pols[k]->search && s->pols[k]->kind == SEARCH_BB) {
            size_t b = 0;
            st = plan_least(s->n, &b);
            if (st == VDNN_OK && b && b < *least) *least = b;
            /* and in micro-batches of one item, which it splits the batch into where
             * nothing else fits */
            net *one = NULL;
            device *d = NULL;
            if (st == VDNN_OK && !s->n->micro && s->n->minibatch > 1) {
                st = plan_device(s, &d);
                if (st == VDNN_OK) st = plan_clone_split(s->n, d, 1, &one);
                release_plan_device(s, d);
            }
            if (one) st = plan_least(one, &b);
            if (one && st == VDNN_OK && b && b < *least) *least = b;
            net_free(one);
            break;
        }
    for (int pol = 0; pol < POLICY_COUNT && st == VDNN_OK; pol++)
        for (int a = 0; a < ALGO_MODE_COUNT && st == VDNN_OK; a++) {
            int wanted = 0;
            for (int k = 0; k < s->npols; k++) wanted |= covers(s->pols[k], (mem_policy)pol, (algo_mode)a);
            if (!wanted) continue;
            size_t b = 0;
            st = least_of(s, (mem_policy)pol, (algo_mode)a, *least, &b);
            if (st == VDNN_OK && b < *least) *least = b;
        }
    return st;
}

/* auto:K: K budgets evenly spaced from the least in which some policy asked for has a
 * plan to what none with the fastest algorithms needs (above it no policy gets
 * faster), both ends included. */
static vdnn_status auto_budgets(sweep *s)
{
    size_t lo = 0, hi = 0;
    vdnn_status st = least_budget(s, &lo);
    if (st == VDNN_OK) st = policy_peak(s, 0, POLICY_NONE, ALGO_PERF, &hi);
    if (st != VDNN_OK) return vdnn_wrap(st, "--budgets auto: finding the range");
    if (hi < lo) hi = lo;
    s->budgets = calloc((size_t)s->auto_count, sizeof *s->budgets);
    if (!s->budgets) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    for (int k = 0; k < s->auto_count; k++) {
        double at = (double)lo + (double)(hi - lo) * k / (s->auto_count - 1);
        size_t b = k == 0 ? lo : k == s->auto_count - 1 ? hi : pool_round((size_t)at);
        if (b > hi) b = hi;
        /* a range narrower than K pool blocks repeats budgets: keep each once */
        if (!s->nbudgets || b != s->budgets[s->nbudgets - 1]) s->budgets[s->nbudgets++] = b;
    }
    return VDNN_OK;
}

/* ---- the rows ----------------------------------------------------------------------- */

/* dyn's row, planned as `vdnn profile` plans it (and `train --policy dyn` before it
 * verifies the plan with real iterations): in micro-batches where they are faster or
 * the only fit (r->micro), their profiles measured on plan_device's device. */
static vdnn_status plan_dyn_row(sweep *s, sweep_row *r, plan *p)
{
    device *d = NULL;
    vdnn_status st = plan_device(s, &d);
    planner_opts f = {.budget = r->budget, .search = "bb", .cache = s->o.cache, .node_limit = s->o.node_limit,
                      .search_seconds = s->o.search_seconds, .search_gap = s->o.search_gap,
                      .link_gbps = s->o.link_gbps, .threads = s->o.threads};
    if (st == VDNN_OK) st = plan_dyn_split(s->n, d, &s->pr, &f, &r->micro, p, NULL);
    release_plan_device(s, d);
    return st;
}

/* Plans one row; r->fits says whether a plan fits (then *p holds it). */
static vdnn_status plan_row(sweep *s, sweep_row *r, plan *p)
{
    double t0 = vdnn_now_s();
    search_stats ss = {0};
    vdnn_status st = r->pol->search && r->pol->kind == SEARCH_BB ? plan_dyn_row(s, r, p)
                     : r->pol->search
                         ? plan_search(s->n, &s->pr, r->budget, r->pol->kind,
                                       (search_limits){.nodes = (long)s->o.node_limit, .seconds = s->o.search_seconds, .gap = s->o.search_gap,
                                                       .patience = s->o.search_gap > 0 ? PLAN_PATIENCE : 0}, p, &ss)
                         : plan_fit_policy_on(s->sim, s->n, &s->pr, r->budget, r->pol->pol, r->pol->algo, p);
    r->plan_s = vdnn_now_s() - t0;
    if (st == VDNN_EBUDGET) return VDNN_OK;
    if (st != VDNN_OK) return vdnn_wrap(st, "planning policy %s", r->pol->name);
    r->fits = 1;
    r->predicted_s = p->predicted_s;
    r->peak_bytes = p->peak_bytes;
    return VDNN_OK;
}

/* Runs the row's plan on a fresh device of exactly the row's budget, so the pool's
 * high-water mark is this plan's alone. It is read from the net, which records it after
 * each iteration (plan_measure resets the pool's own when it is done). A budget error
 * means the real pool did not hold what the simulator said fits: the row is marked as
 * not fitting, with the reason, and the sweep goes on. */
static vdnn_status measure_row(sweep *s, sweep_row *r, plan *p)
{
    device *d = NULL;
    const char *stage = "the parameters alone";
    net *n = s->n, *split = NULL;
    /* a plan in micro-batches runs the net split so */
    vdnn_status st = r->micro ? net_clone_micro(s->n, r->micro, &split) : VDNN_OK;
    if (split) n = split;
    unsigned char *was = malloc((size_t)n->nlayers);
    if (!was) st = vdnn_fail(VDNN_ENOMEM, "out of host memory");
    /* the parameters placed as the plan swaps them; the net's own swaps put back after */
    for (int i = 0; was && i < n->nlayers; i++) was[i] = (unsigned char)n->layers[i]->swap;
    if (st == VDNN_OK) st = cli_device(s->o.device, r->budget, s->o.threads, s->o.link_gbps, n, &d);
    if (st == VDNN_OK) st = plan_attach_as(n, d, p);
    n->peak_iter_bytes = 0;
    if (st == VDNN_OK) {
        stage = "the real iterations";
        st = plan_measure(n, p, (int)s->o.iters);
    }
    if (st == VDNN_OK) {
        r->measured_s = p->measured_s;
        r->measured_peak_bytes = n->peak_iter_bytes;
    } else if (st == VDNN_EBUDGET) {
        r->fits = 0;
        snprintf(r->note, sizeof r->note, "%s: %s", stage, vdnn_errmsg());
        st = VDNN_OK;
    }
    net_detach(n);
    device_destroy(d);
    for (int i = 0; was && i < n->nlayers; i++) n->layers[i]->swap = was[i];
    free(was);
    net_free(split);
    return st;
}

static vdnn_status run_row(sweep *s, size_t budget, int k)
{
    sweep_row r = {.budget = budget, .pol = s->pols[k], .measured_s = -1};
    plan p = {0};
    vdnn_status st = plan_row(s, &r, &p);
    if (st == VDNN_OK && r.fits && !s->o.simulate) st = measure_row(s, &r, &p);
    plan_free(&p);
    if (st != VDNN_OK) return st;
    s->fit_any[k] |= r.fits;
    s->any_micro |= r.fits && r.micro;
    print_row(&r, s->name_width);
    return write_row(s, &r);
}

/* ---- the plot ----------------------------------------------------------------------- */

/* One panel's plot command: per policy, column `ym` where it has a value (measured)
 * else `y` (predicted); `extra` adds more curves (NULL: none). Policies often coincide
 * (dyn is none when none fits): each is drawn a little thinner than the one before, so
 * the earlier ones still show around the later ones. */
static void gp_panel(FILE *f, const char *y, const char *ym, const char *extra)
{
    fprintf(f, "plot for [i=1:words(policies)] 'sweep.csv' skip 1 using ($1/MiB):(row(word(policies,i)) ? \\\n"
               "         (strcol(%s) ne '' ? $%s : $%s)/unit : NaN) \\\n"
               "         with linespoints lc rgb word(colors,i) pt int(word(points,i)) \\\n"
               "         ps size(i) lw 1.5 * size(i) title word(policies,i)",
            ym, ym, y);
    if (extra) fprintf(f, ", \\\n     %s", extra);
    fputc('\n', f);
}

static void gp_header(FILE *f, const sweep *s)
{
    fprintf(f, "# Written by `vdnn sweep` (docs/sweep.md). Edit it and redraw with `gnuplot sweep.gp`\n"
               "# in this folder. Rows that do not fit have empty numbers and are left out.\n"
               "set datafile separator ','\n"
               "# values computed as NaN (other policies' rows) are skipped without breaking a line\n"
               "set datafile missing NaN\n"
               "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
               "    set terminal pngcairo noenhanced size 1000,900 font ',10'\n"
               "} else {\n"
               "    set terminal png size 1000,900\n"
               "}\n"
               "set output 'sweep.png'\n");
    /* the policies drawn (those that fit some budget), each with its colour and point */
    static const char *const lists[] = {"policies", "colors", "points"};
    for (int l = 0; l < 3; l++) {
        fprintf(f, "%s = '", lists[l]);
        for (int k = 0, n = 0; k < s->npols; k++) {
            if (!s->fit_any[k]) continue;
            fputs(n++ ? " " : "", f);
            if (l == 0) fputs(s->pols[k]->name, f);
            else if (l == 1) fputs(s->pols[k]->color, f);
            else fprintf(f, "%d", s->pols[k]->point);
        }
        fputs("'\n", f);
    }
    fprintf(f, "MiB = 1048576.\nrow(p) = strcol(2) eq p && strcol(3) eq '1'\n"
               "size(i) = i < 8 ? 1.6 - 0.15 * (i - 1) : 0.6\n");
}

/* The title: the net, the batch, and the policies that fit no budget at all (they
 * have no line to show it). */
static void gp_title(FILE *f, const sweep *s)
{
    const char *base = strrchr(s->o.cfg, '/') ? strrchr(s->o.cfg, '/') + 1 : s->o.cfg;
    char name[512];
    cli_gp_quote(base, name, sizeof name);
    fprintf(f, "set multiplot layout 2,1 title \"%s, batch %d: %s time per iteration and pool peak against the "
               "budget", name, s->n->minibatch, s->o.simulate ? "predicted" : "measured (dashed: predicted)");
    int n = 0;
    for (int k = 0; k < s->npols; k++)
        if (!s->fit_any[k]) fprintf(f, "%s%s", n++ ? ", " : "\\n(no budget fits: ", s->pols[k]->name);
    fprintf(f, "%s%s\"\n", n ? ")" : "", s->any_micro ? "\\nnumbers over the points: items per micro-batch" : "");
}

static vdnn_status write_script(const sweep *s, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f) return vdnn_fail(VDNN_EIO, "--out: cannot write %s: %s", path, strerror(errno));
    gp_header(f, s);
    gp_title(f, s);
    fprintf(f, "set grid\nset key outside right top\nset xlabel 'budget (MiB)'\nset yrange [0:*]\n"
               "set ylabel 'time per iteration (ms)'\nunit = 1\n");
    if (s->nbudgets == 1)   /* gnuplot cannot span an axis over one value by itself */
        fprintf(f, "set xrange [%.6g:%.6g]\n", 0.9 * (double)s->budgets[0] / (1 << 20),
                1.1 * (double)s->budgets[0] / (1 << 20));
    /* measured times with the predicted ones dashed; over each point of a plan in
     * micro-batches, its items per micro-batch */
    char extra[1024] = "";
    if (!s->o.simulate)
        snprintf(extra, sizeof extra, "for [i=1:words(policies)] 'sweep.csv' skip 1 using ($1/MiB):(row(word(policies,"
                                      "i)) ? $4 : NaN) \\\n         with lines lc rgb word(colors,i) dt 2 lw 1 notitle");
    if (s->any_micro)
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra),
                 "%s'sweep.csv' skip 1 using ($1/MiB):(strcol(3) eq '1' && valid(9) ? (strcol(5) ne '' ? $5 : $4) "
                 ": NaN):(valid(9) ? sprintf('%%d', int($9)) : '') \\\n         with labels offset 0,1 notitle",
                 extra[0] ? ", \\\n     " : "");
    gp_panel(f, "4", "5", extra[0] ? extra : NULL);
    fprintf(f, "set ylabel 'pool peak (MiB)'\nunit = MiB\n");
    /* the diagonal: every fitting point lies on or below it */
    gp_panel(f, "6", "7", "x with lines lc rgb '#808080' dt 2 lw 1 title 'budget'");
    fprintf(f, "unset multiplot\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) return vdnn_fail(VDNN_EIO, "--out: writing %s failed", path);
    return VDNN_OK;
}

/* The script is written even without gnuplot, so that the plot can be drawn later. */
static vdnn_status plot(const sweep *s)
{
    char gp[1200], png[1200];
    int any = 0;
    for (int k = 0; k < s->npols; k++) any |= s->fit_any[k];
    snprintf(gp, sizeof gp, "%s/sweep.gp", s->dir);
    snprintf(png, sizeof png, "%s/sweep.png", s->dir);
    /* no run may leave an older sweep's plot looking current */
    remove(png);
    remove(gp);
    if (!any) {
        printf("plot skipped: no policy fits any of the budgets\n");
        return VDNN_OK;
    }
    vdnn_status st = write_script(s, gp);
    if (st != VDNN_OK) return st;
    if (!cli_on_path("gnuplot")) {
        printf("plot skipped: gnuplot is not on PATH (install it, e.g. apt-get install gnuplot-nox, then run "
               "`gnuplot sweep.gp` in %s)\n", s->dir);
        return VDNN_OK;
    }
    st = cli_gnuplot(s->dir, "sweep.gp", "the CSV is in sweep.csv");
    if (st == VDNN_OK) printf("wrote %s (script %s)\n", png, gp);
    return st;
}

/* ---- the command -------------------------------------------------------------------- */

static vdnn_status parse_flags(int argc, char **argv, sweep *s)
{
    sweep_opts *o = &s->o;
    o->node_limit = PLAN_NODE_LIMIT;
    o->search_seconds = PLAN_SEARCH_SECONDS;
    o->search_gap = PLAN_SEARCH_GAP;
    arg_spec specs[] = {
        {"--budgets", ARG_STRING, &o->budgets, 0, 0,
         "sizes such as 256M,512M,1G, or auto:K (K from the least budget a policy fits to none's)", 0},
        {"--policies", ARG_STRING, &o->policies, 0, 0, "from " SWEEP_VALID, 0},
        {"--out", ARG_STRING, &o->out, 0, 0, "the folder for sweep.csv and the plot (default sweep-out)", 0},
        {"--simulate", ARG_FLAG, &o->simulate, 0, 0, "predict each point only: no real iterations", 0},
        {"--iters", ARG_INT, &o->iters, 1, 1000, "real iterations measured at each point (default 5)", 0},
        {"--link-gbps", ARG_FLOAT, &o->link_gbps, 0.001, 1e4, HELP_LINK_GBPS, 0},
        {"--threads", ARG_INT, &o->threads, 1, 1024, HELP_THREADS, 0},
        {"--batch", ARG_INT, &o->batch, 1, 65536, HELP_BATCH, 0},
        {"--profile-cache", ARG_STRING, &o->cache, 0, 0, HELP_PROFILE_CACHE, 0},
        {"--node-limit", ARG_INT, &o->node_limit, 0, 1e12, HELP_NODE_LIMIT, 0},
        {"--device", ARG_STRING, &o->device, 0, 0, HELP_DEVICE, 0},
        {"--search-seconds", ARG_FLOAT, &o->search_seconds, 0, 1e9, HELP_SEARCH_SECONDS, 0},
        {"--search-gap", ARG_FLOAT, &o->search_gap, 0, 1, HELP_SEARCH_GAP, 0},
        {"--math", ARG_STRING, &cli_math, 0, 0, HELP_MATH, 0},
        {"--nondeterministic", ARG_FLAG, &cli_nondeterministic, 0, 0, HELP_NONDETERMINISTIC, 0},
        {"--in-place", ARG_STRING, &cli_in_place, 0, 0, HELP_IN_PLACE, 0},
        {"--reprofile", ARG_FLAG, &o->reprofile, 0, 0, HELP_REPROFILE, 0},
        {NULL, 0, NULL, 0, 0, NULL, 0},
    };
    vdnn_status st = args_parse(argc, argv, 2, specs, &o->cfg, 1,
                                "vdnn sweep CFG --budgets LIST --policies LIST [--out DIR] [--simulate] [--iters N]");
    if (st != VDNN_OK) return st;
    if (o->reprofile) profile_refresh();
    profile_cache_default(o->cache);
    profile_show_progress(stderr, cli_progress_tty());
    if (!o->budgets)
        return vdnn_fail(VDNN_EINVAL, "sweep needs --budgets LIST (sizes such as 256M,512M,1G, or auto:K)");
    if (!o->policies) return vdnn_fail(VDNN_EINVAL, "sweep needs --policies LIST (from " SWEEP_VALID ")");
    if (o->simulate && o->iters)
        return vdnn_fail(VDNN_EINVAL, "--iters runs real iterations; it does not go with --simulate");
    if (!o->iters) o->iters = 5;
    st = parse_budgets(s, o->budgets);
    if (st == VDNN_OK) st = parse_policies(s, o->policies);
    return st;
}

static vdnn_status run_sweep(sweep *s)
{
    net_overrides ov;
    vdnn_status st = cli_overrides(&ov);
    ov.batch = (int)s->o.batch;
    if (st == VDNN_OK) st = net_load(s->o.cfg, &ov, &s->n);
    if (st == VDNN_OK) st = open_csv(s);
    if (st == VDNN_OK) st = get_profile(s);
    if (st == VDNN_OK) st = sim_create(s->n, &s->pr, &s->sim);
    if (st == VDNN_OK && s->auto_count) st = auto_budgets(s);
    for (int b = 0; b < s->nbudgets && st == VDNN_OK; b++)
        for (int k = 0; k < s->npols && st == VDNN_OK; k++) st = run_row(s, s->budgets[b], k);
    if (s->csv) {
        if (fclose(s->csv) != 0 && st == VDNN_OK) st = vdnn_fail(VDNN_EIO, "--out: closing sweep.csv failed");
        s->csv = NULL;
    }
    if (st == VDNN_OK) printf("wrote %s/sweep.csv (%d rows)\n", s->dir, s->nbudgets * s->npols);
    if (st == VDNN_OK) st = plot(s);
    return st;
}

int cmd_sweep(int argc, char **argv)
{
    sweep s = {.o = {.out = "sweep-out", .device = "auto", .batch = -1}};
    vdnn_status st = parse_flags(argc, argv, &s);
    if (st == VDNN_OK) st = run_sweep(&s);
    int rc = st == VDNN_OK ? 0 : cli_error();
    if (s.csv) fclose(s.csv);
    sim_destroy(s.sim);
    if (s.have_profile) profile_free(&s.pr);
    net_free(s.n);
    device_destroy(s.plan_dev);
    free(s.budgets);
    return rc;
}
