/* Plans as data (nets/planner/planner.h): making one (from a net, from a fixed policy), applying
 * it to a net, saving and loading it as a text file, and printing it as a table or JSON.
 *
 * Ownership: plan_init, plan_copy, plan_from_net, plan_policy and plan_load treat their
 * output plan as uninitialised (they never free what it held) and fill it; release it
 * with plan_free. On failure the output holds nothing (plan_free on it is harmless).
 *
 * The file format (one line each, '#' lines and blank lines ignored):
 *   vdnn-plan 3
 *   layers N            must equal the net's
 *   batch B             must equal the net's
 *   micro_batch M       must equal the net's (0: no split)
 *   prefetch far|next|on-demand
 *   release_lag L
 *   in_place 0|1|2      in-place layers: off, over the output's gradient, over the output
 *                       (IN_PLACE_*; 1 and 2 need a net that allows them)
 *   origin WORD         "-" when empty
 *   predicted_ms T      "-" when not simulated
 *   peak_bytes P
 *   measured_ms T       "-" when not verified
 *   data MAP            the net's input x[0]: keep, offload (or recompute, refused)
 *   NAME MAP SWAP FWD BWD-DATA BWD-FILTER    N times: the layer, what happens to its
 *                       output map (keep, offload, recompute), its swap flag (0, 1, 2)
 *                       and its algorithms by name
 * Maps are named by the layer that writes them, so a plan reads the same on a chain
 * and on a graph. Version 2 (read still) had no in_place line: its plans run without.
 * Version 1 (a chain's, read still) had neither that nor a data line, and gave each
 * layer line the decision of the layer's input x[i] instead. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nets/planner/planner.h"
#include "vdnn/file.h"

#define PLAN_MAGIC "vdnn-plan"
#define PLAN_VERSION 3
/* Far beyond any useful lag: a bound so that a corrupt file cannot ask for nonsense. */
#define PLAN_MAX_LAG 1000
/* The largest plan file read (a pipe is read up to it): a line per layer, and a net has
 * at most a million layers (read_shape). */
#define PLAN_FILE_MAX_BYTES ((size_t)64 << 20)

static const char *const pass_names[PASS_COUNT] = {"forward", "backward-data", "backward-filter"};

static const char *in_place_name(int in_place)
{
    return in_place == IN_PLACE_OVER_OUTPUT ? "on (gradients over outputs)"
           : in_place == IN_PLACE_OVER_GRAD ? "on (gradients over gradients)"
                                            : "off";
}

/* ---- making, copying, freeing ------------------------------------------------------ */

vdnn_status plan_init(plan *p, const net *n)
{
    memset(p, 0, sizeof *p);
    if (!n || n->nlayers < 1) return vdnn_fail(VDNN_EINVAL, "plan_init: the net has no layers");
    p->offload = calloc((size_t)n->nlayers + 1, sizeof *p->offload);
    p->algo = calloc((size_t)n->nlayers, sizeof *p->algo);
    p->swap = calloc((size_t)n->nlayers, sizeof *p->swap);
    if (!p->offload || !p->algo || !p->swap) {
        plan_free(p);
        return vdnn_fail(VDNN_ENOMEM, "out of host memory for a plan of %d layers", n->nlayers);
    }
    p->nlayers = n->nlayers;
    p->batch = n->minibatch;
    p->micro = n->micro;
    p->prefetch_ahead = PREFETCH_FAR;
    p->release_lag = 1;
    p->in_place = n->may_in_place ? IN_PLACE_OVER_OUTPUT : IN_PLACE_OFF;
    p->predicted_s = -1;
    p->measured_s = -1;
    return VDNN_OK;
}

void plan_free(plan *p)
{
    if (!p) return;
    free(p->offload);
    free(p->algo);
    free(p->swap);
    p->offload = NULL;
    p->algo = NULL;
    p->swap = NULL;
    p->nlayers = 0;
}

vdnn_status plan_copy(plan *dst, const plan *src)
{
    *dst = *src;
    if (!src->offload || !src->algo || !src->swap) {   /* an empty (freed) plan copies as empty */
        dst->offload = NULL;
        dst->algo = NULL;
        dst->swap = NULL;
        dst->nlayers = 0;
        return VDNN_OK;
    }
    dst->offload = malloc((size_t)src->nlayers + 1);
    dst->algo = malloc((size_t)src->nlayers * sizeof *src->algo);
    dst->swap = malloc((size_t)src->nlayers);
    if (!dst->offload || !dst->algo || !dst->swap) {
        plan_free(dst);
        return vdnn_fail(VDNN_ENOMEM, "out of host memory copying a plan of %d layers", src->nlayers);
    }
    memcpy(dst->offload, src->offload, (size_t)src->nlayers + 1);
    memcpy(dst->swap, src->swap, (size_t)src->nlayers);
    memcpy(dst->algo, src->algo, (size_t)src->nlayers * sizeof *src->algo);
    return VDNN_OK;
}

/* Whether x[j] may leave the device: some backward pass reads it, and it is not the
 * loss output x[nlayers] (nothing to save there: backward starts right after it). */
static int offloadable(const net *n, int j)
{
    return j >= 0 && j < n->nlayers && net_first_reader(n, j) >= 0;
}

