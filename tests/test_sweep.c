/* Check suite for `vdnn sweep` (tools/sweep.c), run as a user runs it: the program is
 * $VDNN_BIN (else build/vdnn), started from the repository root with its output
 * captured, on small nets written into a temporary folder (the profile cache too).
 *
 * What is checked: a simulated sweep writes the CSV header and one row per budget x
 * policy; offloading fits a budget that keeping everything does not; no fitting row's
 * peak exceeds its budget; dyn is never predicted slower than a fixed policy that fits;
 * auto:K spans the least budget in which a policy asked for fits (one byte less fits
 * none of them; dyn's is the least of every fixed policy, swap and recompute included,
 * and of micro-batches of one item; vdnn's is all-mem's) to what none needs. dyn's rows
 * plan as `vdnn profile` does, in micro-batches where it splits (the CSV's micro column,
 * given on dyn's fitting rows alone). swap and recompute plan as their fixed policies. A
 * real sweep measures every fitting row inside its budget, swapped plans and plans in
 * micro-batches included. Bad lists and a missing --budgets fail with one message that
 * names the problem. The plot is a real PNG when gnuplot is installed, its points in
 * micro-batches labelled; without it the sweep still succeeds; a failing gnuplot is
 * reported with its exit status and the CSV stays. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "tests/jsoncheck.h"
#include "tests/testnet.h"

/* Six convolutions on 4x16x16 at batch 8: the feature maps outweigh the parameters and
 * the largest workspace, so offloading them saves memory (as in the paper's nets), and
 * profiling takes a fraction of a second. Their algorithm is pinned, so that the peaks
 * do not depend on which algorithm a (sanitized, slower) run measures fastest. */
#define SW_HEAD                                                                              \
    "[net]\nbatch = 8\nchannels = 4\nheight = 16\nwidth = 16\n"                              \
    "[train]\nepochs = 1\nlearning_rate = 0.05\nmomentum = 0.9\nseed = 3\n"                  \
    "[data]\nset = synthetic\ntrain_size = 64\ntest_size = 32\nclasses = 4\n"
#define SW_CONV "[convolutional]\nfilters = 8\nsize = 3\npad = 1\nalgo = im2col\n[relu]\n"
#define SW_NET SW_HEAD SW_CONV SW_CONV SW_CONV SW_CONV SW_CONV SW_CONV \
    "[maxpool]\nsize = 2\n[connected]\noutput = 4\n[softmax]\n"

#define SW_HEADER "budget_bytes,policy,fits,predicted_ms,measured_ms,peak_bytes,measured_peak_bytes,plan_s,micro"
#define SW_MAX_ROWS 64

typedef tn_run cli_run;

static cli_run run_env(const char *env, const char *args) { return tn_vdnn(tn_dir, env, args); }
static cli_run run_cli(const char *args) { return tn_vdnn(tn_dir, "", args); }
static void run_free(cli_run *r) { tn_run_free(r); }
static void assert_ok(const cli_run *r, const char *args) { tn_run_ok(r, args); }

/* Fails with exit status 1 and one "vdnn: " line naming `a` (and `b`, if non-NULL). */
static void fails_with(const char *args, const char *a, const char *b)
{
    cli_run r = run_cli(args);
    ck_assert_msg(r.status == 1, "`vdnn %s` exited %d; stdout:\n%s", args, r.status, r.out);
    ck_assert_msg(!strncmp(r.err, "vdnn: ", 6), "`vdnn %s`: stderr does not start with 'vdnn: ':\n%s", args, r.err);
    ck_assert_msg(strchr(r.err, '\n') == r.err + strlen(r.err) - 1, "`vdnn %s`: more than one line:\n%s", args,
                  r.err);
    ck_assert_msg(strstr(r.err, a) != NULL, "`vdnn %s`: stderr lacks '%s':\n%s", args, a, r.err);
    if (b) ck_assert_msg(strstr(r.err, b) != NULL, "`vdnn %s`: stderr lacks '%s':\n%s", args, b, r.err);
    ck_assert_msg(r.out[0] == 0, "`vdnn %s` failed but wrote to stdout:\n%s", args, r.out);
    run_free(&r);
}

