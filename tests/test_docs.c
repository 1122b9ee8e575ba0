/* Check suite for the documentation: every command in a ```sh block of README.md and of
 * every page in docs/ (docs/tutorial.md among them) runs here as a reader would run it,
 * so that an example whose flag, subcommand, config or budget no longer works fails,
 * naming the file, the line and the command, with its stderr.
 *
 * What is taken from a ```sh (or ```bash) block: each line, its `\` continuations
 * joined and a line that starts with `[` joined to the synopsis above it; `a && b` is
 * two commands; a trailing `# comment` is dropped. One check per command:
 *  - vdnn commands (./build/vdnn, build/vdnn or vdnn, maybe after mpirun) run with
 *    $VDNN_BIN (else build/vdnn), each doc's in order in a folder of its own inside one
 *    scratch folder (configs/ and data/ linked there, VDNN_RUNS there; VDNN_CACHE is the
 *    suite's own), so that a command may use what an earlier one of its doc wrote; two
 *    docs run at a time, before the checks report them. They are bounded
 *    so that the suite takes under a minute: train runs at most 2 steps, with --data
 *    synthetic when the config's data set is not installed; test evaluates synthetic
 *    data (a whole test split takes 10 to 20 s); train, test, profile and sweep run at
 *    batch 8 at most, 2 for inputs above 64x64, whose configs also run shrunk to the
 *    least side from 32 that vdnn accepts (the layers the same, the work a few percent),
 *    unless --micro-batch is given; a search (profile, sweep, train --policy dyn) stops
 *    0.05 s after a plan fits and a real sweep runs 1 iteration per row. Each of these
 *    bounds caps a value the command gives. Each command must exit 0 within 120 s.
 *  - a command whose comment starts with "refused:" runs as written, unbounded; it must
 *    exit 1 with a "vdnn: " message.
 *  - synopses (a placeholder such as CFG, N or FILE, or [--flag]) are not run: the
 *    subcommand and every flag they name must be in `vdnn SUB --help`.
 *  - `make TARGET...` is not run (the suite runs inside make test): the Makefile must
 *    have each target. `sh SCRIPT`, `bash SCRIPT` and `python3 SCRIPT` are not run (they
 *    install packages or run for minutes): the script must exist.
 *  - skipped, with a SKIPPED line that names them, never counted as run: the slow-down
 *    manager (`vdnn manager`, `train --managed`: a manager left running;
 *    tests/test_manager.c runs it), commands left in the background (`&`), GPU commands
 *    where no GPU is visible, mpirun where the build has no MPI or mpirun is missing,
 *    mpirun across machines (-H, --host, --hostfile), and any other command. A skipped
 *    vdnn command's subcommand and flags are still checked as a synopsis's are.
 * The closing line counts the commands run, checked without running, and skipped.
 * Under the sanitizers the suite prints one SKIPPED line: make test runs it. */
#include <check.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/testnet.h"
#include "tests/tsan.h"
#include "vdnn/comm.h"
#include "vdnn/device.h"

enum { DOC_TEXT_MAX = 4096, DOC_ARGS_MAX = 256, DOC_FILES_MAX = 64, DOC_CMDS_MAX = 1024 };

/* How long one command may run, in seconds, and how many docs run at once. */
#define DOC_TIMEOUT_S 120
#define DOC_JOBS 2
/* Bounds added to commands that compute. */
#define DOC_STEPS 2
#define DOC_BATCH 8
#define DOC_BATCH_LARGE 2
#define DOC_LARGE_PIXELS (64 * 64)
#define DOC_SEARCH_S 0.05
#define DOC_SEARCH_TEXT "0.05"

typedef enum { DOC_RUN, DOC_REFUSED, DOC_SYNOPSIS, DOC_MAKE, DOC_SCRIPT, DOC_SKIP } doc_kind;

typedef struct doc_cmd {
    char file[256];            /* as named from the repository root: README.md, docs/cli.md */
    int line;                  /* the line it starts on */
    char text[DOC_TEXT_MAX];   /* as written, lines joined, without its comment or & */
    char comment[512];         /* its trailing comment, without the # */
    int background;            /* it ended with a lone & */
    doc_kind kind;
    const char *why;           /* DOC_SKIP: why */
} doc_cmd;

static doc_cmd *doc_cmds;
static int doc_ncmds;
static char doc_files[DOC_FILES_MAX][256];
static int doc_unclosed[DOC_FILES_MAX];
static int doc_nfiles;
static char doc_scratch[PATH_MAX], doc_bin[PATH_MAX];

/* ---- reading the docs ---- */

/* The whole file, NUL-terminated, or NULL: tn_read without its check, for main(). */
static char *doc_slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    char buf[65536];
    for (size_t n; m && (n = fread(buf, 1, sizeof buf, f)) > 0;) fwrite(buf, 1, n, m);
    fclose(f);
    if (m) fclose(m);
    return text;
}

/* Appends `s` (n bytes) to dst, a NUL-terminated buffer of `cap` bytes; 0 when it does
 * not fit. */
static int doc_append(char *dst, size_t cap, const char *s, size_t n)
{
    size_t len = strlen(dst);
    if (len + n + 1 > cap) return 0;
    memcpy(dst + len, s, n);
    dst[len + n] = 0;
    return 1;
}

/* doc_append of a whole string. */
static int doc_cat(char *dst, size_t cap, const char *s) { return doc_append(dst, cap, s, strlen(s)); }

static void doc_rtrim(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) s[--n] = 0;
}

