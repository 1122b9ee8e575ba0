/* Check suite for the slow-down manager (manager/, docs/manager.md):
 *
 *  - the rules on worked examples: the utilization rule (DR [5,5,0,0] with 10/20/80%
 *    of devices 0/1/2 left becomes [1,2,7,0]), the SD rule (r units to the device of
 *    least average SD, r at least 1), a device of its own for every job when there are
 *    no more jobs than devices (least busy first, largest SD first; jobs on a device of
 *    their own stay), nothing below the SD gap, and only devices a job may use;
 *  - the protocol's fields and lists;
 *  - jobs on two emulated devices (a core each) with a manager: they register, get
 *    DRs, apply them at step boundaries, and train exactly as the same DR changes made
 *    by hand (--share-schedule) do, bit for bit;
 *  - a job killed mid-run is dropped; a manager killed mid-run leaves its jobs training
 *    with their DR (a warning), their checkpoints whole;
 *  - the command line's refusals (no manager, unnamed devices, --shares auto, a device
 *    the manager does not share, a second manager), a stale socket replaced, --status
 *    and --plot;
 *  - a hostile user (issue 20): a fake manager in a folder of another user, or run by
 *    another user (uid 65534, as root), is refused by jobs; the manager refuses another
 *    user's connections, out-of-range numbers, invented devices past its table, a job
 *    that never posts; a full manager's refusal is printed, not a timeout; a second
 *    manager waits on the first's lock and removes only its own socket; --status is
 *    escaped, as text and as JSON; huge shares are refused or split without overflow. */
#include <check.h>
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "manager/proto.h"
#include "manager/rules.h"
#include "manager/server.h"
#include "nets/checkpoint.h"
#include "nets/parallel/parallel.h"
#include "tests/jsoncheck.h"
#include "tests/testnet.h"
#include "vdnn/json.h"

/* ---- the rules ---- */

static mgr_view job(double sd, const int *dr, int ndev)
{
    mgr_view v;
    memset(&v, 0, sizeof v);
    v.sd = sd;
    for (int k = 0; k < ndev; k++) {
        v.dr[k] = dr[k];
        v.allowed[k] = 1;
    }
    return v;
}

static const mgr_params PARAMS = {10, 0.2, 0.2};

static void dr_is(const int *got, const int *want, int ndev)
{
    for (int k = 0; k < ndev; k++)
        ck_assert_msg(got[k] == want[k], "device %d: %d units, expected %d (DR %d,%d,%d,%d)", k, got[k], want[k],
                      got[0], ndev > 1 ? got[1] : 0, ndev > 2 ? got[2] : 0, ndev > 3 ? got[3] : 0);
}

START_TEST(test_rule_utilization)
{
    /* the paper's case: DR [5,5,0,0], devices 0/1/2 have 10/20/80% left (device 3 50%);
     * more jobs than devices, so no one gets a device of their own */
    mgr_view jobs[5] = {job(2.0, (int[]){5, 5, 0, 0}, 4), job(1.0, (int[]){10, 0, 0, 0}, 4),
                        job(1.0, (int[]){0, 10, 0, 0}, 4), job(1.0, (int[]){0, 0, 0, 10}, 4),
                        job(1.1, (int[]){0, 0, 10, 0}, 4)};
    double util[4] = {0.9, 0.8, 0.2, 0.5};
    mgr_decision d;
    mgr_decide(jobs, 5, util, 4, &PARAMS, &d);
    ck_assert_str_eq(mgr_rule_name(d.rule), "utilization");
    ck_assert_int_eq(d.nchanges, 1);
    ck_assert_int_eq(d.change[0].job, 0);
    dr_is(d.change[0].dr, (int[]){1, 2, 7, 0}, 4);
    ck_assert_msg(fabs(d.gap - 1.0) < 1e-12, "gap %g", d.gap);
    /* the least busy device it may use: device 2 forbidden, device 3 (50%) it is */
    jobs[0].allowed[2] = 0;
    mgr_decide(jobs, 5, util, 4, &PARAMS, &d);
    ck_assert_str_eq(mgr_rule_name(d.rule), "utilization");
    /* 10:20:50 of 10 units: 1.25, 2.5, 6.25 */
    dr_is(d.change[0].dr, (int[]){1, 3, 0, 6}, 4);
    /* busiest used and least busy within the gap: the SD rule instead */
    double close[4] = {0.6, 0.6, 0.5, 0.5};
    jobs[0].allowed[2] = 1;
    mgr_decide(jobs, 5, close, 4, &PARAMS, &d);
    ck_assert_str_eq(mgr_rule_name(d.rule), "sd");
    /* a device's utilization without the job's own: A alone on device 0 (99%, a third
     * of it A's), device 1 at 66%: the others load both alike, so not by utilization */
    mgr_view three[3] = {job(3.0, (int[]){10, 0}, 2), job(1.5, (int[]){5, 5}, 2), job(1.5, (int[]){5, 5}, 2)};
    double seen[2] = {0.99, 0.66};
    three[0].own[0] = 0.33;
    mgr_decide(three, 3, seen, 2, &PARAMS, &d);
    ck_assert_str_eq(mgr_rule_name(d.rule), "sd");
    /* with its own share small, device 0 is busier for it by more than the gap */
    three[0].own[0] = 0.05;
    mgr_decide(three, 3, seen, 2, &PARAMS, &d);
    ck_assert_str_eq(mgr_rule_name(d.rule), "utilization");
}
END_TEST

START_TEST(test_rule_sd)
{
    /* three jobs on two devices, utilizations within the gap: A (SD 3) moves r units
     * from device 0 to device 1, whose average SD (1.5) is the least; the mean SD is
     * 7/3, r = round(10 * (3 - 7/3) / 3) = round(2.22) = 2 */
    mgr_view jobs[3] = {job(3.0, (int[]){10, 0}, 2), job(1.5, (int[]){5, 5}, 2), job(2.5, (int[]){10, 0}, 2)};
    double util[2] = {0.95, 0.9};
    mgr_decision d;
    mgr_decide(jobs, 3, util, 2, &PARAMS, &d);
    ck_assert_str_eq(mgr_rule_name(d.rule), "sd");
    ck_assert_int_eq(d.nchanges, 1);
    ck_assert_int_eq(d.change[0].job, 0);
    ck_assert_int_eq(d.change[0].from, 0);
    ck_assert_int_eq(d.change[0].to, 1);
    ck_assert_int_eq(d.change[0].moved, 2);
    dr_is(d.change[0].dr, (int[]){8, 2}, 2);
    /* at least one unit: 2 units, SDs 1.3/1.0/1.0, r = round(2 * 0.2 / 1.3) = 0 -> 1 */
    mgr_params two = {2, 0.2, 0.2};
    mgr_view small[3] = {job(1.3, (int[]){2, 0}, 2), job(1.0, (int[]){1, 1}, 2), job(1.0, (int[]){0, 2}, 2)};
    double even[2] = {0.5, 0.5};
    mgr_decide(small, 3, even, 2, &two, &d);
    ck_assert_str_eq(mgr_rule_name(d.rule), "sd");
    dr_is(d.change[0].dr, (int[]){1, 1}, 2);
    /* the gap at or below the threshold: nothing moves */
    mgr_view fair[3] = {job(1.1, (int[]){10, 0}, 2), job(1.0, (int[]){5, 5}, 2), job(1.05, (int[]){0, 10}, 2)};
    mgr_decide(fair, 3, even, 2, &PARAMS, &d);
    ck_assert_str_eq(mgr_rule_name(d.rule), "none");
    ck_assert_int_eq(d.nchanges, 0);
    /* a change that would undo the job's last one is held: A's last change moved 2 units
     * from device 1 to device 0 */
    jobs[0].last_move[0] = 2;
    jobs[0].last_move[1] = -2;
    mgr_decide(jobs, 3, util, 2, &PARAMS, &d);
    ck_assert_str_eq(mgr_rule_name(d.rule), "none");
    ck_assert_int_eq(d.nchanges, 0);
    ck_assert_int_eq(d.held, 0);
    /* nor when that change made its steps slower: undoing it is right */
    jobs[0].last_slower = 1;
    mgr_decide(jobs, 3, util, 2, &PARAMS, &d);
    ck_assert_int_eq(d.nchanges, 1);
    ck_assert_int_eq(d.held, -1);
    dr_is(d.change[0].dr, (int[]){8, 2}, 2);
    jobs[0].last_slower = 0;
    /* a last change in the same direction does not hold it */
    jobs[0].last_move[0] = -2;
    jobs[0].last_move[1] = 2;
    mgr_decide(jobs, 3, util, 2, &PARAMS, &d);
    ck_assert_int_eq(d.nchanges, 1);
    ck_assert_int_eq(d.held, -1);
    dr_is(d.change[0].dr, (int[]){8, 2}, 2);
    /* the utilization rule's changes are held the same way: [5,5] would become [1,9]
     * (10% and 60% left), moving units back onto device 1, which the last change left */
    mgr_view busy[3] = {job(3.0, (int[]){5, 5}, 2), job(1.5, (int[]){5, 5}, 2), job(2.5, (int[]){5, 5}, 2)};
    double lopsided[2] = {0.9, 0.4};
    busy[0].last_move[0] = 5;
    busy[0].last_move[1] = -5;
    mgr_decide(busy, 3, lopsided, 2, &PARAMS, &d);
    ck_assert_int_eq(d.nchanges, 0);
    ck_assert_int_eq(d.held, 0);
    /* a job that may use one device only cannot move */
    memset(jobs[0].last_move, 0, sizeof jobs[0].last_move);
    jobs[0].allowed[1] = 0;
    mgr_decide(jobs, 3, util, 2, &PARAMS, &d);
    ck_assert_int_eq(d.nchanges, 0);
}
END_TEST