/* The net's config in the temporary folder; its path goes to buf. */
static const char *write_net(char *buf, size_t len)
{
    tn_path(buf, len, "net.cfg");
    tn_write_text(buf, SW_NET);
    return buf;
}

/* ---- the CSV ---- */

typedef struct sw_row {
    size_t budget;
    char policy[16];
    int fits;
    double predicted_ms, measured_ms;        /* < 0: empty */
    long long peak, measured_peak;           /* < 0: empty */
    double plan_s;
    int micro;                               /* 0: empty (the batch whole) */
} sw_row;

typedef struct sw_csv {
    int nrows;
    sw_row rows[SW_MAX_ROWS];
} sw_csv;

/* Field k (0-based) of a CSV line into buf ("" when empty). */
static void field(const char *line, int k, char *buf, size_t len)
{
    for (int i = 0; i < k && line; i++) {
        line = strchr(line, ',');
        if (line) line++;
    }
    ck_assert_msg(line != NULL, "a CSV row lacks field %d", k);
    size_t n = strcspn(line, ",\n");
    ck_assert_msg(n < len, "CSV field %d is too long", k);
    memcpy(buf, line, n);
    buf[n] = 0;
}

static double num(const char *line, int k)
{
    char buf[64], *end;
    field(line, k, buf, sizeof buf);
    if (!buf[0]) return -1;
    double v = strtod(buf, &end);
    ck_assert_msg(*end == 0, "CSV field %d '%s' is not a number", k, buf);
    return v;
}

static void parse_row(const char *line, sw_row *r)
{
    int commas = 0;
    for (const char *c = line; *c && *c != '\n'; c++) commas += *c == ',';
    ck_assert_msg(commas == 8, "a CSV row has %d fields, not 9: %.200s", commas + 1, line);
    r->budget = (size_t)num(line, 0);
    field(line, 1, r->policy, sizeof r->policy);
    r->fits = (int)num(line, 2);
    r->predicted_ms = num(line, 3);
    r->measured_ms = num(line, 4);
    r->peak = (long long)num(line, 5);
    r->measured_peak = (long long)num(line, 6);
    r->plan_s = num(line, 7);
    const double micro = num(line, 8);
    r->micro = micro < 0 ? 0 : (int)micro;
    ck_assert_msg(r->fits == 0 || r->fits == 1, "fits is %d", r->fits);
    ck_assert_msg(micro < 0 || (r->fits && micro >= 1 && micro == r->micro && !strcmp(r->policy, "dyn")),
                  "micro '%g' on a row of %s that %s: %.200s", micro, r->policy, r->fits ? "fits" : "does not fit",
                  line);
    ck_assert_msg(r->plan_s >= 0, "plan_s is empty or negative: %.200s", line);
}

/* DIR/sweep.csv: the header, then its rows. */
static void read_csv(const char *dir, sw_csv *c)
{
    char path[600];
    snprintf(path, sizeof path, "%s/sweep.csv", dir);
    char *text = tn_read(path, NULL);
    ck_assert_msg(text != NULL, "%s was not written", path);
    ck_assert_msg(!strncmp(text, SW_HEADER "\n", strlen(SW_HEADER) + 1), "the CSV header is wrong:\n%s", text);
    c->nrows = 0;
    for (const char *line = strchr(text, '\n') + 1; *line; line = strchr(line, '\n') + 1) {
        ck_assert_int_lt(c->nrows, SW_MAX_ROWS);
        ck_assert_msg(strchr(line, '\n') != NULL, "the CSV's last line is not terminated");
        parse_row(line, &c->rows[c->nrows++]);
    }
    free(text);
}

static const sw_row *find(const sw_csv *c, size_t budget, const char *policy)
{
    for (int k = 0; k < c->nrows; k++)
        if (c->rows[k].budget == budget && !strcmp(c->rows[k].policy, policy)) return &c->rows[k];
    ck_abort_msg("no row for budget %zu, policy %s", budget, policy);
    return NULL;
}

/* Every fitting row has its numbers and its peaks within the budget; every other row
 * has none. */