vdnn_status plan_from_net(const net *n, plan *p)
{
    vdnn_status st = plan_init(p, n);
    if (st != VDNN_OK) return st;
    /* Unattached, the net has no maps yet: net_attach will plan them by its policy, and
     * nets/planner/budget.c's budget replay assumes the same, so that is the plan it runs. */
    for (int j = 0; j <= n->nlayers; j++)
        p->offload[j] = (unsigned char)(!n->maps               ? net_policy_map(n, j, n->policy)
                                        : n->maps[j].recompute ? MAP_RECOMPUTE
                                                               : n->maps[j].offload != 0);
    for (int i = 0; i < n->nlayers; i++)
        p->swap[i] = (unsigned char)(n->layers[i]->swap                                  ? n->layers[i]->swap
                                     : !n->dev && net_policy_swaps(n, i, n->policy) ? SWAP_HOST
                                                                                    : SWAP_NONE);
    for (int i = 0; i < n->nlayers; i++) memcpy(p->algo[i], n->layers[i]->algo, sizeof p->algo[i]);
    p->prefetch_ahead = n->prefetch_ahead;
    p->release_lag = n->release_lag;
    p->in_place = n->in_place;
    /* dyn leaves n->policy at none and the planner's plan in the maps: say who chose */
    snprintf(p->origin, sizeof p->origin, "%s", n->dyn ? "dyn" : policy_name(n->policy));
    return VDNN_OK;
}

/* The map decisions of a plan: keep, offload or recompute, the last two only where a
 * backward pass reads the map, and no recomputation that runs a swapped layer again. */
static vdnn_status check_maps(const plan *p, const net *n, const char *who)
{
    int *swapped = malloc((size_t)(n->nlayers + 1) * sizeof *swapped);
    if (!swapped) return vdnn_fail(VDNN_ENOMEM, "%s: out of host memory checking the plan", who);
    net_recompute_runs_swapped(n, p->offload, p->swap, swapped);
    vdnn_status st = VDNN_OK;
    for (int j = 0; j <= n->nlayers && st == VDNN_OK; j++) {
        if (p->offload[j] > MAP_RECOMPUTE)
            st = vdnn_fail(VDNN_EINVAL, "%s: x[%d]: map decision %d is not keep, offload or recompute", who, j,
                           p->offload[j]);
        else if (p->offload[j] && !offloadable(n, j))
            st = vdnn_fail(VDNN_EINVAL, "%s: the plan %s x[%d] (%s%s), but no backward pass reads it", who,
                           p->offload[j] == MAP_RECOMPUTE ? "recomputes" : "offloads", j,
                           j == n->nlayers ? "the loss output" : j ? net_map_name(n, j) : "the input",
                           j && j < n->nlayers ? "'s output" : "");
        else if (p->offload[j] == MAP_RECOMPUTE && j == 0)
            st = vdnn_fail(VDNN_EINVAL, "%s: x[0], the input, cannot be recomputed", who);
        /* recomputing x[j] runs the layers back to the nearest kept maps */
        else if (p->offload[j] == MAP_RECOMPUTE && swapped[j] >= 0)
            st = vdnn_fail(VDNN_EINVAL, "%s: recomputing x[%d] (%s's output) would run %s again, whose parameters "
                           "are swapped", who, j, net_map_name(n, j), n->layers[swapped[j]]->name);
    }
    free(swapped);
    return st;
}

/* Whether `p` can run on `n`: same layer count, known algorithms, offloads only maps
 * that backward reads, a valid copy timing. `who` prefixes the message. */
static vdnn_status plan_check(const plan *p, const net *n, const char *who)
{
    if (p->nlayers != n->nlayers || !p->offload || !p->algo)
        return vdnn_fail(VDNN_EINVAL, "%s: the plan has %d layers, the net has %d (a plan of another net?)", who,
                         p->nlayers, n->nlayers);
    for (int i = 0; i < n->nlayers; i++)
        for (int pass = 0; pass < PASS_COUNT; pass++) {
            int a = p->algo[i][pass], count = layer_algo_count(n->layers[i], pass);
            if (a < 0 || a >= count)
                return vdnn_fail(VDNN_EINVAL, "%s: %s: %s algorithm %d does not exist (the layer has %d)", who,
                                 n->layers[i]->name, pass_names[pass], a, count);
        }
    for (int i = 0; i < n->nlayers; i++) {
        if (p->swap[i] > SWAP_DEVICE)
            return vdnn_fail(VDNN_EINVAL, "%s: %s: swap mode %d is not 0, 1 or 2", who, n->layers[i]->name, p->swap[i]);
        if (p->swap[i] && !layer_swappable(n->layers[i]))
            return vdnn_fail(VDNN_EINVAL, "%s: %s's parameters cannot be swapped (%s)", who, n->layers[i]->name,
                             n->layers[i]->nparams ? "its forward pass updates state in them" : "it has none");
    }
    vdnn_status st = check_maps(p, n, who);
    if (st != VDNN_OK) return st;
    if (p->micro != n->micro)
        return vdnn_fail(VDNN_EINVAL, "%s: the plan's micro-batches are of %d items, the net's of %d (0: no split)",
                         who, p->micro, n->micro);
    if (p->prefetch_ahead < PREFETCH_ON_DEMAND || p->prefetch_ahead > PREFETCH_FAR)
        return vdnn_fail(VDNN_EINVAL, "%s: prefetch mode %d is not one of PREFETCH_*", who, p->prefetch_ahead);
    if (p->release_lag < 0 || p->release_lag > PLAN_MAX_LAG)
        return vdnn_fail(VDNN_EINVAL, "%s: release lag %d is outside 0..%d", who, p->release_lag, PLAN_MAX_LAG);
    if (p->in_place && !n->may_in_place)
        return vdnn_fail(VDNN_EINVAL, "%s: the plan runs layers in place, and the net forbids it ([memory] in_place "
                         "= 0 or --in-place off)", who);
    return VDNN_OK;
}

