/* Fuzz target: a plan file (nets/planner/planfile.c) loaded for the tiny net and checked the
 * way `vdnn train --plan` checks it: replayed on the simulated device, and, when its
 * peak fits the device, applied and run for one training step. */
#include "tests/fuzz/fuzz.h"

#include <stdlib.h>

#include "nets/planner/planner.h"

FUZZ_ENTRY(plan)
{
    static plan orig;
    static float x[4 * 64];
    static int32_t y[4];
    net *n = fuzz_tiny_net();
    if (!orig.nlayers && plan_from_net(n, &orig) != VDNN_OK) abort();
    char path[FUZZ_PATH_MAX];
    fuzz_write(path, "fuzz.plan", data, size);
    plan p = {0};
    if (plan_load(n, path, &p) != VDNN_OK) return 0;
    simulator *s = NULL;
    double t = 0;
    size_t peak = 0;
    pool_stats ps;
    pool_get_stats(device_pool(n->dev), &ps);
    if (sim_create(n, NULL, &s) == VDNN_OK && sim_run(s, &p, &t, &peak) == VDNN_OK && peak <= ps.capacity_bytes &&
        plan_apply(n, &p) == VDNN_OK) {
        step_result r;
        net_train_step(n, x, y, 4, 0.0, &r);
        if (plan_apply(n, &orig) != VDNN_OK) abort();
    }
    sim_destroy(s);
    plan_free(&p);
    return 0;
}