static void check_rows(const sw_csv *c, int measured)
{
    for (int k = 0; k < c->nrows; k++) {
        const sw_row *r = &c->rows[k];
        if (!r->fits) {
            ck_assert_msg(r->predicted_ms < 0 && r->measured_ms < 0 && r->peak < 0 && r->measured_peak < 0,
                          "row %d (%s) does not fit but has numbers", k, r->policy);
            continue;
        }
        ck_assert_msg(r->predicted_ms > 0, "row %d (%s): predicted_ms %g", k, r->policy, r->predicted_ms);
        ck_assert_msg(r->peak > 0 && (size_t)r->peak <= r->budget, "row %d (%s): peak %lld over budget %zu", k,
                      r->policy, r->peak, r->budget);
        if (!measured) {
            ck_assert_msg(r->measured_ms < 0 && r->measured_peak < 0, "row %d: --simulate measured", k);
            continue;
        }
        ck_assert_msg(r->measured_ms > 0, "row %d (%s): measured_ms %g", k, r->policy, r->measured_ms);
        ck_assert_msg(r->measured_peak > 0 && (size_t)r->measured_peak <= r->budget,
                      "row %d (%s): measured peak %lld over budget %zu", k, r->policy, r->measured_peak, r->budget);
        /* the real pool may release copied maps sooner than the simulator assumes, but
         * never half of the peak: that would be a peak taken without the iterations */
        ck_assert_msg(r->measured_peak >= r->peak / 2, "row %d (%s): measured peak %lld, predicted %lld", k,
                      r->policy, r->measured_peak, r->peak);
    }
}

/* Runs a sweep of the net into DIR (a name in the temporary folder) and reads its CSV. */
static void sweep_ok(const char *cfg, const char *flags, const char *dir_name, sw_csv *c, char *dir, size_t len)
{
    char args[2048], cache[512];
    tn_path(dir, len, dir_name);
    tn_path(cache, sizeof cache, "cache");
    /* a node limit far above what these small nets need, so that sanitizer builds stay quick */
    snprintf(args, sizeof args, "sweep %s %s --node-limit 3000 --profile-cache %s --out %s", cfg, flags, cache, dir);
    cli_run r = run_cli(args);
    assert_ok(&r, args);
    read_csv(dir, c);
    run_free(&r);
}

/* ---- simulated sweeps ---- */

/* Whether any row of budget b fits. */
static int any_fits(const sw_csv *c, size_t b)
{
    int some = 0;
    for (int k = 0; k < c->nrows; k++) some |= c->rows[k].budget == b && c->rows[k].fits;
    return some;
}

/* A simulated sweep of `policies` at the one budget b: whether any of them fits. */
static int fits_at(const char *cfg, const char *policies, size_t b)
{
    char flags[512], dir[512];
    sw_csv c;
    snprintf(flags, sizeof flags, "--budgets %zu --policies %s --simulate", b, policies);
    sweep_ok(cfg, flags, "at", &c, dir, sizeof dir);
    check_rows(&c, 0);
    return any_fits(&c, b);
}

/* auto:2 of `policies` (npols of them): two budgets, the least in which one of them
 * fits (and, for fixed policies and vDNN's ladder, one byte less fits none: the
 * planner's least plan is the least it tried, and its search may go lower) and none's
 * peak. */
static void auto_ends(const char *cfg, const char *policies, int npols, size_t *lo, size_t *hi, sw_csv *c)
{
    char flags[512], dir[512];
    snprintf(flags, sizeof flags, "--budgets auto:2 --policies %s --simulate", policies);
    sweep_ok(cfg, flags, "auto", c, dir, sizeof dir);
    ck_assert_int_eq(c->nrows, 2 * npols);
    *lo = c->rows[0].budget;
    *hi = c->rows[npols].budget;
    ck_assert_msg(*lo < *hi, "auto:2 of %s gave budgets %zu and %zu", policies, *lo, *hi);
    check_rows(c, 0);
    ck_assert_msg(any_fits(c, *lo), "no policy of %s fits the least budget %zu", policies, *lo);
    ck_assert_msg(strstr(policies, "dyn") || !fits_at(cfg, policies, *lo - 1), "%s fits %zu, below the least budget %zu",
                  policies, *lo - 1, *lo);
}