vdnn_status plan_apply(net *n, const plan *p)
{
    /* all checks first, so that a rejected plan leaves the net as it was */
    vdnn_status st = plan_check(p, n, "plan_apply");
    if (st != VDNN_OK) return st;
    for (int i = 0; n->dev && i < n->nlayers; i++)
        if (!p->swap[i] != !n->layers[i]->swap)
            return vdnn_fail(VDNN_EINVAL, "plan_apply: the plan %s %s's parameters, but the net is on its device with "
                             "them %s; swapping is decided before the parameters are placed (net_attach)",
                             p->swap[i] ? "swaps" : "keeps", n->layers[i]->name,
                             n->layers[i]->swap ? "in host memory" : "on the device");
    for (int i = 0; i < n->nlayers; i++) memcpy(n->layers[i]->algo, p->algo[i], sizeof p->algo[i]);
    for (int j = 0; n->maps && j <= n->nlayers; j++) {
        n->maps[j].offload = p->offload[j] == MAP_OFFLOAD;
        n->maps[j].recompute = p->offload[j] == MAP_RECOMPUTE;
    }
    /* placement is fixed once attached; where a swapped layer updates is not */
    for (int i = 0; i < n->nlayers; i++)
        if (!n->dev || (p->swap[i] && n->layers[i]->swap)) n->layers[i]->swap = p->swap[i];
    n->prefetch_ahead = p->prefetch_ahead;
    n->release_lag = p->release_lag;
    n->in_place = p->in_place;
    return VDNN_OK;
}

/* ---- fixed policies ------------------------------------------------------------------ */

/* The algorithm of `pass` with the least time in t (NULL: all equal); ties go to the
 * smallest workspace, then the lowest index. Times only cover PLAN_MAX_ALGOS. */
static int best_algo(const layer *l, int pass, const double *t)
{
    int count = layer_algo_count(l, pass), best = 0;
    if (t && count > PLAN_MAX_ALGOS) count = PLAN_MAX_ALGOS;
    for (int a = 1; a < count; a++) {
        if (!layer_algo_usable(l, pass, a)) continue;   /* it failed to run on this device */
        if (!layer_algo_usable(l, pass, best)) {
            best = a;
            continue;
        }
        if (t && t[a] != t[best]) {
            if (t[a] < t[best]) best = a;
            continue;
        }
        if (layer_workspace_bytes(l, pass, a) < layer_workspace_bytes(l, pass, best)) best = a;
    }
    return best;
}

static const double *pass_times(const layer_cost *c, int pass)
{
    return pass == PASS_FWD ? c->fwd_s : pass == PASS_BWD_DATA ? c->bwd_data_s : c->bwd_filter_s;
}

int plan_choose_algo(const layer *l, int pass, algo_mode a, const layer_cost *c)
{
    if (l->algo_pinned[pass] >= 0) return l->algo_pinned[pass];
    if (a == ALGO_MEM) return best_algo(l, pass, NULL);
    /* The first layer's backward-data times are all 0 (no dx): the tie-break then
     * takes its smallest workspace, which is free speed-wise. */
    return c ? best_algo(l, pass, pass_times(c, pass)) : l->algo[pass];
}

vdnn_status plan_policy(const net *n, const profile *pr, mem_policy pol, algo_mode a, int prefetch_ahead,
                        int release_lag, plan *p)
{
    memset(p, 0, sizeof *p);
    if ((unsigned)pol >= POLICY_COUNT || (unsigned)a >= ALGO_MODE_COUNT)
        return vdnn_fail(VDNN_EINVAL, "plan_policy: unknown policy %d or algorithm mode %d", (int)pol, (int)a);
    if (pr && (pr->nlayers != n->nlayers || !pr->layers))
        return vdnn_fail(VDNN_EINVAL, "plan_policy: the profile has %d layers, the net has %d", pr->nlayers,
                         n->nlayers);
    vdnn_status st = plan_init(p, n);
    if (st != VDNN_OK) return st;
    p->prefetch_ahead = prefetch_ahead;
    p->release_lag = release_lag;
    snprintf(p->origin, sizeof p->origin, "%s", policy_name(pol));
    for (int j = 0; j <= n->nlayers; j++) p->offload[j] = (unsigned char)net_policy_map(n, j, pol);
    for (int i = 0; i < n->nlayers; i++) p->swap[i] = (unsigned char)net_policy_swaps(n, i, pol);
    for (int i = 0; i < n->nlayers; i++)
        for (int pass = 0; pass < PASS_COUNT; pass++)
            p->algo[i][pass] = plan_choose_algo(n->layers[i], pass, a, pr ? &pr->layers[i] : NULL);
    st = plan_check(p, n, "plan_policy");
    if (st != VDNN_OK) plan_free(p);
    return st;
}

/* ---- saving ---------------------------------------------------------------------------- */

static const char *const prefetch_names[] = {"on-demand", "next", "far"};   /* by PREFETCH_* */

static const char *prefetch_name(int ahead)
{
    return ahead >= PREFETCH_ON_DEMAND && ahead <= PREFETCH_FAR ? prefetch_names[ahead] : "?";
}

/* Seconds as milliseconds with the fewest digits that read back (ms / 1e3) to the same
 * double, so that a saved plan loads exactly; "-" for unknown (negative or not finite). */
static const char *fmt_ms(double s, char *buf, size_t len)
{
    snprintf(buf, len, "-");
    if (!(s >= 0) || !isfinite(s)) return buf;
    for (int digits = 6; digits <= 17; digits++) {
        snprintf(buf, len, "%.*g", digits, s * 1e3);
        if (strtod(buf, NULL) / 1e3 == s) break;
    }
    return buf;
}

