/* The slow-down manager's rules (Kim & Kim 2022; docs/manager.md): given every job's
 * slow-down (SD) and data ratio (DR: its units of each mini-batch per device) and each
 * device's utilization, which jobs' DRs change, and to what.
 *
 * In order:
 *  1. No more jobs than devices: every job gets a device of its own, all its units on
 *     it. Jobs that already have one keep it; the others, largest SD first, take the
 *     least busy device left that they may use. When that is done (or impossible) the
 *     rules below are not needed (or apply as usual).
 *  2. Otherwise nothing changes unless the largest SD gap (max SD - min SD) exceeds
 *     sd_gap. Then only the job with the largest SD (j) changes:
 *  3. by utilization, when the busiest device j uses and the least busy device j may
 *     use differ by more than util_gap: j then uses its devices and that least busy
 *     one, its units in proportion to each one's remaining capacity (1 - utilization).
 *     A device's utilization here leaves out j's own busy time on it: what j would
 *     find there, not what j itself adds (else j, moved to the least busy device, makes
 *     it the busiest and is moved back);
 *  4. else by SD: r units move from j's device with its largest share (a) to the
 *     device with the least average SD of the jobs using it (t, a free device's being
 *     0), r = round(DR_j[a] * (SD_j - mean SD) / SD_j), at least 1 and at most DR_j[a].
 *     That r is this project's: the paper's own formula for it (Embr) was not available.
 *     It is the units that would bring j's SD to the mean if j's time followed its load
 *     on its most loaded device.
 * A change by rule 3 or 4 that would undo the job's last change (move units back onto
 * a device that change took them from, off one it gave them to) is held, unless that
 * change made the job's steps slower: the job keeps its DR (rule NONE, `held` set). A
 * job's SD counts the time it has already spent, so one the rules cannot help stays
 * the largest and would otherwise go back and forth between two DRs, paying for a new
 * replica each time. The manager forgets the last changes when a job comes or goes.
 * Ties go to the lower index. The rules are pure: the manager (manager/server.c)
 * decides when to apply them. */
#ifndef VDNN_MGR_RULES_H
#define VDNN_MGR_RULES_H

#define MGR_MAX_DEVICES 32

/* A job as the rules see it; devices are indices into the machine's list. */
typedef struct mgr_view {
    double sd;
    int dr[MGR_MAX_DEVICES];                 /* units on each device, summing to units */
    unsigned char allowed[MGR_MAX_DEVICES];  /* the devices the job may use */
    int last_move[MGR_MAX_DEVICES];          /* its last change, new DR - old; all 0: none */
    int last_slower;                         /* its steps are slower since that change */
    double own[MGR_MAX_DEVICES];             /* its share of each device's utilization */
} mgr_view;

typedef enum { MGR_RULE_NONE = 0, MGR_RULE_OWN_DEVICE, MGR_RULE_UTILIZATION, MGR_RULE_SD } mgr_rule;

typedef struct mgr_params {
    int units;                /* units of a DR (the paper: 10) */
    double sd_gap;            /* act when the largest SD gap exceeds this */
    double util_gap;          /* the utilization rule applies above this difference (0..1) */
} mgr_params;

typedef struct mgr_change {
    int job;                  /* index into the jobs given */
    int dr[MGR_MAX_DEVICES];  /* its new DR */
    int from, to, moved;      /* the SD rule: r units from device `from` to `to`; else -1, -1, 0 */
} mgr_change;

typedef struct mgr_decision {
    mgr_rule rule;
    double gap;               /* the largest SD gap seen */
    int held;                 /* the job (index) whose change was held as undoing its last; -1 */
    int nchanges;
    mgr_change change[MGR_MAX_DEVICES];
} mgr_decision;

/* The decision for `njobs` jobs on `ndev` (<= MGR_MAX_DEVICES) devices whose
 * utilizations (0..1) are util[]. rule NONE and no changes when nothing should move. */
void mgr_decide(const mgr_view *jobs, int njobs, const double *util, int ndev, const mgr_params *p,
                mgr_decision *out);

const char *mgr_rule_name(mgr_rule r);   /* "none", "own-device", "utilization", "sd" */

#endif