/* auto:2 spans the least budget of the fixed policies asked for to what none needs;
 * the least fits one of them, and the largest is exactly none's peak. */
static void auto_range(const char *cfg, size_t *lo, size_t *hi, sw_csv *c)
{
    auto_ends(cfg, "none,all,none-mem,conv-mem,all-mem", 5, lo, hi, c);
    const sw_row *none = find(c, *hi, "none");
    ck_assert_msg(none->fits && (size_t)none->peak == *hi, "none's peak %lld is not the top budget %zu", none->peak,
                  *hi);
}

START_TEST(test_simulate)
{
    char cfg[512], dir[512], flags[512];
    size_t lo, hi;
    sw_csv c;
    write_net(cfg, sizeof cfg);
    auto_range(cfg, &lo, &hi, &c);
    /* all's own peak at the top budget: the least in which offloading runs at full speed */
    const sw_row *all = find(&c, hi, "all");
    ck_assert_msg(all->fits && (size_t)all->peak < hi, "offloading saves nothing on this net: all %lld, none %zu",
                  all->peak, hi);
    size_t b1 = (size_t)all->peak, b2 = (b1 + hi) / 2, b3 = hi;
    snprintf(flags, sizeof flags, "--budgets %zu,%zu,%zu --policies none,all,dyn --simulate", b1, b2, b3);
    sweep_ok(cfg, flags, "sim", &c, dir, sizeof dir);
    ck_assert_int_eq(c.nrows, 9);
    static const char *const order[] = {"none", "all", "dyn"};
    for (int k = 0; k < 9; k++) {
        ck_assert_str_eq(c.rows[k].policy, order[k % 3]);
        ck_assert_uint_eq(c.rows[k].budget, k < 3 ? b1 : k < 6 ? b2 : b3);
    }
    check_rows(&c, 0);
    ck_assert_msg(!find(&c, b1, "none")->fits, "none fits %zu, below its own peak %zu", b1, hi);
    ck_assert_msg(find(&c, b1, "all")->fits, "all does not fit its own peak %zu", b1);
    ck_assert_msg(find(&c, b3, "none")->fits, "none does not fit its own peak %zu", b3);
    size_t budgets[] = {b1, b2, b3};
    for (int b = 0; b < 3; b++) {
        const sw_row *dyn = find(&c, budgets[b], "dyn");
        ck_assert_msg(dyn->fits, "dyn does not fit %zu", budgets[b]);
        for (int p = 0; p < 2; p++) {
            const sw_row *fixed = find(&c, budgets[b], order[p]);
            ck_assert_msg(!fixed->fits || dyn->predicted_ms <= fixed->predicted_ms,
                          "at %zu dyn is predicted slower (%g ms) than %s (%g ms)", budgets[b], dyn->predicted_ms,
                          order[p], fixed->predicted_ms);
        }
    }
}
END_TEST

/* What `vdnn profile` plans at budget b: the items per micro-batch (0: the batch whole)
 * and the predicted time in ms as it prints it (two decimals). */
static void profile_at(const char *cfg, size_t b, int *micro, double *ms)
{
    char args[1024];
    snprintf(args, sizeof args, "profile %s --budget %zu --node-limit 3000 --profile-cache %s/cache", cfg, b, tn_dir);
    cli_run r = run_cli(args);
    assert_ok(&r, args);
    const char *split = strstr(r.out, "micro-batches of "), *chosen = strstr(r.out, "chosen plan:");
    *micro = 0;
    if (split) ck_assert_int_eq(sscanf(split, "micro-batches of %d items", micro), 1);
    ck_assert_msg(chosen && sscanf(chosen, "chosen plan: predicted %lf ms", ms) == 1, "`vdnn %s`:\n%s", args, r.out);
    run_free(&r);
}

/* The least budget of any plan of the whole batch, `vdnn info`'s: of every fixed policy
 * and of the planner's least plan. */