/* The origin as one word: blanks and control characters would split or end the line. */
static void origin_word(const char *origin, char *buf, size_t len)
{
    size_t k = 0;
    for (; origin[k] && k + 1 < len; k++) buf[k] = (unsigned char)origin[k] <= ' ' ? '_' : origin[k];
    buf[k] = 0;
    if (!k) snprintf(buf, len, "-");
}

static const char *const map_words[3] = {"keep", "offload", "recompute"};

static void write_plan(FILE *f, const plan *p, const net *n)
{
    char t1[40], t2[40], origin[sizeof p->origin + 1];
    origin_word(p->origin, origin, sizeof origin);
    fprintf(f, "# vdnn plan (docs/planner.md)\n%s %d\nlayers %d\nbatch %d\nmicro_batch %d\nprefetch %s\n"
            "release_lag %d\nin_place %d\n", PLAN_MAGIC, PLAN_VERSION, p->nlayers, p->batch, p->micro,
            prefetch_name(p->prefetch_ahead), p->release_lag, p->in_place);
    fprintf(f, "origin %s\npredicted_ms %s\npeak_bytes %zu\nmeasured_ms %s\n", origin,
            fmt_ms(p->predicted_s, t1, sizeof t1), p->peak_bytes, fmt_ms(p->measured_s, t2, sizeof t2));
    fprintf(f, "# map of the net's input: keep or offload\ndata %s\n", map_words[p->offload[0]]);
    fprintf(f, "# layer  output-map  swap  fwd  bwd-data  bwd-filter\n");
    for (int i = 0; i < n->nlayers; i++) {
        const layer *l = n->layers[i];
        fprintf(f, "%s %s %d %s %s %s\n", l->name, map_words[p->offload[i + 1]], p->swap[i],
                layer_algo_name(l, PASS_FWD, p->algo[i][0]),
                layer_algo_name(l, PASS_BWD_DATA, p->algo[i][1]), layer_algo_name(l, PASS_BWD_FILTER, p->algo[i][2]));
    }
}

vdnn_status plan_save(const plan *p, const net *n, const char *path)
{
    vdnn_status st = plan_check(p, n, path);
    if (st != VDNN_OK) return st;
    size_t len = strlen(path) + 5;
    char *tmp = malloc(len);
    if (!tmp) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    snprintf(tmp, len, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        st = vdnn_fail(VDNN_EIO, "%s: cannot write the plan: %s", tmp, strerror(errno));
        free(tmp);
        return st;
    }
    write_plan(f, p, n);
    /* written, flushed and renamed: a crash leaves the old plan or the new, never half */
    int ok = !ferror(f) && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int err = errno;
    ok = fclose(f) == 0 && ok;
    if (!ok) st = vdnn_fail(VDNN_EIO, "%s: writing the plan failed: %s", tmp, strerror(err ? err : EIO));
    else if (rename(tmp, path) != 0)
        st = vdnn_fail(VDNN_EIO, "%s: cannot rename the plan into place: %s", path, strerror(errno));
    if (st != VDNN_OK) remove(tmp);
    free(tmp);
    return st;
}

/* ---- loading ----------------------------------------------------------------------------- */

#define MAX_TOKENS 8

typedef struct reader {
    FILE *f;
    const char *path;
    int line;                 /* number of the line now in buf */
    char *buf;                /* getline's; owned */
    size_t cap;
    char *tok[MAX_TOKENS];
    int ntok;                 /* all tokens on the line, even those beyond MAX_TOKENS */
} reader;

/* Reads the next line that is neither blank nor a comment and splits it at blanks.
 * Returns 0 at the end of the file (or on a read error: see at_end). */
static int next_line(reader *r)
{
    static const char blanks[] = " \t\r\n\v\f";
    while (getline(&r->buf, &r->cap, r->f) >= 0) {
        r->line++;
        r->ntok = 0;
        char *save = NULL;
        for (char *t = strtok_r(r->buf, blanks, &save); t; t = strtok_r(NULL, blanks, &save)) {
            if (r->ntok < MAX_TOKENS) r->tok[r->ntok] = t;
            r->ntok++;
        }
        if (r->ntok > 0 && r->tok[0][0] != '#') return 1;
    }
    return 0;
}

/* The error for a file that ended where `what` was expected. */
static vdnn_status at_end(reader *r, const char *what)
{
    if (ferror(r->f)) return vdnn_fail(VDNN_EIO, "%s:%d: reading the plan failed", r->path, r->line + 1);
    return vdnn_fail(VDNN_EFORMAT, "%s:%d: the file ends where %s was expected (truncated?)", r->path,
                     r->line + 1, what);
}

/* The next line must read `key VALUE`; *value is VALUE. */
static vdnn_status expect_key(reader *r, const char *key, const char **value)
{
    if (!next_line(r)) return at_end(r, key);
    if (strcmp(r->tok[0], key) != 0)
        return vdnn_fail(VDNN_EFORMAT, "%s:%d: expected '%s VALUE', found '%.40s'", r->path, r->line, key, r->tok[0]);
    if (r->ntok != 2)
        return vdnn_fail(VDNN_EFORMAT, "%s:%d: '%s' takes one value, found %d", r->path, r->line, key, r->ntok - 1);
    *value = r->tok[1];
    return VDNN_OK;
}

/* An integer line `key N` with lo <= N <= hi. */
static vdnn_status read_int(reader *r, const char *key, long lo, long hi, int *out)
{
    const char *v = NULL;
    vdnn_status st = expect_key(r, key, &v);
    if (st != VDNN_OK) return st;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (*end || end == v || errno || x < lo || x > hi)
        return vdnn_fail(VDNN_EFORMAT, "%s:%d: %s must be an integer in %ld..%ld, not '%.40s'", r->path, r->line,
                         key, lo, hi, v);
    *out = (int)x;
    return VDNN_OK;
}