/* Ends the command being gathered: comment and & taken off, split at &&, added to out. */
static int doc_flush(const char *file, int line, char *text, doc_cmd *out, int n, int max)
{
    char comment[512] = "";
    char *hash = text;
    while ((hash = strchr(hash, '#')) != NULL && hash != text && hash[-1] != ' ' && hash[-1] != '\t') hash++;
    if (hash) {
        const char *c = hash + 1;
        while (*c == ' ') c++;
        snprintf(comment, sizeof comment, "%s", c);
        doc_rtrim(comment);
        *hash = 0;
    }
    doc_rtrim(text);
    int background = 0;
    size_t len = strlen(text);
    if (len && text[len - 1] == '&' && (len < 2 || text[len - 2] != '&')) {
        background = 1;
        text[len - 1] = 0;
        doc_rtrim(text);
    }
    char *part = text;
    while (part && *part) {
        char *amp = strstr(part, "&&");
        if (amp) *amp = 0;
        while (*part == ' ' || *part == '\t') part++;
        doc_rtrim(part);
        if (*part && n < max) {
            doc_cmd *c = &out[n++];
            memset(c, 0, sizeof *c);
            snprintf(c->file, sizeof c->file, "%s", file);
            c->line = line;
            snprintf(c->text, sizeof c->text, "%s", part);
            snprintf(c->comment, sizeof c->comment, "%s", comment);
            c->background = background && !amp;
        }
        part = amp ? amp + 2 : NULL;
    }
    text[0] = 0;
    return n;
}

/* The commands of the ```sh and ```bash blocks of `text` (named `file`), at most `max`,
 * into out; their count. *unclosed: whether a fence was left open at the end. */
static int doc_parse(const char *file, const char *text, doc_cmd *out, int max, int *unclosed)
{
    char cur[DOC_TEXT_MAX] = "";
    int n = 0, in_block = 0, is_sh = 0, cont = 0, cur_line = 0, lineno = 0;
    const char *p = text;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char line[DOC_TEXT_MAX];
        snprintf(line, sizeof line, "%.*s", (int)len, p);
        p += len + (eol ? 1 : 0);
        lineno++;
        doc_rtrim(line);
        char *t = line;
        while (*t == ' ' || *t == '\t') t++;
        if (!strncmp(t, "```", 3)) {
            if (in_block) {
                if (cur[0]) n = doc_flush(file, cur_line, cur, out, n, max);
                in_block = cont = 0;
            } else {
                in_block = 1;
                is_sh = !strcmp(t + 3, "sh") || !strcmp(t + 3, "bash");
            }
            continue;
        }
        if (!in_block || !is_sh) continue;
        int more = 0;
        size_t tl = strlen(t);
        if (tl && t[tl - 1] == '\\') {
            more = 1;
            t[--tl] = 0;
            doc_rtrim(t);
        }
        if (cont || (*t == '[' && cur[0])) {
            doc_append(cur, sizeof cur, " ", 1);
            doc_append(cur, sizeof cur, t, strlen(t));
            cont = more;
            continue;
        }
        if (cur[0]) n = doc_flush(file, cur_line, cur, out, n, max);
        cont = more;
        if (*t == 0 || *t == '#') {
            cont = 0;
            continue;
        }
        snprintf(cur, sizeof cur, "%s", t);
        cur_line = lineno;
    }
    if (cur[0]) n = doc_flush(file, cur_line, cur, out, n, max);
    *unclosed = in_block;
    return n;
}

/* ---- words of a command ---- */

typedef struct doc_argv {
    char buf[DOC_TEXT_MAX];
    char *v[DOC_ARGS_MAX];
    int n;
} doc_argv;

static void doc_split(const char *text, doc_argv *a)
{
    snprintf(a->buf, sizeof a->buf, "%s", text);
    a->n = 0;
    for (char *tok = strtok(a->buf, " \t"); tok && a->n < DOC_ARGS_MAX; tok = strtok(NULL, " \t")) a->v[a->n++] = tok;
}

static int doc_is_vdnn(const char *w)
{
    return !strcmp(w, "./build/vdnn") || !strcmp(w, "build/vdnn") || !strcmp(w, "vdnn");
}

/* The index of the vdnn word, or -1. */
static int doc_vdnn_at(const doc_argv *a)
{
    for (int i = 0; i < a->n; i++)
        if (doc_is_vdnn(a->v[i])) return i;
    return -1;
}

/* The index of `flag` among the words from `from`, or -1. */
static int doc_flag_at(const doc_argv *a, int from, const char *flag)
{
    for (int i = from; i < a->n; i++)
        if (!strcmp(a->v[i], flag)) return i;
    return -1;
}