static size_t whole_batch_least(const char *cfg)
{
    char args[1024];
    snprintf(args, sizeof args, "info %s --json", cfg);
    cli_run r = run_cli(args);
    assert_ok(&r, args);
    json_t *info = tj_parse(r.out, args);
    size_t least = (size_t)tj_int(info, "dyn_min_budget_bytes");
    const char *pol;
    json_t *modes;
    json_object_foreach(tj_get(info, "min_budget_bytes"), pol, modes) {
        const char *mode;
        json_t *b;
        json_object_foreach(modes, mode, b) {
            if ((size_t)json_integer_value(b) < least) least = (size_t)json_integer_value(b);
        }
    }
    json_decref(info);
    run_free(&r);
    return least;
}

/* dyn's rows plan as `vdnn profile` does: in micro-batches where they are faster or the
 * only fit. On this net the least budget any plan needs is that of micro-batches of one
 * item, below every plan of the whole batch; the sweep's range starts there, where its
 * row and `vdnn profile` choose the same split and predict the same time; at none's peak
 * the batch runs whole. */
START_TEST(test_dyn_splits)
{
    char cfg[512];
    size_t lo, hi;
    sw_csv c;
    write_net(cfg, sizeof cfg);
    auto_ends(cfg, "dyn", 1, &lo, &hi, &c);
    const sw_row *least = find(&c, lo, "dyn"), *top = find(&c, hi, "dyn");
    ck_assert_msg(least->fits && least->micro == 1, "dyn at its least budget %zu: fits %d, micro %d", lo, least->fits,
                  least->micro);
    ck_assert_msg(top->fits && top->micro == 0, "dyn at none's peak %zu: micro %d", hi, top->micro);
    const size_t whole = whole_batch_least(cfg);
    ck_assert_msg(lo < whole, "auto's least budget for dyn %zu is not below the whole batch's least %zu", lo, whole);
    size_t budgets[] = {lo, (lo + hi) / 2 / 256 * 256, hi};
    char flags[512], dir[512];
    snprintf(flags, sizeof flags, "--budgets %zu,%zu,%zu --policies dyn --simulate", budgets[0], budgets[1],
             budgets[2]);
    sweep_ok(cfg, flags, "splits", &c, dir, sizeof dir);
    check_rows(&c, 0);
    for (int k = 0; k < 3; k++) {
        int micro = -1;
        double ms = 0;
        profile_at(cfg, budgets[k], &micro, &ms);
        const sw_row *r = find(&c, budgets[k], "dyn");
        ck_assert_msg(r->fits && r->micro == micro, "at %zu the sweep's dyn splits in %d, `vdnn profile` in %d",
                      budgets[k], r->micro, micro);
        ck_assert_msg(fabs(r->predicted_ms - ms) <= 0.005 + 1e-9,
                      "at %zu the sweep's dyn predicts %.6f ms, `vdnn profile` %.2f ms", budgets[k], r->predicted_ms,
                      ms);
    }
}
END_TEST

#define SW_FIXED "none,conv,all,swap,recompute,none-mem,conv-mem,all-mem,swap-mem,recompute-mem"

/* The low end of auto:K is the least budget of the policies asked for, not of every
 * policy: a fixed policy's own least; dyn's, the least of every fixed policy (its
 * branch and bound starts from each) or the planner's least plan, which may be lower;
 * vdnn's, all-mem's (its ladder needs all-mem). */