/* A time line `key MS` (or `key -`: unknown, -1) into seconds. */
static vdnn_status read_ms(reader *r, const char *key, double *out_s)
{
    const char *v = NULL;
    vdnn_status st = expect_key(r, key, &v);
    if (st != VDNN_OK) return st;
    if (!strcmp(v, "-")) {
        *out_s = -1;
        return VDNN_OK;
    }
    char *end;
    double ms = strtod(v, &end);
    if (*end || end == v || !isfinite(ms) || ms < 0)
        return vdnn_fail(VDNN_EFORMAT, "%s:%d: %s must be a time in milliseconds >= 0 or '-', not '%.40s'",
                         r->path, r->line, key, v);
    *out_s = ms / 1e3;
    return VDNN_OK;
}

static vdnn_status read_bytes(reader *r, const char *key, size_t *out)
{
    const char *v = NULL;
    vdnn_status st = expect_key(r, key, &v);
    if (st != VDNN_OK) return st;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (*end || end == v || errno || v[0] < '0' || v[0] > '9' || x > SIZE_MAX)
        return vdnn_fail(VDNN_EFORMAT, "%s:%d: %s must be a byte count, not '%.40s'", r->path, r->line, key, v);
    *out = (size_t)x;
    return VDNN_OK;
}

static vdnn_status read_magic(reader *r, int *version)
{
    if (!next_line(r)) return at_end(r, "'" PLAN_MAGIC " 3'");
    if (strcmp(r->tok[0], PLAN_MAGIC) != 0 || r->ntok != 2)
        return vdnn_fail(VDNN_EFORMAT, "%s:%d: not a vdnn plan (its first line must be '%s %d')", r->path, r->line,
                         PLAN_MAGIC, PLAN_VERSION);
    if (strcmp(r->tok[1], "1") != 0 && strcmp(r->tok[1], "2") != 0 && strcmp(r->tok[1], "3") != 0)
        return vdnn_fail(VDNN_EFORMAT, "%s:%d: plan format version '%.20s'; this vdnn reads versions 1 to %d",
                         r->path, r->line, r->tok[1], PLAN_VERSION);
    *version = r->tok[1][0] - '0';
    return VDNN_OK;
}

/* layers and batch must be the net's: a plan is for one net at one batch. */
static vdnn_status read_shape(reader *r, const net *n)
{
    int count, batch;
    vdnn_status st = read_int(r, "layers", 1, 1000000, &count);
    if (st == VDNN_OK && count != n->nlayers)
        return vdnn_fail(VDNN_EINVAL, "%s:%d: the plan has %d layers, the net has %d", r->path, r->line, count,
                         n->nlayers);
    if (st == VDNN_OK) st = read_int(r, "batch", 1, 1000000000, &batch);
    if (st == VDNN_OK && batch != n->minibatch)
        return vdnn_fail(VDNN_EINVAL, "%s:%d: the plan was made for batch %d, the net has batch %d "
                         "(run with --batch %d, or make a new plan)", r->path, r->line, batch, n->minibatch, batch);
    int micro = 0;
    if (st == VDNN_OK) st = read_int(r, "micro_batch", 0, 1000000000, &micro);
    if (st == VDNN_OK && micro != n->micro)
        return vdnn_fail(VDNN_EINVAL, "%s:%d: the plan was made for micro-batches of %d items, the net runs "
                         "micro-batches of %d (0: the whole batch); run %s%.0d, or make a new plan", r->path, r->line,
                         micro, n->micro, micro ? "with --micro-batch " : "without --micro-batch", micro);
    return st;
}

static vdnn_status read_timing(reader *r, int version, plan *p)
{
    const char *v = NULL;
    vdnn_status st = expect_key(r, "prefetch", &v);
    if (st != VDNN_OK) return st;
    p->prefetch_ahead = -1;
    for (int k = PREFETCH_ON_DEMAND; k <= PREFETCH_FAR; k++)
        if (!strcmp(v, prefetch_names[k])) p->prefetch_ahead = k;
    if (p->prefetch_ahead < 0)
        return vdnn_fail(VDNN_EFORMAT, "%s:%d: prefetch must be far, next or on-demand, not '%.40s'", r->path,
                         r->line, v);
    st = read_int(r, "release_lag", 0, PLAN_MAX_LAG, &p->release_lag);
    p->in_place = 0;
    if (st == VDNN_OK && version >= 3) st = read_int(r, "in_place", IN_PLACE_OFF, IN_PLACE_OVER_OUTPUT, &p->in_place);
    return st;
}

static vdnn_status read_results(reader *r, plan *p)
{
    const char *v = NULL;
    vdnn_status st = expect_key(r, "origin", &v);
    if (st != VDNN_OK) return st;
    if (strlen(v) >= sizeof p->origin)
        return vdnn_fail(VDNN_EFORMAT, "%s:%d: origin '%.40s' is longer than %zu characters", r->path, r->line, v,
                         sizeof p->origin - 1);
    snprintf(p->origin, sizeof p->origin, "%s", strcmp(v, "-") ? v : "");
    st = read_ms(r, "predicted_ms", &p->predicted_s);
    if (st == VDNN_OK) st = read_bytes(r, "peak_bytes", &p->peak_bytes);
    if (st == VDNN_OK) st = read_ms(r, "measured_ms", &p->measured_s);
    return st;
}

