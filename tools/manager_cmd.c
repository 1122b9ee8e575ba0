/* `vdnn manager`: the slow-down manager (manager/server.h), its status, and the plot of
 * its log (docs/manager.md). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "manager/proto.h"
#include "manager/server.h"
#include "tools/commands.h"
#include "vdnn/file.h"

#define PLOT_MAX_JOBS 64
#define LOG_MAX_BYTES ((size_t)1 << 30)

static const char usage[] =
    "vdnn manager [--manager PATH] [--log FILE] [--period S] [--sd-gap X] [--util-gap X] [--units N]\n"
    "             [--stale S] [--devices LIST] [--observe] [--until-idle] [--quiet]\n"
    "       vdnn manager --status [--json] [--manager PATH]\n"
    "       vdnn manager --plot LOG [--out DIR]";

/* ---- the plot ---- */

typedef struct plot_job {
    int id;
    char name[256];
    FILE *f;                  /* its SD over time, a temporary file */
} plot_job;

/* What the log's posts and decisions make: each job's SD over time (a temporary file
 * per job), util.dat and decisions.dat. */
typedef struct plot_data {
    plot_job jobs[PLOT_MAX_JOBS];
    int njobs, ndev, posts, ndec;
    FILE *util, *dec;
} plot_data;

/* The job of `id`, added with its name when new (control characters as '?': the name
 * goes into sd.dat's comments and the gnuplot script); NULL past PLOT_MAX_JOBS. */