START_TEST(test_rule_own_device)
{
    /* two jobs, two devices: the larger SD takes the least busy device, the other the rest */
    mgr_view jobs[2] = {job(2.0, (int[]){5, 5}, 2), job(1.0, (int[]){5, 5}, 2)};
    double util[2] = {0.7, 0.3};
    mgr_decision d;
    mgr_decide(jobs, 2, util, 2, &PARAMS, &d);
    ck_assert_str_eq(mgr_rule_name(d.rule), "own-device");
    ck_assert_int_eq(d.nchanges, 2);
    ck_assert_int_eq(d.change[0].job, 0);
    dr_is(d.change[0].dr, (int[]){0, 10}, 2);
    ck_assert_int_eq(d.change[1].job, 1);
    dr_is(d.change[1].dr, (int[]){10, 0}, 2);
    /* each on a device of its own already: nothing, whatever the SDs */
    mgr_view apart[2] = {job(3.0, (int[]){10, 0}, 2), job(1.0, (int[]){0, 10}, 2)};
    mgr_decide(apart, 2, util, 2, &PARAMS, &d);
    ck_assert_str_eq(mgr_rule_name(d.rule), "none");
    ck_assert_int_eq(d.nchanges, 0);
    /* both on device 0: the larger SD (job 1) moves to the least busy, job 0 stays */
    mgr_view shared[2] = {job(1.2, (int[]){10, 0}, 2), job(1.9, (int[]){10, 0}, 2)};
    double busy0[2] = {0.9, 0.1};
    mgr_decide(shared, 2, busy0, 2, &PARAMS, &d);
    ck_assert_int_eq(d.nchanges, 1);
    ck_assert_int_eq(d.change[0].job, 1);
    dr_is(d.change[0].dr, (int[]){0, 10}, 2);
    /* one job, three devices: the least busy one */
    mgr_view alone = job(1.0, (int[]){4, 3, 3}, 3);
    double three[3] = {0.5, 0.6, 0.1};
    mgr_decide(&alone, 1, three, 3, &PARAMS, &d);
    dr_is(d.change[0].dr, (int[]){0, 0, 10}, 3);
    /* a device of its own impossible (both may use device 0 only): the other rules */
    shared[0].allowed[1] = shared[1].allowed[1] = 0;
    mgr_decide(shared, 2, busy0, 2, &PARAMS, &d);
    ck_assert_int_eq(d.nchanges, 0);
}
END_TEST

START_TEST(test_proto_fields)
{
    char v[64];
    double x = 0, list[4];
    const char *msg = "post step=40 sd=1.5 dr=7,3 busy=0.5,0.25 name=a=b";
    ck_assert(mgr_field(msg, "step", v, sizeof v));
    ck_assert_str_eq(v, "40");
    ck_assert(mgr_field_double(msg, "sd", &x));
    ck_assert(x == 1.5);
    ck_assert(!mgr_field(msg, "s", v, sizeof v));        /* a key is matched whole */
    ck_assert(!mgr_field(msg, "missing", v, sizeof v));
    ck_assert(mgr_field(msg, "dr", v, sizeof v));
    ck_assert_int_eq(mgr_parse_list(v, list, 4), 2);
    ck_assert(list[0] == 7 && list[1] == 3);
    ck_assert_int_eq(mgr_parse_list("1,2,3,4,5", list, 4), -1);
    ck_assert_int_eq(mgr_parse_list("1,x", list, 4), -1);
    ck_assert_int_eq(mgr_parse_list("1,", list, 4), -1);
    ck_assert_int_eq(mgr_parse_list("", list, 4), 0);
}
END_TEST

/* Numbers a manager or a job reads are range-checked; what they print is escaped. */
START_TEST(test_proto_checks)
{
    double x = 0;
    ck_assert_int_eq(mgr_field_range("post sd=1.5", "sd", 0, 10, &x), 1);
    ck_assert_int_eq(mgr_field_range("post sd=1e300", "sd", 0, 10, &x), -1);
    ck_assert_int_eq(mgr_field_range("post sd=-1", "sd", 0, 10, &x), -1);
    ck_assert_int_eq(mgr_field_range("post sd=nan", "sd", 0, 10, &x), -1);
    ck_assert_int_eq(mgr_field_range("post sd=", "sd", 0, 10, &x), -1);
    ck_assert_int_eq(mgr_field_range("post iter_ms=1", "sd", 0, 10, &x), 0);
    int dr[4], id = 0, units = 0;
    ck_assert(mgr_parse_dr("dr 7,3", 2, 10, dr) && dr[0] == 7 && dr[1] == 3);
    ck_assert(!mgr_parse_dr("dr 20,-10", 2, 10, dr));
    ck_assert(!mgr_parse_dr("dr 2147483647,3", 2, 10, dr));
    ck_assert(!mgr_parse_dr("dr 6.5,3.5", 2, 10, dr));
    ck_assert(!mgr_parse_dr("dr 7,3,0", 2, 10, dr));
    ck_assert(mgr_parse_welcome("welcome id=3 units=10", &id, &units) && id == 3 && units == 10);
    ck_assert(!mgr_parse_welcome("welcome id=3 units=1e9", &id, &units));
    ck_assert(!mgr_parse_welcome("welcome id=-1 units=10", &id, &units));
    char why[128], buf[64];
    ck_assert(mgr_refusal("refused reason=no_room_here", why, sizeof why));
    ck_assert_str_eq(why, "no room here");
    ck_assert(!mgr_refusal("refusedX reason=a", why, sizeof why));
    /* names become JSON strings whatever their bytes: those that are not UTF-8 (a
     * surrogate's 3 bytes included) as U+FFFD each, and control characters escaped */
    json_t *name = vdnn_json_text("\xc3\xa9\xff\xed\xa0\x80.");
    ck_assert_str_eq(json_string_value(name), "\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd.");
    json_decref(name);
    char *dumped = json_dumps(name = vdnn_json_text("a\"b\\c\x1b\x7f"), JSON_ENCODE_ANY);
    ck_assert_str_eq(dumped, "\"a\\\"b\\\\c\\u001B\x7f\"");
    free(dumped);
    json_decref(name);
    /* numbers that JSON cannot hold are null; others keep the digits asked for */
    json_t *num = vdnn_json_real(NAN, 6);
    ck_assert(json_is_null(num));
    json_decref(num);
    num = vdnn_json_real(-INFINITY, 6);
    ck_assert(json_is_null(num));
    json_decref(num);
    num = vdnn_json_real(2.302585124969482, 6);
    ck_assert(json_real_value(num) == 2.30259);
    json_decref(num);
    num = vdnn_json_fixed(1234.567891, 3);
    ck_assert(json_real_value(num) == 1234.568);
    json_decref(num);
    ck_assert_str_eq(mgr_text_escape("a\x1b[31mb\rc\n", buf, sizeof buf), "a\\x1b[31mb\\x0dc\n");
}
END_TEST

/* Shares too large to add up are split without overflow (they are relative); the
 * command line refuses them naming the value. */
