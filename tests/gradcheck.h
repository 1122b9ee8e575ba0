/* The shared gradient checker every layer test uses, and small test helpers.
 *
 * gradcheck() runs a layer's forward and backward on random input and parameters and
 * compares the analytic gradients (input and every trainable parameter) with central
 * differences of the scalar objective L = sum(y * r) for a fixed random r (for the loss
 * layer: its own loss * grad_scale). Points near a kink (where the one-sided
 * differences disagree) are excluded. It also fails when a gradient is trivially zero. */
#ifndef VDNN_TEST_GRADCHECK_H
#define VDNN_TEST_GRADCHECK_H

#include <stddef.h>
#include <stdint.h>

#include "layers/layer.h"
#include "vdnn/device.h"

typedef struct gradcheck_opts {
    int n;              /* items in the batch (<= l->in.n) */
    int train;          /* exec_ctx.train */
    uint64_t seed;      /* random input, parameters, r, and exec_ctx.seed */
    double eps;         /* finite-difference step (e.g. 1e-2 for float32) */
    double rtol;        /* relative tolerance (e.g. 2e-2) */
    double atol;        /* absolute floor (e.g. 1e-3) */
    int samples;        /* entries checked per tensor (random, without repetition) */
    int num_classes;    /* loss layer: labels drawn from [0, num_classes) */
} gradcheck_opts;

/* Defaults good for float32 layers. */
gradcheck_opts gradcheck_defaults(void);

/* Returns 0 when every sampled entry agrees; otherwise non-zero with a description of
 * the first disagreement (tensor, index, analytic, numeric) in msg. The layer must
 * already have its params allocated (layer_alloc_params); they are overwritten with
 * random values. Uses l->algo as set by the caller. */
int gradcheck(layer *l, device *d, const gradcheck_opts *o, char *msg, size_t msglen);

/* A CPU device with a roomy budget (256 MiB) for tests; aborts the test on failure. */
device *test_cpu_device(void);

/* Fills n floats with values uniform in [-scale, scale] from seed. */
void test_fill_uniform(float *x, size_t n, float scale, uint64_t seed);
/* A new array of n such floats; free() it. */
float *test_random_floats(size_t n, float scale, uint64_t seed);

/* A layer from config text holding one section (e.g. "[lrn]\nsize = 3\n"), parsed as
 * "test.cfg": of type `ops` (NULL: the type the section names), at position `index` in
 * its net, on input `in`. The check fails unless the section is valid. Free with
 * layer_destroy(l, NULL). */
layer *test_layer(const layer_ops *ops, int index, const char *text, shape4 in);
/* The status of checking such a section against ops's keys and, if that passes, of
 * creating the layer on `in`: where a config error ends. */
vdnn_status test_layer_status(const layer_ops *ops, const char *text, shape4 in);
/* The status of the key check alone (range and type errors end there). */
vdnn_status test_check_status(const layer_ops *ops, const char *text);

/* An exec_ctx for `n` items on d (training when `train`, gradient scale 1), the rest 0. */
exec_ctx test_ctx(device *d, int n, int train);

#endif