START_TEST(test_auto_low_end)
{
    char cfg[512];
    size_t lo_all, lo_swap, lo_fixed, lo_dyn, lo_vdnn, hi, h;
    sw_csv c;
    write_net(cfg, sizeof cfg);
    auto_ends(cfg, "all-mem", 1, &lo_all, &hi, &c);
    auto_ends(cfg, "swap-mem,all-mem", 2, &lo_swap, &h, &c);
    ck_assert_uint_eq(h, hi);
    ck_assert_msg(lo_swap <= lo_all, "adding swap-mem raised the least budget from %zu to %zu", lo_all, lo_swap);
    auto_ends(cfg, SW_FIXED, 10, &lo_fixed, &h, &c);
    ck_assert_msg(lo_fixed <= lo_swap, "every fixed policy: %zu, above swap-mem,all-mem's %zu", lo_fixed, lo_swap);
    /* on this net, whose maps are small, swapping the parameters saves memory that no
     * offload can: the least of every fixed policy is below all-mem's */
    ck_assert_msg(lo_fixed < lo_all, "every fixed policy: %zu, all-mem: %zu", lo_fixed, lo_all);
    auto_ends(cfg, "dyn", 1, &lo_dyn, &h, &c);
    ck_assert_msg(lo_dyn <= lo_fixed, "dyn's least %zu, above every fixed policy's %zu", lo_dyn, lo_fixed);
    ck_assert_msg(find(&c, lo_dyn, "dyn")->fits, "dyn does not fit its least budget %zu", lo_dyn);
    auto_ends(cfg, "vdnn", 1, &lo_vdnn, &h, &c);
    ck_assert_uint_eq(lo_vdnn, lo_all);
    ck_assert_msg(find(&c, lo_vdnn, "vdnn")->fits, "vdnn does not fit its least budget %zu", lo_vdnn);
    /* a search asked with fixed policies: the least of them all */
    auto_ends(cfg, "none,vdnn", 2, &h, &hi, &c);
    ck_assert_uint_eq(h, lo_all);
}
END_TEST

/* swap and recompute are their fixed policies: at a budget with room for every plan,
 * swap offloads what all offloads and moves the parameters off the device too (a lower
 * peak, never faster), and recompute does the forward work of none and more (never
 * predicted faster than none). */
START_TEST(test_swap_recompute)
{
    char cfg[512], dir[512];
    sw_csv c;
    write_net(cfg, sizeof cfg);
    sweep_ok(cfg, "--budgets 64M --policies " SW_FIXED " --simulate", "big", &c, dir, sizeof dir);
    ck_assert_int_eq(c.nrows, 10);
    check_rows(&c, 0);
    for (int k = 0; k < c.nrows; k++) ck_assert_msg(c.rows[k].fits, "%s does not fit 64M", c.rows[k].policy);
    size_t b = 64 << 20;
    static const char *const pairs[][2] = {{"swap", "all"}, {"swap-mem", "all-mem"}};
    for (int k = 0; k < 2; k++) {
        const sw_row *sw = find(&c, b, pairs[k][0]), *all = find(&c, b, pairs[k][1]);
        ck_assert_msg(sw->peak < all->peak, "%s's peak %lld is not below %s's %lld", pairs[k][0], sw->peak,
                      pairs[k][1], all->peak);
        ck_assert_msg(sw->predicted_ms >= all->predicted_ms, "%s (%g ms) is predicted faster than %s (%g ms)",
                      pairs[k][0], sw->predicted_ms, pairs[k][1], all->predicted_ms);
    }
    const sw_row *rc = find(&c, b, "recompute"), *none = find(&c, b, "none");
    ck_assert_msg(rc->predicted_ms >= none->predicted_ms, "recompute %g ms, none %g ms", rc->predicted_ms,
                  none->predicted_ms);
    const sw_row *rcm = find(&c, b, "recompute-mem"), *nonem = find(&c, b, "none-mem");
    ck_assert_msg(rcm->predicted_ms >= nonem->predicted_ms, "recompute-mem %g ms, none-mem %g ms",
                  rcm->predicted_ms, nonem->predicted_ms);
    /* the progress lines are as wide as the longest name asked for */
    char flags[1024];
    snprintf(flags, sizeof flags,
             "sweep %s --budgets 64M --policies none,recompute-mem --simulate --profile-cache %s/cache --out %s/w",
             cfg, tn_dir, tn_dir);
    cli_run r = run_cli(flags);
    assert_ok(&r, flags);
    ck_assert_msg(strstr(r.out, "policy none           predicted") && strstr(r.out, "policy recompute-mem  predicted"),
                  "stdout:\n%s", r.out);
    run_free(&r);
}
END_TEST

/* ---- a real sweep ---- */

/* The least budget of dyn is reached by swapping parameters on this net: the row's
 * plan runs with the layers placed as it swaps them (before net_attach), and so does a
 * swap-mem row at the same budgets. */
