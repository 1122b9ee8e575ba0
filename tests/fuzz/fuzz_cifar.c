/* Fuzz target: the CIFAR-10 binary batch reader (data/cifar.c), one batch file. */
#include "tests/fuzz/fuzz.h"

#include "data/data.h"

FUZZ_ENTRY(cifar)
{
    char path[FUZZ_PATH_MAX];
    const char *paths[1] = {fuzz_write(path, "data_batch_1.bin", data, size)};
    dataset *d = NULL;
    if (cifar10_load(paths, 1, &d) == VDNN_OK) dataset_free(d);
    return 0;
}
