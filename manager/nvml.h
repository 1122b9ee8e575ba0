/* GPU utilization for the slow-down manager, from NVML (libnvidia-ml, loaded at run
 * time: the manager also runs where there is none). */
#ifndef VDNN_MGR_NVML_H
#define VDNN_MGR_NVML_H

typedef struct mgr_nvml mgr_nvml;

/* NULL when NVML cannot be loaded or started (no driver): utilization then comes from
 * what the jobs report. Free with mgr_nvml_close(). */
mgr_nvml *mgr_nvml_open(void);
void mgr_nvml_close(mgr_nvml *m);

/* The utilization (0..1: the fraction of the last sample period in which a kernel ran)
 * of the GPU at PCI bus id `bus` (as CUDA gives it); 0 when NVML does not know it. */
int mgr_nvml_util(mgr_nvml *m, const char *bus, double *util);

#endif
