/* Fuzz target: an ONNX model (onnx/model.c, onnx/import.c) decoded and imported the way
 * `vdnn import` does, and the config it writes read back by the config reader; a model
 * that imports into a small net is also built, attached, run forward once and exported
 * (onnx/export.c). */
#include "tests/fuzz/fuzz.h"

#include <stdlib.h>

#ifdef VDNN_ONNX
#include "onnx/export.h"
#include "onnx/import.h"
#endif

FUZZ_ENTRY(onnx)
{
#ifndef VDNN_ONNX
    (void)data, (void)size;
    return 0;
#else
    Onnx__ModelProto *m = NULL;
    if (onnx_model_parse(data, size, "fuzz.onnx", &m) != VDNN_OK) return 0;
    onnx_import r = {0};
    onnx_import_opts o = {.source = "fuzz.onnx"};
    if (onnx_import_model(m, &o, &r) == VDNN_OK) {
        net *n = NULL;
        net_overrides ov = net_no_overrides();
        /* small nets only: a fuzzed shape may ask for gigabytes, which the import
         * accepts and a real run would refuse at attach */
        if (net_parse(r.cfg, "fuzz.cfg", &ov, &n) == VDNN_OK && r.in_count <= 65536 &&
            net_train_bytes_bound(n) <= ((size_t)64 << 20)) {
            device *d = NULL;
            device_options opt = {.kind = DEVICE_CPU, .budget_bytes = (size_t)128 << 20, .threads = 1};
            if (device_create(&opt, &d) == VDNN_OK && net_attach(n, d) == VDNN_OK &&
                net_plan_static(n, POLICY_NONE, ALGO_MEM) == VDNN_OK && onnx_import_load(&r, n) == VDNN_OK) {
                float *x = calloc((size_t)r.in_count, sizeof *x);
                float *y = calloc(shape_per_item(n->layers[n->nlayers - 1]->out) * (size_t)n->input.n, sizeof *y);
                if (x && y && net_predict(n, x, n->input.n, n->nlayers, y) == VDNN_OK) {
                    /* and out again: what import took, export must write or refuse */
                    char path[FUZZ_PATH_MAX];
                    fuzz_path(path, "fuzz-out.onnx");
                    onnx_export_net(n, path, NULL);
                }
                free(x);
                free(y);
            }
            net_free(n);
            n = NULL;
            if (d) device_destroy(d);
        }
        net_free(n);
        onnx_import_free(&r);
    }
    onnx_model_free(m);
    return 0;
#endif
}
