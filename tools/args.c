/* Strict command-line flag parsing (see args.h). */
#include "tools/args.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static vdnn_status parse_value(arg_spec *s, const char *v)
{
    char *end;
    errno = 0;
    switch (s->type) {
    case ARG_INT: {
        long long x = strtoll(v, &end, 10);
        if (!*v || *end || errno) return vdnn_fail(VDNN_EINVAL, "%s: '%s' is not an integer", s->name, v);
        if (x < s->min || x > s->max)
            return vdnn_fail(VDNN_EINVAL, "%s: %lld is out of range [%.0f, %.0f]", s->name, x, s->min, s->max);
        *(long long *)s->out = x;
        return VDNN_OK;
    }
    case ARG_FLOAT: {
        double x = strtod(v, &end);
        if (!*v || *end || errno || !isfinite(x)) return vdnn_fail(VDNN_EINVAL, "%s: '%s' is not a number", s->name, v);
        if (x < s->min || x > s->max)
            return vdnn_fail(VDNN_EINVAL, "%s: %g is out of range [%g, %g]", s->name, x, s->min, s->max);
        *(double *)s->out = x;
        return VDNN_OK;
    }
    case ARG_STRING:
        if (!*v) return vdnn_fail(VDNN_EINVAL, "%s: empty value", s->name);
        *(const char **)s->out = v;
        return VDNN_OK;
    case ARG_BYTES: return vdnn_parse_bytes(v, s->name, (size_t *)s->out);
    case ARG_FLAG: break;
    }
    return VDNN_OK;
}

static void print_help(const arg_spec *specs, const char *usage)
{
    static const char *const kinds[] = {"", " N", " X", " TEXT", " SIZE"};   /* by arg_type */
    printf("usage: %s\nflags:\n", usage);
    for (const arg_spec *s = specs; s->name; s++) {
        char flag[64];
        snprintf(flag, sizeof flag, "%s%s", s->name, kinds[s->type]);
        printf("  %-24s%s%s\n", flag, s->help && *s->help ? " " : "", s->help ? s->help : "");
    }
    printf("SIZE: bytes, or with K, M, G, T (or KiB, MiB, GiB, TiB): powers of 1024. See docs/cli.md.\n");
}

vdnn_status args_parse(int argc, char **argv, int first, arg_spec *specs, const char **pos, int npos,
                       const char *usage)
{
    int got = 0;
    for (int i = first; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            print_help(specs, usage);
            exit(0);
        }
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == 0) {
            if (got >= npos) return vdnn_fail(VDNN_EINVAL, "unexpected argument '%s'\nusage: %s", a, usage);
            pos[got++] = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        arg_spec *s = specs;
        while (s->name && (strlen(s->name) != len || strncmp(s->name, a, len))) s++;
        if (!s->name) return vdnn_fail(VDNN_EINVAL, "unknown flag '%.*s'\nusage: %s", (int)len, a, usage);
        if (s->seen) return vdnn_fail(VDNN_EINVAL, "%s given twice", s->name);
        s->seen = 1;
        if (s->type == ARG_FLAG) {
            if (eq) return vdnn_fail(VDNN_EINVAL, "%s takes no value", s->name);
            *(int *)s->out = 1;
            continue;
        }
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v) return vdnn_fail(VDNN_EINVAL, "%s needs a value", s->name);
        vdnn_status st = parse_value(s, v);
        if (st != VDNN_OK) return st;
    }
    if (got < npos) return vdnn_fail(VDNN_EINVAL, "missing argument\nusage: %s", usage);
    return VDNN_OK;
}