START_TEST(test_split_huge_shares)
{
    int out[3];
    dp_split(16, (double[]){1e308, 1e308}, NULL, 2, out);
    ck_assert_msg(out[0] == 8 && out[1] == 8, "%d,%d", out[0], out[1]);
    dp_split(16, (double[]){1e308, 1e308, 1}, NULL, 3, out);
    ck_assert_msg(out[0] + out[1] + out[2] == 16 && out[0] >= 0 && out[2] >= 0, "%d,%d,%d", out[0], out[1], out[2]);
    dp_split(16, (double[]){INFINITY, NAN, 1}, NULL, 3, out);
    ck_assert_msg(out[0] == 0 && out[1] == 0 && out[2] == 16, "%d,%d,%d", out[0], out[1], out[2]);
    dp_split(16, (double[]){3, 1}, NULL, 2, out);
    ck_assert_msg(out[0] == 12 && out[1] == 4, "%d,%d", out[0], out[1]);
}
END_TEST

/* ---- jobs and a manager ---- */

#define MGR_NET                                                                                          \
    "[net]\nbatch = 32\nchannels = 1\nheight = 16\nwidth = 16\n"                                         \
    "[train]\nepochs = 2\nlearning_rate = 0.05\nmomentum = 0.9\nseed = 11\n"                             \
    "[data]\nset = synthetic\ntrain_size = 4096\ntest_size = 64\nclasses = 4\n"                          \
    "[convolutional]\nfilters = 8\nsize = 3\npad = 1\nalgo = im2col\n[batchnorm]\n[relu]\n"               \
    "[convolutional]\nfilters = 8\nsize = 3\npad = 1\nalgo = im2col\n[relu]\n[maxpool]\nsize = 2\n"       \
    "[connected]\noutput = 32\n[relu]\n[connected]\noutput = 4\n[softmax]\n"

static const char *vdnn_bin(void)
{
    const char *bin = getenv("VDNN_BIN");
    return bin && *bin ? bin : "build/vdnn";
}

/* Two emulated devices are two cores: prints the SKIPPED line where there are fewer. */
static int have_two_cores(const char *check)
{
    cpu_set_t s;
    if (sched_getaffinity(0, sizeof s, &s) == 0 && CPU_COUNT(&s) >= 2) return 1;
    printf("SKIPPED: %s: emulated devices cpu:0 and cpu:1 are two cores, and this machine lets the test use one\n",
           check);
    return 0;
}

/* `vdnn ARGS` started in the background, its output in tn_dir/NAME.out and .err. */
static pid_t spawn(const char *name, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "exec %s %s > %s/%s.out 2> %s/%s.err", vdnn_bin(), args, tn_dir, name, tn_dir, name);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Waits up to `seconds` for pid to end; its exit status (128 + signal). Kills it and
 * fails the check past the limit. */