/* A placeholder word: CFG, N, FILE, [--flag, a|b, ... */
static int doc_placeholder(const char *w)
{
    if (strchr(w, '[') || strchr(w, '|') || strstr(w, "...")) return 1;
    if (!(*w >= 'A' && *w <= 'Z')) return 0;
    for (const char *c = w; *c; c++)
        if (!((*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_')) return 0;
    return 1;
}

/* ---- classifying ---- */

static int doc_gpus, doc_mpi;
static const char *doc_mpi_why;

static const char *const DOC_WHY_MANAGER =
    "the slow-down manager needs a manager left running beside its jobs (tests/test_manager.c runs it)";
static const char *const DOC_WHY_BACKGROUND = "it runs in the background, beside the commands after it";
static const char *const DOC_WHY_GPU = "it names a CUDA device and no GPU is visible here";
static const char *const DOC_WHY_HOSTS = "mpirun across machines (-H, --host, --hostfile)";
static const char *const DOC_WHY_OTHER = "not a vdnn, mpirun, make or script command";

static void doc_classify(doc_cmd *c)
{
    doc_argv a;
    doc_split(c->text, &a);
    int vi = doc_vdnn_at(&a);
    if (vi < 0) {
        if (a.n && !strcmp(a.v[0], "make")) c->kind = DOC_MAKE;
        else if (a.n > 1 && (!strcmp(a.v[0], "sh") || !strcmp(a.v[0], "bash") || !strcmp(a.v[0], "python3")))
            c->kind = DOC_SCRIPT;
        else c->kind = DOC_SKIP, c->why = DOC_WHY_OTHER;
        return;
    }
    int mpirun = vi > 0 && !strcmp(a.v[0], "mpirun");
    for (int i = 0; i < vi && !mpirun; i++)
        if (!strchr(a.v[i], '=')) {
            c->kind = DOC_SKIP, c->why = DOC_WHY_OTHER;
            return;
        }
    for (int i = vi + 1; i < a.n; i++)
        if (doc_placeholder(a.v[i])) {
            c->kind = DOC_SYNOPSIS;
            return;
        }
    int cuda = 0;
    for (int i = vi + 1; i + 1 < a.n; i++)
        if ((!strcmp(a.v[i], "--device") || !strcmp(a.v[i], "--devices")) && strstr(a.v[i + 1], "cuda")) cuda = 1;
    const char *sub = vi + 1 < a.n ? a.v[vi + 1] : "";
    c->kind = DOC_SKIP;
    if (!strcmp(sub, "manager") || doc_flag_at(&a, vi, "--managed") >= 0) c->why = DOC_WHY_MANAGER;
    else if (c->background) c->why = DOC_WHY_BACKGROUND;
    else if (cuda && doc_gpus == 0) c->why = DOC_WHY_GPU;
    else if (mpirun && (doc_flag_at(&a, 0, "-H") >= 0 || doc_flag_at(&a, 0, "--host") >= 0 ||
                        doc_flag_at(&a, 0, "--hostfile") >= 0))
        c->why = DOC_WHY_HOSTS;
    else if (mpirun && !doc_mpi) c->why = doc_mpi_why;
    else c->kind = strncmp(c->comment, "refused:", 8) ? DOC_RUN : DOC_REFUSED;
}

/* ---- checks that do not run a command ---- */

/* `vdnn SUB --help` (or, for a subcommand without its own, `vdnn --help`), kept in the
 * scratch folder for the checks after this one (each start of the program costs half a
 * second where it links CUDA's libraries): malloc'd. */
static char *doc_help(const char *sub)
{
    char path[PATH_MAX + 300];
    snprintf(path, sizeof path, "%s/help-%s.txt", doc_scratch, sub);
    char *kept = tn_read(path, NULL);
    if (kept) return kept;
    char args[256];
    snprintf(args, sizeof args, "%s --help", sub);
    tn_run r = tn_vdnn(doc_scratch, "", args);
    if (r.status != 0) {
        tn_run_free(&r);
        r = tn_vdnn(doc_scratch, "", "--help");
        ck_assert_msg(r.status == 0, "`vdnn --help` exited %d:\n%s", r.status, r.err);
        char line[300];
        snprintf(line, sizeof line, "\n  %s ", sub);
        ck_assert_msg(strstr(r.out, line) != NULL,
                      "no subcommand '%s': `vdnn %s --help` fails and `vdnn --help` lacks it", sub, sub);
    }
    tn_write_text(path, r.out);
    free(r.err);
    return r.out;
}

/* Whether `help` names the flag "--NAME" (n bytes from name) as a whole word. */
static int doc_help_has(const char *help, const char *name, size_t n)
{
    for (const char *p = help; (p = strstr(p, "--")) != NULL; p += 2) {
        const char *e = p + 2 + n;
        if (!strncmp(p + 2, name, n) && !((*e >= 'a' && *e <= 'z') || (*e >= '0' && *e <= '9') || *e == '-'))
            return 1;
    }
    return 0;
}

/* The subcommand of c exists and its help names every --flag c names. */
static void doc_check_flags(const doc_cmd *c)
{
    doc_argv a;
    doc_split(c->text, &a);
    int vi = doc_vdnn_at(&a);
    if (vi < 0 || vi + 1 >= a.n || a.v[vi + 1][0] == '-') return;
    char *help = doc_help(a.v[vi + 1]);
    for (int i = vi + 2; i < a.n; i++)
        for (const char *p = a.v[i]; (p = strstr(p, "--")) != NULL;) {
            p += 2;
            size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789-");
            if (n == 0) continue;
            ck_assert_msg(doc_help_has(help, p, n), "%s:%d: `%s`: `vdnn %s --help` has no --%.*s", c->file, c->line,
                          c->text, a.v[vi + 1], (int)n, p);
            p += n;
        }
    free(help);
}

static void doc_check_make(const doc_cmd *c)
{
    char *mk = tn_read("Makefile", NULL);
    ck_assert_msg(mk != NULL, "cannot read the Makefile");
    doc_argv a;
    doc_split(c->text, &a);
    for (int i = 1; i < a.n; i++) {
        if (a.v[i][0] == '-' || strchr(a.v[i], '=')) continue;
        char rule[300];
        snprintf(rule, sizeof rule, "\n%s:", a.v[i]);
        ck_assert_msg(strstr(mk, rule) != NULL, "%s:%d: `%s`: the Makefile has no target '%s'", c->file, c->line,
                      c->text, a.v[i]);
    }
    free(mk);
}

static void doc_check_script(const doc_cmd *c)
{
    doc_argv a;
    doc_split(c->text, &a);
    ck_assert_msg(access(a.v[1], R_OK) == 0, "%s:%d: `%s`: there is no %s", c->file, c->line, c->text, a.v[1]);
}

/* ---- running the commands, before the checks (no ck_* here: main runs it) ---- */

/* What the suite needs of a config: its batch, input side and whether its data is here. */
typedef struct doc_cfg {
    int batch, height, width, data_here;
} doc_cfg;

static int doc_read_cfg(const char *path, doc_cfg *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[1024], section[64] = "", set[256] = "", data[PATH_MAX] = "";
    while (fgets(line, sizeof line, f)) {
        char key[64], val[PATH_MAX];
        if (sscanf(line, " [%63[^]]]", section) == 1) continue;
        if (sscanf(line, " %63[a-z_] = %4095s", key, val) != 2) continue;
        if (!strcmp(section, "net") && !strcmp(key, "batch")) cfg->batch = atoi(val);
        if (!strcmp(section, "net") && !strcmp(key, "height")) cfg->height = atoi(val);
        if (!strcmp(section, "net") && !strcmp(key, "width")) cfg->width = atoi(val);
        if (!strcmp(section, "data") && !strcmp(key, "set")) snprintf(set, sizeof set, "%s", val);
        if (!strcmp(section, "data") && !strcmp(key, "path")) snprintf(data, sizeof data, "%s", val);
    }
    fclose(f);
    cfg->data_here = !strcmp(set, "synthetic") || (data[0] && access(data, R_OK) == 0);
    return 1;
}

/* Config `cfg` written to `out` with the side of its input set to `side` and a final 7x7
 * average pool made global; 0 when it cannot be read or written. */
static int doc_write_shrunk(const char *cfg, const char *out, int side)
{
    char *text = doc_slurp(cfg);
    FILE *f = text ? fopen(out, "w") : NULL;
    if (!f) {
        free(text);
        return 0;
    }
    static const char pool_7[] = "[avgpool]\nsize = 7\n";
    const char *pool = NULL;
    for (const char *p = text; (p = strstr(p, pool_7)) != NULL; p++) pool = p;
    int in_net = 0;
    for (const char *p = text; *p;) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p + 1) : strlen(p);
        if (*p == '[') in_net = !strncmp(p, "[net]", 5);
        if (p == pool) fputs("[avgpool]\nglobal = 1\n", f), n = sizeof pool_7 - 1;
        else if (in_net && !strncmp(p, "height =", 8)) fprintf(f, "height = %d\n", side);
        else if (in_net && !strncmp(p, "width =", 7)) fprintf(f, "width = %d\n", side);
        else fwrite(p, 1, n, f);
        p += n;
    }
    free(text);
    return fclose(f) == 0;
}

/* Large configs the commands run, each with its shrunk copy (absolute path). */
static struct {
    char cfg[PATH_MAX], small[PATH_MAX];
} doc_small[32];
static int doc_nsmall;

/* The shrunk copy of large config `cfg` made before the docs run, or cfg itself. */
static const char *doc_small_of(const char *cfg)
{
    for (int k = 0; k < doc_nsmall; k++)
        if (!strcmp(doc_small[k].cfg, cfg)) return doc_small[k].small;
    return cfg;
}

/* Makes the shrunk copy of `cfg` at the least side of 32, 48, 64, 96 and 128 that
 * `vdnn info` accepts (GoogLeNet needs 48, AlexNet more); none when none is. */
static void doc_shrink(const char *cfg)
{
    if (doc_small_of(cfg) != cfg || doc_nsmall == (int)(sizeof doc_small / sizeof doc_small[0])) return;
    const char *base = strrchr(cfg, '/') ? strrchr(cfg, '/') + 1 : cfg;
    char out[PATH_MAX], cmd[3 * PATH_MAX];
    snprintf(out, sizeof out, "%s/small-%s", doc_scratch, base);
    static const int sides[] = {32, 48, 64, 96, 128};
    for (size_t k = 0; k < sizeof sides / sizeof sides[0]; k++) {
        if (!doc_write_shrunk(cfg, out, sides[k])) return;
        snprintf(cmd, sizeof cmd, "'%s' info '%s' --batch %d > /dev/null 2>&1", doc_bin, out, DOC_BATCH_LARGE);
        if (system(cmd) == 0) {
            snprintf(doc_small[doc_nsmall].cfg, sizeof doc_small[0].cfg, "%s", cfg);
            snprintf(doc_small[doc_nsmall].small, sizeof doc_small[0].small, "%s", out);
            doc_nsmall++;
            return;
        }
    }
    unlink(out);
}

/* The words of `a` from `from` on, appended to dst (a shell command line); 0 when they
 * do not fit. */
static int doc_join(char *dst, size_t cap, const doc_argv *a, int from)
{
    for (int i = from; i < a->n; i++)
        if ((dst[0] && !doc_cat(dst, cap, " ")) || !doc_cat(dst, cap, a->v[i])) return 0;
    return 1;
}

/* Caps the value after `flag` at `bound` (its text kept in `store`): 1 when the flag is
 * there, else 0. */
static int doc_cap(doc_argv *a, int from, const char *flag, int bound, char *store, size_t len)
{
    int at = doc_flag_at(a, from, flag);
    if (at < 0 || at + 1 >= a->n) return 0;
    if (atoi(a->v[at + 1]) > bound) {
        snprintf(store, len, "%d", bound);
        a->v[at + 1] = store;
    }
    return 1;
}

/* Whether a vdnn command computes (and so gets bounds), and its config as written. */
static const char *doc_config_of(const doc_argv *a, int vi)
{
    if (vi + 2 >= a->n || a->v[vi + 2][0] == '-') return NULL;
    const char *sub = a->v[vi + 1];
    if (strcmp(sub, "train") && strcmp(sub, "test") && strcmp(sub, "profile") && strcmp(sub, "sweep")) return NULL;
    return a->v[vi + 2];
}

/* The vdnn words of a DOC_RUN command (its subcommand on), bounded as the comment at the
 * top of this file says, into out; 0 when they do not fit. */
static int doc_bound(doc_argv *a, int vi, char *out, size_t cap)
{
    char steps[32], batch[32], iters[32], extra[512] = "";
    const char *cfg_path = doc_config_of(a, vi);
    doc_cfg cfg;
    if (cfg_path && doc_read_cfg(cfg_path, &cfg)) {
        const char *sub = a->v[vi + 1];
        int train = !strcmp(sub, "train"), test = !strcmp(sub, "test"), sweep = !strcmp(sub, "sweep");
        int large = cfg.height * cfg.width > DOC_LARGE_PIXELS;
        int bound = large ? DOC_BATCH_LARGE : DOC_BATCH;
        a->v[vi + 2] = (char *)doc_small_of(cfg_path);
        if (doc_flag_at(a, vi, "--micro-batch") < 0 && !doc_cap(a, vi, "--batch", bound, batch, sizeof batch) &&
            cfg.batch > bound)
            snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " --batch %d", bound);
        if (doc_flag_at(a, vi, "--data") < 0 && (test || (train && !cfg.data_here)))
            doc_cat(extra, sizeof extra, " --data synthetic");
        if (train && !doc_cap(a, vi, "--steps", DOC_STEPS, steps, sizeof steps))
            snprintf(extra + strlen(extra), sizeof extra - strlen(extra), " --steps %d", DOC_STEPS);
        int policy = doc_flag_at(a, vi, "--policy");
        int dyn = policy >= 0 && policy + 1 < a->n && !strcmp(a->v[policy + 1], "dyn");
        int search = doc_flag_at(a, vi, "--search-seconds");
        double search_s = search >= 0 && search + 1 < a->n ? atof(a->v[search + 1]) : 0;
        if (search >= 0 && search + 1 < a->n && (search_s <= 0 || search_s > DOC_SEARCH_S))
            a->v[search + 1] = DOC_SEARCH_TEXT;
        else if (search < 0 && (!strcmp(sub, "profile") || sweep || (train && dyn)))
            doc_cat(extra, sizeof extra, " --search-seconds " DOC_SEARCH_TEXT);
        if (sweep && doc_flag_at(a, vi, "--simulate") < 0 && !doc_cap(a, vi, "--iters", 1, iters, sizeof iters))
            doc_cat(extra, sizeof extra, " --iters 1");
    }
    out[0] = 0;
    return doc_join(out, cap, a, vi + 1) && doc_cat(out, cap, extra);
}

