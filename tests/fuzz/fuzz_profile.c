/* Fuzz target: a profile cache file (nets/planner/profile.c), and, when it is one of the tiny
 * net's, the planner's search on its costs (the simulator reads every number in it). */
#include "tests/fuzz/fuzz.h"

#include "nets/planner/planner.h"

#define NODE_LIMIT 64

FUZZ_ENTRY(profile)
{
    net *n = fuzz_tiny_net();
    char path[FUZZ_PATH_MAX];
    fuzz_write(path, "profile.txt", data, size);
    profile pr;
    if (profile_load(path, &pr) != VDNN_OK) return 0;
    if (pr.nlayers == n->nlayers) {
        plan p = {0};
        if (plan_search(n, &pr, (size_t)1 << 20, SEARCH_BB, (search_limits){.nodes = NODE_LIMIT}, &p, NULL) == VDNN_OK) plan_free(&p);
    }
    profile_free(&pr);
    return 0;
}