static int wait_for(pid_t pid, double seconds, const char *what)
{
    for (double t = 0; t < seconds; t += 0.05) {
        int w = 0;
        pid_t r = waitpid(pid, &w, WNOHANG);
        if (r == pid) return WIFEXITED(w) ? WEXITSTATUS(w) : 128 + WTERMSIG(w);
        usleep(50000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    ck_abort_msg("%s did not end within %.0f s", what, seconds);
    return -1;
}

/* Waits up to `seconds` for `text` to appear in the file; 1 when it did. */
static int wait_text(const char *path, const char *text, double seconds)
{
    for (double t = 0; t < seconds; t += 0.05) {
        char *s = tn_read(path, NULL);
        int found = s && strstr(s, text);
        free(s);
        if (found) return 1;
        usleep(50000);
    }
    return 0;
}

static char *read_tmp(const char *name)
{
    char path[600];
    char *s = tn_read(tn_path(path, sizeof path, name), NULL);
    return s ? s : strdup("");
}

static const char *mgr_cfg(void)
{
    static char path[600];
    tn_path(path, sizeof path, "mgr.cfg");
    if (!tn_exists(path)) tn_write_text(path, MGR_NET);
    return path;
}

/* The schedule a managed job's log records ({"manager": "dr"} lines): how many changes. */
static int schedule_from_log(const char *log_name, const char *sched_name)
{
    char path[600], text[8192] = "";
    json_t *lines = tj_lines(tn_path(path, sizeof path, log_name)), *line;
    size_t k = 0, i;
    int n = 0;
    json_array_foreach(lines, i, line) {
        json_t *what = json_object_get(line, "manager");
        if (!what || strcmp(json_string_value(what), "dr")) continue;
        ck_assert_int_eq(json_array_size(tj_get(line, "dr")), 2);
        k += (size_t)snprintf(text + k, sizeof text - k, "%lld %lld,%lld\n", tj_int(line, "step"),
                              tj_int(line, "dr.0"), tj_int(line, "dr.1"));
        n++;
    }
    json_decref(lines);
    tn_write_text(tn_path(path, sizeof path, sched_name), n ? text : "# none\n");
    return n;
}

/* Events of `event` in a manager's log (a JSON array of its lines); whose "reason" is
 * `reason` when given. */
static int count_records(json_t *lines, const char *event, const char *reason)
{
    size_t i;
    json_t *line;
    int n = 0;
    json_array_foreach(lines, i, line) {
        if (strcmp(tj_str(line, "event"), event)) continue;
        n += !reason || !strcmp(tj_str(line, "reason"), reason);
    }
    return n;
}

/* Three jobs of different lengths on two emulated devices with a manager that decides
 * often: each registers, gets DRs and applies them; then each, trained again without the
 * manager but with the same changes by hand, ends with the same checkpoint, bit for bit. */
START_TEST(test_managed_jobs_same_as_by_hand)
{
    if (!have_two_cores("test_managed_jobs_same_as_by_hand")) return;
    const char *cfg = mgr_cfg();
    char sock[600], log[600], args[4096];
    tn_path(sock, sizeof sock, "m.sock");
    tn_path(log, sizeof log, "manager.jsonl");
    snprintf(args, sizeof args, "manager --manager %s --log %s --until-idle --period 0.1 --sd-gap 0 --quiet", sock, log);
    pid_t mgr = spawn("manager", args);
    static const char *const initial[3] = {"1,0", "1,1", "0,1"};
    static const int epochs[3] = {2, 3, 1};
    pid_t jobs[3];
    for (int j = 0; j < 3; j++) {
        snprintf(args, sizeof args, "train %s --devices cpu:0,cpu:1 --shares %s --epochs %d --managed --manager %s "
                 "--share-every 2 --save %s/job%d.ckpt --log %s/job%d.jsonl", cfg, initial[j], epochs[j], sock,
                 tn_dir, j, tn_dir, j);
        char name[16];
        snprintf(name, sizeof name, "job%d", j);
        /* the manager first: a job refuses to start without one */
        ck_assert_msg(j || wait_text(log, "\"event\": \"start\"", 20), "the manager did not start");
        jobs[j] = spawn(name, args);
    }
    for (int j = 0; j < 3; j++) {
        int rc = wait_for(jobs[j], 300, "a managed job");
        char name[16];
        snprintf(name, sizeof name, "job%d.err", j);
        char *err = read_tmp(name);
        ck_assert_msg(rc == 0, "job %d exited %d:\n%s", j, rc, tn_tail(err, 2000));
        /* a managed job says so, and says when the manager moves its shares */
        ck_assert_msg(strstr(err, "vdnn: managed by the slow-down manager at ") && strstr(err, " as job "),
                      "job %d does not say it is managed:\n%s", j, tn_tail(err, 2000));
        snprintf(name, sizeof name, "job%d.jsonl", j);
        char *jlog = read_tmp(name);
        ck_assert_msg(!strstr(jlog, "{\"manager\": \"dr\"") || strstr(err, "the manager moved this job's shares from step"),
                      "job %d's shares moved without a word:\n%s", j, tn_tail(err, 2000));
        free(jlog);
        free(err);
    }
    ck_assert_int_eq(wait_for(mgr, 30, "the manager (--until-idle)"), 0);
    char *mlog = read_tmp("manager.jsonl");
    json_t *records = tj_lines(log);
    int registered = count_records(records, "register", NULL), left = count_records(records, "leave", "finished");
    int decisions = count_records(records, "decision", NULL);
    json_decref(records);
    ck_assert_msg(registered == 3 && left == 3, "%d registered, %d finished; the manager's log ends:\n%s", registered, left,
                  tn_tail(mlog, 2000));
    int changes = 0;
    for (int j = 0; j < 3; j++) {
        char lname[32], sname[32], ck1[600], ck2[32];
        snprintf(lname, sizeof lname, "job%d.jsonl", j);
        snprintf(sname, sizeof sname, "job%d.sched", j);
        int n = schedule_from_log(lname, sname);
        changes += n;
        if (!n) continue;   /* nothing to repeat by hand */
        snprintf(ck2, sizeof ck2, "byhand%d.ckpt", j);
        snprintf(args, sizeof args, "train %s --devices cpu:0,cpu:1 --shares %s --epochs %d --share-schedule %s/%s "
                 "--save %s/%s --quiet", cfg, initial[j], epochs[j], tn_dir, sname, tn_dir, ck2);
        tn_run r = tn_vdnn(tn_dir, "", args);
        tn_run_ok(&r, args);
        tn_run_free(&r);
        snprintf(lname, sizeof lname, "job%d.ckpt", j);
        char b[600];
        ck_assert_msg(tn_same_file(tn_path(ck1, sizeof ck1, lname), tn_path(b, sizeof b, ck2)),
                      "job %d: %d DR changes by the manager and by hand trained differently", j, n);
    }
    printf("managed jobs: %d decisions, %d DR changes applied, each repeated by hand bit for bit\n", decisions,
           changes);
    ck_assert_msg(changes >= 1 && decisions >= changes, "%d decisions, %d changes applied:\n%s", decisions, changes,
                  mlog);
    free(mlog);
}
END_TEST

/* A job killed mid-run is dropped; a manager killed mid-run leaves its job training. */
START_TEST(test_job_or_manager_dies)
{
    if (!have_two_cores("test_job_or_manager_dies")) return;
    const char *cfg = mgr_cfg();
    char sock[600], log[600], args[4096], ck[600];
    tn_path(sock, sizeof sock, "m.sock");
    tn_path(log, sizeof log, "manager.jsonl");
    tn_path(ck, sizeof ck, "b.ckpt");
    snprintf(args, sizeof args, "manager --manager %s --log %s --period 0.1", sock, log);
    pid_t mgr = spawn("manager", args);
    ck_assert_msg(wait_text(log, "\"event\": \"start\"", 20), "the manager did not start");
    /* a long job, killed once it has posted */
    snprintf(args, sizeof args, "train %s --devices cpu:0,cpu:1 --epochs 50 --managed --manager %s --share-every 2 "
             "--quiet", cfg, sock);
    pid_t a = spawn("a", args);
    ck_assert_msg(wait_text(log, "\"event\": \"post\"", 60), "the job never posted");
    kill(a, SIGKILL);
    waitpid(a, NULL, 0);
    ck_assert_msg(wait_text(log, "\"reason\": \"died", 10), "the killed job was not dropped");
    snprintf(args, sizeof args, "manager --status --manager %s", sock);
    tn_run r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    ck_assert_msg(strstr(r.out, "0 jobs"), "%s", r.out);
    tn_run_free(&r);
    /* a job whose manager is killed while it trains: it goes on, warns, and saves */
    snprintf(args, sizeof args, "train %s --devices cpu:0,cpu:1 --epochs 4 --managed --manager %s --share-every 2 "
             "--save %s", cfg, sock, ck);
    pid_t b = spawn("b", args);
    ck_assert_msg(wait_text(log, "\"event\": \"post\", \"job\": 2", 60), "the second job never posted");
    kill(mgr, SIGKILL);
    waitpid(mgr, NULL, 0);
    ck_assert_int_eq(wait_for(b, 300, "the job whose manager died"), 0);
    char *err = read_tmp("b.err");
    ck_assert_msg(strstr(err, "warning: the manager at") && strstr(err, "training goes on with DR"), "%s", err);
    free(err);
    net *n = tn_parse(MGR_NET, NULL);
    device *d = tn_device_for(n);
    ck_assert_int_eq(net_attach(n, d), VDNN_OK);
    ckpt_state st;
    ck_assert_msg(checkpoint_load(n, ck, &st, 0) == VDNN_OK, "%s", vdnn_errmsg());
    ck_assert_uint_eq(st.step, 4 * 128);
    tn_free(n, d);
    /* the socket the killed manager left is replaced by the next one */
    ck_assert(tn_exists(sock));
    snprintf(args, sizeof args, "manager --manager %s --until-idle --quiet", sock);
    pid_t again = spawn("again", args);
    snprintf(args, sizeof args, "train %s --devices cpu:0,cpu:1 --steps 6 --managed --manager %s --quiet", cfg, sock);
    int ok = 0;
    for (int tries = 0; tries < 100 && !ok; tries++) {   /* until the new manager listens */
        r = tn_vdnn(tn_dir, "", args);
        ok = r.status == 0;
        tn_run_free(&r);
        if (!ok) usleep(100000);
    }
    ck_assert_msg(ok, "no job could register with the manager that replaced a stale socket");
    ck_assert_int_eq(wait_for(again, 30, "the new manager"), 0);
}
END_TEST

static void vdnn_fails(const char *args, const char *a, const char *b)
{
    tn_run r = tn_vdnn(tn_dir, "", args);
    ck_assert_msg(r.status != 0, "`%s` exited 0", args);
    ck_assert_msg(strstr(r.err, a) && (!b || strstr(r.err, b)), "`%s`: stderr lacks '%s'%s%s:\n%s", args, a,
                  b ? " or " : "", b ? b : "", r.err);
    tn_run_free(&r);
}

START_TEST(test_cli_refusals)
{
    if (!have_two_cores("test_cli_refusals")) return;
    const char *cfg = mgr_cfg();
    char sock[600], args[4096];
    tn_path(sock, sizeof sock, "m.sock");
    snprintf(args, sizeof args, "train %s --devices cpu:0,cpu:1 --steps 2 --managed --manager %s", cfg, sock);
    vdnn_fails(args, "no vdnn manager is listening at", sock);
    snprintf(args, sizeof args, "train %s --steps 2 --managed", cfg);
    vdnn_fails(args, "--managed are for data-parallel training", NULL);
    snprintf(args, sizeof args, "train %s --devices cpu:0,cpu:1 --steps 2 --manager %s", cfg, sock);
    vdnn_fails(args, "--manager PATH goes with --managed", NULL);
    snprintf(args, sizeof args, "train %s --devices cpu:0,cpu:1 --shares auto --steps 2 --managed", cfg);
    vdnn_fails(args, "--managed: the manager sets the shares", NULL);
    snprintf(args, sizeof args, "train %s --devices cpu:0,cpu:99 --steps 2", cfg);
    vdnn_fails(args, "cpu:99: an emulated device is 1 core", NULL);
    snprintf(args, sizeof args, "manager --status --manager %s", sock);
    vdnn_fails(args, "no vdnn manager is listening at", NULL);
    snprintf(args, sizeof args, "manager --json --manager %s", sock);
    vdnn_fails(args, "--json goes with --status", NULL);
    /* a manager that shares cpu:0 only */
    char log[600];
    tn_path(log, sizeof log, "manager.jsonl");
    snprintf(args, sizeof args, "manager --manager %s --devices cpu:0 --log %s", sock, log);
    pid_t mgr = spawn("manager", args);
    ck_assert_msg(wait_text(log, "\"event\": \"start\"", 20), "the manager did not start");
    snprintf(args, sizeof args, "train %s --devices cpu,cpu --steps 2 --managed --manager %s", cfg, sock);
    vdnn_fails(args, "has no name the manager can share", "cpu:N");
    snprintf(args, sizeof args, "train %s --devices cpu:0,cpu:1 --steps 2 --managed --manager %s", cfg, sock);
    vdnn_fails(args, "refused this job", "cpu:1 is not one of the devices this manager shares");
    snprintf(args, sizeof args, "manager --manager %s", sock);
    vdnn_fails(args, "a vdnn manager is already running at", sock);
    /* --status, as a table and as JSON, with a job on cpu:0 */
    snprintf(args, sizeof args, "train %s --devices cpu:0 --epochs 50 --managed --manager %s --share-every 1 --quiet",
             cfg, sock);
    pid_t job = spawn("job", args);
    ck_assert_msg(wait_text(log, "\"event\": \"post\"", 60), "the job never posted");
    snprintf(args, sizeof args, "manager --status --manager %s", sock);
    tn_run r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    ck_assert_msg(strstr(r.out, "1 job,") && strstr(r.out, "cpu:0") && strstr(r.out, "mgr.cfg"), "%s", r.out);
    tn_run_free(&r);
    snprintf(args, sizeof args, "manager --status --json --manager %s", sock);
    r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    json_t *status = tj_parse(r.out, "--status --json");
    ck_assert_int_eq(json_array_size(tj_get(status, "jobs")), 1);
    ck_assert_int_eq(tj_int(status, "jobs.0.id"), 1);
    ck_assert_str_eq(tj_str(status, "jobs.0.devices.0"), "cpu:0");
    ck_assert_int_eq(tj_int(status, "jobs.0.dr.0"), 10);
    ck_assert_str_eq(tj_str(status, "devices.0.name"), "cpu:0");
    ck_assert_str_eq(tj_str(status, "socket"), sock);
    ck_assert(!tj_has(status, "truncated"));
    json_decref(status);
    tn_run_free(&r);
    kill(job, SIGTERM);   /* stops after its step, and says goodbye */
    ck_assert_int_eq(wait_for(job, 60, "the job"), 128 + SIGTERM);
    ck_assert_msg(wait_text(log, "\"reason\": \"stopped\"", 10), "the stopped job's goodbye was not logged");
    kill(mgr, SIGTERM);
    ck_assert_int_eq(wait_for(mgr, 10, "the manager"), 0);
    ck_assert_msg(!tn_exists(sock), "the manager left its socket");
    ck_assert_msg(wait_text(log, "\"event\": \"stop\"", 1), "no stop record");
    /* the log, a JSON object a line: start, the job's register, posts and leave, stop */
    json_t *records = tj_lines(log);
    size_t nrec = json_array_size(records);
    ck_assert_str_eq(tj_str(records, "0.event"), "start");
    ck_assert_str_eq(tj_str(records, "0.socket"), sock);
    ck_assert_str_eq(tj_str(json_array_get(records, nrec - 1), "event"), "stop");
    ck_assert_int_eq(count_records(records, "register", NULL), 1);
    ck_assert_int_eq(count_records(records, "leave", "stopped"), 1);
    ck_assert_int_ge(count_records(records, "post", NULL), 1);
    for (size_t i = 0; i < nrec; i++) {
        json_t *rec = json_array_get(records, i);
        ck_assert(tj_num(rec, "t") >= 0);
        if (strcmp(tj_str(rec, "event"), "post")) continue;
        ck_assert_str_eq(tj_str(rec, "name"), cfg);
        ck_assert(tj_num(rec, "sd") > 0 && tj_num(rec, "util.0") >= 0 && tj_int(rec, "dr.0") == 10);
    }
    json_decref(records);
    /* --plot draws the log: the data and the script (and the picture where gnuplot is) */
    char out[600];
    tn_path(out, sizeof out, "plot");
    snprintf(args, sizeof args, "manager --plot %s --out %s", log, out);
    r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    tn_run_free(&r);
    char p[700];
    snprintf(p, sizeof p, "%s/sd.dat", out);
    char *sd = tn_read(p, NULL);
    ck_assert_msg(sd && strstr(sd, "# job 1 "), "%s", sd ? sd : "(no sd.dat)");
    free(sd);
    snprintf(p, sizeof p, "%s/manager.gp", out);
    ck_assert(tn_exists(p));
    if (system("command -v gnuplot > /dev/null 2>&1") == 0) {
        snprintf(p, sizeof p, "%s/manager.png", out);
        ck_assert_msg(tn_exists(p), "gnuplot is installed but no manager.png");
    } else {
        printf("SKIPPED: the manager plot's picture: gnuplot is not installed (the script and data were checked)\n");
    }
    snprintf(args, sizeof args, "manager --plot %s/job.err --out %s", tn_dir, out);
    vdnn_fails(args, "job.err:1: not JSON", NULL);
}
END_TEST

/* --share-schedule on its own: a change at step 5 trains as stopping after step 4 and
 * resuming with the new shares; a resumed run takes the change in force; bad files are
 * refused naming the line. */
START_TEST(test_share_schedule)
{
    if (!have_two_cores("test_share_schedule")) return;
    const char *cfg = mgr_cfg();
    char args[4096], sched[600], a[600], b[600], b2[600], c[600];
    tn_path(sched, sizeof sched, "s.txt");
    tn_path(a, sizeof a, "a.ckpt");
    tn_path(b, sizeof b, "b.ckpt");
    tn_path(b2, sizeof b2, "b2.ckpt");
    tn_path(c, sizeof c, "c.ckpt");
    tn_write_text(sched, "# by hand\n5 1,1   # from step 5 on\n");
    const char *dev = "--devices cpu:0,cpu:1 --quiet";
    tn_run r;
#define RUN(...)                                                                                                       \
    do {                                                                                                               \
        snprintf(args, sizeof args, __VA_ARGS__);                                                                      \
        r = tn_vdnn(tn_dir, "", args);                                                                                \
        tn_run_ok(&r, args);                                                                                           \
        tn_run_free(&r);                                                                                               \
    } while (0)
    RUN("train %s %s --shares 3,1 --share-schedule %s --steps 8 --save %s", cfg, dev, sched, a);
    RUN("train %s %s --shares 3,1 --steps 4 --save %s", cfg, dev, b);
    RUN("train %s %s --shares 1,1 --resume %s --steps 4 --save %s", cfg, dev, b, b2);
    RUN("train %s %s --shares 3,1 --share-schedule %s --resume %s --steps 4 --save %s", cfg, dev, sched, b, c);
    char none[600];
    tn_path(none, sizeof none, "none.ckpt");
    RUN("train %s %s --shares 3,1 --steps 8 --save %s", cfg, dev, none);
#undef RUN
    ck_assert_msg(tn_same_file(a, b2), "a change at step 5 differs from stopping at 4 and resuming with it");
    ck_assert_msg(tn_same_file(c, b2), "a resumed run did not take the change in force");
    ck_assert_msg(!tn_same_file(a, none), "the schedule changed nothing");
    static const struct { const char *text, *a, *b; } bad[] = {
        {"5 1\n", "s.txt:1: 1 weights for the job's 2 devices", NULL},
        {"5 1,1,1\n", "s.txt:1: more weights than the job's 2 devices", NULL},
        {"5 1,1\n3 1,2\n", "s.txt:2: step 3 after step 5", NULL},
        {"0 1,1\n", "s.txt:1:", "a step from 1"},
        {"5 0,0\n", "s.txt:1: every weight of step 5 is 0", NULL},
        {"5 1,-1\n", "s.txt:1: weight 2 of step 5", NULL},
        {"# nothing\n", "an empty share schedule", NULL},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        tn_write_text(sched, bad[k].text);
        snprintf(args, sizeof args, "train %s %s --share-schedule %s --steps 2", cfg, dev, sched);
        vdnn_fails(args, bad[k].a, bad[k].b);
    }
    snprintf(args, sizeof args, "train %s %s --share-schedule %s/none --steps 2", cfg, dev, tn_dir);
    vdnn_fails(args, "--share-schedule", "none");
    snprintf(args, sizeof args, "train %s --share-schedule %s --steps 2", cfg, sched);
    vdnn_fails(args, "data-parallel training", NULL);
}
END_TEST

/* ---- a hostile user (issue 20) ---- */

#define OTHER_UID 65534   /* nobody */

static int as_root(const char *check)
{
    if (geteuid() == 0) return 1;
    printf("SKIPPED: %s: playing another user takes root (to run a process as uid %d)\n", check, OTHER_UID);
    return 0;
}

/* Becomes the other user (in a child); exits on failure. */
static void become_other(void)
{
    if (setgroups(0, NULL) != 0 || setgid(OTHER_UID) != 0 || setuid(OTHER_UID) != 0) _exit(90);
}

static int raw_dial(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends msg on a raw connection and returns the answer ("" when none in wait_ms). */
static const char *raw_say(int fd, const char *msg, int wait_ms)
{
    static char buf[MGR_MSG_MAX];
    buf[0] = 0;
    if (msg && send(fd, msg, strlen(msg), MSG_NOSIGNAL) < 0) wait_ms = 0;   /* a refusal may be waiting */
    if (mgr_recv(fd, buf, sizeof buf, wait_ms) <= 0) buf[0] = 0;
    return buf;
}

/* A fake manager run by the other user, listening on a socket bound at `path` (bound
 * by the parent when `fd` >= 0): welcomes every hello, for 60 s at most. */
static pid_t fake_manager(const char *path, int fd)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid) return pid;
    become_other();
    if (fd < 0) {
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
        fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0) _exit(91);
        chmod(path, 0777);
    }
    if (listen(fd, 8) != 0) _exit(92);   /* SO_PEERCRED names who called listen() */
    alarm(60);
    for (int c; (c = accept(fd, NULL, NULL)) >= 0;) {
        char msg[4096];
        if (mgr_recv(c, msg, sizeof msg, 5000) > 0 && !strncmp(msg, "hello", 5)) mgr_send(c, "welcome id=1 units=10");
        if (mgr_recv(c, msg, sizeof msg, 5000) > 0) mgr_send(c, "dr 10");
    }
    _exit(0);
}

