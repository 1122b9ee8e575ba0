/* `vdnn profile`: prints the plan the planner picks for a budget and its prediction
 * (docs/planner.md); the planner's driver is nets/planner/driver.c. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "nets/planner/planner.h"
#include "tools/commands.h"

int cmd_profile(int argc, char **argv)
{
    const char *cfg = NULL, *dev_name = "auto", *save = NULL;
    long long batch = -1, micro = 0;
    int json = 0, reprofile = 0;
    planner_opts f = {.verify = 0, .node_limit = PLAN_NODE_LIMIT, .search_seconds = PLAN_SEARCH_SECONDS,
                      .search_gap = PLAN_SEARCH_GAP};
    arg_spec specs[] = {
        {"--budget", ARG_BYTES, &f.budget, 0, 0, "the device memory the plan must fit in", 0},
        {"--json", ARG_FLAG, &json, 0, 0, "one JSON object instead of the table", 0},
        {"--search", ARG_STRING, &f.search, 0, 0, HELP_SEARCH, 0},
        {"--save-plan", ARG_STRING, &save, 0, 0, "write the plan to this file (for train --plan)", 0},
        {"--verify", ARG_INT, &f.verify, 0, 1000, "also run N real iterations of the plan and print their time", 0},
        {"--link-gbps", ARG_FLOAT, &f.link_gbps, 0.001, 1e4, HELP_LINK_GBPS, 0},
        {"--threads", ARG_INT, &f.threads, 1, 1024, HELP_THREADS, 0},
        {"--device", ARG_STRING, &dev_name, 0, 0, HELP_DEVICE, 0},
        {"--math", ARG_STRING, &cli_math, 0, 0, HELP_MATH, 0},
        {"--nondeterministic", ARG_FLAG, &cli_nondeterministic, 0, 0, HELP_NONDETERMINISTIC, 0},
        {"--in-place", ARG_STRING, &cli_in_place, 0, 0, HELP_IN_PLACE, 0},
        {"--batch", ARG_INT, &batch, 1, 65536, HELP_BATCH, 0},
        {"--profile-cache", ARG_STRING, &f.cache, 0, 0, HELP_PROFILE_CACHE, 0},
        {"--node-limit", ARG_INT, &f.node_limit, 0, 1e12, HELP_NODE_LIMIT, 0},
        {"--micro-batch", ARG_INT, &micro, 1, 65536, "plan micro-batches of N items instead of choosing a split", 0},
        {"--search-seconds", ARG_FLOAT, &f.search_seconds, 0, 1e9, HELP_SEARCH_SECONDS, 0},
        {"--search-gap", ARG_FLOAT, &f.search_gap, 0, 1, HELP_SEARCH_GAP, 0},
        {"--reprofile", ARG_FLAG, &reprofile, 0, 0, HELP_REPROFILE, 0},
        {NULL, 0, NULL, 0, 0, NULL, 0},
    };
    if (args_parse(argc, argv, 2, specs, &cfg, 1,
                   "vdnn profile CFG --budget SIZE [--json] [--search bb|vdnn] [--save-plan FILE] [--verify N]") != VDNN_OK)
        return cli_error();
    if (reprofile) profile_refresh();
    profile_cache_default(f.cache);
    if (!json) profile_show_progress(stderr, cli_progress_tty());
    if (!f.budget) {
        vdnn_fail(VDNN_EINVAL, "profile needs --budget SIZE (the device memory the plan must fit in)");
        return cli_error();
    }
    net_overrides ov;
    vdnn_status st = cli_overrides(&ov);
    ov.batch = (int)batch;
    ov.micro_batch = (int)micro;
    net *n = NULL;
    device *d = NULL;
    plan p = {0};
    if (st == VDNN_OK) st = net_load(cfg, &ov, &n);
    /* without verification no iteration runs: the parameters are placed, not drawn */
    if (st == VDNN_OK) n->plan_only = !f.verify;
    /* verifying runs real iterations in the budget; predicting only needs the profile
     * (measured on the GPU, or on the CPU in an arena of its own) and the parameters
     * placed, and the labels */
    if (st == VDNN_OK && f.verify) st = cli_device(dev_name, f.budget, f.threads, f.link_gbps, n, &d);
    else if (st == VDNN_OK)
        st = cli_plan_device(dev_name, net_param_bytes(n) + pool_round((size_t)n->input.n * sizeof(int32_t)),
                             f.threads, f.link_gbps, n, &d);
    if (st == VDNN_OK) {
        st = net_attach(n, d);
        if (st == VDNN_EBUDGET) st = vdnn_wrap(st, "the parameters alone do not fit --budget");
    }
    f.json = json;
    f.fixed_split = micro > 0;
    if (st == VDNN_OK) st = plan_dyn(&n, &f, json ? NULL : stdout, &p, NULL);
    if (st == VDNN_OK && save) {
        st = plan_save(&p, n, save);
        /* the flags train needs for the net the plan was made for */
        char flags[64] = "";
        int k = batch > 0 ? snprintf(flags, sizeof flags, " --batch %d", p.batch) : 0;
        if (p.micro) snprintf(flags + k, sizeof flags - (size_t)k, " --micro-batch %d", p.micro);
        if (st == VDNN_OK && !json) printf("plan saved to %s (train with --plan %s%s)\n", save, save, flags);
    }
    if (p.nlayers) plan_free(&p);
    net_free(n);
    device_destroy(d);
    return st == VDNN_OK ? 0 : cli_error();
}
