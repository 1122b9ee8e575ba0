/* Fuzz target: a config file, read from disk (vdnn/config.c) and built into a net
 * (nets/net.c: every section, key and shape), then its exact minimum budget replayed
 * on the simulated device when the net is small enough to replay quickly. */
#include "tests/fuzz/fuzz.h"

/* Nets whose iteration needs more than this are built but not replayed: the
 * simulator's cost grows with the layers' sizes, and libFuzzer wants fast runs. */
#define REPLAY_MAX_BYTES ((size_t)64 << 20)

FUZZ_ENTRY(config)
{
    char path[FUZZ_PATH_MAX];
    fuzz_write(path, "fuzz.cfg", data, size);
    net_overrides ov = net_no_overrides();
    net *n = NULL;
    if (net_load(path, &ov, &n) != VDNN_OK) return 0;
    size_t bytes = 0;
    if (net_train_bytes_bound(n) <= REPLAY_MAX_BYTES && n->nlayers <= 64) net_min_budget(n, &bytes);
    net_free(n);
    return 0;
}