static void wait_exists(const char *path)
{
    for (int t = 0; t < 200 && !tn_exists(path); t++) usleep(25000);
    ck_assert_msg(tn_exists(path), "%s never appeared", path);
}

/* Item 2: a job refuses a manager whose folder or process belongs to another user. */
START_TEST(test_job_refuses_other_users_manager)
{
    if (!as_root("test_job_refuses_other_users_manager")) return;
    const char *cfg = mgr_cfg();
    char dir[600], sock[700], args[4096];
    ck_assert_int_eq(chmod(tn_dir, 0711), 0);   /* the other user may pass through */
    /* the forged folder: the other user's, mode 777, as /tmp/vdnn-UID would be */
    tn_path(dir, sizeof dir, "forged");
    ck_assert_int_eq(mkdir(dir, 0777), 0);
    ck_assert_int_eq(chmod(dir, 0777), 0);
    ck_assert_int_eq(chown(dir, OTHER_UID, OTHER_UID), 0);
    snprintf(sock, sizeof sock, "%s/manager.sock", dir);
    pid_t fake = fake_manager(sock, -1);
    wait_exists(sock);
    int fd = -1;
    ck_assert(mgr_dial(sock, &fd) != VDNN_OK);
    tn_msg_has("belongs to another user", dir);
    snprintf(args, sizeof args, "train %s --devices cpu:0 --steps 2 --quiet --managed --manager %s", cfg, sock);
    vdnn_fails(args, "belongs to another user", NULL);
    snprintf(args, sizeof args, "manager --status --manager %s", sock);
    vdnn_fails(args, "belongs to another user", NULL);
    /* the same folder found by the default path, XDG_RUNTIME_DIR pointing at it */
    setenv("XDG_RUNTIME_DIR", tn_dir, 1);
    unsetenv("VDNN_MANAGER");
    char path[600];
    ck_assert(rename(dir, tn_path(path, sizeof path, "vdnn")) == 0);
    ck_assert_int_eq(mgr_socket_path(NULL, 0, path, sizeof path), VDNN_OK);
    ck_assert(mgr_dial(path, &fd) != VDNN_OK);
    tn_msg_has("belongs to another user", NULL);
    kill(fake, SIGKILL);
    waitpid(fake, NULL, 0);
    /* a folder of the user's own, but the process listening is the other user's */
    tn_path(sock, sizeof sock, "m.sock");
    int lfd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
    ck_assert_int_eq(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    fake = fake_manager(sock, lfd);
    close(lfd);
    usleep(300000);
    snprintf(args, sizeof args, "train %s --devices cpu:0 --steps 2 --quiet --managed --manager %s", cfg, sock);
    vdnn_fails(args, "runs as another user", NULL);
    kill(fake, SIGKILL);
    waitpid(fake, NULL, 0);
}
END_TEST

/* `vdnn manager` at tn_dir/m.sock with extra flags; its log in manager.jsonl. */
static pid_t start_manager(char *sock, size_t len, const char *extra)
{
    char log[600], args[2048];
    tn_path(sock, len, "m.sock");
    tn_path(log, sizeof log, "manager.jsonl");
    snprintf(args, sizeof args, "manager --manager %s --log %s --quiet %s", sock, log, extra);
    pid_t mgr = spawn("manager", args);
    ck_assert_msg(wait_text(log, "\"event\": \"start\"", 20), "the manager did not start");
    return mgr;
}

static void stop_manager(pid_t mgr)
{
    kill(mgr, SIGTERM);
    ck_assert_int_eq(wait_for(mgr, 10, "the manager"), 0);
}

/* Item 2: the manager refuses a connection from another user's process, even when the
 * socket's mode would let it in. */
START_TEST(test_manager_refuses_other_user)
{
    if (!as_root("test_manager_refuses_other_user")) return;
    char sock[600];
    ck_assert_int_eq(chmod(tn_dir, 0711), 0);
    pid_t mgr = start_manager(sock, sizeof sock, "");
    ck_assert_int_eq(chmod(sock, 0777), 0);
    int pipefd[2];
    ck_assert_int_eq(pipe(pipefd), 0);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (!child) {
        become_other();
        int fd = raw_dial(sock);
        const char *got = fd < 0 ? "(no connection)" : raw_say(fd, "hello pid=1 name=x devices=cpu:0 keys=cpu:0 dr=1", 5000);
        if (write(pipefd[1], got, strlen(got) + 1) < 0) _exit(93);
        _exit(0);
    }
    close(pipefd[1]);
    char got[1024] = "";
    ck_assert(read(pipefd[0], got, sizeof got - 1) > 0);
    close(pipefd[0]);
    waitpid(child, NULL, 0);
    ck_assert_msg(!strncmp(got, "refused", 7) && strstr(got, "own_user"), "the other user's hello got: %s", got);
    char *log = read_tmp("manager.jsonl");
    ck_assert_msg(!strstr(log, "\"register\""), "%s", log);
    free(log);
    stop_manager(mgr);
}
END_TEST

static char *devices_hello(int n, const char *prefix)
{
    static char msg[4096];
    size_t k = (size_t)snprintf(msg, sizeof msg, "hello pid=%d name=greedy devices=", (int)getpid());
    for (int d = 0; d < n; d++) k += (size_t)snprintf(msg + k, sizeof msg - k, "%s%s%d", d ? "," : "", prefix, d);
    k += (size_t)snprintf(msg + k, sizeof msg - k, " keys=");
    for (int d = 0; d < n; d++) k += (size_t)snprintf(msg + k, sizeof msg - k, "%sk%s%d", d ? "," : "", prefix, d);
    k += (size_t)snprintf(msg + k, sizeof msg - k, " dr=");
    for (int d = 0; d < n; d++) k += (size_t)snprintf(msg + k, sizeof msg - k, "%s1", d ? "," : "");
    return msg;
}

#define HELLO_CPU0 "hello pid=1 name=real devices=cpu:0 keys=cpu:0 dr=1"

/* Item 4: invented devices do not fill the table for good (they go with the job that
 * named them), and a job that never posts is dropped after --stale. */
START_TEST(test_device_table_and_silent_job)
{
    char sock[600];
    pid_t mgr = start_manager(sock, sizeof sock, "--stale 1");
    int a = raw_dial(sock), b = raw_dial(sock);
    ck_assert(a >= 0 && b >= 0);
    ck_assert_str_eq(raw_say(a, devices_hello(MGR_MAX_DEVICES, "fake"), 5000), "welcome id=1 units=10");
    const char *got = raw_say(b, HELLO_CPU0, 5000);
    ck_assert_msg(strstr(got, "refused") && strstr(got, "one_too_many"), "%s", got);
    close(b);
    /* a says nothing more: dropped after --stale, with a refusal that says why */
    got = raw_say(a, NULL, 5000);
    ck_assert_msg(strstr(got, "refused") && strstr(got, "--stale"), "the silent job got: '%s'", got);
    close(a);
    b = raw_dial(sock);
    ck_assert_str_eq(raw_say(b, HELLO_CPU0, 5000), "welcome id=2 units=10");
    close(b);
    /* a job that leaves frees the devices it named too */
    a = raw_dial(sock);
    ck_assert_str_eq(raw_say(a, devices_hello(MGR_MAX_DEVICES - 1, "other"), 5000), "welcome id=3 units=10");
    ck_assert_int_eq(send(a, "bye reason=finished", 19, MSG_NOSIGNAL), 19);
    close(a);
    usleep(300000);
    b = raw_dial(sock);
    ck_assert_str_eq(raw_say(b, devices_hello(MGR_MAX_DEVICES, "again"), 5000), "welcome id=4 units=10");
    close(b);
    stop_manager(mgr);
}
END_TEST

/* Item 4: numbers out of range are refused, with the reason, not fed to the rules. */
START_TEST(test_post_numbers_refused)
{
    char sock[600];
    pid_t mgr = start_manager(sock, sizeof sock, "");
    static const char *posts[] = {
        "post step=5 steps=10 dr=20,-10",
        "post step=5 steps=10 dr=2147483647,3",
        "post step=1e300 steps=10",
        "post sd=inf",
        "post busy=1,2,3 window_s=1",
    };
    for (size_t k = 0; k < sizeof posts / sizeof *posts; k++) {
        int fd = raw_dial(sock);
        ck_assert_str_ne(raw_say(fd, "hello pid=1 name=n devices=cpu:0,cpu:1 keys=cpu:0,cpu:1 dr=1,1", 5000), "");
        const char *got = raw_say(fd, posts[k], 3000);
        ck_assert_msg(!strncmp(got, "refused", 7), "`%s` got '%s'", posts[k], got);
        close(fd);
    }
    int fd = raw_dial(sock);
    const char *got = raw_say(fd, "hello pid=1 name=n devices=cpu:0,cpu:1 keys=cpu:0,cpu:1 dr=1e308,1e308", 5000);
    ck_assert_msg(strstr(got, "refused") && strstr(got, "1e+308"), "%s", got);
    close(fd);
    char args[1024];
    snprintf(args, sizeof args, "manager --status --manager %s", sock);
    tn_run r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    ck_assert_msg(strstr(r.out, "0 jobs") && !strstr(r.out, "-10"), "%s", r.out);
    tn_run_free(&r);
    stop_manager(mgr);
}
END_TEST

/* Item 4: with no room for another connection, --status and a job print the refusal
 * (and fail), not a timeout or the raw message. */
START_TEST(test_full_manager_refusal_printed)
{
    const char *cfg = mgr_cfg();
    char sock[600], args[2048];
    pid_t mgr = start_manager(sock, sizeof sock, "");
    int idle[300];
    for (int k = 0; k < 300; k++) idle[k] = raw_dial(sock);
    usleep(500000);
    snprintf(args, sizeof args, "manager --status --manager %s", sock);
    vdnn_fails(args, "refused", "no room for more connections");
    snprintf(args, sizeof args, "train %s --devices cpu:0 --steps 2 --quiet --managed --manager %s", cfg, sock);
    vdnn_fails(args, "refused this job", "no room for more connections");
    for (int k = 0; k < 300; k++)
        if (idle[k] >= 0) close(idle[k]);
    stop_manager(mgr);
}
END_TEST

/* Item 4: names and devices are escaped in --status, as text and as JSON. */
START_TEST(test_status_escaped)
{
    char sock[600], args[1024];
    pid_t mgr = start_manager(sock, sizeof sock, "");
    int a = raw_dial(sock), b = raw_dial(sock);
    ck_assert_str_eq(raw_say(a, "hello pid=7 name=a\"b\\c\x1b[31m\xff devices=cpu:0 keys=cpu:0 dr=1", 5000),
                     "welcome id=1 units=10");
    ck_assert_str_eq(raw_say(b, "hello pid=8 name=n devices=x\"y\\\x1b keys=kx dr=1", 5000), "welcome id=2 units=10");
    snprintf(args, sizeof args, "manager --status --manager %s", sock);
    tn_run r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    ck_assert_msg(!strchr(r.out, '\x1b') && strstr(r.out, "a\"b\\c"), "%s", r.out);
    tn_run_free(&r);
    snprintf(args, sizeof args, "manager --status --json --manager %s", sock);
    r = tn_vdnn(tn_dir, "", args);
    tn_run_ok(&r, args);
    json_t *status = tj_parse(r.out, "--status --json");
    ck_assert_str_eq(tj_str(status, "jobs.0.name"), "a\"b\\c?[31m\xef\xbf\xbd");
    ck_assert_str_eq(tj_str(status, "jobs.1.devices.0"), "x\"y\\?");
    json_decref(status);
    tn_run_free(&r);
    if (system("command -v jq > /dev/null 2>&1") == 0) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "%s manager --status --json --manager %s | jq -e .jobs[1].devices[0]", vdnn_bin(), sock);
        r = tn_shell(tn_dir, cmd);
        ck_assert_msg(r.status == 0 && strstr(r.out, "x\\\"y"), "jq: %s %s", r.out, r.err);
        tn_run_free(&r);
    } else {
        printf("SKIPPED: --status --json checked by jq: jq is not installed (the escapes were checked)\n");
    }
    close(a);
    close(b);
    stop_manager(mgr);
}
END_TEST