static double doc_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Where command i's results go: scratch/results/I.EXT. */
static const char *doc_result(char *buf, size_t len, int i, const char *ext)
{
    snprintf(buf, len, "%s/results/%d.%s", doc_scratch, i, ext);
    return buf;
}

/* Writes text to path (a file that the checks read); 0 on failure. */
static int doc_put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) return 0;
    fputs(text, f);
    return fclose(f) == 0;
}

/* Runs command i in `dir` and leaves what it did for its check: I.cmd (what ran), I.out,
 * I.err, and last I.rc ("STATUS SECONDS", STATUS -1 when it could not be started). */
static void doc_exec(int i, const char *dir)
{
    const doc_cmd *c = &doc_cmds[i];
    char rc[PATH_MAX + 64], out[PATH_MAX + 64], err[PATH_MAX + 64], what[PATH_MAX + 64];
    doc_argv a;
    doc_split(c->text, &a);
    int vi = doc_vdnn_at(&a);
    int mpirun = vi > 0 && !strcmp(a.v[0], "mpirun");
    char args[DOC_TEXT_MAX * 2] = "", before[DOC_TEXT_MAX] = "", launch[DOC_TEXT_MAX * 2], cmd[DOC_TEXT_MAX * 4];
    int ok = c->kind == DOC_REFUSED ? doc_join(args, sizeof args, &a, vi + 1) : doc_bound(&a, vi, args, sizeof args);
    a.n = vi;
    ok = ok && doc_join(before, sizeof before, &a, mpirun);
    doc_put(doc_result(what, sizeof what, i, "cmd"), args);
    if (!ok) {
        doc_put(doc_result(err, sizeof err, i, "err"), "the command is too long for this suite");
        doc_put(doc_result(rc, sizeof rc, i, "rc"), "-1 0");
        return;
    }
    /* before: mpirun's own flags, or the variables set for vdnn */
    if (mpirun)
        snprintf(launch, sizeof launch,
                 "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout -k 5 %d mpirun --oversubscribe %s",
                 DOC_TIMEOUT_S, before);
    else snprintf(launch, sizeof launch, "%s timeout -k 5 %d", before, DOC_TIMEOUT_S);
    snprintf(cmd, sizeof cmd, "cd '%s' && VDNN_RUNS='%s/runs' %s '%s' %s > '%s' 2> '%s'", dir, dir, launch, doc_bin,
             args, doc_result(out, sizeof out, i, "out"), doc_result(err, sizeof err, i, "err"));
    double t0 = doc_now_s();
    int w = system(cmd);
    char line[64];
    snprintf(line, sizeof line, "%d %.1f", w == -1 ? -1 : WIFEXITED(w) ? WEXITSTATUS(w) : 128 + WTERMSIG(w),
             doc_now_s() - t0);
    char tmp[PATH_MAX + 64];
    snprintf(tmp, sizeof tmp, "%s.part", doc_result(rc, sizeof rc, i, "rc"));
    if (doc_put(tmp, line)) rename(tmp, rc);
}