/* The algorithm of `pass` named `name`, or an error listing the layer's algorithms. */
static vdnn_status read_algo(reader *r, const layer *l, int pass, const char *name, int *out)
{
    int count = layer_algo_count(l, pass);
    for (int a = 0; a < count; a++)
        if (!strcmp(layer_algo_name(l, pass, a), name)) {
            *out = a;
            return VDNN_OK;
        }
    char known[512] = "";
    size_t used = 0;
    for (int a = 0; a < count && used < sizeof known; a++)
        used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", a ? ", " : "",
                                 layer_algo_name(l, pass, a));
    return vdnn_fail(VDNN_EINVAL, "%s:%d: %s: unknown %s algorithm '%.40s' (it has: %s)", r->path, r->line, l->name,
                     pass_names[pass], name, known);
}

/* A map word (keep, offload, recompute) into *map, or an error naming `what`. */
static vdnn_status read_map_word(reader *r, const char *word, const char *who, const char *what, int *map)
{
    *map = -1;
    for (int k = 0; k < 3; k++)
        if (!strcmp(word, map_words[k])) *map = k;
    if (*map < 0)
        return vdnn_fail(VDNN_EFORMAT, "%s:%d: %s: the %s must be keep, offload or recompute, not '%.40s'", r->path,
                         r->line, who, what, word);
    return VDNN_OK;
}

/* The map decision of x[j] read on a line of `who` (a layer, or data). */
static vdnn_status set_map(reader *r, const net *n, const char *who, int j, int map, plan *p)
{
    p->offload[j] = (unsigned char)map;
    if (map == MAP_RECOMPUTE && j == 0)
        return vdnn_fail(VDNN_EINVAL, "%s:%d: x[0], the input, cannot be recomputed: nothing computes it", r->path,
                         r->line);
    if (map && !offloadable(n, j))
        return vdnn_fail(VDNN_EINVAL, "%s:%d: %s: the plan %s x[%d] (%s%s), but no backward pass reads it (it must "
                         "be keep)", r->path, r->line, who, map == MAP_OFFLOAD ? "offloads" : "recomputes", j,
                         j == n->nlayers ? "the loss output" : j ? net_map_name(n, j) : "the input",
                         j && j < n->nlayers ? "'s output" : "");
    return VDNN_OK;
}

static vdnn_status read_data(reader *r, const net *n, plan *p)
{
    const char *v = NULL;
    int map;
    vdnn_status st = expect_key(r, "data", &v);
    if (st == VDNN_OK) st = read_map_word(r, v, "data", "input map", &map);
    if (st == VDNN_OK) st = set_map(r, n, "data", 0, map, p);
    return st;
}

/* Layer i's line: in version 2 its output map's decision, in version 1 its input's. */
static vdnn_status read_layer(reader *r, const net *n, int i, int version, plan *p)
{
    const layer *l = n->layers[i];
    if (!next_line(r)) return at_end(r, "a layer line");
    if (r->ntok != 6)
        return vdnn_fail(VDNN_EFORMAT, "%s:%d: a layer line reads 'NAME MAP SWAP FWD BWD-DATA BWD-FILTER'; "
                         "this one has %d fields", r->path, r->line, r->ntok);
    if (strcmp(r->tok[0], l->name) != 0)
        return vdnn_fail(VDNN_EINVAL, "%s:%d: layer %d is %s in the net but '%.40s' in the plan", r->path, r->line,
                         i + 1, l->name, r->tok[0]);
    int map;
    vdnn_status st = read_map_word(r, r->tok[1], l->name, version == 1 ? "input map" : "output map", &map);
    if (st == VDNN_OK) st = set_map(r, n, l->name, version == 1 ? i : i + 1, map, p);
    if (st != VDNN_OK) return st;
    if (strcmp(r->tok[2], "0") != 0 && strcmp(r->tok[2], "1") != 0 && strcmp(r->tok[2], "2") != 0)
        return vdnn_fail(VDNN_EFORMAT, "%s:%d: %s: the swap flag must be 0 (resident), 1 (swapped, updated on the "
                         "host) or 2 (swapped, updated on the device), not '%.40s'", r->path, r->line, l->name, r->tok[2]);
    p->swap[i] = (unsigned char)(r->tok[2][0] - '0');
    for (int pass = 0; pass < PASS_COUNT && st == VDNN_OK; pass++)
        st = read_algo(r, l, pass, r->tok[3 + pass], &p->algo[i][pass]);
    return st;
}

static vdnn_status read_plan(reader *r, const net *n, plan *p)
{
    int version = 0;
    vdnn_status st = read_magic(r, &version);
    if (st == VDNN_OK) st = read_shape(r, n);
    if (st == VDNN_OK) st = read_timing(r, version, p);
    if (st == VDNN_OK) st = read_results(r, p);
    if (st == VDNN_OK && version >= 2) st = read_data(r, n, p);
    for (int i = 0; i < n->nlayers && st == VDNN_OK; i++) st = read_layer(r, n, i, version, p);
    if (st == VDNN_OK && next_line(r))
        st = vdnn_fail(VDNN_EFORMAT, "%s:%d: unexpected '%.40s' after the last layer", r->path, r->line, r->tok[0]);
    if (st == VDNN_OK && ferror(r->f)) st = vdnn_fail(VDNN_EIO, "%s: reading the plan failed", r->path);
    return st;
}

