/* The slow-down manager's rules (see rules.h). */
#include "manager/rules.h"

#include <math.h>
#include <string.h>

#include "vdnn/split.h"

const char *mgr_rule_name(mgr_rule r)
{
    switch (r) {
    case MGR_RULE_OWN_DEVICE: return "own-device";
    case MGR_RULE_UTILIZATION: return "utilization";
    case MGR_RULE_SD: return "sd";
    default: return "none";
    }
}

/* The device a job's units are all on, or -1. */
static int only_device(const mgr_view *j, int ndev)
{
    int at = -1;
    for (int k = 0; k < ndev; k++) {
        if (!j->dr[k]) continue;
        if (at >= 0) return -1;
        at = k;
    }
    return at;
}

static void start_change(mgr_change *c, int job, const mgr_view *j)
{
    c->job = job;
    memcpy(c->dr, j->dr, sizeof c->dr);
    c->from = c->to = -1;
    c->moved = 0;
}

/* Rule 1: a device of its own for every job. 1 when it applies (out may then hold no
 * change: every job already has one), 0 when it cannot be done. */
static int own_devices(const mgr_view *jobs, int njobs, const double *util, int ndev, const mgr_params *p,
                       mgr_decision *out)
{
    if (njobs > ndev) return 0;
    int taken[MGR_MAX_DEVICES] = {0}, users[MGR_MAX_DEVICES] = {0}, settled[MGR_MAX_DEVICES] = {0};
    for (int i = 0; i < njobs; i++)
        for (int k = 0; k < ndev; k++) users[k] += jobs[i].dr[k] > 0;
    for (int i = 0; i < njobs; i++) {
        int k = only_device(&jobs[i], ndev);
        if (k >= 0 && users[k] == 1 && jobs[i].allowed[k]) {
            settled[i] = 1;
            taken[k] = 1;
        }
    }
    int order[MGR_MAX_DEVICES], n = 0;
    for (int i = 0; i < njobs; i++)
        if (!settled[i]) order[n++] = i;
    /* largest SD first (a stable insertion sort keeps ties in index order) */
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && jobs[order[b]].sd > jobs[order[b - 1]].sd; b--) {
            int t = order[b];
            order[b] = order[b - 1];
            order[b - 1] = t;
        }
    mgr_decision d = {.rule = MGR_RULE_OWN_DEVICE, .held = -1};
    for (int a = 0; a < n; a++) {
        const mgr_view *j = &jobs[order[a]];
        int best = -1;
        for (int k = 0; k < ndev; k++)
            if (j->allowed[k] && !taken[k] && (best < 0 || util[k] < util[best])) best = k;
        if (best < 0) return 0;
        taken[best] = 1;
        mgr_change *c = &d.change[d.nchanges];
        start_change(c, order[a], j);
        memset(c->dr, 0, sizeof c->dr);
        c->dr[best] = p->units;
        d.nchanges += memcmp(c->dr, j->dr, sizeof c->dr) != 0;   /* it may be there already */
    }
    d.gap = out->gap;
    *out = d;
    if (!out->nchanges) out->rule = MGR_RULE_NONE;
    return 1;
}

/* Rule 3, for job `ji`: 1 and the change when it applies. */
static int by_utilization(const mgr_view *jobs, int ji, const double *util, int ndev, const mgr_params *p,
                          mgr_change *c)
{
    const mgr_view *j = &jobs[ji];
    double others[MGR_MAX_DEVICES];   /* the device's utilization without j */
    int busiest = -1, least = -1;
    for (int k = 0; k < ndev; k++) {
        others[k] = util[k] - j->own[k] > 0 ? util[k] - j->own[k] : 0;
        if (j->dr[k] > 0 && (busiest < 0 || others[k] > others[busiest])) busiest = k;
        if (j->allowed[k] && (least < 0 || others[k] < others[least])) least = k;
    }
    if (busiest < 0 || least < 0 || !(others[busiest] - others[least] > p->util_gap)) return 0;
    double w[MGR_MAX_DEVICES] = {0}, total = 0;
    for (int k = 0; k < ndev; k++)
        if (j->dr[k] > 0 || k == least) {
            w[k] = others[k] < 1 ? 1 - others[k] : 0;
            total += w[k];
        }
    if (!(total > 0)) return 0;
    start_change(c, ji, j);
    dp_split(p->units, w, NULL, ndev, c->dr);
    return memcmp(c->dr, j->dr, sizeof c->dr) != 0;
}

