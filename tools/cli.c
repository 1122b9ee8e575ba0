/* What the subcommands share: the error line, the device of --device, the overrides of
 * --in-place, and the math settings (tools/commands.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nets/planner/planner.h"
#include "tools/commands.h"

int cli_progress_tty(void)
{
    const char *bar = getenv("VDNN_PROGRESS_BAR");
    return isatty(fileno(stderr)) || (bar && !strcmp(bar, "1"));
}

int cli_error(void)
{
    fprintf(stderr, "vdnn: %s\n", vdnn_errmsg());
    return 1;
}

/* With no budget given: room for the plan with the largest-workspace algorithms (what
 * the perf measurement can pick at most), and an eighth more for the placement of
 * whatever algorithms it does pick. */
size_t cli_default_budget(const net *n)
{
    net *m = NULL;
    size_t need = net_train_bytes_bound(n);
    if (net_clone(n, &m) == VDNN_OK) {
        size_t sim = 0;
        m->policy = n->policy;
        if (net_plan(m, n->policy, ALGO_PERF) == VDNN_OK && net_min_budget(m, &sim) == VDNN_OK && sim > need)
            need = sim;
    }
    net_free(m);
    return pool_round(need + need / 8);
}

const char *cli_math = "fp32";
int cli_nondeterministic = 0;
const char *cli_in_place = NULL;

vdnn_status cli_overrides(net_overrides *ov)
{
    *ov = net_no_overrides();
    if (!cli_in_place) return VDNN_OK;
    if (!strcmp(cli_in_place, "on")) ov->in_place = 1;
    else if (!strcmp(cli_in_place, "off")) ov->in_place = 0;
    else return vdnn_fail(VDNN_EINVAL, "--in-place: '%s' is not one of on, off", cli_in_place);
    return VDNN_OK;
}

/* One device for --device: a device name (device_parse_name) but cpu:N, which is
 * --devices's; "auto" is resolved before. */
static vdnn_status parse_one_device(const char *what, const char *name, device_options *o)
{
    vdnn_status st = device_parse_name(what, name, strlen(name), o);
    if (st == VDNN_OK && !o->emulated) return VDNN_OK;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", st != VDNN_OK ? vdnn_errmsg() : "");
    if (st != VDNN_OK) return vdnn_fail(st, "%s; %s takes auto, cpu, cuda or cuda:N", msg, what);
    return vdnn_fail(VDNN_EINVAL, "%s %s: an emulated device of its own cores is for --devices (--devices %s "
                     "trains on it alone); %s takes auto, cpu, cuda or cuda:N", what, name, name, what);
}

/* A device of `budget` bytes; with none (0), a GPU's own memory, else on the CPU `hold`
 * bytes where a planning device is asked for (planning), or the net's training size. */
static vdnn_status make_device(const char *name, size_t budget, int planning, size_t hold, long long threads,
                               double link_gbps, const net *n, device **out)
{
    device_options o = {0};
    const char *env = getenv("VDNN_DEVICE");
    if (!strcmp(name, "auto") && env && *env) name = env;
    if (strcmp(cli_math, "fp32") && strcmp(cli_math, "tf32"))
        return vdnn_fail(VDNN_EINVAL, "--math: '%s' is not one of fp32, tf32", cli_math);
    /* auto takes the GPU when there is one, unless a link speed asks for the CPU's emulated link */
    if (!strcmp(name, "auto")) name = link_gbps <= 0 && device_cuda_count() > 0 ? "cuda" : "cpu";
    vdnn_status st = parse_one_device(name == env ? "VDNN_DEVICE" : "--device", name, &o);
    if (st != VDNN_OK) return st;
    o.budget_bytes = budget ? budget : device_default_budget(&o);
    if (!o.budget_bytes)   /* the CPU's (with no GPU, a GPU's: device_create says so) */
        o.budget_bytes = planning ? pool_round(hold) + POOL_ALIGN : cli_default_budget(n);
    o.threads = (int)threads;
    o.link_gbps = link_gbps;
    o.tf32 = !strcmp(cli_math, "tf32");
    o.nondeterministic = cli_nondeterministic;
    return device_create(&o, out);
}

vdnn_status cli_device(const char *name, size_t budget, long long threads, double link_gbps, const net *n,
                       device **out)
{
    return make_device(name, budget, 0, 0, threads, link_gbps, n, out);
}

vdnn_status cli_plan_device(const char *name, size_t hold, long long threads, double link_gbps, const net *n,
                            device **out)
{
    return make_device(name, 0, 1, hold, threads, link_gbps, n, out);
}

vdnn_status cli_plan_fixed(const char *name, long long threads, double link_gbps, size_t budget, net *n,
                           device **d)
{
    size_t need = 0;
    vdnn_status st = plan_fixed(n, budget, &need);
    for (int tries = 0; st == VDNN_OK && !budget && tries < 4; tries++) {
        const device_options *o = device_get_options(*d);
        if (device_default_budget(o) || need <= o->budget_bytes) break;   /* a GPU's own memory; or it fits */
        net_detach(n);
        device_destroy(*d);
        *d = NULL;
        st = cli_device(name, pool_round(need + need / 8), threads, link_gbps, n, d);
        if (st == VDNN_OK) st = plan_attach(n, *d);
        if (st == VDNN_OK) st = plan_fixed(n, 0, &need);
    }
    return st;
}

/* What the quitting handler writes, made before any signal: SIGINT's, then SIGTERM's. */
static char quit_msg[2][256];
static size_t quit_len[2];

static void on_quit(int sig)
{
    int k = sig == SIGTERM;
    ssize_t w = write(STDERR_FILENO, quit_msg[k], quit_len[k]);
    (void)w;
    _exit(128 + sig);
}

void cli_quit_on_signal(const char *cmd, const char *what)
{
    for (int k = 0; k < 2; k++) {
        /* on a terminal a progress line may be half drawn: start a line of its own */
        snprintf(quit_msg[k], sizeof quit_msg[k], "%svdnn: interrupted (%s): vdnn %s stopped at once%s%s\n",
                 isatty(STDERR_FILENO) ? "\n" : "", k ? "SIGTERM" : "SIGINT", cmd, what ? ", " : "", what ? what : "");
        quit_len[k] = strlen(quit_msg[k]);
    }
    struct sigaction sa = {.sa_handler = on_quit};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}
