/* Plan files (nets/planner/planner.h): saving a plan as text and loading it back,
 * checked against the net (plan_check).
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

#include "nets/planner/plan_impl.h"
#include "vdnn/file.h"

#define PLAN_MAGIC "vdnn-plan"
#define PLAN_VERSION 3
/* The largest plan file read (a pipe is read up to it): a line per layer, and a net has
 * at most a million layers (read_shape). */
#define PLAN_FILE_MAX_BYTES ((size_t)64 << 20)

/* ---- saving ---------------------------------------------------------------------------- */

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

static void write_plan(FILE *f, const plan *p, const net *n)
{
    char t1[40], t2[40], origin[sizeof p->origin + 1];
    origin_word(p->origin, origin, sizeof origin);
    fprintf(f, "# vdnn plan (docs/planner.md)\n%s %d\nlayers %d\nbatch %d\nmicro_batch %d\nprefetch %s\n"
            "release_lag %d\nin_place %d\n", PLAN_MAGIC, PLAN_VERSION, p->nlayers, p->batch, p->micro,
            plan_prefetch_name(p->prefetch_ahead), p->release_lag, p->in_place);
    fprintf(f, "origin %s\npredicted_ms %s\npeak_bytes %zu\nmeasured_ms %s\n", origin,
            fmt_ms(p->predicted_s, t1, sizeof t1), p->peak_bytes, fmt_ms(p->measured_s, t2, sizeof t2));
    fprintf(f, "# map of the net's input: keep or offload\ndata %s\n", plan_map_words[p->offload[0]]);
    fprintf(f, "# layer  output-map  swap  fwd  bwd-data  bwd-filter\n");
    for (int i = 0; i < n->nlayers; i++) {
        const layer *l = n->layers[i];
        fprintf(f, "%s %s %d %s %s %s\n", l->name, plan_map_words[p->offload[i + 1]], p->swap[i],
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
        if (!strcmp(v, plan_prefetch_names[k])) p->prefetch_ahead = k;
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
                     plan_pass_names[pass], name, known);
}

/* A map word (keep, offload, recompute) into *map, or an error naming `what`. */
static vdnn_status read_map_word(reader *r, const char *word, const char *who, const char *what, int *map)
{
    *map = -1;
    for (int k = 0; k < 3; k++)
        if (!strcmp(word, plan_map_words[k])) *map = k;
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
    if (map && !plan_offloadable(n, j))
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

vdnn_status plan_file_split(const char *path, int *batch, int *micro)
{
    /* a regular file only: a pipe read here would be empty for plan_load */
    char *text = NULL;
    size_t len = 0;
    reader r = {.path = path};
    int version = 0, layers = 0;
    vdnn_status st = vdnn_file_read(path, "plan", PLAN_FILE_MAX_BYTES, VDNN_FILE_TEXT, &text, &len);
    if (st == VDNN_OK && !(r.f = fmemopen(text, len, "r")))
        st = vdnn_fail(VDNN_ENOMEM, "%s: out of host memory reading the plan", path);
    if (st == VDNN_OK) st = read_magic(&r, &version);
    if (st == VDNN_OK) st = read_int(&r, "layers", 1, 1000000, &layers);
    if (st == VDNN_OK) st = read_int(&r, "batch", 1, 1000000000, batch);
    if (st == VDNN_OK) st = read_int(&r, "micro_batch", 0, 1000000000, micro);
    if (r.f) fclose(r.f);
    free(r.buf);
    free(text);
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