/* Whether command i runs, and whether commands i and j come from the same doc. */
static int doc_runs(int i) { return doc_cmds[i].kind == DOC_RUN || doc_cmds[i].kind == DOC_REFUSED; }
static int doc_same_file(int i, int j) { return !strcmp(doc_cmds[i].file, doc_cmds[j].file); }

/* Runs the commands of the doc of command `first` (its first to run), in order, in a
 * folder of their own (configs/ and data/ linked there). */
static void doc_run_file(int first)
{
    char tag[300], dir[PATH_MAX + 300], cwd[PATH_MAX], from[PATH_MAX + 16], to[2 * PATH_MAX];
    snprintf(tag, sizeof tag, "%s", doc_cmds[first].file);
    for (char *p = tag; *p; p++)
        if (*p == '/' || *p == '.') *p = '_';
    snprintf(dir, sizeof dir, "%s/%s", doc_scratch, tag);
    if (mkdir(dir, 0755) != 0 || !getcwd(cwd, sizeof cwd)) return;
    static const char *const links[] = {"configs", "data"};
    for (size_t k = 0; k < sizeof links / sizeof links[0]; k++) {
        snprintf(from, sizeof from, "%s/%s", cwd, links[k]);
        snprintf(to, sizeof to, "%s/%s", dir, links[k]);
        if (symlink(from, to) != 0) return;
    }
    for (int i = first; i < doc_ncmds; i++)
        if (doc_runs(i) && doc_same_file(i, first)) doc_exec(i, dir);
}

