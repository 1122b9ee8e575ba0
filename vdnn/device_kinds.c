/* The kinds of device and the factory: device_create picks the implementation from the
 * table below, and what differs between kinds before a device exists (its default
 * budget, whether it takes an emulated link) is asked of the table too. Adding a kind
 * is a file (vdnn/device_KIND.c with its device_impl) and a line here (docs/design.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vdnn/device_impl.h"

/* On a GPU with no budget given: what is free, less a reserve for cuDNN's and cuBLAS's
 * own memory (their handles and libraries take a few hundred MiB). */
static size_t cuda_default_budget(const device_options *o)
{
    size_t free_bytes = device_cuda_free_bytes(o->cuda_index), reserve = (size_t)1 << 30;
    return free_bytes > 2 * reserve ? pool_round(free_bytes - reserve - free_bytes / 16) - POOL_ALIGN
                                    : free_bytes / 2 / POOL_ALIGN * POOL_ALIGN;
}

/* A kind of device: what creates one, and what differs between kinds before one exists. */
typedef struct kind_entry {
    device_kind kind;
    vdnn_status (*create)(const device_options *opt, device **out);
    size_t (*default_budget)(const device_options *o);   /* NULL: none of its own */
    int emulates_link;     /* takes link_gbps */
} kind_entry;

static const kind_entry kinds[] = {
    {DEVICE_CPU, device_create_cpu, NULL, 1},
    {DEVICE_CUDA, device_create_cuda, cuda_default_budget, 0},
    {DEVICE_SIM, device_create_sim, NULL, 0},
};

static const kind_entry *kind_of(const device_options *o)
{
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        if (kinds[k].kind == o->kind) return &kinds[k];
    return NULL;
}

size_t device_default_budget(const device_options *o)
{
    const kind_entry *k = kind_of(o);
    return k && k->default_budget ? k->default_budget(o) : 0;
}

const char *device_options_identity(const device_options *o, char *buf, size_t len)
{
    if (o->kind == DEVICE_CPU && o->emulated) return device_options_name(o, buf, len);
    if (len) buf[0] = 0;
    return buf;
}

vdnn_status device_create(const device_options *opt, device **out)
{
    *out = NULL;
    const kind_entry *k = kind_of(opt);
    if (!k) return vdnn_fail(VDNN_EINVAL, "device kind %d is not one this build knows", (int)opt->kind);
    if (opt->budget_bytes < POOL_ALIGN)
        return vdnn_fail(VDNN_EINVAL, "device budget of %zu bytes is too small", opt->budget_bytes);
    if (opt->link_gbps > 0 && !k->emulates_link) {
        char name[32];
        return vdnn_fail(VDNN_EINVAL, "a link speed (--link-gbps) emulates a link on the CPU device; %s has its "
                         "own (drop it, or use the CPU device)", device_options_name(opt, name, sizeof name));
    }
    vdnn_status st = k->create(opt, out);
    if (st != VDNN_OK) return st;
    (*out)->opt = *opt;
    const char *faults = getenv("VDNN_FAULTS");
    if (faults && *faults && !((*out)->faults = strdup(faults))) {
        device_destroy(*out);
        *out = NULL;
        return vdnn_fail(VDNN_ENOMEM, "out of host memory creating a device");
    }
    return VDNN_OK;
}