/* A status too long for one message (MGR_MSG_MAX) is still one JSON object: it leaves
 * out the jobs that do not fit and says so. The manager runs in this process, as the
 * fuzz target drives it; its log, names escaped, parses line by line. */
START_TEST(test_status_json_truncated)
{
    char logpath[600], name[256], hello[512];
    tn_path(logpath, sizeof logpath, "manager.jsonl");
    FILE *log = fopen(logpath, "w");
    ck_assert_ptr_nonnull(log);
    mgr_opts o = {.socket = "in-process.sock", .log = log, .rules = {10, 0.2, 0.2}, .period_s = 1, .stale_s = 1e9};
    mgr_server *sv = NULL;
    ck_assert_int_eq(mgr_server_new(&o, &sv), VDNN_OK);
    /* 255 bytes that escape to 2 each: about 800 bytes of JSON a job */
    for (int k = 0; k < 255; k++) name[k] = k % 2 ? '"' : '\\';
    name[255] = 0;
    snprintf(hello, sizeof hello, "hello pid=1 name=%s devices=cpu:0 keys=cpu:0 dr=1", name);
    enum { JOBS = 120 };
    int peer[JOBS + 1];
    for (int k = 0; k <= JOBS; k++) {
        int fds[2];
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
        int slot = mgr_server_add(sv, fds[0]);
        ck_assert_int_ge(slot, 0);
        peer[k] = fds[1];
        mgr_server_message(sv, slot, k < JOBS ? hello : "status json");
    }
    static char answer[MGR_MSG_MAX];
    ck_assert_int_gt(mgr_recv(peer[JOBS], answer, sizeof answer, 1000), 0);
    ck_assert_uint_lt(strlen(answer), MGR_MSG_MAX);
    json_t *status = tj_parse(answer, "a status of 120 jobs");
    ck_assert(json_is_true(tj_get(status, "truncated")));
    ck_assert_int_eq(tj_int(status, "jobs_total"), JOBS);
    size_t shown = json_array_size(tj_get(status, "jobs"));
    ck_assert_msg(shown > 40 && shown < JOBS, "%zu jobs shown", shown);
    ck_assert_str_eq(tj_str(status, "jobs.0.name"), name);
    ck_assert_int_eq(tj_int(status, "jobs.0.id"), 1);
    json_decref(status);
    mgr_server_free(sv);
    for (int k = 0; k <= JOBS; k++) close(peer[k]);
    ck_assert_int_eq(fclose(log), 0);
    json_t *records = tj_lines(logpath);
    ck_assert_int_eq(count_records(records, "register", NULL), JOBS);
    ck_assert_str_eq(tj_str(records, "0.name"), name);
    json_decref(records);
}
END_TEST