vdnn_status plan_load(const net *n, const char *path, plan *out)
{
    vdnn_status st = plan_init(out, n);
    if (st != VDNN_OK) return st;
    reader r = {.path = path};
    char *text = NULL;
    size_t len = 0;
    /* read whole, within a limit, then parsed from memory: no line can be endless */
    st = vdnn_file_read(path, "plan", PLAN_FILE_MAX_BYTES, VDNN_FILE_PIPE | VDNN_FILE_TEXT, &text, &len);
    if (st == VDNN_OK && !(r.f = fmemopen(text, len, "r")))
        st = vdnn_fail(VDNN_ENOMEM, "%s: out of host memory reading the plan", path);
    if (st == VDNN_OK) st = read_plan(&r, n, out);
    if (st == VDNN_OK) st = plan_check(out, n, path);
    if (r.f) fclose(r.f);
    free(r.buf);
    free(text);
    if (st != VDNN_OK) plan_free(out);
    return st;
}

/* ---- printing ------------------------------------------------------------------------------ */

/* Layer i's times for the plan's algorithms, or 0 when pr has none for it. */
static int layer_ms(const plan *p, const profile *pr, int i, double *fwd_ms, double *bwd_ms)
{
    if (!pr || pr->nlayers != p->nlayers || !pr->layers) return 0;
    const int *a = p->algo[i];
    for (int pass = 0; pass < PASS_COUNT; pass++)
        if (a[pass] < 0 || a[pass] >= PLAN_MAX_ALGOS) return 0;
    const layer_cost *c = &pr->layers[i];
    *fwd_ms = c->fwd_s[a[PASS_FWD]] * 1e3;
    *bwd_ms = (c->bwd_data_s[a[PASS_BWD_DATA]] + c->bwd_filter_s[a[PASS_BWD_FILTER]]) * 1e3;
    return 1;
}

/* Printing takes any plan, checked or not: an algorithm the layer lacks shows as "?". */
static const char *algo_name(const layer *l, int pass, int a)
{
    return a >= 0 && a < layer_algo_count(l, pass) ? layer_algo_name(l, pass, a) : "?";
}

static size_t fwd_workspace(const layer *l, int a)
{
    return a >= 0 && a < layer_algo_count(l, PASS_FWD) ? layer_workspace_bytes(l, PASS_FWD, a) : 0;
}

static int has_choice(const layer *l)
{
    for (int pass = 0; pass < PASS_COUNT; pass++)
        if (layer_algo_count(l, pass) > 1) return 1;
    return 0;
}

/* The decision of map x[j], with the swap of the layer that writes it. */
static const char *offload_word(const plan *p, const net *n, int j)
{
    int swap = j ? p->swap[j - 1] : 0;
    if (swap > SWAP_DEVICE) swap = 0;
    if (!offloadable(n, j)) return swap == SWAP_HOST ? "swap" : swap == SWAP_DEVICE ? "swapD" : "-";
    if (p->offload[j] > MAP_RECOMPUTE) return "?";
    static const char *const words[3][3] = {{"keep", "offload", "recompute"},
                                            {"keep+swap", "offload+swap", "recomp+swap"},
                                            {"keep+swapD", "offload+swapD", "recomp+swapD"}};
    return words[swap][p->offload[j]];
}

static size_t map_size(const net *n, int j)
{
    return shape_bytes(j ? n->layers[j - 1]->out : n->input);
}

static void print_row(FILE *f, const plan *p, const net *n, const profile *pr, int i)
{
    const layer *l = n->layers[i];
    char out[32], ws[32];
    int choice = has_choice(l);
    const char *name[PASS_COUNT];
    for (int pass = 0; pass < PASS_COUNT; pass++)
        name[pass] = choice ? algo_name(l, pass, p->algo[i][pass]) : "-";
    size_t wsb = fwd_workspace(l, p->algo[i][PASS_FWD]);
    fprintf(f, "%4d  %-14s %-14s %11s  %-13s %-13s %-13s %-15s %11s", i, l->name, l->ops->type,
            vdnn_fmt_bytes(shape_bytes(l->out), out, sizeof out), offload_word(p, n, i + 1), name[0], name[1], name[2],
            wsb ? vdnn_fmt_bytes(wsb, ws, sizeof ws) : "-");
    double fms, bms;
    if (layer_ms(p, pr, i, &fms, &bms)) fprintf(f, " %9.3f %9.3f", fms, bms);
    fputc('\n', f);
}

static void print_footer(FILE *f, const plan *p, const net *n)
{
    size_t bytes[3] = {0, 0, 0}, swapped = 0;
    int maps[3] = {0, 0, 0}, layers = 0;
    for (int j = 0; j <= n->nlayers; j++)
        if (p->offload[j] <= MAP_RECOMPUTE) bytes[p->offload[j]] += map_size(n, j), maps[p->offload[j]]++;
    for (int i = 0; i < n->nlayers; i++)
        if (p->swap[i]) swapped += layer_param_bytes(n->layers[i]), layers++;
    char b1[32], b2[32], b3[32];
    fprintf(f, "offloaded: %d maps, %s; recomputed: %d maps, %s; swapped: %d layers, %s of parameters\n",
            maps[MAP_OFFLOAD], vdnn_fmt_bytes(bytes[MAP_OFFLOAD], b1, sizeof b1), maps[MAP_RECOMPUTE],
            vdnn_fmt_bytes(bytes[MAP_RECOMPUTE], b2, sizeof b2), layers, vdnn_fmt_bytes(swapped, b3, sizeof b3));
    if (p->micro) fprintf(f, "micro-batches: %d items each, %d per batch of %d\n", p->micro,
                          (p->batch + p->micro - 1) / p->micro, p->batch);
    fprintf(f, "copy timing: prefetch %s, release lag %d; in-place layers %s\n", prefetch_name(p->prefetch_ahead),
            p->release_lag, in_place_name(p->in_place));
    if (p->predicted_s >= 0)
        fprintf(f, "predicted: %.3f ms per iteration, peak %s (%zu bytes)\n", p->predicted_s * 1e3,
                vdnn_fmt_bytes(p->peak_bytes, b2, sizeof b2), p->peak_bytes);
    else
        fprintf(f, "predicted: not simulated\n");
    if (p->measured_s >= 0) {
        fprintf(f, "measured: %.3f ms per iteration", p->measured_s * 1e3);
        if (p->predicted_s > 0) fprintf(f, " (%.2fx the prediction)", p->measured_s / p->predicted_s);
        fputc('\n', f);
    }
}