static plot_job *job_of(plot_data *pd, int id, const char *name, vdnn_status *st)
{
    int j = 0;
    while (j < pd->njobs && pd->jobs[j].id != id) j++;
    if (j < pd->njobs) return &pd->jobs[j];
    if (pd->njobs == PLOT_MAX_JOBS) return NULL;
    plot_job *pj = &pd->jobs[pd->njobs++];
    pj->id = id;
    snprintf(pj->name, sizeof pj->name, "%s", name);
    for (char *c = pj->name; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    pj->f = tmpfile();
    if (!pj->f) *st = vdnn_fail(VDNN_EIO, "cannot make a temporary file: %s", strerror(errno));
    return pj;
}

/* A post's devices' utilizations (numbers, 0..1), as one line of util.dat; -1 when
 * `util` holds something else. */
static int util_line(plot_data *pd, double t, json_t *util)
{
    size_t k;
    json_t *v;
    json_array_foreach(util, k, v)
        if (!json_is_number(v)) return -1;
    fprintf(pd->util, "%.4f", t);
    json_array_foreach(util, k, v) fprintf(pd->util, " %.4f", 100 * json_number_value(v));
    fputc('\n', pd->util);
    if ((int)json_array_size(util) > pd->ndev) pd->ndev = (int)json_array_size(util);
    return 0;
}

/* One record of the log (docs/manager.md): posts and decisions are plotted, other
 * events only need their "t" and "event". */
static vdnn_status plot_record(const char *log, int line, json_t *rec, plot_data *pd)
{
    json_error_t err;
    const char *event = NULL, *name = NULL;
    double t = 0, sd = 0;
    int id = 0;
    json_t *util = NULL;
    if (json_unpack_ex(rec, &err, 0, "{s:F, s:s}", "t", &t, "event", &event) != 0)
        return vdnn_fail(VDNN_EINVAL, "%s:%d: a record of a manager's log has \"t\" (a number) and \"event\" (a "
                         "string): %s", log, line, err.text);
    if (!strcmp(event, "decision")) {
        if (json_unpack_ex(rec, &err, 0, "{s:F}", "sd", &sd) != 0)
            return vdnn_fail(VDNN_EINVAL, "%s:%d: a decision has \"sd\" (a number): %s", log, line, err.text);
        fprintf(pd->dec, "%.4f %.6g\n", t, sd);
        pd->ndec++;
        return VDNN_OK;
    }
    if (strcmp(event, "post")) return VDNN_OK;
    if (json_unpack_ex(rec, &err, 0, "{s:i, s:s, s:F, s:o}", "job", &id, "name", &name, "sd", &sd, "util", &util) ||
        !json_is_array(util))
        return vdnn_fail(VDNN_EINVAL, "%s:%d: a post has \"job\" (a whole number), \"name\", \"sd\" (a number) and "
                         "\"util\" (a list): %s", log, line, util ? "\"util\" is not a list" : err.text);
    vdnn_status st = VDNN_OK;
    plot_job *pj = job_of(pd, id, name, &st);
    if (pj && pj->f) fprintf(pj->f, "%.4f %.6g\n", t, sd);
    if (st == VDNN_OK && util_line(pd, t, util) != 0)
        st = vdnn_fail(VDNN_EINVAL, "%s:%d: a post's \"util\" holds something other than numbers", log, line);
    pd->posts++;
    return st;
}

/* Each line of the log is one JSON object; blank lines are skipped. A line that is not
 * one is an error naming it, but for a last line with no line end that does not parse:
 * a manager still writing its log has not finished it, and it is left out with a
 * notice. */
static vdnn_status read_log(const char *log, char *text, plot_data *pd)
{
    vdnn_status st = VDNN_OK;
    int line = 0;
    for (char *at = text, *end; st == VDNN_OK && *at; at = end ? end + 1 : at + strlen(at)) {
        end = strchr(at, '\n');
        if (end) *end = 0;
        line++;
        if (!at[strspn(at, " \t\r")]) continue;
        json_error_t err;
        json_t *rec = json_loads(at, 0, &err);
        if (!rec && !end) {
            vdnn_notice("%s:%d: the last line is cut short (a manager still writing its log?): left out", log, line);
            break;
        }
        if (!rec)
            st = vdnn_fail(VDNN_EINVAL, "%s:%d: not JSON (%s, column %d): each line of a manager's log is one JSON "
                           "object", log, line, err.text, err.column);
        else if (!json_is_object(rec))
            st = vdnn_fail(VDNN_EINVAL, "%s:%d: not a JSON object: each line of a manager's log is one", log, line);
        else st = plot_record(log, line, rec, pd);
        json_decref(rec);
    }
    return st;
}

/* sd.dat: one block per job (gnuplot's `index`). */
static vdnn_status write_sd(const plot_data *pd, const char *dir)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/sd.dat", dir);
    FILE *sd = fopen(path, "w");
    if (!sd) return vdnn_fail(VDNN_EIO, "--out: cannot write %s: %s", path, strerror(errno));
    for (int j = 0; j < pd->njobs; j++) {
        fprintf(sd, "# job %d %s\n", pd->jobs[j].id, pd->jobs[j].name);
        rewind(pd->jobs[j].f);
        char buf[256];
        while (fgets(buf, sizeof buf, pd->jobs[j].f)) fputs(buf, sd);
        fprintf(sd, "\n\n");
    }
    if (fclose(sd) != 0) return vdnn_fail(VDNN_EIO, "--out: writing %s failed", path);
    return VDNN_OK;
}

static vdnn_status write_script(const plot_data *pd, const char *dir)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/manager.gp", dir);
    FILE *gp = fopen(path, "w");
    if (!gp) return vdnn_fail(VDNN_EIO, "--out: cannot write %s: %s", path, strerror(errno));
    fprintf(gp, "# Written by `vdnn manager --plot` (docs/manager.md). Edit it and redraw with `gnuplot manager.gp`\n"
                "# in this folder.\n"
                "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
                "    set terminal pngcairo noenhanced size 1000,800 font ',10'\n"
                "} else {\n"
                "    set terminal png size 1000,800\n"
                "}\n"
                "set output 'manager.png'\n"
                "set multiplot layout 2,1 title 'slow-down manager: each job''s SD, and each device''s utilization'\n"
                "set grid\nset key outside right top\nset xlabel 'seconds since the manager started'\n"
                "set ylabel 'SD (slow-down)'\nset yrange [0:*]\nplot ");
    for (int j = 0; j < pd->njobs; j++) {
        char name[600];
        cli_gp_quote(pd->jobs[j].name, name, sizeof name);
        fprintf(gp, "%s'sd.dat' index %d using 1:2 with linespoints pt 7 ps 0.5 title \"job %d: %s\"",
                j ? ", \\\n     " : "", j, pd->jobs[j].id, name);
    }
    if (pd->ndec)   /* an observing manager's log has none */
        fprintf(gp, ", \\\n     'decisions.dat' using 1:2 with points pt 6 ps 2 lc rgb 'black' title 'its DR changed'");
    fprintf(gp, "\nset ylabel 'utilization (%%)'\nset yrange [0:105]\nplot ");
    for (int k = 0; k < pd->ndev; k++)
        fprintf(gp, "%s'util.dat' using 1:%d with lines lw 2 title 'device %d'", k ? ", \\\n     " : "", k + 2, k);
    if (!pd->ndev) fprintf(gp, "NaN notitle");
    fprintf(gp, "\nunset multiplot\n");
    if (fclose(gp) != 0) return vdnn_fail(VDNN_EIO, "--out: writing %s failed", path);
    return VDNN_OK;
}

