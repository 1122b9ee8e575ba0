/* Strict command-line flags: every flag known, every value parsed in full and range
 * checked; errors name the flag. */
#ifndef VDNN_ARGS_H
#define VDNN_ARGS_H

#include <stddef.h>

#include "vdnn/status.h"

typedef enum { ARG_FLAG, ARG_INT, ARG_FLOAT, ARG_STRING, ARG_BYTES } arg_type;

typedef struct arg_spec {
    const char *name;      /* "--epochs" */
    arg_type type;
    void *out;             /* int* (ARG_FLAG), long long* (ARG_INT), double*, const char**, size_t* */
    double min, max;       /* ARG_INT, ARG_FLOAT */
    const char *help;
    int seen;
} arg_spec;

/* Parses argv[first..argc) into the specs; exactly `npos` positional arguments go to
 * pos[0..npos). --help or -h anywhere prints `usage` and every flag (with its value's
 * kind and its help, where it has one) on stdout, and exits 0. */
vdnn_status args_parse(int argc, char **argv, int first, arg_spec *specs, const char **pos, int npos,
                       const char *usage);

#endif