START_TEST(test_real)
{
    char cfg[512], dir[512];
    sw_csv c;
    write_net(cfg, sizeof cfg);
    sweep_ok(cfg, "--budgets auto:2 --policies dyn,all,swap-mem --iters 1", "real", &c, dir, sizeof dir);
    ck_assert_int_eq(c.nrows, 6);
    check_rows(&c, 1);
    /* the least fits dyn (it includes every fixed policy), in micro-batches of one item,
     * which run split so in the row's device; all needs more */
    ck_assert(c.rows[0].fits);
    ck_assert_int_eq(c.rows[0].micro, 1);
    ck_assert(!c.rows[1].fits);
    /* at the top budget all three run */
    ck_assert(c.rows[3].fits && c.rows[4].fits && c.rows[5].fits);
}
END_TEST

/* ---- bad input ---- */

START_TEST(test_bad_input)
{
    char cfg[512], args[1024], out[512], file[512];
    write_net(cfg, sizeof cfg);
    snprintf(args, sizeof args, "sweep %s --budgets 1M,abc,2M --policies all --simulate", cfg);
    fails_with(args, "--budgets", "'abc'");
    snprintf(args, sizeof args, "sweep %s --budgets 1M,,2M --policies all --simulate", cfg);
    fails_with(args, "--budgets", "empty");
    snprintf(args, sizeof args, "sweep %s --budgets auto:1 --policies all --simulate", cfg);
    fails_with(args, "--budgets", "auto:1");
    snprintf(args, sizeof args, "sweep %s --budgets 1M --policies none,fast --simulate", cfg);
    fails_with(args, "'fast'", "none, conv, all, swap, recompute, none-mem, conv-mem, all-mem, swap-mem, "
                               "recompute-mem, dyn, vdnn");
    snprintf(args, sizeof args, "sweep %s --budgets 1M --policies all,all --simulate", cfg);
    fails_with(args, "'all'", "twice");
    snprintf(args, sizeof args, "sweep %s --policies all --simulate", cfg);
    fails_with(args, "--budgets", NULL);
    snprintf(args, sizeof args, "sweep %s --budgets 1M --simulate", cfg);
    fails_with(args, "--policies", NULL);
    snprintf(args, sizeof args, "sweep %s --budgets 1M --policies all --simulate --iters 3", cfg);
    fails_with(args, "--iters", "--simulate");
    /* --out under a plain file cannot be created */
    tn_path(file, sizeof file, "plain");
    tn_write_text(file, "x");
    snprintf(out, sizeof out, "%s/sub", file);
    snprintf(args, sizeof args, "sweep %s --budgets 1M --policies all --simulate --out %s", cfg, out);
    fails_with(args, "--out", out);
}
END_TEST

/* ---- the plot ---- */

static int have_gnuplot(void)
{
    return system("command -v gnuplot >/dev/null 2>&1") == 0;
}

START_TEST(test_plot)
{
    if (!have_gnuplot()) {
        printf("SKIPPED: test_plot: gnuplot is not on PATH (apt-get install gnuplot-nox)\n");
        fflush(stdout);
        return;
    }
    char cfg[512], dir[512], png[600], gp[600];
    sw_csv c;
    write_net(cfg, sizeof cfg);
    sweep_ok(cfg, "--budgets auto:3 --policies none,conv,all,dyn,vdnn --simulate", "plot", &c, dir, sizeof dir);
    snprintf(png, sizeof png, "%s/sweep.png", dir);
    snprintf(gp, sizeof gp, "%s/sweep.gp", dir);
    size_t len = 0;
    unsigned char *data = (unsigned char *)tn_read(png, &len);
    ck_assert_msg(data != NULL, "%s was not written", png);
    static const unsigned char magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    ck_assert_msg(len > 8 && !memcmp(data, magic, 8), "%s is not a PNG", png);
    ck_assert_msg(len > 10000, "%s is only %zu bytes", png, len);
    free(data);
    ck_assert_msg(tn_exists(gp), "the script %s was not kept", gp);
    /* dyn fits the least budget in micro-batches of one: the plot labels its point */
    ck_assert_int_eq(c.rows[3].micro, 1);
    char *script = tn_read(gp, NULL);
    ck_assert_msg(strstr(script, "with labels") && strstr(script, "items per micro-batch"), "%s", script);
    free(script);
    /* and with no plan in micro-batches, nothing */
    sweep_ok(cfg, "--budgets 64M --policies none,dyn --simulate", "plot-whole", &c, dir, sizeof dir);
    ck_assert_int_eq(c.rows[1].micro, 0);
    snprintf(gp, sizeof gp, "%s/sweep.gp", dir);
    script = tn_read(gp, NULL);
    ck_assert_msg(!strstr(script, "with labels") && !strstr(script, "micro-batch"), "%s", script);
    free(script);
}
END_TEST