/* Rule 4, for job `ji`: 1 and the change when some device can take units. */
static int by_sd(const mgr_view *jobs, int njobs, int ji, const double *util, int ndev, mgr_change *c)
{
    const mgr_view *j = &jobs[ji];
    int a = 0;
    for (int k = 1; k < ndev; k++)
        if (j->dr[k] > j->dr[a]) a = k;
    double avg[MGR_MAX_DEVICES] = {0}, mean = 0;
    int count[MGR_MAX_DEVICES] = {0};
    for (int i = 0; i < njobs; i++) {
        mean += jobs[i].sd / njobs;
        for (int k = 0; k < ndev; k++)
            if (jobs[i].dr[k] > 0) {
                avg[k] += jobs[i].sd;
                count[k]++;
            }
    }
    int t = -1;
    for (int k = 0; k < ndev; k++) {
        if (count[k]) avg[k] /= count[k];
        if (k == a || !j->allowed[k]) continue;
        if (t < 0 || avg[k] < avg[t] || (avg[k] == avg[t] && util[k] < util[t])) t = k;
    }
    if (t < 0 || j->dr[a] <= 0 || !(j->sd > 0)) return 0;
    long r = lround(j->dr[a] * (j->sd - mean) / j->sd);
    if (r < 1) r = 1;
    if (r > j->dr[a]) r = j->dr[a];
    start_change(c, ji, j);
    c->dr[a] -= (int)r;
    c->dr[t] += (int)r;
    c->from = a;
    c->to = t;
    c->moved = (int)r;
    return 1;
}

/* Whether going from j's DR to `to` undoes j's last change. */
static int undoes_last(const mgr_view *j, const int *to, int ndev)
{
    int back = 0, off = 0;
    for (int k = 0; k < ndev; k++) {
        int delta = to[k] - j->dr[k];
        back |= j->last_move[k] < 0 && delta > 0;
        off |= j->last_move[k] > 0 && delta < 0;
    }
    return back && off;
}

void mgr_decide(const mgr_view *jobs, int njobs, const double *util, int ndev, const mgr_params *p,
                mgr_decision *out)
{
    memset(out, 0, sizeof *out);
    out->held = -1;
    if (njobs <= 0 || ndev <= 0 || ndev > MGR_MAX_DEVICES) return;
    int hi = 0, lo = 0;
    for (int i = 1; i < njobs; i++) {
        if (jobs[i].sd > jobs[hi].sd) hi = i;
        if (jobs[i].sd < jobs[lo].sd) lo = i;
    }
    out->gap = jobs[hi].sd - jobs[lo].sd;
    if (own_devices(jobs, njobs, util, ndev, p, out)) return;
    if (!(out->gap > p->sd_gap)) return;
    mgr_change *c = &out->change[0];
    if (by_utilization(jobs, hi, util, ndev, p, c)) out->rule = MGR_RULE_UTILIZATION;
    else if (by_sd(jobs, njobs, hi, util, ndev, c)) out->rule = MGR_RULE_SD;
    if (out->rule != MGR_RULE_NONE && !jobs[hi].last_slower && undoes_last(&jobs[hi], c->dr, ndev)) {
        out->rule = MGR_RULE_NONE;
        out->held = hi;
    }
    out->nchanges = out->rule != MGR_RULE_NONE;
}