/* Writes `vdnn SUB --help` for every subcommand that a synopsis or a skipped command
 * names, for doc_help. */
static void doc_fetch_help(void)
{
    for (int i = 0; i < doc_ncmds; i++) {
        if (doc_cmds[i].kind != DOC_SYNOPSIS && doc_cmds[i].kind != DOC_SKIP) continue;
        doc_argv a;
        doc_split(doc_cmds[i].text, &a);
        int vi = doc_vdnn_at(&a);
        if (vi < 0 || vi + 1 >= a.n || a.v[vi + 1][0] == '-' || strchr(a.v[vi + 1], '\'')) continue;
        char path[PATH_MAX + 300], cmd[3 * PATH_MAX];
        snprintf(path, sizeof path, "%s/help-%s.txt", doc_scratch, a.v[vi + 1]);
        if (access(path, F_OK) == 0) continue;
        snprintf(cmd, sizeof cmd, "'%s' '%s' --help > '%s.part' 2> /dev/null && mv '%s.part' '%s'", doc_bin,
                 a.v[vi + 1], path, path, path);
        if (system(cmd) != 0) snprintf(cmd, sizeof cmd, "%s.part", path), unlink(cmd);
    }
}

/* Runs every doc's commands, DOC_JOBS docs at a time (those with most to do first; a
 * refusal, unbounded, counts as four), after making the shrunk configs they need, and
 * then fetches the help doc_help reads. */
static void doc_run_all(void)
{
    char results[PATH_MAX + 16];
    snprintf(results, sizeof results, "%s/results", doc_scratch);
    mkdir(results, 0755);
    static int first[DOC_CMDS_MAX], work[DOC_CMDS_MAX];
    int n = 0;
    for (int i = 0; i < doc_ncmds; i++) {
        if (!doc_runs(i)) continue;
        int u = 0;
        while (u < n && !doc_same_file(first[u], i)) u++;
        if (u == n) first[n] = i, work[n++] = 0;
        work[u] += doc_cmds[i].kind == DOC_REFUSED ? 4 : 1;
        doc_argv a;
        doc_split(doc_cmds[i].text, &a);
        const char *cfg_path = doc_config_of(&a, doc_vdnn_at(&a));
        doc_cfg cfg;
        if (doc_cmds[i].kind == DOC_RUN && cfg_path && doc_read_cfg(cfg_path, &cfg) &&
            cfg.height * cfg.width > DOC_LARGE_PIXELS)
            doc_shrink(cfg_path);
    }
    for (int x = 1; x < n; x++)
        for (int y = x; y > 0 && work[y] > work[y - 1]; y--) {
            int t = first[y], w = work[y];
            first[y] = first[y - 1], work[y] = work[y - 1];
            first[y - 1] = t, work[y - 1] = w;
        }
    fflush(stdout);
    int running = 0;
    for (int k = 0; k <= n; k++) {
        if (running == DOC_JOBS && wait(NULL) > 0) running--;
        pid_t pid = fork();
        if (pid == 0) {
            if (k < n) doc_run_file(first[k]);
            else doc_fetch_help();
            _exit(0);
        }
        running += pid > 0;
    }
    while (running > 0 && wait(NULL) > 0) running--;
}

/* ---- the checks ---- */