void plan_print(FILE *f, const plan *p, const net *n, const profile *pr)
{
    if (p->nlayers != n->nlayers || !p->offload || !p->algo) {
        fprintf(f, "plan: %d layers, the net has %d: not this net's plan\n", p->nlayers, n->nlayers);
        return;
    }
    fprintf(f, "plan (origin %s, batch %d, %d layers)\n", p->origin[0] ? p->origin : "-", p->batch, p->nlayers);
    fprintf(f, "%4s  %-14s %-14s %11s  %-13s %-13s %-13s %-15s %11s", "#", "layer", "type", "output map",
            "map", "fwd", "bwd-data", "bwd-filter", "workspace");
    if (pr && pr->nlayers == p->nlayers) fprintf(f, " %9s %9s", "fwd ms", "bwd ms");
    fputc('\n', f);
    char in[32];
    fprintf(f, "%4s  %-14s %-14s %11s  %-13s\n", "-", "data", "(input)", vdnn_fmt_bytes(map_size(n, 0), in, sizeof in),
            offload_word(p, n, 0));
    for (int i = 0; i < n->nlayers; i++) print_row(f, p, n, pr, i);
    print_footer(f, p, n);
}

/* A number, or null when unknown (negative when `neg_unknown`) or not finite. */
static void json_num(FILE *f, double v, int neg_unknown)
{
    if (!isfinite(v) || (neg_unknown && v < 0)) fprintf(f, "null");
    else fprintf(f, "%.6f", v);
}

/* "offload":true|false|null,"map":"keep|offload|recompute|-" of map x[j]. */
static void json_map(FILE *f, const plan *p, const net *n, int j)
{
    int can = offloadable(n, j);
    fprintf(f, "\"offload\":%s,\"map\":\"%s\"", !can ? "null" : p->offload[j] == MAP_OFFLOAD ? "true" : "false",
            !can || p->offload[j] > MAP_RECOMPUTE ? "-" : map_words[p->offload[j]]);
}

static void json_layer(FILE *f, const plan *p, const net *n, const profile *pr, int i)
{
    const layer *l = n->layers[i];
    fprintf(f, "{\"index\":%d,\"name\":", i);
    vdnn_json_str(f, l->name);
    fprintf(f, ",\"type\":");
    vdnn_json_str(f, l->ops->type);
    fprintf(f, ",\"inputs\":[");
    for (int k = 0; k < l->ninputs; k++) {
        if (k) fputc(',', f);
        vdnn_json_str(f, net_map_name(n, l->input[k]));
    }
    fprintf(f, "],\"output_bytes\":%zu,", shape_bytes(l->out));
    json_map(f, p, n, i + 1);
    fprintf(f, ",\"swap\":%s,\"update\":\"%s\",\"algo\":{", p->swap[i] ? "true" : "false",
            p->swap[i] == SWAP_HOST ? "host" : "device");
    static const char *const keys[PASS_COUNT] = {"fwd", "bwd_data", "bwd_filter"};
    for (int pass = 0; pass < PASS_COUNT; pass++) {
        fprintf(f, "%s\"%s\":", pass ? "," : "", keys[pass]);
        vdnn_json_str(f, algo_name(l, pass, p->algo[i][pass]));
    }
    fprintf(f, "},\"workspace_bytes\":%zu,\"fwd_ms\":", fwd_workspace(l, p->algo[i][PASS_FWD]));
    double fms = -1, bms = -1;
    layer_ms(p, pr, i, &fms, &bms);
    json_num(f, fms, 1);
    fprintf(f, ",\"bwd_ms\":");
    json_num(f, bms, 1);
    fputc('}', f);
}

void plan_print_json(FILE *f, const plan *p, const net *n, const profile *pr)
{
    if (p->nlayers != n->nlayers || !p->offload || !p->algo) {
        fprintf(f, "{\"error\":\"the plan has %d layers, the net has %d\"}\n", p->nlayers, n->nlayers);
        return;
    }
    fprintf(f, "{\"origin\":");
    vdnn_json_str(f, p->origin);
    fprintf(f, ",\"batch\":%d,\"micro_batch\":%d,\"prefetch\":\"%s\",\"release_lag\":%d,\"in_place\":%d,"
            "\"predicted_ms\":", p->batch, p->micro, prefetch_name(p->prefetch_ahead), p->release_lag, p->in_place);
    json_num(f, p->predicted_s * 1e3, 1);
    fprintf(f, ",\"peak_bytes\":%zu,\"measured_ms\":", p->peak_bytes);
    json_num(f, p->measured_s * 1e3, 1);
    fprintf(f, ",\"data\":{\"bytes\":%zu,", map_size(n, 0));
    json_map(f, p, n, 0);
    fprintf(f, "},\"layers\":[");
    for (int i = 0; i < n->nlayers; i++) {
        if (i) fputc(',', f);
        json_layer(f, p, n, pr, i);
    }
    fprintf(f, "]}\n");
}