/* A log for --plot: jobs named with escapes, as a manager writes them (the JSON line
 * of each record below), and one more line. */
#define PLOT_JOB "\"job\": 1, \"pid\": 7, \"name\": \"a\\\"b\\\\c\\u001b[31m\\u00e9\""
#define PLOT_LOG                                                                                                    \
    "{\"t\": 0.0, \"event\": \"start\", \"socket\": \"/tmp/m\\u0001.sock\", \"units\": 10}\n"                     \
    "{\"t\": 0.5, \"event\": \"register\", " PLOT_JOB ", \"devices\": [\"cpu:0\"], \"dr\": [10]}\n"              \
    "{\"t\": 1.0, \"event\": \"post\", " PLOT_JOB ", \"sd\": 1.5, \"dr\": [10], \"util\": [0.25, 0]}\n"          \
    "\n"                                                                                                           \
    "{\"t\": 2.0, \"event\": \"post\", " PLOT_JOB ", \"sd\": 1.25, \"dr\": [10], \"util\": [0.5, 1]}\n"          \
    "{\"t\": 2.5, \"event\": \"decision\", " PLOT_JOB ", \"rule\": \"sd\", \"sd\": 1.25}\n"

/* `vdnn manager --plot` on a log whose text is `text` (in tn_dir/plot.jsonl). */
static tn_run plot(const char *text)
{
    char log[600], out[600], args[2048];
    tn_write_text(tn_path(log, sizeof log, "plot.jsonl"), text);
    tn_path(out, sizeof out, "plot");
    mkdir(out, 0700);
    snprintf(args, sizeof args, "manager --plot %s --out %s", log, out);
    return tn_vdnn(tn_dir, "", args);
}

/* --plot reads each line as JSON: escaped names come back as they were (control
 * characters as '?'), a line that is not a record is an error naming the file and the
 * line, and a last line cut short (a manager still writing) is left out with a notice. */
