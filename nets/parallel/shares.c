/* Share schedules (see shares.h). */
#include "nets/parallel/shares.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vdnn/file.h"

#define MAX_BYTES ((size_t)16 << 20)

typedef struct change {
    unsigned long long step;
    double *weights;          /* (devices) */
} change;

struct shares_schedule {
    dp_group *g;
    int devices, count;
    change *at;               /* (count), steps increasing */
    int applied;              /* the change in force; -1: none yet */
};

void shares_free(shares_schedule *s)
{
    if (!s) return;
    for (int i = 0; i < s->count; i++) free(s->at[i].weights);
    free(s->at);
    free(s);
}

/* One line "STEP W0,W1,..." into c. */
static vdnn_status parse_line(const char *path, int line, char *text, int devices, unsigned long long last, change *c)
{
    char *p = text, *end;
    errno = 0;
    unsigned long long step = strtoull(p, &end, 10);
    if (end == p || errno || !isspace((unsigned char)*end) || step < 1 || *p == '-')
        return vdnn_fail(VDNN_EINVAL, "%s:%d: '%s' is not STEP W0,W1,... (a step from 1, then one weight per device)",
                         path, line, text);
    if (step <= last)
        return vdnn_fail(VDNN_EINVAL, "%s:%d: step %llu after step %llu: steps must increase", path, line, step, last);
    c->step = step;
    c->weights = calloc((size_t)devices, sizeof *c->weights);
    if (!c->weights) return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    p = end;
    double total = 0;
    for (int k = 0; k < devices; k++) {
        while (isspace((unsigned char)*p)) p++;
        double v = strtod(p, &end);
        if (end == p || !(v >= 0 && v <= 1e9))   /* relative weights: a huge one means nothing */
            return vdnn_fail(VDNN_EINVAL, "%s:%d: weight %d of step %llu (%.*s) is not a number from 0 to 1e9", path,
                             line, k + 1, step, (int)strcspn(p, ", \t"), p);
        c->weights[k] = v;
        total += v;
        p = end;
        if (k + 1 < devices && *p != ',')
            return vdnn_fail(VDNN_EINVAL, "%s:%d: %d weights for the job's %d devices", path, line, k + 1, devices);
        if (*p == ',') p++;
    }
    while (isspace((unsigned char)*p)) p++;
    if (*p) return vdnn_fail(VDNN_EINVAL, "%s:%d: more weights than the job's %d devices", path, line, devices);
    if (!(total > 0)) return vdnn_fail(VDNN_EINVAL, "%s:%d: every weight of step %llu is 0", path, line, step);
    return VDNN_OK;
}

vdnn_status shares_load(const char *path, dp_group *g, shares_schedule **out)
{
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    vdnn_status st = vdnn_file_read(path, "share schedule", MAX_BYTES, VDNN_FILE_TEXT | VDNN_FILE_PIPE, &text, &len);
    if (st != VDNN_OK) return vdnn_wrap(st, "--share-schedule");
    shares_schedule *s = calloc(1, sizeof *s);
    if (!s) {
        free(text);
        return vdnn_fail(VDNN_ENOMEM, "out of host memory");
    }
    s->g = g;
    s->devices = dp_devices(g);
    s->applied = -1;
    int line = 0, cap = 0;
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l && st == VDNN_OK; l = strtok_r(NULL, "\n", &save)) {
        line++;
        char *hash = strchr(l, '#');
        if (hash) *hash = 0;
        while (isspace((unsigned char)*l)) l++;
        if (!*l) continue;
        if (s->count == cap) {
            cap = cap ? 2 * cap : 16;
            change *at = realloc(s->at, (size_t)cap * sizeof *at);
            if (!at) {
                st = vdnn_fail(VDNN_ENOMEM, "out of host memory");
                break;
            }
            s->at = at;
        }
        memset(&s->at[s->count], 0, sizeof *s->at);
        st = parse_line(path, line, l, s->devices, s->count ? s->at[s->count - 1].step : 0, &s->at[s->count]);
        s->count++;
    }
    free(text);
    if (st == VDNN_OK && !s->count) st = vdnn_fail(VDNN_EINVAL, "%s: no STEP W0,W1,... line: an empty share schedule", path);
    if (st != VDNN_OK) {
        shares_free(s);
        return st;
    }
    *out = s;
    return VDNN_OK;
}

vdnn_status shares_tick(void *ctx, const train_tick *t)
{
    shares_schedule *s = ctx;
    int in_force = -1;
    while (in_force + 1 < s->count && s->at[in_force + 1].step <= t->next) in_force++;
    if (in_force < 0 || in_force == s->applied) return VDNN_OK;
    s->applied = in_force;
    vdnn_status st = dp_set_weights(s->g, s->at[in_force].weights);
    return st == VDNN_OK ? VDNN_OK : vdnn_wrap(st, "--share-schedule, step %llu", s->at[in_force].step);
}