/* The check of a command that ran: its exit status as documented. */
static void doc_check_run(int i)
{
    const doc_cmd *c = &doc_cmds[i];
    char path[PATH_MAX + 64];
    char *rc = tn_read(doc_result(path, sizeof path, i, "rc"), NULL);
    char *what = tn_read(doc_result(path, sizeof path, i, "cmd"), NULL);
    char *err = tn_read(doc_result(path, sizeof path, i, "err"), NULL);
    ck_assert_msg(rc != NULL, "%s:%d: `%s` left no result (its doc's runner stopped early)", c->file, c->line, c->text);
    int status = -1;
    double seconds = 0;
    sscanf(rc, "%d %lf", &status, &seconds);
    const char *shown = err ? tn_tail(err, 3000) : "(none)";
    ck_assert_msg(status != 124 && status != 137, "%s:%d: `%s` (run as `vdnn %s`) did not end within %d s; stderr:\n%s",
                  c->file, c->line, c->text, what, DOC_TIMEOUT_S, shown);
    if (c->kind == DOC_REFUSED) {
        ck_assert_msg(status == 1 && err && !strncmp(err, "vdnn: ", 6),
                      "%s:%d: `%s` is marked '# %s' but exited %d (expected 1 with a 'vdnn: ' message); stderr:\n%s",
                      c->file, c->line, c->text, c->comment, status, shown);
        printf("refused as documented (%.1f s): %s:%d: %s\n", seconds, c->file, c->line, c->text);
    } else {
        ck_assert_msg(status == 0, "%s:%d: `%s` (run as `vdnn %s`) exited %d; stderr:\n%s", c->file, c->line, c->text,
                      what, status, shown);
        printf("ran (%.1f s): %s:%d: %s\n", seconds, c->file, c->line, c->text);
    }
    free(rc);
    free(what);
    free(err);
}

START_TEST(test_parser)
{
    static const char md[] = "# Title\n"
                             "```sh\n"
                             "./build/vdnn info configs/a.cfg          # minimum budgets\n"
                             "./build/vdnn train configs/a.cfg --budget 1M \\\n"
                             "    --steps 3   # refused: below every minimum\n"
                             "# a comment line\n"
                             "\n"
                             "./build/vdnn train CFG [--budget SIZE]\n"
                             "                       [--steps N]\n"
                             "sh tools/setup.sh && make && vdnn devices\n"
                             "./build/vdnn manager --log m.jsonl &\n"
                             "mpirun -np 2 ./build/vdnn train configs/a.cfg --devices cpu\n"
                             "cp a b\n"
                             "```\n"
                             "## Two\n"
                             "```ini\n"
                             "vdnn train configs/a.cfg\n"
                             "```\n"
                             "```\n"
                             "./build/vdnn info configs/b.cfg\n"
                             "```\n"
                             "### Two and a half\n"
                             "```bash\n"
                             "vdnn devices\n"
                             "```\n";
    doc_cmd out[16];
    int unclosed = 1;
    int n = doc_parse("x.md", md, out, 16, &unclosed);
    ck_assert_int_eq(unclosed, 0);
    ck_assert_int_eq(n, 10);
    ck_assert_str_eq(out[9].text, "vdnn devices");
    ck_assert_int_eq(out[9].line, 24);
    ck_assert_str_eq(out[0].text, "./build/vdnn info configs/a.cfg");
    ck_assert_str_eq(out[0].comment, "minimum budgets");
    ck_assert_int_eq(out[0].line, 3);
    ck_assert_str_eq(out[1].text, "./build/vdnn train configs/a.cfg --budget 1M --steps 3");
    ck_assert_str_eq(out[1].comment, "refused: below every minimum");
    ck_assert_int_eq(out[1].line, 4);
    ck_assert_str_eq(out[2].text, "./build/vdnn train CFG [--budget SIZE] [--steps N]");
    ck_assert_str_eq(out[3].text, "sh tools/setup.sh");
    ck_assert_str_eq(out[4].text, "make");
    ck_assert_str_eq(out[5].text, "vdnn devices");
    ck_assert_int_eq(out[5].line, 10);
    ck_assert_str_eq(out[6].text, "./build/vdnn manager --log m.jsonl");
    ck_assert_int_eq(out[6].background, 1);
    ck_assert_str_eq(out[8].text, "cp a b");
    static const doc_kind kinds[] = {DOC_RUN, DOC_REFUSED, DOC_SYNOPSIS, DOC_SCRIPT, DOC_MAKE, DOC_RUN, DOC_SKIP};
    for (int i = 0; i < 7; i++) {
        doc_classify(&out[i]);
        ck_assert_msg(out[i].kind == kinds[i], "`%s`: kind %d, not %d", out[i].text, out[i].kind, kinds[i]);
    }
    ck_assert_ptr_eq(out[6].why, DOC_WHY_MANAGER);
    doc_classify(&out[8]);
    ck_assert_ptr_eq(out[8].why, DOC_WHY_OTHER);
    ck_assert_int_eq(doc_parse("y.md", "```sh\nvdnn devices\n", out, 16, &unclosed), 1);
    ck_assert_int_eq(unclosed, 1);
    static const char help[] = "flags:\n  --budget SIZE  ...\n  --no-save  keep none\n";
    ck_assert(doc_help_has(help, "budget", 6) && doc_help_has(help, "no-save", 7));
    ck_assert(!doc_help_has(help, "bud", 3) && !doc_help_has(help, "save", 4) && !doc_help_has(help, "budgets", 7));
}
END_TEST

/* Every doc closes its fences, and the README and the tutorial have commands to run (so
 * that a change to the reader that finds none cannot pass unnoticed). */
START_TEST(test_docs_have_commands)
{
    for (int f = 0; f < doc_nfiles; f++)
        ck_assert_msg(!doc_unclosed[f], "%s: a ``` fence is never closed", doc_files[f]);
    static const char *const need[] = {"README.md", "docs/tutorial.md"};
    for (size_t k = 0; k < sizeof need / sizeof need[0]; k++) {
        int run = 0;
        for (int i = 0; i < doc_ncmds; i++) run += !strcmp(doc_cmds[i].file, need[k]) && doc_cmds[i].kind == DOC_RUN;
        ck_assert_msg(run > 0, "%s: no command to run was found in its ```sh blocks", need[k]);
    }
}
END_TEST