static vdnn_status write_plot(const char *log, const char *dir)
{
    char *text = NULL;
    size_t len = 0;
    vdnn_status st = vdnn_file_read(log, "manager log", LOG_MAX_BYTES, VDNN_FILE_TEXT, &text, &len);
    if (st != VDNN_OK) return vdnn_wrap(st, "--plot");
    char path[1200];
    plot_data pd = {0};
    snprintf(path, sizeof path, "%s/util.dat", dir);
    pd.util = fopen(path, "w");
    snprintf(path, sizeof path, "%s/decisions.dat", dir);
    pd.dec = fopen(path, "w");
    if (!pd.util || !pd.dec) st = vdnn_fail(VDNN_EIO, "--out: cannot write in %s: %s", dir, strerror(errno));
    if (st == VDNN_OK) st = read_log(log, text, &pd);
    free(text);
    if (st == VDNN_OK && !pd.posts) st = vdnn_fail(VDNN_EINVAL, "--plot %s: no posts of any job in this log", log);
    if (st == VDNN_OK) st = write_sd(&pd, dir);
    for (int j = 0; j < pd.njobs; j++)
        if (pd.jobs[j].f) fclose(pd.jobs[j].f);
    if (pd.util && fclose(pd.util) != 0 && st == VDNN_OK) st = vdnn_fail(VDNN_EIO, "--out: writing util.dat failed");
    if (pd.dec && fclose(pd.dec) != 0 && st == VDNN_OK) st = vdnn_fail(VDNN_EIO, "--out: writing decisions.dat failed");
    if (st == VDNN_OK) st = write_script(&pd, dir);
    if (st != VDNN_OK) return st;
    if (!cli_on_path("gnuplot")) {
        printf("plot skipped: gnuplot is not on PATH (install it, e.g. apt-get install gnuplot-nox, then run "
               "`gnuplot manager.gp` in %s)\n", dir);
        return VDNN_OK;
    }
    st = cli_gnuplot(dir, "manager.gp", "the numbers are in sd.dat and util.dat");
    if (st == VDNN_OK)
        printf("wrote %s/manager.png (script %s/manager.gp; %d jobs, %d posts)\n", dir, dir, pd.njobs, pd.posts);
    return st;
}

/* ---- the command ---- */