/* Without gnuplot the sweep succeeds, says how to get it, and keeps the script. */
START_TEST(test_plot_without_gnuplot)
{
    char cfg[512], dir[512], args[1024], env[600], empty[512], cache[512];
    write_net(cfg, sizeof cfg);
    tn_path(empty, sizeof empty, "empty-bin");
    ck_assert_int_eq(mkdir(empty, 0755), 0);
    tn_path(dir, sizeof dir, "nognuplot");
    tn_path(cache, sizeof cache, "cache");
    snprintf(env, sizeof env, "PATH=%s", empty);
    snprintf(args, sizeof args, "sweep %s --budgets auto:2 --policies all,dyn --simulate --node-limit 3000 --profile-cache %s --out %s",
             cfg, cache, dir);
    cli_run r = run_env(env, args);
    assert_ok(&r, args);
    ck_assert_msg(strstr(r.out, "plot skipped") && strstr(r.out, "apt-get install gnuplot-nox"), "stdout:\n%s",
                  r.out);
    sw_csv c;
    read_csv(dir, &c);
    ck_assert_int_eq(c.nrows, 4);
    char png[600];
    snprintf(png, sizeof png, "%s/sweep.png", dir);
    ck_assert(!tn_exists(png));
    run_free(&r);
}
END_TEST

/* A gnuplot that fails: exit 1 with its status named; the CSV stays. */
START_TEST(test_plot_gnuplot_fails)
{
    char cfg[512], dir[512], args[1024], env[700], bin[512], fake[600], cache[512];
    write_net(cfg, sizeof cfg);
    tn_path(bin, sizeof bin, "fake-bin");
    ck_assert_int_eq(mkdir(bin, 0755), 0);
    snprintf(fake, sizeof fake, "%s/gnuplot", bin);
    tn_write_text(fake, "#!/bin/sh\necho 'fake gnuplot: broken' >&2\nexit 3\n");
    ck_assert_int_eq(chmod(fake, 0755), 0);
    tn_path(dir, sizeof dir, "badplot");
    tn_path(cache, sizeof cache, "cache");
    snprintf(env, sizeof env, "PATH=%s:\"$PATH\"", bin);
    snprintf(args, sizeof args, "sweep %s --budgets auto:2 --policies all,dyn --simulate --node-limit 3000 --profile-cache %s --out %s",
             cfg, cache, dir);
    cli_run r = run_env(env, args);
    ck_assert_msg(r.status == 1, "exited %d; stderr:\n%s", r.status, r.err);
    ck_assert_msg(strstr(r.err, "vdnn: ") && strstr(r.err, "gnuplot") && strstr(r.err, "exit status 3"),
                  "stderr:\n%s", r.err);
    sw_csv c;
    read_csv(dir, &c);
    ck_assert_int_eq(c.nrows, 4);
    run_free(&r);
}
END_TEST

static Suite *sweep_suite(void)
{
    Suite *s = suite_create("sweep");
    TCase *t = tcase_create("sweep");
    tcase_add_checked_fixture(t, tn_dir_setup, tn_dir_teardown);
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_simulate);
    tcase_add_test(t, test_auto_low_end);
    tcase_add_test(t, test_dyn_splits);
    tcase_add_test(t, test_swap_recompute);
    tcase_add_test(t, test_real);
    tcase_add_test(t, test_bad_input);
    tcase_add_test(t, test_plot);
    tcase_add_test(t, test_plot_without_gnuplot);
    tcase_add_test(t, test_plot_gnuplot_fails);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tn_run_suite(sweep_suite()); }