START_TEST(test_command)
{
    const doc_cmd *c = &doc_cmds[_i];
    switch (c->kind) {
    case DOC_RUN:
    case DOC_REFUSED: doc_check_run(_i); break;
    case DOC_SYNOPSIS:
        doc_check_flags(c);
        printf("checked, not run (a synopsis: its flags are in --help): %s:%d: %s\n", c->file, c->line, c->text);
        break;
    case DOC_MAKE:
        doc_check_make(c);
        printf("checked, not run (the Makefile has the target): %s:%d: %s\n", c->file, c->line, c->text);
        break;
    case DOC_SCRIPT:
        doc_check_script(c);
        printf("checked, not run (the script exists): %s:%d: %s\n", c->file, c->line, c->text);
        break;
    case DOC_SKIP:
        doc_check_flags(c);
        printf("SKIPPED: %s:%d: `%s`: %s\n", c->file, c->line, c->text, c->why);
        break;
    }
    fflush(stdout);
}
END_TEST

START_TEST(test_skipped_under_sanitizer)
{
    printf("SKIPPED: test_docs: running every command of the docs takes a minute unsanitized and far longer under a "
           "sanitizer; make test runs it\n");
}
END_TEST

/* ---- main: the docs read and their commands classified before any check runs ---- */

static int doc_cmp(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

static void doc_collect(void)
{
    snprintf(doc_files[doc_nfiles++], sizeof doc_files[0], "README.md");
    DIR *d = opendir("docs");
    int first = doc_nfiles;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        size_t n = strlen(e->d_name);
        if (n > 3 && !strcmp(e->d_name + n - 3, ".md") && doc_nfiles < DOC_FILES_MAX)
            snprintf(doc_files[doc_nfiles++], sizeof doc_files[0], "docs/%s", e->d_name);
    }
    if (d) closedir(d);
    qsort(doc_files[first], doc_nfiles - first, sizeof doc_files[0], doc_cmp);
    int cap = DOC_CMDS_MAX;
    doc_cmds = calloc(cap, sizeof *doc_cmds);
    for (int f = 0; f < doc_nfiles && doc_cmds; f++) {
        char *text = doc_slurp(doc_files[f]);
        if (!text) continue;
        doc_ncmds += doc_parse(doc_files[f], text, doc_cmds + doc_ncmds, cap - doc_ncmds, &doc_unclosed[f]);
        free(text);
    }
}

/* device_cuda_count() asked in a child process, so that this one, which forks the docs'
 * runners, never starts the CUDA runtime (a process that has should not fork). */
static int doc_gpu_count(void)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(device_cuda_count() > 0);
    int w = 0;
    return pid > 0 && waitpid(pid, &w, 0) == pid && WIFEXITED(w) ? WEXITSTATUS(w) : 0;
}

int main(void)
{
    Suite *s = suite_create("docs");
    TCase *tc = tcase_create("docs");
    suite_add_tcase(s, tc);
    if (UNDER_SANITIZER) {
        tcase_add_test(tc, test_skipped_under_sanitizer);
        return tn_run_suite(s);
    }
    const char *bin = getenv("VDNN_BIN");
    bin = bin && *bin ? bin : "build/vdnn";
    if (!realpath(bin, doc_bin)) snprintf(doc_bin, sizeof doc_bin, "%s", bin);
    const char *tmp = getenv("TMPDIR");
    snprintf(doc_scratch, sizeof doc_scratch, "%s/vdnn_test_docs_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(doc_scratch)) {
        perror(doc_scratch);
        return EXIT_FAILURE;
    }
    char cache[PATH_MAX + 8];
    snprintf(cache, sizeof cache, "%s/cache", doc_scratch);
    mkdir(cache, 0755);
    setenv("VDNN_CACHE", cache, 1);
    doc_gpus = doc_gpu_count();
    if (!comm_built()) doc_mpi_why = "this build has no MPI (libopenmpi-dev)";
    else if (system("command -v mpirun > /dev/null 2>&1") != 0) doc_mpi_why = "mpirun is not installed (openmpi-bin)";
    doc_mpi = doc_mpi_why == NULL;
    doc_collect();
    int count[DOC_SKIP + 1] = {0};
    for (int i = 0; i < doc_ncmds; i++) {
        doc_classify(&doc_cmds[i]);
        count[doc_cmds[i].kind]++;
    }
    doc_run_all();
    tcase_add_test(tc, test_parser);
    tcase_add_test(tc, test_docs_have_commands);
    tcase_add_loop_test(tc, test_command, 0, doc_ncmds);
    SRunner *sr = srunner_create(s);
    /* The checks only read what the commands left (and --help): forking for each costs a
     * tenth of a second here, where the program maps CUDA's libraries. */
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    printf("docs: %d commands in %d files: %d run (%d of them expected refusals), %d checked without running "
           "(%d synopses, %d make lines, %d scripts), %d skipped; %d checks failed\n",
           doc_ncmds, doc_nfiles, count[DOC_RUN] + count[DOC_REFUSED], count[DOC_REFUSED],
           count[DOC_SYNOPSIS] + count[DOC_MAKE] + count[DOC_SCRIPT], count[DOC_SYNOPSIS], count[DOC_MAKE],
           count[DOC_SCRIPT], count[DOC_SKIP], failed);
    tn_rmtree(doc_scratch);
    free(doc_cmds);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