int cmd_manager(int argc, char **argv)
{
    const char *socket = NULL, *log_path = NULL, *devices = NULL, *plot = NULL, *out_dir = NULL;
    int observe = 0, until_idle = 0, quiet = 0, status = 0, json = 0;
    long long units = 10;
    double period = 2, sd_gap = 0.2, util_gap = 0.2, stale = 60;
    arg_spec specs[] = {
        {"--manager", ARG_STRING, &socket, 0, 0, "its socket (default: the user's, as train --managed finds it)", 0},
        {"--log", ARG_STRING, &log_path, 0, 0, "JSON lines: every post and decision", 0},
        {"--period", ARG_FLOAT, &period, 0, 1e6, "the least seconds between two decisions (default 2)", 0},
        {"--sd-gap", ARG_FLOAT, &sd_gap, 0, 1e6, "act when the jobs' slow-downs differ by more (default 0.2)", 0},
        {"--util-gap", ARG_FLOAT, &util_gap, 0, 1, "the utilization rule's threshold, 0 to 1 (default 0.2)", 0},
        {"--units", ARG_INT, &units, 2, 1000, "units of a job's share of a device (default 10)", 0},
        {"--stale", ARG_FLOAT, &stale, 0.1, 1e9, "seconds after which a silent job is left out (default 60)", 0},
        {"--devices", ARG_STRING, &devices, 0, 0, "the devices it shares, cpu:N and cuda:N (default: the jobs')", 0},
        {"--observe", ARG_FLAG, &observe, 0, 0, "record, never change a share", 0},
        {"--until-idle", ARG_FLAG, &until_idle, 0, 0, "exit once the last job has left", 0},
        {"--quiet", ARG_FLAG, &quiet, 0, 0, "print nothing but errors", 0},
        {"--status", ARG_FLAG, &status, 0, 0, "print a running manager's devices and jobs", 0},
        {"--json", ARG_FLAG, &json, 0, 0, "with --status: one JSON object", 0},
        {"--plot", ARG_STRING, &plot, 0, 0, "draw a log's slow-downs and utilization (gnuplot)", 0},
        {"--out", ARG_STRING, &out_dir, 0, 0, "with --plot: the folder for its files (default: the log's)", 0},
        {NULL, 0, NULL, 0, 0, NULL, 0},
    };
    if (args_parse(argc, argv, 2, specs, NULL, 0, usage) != VDNN_OK) return cli_error();
    int serving = 0;
    for (arg_spec *s = specs; s->name; s++)
        serving |= s->seen && strcmp(s->name, "--manager") && strcmp(s->name, "--status") &&
                   strcmp(s->name, "--json") && strcmp(s->name, "--plot") && strcmp(s->name, "--out");
    if (plot) {
        if (status || serving || socket) {
            vdnn_fail(VDNN_EINVAL, "--plot LOG draws a log and takes only --out DIR");
            return cli_error();
        }
        char dir[1024];
        if (out_dir) snprintf(dir, sizeof dir, "%s", out_dir);
        else {
            const char *slash = strrchr(plot, '/');
            snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - plot) : 1, slash ? plot : ".");
        }
        if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
            vdnn_fail(VDNN_EIO, "--out: cannot make %s: %s", dir, strerror(errno));
            return cli_error();
        }
        return write_plot(plot, dir) == VDNN_OK ? 0 : cli_error();
    }
    if (out_dir || (json && !status)) {
        vdnn_fail(VDNN_EINVAL, "%s", out_dir ? "--out goes with --plot LOG" : "--json goes with --status");
        return cli_error();
    }
    char path[256];
    if (mgr_socket_path(socket, !status, path, sizeof path) != VDNN_OK) return cli_error();
    if (status) {
        if (serving) {
            vdnn_fail(VDNN_EINVAL, "--status asks a running manager and takes only --json and --manager PATH");
            return cli_error();
        }
        return mgr_query_status(path, json, stdout) == VDNN_OK ? 0 : cli_error();
    }
    FILE *log = NULL;
    if (log_path && !(log = fopen(log_path, "w"))) {
        vdnn_fail(VDNN_EIO, "--log: cannot write %s: %s", log_path, strerror(errno));
        return cli_error();
    }
    mgr_opts o = {.socket = path, .log = log, .out = quiet ? NULL : stdout, .period_s = period, .stale_s = stale,
                  .observe = observe, .until_idle = until_idle, .devices = devices};
    o.rules.units = (int)units;
    o.rules.sd_gap = sd_gap;
    o.rules.util_gap = util_gap;
    vdnn_status st = mgr_serve(&o);
    if (log && fclose(log) != 0 && st == VDNN_OK)
        st = vdnn_fail(VDNN_EIO, "--log: writing %s failed: %s", log_path, strerror(errno));
    return st == VDNN_OK ? 0 : cli_error();
}