START_TEST(test_plot_log)
{
    char path[700];
    tn_run r = plot(PLOT_LOG "{\"t\": 3.0, \"event\": \"stop\", \"why\": \"signal\"}\n");
    tn_run_ok(&r, "manager --plot");
    tn_run_free(&r);
    char *sd = tn_read(tn_path(path, sizeof path, "plot/sd.dat"), NULL), *util, *dec;
    ck_assert_msg(sd && strstr(sd, "# job 1 a\"b\\c?[31m\xc3\xa9\n1.0000 1.5\n2.0000 1.25\n"), "sd.dat:\n%s", sd);
    util = tn_read(tn_path(path, sizeof path, "plot/util.dat"), NULL);
    ck_assert_msg(util && !strcmp(util, "1.0000 25.0000 0.0000\n2.0000 50.0000 100.0000\n"), "util.dat:\n%s", util);
    dec = tn_read(tn_path(path, sizeof path, "plot/decisions.dat"), NULL);
    ck_assert_msg(dec && !strcmp(dec, "2.5000 1.25\n"), "decisions.dat:\n%s", dec);
    free(sd);
    free(util);
    free(dec);
    /* a log without posts has nothing to plot */
    r = plot("{\"t\": 0.0, \"event\": \"start\"}\n{\"t\": 1.0, \"event\": \"stop\"}\n");
    ck_assert_msg(r.status != 0 && strstr(r.err, "no posts of any job in this log"), "stderr:\n%s", r.err);
    tn_run_free(&r);
    /* a last line with no line end that does not parse: left out, and said */
    r = plot(PLOT_LOG "{\"t\": 3.0, \"event\": \"po");
    tn_run_ok(&r, "manager --plot (a log being written)");
    ck_assert_msg(strstr(r.err, "plot.jsonl:7: the last line is cut short"), "stderr:\n%s", r.err);
    tn_run_free(&r);
    static const struct { const char *line, *error; } bad[] = {
        {"{\"t\": 3.0, \"event\": \"post\", \"job\": 1, \"sd\": }\n", "plot.jsonl:7: not JSON"},
        {"[1, 2]\n", "plot.jsonl:7: not a JSON object"},
        {"{\"t\": 3.0, \"event\": \"post\", " PLOT_JOB ", \"util\": [1]}\n", "plot.jsonl:7: a post has \"job\""},
        {"{\"t\": 3.0, \"event\": \"post\", " PLOT_JOB ", \"sd\": 1, \"util\": [\"x\"]}\n", "plot.jsonl:7: a post's"},
        {"{\"event\": \"stop\"}\n", "plot.jsonl:7: a record of a manager's log has \"t\""},
        {"{\"t\": 3.0, \"event\": \"decision\", \"sd\": null}\n", "plot.jsonl:7: a decision has \"sd\""},
        {"{\"t\": 3.0, \"event\": \"post\", \"job\": 1}", "plot.jsonl:7: a post has"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char text[2048];
        snprintf(text, sizeof text, "%s%s{\"t\": 4.0, \"event\": \"stop\"}\n", PLOT_LOG, bad[k].line);
        if (k == sizeof bad / sizeof *bad - 1) snprintf(text, sizeof text, "%s%s", PLOT_LOG, bad[k].line);
        r = plot(text);
        ck_assert_msg(r.status != 0 && strstr(r.err, bad[k].error), "line %zu: exit %d, stderr:\n%s", k, r.status,
                      r.err);
        tn_run_free(&r);
    }
}
END_TEST

/* Item 4: starting over a stale socket is race-free: a manager that finds the lock
 * held refuses, and one whose socket file was replaced leaves the new one alone. */
START_TEST(test_stale_socket_takeover)
{
    char sock[600], lock[700], args[2048];
    tn_path(sock, sizeof sock, "m.sock");
    snprintf(lock, sizeof lock, "%s.lock", sock);
    int stale = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", sock);
    ck_assert_int_eq(bind(stale, (struct sockaddr *)&a, sizeof a), 0);
    close(stale);   /* a socket file nobody listens on: a manager died */
    int held = open(lock, O_RDWR | O_CREAT, 0600);
    ck_assert(held >= 0 && flock(held, LOCK_EX) == 0);   /* another manager is starting */
    snprintf(args, sizeof args, "manager --manager %s --quiet", sock);
    pid_t m = spawn("second", args);
    ck_assert_msg(wait_for(m, 10, "a manager that found the lock held") != 0, "it started anyway");
    char *err = read_tmp("second.err");
    ck_assert_msg(strstr(err, "already running"), "%s", err);
    free(err);
    close(held);
    pid_t mgr = start_manager(sock, sizeof sock, "");
    /* its socket replaced by another's: stopping removes only its own */
    ck_assert_int_eq(unlink(sock), 0);
    int other = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    ck_assert_int_eq(bind(other, (struct sockaddr *)&a, sizeof a), 0);
    stop_manager(mgr);
    ck_assert_msg(tn_exists(sock), "the manager removed a socket it did not make");
    close(other);
}
END_TEST

/* dp_split's huge shares from the command line: refused naming the value. */
START_TEST(test_huge_shares_refused)
{
    const char *cfg = mgr_cfg();
    char args[2048], sched[600];
    snprintf(args, sizeof args, "train %s --devices cpu,cpu --steps 1 --shares 1e308,1e308", cfg);
    vdnn_fails(args, "'1e308,1e308' is not a share", "from 0 to 1e9");
    tn_write_text(tn_path(sched, sizeof sched, "s.txt"), "2 1e308,1e308\n");
    snprintf(args, sizeof args, "train %s --devices cpu,cpu --steps 1 --share-schedule %s", cfg, sched);
    vdnn_fails(args, "s.txt:1: weight 1 of step 2 (1e308)", NULL);
}
END_TEST

/* The folder checks, called directly. */
START_TEST(test_socket_folder_checks)
{
    char dir[600], link[600], sock[700];
    tn_path(dir, sizeof dir, "d");
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(sock, sizeof sock, "%s/m.sock", dir);
    ck_assert_int_eq(mgr_check_dir(sock), VDNN_OK);
    ck_assert_int_eq(chmod(dir, 0770), 0);
    ck_assert(mgr_check_dir(sock) != VDNN_OK);
    tn_msg_has("may be written by others", dir);
    ck_assert_int_eq(chmod(dir, 0700), 0);
    tn_path(link, sizeof link, "l");
    ck_assert_int_eq(symlink(dir, link), 0);
    snprintf(sock, sizeof sock, "%s/m.sock", link);
    ck_assert(mgr_check_dir(sock) != VDNN_OK);
    tn_msg_has("symbolic link", NULL);
}
END_TEST

static Suite *manager_suite(void)
{
    Suite *s = suite_create("manager");
    TCase *rules = tcase_create("rules");
    tcase_add_test(rules, test_rule_utilization);
    tcase_add_test(rules, test_rule_sd);
    tcase_add_test(rules, test_rule_own_device);
    tcase_add_test(rules, test_proto_fields);
    tcase_add_test(rules, test_proto_checks);
    tcase_add_test(rules, test_split_huge_shares);
    suite_add_tcase(s, rules);
    TCase *jobs = tcase_create("jobs");
    tcase_set_timeout(jobs, 900);
    tcase_add_checked_fixture(jobs, tn_dir_setup, tn_dir_teardown);
    tcase_add_test(jobs, test_managed_jobs_same_as_by_hand);
    tcase_add_test(jobs, test_job_or_manager_dies);
    tcase_add_test(jobs, test_cli_refusals);
    tcase_add_test(jobs, test_share_schedule);
    suite_add_tcase(s, jobs);
    TCase *hostile = tcase_create("hostile");
    tcase_set_timeout(hostile, 120);
    tcase_add_checked_fixture(hostile, tn_dir_setup, tn_dir_teardown);
    tcase_add_test(hostile, test_socket_folder_checks);
    tcase_add_test(hostile, test_job_refuses_other_users_manager);
    tcase_add_test(hostile, test_manager_refuses_other_user);
    tcase_add_test(hostile, test_device_table_and_silent_job);
    tcase_add_test(hostile, test_post_numbers_refused);
    tcase_add_test(hostile, test_full_manager_refusal_printed);
    tcase_add_test(hostile, test_status_escaped);
    tcase_add_test(hostile, test_status_json_truncated);
    tcase_add_test(hostile, test_plot_log);
    tcase_add_test(hostile, test_stale_socket_takeover);
    tcase_add_test(hostile, test_huge_shares_refused);
    suite_add_tcase(s, hostile);
    return s;
}

int main(void) { return tn_run_suite(manager_suite()); }
