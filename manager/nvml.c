/* GPU utilization from NVML (see nvml.h). The few NVML calls used are declared here,
 * as NVML's documentation gives them, so that no NVML header is needed to build. */
#include "manager/nvml.h"

#include <dlfcn.h>
#include <stdlib.h>

typedef int nvml_ret;                /* nvmlReturn_t: 0 is NVML_SUCCESS */
typedef struct nvml_dev *nvml_dev;   /* nvmlDevice_t */
typedef struct {
    unsigned int gpu, memory;        /* percent of the sample period */
} nvml_utilization;                  /* nvmlUtilization_t */

struct mgr_nvml {
    void *lib;
    nvml_ret (*shutdown)(void);
    nvml_ret (*by_bus)(const char *bus, nvml_dev *dev);
    nvml_ret (*util)(nvml_dev dev, nvml_utilization *u);
};

mgr_nvml *mgr_nvml_open(void)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return NULL;
    mgr_nvml *m = calloc(1, sizeof *m);
    nvml_ret (*init)(void) = (nvml_ret(*)(void))dlsym(lib, "nvmlInit_v2");
    if (m) {
        m->lib = lib;
        m->shutdown = (nvml_ret(*)(void))dlsym(lib, "nvmlShutdown");
        m->by_bus = (nvml_ret(*)(const char *, nvml_dev *))dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
        m->util = (nvml_ret(*)(nvml_dev, nvml_utilization *))dlsym(lib, "nvmlDeviceGetUtilizationRates");
    }
    if (!m || !init || !m->shutdown || !m->by_bus || !m->util || init() != 0) {
        free(m);
        dlclose(lib);
        return NULL;
    }
    return m;
}

void mgr_nvml_close(mgr_nvml *m)
{
    if (!m) return;
    m->shutdown();
    dlclose(m->lib);
    free(m);
}

int mgr_nvml_util(mgr_nvml *m, const char *bus, double *util)
{
    nvml_dev dev = NULL;
    nvml_utilization u = {0, 0};
    if (!m || !bus || !*bus || m->by_bus(bus, &dev) != 0 || m->util(dev, &u) != 0) return 0;
    *util = u.gpu / 100.0;
    return 1;
}
